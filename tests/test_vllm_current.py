"""vLLM's current release (data/releases.toml) and the defaults that changed after 0.24.0, read in the PyPI
wheels vllm 0.24.0 to 0.33.0 (https://pypi.org/project/vllm/#history): `vllm` answers as the newest audited
release, and `vllm@0.24.0` as cardfit answered for 0.24.0 before the audit, but for two facts of that
release itself the wheels correct (the 0.92 utilization default and the CUDA-graph profiling from 0.20.0;
no graph pool in the budget on ROCm before 0.26.0)."""

from __future__ import annotations

import pytest

from cardfit.catalog.gpus import default_gpus
from cardfit.catalog.releases import current_release
from cardfit.catalog.runtimes import default_runtimes
from cardfit.services.inputs import PlanInput
from cardfit.services.plan import build_context, engine_defaults, memory_for

CASES = [("gpt-oss-120b", "H100 SXM"), ("gpt-oss-120b", "B200"), ("gpt-oss-120b", "MI300X"),
         ("llama-3.1-8b", "B200"), ("llama-3.1-8b", "MI300X")]


def _memory(runtime: str, model: str, gpu: str) -> tuple[object, ...]:
    ctx = build_context(PlanInput(model=model, runtime=runtime, context=8192))
    card = default_gpus().get(gpu)
    m = memory_for(ctx, 8192, card)
    return (engine_defaults(ctx, card), m.weights_bytes, m.overhead_bytes, m.activation_bytes,
            ctx.runtime.gpu_memory_utilization)


def test_the_current_vllm_is_the_newest_audited_release():
    assert current_release("vllm") == "0.33.0"


@pytest.mark.parametrize(("model", "gpu"), CASES)
def test_vllm_and_its_current_release_answer_alike(model, gpu):
    assert _memory("vllm", model, gpu) == _memory("vllm@0.33.0", model, gpu)


def test_vllm_and_its_current_release_plan_alike(run_json):
    args = ("plan", "gpt-oss-120b", "--gpu", "B200", "--context", "8192")
    assert run_json(*args, "--runtime", "vllm") == run_json(*args, "--runtime", "vllm@0.33.0")


# cardfit's answers for vllm (then 0.24.0) before the audit, at commit 10ac9b6: (batched tokens, sequences),
# weights, overhead and activation bytes, utilization 0.9
BEFORE = {
    ("gpt-oss-120b", "H100 SXM"): ((8192, 1024), 68986497509, 660351222, 5812781056),
    ("gpt-oss-120b", "B200"): ((8192, 1024), 73583585765, 660351222, 5812781056),
    ("gpt-oss-120b", "MI300X"): ((8192, 1024), 67928353253, 660351222, 5812781056),
    ("llama-3.1-8b", "B200"): ((8192, 1024), 16060522496, 660351222, 3744464896),
    ("llama-3.1-8b", "MI300X"): ((8192, 1024), 16060522496, 660351222, 3744464896),
}
# vLLM's non-torch memory without the graph pool (data/runtimes.toml non_torch_bytes): on ROCm before 0.26.0
# the pool is captured after the KV cache is sized (vllm/v1/worker/gpu_worker.py determine_available_memory
# of the wheel 0.24.0: "if current_platform.is_cuda() and ...")
NON_TORCH = 273804165


@pytest.mark.parametrize(("model", "gpu"), CASES)
def test_vllm_0_24_answers_as_before_but_for_its_corrected_defaults(model, gpu):
    tokens, weights, overhead, activation, util = _memory("vllm@0.24.0", model, gpu)
    before = BEFORE[(model, gpu)]
    rocm = default_gpus().get(gpu).stack == "rocm"
    assert (tokens, weights, activation) == (before[0], before[1], before[3])
    assert overhead == (NON_TORCH if rocm else before[2])
    assert util == 0.92  # vllm/config/cache.py 'Field(default=0.92' from the wheel 0.20.0 (0.9 in 0.19.1)
    assert default_runtimes().get("vllm@0.19.1").gpu_memory_utilization == 0.9


@pytest.mark.parametrize(("runtime", "gpu", "graph_tokens"), [
    # vllm/config/vllm.py _set_cudagraph_sizes: from the wheel 0.28.0 "1024 if
    # current_platform.is_device_capability_family(100) else 512" (line 1938)
    ("vllm", "B200", 1024), ("vllm@0.28.0", "B200", 1024), ("vllm@0.27.1", "B200", 512),
    ("vllm", "H100 SXM", 512), ("vllm", "RTX 5090", 512), ("vllm@0.7.3", "B200", 0),
])
def test_prompt_steps_replay_graphs_up_to_1024_tokens_on_sm100_from_0_28(runtime, gpu, graph_tokens):
    from cardfit.core.speed import machine_for

    card = default_gpus().get(gpu)
    mc = machine_for(default_runtimes().get(runtime), card, 1, card.tflops("bf16"), precision="bf16")
    assert mc.prefill_graph_tokens == graph_tokens


def test_sm100_is_the_hbm_blackwell_parts():
    gpus = default_gpus()
    assert gpus.get("B200").sm100 and not gpus.get("RTX 5090").sm100 and not gpus.get("H100 SXM").sm100

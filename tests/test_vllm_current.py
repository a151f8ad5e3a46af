"""vLLM's current release (data/releases.toml) and the defaults that changed after 0.24.0, read in the PyPI
wheels vllm 0.24.0 to 0.34.0 (https://pypi.org/project/vllm/#history): `vllm` answers as the newest audited
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
    assert current_release("vllm") == "0.34.0"


@pytest.mark.parametrize(("model", "gpu"), CASES)
def test_vllm_and_its_current_release_answer_alike(model, gpu):
    assert _memory("vllm", model, gpu) == _memory("vllm@0.34.0", model, gpu)


def test_vllm_and_its_current_release_plan_alike(run_json):
    args = ("plan", "gpt-oss-120b", "--gpu", "B200", "--context", "8192")
    assert run_json(*args, "--runtime", "vllm") == run_json(*args, "--runtime", "vllm@0.34.0")


# cardfit's answers for vllm (then 0.33.0) at commit 508cf17, before 0.34.0 was modelled: (batched tokens,
# sequences), weights, overhead and activation bytes, utilization, the budget per card; vllm@0.33.0 answers so
BEFORE_034 = {
    ("gpt-oss-120b", "H100 SXM"): ((8192, 1024), 65403316709, 660351222, 5812781056, 0.92, 78224737645),
    ("gpt-oss-120b", "B200"): ((16384, 1024), 70695807461, 660351222, 5859966976, 0.92, 176430171501),
    ("gpt-oss-120b", "MI300X"): ((16384, 1024), 67928353253, 660351222, 5859966976, 0.92, 188902647477),
    ("llama-3.1-8b", "B200"): ((16384, 1024), 16060522496, 660351222, 3811573760, 0.92, 176430171501),
    ("llama-3.1-8b", "MI300X"): ((16384, 1024), 16060522496, 660351222, 3811573760, 0.92, 188902647477),
    ("llama-3.1-8b", "RTX 4090"): ((2048, 256), 16060522496, 660351222, 936116224, 0.92, 23242235655),
    ("llama-3.1-8b", "H100 SXM"): ((8192, 1024), 16060522496, 660351222, 3744464896, 0.92, 78224737645),
}


def _memory_budget(runtime: str, model: str, gpu: str) -> tuple[object, ...]:
    """_memory and the budget per card the estimate may fill (budget_for: 0.34's margin by its own peak)."""
    ctx = build_context(PlanInput(model=model, runtime=runtime, context=8192))
    card = default_gpus().get(gpu)
    held = ctx.engine.budget_for(memory_for(ctx, 8192, card), card, ctx.engine.budget_per_card(card))
    return (*_memory(runtime, model, gpu), held)


@pytest.mark.parametrize(("model", "gpu"), sorted(BEFORE_034))
def test_vllm_0_33_answers_as_before_0_34_was_modelled(model, gpu):
    assert _memory_budget("vllm@0.33.0", model, gpu) == BEFORE_034[(model, gpu)]


GIB = 2**30


@pytest.mark.parametrize(("model", "gpu"), sorted(BEFORE_034))
def test_vllm_0_34_sizes_the_kv_cache_from_measured_memory(model, gpu):
    """vllm/v1/worker/extensible_kv_cache.py measure_kv_cache_bytes (PyPI wheel vllm 0.34.0, lines 592-618):
    KV = free at startup (the CUDA total less the CUDA context) - what the engine holds (weights, non-torch,
    graphs) - the transient peak (the profiled activations + the CUDA-graph estimate: gpu_worker.py lines
    771-773, 946) - max(1 GiB, 3 GiB on ROCm, 0.75 x that peak) (lines 64-65); utilization 1.0."""
    defaults, weights, overhead, activation, util, budget = _memory_budget("vllm@0.34.0", model, gpu)
    before = BEFORE_034[(model, gpu)]
    rt = default_runtimes().get("vllm@0.34.0")
    card = default_gpus().get(gpu)
    total = card.usable_bytes - rt.cuda_total_shortfall_bytes
    peak = before[3] + rt.cuda_graph_bytes  # the 0.33 profile peak, plus the graph estimate
    floor = (3 if card.stack == "rocm" else 1) * GIB
    assert (defaults, weights, overhead, util) == (before[0], before[1], before[2], 1.0)
    exact = total - rt.context_bytes - peak - max(floor, int(0.75 * peak))  # room for weights, graphs, KV
    assert activation == peak and budget - activation == exact  # on ROCm too: its own floor, no more


def test_vllm_0_34_gives_an_h100_more_kv_than_0_33():
    """Llama-3.1-8B at 8K on one H100 SXM: 0.92 x 79.2 GiB less the profile peak (0.33.0) against 79.2 GiB
    less the context, the peak with the graph estimate and its 0.75 margin (0.34.0): about 2.5 GiB more."""
    old = _memory_budget("vllm@0.33.0", "llama-3.1-8b", "H100 SXM")
    new = _memory_budget("vllm@0.34.0", "llama-3.1-8b", "H100 SXM")
    room_old = old[5] - old[1] - old[2] - old[3]
    room_new = new[5] - new[1] - new[2] - new[3]
    assert 2.0 * GIB < room_new - room_old < 3.0 * GIB


def test_a_stated_utilization_caps_the_measured_budget(run_json):
    """--gpu-memory-utilization 0.8 on 0.34.0: the requested arm binds (min(requested - non-KV, headroom -
    margin) - peak), so no margin is kept beside the transient peak; at 1.0 the measured arm binds and the
    margin is max(1 GiB, 0.75 x the peak) (extensible_kv_cache.py lines 64-65, 592-618)."""
    args = ("plan", "llama-3.1-8b", "--gpu", "H100 SXM", "--context", "8192", "--gpu-memory-utilization")
    r = run_json(*args, "0.8", "--runtime", "vllm")
    g, peak = r["gpus"][0], r["memory"]["activation_bytes"]
    rt = default_runtimes().get("vllm@0.34.0")
    total = default_gpus().get("H100 SXM").usable_bytes - rt.cuda_total_shortfall_bytes
    assert g["budget_bytes"] == int(total * 0.8) and g["free_bytes"] == g["budget_bytes"] - g["need_bytes"]
    r = run_json(*args, "1.0", "--runtime", "vllm")
    assert r["memory"]["activation_bytes"] == peak > 4 * GIB / 3  # the same peak; its margin above the floor
    assert r["gpus"][0]["budget_bytes"] == total - rt.context_bytes - max(GIB, int(0.75 * peak))


def test_nvls_buffers_come_out_of_the_measured_budget():
    """V1 starts NCCL before its memory snapshot: an 8-GPU NVSwitch set's NVLink SHARP buffers are not free
    at startup, so the measured KV cache (0.34.0) never has them (data/runtimes.toml nvls_bytes_per_rank)."""
    from cardfit.runtimes import adapter

    card = default_gpus().get("H100 SXM")
    engine = adapter(default_runtimes().get("vllm@0.34.0"))
    rt = engine.profile
    assert engine.budget_per_card(card, None, 8) == \
        engine.budget_per_card(card, None, 1) - rt.nccl_communicators_v0 * 8 * rt.nvls_bytes_per_rank


def test_vllm_0_34_blocks_are_64_tokens():
    """vllm/config/cache.py DEFAULT_BLOCK_SIZE = 64 in the PyPI wheel vllm 0.34.0 (16 in 0.33.0)."""
    now, before = default_runtimes().get("vllm"), default_runtimes().get("vllm@0.33.0")
    assert (now.kv_block_tokens, now.ctx_pad) == (64, 64)
    assert (before.kv_block_tokens, before.ctx_pad) == (16, 16)


def test_the_launch_line_leaves_the_utilization_to_vllm_0_34(run_json):
    """0.34.0's default utilization is None, resolved to 1.0 with the extensible KV cache: the launch line
    states none (0.33.0's 0.92 it wrote out)."""
    args = ("deploy", "llama-3.1-8b", "--gpu", "H100 SXM", "--users", "16", "--runtime")
    assert "--gpu-memory-utilization" not in run_json(*args, "vllm")["best"]["command"]
    assert "--gpu-memory-utilization 0.92" in run_json(*args, "vllm@0.33.0")["best"]["command"]


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


def _record(kind: str, version: str, **extra: object) -> dict:
    base = {"id": f"t-{kind}-{version}", "kind": kind, "runtime": "vllm", "model": "llama-3.1-8b",
            "quant": "bf16", "gpu": "H100 SXM", "gpus": 1, "measured": 1.0, "date": "2026-11-20",
            "settings": {"tp": 1, "version": version}}
    return {**base, **extra}


@pytest.mark.parametrize(("record", "path"), [
    # a single stream's decode speed does not read the KV pool: a 0.33.0 run is what users get
    (_record("decode", "0.33.0", concurrency=1, context=0, unit="tokens_per_s"), "user"),
    # the longest context a card holds is the pool itself: 0.33.0 sized it otherwise
    (_record("max_context", "0.33.0", settings={"tp": 1, "gpu_memory_utilization": 0.9, "max_model_len": 8192,
                                                "vllm_version": "0.33.0"}, unit="tokens"), "older"),
    (_record("max_context", "0.34.0", settings={"tp": 1, "gpu_memory_utilization": 0.9, "max_model_len": 8192,
                                                "vllm_version": "0.34.0"}, unit="tokens"), "user"),
])
def test_a_record_is_older_by_the_measured_kv_cache_only_where_its_figure_moves(record, path):
    """validation/validate.py _measured_kv_applies: vLLM 0.34's memory features (data/releases.toml
    extensible_kv_cache, kv_block_64) make a 0.33.0 record older only where its prediction differs."""
    from cardfit.validation.validate import path_of

    assert path_of(record) == path


def test_a_disaggregated_worker_sizes_its_kv_cache_from_the_profile_run():
    """vllm/config/vllm.py _resolve_extensible_kv_cache (PyPI wheel vllm 0.34.0, lines 3180-3265): a NIXL
    connector exports the cache with FABRIC handles, which need an IMEX channel an HGX box has not, so a P/D
    worker runs without the extensible KV cache: 0.92 of the CUDA total (0.33's rule), not the measured
    budget; a replica keeps it; SGLang's adapter is not touched by it."""
    from cardfit.runtimes import adapter

    gpu = default_gpus().get("H100 SXM")
    engine = adapter(default_runtimes().get("vllm"))
    total = gpu.usable_bytes - engine.profile.cuda_total_shortfall_bytes
    assert engine.serving() is engine and engine.budget_per_card(gpu) > int(total * 0.92)
    for role in ("prefill", "decode"):
        worker = engine.serving(role=role)
        assert worker.profile.gpu_memory_utilization == 0.92 and not worker.profile.has("extensible_kv_cache")
        assert worker.budget_per_card(gpu) == int(total * 0.92)
        assert worker.profile.has("kv_block_64")  # the release's other features stay
    ctx = build_context(PlanInput(model="llama-3.1-8b", runtime="vllm", context=8192))
    assert ctx.engine_at(1, "decode").budget_per_card(gpu) == int(total * 0.92)


def _serving(gpu: str, model: str, version: str, quant: str = "bf16", **extra: object) -> dict:
    base = {"id": f"t-serving-{gpu}-{version}", "kind": "serving", "runtime": "vllm", "model": model,
            "quant": quant, "gpu": gpu, "gpus": 1, "input_tokens": 256, "output_tokens": 128,
            "concurrency": 8, "load": "closed", "fixed_lengths": True, "metric": "output_tokens_per_s",
            "statistic": "mean", "measured": 1.0, "unit": "tokens_per_s", "date": "2026-06-01",
            "settings": {"tp": 1, "pp": 1, "version": version}}
    return {**base, **extra}


@pytest.mark.parametrize(("record", "path"), [
    # ai.wmx.dev's sweep (data/validation/serving_wmx_l4.toml): Qwen2.5-0.5B BF16 on an L4 at vLLM 0.23.0
    # lacks only features scoped to other cards (SM100, 160 GiB, ROCm, MXFP4) and the 0.34 KV sizing, none
    # of which moves its figure: what users get (old code: "older")
    (_serving("L4", "qwen2.5-0.5b", "0.23.0"), "user"),
    # on SM100 the prompt graphs up to 1,024 tokens (graphs_1024_sm100, 0.28) and the 16k step budget of a
    # 160 GiB card (batch_16k_above_160gib, 0.28) move a B200's figures: older
    (_serving("B200", "llama-3.1-8b", "0.27.0"), "older"),
    # MXFP4 experts on Hopper before their scales were freed (mxfp4_scales_freed, 0.25): older
    (_serving("H100 SXM", "gpt-oss-120b", "0.24.0", quant="mxfp4", concurrency=256, input_tokens=8000),
     "older"),
    # before 0.20 the CUDA-graph pool sat outside the budget (graphs_in_budget, not scoped): older
    (_serving("L4", "qwen2.5-0.5b", "0.19.0"), "older"),
])
def test_a_record_is_older_by_a_scoped_vllm_feature_only_where_its_figure_moves(record, path):
    """validation/validate.py SCOPED_FEATURES: a vLLM feature of data/releases.toml that changes only some
    cards or models makes a record of an earlier release older only where its prediction differs."""
    from cardfit.validation.validate import path_of

    assert path_of(record) == path

"""SGLang's --enable-mixed-chunk (services/pinned.py schedule, runtimes/sglang.py MIXED_CHUNK_FLAG): a prompt
step carries the running decodes instead of pausing them, so a pinned benchmark run is stepped decode-first.
aiconfigurator's generator writes it for aggregated SGLang runs ('agg enable_mixed_chunk = true'), but its
silicon sample's rows do not say they ran that script and their TTFT argues against it: the records do not
state it (docs/VALIDATION.md)."""

from __future__ import annotations

import pytest

import cardfit
from cardfit.catalog.models import default_models
from cardfit.catalog.runtimes import default_runtimes
from cardfit.errors import InputError
from cardfit.runtimes import launch
from cardfit.services import pinned

PINNED = dict(model="llama-3.1-8b", gpu=("H100 SXM",), runtime="sglang", tp=1, users=32, input_tokens=1000,
              output_tokens=200, requests=320)


@pytest.mark.parametrize("runtime,mixed,first", [
    ("sglang", False, True),   # SGLang's default: a waiting prompt runs first, the decodes wait for it
    ("sglang", True, False),   # mixed: the decodes ride in the prompt step
    ("vllm", False, False),    # V1 is decode-first either way
    ("tgi", False, True),
])
def test_schedule_order(runtime, mixed, first):
    rt = default_runtimes().get(runtime)
    budget, prefill_first = pinned.schedule(rt, default_models().find("llama-3.1-8b"), 4096, None, mixed)
    assert (budget, prefill_first) == (4096, first)


def test_pinned_benchmark_steps_the_decodes_with_the_prompts_and_launches_the_flag():
    base = (d := cardfit.deploy(**PINNED))["best"] or d["closest"]
    mixed = (d := cardfit.deploy(**PINNED, enable_mixed_chunk=True))["best"] or d["closest"]
    assert base["benchmark"]["scheduler"] == "prefill-first"
    assert mixed["benchmark"]["scheduler"] == "decode-first"
    assert mixed["benchmark"]["ttft_mean_ms"] != base["benchmark"]["ttft_mean_ms"]
    assert mixed["command"].endswith("--enable-mixed-chunk")
    assert "--enable-mixed-chunk" not in base["command"]
    # the steady state has no pause of the decodes to remove: beyond the benchmark's steps the flag changes
    # only whether a waiting prompt's own step carries the decodes (core/serving.py prompt_share_s: none on a
    # prefill-first schedule), under 1 % here
    assert mixed["ttft_mean_ms"] == pytest.approx(base["ttft_mean_ms"], rel=0.01)
    assert mixed["tpot_ms"] == pytest.approx(base["tpot_ms"], rel=0.01)


@pytest.mark.parametrize("args,message", [
    (["--gpu", "H100 SXM", "--runtime", "sglang"], "--enable-mixed-chunk applies to one pinned deployment"),
    (["--gpu", "H100 SXM", "--runtime", "vllm", "--tp", "1"], "--enable-mixed-chunk is an SGLang flag"),
    (["--gpu", "H100 SXM", "--runtime", "trtllm", "--tp", "1"], "--enable-mixed-chunk is an SGLang flag"),
    (["--gpu", "H100 SXM", "--runtime", "sglang", "--tp", "1", "--prefill-workers", "1",
      "--decode-workers", "1"], "a disaggregated deployment runs them on separate workers"),
])
def test_the_option_needs_a_pinned_sglang_deployment(run_cli, args, message):
    code, out, err = run_cli("deploy", "llama-3.1-8b", "--users", "8", *args, "--enable-mixed-chunk")
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0], err
    assert "Traceback" not in err and out == ""


def test_launch_refuses_the_flag_where_the_engine_has_none():
    with pytest.raises(InputError, match="no mixed-chunk switch"):
        launch.build("vllm", "meta-llama/Llama-3.1-8B-Instruct", tp=1, max_model_len=4096, mixed_chunk=True)
    argv = launch.build("sglang", "meta-llama/Llama-3.1-8B-Instruct", tp=1, max_model_len=4096,
                        mixed_chunk=True).argv
    assert argv[-1] == "--enable-mixed-chunk" and argv.count("--enable-mixed-chunk") == 1

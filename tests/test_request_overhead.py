"""The front end's fixed time a served request (runtimes.toml request_overhead_ms, core/serving.py
Replica.request_s): what a request spends outside the engine's steps before its first token reaches the
client (HTTP, chat template, tokenization, the engine-core hop, the first token's detokenization and
stream). One pure delay a request: it adds to TTFT on every timing path (a closed loop's steady state, an
open load, a stepped burst) and lengthens a closed loop's cycle, never TPOT; fitted on vLLM's light-load
TTFT records (validation/calibrate.py _light_ttft), vLLM's alone (docs/VALIDATION.md, h-reqtime)."""

from __future__ import annotations

import pytest

from cardfit.catalog.runtimes import default_runtimes
from cardfit.core.constants import constants, snapshot
from cardfit.validation.calibrate import FITS, _implied_request_overhead, _light_ttft
from cardfit.validation.serving import predict_serving
from cardfit.validation.validate import all_records

BY_ID = {r["id"]: r for r in all_records()}
KEY = "vllm.request_overhead_ms"


def at(r: dict, ms: float, **change) -> float:
    with constants({**snapshot(), KEY: ms}):
        return predict_serving({**r, **change})[0]


def test_the_constant_is_vllms_fitted_value():
    (f,) = [f for f in FITS if f.field == "request_overhead_ms"]
    assert f.runtime == "vllm" and f.copies == ()  # no other engine takes it
    v = default_runtimes().get("vllm").request_overhead_ms
    assert 10 <= v <= 60  # tens of ms, not a residual of seconds
    for rid in ("sglang", "trtllm", "tgi", "llama.cpp"):
        assert default_runtimes().get(rid).request_overhead_ms == 0


@pytest.mark.parametrize("rid", [
    # ai.wmx.dev: Qwen2.5-0.5B on one L4, vLLM 0.23, one user (closed loop, steady state): 27 ms p50 TTFT
    "wmx-qwen2.5-0.5b-l4-vllm0230-256x128-c1-ttft-median",
    # dstack: one 80-token prompt to Llama 3.1 405B on 8x MI300X, vLLM 0.6.3 (a burst of one: stepped)
    "dstack-405b-mi300x-vllm-80in-n1-ttft",
    # kvcached: Qwen3-0.6B on one H100, vLLM 0.19, Poisson 16 requests/s (an open load)
    "kvcached-qwen3-0.6b-h100-vllm0190-512x128-r16-ttft",
])
def test_a_lone_or_light_request_carries_the_fixed_time_once(rid):
    r = BY_ID[rid]
    assert at(r, 30.0) - at(r, 0.0) == pytest.approx(30.0, rel=0.02)


def test_not_tpot_and_the_closed_loop_cycle_is_longer():
    r = BY_ID["wmx-qwen2.5-0.5b-l4-vllm0230-256x128-c1-ttft-median"]
    assert at(r, 30.0, metric="itl_ms") == pytest.approx(at(r, 0.0, metric="itl_ms"), rel=1e-9)
    tpot = at(r, 0.0, metric="tpot_ms") / 1e3
    ttft = at(r, 0.0) / 1e3
    cycle = ttft + 127 * tpot  # one user, 128 answer tokens
    out0, out30 = at(r, 0.0, metric="output_tokens_per_s"), at(r, 30.0, metric="output_tokens_per_s")
    assert out0 / out30 == pytest.approx((cycle + 0.030) / cycle, rel=0.02)


def test_other_engines_do_not_read_vllms_value():
    # NVIDIA NIM 1.8 (TensorRT engines), one request of 1,000 prompt tokens: 19.0 ms measured
    r = BY_ID["nim-llama-3.1-8b-h100-fp8-tp1-1000x1000-c1-ttft"]
    assert at(r, 30.0) == at(r, 0.0)


def test_the_records_it_is_fitted_on():
    light = {r["id"] for r in all_records() if r.get("runtime", "").lower() == "vllm" and _light_ttft(r)}
    assert {"wmx-qwen2.5-0.5b-l4-vllm0230-256x128-c1-ttft-median",
            "wmx-qwen2.5-0.5b-l4-vllm0230-256x128-c2-ttft-median",
            "gpustack-qwen3-8b-h100-vllm-bf16-tp1-bs-1-L617-ttft",
            "gpustack-qwen3-8b-h100-vllm-bf16-tp1-bs-2-L643-ttft"} <= light
    assert "wmx-qwen2.5-0.5b-l4-vllm0230-256x128-c4-ttft-median" not in light  # four in flight: a queue
    assert "kvcached-qwen3-0.6b-h100-vllm0190-512x128-r16-ttft" not in light  # an open load
    # the 405B prompt step (~150 ms) is the prompt's compute, not the front end: it implies nothing
    with constants({**snapshot(), KEY: 0.0}):
        assert _implied_request_overhead(BY_ID["dstack-405b-mi300x-vllm-80in-n1-ttft"]) is None
        v = _implied_request_overhead(BY_ID["wmx-qwen2.5-0.5b-l4-vllm0230-256x128-c1-ttft-median"])
    assert v == pytest.approx(27.0 - 4.75, abs=1.0)  # 27 ms measured, a ~5 ms prompt step

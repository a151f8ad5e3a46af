"""Prefill speed: the attention that grows with the context and the rate it runs at."""

from __future__ import annotations

import pytest

from cardfit.catalog.gpus import default_gpus
from cardfit.catalog.models import default_models
from cardfit.core import speed as sp


@pytest.mark.parametrize(("gpu", "ratio", "why"), [
    ("RTX 3090", 2 / 3, "GeForce: K·Q accumulates in FP32 at half the FP16-accumulate rate, softmax·V FP16"),
    ("RTX 4090", 2 / 3, "the same on Ada GeForce"),
    ("RTX A6000", 1.0, "professional cards run FP32 accumulation at the full rate"),
    ("H100 SXM", 1.0, "datacenter: the same rate (both at the mma.sync share)"),
])
def test_llamacpp_attention_runs_at_two_thirds_of_the_gemm_rate_on_geforce(gpu, ratio, why):
    g = default_gpus().get(gpu)
    gemm = sp.prefill_peak_tflops(g, None, fp16_accumulate=True)
    assert sp.attention_peak_tflops(g, None, fp16_accumulate=True) / gemm == pytest.approx(ratio), why
    assert sp.attention_peak_tflops(g, None) == sp.prefill_peak_tflops(g, None)  # other runtimes: one rate


def test_prefill_slows_with_the_tokens_already_cached():
    """llama-bench 'pp512 @ d32768': the same 512 tokens after 32,768 cached ones attend to 64x more keys; on
    Llama 3 8B that doubles the FLOPs per token (16 GFLOP of weights, 17 of attention)."""
    m = default_models().get("llama-3.1-8b")
    fresh = sp.prefill_tokens_per_s(m, 142.0, 0.5, 512)
    deep = sp.prefill_tokens_per_s(m, 142.0, 0.5, 512, depth=32768)
    slower = sp.prefill_tokens_per_s(m, 142.0, 0.5, 512, attention_tflops=142.0 * 2 / 3, depth=32768)
    assert deep < fresh / 1.9 and slower < deep
    assert sp.prefill_tokens_per_s(m, 142.0, 0.5, 512, depth=0) == fresh


def test_unfused_attention_traffic_grows_with_depth():
    m = default_models().get("llama-3.1-8b")
    assert sp.attention_score_bytes(m, 512, 512, depth=32768) == 65 * sp.attention_score_bytes(m, 512, 512)

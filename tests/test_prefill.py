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


def test_moe_prefill_on_a_small_bus_is_bound_by_the_weights_each_ubatch_streams():
    """gpt-oss-120b on a DGX Spark (273 GB/s): a 512-token ubatch routes to nearly every expert, so each
    ubatch streams the whole 63 GB file: about 0.26 s, longer than its arithmetic (about 0.16 s). The
    forum's llama-bench pp2048 is 1,937 tok/s of ggml-org's MXFP4_MOE file ('MXFP4 MoE 59.02 GiB': Q8_0
    attention, not the checkpoint's BF16); the floor alone allows 1,958."""
    from cardfit.services.speed import _stream
    from cardfit.validation.single import predict_speed, record_setup
    from cardfit.validation.validate import all_records

    r = {x["id"]: x for x in all_records()}["spark-gb10-gptoss120b-pp2048"]
    s = record_setup(r)
    assert s.load.shares.read_fraction(512) > 0.95  # every expert touched; all but the embedding lookup
    assert 1 / _stream(s, 512, 2048) == pytest.approx(1958, rel=0.05)
    assert predict_speed(r) == pytest.approx(1937.39, rel=0.05)
    dense = default_models().get("llama-3.1-8b")
    assert sp.weight_shares(dense).read_fraction(512) == 1.0

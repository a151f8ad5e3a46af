"""How tensor-parallel ranks share attention: MLA's one latent is read whole by every rank (core/kv.py
kv_split_ranks), and data-parallel attention (SGLang --enable-dp-attention, TensorRT-LLM
enable_attention_dp) gives each request's attention to one group of ranks (core/speed.py
Machine.attention_dp, core/serving.py prompt_flops)."""

from __future__ import annotations

import pytest

from cardfit.catalog.gpus import default_gpus
from cardfit.catalog.models import default_models
from cardfit.catalog.quants import default_quants
from cardfit.core import kv
from cardfit.core import serving as sv
from cardfit.core import speed as sp
from cardfit.core.tensors import attention_params
from cardfit.validation.serving import attention_dp, predict_serving
from cardfit.validation.validate import all_records

RECORDS = {r["id"]: r for r in all_records()}
R1 = default_models().find("deepseek-r1-671b")
LLAMA70 = default_models().find("llama-3.1-70b")


@pytest.mark.parametrize(("model", "tp", "copies"), [
    (R1, 8, 8.0),  # MLA: one latent shared by all 128 heads, every rank keeps all of it
    (LLAMA70, 8, 1.0),  # 8 KV heads over 8 ranks: one head each
    (LLAMA70, 16, 2.0),  # 8 KV heads over 16 ranks: each head on two ranks
    (LLAMA70, 1, 1.0),
])
def test_kv_replication_follows_the_heads_the_cache_splits_over(model, tp, copies):
    assert kv.kv_replication(model, tp) == copies


def _load(shares: sp.Shares, kv_split: int) -> sp.Load:
    """DeepSeek-R1-like at 3,600 cached tokens: 680 GB of FP8 weights, a 253 MB latent cache a sequence
    (3,600 × 61 layers × 576 values × 2 bytes)."""
    return sp.Load(680_000_000_000, shares, 3600 * 61 * 576 * 2, 2 * 37e9, 61, 7168, kv_split=kv_split)


def test_mla_decode_reads_the_whole_latent_on_every_rank():
    """Each of 8 ranks attends with 16 of the 128 heads over every cached token's latent: the cache reads of
    a step do not shrink with tensor parallelism, as a GQA model's split heads do."""
    shares = sp.Shares(0.026, 0.97, 0.004, 8 / 256, "shapes", 0.017)
    mc = sp.Machine(4800.0, 1979.0, 8, decode_efficiency=0.8)
    mla = sp.step(_load(shares, kv_split=1), mc, 128)
    split = sp.step(_load(shares, kv_split=0), mc, 128)
    assert mla.kv_s == pytest.approx(8 * split.kv_s)
    assert mla.kv_s == pytest.approx(128 * 3600 * 61 * 576 * 2 / (4800e9 * 0.8))


def test_data_parallel_attention_reads_its_own_cache_and_all_the_projections():
    """With attention data parallel over the 8 ranks each rank holds the cache of its 16 of 128 sequences and
    reads the attention projections whole, not an eighth of them; the experts stay split 8 ways."""
    shares = sp.Shares(0.026, 0.97, 0.004, 8 / 256, "shapes", 0.017)
    load = _load(shares, kv_split=1)
    tp = sp.Machine(4800.0, 1979.0, 8, decode_efficiency=0.8)
    dp = sp.Machine(4800.0, 1979.0, 8, decode_efficiency=0.8, attention_dp=8)
    a, b = sp.step(load, tp, 128), sp.step(load, dp, 128)
    assert b.kv_s == pytest.approx(a.kv_s / 8)
    projections = 680e9 * 0.017
    assert (b.memory_s - b.kv_s) - (a.memory_s - a.kv_s) == pytest.approx(
        projections * (1 - 1 / 8) / (4800e9 * 0.8))


def test_deepseek_attention_projections_are_its_mla_matrices():
    """q_a 7168 x 1536, q_b 1536 x 128 x 192, kv_a 7168 x 576, kv_b 512 x 128 x 256, o 128 x 128 x 7168
    (deepseek-ai/DeepSeek-R1 config.json): 187 M a layer, 11.4 B over 61 layers; in FP8 1.7 % of the bytes."""
    per_layer = 7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256 + 128 * 128 * 7168
    assert attention_params(R1) == 61 * per_layer
    shares = sp.weight_shares(R1, default_quants().find("fp8"))
    assert shares.attention == pytest.approx(0.017, abs=0.002)
    assert shares.attention < shares.dense


def _replica(dp: int) -> sv.Replica:
    load = _load(sp.Shares(0.026, 0.97, 0.004, 8 / 256, "shapes", 0.017), kv_split=1)
    mc = sp.Machine(4800.0, 1979.0, 8, decode_efficiency=0.8, compute_efficiency=0.5, attention_dp=dp)
    return sv.Replica(load, mc, 84e9, 8192, 128, prompt_tokens=3200, prefill_attention_flops_per_token=32e9)


@pytest.mark.parametrize(("tokens", "groups"), [(3200, 1), (4 * 3200, 4), (8 * 3200, 8), (16 * 3200, 8)])
def test_a_prompts_attention_runs_in_one_group(tokens, groups):
    """One 3,200-token prompt's attention runs on the one rank its request was sent to: charged 8 times the
    tensor-parallel share; four prompts on four ranks, twice; eight or more prompts fill every rank."""
    r = _replica(8)
    assert sv.prompt_flops(r, tokens) == pytest.approx(84e9 + 32e9 * (8 / groups - 1))
    assert sv.prompt_flops(_replica(1), tokens) == 84e9


def test_sglang_dp_attention_records_are_timed_with_it():
    """dstack's SGLang 0.4.3 on 8x H200 ran --enable-dp-attention (dstackai/benchmarks Deepseek-R1/README.md,
    the sg-h200 task), which then set dp_size = tp_size."""
    r = RECORDS["dstack-r1-h200-sglang-3200x800-c4-ttft"]
    assert attention_dp(r["settings"], 8) == 8
    assert attention_dp({"tp": 8}, 8) == 1
    assert attention_dp({"enable_dp_attention": True, "dp_size": 2}, 8) == 2
    _, how = predict_serving(r)
    assert "attention DP 8" in how


def test_dp_attention_makes_a_lone_prompt_slower_than_tensor_parallel():
    """The measured first tokens of that run are longer than TP8 SGLang's on MI300X and vLLM's on the same
    H200s (3.9 s at 4 in flight against 1.6 s and 1.0 s): its prediction with attention in one group is
    longer than the same record timed with tensor-parallel attention."""
    r = RECORDS["dstack-r1-h200-sglang-3200x800-c4-ttft"]
    with_dp = predict_serving(r)[0]
    settings = {k: v for k, v in r["settings"].items() if k != "enable_dp_attention"}
    without = predict_serving({**r, "settings": settings})[0]
    assert with_dp > 1.3 * without


def test_deepseek_prefill_is_held_to_the_best_published_share():
    """LMSYS's large-scale-EP SGLang prefilled 52.3k tokens/s per node of 8 H100 at 2,000-token inputs: at
    cardfit's FLOPs a token that is 26 % of the FP8 peak; a current engine's DeepSeek-R1 served on 8x H200 is
    timed at no more (vLLM's fitted 0.81 for dense models would be 3x that)."""
    per_token = sp.decode_flops_per_token(R1, 1000)
    assert per_token == pytest.approx(80e9, rel=0.02)
    assert 52_300 / 8 * per_token / 1979e12 == pytest.approx(sp.MLA_MOE_PREFILL_SHARE_MAX, abs=0.01)
    r = RECORDS["aic-deepseek-r1-h200-sglang-fp8-tp8-1024x1024-c4-ttft"]
    from cardfit.catalog.runtimes import default_runtimes
    from cardfit.core.constants import snapshot
    from cardfit.validation.serving import _timed, record_input, record_schedule

    inp, tp, pp = record_input(r)
    budget, _ = record_schedule(r, default_runtimes().get("sglang"))
    res, _ = _timed(inp, r["gpu"], tp, pp, 4, snapshot(), budget)
    # held to that rate as a share of the card's measured FP8 GEMM rate (the H100's 1,382.2 TFLOPS)
    assert sp.MLA_MOE_PREFILL_GEMM_SHARE_MAX == pytest.approx(52_300 / 8 * per_token / 1382.2e12, abs=0.01)
    gpu = default_gpus().find("H200 SXM")
    cap = sp.mla_moe_prefill_share_max(gpu, "fp8")
    assert res.cand.replica.machine.compute_efficiency == cap
    assert cap == pytest.approx(sp.MLA_MOE_PREFILL_SHARE_MAX, abs=0.005)  # H200: its GEMMs reach 69 %
    assert sp.mla_moe_prefill_share_max(default_gpus().find("MI300X"), "fp8") < 0.7 * cap
    assert sp.mla_moe(R1) and not sp.mla_moe(LLAMA70)

"""Attention data-parallel + expert-parallel layouts of MoE models (core/moe_parallel.py): memory, the
all-to-all in the step time, deploy's search and the JSON it answers with."""

from __future__ import annotations

import math
from functools import cache

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cardfit.core import moe_parallel as mp
from cardfit.core import speed as sp
from cardfit.services import deploy as dp

# --- arithmetic, by hand -------------------------------------------------------------------------------

# (hidden, top_k, bytes per token, where the shape comes from)
A2A_BYTES = [
    (7168, 8, 114_688, "DeepSeek-V3 config.json: hidden_size 7168, num_experts_per_tok 8, BF16"),
    (2048, 8, 32_768, "Qwen3-30B-A3B config.json: hidden_size 2048, num_experts_per_tok 8"),
    (2880, 4, 23_040, "gpt-oss-120b config.json: hidden_size 2880, experts_per_token 4"),
]


@pytest.mark.parametrize("hidden,top_k,expected,why", A2A_BYTES)
def test_alltoall_bytes_per_token(hidden: int, top_k: int, expected: int, why: str) -> None:
    assert mp.alltoall_bytes_per_token(hidden, top_k) == expected


def test_layouts_divide_the_cards() -> None:
    assert [(lay.dp, lay.tp, lay.ep) for lay in mp.layouts(8)] == [(2, 4, 8), (4, 2, 8), (8, 1, 8)]
    assert [(lay.dp, lay.tp, lay.ep) for lay in mp.layouts(2)] == [(2, 1, 2)]
    assert mp.layouts(1) == []  # one card: nothing to shard


# (weights, expert share, dp, held over all cards, why)
HELD = [
    (100, 0.9, 1, 100, "one group holds everything once: tensor parallel's sum"),
    (100, 0.9, 8, 170, "8 groups: the 10 non-expert bytes 8 times, the 90 expert bytes once"),
    (100, 1.0, 8, 100, "all experts: nothing is copied"),
    (100, 0.0, 4, 400, "a dense model would be 4 whole copies (deploy never offers it)"),
]


@pytest.mark.parametrize("weights,share,groups,held,why", HELD)
def test_weights_held_over_all_cards(weights: int, share: float, groups: int, held: int, why: str) -> None:
    assert mp.weights_bytes_in_all(weights, share, groups) == held


def test_alltoall_seconds_by_hand() -> None:
    """DeepSeek-V3 (58 MoE layers) decoding 64 sequences over 8 H100s on NVLink (900 GB/s both ways)."""
    per_rank = 64 / 8 * 7168 * 8 * 2 * 7 / 8  # its 8 tokens' 8 copies, 7/8 of them to other ranks
    mu = 64 * 8 / 8
    imb = 1 + math.sqrt(2 * math.log(8) * (7 / 8) / mu)
    one_way = per_rank * imb / (450e9 * 153 / 200) + 10e-6
    got = mp.alltoall_seconds(64, 7168, 8, 58, 8, 900.0, 10e-6, bidirectional=True)
    assert got == pytest.approx(2 * 58 * one_way, rel=1e-12)
    assert mp.alltoall_seconds(64, 7168, 8, 58, 1, 900.0, 10e-6, True) == 0.0  # one rank: nothing moves


@given(st.floats(1, 1e6), st.integers(1, 16), st.integers(2, 64))
def test_imbalance_is_above_one_and_shrinks_with_the_batch(tokens: float, top_k: int, ep: int) -> None:
    one = mp.imbalance(tokens, top_k, ep)
    assert one > 1.0
    assert mp.imbalance(tokens * 2, top_k, ep) < one


@given(st.integers(0, 10**12), st.floats(0, 1), st.integers(1, 64))
def test_weights_held_grow_with_the_groups(weights: int, share: float, groups: int) -> None:
    held = mp.weights_bytes_in_all(weights, share, groups)
    assert weights - 1 <= held <= weights * groups + 1
    assert mp.weights_bytes_in_all(weights, share, groups + 1) >= held


@given(st.floats(1, 1e5), st.integers(2, 64), st.sampled_from([32.0, 450.0, 900.0]))
def test_alltoall_grows_with_the_tokens(tokens: float, ep: int, link: float) -> None:
    t = mp.alltoall_seconds(tokens, 4096, 8, 40, ep, link, 25e-6, False)
    assert 0 < t <= mp.alltoall_seconds(tokens * 2, 4096, 8, 40, ep, link, 25e-6, False)


# --- the step ------------------------------------------------------------------------------------------

SHARES = sp.Shares(dense=0.2, experts=0.8, embed=0.0, route=0.1, method="params", attention=0.1)
LOAD = sp.Load(10**9, SHARES, 0, 0.0, 40, 4096, experts_active=8, moe_layers=40)


def _mc(**kw) -> sp.Machine:
    return sp.Machine(bandwidth_gbps=1000.0, tflops=None, tp=4, link_gbps=900.0, interconnect="nvlink", **kw)


def test_step_reads_experts_sharded_and_the_rest_whole() -> None:
    """1 GB of weights, 80 % routed experts, every expert touched by 1,000 tokens: a rank of 4 reads its
    quarter of the experts and the whole 20 % rest (EP), a quarter of everything (TP), or a quarter of all but
    the attention, which it reads whole (attention DP alone, the SGLang records' layout)."""
    touched = 1 - 0.9 ** 1000
    weights = 1e9 * (0.2 + 0.8 * touched)
    ep = sp.step(LOAD, _mc(attention_dp=4, expert_parallel=4), 1000)
    tp = sp.step(LOAD, _mc(), 1000)
    adp = sp.step(LOAD, _mc(attention_dp=4), 1000)
    assert ep.memory_s == pytest.approx((0.8e9 * touched / 4 + 0.2e9) / 1e12)
    assert tp.memory_s == pytest.approx(weights / 4 / 1e12)
    assert adp.memory_s == pytest.approx(((weights - 0.1e9) / 4 + 0.1e9) / 1e12)


def test_each_attention_group_schedules_its_own_sequences() -> None:
    kw = dict(overhead_s_per_sequence=1e-5)
    assert sp.step(LOAD, _mc(attention_dp=4, expert_parallel=4, **kw), 64).overhead_s == pytest.approx(15e-5)
    assert sp.step(LOAD, _mc(**kw), 64).overhead_s == pytest.approx(63e-5)


def test_expert_parallel_link_is_the_alltoall_not_the_allreduce() -> None:
    ep = sp.step(LOAD, _mc(attention_dp=4, expert_parallel=4), 256)
    expected = mp.alltoall_seconds(256, 4096, 8, 40, 4, 900.0, sp.ALLREDUCE_LATENCY_S["nvlink"], True)
    assert ep.link_s == pytest.approx(expected)
    # two attention groups of two cards: their own all-reduces on top
    two = sp.step(LOAD, _mc(attention_dp=2, expert_parallel=4), 256)
    assert two.link_s > expected


# --- deploy --------------------------------------------------------------------------------------------

@cache
def _report(model: str, gpu: str, cards: int, users: float, runtime: str, quant: str) -> dict:
    inp = dp.DeployInput(model=model, users=users, input_tokens=1000, output_tokens=300, ttft_ms=2000,
                         tpot_ms=50, gpu=(gpu,), runtime=runtime, quant=quant, kv_dtype="bf16",
                         max_cards=cards)
    return dp.deploy_report(inp).to_json()


def _entries(d: dict) -> list[dict]:
    return [e for e in [d.get("best"), d.get("closest"), *d.get("pareto", [])] if e]


@pytest.mark.parametrize("runtime,flag,layout", [("vllm", "--enable-expert-parallel", (1, 1)),
                                                 ("sglang", "--attn-dp-size", (2, 2))])
def test_deploy_offers_expert_parallel_for_a_moe_model(runtime: str, flag: str, layout: tuple) -> None:
    """Qwen3-30B-A3B on two H100s at 500 users. SGLang: the expert-parallel layout (two attention groups)
    serves them. vLLM: one TP 2 engine schedules up to its own cap on the card (1,024: its KV pool holds
    ~770), so tensor parallelism serves them as well as two attention groups would (before the search read
    the engine's cap, the profile's 256 sequences left EP the only layout that held them); pinned with
    --attention-dp 2 --expert-parallel 2 it launches with the flag."""
    d = _report("qwen3-30b-a3b", "H100 SXM", 2, 500.0, runtime, "bf16")
    entries = _entries(d)
    assert entries
    for e in entries:
        assert {"dp", "ep", "disaggregated"} <= e.keys()
        assert e["count"] == e["tp"] * e["pp"] * e["replicas"]
        assert e["disaggregated"] is None
    chosen = d["best"] or d["closest"]
    assert (chosen["dp"], chosen["ep"]) == layout
    if layout == (1, 1):
        inp = dp.DeployInput(model="qwen3-30b-a3b", users=500.0, input_tokens=1000, output_tokens=300,
                             gpu=("H100 SXM",), runtime=runtime, quant="bf16", kv_dtype="bf16", tp=2,
                             attention_dp=2, expert_parallel=2)
        chosen = dp.deploy_report(inp).to_json()
        chosen = chosen["best"] or chosen["closest"]
        assert (chosen["dp"], chosen["ep"]) == (2, 2)
    assert flag in chosen["command"]


def test_dense_models_keep_tensor_parallel() -> None:
    d = _report("llama-3.1-8b", "H100 SXM", 2, 200.0, "vllm", "bf16")
    assert all((e["dp"], e["ep"]) == (1, 1) for e in _entries(d))


def test_expert_parallel_memory_copies_the_non_expert_weights() -> None:
    """DeepSeek-V3 FP8 on 8x H200: each of 8 attention groups holds the non-expert weights (attention,
    shared experts, dense layers, embeddings) whole, the routed experts once over all cards."""
    inp = dp.DeployInput(model="deepseek-v3", users=64, gpu=("H200",), runtime="vllm", quant="fp8",
                         kv_dtype="fp8", max_cards=8)
    sets, _ = dp.settings(inp)
    cands = [c for c in dp.candidates(inp, sets) if c.cards == 8]
    tp = next(c for c in cands if c.ep == 1)
    dp8 = next(c for c in cands if c.attention_dp == 8)
    share = sp.weight_shares(tp.setting.ctx.model, tp.setting.ctx.quant).experts
    rest = tp.setting.mem.weights_bytes * (1 - share)
    assert 0.01 < 1 - share < 0.05  # 671B of which ~16B are not routed experts
    assert dp8.setting.mem.weights_bytes - tp.setting.mem.weights_bytes == pytest.approx(7 * rest, rel=1e-6)
    # MLA's latent is copied on every tensor-parallel rank; one group per card holds each sequence once
    assert dp8.kv_tokens > tp.kv_tokens


# --- validation: the records of data/validation/serving_aic_dp_ep.toml ----------------------------------

def test_dp_ep_records_are_timed_expert_parallel() -> None:
    """aiconfigurator's DeepSeek-R1 FP8 run on 8x H200 (TensorRT-LLM 1.1, attention DP 8, EP 8, 128 users,
    8,192 in / 1,024 out): timed with each attention group's own 16-sequence cap (128 in all), not 16 for the
    whole replica, and its TPOT within 30 % of the 61.2 ms measured (first contact: -43 %)."""
    import tomllib
    from importlib import resources

    from cardfit.validation.validate import predict

    text = resources.files("cardfit.data").joinpath("validation/serving_aic_dp_ep.toml").read_text()
    rows = {r["id"]: r for r in tomllib.loads(text)["record"]}
    row = "2026_03_25_deepseek_r1_h200_sxm_trtllm_fp8_agg_8192x1024_c128_tp8_0_ep8_0_1246"
    r = rows[f"aic-dpep-row-{row}-tpot"]
    out = predict(r)
    assert "EP 8" in out.how and "at most 128" in out.how
    assert out.predicted == pytest.approx(r["measured"], rel=0.3)

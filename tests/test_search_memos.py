"""The deploy search's memos (issue 25 item 19) answer what the functions they stand for compute: a memo
keyed on less than its function reads would hand one replica's timing to another. Speed itself is
measured by `make bench`, not here."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cardfit.core import serving as sv
from cardfit.core import speed as sp
from cardfit.services import deploy as dp


def _replica(pp: int, tp: int, dp_groups: int, seqs: int, chunk: int, kv_tokens: int, ahead: int,
             prompt: int, experts: float) -> sv.Replica:
    shares = sp.Shares(1.0 - experts, experts, 0.0, 8 / 128 if experts else 1.0, "params", attention=0.05)
    load = sp.Load(16_000_000_000, shares, 131_072 * 1150, 1.6e10, 32, 4096)
    machine = sp.Machine(3350.0, 989.0, tp, link_gbps=450.0, decode_efficiency=0.873,
                         overhead_s_per_layer=55.4e-6, overhead_s_per_sequence=456e-6,
                         compute_efficiency=0.81, attention_dp=dp_groups, serial_gemm=experts > 0.5)
    return sv.Replica(sv.stage(load, pp), machine, 1.7e10, chunk, seqs, pp, 20e-6 if pp > 1 else 0.0,
                      50.0 if pp > 1 else 0.0, ahead, prompt, 2e9 if dp_groups > 1 else 0.0,
                      kv_tokens=kv_tokens, response_lag=ahead)


@settings(max_examples=200, deadline=None)
@given(pp=st.sampled_from([1, 2, 4]), tp=st.sampled_from([1, 2, 8]), dp_attention=st.booleans(),
       seqs=st.integers(1, 1024), chunk=st.sampled_from([512, 2048, 8192]), kv_tokens=st.integers(0, 10**6),
       ahead=st.integers(0, 1), prompt=st.integers(0, 8000), experts=st.sampled_from([0.0, 0.9]),
       decode=st.floats(0.0, 1024.0), prompt_tokens=st.just(0.0) | st.floats(1.0, 20_000.0))
def test_step_s_is_the_step_of_the_replica_itself(pp, tp, dp_attention, seqs, chunk, kv_tokens, ahead, prompt,
                                                  experts, decode, prompt_tokens):
    """step_s memoizes on the replica reduced to what a step reads (serving._stepping) and on the whole
    sequences each micro-batch decodes: the same seconds, to the bit, as the unmemoized step of the replica as
    given."""
    dp_groups = tp if dp_attention else 1  # data-parallel attention: a group per rank (DeepSeek on SGLang)
    r = _replica(pp, tp, dp_groups, seqs, chunk, kv_tokens, ahead, prompt, experts)
    raw = sv._step_s.__wrapped__(r, math.ceil(decode / pp) if decode else 0, prompt_tokens)
    assert sv.step_s(r, decode, prompt_tokens) == raw
    # another scheduling of the same work: one memo entry, the same answer
    other = _replica(pp, tp, dp_groups, seqs + 1, chunk * 2, kv_tokens + 1, 1 - ahead, prompt, experts)
    assert sv.step_s(other, decode, prompt_tokens) == raw
    assert sv.step_s(other, math.ceil(decode / pp) * pp, prompt_tokens) == raw


@pytest.mark.parametrize("kw", [
    # a MoE closed loop over every runtime: llama.cpp / Ollama layer splits over 1-8 cards share replicas
    {"model": "Qwen/Qwen3-30B-A3B", "users": 32, "ttft_ms": 1500, "tpot_ms": 50},
    # a 70B under open arrivals: tensor and pipeline splits, KV pools of every size
    {"model": "meta-llama/Llama-3.3-70B-Instruct", "requests_per_s": 5, "ttft_ms": 2000, "tpot_ms": 50},
    # a 405B on H100s: pipeline stages across nodes (vLLM, SGLang, TensorRT-LLM) beside layer splits
    {"model": "meta-llama/Llama-3.1-405B-Instruct", "users": 8, "gpu": ("H100",)},
])
def test_every_candidates_replica_is_the_one_built_for_it(kw):
    """A candidate's replica comes from its setting's memo (keyed on a layer split's one stage): equal to the
    replica built afresh from the candidate's own card, split and sequences."""
    inp = dp.DeployInput(**kw)
    sets, _ = dp.settings(inp)
    cands = dp.candidates(inp, sets)
    seen = {}
    for c in cands:
        fresh = dp._replica(inp, c.setting, c.gpu, c.tp, c.pp, c.seqs, c.chunk_tokens, c.attention_dp, c.ep)
        assert c.replica == fresh
        seen.setdefault(fresh, c.replica)
        assert c.replica is seen[fresh]  # equal replicas are one object
    assert len(seen) < len(cands)  # shapes do share replicas (else the memo is keyed wrong or useless)


def test_the_plans_machines_are_keyed_on_the_constants_in_place():
    """services/plan.py keeps each card's machine across plans: the one served.machine builds, and another one
    while validation puts a refit constant in place (core/constants.py), never the stored one's."""
    from cardfit.core.constants import constants
    from cardfit.services import plan, served
    from cardfit.services.inputs import PlanInput

    ctx = plan.build_context(PlanInput(model="llama3.1:8b", runtime="vllm"))
    gpu = ctx.gpus.get("H100")
    stored = plan._machine(ctx, gpu, 1, 0.0)
    assert stored == served.machine(ctx, gpu, 1, ram_bandwidth_gbps=0.0)
    assert plan._machine(ctx, gpu, 1, 0.0) is stored  # asked again: kept
    with constants({"vllm.decode_efficiency": 0.5}):
        refit = plan._machine(ctx, gpu, 1, 0.0)
        assert refit == served.machine(ctx, gpu, 1, ram_bandwidth_gbps=0.0)
    assert refit.decode_efficiency == 0.5 != stored.decode_efficiency
    assert plan._machine(ctx, gpu, 2, 0.0) == served.machine(ctx, gpu, 2, ram_bandwidth_gbps=0.0)


def _cards_unmemoized(layers: int, split: list[float]) -> list[int]:
    """llama.cpp's slot placement written out (LLAMA_SPLIT_SOURCE's upper_bound over the cumulative split)."""
    slots = max(layers, 1) + 1
    bounds, acc = [], 0.0
    for share in split:
        acc += share / sum(split)
        bounds.append(acc)
    return [next((d for d, b in enumerate(bounds) if b > il / slots), len(split) - 1) for il in range(slots)]


@settings(max_examples=200, deadline=None)
@given(layers=st.integers(1, 130), split=st.lists(st.floats(0.05, 100.0), min_size=1, max_size=8),
       which=st.integers(0, 7), bump=st.floats(0.5, 50.0), layered=st.integers(0, 10**12),
       output=st.integers(0, 10**9))
def test_a_memoized_layer_split_answers_each_question_its_own(layers, split, which, bump, layered, output):
    """runtimes/llamacpp_like.py memoizes the placement of (layers, split): questions that differ in the layer
    count or in one card's share get their own placement, each the one computed afresh, and the bytes per
    card are the running total of each card's layers (every byte placed once)."""
    from cardfit.runtimes import llamacpp_like as llama

    other = list(split)
    other[which % len(split)] += bump
    output = min(output, layered)
    for n, s in ((layers, split), (layers + 1, split), (layers, other), (layers, split)):
        cards = _cards_unmemoized(n, s)
        assert llama.layer_cards(n, s) == cards
        got = llama.layer_split(layered, n, s, output)
        upto = [sum(1 for c in cards[:n] if c <= d) for d in range(len(s))]
        rep = layered - output
        want = [rep * u // n - rep * v // n for u, v in zip(upto, [0, *upto[:-1]], strict=True)]
        want[cards[n]] += output
        assert got == want
        assert sum(got) == layered


def test_the_split_per_card_count_is_each_counts_own():
    """deploy's candidates work out a llama.cpp split once per memory and card count (_per_count): each count
    gets the split plan.split_cards gives it, asked in any order, and a runtime that splits evenly none."""
    from cardfit.services import plan

    inp = dp.DeployInput(model="llama3.1:70b", users=4.0, runtime="llama.cpp")
    s = dp.settings(inp)[0][0]
    fresh = plan.split_cards(s.ctx, s.mem)
    assert fresh is not None
    memo = dp._per_count(plan.split_cards(s.ctx, s.mem))
    for count in (2, 3, 2, 8, 3, 1):
        assert memo(count) == fresh(count)
    assert len({tuple(memo(n)) for n in (2, 3, 8)}) == 3
    assert dp._per_count(None) is None


def _composed_step_s(load: sp.Load, mc: sp.Machine, decode: int, prompt: float, flops: float) -> float:
    """serving._plain_step_s as the step was timed before it was fused: _mixed's load, the machine run as
    a plain GEMM where prompt tokens ride along, step(...).seconds and the prompt's all-reduces."""
    mixed, b = sv._mixed(load, decode, prompt, flops)
    if mc.serial_gemm and prompt:
        mc = replace(mc, serial_gemm=False)
    return sp.step(mixed, mc, b).seconds + sv._prompt_link_s(mixed, mc, b, prompt)


@settings(max_examples=400, deadline=None)
@given(tp=st.sampled_from([1, 2, 4, 8]), dp_attention=st.booleans(), ep=st.sampled_from([1, 2, 4, 8]),
       dp_holds=st.booleans(), moe_layers=st.sampled_from([48, 45, 0]),
       experts=st.sampled_from([0.0, 0.6, 0.95]), route=st.sampled_from([1.0, 8 / 128, 0.25]),
       cpu=st.sampled_from([(0.0, 0.0), (0.3, 0.0), (0.0, 0.5), (0.2, 0.7)]), serial=st.booleans(),
       expert_efficiency=st.sampled_from([0.0, 0.6]), low_bit=st.just(0.0),
       kv_split=st.sampled_from([0, 1, 8]), eager=st.sampled_from([(0, 0.0), (64, 90e-6)]),
       busbw=st.sampled_from([(), ((1 << 20, 40.0), (1 << 26, 300.0))]), nvlink=st.booleans(),
       decode=st.integers(0, 2048), prompt=st.just(0.0) | st.floats(0.5, 20_000.0),
       flops=st.floats(1e9, 1e12))
def test_the_fused_step_is_the_composed_step_to_the_bit(tp, dp_attention, ep, dp_holds, moe_layers, experts,
                                                         route, cpu, serial, expert_efficiency, low_bit,
                                                         kv_split, eager, busbw, nvlink, decode, prompt,
                                                         flops):
    """serving._plain_step_s works a step out on the numbers alone (no Shares, Load, Machine or Step built
    per step): the same seconds, to the bit, as _mixed + step(...).seconds + _prompt_link_s, over dense and
    MoE loads, offload, tensor / attention-DP (vLLM's DP engines holding all but the experts, or not) /
    expert-parallel machines (the busiest rank's routed tokens,
    the all-to-all of all or some MoE layers, or none known), serial GEMMs and eager batches (its domain,
    _fused: no low-bit weights; those take the composed step, tested below)."""
    shares = sp.Shares(1.0 - experts, experts, 0.0, route if experts else 1.0, "params", attention=0.05)
    load = sp.Load(16_000_000_000, shares, 131_072 * 1150, 1.6e10, 48, 5120, cpu_weight_fraction=cpu[0],
                   cpu_expert_fraction=cpu[1], low_bit_params=low_bit, kv_split=kv_split,
                   experts_active=8 if experts else 0, moe_layers=moe_layers if experts else 0)
    machine = sp.Machine(3350.0, 989.0, tp, link_gbps=450.0, interconnect="nvlink" if nvlink else "pcie",
                         decode_efficiency=0.873, overhead_s_per_layer=55.4e-6,
                         overhead_s_per_sequence=456e-6, graph_max_batch=eager[0],
                         overhead_s_per_layer_eager=eager[1], compute_efficiency=0.81,
                         ram_bandwidth_gbps=80.0,
                         ram_efficiency=0.7, expert_efficiency=expert_efficiency,
                         overhead_s_per_moe_layer=12e-6 if experts else 0.0,
                         allreduce_busbw=busbw, allreduce_ranks=8 if busbw else 0,
                         allreduce_link_gbps=450.0 if busbw else 0.0,
                         attention_dp=tp if dp_attention else 1, expert_parallel=min(ep, tp),
                         dp_holds_all_but_experts=dp_holds, serial_gemm=serial)
    assert sv._plain_step_s(load, machine, decode, prompt, flops) == _composed_step_s(load, machine, decode,
                                                                                      prompt, flops)


@pytest.mark.parametrize("ep, low_bit", [(8, 0.0), (1, 7e9), (8, 7e9)])
def test_a_served_step_keeps_expert_parallel_and_low_bit_costs(ep, low_bit):
    """A served step (core/serving.py step_s: what deploy, speed's served load and validate time) is
    core/speed.py's step of the same load: an expert-parallel step pays its all-to-all dispatch and
    combine and its busiest rank's expert share, a low-bit model its unpacking. _mixed once dropped the
    load's top-k, MoE layers and low-bit parameters: served steps paid tensor-parallel all-reduces instead,
    and no unpacking."""
    shares = sp.Shares(0.05, 0.95, 0.0, 8 / 128, "params", attention=0.05)
    load = sp.Load(16_000_000_000, shares, 131_072 * 1150, 1.6e10, 48, 5120, low_bit_params=low_bit,
                   experts_active=8, moe_layers=48)
    mc = sp.Machine(3350.0, 989.0, 8, link_gbps=450.0, interconnect="nvlink", decode_efficiency=0.873,
                    overhead_s_per_layer=55.4e-6, compute_efficiency=0.81, attention_dp=8 if ep > 1 else 1,
                    expert_parallel=ep, fp32_tflops=2.0, dequant_ops_per_weight=20.0)  # unpacking-bound
    r = sv.Replica(load, mc, 3.2e10, 8192, 256)
    for b in (1, 64, 256):
        assert sv.step_s(r, b, 0.0) == pytest.approx(sp.step(load, mc, b).seconds, rel=1e-12)
    # and not the step of a load without them (which charged tensor-parallel all-reduces where EP runs
    # all-to-all over NVLink, and no unpacking)
    plain = replace(load, experts_active=0, moe_layers=0, low_bit_params=0.0)
    assert sv.step_s(r, 64, 0.0) != sv.step_s(replace(r, load=plain), 64, 0.0)


def test_a_replicas_kept_link_times_answer_every_step_and_stay_bounded():
    """_step_s keeps what the fused step reads of a replica's load and machine, and its link times by the
    sequences a step carries (serving._parts_of): an expert-parallel replica stepped at more batch and prompt
    sizes than the memo keeps gets the composed step's seconds, to the bit, at each one (the memo forgotten
    and refilled on the way), and the memo never holds more than LINKS_KEPT link times."""
    shares = sp.Shares(0.1, 0.9, 0.0, 8 / 128, "params", attention=0.05)
    load = sp.Load(16_000_000_000, shares, 131_072 * 1150, 1.6e10, 48, 5120, experts_active=8, moe_layers=48)
    mc = sp.Machine(3350.0, 989.0, 8, link_gbps=450.0, interconnect="nvlink", decode_efficiency=0.873,
                    overhead_s_per_layer=55.4e-6, overhead_s_per_sequence=456e-6, compute_efficiency=0.81,
                    attention_dp=8, expert_parallel=8)
    r = sv._stepping(sv.Replica(load, mc, 1.7e10, 8192, 1024, prompt_tokens=1000))
    links = sv._parts_of(r)[-1]
    for decode in range(0, 400, 3):
        for prompt in (0.0, 1.0, 999.5, 4096.0):
            got = sv._step_s.__wrapped__(r, decode, prompt)
            assert got == _composed_step_s(load, mc, decode, prompt, sv.prompt_flops(r, prompt))
            assert len(links) <= sv.LINKS_KEPT
    assert links  # kept, not skipped

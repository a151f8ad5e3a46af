"""Disaggregated prefill / decode (core/disagg.py): the KV transfer, the two pools' queue and step, deploy's
search beside aggregated serving and the launch lines of the two roles."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cardfit.cli.deploy_cmd import _shape
from cardfit.core import disagg as pd
from cardfit.core import serving as sv
from cardfit.core import speed as sp
from cardfit.errors import InputError
from cardfit.runtimes import launch
from cardfit.services import deploy as dp

from .helpers import readme_deploy_question

# (KV bytes a token, prompt tokens, link GB/s, both directions?, seconds, why)
TRANSFERS = [
    (35_136, 8_000, 50.0, False, 35_136 * 8_000 / 50e9,
     "DeepSeek-V3 FP8 MLA cache (576 values x 61 layers x 1 byte) of an 8k prompt over a 400 Gb/s port"),
    (131_072, 1_000, 900.0, True, 131_072 * 1_000 / 450e9,
     "Llama 3.1 8B BF16 cache of a 1k prompt over H100 NVLink: 900 GB/s counts both directions"),
    (0, 1_000, 50.0, False, 0.0, "no cache (a model without attention state): nothing crosses"),
]


@pytest.mark.parametrize("kv,tokens,gbps,both,seconds,why", TRANSFERS)
def test_kv_transfer(kv: int, tokens: int, gbps: float, both: bool, seconds: float, why: str) -> None:
    assert pd.transfer_s(kv, tokens, pd.link_bytes_per_s(gbps, both)) == pytest.approx(seconds)


SHARES = sp.Shares(dense=1.0, experts=0.0, embed=0.0, route=1.0, method="params")
LOAD = sp.Load(16 * 10**9, SHARES, 131_072 * 1_150, 2 * 8e9, 32, 4096)
MC = sp.Machine(bandwidth_gbps=3350.0, tflops=989.0)
REPLICA = sv.Replica(LOAD, MC, 2 * 8e9, 8192, 256, prompt_tokens=1000)


def _pools(x: int, y: int) -> pd.Pools:
    return pd.Pools(REPLICA, x, REPLICA, y, 131_072, pd.link_bytes_per_s(900.0, True))


def test_ttft_is_wait_prefill_and_transfer() -> None:
    """One user: no wait, its prompt prefilled alone (a step takes 8 such prompts; the pool is idle most of
    the time, so its batch is mostly its own), its cache moved, its answer decoded one sequence a step."""
    res = pd.serve(_pools(1, 1), sv.Workload(1000, 300, users=1.0))
    alone = sv.prefill_s(REPLICA, sv.Workload(1000, 1), 0.0)
    batch = sv.prompt_step_s(REPLICA, 0.0, 8 * 1000)
    move = 131_072 * 1000 / 450e9
    assert alone <= res.prefill_s < alone + (batch - alone) * 0.05
    assert res.transfer_s == pytest.approx(move)
    # the queue is an open-loop approximation: one user waits a little behind its own past arrivals
    assert res.prefill_s + move <= res.ttft_mean_s < (res.prefill_s + move) * 1.01
    assert res.tpot_s == pytest.approx(sv.step_s(REPLICA, 1.0, 0.0), rel=1e-6)
    assert res.stable


def test_open_loop_throughput_is_the_arrivals() -> None:
    res = pd.serve(_pools(1, 2), sv.Workload(1000, 300, requests_per_s=2.0))
    assert res.output_tokens_per_s == pytest.approx(600.0)
    # Little's law on the decode pool: 2 requests/s x 300 tokens x TPOT spread over 2 workers
    assert res.batch == pytest.approx(2.0 * 300 * res.tpot_s / 2, rel=1e-3)


def test_overload_is_unstable() -> None:
    cap = pd.capacity_per_s(_pools(1, 1), sv.Workload(1000, 300), pd.prefill_batch_s(REPLICA, 1000),
                            pd.prompts_per_step(REPLICA, 1000))
    res = pd.serve(_pools(1, 1), sv.Workload(1000, 300, requests_per_s=cap * 1.5))
    assert not res.stable and math.isinf(res.ttft_s)


@settings(max_examples=25, deadline=None)
@given(st.floats(1, 512))
def test_more_prefill_workers_never_lengthen_the_ttft(users: float) -> None:
    w = sv.Workload(1000, 300, users=users)
    one, two = pd.serve(_pools(1, 2), w), pd.serve(_pools(2, 2), w)
    assert two.ttft_mean_s <= one.ttft_mean_s * (1 + 1e-6)
    assert two.output_tokens_per_s >= one.output_tokens_per_s * (1 - 1e-6)


@settings(max_examples=25, deadline=None)
@given(st.floats(1, 512))
def test_closed_loop_is_consistent(users: float) -> None:
    """The users' cycle: rate x (TTFT + O x TPOT) = users (to 2 %: a step is timed at whole sequences, so
    the cycle jumps where the decode batch crosses one and the root sits on the jump)."""
    res = pd.serve(_pools(2, 2), sv.Workload(1000, 300, users=users))
    rate = res.output_tokens_per_s / 300
    assert rate * (res.ttft_mean_s + 300 * res.tpot_s) == pytest.approx(users, rel=0.02)


# (busy share, closed loop?, recv interval, response lag, decode steps of handoff, why)
HANDOFFS = [
    (0.0, True, 1, 0, 0.0, "an idle decode worker reads the request and merges its cache at once"),
    (1.0, True, 1, 0, 1.5, "closed loop: the whole step running as it arrives, then half a step to merge"),
    (1.0, False, 1, 0, 1.0, "open arrivals land mid-step: half a step to be read, half to be merged"),
    (0.5, True, 1, 0, 0.75, "decoding other users' sequences half the time: half the waits"),
    (1.0, True, 5, 0, 3.5, "--scheduler-recv-interval 5: (5 - 1) / 2 steps more before the read"),
    (0.0, True, 1, 1, 1.0, "a response lag of one step delays the first token even on an idle worker"),
]


@pytest.mark.parametrize("busy,closed,recv,lag,steps,why", HANDOFFS)
def test_decode_handoff_steps(busy: float, closed: bool, recv: int, lag: int, steps: float, why: str) -> None:
    r = replace(REPLICA, recv_interval=recv, response_lag=lag)
    assert pd.handoff_s(r, 0.02, busy, closed) == pytest.approx(steps * 0.02)


# (busy share, steps the decode worker plans ahead, decode steps of a closed loop's handoff, why)
NEXT_PASS = [
    (1.0, 1, 2.5, "SGLang's overlap decode loop: the first token leaves a step after the merging pass"),
    (1.0, 0, 1.5, "no overlap scheduler (a drafting run, SGLang before 0.4): streamed in the merging pass"),
    (0.5, 1, 1.25, "decoding other users' sequences half the time: half the waits"),
    (0.0, 1, 0.0, "an idle decode worker runs no step to wait for"),
]


@pytest.mark.parametrize("busy,ahead,steps,why", NEXT_PASS)
def test_first_token_a_pass_after_the_merge(busy: float, ahead: int, steps: float, why: str) -> None:
    """SGLang's decode server (PyPI wheel 0.5.8, sglang/srt/disaggregation/decode.py
    event_loop_overlap_disagg_decode): the pass that takes an arrived request runs its prebuilt batch, then
    waits for the step launched the pass before; the prebuilt batch's output, the first token, is handled a
    pass later (managers/scheduler_output_processor_mixin.py process_batch_result_prebuilt)."""
    r = replace(REPLICA, schedule_ahead=ahead)
    assert pd.handoff_s(r, 0.02, busy, True, next_pass=True) == pytest.approx(steps * 0.02)
    assert pd.handoff_s(r, 0.02, busy, True) == pytest.approx((steps - busy * ahead) * 0.02)


@settings(max_examples=25, deadline=None)
@given(st.floats(1, 256))
def test_ttft_holds_prefill_transfer_and_handoff(users: float) -> None:
    """TTFT (mean) is at least the prompt's prefill, its cache's transfer and the decode worker's handoff;
    with other users decoding, the handoff is at least half a decode step (the merge)."""
    res = pd.serve(_pools(2, 2), sv.Workload(1000, 300, users=users))
    assert res.ttft_mean_s >= res.prefill_s + res.transfer_s + res.handoff_s - 1e-12
    if users >= 2:
        assert res.handoff_s > 0.0


# (users, sequence cap of the one decode worker, why)
BEYOND_SLOTS = [
    (8.0, 8, "as many users as slots: none waits for one"),
    (32.0, 8, "4 x the slots: 24 users wait their turn"),
    (200.0, 16, "12.5 x the slots"),
]


@pytest.mark.parametrize("users,cap,why", BEYOND_SLOTS)
def test_users_beyond_the_decode_slots_wait_in_the_ttft(users: float, cap: int, why: str) -> None:
    """A closed loop with more users than the decode worker schedules: the loop runs at the decode capacity
    and every user is in the cycle, the excess waiting for a slot in its TTFT (Little's law)."""
    link = pd.link_bytes_per_s(900.0, True)
    pools = pd.Pools(REPLICA, 4, pd.with_decode_cap(REPLICA, cap), 1, 131_072, link)
    res = pd.serve(pools, sv.Workload(1000, 300, users=users))
    rate = res.output_tokens_per_s / 300
    assert rate * (res.ttft_mean_s + 300 * res.tpot_s) == pytest.approx(users, rel=0.02)
    if users > cap * 1.5:
        held = rate * (res.ttft_mean_s - res.slot_wait_s + 300 * res.tpot_s)
        assert res.slot_wait_s == pytest.approx((users - held) / rate)
        assert res.ttft_mean_s > res.slot_wait_s > 0 and res.ttft_s > res.slot_wait_s
    else:
        assert res.slot_wait_s == 0.0


# (the worker's --max-running-requests, attention-DP ranks, prompts held from prefill to transfer, why)
HELD_SLOTS = [
    (1, 1, 1, "SGLang at --max-running-requests 1: one request pool slot, so prefill, transfer, next prompt"),
    (8, 1, 8, "TP worker: its pool is the flag's 8 slots"),
    (4, 4, 8, "DP 4 at 1 a rank (--max-running-requests 4): each rank's pool has 4, its buffers 2 x 4 // 4"),
    (16, 8, 32, "DP 8 at 2 a rank: 2 x 2 metadata buffers a rank bind before the rank's 16-slot pool"),
    (3, 4, 8, "fewer slots than ranks: a rank still schedules one (max(3 // 4, 1)), buffers for two"),
]


@pytest.mark.parametrize("seqs,dp_ranks,held,why", HELD_SLOTS)
def test_prefill_slots_held_through_the_transfer(seqs: int, dp_ranks: int, held: int, why: str) -> None:
    r = replace(REPLICA, max_seqs=seqs, machine=replace(MC, attention_dp=dp_ranks))
    assert pd.held_slots(r) == held, why


def _held_pools(seqs: int, held: bool) -> pd.Pools:
    r = replace(REPLICA, max_seqs=seqs)
    # a slow link (1 GB/s) so that a 1,000-token prompt's transfer is a sizeable share of its prefill
    return pd.Pools(r, 1, REPLICA, 4, 131_072, pd.link_bytes_per_s(1.0, False), slots_held=held)


def test_a_one_slot_prefill_worker_waits_for_each_transfer() -> None:
    """SGLang's prefill worker at one slot frees it only when the prompt's cache has crossed: arrivals
    between 1 / (prefill + transfer) and 1 / prefill overload it, where a worker that frees the slot as the
    prefill ends (vLLM) still keeps up."""
    w = sv.Workload(1000, 300)
    move = pd.transfer_s(131_072, 1000, pd.link_bytes_per_s(1.0, False))
    one = replace(REPLICA, max_seqs=1)
    batch = pd.prefill_batch_s(one, 1000)
    assert move > 0.2 * batch
    held, _ = pd.prompt_service_s(_held_pools(1, True), 1000, move)
    freed, _ = pd.prompt_service_s(_held_pools(1, False), 1000, move)
    assert held == pytest.approx(batch + move) and freed == pytest.approx(batch)
    rate = 1 / (batch + 0.5 * move)
    assert not pd.serve(_held_pools(1, True), replace(w, requests_per_s=rate)).stable
    assert pd.serve(_held_pools(1, False), replace(w, requests_per_s=rate)).stable


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 64), st.integers(100, 20_000))
def test_held_slots_never_speed_a_prefill_worker(seqs: int, tokens: int) -> None:
    """Holding slots through the transfer can only slow the prefill pool, and not at all where the slots
    cover a step's prompts and the ones still crossing (2 steps' worth, the transfer under a step)."""
    move = pd.transfer_s(131_072, tokens, pd.link_bytes_per_s(1.0, False))
    held, batch = pd.prompt_service_s(_held_pools(seqs, True), tokens, move)
    freed, _ = pd.prompt_service_s(_held_pools(seqs, False), tokens, move)
    assert held >= freed
    k = pd.prompts_per_step(replace(REPLICA, max_seqs=seqs), tokens)
    if seqs >= 2 * k and move <= batch:
        assert held == pytest.approx(freed)


# an attention-DP prefill worker: 8 ranks of a tp 8 machine, the Llama-like load's attention a quarter of its
# prompt FLOPs, the ranks' budgets adding up to 8,192 tokens and their caps to 8 prompts
ATTENTION = 0.25 * 2 * 8e9
DP_REPLICA = replace(REPLICA, machine=replace(MC, tp=8, attention_dp=8), max_seqs=8, prompt_tokens=8192,
                     prefill_attention_flops_per_token=ATTENTION)


def _ranks(dp_ranks: int, tokens: int, seqs: int = 8, chunk: int = 8192) -> sv.Replica:
    return replace(DP_REPLICA, machine=replace(DP_REPLICA.machine, attention_dp=dp_ranks), max_seqs=seqs,
                   chunk_tokens=chunk, prompt_tokens=tokens)


def _old_prefill_batch_s(r: sv.Replica, tokens: int) -> float:
    """The one-group worker of core/disagg.py before attention-DP ranks stepped side by side."""
    k = max(1, min(r.chunk_tokens // tokens, r.max_seqs))
    if k == 1:
        return sv.prefill_s(r, sv.Workload(tokens, 1), 0.0)
    return sv.prompt_step_s(r, 0.0, k * tokens)


# (attention-DP ranks, prompt tokens, sequence cap, prompts a step, steps a batch, step tokens, why)
RANK_STEPS = [
    (1, 1000, 8, 8, 1, 8000, "no attention DP: whole prompts up to the 8,192-token budget, as before"),
    (1, 8192, 8, 1, 1, 8192, "no attention DP: one prompt fills the budget"),
    (1, 20_000, 8, 1, 3, 8192, "no attention DP: a long prompt in 8,192-token chunks (prefill_s), as before"),
    (8, 8192, 8, 8, 8, 8192, "SGLang DP 8 (issue 26's B200 runs): each rank one prompt in 1,024-token "
                             "chunks, 8 prompts a step, each prompt 8 steps of the 8 ranks' 8,192 tokens"),
    (8, 1000, 8, 8, 1, 8000, "DP 8, a prompt under a rank's 1,024 tokens: one whole prompt a rank"),
    (8, 400, 16, 16, 1, 6400, "DP 8 at 2 a rank: each rank's budget holds both its prompts"),
    (4, 3000, 8, 4, 2, 8192, "DP 4: 2,048 tokens a rank, a 3,000-token prompt in 2 steps (the last 952)"),
]


@pytest.mark.parametrize("ranks,tokens,seqs,k,steps,step_tokens,why", RANK_STEPS)
def test_attention_dp_ranks_step_their_prompts_side_by_side(ranks: int, tokens: int, seqs: int, k: int,
                                                             steps: int, step_tokens: int, why: str) -> None:
    r = _ranks(ranks, tokens, seqs)
    assert pd.prompts_per_step(r, tokens) == k, why
    batch = pd.prefill_batch_s(r, tokens)
    if ranks == 1:  # unchanged
        assert batch == _old_prefill_batch_s(r, tokens), why
        return
    # every full step: the ranks' pieces together, each piece's attention in its own group (no attention
    # charged twice); a batch of k prompts takes `steps` of them, the last holding what is left
    piece = step_tokens // ranks
    full = sv.prompt_step_s(replace(r, prompt_tokens=piece), 0.0, step_tokens)
    assert sv.prompt_flops(replace(r, prompt_tokens=piece), step_tokens) == r.prefill_flops_per_token
    last = tokens - (steps - 1) * piece if steps > 1 else piece
    tail = sv.prompt_step_s(replace(r, prompt_tokens=last), 0.0, ranks * last)
    assert batch == pytest.approx((steps - 1) * full + tail), why
    # an idle worker takes one prompt on one rank, in that rank's chunks, its attention in one group
    alone = sv.prefill_s(replace(r, chunk_tokens=r.chunk_tokens // ranks), sv.Workload(tokens, 1), 0.0)
    assert pd.alone_s(r, tokens) == pytest.approx(alone), why


def test_dp8_worker_serves_more_prompts_than_one_group() -> None:
    """Issue 26: the DP 8 worker that took one whole 8,192-token prompt a step (its attention on one rank's
    group, 8 x the spread share) serves its prompts faster with its ranks side by side, each prompt longer."""
    r = _ranks(8, 8192)
    pools = pd.Pools(r, 1, REPLICA, 4, 131_072, pd.link_bytes_per_s(900.0, True))
    service, batch = pd.prompt_service_s(pools, 8192, 0.0)
    old = _old_prefill_batch_s(r, 8192)
    assert service < old < batch


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([1, 2, 4]), st.integers(100, 40_000), st.integers(1, 4))
@example(1, 8192, 1).via("one prompt fills the budget: 2 ranks take two, each in two chunks")
@example(4, 16_384, 2).via("8 ranks of 1,024 tokens: 16 steps of 8 prompts")
@example(2, 512, 1).via("whole prompts fill every rank's chunk at 2, 4 ranks")
def test_more_dp_ranks_never_slow_the_prefill_pool(ranks: int, tokens: int, per_rank: int) -> None:
    """At the same total budget (8,192 tokens) and sequence cap, twice the attention-DP ranks serve the
    prompts as fast, to within the whole-step granularity the model keeps: each rank's chunk is half, but
    twice the ranks step at once with no attention charged twice, and a prompt's ceil(prompt ÷ chunk) steps
    are at most twice as many; what can be lost is a rank's budget that its whole prompts do not fill (a
    rank takes floor(chunk ÷ prompt) of them) or a last chunk's step of few tokens, at most two steps of one
    token over the prompts of a step (the step's fixed cost: its weight reads and launches)."""
    def worker(dp_ranks: int) -> sv.Replica:
        return _ranks(dp_ranks, tokens, seqs=8 * per_rank)

    def service(dp_ranks: int) -> float:
        pools = pd.Pools(worker(dp_ranks), 1, REPLICA, 4, 131_072, pd.link_bytes_per_s(900.0, True))
        return pd.prompt_service_s(pools, tokens, 0.0)[0]

    more = worker(2 * ranks)
    slack = 2 * sv.prompt_step_s(more, 0.0, 1) / pd.prompts_per_step(more, tokens)
    assert service(2 * ranks) <= service(ranks) + slack
    # with the prompts filling every rank's chunk, no slack at all
    if tokens % (8192 // ranks) == 0 or (8192 // (2 * ranks)) % tokens == 0:
        assert service(2 * ranks) <= service(ranks) * (1 + 1e-9)


@pytest.mark.parametrize("runtime,held", [("sglang@0.5.8", True), ("vllm", False)])
def test_pinned_pools_hold_slots_as_their_engine_does(runtime: str, held: bool) -> None:
    """SGLang's prefill server keeps a prompt's slot through its transfer (runtimes/sglang.py
    PD_SLOT_HELD_THROUGH_TRANSFER); vLLM's finishes the request and keeps only its blocks for the reader."""
    inp = dp.DeployInput(model="llama-3.1-8b", users=8.0, input_tokens=2000, output_tokens=200,
                         gpu=("H100 SXM",), runtime=runtime, tp=1, prefill_workers=1, decode_workers=1,
                         prefill_batch_size=1)
    pools = dp.pinned_answer(inp).pools
    assert pools is not None and pools.pools.slots_held is held


@pytest.mark.parametrize("runtime,next_pass", [("sglang@0.5.8", True), ("vllm", False)])
def test_pinned_pools_first_token_as_their_engine_streams_it(runtime: str, next_pass: bool) -> None:
    """SGLang's decode server streams a transferred request's first token a pass after merging it
    (runtimes/sglang.py PD_FIRST_TOKEN_NEXT_PASS): at 8 users, each decode step running the others'
    sequences, the mean TTFT is that much (busy x one decode step) longer than the same pools without it."""
    inp = dp.DeployInput(model="llama-3.1-8b", users=8.0, input_tokens=2000, output_tokens=200,
                         gpu=("H100 SXM",), runtime=runtime, tp=1, prefill_workers=1, decode_workers=1,
                         prefill_batch_size=1)
    pinned = dp.pinned_answer(inp).pools
    assert pinned is not None and pinned.pools.first_token_next_pass is next_pass
    if next_pass:  # SGLang's overlap scheduler plans one step ahead (runtimes.toml schedule_ahead_steps)
        w = sv.Workload(2000, 200, users=8.0)
        on = pd.serve(pinned.pools, w)
        off = pd.serve(replace(pinned.pools, first_token_next_pass=False), w)
        assert pinned.pools.decode.schedule_ahead == 1
        assert 0.5 * on.tpot_s < on.ttft_mean_s - off.ttft_mean_s <= on.tpot_s * (1 + 1e-6)


# --- deploy --------------------------------------------------------------------------------------------

@cache
def _report(runtime: str, users: float, input_tokens: int) -> dict:
    # a TTFT target P/D pools can meet at the pessimistic end of their likely range, which the disaggregated
    # records' out-of-sample TTFT error widens (data/accuracy.toml [[feature_range]] disaggregated: 1 / 0.065,
    # about 15x the prediction; services/deploy.py _pools_meet)
    # (TPOT 50 -> 400 ms, 2026-12-07: with SGLang 0.5.23 current no P/D record is on the user path, so the
    # disaggregated band is every release's, TPOT up to 1 / 0.227 of the prediction)
    inp = dp.DeployInput(model="deepseek-v3", users=users, input_tokens=input_tokens, output_tokens=300,
                         ttft_ms=20000, tpot_ms=400, gpu=("H200",), runtime=runtime, quant="fp8")
    return dp.deploy_report(inp).to_json()


def test_deploy_says_which_wins_and_why() -> None:
    """DeepSeek-V3 on H200s, 64 users with 8,000-token prompts: several 8-card replicas, so the search weighs
    prefill and decode pools of the same workers against them and names the winner in `why`."""
    d = _report("sglang", 64.0, 8000)
    got = d["disaggregation"]
    assert got["winner"] in ("aggregated", "disaggregated")
    assert got["why"].startswith(got["winner"] + ":")
    one = got["deployment"]
    assert one is not None and one["disaggregated"] is not None
    pools = one["disaggregated"]
    assert one["replicas"] == pools["prefill"]["replicas"] + pools["decode"]["replicas"]
    # SPEC §9's count = tp x pp x replicas holds per pool (a pool's worker may take fewer cards than the other
    # pool's: README "disaggregated"); the top-level tp, pp are a decode worker's
    assert one["count"] == sum(p["count"] * p["replicas"] for p in pools.values())
    assert all(p["count"] == p["tp"] * one["pp"] for p in pools.values())
    assert one["tp"] == pools["decode"]["tp"]
    lines = one["command"].splitlines()
    assert "--disaggregation-mode prefill" in lines[0] and "--disaggregation-mode decode" in lines[1]
    if got["winner"] == "aggregated":
        assert d["best"]["disaggregated"] is None
        assert one["monthly_usd"] >= d["best"]["monthly_usd"]
    else:
        assert d["best"] == one


def test_one_card_answers_do_not_search_disaggregation() -> None:
    inp = dp.DeployInput(model="llama-3.1-8b", users=8, gpu=("H100 SXM",), runtime="vllm")
    assert "disaggregation" not in dp.deploy_report(inp).to_json()


# --- one disaggregated deployment pinned (deploy --tp N --prefill-workers X --decode-workers Y) ------------

def test_a_pinned_deployment_is_what_the_search_timed() -> None:
    """The pools deploy's search picks (DeepSeek-V3 FP8 on H200s, SGLang, 256 users, 8,000 / 1,000 tokens),
    pinned as options, are timed by the same code: the same TTFT, TPOT, throughput and rent (the sequence cap
    may differ: the search keeps the memory model's error bar free, a pinned deployment is the engine's own
    pool), and one command per role."""
    # targets the pools meet at the pessimistic end of their likely range (since 2026-12-07 a P/D
    # deployment's range is the disaggregated records' own, TTFT up to 1 / 0.064 of the prediction)
    # (TPOT 60 -> 400 ms, 2026-12-07: the disaggregated TPOT band is every release's again, above)
    kw = dict(users=256.0, input_tokens=8000, output_tokens=1000, ttft_ms=30000.0, tpot_ms=400.0,
              gpu=("H200",), runtime="sglang")
    searched = dp.deploy_report(dp.DeployInput(model="deepseek-v3", **kw)).to_json()
    one = searched["disaggregation"]["deployment"]
    pools = one["disaggregated"]
    pinned = dp.deploy_report(dp.DeployInput(
        model="deepseek-v3", quant=one["quant"], kv_dtype=one["kv_dtype"], tp=pools["decode"]["tp"],
        prefill_workers=pools["prefill"]["replicas"], decode_workers=pools["decode"]["replicas"],
        prefill_dp=pools["prefill"]["dp"], decode_dp=pools["decode"]["dp"], **kw)).to_json()
    got = pinned["best"] or pinned["closest"]
    assert got["disaggregated"] == pools
    for key in ("ttft_ms", "ttft_mean_ms", "tpot_ms", "aggregate_tokens_per_s"):
        assert got[key] == pytest.approx(one[key], rel=0.02), key
    assert (got["count"], got["monthly_usd"]) == (one["count"], one["monthly_usd"])
    lines = got["command"].splitlines()
    assert "--disaggregation-mode prefill" in lines[0] and "--disaggregation-mode decode" in lines[1]
    assert got["likely"]["tpot_ms"][0] <= got["tpot_ms"] <= got["likely"]["tpot_ms"][1]


# (prefill workers, prefill tp, prefill dp, decode workers, decode tp, decode dp, why)
POOLS = [
    (1, 8, 1, 1, 8, 8, "aiconfigurator cfg434: a TP-8 prefill worker, a decode worker of 8 attention groups"),
    (7, 4, 4, 2, 8, 8, "aiconfigurator's largest pools: seven 4-card prefill workers, two 8-card decoders"),
    (2, 4, 1, 1, 8, 1, "prefill workers of half the decode worker's cards, all tensor parallel"),
]


@pytest.mark.parametrize("x,ptp,pdp,y,dtp,ddp,why", POOLS)
def test_pinned_pools_of_their_own_split(x: int, ptp: int, pdp: int, y: int, dtp: int, ddp: int,
                                         why: str) -> None:
    """Each pool keeps its own split: the cards in all are each pool's workers × cards, the JSON gives each
    pool's, the top-level split is a decode worker's and each role's command launches its own split."""
    d = dp.deploy_report(dp.DeployInput(
        model="deepseek-v3", users=64.0, input_tokens=8000, output_tokens=1000, gpu=("H200",),
        runtime="sglang", quant="fp8", tp=8, prefill_workers=x, prefill_tp=ptp, prefill_dp=pdp,
        decode_workers=y, decode_tp=dtp, decode_dp=ddp)).to_json()
    one = d["best"] or d["closest"]
    pre, dec = one["disaggregated"]["prefill"], one["disaggregated"]["decode"]
    assert (pre["replicas"], pre["tp"], pre["dp"], pre["ep"]) == (x, ptp, pdp, ptp if pdp > 1 else 1)
    assert (dec["replicas"], dec["tp"], dec["dp"], dec["ep"]) == (y, dtp, ddp, dtp if ddp > 1 else 1)
    assert one["count"] == x * ptp + y * dtp and one["replicas"] == x + y
    assert (one["tp"], one["dp"], one["ep"]) == (dtp, dec["dp"], dec["ep"])
    prefill_line, decode_line = one["command"].splitlines()
    assert f"--tp-size {ptp} " in prefill_line and f"--tp-size {dtp} " in decode_line
    assert ("--attn-dp-size" in prefill_line) == (pdp > 1)  # 0.5.23 (data/releases.toml attn_dp_size_flag)
    assert one["ttft_mean_ms"] > one["prefill_ms"] > 0 and one["tpot_ms"] > 0


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6))
def test_pinned_prefill_workers_never_lengthen_the_ttft(x: int, y: int) -> None:
    """One more prefill worker never lengthens a pinned deployment's TTFT nor lowers its throughput
    (Llama-3.1-70B FP8 on H100s, vLLM, TP 4 workers, 32 users, 4,000 / 500 tokens)."""
    def pinned(prefill: int) -> dict:
        inp = dp.DeployInput(model="llama-3.1-70b", users=32.0, input_tokens=4000, output_tokens=500,
                             gpu=("H100 SXM",), runtime="vllm", quant="fp8", tp=4, prefill_workers=prefill,
                             decode_workers=y)
        d = dp.deploy_report(inp).to_json()
        return d["best"] or d["closest"]

    one, more = pinned(x), pinned(x + 1)
    assert more["ttft_mean_ms"] <= one["ttft_mean_ms"] * (1 + 1e-6)
    assert more["aggregate_tokens_per_s"] >= one["aggregate_tokens_per_s"] * (1 - 1e-3)


@pytest.mark.parametrize("args,error", [
    (["--prefill-workers", "1", "--decode-workers", "1"],
     "--prefill-workers applies to one pinned deployment"),
    (["--tp", "8", "--prefill-workers", "1"], "a disaggregated deployment has both pools"),
    (["--tp", "8", "--decode-tp", "4"], "--decode-tp shapes a pool of a disaggregated deployment"),
    (["--tp", "8", "--prefill-workers", "1", "--decode-workers", "1", "--requests", "64",
      "--requests-per-s", "2"], "--requests with --requests-per-s times a stage of arrivals"),
    (["--tp", "8", "--prefill-workers", "1", "--decode-workers", "1", "--decode-dp", "3"],
     "a decode worker's 3 attention groups do not divide its 8"),
    (["--tp", "8", "--prefill-workers", "1", "--decode-workers", "1", "--decode-dp", "8",
      "--expert-parallel", "8"], "--expert-parallel: a disaggregated worker"),
    (["--tp", "8", "--prefill-workers", "1", "--decode-workers", "1", "--runtime", "trtllm"],
     "trtllm has no disaggregated prefill/decode that cardfit launches"),
])
def test_pinned_pools_refusals(run_cli, args: list[str], error: str) -> None:
    """Pools without a pin, half a pair of pools, a pool option without pools, a benchmark run of open
    arrivals (a closed loop's is timed: test_pools_benchmark_*), attention groups that do not divide the
    ranks, a second EP, a runtime without P/D: one line, exit 2."""
    load = [] if "--requests-per-s" in args else ["--users", "64"]
    base = ["deploy", "deepseek-v3", *load, "--gpu", "H200"]
    if "--runtime" not in args:
        base += ["--runtime", "sglang"]
    code, out, err = run_cli(*base, *args)
    assert code == 2 and out == ""
    assert err.startswith("Error: " + error) and len(err.strip().splitlines()) == 1, err


def test_pinned_pools_hold_every_user() -> None:
    """64 users on one decode worker that schedules 8 sequences: its TTFT counts none of the 56 waiting for a
    slot, so the deployment does not meet the targets and says the load is why; 8 users fit and are timed
    (DeepSeek-V3 FP8 on H200s, SGLang, TP-8 workers, 8,000 / 1,000 tokens)."""
    def report(users: float) -> dict:
        return dp.deploy_report(dp.DeployInput(
            model="deepseek-v3", users=users, input_tokens=8000, output_tokens=1000, ttft_ms=10000.0,
            gpu=("H200",), runtime="sglang", quant="fp8", tp=8, prefill_workers=1, decode_workers=1,
            decode_batch_size=8)).to_json()

    full = report(64.0)
    assert full["best"] is None and full["failing"]["target"] == "load"
    assert "decode workers hold 8 sequences" in full["failing"]["text"]
    held = report(8.0)
    assert held["best"] is not None and held["best"]["batch_per_replica"] <= 8


# --- --cards N: the N cards split into prefill and decode pools ---------------------------------------------

# (users or None: the most the cards serve, TPOT target ms, why)
ON_CARDS = [
    (64.0, 100.0, "a light load: aggregated replicas serve it faster, the pools are weighed and named"),
    (None, 100.0, "no load: the pools serve more users within the targets than the replicas do"),
    (None, 40.0, "no load, a tighter TPOT"),
]


@pytest.mark.parametrize("users,tpot,why", ON_CARDS)
def test_cards_search_pools_that_fill_them(users: float | None, tpot: float, why: str) -> None:
    """DeepSeek-V3 FP8 on exactly 32 H200s (SGLang, 8,000 / 1,000 tokens): P/D is searched on the same 32
    cards (each split of the 8-card workers that fill them), its winner says why, and every deployment shown
    takes exactly the 32 cards."""
    inp = dp.DeployInput(model="deepseek-v3", users=users, input_tokens=8000, output_tokens=1000,
                         tpot_ms=tpot, gpu=("H200",), runtime="sglang", quant="fp8", cards=32)
    d = dp.deploy_report(inp).to_json()
    got = d["disaggregation"]
    assert got["why"].startswith(got["winner"] + ":")
    if got["deployment"] is not None:
        pools = got["deployment"]["disaggregated"]
        assert sum(p["count"] * p["replicas"] for p in pools.values()) == 32
        assert got["deployment"]["count"] == 32
    if d["best"] is not None:
        assert d["best"]["count"] == 32
        assert (d["best"]["disaggregated"] is not None) == (got["winner"] == "disaggregated")
    if users is None and got["winner"] == "disaggregated":
        # the load found is the pools': pinned to them, that many users meet the targets
        pools = d["best"]["disaggregated"]
        pinned = dp.deploy_report(dp.DeployInput(
            model="deepseek-v3", users=d["workload"]["users"], input_tokens=8000, output_tokens=1000,
            tpot_ms=tpot, gpu=("H200",), runtime="sglang", quant="fp8", kv_dtype=d["best"]["kv_dtype"],
            tp=8, prefill_workers=pools["prefill"]["replicas"],
            decode_workers=pools["decode"]["replicas"])).to_json()
        assert pinned["meets_targets"]


def test_cards_no_load_answer_is_the_winners_at_its_users() -> None:
    """No load on 32 H200s at the default targets: the users found are the most either way serves, `best` is
    the winner's deployment at them, and asked again with that load the answer is the same. (Before the
    decode worker's handoff steps were counted in a pool's TTFT, a split into 3 prefill + 1 decode workers
    won here at 151 users; with them its TTFT's pessimistic end passes the 2 s target and 4 aggregated
    replicas win at 121.)"""
    inp = dp.DeployInput(model="deepseek-v3", input_tokens=8000, output_tokens=1000, gpu=("H200",),
                         runtime="sglang", quant="fp8", cards=32)
    d = dp.deploy_report(inp).to_json()
    assert d["workload"]["cards_found_users"] and d["best"] is not None
    won = d["disaggregation"]["winner"]
    assert (d["best"]["disaggregated"] is not None) == (won == "disaggregated")
    if won == "disaggregated":
        assert d["best"] == d["disaggregation"]["deployment"]
    again = dp.deploy_report(dp.DeployInput(
        model="deepseek-v3", users=d["workload"]["users"], input_tokens=8000, output_tokens=1000,
        gpu=("H200",), runtime="sglang", quant="fp8", cards=32)).to_json()
    assert again["best"] == d["best"]  # asked with that load, the same answer


@pytest.mark.parametrize("cards", [8, 16, 32])
def test_cards_an_impossible_target_names_the_closest_on_those_cards(cards: int) -> None:
    """Nothing meets a 5 ms TPOT: the closest deployment shown, and the miss it reports, are on exactly the
    N cards asked for (closest() took the fewest replicas of any size before: 8 cards' miss for 32)."""
    d = dp.deploy_report(dp.DeployInput(model="deepseek-v3", users=256.0, tpot_ms=5.0, gpu=("H200",),
                                        runtime="sglang", quant="fp8", cards=cards)).to_json()
    assert not d["meets_targets"] and d["closest"]["count"] == cards
    assert d["failing"]["target"] == "tpot_ms"
    assert d["failing"]["achieved"] == pytest.approx(d["closest"]["tpot_ms"], rel=0.01)


# --- launch lines --------------------------------------------------------------------------------------

@pytest.mark.parametrize("runtime,flag,value", [
    ("sglang", "--disaggregation-mode", "decode"),
    ("vllm", "--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'),
])
def test_pd_worker_flags(runtime: str, flag: str, value: str) -> None:
    cmd = launch.build(runtime, "deepseek-ai/DeepSeek-V3", tp=8, max_model_len=8300, max_num_seqs=154,
                       disaggregation="decode")
    args = list(cmd.argv)
    assert args[args.index(flag) + 1] == value
    assert "decode worker" in cmd.notes[-1]


OPTIONS = Path(__file__).parent / "data" / "runtime_options"
ENGINE_OPTIONS = {"vllm": "vllm.toml", "sglang": "sglang.toml"}


# (runtime, role, launch options, why)
DYNAMO = [
    ("vllm", "prefill", dict(tp=8, max_model_len=8300, max_num_seqs=154), "the role in Dynamo's own flag"),
    ("vllm", "decode", dict(tp=8, max_model_len=8300, max_num_seqs=154, kv_dtype="fp8"),
     "Dynamo sets the NIXL connector itself: no --kv-transfer-config"),
    ("sglang", "prefill", dict(tp=8, max_model_len=8300, max_num_seqs=154), "SGLang's flags, NIXL named"),
    ("sglang", "decode", dict(tp=8, max_model_len=4096, max_num_seqs=1024, attention_dp=8, expert_parallel=8),
     "a decode worker of 8 attention groups, experts EP 8"),
]


@pytest.mark.parametrize("runtime,role,opts,why", DYNAMO)
def test_dynamo_worker_flags(runtime: str, role: str, opts: dict, why: str) -> None:
    """A Dynamo worker line (`python3 -m dynamo.<engine>`): every flag is the engine's own
    (tests/data/runtime_options/<engine>.toml) or the Dynamo wrapper's (dynamo.toml, from its sources), each
    value among its choices, the role named once."""
    import tomllib

    engine = tomllib.loads((OPTIONS / ENGINE_OPTIONS[runtime]).read_text())
    dyn = tomllib.loads((OPTIONS / "dynamo.toml").read_text())
    cmd = launch.build(runtime, "deepseek-ai/DeepSeek-V3", quant="fp8", checkpoint_quantized=True,
                       disaggregation=role, dynamo=True, **opts)
    args = list(cmd.argv)
    assert args[:3] == ["python3", "-m", f"dynamo.{runtime}"]
    for flag in cmd.flags():
        assert flag in engine["flags"] or (runtime == "vllm" and flag in dyn["flags"]), flag
    assert args.count("--disaggregation-mode") == 1 and args[args.index("--disaggregation-mode") + 1] == role
    for flag, allowed in dyn["choices"].items():
        if flag in args:
            assert args[args.index(flag) + 1] in allowed, flag
    assert "--kv-transfer-config" not in args and "NVIDIA Dynamo" in cmd.notes[-1]


# (launch options of a TensorRT-LLM replica, why the case is tricky)
DYNAMO_TRTLLM = [
    (dict(tp=1, max_model_len=8192, max_num_seqs=64), "the smallest line: no YAML, no --extra-engine-args"),
    (dict(tp=2, pp=2, max_model_len=8192, max_num_seqs=64, gpu_memory_utilization=0.85,
          max_batched_tokens=8192), "pipeline stages, the KV pool's share, the token budget: Dynamo's names"),
    (dict(tp=8, max_model_len=8300, max_num_seqs=256, kv_dtype="fp8", attention_dp=8, expert_parallel=8,
          cuda_graph_max_bs=64), "attention DP + EP: per-rank batch, the YAML (KV dtype, attention DP, "
     "graphs) read through --extra-engine-args, the graph cap appended to the Dynamo line, not as --config"),
]


@pytest.mark.parametrize("opts,why", DYNAMO_TRTLLM, ids=["tp1", "tp2-pp2", "dp8-ep8"])
def test_dynamo_trtllm_worker_is_the_trtllm_serve_line_under_dynamos_names(opts: dict, why: str) -> None:
    """`python3 -m dynamo.trtllm`: every flag is in Dynamo's own parser (dynamo.toml [trtllm], from its
    backend_args.py), each trtllm-serve setting reappears with its value under the flag Dynamo names the same
    LLM API argument with, and the YAML is the one trtllm-serve would read."""
    import tomllib

    dyn = tomllib.loads((OPTIONS / "dynamo.toml").read_text())["trtllm"]
    model = "deepseek-ai/DeepSeek-V3"
    own = launch.build("trtllm", model, quant="fp8", checkpoint_quantized=True, **opts)
    cmd = launch.build("trtllm", model, quant="fp8", checkpoint_quantized=True, dynamo=True, **opts)
    args, mine = list(cmd.argv), list(own.argv)
    assert args[:5] == ["python3", "-m", "dynamo.trtllm", "--model", model], why
    for flag in cmd.flags():
        assert flag in dyn["flags"], flag
    for flag in own.flags():
        if flag == "--backend":  # Dynamo's worker runs the PyTorch backend; it has no such flag
            continue
        theirs = dyn["same"][flag]
        assert args[args.index(theirs) + 1] == mine[mine.index(flag) + 1], flag
    assert len(cmd.flags()) == len(own.flags()), why  # --model in, --backend out
    assert cmd.files == own.files and "NVIDIA Dynamo" in cmd.notes[-1]


def test_dynamo_lines_of_a_disaggregated_deployment() -> None:
    """A P/D deployment gives its pools under Dynamo too (the frontend, then one worker per role, with the
    split and settings of the engine's own lines); an aggregated one has no Dynamo lines."""
    d = dp.deploy_report(dp.DeployInput(
        model="deepseek-v3", users=64.0, input_tokens=8000, output_tokens=1000, gpu=("H200",),
        runtime="vllm", quant="fp8", tp=8, prefill_workers=1, decode_workers=2)).to_json()
    one = d["best"] or d["closest"]
    frontend, prefill, decode = one["dynamo_command"].splitlines()
    assert frontend == "python3 -m dynamo.frontend"
    own = one["command"].splitlines()
    for line, mine, role in ((prefill, own[0], "prefill"), (decode, own[1], "decode")):
        assert line.startswith("python3 -m dynamo.vllm --model deepseek-ai/DeepSeek-V3 ")
        assert f"--disaggregation-mode {role}" in line
        split = mine.split(" --kv-transfer-config")[0].removeprefix("vllm serve deepseek-ai/DeepSeek-V3 ")
        assert split in line  # the same split, context, sequences and memory share
    agg = dp.deploy_report(dp.DeployInput(model="llama-3.1-8b", users=8.0, gpu=("H100 SXM",),
                                          runtime="vllm", tp=1)).to_json()
    assert "dynamo_command" not in agg["best"]
    with pytest.raises(InputError, match="no NVIDIA Dynamo worker"):
        launch.build("llama.cpp", "m.gguf", max_model_len=4096, dynamo=True)


def test_pd_refusals() -> None:
    with pytest.raises(InputError, match="no 'prefill' worker"):
        launch.build("llama.cpp", "m.gguf", max_model_len=4096, disaggregation="prefill")
    with pytest.raises(InputError, match="no 'both' worker"):
        launch.build("vllm", "m", max_model_len=4096, disaggregation="both")


# --- validation: the records of data/validation/serving_aic_pd.toml ----------------------------------------

def test_pd_records_are_timed_as_two_pools() -> None:
    """aiconfigurator's SGLang 0.5.8 run of DeepSeek-V3 FP8 on H200: one prefill worker of TP 8 and one decode
    worker of 8 attention-DP groups (experts EP 8), 128 users, 8,192 in / 1,024 out, asked as deploy pinned to
    those pools (validation/serving.py record_input: --prefill-workers 1 --decode-workers 1 --decode-dp 8 …).
    Timed as the two pools
    (first contact, as one aggregated TP-8 replica: TTFT +1,447 %, TPOT +31 %), its TPOT within 20 % of the
    40.6 ms measured and its TTFT, a queue at the one prefill worker, from 0.7x to 2x the 3,644 ms measured.
    The queue is near saturation and moves several times as fast as the decode pool: since served steps pay
    the decode worker's all-to-all instead of tensor-parallel all-reduces (core/serving.py _mixed), TPOT
    38.3 -> 35.5 ms (-6 % -> -13 %) sends the prefill worker more prompts and TTFT goes 4,336 -> 6,595 ms
    (+19 % -> +81 %, the safe side); it was held within 30 % before."""
    import tomllib
    from importlib import resources

    from cardfit.validation.validate import predict

    text = resources.files("cardfit.data").joinpath("validation/serving_aic_pd.toml").read_text()
    rows = {r["id"]: r for r in tomllib.loads(text)["record"]}
    base = "aic-pd-row-dsr1_h200_sglang_fp8_disagg_8192x1024_c128_cfg434"
    tpot, ttft = predict(rows[f"{base}-tpot"]), predict(rows[f"{base}-ttft"])
    assert "1 prefill worker of 8 cards (TP 8) + 1 decode worker of 8 cards (attention DP 8, EP 8)" \
        in tpot.how
    assert tpot.predicted == pytest.approx(40.6, rel=0.2)
    assert 0.7 * 3644.4 <= ttft.predicted <= 2 * 3644.4


def test_emit_refuses_a_disaggregated_best(run_cli) -> None:
    """--emit writes one pool; where prefill and decode workers apart are cheapest it says so in one line."""
    # pinned to the pools (the search's cheapest at these targets ties with one pool, which wins the tie)
    code, out, err = run_cli("deploy", "deepseek-v3", "--users", "256", "--input-tokens", "8000",
                             "--output-tokens", "1000", "--ttft-ms", "30000", "--tpot-ms", "400",
                             "--gpu", "H200", "--runtime", "sglang", "--tp", "8", "--prefill-workers", "3",
                             "--decode-workers", "6", "--emit", "compose")
    assert code == 2 and out == ""
    assert err.startswith("Error: --emit writes one pool") and len(err.strip().splitlines()) == 1


# --- the decode server's admission and the decode pool's fixed point (issue 26, high-load P/D rows) --------

def _aic_pd(row: str) -> dict:
    import tomllib
    from importlib import resources

    text = resources.files("cardfit.data").joinpath("validation/serving_aic_pd.toml").read_text()
    return {r["id"]: r for r in tomllib.loads(text)["record"]}[row]


def _c4096_pools() -> dp.PinnedPools:
    from cardfit.validation.serving import record_input

    inp, _, _ = record_input(_aic_pd("aic-pd-row-dsr1_gb200_sglang_fp8_disagg_1024x1024_c4096_cfg508-ttft"))
    pinned = dp.pinned_answer(inp).pools
    assert pinned is not None
    return pinned


# (KV pool tokens of the worker, tokens a sequence holds, reserve, DP ranks, sequences admitted, why)
ADMITTED = [
    (7_943_406, 1536, 512, 8, 8 * 484, "GB200 DP 8, 1,024 / 1,024: 992,925 tokens a rank over 1,536 + 512"),
    (1_000_000, 9216 - 512, 512, 1, 108, "one TP worker, 8,192 / 1,024: its one pool over 8,704 + 512"),
    (1_000, 1536, 512, 4, 4, "a pool below one sequence a rank still admits one a rank"),
]


@pytest.mark.parametrize("pool,held,reserve,ranks,seqs,why", ADMITTED)
def test_decode_admission_keeps_a_reserve_per_request(pool: int, held: int, reserve: int, ranks: int,
                                                      seqs: int, why: str) -> None:
    assert pd.admitted(pool, held, reserve, ranks) == seqs


def test_sglang_decode_workers_admit_what_their_reserve_leaves() -> None:
    """aiconfigurator's SGLang 0.5.8 run of DeepSeek-R1 FP8 on GB200 at 4,096 users, one decode worker of 8
    attention-DP ranks at 512 a rank (decode_batch_size): SGLang's decode server keeps 512 tokens free for
    every request it holds (runtimes/sglang.py PD_DECODE_RESERVED_TOKENS, disaggregation/decode.py
    pop_preallocated), so each rank admits its pool ÷ (1,024 + 512 + 512) sequences: 3,872 of the 4,096 the
    flag allows (the run's own rate gives 3,876 decoding: users ÷ (TTFT + O × TPOT) × O × TPOT); the rest
    wait before their prefill. The old cap took the flag's 4,096, so no user waited.
    Since SGLang's attention-DP reserve is modelled (runtimes/sglang.py attention_dp_reserve_mib: 0.5.8's
    _handle_gpu_memory_settings adds cuda_graph_max_bs 512 x dp_size 8 x 4.5 MiB = 18 GiB before the
    floor, for a decode worker too; the prefill-role exclusion came in 0.5.15) the worker's default pool is
    5.73 M tokens, not 7.94 M, and admits 2,792 (28% under the run's 3,876: the row states no
    --mem-fraction-static, which aiconfigurator's generator emits where its mapping sets one,
    generator/config/backend_templates/sglang/cli_args.j2; the band follows the sourced reserve, not the
    run)."""
    pinned = _c4096_pools()
    dec = pinned.decode.cand
    assert dec.seqs <= 4096
    assert pinned.pools.decode.max_seqs == pd.admitted(dec.kv_tokens, 1024 + 512, 512, 8) < 4096
    assert 2700 <= pinned.pools.decode.max_seqs <= 2900


def test_vllm_decode_workers_keep_no_reserve() -> None:
    """vLLM's decode worker has no such admission (no PD_DECODE_RESERVED_TOKENS): its cap is its own."""
    inp = dp.DeployInput(model="llama-3.1-8b", users=8.0, input_tokens=2000, output_tokens=200,
                         gpu=("H100 SXM",), runtime="vllm", tp=1, prefill_workers=1, decode_workers=1,
                         decode_batch_size=8)
    pinned = dp.pinned_answer(inp).pools
    assert pinned is not None and pinned.pools.decode.max_seqs == 8


def test_the_decode_pool_at_its_capacity_holds_its_cap() -> None:
    """At the decode pool's capacity (its cap over an answer's steps at the cap) Little's law holds the cap:
    the step grows almost as fast as the batch it serves there, and the 8 passes of the law from one
    sequence this replaced stopped at 3,007 of the GB200 DP 8 worker's 3,872, so a closed loop of 4,096
    users lost some 950 of them instead of counting their wait for a slot."""
    pools = _c4096_pools().pools
    cap = pools.decode.max_seqs
    full = sv.step_s(pools.decode, float(cap), 0.0)
    rate = pools.decode_workers * cap / (1024 * full)
    batch, tpot = pd.decode_batch(pools, rate, 1024)
    assert batch == pytest.approx(cap, rel=1e-6) and tpot == full


@settings(max_examples=25, deadline=None)
@given(share=st.floats(0.01, 0.999))
def test_the_decode_batch_is_littles_fixed_point(share: float) -> None:
    """Below capacity the batch returned is the smallest whole batch whose step's demand it holds: demand at
    it within the batch, demand at one fewer above one fewer (B = rate x O x step(B) / workers)."""
    pools = _c4096_pools().pools
    cap = pools.decode.max_seqs
    rate = share * pools.decode_workers * cap / (1024 * sv.step_s(pools.decode, float(cap), 0.0))
    batch, tpot = pd.decode_batch(pools, rate, 1024)

    def demand(b: float) -> float:
        return rate * 1024 * sv.step_s(pools.decode, b, 0.0) / pools.decode_workers

    whole = math.ceil(batch - 1e-9)
    assert batch <= whole and demand(whole) == pytest.approx(batch)
    assert whole == 1 or demand(whole - 1) > whole - 1


# --- a finite closed-loop run on the pools: its first wave (core/disagg.py benchmark, first_wave) ----------

def test_pools_benchmark_first_wave_grows_with_users() -> None:
    """Every harness starts its users at once (vllm bench serve, SGLang's bench_serving; aiperf after its
    warmup: ai-dynamo/aiperf docs/tutorials/warmup.md), so a run's first `users` prompts queue on the prefill
    pool together: one prefill worker taking 8 prompts a step serves the 64 of 64 users in 8 steps, their mean
    first token 4.5 steps in, where the steady state of 64 users waits a fraction of one. The wave's TTFT
    grows with the users; a run of one round is the wave alone; a longer one weighs it 1 / rounds."""
    p = _pools(1, 2)
    w = sv.Workload(1000, 300)
    batch = pd.prefill_batch_s(REPLICA, 1000)
    move = pd.transfer_s(131_072, 1000, pd.link_bytes_per_s(900.0, True))
    runs = {c: pd.benchmark(p, w, c, c) for c in (8, 16, 32, 64)}
    means = [runs[c].ttft_mean_s for c in sorted(runs)]
    assert means == sorted(means) and means[-1] > 3 * means[0]
    steady = pd.serve(p, replace(w, users=64.0))
    wave = pd.first_wave(p, w, 64, steady)[0]
    # eight batches of eight, each prompt's first token after its batch's step, its transfer and the handoff
    assert sorted(set(round(t, 9) for t in wave)) == pytest.approx(
        [(b + 1) * batch + move + steady.handoff_s for b in range(8)])
    assert runs[64].ttft_mean_s == pytest.approx(4.5 * batch + move + steady.handoff_s)
    assert runs[64].ttft_mean_s > 2 * steady.ttft_mean_s
    # ten rounds: the wave is a tenth of the mean, the other nine the steady state's
    ten = pd.benchmark(p, w, 64, 640)
    assert ten.ttft_mean_s == pytest.approx((runs[64].ttft_mean_s + 9 * steady.ttft_mean_s) / 10)
    assert ten.ttft_median_s == pytest.approx(steady.ttft_mean_s)
    assert steady.ttft_mean_s < ten.ttft_mean_s < runs[64].ttft_mean_s


def test_pools_benchmark_wave_waits_for_decode_admission() -> None:
    """Past the decode workers' caps a wave's prompt waits, before its prefill, for a first-wave answer to
    end (SGLang pre-allocates the decode KV before the prefill starts: core/disagg.py admitted): one decode
    worker of 16 sequences under 32 users puts the second 16 an answer later."""
    p = replace(_pools(1, 1), decode=pd.with_decode_cap(REPLICA, 16))
    w = sv.Workload(1000, 300)
    steady = pd.serve(p, replace(w, users=32.0))
    firsts, tpots, seconds = pd.first_wave(p, w, 32, steady)
    assert max(firsts[:16]) + 299 * steady.tpot_s <= min(firsts[16:])
    assert seconds >= max(firsts) + 299 * min(tpots) - 1e-9


def test_deploy_times_a_closed_loop_run_on_pools() -> None:
    """`deploy --prefill-workers X --decode-workers Y --requests 500 --users 128` (dstack's gpt-oss-120b on 8x
    H200, TP 2 workers, https://dstack.ai/blog/benchmarking-pd-ratios/) answers the run beside the steady
    state, which it leaves as it was; before this change it refused --requests with pools. 2P2D at
    2,046 / 1,000 tokens: the steady state keeps up, the first wave of 128 prompts waits, so the run's mean
    TTFT is above the steady state's. 1P3D at 2,046 / 62: the one prefill worker is the bottleneck, so in
    the steady state every user waits for the others' prompts, in the wave for half of them on average: the
    run's mean is below it."""
    def both(x: int, y: int, output: int) -> tuple[dict, dict]:
        inp = dp.DeployInput(model="gpt-oss-120b", users=128.0, input_tokens=2046, output_tokens=output,
                             gpu=("H200 SXM",), runtime="sglang", quant="mxfp4", tp=2, prefill_workers=x,
                             decode_workers=y)
        steady = dp.deploy_report(inp).to_json()
        run = dp.deploy_report(replace(inp, requests=500)).to_json()
        return steady["best"] or steady["closest"], run["best"] or run["closest"]

    one, two = both(2, 2, 1000)
    assert one.get("benchmark") is None and two["benchmark"]["requests"] == 500
    assert two["benchmark"]["scheduler"] == dp.PD_SCHEDULER == "disaggregated"
    assert {k: v for k, v in two.items() if k != "benchmark"} == one
    assert two["benchmark"]["ttft_mean_ms"] > 2 * one["ttft_mean_ms"]
    assert two["benchmark"]["ttft_median_ms"] == one["ttft_mean_ms"]  # most requests meet the steady state
    one, two = both(1, 3, 62)
    assert one["ttft_mean_ms"] * 0.5 < two["benchmark"]["ttft_mean_ms"] < one["ttft_mean_ms"]


# --- where P/D wins and where it loses (deploy's search beside aggregated serving) --------------------------

# aiconfigurator's own disagg picks for Qwen3-32B-FP8 on H200 (ai-dynamo/aiconfigurator "CLI User Guide",
# https://github.com/ai-dynamo/aiconfigurator/blob/main/docs/cli_user_guide.md): every disagg configuration it
# lists runs its prefill workers on fewer cards than its decode workers or as many (4 x TP1 + 1 x TP4 at
# 3,000 / 512 tokens, TTFT 1 s, TPOT 10 ms, 1.43x aggregated's tokens/s/gpu; 10 x TP1 + 3 x TP2 on 16 cards at
# 4,000 / 500 tokens, 384 concurrent, TTFT 543 ms, TPOT 17.39 ms, 1.09x)
_AIC_16 = dict(model="qwen3-32b", users=384.0, input_tokens=4000, output_tokens=500, ttft_ms=4000.0,
               tpot_ms=17.4, gpu=("H200",), runtime="sglang", quant="fp8")


def _n(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


@cache
def _aic_16(cards: int | None = None) -> dict:
    return dp.deploy_report(dp.DeployInput(cards=cards, **_AIC_16)).to_json()  # type: ignore[arg-type]


def test_pd_prefill_workers_on_fewer_cards_than_decode_workers() -> None:
    """aiconfigurator's 16-card example (above; its TTFT cap 4 s, the TPOT its 12 s request latency derived):
    the cheapest deployment for its 384 users is disaggregated, its prefill workers of fewer cards than its
    decode workers as aiconfigurator's are. Before the search tried a prefill shape of its own, both pools
    were 4-card TP 4 workers (8 + 5, 52 cards, $107,172/month, against aggregated serving's $140,148)."""
    r = _aic_16()
    pd_ = r["disaggregation"]
    assert pd_["winner"] == "disaggregated" and r["best"] == pd_["deployment"], pd_["why"]
    pools = r["best"]["disaggregated"]
    assert pools["prefill"]["count"] < pools["decode"]["count"]
    assert pools["prefill"]["tp"] < pools["decode"]["tp"]
    assert r["best"]["count"] < 52 and r["best"]["monthly_usd"] < 107_172
    assert r["best"]["count"] == sum(p["count"] * p["replicas"] for p in pools.values())
    lines = r["best"]["command"].splitlines()
    assert f"--tp-size {pools['prefill']['tp']}" in lines[0] and "--disaggregation-mode prefill" in lines[0]
    assert f"--tp-size {pools['decode']['tp']}" in lines[1] and "--disaggregation-mode decode" in lines[1]
    pre = pools["prefill"]
    assert f"{_n(pre['replicas'], 'prefill worker')} of {_n(pre['count'], 'card')}" in pd_["why"]


def test_pd_on_aiconfigurators_16_cards_names_its_layout_and_why_it_lost() -> None:
    """--cards 16 at the same load: the split cardfit predicts best is aiconfigurator's own, 10 x TP1 prefill
    + 3 x TP2 decode; it meets the targets as predicted but not at the pessimistic end of its likely range
    (the disaggregated records' out-of-sample TTFT error, data/accuracy.toml [[feature_range]]), and the
    reason says so with the figures."""
    pd_ = _aic_16(16)["disaggregation"]
    assert pd_["winner"] == "aggregated" and pd_["deployment"] is None
    why = pd_["why"]
    assert "10 prefill workers of 1 card (TP 1) + 3 decode workers of 2 cards (TP 2)" in why, why
    assert "as predicted" in why and "pessimistic end of its likely range" in why and "against 4,000" in why


def test_pd_loses_with_short_prompts_and_a_loose_tpot() -> None:
    """Short prompts (1,000 / 1,000 tokens) at a loose TPOT (50 ms): prompts riding in the decode steps cost
    little, so aggregated serving is cheaper and deploy says so ("Disaggregated prefill DOES NOT improve
    throughput": vLLM docs, Disaggregated Prefilling, https://docs.vllm.ai/en/latest/features/
    disagg_prefill.html; aiconfigurator's guide: "Sometimes, agg will be better than disagg")."""
    inp = dp.DeployInput(model="meta-llama/Llama-3.3-70B-Instruct", users=256.0, input_tokens=1000,
                         output_tokens=1000, ttft_ms=4000.0, tpot_ms=50.0, gpu=("H100 SXM",),
                         runtime="sglang", quant="fp8")
    r = dp.deploy_report(inp).to_json()
    pd_ = r["disaggregation"]
    assert pd_["winner"] == "aggregated" and r["best"]["disaggregated"] is None
    assert pd_["deployment"] is not None and pd_["deployment"]["monthly_usd"] > r["best"]["monthly_usd"]
    assert pd_["why"].startswith(f"aggregated: ${r['best']['monthly_usd']:,.0f}/month against")


def test_why_pd_lost_is_printed(run_cli, run_json) -> None:
    """The text output says why prefill and decode stay together where a split came within reach: at
    aiconfigurator's 3,000 / 512-token targets (TTFT 1 s, TPOT 10 ms) no split meets them at the pessimistic
    end of its likely range, and the reason names the cheapest that meets them as predicted, for less than
    the aggregated answer's rent (--json: disaggregation.predicted_monthly_usd); each count in words with its
    own plural ("1 decode worker of 4 cards", not "1 decode workers")."""
    args = ["deploy", "qwen3-32b", "--users", "56", "--input-tokens", "3000", "--output-tokens", "512",
            "--ttft-ms", "1000", "--tpot-ms", "10", "--gpu", "H200", "--runtime", "sglang", "--quant", "fp8"]
    code, out, _ = run_cli(*args)
    assert code == 0
    out = " ".join(out.split())
    assert "Prefill and decode together: aggregated: no split of prefill and decode workers" in out
    assert "meets them as predicted" in out and "reaches TTFT p90" in out
    assert not re.search(r"\b1 (cards|prefill workers|decode workers)\b", out), out
    r = run_json(*args)
    pd_ = r["disaggregation"]
    assert pd_["deployment"] is None and pd_["predicted_monthly_usd"] < r["best"]["monthly_usd"]
    assert f"for ${pd_['predicted_monthly_usd']:,.0f}/month" in pd_["why"]


def test_why_pd_lost_is_left_to_json_on_a_plain_deploy(run_cli, run_json) -> None:
    """The README's deploy question (Llama 3.1 8B, vLLM, 32 users): the cheapest P/D split costs several
    times the aggregated answer, so the text prints no line about it (it was printed on every vLLM / SGLang
    deploy); --json still gives the reason."""
    args = ["meta-llama/Llama-3.1-8B-Instruct", "--users", "32", "--ttft-ms", "1500", "--tpot-ms", "50",
            "--runtime", "vllm"]
    r = run_json("deploy", *args)
    pd_ = r["disaggregation"]
    assert pd_["winner"] == "aggregated" and pd_["deployment"]["monthly_usd"] > r["best"]["monthly_usd"]
    assert "predicted_monthly_usd" not in pd_
    code, out, _ = run_cli("deploy", *args)
    assert code == 0 and "Prefill and decode" not in out


def test_why_pd_lost_names_no_empty_miss() -> None:
    """Where the split the search finds as predicted also meets the targets at the pessimistic end of its
    likely range (its TTFT not falling with more prefill workers as the bisection takes it), the reason
    names no split rather than one that "reaches  there" (nothing missed), and gives no rent."""
    from unittest import mock

    inp, t, _, agg, same = readme_deploy_question()
    same = [c for c in same if dp._workers(c) is not None]
    pairs = [(pre, c) for c in same for pre in dp._prefill_shapes(same, c)]
    met = dp._pd_search(inp, pairs, t, {})  # a split meeting them at the pessimistic end (the $1,368 one)
    assert met is not None
    with mock.patch.object(dp, "_pd_search", lambda *a, **k: met):
        why, rent = dp._pd_none_why(inp, pairs, t, agg.cand.gpu.name)
    assert why == "aggregated: no split of prefill and decode workers on " \
        f"{agg.cand.gpu.name} meets the targets within {dp.PD_MAX_WORKERS} workers" and rent is None


# --- --cards N with no load: the most users, aggregated or split into pools ------------------------------

@cache
def _aic_16_no_load(ttft_ms: float) -> dict:
    """aiconfigurator's 16-card question (_AIC_16) with no load: the most users its 16 cards serve."""
    kw = {**_AIC_16, "users": None, "ttft_ms": ttft_ms}
    return dp.deploy_report(dp.DeployInput(cards=16, **kw)).to_json()  # type: ignore[arg-type]


def _users_each_way(why: str) -> tuple[int, int]:
    """The most users the aggregated replicas and the pools serve, as disaggregation.why gives them."""
    m = re.search(r"([\d,]+) as aggregated replicas, ([\d,]+) split into pools", why)
    assert m is not None, why
    return int(m[1].replace(",", "")), int(m[2].replace(",", ""))


def _pinned_meets(users: int, ttft_ms: float, prefill: tuple[int, int], decode: tuple[int, int]) -> bool:
    """Whether `prefill` / `decode` (workers, TP) pinned at `users` meet _AIC_16's targets at `ttft_ms`."""
    kw = {**_AIC_16, "users": float(users), "ttft_ms": ttft_ms}
    return dp.deploy_report(dp.DeployInput(
        kv_dtype="fp8", tp=decode[1], prefill_tp=prefill[1], decode_tp=decode[1], prefill_workers=prefill[0],
        decode_workers=decode[0], **kw)).to_json()["meets_targets"]  # type: ignore[arg-type]


def test_cards_no_load_pd_wins_at_aiconfigurators_layout() -> None:
    """--cards 16 with no load at aiconfigurator's 16-card targets (4,000 / 500 tokens, TTFT 4 s, TPOT 17.4
    ms): split into pools the cards serve more users than as aggregated replicas, at aiconfigurator's own
    layout, 10 x TP1 prefill + 3 x TP2 decode. Before the no-load search tried prefill workers of their own
    shape (pd_most_users split workers of one shape), it found 5 + 3 TP2 workers; that layout is searched,
    and pinned at the users found it misses the targets (it serves fewer). The users found are the pools'
    (disaggregation.users): pinned there they meet the targets at the pessimistic end of their likely range,
    one user more does not, and asked again with that load the answer is the same."""
    r = _aic_16_no_load(4000.0)
    pd_ = r["disaggregation"]
    assert pd_["winner"] == "disaggregated" and r["best"] == pd_["deployment"], pd_["why"]
    pools = r["best"]["disaggregated"]
    assert {k: (v["replicas"], v["tp"]) for k, v in pools.items()} == {"prefill": (10, 1), "decode": (3, 2)}
    users = int(r["workload"]["users"])
    assert r["workload"]["cards_found_users"] and pd_["users"] == users
    assert not _pinned_meets(users, 4000.0, (5, 2), (3, 2))  # the one-shape split serves fewer
    agg, split = _users_each_way(pd_["why"])
    assert split == users > agg
    assert "10 prefill workers of 1 card (TP 1) + 3 decode workers of 2 cards (TP 2)" in pd_["why"]
    assert _pinned_meets(users, 4000.0, (10, 1), (3, 2))
    assert not _pinned_meets(users + 1, 4000.0, (10, 1), (3, 2))
    again = dp.deploy_report(dp.DeployInput(cards=16, **{**_AIC_16, "users": float(users)})).to_json()
    assert again["best"] == r["best"] and "users" not in again["disaggregation"]


def test_cards_no_load_pd_why_weighs_the_aggregated_deployment_shown() -> None:
    """Where the pools serve more users, the reason's aggregated figures are those of the aggregated
    deployment the answer shows (its Pareto row: closest() at the users found, 4 x TP 4 here) and the same
    question asked with that load gives the same reason after its head. Before (h-pdcards), they were the
    replicas of the set that serves the most users aggregated (4 x TP 4: 9,889 tok/s, TPOT 11.9 ms, TTFT p90
    312 ms), shown nowhere else in the answer, while --users 121 compared the same pools with 8 x TP 2's
    9,928 tok/s, TPOT 11.7 ms, TTFT p90 344 ms."""
    r = _aic_16_no_load(4000.0)
    why, users = r["disaggregation"]["why"], int(r["workload"]["users"])
    (row,) = r["pareto"]
    assert row["tp"] * row["replicas"] == 16
    assert (f"against {row['aggregate_tokens_per_s']:,.0f} tok/s, TPOT {row['tpot_ms']:.1f} ms, TTFT p90 "
            f"{row['ttft_ms']:,.0f} ms aggregated)") in why, why
    again = dp.deploy_report(dp.DeployInput(cards=16, **{**_AIC_16, "users": float(users)})).to_json()
    loaded = again["disaggregation"]["why"]
    assert why.endswith(f"; at {users:,} users, " + loaded.removeprefix("disaggregated: ")), (why, loaded)


def _serves(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, sv.Workload]]:
    """Every pools' timing (core/disagg.py serve) from here on, as (the pools' every field, the load)."""
    from dataclasses import asdict

    seen: list[tuple[str, sv.Workload]] = []
    real = pd.serve

    def serve(p: pd.Pools, w: sv.Workload) -> pd.Disaggregated:
        seen.append((repr(asdict(p)), w))
        return real(p, w)

    monkeypatch.setattr(pd, "serve", serve)
    return seen


@pytest.mark.parametrize("kw", [
    {**_AIC_16, "users": None},  # the pools serve the most users: searched again at them
    {**_AIC_16, "users": None, "ttft_ms": 2000.0},  # the aggregated replicas do
    dict(model="qwen3-30b-a3b", input_tokens=4000, output_tokens=1000, ttft_ms=4000.0, tpot_ms=17.4,
         gpu=("H200",), runtime="sglang", quant="fp8"),  # attention-DP pools
], ids=["pools-win", "aggregated-wins", "attention-dp"])
def test_cards_no_load_times_no_split_twice(monkeypatch: pytest.MonkeyPatch, kw: dict) -> None:
    """--cards N with no load: one deploy call times each split of prefill and decode workers once at each
    load (PdTimed, shared by pd_most_users, the search at the users found and the winner's headroom). Before
    (h-pdcards), the no-load search's timings at the users found were timed again by the search there, and
    the winner's by its headroom at 1x: 4 of 169 timings in the first case, 2 of 79 in the third."""
    cards = 8 if kw["model"] == "qwen3-30b-a3b" else 16
    dp.clear_memos()
    seen = _serves(monkeypatch)
    r = dp.deploy_report(dp.DeployInput(cards=cards, **kw)).to_json()  # type: ignore[arg-type]
    assert r["disaggregation"]["users"] > 0 and len(seen) > 50
    assert len(set(seen)) == len(seen)


def test_pd_timings_are_keyed_on_values(monkeypatch: pytest.MonkeyPatch) -> None:
    """PdTimed keys hold values (Candidate.shape: the setting's Setting.key and every field but the load;
    the load as served), not id()s, which a later object takes once the first is collected: a copy of a
    candidate with another load object but the same users finds the timing (no second serve), another
    sequence cap or another load does not, and the settings of one question have keys of their own."""
    inp, t, _, agg, same = readme_deploy_question()
    c = next(x for x in same if dp._workers(x) is not None and x.cards >= 2)
    memo: dp.PdTimed = {}
    seen = _serves(monkeypatch)
    first = dp._pd_meets(inp, c, 1, 1, t, memo=memo)
    twin = replace(c, inp=replace(inp))  # another object, the same values
    assert twin is not c and twin.shape == c.shape
    assert dp._pd_meets(replace(inp), twin, 1, 1, t, memo=memo) == first and len(seen) == 1
    assert replace(c, seqs=c.seqs - 1).shape != c.shape
    dp._pd_meets(replace(inp, users=(inp.users or 1) + 1), twin, 1, 1, t, memo=memo)
    assert len(seen) == 2 and len(memo) == 2
    sets = dp.settings(inp)[0]
    assert len({s.key for s in sets}) == len(sets) > 1


def test_cards_no_load_aggregated_wins_and_says_what_breaks_the_pools() -> None:
    """The same 16 cards at a 2 s TTFT: aggregated replicas serve the most users; the reason gives the most
    the best split into pools serves (3 prefill + 1 decode TP 4 workers) and what breaks it at one user more
    (its TPOT at the pessimistic end of its likely range), and pinned there the split meets the targets and
    one user more does not. predicted_monthly_usd, the rent of the split the reason names as meeting the
    targets only as predicted, is not given: this reason names none."""
    r = _aic_16_no_load(2000.0)
    pd_ = r["disaggregation"]
    assert pd_["winner"] == "aggregated" and r["best"]["disaggregated"] is None, pd_["why"]
    # the reason names the split of the most users, not the one that meets the targets only as predicted at
    # the replicas' users, so the JSON gives no rent of that one (before: predicted_monthly_usd 32,976)
    assert "predicted_monthly_usd" not in pd_
    agg, split = _users_each_way(pd_["why"])
    assert agg == int(r["workload"]["users"]) > split == pd_["users"] > 0
    assert "(3 prefill + 1 decode workers of 4 cards (TP 4); at " in pd_["why"]
    assert re.search(rf"at {split + 1:,} users its TPOT [\d.]+ ms against 17.4 at the pessimistic end",
                     pd_["why"]), pd_["why"]
    assert _pinned_meets(split, 2000.0, (3, 4), (1, 4))
    assert not _pinned_meets(split + 1, 2000.0, (3, 4), (1, 4))


@pytest.mark.parametrize("ttft,said", [
    ("4000", "Prefill and decode apart: disaggregated: the most users the 16 cards serve within the targets"),
    ("2000", "Prefill and decode together: aggregated: the most users the 16 cards serve within the targets"),
])
def test_cards_no_load_pd_reason_text_and_json(run_cli, run_json, ttft: str, said: str) -> None:
    """The text prints why P/D won or lost on --cards with no load either way (the two ways rent the same
    cards), and --json gives the pools' most users beside it (disaggregation.users), not given with a load."""
    args = ["deploy", "qwen3-32b", "--input-tokens", "4000", "--output-tokens", "500", "--ttft-ms", ttft,
            "--tpot-ms", "17.4", "--gpu", "H200", "--runtime", "sglang", "--quant", "fp8", "--cards", "16"]
    code, out, _ = run_cli(*args)
    assert code == 0 and said in " ".join(out.split()), out
    r = run_json(*args)
    assert r["disaggregation"]["users"] == _aic_16_no_load(float(ttft))["disaggregation"]["users"]
    assert r["disaggregation"]["why"] == _aic_16_no_load(float(ttft))["disaggregation"]["why"]


def test_cards_no_load_pools_of_attention_dp_workers() -> None:
    """Qwen3-30B-A3B FP8 (a MoE) on exactly 8 H200s, SGLang, 4,000 / 1,000 tokens at TTFT 4 s, TPOT 17.4 ms
    (500-token answers until the MoE refit of 2026-12-08, where tensor-parallel pools now win):
    both pools' workers may take an attention-DP + EP layout of the setting, as SGLang's DeepSeek P/D recipe
    runs them (`--dp-size --enable-dp-attention` on the prefill and the decode servers: SGLang "PD
    Disaggregation", https://github.com/sgl-project/sglang/blob/main/docs/advanced_features/
    pd_disaggregation.md). One prefill and one decode worker of 4 cards, attention DP 4 and EP 4, serve the
    most users (before, only tensor-parallel pools: 4 x TP1 prefill + 1 x TP4 decode, 95 users); each
    role's launch line runs its attention groups, and pinned at the users found the pools meet the targets
    and one user more does not."""
    kw = dict(model="qwen3-30b-a3b", input_tokens=4000, output_tokens=1000, ttft_ms=4000.0, tpot_ms=17.4,
              gpu=("H200",), runtime="sglang", quant="fp8")
    report = dp.deploy_report(dp.DeployInput(cards=8, **kw))  # type: ignore[arg-type]
    r = report.to_json()
    pd_ = r["disaggregation"]
    assert pd_["winner"] == "disaggregated" and r["best"] == pd_["deployment"], pd_["why"]
    # the text names the pools' one layout, not "TP 4 each" (web/static/app.js shape() words it the same)
    assert _shape(report.best) == "8× H200 SXM (1 prefill + 1 decode workers, attention DP 4 · EP 4 each)"
    pools = r["best"]["disaggregated"]
    for role in ("prefill", "decode"):
        assert {k: pools[role][k] for k in ("count", "tp", "dp", "ep", "replicas")} == dict(
            count=4, tp=4, dp=4, ep=4, replicas=1), pools
    users = int(r["workload"]["users"])
    agg, split = _users_each_way(pd_["why"])
    assert split == users == pd_["users"] > 95 and users > agg
    for line, role in zip(r["best"]["command"].splitlines(), ("prefill", "decode"), strict=True):
        assert "--attn-dp-size 4" in line and f"--disaggregation-mode {role}" in line

    def pinned(n: int) -> bool:
        return dp.deploy_report(dp.DeployInput(
            users=float(n), kv_dtype="fp8", tp=4, prefill_dp=4, decode_dp=4, prefill_workers=1,
            decode_workers=1, **kw)).to_json()["meets_targets"]  # type: ignore[arg-type]

    assert pinned(users) and not pinned(users + 1)

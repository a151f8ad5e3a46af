"""A full paged KV pool as vLLM schedules it (core/serving.py Pool): prompts admitted by the blocks of their
first chunk, the newest running request preempted by recompute when a step finds no free block, its blocks
still cached (prefix caching) when it is admitted back. Cases: Dennis Lee, 'vLLM Benchmarking' (vLLM 0.10.1.1,
Qwen2-7B-Instruct on one A100 80GB, https://github.com/dennislee22/vLLM-benchmarking, data/validation/
serving_dennislee_a100.toml)."""

from __future__ import annotations

import statistics
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cardfit.core import serving as sv
from cardfit.core import speed as sp
from cardfit.errors import InputError

from .helpers import within


def _replica(seqs: int = 256, chunk: int = 2048) -> sv.Replica:
    shares = sp.Shares(1.0, 0.0, 0.0, 1.0, "params")
    load = sp.Load(15_000_000_000, shares, 1536 * 57344, 2 * 7.6e9, 28, 3584)
    mc = sp.Machine(1935.0, 312.0, 1, decode_efficiency=0.873, overhead_s_per_layer=61.1e-6,
                    compute_efficiency=0.8)
    return sv.Replica(load, mc, 2 * 7.6e9, chunk, seqs)


W = sv.Workload(1024, 1024)


def _run(r: sv.Replica, n: int) -> tuple[float, float, float]:
    ttft, tpot, seconds = sv.rounds(r, W, n, n, False)
    return statistics.fmean(ttft), statistics.fmean(tpot), n * W.output_tokens / seconds


def test_a_pool_that_holds_every_request_changes_nothing():
    base = _replica(seqs=64)
    roomy = replace(base, kv_tokens=64 * 2048 + 16, engine_seqs=64, prefix_cache=True)
    assert sv.rounds(roomy, W, 64, 64, False) == sv.rounds(base, W, 64, 64, False)


@pytest.mark.parametrize("cache", [True, False])
def test_a_full_pool_preempts_the_newest_and_every_request_ends(cache):
    """Test 4's pool (93,872 tokens: 45.8 requests of 2,048 tokens) and a burst of 100 prompts: more are
    admitted than the pool holds at their full length, so the answers preempt; each request still gets all
    its tokens, and the mean TPOT (the preempted wait, their first token already out) rises above the
    same engine's with a pool that holds them all."""
    pooled = replace(_replica(), kv_tokens=93_872, engine_seqs=256, prefix_cache=cache)
    roomy = replace(pooled, kv_tokens=100 * 2048)
    evicted: list[int] = []
    evict = sv.Pool.evict

    def spy(self, k):
        evicted.append(k)
        evict(self, k)

    sv.Pool.evict = spy
    try:
        ttft, tpot, out = _run(pooled, 100)
    finally:
        sv.Pool.evict = evict
    assert len(evicted) > 0
    assert max(evicted) >= 45  # the newest admitted go first
    ttft_r, tpot_r, out_r = _run(roomy, 100)
    assert tpot > tpot_r * 1.15
    assert out < out_r
    assert ttft > 0


def test_prefix_caching_spares_the_recompute():
    """vLLM V1 keeps a preempted request's blocks cached until they are handed out again, so admitted back it
    computes only what it lost; V0 (no prefix caching by default) computes every token again."""
    r = replace(_replica(), kv_tokens=93_872, engine_seqs=256)
    _, tpot_v0, out_v0 = _run(replace(r, prefix_cache=False), 300)
    _, tpot_v1, out_v1 = _run(replace(r, prefix_cache=True), 300)
    assert out_v1 >= out_v0
    assert tpot_v1 <= tpot_v0


def test_the_pool_caps_the_running_set_below_the_slot_cap():
    """With 256 slots and a pool of 93,872 tokens the engine runs about as many requests as the pool holds:
    output throughput at 1,000 prompts stays near that of 100 prompts (Dennis Lee's Test 4 measured 2,125
    tokens/s at 100 prompts and 2,184 at 894 that succeeded of 1,000), far below the 256-slot engine's with a
    pool that holds them all."""
    pooled = replace(_replica(), kv_tokens=93_872, engine_seqs=256, prefix_cache=True)
    _, _, at100 = _run(pooled, 100)
    _, _, at500 = _run(pooled, 500)
    _, _, roomy = _run(replace(pooled, kv_tokens=500 * 2048), 500)
    assert at500 == pytest.approx(at100, rel=0.25)
    assert roomy > 1.5 * at500


def test_validation_steps_the_pool_of_the_engine_that_preempts():
    """vLLM's records are stepped with their KV pool and the engine's own sequence cap (256 on an A100), and
    prefix caching from V1 (0.8); SGLang keeps the cap by the mean tokens in flight."""
    from cardfit.catalog.runtimes import default_runtimes

    rts = default_runtimes()
    assert (rts.get("vllm").kv_preemption, rts.get("vllm").prefix_caching) == ("recompute", True)
    assert rts.get("sglang").kv_preemption == ""
    assert not rts.get("vllm@~0.6.4 (rocm/vllm-dev:20241121-tuned, V0 engine)").prefix_caching
    assert rts.get("vllm@0.10.1.1").prefix_caching


# --- the pool loop always ends (a prompt step that can take no token used to repeat for ever) ---

@pytest.mark.parametrize("cache", [True, False])
@pytest.mark.parametrize("output", [2, 256, 1024])
def test_a_prefill_first_pool_too_small_for_the_burst_ends(cache, output):
    """The reported case: a paged pool of 30,000 tokens (10 prompts of 3,000), a prefill-first engine, 32 in
    flight and 100 requests. The pool fills with part-prefilled prompts while the answers wait for the prompt
    steps; the engine decodes until answers free blocks instead of repeating an empty prompt step. Every
    request ends, slower than with a pool that holds the burst."""
    pooled = replace(_replica(), kv_tokens=30_000, engine_seqs=256, prefix_cache=cache)
    w = sv.Workload(3000, output)
    with within(20):
        ttft, tpot, seconds = sv.rounds(pooled, w, 32, 100, True)
    assert len(ttft) == 100 and all(x > 0 for x in ttft)
    _, _, roomy = sv.rounds(replace(pooled, kv_tokens=32 * (3000 + output) + 16), w, 32, 100, True)
    assert seconds > roomy


@pytest.mark.parametrize(("kv_tokens", "prompt", "answer"), [(2_000, 3_000, 10), (3_000, 2_990, 100)])
def test_a_request_larger_than_the_pool_is_an_error(kv_tokens, prompt, answer):
    """A request whose prompt and answer cannot fit the pool on its own would be preempted and computed again
    for ever; vLLM refuses to start such a configuration, and so does rounds()."""
    pooled = replace(_replica(), kv_tokens=kv_tokens, engine_seqs=8)
    with within(20), pytest.raises(InputError, match="does not fit a KV pool"):
        sv.rounds(pooled, sv.Workload(prompt, answer), 4, 4, True)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kv_tokens=st.integers(16, 6_000), block=st.sampled_from([1, 16, 32]), chunk=st.integers(16, 4_096),
       seqs=st.integers(1, 64), prompt=st.integers(1, 2_000), answer=st.integers(1, 300),
       concurrency=st.integers(1, 24), requests=st.integers(1, 40), prefill_first=st.booleans(),
       cache=st.booleans(), fixed=st.booleans(), ahead=st.integers(0, 1))
def test_rounds_always_ends(kv_tokens, block, chunk, seqs, prompt, answer, concurrency, requests,
                            prefill_first, cache, fixed, ahead):
    """Whatever the pool, budget and load: rounds() returns every request's timings, or says the request does
    not fit the pool; it never hangs."""
    r = replace(_replica(seqs=seqs, chunk=chunk), kv_tokens=kv_tokens, kv_block=block, engine_seqs=seqs,
                prefix_cache=cache, schedule_ahead=ahead)
    w = sv.Workload(prompt, answer)
    with within(20):
        try:
            ttft, tpot, seconds = sv.rounds(r, w, concurrency, requests, prefill_first, fixed)
        except InputError as e:
            assert "does not fit a KV pool" in str(e)
            return
    assert len(ttft) == max(requests, 1) and all(x > 0 for x in ttft)
    assert seconds > 0 and all(x >= 0 for x in tpot)


# --- admission by the prompt's blocks (vLLM V1 allocate_slots), hand-derived, and the whole run stepped ---

def test_v1_admits_by_the_prompts_blocks_not_the_whole_request():
    """A pool of 100 blocks of 16 tokens and prompts of 160 tokens (10 blocks each), answers of 100: V1
    admits a waiting prompt when the blocks of its (first) chunk are free, keeping none for the answers
    (vllm/v1/core/sched/scheduler.py schedule -> kv_cache_manager.allocate_slots(request, num_new_tokens) at
    v0.10.1.1), so one step admits 100 // 10 = 10 prompts and all 10 get their first token at its end. A
    pool reserving each whole request (260 tokens: 17 blocks) would admit 5, and one sized by the mean
    tokens in flight (160 + 50 = 210: 14 blocks) 7."""
    r = replace(_replica(seqs=64, chunk=2048), kv_tokens=100 * 16, kv_block=16, engine_seqs=64,
                prefix_cache=True)
    pool = sv.Pool(r, 20)
    admitted = 0
    for k in range(20):
        x = [k, 160.0]
        if not pool.admits(x, 2048 - 160 * admitted):
            break
        pool.admit(k, 160.0)
        pool.prefill(k, 160.0)
        admitted += 1
    assert admitted == 10
    ttft, _, _ = sv.rounds(r, sv.Workload(160, 100), 20, 20, False)
    first = min(ttft)
    assert sum(1 for t in ttft if t == pytest.approx(first, rel=1e-9)) == 10


def test_a_paged_pool_is_stepped_for_every_request():
    """benchmark() steps the whole run where the pool preempts and binds (it cannot hold the users' requests
    whole): the same figures as rounds() over all requests, not the first round and the steady state of a
    pool sized by the mean tokens in flight. Otherwise a decode-first run is its first round plus the steady
    state."""
    pooled = replace(_replica(), kv_tokens=93_872, engine_seqs=256, prefix_cache=True)
    b = sv.benchmark(pooled, W, 100, 300, False)
    ttft, tpot, seconds = sv.rounds(pooled, W, 100, 300, False)
    assert b.ttft_mean_s == pytest.approx(statistics.fmean(ttft), rel=1e-12)
    assert b.ttft_median_s == pytest.approx(statistics.median(ttft), rel=1e-12)
    assert b.tpot_mean_s == pytest.approx(statistics.fmean(tpot), rel=1e-12)
    assert b.output_tokens_per_s == pytest.approx(300 * W.output_tokens / seconds, rel=1e-12)
    assert sv.binds(pooled, W, 100)  # 100 x 2,048 tokens > 93,872
    # a pool that holds every request whole never preempts: the later rounds keep the steady state, as do
    # runs whose prompts hit a prefix cache (rounds computes every prompt whole)
    roomy = replace(pooled, kv_tokens=100 * 2048)
    assert not sv.binds(roomy, W, 100)
    assert not sv.binds(pooled, replace(W, cached_tokens=512.0), 100)
    first, _, _ = sv.rounds(roomy, W, 100, 100, False)
    assert sv.benchmark(roomy, W, 100, 300, False).ttft_median_s != statistics.median(first)


def test_cloudrift_rtx5090_sweep_ttft_under_kv_pressure():
    """CloudRift's Qwen3-Coder-30B-A3B AWQ on one RTX 5090, vLLM, 80 prompts of 4,000 + 4,000 tokens at 32
    users (--max-num-seqs 32): the median TTFT was 6,095 ms (most prompts start as their blocks free, the
    answers they crowd out are preempted), the mean 19,298 ms (github.com/cloudrift-ai/deplodock, data/
    validation/serving_cloudrift_rtx5090_sweep.toml). With the later rounds in the steady state (a slot
    only where the pool holds the mean tokens in flight) cardfit said 54,296 ms median (+791 %); stepped
    with the pool it is within a factor of 1.6 both ways, and the run's throughput moves by under 3 %."""
    from cardfit.validation.serving import predict_serving
    from cardfit.validation.validate import load_records

    recs = {r["id"]: r for r in load_records("serving")}
    key = "cloudrift-deplodock-qwen3-coder-30b-a3b-rtx5090-vllm-awq-4000x4000-c32-"
    for metric, measured in (("ttft-median", 6095.14), ("ttft", 19298.51)):
        r = recs[key + metric]
        assert r["measured"] == measured
        got, _ = predict_serving(r)
        assert measured / 1.6 < got < measured * 1.6, metric
    out, _ = predict_serving(recs[key + "output"])
    # the steady state's figure at the constants before the refit of 2026-12-07 was 840.2 (measured 1,147:
    # too slow); stepped, at the refit's constants, 805.4
    assert out == pytest.approx(805.4, rel=0.03)


def test_cloudrift_70b_at_400_users_is_not_predicted_faster():
    """Over-predicting capacity is the unsafe side: Llama-3.3-70B AWQ on 2x RTX 5090 at PP 2, vLLM, 1,200
    requests of 1,000 + 1,000 tokens at 400 users, measured 615.91 output tok/s (CloudRift server-benchmark,
    data/validation/serving_cloudrift_rtx.toml). The steady state of the later rounds said 812 (+32 %);
    stepped through the pool, whose answers stall while preempted prompts are computed again, it is within
    15 %."""
    from cardfit.validation.serving import predict_serving
    from cardfit.validation.validate import load_records

    r = next(x for x in load_records("serving")
             if x["id"] == "cloudrift-llama-3.3-70b-2xrtx5090-pp2-vllm-awq-1000x1000-c400-output")
    assert r["measured"] == 615.91
    got, how = predict_serving(r)
    assert got < 1.15 * r["measured"]
    assert "every request stepped through the KV pool" in how

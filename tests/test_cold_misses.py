"""Issue 26 (prefix reuse / KV offload at fleet scale): llm-d's tiered prefix-cache benchmarks
(data/validation/serving_llmd_tiered.toml) are inference-perf stages, each a finite run of rate x 60 s Poisson
arrivals drained before the next (llm-d-benchmark workload/profiles/inference-perf/
guide_tiered-prefix-cache_1.yaml.in @f1d6a173; inference-perf inference_perf/loadgen/load_generator.py
run_stage @ad65fe0). Two consequences: a stage above the replica's capacity has a queue that grows through the
stage, not without end (core/serving.py open_stage), and a finite run starts with no prefix computed, so the
first request of each group it reaches misses (a compulsory miss: core/reuse.py cold_share)."""

from __future__ import annotations

import math

import pytest

from cardfit.core import reuse as ru
from cardfit.core import serving as sv
from cardfit.errors import InputError
from cardfit.services.deploy import DeployInput, deploy_report
from cardfit.validation.serving import predict_serving
from cardfit.validation.validate import all_records


def test_cold_share_hand_derived():
    """31 groups, a stage of 38 requests from a cold cache: 31 (1 - (30/31)^38) = 22.08 groups reached, each
    first reached by a request that computes its prefix: 22.08 / 38 = 58.1 % of the requests. The next stage,
    75 requests after those 38 prompts of the same order: 31 ((30/31)^38 - (30/31)^75) = 6.27 new groups,
    8.4 % of its requests. An endless load (requests 0) has none."""
    q = 30 / 31
    first = ru.Reuse(16000, 1, 31, requests=38)
    assert ru.cold_share(first) == pytest.approx(31 * (1 - q ** 38) / 38)
    assert ru.cold_share(first) == pytest.approx(0.581, abs=1e-3)
    second = ru.Reuse(16000, 1, 31, requests=75, warm=38)
    assert ru.cold_share(second) == pytest.approx(31 * (q ** 38 - q ** 75) / 75)
    assert ru.cold_share(second) == pytest.approx(0.0836, abs=1e-4)
    assert ru.cold_share(ru.Reuse(16000, 1, 31)) == 0.0
    # one group: one request in the run computes it
    assert ru.cold_share(ru.Reuse(1000, 1, 1, requests=10)) == pytest.approx(0.1)
    # a run inside the prompts already sent reaches no new group
    assert ru.cold_share(ru.Reuse(1000, 1, 8, requests=10, warm=50)) == 0.0


def test_cold_requests_hit_neither_tier():
    """A pool and a host tier that keep every prefix: a steady state hits the whole shared prefix; a cold run
    of 10 requests over 4 groups loses the share 4 (1 - 0.75^10) / 10 of it, in both tiers."""
    i, o = 1200, 100
    steady = ru.Reuse(1000, 1, 4)
    cold = ru.Reuse(1000, 1, 4, requests=10)
    share = 4 * (1 - 0.75 ** 10) / 10
    a = ru.hits(i, o, steady, pool_tokens=1e6, running=2, sessions=2)
    b = ru.hits(i, o, cold, pool_tokens=1e6, running=2, sessions=2)
    assert a.gpu_tokens == pytest.approx(1000)
    assert b.gpu_tokens == pytest.approx(1000 * (1 - share))
    small = 2 * 100 + 2 * 1000  # the running sequences and their prefixes: no room for the unread ones
    a = ru.hits(i, o, steady, pool_tokens=small, running=2, sessions=2, host_tokens=1e6)
    b = ru.hits(i, o, cold, pool_tokens=small, running=2, sessions=2, host_tokens=1e6)
    assert a.host_tokens > 0
    assert b.host_tokens == pytest.approx(a.host_tokens * (1 - share))


def _served(stable: bool, rho: float) -> sv.Served:
    return sv.Served(64.0, 0.05, 0.8, math.inf, math.inf, math.inf, 1280.0, rho, stable)


def test_open_stage_hand_derived():
    """A stage of 300 requests arriving at 5/s (D = 60 s) at twice the replica's capacity (rho 2): the request
    arriving at t waits (rho - 1) t, so the mean TTFT is 60 / 2 + 0.8 s of prefill, the p90 0.9 x 60 + 0.8;
    the stage lasts 60 x 2 s plus one request's service (the diffusion bound, 0.4 sqrt(300) x 0.532 = 3.7 s,
    is below the fluid queue here)."""
    b = sv.open_stage(_served(False, 2.0), 300, 5.0, 256)
    assert b is not None
    assert b.ttft_mean_s == pytest.approx(30.8)
    assert b.ttft_p90_s == pytest.approx(54.8)
    seconds = 120 + 0.8 + 255 * 0.05
    assert b.seconds == pytest.approx(seconds)
    assert b.requests_per_s == pytest.approx(300 / seconds)


def test_open_stage_below_capacity_bounded():
    """The same stage at half the capacity (rho 0.5, s = 0.5 / 5 = 0.1 s of the replica a request): a
    steady state that queues 5 s mean / 10 s p90 before the prefill, more than 300 requests from an empty
    queue build: the diffusion bound s sqrt(300) x 0.532 (mean) and x 1.180 (p90); the stage lasts D plus one
    request's service (max(rho, 1) = 1)."""
    s = sv.Served(64.0, 0.05, 0.8, 10.8, 5.8, 10.0, 1280.0, 0.5, True)
    b = sv.open_stage(s, 300, 5.0, 256)
    assert b is not None
    bound = 0.1 * math.sqrt(300)
    assert b.ttft_mean_s == pytest.approx(0.8 + 2 / 3 * math.sqrt(2 / math.pi) * bound)
    assert b.ttft_p90_s == pytest.approx(0.8 + 1.1803 * bound)
    assert b.seconds == pytest.approx(60 + 0.8 + 255 * 0.05)
    # a light steady state (its waits below the bound) keeps them
    light = sv.Served(64.0, 0.05, 0.8, 0.9, 0.85, 0.1, 1280.0, 0.5, True)
    b = sv.open_stage(light, 300, 5.0, 256)
    assert b is not None and b.ttft_mean_s == pytest.approx(0.85) and b.ttft_p90_s == pytest.approx(0.9)


def test_open_stage_monotone_across_capacity():
    """Reviewer's repro (finding 3): Qwen3-32B TP 2 on H100 SXM, a stage of 38 requests of 16,256 tokens
    (16,000 shared, 31 groups), 256 out, around the replica's capacity (~0.87 requests/s). The old stage
    answered the steady state below capacity (TTFT p90 6,090 -> 16,451 ms as rho -> 1) and the empty fluid
    queue just above it (1,911 ms at 0.90): the stage's TTFT now rises with the rate, and the stage lasts at
    least its arrivals."""
    base = dict(model="qwen3-32b", runtime="vllm", gpu=("H100 SXM",), input_tokens=16256, output_tokens=256,
                tp=2, requests=38, shared_prefix_tokens=16000, prefix_groups=31)
    p90s, means = [], []
    for rate in (0.80, 0.84, 0.86, 0.88, 0.90, 1.0, 1.2):
        rep = deploy_report(DeployInput(**base, requests_per_s=rate))
        one = rep.best or rep.closest
        assert one is not None and one.benchmark is not None, rate
        b = one.benchmark
        assert b.ttft_p90_ms is not None and b.ttft_mean_ms is not None
        assert b.seconds >= 38 / rate
        p90s.append(b.ttft_p90_ms)
        means.append(b.ttft_mean_ms)
    assert p90s == sorted(p90s) and means == sorted(means), (p90s, means)


def _record(rid: str) -> dict:
    return next(r for r in all_records() if r["id"] == rid)


def test_llmd_overloaded_stage_is_finite():
    """Qwen3-32B, HBM only, 20 requests/s for the fleet (2.5 a replica, 150 requests a stage): llm-d measured
    43.67 s mean TTFT; the steady state (the old question) was unstable (inf); the finite stage answers
    seconds, within a factor of two of the measurement."""
    r = _record("llmd-tiered-qwen3-32b-h100-tp2-rate20-hbm-ttft")
    v, how = predict_serving(r)
    assert math.isfinite(v) and 0.5 < v / r["measured"] < 2, (v, how)
    steady = {k: x for k, x in r.items() if k != "requests"}
    assert predict_serving(steady)[0] == math.inf


def test_llmd_first_stage_pays_its_cold_misses():
    """The first stage (5 requests/s for the fleet) starts cold: more than half its requests compute their
    16,000-token prefix, so the host tier's mean TTFT is far above the warm steady state's (87 ms before;
    1,170 ms measured)."""
    r = _record("llmd-tiered-qwen3-32b-h100-tp2-rate5-cpu200gib-ttft")
    steady = {k: x for k, x in r.items() if k != "requests"}
    assert predict_serving(steady)[0] < 200
    assert predict_serving(r)[0] > 400


def test_endless_deploy_answer_unchanged_and_stage_options_checked():
    """A user's endless load (no --requests) keeps its steady-state answer; --requests with --requests-per-s
    asks a stage; --warm-requests without --requests is a one-line error."""
    base = dict(model="qwen3-32b", runtime="vllm", gpu=("H100 SXM",), input_tokens=16256, output_tokens=256,
                tp=2, requests_per_s=2.5, shared_prefix_tokens=16000, prefix_groups=31)
    steady = deploy_report(DeployInput(**base))
    assert steady.best is None or steady.best.benchmark is None
    stage = deploy_report(DeployInput(**base, requests=150, warm_requests=112))
    one = stage.best or stage.closest
    assert one is not None and one.benchmark is not None and one.benchmark.ttft_mean_ms is not None
    with pytest.raises(InputError):
        deploy_report(DeployInput(**base, warm_requests=10))
    unpinned = {k: v for k, v in base.items() if k != "tp"}
    with pytest.raises(InputError, match="pinned deployment"):
        deploy_report(DeployInput(**unpinned, warm_requests=10))


def test_cold_share_counts_sessions():
    """--turns 4: only a session's first prompt can reach a new group (its later turns send their history
    after the shared prefix), so 100 requests are 25 sessions drawing over 8 groups: 8 (1 - (7/8)^25) / 25 =
    30.9 % of the sessions compute their prefix (the old count, 100 draws over 100 requests, gave 8.0 %); 40
    warm prompts are 10 sessions before it."""
    q = 7 / 8
    assert ru.cold_share(ru.Reuse(1000, 4, 8, requests=100)) == pytest.approx(8 * (1 - q ** 25) / 25)
    assert ru.cold_share(ru.Reuse(1000, 4, 8, requests=100)) == pytest.approx(0.309, abs=1e-3)
    assert ru.cold_share(ru.Reuse(1000, 4, 8, requests=100, warm=40)) == \
        pytest.approx(8 * (q ** 10 - q ** 25) / 25)


def test_stage_benchmark_block():
    """Reviewer finding 5: a stage's benchmark block names no scheduler (a closed-loop round's, optional
    key) and times its ITL median at the stage's decoding batch, not one user's: Qwen3-32B TP 2 above
    capacity (1.2 requests/s, 18 sequences decoding) took 14.8 ms at one user; a batch of 18 steps slower.
    A closed-loop benchmark (--users) keeps its scheduler."""
    base = dict(model="qwen3-32b", runtime="vllm", gpu=("H100 SXM",), input_tokens=16256, output_tokens=256,
                tp=2, requests=38, shared_prefix_tokens=16000, prefix_groups=31)
    rep = deploy_report(DeployInput(**base, requests_per_s=1.2))
    one = rep.best or rep.closest
    assert one is not None and one.benchmark is not None
    assert one.benchmark.scheduler is None
    assert one.benchmark.itl_median_ms is not None and one.benchmark.itl_median_ms > 20
    closed = deploy_report(DeployInput(**base, users=4))
    c = closed.best or closed.closest
    assert c is not None and c.benchmark is not None and c.benchmark.scheduler in ("prefill-first",
                                                                                    "decode-first")


def test_stage_says_why_its_hits_fall():
    """Reviewer finding 4: --requests on a stable stage applies the run's cold misses (Qwen3-32B TP 2, 38
    requests at 0.625/s over 31 groups: 58.1 % of them compute their prefix, the prefix hit rate 0.558 ->
    0.234): a note says so, and the workload echoes requests and warm_requests (keys left out for an endless
    load: its JSON unchanged)."""
    from cardfit.services.table import to_json

    base = dict(model="qwen3-32b", runtime="vllm", gpu=("H100 SXM",), input_tokens=16256, output_tokens=256,
                tp=2, requests_per_s=0.625, shared_prefix_tokens=16000, prefix_groups=31)
    stage = deploy_report(DeployInput(**base, requests=38))
    assert any("58.1% of its requests compute their group's shared prefix" in n for n in stage.notes)
    assert stage.workload.requests == 38 and stage.workload.warm_requests is None
    warm = deploy_report(DeployInput(**base, requests=75, warm_requests=38))
    assert warm.workload.warm_requests == 38
    assert any("after 38 prompts" in n for n in warm.notes)
    steady = deploy_report(DeployInput(**base))
    assert not any("cold cache" in n for n in steady.notes)
    keys = to_json(steady)["workload"]
    assert "requests" not in keys and "warm_requests" not in keys


def test_stage_reads_its_length_law():
    """Reviewer finding 7: a length law given with a stage of arrivals (--requests with --requests-per-s) was
    silently ignored, then refused; the stage now takes the prompts it draws for its p90 TTFT (its means at
    the mean lengths: tests/test_prompt_spread.py), and a cap on answers given without a law is still
    refused."""
    base = dict(model="qwen3-32b", runtime="vllm", gpu=("H100 SXM",), input_tokens=1000, output_tokens=200,
                tp=2, requests=60, requests_per_s=1.0)
    plain = deploy_report(DeployInput(**base)).best
    law = deploy_report(DeployInput(**base, length_distribution="uniform:0.5")).best
    assert plain is not None and law is not None and plain.benchmark and law.benchmark
    assert law.benchmark.ttft_mean_ms == plain.benchmark.ttft_mean_ms
    assert law.benchmark.ttft_p90_ms > plain.benchmark.ttft_p90_ms
    with pytest.raises(InputError) as e:
        deploy_report(DeployInput(**base, max_output_tokens=1024))
    assert e.value.field == "max_output_tokens"


def test_stable_open_load_serves_what_arrives():
    """Reviewer finding 8: a stable open load's output is what arrives, rate x output tokens (flow
    conservation); B / TPOT counted the requests still prefilling as decoding (Little's law's B holds each
    request for its prefill too): Llama-3.1-8B at 5 requests/s x 300 tokens answered 1,521.5 tok/s."""
    rep = deploy_report(DeployInput(model="meta-llama/Llama-3.1-8B-Instruct", requests_per_s=5.0,
                                    input_tokens=1000, output_tokens=300, ttft_ms=2000, tpot_ms=50))
    assert rep.best is not None
    assert rep.best.aggregate_tokens_per_s == pytest.approx(1500.0)

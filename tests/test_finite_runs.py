"""Issue 24 (a validation record is the user's question): a published benchmark is a finite run, and the
record asks it as one, with the request count its source or its harness states.

- MLPerf's Server and Interactive scenarios are Poisson arrivals at a target rate for at least 600 s;
  LoadGen's detailed log (mlperf_log_detail.txt beside each summary, mlcommons/inference_results_v5.1
  @965182b0) states the queries the timed run issued (`result_query_count`), so each record is the stage
  `deploy --requests-per-s R --requests N` (core/serving.py open_stage), one replica's share where a system
  runs several. Before, they carried no count and were timed as endless loads (overloaded: TTFT inf).
- Closed loops and bursts already carried their harness's count (NIM's AIPerf/genai-perf runs at a
  concurrency, trtllm-bench's table of requests per length pair, Azure's 1,000 requests at once): validate
  passes it on as --requests.
- A stage's output throughput is what arrives while the replica keeps up (flow conservation), whatever the
  engine's time per sequence: those records imply no per-sequence constant (validation/calibrate.py)."""

from __future__ import annotations

import math

import pytest

from cardfit.services.pinned import is_stage
from cardfit.validation import calibrate as cal
from cardfit.validation.serving import disaggregated_pools, predict_serving, record_input
from cardfit.validation.validate import all_records

RECORDS = {r["id"]: r for r in all_records()}


# (record, LoadGen's result_query_count for the system, replicas the system runs)
@pytest.mark.parametrize(("rid", "queries", "replicas"), [
    # Red Hat XE8640_4xH100_vLLM Server: one vLLM replica, 26,736 queries in 674 s at 39.64/s scheduled
    ("mlperf51-redhat-llama31-8b-h100-vllm-fp8-server-ttft", 26_736, 1),
    # NVIDIA B200-SXM-180GBx8_TRT Server: 601,560 queries over 8 replicas
    ("mlperf51-nvidia-llama31-8b-b200-trtllm-nvfp4-server-output", 601_560, 8),
    # Quanta D75E-4U_H200-NVL-141GBx4_TRT Interactive: 106,944 queries over 4 replicas
    ("mlperf51-qct-d75e-h200nvl-llama31-8b-trtllm-fp8-interactive-tpot", 106_944, 4),
])
def test_mlperf_server_runs_ask_their_stated_query_count(rid: str, queries: int, replicas: int) -> None:
    r = RECORDS[rid]
    inp, _, _ = record_input(r)
    assert inp.requests == queries // replicas and queries % replicas == 0
    assert inp.users is None and inp.requests_per_s == pytest.approx(float(r["request_rate"]))
    assert is_stage(inp)
    # the count is one replica's share of the system's exactly where the rate is (an even split, assumed)
    assert ("requests" in r["assumed"]) == (replicas > 1) == ("request_rate" in r["assumed"])


def test_every_open_arrival_record_is_a_finite_stage() -> None:
    """No serving record of open arrivals is asked as an endless load, but for a disaggregated one: deploy
    times open arrivals on two pools in their steady state only (services/deploy.py check_pools refuses
    --requests with --requests-per-s and --prefill-workers; core/disagg.py), so the Mooncake team's A10 P/D
    runs at 2-6 requests/s are asked at their rate, each a run whose request throughput kept up with it (the
    file's selection: a steady state exists)."""
    poisson = [r for r in RECORDS.values() if r.get("kind") == "serving" and r.get("load") == "poisson"]
    pools = [r for r in poisson if disaggregated_pools(r.get("settings") or {})]
    assert len(poisson) - len(pools) >= 124  # llm-d 72, MLPerf 48, vLLM PR 9668 4
    assert len(pools) == 26 and {r["file"] for r in pools} == {"serving_mooncake_pd_a10.toml"}
    for r in poisson:
        inp, _, _ = record_input(r)
        if r in pools:
            assert inp.requests is None and inp.requests_per_s == r["request_rate"], r["id"]
            continue
        assert inp.requests and is_stage(inp), r["id"]


def test_validate_times_the_stage() -> None:
    """Red Hat's H100 Server run (vLLM 0.10.0, 39.64 requests/s): cardfit places the replica above its
    capacity, so the endless load answered an infinite TTFT; the 26,736-request stage it ran queues through
    its 674 s instead, a finite (long, safe-side) wait."""
    r = RECORDS["mlperf51-redhat-llama31-8b-h100-vllm-fp8-server-ttft"]
    value, how = predict_serving(r)
    assert "a stage of 26736 requests arriving at 39.64/s" in how
    assert math.isfinite(value) and value > float(r["measured"])


@pytest.mark.parametrize(("rid", "users", "requests"), [
    # NIM 1.8.0 at concurrency 50: 10 x the concurrency (assumed: the page states no count)
    ("nim-llama-3.1-8b-h100-fp8-tp1-1000x1000-c50-output", 50, 500),
    # TensorRT-LLM 0.15.0 perf-overview: 30,000 requests of 128/128, all queued at once
    ("trtllm015-llama-3.1-8b-h100-fp8-tp1-128x128-output", 30_000, 30_000),
    # Azure AI-benchmarking-guide: 1,000 requests at once
    ("azure-llama-3.1-8b-h100-trtllm-fp8-tp1-128x128-output", 1_000, 1_000),
])
def test_closed_loops_and_bursts_ask_their_harness_count(rid: str, users: int, requests: int) -> None:
    r = RECORDS[rid]
    inp, _, _ = record_input(r)
    assert (inp.users, inp.requests) == (users, requests) and not is_stage(inp)
    assert f"a benchmark of {requests} requests at {users} in flight" in predict_serving(r)[1]


def test_open_arrival_throughput_fits_no_per_sequence_time() -> None:
    """The per-sequence fits take closed loops and bursts only: an MLPerf Server run's output is its arrival
    rate while the replica keeps up (and its `requests` counts the stage, not what is in flight), so the
    same system's Offline run is fitted on and its Server run is not."""
    trt = next(f for f in cal.FITS if f.key == "trtllm.decode_overhead_us_per_sequence_v0")
    assert trt.select(RECORDS["mlperf51-nvidia-llama31-8b-b200-trtllm-nvfp4-offline-output"])
    assert not trt.select(RECORDS["mlperf51-nvidia-llama31-8b-b200-trtllm-nvfp4-server-output"])
    sync = next(f for f in cal.FITS if f.key == "vllm.decode_overhead_us_per_sequence_sync")
    assert sync.select(RECORDS["mlperf51-redhat-llama31-8b-h100-vllm-fp8-offline-output"])
    assert not sync.select(RECORDS["mlperf51-redhat-llama31-8b-h100-vllm-fp8-server-output"])
    for f in (trt, sync):
        assert not [r["id"] for r in RECORDS.values() if r.get("load") == "poisson" and f.select(r)]


def test_closed_loop_pd_records_ask_their_run() -> None:
    """A closed-loop run on P/D pools is asked as the finite run it was (--requests at --users: core/disagg.py
    benchmark, its first wave then the steady state): dstack's 500 requests at 32-128 users, aiconfigurator's
    10 x the concurrency (assumed, as validation/aic_sample.py counts them); before, every P/D record was a
    steady state."""
    pools = [r for r in RECORDS.values() if r.get("kind") == "serving" and r.get("load") == "closed"
             and disaggregated_pools(r.get("settings") or {})]
    assert len(pools) == 102
    for r in pools:
        inp, _, _ = record_input(r)
        assert inp.requests == r["requests"] and inp.users == r["concurrency"], r["id"]
        assert not is_stage(inp) and inp.prefill_workers and inp.decode_workers, r["id"]
    r = RECORDS["dstack-pd-gptoss120b-h200-sglang-1p3d-tp2-2048x2048-c128-ttft"]
    how = predict_serving(r)[1]
    assert "a benchmark of 500 requests at 128 in flight: the first 128 prompts queued" in how

"""TGI's router as dstack's 405B-on-8x-MI300X runs show it
(https://github.com/dstackai/benchmarks/blob/06c957ab51572ca18db9c1f4bb254a9eb86df4d7/amd/tgi_vs_vllm/tgi/data/result_tgi_long.csv):
the batching task wakes on the first queued request and prefills it alone (backends/v3/src/backend.rs
batching_task), and the server's prefill budget is the launcher's max_input_tokens + 50."""

from __future__ import annotations

import statistics
import tomllib
from dataclasses import replace
from importlib import resources

from cardfit.catalog.runtimes import default_runtimes
from cardfit.core import serving as sv
from cardfit.core import speed as sp
from cardfit.validation.serving import record_schedule


def _replica(chunk: int = 125_050) -> sv.Replica:
    shares = sp.Shares(1.0, 0.0, 0.0, 1.0, "params")
    load = sp.Load(15_000_000_000, shares, 1536 * 57344, 2 * 7.6e9, 28, 3584)
    mc = sp.Machine(1935.0, 312.0, 1, decode_efficiency=0.873, overhead_s_per_layer=61.1e-6,
                    compute_efficiency=0.8)
    return sv.Replica(load, mc, 2 * 7.6e9, chunk, 256)


def test_a_router_that_prefills_the_first_request_alone_makes_the_rest_wait_for_it():
    """8 prompts of 10,000 tokens sent at once, prefill-first: together they share one prompt step; with the
    first prefilled alone, it gets its token after a one-prompt step and the seven others one step later
    (dstack's TGI run: 3.8 s, then seven at 27.9 s)."""
    w = sv.Workload(10_000, 100)
    together, _, _ = sv.rounds(_replica(), w, 8, 8, True)
    alone, tpot, _ = sv.rounds(replace(_replica(), burst_first_alone=True), w, 8, 8, True)
    assert len(set(together)) == 1
    first = sv.prompt_step_s(_replica(), 0, 10_000)
    assert abs(alone[0] - first) < 1e-9
    assert len(set(alone[1:])) == 1 and alone[1] > together[0] > alone[0]
    # the first request's answer waits for the others' prompt step: its TPOT is the longest
    assert tpot[0] > statistics.fmean(tpot[1:])


def test_the_rows_that_say_so_prefill_a_bursts_first_request_alone():
    rows = default_runtimes()
    assert rows.get("tgi").burst_first_alone
    assert not rows.get("vllm").burst_first_alone


def test_dstacks_tgi_records_state_their_prefill_budget():
    text = resources.files("cardfit.data").joinpath("validation").joinpath("serving.toml").read_text()
    recs = [r for r in tomllib.loads(text)["record"] if r["id"].startswith("dstack-405b-mi300x-tgi")]
    assert len(recs) == 24
    rt = default_runtimes().get("tgi")
    assert {record_schedule(r, rt) for r in recs} == {(125_050, True)}

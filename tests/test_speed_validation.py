"""cardfit's speed model scored against published measurements (data/validation/speed.toml); the fitted
constants are checked in tests/test_calibration.py."""

from __future__ import annotations

import statistics
import tomllib
from functools import cache
from importlib import resources

import pytest

from cardfit.validation.single import predict_ceiling, predict_speed


@cache
def records() -> tuple[dict, ...]:
    text = resources.files("cardfit").joinpath("data/validation/speed.toml").read_text(encoding="utf-8")
    return tuple(tomllib.loads(text)["record"])


def _scored(kind: str) -> list[tuple[str, float, float]]:
    out = []
    for r in records():
        if r["kind"] != kind:
            continue
        p = predict_speed(r)
        if p is not None:
            out.append((r["id"], r["measured"], p))
    return out


def _report(kind: str, rows: list[tuple[str, float, float]]) -> tuple[float, float]:
    errs = sorted(((abs(p - m) / m, i) for i, m, p in rows), reverse=True)
    med = statistics.median(e for e, _ in errs)
    print(f"\n{kind}: {len(rows)} records scored, median abs error {med:.1%}, worst {errs[0][0]:.1%} "
          f"({errs[0][1]})")
    return med, errs[0][0]


def test_decode_median_error_within_20_percent():
    rows = _scored("decode")
    assert len(rows) >= 60  # the records whose model, card and quantization are in the catalogs
    med, worst = _report("decode", rows)
    # the records of speed.toml, in sample: 7.6 % on 81 with the low-bit unpacking cost and the Metal
    # per-layer time of pre-graph builds (all decode records out of sample: tests/test_calibration.py)
    assert med <= 0.085
    # the worst is vllm#20710 (2x B200, TP 2, one request), which its own author calls anomalous: +147 % ->
    # +166 % when vLLM's dense per-layer time came to be fitted on dense models only (services/calibrate.py
    # _dense), +180 % with the engines' measured all-reduce kernel time (core/speed.py CUSTOM_ALLREDUCE_US:
    # 3.9 us a call at its message, not 10), +218 % once fitted constants are the median of each publisher's
    # median (vLLM's dense per-layer time 56 -> 50 us: its three publishers' medians, not its records')
    assert worst < 2.3


def test_prefill_and_aggregate_are_scored():
    med_p, _ = _report("prefill", _scored("prefill"))
    med_a, _ = _report("aggregate_decode", _scored("aggregate_decode"))
    assert med_p <= 0.30
    # 0.30 while the current engines' per-sequence cost was fitted on serving TPOT records (double-counting
    # their prompt chunks); not fitted since (overlapped CPU scheduling, data/runtimes.toml): 0.349 on 11
    assert med_a <= 0.36


def test_no_measurement_beats_its_bandwidth_ceiling():
    checked = 0
    for r in records():
        if r["kind"] != "decode":
            continue
        top = predict_ceiling(r)
        if top is None:
            continue
        checked += 1
        assert r["measured"] <= top, f"{r['id']}: {r['measured']} tok/s above the ceiling {top:.1f}"
    assert checked >= 60


def test_pre_graph_llamacpp_on_hbm_streams_at_its_sm_rate():
    """XiongjieDai's A100/H100 PCIe runs and llama.cpp's CI on a V100 (builds of May 2024 and before) stream
    SMs x clock x runtimes.toml's decode_bytes_per_sm_cycle_hbm_v0, not a share of the bus: about half of an
    A100's 1.9 TB/s, most of a V100's 0.9; a current build on the same card streams the usual share."""
    from cardfit.catalog.runtimes import default_runtimes
    from cardfit.validation.single import engine_generation, on_hbm, record_setup, sm_cycles
    from cardfit.validation.validate import all_records

    rt = default_runtimes().find("llama.cpp")
    recs = {r["id"]: r for r in all_records()}
    shares = {}
    for rid in ("xd-a10080gb-llama2-13b-q40-mainevalspeed", "ggmlci-v100-openllama7b-f16-tg256"):
        old = recs[rid]
        s = record_setup(old)
        gpu = s.plan.first.option.gpu
        assert on_hbm(s) and sm_cycles(gpu)
        shares[gpu.sm_count] = engine_generation(old, s).machine.decode_efficiency
        assert shares[gpu.sm_count] == pytest.approx(
            rt.decode_bytes_per_sm_cycle_hbm_v0 * sm_cycles(gpu) / (gpu.bandwidth_gbps * 1e9))
    assert shares[108] < 0.7 < shares[80]  # A100 PCIe 80GB vs Tesla V100
    old = recs["xd-a10080gb-llama2-13b-q40-mainevalspeed"]
    new = {**old, "date": "2025-01-01"}
    assert engine_generation(new, record_setup(new)).machine.decode_efficiency == rt.decode_efficiency

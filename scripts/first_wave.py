#!/usr/bin/env python
"""InferenceX's mean TTFT, taken apart (docs/VALIDATION.md, "InferenceX's mean TTFT: the first wave, taken
apart"): for every served run whose record excerpt states the mean, median and p99 TTFT of one closed-loop
benchmark (InferenceX-app's fixture rows, serving_inferencex_median.toml), the first wave those figures imply
beside cardfit's own answer for the same benchmark question.

    python scripts/first_wave.py

The harness sends R = 10 x CONC requests, CONC at a time; the first CONC leave together. If those CONC wait
W each and the other R - CONC about the median m, the mean is m + (W - m) CONC / R, so
W = (mean - m) R / CONC + m (`implied_first_wave`). Where W is close to the run's p99 (the slowest 1 % of
R >= 40 requests lies inside the first wave), the mean's excess over the median is that one wave. cardfit's
figure is the same sum over its own answer (core/serving.py benchmark: ttft_mean_s, ttft_median_s of
the pinned replica at the full fit). Read-only: it writes nothing."""

from __future__ import annotations

import json
from typing import Any

from cardfit.validation.validate import load_records


def implied_first_wave(mean: float, median: float, requests: int, concurrency: int) -> float:
    """The wait of each of the first `concurrency` requests that brings a run's mean to `mean` when the other
    requests wait `median` (seconds in, seconds out)."""
    return (mean - median) * requests / concurrency + median


def excerpt_figures(excerpt: str) -> dict[str, float] | None:
    """mean_ttft, median_ttft, p99_ttft (seconds) of one InferenceX-app fixture row quoted as JSON; None when
    the excerpt is not such a row or lacks one of them."""
    try:
        row = json.loads(excerpt)
    except (ValueError, TypeError):
        return None
    if not isinstance(row, dict):
        return None
    got = {k: row.get(k) for k in ("mean_ttft", "median_ttft", "p99_ttft")}
    if not all(isinstance(v, (int, float)) for v in got.values()):
        return None
    return {k: float(v) for k, v in got.items()}


def timed(r: dict[str, Any]) -> dict[str, float] | None:
    """cardfit's benchmark answer at the full fit: mean and median TTFT (seconds); None where it cannot set
    the record up or times no finite benchmark."""
    from cardfit.validation.serving import benchmarked

    p = benchmarked(r)
    if p is None:
        return None
    return {"mean": p.bench.ttft_mean_s, "median": p.bench.ttft_median_s}


def rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in records:
        if r.get("kind") != "serving" or r.get("metric") != "ttft_ms" or r.get("statistic") != "median":
            continue
        f = excerpt_figures(r.get("excerpt", ""))
        if f is None or r.get("load") != "closed":
            continue
        n, c = int(r["requests"]), int(r["concurrency"])
        wave = implied_first_wave(f["mean_ttft"], f["median_ttft"], n, c)
        t = timed(r)
        pred_wave = None if t is None else implied_first_wave(t["mean"], t["median"], n, c)
        out.append({"record": r, **f, "wave": wave, "pred": t, "pred_wave": pred_wave})
    return out


def main() -> int:
    print(f"{'run (median record)':58s} {'c':>4s} {'mean':>6s} {'median':>6s} {'p99':>6s} {'wave':>6s} "
          f"{'w/p99':>5s} {'cf med':>6s} {'cf wave':>7s}")
    for x in rows(load_records("serving")):
        r, t = x["record"], x["pred"]
        cf_med = "—" if t is None else f"{t['median'] * 1e3:6.0f}"
        cf_wave = "—" if x["pred_wave"] is None else f"{x['pred_wave'] * 1e3:7.0f}"
        print(f"{r['id'].removesuffix('-ttft-median')[:58]:58s} {r['concurrency']:4d} "
              f"{x['mean_ttft'] * 1e3:6.0f} {x['median_ttft'] * 1e3:6.0f} {x['p99_ttft'] * 1e3:6.0f} "
              f"{x['wave'] * 1e3:6.0f} {x['wave'] / x['p99_ttft']:5.2f} {cf_med:>6s} {cf_wave:>7s}")
    print("ms; wave: the first wave's wait the measured mean and median imply ((mean - median) x requests / "
          "concurrency + median); cf: cardfit's benchmark answer at the full fit (its median, and the same "
          "sum over its mean and median)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

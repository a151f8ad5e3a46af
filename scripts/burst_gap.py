#!/usr/bin/env python
"""Served runs of many streams at once, read for a limit outside the GPU step (docs/VALIDATION.md, "Bursts
of 1,000 streams: the serving process"): for every serving run whose benchmark keeps at least --min-streams
sequences decoding (cardfit's pinned answer at the full fit), the step cardfit times, the measured mean
TPOT, and what the run's own excerpt says of how its tokens arrived (median and p99 inter-token gap, peak
against mean output tokens per second, as `vllm bench serve` prints them).

    python scripts/burst_gap.py                      # runs of >= 300 streams
    python scripts/burst_gap.py --min-streams 800

`streamed/s` is the streams times one token each, divided by the measured mean TPOT: the streamed responses
per second the server delivered in its decode phase. A run whose TPOT is the same whatever the model and card
(so the same streamed/s), whose median gap is near zero and p99 near a second (tokens held, then flushed), and
whose peak second is several times its mean, waited on something other than the GPU step. Read-only."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ttft_gap import run_key  # noqa: E402  (one owner: which records are one run)

from cardfit.validation.validate import load_records  # noqa: E402

# `vllm bench serve` summary lines (GPUStack's excerpts and every other record quoting that tool)
_EXCERPT = {"median_itl_ms": "Median ITL (ms):", "p99_itl_ms": "P99 ITL (ms):",
            "peak_output": "Peak output token throughput (tok/s):",
            "mean_output": "Output token throughput (tok/s):"}


def excerpt_figures(excerpt: str) -> dict[str, float]:
    """The arrival figures a `vllm bench serve` summary states (those it lacks are left out)."""
    out = {}
    for key, label in _EXCERPT.items():
        m = re.search(r"^" + re.escape(label) + r"\s+([\d.]+)\s*$", excerpt or "", re.MULTILINE)
        if m:
            out[key] = float(m.group(1))
    return out


def release(r: dict[str, Any]) -> str:
    return str((r.get("settings") or {}).get("version") or "")


def runs(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per served benchmark run with a mean TPOT record: the record and its excerpt's figures."""
    out = []
    for r in records:
        if (r.get("kind") != "serving" or r.get("metric") != "tpot_ms"
                or (r.get("statistic") or "mean") != "mean" or r.get("load") not in ("burst", "closed")):
            continue
        out.append({"record": r, "key": run_key(r), **excerpt_figures(r.get("excerpt", ""))})
    return out


def timed(r: dict[str, Any]) -> dict[str, float] | None:
    """cardfit's pinned answer at the full fit: the mean sequences decoding and the benchmark's mean TPOT
    (ms); None for two pools or a record cardfit cannot set up."""
    from cardfit.validation.serving import benchmarked

    p = benchmarked(r)
    if p is None:
        return None
    return {"streams": p.result.served.batch, "tpot_ms": p.bench.tpot_mean_s * 1e3}


def rows(records: list[dict[str, Any]], min_streams: float) -> list[dict[str, Any]]:
    out = []
    for row in runs(records):
        r = row["record"]
        t = timed(r)
        if t is None or t["streams"] < min_streams:
            continue
        out.append({**row, **t, "measured_tpot_ms": r["measured"],
                    "streamed_per_s": t["streams"] / (r["measured"] / 1e3)})
    return out


def _f(x: float | None, fmt: str) -> str:
    return "—" if x is None else format(x, fmt)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--min-streams", type=float, default=300.0)
    args = ap.parse_args(argv)
    print(f"{'record (mean TPOT)':66s} {'engine':>16s} {'streams':>7s} {'TPOT':>6s} {'meas':>6s} "
          f"{'streamed/s':>10s} {'medITL':>7s} {'p99ITL':>7s} {'peak/mean':>9s}")
    for x in sorted(rows(load_records("serving"), args.min_streams),
                    key=lambda x: (x["record"]["runtime"], -x["measured_tpot_ms"])):
        r = x["record"]
        peak = x.get("peak_output")
        ratio = peak / x["mean_output"] if peak and x.get("mean_output") else None
        print(f"{r['id'][:66]:66s} {(r['runtime'] + '@' + release(r))[:16]:>16s} {x['streams']:7.0f} "
              f"{x['tpot_ms']:6.1f} {x['measured_tpot_ms']:6.1f} {x['streamed_per_s']:10,.0f} "
              f"{_f(x.get('median_itl_ms'), '7.2f')} {_f(x.get('p99_itl_ms'), '7.0f')} {_f(ratio, '9.1f')}")
    print("streams: cardfit's mean sequences decoding; TPOT: cardfit's mean (full fit), meas: measured (ms); "
          "streamed/s = streams / measured TPOT; ITL and peak/mean from the run's excerpt")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

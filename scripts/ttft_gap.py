#!/usr/bin/env python
"""Where the served TTFT error of a validation path sits (docs/VALIDATION.md, "Where the user path's TTFT
shortfall is"): the serving TTFT records of one path, out of sample (leave one publisher out), split by
publisher, engine, layout and statistic, each group beside its in-sample error and the out-of-sample error
of the same runs' TPOT and output-throughput records.

    python scripts/ttft_gap.py                  # the user path's split
    python scripts/ttft_gap.py --path older     # another path (user, knobs, older)
    python scripts/ttft_gap.py --records        # and each record: what cardfit's answer is made of

`--records` times each record again at the full fit (the stored constants) and prints, beside the measured
and out-of-sample figures, one prompt stepped alone and one decode step of the run's users on the record's
replica, so a gap can be read in prompt steps or in decode steps. Read-only: it writes nothing."""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from typing import Any

from cardfit.validation.validate import Report, load_records, validate

# the fields of one figure: the records of one run differ only in these (a run's median TTFT may be quoted
# from another file or snapshot of the same results than its mean)
_PER_FIGURE = frozenset({"id", "metric", "statistic", "measured", "unit", "excerpt", "note", "assumed",
                         "file", "source"})


def run_key(r: dict[str, Any]) -> str:
    """One benchmark run's records share this key: every field but the figure's own."""
    return repr(sorted((k, repr(v)) for k, v in r.items() if k not in _PER_FIGURE))


def layout(r: dict[str, Any]) -> str:
    """P/D (two pools), DP/EP (attention data parallel) or one aggregated replica, as the record states it."""
    from cardfit.validation.serving import attention_dp, disaggregated_pools

    s = r.get("settings") or {}
    if disaggregated_pools(s):
        return "P/D"
    if attention_dp(s, int(s.get("tp") or 1)) > 1:
        return "DP/EP"
    return "agg"


def group(r: dict[str, Any], publisher: str) -> str:
    return f"{publisher} {r['runtime']} {layout(r)} {r.get('statistic') or 'mean'}"


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:+.0%}"


def split(rep: Report, records: list[dict[str, Any]], path: str = "user") -> list[dict[str, Any]]:
    """Per group of `path`'s serving TTFT records: n, the signed median error out of sample and in sample,
    and the signed median out-of-sample error of the same runs' TPOT (or ITL) and throughput records."""
    by_id = {r["id"]: r for r in records}
    loo = {o.id: o.error for o in rep.loso}
    full = {o.id: o.error for o in rep.outcomes}
    runs: dict[str, list[str]] = defaultdict(list)
    for r in records:
        runs[run_key(r)].append(r["id"])
    rows: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for rid, r in by_id.items():
        if r.get("kind") != "serving" or r.get("metric") != "ttft_ms" or rep.paths.get(rid) != path:
            continue
        if loo.get(rid) is None:
            continue
        g = rows[group(r, rep.publishers.get(rid, ""))]
        g["ttft"].append(loo[rid])
        if full.get(rid) is not None:  # a record with no in-sample figure is left out of that median
            g["ttft_full"].append(full[rid])
        for other in runs[run_key(r)]:
            metric = by_id[other].get("metric")
            err = loo.get(other)
            if err is None or metric == "ttft_ms":
                continue
            g["tpot" if metric in ("tpot_ms", "itl_ms") else "throughput"].append(err)
    out = []
    for name, g in sorted(rows.items(), key=lambda kv: -len(kv[1]["ttft"])):
        out.append({"group": name, "n": len(g["ttft"]), "ttft": _median(g["ttft"]),
                    "ttft_in_sample": _median(g["ttft_full"]),
                    # the same runs' other figures (one TTFT record per statistic may share them)
                    "tpot": _median(g["tpot"]), "throughput": _median(g["throughput"])})
    return out


def breakdown(r: dict[str, Any]) -> dict[str, float] | None:
    """The record's pinned answer at the full fit: one prompt alone and one decode step of its users on its
    replica (ms), and the benchmark's mean and median TTFT; None for two pools (P/D: core/disagg.py)."""
    from cardfit.core import serving as sv
    from cardfit.validation.serving import answer, record_input

    inp, _, _ = record_input(r)
    p = answer(inp)
    if p.pools is not None:
        return None
    rep = p.result.cand.replica
    users = max(1, min(int(inp.users or 1), rep.max_seqs))
    out = {"one_prompt_ms": sv.prompt_step_s(rep, 0, inp.input_tokens) * 1e3,
           "decode_step_ms": sv.prompt_step_s(rep, users, 0) * 1e3}
    if p.bench is not None:
        out["bench_mean_ms"] = p.bench.ttft_mean_s * 1e3
        out["bench_median_ms"] = p.bench.ttft_median_s * 1e3
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--path", default="user", choices=("user", "knobs", "older"))
    ap.add_argument("--records", action="store_true", help="each record's breakdown too")
    args = ap.parse_args(argv)
    records = load_records("serving")
    rep = validate("serving")
    print(f"{'group':42s} {'n':>4s} {'TTFT':>6s} {'in':>6s} {'TPOT':>6s} {'thru':>6s}")
    for g in split(rep, records, args.path):
        print(f"{g['group']:42s} {g['n']:4d} {_pct(g['ttft']):>6s} {_pct(g['ttft_in_sample']):>6s} "
              f"{_pct(g['tpot']):>6s} {_pct(g['throughput']):>6s}")
    print("TTFT: signed median error out of sample; in: in sample; TPOT, thru: the same runs' records, "
          "out of sample (+: predicted longer / more)")
    if not args.records:
        return 0
    loo = {o.id: o for o in rep.loso}
    print(f"\n{'record':72s} {'meas':>8s} {'loo':>8s} {'1 prompt':>8s} {'decode':>7s} {'gap/dec':>7s}")
    for r in records:
        o = loo.get(r["id"])
        if (r.get("metric") != "ttft_ms" or rep.paths.get(r["id"]) != args.path or o is None
                or o.predicted is None):
            continue
        b = breakdown(r)
        if b is None:
            print(f"{r['id'][:72]:72s} {r['measured']:8.0f} {o.predicted:8.0f}  (two pools)")
            continue
        gap = r["measured"] - o.predicted
        print(f"{r['id'][:72]:72s} {r['measured']:8.0f} {o.predicted:8.0f} {b['one_prompt_ms']:8.0f} "
              f"{b['decode_step_ms']:7.1f} {gap / b['decode_step_ms']:7.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

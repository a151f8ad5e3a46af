#!/usr/bin/env python
"""A drafted serving run's cycle, measured against cardfit's (docs/VALIDATION.md, "SGLang's EAGLE cycle, read
in its source"). Read-only: it writes nothing.

    python scripts/spec_gap.py              # every drafted serving run whose excerpt quotes mean ITL and TPOT

A streaming client under speculative decoding receives one chunk a cycle (SGLang streams each scheduler
pass's accepted tokens together), so a run's mean ITL is about its mean cycle and mean ITL / mean TPOT about
the tokens a cycle yields. Beside those, cardfit's cycle at the run's concurrency, taken apart on the replica
the record's pinned answer builds (at the stored constants): the verification (its weight and cache reads, its
FLOPs, its fixed time per layer and per sequence), the drafter's forwards (core/speculative.py draft_s) and
the tokens a cycle yields (Speculation.per_step). A reading, not a score: the ITL of a run with prompts
arriving mid-decode also holds their prompt steps, so the measured cycle is an upper bound at 2+ users."""

from __future__ import annotations

import re
from typing import Any

from cardfit.validation.validate import load_records

_ITL = re.compile(r"Mean ITL \(ms\):\s+([0-9.]+)")
_TPOT = re.compile(r"Mean TPOT \(ms\):\s+([0-9.]+)")


def measured_cycle(r: dict[str, Any]) -> tuple[float, float] | None:
    """(mean ITL ms, mean ITL / mean TPOT) from the record's excerpt; None where it quotes either not."""
    text = str(r.get("excerpt") or "")
    itl, tpot = _ITL.search(text), _TPOT.search(text)
    if not (itl and tpot) or float(tpot.group(1)) <= 0:
        return None
    return float(itl.group(1)), float(itl.group(1)) / float(tpot.group(1))


def drafted_runs(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The TPOT record of each drafted serving run whose excerpt gives a measured cycle."""
    return [r for r in records if (r.get("settings") or {}).get("speculative")
            and r.get("metric") == "tpot_ms" and measured_cycle(r) is not None]


def cardfit_cycle(r: dict[str, Any]) -> dict[str, float]:
    """cardfit's cycle (ms) at the record's concurrency, in parts, on its pinned replica: `verify` (the
    target's step of the verified tokens: `reads`, `flops` the roofline's two sides, `fixed` its time per
    layer and per sequence), `draft` (the drafter's K forwards and the host time the runtime leaves exposed a
    cycle: core/speculative.py draft_s, Speculation.host_s), `total` (core/serving.py _step_s, the sum of
    them and any link time) and `tokens` (a cycle's yield per sequence)."""
    from cardfit.core import serving as sv
    from cardfit.core.speculative import draft_s
    from cardfit.core.speed import step
    from cardfit.validation.serving import answer, record_input

    inp, _, _ = record_input(r)
    rep = sv._stepping(answer(inp).result.cand.replica)
    spec = rep.spec
    b = max(1, min(int(r.get("concurrency") or 1), rep.max_seqs or int(r.get("concurrency") or 1)))
    load, seqs = sv._mixed(rep.load, b, 0, 0, spec.verified)
    v = step(load, rep.machine, seqs)
    return {"sequences": float(b), "verify": v.seconds * 1e3, "reads": v.memory_s * 1e3,
            "flops": v.compute_s * 1e3, "fixed": v.overhead_s * 1e3,
            "draft": draft_s(spec, rep.machine, b) * 1e3, "total": sv._step_s(rep, b, 0.0) * 1e3,
            "tokens": spec.per_step}


def main() -> int:
    print(f"{'run (TPOT record)':58s} {'b':>2s} {'ITL':>6s} {'tok/c':>5s} │ {'cycle':>6s} {'verify':>6s} "
          f"{'reads':>6s} {'fixed':>6s} {'draft':>6s} {'tok/c':>5s} │ {'missing':>7s}")
    for r in drafted_runs(load_records("serving")):
        itl, per_cycle = measured_cycle(r)  # type: ignore[misc]
        c = cardfit_cycle(r)
        print(f"{r['id'][:58]:58s} {int(c['sequences']):2d} {itl:6.2f} {per_cycle:5.2f} │ "
              f"{c['total']:6.2f} {c['verify']:6.2f} {c['reads']:6.2f} {c['fixed']:6.2f} {c['draft']:6.2f} "
              f"{c['tokens']:5.2f} │ {itl - c['total']:7.2f}")
    print("ITL: measured mean ITL (ms, one chunk a cycle); tok/c: tokens a cycle (measured: ITL / TPOT); "
          "cycle: cardfit's at b users (ms) = verify (weight and cache reads or FLOPs, whichever longer, "
          "plus fixed time) + draft (K forwards + the exposed host time a cycle); missing: measured ITL - "
          "cardfit's cycle")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`cardfit validate`: cardfit's predictions against real measurements (data/validation/*.toml)."""

from __future__ import annotations

from typing import Any

import click

from . import command

VALIDATE_EPILOG = """\b
Examples:
  cardfit validate                      # every record, table and error per kind
  cardfit validate --kind kv_cache      # one kind of measurement
  cardfit validate --runtime vllm --json
  cardfit validate --plot accuracy.png  # predicted vs measured chart (needs matplotlib)
  cardfit validate --write-accuracy src/cardfit/data/accuracy.toml   # regenerate the error bars
"""


@command("validate", epilog=VALIDATE_EPILOG, argument=False,
         display=(click.Option(["--all", "show_all"], is_flag=True,
                               help="list skipped records in the table too"),))
def validate(report: Any, inp: Any, show_all: bool) -> None:
    """Score cardfit against published measurements: predicted vs measured per record, and the
    median, 90th-percentile and worst relative error per kind (error = predicted / measured − 1)."""
    _print(report.as_dict(), show_all, inp.plot)


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "bytes":
        return f"{value / 2**30:,.2f} GiB"
    return f"{value:,.0f} {unit.replace('tokens_per_s', 'tok/s')}"


def _print(d: dict[str, Any], show_all: bool, plot: str | None) -> None:
    from rich.table import Table

    from .render import console

    c = console()
    t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for col, just in (("kind", "left"), ("record", "left"), ("runtime", "left"), ("measured", "right"),
                      ("predicted", "right"), ("error", "right")):
        t.add_column(col, justify=just, no_wrap=True)  # type: ignore[arg-type]
    for r in d["records"]:
        if r["skipped"] and not show_all:
            continue
        err = "skipped" if r["skipped"] else f"{r['error']:+.1%}"
        t.add_row(r["kind"], r["id"], r["runtime"], _fmt(r["measured"], r["unit"]),
                  _fmt(r["predicted"], r["unit"]), err)
    c.print(t)
    if show_all:
        for r in d["records"]:
            if r["skipped"]:
                c.print(f"[dim]skipped {r['id']}: {r['skipped']}[/]")
    c.print()
    s = Table(show_header=True, header_style="bold", box=None, pad_edge=False,
              title="error per kind: out of sample (each source left out of the fit) | in sample")
    for col in ("kind", "n", "sources", "skipped", "median", "p90", "p90 over", "│", "median ", "p90 ",
                "worst"):
        s.add_column(col, justify="left" if col in ("kind", "│") else "right")
    for kind, k in d["kinds"].items():
        keys = ("loo_median_abs_error", "loo_p90_abs_error", "loo_p90_over_error", "median_abs_error",
                "p90_abs_error", "max_abs_error")
        pct = [("—" if k.get(x) is None else f"{k[x]:.1%}") for x in keys]
        s.add_row(kind, str(k["n"]), str(k.get("sources", "")), str(k["skipped"]), *pct[:3], "│", *pct[3:])
    c.print(s)
    c.print(f"{d['total']} records, {d['skipped']} skipped (`--all` lists them with the reason). Error = "
            "predicted / measured − 1; 'p90 over': 90th percentile of the over-prediction. Out of sample: "
            "every fitted constant (scripts/fit_constants.py) refitted without the record's source."
            + (f" Chart: {plot}" if plot else ""))

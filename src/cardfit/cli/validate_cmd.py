"""`cardfit validate`: cardfit's predictions against real measurements (data/validation/*.toml)."""

from __future__ import annotations

from typing import Any

import click

from . import cli, emit_json
from .options import json_option

VALIDATE_EPILOG = """\b
Examples:
  cardfit validate                      # every record, table and error per kind
  cardfit validate --kind kv_cache      # one kind of measurement
  cardfit validate --runtime vllm --json
  cardfit validate --plot accuracy.png  # predicted vs measured chart (needs matplotlib)
  cardfit validate --write-accuracy src/cardfit/data/accuracy.toml   # regenerate the error bars
"""


@cli.command(epilog=VALIDATE_EPILOG)
@click.option("--kind", default=None, help="only records of this kind (file_size, weights, kv_cache, "
              "compute_buffer, activation, overhead, max_context, total_memory, decode, prefill, aggregate_decode)")
@click.option("--runtime", default=None, help="only records measured on this runtime (vllm, llama.cpp, ollama …)")
@click.option("--plot", "plot", type=click.Path(dir_okay=False, writable=True), default=None,
              help="write a predicted-vs-measured chart to this PNG/SVG file")
@click.option("--all", "show_all", is_flag=True, help="list skipped records in the table too")
@click.option("--write-accuracy", "accuracy", type=click.Path(dir_okay=False, writable=True), default=None,
              help="regenerate the error-bar data (src/cardfit/data/accuracy.toml) from all records")
@json_option
def validate(kind: str | None, runtime: str | None, plot: str | None, show_all: bool, accuracy: str | None,
             as_json: bool) -> None:
    """Score cardfit against published measurements: predicted vs measured per record, and the
    median, 90th-percentile and worst relative error per kind (error = predicted / measured − 1)."""
    from ..services.validate import validate as run

    report = run(kind, runtime)
    if accuracy:
        _write_accuracy(accuracy, kind, runtime)
    if plot:
        from ..charts.validation import write_plot

        write_plot(report, plot)
    if as_json:
        emit_json(report.as_dict())
        return
    _print(report.as_dict(), show_all, plot)


def _write_accuracy(path: str, kind: str | None, runtime: str | None) -> None:
    import datetime

    from ..errors import InputError
    from ..services.validate import accuracy_toml
    from ..services.validate import validate as run

    if kind or runtime:
        raise InputError("--write-accuracy uses every record; drop --kind/--runtime", field="write_accuracy")
    text = accuracy_toml(run(), datetime.date.today().isoformat())
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    except OSError as e:
        raise InputError(f"cannot write {path}: {e.strerror or e}", field="write_accuracy") from e


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
        t.add_row(r["kind"], r["id"], r["runtime"], _fmt(r["measured"], r["unit"]), _fmt(r["predicted"], r["unit"]),
                  err)
    c.print(t)
    if show_all:
        for r in d["records"]:
            if r["skipped"]:
                c.print(f"[dim]skipped {r['id']}: {r['skipped']}[/]")
    c.print()
    s = Table(show_header=True, header_style="bold", box=None, pad_edge=False, title="error per kind")
    for col in ("kind", "n", "skipped", "median", "p90", "worst"):
        s.add_column(col, justify="left" if col == "kind" else "right")
    for kind, k in d["kinds"].items():
        pct = [("—" if k[x] is None else f"{k[x]:.1%}") for x in ("median_abs_error", "p90_abs_error", "max_abs_error")]
        s.add_row(kind, str(k["n"]), str(k["skipped"]), *pct)
    c.print(s)
    c.print(f"{d['total']} records, {d['skipped']} skipped (`--all` lists them with the reason)."
            + (f" Chart: {plot}" if plot else ""))

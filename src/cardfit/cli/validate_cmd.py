"""`cardfit validate`: cardfit's predictions against real measurements (data/validation/*.toml)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from . import command

if TYPE_CHECKING:
    from ..validation.validate import Report

VALIDATE_EPILOG = """\b
Examples:
  cardfit validate                      # every record, error per kind and per feature
  cardfit validate --kind kv_cache      # one kind of measurement
  cardfit validate --runtime vllm --json
  cardfit validate --plot accuracy.png  # predicted vs measured chart (needs matplotlib)
  cardfit validate --write-accuracy src/cardfit/data/accuracy.toml   # regenerate the error bars
  cardfit validate --source aiconfigurator   # aiconfigurator's whole silicon sample, its own mode
"""


@command("validate", epilog=VALIDATE_EPILOG, argument=False,
         display=(click.Option(["--all", "show_all"], is_flag=True,
                               help="list skipped records in the table too"),))
def validate(report: Report, inp: Any, show_all: bool) -> None:
    """Score cardfit against published measurements: predicted vs measured per record, and the
    median, 90th-percentile and worst relative error per kind (error = predicted / measured − 1)."""
    if inp.source:
        _print_sample(report, inp.source, show_all, inp.plot)
        return
    _print(report, show_all, inp.plot)


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "bytes":
        return f"{value / 2**30:,.2f} GiB"
    return f"{value:,.0f} {unit.replace('tokens_per_s', 'tok/s')}"


def _wide(c: Any, table: Any) -> Any:
    """Output to a file or pipe has no edge: the console as wide as the table's longest row (record ids run
    to 70 characters), so no column is cut to '…'; a terminal keeps its own width."""
    from rich.console import Console
    from rich.measure import Measurement

    from .render import width

    if width() is None:
        return c
    probe = Console(width=100_000, highlight=False, emoji=False)
    return _widened(c, Measurement.get(probe, probe.options, table).maximum)


def _widened(c: Any, need: int) -> Any:
    from rich.console import Console

    return c if need <= c.width else Console(highlight=False, soft_wrap=False, width=need, emoji=False)


RECORD_COLUMNS = (("kind", "left"), ("record", "left"), ("runtime", "left"), ("measured", "right"),
                  ("predicted", "right"), ("error", "right"))


def _print(report: Report, show_all: bool, plot: str | None) -> None:
    from rich.table import Table

    from .render import console

    c = console()
    rows = [(o.kind, o.id, o.runtime, _fmt(o.measured, o.unit), _fmt(o.predicted, o.unit),
             "skipped" if o.skipped or o.error is None else f"{round(o.error, 5):+.1%}")
            for o in report.outcomes if show_all or not o.skipped]
    written = _plain_records(rows)
    if written:  # what follows is printed as wide as the table, as _wide makes it
        c = _widened(c, written)
    else:
        t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        for col, just in RECORD_COLUMNS:
            t.add_column(col, justify=just, no_wrap=True)  # type: ignore[arg-type]
        for row in rows:
            t.add_row(*row)
        c = _wide(c, t)
        c.print(t)
    if show_all:
        for o in report.outcomes:
            if o.skipped:
                c.print(f"[dim]skipped {o.id}: {o.skipped}[/]")
    c.print()
    s = Table(show_header=True, header_style="bold", box=None, pad_edge=False,
              title="error per kind: out of sample (each publisher left out of the fit) | in sample")
    for col in ("kind", "n", "sources", "skipped", "median", "p90", "p90 over", "│", "median ", "p90 ",
                "worst"):
        s.add_column(col, justify="left" if col in ("kind", "│") else "right")
    for kind, k in report.kinds.items():
        keys = ("loo_median_abs_error", "loo_p90_abs_error", "loo_p90_over_error", "median_abs_error",
                "p90_abs_error", "max_abs_error")
        pct = [("—" if (v := getattr(k, x)) is None else f"{v:.1%}") for x in keys]
        n = str(k.n) + (f" ({k.loo_n})" if k.loo_n is not None and k.loo_n != k.n else "")
        sources = "" if k.sources is None else str(k.sources)
        s.add_row(kind, n, sources, str(k.skipped), *pct[:3], "│", *pct[3:])
    c.print(s)
    _print_splits(c, report)
    _print_features(c, report)
    skipped = sum(1 for o in report.outcomes if o.skipped)
    c.print(f"{len(report.outcomes)} records, {skipped} skipped (`--all` lists them with the reason). "
            "Error = predicted / measured − 1; 'p90 over': 90th percentile of the unsafe error (more speed, "
            "room or tokens than measured, or fewer bytes or milliseconds). Out of sample: every fitted "
            "constant (scripts/fit_constants.py) refitted without the record's publisher (one organisation "
            "or harness), and the constants typed in from it taken out; a constant no other publisher "
            "measures takes its prior (n prior)."
            + (f" Chart: {plot}" if plot else ""))


def _plain_records(rows: list[tuple[str, ...]]) -> int:
    """Write the records table as cli/console.py's plain writer does, where rich would write no escape codes
    (a pipe or a file, where _wide gives rich a console as wide as the table): the same bytes
    (tests/test_console.py holds the plain format to rich's borderless tables), without rich measuring and
    laying out ~2,000 rows twice (~1.5 s of CPU). Returns the table's width; 0, with nothing written, where
    rich must print it (a terminal, a cell the plain format does not hold, an encoding that cannot write
    it)."""
    import sys

    from .console import Table, Unhandled, plain_width, table_lines
    from .render import width

    if plain_width(width()) is None:
        return 0
    t = Table()
    for col, just in RECORD_COLUMNS:
        t.add_column(col, just)
    for row in rows:
        t.add_row(*row)
    try:  # every row fits: rich's console is widened to the longest (_wide)
        lines = table_lines(t, sys.maxsize)
        sys.stdout.write("".join(line + "\n" for line in lines))
    except (Unhandled, UnicodeEncodeError):  # an encoding error is raised before anything is written
        return 0
    return len(lines[0])


def _cell(b: dict[str, Any] | None) -> str:
    return "—" if not b else f"{b['n']} · {b['median_abs_error']:.1%} · {b['p90_over']:.1%}"


def _print_splits(c: Any, report: Report) -> None:
    """Out of sample by where the records stand: the path users get first, then the older engine
    generations, the first-contact figures and the figures without assumed settings."""
    from rich.table import Table

    if not any(k.user_path or k.older_releases or k.first_contact for k in report.kinds.values()):
        return
    t = Table(show_header=True, header_style="bold", box=None, pad_edge=False,
              title="out of sample by path: n · median · p90 over")
    for col in ("kind", "user path", "older releases", "first contact", "without assumed", "n prior"):
        t.add_column(col, justify="left" if col == "kind" else "right", no_wrap=True)

    for kind, k in report.kinds.items():
        t.add_row(kind, _cell(k.user_path), _cell(k.older_releases), _cell(k.first_contact),
                  _cell(k.without_assumed), "—" if k.scored_with_prior is None else str(k.scored_with_prior))
    _wide(c, t).print(t)


def _print_features(c: Any, report: Report) -> None:
    """Per production feature (validation/features.py: what the record's deploy or speed question asks
    for), the records that use it: out of sample, on the user path and at first contact."""
    from rich.table import Table

    from ..validation.features import FEATURE_MEANS

    if not report.features:
        return
    t = Table(show_header=True, header_style="bold", box=None, pad_edge=False,
              title="per production feature the record's question asks for: n · median · p90 over")
    for col in ("feature", "kinds", "n", "publishers", "out of sample", "user path", "first contact",
                "n prior"):
        t.add_column(col, justify="left" if col in ("feature", "kinds") else "right", no_wrap=True)
    for name, f in report.features.items():
        t.add_row(name, ", ".join(f.kinds), str(f.n), str(f.publishers), _cell(f.out_of_sample),
                  _cell(f.user_path), _cell(f.first_contact),
                  "—" if f.scored_with_prior is None else str(f.scored_with_prior))
    _wide(c, t).print(t)
    c.print("A record counts for a feature where its question asks for it: "
            + "; ".join(f"{name} {FEATURE_MEANS[name]}" for name in report.features) + ".")
    if report.ep_asked_tp:
        c.print(f"{len(report.ep_asked_tp)} records ran expert parallelism (moe_ep > 1 in their settings) "
                "but are asked with the experts tensor-parallel (no attention data parallel beside it), so "
                "not counted as dp_ep.")


def _print_sample(report: Report, source: str, show_all: bool, plot: str | None) -> None:
    """A whole sample (`--source`): its error per metric and overall, then per runtime; the records are in
    `--json` (thousands of rows)."""
    from rich.table import Table

    from .render import console

    c = console()
    t = Table(show_header=True, header_style="bold", box=None, pad_edge=False,
              title=f"{source} sample: error per metric, in sample | first contact (n · median · p90 over)")
    for col in ("metric", "runtime", "n", "skipped", "median", "p90 over", "median error", "│",
                "first contact"):
        t.add_column(col, justify="left" if col in ("metric", "runtime", "│") else "right", no_wrap=True)

    def pct(v: float | None, signed: bool = False) -> str:
        return "—" if v is None else (f"{v:+.1%}" if signed else f"{v:.1%}")

    for kind, k in report.kinds.items():
        t.add_row(kind, "all", str(k.n), str(k.skipped), pct(k.median_abs_error), pct(k.p90_over_error),
                  pct(k.median_error, True), "│", _cell(k.first_contact))
    per = report.to_json()["by_runtime"]
    for kind in report.kinds:
        for rt, k in sorted(per.get(kind, {}).items()):
            t.add_row(kind, rt, str(k["n"]), str(k["skipped"]), pct(k["median_abs_error"]),
                      pct(k["p90_over_error"]), pct(k["median_error"], True), "│", "")
    c.print(t)
    skipped = [o for o in report.outcomes if o.skipped]
    if show_all:
        for o in skipped:
            c.print(f"[dim]skipped {o.id}: {o.skipped}[/]")
    c.print(f"{len(report.outcomes)} records ({source} rows × TTFT and TPOT), {len(skipped)} skipped. "
            "Error = predicted / measured − 1; 'p90 over': 90th percentile of the unsafe error (fewer "
            "milliseconds than measured). In sample: constants are fitted on records of the same publisher; "
            "the first contact is the code before the sample was scored. `--json` lists every record."
            + (f" Chart: {plot}" if plot else ""))

"""Predicted-vs-measured chart for `cardfit validate --plot` (matplotlib imported only here)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from ..errors import InputError, need_extra

# What the chart reads of a `cardfit validate` report (validation/validate.py Report, which imports this
# module
# when asked to plot): the chart knows the fields it draws, not the service.


class Scored(Protocol):
    @property
    def kind(self) -> str: ...
    @property
    def error(self) -> float | None: ...


class KindErrors(Protocol):
    @property
    def n(self) -> int: ...
    @property
    def median_abs_error(self) -> float | None: ...


class Scores(Protocol):
    @property
    def outcomes(self) -> Sequence[Scored]: ...
    @property
    def kinds(self) -> Mapping[str, KindErrors]: ...


def write_plot(report: Scores, path: str) -> None:
    """One panel: predicted / measured per record, grouped by kind, with the ±2/3/5/20 % target bands."""
    need_extra("matplotlib", extra="plot", what="--plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    kinds = [k for k, v in report.kinds.items() if v.n]
    fig, ax = plt.subplots(figsize=(10, 0.6 * len(kinds) + 2))
    for y, kind in enumerate(kinds):
        ratios = [1 + o.error for o in report.outcomes if o.kind == kind and o.error is not None]
        ax.scatter(ratios, [y] * len(ratios), alpha=0.6, s=18)
        s = report.kinds[kind]
        ax.text(1.0, y + 0.3, f"n={s.n} median {s.median_abs_error or 0:.1%}", fontsize=7, ha="center")
    ax.axvline(1.0, color="black", lw=0.8)
    for band, style in ((0.02, ":"), (0.05, "--"), (0.2, "-.")):
        for x in (1 - band, 1 + band):
            ax.axvline(x, color="grey", lw=0.6, ls=style)
    ax.set_xscale("log")
    ax.set_yticks(range(len(kinds)), kinds)
    ax.set_xlabel("predicted / measured (log scale; lines at ±2 %, ±5 %, ±20 %)")
    ax.set_title("cardfit validation: every record")
    fig.tight_layout()
    try:
        fig.savefig(path)
    except OSError as e:
        raise InputError(f"cannot write the chart: {e}", field="plot") from e
    finally:
        plt.close(fig)

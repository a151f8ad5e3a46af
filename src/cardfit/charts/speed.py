"""Chart of decode speed vs concurrency (matplotlib, imported only here; PNG or SVG by file suffix)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..errors import InputError
from . import chart_format, pyplot

# What the chart reads of a `cardfit speed` report (services/speed.py SpeedReport, which imports this module
# when asked to plot): the chart knows the fields it draws, not the service.


class SpeedPoint(Protocol):
    @property
    def concurrency(self) -> int: ...
    @property
    def aggregate_tokens_per_s(self) -> float: ...
    @property
    def per_user_tokens_per_s(self) -> float: ...


class SpeedCurve(Protocol):
    @property
    def rows(self) -> Sequence[SpeedPoint]: ...
    @property
    def max_concurrency(self) -> int: ...
    @property
    def model(self) -> str: ...
    @property
    def quant(self) -> str: ...
    @property
    def count(self) -> int: ...
    @property
    def gpu(self) -> str: ...
    @property
    def runtime(self) -> str: ...


def write_chart(report: SpeedCurve, path: str) -> None:
    fmt = chart_format(path)
    plt = pyplot()

    rows = report.rows
    xs = [r.concurrency for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    ax.plot(xs, [r.aggregate_tokens_per_s for r in rows], marker="o", label="aggregate tokens/s")
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [f"{x:,}" for x in xs])  # the levels asked for, as plain numbers
    ax.minorticks_off()
    ax.set_xlim(min(xs) / 1.5, max(xs) * 1.5)  # one level still gets an axis around it
    ax.set_xlabel("concurrent sequences")
    ax.set_ylabel("aggregate tokens/s")
    ax2 = ax.twinx()
    ax2.plot(xs, [r.per_user_tokens_per_s for r in rows], marker="s", color="tab:orange",
             label="per user tokens/s")
    ax2.set_ylabel("per-user tokens/s")
    for axis, key in ((ax, "aggregate_tokens_per_s"), (ax2, "per_user_tokens_per_s")):
        # from zero: speeds are compared with none
        axis.set_ylim(0, max(getattr(r, key) for r in rows) * 1.15 or 1)
    if report.max_concurrency and report.max_concurrency <= max(xs) * 1.5:
        ax.axvline(report.max_concurrency, color="grey", linestyle="--", linewidth=1, label="KV cache full")
    lines = ax.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
    labels = ax.get_legend_handles_labels()[1] + ax2.get_legend_handles_labels()[1]
    ax.legend(lines, labels, loc="lower center", ncols=3, fontsize=8)  # under the lines, which start above 0
    ax.set_title(f"{report.model} · {report.quant} · {report.count}× {report.gpu} · {report.runtime}",
                 fontsize=9)
    fig.tight_layout()
    try:
        fig.savefig(path, format=fmt)
    except OSError as e:
        raise InputError(f"--plot {path}: {e.strerror or e}", field="plot") from None
    finally:
        plt.close(fig)

"""Chart of the deployments `cardfit deploy` found: cost per million output tokens against the speed each
user sees, the first-token time as the marker's colour (matplotlib, imported only here)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from . import chart_format, pyplot

# What the chart reads of a `cardfit deploy` report (services/deploy.py DeployReport, which imports this
# module when asked to plot): the chart knows the fields it draws, not the service.


class DeployPoint(Protocol):
    @property
    def cost_per_million_usd(self) -> float | None: ...
    @property
    def count(self) -> int: ...
    @property
    def per_user_tokens_per_s(self) -> float: ...
    @property
    def ttft_ms(self) -> float | None: ...
    @property
    def gpu(self) -> str: ...
    @property
    def runtime(self) -> str: ...
    @property
    def quant(self) -> str: ...


class DeployLoad(Protocol):
    @property
    def users(self) -> float | None: ...
    @property
    def requests_per_s(self) -> float | None: ...
    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def tokens_per_s_per_user(self) -> float: ...


class DeployFront(Protocol):
    @property
    def model(self) -> str: ...
    @property
    def workload(self) -> DeployLoad: ...
    @property
    def pareto(self) -> Sequence[DeployPoint]: ...


def write_chart(report: DeployFront, path: str) -> None:
    fmt = chart_format(path)
    plt = pyplot()

    priced = [r for r in report.pareto if r.cost_per_million_usd is not None]
    # cards with no rental price have no cost to draw: their card counts instead (was an empty chart)
    rows = priced or list(report.pareto)
    ys = [r.cost_per_million_usd if priced else r.count for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    if rows:
        pts = ax.scatter([r.per_user_tokens_per_s for r in rows], ys, c=[r.ttft_ms or 0 for r in rows],
                         cmap="viridis", s=40, zorder=3)
        fig.colorbar(pts, ax=ax, label="p90 time to first token, ms")
        for r, y in zip(rows, ys, strict=True):
            ax.annotate(f"{r.count}× {r.gpu} {r.runtime} {r.quant}", (r.per_user_tokens_per_s, y), fontsize=6,
                        xytext=(4, 3), textcoords="offset points")
    w = report.workload
    ax.axvline(w.tokens_per_s_per_user, color="grey", linestyle="--", linewidth=1, label="per-user target")
    ax.set_xlabel("tokens/s per user")
    ax.set_ylabel("$ per million output tokens" if priced or not rows
                  else "cards (no rental price in the catalog)")
    load = f"{w.users:g} users" if w.users is not None else f"{w.requests_per_s:g} requests/s"
    ax.set_title(f"{report.model} · {load} · {w.input_tokens:,} in / {w.output_tokens:,} out",
                 fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, format=fmt)
    plt.close(fig)

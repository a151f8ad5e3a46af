"""Chart of the deployments `cardfit deploy` found: cost per million output tokens against the speed each
user sees, the first-token time as the marker's colour (matplotlib, imported only here)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import chart_format, pyplot

if TYPE_CHECKING:
    from ..services.deploy import DeployReport


def write_chart(report: DeployReport, path: str) -> None:
    fmt = chart_format(path)
    plt = pyplot()

    rows = [r for r in report.pareto if r.cost_per_million_usd is not None]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    if rows:
        pts = ax.scatter([r.per_user_tokens_per_s for r in rows],
                         [r.cost_per_million_usd for r in rows], c=[r.ttft_ms or 0 for r in rows],
                         cmap="viridis", s=40, zorder=3)
        fig.colorbar(pts, ax=ax, label="p90 time to first token, ms")
        for r in rows:
            ax.annotate(f"{r.count}× {r.gpu} {r.runtime} {r.quant}",
                        (r.per_user_tokens_per_s, r.cost_per_million_usd), fontsize=6,
                        xytext=(4, 3), textcoords="offset points")
    w = report.workload
    ax.axvline(w.tokens_per_s_per_user, color="grey", linestyle="--", linewidth=1, label="per-user target")
    ax.set_xlabel("tokens/s per user")
    ax.set_ylabel("$ per million output tokens")
    load = f"{w.users:g} users" if w.users is not None else f"{w.requests_per_s:g} requests/s"
    ax.set_title(f"{report.model} · {load} · {w.input_tokens:,} in / {w.output_tokens:,} out",
                 fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, format=fmt)
    plt.close(fig)

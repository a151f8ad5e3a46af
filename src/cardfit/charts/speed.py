"""Chart of decode speed vs concurrency (matplotlib, imported only here; PNG or SVG by file suffix)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import InputError

FORMATS = {".png": "png", ".svg": "svg"}


def write_chart(report: dict[str, Any], path: str) -> None:
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise InputError(f"--plot {path}: use a .png or .svg file name", field="plot")
    try:
        import matplotlib
    except ModuleNotFoundError:
        raise InputError("--plot needs matplotlib", field="plot", hint="pip install 'cardfit[plot]' or "
                         "pip install matplotlib") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report["rows"]
    xs = [r["concurrency"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    ax.plot(xs, [r["aggregate_tokens_per_s"] for r in rows], marker="o", label="aggregate tokens/s")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrent sequences")
    ax.set_ylabel("aggregate tokens/s")
    ax2 = ax.twinx()
    ax2.plot(xs, [r["per_user_tokens_per_s"] for r in rows], marker="s", color="tab:orange", label="per user tokens/s")
    ax2.set_ylabel("per-user tokens/s")
    if report.get("max_concurrency"):
        ax.axvline(report["max_concurrency"], color="grey", linestyle="--", linewidth=1, label="KV cache full")
    lines = ax.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
    labels = ax.get_legend_handles_labels()[1] + ax2.get_legend_handles_labels()[1]
    ax.legend(lines, labels, loc="center right", fontsize=8)
    ax.set_title(f"{report['model']} · {report['quant']} · {report['count']}× {report['gpu']} · {report['runtime']}",
                 fontsize=9)
    fig.tight_layout()
    try:
        fig.savefig(path, format=fmt)
    except OSError as e:
        raise InputError(f"--plot {path}: {e.strerror or e}", field="plot") from None
    finally:
        plt.close(fig)

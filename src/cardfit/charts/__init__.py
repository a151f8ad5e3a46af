"""matplotlib charts (the `plot` extra); imported only when a command is asked for a chart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import InputError, need_extra

FORMATS = {".png": "png", ".svg": "svg"}


def chart_format(path: str) -> str:
    """The file format a chart is written in, from its name: PNG or SVG."""
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise InputError(f"--plot {path}: use a .png or .svg file name", field="plot")
    return fmt


def pyplot() -> Any:
    """matplotlib's pyplot set up for writing chart files: no display, a "$" drawn as text rather than
    mathtext ("$2.00/M" is money), SVG labels kept as text so they can be searched."""
    need_extra("matplotlib", extra="plot", what="--plot")
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["text.parse_math"] = False
    matplotlib.rcParams["svg.fonttype"] = "none"
    import matplotlib.pyplot as plt

    return plt

"""cardfit: does this LLM fit on that GPU, at which precision and context, how fast, and at what cost?

The Python API mirrors the CLI: each function takes the same keyword arguments as the command's options
and returns the same plain data as its `--json` output.

    >>> import cardfit
    >>> p = cardfit.plan(model="llama3.1:8b", gpu="RTX 4090")
    >>> p["gpus"][0]["verdict"], p["memory"]["total_bytes"] > 0
    ('fits', True)
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["plan", "max_context", "CardfitError"]

from .errors import CardfitError


def plan(model: str | None = None, **options: Any) -> dict[str, Any]:
    """`cardfit plan`: memory breakdown, ranked cards with verdicts, speed and cost."""
    from .inputs import PlanInput, parse
    from .planner import plan as _plan
    from .report import plan_dict

    return plan_dict(_plan(parse(PlanInput, {"model": model, **options})))


def max_context(model: str | None = None, **options: Any) -> dict[str, Any]:
    """`cardfit max-context`: the longest context per sequence that fits on --gpu."""
    from .inputs import MaxContextInput, parse
    from .reverse import max_context as _max_context

    return _max_context(parse(MaxContextInput, {"model": model, **options}))

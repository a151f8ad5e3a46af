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
__all__ = ["plan", "max_context", "max_sequences", "largest_model", "speed", "finetune", "breakeven", "validate",
           "CardfitError"]

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


def max_sequences(model: str | None = None, **options: Any) -> dict[str, Any]:
    """`cardfit max-sequences`: the most concurrent sequences at a context on --gpu."""
    from .inputs import MaxContextInput, parse
    from .reverse import max_sequences as _max_sequences

    return _max_sequences(parse(MaxContextInput, {"model": model, **options}))


def largest_model(**options: Any) -> dict[str, Any]:
    """`cardfit largest-model`: the largest catalog models that fit `gpu`."""
    from .inputs import MaxContextInput, parse
    from .reverse import largest_model as _largest_model

    return _largest_model(parse(MaxContextInput, options))


def speed(model: str | None = None, **options: Any) -> dict[str, Any]:
    """`cardfit speed`: decode, prefill and throughput vs concurrency on `gpu`."""
    from .inputs import parse
    from .speedplan import SpeedInput, speed_report

    return speed_report(parse(SpeedInput, {"model": model, **options}))


def finetune(model: str | None = None, **options: Any) -> dict[str, Any]:
    """`cardfit finetune`: training memory by term and the cards that hold it (method=full|lora|qlora)."""
    from .finetuning import FinetuneInput, finetune_report
    from .inputs import parse

    return finetune_report(parse(FinetuneInput, {"model": model, **options}))


def breakeven(**options: Any) -> dict[str, Any]:
    """`cardfit breakeven`: renting a card vs paying an API per token."""
    from .inputs import parse
    from .renting import BreakevenInput, breakeven_report

    return breakeven_report(parse(BreakevenInput, options))


def validate(kind: str | None = None, runtime: str | None = None) -> dict[str, Any]:
    """`cardfit validate`: cardfit's error against the published measurements, per kind."""
    from .validation import validate as _validate

    return _validate(kind, runtime).as_dict()

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


def _run(module: str, input_name: str, func: str, values: dict[str, Any]) -> Any:
    """Validate `values` with the command's input model and call its report function (imported lazily)."""
    from importlib import import_module

    from .services.inputs import parse

    inputs = import_module(f"{__name__}.services.inputs")
    mod = import_module(f"{__name__}.services.{module}")
    model = getattr(mod, input_name, None) or getattr(inputs, input_name)
    return getattr(mod, func)(parse(model, values))


def plan(model: str | None = None, **options: Any) -> dict[str, Any]:
    """`cardfit plan`: memory breakdown, ranked cards with verdicts, speed and cost."""
    from .services.plan import plan_dict

    return plan_dict(_run("plan", "PlanInput", "plan", {"model": model, **options}))


def max_context(model: str | None = None, **options: Any) -> dict[str, Any]:
    """`cardfit max-context`: the longest context per sequence that fits on --gpu."""
    return _run("reverse", "MaxContextInput", "max_context", {"model": model, **options})


def max_sequences(model: str | None = None, **options: Any) -> dict[str, Any]:
    """`cardfit max-sequences`: the most concurrent sequences at a context on --gpu."""
    return _run("reverse", "MaxContextInput", "max_sequences", {"model": model, **options})


def largest_model(**options: Any) -> dict[str, Any]:
    """`cardfit largest-model`: the largest catalog models that fit `gpu`."""
    return _run("reverse", "MaxContextInput", "largest_model", options)


def speed(model: str | None = None, **options: Any) -> dict[str, Any]:
    """`cardfit speed`: decode, prefill and throughput vs concurrency on `gpu`."""
    return _run("speed", "SpeedInput", "speed_report", {"model": model, **options})


def finetune(model: str | None = None, **options: Any) -> dict[str, Any]:
    """`cardfit finetune`: training memory by term and the cards that hold it (method=full|lora|qlora)."""
    return _run("finetune", "FinetuneInput", "finetune_report", {"model": model, **options})


def breakeven(**options: Any) -> dict[str, Any]:
    """`cardfit breakeven`: renting a card vs paying an API per token."""
    return _run("breakeven", "BreakevenInput", "breakeven_report", options)


def validate(kind: str | None = None, runtime: str | None = None) -> dict[str, Any]:
    """`cardfit validate`: cardfit's error against the published measurements, per kind."""
    from .services.validate import validate as _validate

    return _validate(kind, runtime).as_dict()

"""Which values of the runtimes' fitted constants a prediction uses: the stored ones (data/runtimes.toml), or
a refit put in place while validation scores a source out of sample (validation/calibrate.py)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

_OVERRIDES: ContextVar[Mapping[str, float] | None] = ContextVar("cardfit_constants", default=None)


def value(runtime_id: str, field: str, stored: float) -> float:
    """A runtime constant: the stored value, or the refit one while a leave-one-source-out fold runs."""
    over = _OVERRIDES.get()
    if over is None:
        return stored
    return over.get(f"{runtime_id}.{field}", stored)


def fitted(rt: Any, field: str, stack: str = "") -> float:
    """A runtime profile's constant at its release (catalog/releases.py profile_at): the fitted constant its
    release reads in place of `field` on a card of this GPU stack (vLLM before 0.6 reads
    decode_overhead_us_per_sequence_v0 for decode_overhead_us_per_sequence), else the field's own; either
    through `value`, so validation's refits reach it. A field the release sets outright (data/releases.toml
    `without`) is that value."""
    name = field
    for f, by_stack in rt.reads:
        if f == field:
            names = dict(by_stack)
            name = names.get(stack) or names.get("*") or field
            break
    if name == field and field in rt.pinned:
        return float(getattr(rt, field))
    return value(rt.id, name, float(getattr(rt, name)))


@contextmanager
def constants(values: Mapping[str, float]) -> Iterator[None]:
    """Predict with these constants ("runtime.field" → value) in place of the stored ones."""
    token = _OVERRIDES.set(values)
    try:
        yield
    finally:
        _OVERRIDES.reset(token)


def snapshot(runtime_id: str | None = None) -> tuple[tuple[str, float], ...]:
    """The constants in place now (of one runtime: those a prediction for it reads), hashable, for caches
    whose answers depend on them; (): stored."""
    over = _OVERRIDES.get()
    if not over:
        return ()
    if runtime_id is None:
        return tuple(sorted(over.items()))
    prefix = f"{runtime_id}."
    return tuple(sorted((k, over[k]) for k in over if k.startswith(prefix)))


def beside(values: Mapping[str, float]) -> Mapping[str, float]:
    """The constants in place now with `values` in front (a refit is read key by key, not copied)."""
    from collections import ChainMap

    over = _OVERRIDES.get()
    return ChainMap(dict(values), over) if over else dict(values)

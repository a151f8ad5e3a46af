"""Reverse questions (SPEC §3): the longest context that fits a model on a card, the most concurrent
sequences at a context, and the largest catalog model a card holds at a quantization."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .catalog.models import default_models
from .core.fit import budget_per_card, need_on
from .errors import InputError
from .inputs import MaxContextInput, PlanInput
from .planner import Context, build_context, memory_for, requires

UPPER = 1 << 24


def _set(ctx: Context) -> tuple[Any, int, int]:
    if not ctx.inp.gpu:
        raise InputError("max-context needs --gpu", field="gpu", hint="`cardfit gpus` lists the cards")
    gpu = ctx.gpus.get(ctx.inp.gpu)
    count = ctx.inp.gpus or max(gpu.min_count, 1)
    return gpu, count, count * budget_per_card(gpu, ctx.runtime, ctx.utilization)


def _fits(ctx: Context, context: int, count: int, budget: int) -> bool:
    return need_on(memory_for(ctx, context), count) <= budget


def _bisect(ok: Any, hi: int) -> int:
    """Largest n in [1, hi] with ok(n) true (ok is monotone), 0 if none."""
    if not ok(1):
        return 0
    lo = 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def max_context(inp: MaxContextInput) -> dict[str, Any]:
    ctx = build_context(inp)
    gpu, count, budget = _set(ctx)
    why = requires(ctx.quant)
    if why and not gpu.supports(why):
        raise InputError(f"{gpu.name} has no {why.upper()} support; {ctx.quant.name} weights cannot run there",
                         field="quant")
    m = ctx.model
    cap = m.max_context if (m.max_context and not inp.allow_long_context) else UPPER
    best = _bisect(lambda c: _fits(ctx, c, count, budget), cap)
    limited = "model" if best == cap and cap != UPPER else "memory"
    mem = memory_for(ctx, max(best, 1))
    return {"model": m.name, "gpu": gpu.name, "count": count, "quant": ctx.quant.name, "runtime": ctx.runtime.id,
            "kv_dtype": ctx.kv_dtype, "batch": ctx.sequences, "max_context_tokens": best, "limited_by": limited,
            "model_max_context": m.max_context or None, "budget_bytes": budget,
            "weights_bytes": mem.weights_bytes, "total_bytes_at_max": need_on(mem, count) if best else None}


def max_sequences(inp: PlanInput) -> dict[str, Any]:
    """Most concurrent sequences of --context tokens each that fit on the card."""
    ctx = build_context(inp)
    gpu, count, budget = _set(ctx)
    context = inp.context or 4096

    def ok(n: int) -> bool:
        c2 = replace(ctx, sequences=n)
        return need_on(memory_for(c2, context), count) <= budget

    n = _bisect(ok, 1 << 20)
    return {"model": ctx.model.name, "gpu": gpu.name, "count": count, "context": context, "max_sequences": n}


def largest_model(inp: PlanInput) -> dict[str, Any]:
    """The largest catalog model (by parameters) that fits the card at the quantization and context."""
    fits = []
    for m in default_models():
        if m.id.startswith("shape-"):
            continue
        try:
            ctx = build_context(inp.model_copy(update={"model": m.id}))
            gpu, count, budget = _set(ctx)
            context = min(inp.context or 8192, m.max_context or 8192)
            if need_on(memory_for(ctx, context), count) <= budget:
                fits.append((m.params, m.name))
        except InputError:
            continue
    fits.sort(reverse=True)
    return {"gpu": inp.gpu, "quant": inp.quant, "models": [n for _, n in fits[:10]],
            "largest": fits[0][1] if fits else None}

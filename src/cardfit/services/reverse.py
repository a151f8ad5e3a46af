"""Reverse questions: the longest context that fits a model on a card, the most concurrent
sequences at a context, and the largest catalog model a card holds at a quantization."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..catalog.gpus import default_gpus
from ..catalog.models import default_models
from ..catalog.quants import default_quants
from ..catalog.records import record
from ..core.fit import need_on
from ..core.search import largest_true
from ..errors import CardfitError, InputError
from .inputs import MaxContextInput, PlanInput
from .plan import (
    Context,
    build_context,
    cards_per_set,
    check_context,
    default_context,
    kv_per_token,
    memory_for,
    placed,
    requires,
)
from .table import Result

UPPER = 1 << 24
# largest-model's context when none is given (its help says 8K): rule of thumb, a common chat context
LARGEST_MODEL_CONTEXT = 8192


@record
class MaxContext(Result):
    """`cardfit max-context`: the longest context per sequence that fits."""

    model: str
    gpu: str
    count: int
    quant: str
    runtime: str
    kv_dtype: str
    batch: int
    max_context_tokens: int
    limited_by: str  # "memory", or "model" when the model's trained maximum caps it
    model_max_context: int | None
    budget_bytes: int
    weights_bytes: int
    total_bytes_at_max: int | None
    kv_bytes_per_token: int  # 0: the model keeps no KV cache (an encoder: BERT-style embedding models)


@record
class MaxSequences(Result):
    """`cardfit max-sequences`: the most concurrent sequences at a context."""

    model: str
    gpu: str
    count: int
    quant: str
    runtime: str
    kv_dtype: str
    context: int
    context_source: str
    max_sequences: int
    budget_bytes: int
    kv_bytes_per_token: int  # 0: the model keeps no KV cache (an encoder: BERT-style embedding models)


@record
class ModelFit(Result):
    """One catalog model that fits the card."""

    model: str
    id: str
    params: int
    quant: str
    runtime: str
    context: int
    need_bytes: int
    free_bytes: int


@record
class LargestModels(Result):
    """`cardfit largest-model`: the catalog models that fit, largest first."""

    gpu: str | None
    quant: str | None
    largest: str | None
    models: tuple[ModelFit, ...]


def _set(ctx: Context) -> tuple[Any, int, int]:
    if not ctx.inp.gpu:
        raise InputError("this question needs --gpu (the card to answer for)", field="gpu",
                         hint="`cardfit gpus` lists the cards")
    gpu = ctx.gpus.get(ctx.inp.gpu)
    count = cards_per_set(ctx, gpu)
    return gpu, count, count * ctx.engine.budget_per_card(gpu, ctx.utilization, count)


def _fits(ctx: Context, context: int, gpu: Any, count: int, budget: int) -> bool:
    return _free(ctx, memory_for(ctx, context, gpu), gpu, count, budget) >= 0


def _free(ctx: Context, mem: Any, gpu: Any, count: int, budget: int) -> int:
    """The set's bytes left beside a memory estimate: the budget it may fill (the engine's budget_for: vLLM
    0.34 keeps a margin by the estimate's own workspace) less what it needs."""
    held = count * ctx.engine.budget_for(mem, gpu, budget // count, placed(ctx, count).tp)
    return held - _need(ctx, mem, count)


def _need(ctx: Context, mem: Any, count: int) -> int:
    return need_on(mem, count, ctx.engine.kv_copies(ctx.model, placed(ctx, count).tp))


def _bisect(ok: Any, hi: int) -> int:
    """Largest n in [1, hi] with ok(n) true (ok is monotone), 0 if none."""
    return largest_true(ok, 1, hi) if ok(1) else 0


def _no_host_tier(inp: PlanInput) -> None:
    """The reverse questions size the GPU's own KV cache: a host tier (--kv-offload-gb) changes none."""
    if getattr(inp, "kv_offload_gb", None):
        raise InputError("--kv-offload-gb is a host tier for reused prompts; it does not change what the "
                         "card holds: ask `cardfit plan` or `cardfit speed` with it", field="kv_offload_gb")


def max_context(inp: MaxContextInput) -> MaxContext:
    _no_host_tier(inp)
    ctx = build_context(inp)
    gpu, count, budget = _set(ctx)
    why = requires(ctx.quant)
    if why and not gpu.supports(why):
        raise InputError(
            f"{gpu.name} has no {why.upper()} support; {ctx.quant.name} weights cannot run there",
            field="quant",
        )
    m = ctx.model
    cap = m.max_context if (m.max_context and not inp.allow_long_context) else UPPER
    best = _bisect(lambda c: _fits(ctx, c, gpu, count, budget), cap)
    if best == 0:
        _no_room(ctx, gpu, count, budget, "even one token of context")
    limited = "model" if best == cap and cap != UPPER else "memory"
    mem = memory_for(ctx, max(best, 1), gpu)
    return MaxContext(model=m.name, gpu=gpu.name, count=count, quant=ctx.quant.name,
                      runtime=ctx.runtime.named,
                      kv_dtype=ctx.kv_dtype, batch=ctx.sequences, max_context_tokens=best, limited_by=limited,
                      model_max_context=m.max_context or None, budget_bytes=budget,
                      weights_bytes=mem.weights_bytes,
                      total_bytes_at_max=_need(ctx, mem, count) if best else None,
                      kv_bytes_per_token=kv_per_token(ctx))


def _no_room(ctx: Context, gpu: Any, count: int, budget: int, what: str) -> None:
    """The answer is zero: say why (the weights and workspace alone) instead of printing '0'."""
    from ..units import fmt_bytes

    mem = memory_for(replace(ctx, sequences=1), 1, gpu)
    fixed = need_on(mem, count) - mem.kv_cache_bytes  # the cache itself aside
    n = ctx.sequences
    if n > 1 and fixed <= budget:
        # one sequence would fit: the --batch asked for is what leaves no room, so say so (not only the
        # weights and workspace, which are within the budget)
        many = need_on(memory_for(ctx, 1, gpu), count)
        raise InputError(f"{ctx.model.name} at {ctx.quant.name} leaves no room for {what} for each of "
                         f"{n:,} sequences on {count}x {gpu.name}: at one token each they need "
                         f"{fmt_bytes(many)} of a {fmt_bytes(budget)} budget ({ctx.runtime.id}; weights and "
                         f"workspace {fmt_bytes(fixed)})", field="batch",
                         hint="give fewer sequences (--batch), more cards (--gpus) or a smaller --quant")
    offload = _offload_line(ctx)
    raise InputError(f"{ctx.model.name} at {ctx.quant.name} leaves no room for {what} on {count}x "
                     f"{gpu.name}: weights and workspace need {fmt_bytes(fixed)} of a {fmt_bytes(budget)} "
                     f"budget ({ctx.runtime.id}){offload}", field="gpu",
                     hint="try more cards (--gpus), a smaller "
                     "--quant or another runtime (`cardfit plan` ranks the cards)")


def _offload_line(ctx: Context) -> str:
    """What `cardfit plan` offers on the same card when the runtime can keep layers in system RAM."""
    from .plan import plan

    try:
        first = plan(ctx.inp).first
    except CardfitError:
        return ""
    o, s = first.option, first.speed
    if o.verdict != "offload":
        return ""
    tps = s.decode_tokens_per_s if s else None
    speed = f", about {tps:,.1f} tokens/s" if tps else ""
    share = (
        f"{o.gpu_layer_fraction:.0%} of the layers on the GPU, " if o.gpu_layer_fraction is not None else ""
    )
    return (f"; with CPU offload it runs ({share}the rest in system RAM) at {first.memory.context:,} tokens"
            f"{speed}: `cardfit plan` shows it")


def max_sequences(inp: PlanInput) -> MaxSequences:
    """Most concurrent sequences of `context` tokens each (the runtime's default when not given) whose
    caches fit on the card beside the weights."""
    _no_host_tier(inp)
    ctx = build_context(inp)
    gpu, count, budget = _set(ctx)
    context, why = default_context(ctx, gpu)
    check_context(ctx, context)

    def ok(n: int) -> bool:
        return _free(ctx, memory_for(replace(ctx, sequences=n), context, gpu), gpu, count, budget) >= 0

    n = _bisect(ok, 1 << 20)
    if n == 0:
        _no_room(ctx, gpu, count, budget, f"one sequence of {context:,} tokens")
    return MaxSequences(model=ctx.model.name, gpu=gpu.name, count=count, quant=ctx.quant.name,
                        runtime=ctx.runtime.named, kv_dtype=ctx.kv_dtype, context=context, context_source=why,
                        max_sequences=n, budget_bytes=budget, kv_bytes_per_token=kv_per_token(ctx))


def largest_model(inp: PlanInput) -> LargestModels:
    """The catalog models (largest first, by parameters) that fit the card at the quantization, at the given
    context (else 8,192 tokens or the model's maximum if smaller), with the runtime's accounting."""
    _no_host_tier(inp)
    if not inp.gpu:
        raise InputError("largest-model needs --gpu (the card to answer for)", field="gpu",
                         hint="`cardfit gpus` lists the cards")
    card = default_gpus().get(inp.gpu)  # an unknown card is the user's mistake, not 'nothing fits'
    if inp.quant:  # likewise an unknown quantization, or one the card cannot run at all
        q = default_quants().get(inp.quant)
        if requires(q) and not card.supports(requires(q)):
            raise InputError(f"{card.name} cannot run {q.name} (no {requires(q).upper()} support), so no "
                             "model fits at it", field="quant", hint="try --quant int8, Q8_0 or Q4_K_M")
    fits = []
    for m in default_models():
        if m.id.startswith("shape-") or not m.generates:  # embedders and rerankers answer other questions
            continue
        try:
            # the checkpoint's name: an id that is also an Ollama library name ('command-r7b', 'deepseek-r1')
            # would otherwise be planned as that Ollama build, not at the model's own quantization
            ctx = build_context(inp.replace(model=m.hf or m.id))
            gpu, count, budget = _set(ctx)
            context = min(inp.context or LARGEST_MODEL_CONTEXT, m.max_context or LARGEST_MODEL_CONTEXT)
            mem = memory_for(ctx, context, gpu)
            need, free = _need(ctx, mem, count), _free(ctx, mem, gpu, count, budget)
        except CardfitError:  # e.g. a quantization this model cannot take
            continue
        if free >= 0 and not (requires(ctx.quant) and not gpu.supports(requires(ctx.quant))):
            fits.append(ModelFit(model=m.name, id=m.id, params=m.params, quant=ctx.quant.name,
                                 runtime=ctx.runtime.named, context=context, need_bytes=need,
                                 free_bytes=free))
    fits.sort(key=lambda f: -f.params)
    gpu = default_gpus().get(inp.gpu) if inp.gpu else None
    return LargestModels(gpu=gpu.name if gpu else inp.gpu, quant=inp.quant,
                         largest=fits[0].model if fits else None, models=tuple(fits))

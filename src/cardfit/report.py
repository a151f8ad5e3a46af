"""Plain-data views of results (dicts of ints, floats and strings): the JSON the CLI prints with --json
and the web API returns. Keys follow SPEC §9 and are only ever added to, never renamed."""

from __future__ import annotations

from typing import Any

from .catalog.quants import GgufMix
from .core.fit import Option
from .core.memory import Memory
from .core.speed import Speed
from .planner import CardPlan, Context, Plan, kv_per_token


def _r(x: float | None, digits: int = 2) -> float | None:
    return None if x is None else round(x, digits)


def model_dict(ctx: Context) -> dict[str, Any]:
    m = ctx.model
    return {"id": m.id, "name": m.name, "hf": m.hf or None, "params": m.params,
            "active_params": m.active_params or m.params, "layers": m.layers, "attention": m.attention,
            "max_context": m.max_context or None, "origin": ctx.resolved.origin, "source": m.source,
            "ollama_tag": (ctx.inp.model if ctx.resolved.ollama else None) or
            (ctx.resolved.tag.tag if ctx.resolved.tag else None),
            "provenance": dict(m.provenance) or None}


def inputs_dict(ctx: Context, card: CardPlan) -> dict[str, Any]:
    q = ctx.quant
    return {"quant": q.name, "quant_kind": q.kind, "runtime": ctx.runtime.id, "context": card.memory.context,
            "context_source": card.context_note, "batch": ctx.sequences, "kv_dtype": ctx.kv_dtype,
            "prefill_chunk": ctx.prefill_chunk, "flash_attn": ctx.flash_attn,
            "gpu_memory_utilization": ctx.utilization if ctx.utilization is not None
            else (ctx.runtime.gpu_memory_utilization or None),
            "gpus": ctx.inp.gpus, "tp": ctx.inp.tp, "gpu": ctx.inp.gpu, "headroom": ctx.inp.headroom}


def memory_dict(ctx: Context, mem: Memory) -> dict[str, Any]:
    q = ctx.quant
    return {"weights_bytes": mem.weights_bytes, "kv_cache_bytes": mem.kv_cache_bytes,
            "overhead_bytes": mem.overhead_bytes, "activation_bytes": mem.activation_bytes,
            "total_bytes": mem.total_bytes, "bits_per_weight": _r(mem.weights.bits_per_weight, 3),
            "weights_method": mem.weights.method, "weights_by_type": dict(mem.weights.by_type),
            "file_weights_bytes": mem.weights.total_bytes, "host_weights_bytes": mem.host_weights_bytes,
            "kv_bytes_per_token": kv_per_token(ctx), "context": mem.context, "sequences": mem.sequences,
            "gguf_mix": q.name if isinstance(q, GgufMix) else None, **memory_range_keys(ctx, mem)}


def memory_range_keys(ctx: Context, mem: Memory) -> dict[str, Any]:
    """`<figure>_range`: [low, high] bytes from the validation errors (core/uncertainty.py, data/accuracy.toml)."""
    from .core.uncertainty import memory_ranges

    parts = {"weights_bytes": mem.weights_bytes, "kv_cache_bytes": mem.kv_cache_bytes,
             "overhead_bytes": mem.overhead_bytes, "activation_bytes": mem.activation_bytes}
    return {f"{k}_range": v for k, v in memory_ranges(parts, ctx.runtime.id).items()}


def speed_range_keys(d: dict[str, Any], runtime: str) -> dict[str, Any]:
    """Adds `<figure>_range` next to each realistic speed figure of a speed or GPU row."""
    from .core.uncertainty import value_range

    for key in ("decode_tokens_per_s", "prefill_tokens_per_s"):
        if key in d:
            r = value_range(d[key], key, runtime)
            d[f"{key}_range"] = None if r is None else [round(r[0], 1), round(r[1], 1)]
    return d


def _cost(p: Plan, runtime: str) -> dict[str, Any]:
    cost = cost_dict(p)
    if p.first.speed is not None and p.first.speed.decode_tokens_per_s is None:
        # no calibrated speed for this runtime (transformers, rule-of-thumb): the figures rest on the ceiling
        cost["tokens_per_s_basis"] = "bandwidth ceiling per stream (no calibrated speed for this runtime)"
        return cost
    return cost_range_keys(cost, runtime)


def cost_range_keys(cost: dict[str, Any], runtime: str) -> dict[str, Any]:
    from .core.uncertainty import cost_range, value_range

    for row in cost.get("cards", []):
        for key in ("cost_per_million_usd", "cost_per_million_full_duty_usd"):
            if key in row:
                row[f"{key}_range"] = cost_range(row[key], "decode_tokens_per_s", runtime)
        if "tokens_per_s" in row:
            row["tokens_per_s_range"] = value_range(row["tokens_per_s"], "decode_tokens_per_s", runtime)
    return cost


def option_dict(o: Option, speed: Speed | None, mem: Memory) -> dict[str, Any]:
    return {"gpu": o.gpu.name, "gpu_id": o.gpu.id, "count": o.count, "nodes": o.nodes, "context": mem.context,
            "usable_bytes": o.usable_bytes, "budget_bytes": o.budget_bytes, "need_bytes": o.need_bytes,
            "free_bytes": o.free_bytes, "verdict": o.verdict, "reason": o.reason or None,
            "monthly_usd": _r(o.monthly_usd), "gpu_layer_fraction": _r(o.gpu_layer_fraction, 4),
            "decode_tokens_per_s": _r(speed.decode_tokens_per_s, 1) if speed else None,
            "decode_ceiling_tokens_per_s": _r(speed.decode_ceiling_tokens_per_s, 1) if speed else None}


def speed_dict(card: CardPlan) -> dict[str, Any]:
    s = card.speed
    return {"gpu": card.option.gpu.name,
            "decode_ceiling_tokens_per_s": _r(s.decode_ceiling_tokens_per_s, 1) if s else None,
            "decode_tokens_per_s": _r(s.decode_tokens_per_s, 1) if s else None,
            "prefill_tokens_per_s": _r(s.prefill_tokens_per_s, 0) if s else None,
            "bytes_per_token": s.bytes_per_token if s else None}


def plan_dict(p: Plan) -> dict[str, Any]:
    first = p.first
    rt = p.ctx.runtime.id
    return {"model": model_dict(p.ctx), "inputs": inputs_dict(p.ctx, first),
            "memory": memory_dict(p.ctx, first.memory),
            "gpus": [speed_range_keys(option_dict(c.option, c.speed, c.memory), rt) for c in p.cards],
            "speed": speed_range_keys(speed_dict(first), rt), "cost": _cost(p, rt),
            "answers": answers_dict(p), "notes": list(p.ctx.notes)}


def answers_dict(p: Plan) -> dict[str, Any]:
    """SPEC §3's short answers: the cheapest card that fits, the smallest one, and the cheapest set when no
    single card holds the plan."""
    singles = [c.option for c in p.cards if c.option.fits and c.option.count == 1]
    priced = [o for o in singles if o.monthly_usd is not None]
    sets = [c.option for c in p.cards if c.option.fits and c.option.count > 1]

    def name(o: Option | None) -> str | None:
        return None if o is None else (o.gpu.name if o.count == 1 else f"{o.count}× {o.gpu.name}")

    by_rule = None
    if p.ctx.inp.headroom:
        from .core.fit import smallest_by_headroom

        card = smallest_by_headroom(p.first.memory.weights.total_bytes, [c.option.gpu for c in p.cards],
                                    p.ctx.inp.headroom)
        by_rule = card.name if card else "more than one card"
    return {"smallest_card_by_headroom": by_rule,
            "cheapest_card": name(min(priced, key=lambda o: o.monthly_usd or 0, default=None)),
            "smallest_card": name(min(singles, key=lambda o: o.usable_bytes, default=None)),
            # in rank order: a set inside one node before whole nodes (seed 002 §05)
            "cheapest_set": None if singles else name(next((o for o in sets if o.monthly_usd is not None), None))}


def cost_dict(p: Plan) -> dict[str, Any]:
    o = p.first.option
    hours = p.ctx.rules.hours_per_month
    from .renting import plan_cost

    return {"monthly_usd": _r(o.monthly_usd), "hours_per_month": hours,
            "hourly_usd": _r(o.monthly_usd / hours, 4) if o.monthly_usd is not None else None, **plan_cost(p)}

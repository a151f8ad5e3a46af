"""The catalogs as plain rows: what `cardfit gpus|models|quants|apis --json` print and the web API's
GET /api/<catalog> return (one builder for both)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..core.cost import HOURS_PER_MONTH


def gpu_rows(gpus: Iterable[Any]) -> list[dict[str, Any]]:
    rows = []
    for g in gpus:
        per_gb = g.monthly_usd / g.memory_gb if g.monthly_usd and g.memory_gb else None
        rows.append({
            "id": g.id, "name": g.name, "aliases": list(g.aliases), "vendor": g.vendor, "stack": g.stack,
            "arch": g.arch, "tier": g.tier, "memory_gb": g.memory_gb, "usable_bytes": g.usable_bytes,
            "usable_measured": g.usable_measured, "memory_type": g.memory_type,
            "bandwidth_gbps": g.bandwidth_gbps, "bf16_tflops": g.bf16_tflops, "fp16_tflops": g.fp16_tflops,
            "fp8_tflops": g.fp8_tflops, "fp8": g.fp8, "bf16": g.bf16, "interconnect": g.interconnect,
            "link_gbps": g.link_gbps, "tdp_w": g.tdp_w, "monthly_usd": g.monthly_usd,
            "hourly_usd": g.hourly(HOURS_PER_MONTH),
            "usd_per_gb_month": round(per_gb, 2) if per_gb else None,  # GPU Rent Hub VRAM guide, section 06
            "gbps_per_usd_month": round(g.bandwidth_gbps / g.monthly_usd, 2)
            if g.monthly_usd and g.bandwidth_gbps else None,
            "min_count": g.min_count, "max_count": g.max_count or None, "unified_memory": g.unified_memory,
            "usable_source": g.usable_source, "price_source": g.price_source or None, "source": g.source})
    return rows


def model_rows(models: Iterable[Any]) -> list[dict[str, Any]]:
    from ..core.kv import kv_bytes_per_token

    return [{"id": m.id, "name": m.name, "hf": m.hf or None, "params": m.params, "active_params": m.active,
             "layers": m.layers, "attention": m.attention, "kv_bytes_per_token": kv_bytes_per_token(m),
             "max_context": m.max_context or None, "ollama": [t.tag for t in m.ollama],
             "aliases": list(m.aliases), "task": m.task, "text_params": m.text_params or None,
             "source": m.source} for m in models]


def quant_view(qc: Any) -> dict[str, Any]:
    types = [{"name": q.name, "id": q.id, "kind": q.kind, "bits_per_weight": round(q.bits_per_weight, 4),
              "block_weights": q.block_weights, "block_bytes": q.block_bytes, "scope": q.scope,
              "requires": q.requires or None, "ggml_type": q.ggml_type,
              "aliases": list(q.aliases)} for q in qc.types]
    mixes = [{"name": m.name, "ftype": m.ftype, "default": m.default,
              "rules": [{"tensor": k, "type": t, "rule": r} for k, t, r in m.rules]} for m in qc.mixes]
    return {"types": types, "gguf_mixes": mixes}


def api_rows(apis: Iterable[Any]) -> list[dict[str, Any]]:
    return [{"id": a.id, "name": a.name, "kind": a.kind, "provider": a.provider or None,
             "output_usd_per_m": a.output_usd_per_m, "input_usd_per_m": a.input_usd_per_m,
             "date": a.date or None, "evidence": a.evidence or None, "source": a.source or None,
             "origin": a.origin} for a in apis]


def runtime_rows(runtimes: Iterable[Any]) -> list[dict[str, Any]]:
    return [{"id": r.id, "name": r.name, "default_kv_dtype": r.default_kv_dtype,
             "default_parallel": r.default_parallel} for r in runtimes]

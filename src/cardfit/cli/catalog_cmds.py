"""`cardfit gpus`, `cardfit models`, `cardfit quants`: the catalogs as tables or JSON."""

from __future__ import annotations

from typing import Any

import click

from . import cli, emit_json
from .options import json_option, unit_option


def _catalog_opt(f: Any) -> Any:
    return click.option("--catalog", multiple=True, type=click.Path(), help="extra catalog file(s) (TOML/JSON)")(f)


@cli.command(epilog="\b\nExamples:\n  cardfit gpus\n  cardfit gpus --unit GiB --json\n  cardfit gpus --catalog my_cards.toml")
@_catalog_opt
@unit_option
@json_option
def gpus(as_json: bool, unit: str, catalog: tuple[str, ...]) -> None:
    """List the GPU catalog: usable memory, bandwidth, TFLOPS, FP8, link, price."""
    from ..catalog.gpus import default_gpus, load_gpus

    reg = load_gpus(catalog) if catalog else default_gpus()
    rows = [_gpu_row(g) for g in reg]
    if as_json:
        emit_json({"gpus": rows})
        return
    from rich.table import Table

    from ..units import fmt_bytes, fmt_usd
    from .render import console

    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("GPU", "vendor", f"usable {unit}", "GB/s", "BF16 TF", "FP8", "link", "$/month", "$/GB-month"):
        t.add_column(col, justify="left" if col in ("GPU", "vendor", "link", "FP8") else "right")
    for r in rows:
        t.add_row(r["name"], r["vendor"], fmt_bytes(r["usable_bytes"], unit).rsplit(" ", 1)[0],
                  f"{r['bandwidth_gbps']:,.0f}" if r["bandwidth_gbps"] else "—",
                  f"{r['bf16_tflops']:,.0f}" if r["bf16_tflops"] else "—", "yes" if r["fp8"] else "no",
                  r["interconnect"], fmt_usd(r["monthly_usd"]),
                  f"{r['usd_per_gb_month']:.2f}" if r["usd_per_gb_month"] else "—")
    console().print(t)


def _gpu_row(g: Any) -> dict[str, Any]:
    per_gb = g.monthly_usd / g.memory_gb if g.monthly_usd and g.memory_gb else None
    return {"id": g.id, "name": g.name, "aliases": list(g.aliases), "vendor": g.vendor, "stack": g.stack,
            "arch": g.arch, "tier": g.tier, "memory_gb": g.memory_gb, "usable_bytes": g.usable_bytes,
            "usable_measured": g.usable_measured, "memory_type": g.memory_type, "bandwidth_gbps": g.bandwidth_gbps,
            "bf16_tflops": g.bf16_tflops, "fp16_tflops": g.fp16_tflops, "fp8_tflops": g.fp8_tflops,
            "fp8": g.fp8, "bf16": g.bf16, "interconnect": g.interconnect, "link_gbps": g.link_gbps,
            "tdp_w": g.tdp_w, "monthly_usd": g.monthly_usd, "hourly_usd": g.hourly(),
            "usd_per_gb_month": round(per_gb, 2) if per_gb else None,
            "gbps_per_usd_month": round(g.bandwidth_gbps / g.monthly_usd, 2) if g.monthly_usd and g.bandwidth_gbps else None,
            "min_count": g.min_count, "price_source": g.price_source or None, "source": g.source}


@cli.command(epilog="\b\nExamples:\n  cardfit models\n  cardfit models --json")
@_catalog_opt
@json_option
def models(as_json: bool, catalog: tuple[str, ...]) -> None:
    """List the model catalog: parameters, layers, attention, KV bytes per token, Ollama tags."""
    from ..catalog.models import default_models, load_models
    from ..core.kv import kv_bytes_per_token

    reg = load_models(catalog) if catalog else default_models()
    rows = [{"id": m.id, "name": m.name, "hf": m.hf or None, "params": m.params, "active_params": m.active,
             "layers": m.layers, "attention": m.attention, "kv_bytes_per_token": kv_bytes_per_token(m),
             "max_context": m.max_context or None, "ollama": [t.tag for t in m.ollama],
             "aliases": list(m.aliases), "source": m.source} for m in reg]
    if as_json:
        emit_json({"models": rows})
        return
    from rich.table import Table

    from .render import console

    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("id", "params", "active", "layers", "attention", "KV B/token", "max ctx", "Ollama tags"):
        t.add_column(col, justify="right" if col in ("params", "active", "layers", "KV B/token", "max ctx") else "left")
    for r in rows:
        t.add_row(r["id"], f"{r['params'] / 1e9:,.1f}B", f"{r['active_params'] / 1e9:,.1f}B", str(r["layers"]),
                  r["attention"], f"{r['kv_bytes_per_token']:,}", f"{r['max_context']:,}" if r["max_context"] else "—",
                  ", ".join(r["ollama"]))
    console().print(t)


@cli.command(epilog="\b\nExamples:\n  cardfit quants\n  cardfit quants --json")
@json_option
def quants(as_json: bool) -> None:
    """List quantization types (exact block geometry) and llama.cpp file-type mixes."""
    from ..catalog.quants import default_quants

    qc = default_quants()
    types = [{"name": q.name, "id": q.id, "kind": q.kind, "bits_per_weight": round(q.bits_per_weight, 4),
              "block_weights": q.block_weights, "block_bytes": q.block_bytes, "scope": q.scope,
              "requires": q.requires or None, "ggml_type": q.ggml_type, "aliases": list(q.aliases)} for q in qc.types]
    mixes = [{"name": m.name, "ftype": m.ftype, "default": m.default,
              "rules": [{"tensor": k, "type": t, "rule": r} for k, t, r in m.rules]} for m in qc.mixes]
    if as_json:
        emit_json({"types": types, "gguf_mixes": mixes})
        return
    from rich.table import Table

    from .render import console

    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("name", "kind", "bits/weight", "block", "scope", "needs"):
        t.add_column(col)
    for q in types:
        t.add_row(q["name"], q["kind"], f"{q['bits_per_weight']:.4g}", f"{q['block_bytes']} B / {q['block_weights']}",
                  q["scope"], q["requires"] or "")
    console().print(t)
    console().print("GGUF file types (per-tensor mixes): " + ", ".join(m["name"] for m in mixes))

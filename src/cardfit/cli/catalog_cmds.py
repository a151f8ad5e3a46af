"""`cardfit gpus`, `cardfit models`, `cardfit quants`: the catalogs as tables or JSON."""

from __future__ import annotations

from typing import Any

import click

from . import cli, emit_json
from .console import escape
from .options import add, json_option, unit_option


def _catalog_opt(f: Any) -> Any:
    return click.option("--catalog", multiple=True, type=click.Path(),
                        help="extra catalog file(s) (TOML/JSON)")(f)


@cli.command(epilog="\b\nExamples:\n  cardfit gpus\n  cardfit gpus --unit GiB --json\n  cardfit gpus "
             "--catalog my_cards.toml")
@_catalog_opt
@add(unit_option())
@json_option
def gpus(as_json: bool, unit: str, catalog: tuple[str, ...]) -> None:
    """List the GPU catalog: usable memory, bandwidth, TFLOPS, FP8, link, price."""
    if as_json:
        from ..services.catalogs import listing

        emit_json(listing("gpus", catalog))
        return
    from ..catalog.gpus import default_gpus, load_gpus
    from ..services.catalogs import gpu_rows

    rows = gpu_rows(load_gpus(catalog) if catalog else default_gpus())
    from rich.table import Table

    from ..units import fmt_bytes, fmt_usd
    from .render import console

    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("GPU", "vendor", f"usable {unit}", "GB/s", "BF16 TF", "FP8", "link", "$/month", "$/GB-month"):
        t.add_column(col, justify="left" if col in ("GPU", "vendor", "link", "FP8") else "right",
                     no_wrap=col == "GPU")  # the name users type is never cut
    for r in rows:
        t.add_row(escape(r.name), escape(r.vendor), fmt_bytes(r.usable_bytes, unit).rsplit(" ", 1)[0],
                  f"{r.bandwidth_gbps:,.0f}" if r.bandwidth_gbps else "—",
                  f"{r.bf16_tflops:,.0f}" if r.bf16_tflops else "—", "yes" if r.fp8 else "no",
                  r.interconnect, fmt_usd(r.monthly_usd),
                  f"{r.usd_per_gb_month:.2f}" if r.usd_per_gb_month else "—")
    console().print(t)


@cli.command(epilog="\b\nExamples:\n  cardfit models\n  cardfit models --json")
@_catalog_opt
@json_option
def models(as_json: bool, catalog: tuple[str, ...]) -> None:
    """List the model catalog: parameters, layers, attention, KV bytes per token, Ollama tags."""
    if as_json:
        from ..services.catalogs import listing

        emit_json(listing("models", catalog))
        return
    from ..catalog.models import default_models, load_models
    from ..services.catalogs import model_rows

    rows = model_rows(load_models(catalog) if catalog else default_models())
    from rich.table import Table

    from .render import console

    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("id", "params", "active", "layers", "attention", "KV B/token", "max ctx", "Ollama tags"):
        right = col in ("params", "active", "layers", "KV B/token", "max ctx")
        t.add_column(col, justify="right" if right else "left",
                     no_wrap=col != "Ollama tags", overflow="fold")  # ids and numbers are never cut
    for r in rows:
        t.add_row(escape(r.id), f"{r.params / 1e9:,.1f}B", f"{r.active_params / 1e9:,.1f}B", str(r.layers),
                  r.attention, f"{r.kv_bytes_per_token:,}", f"{r.max_context:,}" if r.max_context else "—",
                  ", ".join(r.ollama))
    console().print(t)


@cli.command(epilog="\b\nExamples:\n  cardfit quants\n  cardfit quants --json")
@json_option
def quants(as_json: bool) -> None:
    """List quantization types (exact block geometry) and llama.cpp file-type mixes."""
    if as_json:
        from ..services.catalogs import listing

        emit_json(listing("quants"))
        return
    from ..catalog.quants import default_quants
    from ..services.catalogs import quant_view

    view = quant_view(default_quants())
    from rich.table import Table

    from .render import console

    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("name", "kind", "bits/weight", "block", "scope", "needs"):
        t.add_column(col)
    for q in view.types:
        t.add_row(escape(q.name), q.kind, f"{q.bits_per_weight:.4g}",
                  f"{q.block_bytes} B / {q.block_weights}", q.scope, q.requires or "")
    console().print(t)
    console().print("GGUF file types (per-tensor mixes): " + ", ".join(m.name for m in view.gguf_mixes))

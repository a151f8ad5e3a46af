"""The catalogs as typed rows: what `cardfit gpus|models|quants|apis --json` print (`to_json()`) and the web
API's GET /api/<catalog> return, and what the text tables show (one builder for both)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..catalog.records import record
from ..core.cost import HOURS_PER_MONTH
from .table import ModelBasics, Result


@record
class GpuRow(Result):
    id: str
    name: str
    aliases: tuple[str, ...]
    vendor: str
    stack: str
    arch: str
    tier: str
    memory_gb: float
    usable_bytes: int
    usable_measured: bool
    memory_type: str
    bandwidth_gbps: float | None
    bf16_tflops: float | None
    fp16_tflops: float | None
    fp8_tflops: float | None
    fp8: bool
    bf16: bool
    interconnect: str
    link_gbps: float | None
    tdp_w: int | None
    monthly_usd: float | None
    hourly_usd: float | None
    usd_per_gb_month: float | None  # GPU Rent Hub VRAM guide, section 06
    gbps_per_usd_month: float | None
    min_count: int
    max_count: int | None  # None: any number
    unified_memory: bool
    usable_source: str
    price_source: str | None
    source: str


def gpu_rows(gpus: Iterable[Any]) -> list[GpuRow]:
    rows = []
    for g in gpus:
        per_gb = g.monthly_usd / g.memory_gb if g.monthly_usd and g.memory_gb else None
        rows.append(GpuRow(
            id=g.id, name=g.name, aliases=tuple(g.aliases), vendor=g.vendor, stack=g.stack, arch=g.arch,
            tier=g.tier, memory_gb=g.memory_gb, usable_bytes=g.usable_bytes,
            usable_measured=g.usable_measured, memory_type=g.memory_type, bandwidth_gbps=g.bandwidth_gbps,
            bf16_tflops=g.bf16_tflops,
            fp16_tflops=g.fp16_tflops, fp8_tflops=g.fp8_tflops, fp8=g.fp8, bf16=g.bf16,
            interconnect=g.interconnect, link_gbps=g.link_gbps, tdp_w=g.tdp_w, monthly_usd=g.monthly_usd,
            hourly_usd=g.hourly(HOURS_PER_MONTH), usd_per_gb_month=round(per_gb, 2) if per_gb else None,
            gbps_per_usd_month=(round(g.bandwidth_gbps / g.monthly_usd, 2)
                                if g.monthly_usd and g.bandwidth_gbps else None),
            min_count=g.min_count, max_count=g.max_count or None, unified_memory=g.unified_memory,
            usable_source=g.usable_source, price_source=g.price_source or None, source=g.source))
    return rows


@record
class ModelRow(ModelBasics):
    kv_bytes_per_token: int
    max_context: int | None
    ollama: tuple[str, ...]  # the model's Ollama tags
    aliases: tuple[str, ...]
    task: str
    text_params: float | None
    source: str


def model_rows(models: Iterable[Any]) -> list[ModelRow]:
    from ..core.kv import kv_bytes_per_token

    return [ModelRow(m.id, m.name, m.hf or None, m.params, m.active, m.layers, m.attention,
                     kv_bytes_per_token(m), m.max_context or None, tuple(t.tag for t in m.ollama),
                     tuple(m.aliases), m.task, m.text_params or None, m.source) for m in models]


@record
class QuantRow(Result):
    name: str
    id: str
    kind: str
    bits_per_weight: float
    block_weights: int
    block_bytes: int
    scope: str
    requires: str | None
    ggml_type: int | None
    aliases: tuple[str, ...]


@record
class MixRule(Result):
    tensor: str
    type: str
    rule: str


@record
class MixRow(Result):
    name: str
    ftype: int | None
    default: str
    rules: tuple[MixRule, ...]


@record
class QuantView(Result):
    types: tuple[QuantRow, ...]
    gguf_mixes: tuple[MixRow, ...]


def quant_view(qc: Any) -> QuantView:
    types = tuple(QuantRow(q.name, q.id, q.kind, round(q.bits_per_weight, 4), q.block_weights, q.block_bytes,
                           q.scope, q.requires or None, q.ggml_type, tuple(q.aliases)) for q in qc.types)
    mixes = tuple(MixRow(m.name, m.ftype, m.default, tuple(MixRule(k, t, r) for k, t, r in m.rules))
                  for m in qc.mixes)
    return QuantView(types, mixes)


@record
class ApiRow(Result):
    id: str
    name: str
    kind: str
    provider: str | None
    output_usd_per_m: float
    input_usd_per_m: float
    cached_input_usd_per_m: float | None  # prompt-cache hits; None: the provider lists no cached rate
    date: str | None
    evidence: str | None
    source: str | None
    origin: str


def api_rows(apis: Iterable[Any]) -> list[ApiRow]:
    return [ApiRow(a.id, a.name, a.kind, a.provider or None, a.output_usd_per_m, a.input_usd_per_m,
                   a.cached_input_usd_per_m, a.date or None, a.evidence or None, a.source or None, a.origin)
            for a in apis]


@record
class RuntimeRow(Result):
    id: str
    name: str
    default_kv_dtype: str
    default_parallel: int
    serves: bool  # `cardfit deploy` plans it (its adapter has a launch line)


def runtime_rows(runtimes: Iterable[Any]) -> list[RuntimeRow]:
    return [RuntimeRow(r.id, r.name, r.default_kv_dtype, r.default_parallel, r.serves) for r in runtimes]


def plain(rows: Iterable[Result]) -> list[dict[str, Any]]:
    """The rows as JSON."""
    return [r.to_json() for r in rows]


# The catalog commands (`cardfit NAME --json` and the MCP tools of the same names): name → (summary, whether
# it reads extra catalog files given with --catalog).
LISTINGS: dict[str, tuple[str, bool]] = {
    "gpus": ("The GPU catalog: usable memory, bandwidth, TFLOPS, FP8, link, price (cardfit gpus)", True),
    "models": ("The model catalog: parameters, layers, attention, KV bytes per token, Ollama tags "
               "(cardfit models)", True),
    "quants": ("Quantization types (exact block geometry) and llama.cpp file-type mixes (cardfit quants)",
               False),
    "apis": ("The API price catalog, per million tokens, with dates and sources (cardfit apis)", True),
}


def listing(name: str, catalog: tuple[str, ...] = ()) -> dict[str, Any]:
    """What `cardfit NAME --json` prints for a catalog command (NAME in LISTINGS), with the user's extra
    catalog files where the command reads them."""
    if name == "gpus":
        from ..catalog.gpus import default_gpus, load_gpus

        return {"gpus": plain(gpu_rows(load_gpus(catalog) if catalog else default_gpus()))}
    if name == "models":
        from ..catalog.models import default_models, load_models

        return {"models": plain(model_rows(load_models(catalog) if catalog else default_models()))}
    if name == "quants":
        from ..catalog.quants import default_quants

        return quant_view(default_quants()).to_json()
    if name == "apis":
        from ..catalog.apis import apis

        return {"apis": plain(api_rows(apis(tuple(catalog))))}
    raise KeyError(name)


# --- price snapshots (`cardfit prices`) ---------------------------------------------------------------

def install_prices(path: str) -> dict[str, Any]:
    """`cardfit prices --update FILE`: the file checked as a price snapshot (parsed, bounded, every row dated
    and sourced, loading over the built-in catalog) and kept where every later command reads it."""
    import os

    from ..catalog.apis import INSTALLED_NAMES, check_snapshot, installed_dir
    from ..errors import InputError

    date, rows = check_snapshot(path)
    folder = installed_dir()
    if folder is None:
        raise InputError("no home folder to keep the snapshot in; pass it with --catalog FILE instead",
                         field="update")
    name = INSTALLED_NAMES[1] if path.lower().endswith(".json") else INSTALLED_NAMES[0]
    os.makedirs(folder, exist_ok=True)
    target = os.path.join(folder, name)
    from ..catalog.loader import MAX_USER_FILE_BYTES
    from ..readers.source import read_regular

    data = read_regular(path, MAX_USER_FILE_BYTES, "catalog file")
    tmp = target + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, target)
    for other in INSTALLED_NAMES:
        if other != name and os.path.isfile(os.path.join(folder, other)):
            os.remove(os.path.join(folder, other))
    return {"installed": {"path": target, "date": date, "rows": rows, "from": path}}


def remove_prices() -> dict[str, Any]:
    """`cardfit prices --remove`: back to the built-in API prices."""
    import os

    from ..catalog.apis import installed_files

    gone = installed_files()
    for p in gone:
        os.remove(p)
    return {"removed": gone[0] if gone else None}


def price_snapshots() -> list[dict[str, Any]]:
    """Each price table in use: its rows' newest and oldest dates and where it comes from."""
    from ..catalog.apis import default_apis, installed_files
    from ..catalog.gpus import default_gpus
    from ..catalog.purchase import default_purchases

    def snap(name: str, dates: list[str], source: str) -> dict[str, Any]:
        dated = sorted(d for d in dates if d)
        return {"name": name, "date": dated[-1] if dated else None,
                "oldest_date": dated[0] if dated else None, "rows": len(dates), "source": source}

    api_rows = list(default_apis())
    out = [snap("API prices", [a.date for a in api_rows if a.origin == "built-in"], "built-in, cardfit apis")]
    for path in installed_files():
        out.append(snap("API prices installed", [a.date for a in api_rows if a.origin == path], path))
    priced = [g.price_date for g in default_gpus() if g.monthly_usd is not None]
    out.append(snap("rental prices", priced, "the GPU catalog, cardfit gpus"))
    p = default_purchases()
    out.append(snap("purchase prices", [r.date for r in p.rows], "cardfit/data/purchase.toml"))
    return out

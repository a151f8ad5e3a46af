"""The GPU catalog: usable bytes as the driver reports them, bandwidth, TFLOPS, links and prices."""

from __future__ import annotations

import re
from enum import StrEnum
from functools import cache
from typing import Any

from ..errors import CatalogError
from .loader import builtin, merge_records, read_user_file
from .records import record
from .registry import Registry
from .schema import keys_of


class Feature(StrEnum):
    """A number format the card must compute in natively (a quantization's `requires`)."""

    FP8 = "fp8"
    BF16 = "bf16"
    FP4 = "fp4"


@record(slots=True)
class Gpu:
    id: str
    name: str
    vendor: str
    usable_bytes: int
    aliases: tuple[str, ...] = ()
    stack: str = "cuda"
    arch: str = ""
    tier: str = ""
    memory_gb: float = 0.0
    usable_measured: bool = False
    usable_source: str = ""
    memory_type: str = ""
    bandwidth_gbps: float | None = None
    fp16_tflops: float | None = None
    bf16_tflops: float | None = None
    fp8_tflops: float | None = None
    int8_tops: float | None = None
    fp4_tflops: float | None = None
    fp8: bool = False
    bf16: bool = True
    fp4: bool = False
    interconnect: str = "pcie"
    link_gbps: float | None = None
    pcie_gen: int | None = None
    tdp_w: int | None = None
    monthly_usd: float | None = None
    hourly_usd: float | None = None
    price_source: str = ""
    price_date: str = ""
    min_count: int = 1
    source: str = ""
    origin: str = "built-in"

    @property
    def names(self) -> list[str]:
        return [self.name, self.id, *self.aliases, *_auto_aliases(self.name)]

    def supports(self, feature: Feature) -> bool:
        return {Feature.FP8: self.fp8, Feature.BF16: self.bf16, Feature.FP4: self.fp4}[feature]

    def hourly(self, hours_per_month: float) -> float | None:
        """The hourly price: the catalog's own, else the monthly one over `hours_per_month` (core/cost.py)."""
        if self.hourly_usd is not None:
            return self.hourly_usd
        return None if self.monthly_usd is None else self.monthly_usd / hours_per_month

    def tflops(self, precision: str) -> float | None:
        """Dense tensor TFLOPS for the compute precision ('bf16', 'fp16', 'fp8', 'int8', 'fp4')."""
        return {
            "bf16": self.bf16_tflops or self.fp16_tflops,
            "fp16": self.fp16_tflops or self.bf16_tflops,
            "fp8": self.fp8_tflops if self.fp8 else None,
            "int8": self.int8_tops,
            "fp4": self.fp4_tflops if self.fp4 else None,
        }.get(precision)


_VENDOR = re.compile(r"^(nvidia|amd|geforce|radeon|instinct|tesla|quadro)\s+", re.I)
_MEM = re.compile(r"\s*\d+\s*gb$", re.I)


def _auto_aliases(name: str) -> list[str]:
    """'RTX 4090' is also 'GeForce RTX 4090' minus vendor words; memory suffixes are optional."""
    out = [_VENDOR.sub("", name)]
    stripped = _MEM.sub("", name)
    if stripped != name:
        out.append(stripped)
    return [o for o in out if o and o != name]


KEYS = keys_of(Gpu)


def gpu_from_row(row: dict[str, Any]) -> Gpu:
    known = {k: v for k, v in row.items() if k != "override"}
    try:
        known["aliases"] = tuple(row.get("aliases", ()))
        gpu = Gpu(**known)
    except TypeError as e:
        raise CatalogError(f"gpu '{row.get('id', '?')}': {e}") from e
    if not isinstance(gpu.usable_bytes, int) or gpu.usable_bytes <= 0:
        raise CatalogError(f"gpu '{gpu.id}': usable_bytes must be a positive integer")
    return gpu


@cache
def _builtin_rows() -> tuple[dict[str, Any], ...]:
    return tuple(builtin("gpus.toml")["gpu"])


def load_gpus(user_files: tuple[str, ...] = ()) -> Registry[Gpu]:
    user_rows = [(str(p), r) for p in user_files for r in read_user_file(p).get("gpu", [])]
    rows = merge_records(_builtin_rows(), user_rows, table="gpu", allowed=KEYS, builtin_file="gpus.toml")
    gpus = [gpu_from_row(r) for r in rows]
    return _registry(gpus)


def _registry(gpus: list[Gpu]) -> Registry[Gpu]:
    explicit = {n.lower() for g in gpus for n in (g.name, g.id, *g.aliases)}
    taken: dict[str, str] = {}
    clash = set()
    for g in gpus:
        for a in _auto_aliases(g.name):
            if a.lower() in taken and taken[a.lower()] != g.id:
                clash.add(a.lower())
            taken[a.lower()] = g.id

    def names(g: Gpu) -> list[str]:
        auto = [a for a in _auto_aliases(g.name) if a.lower() not in clash and a.lower() not in explicit]
        return [g.name, g.id, *g.aliases, *auto]

    return Registry("GPU", "cardfit gpus", gpus, names)


@cache
def default_gpus() -> Registry[Gpu]:
    return load_gpus()

"""The GPU catalog: usable bytes as the driver reports them, bandwidth, TFLOPS, links and prices."""

from __future__ import annotations

import re
from enum import StrEnum
from functools import cache
from typing import Any

from ..errors import CatalogError
from ..names import norm
from .loader import builtin, merge_records, read_user_file
from .records import record
from .registry import Registry
from .schema import keys_of, row_error


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
    # GB/s the GPU's own cores were measured to read where they cannot saturate the memory bus (Apple M1 Max:
    # 400 GB/s fabric, far less reached by its GPU); decode streams at most this; None: the bus figure holds
    stream_gbps: float | None = None
    stream_source: str = ""
    # the non-tensor FP32 rate of the CUDA cores / shader ALUs: what unpacking low-bit weights runs on
    fp32_tflops: float | None = None
    # streaming multiprocessors and their boost clock (NVIDIA architecture whitepapers): what a kernel whose
    # bytes in flight per SM are fixed streams at, whatever the bus (runtimes.toml
    # decode_bytes_per_sm_cycle_hbm_v0); None: not recorded
    sm_count: int | None = None
    boost_mhz: float | None = None
    fp16_tflops: float | None = None
    bf16_tflops: float | None = None
    fp8_tflops: float | None = None
    int8_tops: float | None = None
    fp4_tflops: float | None = None
    # the dense BF16 GEMM rate the vendor's own library was measured to reach on the card (a chip that clocks
    # down under dense matrix work: AMD "max-achievable FLOPs"); prefill reaches at most this share of the
    # peak; None: no such measurement, the runtime's efficiency alone holds
    gemm_bf16_tflops: float | None = None
    gemm_source: str = ""
    gemm_fp8_tflops: float | None = None  # the same for dense FP8 GEMMs (its source in gemm_fp8_source)
    gemm_fp8_source: str = ""
    # the same for dense block-scaled FP4 GEMMs, both operands FP4 (NVFP4/MXFP4 W4A4; its source in
    # gemm_fp4_source)
    gemm_fp4_tflops: float | None = None
    gemm_fp4_source: str = ""
    fp8: bool = False
    bf16: bool = True
    fp4: bool = False
    interconnect: str = "pcie"
    link_gbps: float | None = None
    # all-reduce bus bandwidth measured by message size on the card's full node (rccl-tests / nccl-tests
    # all_reduce_perf busbw: time = bytes × 2 (n-1)/n ÷ busbw), as (bytes, GB/s) pairs, and the ranks it was
    # measured on; () = not measured: a fixed latency per call plus the link bandwidth (core/speed.py)
    allreduce_busbw: tuple[tuple[int, float], ...] = ()
    allreduce_ranks: int = 0
    allreduce_source: str = ""
    # the dense attention rate (TFLOPS, BF16/FP16) a FlashAttention forward kernel was measured to reach on
    # the card, where below the GEMM rate: the attention FLOPs of a prefill run at it; None: the GEMM rate
    # holds
    attention_tflops: float | None = None
    attention_source: str = ""
    pcie_gen: int | None = None
    tdp_w: int | None = None
    monthly_usd: float | None = None
    hourly_usd: float | None = None
    price_source: str = ""
    price_date: str = ""
    min_count: int = 1
    max_count: int = 0  # 0: any number; Apple silicon: 1 (one GPU per machine)
    unified_memory: bool = False  # GPU and CPU share one RAM (Apple): usable_bytes is the GPU's wired limit
    gpu_cores: int = 0  # Apple: the GPU cores the row's rate counts (chips come in two GPU sizes)
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

    @property
    def sm100(self) -> bool:
        """A datacenter Blackwell part (compute capability 10.x: B200, B300, GB200, GB300), told from the
        GDDR7 / LPDDR Blackwell cards (SM120 / SM121: RTX 50, RTX PRO, DGX Spark) by its HBM."""
        return self.arch == "blackwell" and self.memory_type.upper().startswith("HBM")

    @property
    def gemm_share(self) -> float:
        """The share of the dense peak the vendor's GEMMs were measured to reach (gemm_bf16_tflops ÷ the BF16
        peak); 0 where not measured."""
        peak = self.bf16_tflops or self.fp16_tflops
        return self.gemm_bf16_tflops / peak if self.gemm_bf16_tflops and peak else 0.0

    def gemm_share_at(self, precision: str) -> float:
        """The share of the card's dense peak at `precision` (the precision a step's GEMMs run in:
        core/speed.py precision_of) its vendor's GEMMs were measured to reach (own_gemm_share); where the
        card was not measured at that precision: for FP4 its FP8 share (the same tensor-core pipeline at
        twice the rate), else the smallest share measured at that precision on a card of its architecture
        (measured_share); else gemm_share (BF16); 0 where nothing was measured."""
        if precision in ("fp8", "fp4") and not self.tflops(precision):
            return self.gemm_share
        own = self.own_gemm_share(precision)
        if not own and precision == "fp4":
            own = self.own_gemm_share("fp8")
        return own or measured_share(self.arch, precision) or self.gemm_share

    def own_gemm_share(self, precision: str) -> float:
        """gemm_{precision}_tflops ÷ the dense peak at that precision; 0 where not measured."""
        return _share(self.gemm_fp4_tflops if precision == "fp4" else self.gemm_fp8_tflops
                      if precision == "fp8" else self.gemm_bf16_tflops, self.tflops(precision))

    def tflops(self, precision: str) -> float | None:
        """Dense tensor TFLOPS for the compute precision ('bf16', 'fp16', 'fp8', 'int8', 'fp4')."""
        return {
            "bf16": self.bf16_tflops or self.fp16_tflops,
            "fp16": self.fp16_tflops or self.bf16_tflops,
            "fp8": self.fp8_tflops if self.fp8 else None,
            "int8": self.int8_tops,
            "fp4": self.fp4_tflops if self.fp4 else None,
        }.get(precision)


_VENDOR = re.compile(r"^(nvidia|amd|apple|geforce|radeon|instinct|tesla|quadro)\s+", re.I)
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
        if "allreduce_busbw" in row:
            known["allreduce_busbw"] = tuple((int(b), float(g)) for b, g in row["allreduce_busbw"])
        gpu = Gpu(**known)
    except TypeError as e:
        raise row_error("gpu", row, e) from e
    if not isinstance(gpu.usable_bytes, int) or gpu.usable_bytes <= 0:
        raise CatalogError(f"gpu '{gpu.id}': usable_bytes must be a positive integer", path=gpu.origin)
    return gpu


# gpus.toml is edited by hand; gpus_more.toml is generated by scripts/build_catalog.py from sourced tables
BUILTIN_FILES = ("gpus.toml", "gpus_more.toml")


@cache
def _builtin_rows() -> tuple[dict[str, Any], ...]:
    return tuple(row for name in BUILTIN_FILES for row in builtin(name)["gpu"])


@cache
def nvlink_allreduce_cards() -> tuple[Gpu, ...]:
    """The built-in cards whose NCCL all-reduce was measured by message size over NVLink (allreduce_busbw),
    in catalog order: the curves other NVLink cards borrow (core/speed.py nvlink_curve)."""
    return tuple(gpu_from_row(r) for r in _builtin_rows()
                 if r.get("interconnect") == "nvlink" and r.get("allreduce_busbw"))


def _share(measured: Any, peak: Any) -> float:
    return float(measured) / float(peak) if measured and peak else 0.0


@cache
def measured_share(arch: str, precision: str) -> float:
    """The smallest share of its dense peak at `precision` a built-in card of this architecture was measured
    to reach in that precision's GEMMs (gpus gemm_bf16/fp8/fp4_tflops: Hopper FP8 the H200's cuBLASLt 1,366
    of 1,979, Blackwell FP8 the GB200's 2,973 of 5,000 and FP4 the B200's 5,239 of 9,000): the cap of a
    card of that architecture whose own GEMMs were never measured at it. 0: none measured."""
    peak = {"bf16": ("bf16_tflops", "fp16_tflops"), "fp8": ("fp8_tflops",), "fp4": ("fp4_tflops",)}
    if not arch or precision not in peak:
        return 0.0
    shares = [_share(r.get(f"gemm_{precision}_tflops"), next((r[k] for k in peak[precision] if r.get(k)), 0))
              for r in _builtin_rows() if r.get("arch") == arch]
    return min((x for x in shares if x), default=0.0)


def load_gpus(user_files: tuple[str, ...] = ()) -> Registry[Gpu]:
    """Built-in cards are indexed by name and built when first asked for; a user's --catalog files are checked
    whole (every row built at once)."""
    user_rows = [(str(p), r) for p in user_files for r in read_user_file(p).get("gpu", [])]
    rows = merge_records(_builtin_rows(), user_rows, table="gpu", allowed=KEYS, builtin_file="gpus.toml")
    return _registry(rows) if not user_files else _registry([gpu_from_row(r) for r in rows])


def _card(x: Gpu | dict[str, Any]) -> tuple[str, str, tuple[str, ...]]:
    """(name, id, aliases) of a card or of the catalog row that builds it."""
    if isinstance(x, Gpu):
        return x.name, x.id, x.aliases
    return str(x.get("name", "")), str(x.get("id", "")), tuple(x.get("aliases", ()))


def _registry(items: list[Gpu] | list[dict[str, Any]]) -> Registry[Gpu]:
    """The cards (or the rows that build them, lazily), findable by name, id, aliases and the automatic
    aliases that no other card claims."""
    cards = [_card(x) for x in items]
    explicit = {n.lower() for name, gid, aliases in cards for n in (name, gid, *aliases)}
    taken: dict[str, str] = {}
    clash = set()
    automatic = {name: _auto_aliases(name) for name, _, _ in cards}
    for name, gid, _ in cards:
        for a in automatic[name]:
            if a.lower() in taken and taken[a.lower()] != gid:
                clash.add(a.lower())
            taken[a.lower()] = gid

    def names(x: Gpu | dict[str, Any]) -> list[str]:
        name, gid, aliases = _card(x)
        auto = [a for a in (automatic[name] if name in automatic else _auto_aliases(name))
                if a.lower() not in clash and a.lower() not in explicit]
        return [name, gid, *aliases, *auto]

    if items and not isinstance(items[0], Gpu):
        return GpuRegistry.lazy("GPU", "cardfit gpus", items, names, gpu_from_row)
    return GpuRegistry("GPU", "cardfit gpus", items, names)  # type: ignore[arg-type]


class GpuRegistry(Registry[Gpu]):
    """GPUs by name; the name 'local' is the card in this machine (catalog/local.py), read once."""

    _local: Gpu | None = None

    def find(self, name: str) -> Gpu | None:
        if norm(name) != "local":
            return super().find(name)
        if self._local is None:
            from .local import read_local  # subprocess & co. only when asked

            self._local = self._match(read_local())
        return self._local

    def local_cards(self) -> list[Gpu]:
        """Every card in this machine in its tool's order (catalog/local.py read_local_cards), each matched
        as `find('local')` matches the first."""
        from .local import read_local_cards

        return [self._match(r) for r in read_local_cards()]

    def _match(self, r: Any) -> Gpu:
        """The catalog card with this name (vendor words optional) and about this memory, with the bytes this
        machine reports (catalog/local.py Reading); else an ad-hoc card with no speed figures."""
        from dataclasses import replace

        from .local import candidates

        for name in candidates(r):
            g = super().find(name)
            if g is not None and (r.memory_gib
                                  or abs(g.usable_bytes - r.usable_bytes) <= 0.1 * g.usable_bytes):
                return replace(g, usable_bytes=r.usable_bytes, usable_measured=True,
                               usable_source=f"this machine ({r.tool})", origin=f"local ({r.tool})")
        return Gpu(id="local", name=r.name, vendor=r.vendor, usable_bytes=r.usable_bytes, stack=r.stack,
                   usable_measured=True, usable_source=f"this machine ({r.tool})",
                   unified_memory=r.stack == "metal", max_count=1 if r.stack == "metal" else 0,
                   source=f"{r.tool} on this machine; not in the catalog, so no bandwidth or TFLOPS "
                          "(no speed)",
                   origin=f"local ({r.tool})")


@cache
def default_gpus() -> Registry[Gpu]:
    return load_gpus()

"""Score cardfit against real measurements: load the records of data/validation/*.toml, predict each one
with cardfit's own model at the record's settings, and summarise the relative errors per kind.

Relative error = predicted / measured - 1. A record cardfit cannot predict (unknown model, quantization,
card or setting) is reported as skipped with its reason and counted, never dropped."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import field, replace
from functools import cache
from typing import Any, Literal

from ..catalog.gpus import Gpu, default_gpus
from ..catalog.loader import builtin
from ..catalog.models import ModelSpec, default_models
from ..catalog.quants import GgufMix, Quant, default_quants
from ..catalog.records import record
from ..catalog.runtimes import RuntimeProfile, default_runtimes
from ..core import activations, kv
from ..core.constants import value
from ..core.memory import MemorySettings, padded_context
from ..core.uncertainty import band_group
from ..core.weights import weights
from ..errors import CardfitError, InputError
from ..runtimes import adapter
from ..runtimes.base import NotModelled
from ..runtimes.llamacpp_like import DEFAULT_UBATCH
from ..runtimes.vllm_like import UNKNOWN_MAX_MODEL_LEN, VllmLike, v0_batched_tokens
from ..services.inputs import Input, opt
from ..services.table import Result
from ..units import rounded


def _files() -> tuple[str, ...]:
    """Every validation file shipped in data/validation/ (add a file, it is scored)."""
    from importlib import resources

    folder = resources.files("cardfit.data").joinpath("validation")
    return tuple(sorted(p.name for p in folder.iterdir() if p.name.endswith(".toml")))
MEMORY_KINDS = ("file_size", "weights", "kv_cache", "compute_buffer", "activation", "overhead", "max_context",
                "total_memory", "stack_memory")
SPEED_KINDS = ("decode", "prefill", "aggregate_decode")
# A served load: TTFT/TPOT/throughput at a stated concurrency and input/output length
# (data/validation/serving.toml); scored by the serving model's predictor where one is registered in
# PREDICTORS, otherwise skipped with the reason.
SERVING_KINDS = ("serving",)
KINDS = MEMORY_KINDS + SPEED_KINDS + SERVING_KINDS
GIB = 2**30
MIB = 2**20
# GGUF keeps the tokenizer in its header: per vocabulary entry a u64 length + the token text (~7 B), an f32
# score and an i32 type, plus about one BPE merge string (u64 length + ~12 B): ~43 B per entry
# (GGUF spec, https://github.com/ggml-org/ggml/blob/master/docs/gguf.md, "string" and array layouts).
GGUF_BYTES_PER_VOCAB_ENTRY = 43


class Skip(Exception):
    """This record cannot be predicted; the message says why."""


@record(slots=True)
class Outcome:
    id: str
    kind: str
    runtime: str
    model: str
    quant: str
    measured: float
    unit: str
    predicted: float | None = None
    how: str = ""
    skipped: str = ""
    gpu: str = ""
    prior: bool = False  # out of sample with a constant no other publisher measures: its prior

    @property
    def error(self) -> float | None:
        if self.predicted is None or not self.measured:
            return None
        return self.predicted / self.measured - 1

    def to_json(self) -> dict[str, Any]:
        err = self.error
        return {"id": self.id, "kind": self.kind, "runtime": self.runtime, "model": self.model,
                "quant": self.quant, "gpu": self.gpu or None, "unit": self.unit, "measured": self.measured,
                "predicted": self.predicted, "error": None if err is None else round(err, 5),
                "how": self.how or None, "skipped": self.skipped or None}


_LOO = ("loo_n", "loo_median_abs_error", "loo_p90_abs_error", "loo_p90_over_error")
_SOURCES = ("sources", "largest_source_records")
_SPLITS = ("user_path", "older_releases", "first_contact", "without_assumed", "scored_with_prior")


@record(slots=True)
class KindSummary(Result):
    """The errors of one kind of record: in sample, and out of sample (loo_*: each record predicted with the
    constants refitted without its source) where that was scored. p90_over_error: the 90th percentile of the
    over-prediction max(error, 0) (capacity or speed said too high). None: no record to take it from."""

    n: int  # records with a prediction
    skipped: int
    median_abs_error: float | None
    p90_abs_error: float | None
    max_abs_error: float | None
    median_error: float | None
    p10_ratio: float | None
    p90_ratio: float | None
    p90_over_error: float | None
    loo_n: int | None = None  # None: not scored out of sample (the loo_* keys are left out of the JSON)
    loo_median_abs_error: float | None = None
    loo_p90_abs_error: float | None = None
    loo_p90_over_error: float | None = None
    sources: int | None = None  # sources of the scored records (None: not counted; left out of the JSON)
    largest_source_records: int | None = None
    # out of sample (leave one publisher out), split by where the record stands: `user_path` the current
    # release with only the settings a user of deploy/speed states, `older_releases` an engine generation
    # before the runtime's current one; `first_contact` the figures stored when each source was first scored
    # (data/first_contact.toml); `without_assumed` the records that need no setting their source does not
    # state; `scored_with_prior` how many records' out-of-sample figures took a constant's prior (no other
    # publisher measures it). Each block: {n, median_abs_error, p90_over}. None: not scored (left out).
    user_path: dict[str, Any] | None = None
    older_releases: dict[str, Any] | None = None
    first_contact: dict[str, Any] | None = None
    without_assumed: dict[str, Any] | None = None
    scored_with_prior: int | None = None

    def to_json(self) -> dict[str, Any]:
        out = Result.to_json(self)  # (a slotted record is a new class: no zero-argument super())
        drop = (_LOO if self.loo_n is None else ()) + (_SOURCES if self.sources is None else ())
        drop += tuple(k for k in _SPLITS if out.get(k) is None)
        return {k: v for k, v in out.items() if k not in drop}


@record(slots=True)
class FeatureSummary(Result):
    """The errors of the records whose question uses one production feature (validation/features.py), each
    block {n, median_abs_error, p90_over} as a kind's splits give them (_block): `out_of_sample` every such
    record with the constants refitted without its publisher, `user_path` those of the current release with
    only the settings deploy/speed take, `first_contact` the figures stored when each source was first scored
    (data/first_contact.toml). n: records with a prediction; publishers: their publishers (the folds); kinds:
    the record kinds the feature spans. None: nothing to take it from."""

    n: int
    publishers: int
    kinds: tuple[str, ...]
    out_of_sample: dict[str, Any] | None
    user_path: dict[str, Any] | None
    first_contact: dict[str, Any] | None
    scored_with_prior: int | None  # None: not scored out of sample


@record
class Report(Result):
    outcomes: list[Outcome]
    kinds: dict[str, KindSummary] = field(default_factory=dict)
    loso: list[Outcome] = field(default_factory=list)  # the same records, each predicted without its source
    sources: dict[str, str] = field(default_factory=dict)  # record id → source key
    publishers: dict[str, str] = field(default_factory=dict)  # record id → publisher (its fold)
    paths: dict[str, str] = field(default_factory=dict)  # record id → "user", "knobs" or "older"
    # per production feature (validation/features.py FEATURES), its records' errors (feature_splits)
    features: dict[str, FeatureSummary] = field(default_factory=dict)
    tags: dict[str, tuple[str, ...]] = field(default_factory=dict)  # record id → its features
    # record ids that ran expert parallelism (settings moe_ep > 1) but are asked with the experts
    # tensor-parallel, so not counted as dp_ep (validation/features.py expert_parallel_asked_tp)
    ep_asked_tp: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        by_runtime: dict[str, dict[str, Any]] = {}
        for o in self.outcomes:
            by_runtime.setdefault(o.kind, {}).setdefault(o.runtime, []).append(o)
        loso = {o.id: o for o in self.loso}
        records = []
        for o in self.outcomes:
            row = o.to_json()
            out = loso.get(o.id)
            row["loo_predicted"] = None if out is None else out.predicted
            row["loo_error"] = None if out is None or out.error is None else round(out.error, 5)
            row["source_key"] = self.sources.get(o.id)
            row["publisher"] = self.publishers.get(o.id)
            row["path"] = self.paths.get(o.id)
            row["scored_with_prior"] = bool(out is not None and out.prior)
            row["features"] = list(self.tags.get(o.id, ()))
            records.append(row)
        return {
            "groups": "publisher",  # the out-of-sample folds: one publisher (organisation or harness) each
            "kinds": {k: v.to_json() for k, v in self.kinds.items()},
            "by_runtime": {k: {rt: summarize(v)[k].to_json() for rt, v in d.items()}
                           for k, d in by_runtime.items()},
            "records": records,
            "skipped": sum(1 for o in self.outcomes if o.skipped),
            "total": len(self.outcomes),
            "features": {f: v.to_json() for f, v in self.features.items()},
            "ep_asked_tensor_parallel": list(self.ep_asked_tp),
        }


# ---------------------------------------------------------------- loading

@cache
def all_records() -> tuple[dict[str, Any], ...]:
    """Every record of data/validation/, its `settings` keys checked (validation/records.py SETTINGS) and
    its statistic one cardfit reads for its metric (validation/serving.py check_statistic)."""
    from .records import check_settings
    from .serving import check_statistic

    out: list[dict[str, Any]] = []
    for name in _files():
        try:
            rows = builtin(f"validation/{name}").get("record", [])
        except FileNotFoundError:
            continue
        for r in rows:
            check_settings(r, name)
            check_statistic(r, name)
        out += [dict(r, file=name) for r in rows]
    return tuple(out)


def load_records(kind: str | None = None, runtime: str | None = None) -> list[dict[str, Any]]:
    recs = list(all_records())
    if kind:
        if kind not in KINDS:
            raise InputError(f"unknown record kind '{kind}'; one of {', '.join(KINDS)}", field="kind")
        recs = [r for r in recs if r["kind"] == kind]
    if runtime:
        known = {_norm_rt(r["runtime"]): r["runtime"] for r in all_records()}
        if _norm_rt(runtime) not in known:  # a typo ('vlm') is an error, not an empty table
            from ..names import closest, norm

            near = closest(runtime, {norm(k): v for k, v in known.items()})
            raise InputError(f"no records measured on runtime '{runtime}'"
                             + (f"; did you mean {' or '.join(near)}?" if near else ""), field="runtime",
                             hint=f"runtimes with records: {', '.join(sorted(set(known.values())))}")
        recs = [r for r in recs if _norm_rt(r["runtime"]) == _norm_rt(runtime)]
    return recs


def _norm_rt(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(".", "")


# ---------------------------------------------------------------- what a record names

def _model(r: dict[str, Any]) -> ModelSpec:
    m = default_models().find(r["model"])
    if m is None:
        raise Skip(f"model '{r['model']}' is not in the catalog")
    return m


def _quant(r: dict[str, Any], m: ModelSpec) -> Quant:
    name = str(r.get("quant", "")).strip()
    quants = default_quants()
    q = quants.find(name) or quants.find(name.split()[0]) if name else None
    if q is None and name.lower().startswith(("int8-w8a8", "w8a8")):
        q = quants.find("int8")
    if q is None and name.lower().startswith(("gptq", "awq")):
        q = quants.find("gptq")
    if q is None and "nf4" in name.lower():
        q = quants.find("nf4")
    if q is None:
        raise Skip(f"quantization '{name}' is not one cardfit models")
    if "/" in name:
        raise Skip(f"record mixes quantizations ('{name}')")
    return q


def _runtime(r: dict[str, Any]) -> RuntimeProfile:
    """The runtime profile: a catalog row, or a fork an adapter lists (runtimes.fork: ik_llama.cpp)."""
    from ..runtimes import fork

    name = r["runtime"]
    rt = fork(name) or default_runtimes().find(name)
    if rt is None:
        raise Skip(f"runtime '{name}' has no profile")
    return rt


def _gpu(r: dict[str, Any]) -> Gpu:
    """The card: a catalog name, or a log's own total ('80 GB-class NVIDIA (79.22 GiB total)')."""
    name = r.get("gpu") or ""
    g = default_gpus().find(name) if name else None
    if g is None and name:
        g = default_gpus().find(name.split("(")[0].strip())
    total = re.search(r"\(([\d.]+) GiB total\)", name)
    if g is None and total:
        like = default_gpus().find("H100 SXM")
        if like is not None:
            from dataclasses import replace

            return replace(like, name=name, usable_bytes=int(float(total.group(1)) * GIB))
    if g is None:
        raise Skip(f"card '{name or '(not stated)'}' is not in the GPU catalog")
    return g


def _settings(r: dict[str, Any]) -> dict[str, Any]:
    return dict(r.get("settings") or {})


def _context(r: dict[str, Any], s: dict[str, Any]) -> int:
    ctx = r.get("context") or s.get("n_ctx") or s.get("max_model_len")
    if not ctx:
        raise Skip("record does not state its context")
    return int(ctx)


def _kv_dtype(r: dict[str, Any], m: ModelSpec) -> str:
    d = kv.kv_dtype(str(r.get("kv_dtype") or _settings(r).get("type_k") or "auto"))
    return ("bf16" if m.dtype == "bf16" else "f16") if d == "auto" else d


# ---------------------------------------------------------------- predictions per kind

def _gguf_mix(name: str) -> GgufMix | None:
    """A llama.cpp file type by its exact name (F16 and MXFP4_MOE are also plain formats' names)."""
    from ..names import norm

    return next((x for x in default_quants().mixes if norm(x.name) == norm(name)), None)


def _file_size(r: dict[str, Any]) -> tuple[float, str]:
    m = _model(r)
    q = _gguf_mix(str(r.get("quant", ""))) or _quant(r, m)
    w = weights(m, q, legacy_qkv=r.get("gguf_rules") == "legacy")
    meta = m.vocab * GGUF_BYTES_PER_VOCAB_ENTRY if isinstance(q, GgufMix) or q.kind == "gguf" else 0
    if "llama-bench" in r.get("note", "") or r.get("settings", {}).get("tensors_only"):
        meta = 0  # llama-bench's size column counts tensor bytes only
    return w.total_bytes + meta, f"{w.method}: {w.bits_per_weight:.3f} bpw + {meta / 1e6:.1f} MB header"


def _tp(r: dict[str, Any]) -> int:
    return int(_settings(r).get("tp") or 1)


def _vllm_weights(m: ModelSpec, q: Quant, tp: int) -> int:
    return weights(m, q).total_bytes // tp


def _weights(r: dict[str, Any]) -> tuple[float, str]:
    """The weights on the card, as the plan counts them: the runtime's host-side weights (llama.cpp keeps
    token_embd in a CPU_Mapped buffer) stay out; tensor parallel splits the rest."""
    m, rt = _model(r), _runtime(r)
    q = _quant(r, m)
    host = adapter(rt).host_weights_bytes(m, q)
    if host:
        return weights(m, q).total_bytes - host, "file weights minus token_embd (kept on the CPU)"
    tp = _tp(r)
    if isinstance(adapter(rt), VllmLike):  # as the plan lays them out on the card (MXFP4 expert padding)
        try:
            gpu: Gpu | None = _gpu(r)
        except Skip:
            gpu = None
        mem = _vllm_plan(r, gpu, pool=False).memory
        pad = mem.weights_bytes - weights(m, q).total_bytes
        return mem.weights_bytes // tp, f"{q.name} checkpoint ÷ tp {tp}" + (
            f" + {pad / GIB:.2f} GiB kernel padding" if pad else "")
    return _vllm_weights(m, q, tp), f"{q.name} checkpoint ÷ tp {tp}"


def _llamacpp_kv(r: dict[str, Any], m: ModelSpec, rt: RuntimeProfile) -> tuple[float, str]:
    s = _settings(r)
    ctx = _context(r, s)
    seqs = int(r.get("parallel") or 1)
    ubatch = int(s.get("n_ubatch") or rt.prefill_chunk or DEFAULT_UBATCH)
    ms = MemorySettings(context=ctx, sequences=seqs, kv_dtype=_kv_dtype(r, m), prefill_chunk=ubatch)
    # Ollama and llama.cpp record the whole n_ctx (shared by the slots): context per sequence = ctx / seqs
    per_seq = MemorySettings(context=max(ctx // seqs, 1), sequences=seqs, kv_dtype=ms.kv_dtype,
                             prefill_chunk=ubatch)
    return adapter(rt).kv_bytes(m, per_seq), f"{padded_context(ctx, rt):,} cells, {ms.kv_dtype}"


@record
class VllmPlan:
    """A vLLM record planned the way `cardfit plan` plans it: the record's settings as plan options
    (--gpu-memory-utilization, --prefill-chunk, --tp, --kv-dtype, --context) and its engine generation's
    defaults as the runtime profile's fields (max_num_seqs, CUDA graphs, sampler, non-torch memory)."""

    memory: Any  # core.memory.Memory of the plan
    pool_bytes: int  # per rank: the KV room the plan leaves (core/fit.py kv_room ÷ ranks)
    tokens: int  # the profile run's batched tokens
    total_bytes: int  # the card as vLLM sees it
    utilization: float
    tp: int
    gpu: str


def _vllm_plan(r: dict[str, Any], gpu: Gpu | None = None, pool: bool = True) -> VllmPlan:
    """pool=False: the memory only (a record whose card is not stated still has an activation peak)."""
    from dataclasses import replace

    from ..core.fit import kv_room
    from ..services.inputs import PlanInput
    from ..services.plan import build_context, memory_for, option_for

    m, rt = _model(r), _runtime(r)
    at = _release(r)  # the profile at the record's release: its defaults (data/releases.toml `without`)
    engine = _vllm_like(rt)
    gpu = gpu if gpu is not None or not pool else _gpu(r)
    s = _settings(r)
    util = float(s.get("gpu_memory_utilization") or at.gpu_memory_utilization or rt.gpu_memory_utilization)
    if "gpu_memory_utilization" not in s and "not shown" in r.get("note", ""):
        raise Skip("gpu_memory_utilization not stated")
    if s.get("kv_connector"):
        raise Skip(f"KV connector {s['kv_connector']} allocates its own GPU buffers (not modelled)")
    q, tp = _quant(r, m), _tp(r)
    tokens = _vllm_batched_tokens(r, at, gpu)
    seqs = int(s.get("max_num_seqs") or (engine.serve_max_num_seqs(None if _vllm_v0(r) else gpu)))
    per_logit = (rt.sampler_bytes_per_logit_v0 or rt.sampler_bytes_per_logit) if _vllm_v0(r) \
        else rt.sampler_bytes_per_logit
    if s.get("rank") == "worker":
        per_logit = 0  # V0: a tensor-parallel worker other than the driver never samples (the log is its own)
    eager = s.get("enforce_eager") or not _release(r).has("graphs_in_budget")
    graphs = 0 if eager else rt.cuda_graph_bytes
    # the record's engine: its max_num_seqs replaces the by-card serve defaults
    profile = replace(rt, max_num_seqs=seqs, max_num_seqs_big_card=0, max_num_seqs_other=0,
                      cuda_graph_bytes=graphs, sampler_bytes_per_logit=per_logit,
                      non_torch_bytes=_non_torch(rt) + _v0_nvls(r, rt, gpu, tp),
                      mxfp4_backend=_mxfp4_backend(r, gpu), release=at.release,
                      mxfp4_sm100_inter_pad=at.mxfp4_sm100_inter_pad,
                      # how the release sizes the pool (data/releases.toml extensible_kv_cache, kv_block_64)
                      kv_margin_fraction=at.kv_margin_fraction,
                      kv_margin_floor_bytes=at.kv_margin_floor_bytes,
                      kv_margin_floor_bytes_rocm=at.kv_margin_floor_bytes_rocm,
                      kv_block_tokens=at.kv_block_tokens, ctx_pad=at.ctx_pad)
    context = int(r.get("context") or s.get("max_model_len") or m.max_context or UNKNOWN_MAX_MODEL_LEN)
    try:
        split = tp if tp > 1 else None
        ctx = build_context(PlanInput(model=m.id, runtime=rt.id, context=context, kv_dtype=_kv_dtype(r, m),
                                      gpu_memory_utilization=util, prefill_chunk=tokens, tp=split, gpus=split,
                                      allow_long_context=True))
    except CardfitError as e:
        raise Skip(f"plan: {e}") from None
    ctx = replace(ctx, runtime=profile, quant=q)
    if not pool:
        return VllmPlan(memory_for(ctx, context, gpu), 0, tokens, 0, util, tp, gpu.name if gpu else "")
    total = _cuda_total(r, gpu, engine)
    card = replace(gpu, usable_bytes=total + rt.cuda_total_shortfall_bytes)  # the plan's budget starts here
    mem = memory_for(ctx, context, card)
    opt = option_for(ctx, mem, card, tp)
    return VllmPlan(mem, kv_room(mem, opt.budget_bytes, tp) // tp, tokens, total, util, tp, gpu.name)


def _vllm_pool(r: dict[str, Any], m: ModelSpec, rt: RuntimeProfile) -> tuple[int, str]:
    """vLLM: total × utilization − weights − activation peak − non-torch (− CUDA graphs from v0.21), as the
    plan leaves it on one rank."""
    p = _vllm_plan(r)
    mem = p.memory
    graphs = mem.overhead_bytes - _non_torch(rt)
    how = (f"{p.gpu} {p.total_bytes / GIB:.2f} GiB × {p.utilization}"
           f" − weights {mem.weights_bytes // p.tp / GIB:.2f}"
           f" − act {mem.activation_bytes / GIB:.2f} − non-torch {_non_torch(rt) / GIB:.2f}"
           f" − graphs {graphs / GIB:.2f} GiB")
    return p.pool_bytes, how


def _v0_nvls(r: dict[str, Any], rt: RuntimeProfile, gpu: Gpu | None, tp: int) -> int:
    """V0 measured its memory baseline before NCCL started: NVLS buffers of a > 2-rank NVSwitch set came out
    of the KV pool (data/runtimes.toml nvls_bytes_per_rank); V1 starts NCCL before its snapshot."""
    if not _vllm_v0(r):
        return 0
    return _vllm_like(rt).nvls_bytes(gpu, tp, rt.nccl_communicators_v0)


def _mxfp4_backend(r: dict[str, Any], gpu: Gpu | None) -> str:
    """The record's MXFP4 MoE kernel: as its log names it (settings.mxfp4_backend), else the engine's pick
    by card, except on Hopper before vLLM 0.12: the OAI triton_kernels package was not installed with vLLM
    0.11 (vllm-project/vllm#26582, 'which triton-kernels version for MXFP4 Triton backend?', v0.11.0), so
    mxfp4.py fell back to Marlin (the log of vllm-project/vllm#23278, v0.10.1, prints Marlin's warning)."""
    given = str(_settings(r).get("mxfp4_backend") or "")
    if given:
        return given
    if gpu is not None and gpu.arch == "hopper" and not _release(r).has("triton_kernels_mxfp4"):
        return "marlin"
    return ""


def _non_torch(rt: RuntimeProfile) -> int:
    return round(value(rt.id, "non_torch_bytes", rt.non_torch_bytes))


def _cuda_total(r: dict[str, Any], gpu: Gpu, engine: VllmLike) -> int:
    """The card's memory as vLLM sees it (torch.cuda.mem_get_info total): the log's own total_gpu_memory
    when the record shows it, else the adapter's (nvidia-smi's memory.total less the driver's reserve)."""
    m = re.search(r"total_gpu_memory\s*[=(]\s*([\d.]+)\s*GiB", r.get("excerpt", "")) or \
        re.search(r"\(([\d.]+) GiB total\)", str(r.get("gpu") or ""))
    if m:
        return int(float(m.group(1)) * GIB)
    return engine.cuda_total(gpu)


def _release(r: dict[str, Any]) -> RuntimeProfile:
    """The record's runtime at its release: the vllm_version it states, else the release current at its
    date (catalog/releases.py; a record that states neither: the current release)."""
    from .single import record_runtime

    rt = record_runtime(r)
    return rt if rt is not None else _runtime(r)


def _vllm_v0(r: dict[str, Any]) -> bool:
    return not _release(r).has("v1_engine")


def _vllm_batched_tokens(r: dict[str, Any], rt: RuntimeProfile, gpu: Gpu | None) -> int:
    """max_num_batched_tokens of the profile run: given; V0 = max(max_model_len, 2048) unless chunked
    prefill is on (V0 turns it on for max_model_len > 32K in the API server; chunks of 512 tokens before
    v0.7, 2048 from v0.7); V1 = the serve default by card (data/runtimes.toml vllm prefill_chunk_*)."""
    s = _settings(r)
    if s.get("max_num_batched_tokens"):
        return int(s["max_num_batched_tokens"])
    if _vllm_v0(r):
        ctx = int(r.get("context") or s.get("max_model_len") or UNKNOWN_MAX_MODEL_LEN)
        return v0_batched_tokens(_release(r).has("v0_chunks_2048"), ctx, rt.v0_chunked_prefill_above)[0]
    return _vllm_like(rt).serve_batched_tokens(gpu)


def _vllm_activation(r: dict[str, Any], gpu: Gpu | None) -> int:
    """The activation peak the plan gives this record's setup (one rank)."""
    return int(_vllm_plan(r, gpu, pool=False).memory.activation_bytes)


def _vllm_like(rt: RuntimeProfile) -> VllmLike:
    engine = adapter(rt)
    if not isinstance(engine, VllmLike):
        raise Skip(f"modelled for vLLM-style pools, not {rt.name}")
    return engine


def _kv_cache(r: dict[str, Any]) -> tuple[float, str]:
    m, rt = _model(r), _runtime(r)
    if isinstance(adapter(rt), VllmLike):
        return _vllm_pool(r, m, rt)
    return _llamacpp_kv(r, m, rt)


def _max_context(r: dict[str, Any]) -> tuple[float, str]:
    m, rt = _model(r), _runtime(r)
    if not isinstance(adapter(rt), VllmLike):
        raise Skip(f"max_context is modelled for vLLM-style pools, not {rt.name}")
    pool, how = _vllm_pool(r, m, rt)
    tp = _tp(r)
    per_token = kv.kv_bytes_per_token(m, _kv_dtype(r, m)) * kv.kv_replication(m, tp) / tp  # per rank
    block = _release(r).kv_block_tokens  # the release's block (data/releases.toml kv_block_64)
    blocks = max(int(pool // (per_token * block)), 0)
    return blocks * block, f"{how}; ÷ {per_token:,.0f} B/token in {block}-token blocks"


def _compute_buffer(r: dict[str, Any]) -> tuple[float, str]:
    m, rt = _model(r), _runtime(r)
    s = _settings(r)
    ctx = padded_context(_context(r, s), rt)
    ubatch = int(s.get("n_ubatch") or rt.prefill_chunk or DEFAULT_UBATCH)
    fa = bool(s.get("flash_attn", rt.flash_attn))
    b = activations.llamacpp_compute_bytes(m, min(ubatch, ctx), ctx, fa)
    return b, f"n_ubatch {ubatch}, n_ctx {ctx:,}, flash_attn {fa}"


def _activation(r: dict[str, Any]) -> tuple[float, str]:
    _model(r)  # an unknown model is skipped with its reason
    rt = _runtime(r)
    if not isinstance(adapter(rt), VllmLike):
        return _compute_buffer(r)
    gpu = None
    try:
        gpu = _gpu(r)
    except Skip:
        pass
    tokens = _vllm_batched_tokens(r, _release(r), gpu)
    return _vllm_activation(r, gpu), f"profile run of {tokens:,} tokens"


def _overhead(r: dict[str, Any]) -> tuple[float, str]:
    rt = _runtime(r)
    if isinstance(adapter(rt), VllmLike):
        nt = _non_torch(rt)
        if not nt:
            raise Skip("runtime profile has no non_torch_bytes")
        return nt, "vLLM non-torch memory (profile)"
    return rt.context_bytes, "runtime context bytes"


# What a total_memory record measured (its settings.measure), and whether the CUDA context is in it:
# "buffers": the device buffers a llama.cpp load log lists (model + KV + compute; no CUDA context);
# "max_memory_allocated": PyTorch's peak of tensor bytes (no CUDA context, no allocator cache);
# "device": the card's used memory (nvidia-smi), the process's context included.
PLAN_MEASURES = {"buffers": False, "max_memory_allocated": False, "device": True}


def _plan_total(r: dict[str, Any], measure: str) -> tuple[float, str]:
    """A total scored through the plan a user gets (services/plan.py build_context + memory_for): the
    record's settings as plan options (--context per sequence, --parallel, --prefill-chunk, --kv-dtype,
    --flash-attn)."""
    from dataclasses import replace

    from ..services.inputs import PlanInput
    from ..services.plan import build_context, memory_for

    m, rt = _model(r), _runtime(r)
    s = _settings(r)
    seqs = int(r.get("parallel") or 1)
    total_ctx = _context(r, s)
    # llama.cpp's n_ctx is shared by the slots; a plan's --context is per sequence
    context = max(total_ctx // seqs, 1) if rt.ctx_pad > 1 else total_ctx
    chunk = s.get("n_ubatch") or s.get("prefill_chunk")
    fa = s.get("flash_attn")
    from ..runtimes.llamacpp_like import FORKS

    fork = FORKS.get(_norm_rt(r["runtime"]))
    base = default_runtimes().get(fork[0]) if fork else rt
    try:
        ctx = build_context(PlanInput(model=m.id, runtime=base.id, quant=str(r.get("quant") or "") or None,
                                      context=context, parallel=seqs, kv_dtype=_kv_dtype(r, m),
                                      prefill_chunk=int(chunk) if chunk else None,
                                      flash_attn=None if fa is None else bool(fa), allow_long_context=True))
    except CardfitError as e:
        raise Skip(f"plan: {e}") from None
    ctx = replace(ctx, runtime=rt)
    try:
        gpu: Gpu | None = _gpu(r)
    except Skip:
        gpu = None
    mem = memory_for(ctx, context, gpu)
    overhead = mem.overhead_bytes if PLAN_MEASURES[measure] else 0
    weights = mem.weights_bytes
    if s.get("mmproj") is False:  # a text-only load: llama.cpp keeps the vision tower in its --mmproj file
        from ..core.weights import projector_bytes

        weights -= projector_bytes(m, ctx.quant)
    total = weights + mem.kv_cache_bytes + mem.activation_bytes + overhead
    return total, (f"plan: weights {weights / MIB:,.0f} + KV {mem.kv_cache_bytes / MIB:,.0f} + "
                   f"workspace {mem.activation_bytes / MIB:,.0f}" + (f" + overhead {overhead / MIB:,.0f}"
                                                                      if overhead else "") + " MiB")


def _total_memory(r: dict[str, Any]) -> tuple[float, str]:
    measure = str(_settings(r).get("measure") or "")
    if measure:
        if measure not in PLAN_MEASURES:
            raise Skip(f"total_memory measure '{measure}' is not one of {', '.join(PLAN_MEASURES)}")
        return _plan_total(r, measure)
    return _reported_total(r)


def _stack_memory(r: dict[str, Any]) -> tuple[float, str]:
    """One card of a machine that holds several models, or one model split over several cards, scored
    through `cardfit stack` (services/stack.py): the record's `stack` is the stack file a user would write,
    `device` the card measured (0-based, in [machine] gpu order); the bytes of the record's model on that card
    (every entry of it there). settings.measure "buffers": the device buffers a llama.cpp log lists, without
    the CUDA context, so each server's context (its runtime's overhead) is taken off."""
    from ..services.stack import StackInput, stack

    text, device = r.get("stack"), r.get("device")
    if not isinstance(text, str) or not isinstance(device, int):
        raise Skip("a stack_memory record names its stack file (stack) and the card measured (device)")
    measure = str(_settings(r).get("measure") or "")
    if measure not in PLAN_MEASURES:
        raise Skip(f"stack_memory measure '{measure}' is not one of {', '.join(PLAN_MEASURES)}")
    try:
        answer = stack(StackInput(text=text))
    except CardfitError as e:
        raise Skip(f"stack: {e}") from None
    if not 0 <= device < len(answer.devices):
        raise Skip(f"device {device}: the stack has {len(answer.devices)} cards")
    want = default_models().find(r["model"])
    rows = [e for e in answer.devices[device].entries
            if want is not None and default_models().find(e.model) is want]
    if not rows:
        raise Skip(f"the stack puts no '{r['model']}' on card {device}")
    total = sum(e.bytes for e in rows)
    servers = [e for e in rows if e.role not in ("draft", "adapter")]
    context = 0
    if not PLAN_MEASURES[measure]:
        context = sum(adapter(_runtime({"runtime": e.runtime})).overhead_bytes() for e in servers)
    return total - context, (f"stack: card {device} holds {total / MIB:,.0f} MiB of {r['model']}"
                             + (f" less {context / MIB:,.0f} MiB CUDA context" if context else ""))


def _reported_total(r: dict[str, Any]) -> tuple[float, str]:
    """The total the runtime itself reports for the loaded model (Ollama's `ollama ps` SIZE: its own
    estimate, runtimes/ollama.py) at the record's context, slots and batch; the partial graph when layers
    spill to the CPU, as the record's PROCESSOR column shows."""
    m, rt = _model(r), _runtime(r)
    s = _settings(r)
    ctx = int(r.get("context") or s.get("num_ctx") or 4096)  # num_ctx default in the Ollama versions recorded
    settings = MemorySettings(context=ctx, sequences=int(r.get("parallel") or 1), kv_dtype=_kv_dtype(r, m),
                              prefill_chunk=int(s.get("num_batch") or 0))
    try:
        return adapter(rt).reported_total(m, _quant(r, m), settings, "CPU/GPU" in r.get("excerpt", ""))
    except NotModelled as e:
        raise Skip(str(e)) from None


def _speed(r: dict[str, Any]) -> tuple[float, str]:
    from .single import predict_speed

    try:
        v = predict_speed(dict(r))
    except CardfitError as e:
        raise Skip(f"speed model: {e}") from None
    except Exception as e:  # noqa: BLE001  (another module's bug must not hide every other record)
        raise Skip(f"speed model failed: {type(e).__name__}: {e}") from None
    if v is None:
        raise Skip(_unpredicted_speed(r))
    return float(v), "services.speed.predict_speed"


def _unpredicted_speed(r: dict[str, Any]) -> str:
    """Why the speed model gives a record no figure (validation/single.py predict_speed returns None): its
    card, model or quantization outside the catalogs (the catalog's own message, without its suggestions),
    or a prompt on a card the GPU catalog gives no compute rate for."""
    from .single import record_setup

    try:
        s = record_setup(dict(r))
    except CardfitError as e:
        return f"speed model: {str(e).split(';')[0]}"
    except Exception as e:  # noqa: BLE001  (another module's bug must not hide every other record)
        return f"speed model failed: {type(e).__name__}: {e}"
    if r.get("kind") == "prefill" and not s.tflops:
        return f"speed model: no compute rate for {s.plan.first.option.gpu.name} in the GPU catalog (prefill)"
    return "speed model cannot predict this record"


def _serving(r: dict[str, Any]) -> tuple[float, str]:
    """The served-load model behind `cardfit deploy` (validation/serving.py predict_serving)."""
    from .serving import predict_serving

    try:
        return predict_serving(dict(r))
    except CardfitError as e:
        raise Skip(f"serving model: {e}") from None


PREDICTORS: dict[str, Callable[[dict[str, Any]], tuple[float, str]]] = {
    "file_size": _file_size, "weights": _weights, "kv_cache": _kv_cache, "compute_buffer": _compute_buffer,
    "activation": _activation, "overhead": _overhead, "max_context": _max_context,
    "total_memory": _total_memory, "stack_memory": _stack_memory, "decode": _speed, "prefill": _speed,
    "aggregate_decode": _speed,
    "serving": _serving,
}


def predict(r: dict[str, Any]) -> Outcome:
    base = dict(id=r["id"], kind=r["kind"], runtime=r["runtime"], model=r["model"],
                quant=str(r.get("quant", "")), measured=float(r["measured"]), unit=r.get("unit", ""),
                gpu=str(r.get("gpu") or ""))
    if r.get("skip"):  # the record itself says why it cannot be compared (see its note)
        return Outcome(**base, skipped=f"record: {r['skip']}")
    fn = PREDICTORS.get(r["kind"])
    if fn is None:
        return Outcome(**base, skipped=f"no predictor for kind '{r['kind']}'")
    try:
        value, how = fn(r)
    except Skip as e:
        return Outcome(**base, skipped=str(e))
    except CardfitError as e:
        return Outcome(**base, skipped=f"cardfit error: {e}")
    return Outcome(**base, predicted=float(value), how=how)


# ---------------------------------------------------------------- scoring

def percentile(values: list[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), p in 0–100."""
    xs = sorted(values)
    if not xs:
        return math.nan
    k = (len(xs) - 1) * p / 100
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


# Units in which a larger figure is more capacity or speed; in the others (bytes a model needs, milliseconds a
# request waits) a smaller figure is the optimistic one. A vLLM-like kv_cache record is the KV pool: room.
CAPACITY_UNITS = frozenset({"tokens_per_s", "requests_per_s", "tokens"})


def optimism(o: Outcome) -> float:
    """How far cardfit was on the unsafe side (saying it fits, holds or runs more than measured), ≥ 0:
    predicted / measured − 1 for room and speed, measured / predicted − 1 for bytes needed and latency
    (both read as 'the real thing is that much worse than we said'); 0 on the safe side."""
    err = o.error
    if err is None:
        return 0.0
    if o.unit in CAPACITY_UNITS or (o.kind == "kv_cache" and _pooled(o.runtime)):
        return max(err, 0.0)
    return max(1 / (1 + err) - 1, 0.0) if err > -1 else math.inf


def summarize(outcomes: Iterable[Outcome], loso: Iterable[Outcome] = (),
              sources: dict[str, str] | None = None) -> dict[str, KindSummary]:
    """Per kind: the in-sample errors and, where `loso` is given, the leave-one-source-out ones (loo_*); with
    `sources`, how many sources the scored records come from."""
    by: dict[str, list[Outcome]] = {}
    for o in outcomes:
        by.setdefault(o.kind, []).append(o)
    out_of: dict[str, list[Outcome]] = {}
    for o in loso:
        out_of.setdefault(o.kind, []).append(o)
    out: dict[str, KindSummary] = {}
    for kind in [k for k in KINDS if k in by] + sorted(set(by) - set(KINDS)):
        scored_in = [o for o in by[kind] if o.error is not None]
        errs = [o.error for o in scored_in if o.error is not None]
        absd = [abs(e) for e in errs]
        k = KindSummary(n=len(errs), skipped=len(by[kind]) - len(errs),
                        median_abs_error=rounded(percentile(absd, 50), 5),
                        p90_abs_error=rounded(percentile(absd, 90), 5),
                        max_abs_error=rounded(max(absd), 5) if absd else None,
                        median_error=rounded(percentile(errs, 50), 5),
                        p10_ratio=rounded(1 + percentile(errs, 10), 5),
                        p90_ratio=rounded(1 + percentile(errs, 90), 5),
                        p90_over_error=rounded(percentile([optimism(o) for o in scored_in], 90), 5))
        if kind in out_of:
            out_s = [o for o in out_of[kind] if o.error is not None]
            loo = [o.error for o in out_s if o.error is not None]
            k = replace(k, loo_n=len(loo),
                        loo_median_abs_error=rounded(percentile([abs(e) for e in loo], 50), 5),
                        loo_p90_abs_error=rounded(percentile([abs(e) for e in loo], 90), 5),
                        loo_p90_over_error=rounded(percentile([optimism(o) for o in out_s], 90), 5))
        if sources is not None:
            per: dict[str, int] = {}
            for o in by[kind]:
                if o.error is not None:
                    per[sources.get(o.id, "")] = per.get(sources.get(o.id, ""), 0) + 1
            k = replace(k, sources=len(per), largest_source_records=max(per.values(), default=0))
        out[kind] = k
    return out


# ---------------------------------------------------------------- where a record stands

# Settings a user of `deploy` or `speed` states: the card split, the engine release, the KV cache type, how
# the checkpoint was quantized, the load; a pinned deploy also takes the engine limits, memory share and
# DP/EP layout and P/D pools (validation/serving.py pinned_settings), a workload's reuse and the drafter
# (--speculative, --num-speculative-tokens, --acceptance, --speculative-topk, --speculative-draft-tokens:
# serving.py speculative_options). A serving record
# with any other setting ran a knob deploy does not set (a switch cardfit ignores, such as TensorRT-LLM's
# moe_tp or enable_chunked_prefill).
USER_SETTINGS = frozenset({"tp", "pp", "version", "vllm_version", "kv_cache_dtype", "num_prompts",
                           "gemm_quant", "moe_quant", "shared_prefix_tokens", "prefix_groups", "turns",
                           "sessions", "kv_offload_gb", "length_distribution", "max_output_tokens",
                           "speculative", "num_speculative_tokens", "acceptance", "speculative_topk",
                           "speculative_draft_tokens", "warm_requests"})


# vLLM 0.34's memory features (data/releases.toml): they change the KV pool, the longest context and the
# memory lines, not a step's time; a record is older by them only where its figure moves
MEASURED_KV_FEATURES = frozenset({"extensible_kv_cache", "kv_block_64"})

# vLLM features of data/releases.toml that change only some cards or models (the header's "neither `without`
# nor `reads`": the code that times it asks the release): MXFP4 experts on Hopper or SM100, ROCm's graph pool,
# a card of 160 GiB or more, SM100's prompt graphs. A record of a release lacking them is older only where its
# figure moves (an L4 running a BF16 model at 0.23.0 asks what 0.34.0 answers), as for MEASURED_KV_FEATURES
SCOPED_FEATURES = frozenset({"mxfp4_scales_freed", "rocm_graphs_in_budget", "trtllm_mxfp4_pad_128",
                             "batch_16k_above_160gib", "graphs_1024_sm100"})
# the features a record is classed by through its prediction (_measured_kv_applies)
PREDICTED_FEATURES = MEASURED_KV_FEATURES | SCOPED_FEATURES

# Features of data/releases.toml whose absence changes only some models or cards (an MLA + MoE model, MXFP4
# experts on Hopper, V0's chunk sizes, llama-server's speculative cycle, SGLang's gpt-oss SWA pool,
# llama.cpp's --fit on a card the model (nearly) fills): a record lacking only these is on the current
# generation unless the change applies to it (single.py mla_v0, _fit_applies)
_NARROW_FEATURES = frozenset({"mla_moe_kernels", "triton_kernels_mxfp4", "v0_chunks_2048",
                              "v0_mla_unchunked", "server_draft_in_batch",
                              "gpt_oss_hybrid_swa", "fit", *(
                                  # SGLang: a drafting run's scheduler (spec v2), the launch flags of the
                                  # decode graphs' cap and of the attention groups, a 20-35 GiB card's
                                  # defaults (_sglang_narrow_applies)
                                  "spec_overlap", "spec_overlap_tree", "spec_overlap_ngram",
                                  "graph_flags_by_phase", "attn_dp_size_flag", "tier_35gib_4k_48",
                                  "prefill_cuda_graph",
                                  # where SGLang captures prompt-step graphs (_prompt_graph_reserve_applies)
                                  "prefill_graph_speculative", "prefill_graph_breakable",
                                  "prefill_graph_pd_roles", "prefill_graph_dp_attention", "prefill_graph_mla",
                                  "prefill_graph_pp_opt_in",
                                  # the reserve's speculative terms and the decode graphs' cap by a given
                                  # --max-running-requests (runtimes/sglang.py reserved_mib)
                                  "spec_reserve_eagle_4gib", "spec_reserve_dropped",
                                  "graph_cap_by_max_running",
                                  # a disaggregated worker's reserve by its role (_role_reserve_applies)
                                  "reserve_by_role"),
                              # vLLM 0.34: the KV cache sized from measured memory, 64-token blocks, and
                              # vLLM's card- or model-scoped features (_measured_kv_applies)
                              *PREDICTED_FEATURES})


def older_generation(r: dict[str, Any]) -> bool:
    """Whether a record ran an engine release before its runtime's current one in a way the code models
    apart: its release (stated, else the one current at its date: catalog/releases.py) lacks a feature of
    data/releases.toml (vLLM V0 before 0.8, synchronous scheduling before 0.14, graphs outside the budget
    before 0.21, SGLang before its FA3 prompt attention, a TensorRT engine before TensorRT-LLM 1.0 or NIM
    1.15, a llama.cpp build before its CUDA graphs or MMQ kernels), it ran a TensorRT engine (settings
    backend), or an MLA + MoE model on an engine before mid-2025 (validation/single.py mla_v0)."""
    from .serving import tensorrt_engine
    from .single import mla_v0, record_runtime

    rt = record_runtime(r)
    if rt is None:
        return False
    if r.get("kind") == "serving" and (tensorrt_engine(r) or mla_v0(r) or _full_length_swa(r, rt)):
        return True
    if rt.release is None:
        return False
    from ..catalog.releases import release

    # a feature the current release lacks too (listed ahead of it in data/releases.toml) is not a
    # generation apart from what users get
    lacks = rt.release.lacks - release(rt.id).lacks
    return (bool(lacks - _NARROW_FEATURES) or ("fit" in lacks and _fit_applies(r))
            or _sglang_narrow_applies(r, lacks) or _measured_kv_applies(r, lacks))


def _measured_kv_applies(r: dict[str, Any], lacks: frozenset[str]) -> bool:
    """Whether vLLM's features a record's release lacks that cardfit reads only through its prediction
    (PREDICTED_FEATURES: the KV cache sized from measured memory, 64-token blocks, and the features scoped to
    some cards or models) change what cardfit predicts for it: its figure at its release against the same
    question at the current release, where it lacks nothing else (a record lacking other features is
    classed by them). A single-stream speed record, a serving run whose paged pool holds every request
    whole, or a card none of the scoped features touches is predicted alike and stays on the path users
    get."""
    if not lacks & PREDICTED_FEATURES or lacks - PREDICTED_FEATURES:
        return False
    return _predicted_apart(r)


def _sglang_narrow_applies(r: dict[str, Any], lacks: frozenset[str]) -> bool:
    """Whether SGLang's narrow features a record's release lacks change its figures: the prompt graphs'
    reserve where the default memory fraction is used (_prompt_graph_reserve_applies), the speculative path
    for a record that drafts (spec v2 for a chain, a tree from spec_overlap_tree, n-gram lookup from
    spec_overlap_ngram), the 20-35 GiB card row (chunk, decode graphs, reserve) for a record on such a
    card (catalog/runtimes.py tier_of, by the card's nominal size); the launch flag never."""
    from ..catalog.gpus import default_gpus
    from ..catalog.runtimes import TIER_35GIB_BEFORE_0520

    st = r.get("settings") or {}
    drafts = str(st.get("speculative") or "")
    if drafts and ("spec_overlap" in lacks
                   or ("spec_overlap_tree" in lacks and int(st.get("speculative_topk") or 1) > 1)
                   or ("spec_overlap_ngram" in lacks and drafts == "ngram")):
        return True
    graphs = any(f == "prefill_cuda_graph" or f.startswith("prefill_graph_") for f in lacks)
    if graphs and _prompt_graph_reserve_applies(r, st):
        return True
    if "reserve_by_role" in lacks and _role_reserve_applies(r, st):
        return True
    gpu = default_gpus().find(str(r.get("gpu") or ""))
    mib = gpu.memory_gb * 1024 if gpu is not None else 0
    if _reserve_terms_apply(st, lacks, mib):
        return True
    if "tier_35gib_4k_48" in lacks:
        return 20 * 1024 <= mib < TIER_35GIB_BEFORE_0520.max_gpu_mem_mib
    return False


def _reserve_terms_apply(st: dict[str, Any], lacks: frozenset[str], mib: float) -> bool:
    """Whether the reserve terms a record's SGLang release lacks change its default memory fraction
    (runtimes/sglang.py reserved_mib; none where the record states the fraction): the speculative reserve
    of an EAGLE-family or draft-model run (spec_reserve_eagle_4gib, spec_reserve_dropped), and a stated
    --max-running-requests below the card's decode graph cap, the server's whole, with or without attention
    DP (graph_cap_by_max_running: services/plan.py Context.engine_at)."""
    from ..catalog.runtimes import default_runtimes
    from ..runtimes.sglang import decode_graph_max_bs

    if st.get("gpu_memory_utilization"):
        return False
    method = str(st.get("speculative") or "").split(":")[0]
    if method and method != "ngram" and lacks & {"spec_reserve_eagle_4gib", "spec_reserve_dropped"}:
        return True
    running = int(st.get("max_num_seqs") or 0)
    if "graph_cap_by_max_running" not in lacks or not running:
        return False
    tp = int(st.get("tp") or 1)
    return running < decode_graph_max_bs(default_runtimes().get("sglang"), mib, tp)


def _role_reserve_applies(r: dict[str, Any], st: dict[str, Any]) -> bool:
    """Whether a disaggregated run's workers, sized by role from 0.5.15 (data/releases.toml reserve_by_role,
    runtimes/sglang.py activation_tokens) and as replicas before it, are predicted apart: only through the
    default --mem-fraction-static, and only where the pools' sizes move a figure (_predicted_apart)."""
    from .serving import disaggregated_pools

    if st.get("gpu_memory_utilization") or not disaggregated_pools(st):
        return False
    return _predicted_apart(r)


def _prompt_graph_reserve_applies(r: dict[str, Any], st: dict[str, Any]) -> bool:
    """Whether where SGLang captures prompt-step CUDA graphs (data/releases.toml prefill_cuda_graph, 0.5.10,
    and the prefill_graph_* rows after it) changes what cardfit predicts for a record: the code models them
    through the default --mem-fraction-static only (runtimes/sglang.py prefill_graph_reserve_mib), so a record
    that states its memory fraction is predicted alike at either release, and one whose workers' reserve is
    the same at its release and the current one (runtimes/sglang.py prompt_graphs_captured, asked for each
    of its workers: a disaggregated run's prefill and decode roles, its attention DP, its drafter, an MLA
    model, its pipeline) too (the graphs' saving on a prompt step is not modelled: docs/VALIDATION.md "SGLang
    after 0.5.9")."""
    from ..catalog.releases import release
    from ..runtimes.sglang import prefill_graph_reserve_mib
    from .serving import attention_dp, disaggregated_pools
    from .single import record_runtime

    if st.get("gpu_memory_utilization"):
        return False
    rt = record_runtime(r)
    if rt is None:
        return False
    now = replace(rt, release=release(rt.id))
    gpu = default_gpus().find(str(r.get("gpu") or ""))
    model = default_models().find(str(r.get("model") or ""))
    stack = gpu.stack if gpu is not None else "cuda"
    mla = model is not None and model.attention == "mla"
    pp = int(st.get("pp") or 1)
    tp = int(st.get("tp") or 1)
    roles = ("prefill", "decode") if disaggregated_pools(st) else ("",)
    switches = {"dp_attention": attention_dp(st, tp, rt) > 1, "speculative": bool(st.get("speculative"))}
    chunk = 8192  # the count of captured sizes is the same at either release: only on or off is asked
    moved = [role for role in roles
             if (prefill_graph_reserve_mib(rt, chunk, stack, pp, mla, role, **switches) > 0)
             != (prefill_graph_reserve_mib(now, chunk, stack, pp, mla, role, **switches) > 0)]
    # the prefill pool's reserve alone: it moves a disaggregated run's figures only where that pool's KV
    # pool caps the prompts it holds (core/disagg.py held_slots), which the prediction itself answers
    return _predicted_apart(r) if moved == ["prefill"] else bool(moved)


def _predicted_apart(r: dict[str, Any]) -> bool:
    """Whether a record is predicted otherwise at its runtime's current release than at its own (the same
    question, its stated version replaced): a change of its release's that moves none of its figures leaves
    it on the path users get. Unpredictable at one of the two only: apart."""
    from ..catalog.releases import current_release

    st = {k: v for k, v in (r.get("settings") or {}).items() if k != "vllm_version"}
    now = dict(r, settings=dict(st, version=current_release(str(r.get("runtime") or ""))))
    try:
        then_, now_ = predict(r).predicted, predict(now).predicted
    except (CardfitError, NotModelled, ValueError):
        return True
    if then_ is None or now_ is None:
        return then_ is not now_
    return not math.isclose(now_, then_, rel_tol=1e-9)


def _fit_applies(r: dict[str, Any]) -> bool:
    """Whether a single-stream record of a llama.cpp build before --fit (data/releases.toml `fit`) ran a plan
    the current build places otherwise: one that offloaded layers, or left less than the current build's
    --fit-target free on the card."""
    from ..catalog.runtimes import default_runtimes
    from ..core.fit import OFFLOAD
    from .single import record_setup

    target = default_runtimes().find(str(r.get("runtime") or ""))
    if r.get("kind") not in ("decode", "prefill", "aggregate_decode") or target is None:
        return False
    try:
        o = record_setup(r).plan.first.option
    except CardfitError:
        return False
    return o.verdict == OFFLOAD or o.free_bytes < target.fit_target_bytes


def _full_length_swa(r: dict[str, Any], rt: Any) -> bool:
    """Whether an SGLang release before its model's hybrid SWA pool (runtimes/sglang.py HYBRID_SWA: gpt-oss
    before 0.5.8) allocated the model's sliding-window layers full length."""
    from ..catalog.models import default_models
    from ..runtimes.sglang import HYBRID_SWA

    m = default_models().find(str(r.get("model") or ""))
    feature = HYBRID_SWA.get(m.model_type) if m is not None else None
    return bool(feature) and rt.release is not None and not rt.has(feature)


def path_of(r: dict[str, Any]) -> str:
    """Where a record stands: "older" (an engine generation before the current one), "knobs" (the current
    release with a setting deploy does not take: validation/serving.py pinned_settings says which it does),
    "user" (the path users get)."""
    if older_generation(r):
        return "older"
    st = dict(r.get("settings") or {})
    if str(st.get("backend") or "pytorch").lower() == "pytorch":
        st.pop("backend", None)
    if r.get("kind") == "serving":
        from .serving import pinned_settings
        from .single import record_runtime

        tp = int(st.get("tp") or r.get("gpus") or 1)
        if set(st) - USER_SETTINGS - pinned_settings(st, tp, record_runtime(r)):
            return "knobs"
    return "user"


def assumed(r: dict[str, Any]) -> tuple[str, ...]:
    """The settings a record's source does not state, filled in as its note says (record key `assumed`)."""
    return tuple(r.get("assumed") or ())


@cache
def first_contact() -> dict[str, dict[str, Any]]:
    """data/first_contact.toml: each record as the code before its source scored it
    (scripts/first_contact.py)."""
    return {row["id"]: row for row in builtin("first_contact.toml").get("score", [])}


def _block(outs: list[Outcome]) -> dict[str, Any] | None:
    scored = [o for o in outs if o.error is not None]
    if not scored:
        return None
    absd = [abs(o.error) for o in scored if o.error is not None]
    return {"n": len(scored), "median_abs_error": rounded(percentile(absd, 50), 5),
            "p90_over": rounded(percentile([optimism(o) for o in scored], 90), 5)}


def _first_contact(outs: Iterable[Outcome]) -> dict[str, Any] | None:
    """The first-contact block of these records: each with the prediction data/first_contact.toml stores
    for it (a record scored before the file began has none and is left out)."""
    fc = first_contact()
    return _block([replace(o, predicted=fc[o.id].get("predicted")) for o in outs if o.id in fc])


def splits(records: list[dict[str, Any]], outcomes: list[Outcome], loso: list[Outcome],
           kinds: dict[str, KindSummary], paths: dict[str, str]) -> dict[str, KindSummary]:
    """Each kind's summary with its out-of-sample figures split by where the records stand (`paths`:
    record id -> path_of), its first-contact figures and its figures without the records that need an
    assumed setting."""
    by_id = {r["id"]: r for r in records}
    out_of = {o.id: o for o in (loso or outcomes)}
    out: dict[str, KindSummary] = {}
    for kind, k in kinds.items():
        mine = [out_of[o.id] for o in outcomes if o.kind == kind and o.id in out_of]
        user = [o for o in mine if paths[o.id] == "user"]
        older = [o for o in mine if paths[o.id] == "older"]
        plain = [o for o in mine if not assumed(by_id[o.id])]
        out[kind] = replace(k, user_path=_block(user), older_releases=_block(older),
                            first_contact=_first_contact(o for o in outcomes if o.kind == kind),
                            without_assumed=_block(plain),
                            scored_with_prior=sum(1 for o in mine if o.prior) if loso else None)
    return out


def feature_splits(outcomes: list[Outcome], loso: list[Outcome], tags: dict[str, tuple[str, ...]],
                   paths: dict[str, str], publishers: dict[str, str]) -> dict[str, FeatureSummary]:
    """Per production feature (validation/features.py FEATURES, in that order; a feature no record's
    question uses is left out), the errors of the records that use it (`tags`: record id -> its features),
    out of sample, on the user path and at first contact, as splits() gives a kind's."""
    from .features import FEATURES

    out_of = {o.id: o for o in (loso or outcomes)}
    out: dict[str, FeatureSummary] = {}
    for feature in FEATURES:
        mine = [o for o in outcomes if feature in tags.get(o.id, ())]
        if not mine:
            continue
        scored = [o for o in mine if o.error is not None]
        oos = [out_of[o.id] for o in mine if o.id in out_of]
        kinds = [k for k in KINDS if any(o.kind == k for o in mine)]
        out[feature] = FeatureSummary(
            n=len(scored), publishers=len({publishers.get(o.id, "") for o in scored}), kinds=tuple(kinds),
            out_of_sample=_block(oos), user_path=_block([o for o in oos if paths.get(o.id) == "user"]),
            first_contact=_first_contact(mine),
            scored_with_prior=sum(1 for o in oos if o.prior) if loso else None)
    return out


def validate(kind: str | None = None, runtime: str | None = None, loso: bool = True) -> Report:
    """Score the records (of one kind / runtime); with `loso`, also each record predicted with every fitted
    constant refitted without its publisher's records (validation/calibrate.py fold_key), the out-of-sample
    error."""
    from .calibrate import publisher_key, source_key
    from .features import expert_parallel_asked_tp, record_features

    records = load_records(kind, runtime)
    with _runs():
        outcomes = [predict(r) for r in records]
        out_of = leave_one_source_out(records, outcomes) if loso else []
    sources = {r["id"]: source_key(r) for r in records}
    paths = {r["id"]: path_of(r) for r in records}
    publishers = {r["id"]: publisher_key(r) for r in records}
    kinds = splits(records, outcomes, out_of, summarize(outcomes, out_of, sources), paths)
    tags = {r["id"]: t for r in records if (t := record_features(r))}  # once per record
    ep_tp = tuple(r["id"] for r in records if expert_parallel_asked_tp(r, tags.get(r["id"], ())))
    return Report(outcomes, kinds, out_of, sources, publishers, paths,
                  feature_splits(outcomes, out_of, tags, paths, publishers), tags, ep_tp)


# The kinds of a sample's report (validate --source): one per metric, then all of them together
SAMPLE_METRICS = ("ttft_ms", "tpot_ms")


def validate_sample(source: str, runtime: str | None = None) -> Report:
    """`validate --source aiconfigurator`: every record built from the whole eligible sample
    (validation/aic_sample.py) predicted as `cardfit validate` predicts a serving record, summarised per
    metric
    (kinds `aiconfigurator_ttft_ms`, `aiconfigurator_tpot_ms`) and overall (`aiconfigurator`), each beside its
    first-contact figures (data/first_contact.toml). In sample only: the sample's publisher (NVIDIA) also
    published records that constants are fitted on, so its first contact is the figure to trust."""
    from .aic_sample import records as sample_records
    from .calibrate import publisher_key, source_key

    if source != "aiconfigurator":
        raise InputError(f"unknown sample '{source}'; one of: aiconfigurator", field="source")
    records = [r for r in sample_records() if not runtime or _norm_rt(r["runtime"]) == _norm_rt(runtime)]
    if not records:
        raise InputError(f"the {source} sample has no run on runtime '{runtime}'; it has vllm, sglang and "
                         "trtllm", field="runtime")
    with _runs():
        outcomes = [replace(predict(r), kind=f"{source}_{r['metric']}") for r in records]
    kinds: dict[str, KindSummary] = {}
    groups = [(f"{source}_{m}", [o for o in outcomes if o.kind == f"{source}_{m}"]) for m in SAMPLE_METRICS]
    for name, outs in groups + [(source, outcomes)]:
        k = summarize([replace(o, kind=name) for o in outs])[name]
        kinds[name] = replace(k, first_contact=_first_contact(outs))
    return Report(outcomes, kinds, [], {r["id"]: source_key(r) for r in records},
                  {r["id"]: publisher_key(r) for r in records}, {r["id"]: path_of(r) for r in records})


# data/snapshot/validation_runs.json, written by scripts/build_catalog.py: every served benchmark run that
# validate and `validate --source aiconfigurator` step (core/serving.py benchmark, ~90% of their CPU once the
# folds are prebuilt), by the SHA-256 of its arguments (validation/serving.py bench_key: the replica with
# every
# constant and setting its steps read, the workload, the flags), with the digest of all a run can reach:
# core/ and what it may import (catalog/, the package's root modules; tests/test_layout.py) and the catalogs
# (data/*.toml; a validation record is read by services only). A run is a function of those and its
# arguments, so validate takes a run from the file while that digest holds, steps any other itself, and steps
# every run where the file is stale.
RUNS_FILE = "validation_runs.json"  # in data/snapshot/
RUNS_SCHEMA = 1
RUNS_MAX_BYTES = 1 << 23  # ~0.3 MB today
_RUN_FIELDS = ("ttft_mean_s", "ttft_median_s", "tpot_mean_s", "seconds", "output_tokens_per_s",
               "requests_per_s")


def runs_path() -> Any:
    from .calibrate import folds_path

    return folds_path().with_name(RUNS_FILE)


def runs_modules() -> tuple[str, ...]:
    """The modules a benchmark run can execute and the catalogs they can read, as paths in the package."""
    from .calibrate import _package

    root = _package()
    found = [p for folder in ("core", "catalog", ".") for p in (root / folder).glob("*.py")]
    return tuple(sorted(p.relative_to(root).as_posix() for p in found + list((root / "data").glob("*.toml"))))


def build_runs() -> dict[str, Any]:
    """The content of data/snapshot/validation_runs.json: every run of `validate` and `validate --source
    aiconfigurator`, stepped here."""
    from .calibrate import files_digest
    from .serving import BENCH_RUNS, _bench

    runs: dict[str, Any] = {}
    _bench.cache_clear()  # every run stepped with the memo in place, none answered from before
    token = BENCH_RUNS.set(runs)
    try:
        validate()
        validate_sample("aiconfigurator")
    finally:
        BENCH_RUNS.reset(token)
    modules = runs_modules()
    return {"schema": RUNS_SCHEMA, "generated_by": "scripts/build_catalog.py", "modules": list(modules),
            "modules_sha256": files_digest(modules),
            "runs": {k: [getattr(b, f) for f in _RUN_FIELDS] for k, b in sorted(runs.items())}}


def prebuilt_runs() -> dict[str, Any] | None:
    """The runs of data/snapshot/validation_runs.json while the code they ran is as it is now; None where
    the file is missing, malformed, of another schema or stale."""
    import json

    from .calibrate import files_digest

    try:
        with open(runs_path(), "rb") as f:
            raw = f.read(RUNS_MAX_BYTES + 1)
        content = json.loads(raw) if len(raw) <= RUNS_MAX_BYTES else None
    except (OSError, ValueError):
        return None
    runs = _parse_runs(content)
    if runs is None or files_digest(runs_modules()) != content["modules_sha256"]:
        return None
    return runs


def _parse_runs(content: Any) -> dict[str, Any] | None:
    from ..core.serving import Benchmark

    if not isinstance(content, dict) or content.get("schema") != RUNS_SCHEMA:
        return None
    runs = content.get("runs")
    if not isinstance(content.get("modules_sha256"), str) or not isinstance(runs, dict):
        return None
    out = {}
    for key, v in runs.items():
        if not (isinstance(v, list) and len(v) == len(_RUN_FIELDS) and all(type(x) is float for x in v)):
            return None
        out[key] = Benchmark(*v)
    return out


@contextmanager
def _runs() -> Iterator[None]:
    """Predictions inside take their benchmark runs from the prebuilt ones while those are fresh (unless a
    caller set runs already: build_runs)."""
    from .serving import BENCH_RUNS

    runs = prebuilt_runs() if BENCH_RUNS.get() is None else None
    if runs is None:
        yield
        return
    token = BENCH_RUNS.set(runs)
    try:
        yield
    finally:
        BENCH_RUNS.reset(token)


def leave_one_source_out(records: list[dict[str, Any]], outcomes: list[Outcome]) -> list[Outcome]:
    """Each record predicted with the constants refitted on every other publisher (calibrate.fit; the name
    keeps the fold's older unit, a source). A record whose publisher no constant is fitted on, and typed no
    constant in, keeps its in-sample prediction: its constants do not change."""
    from collections import ChainMap

    from ..core.constants import constants
    from .calibrate import fold_key, typed_from

    by_id = {o.id: o for o in outcomes}
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault(fold_key(r), []).append(r)
    folds = _folds(set(groups))
    out: dict[str, Outcome] = {}
    for src, recs in groups.items():
        if src not in folds:
            continue  # nothing was fitted on or typed in from this publisher: its records are out of sample
        refit, prior = folds[src]
        typed = typed_from(src, refit)
        with constants(ChainMap(typed, refit) if typed else refit):  # type: ignore[arg-type]
            out.update((r["id"], predict(r)) for r in recs)
        for r in recs:  # a constant nothing else measures: scored with the prior
            if r["id"] in out and any(f.select(r) for f in prior):
                out[r["id"]] = replace(out[r["id"]], prior=True)
        _flag_readers(recs, out, prior, ChainMap(typed, refit) if typed else refit)
    return [out.get(o.id, by_id[o.id]) for o in outcomes]


def _flag_readers(recs: list[dict[str, Any]], out: dict[str, Outcome], prior: tuple[Any, ...],
                  values: Mapping[str, float]) -> None:
    """Flag as scored with the prior the fold's other records whose figure reads a constant only this fold
    measures (dstack's 8-request runs past V0's graph context read the eager per-layer time its one-request
    runs fit): their figure moves when those constants take their in-sample values instead."""
    from collections import ChainMap

    from ..core.constants import constants
    from .calibrate import stored

    if not prior:
        return
    have = stored()
    own = {k: have[k] for f in prior for rt in (f.runtime, *f.copies) if (k := f"{rt}.{f.field}") in have}
    rest = [r for r in recs
            if r["id"] in out and not out[r["id"]].prior and out[r["id"]].predicted is not None]
    if not own or not rest:
        return
    with constants(ChainMap(own, values)):  # type: ignore[arg-type]
        moved = [r["id"] for r in rest if predict(r).predicted != out[r["id"]].predicted]
    for rid in moved:
        out[rid] = replace(out[rid], prior=True)


def _folds(publishers: set[str]) -> dict[str, tuple[Mapping[str, float], tuple[Any, ...]]]:
    """Each of these publishers' folds that validate refits (a publisher some constant is fitted on, or that
    typed one in): its constants and the rows of calibrate.FITS only it measures. From the prebuilt folds
    (calibrate.prebuilt_folds) while they are fresh, else refitted here (calibrate.Refit)."""
    from .calibrate import FITS, Refit, fitting_sources, only_measured_by, prebuilt_folds, stored, typed_from

    built = prebuilt_folds()
    if built is not None:
        rows, have = {f.key: f for f in FITS}, stored()
        return {src: ({**have, **fold.changed}, tuple(rows[k] for k in fold.prior))
                for src, fold in built.items() if src in publishers}
    everything = all_records()
    fitted_on = fitting_sources(everything)
    return {src: (Refit(everything, leave_out=src), only_measured_by(everything, src))
            for src in publishers if src in fitted_on or typed_from(src)}


@record
class ValidateInput(Input):
    kind: str | None = opt(None, "only records of this kind (file_size, weights, kv_cache, compute_buffer, "
                           "activation, overhead, max_context, total_memory, decode, prefill, "
                           "aggregate_decode)", max_length=64)
    runtime: str | None = opt(None, "only records measured on this runtime (vllm, llama.cpp, ollama …)",
                              max_length=32)
    plot: str | None = opt(None, "write a predicted-vs-measured chart to this PNG/SVG file", max_length=4096)
    write_accuracy: str | None = opt(None,
                                     "regenerate the error-bar data (src/cardfit/data/accuracy.toml) from "
                                     "all records", max_length=4096)
    source: Literal["aiconfigurator"] | None = opt(
        None, "score a whole published sample in its own mode, not the records: aiconfigurator = every "
        "eligible row of aiconfigurator-core 0.12.0's silicon_sample.csv (TTFT and TPOT, in sample, beside "
        "its first-contact figures)")


def validate_report(inp: ValidateInput) -> Report:
    """`cardfit validate`: the report, and the chart and error-bar file when asked for."""
    if inp.source:
        if inp.kind or inp.write_accuracy:
            raise InputError("--source scores a sample of serving runs on its own; drop --kind and "
                             "--write-accuracy", field="source")
        report = validate_sample(inp.source, inp.runtime)
    else:
        report = validate(inp.kind, inp.runtime)
    if inp.write_accuracy:
        _write_accuracy(inp.write_accuracy, inp.kind, inp.runtime)
    if inp.plot:
        from ..charts.validation import write_plot

        write_plot(report, inp.plot)
    return report


def _write_accuracy(path: str, kind: str | None, runtime: str | None) -> None:
    import datetime

    if kind or runtime:
        raise InputError("--write-accuracy uses every record; drop --kind/--runtime", field="write_accuracy")
    text = accuracy_toml(validate(), datetime.date.today().isoformat())
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    except OSError as e:
        raise InputError(f"cannot write {path}: {e.strerror or e}", field="write_accuracy") from e


# ---------------------------------------------------------------- error bars (data/accuracy.toml)

# Which validation kinds inform the range of each figure cardfit prints. KV cache: the llama.cpp-family
# buffers measure the per-context cache; vLLM's kv_cache records are the pool (max_context covers those).
FIGURE_KINDS: dict[str, tuple[str, ...]] = {
    "weights_bytes": ("weights", "file_size"),
    "kv_cache_bytes": ("kv_cache",),
    "activation_bytes": ("compute_buffer", "activation"),
    "max_context_tokens": ("max_context",),
    "decode_tokens_per_s": ("decode",),
    "prefill_tokens_per_s": ("prefill",),
    "aggregate_tokens_per_s": ("aggregate_decode",),
}
# Served-load figures `deploy` and `speed` print, and the serving metrics whose records give their band
SERVING_FIGURES: dict[str, tuple[str, ...]] = {
    "serving_ttft_ms": ("ttft_ms",),
    "serving_tpot_ms": ("tpot_ms", "itl_ms"),
    "serving_tokens_per_s": ("output_tokens_per_s", "request_throughput"),
}
# Figures whose records come from one runtime's own notion and must not be applied to others (none now:
# the overhead records measure vLLM's non-torch memory, which is not cardfit's overhead figure, so they
# are scored but give no band).
RUNTIME_ONLY: frozenset[str] = frozenset()
MIN_N = 5  # a runtime gets its own range from this many records; fewer fall back to all runtimes
# (a production feature's served-figure range takes the same rule: from MIN_N records using it, else none)


@record(slots=True)
class Band(Result):
    """The likely range of one figure: p10–p90 of predicted / measured over n records (data/accuracy.toml
    `[[range]]`; runtime "" = all runtimes together)."""

    figure: str
    runtime: str
    kinds: tuple[str, ...]
    n: int
    low: float
    high: float
    median_abs_error: float
    # "": a `[[range]]` row; else a `[[feature_range]]` row, from the records whose question uses this
    # production feature (validation/features.py), all runtimes together, on the user path where MIN_N are
    feature: str = ""


def _band(figure: str, runtime: str, kinds: tuple[str, ...], outcomes: list[Outcome],
          feature: str = "") -> Band:
    errs = [o.error for o in outcomes if o.error is not None]
    return Band(figure, runtime, kinds, len(errs), round(1 + percentile(errs, 10), 5),
                round(1 + percentile(errs, 90), 5), round(percentile([abs(e) for e in errs], 50), 5), feature)


def _pooled(runtime: str) -> bool:
    rt = default_runtimes().find(runtime)
    return rt is not None and isinstance(adapter(rt), VllmLike)


def accuracy_bands(report: Report) -> list[Band]:
    """Per figure, and per runtime where MIN_N records allow: p10–p90 of predicted / measured, out of sample
    (each record predicted with the constants fitted without its source) when the report has those. Then per
    served figure (SERVING_FIGURES) and production feature (validation/features.py FEATURES) where MIN_N of
    those records use it (report.tags): the same range over them alone, all runtimes together (deploy widens
    a deployment's range to the widest of its runtime's and its features': core/uncertainty.py band)."""
    from .features import FEATURES

    out: list[Band] = []
    outcomes = report.loso or report.outcomes
    served = [r for r in all_records() if r.get("kind") == "serving"]
    metric = {r["id"]: r.get("metric") for r in served}
    paths = {r["id"]: path_of(r) for r in served}
    figures = {**{f: (k, ()) for f, k in FIGURE_KINDS.items()},
               **{f: (SERVING_KINDS, m) for f, m in SERVING_FIGURES.items()}}
    for figure, (kinds, metrics) in figures.items():
        scored = [o for o in outcomes if o.kind in kinds and o.error is not None
                  and (not metrics or metric.get(o.id) in metrics)]
        if figure == "kv_cache_bytes":  # a vLLM-like record measures the pool, not the per-context cache
            scored = [o for o in scored if not _pooled(o.runtime)]
        if len(scored) < 3:
            continue
        if figure not in RUNTIME_ONLY:
            out.append(_band(figure, "", kinds, scored))
        groups: dict[str, list[Outcome]] = {}
        for o in scored:
            groups.setdefault(band_group(o.runtime), []).append(o)
        for rt, outs in sorted(groups.items()):
            if rt and len(outs) >= MIN_N and (len(groups) > 1 or figure in RUNTIME_ONLY):
                out.append(_band(figure, rt, kinds, outs))
        if metrics:
            for feature in FEATURES:
                mine = [o for o in scored if feature in report.tags.get(o.id, ())]
                # the records on the path users get (the current release's defaults: path_of) where MIN_N of
                # them use the feature, as a deployment deploy prints is that path's (issue 24: a figure's
                # range from the out-of-sample errors of its path and kind); else every release's
                users = [o for o in mine if paths.get(o.id) == "user"]
                if len(users) >= MIN_N:
                    mine = users
                if len(mine) >= MIN_N:
                    out.append(_band(figure, "", kinds, mine, feature))
    return out


def accuracy_toml(report: Report, today: str) -> str:
    """The text of data/accuracy.toml (generated: `cardfit validate --write-accuracy PATH`)."""
    lines = ["# Error bars of cardfit's figures, GENERATED by `cardfit validate --write-accuracy` from the",
             "# validation records (data/validation/*.toml): do not edit by hand; regenerate after a model "
             "change.",
             "# low/high = 10th/90th percentile of predicted / measured over n records, each predicted with "
             "the",
             "# constants fitted without its own source (out of sample); a figure F is shown with",
             "# the range [F / high, F / low] (always containing F). runtime = \"\": all runtimes together.",
             "# [[feature_range]]: a served figure's range over the records whose question uses one",
             "# production feature (validation/features.py); deploy takes the widest of a deployment's",
             "# runtime's range and its features' ranges.",
             "schema = 1", f'generated = "{today}"', f"records = {len(report.outcomes)}",
             f"scored = {sum(1 for o in report.outcomes if o.error is not None)}", ""]
    bands = accuracy_bands(report)
    # the [[range]] rows first, as a reader of them alone (before the feature rows) finds them
    for b in sorted(bands, key=lambda b: b.feature != ""):
        head = ["[[feature_range]]", f'figure = "{b.figure}"', f'feature = "{b.feature}"'] if b.feature else \
            ["[[range]]", f'figure = "{b.figure}"']
        lines += [*head, f'runtime = "{b.runtime}"',
                  "kinds = [" + ", ".join(f'"{k}"' for k in b.kinds) + "]", f"n = {b.n}",
                  f"low = {b.low}", f"high = {b.high}", f"median_abs_error = {b.median_abs_error}", ""]
    return "\n".join(lines)

"""The fitted constants of the speed and memory model, computed from the validation records, and the
leave-one-source-out refit that `cardfit validate` scores out of sample.

Each fitted constant is the median, over the records that measure its phenomenon, of the value one record
implies with the rest of the model held fixed (constants fitted earlier in FITS are already in place).
data/runtimes.toml stores the values `scripts/fit_constants.py` prints; tests/test_calibration.py checks
the file matches. Leave-one-source-out: for each source (a page, issue, repository file), every constant is
refitted without that source's records and that source's records are predicted with the refit constants.
The implied values are computed once per record from cached setups, so a refit is a handful of medians."""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..core.constants import constants
from ..runtimes.llamacpp import LlamaCpp
from ..runtimes.llamacpp_like import LlamaCppLike
from ..runtimes.sglang import SGLang
from ..runtimes.trtllm import TrtLlm
from ..runtimes.vllm import Vllm
from ..runtimes.vllm_like import VllmLike

Record = dict[str, Any]
Constants = dict[str, float]  # "runtime.field" → value


def source_key(r: Record) -> str:
    """One key per source: the URL without scheme, query and the git ref of a blob/tree link (a pinned and
    an unpinned link to the same file are one source); a source without URL is its own text."""
    s = str(r.get("source") or r.get("id"))
    s = re.sub(r"^https?://(www\.)?", "", s.strip()).split("#")[0].split("?")[0].rstrip("/")
    s = re.sub(r"^(github\.com/[^/]+/[^/]+)/(blob|tree|raw)/[^/]+", r"\1", s)
    s = re.sub(r"^(huggingface\.co/[^/]+/[^/]+)/(blob|tree|resolve)/[^/]+", r"\1", s)
    return s.lower()


# Sources that one organisation published, or that one organisation's harness measured, under another host
# or account: one publisher. The record's own note names the organisation; each row says where it is stated.
PUBLISHER_OF = (
    # aiconfigurator is NVIDIA's (https://github.com/ai-dynamo/aiconfigurator, "NVIDIA AI Configurator")
    ("pypi.org/project/aiconfigurator", "nvidia"),
    ("github.com/ai-dynamo/", "nvidia"),
    # the NVIDIA NIM LLM benchmarking guide's tables, transcribed (serving_nim_h100.toml notes)
    ("github.com/zivbeker42/llm-guesstimator/tested_benchmarks", "nvidia"),
    ("docs.nvidia.com/", "nvidia"),
    ("developer.nvidia.com/", "nvidia"),
    # a fork of Azure's own AI-benchmarking-guide (https://github.com/Azure/AI-benchmarking-guide)
    ("github.com/samuel-bohman/ai-benchmarking-guide", "azure"),
    ("amd.com/", "amd"),
    ("rocm.blogs.amd.com/", "amd"),
    ("github.com/vllm-project/vllm-project.github.io", "vllm-project"),
    ("blog.vllm.ai/", "vllm-project"),
)
_THREAD = re.compile(r"^github\.com/[^/]+/[^/]+/(issues|pull|discussions)/\d+")


def publisher_key(r: Record) -> str:
    """The organisation or harness behind a record: the group a leave-one-publisher-out fold leaves out
    whole, so that several files, runs or machines of one publisher never fit each other's constants
    (dstack's seven CSVs from two machines are one publisher). A repository's own files are its owner's
    (github.com/OWNER, huggingface.co/OWNER); an issue, pull request or discussion thread is its poster's, one
    group per thread (the tracker's owner did not measure it), except where PUBLISHER_OF names the
    organisation (NVIDIA's own TensorRT-LLM pull request of its 0.15.0 tables)."""
    key = source_key(r)
    for prefix, publisher in PUBLISHER_OF:
        if key.startswith(prefix):
            return publisher
    if key.startswith("github.com/nvidia/"):
        return "nvidia"
    if _THREAD.match(key):
        return key
    host, _, rest = key.partition("/")
    if host in ("github.com", "huggingface.co") and rest:
        return "github:" + rest.split("/")[0] if host == "github.com" else "huggingface:" + rest.split("/")[0]
    return host


# The fold a record belongs to when validation scores it out of sample: its publisher.
fold_key = publisher_key

# A fitted constant's value where a fold leaves none of its records and it has no earlier constant to fall
# back on (Fit.prior): the model without the effect. Every fitted field reads 0 as "not calibrated" (an
# efficiency or share of 0 is the uncalibrated 1.0, an overhead of 0 none, a rate of 0 the card's own:
# services/speed.py calibrated, core/speed.py, validation/serving.py rocm_v0_kernels).
NEUTRAL = 0.0

# Constants typed into data/runtimes.toml from a publisher whose measurements are also validation records:
# a fold that leaves that publisher out scores its records without them, as if the number had never been
# read: NEUTRAL (no such effect), or where the model cannot run without the field (an eager decode step must
# have a time), the field the effect adds to. (runtime field, publisher, the runtimes whose row typed it in
# (empty: every row that sets the field), the field taken instead ("": NEUTRAL), where it came from)
TYPED_FROM: tuple[tuple[str, str, tuple[str, ...], str, str], ...] = (
    ("prefill_overhead_us_per_layer", "nvidia", (), "",
     "aiconfigurator-core 0.12.0 sdk/backends/vllm_backend.py _prefill_dispatch_overhead_ms"),
    # the same 0.8 ms a layer, typed in as SGLang's, TensorRT-LLM's and TGI's eager decode step
    # (runtimes.toml: "the same per-layer dispatch time as above"); without it their eager step is timed as
    # their graph step (decode_overhead_us_per_layer). llama.cpp's and Ollama's values of the field are
    # fitted on their own records (scripts/fit_constants.py) and stay in NVIDIA's fold.
    ("decode_overhead_us_per_layer_v0", "nvidia", ("sglang", "trtllm", "tgi"), "decode_overhead_us_per_layer",
     "aiconfigurator-core 0.12.0 sdk/backends/vllm_backend.py _prefill_dispatch_overhead_ms"),
)


def typed_from(publisher: str, values: Mapping[str, float] | None = None) -> dict[str, float]:
    """The typed-in constants (the runtimes' rows that typed them in) to take out of `publisher`'s fold, with
    the value each takes there: NEUTRAL, or the fold's `values` (default: the stored constants) of the field
    taken instead."""
    from ..catalog.runtimes import default_runtimes

    out: dict[str, float] = {}
    for field, who, runtimes, instead, _ in TYPED_FROM:
        if who != publisher:
            continue
        have = stored() if values is None and instead else values or {}
        for rt in default_runtimes():
            if getattr(rt, field, 0.0) and (not runtimes or rt.id in runtimes):
                out[f"{rt.id}.{field}"] = have.get(f"{rt.id}.{instead}", NEUTRAL) if instead else NEUTRAL
    return out


# ---------------------------------------------------------------- what is fitted, from which records

# Records whose own source calls the number anomalous: scored and printed, never used to fit.
ANOMALOUS = frozenset({"vllm20710-2xb200-llama33-70b-fp8-c1", "ollama11688-4070-gptoss20b-offload"})


@dataclass(frozen=True)
class Fit:
    """A constant fitted on the records of the one catalog runtime whose adapter is `on` (runtimes/: vLLM's
    records for Vllm, llama.cpp's for LlamaCpp), and taken as well by every other catalog runtime whose
    adapter is a `share` (the same engine code, no records fitted of their own: SGLang, TGI and TensorRT-LLM
    take vLLM's, Ollama llama.cpp's). A runtime joins a family's constants by its catalog row alone."""

    on: type  # the adapter class of the runtime whose records fit the constant
    field: str  # runtimes.toml key
    measures: Callable[[Record], bool]  # of that runtime's records, those that measure the phenomenon
    implied: Callable[[Record], float | None]  # what one record implies, other constants in place
    digits: int  # decimals stored in runtimes.toml
    share: type | None = None  # the adapter family whose other runtimes take the same value (None: no other)
    why: str = ""
    # a fold that leaves no record of this constant takes this other field's value (fitted before it), not
    # its own stored one (which was fitted on the left-out source): the out-of-sample score stays honest
    prior: str = ""
    prior_on: type | None = None  # the adapter class of the runtime holding `prior` (None: `on`'s)

    @property
    def runtime(self) -> str:
        """The catalog runtime whose records fit the constant."""
        (rid,) = _runtime_ids(self.on, exact=True)
        return rid

    @property
    def copies(self) -> tuple[str, ...]:
        """The other catalog runtimes that take the value."""
        if self.share is None:
            return ()
        return tuple(sorted(set(_runtime_ids(self.share, exact=False)) - {self.runtime}))

    @property
    def key(self) -> str:
        return f"{self.runtime}.{self.field}"

    @property
    def prior_key(self) -> str:
        if not self.prior:
            return ""
        (owner,) = _runtime_ids(self.prior_on, exact=True) if self.prior_on else (self.runtime,)
        return f"{owner}.{self.prior}"

    def select(self, r: Record) -> bool:
        """The records the constant is fitted on."""
        return _rt(r) == self.runtime and self.measures(r)


@cache
def _runtime_ids(cls: type, exact: bool) -> tuple[str, ...]:
    """Catalog runtimes whose adapter is `cls` (exact) or one of its subclasses."""
    from ..catalog.runtimes import default_runtimes
    from ..runtimes import adapter

    return tuple(rt.id for rt in default_runtimes()
                 if (type(adapter(rt)) is cls if exact else isinstance(adapter(rt), cls)))


def _rt(r: Record) -> str:
    return str(r.get("runtime", "")).lower()


def _is(kind: str, *, offload: bool | None = False) -> Callable[[Record], bool]:
    """Records of `kind` a constant of the plain engine may be fitted on: not anomalous, not skipped, and not
    a run with speculative decoding (its step also drafts and verifies K + 1 tokens: core/speculative.py
    times that, and what it leaves unexplained, the engines' sampling of the drafted tokens among it, is the
    speculative model's to answer, not the plain step's per-layer or per-sequence time)."""
    def ok(r: Record) -> bool:
        if r.get("kind") != kind or r["id"] in ANOMALOUS or r.get("skip"):
            return False
        if (r.get("settings") or {}).get("speculative"):
            return False
        return offload is None or bool(r.get("offload")) == offload
    return ok


def _speed(name: str) -> Callable[[Record], float | None]:
    def implied(r: Record) -> float | None:
        from . import single as speed_service

        return getattr(speed_service, name)(r)  # type: ignore[no-any-return]
    return implied


def _both(a: Callable[[Record], bool], b: Callable[[Record], bool]) -> Callable[[Record], bool]:
    return lambda r: a(r) and b(r)


def _prefill_field(field: str, power_bound: bool | None = None) -> Callable[[Record], bool]:
    def ok(r: Record) -> bool:
        from . import single as speed

        if speed.record_prefill_field(r) != field:
            return False
        return power_bound is None or speed.power_bound(r) is power_bound
    return ok


def _power_bound(r: Record) -> bool:
    from .single import power_bound

    return power_bound(r)


def _generation(current: bool) -> Callable[[Record], bool]:
    """Engines whose scheduler overlaps the GPU step (vLLM 0.6, SGLang 0.4 and later, or a record stating
    no version dated after the release) vs the engines before (validation/single.py serial_scheduler)."""
    def ok(r: Record) -> bool:
        from ..catalog.runtimes import default_runtimes
        from .single import serial_scheduler

        rt = default_runtimes().find(_rt(r))
        return rt is not None and serial_scheduler(r, rt) is not current
    return ok


def _llamacpp_generation(current: bool, change: str = "CUDA_GRAPHS") -> Callable[[Record], bool]:
    """llama.cpp builds from a change on (validation/single.py CUDA_GRAPHS, MMQ_DEFAULT) vs the builds
    before."""
    def ok(r: Record) -> bool:
        from . import single as speed

        return speed.llamacpp_old_build(r, getattr(speed, change)) is not current
    return ok


def _dense(r: Record) -> bool:
    """Records of a dense model. A single-stream decode of an MoE model leaves, per layer, the dense layer's
    fixed time and the MoE layer's own (router, top-k, token permutation, grouped-GEMM launches:
    moe_overhead_us_per_layer, fitted on those records with the dense time in place), so only dense models
    measure the dense time alone."""
    from ..catalog.models import default_models

    m = default_models().find(str(r.get("model", "")))
    return m is not None and not m.is_moe


def _speed_module() -> Any:
    """validation/single.py, imported when a record is first sorted (it imports this module's table)."""
    from . import single as speed

    return speed


def _setup_is(test: Callable[[Any], bool], want: bool,
              only: Callable[[Any], bool] | None = None) -> Callable[[Record], bool]:
    """Records whose setup (validation/single.py record_setup) passes `test` (want) or fails it (not want);
    with `only`, a record whose setup fails `only` is in neither. A record that does not score is counted
    with the records of the common case (not want)."""
    def ok(r: Record) -> bool:
        from ..errors import CardfitError
        from .single import record_setup

        try:
            s = record_setup(r)
            if only is not None and not only(s):
                return False
            return test(s) is want
        except CardfitError:
            return not want
    return ok


def _hbm(want: bool) -> Callable[[Record], bool]:
    """Records on a card with HBM (validation/single.py on_hbm) or without."""
    return _setup_is(lambda s: _speed_module().on_hbm(s), want)


def _low_bit(want: bool, fp32: bool = False) -> Callable[[Record], bool]:
    """Records whose weights are in a low-bit type (core/speed.py low_bit) or not; with fp32, only on cards
    with a published FP32 rate (the records that measure the unpacking cost)."""
    from ..core.speed import low_bit  # the core: no import cycle

    return _setup_is(lambda s: low_bit(s.plan.ctx.quant), want,
                     (lambda s: bool(s.plan.first.option.gpu.fp32_tflops)) if fp32 else None)


def _metal(want: bool) -> Callable[[Record], bool]:
    """Records on an Apple silicon (Metal) card or not."""
    return _setup_is(lambda s: _speed_module().on_metal(s), want)


def _non_torch(r: Record) -> float | None:
    return float(r["measured"])




def _moe_step(r: Record) -> bool:
    """Records whose time per token is a MoE model's decode step on an engine of the current generation:
    single-stream and aggregate decode, served TPOT, and served median ITL (a step that decodes alone:
    core/serving.py itl_median_s)."""
    if r["id"] in ANOMALOUS or r.get("skip") or r.get("offload"):
        return False
    step = r.get("metric") == "tpot_ms" or r.get("metric") == "itl_ms" and r.get("statistic") == "median"
    if not (r.get("kind") in ("decode", "aggregate_decode") or r.get("kind") == "serving" and step):
        return False
    from .single import EXPERT_KERNELS_FROM

    if str(r.get("date") or "9999") < EXPERT_KERNELS_FROM:
        return False
    if r.get("kind") == "aggregate_decode" and r.get("input_tokens"):
        return False  # an end-to-end throughput whose client-side gaps the source does not state (Millstone)
    if r.get("kind") == "serving" and not r.get("concurrency"):
        # a burst or an arrival rate: its steps' batch is the engine's, not a figure of the record, so
        # experts_touched (which reads the concurrency) cannot place it (GPUStack's 500-1,000-request bursts
        # counted as one sequence implied 0-3,900 us of fixed MoE time)
        return False
    from ..catalog.models import default_models

    m = default_models().find(str(r.get("model", "")))
    return m is not None and m.is_moe


# A decode step of B tokens touches 1 - (1 - k/E)^B of a layer's E routed experts (k routed per token).
# Where a record's step touches at most this share of them, its time is mostly the step's fixed costs, not
# the expert bytes: it measures the MoE layer's fixed time (moe_overhead_us_per_layer); above it, the
# expert stream (expert_efficiency). Rule of thumb: half.
EXPERT_BOUND_TOUCHED = 0.5


def experts_touched(r: Record) -> float:
    """The share of the routed experts a record's decode step touches (its concurrency, 1 for a
    single-stream decode record); 1.0 where the model is not MoE."""
    from ..catalog.models import default_models

    m = default_models().find(str(r.get("model", "")))
    if m is None or not (m.is_moe and m.experts and m.experts_active):
        return 1.0
    b = max(int(float(r.get("concurrency") or 1)), 1)
    return 1 - (1 - m.experts_active / m.experts) ** b


def _moe_fixed_step(r: Record) -> bool:
    """MoE decode-step records whose step touches few of the experts (EXPERT_BOUND_TOUCHED)."""
    return _moe_step(r) and experts_touched(r) <= EXPERT_BOUND_TOUCHED


def _moe_stream_step(r: Record) -> bool:
    """MoE decode-step records whose step touches most of the experts (EXPERT_BOUND_TOUCHED), but those of
    MXFP4 experts on a ROCm card, which stream in a kernel of their own (mxfp4_expert_efficiency_rocm)."""
    return _moe_step(r) and experts_touched(r) > EXPERT_BOUND_TOUCHED and not _mxfp4_on_rocm(r)


def _mxfp4_on_rocm(r: Record) -> bool:
    """Records of an MoE model whose MXFP4 experts a ROCm card without FP4 matrix cores unpacks inside the
    MoE kernel."""
    return _mxfp4_unpacked(r, "rocm")


def _mxfp4_rocm_stream_step(r: Record) -> bool:
    """MoE decode-step records of MXFP4 experts on a ROCm card whose step touches most of the experts."""
    return _moe_step(r) and experts_touched(r) > EXPERT_BOUND_TOUCHED and _mxfp4_on_rocm(r)


def _implied_mxfp4_rocm_efficiency(r: Record) -> float | None:
    """The share of the bandwidth MXFP4 experts stream at on a ROCm card that a record implies
    (_implied_expert_efficiency of mxfp4_expert_efficiency_rocm)."""
    return _implied_expert_efficiency(r, "mxfp4_expert_efficiency_rocm")


def _implied_moe_overhead(r: Record) -> float | None:
    """The fixed time per MoE layer a record implies, the rest of the model in place (at least 0: an MoE
    layer does all a dense one does): the time per token is linear in it, so a secant on two predictions,
    refined twice, solves for it."""
    y = _predicted_with(r, "moe_overhead_us_per_layer")
    if y is None:
        return None
    b = _secant(y, _measured_time(r), 0.0, 100.0)
    return max(b, 0.0) if b is not None else None


def _predicted_with(r: Record, field: str) -> Callable[[float], float] | None:
    """y(x): what the model predicts for record r with its runtime's constant `field` at x and every other
    constant as it is now: a served record's own metric, a speed record's seconds per token (the inverse of
    its tokens/s; NaN where there is none). None where the record's runtime is not in the catalog."""
    from ..catalog.runtimes import default_runtimes
    from ..core.constants import snapshot

    rt = default_runtimes().find(_rt(r))
    if rt is None:
        return None
    here, key = dict(snapshot()), f"{rt.id}.{field}"

    def y(x: float) -> float:
        with constants({**here, key: x}):
            if r["kind"] == "serving":
                from .serving import predict_serving

                return predict_serving(dict(r))[0]
            from .single import predict_speed

            v = predict_speed(dict(r))
            return 1 / v if v else float("nan")

    return y


def _measured_time(r: Record) -> float:
    """The measurement in _predicted_with's terms: a served record's metric, a speed record's seconds per
    token."""
    return float(r["measured"]) if r["kind"] == "serving" else 1 / float(r["measured"])


def _implied_expert_efficiency(r: Record, field: str = "expert_efficiency") -> float | None:
    """The expert streaming share a record implies, the rest of the model in place: the time per token is
    linear in 1 / efficiency, so two predictions (at the dense share and at half of it) solve for it.
    `field`: the constant that sets the share for this record's experts."""
    from ..catalog.runtimes import default_runtimes
    from ..core.constants import value
    from ..errors import CardfitError

    rt = default_runtimes().find(_rt(r))
    seconds = _predicted_with(r, field)
    if rt is None or seconds is None:
        return None
    dense = value(rt.id, "decode_efficiency", rt.decode_efficiency) or 1.0
    try:
        y1, y2 = seconds(dense), seconds(dense / 2)
    except CardfitError:
        return None
    measured = _measured_time(r)
    slope = (y2 - y1) / (1 / dense)  # per unit of 1 / efficiency
    if not slope > 1e-9 * abs(y1):
        return None
    x = 1 / dense + (measured - y1) / slope
    # A share of the card's bandwidth above 1 (or a time below zero) is not the experts': such a record's
    # time is off elsewhere in the model (the rest of the model in place does not hold for it), so it does
    # not measure this constant and is left out of its fit, as a time per layer below zero is clamped out of
    # _implied_moe_overhead (CloudRift's RTX 5090 sweep at 12-40 users implies shares of 1.7 to 19, and
    # at 8 users is predicted too slow with no MoE fixed time at all: docs/VALIDATION.md "The MoE fixed
    # time by kernel path")
    return 1 / x if x >= 1 else None


def _mla_v0_step(r: Record) -> bool:
    """Served TPOT and output-throughput records of an MLA + MoE model on an engine before mid-2025
    (validation/single.py mla_v0)."""
    from .single import mla_v0

    if r["id"] in ANOMALOUS or r.get("skip") or r.get("kind") != "serving":
        return False
    return r.get("metric") in ("tpot_ms", "output_tokens_per_s") and mla_v0(r)


def _implied_mla_v0_per_layer(r: Record) -> float | None:
    """The per-layer time a served record of that generation implies, the rest of the model in place: the
    time per output token is close to linear in it, so a secant on two predictions, refined twice, solves
    for it."""
    served = _predicted_with(r, "decode_overhead_us_per_layer_mla_v0")
    if served is None:
        return None
    per_token = r["metric"] == "output_tokens_per_s"  # throughput: its inverse is the time per token

    def y(per_us: float) -> float:
        v = served(per_us)
        return 1 / v if per_token else v

    target = 1 / float(r["measured"]) if per_token else float(r["measured"])
    b = _secant(y, target, 0.0, 1000.0)
    return b if b is not None and b > 0 else None


def _secant(y: Callable[[float], float], target: float, a: float, b: float) -> float | None:
    """Where y(x) = target, by the secant through y(a) and y(b) refined twice (x kept at or above a, the
    lowest meaningful value); None when y does not move or the model cannot time the record."""
    from ..errors import CardfitError

    floor = a
    try:
        ya, yb = y(a), y(b)
        for _ in range(2):
            if not abs(yb - ya) > 1e-12 * abs(ya):
                return None
            x = b + (target - yb) * (b - a) / (yb - ya)
            a, ya, b, yb = b, yb, x, y(max(x, floor))
    except CardfitError:
        return None
    return b


def _mxfp4_unpacked_ttft(r: Record) -> bool:
    """Served TTFT records of an MoE model with MXFP4 experts on a card without FP4 tensor cores, where the
    engine unpacks the expert weights inside its BF16 MoE GEMMs (services/served.py
    mxfp4_experts_unpacked). A record whose workload reuses its prompt (a shared prefix, prefix groups,
    turns, a host KV tier: validation/serving.py reuse_options) is left out: most of its prompt is found in a
    cache, so its first token times the cache and the host link, not the experts' GEMMs."""
    from .serving import reuse_options

    if r["id"] in ANOMALOUS or r.get("skip") or r.get("kind") != "serving" or r.get("metric") != "ttft_ms":
        return False
    if reuse_options(r.get("settings") or {}):
        return False
    return _mxfp4_unpacked(r)


def _mxfp4_unpacked(r: Record, stack: str = "") -> bool:
    """Records of an MoE model whose MXFP4 experts the card (of `stack`, where given) unpacks inside its MoE
    kernel (services/served.py mxfp4_experts_unpacked)."""
    from ..catalog.models import default_models
    from ..catalog.quants import default_quants
    from ..services.served import mxfp4_experts_unpacked
    from .serving import record_gpu

    g, m = record_gpu(r), default_models().find(str(r.get("model") or ""))
    q = default_quants().find(str(r.get("quant") or ""))
    return (m is not None and g is not None and (not stack or g.stack == stack)
            and mxfp4_experts_unpacked(q, m, g))


def _implied_mxfp4_expert_share(r: Record) -> float | None:
    """The share of the prompt GEMM rate the MXFP4 experts' GEMMs reach that a TTFT record implies, the rest
    of the model in place: a prompt's time is close to linear in 1 / share (the experts' FLOPs over their
    rate), so a secant in 1 / share on two predictions, refined twice, solves for it (at most 1: the share
    only slows the experts down)."""
    served = _predicted_with(r, "mxfp4_expert_prefill_share")
    if served is None:
        return None
    b = _secant(lambda inverse: served(1 / inverse), float(r["measured"]), 1.0, 4.0)
    return min(1 / b, 1.0) if b is not None and b > 0 else None


def _mla_v0_ttft(r: Record) -> bool:
    """Served TTFT records of an MLA + MoE model on an engine before mid-2025 (validation/single.py
    mla_v0)."""
    from .single import mla_v0

    if r["id"] in ANOMALOUS or r.get("skip") or r.get("kind") != "serving":
        return False
    return r.get("metric") == "ttft_ms" and mla_v0(r)


def _implied_mla_v0_prefill(r: Record) -> float | None:
    """The prefill efficiency a TTFT record of that generation implies, the rest of the model in place: the
    prefill time is close to linear in 1 / efficiency (the prompt's FLOPs over efficiency × peak), so a secant
    in 1 / efficiency on two predictions, refined twice, solves for it."""
    served = _predicted_with(r, "prefill_efficiency_mla_v0")
    if served is None:
        return None
    b = _secant(lambda inverse: served(1 / inverse), float(r["measured"]), 1.0, 10.0)
    return 1 / b if b is not None and b >= 1.0 else None


def _rocm_offline(r: Record) -> bool:
    """Offline-throughput records on a ROCm card: every request of fixed lengths queued at once, output
    tokens/s (vLLM's benchmark_throughput.py and the like). Their steps decode hundreds to thousands of
    sequences and are bound by the GEMMs, the phenomenon the engine's GEMM share on ROCm measures."""
    if r["id"] in ANOMALOUS or r.get("skip") or r.get("kind") != "serving":
        return False
    if r.get("metric") != "output_tokens_per_s" or r.get("load") != "burst" or not r.get("fixed_lengths"):
        return False
    from .serving import record_gpu

    g = record_gpu(r)
    return g is not None and g.stack == "rocm" and _gemm_bound(r, g)


# bytes a weight streams per decode step at the precision its GEMMs run in (core/speed.py precision_of)
_WEIGHT_BYTES = {"fp4": 0.5, "fp8": 1.0, "bf16": 2.0}


def _gemm_bound(r: Record, g: Any) -> bool:
    """Whether an offline record's steps are bound by their GEMMs, the premise of the GEMM share it is fitted
    to: a step of n tokens does 2·n FLOPs per weight against one read of the weight's bytes, so the GEMMs take
    longer than the reads once n reaches the roofline knee at the card's measured GEMM rate, rate × bytes per
    weight ÷ (2 × bandwidth) (Williams, Waterman & Patterson, 'Roofline: an insightful visual performance
    model for multicore architectures', CACM 52(4), 2009, https://doi.org/10.1145/1498765.1498785); on an
    MI300X at FP8, 1,160 TFLOPS × 1 byte ÷ (2 × 5.3 TB/s) = 109 tokens. A burst queues every request at
    once, so its steps hold them all: vLLM's offline latency benchmark (benchmark_latency.py, a batch of 1 to
    4 prompts in AMD's 'Performance results' tables) stays far below the knee and measures the reads, not the
    GEMMs."""
    from ..catalog.quants import default_quants
    from ..core import speed as sp

    precision = sp.precision_of(default_quants().find(str(r.get("quant") or "")), g)
    rate = (g.tflops(precision) or 0.0) * (sp.measured_gemm_share(g, precision) or 1.0) * 1e12
    if not rate or not g.bandwidth_gbps:
        return False
    knee = rate * _WEIGHT_BYTES.get(precision, 2.0) / (2 * g.bandwidth_gbps * 1e9)
    return int(r.get("requests") or 0) >= knee


def _implied_rocm_gemm_share(r: Record) -> float | None:
    """The GEMM share an offline-throughput record implies, the rest of the model in place: a GEMM-bound
    step's time is close to linear in 1 / share, so a secant in 1 / share on two predictions of the time per
    token, refined twice, solves for it. A record the full share already predicts too slow implies none
    above 1 (the share only lowers the rate)."""
    served = _predicted_with(r, "rocm_gemm_share")
    if served is None:
        return None
    b = _secant(lambda inverse: 1 / served(1 / inverse), 1 / float(r["measured"]), 1.0, 4.0)
    return min(1 / b, 1.0) if b is not None and b > 0 else None


def _v0_decode_past_graphs(r: Record) -> bool:
    """Served TPOT records of one request on a V0 engine whose decode context passes the longest one it
    replays as a graph (runtimes.toml decode_graph_max_context: vLLM max_seq_len_to_capture): every decode
    step of the run is eager, and no other request's prompt rides along."""
    from .serving import record_runtime

    if r["id"] in ANOMALOUS or r.get("skip") or r.get("kind") != "serving" or r.get("metric") != "tpot_ms":
        return False
    rt = record_runtime(r)  # at the record's release: a V0 engine's decode_graph_max_context (releases.toml)
    if rt is None or not rt.decode_graph_max_context or int(r.get("requests") or 0) != 1:
        return False
    context = int(r.get("input_tokens") or 0) + int(r.get("output_tokens") or 0) // 2
    return context > rt.decode_graph_max_context


def _implied_eager_decode(r: Record) -> float | None:
    """The per-layer time of an eager decode step a record implies, the rest of the model in place: the
    time per output token is linear in it, so a secant on two predictions solves for it."""
    from ..catalog.runtimes import default_runtimes
    from ..core.constants import snapshot
    from .serving import predict_serving

    rt = default_runtimes().find(_rt(r))
    if rt is None:
        return None
    here = dict(snapshot())

    def y(per_layer_us: float) -> float:
        with constants({**here, f"{rt.id}.decode_overhead_us_per_layer_eager_v0": per_layer_us}):
            return predict_serving(dict(r))[0]

    x = _secant(y, float(r["measured"]), 1.0, 1000.0)
    return x if x is not None and x > 1.0 else None


def _rocm_v0_chunked_prompt(r: Record) -> bool:
    """Served TTFT records of one prompt of several chunks on a V0 vLLM engine on a ROCm card with chunked
    prefill on: the prompt's attention runs chunk after chunk in the Triton prefix-prefill kernel over the
    context cached so far (validation/serving.py rocm_v0_kernels)."""
    from .serving import record_gpu, record_runtime, record_schedule

    if r["id"] in ANOMALOUS or r.get("skip") or r.get("kind") != "serving" or r.get("metric") != "ttft_ms":
        return False
    rt = record_runtime(r)
    g = record_gpu(r)
    if rt is None or g is None or g.stack != "rocm" or int(r.get("requests") or 0) != 1:
        return False
    if not (rt.v0_chunked_prefill_above and not rt.has("v1_engine")):
        return False
    budget, first = record_schedule(r, rt)
    return not first and bool(budget) and int(r.get("input_tokens") or 0) > budget


def _implied_prefix_prefill_rate(r: Record) -> float | None:
    """The attention rate (TFLOPS per card) a record's prompt implies, the rest of the model in place: the
    prompt's time is close to linear in 1 / rate (its attention FLOPs over the rate), so a secant in
    1 / rate on two predictions, refined twice, solves for it (at most 400 TFLOPS, above the cards'
    measured FlashAttention rates)."""
    from ..catalog.runtimes import default_runtimes
    from ..core.constants import snapshot
    from .serving import predict_serving

    rt = default_runtimes().find(_rt(r))
    if rt is None:
        return None
    here = dict(snapshot())

    def y(inverse: float) -> float:
        with constants({**here, f"{rt.id}.prefix_prefill_tflops_rocm_v0": 1 / inverse}):
            return predict_serving(dict(r))[0]

    b = _secant(y, float(r["measured"]), 1 / 400, 1 / 10)
    return 1 / b if b is not None and b > 1 / 400 else None


def _trt_engine_v0(r: Record) -> bool:
    """Served output-throughput records of a TensorRT engine run by TensorRT-LLM's C++ executor (a stated
    release before 1.0, or NIM before 1.15: validation/serving.py tensorrt_engine_v0), of a closed loop or a
    burst. Not a stage of open arrivals (`load = "poisson"`: MLPerf's Server and Interactive runs): a queue
    that keeps up serves what arrives, its throughput the arrival rate (flow conservation; core/serving.py
    _finish: a stable open load's output is rate x O), whatever the engine's time per sequence, so the secant
    meets the measured figure only where the capacity falls to the offered load: a bound, not a
    measurement (0.1-2 us from those runs, against 10-26 us from five of the same systems' Offline runs)."""
    from .serving import tensorrt_engine_v0

    if r["id"] in ANOMALOUS or r.get("skip") or r.get("kind") != "serving" or r.get("load") == "poisson":
        return False
    return r.get("metric") == "output_tokens_per_s" and tensorrt_engine_v0(r)


def _implied_trt_per_sequence(r: Record) -> float | None:
    """The time per sequence per step a record of that engine generation implies, the rest of the model in
    place (its batch limits, KV cache and roofline): the time per output token is close to linear in it, so
    a secant on two predictions, refined twice, solves for it."""
    served = _predicted_with(r, "decode_overhead_us_per_sequence_v0")
    if served is None:
        return None
    b = _secant(lambda per_us: 1 / served(per_us), 1 / float(r["measured"]), 0.0, 50.0)
    return b if b is not None and b > 0 else None


# Fewest sequences in flight for a served record to fit the synchronous engine loop's time per sequence: below
# it the step's fixed time (the weights, the per-layer time) hides a per-sequence term of tens of microseconds
# (rule of thumb: 32 sequences x 60 us is about 2 ms, a tenth of such a step)
SYNC_FIT_MIN_SEQUENCES = 32
SYNC_FIT_PROBE_US = 100.0  # the second point of the line _implied_sync_per_sequence draws (the first: 0)


def _sync_loop(r: Record) -> bool:
    """Served TPOT and output-throughput records of a vLLM release whose engine loop ran its CPU work between
    the GPU steps (validation/serving.py synchronous_loop: V1 before async scheduling became the default, V1
    the release's own engine: _v1_by_default) on an NVIDIA card (where it is charged), with at least
    SYNC_FIT_MIN_SEQUENCES in flight. A record whose workload reuses its prompt (a shared prefix, prefix
    groups, turns, a host KV tier: validation/serving.py reuse_options) is left out, as
    _mxfp4_unpacked_ttft leaves it out: how much of each prompt is prefilled inside the decode steps depends
    on what the cache and the host tier keep, so its step time is the reuse model's, not the loop's CPU time
    a sequence (natoscott's L40S runs, 10,000-token prompts over 100 prefixes, would take the constant from
    119 to 153 us a sequence for a gap the loop does not make: docs/VALIDATION.md, h-kvrec2)."""
    if r["id"] in ANOMALOUS or r.get("skip") or r.get("kind") != "serving":
        return False
    if r.get("metric") not in ("tpot_ms", "output_tokens_per_s"):
        return False
    from .serving import record_gpu, reuse_options, synchronous_loop

    if reuse_options(r.get("settings") or {}):
        return False

    g = record_gpu(r)
    if g is None or g.stack != "cuda" or not synchronous_loop(r) or not _v1_by_default(r):
        return False
    st = r.get("settings") or {}
    if r.get("load") == "poisson":  # a stage of arrivals: `requests` counts its length, not what is in
        return False  # flight, and its throughput is the arrival rate (_trt_engine_v0)
    in_flight = int(r.get("concurrency") or r.get("requests") or st.get("num_prompts") or 0)
    return in_flight >= SYNC_FIT_MIN_SEQUENCES


def _v1_by_default(r: Record) -> bool:
    """Whether the record's release ran V1 as its engine by default (data/releases.toml v1_engine: from 0.8),
    the releases the synchronous loop's constant describes (0.8 to 0.13), not a V1 switched on ahead of them
    ("2024-10-28 (V1)": the prototype on vLLM's main branch, VLLM_USE_V1=1)."""
    from ..catalog.releases import release
    from .single import record_runtime

    rt = record_runtime(r)
    rel = rt.release if rt is not None else None
    if rt is None or rel is None:
        return True
    if rel.number:
        return release(rt.id, ".".join(str(n) for n in rel.number)).has("v1_engine")
    return release(rt.id, None, (rel.name or str(r.get("date") or "")).split()[0] or None).has("v1_engine")


def _implied_sync_per_sequence(r: Record) -> float | None:
    """The time per sequence per step of the synchronous engine loop a record implies, the rest of the model
    in place (its KV pool, chunked prompts, roofline): TPOT and the time per output token are close to linear
    in it (each decode step gains B x the value), so the line through two predictions, at 0 and 100 us,
    solves for it (negative where the model without it is already too slow). Two predictions, not the
    refined secant of the other fits: these records step bursts of up to 1,000 requests, and every
    leave-one-source-out fold that moves a vLLM constant times them again."""
    from ..catalog.runtimes import default_runtimes
    from ..core.constants import snapshot
    from ..errors import CardfitError
    from .serving import predict_serving

    rt = default_runtimes().find(_rt(r))
    if rt is None:
        return None
    here = dict(snapshot())
    tpot = r.get("metric") == "tpot_ms"

    def y(per_us: float) -> float:
        with constants({**here, f"{rt.id}.decode_overhead_us_per_sequence_sync": per_us}):
            p = predict_serving(dict(r))[0]
        return p if tpot else 1 / p

    target = float(r["measured"]) if tpot else 1 / float(r["measured"])
    try:
        y0, y1 = y(0.0), y(SYNC_FIT_PROBE_US)
    except CardfitError:
        return None
    if not abs(y1 - y0) > 1e-12 * abs(y0):
        return None
    return (target - y0) * SYNC_FIT_PROBE_US / (y1 - y0)


def _overhead(r: Record) -> bool:
    return r.get("kind") == "overhead" and not r.get("skip")


FITS: tuple[Fit, ...] = (
    Fit(LlamaCpp, "decode_overhead_us_per_layer",
        _both(_both(_is("decode"), _llamacpp_generation(True)), _low_bit(False)),
        _speed("implied_overhead_us_per_layer"), 1, LlamaCppLike,
        "single-stream decode time left per layer after the bytes are streamed at decode_efficiency, "
        "builds from May 2024 on (CUDA graphs)"),
    Fit(LlamaCpp, "decode_overhead_us_per_layer_v0",
        _both(_both(_both(_is("decode"), _llamacpp_generation(False)), _hbm(False)),
              _both(_low_bit(False), _metal(False))),
        _speed("implied_overhead_us_per_layer"), 1, LlamaCppLike,
        "the same for llama.cpp builds before May 2024 (no CUDA graphs), cards without HBM",
        prior="decode_overhead_us_per_layer"),
    Fit(LlamaCpp, "decode_overhead_us_per_layer_metal_v0",
        _both(_both(_is("decode"), _llamacpp_generation(False)),
              _both(_low_bit(False), _metal(True))),
        _speed("implied_overhead_us_per_layer"), 1, LlamaCppLike,
        "the same on Apple's Metal backend (every kernel encoded on the CPU)",
        prior="decode_overhead_us_per_layer_v0"),
    Fit(LlamaCpp, "decode_bytes_per_sm_cycle_hbm_v0",
        _both(_both(_is("decode"), _llamacpp_generation(False)), _both(_hbm(True), _low_bit(False))),
        _speed("implied_bytes_per_sm_cycle"), 2, LlamaCppLike,
        "bytes per SM per clock cycle the single-stream decode of those builds implies on an HBM card, after "
        "their per-layer time (weights of 4 bits and up: the low-bit ones are bound by their unpacking)"),
    Fit(LlamaCpp, "dequant_ops_per_weight", _both(_is("decode"), _low_bit(True, fp32=True)),
        _speed("implied_dequant_ops_per_weight"), 1, LlamaCppLike,
        "ALU operations per low-bit weight (K-quants below 4 bits, IQ types) the single-stream decode time "
        "left after the per-layer time implies, on the card's FP32 rate"),
    Fit(LlamaCpp, "prefill_efficiency",
        _both(_is("prefill", offload=None),
              _prefill_field("prefill_efficiency", power_bound=False)),
        _speed("implied_prefill_efficiency"), 3, LlamaCppLike,
        "measured prefill of FP16 GEMMs (float weights; integer blocks converted to FP16 for cuBLAS, the "
        "conversion's bytes at memory speed first) / (FP16-accumulate TFLOPS ÷ (2 × active params + "
        "attention))"),
    Fit(LlamaCpp, "prefill_efficiency_quantized",
        _both(_is("prefill", offload=None),
              _prefill_field("prefill_efficiency_quantized", power_bound=False)),
        _speed("implied_prefill_efficiency"), 3, LlamaCppLike,
        "the same for integer-block weights in the int8 tensor-core MMQ kernels (builds from mid-2024 on), "
        "dequantization included", prior="prefill_efficiency"),
    Fit(LlamaCpp, "prefill_efficiency_metal",
        _both(_is("prefill", offload=None), _prefill_field("prefill_efficiency_metal")),
        _speed("implied_prefill_efficiency"), 3, LlamaCppLike,
        "measured prefill on Apple GPUs / (FP32 = FP16 shader-ALU TFLOPS ÷ (2 × active params + attention)): "
        "Metal's matrix kernels, float and quantized weights alike"),
    Fit(LlamaCpp, "prefill_tflops_per_watt",
        _both(_is("prefill", offload=None), _power_bound),
        _speed("implied_tflops_per_watt"), 3, LlamaCppLike,
        "dense TFLOPS reached per watt of board power, on cards whose power limit is small for their peak "
        "(the stored rate per watt below the stored efficiency)"),
    Fit(LlamaCpp, "ram_efficiency", _is("decode", offload=True),
        _speed("implied_ram_efficiency"), 2, LlamaCppLike,
        "share of the system RAM bandwidth the offloaded bytes imply"),
    Fit(Vllm, "decode_overhead_us_per_layer", _both(_is("decode"), _dense),
        _speed("implied_overhead_us_per_layer"), 1, VllmLike,
        "single-stream decode time left per layer after the bytes are streamed at decode_efficiency, dense "
        "models (an MoE layer's own fixed time is moe_overhead_us_per_layer)"),
    Fit(Vllm, "decode_overhead_us_per_sequence_sync", _sync_loop, _implied_sync_per_sequence, 1, None,
        "time per sequence per step of vLLM V1's synchronous engine loop (releases 0.8 to 0.13, no "
        "--async-scheduling), from served TPOT and output-throughput records of those releases on NVIDIA "
        "cards with at least 32 sequences in flight, the rest of the model in place"),
    # vLLM before 0.6 ran the same synchronous loop as V1 before 0.14 (schedule, prepare inputs, run, wait
    # for the sampled ids, process outputs, all between two GPU steps: vLLM blog 2024-09-05 'vLLM v0.6.0: 2.7x
    # Throughput Improvement', https://blog.vllm.ai/2024/09/05/perf-update.html, "many components (e.g.,
    # scheduler and output processor) execute in a synchronous manner that blocks GPU execution"), so a fold
    # that leaves out its one publisher (Lambda) takes V1's synchronous time per sequence, fitted on other
    # publishers (fitted above it): a floor, as the older loop also detokenized in the step and shared the
    # API server's process (the blog: "33%" of the time in the HTTP API server, "29%" scheduling)
    Fit(Vllm, "decode_overhead_us_per_sequence_v0",
        _both(_is("aggregate_decode"), _generation(False)),
        _speed("implied_overhead_us_per_sequence"), 1, None,
        "aggregate decode time left per sequence per step after the roofline and the per-layer overhead, "
        "vLLM before 0.6",
        prior="decode_overhead_us_per_sequence_sync"),
    # SGLang before 0.4 ran the loop vLLM V1 ran before 0.14: a scheduler process that forwards a batch, waits
    # for the sampled ids (ModelTpServer.forward_decode_batch: "next_token_ids = next_token_ids.tolist()"),
    # checks every request (req.check_finished) and sends the tokens to a separate detokenizer process
    # (handle_finished_requests: "# Send to detokenizer", BatchTokenIDOut), behind a separate tokenizer/HTTP
    # process (sgl-project/sglang python/sglang/srt/managers/controller/tp_worker.py @02eb87ea, 0.1-0.2);
    # the overlap scheduler of 0.4 hides exactly that work (LMSYS blog 2024-12-04 'SGLang v0.4: Zero-Overhead
    # Batch Scheduler', https://lmsys.org/blog/2024-12-04-sglang-v0-4/). Its one record is one thread
    # (sglang#938), so a fold without it takes vLLM V1's synchronous time per sequence (fitted on other
    # publishers), not vLLM 0.5's, whose loop also detokenized and shared the HTTP server's process
    Fit(SGLang, "decode_overhead_us_per_sequence_v0",
        _both(_is("aggregate_decode"), _generation(False)),
        _speed("implied_overhead_us_per_sequence"), 1, None,
        "the same for SGLang before 0.4 (no overlap scheduler)",
        prior="decode_overhead_us_per_sequence_sync", prior_on=Vllm),
    # No prior: llama-batched-bench drives llama_decode directly, one token 0 per sequence a step, no
    # scheduler, HTTP server, detokenizer or sampling (ggml-org/llama.cpp
    # tools/batched-bench/batched-bench.cpp @0a1f0179: "common_batch_add(batch, 0, pp + i, { j }, true)",
    # then llama_decode and llama_synchronize), so the time its steps leave per sequence is
    # llama_decode's own (kernels, each sequence's logits), not an engine loop's on the CPU, and no other
    # publisher measures it: a fold without ggml-org's records is the model without it (NEUTRAL), not vLLM's
    # CPU time per sequence (its prior until 2026-12: a different mechanism)
    Fit(LlamaCpp, "decode_overhead_us_per_sequence", _is("aggregate_decode"),
        _speed("implied_overhead_us_per_sequence"), 1, LlamaCppLike,
        "batched decode time left per sequence per step after the roofline and the per-layer time of a step "
        "without CUDA graphs (llama-batched-bench S_TG, B > 1)"),
    Fit(TrtLlm, "decode_overhead_us_per_sequence_v0", _trt_engine_v0, _implied_trt_per_sequence, 1, None,
        "time per sequence per step of a TensorRT engine's C++ runtime (trtllm-bench 0.15 offline "
        "throughput: Azure's AI-benchmarking-guide, NVIDIA's own 0.15.0 table; NIM 1.8.0's engines at a "
        "concurrency), after the roofline (decode GEMMs: bytes + FLOPs), the engine's batch limits and its "
        "FP8 KV cache",
        prior="decode_overhead_us_per_sequence_v0", prior_on=Vllm),
    Fit(Vllm, "prefill_efficiency", _is("prefill", offload=None),
        _speed("implied_prefill_efficiency"), 3, VllmLike,
        "measured prefill / (dense TFLOPS ÷ (2 × active params + attention))"),
    Fit(Vllm, "non_torch_bytes", _overhead, _non_torch, 0, None,
        "vLLM profiler 'non_torch_memory takes X GiB' lines"),
    Fit(Vllm, "expert_efficiency", _moe_stream_step, _implied_expert_efficiency, 3, VllmLike,
        "share of the bandwidth the routed-expert kernels stream, from MoE decode, aggregate, served TPOT "
        "and median ITL records of engines from mid-2025 on whose step touches most of the routed experts, "
        "the dense share and the rest of the model in place",
        prior="decode_efficiency"),
    Fit(Vllm, "mxfp4_expert_efficiency_rocm", _mxfp4_rocm_stream_step, _implied_mxfp4_rocm_efficiency, 3,
        None,
        "share of the bandwidth MXFP4 experts stream at in a decode step on a ROCm card without FP4 matrix "
        "cores (CDNA3: triton_kernels unpacks every weight tile in the MoE kernel's vector loop), from "
        "vLLM's served TPOT records of gpt-oss there whose step touches most of the routed experts, the rest "
        "of the model in place",
        prior="expert_efficiency"),
    Fit(Vllm, "moe_overhead_us_per_layer", _moe_fixed_step, _implied_moe_overhead, 1, VllmLike,
        "fixed time per MoE layer per decode step beyond the dense per-layer time, from MoE decode and "
        "served TPOT / median ITL records of engines from mid-2025 on whose step touches at most half the "
        "routed experts, the rest of the model in place"),
    Fit(Vllm, "mxfp4_expert_prefill_share", _mxfp4_unpacked_ttft, _implied_mxfp4_expert_share, 3, None,
        "share of the prompt GEMM rate the routed experts' GEMMs reach with MXFP4 weights on a card without "
        "FP4 tensor cores (BF16 activations, FP4 weights unpacked inside the MoE kernel), from vLLM's served "
        "TTFT records of gpt-oss on Hopper, the rest of the model in place"),
    Fit(Vllm, "prefill_efficiency_mla_v0", _mla_v0_ttft, _implied_mla_v0_prefill, 3, VllmLike,
        "share of the card's measured GEMM rate (gpus gemm_*_tflops) the prefill of an MLA + MoE model "
        "(DeepSeek-V3/R1) reached on the engines before mid-2025, from vLLM's served TTFT records of it, the "
        "rest of the model in place",
        prior="prefill_efficiency"),
    Fit(Vllm, "decode_overhead_us_per_layer_mla_v0", _mla_v0_step, _implied_mla_v0_per_layer, 1, VllmLike,
        "time per layer of a decode step of an MLA + MoE model (DeepSeek-V3/R1) on the engines before "
        "mid-2025, from vLLM's served TPOT and output-throughput records of it, the rest of the model in "
        "place",
        prior="decode_overhead_us_per_layer"),
    Fit(Vllm, "rocm_gemm_share", _rocm_offline, _implied_rocm_gemm_share, 3, VllmLike,
        "share of the card's measured GEMM rate (hipBLASLt's best, gpus gemm_*_tflops) vLLM's GEMMs reach in "
        "the steps of a served load on ROCm, from its offline-throughput records on MI300X (thousands of "
        "sequences a step: GEMM-bound), the rest of the model in place; TGI and SGLang on ROCm call the same "
        "PyTorch/hipBLASLt GEMMs and take it (TGI's own MI300X records, not fitted, test it)"),
    # One publisher (dstack): a fold without it takes the CPU dispatch time per layer of a step whose kernels
    # are launched one by one from Python, as vLLM's prompt steps past their graphs
    # (prefill_overhead_us_per_layer, 0.8 ms: aiconfigurator-core 0.12.0 sdk/backends/vllm_backend.py
    # _prefill_dispatch_overhead_ms, NVIDIA's: https://pypi.org/project/aiconfigurator-core/0.12.0/), the
    # value SGLang's and TGI's eager decode steps take (runtimes.toml decode_overhead_us_per_layer_v0), not
    # the graph step's per-layer time (NEUTRAL: no eager step)
    Fit(Vllm, "decode_overhead_us_per_layer_eager_v0", _v0_decode_past_graphs, _implied_eager_decode, 1, None,
        "per-layer time of a V0 decode step run eagerly because its context passes max_seq_len_to_capture, "
        "from vLLM V0's served TPOT records of one request past it, the rest of the model in place (today "
        "dstack's two 405B-on-MI300X CSVs: one server, two runs)",
        prior="prefill_overhead_us_per_layer"),
    Fit(Vllm, "prefix_prefill_tflops_rocm_v0", _rocm_v0_chunked_prompt, _implied_prefix_prefill_rate, 2,
        VllmLike,
        "attention rate per card of vLLM V0's Triton prefix-prefill kernel on ROCm (chunked prefill on), "
        "from its TTFT records of one prompt of several chunks on MI300X, the rest of the model in place "
        "(today dstack's two 405B-on-MI300X CSVs: one server, two runs)"),
)


def _profile_value(runtime: str, field: str) -> float:
    from ..catalog.runtimes import default_runtimes

    return float(getattr(default_runtimes().get(runtime), field))


def stored() -> Constants:
    """The values data/runtimes.toml holds for every fitted constant (and its copies)."""
    from ..catalog.runtimes import default_runtimes

    rts = default_runtimes()
    out: Constants = {}
    for f in FITS:
        for rt in (f.runtime, *f.copies):
            profile = rts.find(rt)
            if profile is not None:
                out[f"{rt}.{f.field}"] = float(getattr(profile, f.field))
    return out


# ---------------------------------------------------------------- fitting


def fit(records: tuple[Record, ...], leave_out: str | None = None) -> Constants:
    """Every constant of FITS in order: the median over publishers of what its records imply (the records of
    `leave_out` excluded), each later fit using the earlier refit values."""
    values = stored()
    borrowed = []
    for f in FITS:
        if _borrow(f, values):
            borrowed.append(f.prior_key)
        _fit_one(f, records, leave_out, values)
    for k in borrowed:
        del values[k]
    return values


def _borrow(f: Fit, values: Constants) -> bool:
    """Put f's prior in `values` where no row of FITS fits it (a stored constant: vllm.decode_efficiency);
    whether it was put there (fit() takes it out again at the end)."""
    if not f.prior or f.prior_key in values:
        return False
    rt, field = f.prior_key.split(".", 1)
    values[f.prior_key] = _profile_value(rt, field)
    return True


def _fit_one(f: Fit, records: tuple[Record, ...], leave_out: str | None, values: Constants) -> None:
    """Refit one row of FITS into `values`, the constants as the rows before it left them: the median over
    publishers of the median each one's records imply (those of `leave_out` excluded). One voice per
    publisher: a median over records lets the publisher with the most records set the constant alone
    (GPUStack's vLLM 0.11 bursts are 70 of the 75 records an MoE layer's time is fitted on), and a publisher
    measures its own harness as much as the engine."""
    by_publisher: dict[str, list[float]] = {}
    for r, src in _chosen(records, f):
        if leave_out is None or src != leave_out:
            if (v := _implied(f, r, values)) is not None:
                by_publisher.setdefault(src, []).append(v)
    implied = [statistics.median(vs) for vs in by_publisher.values()]
    if not implied:
        if f.prior and f.prior_key in values:  # no record left: the earlier fitted constant, not ours
            for rt in (f.runtime, *f.copies):
                values[f"{rt}.{f.field}"] = values[f.prior_key]
        elif leave_out is not None and _chosen(records, f):  # every record of it left out: the model
            for rt in (f.runtime, *f.copies):  # without the effect (0: "not calibrated", NEUTRAL)
                values[f"{rt}.{f.field}"] = NEUTRAL
        return  # no record at all: the stored value stands (as for a runtime without records)
    v = round(statistics.median(implied), f.digits)
    for rt in (f.runtime, *f.copies):
        values[f"{rt}.{f.field}"] = v


class Refit(Mapping[str, float]):
    """fit(records, leave_out), each row of FITS refitted only when a constant it sets is first read: a
    leave-one-source-out fold predicts its source's records, which read their own runtime's constants
    (llama.cpp's records never the vLLM family's, vLLM's never TensorRT-LLM's time per sequence), so a fold
    refits the rows that set those and the rows these depend on (`_needed`), not all of them. The values
    are fit()'s: each row is refitted on the constants fit() would have in place before it (the rows before
    it that set its runtime's constants or its prior, as _implied already assumes: what a record implies
    depends on its own runtime's constants). The keys are fit()'s; iterating them refits nothing."""

    def __init__(self, records: tuple[Record, ...], leave_out: str | None) -> None:
        self._records, self._leave_out = records, leave_out
        self._stored = stored()
        self._set: dict[int, Constants] = {}  # row of FITS → the constants its refit set
        self._values: Constants = dict(self._stored)  # the stored constants, with every refit so far
        self._ready: set[str] = set()  # runtimes whose constants are all refitted

    def _before(self, i: int) -> Constants:
        """The constants fit() has in place when it reaches row i (its prior borrowed where it does so)."""
        values = dict(self._stored)
        for j in range(i):
            if j in self._set:
                _borrow(FITS[j], values)
                values.update(self._set[j])
        _borrow(FITS[i], values)
        return values

    def _ensure(self, runtime: str) -> None:
        if runtime in self._ready:
            return
        for i in _needed(runtime):
            if i not in self._set:
                f = FITS[i]
                values = self._before(i)
                with constants({}):  # as fit() runs: from the stored constants, not from this refit's
                    _fit_one(f, self._records, self._leave_out, values)
                self._set[i] = {k: values[k] for rt in (f.runtime, *f.copies)
                                if (k := f"{rt}.{f.field}") in values}
        self._values = dict(self._stored)
        for i in sorted(self._set):
            self._values.update(self._set[i])
        self._ready.add(runtime)

    def __getitem__(self, key: str) -> float:
        self._ensure(key.rpartition(".")[0])  # "llama.cpp.prefill_efficiency": the field has no dot
        return self._values[key]

    def get(self, key: str, default: Any = None) -> Any:
        self._ensure(key.rpartition(".")[0])
        return self._values.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._stored

    def __iter__(self) -> Iterator[str]:
        return iter(self._stored)

    def __len__(self) -> int:
        return len(self._stored)


@cache
def _needed(runtime: str, before: int = -1) -> tuple[int, ...]:
    """The rows of FITS (before row `before`; -1: all) whose refit a runtime's constants depend on: the rows
    that set one of them, and what those rows read (their own runtime's constants and their prior, from
    the rows before them)."""
    rows: set[int] = set()
    for i, f in enumerate(FITS[:before] if before >= 0 else FITS):
        if runtime in (f.runtime, *f.copies):
            rows |= {i, *_needed(f.runtime, i)}
            if f.prior:
                rows |= set(_needed(f.prior_key.rpartition(".")[0], i))
    return tuple(sorted(rows))


def only_measured_by(records: tuple[Record, ...], source: str) -> tuple[Fit, ...]:
    """The fitted constants that no record outside the fold `source` measures: leaving it out leaves them
    nothing to be fitted on, so its records that measure them are scored with the prior (the earlier
    constant Fit.prior names, else NEUTRAL), not with a value fitted on themselves."""
    return tuple(f for f in FITS if _chosen(records, f)
                 and all(src == source for _, src in _chosen(records, f)))


_CHOSEN: dict[tuple[int, str], tuple[tuple[Record, ...], list[tuple[Record, str]]]] = {}
_IMPLIED: dict[tuple[str, int, tuple[tuple[str, float], ...]], tuple[Record, float | None]] = {}


def _chosen(records: tuple[Record, ...], f: Fit) -> list[tuple[Record, str]]:
    """The records a constant is fitted on, with their sources (once per record set: selection does not
    depend on the constants)."""
    key = (id(records), f.key)
    hit = _CHOSEN.get(key)
    if hit is None or hit[0] is not records:
        hit = (records, [(r, fold_key(r)) for r in records if f.select(r)])
        _CHOSEN[key] = hit
    return hit[1]


def _implied(f: Fit, r: Record, values: Constants) -> float | None:
    """What record r implies for f with the runtime's current constants (remembered per those values: a
    fold that leaves out another runtime's source reuses it)."""
    mine = tuple(sorted((k, v) for k, v in values.items() if k.startswith(f"{_rt(r)}.")))
    key = (f.key, id(r), mine)
    hit = _IMPLIED.get(key)
    if hit is not None and hit[0] is r:
        return hit[1]
    with constants(values):
        v = f.implied(r)
    _IMPLIED[key] = (r, v)
    return v


def fitting_sources(records: tuple[Record, ...]) -> set[str]:
    """Folds (publishers) with at least one record that some constant is fitted on."""
    return {fold_key(r) for r in records for f in FITS if f.select(r)}


def report_rows(recs: tuple[Record, ...]) -> list[dict[str, Any]]:
    """One row per fitted constant: runtime, field, refit value, stored value, n records, n sources."""
    fitted = fit(recs)
    have = stored()
    rows = []
    for f in FITS:
        chosen = [r for r in recs if f.select(r)]
        rows.append({"constant": f.key, "fitted": fitted.get(f.key), "stored": have.get(f.key),
                     "records": len(chosen), "sources": len({source_key(r) for r in chosen}),
                     "publishers": len({fold_key(r) for r in chosen}),
                     "copies": list(f.copies), "what": f.why})
    return rows


# ---------------------------------------------------------------- every fold's refit, prebuilt

# data/snapshot/validation_folds.json, written by scripts/build_catalog.py: for each fold (publisher) that
# validate refits, the constants whose refit differs from the stored value and the rows of FITS only that
# fold measures (only_measured_by), stamped with the digest of the files they were computed from. A fold's
# refit is a function of the records, the catalogs and the code alone, and refitting is ~85% of what
# `cardfit validate` costs (a secant search per record per constant, each step re-timing a served run), so
# validate reads the file while its digest is the digest of those files now, and refits otherwise.
FOLDS_FILE = "validation_folds.json"  # in data/snapshot/
FOLDS_SCHEMA = 1
FOLDS_MAX_BYTES = 1 << 22  # the file is ~10 KB; anything near 4 MiB is not one this code wrote


@dataclass(frozen=True)
class Fold:
    """One fold's refit: the constants that differ from the stored ones, and the rows of FITS (keys) that
    no other publisher measures (its records that measure them are scored with the prior)."""

    changed: dict[str, float]
    prior: tuple[str, ...]


def _package() -> Any:
    from pathlib import Path

    return Path(__file__).resolve().parents[1]


def folds_path() -> Any:
    return _package() / "data" / "snapshot" / FOLDS_FILE


def _file_sha(path: Any) -> str:
    import hashlib

    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "missing"


def inputs_digest(modules: tuple[str, ...]) -> str:
    """SHA-256 over what a fold's refit is computed from: every data file (the snapshots aside: each is a
    copy of a TOML file counted here, data/snapshot) and the given modules (paths in the package: those
    loaded while the folds were computed; a module they did not load can change the refit only through a
    change to one they did, or to a data file naming it)."""
    root = _package()
    data = sorted(p.relative_to(root).as_posix() for p in (root / "data").rglob("*")
                  if p.is_file() and "snapshot" not in p.relative_to(root / "data").parts[:1])
    return files_digest((*data, *modules))


def files_digest(paths: tuple[str, ...]) -> str:
    """SHA-256 over these files of the package (paths in it) and their SHA-256 each ("missing" where gone)."""
    import hashlib

    root = _package()
    h = hashlib.sha256()
    for rel in sorted(set(paths)):
        h.update(f"{rel}\0{_file_sha(root / rel)}\n".encode())
    return h.hexdigest()


def loaded_modules() -> tuple[str, ...]:
    """The package's modules loaded in this process, as paths in the package."""
    import sys
    from pathlib import Path

    root = _package()
    out = set()
    for name, mod in list(sys.modules.items()):
        f = getattr(mod, "__file__", None)
        if (name == "cardfit" or name.startswith("cardfit.")) and f:
            path = Path(f).resolve()
            if path.is_relative_to(root):
                out.add(path.relative_to(root).as_posix())
    return tuple(sorted(out))


def build_folds(records: tuple[Record, ...]) -> dict[str, Any]:
    """The content of data/snapshot/validation_folds.json: every fold validate refits (a publisher some
    constant is fitted on, or typed a constant in: validate.leave_one_source_out) with fit()'s values that
    differ from the stored ones, then the digest of the modules that took and the data."""
    have = stored()
    folds = {}
    for src in sorted(fitting_sources(records) | {who for _, who, _, _, _ in TYPED_FROM}):
        values = fit(records, leave_out=src)
        folds[src] = {"changed": {k: v for k, v in sorted(values.items()) if not _same(v, have[k])},
                      "prior": sorted(f.key for f in only_measured_by(records, src))}
    modules = loaded_modules()
    return {"schema": FOLDS_SCHEMA, "generated_by": "scripts/build_catalog.py", "modules": list(modules),
            "inputs_sha256": inputs_digest(modules), "folds": folds}


def _same(a: float, b: float) -> bool:
    return type(a) is type(b) and a == b


def folds_text(content: dict[str, Any]) -> str:
    import json

    return json.dumps(content, indent=1, sort_keys=False) + "\n"


def prebuilt_folds() -> dict[str, Fold] | None:
    """The folds of data/snapshot/validation_folds.json while it was computed from the files as they are
    now; None (refit them) where it is missing, of another schema, malformed or stale."""
    import json

    path = folds_path()
    try:
        with open(path, "rb") as f:
            raw = f.read(FOLDS_MAX_BYTES + 1)
        content = json.loads(raw) if len(raw) <= FOLDS_MAX_BYTES else None
    except (OSError, ValueError):
        return None
    folds = _parse_folds(content)
    if folds is None or inputs_digest(tuple(content["modules"])) != content["inputs_sha256"]:
        return None
    return folds


def _parse_folds(content: Any) -> dict[str, Fold] | None:
    """The folds of the file's parsed JSON, each value checked for its type; None where one is not as
    build_folds writes it."""
    if not isinstance(content, dict) or content.get("schema") != FOLDS_SCHEMA:
        return None
    modules, digest, folds = content.get("modules"), content.get("inputs_sha256"), content.get("folds")
    if not (isinstance(modules, list) and all(isinstance(m, str) and ".." not in m for m in modules)
            and isinstance(digest, str) and isinstance(folds, dict)):
        return None
    have, rows = stored(), {f.key for f in FITS}
    out = {}
    for src, fold in folds.items():
        changed, prior = (fold.get("changed"), fold.get("prior")) if isinstance(fold, dict) else (None, None)
        if not (isinstance(changed, dict) and isinstance(prior, list)
                and all(k in have and type(v) is float for k, v in changed.items())
                and all(k in rows for k in prior)):
            return None
        out[src] = Fold(dict(changed), tuple(prior))
    return out


# ---------------------------------------------------------------- data/runtimes.toml

def _fmt(v: float, digits: int) -> str:
    return str(int(round(v))) if digits == 0 else f"{v:.{digits}f}"


def rewrite_runtimes(text: str, values: Constants, recs: tuple[Record, ...]) -> str:
    """data/runtimes.toml with every fitted constant (and copy) set to `values`, its comment naming the
    script; everything else untouched."""
    digits = {f.field: f.digits for f in FITS}
    why = {k: f for f in FITS for k in (f.key, *(f"{rt}.{f.field}" for rt in f.copies))}
    counts = {row["constant"]: row for row in report_rows(recs)}
    out, rt = [], ""
    for line in text.splitlines():
        m = re.match(r'^id = "([^"]+)"', line)
        if m:
            rt = m.group(1)
        m = re.match(r"^(\w+)(\s*=\s*)([-\d.e+]+)(.*)$", line)
        if m and f"{rt}.{m.group(1)}" in values and f"{rt}.{m.group(1)}" in why:
            f = why[f"{rt}.{m.group(1)}"]
            row = counts[f.key]
            n, k = row["records"], row["publishers"]
            note = (f"# fitted: scripts/fit_constants.py, median of {k} publishers' medians, {n} records"
                    if f.runtime == rt
                    else f"# {f.runtime}'s fit (scripts/fit_constants.py); own records scored only")
            val = _fmt(values[f"{rt}.{m.group(1)}"], digits[m.group(1)])
            line = f"{m.group(1)} = {val}".ljust(42) + " " * (len(f"{m.group(1)} = {val}") >= 42) + note
        out.append(line)
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")

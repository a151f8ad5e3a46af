"""A published single-stream or aggregate measurement (decode, prefill, aggregate decode records of
data/validation/) predicted through `cardfit speed`'s own setup: the record as the speed question a user would
ask (its model, --runtime NAME@RELEASE, quant, card, context), with the engine generation's constants."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from ..core import speed as sp
from ..errors import CardfitError
from ..runtimes.llamacpp_like import DEFAULT_UBATCH, LlamaCppLike
from ..services import served
from ..services.speed import (
    LLAMA_BENCH_PROMPT,
    Setup,
    SpeedInput,
    _stream,
    attention_tflops,
    budget,
    calibrated,
    setup,
)

_NCPUMOE = re.compile(r"--n-cpu-moe\s+(\d+)")
_OLLAMA_PS = re.compile(r"(\d+)%\s*/\s*(\d+)%\s*CPU/GPU", re.I)
_RAM = {"ddr4-3200": 51.2, "ddr5-4800": 76.8, "ddr5-5600": 89.6, "ddr5-6000": 96.0}


def _gpu_name(name: str) -> str:
    from ..catalog.gpus import default_gpus

    gpus = default_gpus()
    if gpus.find(name) is not None:
        return name
    bare = re.sub(r"\s*\d+\s*GB\b", "", name).strip()  # 'H100 80GB SXM' → 'H100 SXM'
    return bare if gpus.find(bare) is not None else name




def record_input(r: dict[str, Any]) -> SpeedInput:
    """The SpeedInput that reproduces one validation record's setup."""
    settings = r.get("settings") or {}
    offload = str(r.get("offload") or "")
    context = int(r.get("context") or 0)
    window = int(settings.get("ctx_window") or 0)
    if not window:
        window = context if offload else context + 1024  # offload records state the configured window
    filled = 0 if offload and not settings.get("ctx_window") else context
    values: dict[str, Any] = {"model": r["model"], "quant": r["quant"], "runtime": record_runtime_name(r),
                              "gpu": _gpu_name(r["gpu"]), "context": max(window, 2048), "filled": filled,
                              "allow_long_context": True,
                              "prompt": int(r.get("prompt_tokens") or LLAMA_BENCH_PROMPT)}
    if int(r.get("gpus") or 1) > 1:
        values["gpus"] = int(r["gpus"])
    if settings.get("tp"):
        values["tp"] = int(settings["tp"])
    elif "split_mode" in settings:
        values["tp"] = 1
    if settings.get("kv_cache"):
        values["kv_dtype"] = settings["kv_cache"]
    tflops = _core_scaled_tflops(values["gpu"], int(settings.get("gpu_cores") or 0))
    if tflops:
        values["tflops"] = tflops
    ram = next((v for k, v in _RAM.items() if k in offload.lower()), None)
    if ram:
        values["ram_bandwidth"] = ram
    m = _NCPUMOE.search(offload)
    if m:
        values["cpu_moe"] = int(m[1])
    elif "exps=cpu" in offload.lower() or "-cmoe" in offload:
        values["cpu_moe"] = 100_000
    if r.get("kind") in ("aggregate_decode", "serving"):
        values["concurrency"] = (int(r.get("concurrency") or 1),)
    if r.get("kind") == "aggregate_decode" and settings.get("n_ubatch"):  # llama-batched-bench states its -ub
        values["prefill_chunk"] = int(settings["n_ubatch"])
    if r.get("kind") == "aggregate_decode" and r.get("input_tokens"):  # a served load: prompts ride along
        values.update(input_tokens=int(r["input_tokens"]), output_tokens=int(r["output_tokens"]), filled=None,
                      context=max(int(r["input_tokens"]) + int(r["output_tokens"]), 2048))
    values.update(_engine_batch_defaults(r, values["context"]))
    for key in ("speculative", "num_speculative_tokens", "acceptance", "speculative_topk",
                "speculative_draft_tokens"):  # `speed --speculative` as stated
        if settings.get(key) is not None:
            values[key] = settings[key]
    return SpeedInput(**values)


def _core_scaled_tflops(gpu_name: str, cores: int) -> float | None:
    """An Apple chip measured with another GPU size than its catalog row counts: the row's rate scaled by the
    cores the record states (the clock is the chip's; the rate is per core)."""
    from ..catalog.gpus import default_gpus

    gpu = default_gpus().find(gpu_name) if cores else None
    if gpu is None or not gpu.gpu_cores or not gpu.fp16_tflops or cores == gpu.gpu_cores:
        return None
    return gpu.fp16_tflops * cores / gpu.gpu_cores


def record_runtime_name(r: dict[str, Any]) -> str:
    """The --runtime a user would pass for a record's engine: at the release its source states (settings
    version, vllm_version, ollama_version or build), else at the release current at its date
    (catalog/releases.py question_runtime)."""
    from ..catalog.releases import question_runtime

    st = r.get("settings") or {}
    stated = str(st.get("version") or st.get("vllm_version") or st.get("ollama_version") or st.get("build")
                 or "")
    if st.get("backend"):  # TensorRT-LLM's backend where the source names it (data/releases.toml)
        stated = f"{stated} ({st['backend']} backend)"
    if st.get("async_scheduling"):  # vLLM --async-scheduling before it was the default
        stated = f"{stated} (async-scheduling)"
    return question_runtime(str(r.get("runtime") or ""), stated.strip(), str(r.get("date") or ""))


def record_runtime(r: dict[str, Any]) -> Any:
    """The record's runtime profile at its release (record_runtime_name); None for one not in the catalog."""
    from ..catalog.runtimes import default_runtimes

    return default_runtimes().find(record_runtime_name(r))


def _engine_batch_defaults(r: dict[str, Any], context: int) -> dict[str, int]:
    """A record of an engine from before the by-card batch defaults (vLLM V0: data/releases.toml v1_engine;
    vllm/engine/arg_utils.py get_batch_defaults came with V1) states that engine's: the profile's
    max_num_seqs and one context's worth of batched tokens (`context`: max(max_model_len, 2048))."""
    from ..catalog.runtimes import default_runtimes

    base = default_runtimes().find(str(r.get("runtime") or ""))
    rt = record_runtime(r)
    if base is None or rt is None or not base.max_num_seqs_big_card or rt.has("v1_engine"):
        return {}
    return {"max_num_seqs": rt.max_num_seqs, "prefill_chunk": context}


def _forced_split(r: dict[str, Any], s: Setup) -> Setup:
    """An `ollama ps` CPU/GPU split stated in the record replaces the computed one."""
    m = _OLLAMA_PS.search(str(r.get("offload") or ""))
    if not m:
        return s
    from dataclasses import replace

    return replace(s, load=replace(s.load, cpu_weight_fraction=int(m[1]) / 100))


def record_setup(r: dict[str, Any]) -> Setup:
    """The setup of one record (cached: the plan behind it is the slow part) with the runtime's constants
    as they stand now (stored, or refit while validation scores a source out of sample)."""
    import json
    from dataclasses import replace

    seen = _BY_ID.get(id(r))
    if seen is not None and seen[0] is r and seen[1] == r:
        s = seen[2]
    else:
        s = _cached_setup(json.dumps(r, sort_keys=True, default=str))
        _BY_ID[id(r)] = (r, dict(r), s)
    if isinstance(s, CardfitError):
        raise s
    return replace(s, machine=calibrated(s.machine, s.plan.ctx.runtime, sp.is_quantized(s.plan.ctx.quant),
                                         s.plan.first.option.gpu))


def record_prefill_field(r: dict[str, Any]) -> str | None:
    """The runtimes.toml efficiency a record's prefill measures: prefill_efficiency_metal on Apple GPUs,
    prefill_efficiency for FP16 GEMMs (float weights, or integer blocks converted to FP16 for cuBLAS),
    prefill_efficiency_quantized for a runtime's quantized kernels (None: its setup cannot be built)."""
    try:
        s = record_setup(r)
    except CardfitError:
        return None
    rt, gpu = s.plan.ctx.runtime, s.plan.first.option.gpu
    if gpu.stack == "metal" and rt.prefill_efficiency_metal:
        return "prefill_efficiency_metal"
    fp16 = not sp.is_quantized(s.plan.ctx.quant) or cublas_dequantizes(r, s)
    return "prefill_efficiency" if fp16 else "prefill_efficiency_quantized"


_BY_ID: dict[int, tuple[dict[str, Any], dict[str, Any], Any]] = {}  # the same record object asked again


@cache
def _cached_setup(key: str) -> Setup | CardfitError:
    try:
        return _record_setup(key)
    except CardfitError as e:  # remembered too: validation asks again for every left-out source
        return e


def _record_setup(key: str) -> Setup:
    import json

    r = json.loads(key)
    inp = record_input(r)
    s = setup(inp)
    if inp.cpu_moe:  # experts offloaded by hand: the layers themselves stay on the GPU
        from dataclasses import replace

        frac = min(inp.cpu_moe, s.load.layers) / s.load.layers
        s = replace(s, load=replace(s.load, cpu_weight_fraction=0.0, cpu_expert_fraction=frac))
    return _forced_split(r, s)


def predict_speed(record: dict[str, Any]) -> float | None:
    """cardfit's realistic estimate for one validation record (kind decode / prefill / aggregate_decode), in
    tokens/s; None when the record's model, card or quantization is outside the catalogs."""
    try:
        return _predict(record, realistic=True)
    except CardfitError:
        return None


def predict_ceiling(record: dict[str, Any]) -> float | None:
    """The bandwidth ceiling for a decode record (no efficiency, no overhead)."""
    try:
        return _predict(record, realistic=False)
    except CardfitError:
        return None


def _predict(record: dict[str, Any], realistic: bool) -> float | None:
    kind = record.get("kind")
    s = engine_generation(record, record_setup(record))
    rt = s.plan.ctx.runtime
    if kind == "prefill":
        n = int(record.get("prompt_tokens") or LLAMA_BENCH_PROMPT)
        eff = s.machine.compute_efficiency if rt.prefill_efficiency else 0.0
        rate = sp.prefill_tokens_per_s(s.plan.ctx.model, s.tflops, eff, n, s.machine.tp, attention_tflops(s),
                                       _depth(record), _stream(s, _ubatch(record, s), n))
        extra = _unfused_attention_seconds(record, s, n) + _dequantize_seconds(record, s, n)
        return n / (n / rate + extra) if rate and extra else rate
    if not realistic:
        streams = int(record.get("concurrency") or 1) if kind == "aggregate_decode" else 1
        return sp.ceiling(s.load, s.machine) * streams
    if not rt.decode_efficiency:
        return None
    n = _running(record, s)
    if kind == "aggregate_decode" and s.request is not None and s.request.input_tokens:
        # output tokens/s of a served load (an end-to-end throughput: each stream's next request prefills
        # its prompt in the decode steps), the figure `cardfit speed --input-tokens` and deploy report
        # (the engine sizes its CUDA graphs by its own sequence cap, not by the streams or the pool:
        # services/plan.py scheduled, core/serving.py eager_s)
        from ..services.plan import scheduled

        ctx, opt = s.plan.ctx, s.plan.first.option
        r = served.replica(ctx, s.load, s.machine, s.request, opt.pp, n, budget(s),
                           scheduled(ctx, opt.gpu, n))
        return served.tokens_per_s(r, s.request, n)
    spec = served.speculation_of(s.plan.ctx, s.load, s.request) if s.request is not None else None
    if spec is not None:  # a verification step and the drafter's, over the tokens a step yields
        from ..core.speculative import per_token_s

        per_user = 1 / per_token_s(s.load, s.machine, n, spec)
        return per_user * n if kind == "aggregate_decode" else per_user
    st = sp.step(s.load, s.machine, n)
    return st.aggregate_tokens_per_s if kind == "aggregate_decode" else st.per_user_tokens_per_s


def serving_as_decode(r: dict[str, Any]) -> dict[str, Any] | None:
    """A served-load record measuring the time per output token, as the decode step it times: `concurrency`
    sequences, each holding its prompt and half its answer (None for other metrics)."""
    if r.get("kind") != "serving" or r.get("metric") != "tpot_ms" or not r.get("concurrency"):
        return None
    filled = int(r.get("input_tokens") or 0) + int(r.get("output_tokens") or 0) // 2
    return {**r, "kind": "aggregate_decode", "context": filled, "measured": int(r["concurrency"]) * 1e3 /
            float(r["measured"])}


# llama.cpp's engine generations (data/releases.toml llama.cpp): from 2024-05-08 (b3000) a decode step is
# replayed as one CUDA graph ("Introduction of CUDA Graphs to LLama.cpp",
# https://github.com/ggml-org/llama.cpp/pull/6766), which sets the per-layer time; from 2024-06-23 (b3200)
# quantized weights are prefilled by int8 tensor-core MMQ kernels instead of being dequantized for an FP16
# cuBLAS GEMM ("CUDA: use MMQ instead of cuBLAS by default", https://github.com/ggml-org/llama.cpp/pull/8075).
# A record states its build number ("build: 93bc3839 (3622)") or only its date; the older generation's
# per-layer time is runtimes.toml's decode_overhead_us_per_layer_v0; its quantized prefill is the FP16 GEMM
# after an FP16 copy of the weights (cublas_dequantizes). The features of that table:
CUDA_GRAPHS = "cuda_graphs"
MMQ_DEFAULT = "mmq"


def llamacpp_old_build(record: dict[str, Any], change: str = CUDA_GRAPHS) -> bool:
    """Whether a llama.cpp-family record ran a build without a feature of llama.cpp's release table (its
    stated build, else the build current at its date)."""
    from ..catalog.releases import parse_release, release

    build = str((record.get("settings") or {}).get("build") or "")
    stated = build if parse_release("llama.cpp", build) is not None else ""
    return not release("llama.cpp", stated, str(record.get("date") or "")).has(change)


def on_hbm(s: Setup) -> bool:
    """Whether the record's card has HBM (A100, H100 ...): llama.cpp's matrix-vector kernels of builds before
    May 2024 stream less than the bus gives (their rate scales with SMs x clock: runtimes.toml
    decode_bytes_per_sm_cycle_hbm_v0, fitted on the records)."""
    return s.plan.first.option.gpu.memory_type.upper().startswith("HBM")


def sm_cycles(gpu: Any) -> float:
    """SM-cycles per second of a card (SMs x boost clock), 0 where the catalog does not record them: what a
    kernel with a fixed number of bytes in flight per SM scales with (runtimes.toml
    decode_bytes_per_sm_cycle_hbm_v0)."""
    if not (gpu.sm_count and gpu.boost_mhz and gpu.bandwidth_gbps):
        return 0.0
    return float(gpu.sm_count) * gpu.boost_mhz * 1e6


def on_metal(s: Setup) -> bool:
    """Whether the record's card runs the Metal backend (Apple silicon): before mid-2024 llama.cpp's Metal
    backend encoded every kernel of a step into command buffers on the CPU, a per-layer time of its own
    (runtimes.toml decode_overhead_us_per_layer_metal_v0, fitted on the records)."""
    return s.plan.first.option.gpu.stack == "metal"


# Engines from mid-2025 on (vLLM V1 with its fused-MoE kernels of that generation, data/releases.toml
# mla_moe_kernels); records dated before it ran other MoE kernels, so validation/calibrate.py _moe_step fits
# expert_efficiency on the later ones only (the earlier are scored with it, never fitted on; MLA models pay
# decode_overhead_us_per_layer_mla_v0, mla_v0).
EXPERT_KERNELS_FROM = "2025-06"


def mla_v0(record: dict[str, Any]) -> bool:
    """Whether a record ran an MLA + MoE model (DeepSeek-V2/V3/R1) on an engine release without
    data/releases.toml's mla_moe_kernels (mid-2025): MLA decode kernels before FlashMLA and the fused-MoE
    kernels before DeepGEMM (both open-sourced by DeepSeek in February 2025, https://github.com/deepseek-ai/FlashMLA,
    https://github.com/deepseek-ai/DeepGEMM, and taken up by the engines in the months after) ran a decode
    step far from the bandwidth, a time per layer of their own (runtimes.toml
    decode_overhead_us_per_layer_mla_v0), and a prefill at a small share of the dense peak
    (prefill_efficiency_mla_v0)."""
    from ..catalog.models import default_models

    rt = record_runtime(record)
    if rt is None or rt.has("mla_moe_kernels"):
        return False
    m = default_models().find(str(record.get("model", "")))
    return m is not None and m.attention == "mla" and m.is_moe


def engine_generation(record: dict[str, Any], s: Setup) -> Setup:
    """A record of an older engine generation pays that generation's constants: vLLM before 0.6 its
    per-sequence CPU cost (runtimes.toml decode_overhead_us_per_sequence_v0), llama.cpp builds before mid-2024
    their per-layer time (decode_overhead_us_per_layer_v0) and, for integer-block weights, the FP16 GEMM
    efficiency after the FP16 copy (_dequantize_seconds)."""
    from dataclasses import replace

    from ..core.constants import value

    rt = s.plan.ctx.runtime
    if rt.decode_overhead_us_per_layer_v0 and llamacpp_old_build(record):
        field = "decode_overhead_us_per_layer_v0"
        if rt.decode_overhead_us_per_layer_metal_v0 and on_metal(s):
            field = "decode_overhead_us_per_layer_metal_v0"
        per = value(rt.id, field, getattr(rt, field))
        s = replace(s, machine=replace(s.machine, overhead_s_per_layer=per * 1e-6))
        gpu = s.plan.first.option.gpu
        per = value(rt.id, "decode_bytes_per_sm_cycle_hbm_v0", rt.decode_bytes_per_sm_cycle_hbm_v0)
        if per and on_hbm(s) and record.get("kind") in ("decode", "aggregate_decode") and sm_cycles(gpu):
            eff = min(1.0, per * sm_cycles(gpu) / (gpu.bandwidth_gbps * 1e9))
            s = replace(s, machine=replace(s.machine, decode_efficiency=eff))
    if rt.decode_overhead_us_per_layer_mla_v0 and mla_v0(record):
        per = value(rt.id, "decode_overhead_us_per_layer_mla_v0", rt.decode_overhead_us_per_layer_mla_v0)
        # that generation's per-layer time is the whole layer's, its MoE part included
        s = replace(s, machine=replace(s.machine, overhead_s_per_layer=per * 1e-6,
                                       overhead_s_per_moe_layer=0.0))
    if cublas_dequantizes(record, s):  # the FP16 GEMM of float weights, after the FP16 copy
        eff = sp.power_capped(value(rt.id, "prefill_efficiency", rt.prefill_efficiency), s.tflops,
                              s.plan.first.option.gpu.tdp_w,
                              value(rt.id, "prefill_tflops_per_watt", rt.prefill_tflops_per_watt),
                              s.plan.first.option.gpu.gemm_share_at("bf16"))
        s = replace(s, machine=replace(s.machine, compute_efficiency=eff))
    if not rt.decode_overhead_us_per_sequence_v0 or not serial_scheduler(record, rt):
        return s
    per = value(rt.id, "decode_overhead_us_per_sequence_v0", rt.decode_overhead_us_per_sequence_v0)
    return replace(s, machine=replace(s.machine, overhead_s_per_sequence=per * 1e-6))


def serial_scheduler(record: dict[str, Any], rt: Any) -> bool:
    """Whether a record's engine (runtime `rt`) ran its scheduler between GPU steps: a release without
    data/releases.toml's overlap_scheduler (vLLM before 0.6, SGLang before 0.4), stated or of its date."""
    from ..catalog.runtimes import default_runtimes

    at = default_runtimes().find(record_runtime_name({**record, "runtime": rt.id}))
    return at is not None and not at.has("overlap_scheduler")


def _running(record: dict[str, Any], s: Setup) -> int:
    """Sequences decoding at once: the record's concurrency, capped by the KV cache that fits."""
    n = int(record.get("concurrency") or 1) if record.get("kind") in ("aggregate_decode", "serving") else 1
    most = sp.max_sequences(s.kv_budget_bytes, s.kv_bytes_per_sequence)
    return max(min(n, most), 1)


def implied_overhead_us_per_sequence(record: dict[str, Any]) -> float | None:
    """Calibration: the per-sequence time an aggregate record leaves after the memory/compute roofline
    and the per-layer overhead (data/runtimes.toml decode_overhead_us_per_sequence)."""
    from dataclasses import replace

    record = serving_as_decode(record) or record
    try:
        s = record_setup(record)
    except CardfitError:
        return None
    s = replace(s, machine=replace(s.machine, overhead_s_per_sequence=0.0))
    n = _running(record, s)
    if n < 2:
        return None
    st = sp.step(s.load, s.machine, n)
    return (n / float(record["measured"]) - st.seconds) / (n - 1) * 1e6


def implied_overhead_us_per_layer(record: dict[str, Any]) -> float | None:
    """Calibration: the per-layer time a single-stream decode record leaves after its bytes are streamed at
    the runtime's decode efficiency (see data/runtimes.toml decode_overhead_us_per_layer)."""
    try:
        s = record_setup(record)
    except CardfitError:
        return None
    st = sp.step(s.load, s.machine, 1)
    rest = 1 / float(record["measured"]) - st.roofline_s - st.link_s
    return rest / s.load.layers * 1e6


def implied_decode_efficiency(record: dict[str, Any]) -> float | None:
    """Calibration: the share of the card's bandwidth a single-stream decode record implies for its VRAM
    bytes, after the per-layer time of its engine generation."""
    from dataclasses import replace

    try:
        s = engine_generation(record, record_setup(record))
    except CardfitError:
        return None
    full = sp.step(s.load, replace(s.machine, decode_efficiency=1.0, stream_gbps=0.0), 1)
    if full.cpu_bytes:
        return None
    rest = 1 / float(record["measured"]) - full.overhead_s - full.link_s
    return full.memory_s / rest if rest > 0 else None


def implied_bytes_per_sm_cycle(record: dict[str, Any]) -> float | None:
    """Calibration: the bytes per SM-cycle a single-stream decode record on an HBM card implies (its bandwidth
    share x the bus / (SMs x boost clock); runtimes.toml decode_bytes_per_sm_cycle_hbm_v0)."""
    share = implied_decode_efficiency(record)
    if share is None:
        return None
    gpu = record_setup(record).plan.first.option.gpu
    cycles = sm_cycles(gpu)
    return share * gpu.bandwidth_gbps * 1e9 / cycles if cycles else None


def implied_dequant_ops_per_weight(record: dict[str, Any]) -> float | None:
    """Calibration: the ALU operations per low-bit weight a single-stream decode record implies, where its
    time left after the per-layer overhead exceeds what streaming its bytes takes (core/speed.py
    dequant_seconds; runtimes.toml dequant_ops_per_weight)."""
    from dataclasses import replace

    try:
        s = engine_generation(record, record_setup(record))
    except CardfitError:
        return None
    if not (s.load.low_bit_params and s.machine.fp32_tflops):
        return None
    st = sp.step(s.load, replace(s.machine, dequant_ops_per_weight=1.0), 1)
    rest = 1 / float(record["measured"]) - st.overhead_s - st.link_s - st.kv_s
    return rest / st.dequant_s if rest > 0 else None


def _unfused_attention_seconds(record: dict[str, Any], s: Setup, prompt: int) -> float:
    """The attention-score traffic of a llama.cpp prefill without flash attention (core/speed.py
    attention_score_bytes) at the card's streaming bandwidth: records that say flash_attn = false, and builds
    before mid-2024, where flash attention (llama.cpp PR #5021, 2024-04-30) was off unless asked for."""
    settings = record.get("settings") or {}
    if not isinstance(s.plan.ctx.engine, LlamaCppLike) or settings.get("flash_attn") is True:
        return 0.0
    if settings.get("flash_attn") is not False and not llamacpp_old_build(record, MMQ_DEFAULT):
        return 0.0
    ubatch = int(settings.get("n_ubatch") or DEFAULT_UBATCH)
    scores = sp.attention_score_bytes(s.plan.ctx.model, prompt, ubatch, _depth(record))
    return scores / max(s.machine.tp, 1) / s.machine.read_bytes_per_s


def _ubatch(record: dict[str, Any], s: Setup) -> int:
    """The record's ubatch: llama.cpp's n_ubatch, else the runtime's prefill chunk as the plan sets it."""
    return int((record.get("settings") or {}).get("n_ubatch") or s.plan.ctx.prefill_chunk or 512)


def _depth(record: dict[str, Any]) -> int:
    """Tokens already in the cache when the measured prompt starts (llama-bench -d: 'pp512 @ d32768')."""
    return int((record.get("settings") or {}).get("depth") or 0)


def cublas_dequantizes(record: dict[str, Any], s: Setup) -> bool:
    """Whether a llama.cpp-family record prefills integer-block weights through an FP16 copy for cuBLAS:
    builds before MMQ became the default (MMQ_DEFAULT), and Volta cards, which have FP16 but no int8 tensor
    cores (ggml-cuda mmq.cu ggml_cuda_should_use_mmq: `!fp16_mma_hardware_available(cc) || ne11 <
    MMQ_DP4A_MAX_BATCH_SIZE`)."""
    if not isinstance(s.plan.ctx.engine, LlamaCppLike) or not sp.is_quantized(s.plan.ctx.quant):
        return False
    gpu = s.plan.first.option.gpu
    if gpu.stack != "cuda":
        return False
    forced = (record.get("settings") or {}).get("gemm")  # a build with GGML_CUDA_FORCE_MMQ / FORCE_CUBLAS
    if forced in ("mmq", "cublas"):
        return forced == "cublas"
    return llamacpp_old_build(record, MMQ_DEFAULT) or (gpu.vendor == "nvidia" and gpu.arch == "volta")


def _dequantize_seconds(record: dict[str, Any], s: Setup, prompt: int) -> float:
    """The FP16 conversion of the weights a cuBLAS prefill of integer-block weights pays once per ubatch
    (core/speed.py dequantized_bytes), at the card's streaming bandwidth."""
    if not cublas_dequantizes(record, s):
        return 0.0
    ubatch = int((record.get("settings") or {}).get("n_ubatch") or DEFAULT_UBATCH)
    bw = s.machine.bandwidth_gbps * 1e9 * s.machine.decode_efficiency
    return sp.dequantized_bytes(s.load, s.plan.ctx.model, prompt, ubatch) / max(s.machine.tp, 1) / bw


# A prefill record whose time is within this factor of its ubatches' weight streaming measures bandwidth, not
# the runtime's compute share: no efficiency is fitted on it (rule of thumb).
STREAM_BOUND = 1.25


def implied_prefill_efficiency(record: dict[str, Any]) -> float | None:
    """Calibration: measured prefill ÷ what the card's dense TFLOPS allow (2 × active params + attention),
    after the attention-score traffic of a prefill without flash attention."""
    try:
        s = record_setup(record)
    except CardfitError:
        return None
    n = int(record.get("prompt_tokens") or LLAMA_BENCH_PROMPT)
    top = sp.prefill_tokens_per_s(s.plan.ctx.model, s.tflops, 1.0, n, s.machine.tp, attention_tflops(s),
                                  _depth(record))
    if not top:
        return None
    left = n / float(record["measured"]) - _unfused_attention_seconds(record, s, n) - _dequantize_seconds(
        record, s, n)
    if left <= 0 or left <= n * _stream(s, _ubatch(record, s), n) * STREAM_BOUND:
        return None  # the weights each ubatch streams take (nearly) that long: bandwidth, not compute
    return (n / top) / left


def power_bound(r: dict[str, Any]) -> bool:
    """Whether a prefill record ran on a card whose board power, at the runtime's stored rate per watt, holds
    it below the runtime's stored efficiency (core/speed.py power_capped): the records its per-watt rate is
    fitted on, and the ones its efficiency is not."""
    try:
        s = record_setup(r)
    except CardfitError:
        return False
    rt, gpu = s.plan.ctx.runtime, s.plan.first.option.gpu
    field = record_prefill_field(r)
    if not field or not s.tflops or not gpu.tdp_w or not rt.prefill_tflops_per_watt:
        return False
    return rt.prefill_tflops_per_watt * gpu.tdp_w < getattr(rt, field) * s.tflops


def implied_tflops_per_watt(record: dict[str, Any]) -> float | None:
    """Calibration: the dense TFLOPS a prefill record reached (after the attention-score traffic and the FP16
    copy) per watt of the card's board power."""
    eff = implied_prefill_efficiency(record)
    if eff is None:
        return None
    s = record_setup(record)
    tdp = s.plan.first.option.gpu.tdp_w
    return eff * s.tflops / tdp if tdp and s.tflops else None


def implied_ram_efficiency(record: dict[str, Any]) -> float | None:
    """Calibration: the share of the system RAM bandwidth the offloaded bytes of a decode record imply, after
    the VRAM part and the per-layer overhead."""
    from dataclasses import replace

    try:
        s = record_setup(record)
    except CardfitError:
        return None
    full = sp.step(s.load, replace(s.machine, ram_efficiency=1.0), 1)
    if not full.cpu_bytes:
        return None
    ram_s = full.cpu_bytes / (s.machine.ram_bandwidth_gbps * 1e9)
    vram_s = full.memory_s - ram_s
    rest = 1 / float(record["measured"]) - vram_s - full.overhead_s - full.link_s
    return ram_s / rest if rest > 0 else None

"""A published serving measurement (data/validation/serving*.toml) predicted through deploy's own timing:
the record as the deploy question a user would ask (its model, --runtime NAME@RELEASE, quant, card set and
load), timed by services/deploy.py and core/serving.py."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import replace
from functools import lru_cache
from typing import Any

from ..catalog.gpus import Gpu
from ..catalog.quants import default_quants
from ..catalog.runtimes import RuntimeProfile, default_runtimes
from ..core import fit as fitting
from ..core import serving as sv
from ..core.memory import MemorySettings
from ..errors import InputError
from ..services.deploy import (
    Candidate,
    DeployInput,
    Result,
    check,
    evaluate,
    expert_parallel_memory,
    kv_held,
    kv_pool,
    pd_pools,
    settings,
    targets,
)
from .single import record_runtime, record_runtime_name  # one owner: the record's --runtime NAME@RELEASE

SERVING_METRICS = ("ttft_ms", "tpot_ms", "itl_ms", "output_tokens_per_s", "request_throughput")


def record_input(r: dict[str, Any]) -> tuple[DeployInput, int, int]:
    """The deploy question a serving record answers: its model, runtime, quant, card and load; (input, tp,
    pp)."""
    st = r.get("settings") or {}
    cards = int(r.get("gpus") or 1)
    tp, pp = int(st.get("tp") or cards), int(st.get("pp") or 1)
    rate = r.get("request_rate")
    users = r.get("concurrency")
    if users is None and (rate in (None, "inf", float("inf"))):
        users = r.get("requests") or st.get("num_prompts")  # all prompts sent at once: that many in flight
    kw: dict[str, Any] = {"users": float(users)} if users is not None else {"requests_per_s": float(rate)}
    inp = DeployInput(model=r["model"], runtime=record_runtime_name(r), quant=r.get("quant"), gpu=(r["gpu"],),
                      input_tokens=int(r["input_tokens"]), output_tokens=int(r["output_tokens"]),
                      kv_dtype=st.get("kv_cache_dtype") or checkpoint_kv_dtype(r), **kw)
    return inp, tp, pp


def checkpoint_kv_dtype(r: dict[str, Any]) -> str | None:
    """The KV cache type a record's engine took from its checkpoint where the record states none. NVIDIA NIM's
    TensorRT-LLM FP8 profiles are engines built from NVIDIA Model Optimizer FP8 exports; ModelOpt quantizes
    the KV cache to FP8 unless told otherwise (NVIDIA/TensorRT-Model-Optimizer examples/llm_ptq/hf_ptq.py
    @05ab9484, --kv_cache_qformat default "fp8", 'default to fp8 if not provided'); TensorRT-LLM runs a
    pre-quantized checkpoint with the KV cache type it carries (docs/source/features/quantization.md,
    'Running Pre-quantized Models'). The NIM 1.8.0 tables bear it out: Llama 3.1 8B at 20,000 + 2,000 tokens
    and 250 users keeps 42 sequences decoding on one H100 (1,337.7 tokens/s at 31.6 ms ITL), about 0.9 M
    tokens in flight, which a 16-bit cache (128 KiB a token) could not hold in 80 GB."""
    version = str((r.get("settings") or {}).get("version") or "")
    if tensorrt_engine(r) and version.startswith("NIM") and str(r.get("quant") or "").lower() == "fp8":
        return "fp8"
    return None


def predict_serving(r: dict[str, Any]) -> tuple[float, str]:
    """One serving record (data/validation/serving.toml) predicted by deploy's own timing of the record's
    deployment (its card set, TP × PP, one replica), for the load the record states: `load = "closed"`
    (`requests` requests, at most `concurrency` in flight, the next sent when one ends: `vllm bench serve
    --max-concurrency`, SGLang's bench_serving) or `load = "burst"` (`requests` prompts sent at once). Raises
    InputError (a CardfitError) for what cardfit cannot set up; the caller turns it into a skip. A record of
    an older engine generation is timed with that generation's per-layer time and prefill efficiency
    (validation/single.py mla_v0), and launches every prompt step eagerly where that generation replays no
    graph for one (vLLM V0: its profile at that release, data/releases.toml v1_engine); one that ran a
    TensorRT engine without the PyTorch backend's Python dispatch and overlap scheduler (tensorrt_engine)."""
    from ..core.constants import beside, constants, value
    from .single import mla_v0

    rt = record_runtime(r)  # at its release, with the engine it states (backend, --async-scheduling)
    older: dict[str, float] = {}
    if rt is not None:
        older.update(rocm_v0_kernels(r, rt))
    if rt is not None and rt.decode_overhead_us_per_layer_mla_v0 and mla_v0(r):
        per = value(rt.id, "decode_overhead_us_per_layer_mla_v0", rt.decode_overhead_us_per_layer_mla_v0)
        older[f"{rt.id}.decode_overhead_us_per_layer"] = per
        older[f"{rt.id}.moe_overhead_us_per_layer"] = 0.0  # that generation's per-layer time: the whole layer
        if rt.prefill_efficiency_mla_v0:  # a share of what the card's own GEMMs reach, not of its peak
            share = value(rt.id, "prefill_efficiency_mla_v0", rt.prefill_efficiency_mla_v0)
            older[f"{rt.id}.prefill_efficiency"] = share * measured_gemm_share(r)
    if older:
        with constants(beside(older)):
            return _predict_serving(r)
    return _predict_serving(r)


def measured_gemm_share(r: dict[str, Any]) -> float:
    """The share of its dense peak the record's card was measured to reach in its vendor's GEMMs at the
    precision of the record's weights (Gpu.gemm_share_at: an H200 1,366 of 1,979 FP8 TFLOPS, an MI300X 1,160
    of 2,615), at FP8 where that precision was not measured on its architecture (Hopper's BF16); 1 where
    nothing was. The MLA + MoE prefill of the engines before mid-2025 (validation/single.py mla_v0) is a share
    of that rate: its kernels (Triton fused-MoE GEMMs over block-FP8 or 4-bit experts, the MLA prefill) run
    at the clock the card holds under tensor load, which on an MI300X is about 1.2 GHz of its 2.1 GHz boost
    (AMD ROCm blog 'Measuring Max-Achievable FLOPs - Part 2', data/gpus.toml), not at the datasheet's."""
    from ..core import speed as sp

    gpu = record_gpu(r)
    if gpu is None:
        return 1.0
    quant = default_quants().find(str(r.get("quant") or ""))
    return sp.measured_gemm_share(gpu, sp.precision_of(quant, gpu)) or 1.0


def record_gpu(r: dict[str, Any]) -> Gpu | None:
    """The catalog card a validation record names (None for a card not in the catalog)."""
    from ..catalog.gpus import default_gpus

    return default_gpus().find(str(r.get("gpu") or ""))


def _stack(r: dict[str, Any]) -> str:
    """The software stack of a record's card (gpus stack: "cuda", "rocm", ...); "" for a card not in the
    catalog."""
    g = record_gpu(r)
    return g.stack if g is not None else ""


def synchronous_loop(r: dict[str, Any]) -> bool:
    """Whether a record's engine ran the scheduler's CPU work between its GPU steps although a release before
    it overlapped them: vLLM V1 before async scheduling became its default (data/releases.toml
    async_scheduling, whose `reads` charge decode_overhead_us_per_sequence_sync), unless the record states
    --async-scheduling."""
    rt = record_runtime(r)  # --async-scheduling stated: the release has it (services/speed.py)
    return rt is not None and rt.has("v1_engine") and not rt.has("async_scheduling")


def rocm_v0_kernels(r: dict[str, Any], rt: RuntimeProfile) -> dict[str, float]:
    """The constants a record's engine takes from the kernels it ran, where they differ from the plan's:

    - a V0 engine (data/releases.toml v1_engine) replays a decode graph only while the batch's longest
      sequence is at most decode_graph_max_context tokens (vLLM max_seq_len_to_capture, default 8192:
      vllm/worker/model_runner.py _use_captured_graph, "max_decode_seq_len <= self.runner.
      max_seq_len_to_capture", v0.6.2-v0.6.3); past it every decode step runs eagerly, at that
      generation's eager per-layer time (decode_overhead_us_per_layer_eager_v0, fitted);
    - on ROCm, decode attention past rocm_paged_attention_max_context tokens runs the generic paged-attention
      kernel, one thread block per query head, so each rank reads its KV head once per query head of the
      group (kv_read_copies): vLLM V0's ROCm backend takes its own kernel only for "max_seq_len <= 32768"
      (vllm/attention/backends/rocm_flash_attn.py _use_rocm_custom_paged_attention, v0.6.2-v0.6.3) and
      falls back to PagedAttention.forward_decode (paged_attention_v1/v2) past it; TGI's ROCm layer has the
      same rule (server/text_generation_server/layers/attention/rocm.py paged_attention, "max_s <= 32768")
      and replays decode graphs captured at the longest sequence it serves (flash_causal_lm.py warmup:
      "max_s = max_bt * BLOCK_SIZE", then cuda_graph_warmup(bs, max_s, max_bt)), so a server started with
      max_total_tokens past the limit runs the fallback kernel for every decode of a graph-sized batch;
    - vLLM V0 on ROCm with chunked prefill on runs the attention of every prompt chunk in its Triton
      prefix-prefill kernel (PagedAttention.forward_prefix → context_attention_fwd: the ROCm flash-attention
      kernel is "not getting called when chunked prefill is enabled", and the Triton kernel is "suboptimal",
      https://github.com/vllm-project/vllm/pull/11146, which stopped turning chunked prefill on by default on
      ROCm in Dec 2024): its prompt attention runs at that kernel's rate (prefix_prefill_tflops_rocm_v0,
      fitted);
    - SGLang before mid-2025 (data/releases.toml flash_prompt_attention) ran prompt attention in its Triton
      extend-attention kernel (layers/attention/triton_ops/extend_attention.py, built on the same
      LightLLM-derived context_attention_fwd tiling as vLLM's prefix-prefill kernel) for MLA models on
      NVIDIA cards (sglang/srt/model_executor/model_runner.py: "MLA optimization is turned on. Use triton
      backend", 0.4.2-0.4.5; 0.4.6 picks FA3 on Hopper) and for every model on ROCm, where FlashInfer is
      missing (0.4.2.post4 through 0.4.6): on ROCm at the rate fitted for vLLM V0's kernel there, on Hopper at
      the rate SGLang's own Triton-vs-FlashInfer MLA run implies (runtimes.toml
      triton_mla_prefill_tflops_hopper).

    The context of a decode step is the prompt plus half the answer (the tokens in flight, as the step's
    cache reads are sized)."""
    from ..catalog.models import default_models
    from ..core.constants import fitted, value

    gpu = record_gpu(r)
    m = default_models().find(str(r.get("model") or ""))
    st = r.get("settings") or {}
    out: dict[str, float] = {}
    context = int(r.get("input_tokens") or 0) + int(r.get("output_tokens") or 0) // 2
    v0 = not rt.has("v1_engine")
    if rt.decode_graph_max_context and context > rt.decode_graph_max_context:
        eager = fitted(rt, "decode_overhead_us_per_layer_eager")
        if eager:
            out[f"{rt.id}.decode_overhead_us_per_layer"] = eager
    if not rt.has("flash_prompt_attention") and gpu is not None and m is not None:
        if gpu.stack == "rocm":
            rate = value(rt.id, "prefix_prefill_tflops_rocm_v0", rt.prefix_prefill_tflops_rocm_v0)
        elif gpu.arch == "hopper" and m.attention == "mla":
            rate = rt.triton_mla_prefill_tflops_hopper
        else:
            rate = 0.0
        if rate:
            out[f"{rt.id}.prompt_attention_tflops"] = rate
    if gpu is None or gpu.stack != "rocm" or m is None:
        return out
    limit = rt.rocm_paged_attention_max_context
    graphs = int(st.get("max_total_tokens") or 0) if rt.graph_max_batch else 0  # TGI: graphs at its longest
    if limit and max(context, graphs) > limit and m.heads and m.kv_heads:
        tp = int(st.get("tp") or r.get("gpus") or 1)
        out[f"{rt.id}.kv_read_copies"] = min(m.heads / m.kv_heads, m.heads / max(tp, 1))
    if v0 and rt.v0_chunked_prefill_above and not record_schedule(r, rt)[1]:
        rate = value(rt.id, "prefix_prefill_tflops_rocm_v0", rt.prefix_prefill_tflops_rocm_v0)
        if rate:
            out[f"{rt.id}.prompt_attention_tflops"] = rate
    return out


def tensorrt_engine(r: dict[str, Any]) -> bool:
    """Whether a TensorRT-LLM record ran a TensorRT engine (`trtllm-build`, the C++ runtime) rather than the
    PyTorch backend the catalog row describes (trtllm-serve's default from 1.0): NVIDIA NIM's TensorRT-LLM
    profiles are engines built ahead of time (NIM for LLMs docs, "Model Profiles"). An engine launches the
    whole network from C++ (no per-layer Python dispatch of a prompt step) and has no overlap scheduler."""
    rt = record_runtime(r)
    return rt is not None and not rt.has("pytorch_backend")


def tensorrt_engine_v0(r: dict[str, Any]) -> bool:
    """A TensorRT engine run by TensorRT-LLM's C++ executor (no overlap scheduler): a record of a release
    without data/releases.toml's overlap_executor (TensorRT-LLM before 1.0: the Azure AI-benchmarking-guide
    and NVIDIA's own 0.15.0 tables; NVIDIA NIM before 1.15, whose optimized TensorRT-LLM profiles are
    pre-compiled TensorRT engines). Its profile pays decode_overhead_us_per_sequence_v0 and serial GEMMs."""
    rt = record_runtime(r)
    return tensorrt_engine(r) and rt is not None and not rt.has("overlap_executor")


def _predict_serving(r: dict[str, Any]) -> tuple[float, str]:
    metric = r.get("metric")
    if metric not in SERVING_METRICS:
        raise InputError(f"no serving prediction for metric '{metric}'", field="metric")
    inp, tp, pp = record_input(r)
    st = r.get("settings") or {}
    cap = int(st.get("max_batch_size") or st.get("max_num_seqs") or 0)
    from ..core.constants import snapshot

    rt = default_runtimes().get(inp.runtime or "")
    budget, first = record_schedule(r, rt)
    if st.get("trtllm_bench_dataset") and not (cap and budget):
        cap, budget = trtllm_bench_limits(r, tp, pp)
    step = prefill_batch_tokens(r, rt, budget)
    # vLLM V0 sizes its profile run (and so its KV pool) for its own budget and schedules at most its
    # 256-sequence default, chunked prefill on or off (vllm/engine/arg_utils.py EngineArgs.max_num_seqs = 256,
    # v0.6.3); V1's default on a big card is 1,024
    v0 = not rt.has("v1_engine")
    # the TTFT, TPOT and throughput records of a run share one timing (per set of the runtime's constants, the
    # ones its prediction reads: validation refits them without each source)
    # the share of the card the record's engine was given (vLLM --gpu-memory-utilization): its KV pool
    util = float(st.get("gpu_memory_utilization") or 0.0)
    # an engine that captured its CUDA graphs after sizing its KV cache left their bytes to the pool (its
    # profile at that release has none: data/releases.toml graphs_in_budget)
    graphs = True
    if st.get("prefill_workers") and st.get("decode_workers"):
        return _predict_disaggregated(r, inp, st, snapshot(rt.id), budget)
    res, how = _timed(inp, r["gpu"], tp, pp, cap, snapshot(rt.id), budget, rt.max_num_seqs if v0 else 0, util,
                      attention_dp(st, tp), graphs, step, expert_parallel(st, tp))
    requests = int(r.get("requests") or 0)
    if r.get("load") in ("closed", "burst") and requests:
        users = int(inp.users or 1)
        replica = _paged(res.cand, rt, cap or (rt.max_num_seqs if v0 else 0))
        lockstep = rt.lockstep_rounds and not tensorrt_engine(r)
        b = _bench(replica, inp, users, requests, first, bool(r.get("fixed_lengths", True)), lockstep)
        itl = b.tpot_mean_s
        if r.get("statistic") == "median":  # the middle gap between tokens: a decode-only step, mostly
            itl = sv.itl_median_s(res.cand.replica, sv.Workload(inp.input_tokens, inp.output_tokens),
                                  min(users, res.cand.replica.max_seqs))
        value = {"ttft_ms": (b.ttft_median_s if r.get("statistic") == "median" else b.ttft_mean_s) * 1e3,
                 "tpot_ms": b.tpot_mean_s * 1e3, "itl_ms": itl * 1e3,
                 "output_tokens_per_s": b.output_tokens_per_s, "request_throughput": b.requests_per_s}[metric]
        order = "prefill-first" if first else "decode-first"
        return value, (f"{how}; {r['load']} load, {requests} requests at {users} in flight, {order} "
                       f"scheduler, {res.cand.replica.chunk_tokens:,} tokens a step")
    sv_ = res.served
    value = {"ttft_ms": sv_.ttft_mean_s * 1e3, "tpot_ms": sv_.tpot_s * 1e3, "itl_ms": sv_.tpot_s * 1e3,
             "output_tokens_per_s": res.served_tokens_per_s,
             "request_throughput": res.served_tokens_per_s / inp.output_tokens}[metric]
    if r.get("statistic") in ("p90",) and metric == "ttft_ms":
        value = sv_.ttft_s * 1e3
    return value, how


def _predict_disaggregated(r: dict[str, Any], inp: DeployInput, st: dict[str, Any],
                           constants: tuple[tuple[str, float], ...], budget: int) -> tuple[float, str]:
    """A disaggregated run (core/disagg.py): its prefill and decode workers, each timed as deploy times a
    replica of its split (attention DP with the experts EP over the worker's cards where its pool states
    groups, each group's own batch), the stated workers of each, the users of the record in a closed loop."""
    from ..core import disagg

    def worker(pool: str) -> Candidate:
        ranks, dp = int(st[f"{pool}_tp"]), int(st.get(f"{pool}_dp") or 1)
        ep = ranks if dp > 1 else 1
        res, _ = _timed(inp, r["gpu"], ranks, 1, int(st.get(f"{pool}_batch_size") or 0), constants, budget,
                        0, 0.0, dp, True, 0, ep)
        return res.cand

    pre, dec = worker("prefill"), worker("decode")
    x, y = int(st["prefill_workers"]), int(st["decode_workers"])
    res = disagg.serve(pd_pools(pre, x, dec, y), sv.Workload(inp.input_tokens, inp.output_tokens,
                                                             users=float(inp.users or 1)))
    value = {"ttft_ms": res.ttft_mean_s * 1e3, "tpot_ms": res.tpot_s * 1e3, "itl_ms": res.tpot_s * 1e3,
             "output_tokens_per_s": res.output_tokens_per_s,
             "request_throughput": res.output_tokens_per_s / inp.output_tokens}[r["metric"]]
    how = (f"disaggregated timing: {x} prefill workers of {_split(pre)} + {y} decode workers of "
           f"{_split(dec)}, {dec.gpu.name}, {dec.setting.ctx.quant.name}; closed loop of {inp.users or 1:g} "
           f"users: prefill {res.prefill_s * 1e3:,.0f} ms, KV transfer {res.transfer_s * 1e3:.1f} ms, "
           f"{res.batch:.1f} sequences decoding a worker")
    return value, how


def _split(c: Candidate) -> str:
    if c.ep > 1:
        return f"{c.cards} cards (attention DP {c.attention_dp}, EP {c.ep})"
    return f"{c.cards} cards (TP {c.tp})"


def _paged(c: Candidate, rt: RuntimeProfile, seqs: int) -> sv.Replica:
    """The candidate's replica with its KV pool stepped block by block (core/serving.py Pool) where the
    runtime preempts when the pool is full (vLLM): the sequences it schedules are its own cap (`seqs`, else
    its default on the card), not what the pool holds at the mean tokens in flight."""
    r = c.replica
    if rt.kv_preemption != "recompute" or not c.kv_tokens:
        return r
    from ..services.plan import engine_defaults

    return replace(r, kv_tokens=c.kv_tokens, kv_block=max(rt.kv_block_tokens, 1),
                   kv_seqs=seqs or engine_defaults(c.setting.ctx, c.gpu)[1], prefix_cache=rt.prefix_caching)


def trtllm_bench_limits(r: dict[str, Any], tp: int, pp: int) -> tuple[int, int]:
    """(max_batch_size, max_num_tokens) a `trtllm-bench` run chose itself (runtimes/trtllm_bench.py
    bench_engine_settings) for the dataset the record's settings name (`trtllm_bench_dataset`, "ISLxOSL":
    the one `trtllm-bench build --dataset` was given, which a harness may share between runs of other
    lengths), with FP8 weights and KV cache where the record states them."""
    from ..catalog.gpus import default_gpus
    from ..catalog.models import default_models
    from ..runtimes.trtllm_bench import bench_engine_settings

    st = r.get("settings") or {}
    m, gpu = default_models().find(r["model"]), default_gpus().find(r["gpu"])
    if m is None or gpu is None:
        raise InputError(f"no catalog model or card for '{r['model']}' on '{r['gpu']}'", field="settings")
    isl, osl = (float(x) for x in str(st["trtllm_bench_dataset"]).lower().split("x"))
    eight = {"fp8", "fp8_e4m3"}
    return bench_engine_settings(m.params, m.layers, m.kv_heads, m.head_dim, gpu.usable_bytes, tp, pp, isl,
                                 osl, weight_bytes=1.0 if str(r.get("quant")).lower() in eight else 2.0,
                                 kv_bytes=1.0 if str(st.get("kv_cache_dtype")).lower() in eight else 2.0)


def record_schedule(r: dict[str, Any], rt: RuntimeProfile) -> tuple[int, bool]:
    """(tokens a step may carry, whether waiting prompts run before the decodes) as the record's engine ran:
    the budget the record states (max_num_batched_tokens, TensorRT-LLM max_num_tokens, SGLang
    chunked_prefill_size, TGI max_batch_prefill_tokens), else the engine's default; 0 = the runtime's default
    on the card.

    vLLM's V0 engine (before 0.8, validation/validate.py _vllm_batched_tokens) schedules waiting prompts first
    with a budget of max(max_model_len, 2048) tokens, unless it turns chunked prefill on (max_model_len above
    32K), which schedules the running decodes first and fills the budget (512 tokens before 0.7, 2048 from it)
    with prompt chunks; models with MLA attention ran V0 with chunked prefill forced off (vllm/config.py,
    VllmConfig.__post_init__, v0.7.1-v0.7.3: 'MLA is enabled; forcing chunked prefill and prefix caching to
    be disabled', logged by vLLM 0.7.3 in https://github.com/vllm-project/vllm-ascend/issues/348)."""
    st = r.get("settings") or {}
    given = (st.get("max_num_batched_tokens") or st.get("max_num_tokens") or st.get("chunked_prefill_size")
             or st.get("max_batch_prefill_tokens"))
    first = rt.prefill_first
    if not rt.v0_chunked_prefill_above or not first:  # the V0 rule below is vLLM's (its row's field)
        return int(given or 0), first
    from ..catalog.models import default_models
    from ..runtimes.vllm_like import UNKNOWN_MAX_MODEL_LEN, V0_BATCHED_TOKENS, v0_batched_tokens

    m = default_models().find(r["model"])
    ctx = int(st.get("max_model_len") or (m.max_context if m is not None else 0) or UNKNOWN_MAX_MODEL_LEN)
    if m is not None and m.attention == "mla" and rt.has("v0_mla_unchunked"):
        return int(given or max(ctx, V0_BATCHED_TOKENS)), True
    budget, chunked = v0_batched_tokens(rt.has("v0_chunks_2048"), ctx, rt.v0_chunked_prefill_above)
    return int(given or budget), not chunked


def prefill_batch_tokens(r: dict[str, Any], rt: RuntimeProfile, budget: int) -> int:
    """Tokens a prompt step may carry where the record's engine capped its prefill batch below its chunk
    (SGLang --max-prefill-tokens, settings max_prefill_tokens: schedule_policy.py PrefillAdder stops adding
    prompts once their input tokens pass it, the first one excepted), else 0 (the step budget). The chunk,
    and so the memory the engine reserves for it, stays the record's or the card's default."""
    cap = int((r.get("settings") or {}).get("max_prefill_tokens") or 0)
    if not cap:
        return 0
    from ..runtimes import adapter

    gpu = record_gpu(r)
    chunk = budget or (adapter(rt).serve_batched_tokens(gpu) if gpu is not None else rt.prefill_chunk)
    return min(int(chunk), cap)


@lru_cache(maxsize=2048)
def _bench(replica: sv.Replica, inp: DeployInput, users: int, requests: int, first: bool,
           fixed: bool, lockstep: bool = False) -> sv.Benchmark:
    """The benchmark stepped on `replica`, which carries every constant its steps read (its Machine is built
    with them): a leave-one-source-out fold whose refit leaves this replica as it was reuses the run."""
    w = sv.Workload(inp.input_tokens, inp.output_tokens, users=float(users))
    runs = BENCH_RUNS.get()
    if runs is None:
        return sv.benchmark(replica, w, users, requests, first, fixed, lockstep)
    key = bench_key(replica, w, users, requests, first, fixed, lockstep)
    if key not in runs:
        runs[key] = sv.benchmark(replica, w, users, requests, first, fixed, lockstep)
    return runs[key]


def bench_key(*args: Any) -> str:
    """A benchmark run's arguments as one SHA-256: every field of its records (dataclasses.astuple: numbers,
    text, flags, nested records) by repr, which writes a float exactly."""
    import dataclasses
    import hashlib

    flat = tuple(dataclasses.astuple(a) if dataclasses.is_dataclass(a) else a for a in args)
    return hashlib.sha256(repr(flat).encode()).hexdigest()


# Benchmark runs by their inputs (bench_key), read and filled by _bench while set: validation sets the runs it
# prebuilt (validation/validate.py prebuilt_runs), the one caller that steps thousands of requests a record
BENCH_RUNS: ContextVar[dict[str, sv.Benchmark] | None] = ContextVar("cardfit_bench_runs", default=None)


def attention_dp(settings: dict[str, Any], tp: int) -> int:
    """The data-parallel attention groups a record's engine ran (core/speed.py Machine.attention_dp): its
    stated dp_size, else all tp ranks where it states SGLang's --enable-dp-attention (before SGLang PR #4390,
    2025-03-13, that flag set dp_size = tp_size: https://github.com/sgl-project/sglang/pull/4390) or
    TensorRT-LLM's enable_attention_dp; 1 otherwise."""
    if not (settings.get("enable_dp_attention") or settings.get("enable_attention_dp")):
        return 1
    return max(1, min(int(settings.get("dp_size") or tp), tp))


def expert_parallel(settings: dict[str, Any], tp: int) -> int:
    """The ranks a record's engine sharded the experts over where it ran them expert-parallel beside
    data-parallel attention (core/moe_parallel.py: moe_ep over all tp ranks, TensorRT-LLM's
    moe_expert_parallel_size with enable_attention_dp); 1 otherwise, the experts tensor-parallel as before."""
    ep = int(settings.get("moe_ep") or 1)
    return ep if ep == tp > 1 and attention_dp(settings, tp) > 1 else 1


@lru_cache(maxsize=256)
def _timed(inp: DeployInput, gpu_name: str, tp: int, pp: int, cap: int,
           constants: tuple[tuple[str, float], ...] = (), chunk_tokens: int = 0,
           engine_seqs: int = 0, utilization: float = 0.0, dp: int = 1,
           graphs: bool = True, step_tokens: int = 0, ep: int = 1) -> tuple[Result, str]:
    """One replica of the record's deployment, timed by deploy's model: memory sized on the record's cards
    with the engine's own step budget (`chunk_tokens`), sequence default (`engine_seqs`) and share of the
    card (`utilization`, vLLM's gpu_memory_utilization) where the record's engine differs from the runtime's
    current defaults (0: those); `graphs` False: its CUDA graphs were captured outside its memory budget
    (catalog/runtimes.py graphs_outside_budget), so none of the budget is set aside for them; `step_tokens`:
    the tokens a step carries where the engine caps its prompt batches below the chunk its memory was sized
    for (prefill_batch_tokens; 0: the chunk); `ep` > 1: the experts expert-parallel over the tp ranks beside
    `dp` attention groups, each group an engine of its own with the record's per-rank sequence cap and step
    budget (services/deploy.py expert_parallel_memory, _replica)."""
    from ..services.plan import build_context, engine_defaults, memory_for

    check(inp)
    rt = default_runtimes().get(inp.runtime or "")
    sets, _ = settings(inp, any_runtime=True)  # TGI is timed for its records, not offered by the search
    s = sets[0]
    if chunk_tokens or engine_seqs or utilization:
        s = replace(s, ctx=build_context(replace(s.ctx.inp, prefill_chunk=chunk_tokens or None,
                                                 max_num_seqs=engine_seqs or None,
                                                 gpu_memory_utilization=utilization or None)))
    if not graphs and s.ctx.runtime.cuda_graph_bytes:
        s = replace(s, ctx=replace(s.ctx, runtime=replace(s.ctx.runtime, cuda_graph_bytes=0)))
    ctx, m = s.ctx, s.ctx.model
    gpu = ctx.gpus.get(gpu_name)
    s = replace(s, mem=memory_for(ctx, s.mem.context, gpu))  # sized on the record's card, as the search does
    cards = tp * pp
    group = tp // dp if ep > 1 else tp  # the ranks that copy a sequence's cache
    if ep > 1:
        s = replace(s, mem=expert_parallel_memory(s, dp))
        cap *= dp  # each attention group's engine schedules up to its own cap
    opt = fitting.check(s.mem, gpu, cards, ctx.engine, ctx.rules, utilization=ctx.utilization, model=m,
                        tp=group, pp=pp)
    seqs = cap or max(int(inp.users or 0), engine_defaults(ctx, gpu)[1] if rt.paged_kv else 1)
    pooled = None
    if rt.paged_kv and opt.fits:  # the engine's own pool (point estimate): it caps the sequences in flight
        per_seq = ctx.engine.kv_bytes(m, MemorySettings(context=kv_held(inp, rt), sequences=1,
                                                        kv_dtype=s.mem.kv_dtype))
        pooled = kv_pool(s.mem, opt, cards, ctx.engine.kv_copies(m, group), rt, per_seq)
        if pooled is not None:
            seqs = max(1, min(seqs, pooled[0]))
    c = Candidate(s, gpu, cards if pp == 1 else cards // pp, pp, tp, pp, opt, seqs, None,
                  pooled[1] if pooled else 0, 0, inp, step_tokens or chunk_tokens, dp, ep)
    res = evaluate(inp, c, 1, targets(inp))
    held = f", KV pool {pooled[1]:,} tokens" if pooled else ("" if opt.fits else ", does not fit by cardfit")
    how = (f"deploy timing: {cards}x {gpu.name} TP {tp}{f' (attention DP {dp})' if dp > 1 else ''}"
           f"{f' EP {ep}' if ep > 1 else ''} PP {pp}, "
           f"{rt.id}, {ctx.quant.name}, "
           f"{res.served.batch:.1f} sequences decoding (at most {seqs}{held}), "
           f"{'stable' if res.served.stable else 'overloaded'}")
    return res, how

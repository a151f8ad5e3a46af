"""One served throughput: the output tokens/s one copy of a model makes on a card set with B sequences in
flight, from core/serving.py's continuous-batching model (every step decodes one token per sequence while the
prompts of the requests that replace finished ones ride along, chunked) on the decode step of core/speed.py.

`plan --batch B`, `speed` (each concurrency), `breakeven --model`, the web page and `deploy` all build the
replica here and ask `tokens_per_s`, so the same question gets the same figure everywhere. The load each
stream carries is a request of `input_tokens` prompt and `output_tokens` answer tokens (`--input-tokens`,
`--output-tokens`); without them plan, speed and breakeven price decoding alone, each sequence holding
half its context (a request with no prompt: the decode step `cardfit validate` scores on aggregate-decode
records)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..catalog.gpus import Gpu
from ..core import serving as sv
from ..core import speed as sp
from ..core.constants import fitted
from ..core.fit import experts_first
from ..core.kv import kv_split_ranks
from ..core.memory import Memory
from ..core.placement import NODE_HOP_LATENCY_S, NODE_LINK_GBPS

# The request deploy plans for when none is given: 1,000 prompt and 300 answer tokens (rule of thumb: the
# serving example of cardfit issue 11, the shape of a chat turn with some context).
DEFAULT_INPUT_TOKENS = 1000
DEFAULT_OUTPUT_TOKENS = 300
# A prefill chunk when the runtime row gives none: vLLM's max_num_batched_tokens default for chunked prefill
# (2,048, vllm/config.py SchedulerConfig).
DEFAULT_CHUNK_TOKENS = 2048


def workload(input_tokens: int | None, output_tokens: int | None, context: int,
             filled: int | None = None) -> sv.Workload:
    """The request each stream serves: the one given (a missing half takes deploy's default), else decoding
    alone with `filled` tokens in each sequence (default half the context)."""
    if input_tokens or output_tokens:
        return sv.Workload(input_tokens or DEFAULT_INPUT_TOKENS, output_tokens or DEFAULT_OUTPUT_TOKENS)
    f = min(context // 2 if filled is None else filled, context)
    return sv.Workload(0, 2 * f)


def in_flight(w: sv.Workload) -> int:
    """Tokens a sequence holds on average while it decodes: its prompt and half its answer."""
    return w.input_tokens + w.output_tokens // 2


def load(ctx: Any, mem: Memory, w: sv.Workload, cpu_weight_fraction: float = 0.0,
         cpu_expert_fraction: float = 0.0) -> sp.Load:
    """What one decode token costs for the plan's model, quantization and cache (ctx: plan.Context)."""
    m = ctx.model
    filled = in_flight(w)
    shares = sp.weight_shares(m, ctx.quant)
    if not cpu_expert_fraction and experts_first(ctx.runtime, m):  # llama.cpp --fit: experts leave first
        cpu_weight_fraction, cpu_expert_fraction = sp.offload_split(
            cpu_weight_fraction, mem.weights_bytes, mem.kv_cache_bytes, shares.experts)
    return sp.Load(sp.decoded_weight_bytes(m, mem, ctx.quant), shares,
                   sp.kv_read_bytes(m, mem, filled, ctx.runtime.window_cache,
                                    ctx.engine.window_read_cells(m, ctx.prefill_chunk)),
                   sp.decode_flops_per_token(m, filled),
                   m.layers, sp.hidden_size(m), cpu_weight_fraction, cpu_expert_fraction,
                   sp.low_bit_params(m, ctx.quant), kv_split_ranks(m),
                   m.experts_active if m.is_moe else 0,
                   max(m.layers - m.dense_layers, 0) if m.is_moe else 0)


def uncalibrated_sequence_cost_s() -> float:
    """A slot runtime (no paged-KV scheduler) without a calibrated cost per extra sequence in a step (no
    aggregate-throughput record) would scale its slots for free: it is charged the largest calibrated
    per-sequence cost of the engines whose CPU work runs serially with the GPU step (vLLM before 0.6),
    pessimistic, and the answer says so. llama.cpp and Ollama have their own since llama-batched-bench records
    (data/validation/aggregate.toml); the current paged engines' 0 is their value, not a missing one."""
    from ..catalog.runtimes import default_runtimes

    return max(max(r.decode_overhead_us_per_sequence, r.decode_overhead_us_per_sequence_v0)
               for r in default_runtimes()) * 1e-6


def machine(ctx: Any, gpu: Gpu, tp: int, tflops: float | None = None, *, bandwidth_gbps: float | None = None,
            ram_bandwidth_gbps: float = 0.0) -> sp.Machine:
    """One pipeline stage of `tp` cards with the runtime's calibrated constants (core/speed.py
    machine_for)."""
    from ..core.constants import value

    rt = ctx.runtime
    tf = tflops or sp.prefill_peak_tflops(gpu, ctx.quant, rt.fp16_accumulate)
    mc = sp.machine_for(rt, gpu, tp, tf, precision=sp.precision_of(ctx.quant, gpu),
                        ram_bandwidth_gbps=ram_bandwidth_gbps, bandwidth_gbps=bandwidth_gbps,
                        quantized=sp.is_quantized(ctx.quant))
    if not mc.overhead_s_per_sequence and not rt.paged_kv:
        mc = replace(mc, overhead_s_per_sequence=uncalibrated_sequence_cost_s())
    if rt.serial_gemm or value(rt.id, "serial_gemm", 0.0):
        mc = replace(mc, serial_gemm=True)
    if sp.mla_moe(ctx.model):
        cap = sp.mla_moe_prefill_share_max(gpu, mc.precision)
        if mc.compute_efficiency > cap:
            mc = replace(mc, compute_efficiency=cap)
    if mxfp4_experts_unpacked(ctx.quant, ctx.model, gpu):
        mc = replace(mc, expert_prefill_share=value(rt.id, "mxfp4_expert_prefill_share",
                                                    rt.mxfp4_expert_prefill_share))
        mc = replace(mc, expert_efficiency=expert_stream_share(rt, ctx.quant, ctx.model, gpu,
                                                                mc.expert_efficiency))
    return mc


def expert_stream_share(rt: Any, quant: Any, model: Any, gpu: Gpu, share: float) -> float:
    """The share of the bandwidth a decode step's routed-expert weights stream at: on a ROCm card whose
    MXFP4 experts are unpacked in the MoE kernel (mxfp4_experts_unpacked), that kernel's own share
    (runtimes.toml mxfp4_expert_efficiency_rocm; 0: none), else `share` (the runtime's expert_efficiency).
    The one owner for `speed`/`deploy` (machine) and the plan's every-card decode estimate."""
    from ..core.constants import value

    if gpu.stack != "rocm" or not mxfp4_experts_unpacked(quant, model, gpu):
        return share
    return value(rt.id, "mxfp4_expert_efficiency_rocm", rt.mxfp4_expert_efficiency_rocm) or share


def mxfp4_experts_unpacked(quant: Any, model: Any, gpu: Gpu) -> bool:
    """Whether the plan's routed experts hold MXFP4 weights on a card without FP4 tensor cores, where the
    engines run them as BF16 x FP4 GEMMs that unpack every weight tile inside the MoE kernel (vLLM on Hopper:
    OpenAI's triton_kernels matmul_ogs or Marlin, runtimes.toml mxfp4_expert_prefill_share; on ROCm the same
    triton_kernels backend, CDNA3 having no FP4 matrix cores: vllm/model_executor/layers/quantization/mxfp4.py
    get_mxfp4_backend, "elif current_platform.is_rocm() and has_triton_kernels(): ... return
    Mxfp4Backend.TRITON"); on a card with FP4 tensor cores they run native block-scaled kernels (Blackwell:
    FlashInfer's TensorRT-LLM MoE). The decode tokens of a step go through the same kernel (replica)."""
    return (getattr(quant, "id", "") == "mxfp4" and bool(model.is_moe) and gpu.stack in ("cuda", "rocm")
            and not gpu.tflops("fp4"))


def replica(ctx: Any, whole: sp.Load, mc: sp.Machine, w: sv.Workload, pp: int, seqs: int,
            chunk_tokens: int = 0, engine_seqs: int = 0) -> sv.Replica:
    """One copy: `pp` pipeline stages (runtimes that pipeline; a layer split runs one card at a time and is
    timed as one stage) of `mc`, scheduling at most `seqs` sequences and `chunk_tokens` tokens a step
    (default: the plan's prefill chunk). `engine_seqs`: the engine's own sequence cap where its KV pool
    holds fewer (`seqs`) than it was started with (core/serving.py Replica.engine_seqs; 0: `seqs`)."""
    stages = pp if ctx.runtime.pipeline_parallel else 1
    # the decode tokens' routed experts go through the same MoE kernel as the prompt's
    # (mxfp4_experts_unpacked): their GEMMs pay the same unpacking, charged as the FLOPs that kernel's rate
    # share adds (0 elsewhere)
    unpack = sp.expert_prefill_flops(ctx.model, mc)
    if unpack:  # (a copy only where it adds any: the every-card plan times each priced card)
        whole = replace(whole, flops_per_token=whole.flops_per_token + unpack)
    attention = sp.prefill_attention_flops(ctx.model, w.input_tokens // 2, mc) if mc.attention_dp > 1 else 0.0
    return sv.Replica(sv.stage(whole, stages), mc, sp.prefill_flops(ctx.model, w.input_tokens // 2, mc),
                      chunk_tokens or ctx.prefill_chunk or DEFAULT_CHUNK_TOKENS, max(seqs, 1), stages,
                      NODE_HOP_LATENCY_S if stages > 1 else 0.0, NODE_LINK_GBPS if stages > 1 else 0.0,
                      int(fitted(ctx.runtime, "schedule_ahead_steps")),
                      w.input_tokens, attention, burst_first_alone=ctx.runtime.burst_first_alone,
                      response_lag=int(fitted(ctx.runtime, "response_lag_steps")),
                      spec=speculation_of(ctx, whole, w),
                      engine_seqs=engine_seqs if engine_seqs > max(seqs, 1) else 0)


def speculation_of(ctx: Any, whole: sp.Load, w: sv.Workload, kv_dtype: str | None = None) -> Any:
    """The plan's --speculative as the step model times it (services/speculative.py; None: off)."""
    if getattr(ctx, "speculation", None) is None:
        return None
    from .speculative import speculation

    return speculation(ctx.speculation, ctx, whole, in_flight(w), kv_dtype or ctx.kv_dtype)


def served(r: sv.Replica, w: sv.Workload, sequences: float) -> sv.Served:
    """The replica serving `sequences` concurrent users, each sending the next request when an answer ends."""
    return sv.serve(r, closed(w, float(max(sequences, 1))))


def closed(w: sv.Workload, users: float) -> sv.Workload:
    """`w` sent by `users` concurrent users in a closed loop (no arrival rate), kept by value: the every-card
    plan serves one request on each priced card (dataclasses.replace: ~5 us a call). At most CLOSED_KEPT."""
    key = (w, users)
    hit = _CLOSED.get(key)
    if hit is None:
        hit = replace(w, users=users, requests_per_s=None)
        if len(_CLOSED) >= CLOSED_KEPT:
            _CLOSED.clear()  # one atomic step (the web app's worker threads share it and take no lock)
        _CLOSED[key] = hit
    return hit


CLOSED_KEPT = 1024  # closed-loop requests kept (~200 bytes each)
_CLOSED: dict[tuple[sv.Workload, float], sv.Workload] = {}


def tokens_per_s(r: sv.Replica, w: sv.Workload, sequences: float) -> float:
    """Output tokens/s of the replica with `sequences` users in a closed loop: the one served throughput,
    `served(...).output_tokens_per_s` (core/serving.py closed_loop: each user's cycle is its prompt's wait and
    prefill, then its answer's decode steps; tests/test_one_answer.py holds every command to it)."""
    return served(r, w, sequences).output_tokens_per_s

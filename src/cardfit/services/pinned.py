"""One deployment, pinned: `cardfit deploy --gpu CARD --runtime NAME@RELEASE --tp N [--pp M]` times that
card set (one replica) with the engine settings a user launches it with (--max-num-seqs,
--max-num-batched-tokens, --gpu-memory-utilization, --max-prefill-tokens, --attention-dp, --max-model-len,
--scheduler-recv-interval, --cuda-graph-max-bs)
and, with --requests N, the finite benchmark run a user measures it with (`vllm bench serve --num-prompts N
--max-concurrency C`, SGLang's bench_serving): its first round of C prompts sent at once. With
--prefill-workers X --decode-workers Y it pins a disaggregated deployment instead: each pool's worker timed
as such a replica of its own split, the two pools by core/disagg.py (services/deploy.py _pools_answer), and
with --requests at --users their finite run (core/disagg.py benchmark: its first wave, then the steady state).

This module holds what an engine release schedules and runs a pinned deployment with (its step budget and
scheduling order, its older kernels' constants) and the benchmark run; services/deploy.py pinned_answer
times it. That is the path `cardfit validate` scores serving records through (validation/serving.py turns a
record into this question and reads its answer), so what a pinned deploy prints is what validation scores.
What differs between releases is read from the release's profile (data/releases.toml via
catalog/releases.py), never from a record."""

from __future__ import annotations

import math
from contextvars import ContextVar
from dataclasses import replace
from functools import lru_cache
from typing import Any

from ..catalog.gpus import Gpu
from ..catalog.runtimes import RuntimeProfile
from ..core import serving as sv
from ..errors import InputError

DeployInput = Any  # services.deploy.DeployInput (deploy calls this module, never the other way)


def pins(inp: DeployInput) -> bool:
    """Whether the question pins one deployment (--tp or --pp) rather than asking deploy to search."""
    return inp.tp is not None or inp.pp is not None


def is_stage(inp: DeployInput) -> bool:
    """Whether a benchmark run (--requests) is a stage of open arrivals (--requests-per-s, core/serving.py
    open_stage) rather than a closed loop of --users."""
    return bool(inp.requests) and inp.users is None


def check_pinned(inp: DeployInput) -> None:
    """A pinned question names the one card, the one runtime and the load (deploy.check does the load)."""
    if len(inp.gpu) != 1 or not inp.runtime:
        raise InputError("--tp / --pp pin one deployment: give one --gpu and one --runtime with them",
                         field="tp", hint="e.g. --gpu 'H100 SXM' --runtime vllm --tp 2")
    if inp.requests is not None and inp.users is None and inp.requests_per_s is None:
        raise InputError("--requests times a benchmark run: give --users (closed loop) or --requests-per-s "
                         "(a stage of Poisson arrivals) with it", field="requests")
    if inp.warm_requests is not None and inp.requests is None:
        raise InputError("--warm-requests counts the prompts sent before a benchmark run: give --requests N "
                         "with it", field="warm_requests")
    tp = int(inp.tp or 1)
    if inp.attention_dp and tp % inp.attention_dp:
        raise InputError(f"--attention-dp {inp.attention_dp}: the attention groups split the {tp} "
                         f"tensor-parallel ranks, so give a divisor of --tp {tp}", field="attention_dp")
    if inp.expert_parallel and tp % inp.expert_parallel:
        raise InputError(f"--expert-parallel {inp.expert_parallel}: the experts are sharded over the "
                         f"replica's ranks, so give a divisor of --tp {tp}", field="expert_parallel")
    request = inp.input_tokens + inp.output_tokens
    if inp.max_model_len and inp.max_model_len < request:
        raise InputError(f"--max-model-len {inp.max_model_len:,} is shorter than a request "
                         f"({inp.input_tokens:,} + {inp.output_tokens:,} tokens): the engine refuses such "
                         "requests", field="max_model_len", hint=f"give --max-model-len {request:,} or more")


def length_law(inp: DeployInput, context: int) -> sv.Lengths | None:
    """How a pinned benchmark run draws its requests' lengths (core/serving.py Lengths): None where every
    request has the means (no --random-lengths, --length-distribution); a closed loop's run is stepped
    with them (core/serving.py benchmark), a stage of arrivals takes its prompts' classes for its p90 TTFT
    (services/deploy.py prompt_spread) and its means at the mean lengths; `context`: the engine's
    max_model_len (--max-model-len, else the model's context: vLLM's default; 0 unknown), which no prompt +
    answer exceeds. InputError for a law it cannot read or means it cannot draw within the caps."""
    if (inp.length_distribution or inp.max_output_tokens) and not inp.requests:
        flag = "--length-distribution" if inp.length_distribution else "--max-output-tokens"
        raise InputError(f"{flag} describes a benchmark run: give --requests N (and --users) with it",
                         field="length_distribution" if inp.length_distribution else "max_output_tokens")
    # a stage of arrivals (core/serving.py open_stage) is timed at the mean lengths, its p90 TTFT over the
    # prompts the law draws (services/deploy.py prompt_spread)
    if not (inp.random_lengths or inp.length_distribution):
        if inp.max_output_tokens:
            raise InputError("--max-output-tokens caps answers that vary in length: give --random-lengths or "
                             "--length-distribution with it", field="max_output_tokens")
        return None
    shape, ratio = parse_distribution(inp.length_distribution or "sharegpt")
    cap = int(inp.max_output_tokens or 0)
    if cap and inp.output_tokens > cap:
        raise InputError(f"--output-tokens {inp.output_tokens:,} is the answers' mean: it cannot exceed "
                         f"--max-output-tokens {cap:,}, every answer's cap", field="max_output_tokens")
    request = inp.input_tokens + max(inp.output_tokens, cap)
    if context and request > context:
        raise InputError(f"a request of {inp.input_tokens:,} prompt tokens and max_tokens "
                         f"{max(inp.output_tokens, cap):,} exceeds the context of {context:,} tokens: the "
                         "engine refuses it (vLLM: HTTP 400)",
                         field="max_output_tokens" if cap else "input_tokens",
                         hint=f"give --max-model-len {request:,} or more" if inp.max_model_len else
                         "the model's context: shorten --input-tokens or --max-output-tokens")
    return sv.Lengths(shape, ratio, cap, context)


def law_text(law: sv.Lengths) -> str:
    """How a benchmark's lengths are drawn, in words: 'lengths drawn uniform ±10 %, answers <= 128 tokens,
    prompt + answer <= 2,668'."""
    shape = f"uniform ±{law.ratio:.0%}" if law.shape == "uniform" else {
        "sharegpt": "exponential within the ShareGPT sampler's limits (assumed)",
        "exponential": "exponential (assumed)",
        "sonnet": "prompts at the mean, answers exponential (assumed)",
    }[law.shape]
    caps = (f", answers <= {law.max_output:,} tokens" if law.max_output else "") + \
        (f", prompt + answer <= {law.context:,}" if law.context else "")
    return f"lengths drawn {shape}{caps}"


def parse_distribution(text: str) -> tuple[str, float]:
    """--length-distribution: `sharegpt`, `exponential`, `sonnet` or `uniform:RATIO` (RATIO in [0, 1]) ->
    (shape, ratio); InputError naming the forms otherwise."""
    name, _, value = text.strip().lower().partition(":")
    forms = "sharegpt, exponential, uniform:RATIO (0 to 1, e.g. uniform:0.1) or sonnet"
    if name not in sv.LENGTH_SHAPES:
        raise InputError(f"--length-distribution '{text}': give {forms}", field="length_distribution")
    if name != "uniform":
        if value:
            raise InputError(f"--length-distribution '{text}': {name} takes no ratio; give {forms}",
                             field="length_distribution")
        return name, 0.0
    try:
        ratio = float(value)
    except ValueError:
        ratio = math.nan
    if not 0.0 <= ratio <= 1.0:  # NaN fails too
        raise InputError(f"--length-distribution '{text}': the uniform law's ratio is a number from 0 to 1 "
                         "(vllm bench serve --random-range-ratio)", field="length_distribution",
                         hint="e.g. uniform:0.1")
    return name, ratio


def check_pinned_model(inp: DeployInput, model: Any) -> None:
    """What a pinned question asks of its model: --expert-parallel shards a mixture-of-experts model's
    experts."""
    if inp.expert_parallel and inp.expert_parallel > 1 and not (model is not None and model.is_moe):
        name = getattr(model, "name", inp.model)
        raise InputError(f"--expert-parallel shards a mixture-of-experts model's experts; {name} has none: "
                         "leave it out", field="expert_parallel")


def _engine_flag(rt: RuntimeProfile, attribute: str, option: str, field: str, why: str) -> None:
    """An SGLang engine flag (`attribute` names it on the runtime's adapter, runtimes/sglang.py) asked of a
    runtime whose launch line has none: InputError saying what that runtime does instead."""
    from ..runtimes import adapter

    if not getattr(adapter(rt), attribute, None):
        raise InputError(f"{option} is an SGLang flag; {rt.id} {why}", field=field,
                         hint="use it with --runtime sglang")


def check_recv_interval(inp: DeployInput, rt: RuntimeProfile) -> None:
    """--scheduler-recv-interval (SGLang: RECV_INTERVAL_FLAG); InputError for another runtime."""
    if inp.scheduler_recv_interval:
        _engine_flag(rt, "RECV_INTERVAL_FLAG", "--scheduler-recv-interval", "scheduler_recv_interval",
                     "reads new requests every step")


def check_mixed_chunk(inp: DeployInput, rt: RuntimeProfile) -> None:
    """--enable-mixed-chunk (SGLang: MIXED_CHUNK_FLAG); InputError for another runtime or a disaggregated
    deployment."""
    if not inp.enable_mixed_chunk:
        return
    _engine_flag(rt, "MIXED_CHUNK_FLAG", "--enable-mixed-chunk", "enable_mixed_chunk",
                 "schedules its prompts and decodes its own way")
    if inp.prefill_workers is not None or inp.decode_workers is not None:
        raise InputError("--enable-mixed-chunk mixes prompts into decode steps; a disaggregated deployment "
                         "runs them on separate workers", field="enable_mixed_chunk",
                         hint="leave out --enable-mixed-chunk or --prefill-workers / --decode-workers")


def check_adp_balance(inp: DeployInput, rt: RuntimeProfile) -> None:
    """--attention-dp-timeout-iters is TensorRT-LLM's attention-DP balancing (attention_dp_config, written by
    runtimes/trtllm.py adp_balance) of a replica with attention data parallel and its experts
    expert-parallel; InputError for another runtime or layout."""
    if not inp.attention_dp_timeout_iters:
        return
    from ..runtimes import adapter

    if getattr(adapter(rt), "adp_balance", None) is None:
        raise InputError(f"--attention-dp-timeout-iters is TensorRT-LLM's attention_dp_config; {rt.id} has "
                         "no such setting", field="attention_dp_timeout_iters",
                         hint="use it with --runtime trtllm")
    if not (inp.attention_dp or 0) > 1 or not (inp.expert_parallel or 0) > 1:
        raise InputError("--attention-dp-timeout-iters balances the prompts over attention-DP ranks: give "
                         "--attention-dp and --expert-parallel above 1 with it",
                         field="attention_dp_timeout_iters", hint="e.g. --tp 8 --attention-dp 8 "
                         "--expert-parallel 8")


def check_graph_max_bs(inp: DeployInput, rt: RuntimeProfile) -> None:
    """--cuda-graph-max-bs is an engine setting of the runtimes whose launch line sets it (the adapter's
    `cuda_graph_cap`: SGLang's --cuda-graph-max-bs, TensorRT-LLM's cuda_graph_config) and whose decode step
    cardfit times eagerly above the cap (decode_overhead_us_per_layer_v0); InputError for another runtime."""
    if not inp.cuda_graph_max_bs:
        return
    from ..core.constants import fitted
    from ..runtimes import adapter

    if getattr(adapter(rt), "cuda_graph_cap", None) is None:
        raise InputError(f"--cuda-graph-max-bs is an SGLang and TensorRT-LLM setting; cardfit launches no "
                         f"CUDA-graph batch cap for {rt.id}", field="cuda_graph_max_bs",
                         hint="use it with --runtime sglang or trtllm")
    if not fitted(rt, "decode_overhead_us_per_layer_v0"):  # an eager decode step's time per layer
        raise InputError(f"this release of {rt.id} has no eager decode step cardfit times (TensorRT-LLM "
                         "before 1.0 ran a TensorRT engine): leave out --cuda-graph-max-bs",
                         field="cuda_graph_max_bs", hint="or use the current release")


# --- what an engine release schedules with -------------------------------------------------------------

def schedule(rt: RuntimeProfile, model: Any, given: int | None,
             max_model_len: int | None, mixed_chunk: bool = False) -> tuple[int, bool]:
    """(tokens a step may carry, whether waiting prompts run before the decodes) as the engine at its
    release runs: `given` (--max-num-batched-tokens: vLLM max_num_batched_tokens, TensorRT-LLM
    max_num_tokens, SGLang chunked_prefill_size, TGI max_batch_prefill_tokens), else the engine's default;
    0 = the runtime's default on the card.

    `mixed_chunk` (SGLang --enable-mixed-chunk, check_mixed_chunk): a prompt step carries every running
    decode and the prompts fill the budget left beside them (runtimes/sglang.py MIXED_CHUNK_FLAG), so the
    decodes no longer wait for the prompts: core/serving.py rounds' decode-first step.

    vLLM's V0 engine (before 0.8) schedules waiting prompts first with a budget of max(max_model_len, 2048)
    tokens, unless it turns chunked prefill on (max_model_len above 32K), which schedules the running decodes
    first and fills the budget (512 tokens before 0.7, 2048 from it) with prompt chunks; models with MLA
    attention ran V0 with chunked prefill forced off (vllm/config.py, VllmConfig.__post_init__, v0.7.1-v0.7.3:
    'MLA is enabled; forcing chunked prefill and prefix caching to be disabled', logged by vLLM 0.7.3 in
    https://github.com/vllm-project/vllm-ascend/issues/348). V0's max_model_len defaults to the model's
    trained context (--max-model-len when given)."""
    first = rt.prefill_first and not mixed_chunk
    if not rt.v0_chunked_prefill_above or not first:  # the V0 rule below is vLLM's (its row's field)
        return int(given or 0), first
    from ..runtimes.vllm_like import UNKNOWN_MAX_MODEL_LEN, V0_BATCHED_TOKENS, v0_batched_tokens

    ctx = int(max_model_len or (model.max_context if model is not None else 0) or UNKNOWN_MAX_MODEL_LEN)
    if model is not None and model.attention == "mla" and rt.has("v0_mla_unchunked"):
        return int(given or max(ctx, V0_BATCHED_TOKENS)), True
    budget, chunked = v0_batched_tokens(rt.has("v0_chunks_2048"), ctx, rt.v0_chunked_prefill_above)
    return int(given or budget), not chunked


def prefill_batch_tokens(inp: DeployInput, rt: RuntimeProfile, gpu: Gpu | None, budget: int) -> int:
    """Tokens a prompt step may carry where the engine caps its prefill batch below its chunk (SGLang
    --max-prefill-tokens: schedule_policy.py PrefillAdder stops adding prompts once their input tokens pass
    it, the first one excepted), else 0 (the step budget). The chunk, and so the memory the engine reserves
    for it, stays the given or the card's default."""
    cap = int(inp.max_prefill_tokens or 0)
    if not cap:
        return 0
    from ..runtimes import adapter

    chunk = budget or (adapter(rt).serve_batched_tokens(gpu) if gpu is not None else rt.prefill_chunk)
    return min(int(chunk), cap)


def measured_gemm_share(gpu: Gpu | None, quant_name: str) -> float:
    """The share of its dense peak the card was measured to reach in its vendor's GEMMs at the precision of
    the weights (Gpu.gemm_share_at: an H200 1,366 of 1,979 FP8 TFLOPS, an MI300X 1,160 of 2,615), at FP8
    where that precision was not measured on its architecture (Hopper's BF16); 1 where nothing was. The MLA +
    MoE prefill of the engines before mid-2025 (mla_v0) is a share of that rate: its kernels (Triton fused-MoE
    GEMMs over block-FP8 or 4-bit experts, the MLA prefill) run at the clock the card holds under tensor load,
    which on an MI300X is about 1.2 GHz of its 2.1 GHz boost (AMD ROCm blog 'Measuring Max-Achievable FLOPs -
    Part 2', data/gpus.toml), not at the datasheet's."""
    from ..catalog.quants import default_quants
    from ..core import speed as sp

    if gpu is None:
        return 1.0
    quant = default_quants().find(quant_name)
    return sp.measured_gemm_share(gpu, sp.precision_of(quant, gpu)) or 1.0


def mla_v0(rt: RuntimeProfile, model: Any) -> bool:
    """Whether an MLA + MoE model (DeepSeek-V2/V3/R1) runs on an engine release without data/releases.toml's
    mla_moe_kernels (mid-2025): MLA decode kernels before FlashMLA and the fused-MoE kernels before DeepGEMM
    (both open-sourced by DeepSeek in February 2025, https://github.com/deepseek-ai/FlashMLA,
    https://github.com/deepseek-ai/DeepGEMM, and taken up by the engines in the months after) ran a decode
    step far from the bandwidth, a time per layer of their own (runtimes.toml
    decode_overhead_us_per_layer_mla_v0), and a prefill at a small share of the dense peak
    (prefill_efficiency_mla_v0)."""
    return (not rt.has("mla_moe_kernels") and model is not None and model.attention == "mla"
            and bool(model.is_moe))


def older_kernels(rt: RuntimeProfile, gpu: Gpu | None, model: Any, quant_name: str, context: int, tp: int,
                  chunked: bool, max_model_len: int = 0) -> dict[str, float]:
    """The constants an engine release takes from the kernels it ran, where they differ from the current
    release's (`context`: the tokens a sequence holds as it decodes, its prompt and half its answer;
    `chunked`: its scheduler runs prompt chunks beside the decodes, schedule; `max_model_len`: the context
    the server is started with, 0 where not given):

    - an MLA + MoE model on a release before mid-2025 (mla_v0) decodes at that generation's per-layer time
      and prefills at its share of the card's measured GEMM rate;
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
      --max-total-tokens (here --max-model-len) past the limit runs the fallback kernel for every decode of a
      graph-sized batch;
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
    from ..core.constants import fitted, value

    out: dict[str, float] = {}
    if rt.decode_overhead_us_per_layer_mla_v0 and mla_v0(rt, model):
        per = value(rt.id, "decode_overhead_us_per_layer_mla_v0", rt.decode_overhead_us_per_layer_mla_v0)
        out[f"{rt.id}.decode_overhead_us_per_layer"] = per
        out[f"{rt.id}.moe_overhead_us_per_layer"] = 0.0  # that generation's per-layer time: the whole layer
        if rt.prefill_efficiency_mla_v0:  # a share of what the card's own GEMMs reach, not of its peak
            share = value(rt.id, "prefill_efficiency_mla_v0", rt.prefill_efficiency_mla_v0)
            out[f"{rt.id}.prefill_efficiency"] = share * measured_gemm_share(gpu, quant_name)
    v0 = not rt.has("v1_engine")
    if rt.decode_graph_max_context and context > rt.decode_graph_max_context:
        eager = fitted(rt, "decode_overhead_us_per_layer_eager")
        if eager:
            out[f"{rt.id}.decode_overhead_us_per_layer"] = eager
    if not rt.has("flash_prompt_attention") and gpu is not None and model is not None:
        if gpu.stack == "rocm":
            rate = value(rt.id, "prefix_prefill_tflops_rocm_v0", rt.prefix_prefill_tflops_rocm_v0)
        elif gpu.arch == "hopper" and model.attention == "mla":
            rate = rt.triton_mla_prefill_tflops_hopper
        else:
            rate = 0.0
        if rate:
            out[f"{rt.id}.prompt_attention_tflops"] = rate
    if gpu is None or gpu.stack != "rocm" or model is None:
        return out
    limit = rt.rocm_paged_attention_max_context
    graphs = int(max_model_len or 0) if rt.graph_max_batch else 0  # TGI: graphs at its longest
    if limit and max(context, graphs) > limit and model.heads and model.kv_heads:
        out[f"{rt.id}.kv_read_copies"] = min(model.heads / model.kv_heads, model.heads / max(tp, 1))
    if v0 and rt.v0_chunked_prefill_above and chunked:
        rate = value(rt.id, "prefix_prefill_tflops_rocm_v0", rt.prefix_prefill_tflops_rocm_v0)
        if rate:
            out[f"{rt.id}.prompt_attention_tflops"] = rate
    return out


def _paged(c: Any, rt: RuntimeProfile, seqs: int) -> sv.Replica:
    """The candidate's replica with its KV pool stepped block by block (core/serving.py Pool) where the
    runtime preempts when the pool is full (vLLM): the sequences it schedules are its own cap (`seqs`, the
    server's over its attention groups: deploy.py dp_total; else the one the replica was built with,
    deploy.py timed, or its default on the card), not what the pool holds at the mean tokens in flight."""
    r = c.replica
    if rt.kv_preemption != "recompute" or not c.kv_tokens:
        return r
    from ..runtimes.launch import attention_groups
    from .plan import engine_defaults

    # the attention groups the line runs, each a scheduler of its own (runtimes/launch.py attention_groups,
    # as deploy.py launched_dp reads it)
    groups = attention_groups(c.setting.ctx.engine, c.attention_dp, c.ep)
    own = seqs or engine_defaults(c.setting.ctx, c.gpu)[1] * groups
    return replace(r, kv_tokens=c.kv_tokens, kv_block=max(rt.kv_block_tokens, 1),
                   engine_seqs=r.engine_seqs or own, prefix_cache=rt.prefix_caching)


@lru_cache(maxsize=2048)
def bench_run(replica: sv.Replica, inp: DeployInput, users: int, requests: int, first: bool,
              fixed: bool, lockstep: bool = False, reused: sv.Workload | None = None) -> sv.Benchmark:
    """The benchmark stepped on `replica`, which carries every constant its steps read (its Machine is built
    with them): a leave-one-source-out fold whose refit leaves this replica as it was reuses the run.
    `reused`: the prompt tokens each request finds in the prefix cache and the seconds it copies from the
    host tier (deploy's steady-state hits: --shared-prefix-tokens, --turns, --kv-offload-gb); none by
    default."""
    w = sv.Workload(inp.input_tokens, inp.output_tokens, users=float(users))
    if reused is not None:
        w = sv.reused_as(w, reused)
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


# Benchmark runs by their inputs (bench_key), read and filled by bench_run while set: validation sets the runs
# it prebuilt (validation/validate.py prebuilt_runs), the one caller that steps thousands of requests a record
BENCH_RUNS: ContextVar[dict[str, sv.Benchmark] | None] = ContextVar("cardfit_bench_runs", default=None)

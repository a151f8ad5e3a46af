"""`cardfit speed`: decode speed per user and in aggregate against concurrency, prefill, cold start, for
one plan (model × quantization × runtime × card set). Also `predict_speed`, which the validation harness
calls on each record of data/validation/speed.toml. Wiring only: the arithmetic is in core/speed.py."""

from __future__ import annotations

from typing import Any

from ..catalog.records import record
from ..catalog.releases import release_name
from ..core import reuse as ru
from ..core import speed as sp
from ..core.fit import NO, OFFLOAD, Verdict, kv_room
from ..core.memory import MemorySettings
from ..core.search import smallest_true
from ..core.speed import DEFAULT_RAM_GBPS
from ..errors import InputError, MissingFigureError
from . import served
from .inputs import MAX_CONTEXT, MAX_USERS, PlanInput, engine_opt, opt
from .plan import (
    engine_defaults,
    kv_offload_notes,
    needs_generator,
    ollama_one_slot,
    one_slot_note,
    scheduled,
    set_notes,
)
from .plan import plan as make_plan
from .table import Result

# A PCIe 3.0 ×4 NVMe SSD reads about 3.5 GB/s sequentially (Samsung 970 EVO Plus data sheet: 3,500 MB/s);
# Gen4 drives reach about 7. Network volumes of rental clouds are often far slower: pass --disk-gbps.
DEFAULT_DISK_GBPS = 3.5
DEFAULT_LEVELS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
# A prefill record that states no prompt length is llama-bench's pp test: 512 tokens
# (tools/llama-bench/llama-bench.cpp cmd_params_defaults n_prompt = {512}).
LLAMA_BENCH_PROMPT = 512


@record
class SpeedInput(PlanInput):
    concurrency: tuple[int, ...] = opt((), "concurrent sequences to tabulate (repeat or comma-separate: "
                                       "1,8,64); default: powers of two up to what fits",
                                       max_length=64, split=True, item_ge=1, item_le=MAX_USERS)
    filled: int | None = opt(None, "tokens already in each sequence while decoding (the KV cache read per "
                             "token); default: half the context", ge=0, le=MAX_CONTEXT)
    prompt: int = opt(512, "prompt tokens for the prefill / first-token time", ge=1, le=MAX_CONTEXT)
    bandwidth: float | None = opt(None, "memory bandwidth per card, GB/s (overrides the catalog)",
                                  gt=0, le=1_000_000)
    tflops: float | None = opt(None, "dense TFLOPS per card at the compute precision (overrides the catalog)",
                               gt=0, le=1_000_000)
    ram_bandwidth: float = opt(DEFAULT_RAM_GBPS, "system RAM bandwidth for CPU offload, GB/s (default: "
                               "DDR5-4800 dual channel, 76.8)", gt=0, le=100_000)
    disk_gbps: float = opt(DEFAULT_DISK_GBPS, "disk read speed for the cold start, GB/s (default 3.5: a PCIe "
                           "3.0 NVMe SSD)", gt=0, le=100_000)
    cpu_moe: int | None = opt(None, "llama.cpp --n-cpu-moe: layers whose experts stay in system RAM",
                              ge=0, le=100_000)
    plot: str | None = opt(None, "write a chart of speed vs concurrency (.png or .svg)", max_length=4096)
    shared_prefix_tokens: int = opt(0, "with --input-tokens: prompt tokens every session begins with, the "
                                    "same for all (a system prompt, part of the prompt): a runtime with "
                                    "prefix caching computes them once", ge=0, le=MAX_CONTEXT)
    prefix_groups: int = opt(1, "with --shared-prefix-tokens: how many different prefixes of that length "
                             "the requests begin with, spread equally (SGLang --gsp-num-groups, vLLM "
                             "--prefix-repetition-num-prefixes): each computed once while the KV pool keeps "
                             "it", ge=1, le=1_000_000)
    turns: int = opt(1, "with --input-tokens: requests per session; each turn's prompt is the history so far "
                     "plus the new tokens, only those prefilled where the runtime caches prefixes", ge=1,
                     le=1000)
    sessions: int | None = opt(None, "with --turns: conversations open at once, each keeping its history "
                               "cached between turns (default: the streams of each row)", ge=1,
                               le=100_000_000)
    # the engine settings a served load runs with, as `cardfit deploy --tp N` takes them (services/inputs.py
    # ENGINE_OPTIONS; --max-num-seqs and --gpu-memory-utilization come with the plan's inputs)
    max_num_batched_tokens: int | None = engine_opt("max_num_batched_tokens")
    max_prefill_tokens: int | None = engine_opt("max_prefill_tokens")
    attention_dp: int | None = engine_opt("attention_dp")
    expert_parallel: int | None = engine_opt("expert_parallel")
    max_model_len: int | None = engine_opt("max_model_len")
    scheduler_recv_interval: int | None = engine_opt("scheduler_recv_interval")
    attention_dp_timeout_iters: int | None = engine_opt("attention_dp_timeout_iters")
    cuda_graph_max_bs: int | None = engine_opt("cuda_graph_max_bs")


@record
class Setup:
    """Everything a speed question needs, resolved once."""

    plan: Any  # plan.Plan
    load: sp.Load
    machine: sp.Machine
    kv_budget_bytes: int
    kv_bytes_per_sequence: int
    filled: int
    tflops: float | None
    request: Any = None  # core.serving.Workload: the request each stream serves (services/served.py)
    reuse: ru.Reuse = ru.Reuse()  # --shared-prefix-tokens, --turns
    new_tokens: int = 0  # a turn's new prompt tokens (--input-tokens, or deploy's default)

    @property
    def card(self) -> Any:
        return self.plan.first


def _machine(inp: SpeedInput, ctx: Any, gpu: Any, tp: int, tflops: float | None) -> sp.Machine:
    bw = inp.bandwidth or gpu.bandwidth_gbps
    if bw is None:
        raise MissingFigureError("memory bandwidth", gpu.name,
                                 "pass --bandwidth GB/s, or add bandwidth_gbps to "
                                 "your own catalog file (--catalog)")
    return served.machine(ctx, gpu, tp, tflops, bandwidth_gbps=bw, ram_bandwidth_gbps=inp.ram_bandwidth)


# Machine fields that hold a runtime's calibrated constants: (runtimes.toml field, scale to the Machine unit)
CALIBRATED = {"decode_efficiency": ("decode_efficiency", 1.0),
              "overhead_s_per_layer": ("decode_overhead_us_per_layer", 1e-6),
              "overhead_s_per_sequence": ("decode_overhead_us_per_sequence", 1e-6),
              "overhead_s_per_layer_eager": ("decode_overhead_us_per_layer_v0", 1e-6),
              "compute_efficiency": ("prefill_efficiency", 1.0), "ram_efficiency": ("ram_efficiency", 1.0)}


def calibrated(mc: sp.Machine, rt: Any, quantized: bool = False, gpu: Any = None) -> sp.Machine:
    """The machine with the runtime's fitted constants (data/runtimes.toml, or a refit in validation); the
    compute efficiency is the runtime's share on Apple GPUs, or of integer-block weights, where it has one
    (core/speed.py prefill_efficiency_field)."""
    from dataclasses import replace

    from ..core.constants import fitted, value

    out = {}
    for attr, (field, scale) in CALIBRATED.items():
        if field == "prefill_efficiency":
            field, _ = sp.prefill_efficiency_field(rt.prefill_efficiency, rt.prefill_efficiency_quantized,
                                                   quantized, rt.prefill_efficiency_metal, gpu)
        v = fitted(rt, field, gpu.stack if gpu is not None else "")
        out[attr] = v * scale if v or scale != 1.0 else 1.0  # an efficiency of 0 means "not calibrated"
    out["expert_efficiency"] = value(rt.id, "expert_efficiency", rt.expert_efficiency)  # 0: the dense share
    out["overhead_s_per_moe_layer"] = 1e-6 * value(rt.id, "moe_overhead_us_per_layer",
                                                   rt.moe_overhead_us_per_layer)
    if gpu is not None:
        out["compute_efficiency"] = sp.power_capped(out["compute_efficiency"], mc.tflops, gpu.tdp_w, value(
            rt.id, "prefill_tflops_per_watt", rt.prefill_tflops_per_watt), gpu.gemm_share_at(mc.precision))
    out["dequant_ops_per_weight"] = value(rt.id, "dequant_ops_per_weight", rt.dequant_ops_per_weight)
    return replace(mc, **out)


def _reuse_checked(inp: SpeedInput) -> ru.Reuse:
    reuse = ru.Reuse(inp.shared_prefix_tokens, inp.turns, inp.prefix_groups)
    if inp.prefix_groups > 1 and not inp.shared_prefix_tokens:
        raise InputError("--prefix-groups counts different shared prefixes: give --shared-prefix-tokens too",
                         field="prefix_groups")
    if inp.sessions is not None and inp.turns == 1:
        raise InputError("--sessions counts conversations of several turns: give --turns too",
                         field="sessions")
    if reuse == ru.Reuse():
        return reuse
    if not (inp.input_tokens or inp.output_tokens):
        raise InputError("--shared-prefix-tokens and --turns describe a served request: give --input-tokens "
                         "(and --output-tokens) too", field="shared_prefix_tokens")
    if inp.shared_prefix_tokens > (inp.input_tokens or served.DEFAULT_INPUT_TOKENS):
        raise InputError(f"--shared-prefix-tokens {inp.shared_prefix_tokens:,} is longer than the prompt; "
                         "the shared prefix is part of --input-tokens", field="shared_prefix_tokens")
    return reuse


def setup(inp: SpeedInput) -> Setup:
    from dataclasses import replace

    reuse = _reuse_checked(inp)
    one_turn = served.workload(inp.input_tokens, inp.output_tokens, 0)
    if reuse.turns > 1 and not inp.context:  # the context holds a session's last turn
        inp = replace(inp, context=reuse.turns * (one_turn.input_tokens + one_turn.output_tokens))
    p = make_plan(inp)
    card, ctx = p.first, p.ctx
    needs_generator(ctx.model)
    m, mem, opt = ctx.model, card.memory, card.option
    if inp.filled is not None and (inp.input_tokens or inp.output_tokens):
        raise InputError("--filled times decoding alone; --input-tokens/--output-tokens a served request: "
                         "give one", field="filled")
    w = served.workload(inp.input_tokens, inp.output_tokens, mem.context, inp.filled)
    if reuse.turns > 1:  # a request's mean prompt: the new tokens and the session's history so far
        w = replace(w, input_tokens=round(ru.prompt_tokens(w.input_tokens, w.output_tokens, reuse)))
    tflops = inp.tflops or sp.prefill_peak_tflops(opt.gpu, ctx.quant, ctx.runtime.fp16_accumulate)
    cpu_frac = 1 - opt.gpu_layer_fraction if opt.verdict == OFFLOAD else 0.0
    cpu_moe = min(inp.cpu_moe, m.layers) / m.layers if inp.cpu_moe and m.is_moe else 0.0
    load = served.load(ctx, mem, w, cpu_frac, cpu_moe)
    one = ctx.engine.kv_bytes(m, MemorySettings(context=mem.context, sequences=1, kv_dtype=mem.kv_dtype))
    budget = kv_room(mem, opt.budget_bytes, opt.count)
    return Setup(p, load, _machine(inp, ctx, opt.gpu, opt.tp, tflops), budget, one,
                 min(served.in_flight(w), mem.context), tflops, w, reuse, one_turn.input_tokens)


def levels(inp: SpeedInput, most: int) -> list[int]:
    if inp.concurrency:
        return sorted(set(inp.concurrency))
    top = max(most, 1)
    return sorted({n for n in DEFAULT_LEVELS if n <= top} | {top})


@record
class SpeedRow(Result):
    """One concurrency level of `cardfit speed`."""

    concurrency: int
    aggregate_tokens_per_s: float
    per_user_tokens_per_s: float
    step_ms: float
    bound: str  # "memory", "compute" or "link": what limits the decode step
    kv_fits: bool  # the KV cache holds this many sequences of the full context
    # the served timing of this many closed-loop users (core/serving.py closed_loop, as `deploy --users`):
    # mean and p90 time to first token; None where a request has no prompt (--input-tokens not given)
    ttft_ms: float | None = None
    ttft_p90_ms: float | None = None
    # the share of the prompt tokens sent that the prefix cache serves (--shared-prefix-tokens, --turns)
    prefix_hit_rate: float = 0.0


@record
class Calibration(Result):
    """The runtime's fitted constants and the machine figures behind the realistic speeds."""

    decode_efficiency: float
    overhead_us_per_layer: float
    prefill_efficiency: float
    ram_efficiency: float
    ram_bandwidth_gbps: float
    disk_gbps: float


@record
class SpeedReport(Result):
    """`cardfit speed`: the ceiling and realistic decode speed, prefill, cold start, and decode against
    concurrency, for one plan (model × quantization × runtime × card set)."""

    model: str
    gpu: str
    count: int
    tp: int
    runtime: str
    quant: str
    context: int
    filled: int
    kv_dtype: str
    verdict: Verdict
    gpu_layer_fraction: float
    processor: str  # as `ollama ps` shows it
    bandwidth_gbps: float
    tflops: float | None
    bytes_per_token: int
    cpu_bytes_per_token: int
    active_weight_share: float
    shares_method: str
    decode_ceiling_tokens_per_s: float
    decode_tokens_per_s: float | None  # None: the runtime has no calibrated decode efficiency
    prefill_tokens_per_s: int | None
    time_to_first_token_s: float | None
    prompt_tokens: int
    cold_start_s: float
    max_concurrency: int
    kv_bytes_per_sequence: int
    vllm_max_concurrency: float | None
    compute_bound_from: int | None
    calibration: Calibration
    rows: tuple[SpeedRow, ...]
    notes: tuple[str, ...]
    plot: str | None = None  # the chart written (absent from the JSON when none was asked for)
    # the engine release timed (--runtime NAME@RELEASE, else the current one: data/releases.toml); None for a
    # runtime cardfit knows no releases of
    release: str | None = None
    # --speculative: {method, tokens, acceptance, tokens_per_step}, timed in every row; None: off
    speculative: dict[str, Any] | None = None

    omit_none = ("plot",)


def budget(s: Setup) -> int:
    """The tokens a step carries: the engine's own default on the setup's card (services/plan.py
    engine_defaults: vLLM V1 2,048 on an A100, 8,192 on an H100), the budget deploy times that card with."""
    return engine_defaults(s.plan.ctx, s.plan.first.option.gpu)[0]


def rows(s: Setup, inp: SpeedInput) -> tuple[SpeedRow, ...]:
    most = s.card.memory.sequences if s.card.option.verdict == OFFLOAD else sp.max_sequences(
        s.kv_budget_bytes, s.kv_bytes_per_sequence)
    if deployed(s, inp):
        return tuple(_deployed_row(s, inp, n, most) for n in levels(inp, most))
    out = []
    ctx, opt = s.plan.ctx, s.card.option
    for n in levels(inp, most):
        w, rate = reused(s, n)
        # a paged engine given --max-num-seqs schedules that many; the users beyond it wait their turn in
        # the closed loop (core/serving.py serve), as deploy's steady state queues them
        seqs = inp.max_num_seqs if inp.max_num_seqs and ctx.runtime.paged_kv else scheduled(ctx, opt.gpu, n)
        r = served.served(served.replica(ctx, s.load, s.machine, s.request, opt.pp, seqs, budget(s)), w, n)
        prompt = s.request.input_tokens > 0
        out.append(SpeedRow(n, round(r.output_tokens_per_s, 1), round(r.per_user_tokens_per_s, 2),
                            round(r.tpot_s * 1e3, 3), sp.step(s.load, s.machine, n).bound, n <= most,
                            round(r.ttft_mean_s * 1e3, 1) if prompt else None,
                            round(r.ttft_s * 1e3, 1) if prompt else None, rate))
    return tuple(out)


def deployed(s: Setup, inp: SpeedInput) -> bool:
    """Whether the rows are the served load of one deployment `cardfit deploy --tp N` times: a request
    (--input-tokens / --output-tokens) on a paged engine (vLLM, SGLang, TensorRT-LLM, TGI) of the built-in
    catalog's card, in a format deploy serves on it (no GGUF build on a checkpoint engine), with nothing only
    speed takes (--bandwidth, --tflops, --cpu-moe, CPU offload, --speculative); the reuse it serves
    (--shared-prefix-tokens, --prefix-groups, --turns, --sessions, a --kv-offload-gb tier) goes with it.
    Each row is then that deploy's steady state for its users (_deployed_row): one timing path, with the
    users beyond the engine's sequence cap or its KV pool queued and an older release (--runtime
    NAME@RELEASE) scheduled and timed as deploy does (services/pinned.py)."""
    from ..catalog.gpus import default_gpus

    ctx, o = s.plan.ctx, s.card.option
    if not (s.request is not None and s.request.input_tokens > 0 and ctx.runtime.paged_kv
            and o.verdict != OFFLOAD and ctx.speculation is None
            and not (inp.bandwidth or inp.tflops or inp.cpu_moe) and default_gpus().find(o.gpu.id) == o.gpu):
        return False
    from .deploy import is_gguf  # deploy's rule: GGUF builds run on llama.cpp / Ollama, the rest elsewhere

    return is_gguf(ctx.quant) == (ctx.runtime.weights_format == "gguf")


# the engine settings only a deployment's served load takes (deployed): speed's own path has no term for them
DEPLOYED_ONLY = ("max_prefill_tokens", "attention_dp", "expert_parallel", "scheduler_recv_interval",
                 "cuda_graph_max_bs", "attention_dp_timeout_iters")


def engine_checked(inp: SpeedInput) -> SpeedInput:
    """The input with --max-num-batched-tokens as the step budget (--prefill-chunk: one setting, two
    names)."""
    from dataclasses import replace

    given = inp.max_num_batched_tokens
    if given is None:
        return inp
    if inp.prefill_chunk is not None and inp.prefill_chunk != given:
        raise InputError("--max-num-batched-tokens and --prefill-chunk are one setting (the tokens a step "
                         "may carry): give one", field="max_num_batched_tokens")
    return replace(inp, prefill_chunk=given)


def _deploy_question(s: Setup, inp: SpeedInput, users: int) -> Any:
    """`users` closed-loop users of the setup's deployment as the question a pinned `cardfit deploy` answers:
    its model, runtime (and release), quantization, cache, card, TP x PP, request and engine settings."""
    import dataclasses

    from .deploy import DeployInput
    from .inputs import ModelInput

    ctx, o = s.plan.ctx, s.card.option
    model = {f.name: getattr(inp, f.name) for f in dataclasses.fields(ModelInput)}
    return DeployInput(**model, runtime=inp.runtime or ctx.runtime.named, quant=inp.quant or ctx.quant.name,
                       kv_dtype=inp.kv_dtype, gpu=(o.gpu.name,), tp=s.machine.tp, pp=o.pp, users=float(users),
                       input_tokens=s.new_tokens or s.request.input_tokens,
                       output_tokens=s.request.output_tokens,
                       shared_prefix_tokens=inp.shared_prefix_tokens, prefix_groups=inp.prefix_groups,
                       turns=inp.turns, sessions=inp.sessions, kv_offload_gb=inp.kv_offload_gb,
                       max_num_seqs=inp.max_num_seqs, max_num_batched_tokens=inp.prefill_chunk,
                       gpu_memory_utilization=inp.gpu_memory_utilization,
                       max_prefill_tokens=inp.max_prefill_tokens, attention_dp=inp.attention_dp,
                       expert_parallel=inp.expert_parallel, max_model_len=started(inp),
                       scheduler_recv_interval=inp.scheduler_recv_interval,
                       cuda_graph_max_bs=inp.cuda_graph_max_bs,
                       attention_dp_timeout_iters=inp.attention_dp_timeout_iters)


def started(inp: SpeedInput) -> int | None:
    """The context the engine is started with: --max-model-len, else --context (None: the engine's
    default)."""
    return inp.max_model_len or inp.context


def _deployed_row(s: Setup, inp: SpeedInput, users: int, most: int) -> SpeedRow:
    """One row as the pinned deploy of its users prints its steady state (services/deploy.py
    pinned_answer)."""
    from .deploy import hit_rate, pinned_answer

    question = _deploy_question(s, inp, users)
    res = pinned_answer(question).result
    r = res.served
    rate = hit_rate(question, res) if s.reuse != ru.Reuse() else 0.0
    return SpeedRow(users, round(res.served_tokens_per_s, 1), round(r.per_user_tokens_per_s, 2),
                    round(r.tpot_s * 1e3, 3), sp.step(s.load, s.machine, users).bound, users <= most,
                    round(r.ttft_mean_s * 1e3, 1), round(r.ttft_s * 1e3, 1), rate)


def queued_note(s: Setup, inp: SpeedInput, table: tuple[SpeedRow, ...]) -> list[str]:
    """Where the most users of the table pass what the deployment schedules at once, that they queue."""
    if not table or not deployed(s, inp):
        return []
    from .deploy import pinned_answer

    top = max(row.concurrency for row in table)
    cap = pinned_answer(_deploy_question(s, inp, top)).result.cand.replica.max_seqs
    if top <= cap:
        return []
    return [f"past {cap:,} sequences at once (the engine's --max-num-seqs, or what its KV pool holds) the "
            "users wait their turn, as `cardfit deploy` queues them: their first token comes later, the "
            "throughput stays the cap's"]


def pool_tokens(s: Setup) -> float:
    """The tokens the plan's KV room holds (one copy: per token, what a full-context sequence takes)."""
    per_token = s.kv_bytes_per_sequence / max(s.card.memory.context, 1)
    return s.kv_budget_bytes / per_token if per_token else 0.0


def reused(s: Setup, users: int) -> tuple[Any, float]:
    """The request of `users` closed-loop streams with what the prefix cache serves of it (core/reuse.py;
    nothing on a runtime without prefix caching), and that share of the prompt."""
    w = s.request
    if s.reuse == ru.Reuse() or not s.plan.ctx.runtime.prefix_caching or not w.input_tokens:
        return w, 0.0
    copy = host_copy_s_per_token(s)
    host = s.plan.ctx.inp.kv_offload_gb * 1e9 / max(_kv_per_token(s), 1.0) if copy is not None else 0.0
    sessions = max(s.plan.ctx.inp.sessions or 0, users)
    h = ru.hits(s.new_tokens, w.output_tokens, s.reuse, pool_tokens=pool_tokens(s), running=users,
                sessions=sessions, host_tokens=host)
    return ru.with_hits(w, h, copy), round(h.cached_tokens / w.input_tokens, 4)


def _kv_per_token(s: Setup) -> float:
    return s.kv_bytes_per_sequence / max(s.card.memory.context, 1)


def host_copy_s_per_token(s: Setup) -> float | None:
    """Copying a token's KV cache back from a --kv-offload-gb host tier over the set's host links, where the
    runtime has such a tier and the copy beats computing the token again (the plan's prefill rate); None
    where the tier is not used (services/plan.py kv_offload_notes says why)."""
    ctx, o = s.plan.ctx, s.card.option
    if not ctx.inp.kv_offload_gb or not ctx.runtime.host_kv_cache:
        return None
    link = ru.host_link_gbps(o.gpu.pcie_gen, o.gpu.interconnect, o.gpu.link_gbps)
    prefill = s.card.speed.prefill_tokens_per_s if s.card.speed else None
    if not link or not prefill:
        return None
    copy = ru.host_load_s(1.0, _kv_per_token(s), link * o.count)
    return copy if copy < 1 / prefill else None


def spec_note(choice: Any, runtime: Any = None) -> list[str]:
    from .speculative import note

    return note(choice, runtime)


def _one_stream(s: Setup, one: sp.Step) -> float:
    """One stream's decode tokens/s: the plain step, or with --speculative the verification and drafting
    over the tokens a step yields (core/speculative.py per_token_s)."""
    spec = served.speculation_of(s.plan.ctx, s.load, s.request)
    if spec is None:
        return one.per_user_tokens_per_s
    from ..core.speculative import per_token_s

    return 1 / per_token_s(s.load, s.machine, 1, spec)


def speed_report(inp: SpeedInput) -> SpeedReport:
    """`cardfit speed` for one input (and its chart when --plot asks for one), with the constants of the
    kernels an older engine release ran (--runtime NAME@RELEASE: services/pinned.py older_kernels) in place,
    as deploy times that release."""
    inp = engine_checked(inp)
    s = setup(inp)
    given = [f for f in DEPLOYED_ONLY if getattr(inp, f) is not None]
    if given and not deployed(s, inp):
        raise InputError(f"--{given[0].replace('_', '-')} sets the engine of a served load: give "
                         "--input-tokens on a paged engine (--runtime vllm, sglang, trtllm) of a catalog "
                         "card, without --bandwidth, --tflops, --cpu-moe, --speculative or prefix reuse",
                         field=given[0])
    older = older_kernels(inp, s)
    if older:
        from ..core.constants import beside, constants

        with constants(beside(older)):
            return _report(inp, setup(inp))
    return _report(inp, s)


def older_kernels(inp: SpeedInput, s: Setup) -> dict[str, float]:
    """The older-kernel constants of the setup's release for its request (prompt and half the answer in
    flight) and the context the server is started with (--max-model-len, else --context)."""
    from . import pinned

    ctx = s.plan.ctx
    _, first = pinned.schedule(ctx.runtime, ctx.model, inp.prefill_chunk, started(inp))
    return pinned.older_kernels(ctx.runtime, s.card.option.gpu, ctx.model, ctx.quant.id,
                                served.in_flight(s.request), s.machine.tp, not first, started(inp) or 0)


def _report(inp: SpeedInput, s: Setup) -> SpeedReport:
    ctx, card = s.plan.ctx, s.card
    m, mem, opt, rt = ctx.model, card.memory, card.option, ctx.runtime
    one = sp.step(s.load, s.machine, 1)
    most = sp.max_sequences(s.kv_budget_bytes, s.kv_bytes_per_sequence)
    prefill_eff = s.machine.compute_efficiency if rt.prefill_efficiency else 0.0
    prefill = sp.prefill_tokens_per_s(m, s.tflops, prefill_eff, inp.prompt, s.machine.tp, attention_tflops(s),
                                      stream_s_per_token=_stream(s, ctx.prefill_chunk, inp.prompt))
    no_fit = [f"does not fit on {opt.count}× {opt.gpu.name}: {opt.reason}; the figures assume it did"]
    report = SpeedReport(
        release=release_name(rt), model=m.name, gpu=opt.gpu.name, count=opt.count, tp=s.machine.tp,
        runtime=rt.named,
        quant=ctx.quant.name, context=mem.context, filled=s.filled, kv_dtype=mem.kv_dtype,
        verdict=opt.verdict, gpu_layer_fraction=round(opt.gpu_layer_fraction, 4),
        processor=processor(opt.gpu_layer_fraction if opt.verdict == OFFLOAD else 1.0),
        bandwidth_gbps=s.machine.bandwidth_gbps, tflops=s.tflops,
        bytes_per_token=round(s.load.weights_bytes * s.load.shares.read_fraction(1)) + s.load.kv_bytes,
        cpu_bytes_per_token=one.cpu_bytes,
        active_weight_share=round(s.load.shares.read_fraction(1), 4), shares_method=s.load.shares.method,
        decode_ceiling_tokens_per_s=round(sp.ceiling(s.load, s.machine), 1),
        decode_tokens_per_s=round(_one_stream(s, one), 1) if rt.decode_efficiency else None,
        prefill_tokens_per_s=round(prefill) if prefill else None,
        time_to_first_token_s=round(inp.prompt / prefill, 3) if prefill else None, prompt_tokens=inp.prompt,
        cold_start_s=round(sp.cold_start_seconds(mem.weights.total_bytes, inp.disk_gbps), 1),
        max_concurrency=most, kv_bytes_per_sequence=s.kv_bytes_per_sequence,
        vllm_max_concurrency=round(s.kv_budget_bytes / s.kv_bytes_per_sequence, 2)
        if s.kv_bytes_per_sequence else None,
        compute_bound_from=_crossover(s),
        calibration=Calibration(rt.decode_efficiency, rt.decode_overhead_us_per_layer, prefill_eff,
                                rt.ram_efficiency, inp.ram_bandwidth, inp.disk_gbps),
        rows=(table := rows(s, inp)),
        notes=tuple(set_notes(ctx, opt.gpu) + _notes(s, opt.gpu) + (no_fit if opt.verdict == NO else [])
                    + spec_note(ctx.speculation, ctx.runtime) + queued_note(s, inp, table)),
        speculative=ctx.speculation.to_json() if ctx.speculation is not None else None,
    )
    if inp.plot:
        from dataclasses import replace

        from ..charts.speed import write_chart

        write_chart(report, inp.plot)
        report = replace(report, plot=inp.plot)
    return report


def processor(gpu_fraction: float) -> str:
    """The PROCESSOR column of `ollama ps`: "100% GPU", or the CPU/GPU split of the loaded bytes."""
    gpu = round(gpu_fraction * 100)
    if gpu >= 100:
        return "100% GPU"
    if gpu <= 0:
        return "100% CPU"
    return f"{100 - gpu}%/{gpu}% CPU/GPU"


def _notes(s: Setup, gpu: Any) -> list[str]:
    out = []
    if not s.tflops:
        out.append(f"{gpu.name} has no published dense TFLOPS: prefill and the compute bound are left out; "
                   "pass --tflops or add bf16_tflops to your own catalog file (--catalog)")
    if s.machine.tp > 1 and gpu.interconnect == "pcie":
        out.append(f"tensor parallel over PCIe ({gpu.link_gbps or '?'} GB/s): two all-reduces per layer "
                   "per step")
    if s.load.cpu_weight_fraction:
        out.append("CPU offload: the offloaded layers run at system RAM bandwidth (--ram-bandwidth)")
    one = sp.step(s.load, s.machine, 1)
    if one.dequant_s > one.memory_s - one.kv_s:
        ops, fp32 = s.machine.dequant_ops_per_weight, s.machine.fp32_tflops
        out.append(f"low-bit weights: unpacking them on the {gpu.name}'s CUDA cores ({ops:g} operations a "
                   f"weight at {fp32:g} FP32 TFLOPS) takes longer than reading them: decode is bound by it, "
                   "not by bandwidth")
    rt = s.plan.ctx.runtime
    if rt.decode_efficiency and not rt.decode_overhead_us_per_sequence and not rt.paged_kv:
        out.append(f"{rt.name}: the cost of each extra sequence in a step is not calibrated (no aggregate-"
                   f"throughput record); charged {served.uncalibrated_sequence_cost_s() * 1e6:g} µs, the "
                   "cost of engines that schedule on the CPU between steps (vLLM before 0.6), as `cardfit "
                   "deploy` does")
    out += kv_offload_notes(s.plan.ctx, s.card)
    one_slot = ollama_one_slot(rt, s.plan.ctx.model)
    if one_slot:
        out.append(one_slot_note(one_slot, "every stream beyond the first waits its turn (aggregate tokens/s "
                                           "stays one stream's)"))
    if s.request is not None and s.request.input_tokens:
        out.append(f"each stream serves {s.request.input_tokens:,}-token prompts and "
                   f"{s.request.output_tokens:,}-token answers: the prompts share the decode steps (chunked "
                   "prefill), so aggregate tokens/s is the served throughput `cardfit deploy` reports")
    return out


def _crossover(s: Setup, limit: int = 1 << 16) -> int | None:
    """Smallest concurrency at which compute takes longer than the memory reads (the roofline knee)."""
    if not s.tflops:
        return None
    def compute_bound(n: int) -> bool:
        return sp.step(s.load, s.machine, n).bound == "compute"

    return smallest_true(compute_bound, 1, limit) if compute_bound(limit) else None


def attention_tflops(s: Setup) -> float | None:
    """The setup's attention rate (core/speed.py attention_peak_tflops) in proportion to its GEMM rate, so an
    overridden rate (--tflops, an Apple GPU size) carries over."""
    ctx, gpu = s.plan.ctx, s.plan.first.option.gpu
    full = sp.prefill_peak_tflops(gpu, ctx.quant, ctx.runtime.fp16_accumulate)
    attention = sp.attention_peak_tflops(gpu, ctx.quant, ctx.runtime.fp16_accumulate)
    return s.tflops * attention / full if s.tflops and full and attention else s.tflops


def _stream(s: Setup, ubatch: int | None, prompt: int) -> float:
    """Per token, the weights each prefill ubatch streams (core/speed.py ubatch_stream_seconds); a prompt
    shorter than the ubatch is one ubatch of its own length."""
    return sp.ubatch_stream_seconds(s.load, s.machine, min(ubatch or 512, max(prompt, 1)))

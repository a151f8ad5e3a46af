"""`cardfit deploy`: the cheapest deployment that serves a load within its latency targets.

Search space: card × cards per node (1/2/4/8) × nodes × tensor-parallel (inside a node) / pipeline-parallel
(across nodes) split × replicas × quantization × KV-cache type × runtime (× the runtime's sequence cap,
which follows from the KV cache). Every candidate is first sized by the same memory model as `cardfit
plan` (services/plan.py memory_for + core/fit.py check, with the need's error bar from data/accuracy.toml
as the pessimistic margin), then timed by core/serving.py on the decode step of core/speed.py.

Wiring only: the arithmetic lives in core/."""

from __future__ import annotations

import bisect
import heapq
import math
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import fields, replace
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any, Literal

from ..catalog.gpus import Feature, Gpu
from ..catalog.quants import GgufMix, Quant, QuantType, default_quants, gguf_holds
from ..catalog.records import record
from ..catalog.releases import release_name
from ..catalog.runtimes import RuntimeProfile, default_runtimes, servers
from ..core import cost, moe_parallel
from ..core import fit as fitting
from ..core import reuse as ru
from ..core import serving as sv
from ..core import speed as sp
from ..core.memory import Memory, MemorySettings
from ..core.placement import shapes
from ..core.search import largest_true, largest_true_ratio, smallest_true
from ..core.uncertainty import banded, value_range
from ..errors import CardfitError, InputError
from . import served, table
from .inputs import MAX_CONTEXT, MAX_USERS, ModelInput, SpeculativeInput, engine_opt, opt
from .launch_line import launch_command, launch_of, sized_fraction

if TYPE_CHECKING:
    from .emit import Emitted

# what a Hugging Face checkpoint ships or is commonly quantized to; the default search keeps those the launch
# line can serve from the checkpoint it names (_servable)
HF_QUANTS = ("bf16", "fp8", "int4_g128")
# the builds Ollama and llama.cpp users pull (the Ollama VRAM guide's two columns)
GGUF_QUANTS = ("Q4_K_M", "Q8_0")
SLOTS = (1, 2, 4, 8, 16, 32, 64)  # llama-server -np / OLLAMA_NUM_PARALLEL values searched
MAX_REPLICAS = 512
# Rule of thumb defaults when no target is given: a first token within 2 s and 10 tokens/s per user
# (faster than people read), so that "cheapest" is never a deployment nobody would use.
DEFAULT_TTFT_MS = 2000.0
DEFAULT_TPOT_MS = 100.0
# The Pareto front is drawn among deployments costing at most this many times the cheapest one that meets
# the targets: beyond it a candidate is not timed (it may still be faster; ask with --gpu or --max-cards).
PARETO_COST_SPAN = 4.0
PARETO_SIZE = 8  # deployments of the Pareto front in the answer
EVERY_COUNT = 1 << 62  # _least_price's `most` for a floor under the rent of any count of a set
# search(keep) reads the front's rent again once the results have grown by this fraction (each read sweeps
# them all): a speed setting of this module, not a figure from a source; any value gives the same answer
FRONT_REREAD_GROWTH = 0.125
# Workers a pinned disaggregated deployment may run in each pool (a bound on the input, not on the timing:
# core/disagg.py times any count alike; aiconfigurator's largest published pool is 7 workers)
PD_PINNED_WORKERS = 1024


@record
class DeployInput(ModelInput, SpeculativeInput):
    users: float | None = opt(None, "concurrent users, each with one request in flight (closed loop, like "
                              "`vllm bench serve --max-concurrency`)", gt=0, le=MAX_USERS)
    requests_per_s: float | None = opt(None, "arrival rate of requests (Poisson), instead of --users",
                                       gt=0, le=1_000_000)
    input_tokens: int = opt(served.DEFAULT_INPUT_TOKENS, "prompt tokens per request (mean)", ge=1,
                            le=MAX_CONTEXT)
    output_tokens: int = opt(served.DEFAULT_OUTPUT_TOKENS, "answer tokens per request (mean)", ge=1,
                             le=MAX_CONTEXT)
    input_tokens_p90: int | None = opt(None, "90th percentile prompt length (sizes the context, and the "
                                       "TTFT p90 takes each prompt's own prefill over the spread)",
                                       ge=1, le=MAX_CONTEXT)
    output_tokens_p90: int | None = opt(None,
                                        "90th percentile answer length (sizes the context and the spread "
                                        "of service times)", ge=1, le=MAX_CONTEXT)
    shared_prefix_tokens: int = opt(0, "prompt tokens every session begins with, the same for all (a system "
                                    "prompt; part of --input-tokens): a runtime with prefix caching "
                                    "computes them once and holds their KV cache once", ge=0, le=MAX_CONTEXT)
    prefix_groups: int = opt(1, "with --shared-prefix-tokens: how many different prefixes of that length "
                             "the requests begin with, spread equally (SGLang bench_serving "
                             "--gsp-num-groups, vLLM bench --prefix-repetition-num-prefixes); each is "
                             "computed once while the KV pool keeps it (LRU), beside the running sequences",
                             ge=1, le=1_000_000)
    turns: int = opt(1, "requests per session (multi-turn chat, agents): each turn's prompt is the history "
                     "so far (prompts and answers) plus --input-tokens new ones; with prefix caching only "
                     "the new tokens are prefilled while the history stays cached", ge=1, le=1000)
    sessions: float | None = opt(None, "with --turns: conversations open at once, each keeping its history "
                                 "cached between turns (default: --users, or the requests in flight under "
                                 "--requests-per-s: no time between turns)", gt=0, le=100_000_000)
    kv_offload_gb: float | None = opt(None, "a host-RAM KV tier per replica, GB (vLLM native CPU offload, "
                                      "SGLang HiCache): used where it keeps reused tokens the GPU pool "
                                      "cannot and copying them back beats computing them again", gt=0,
                                      le=1_000_000)
    ttft_ms: float | None = opt(None, f"target: p90 time to first token, ms (default {DEFAULT_TTFT_MS:g})",
                                gt=0, le=3_600_000, applied=DEFAULT_TTFT_MS)
    tpot_ms: float | None = opt(None, f"target: mean time per output token, ms (default {DEFAULT_TPOT_MS:g}, "
                                "i.e. 10 tokens/s per user)", gt=0, le=600_000, applied=DEFAULT_TPOT_MS)
    tokens_per_s_per_user: float | None = opt(None, "target: tokens/s each user sees, instead of --tpot-ms",
                                              gt=0, le=100_000)
    gpu: tuple[str, ...] = opt((), "only these cards (repeatable); default: every card with a rental price",
                               max_length=64)
    runtime: str | None = opt(None, "a runtime that serves (vllm, sglang, llama.cpp, …: every catalog row "
                              "with serves = true), at an engine release after '@' (vllm@0.10.1; default: "
                              "the current one); default: every one that serves the model", max_length=64)
    quant: str | None = opt(None, "weights; default: the checkpoint's own and what the engine quantizes to "
                            "on load (FP8 on vLLM/SGLang); Q4_K_M, Q8_0 for llama.cpp/Ollama", max_length=64)
    kv_dtype: str | None = opt(None, "KV cache type; default: search 16-bit and 8-bit", max_length=16)
    max_cards: int | None = opt(None, "at most this many cards in all", ge=1, le=100_000)
    cards: int | None = opt(None, "exactly this many cards of one kind (with --gpu: that card): the best "
                            "layout on them for the load; without --users / --requests-per-s, the most users "
                            "they serve within the targets", ge=1, le=100_000)
    max_nodes: int = opt(4, "at most this many 8-card nodes per replica", ge=1, le=64)
    budget_usd_month: float | None = opt(None, "at most this rent per month, USD", gt=0, le=1e9)
    plot: str | None = opt(None, "write the Pareto chart (.png or .svg)", max_length=4096)
    emit: Literal["compose", "k8s"] | None = opt(None, "print the cheapest deployment as a compose.yaml "
                                                 "(compose) or Kubernetes manifests (k8s: Deployment + "
                                                 "Service, a LeaderWorkerSet across nodes) instead of the "
                                                 "report; with --json, the `emit` key")
    # one deployment pinned (services/pinned.py): its layout, the engine settings it is launched with and the
    # benchmark run that measures it; the path `cardfit validate` scores serving records through
    tp: int | None = opt(None, "pin one deployment: tensor-parallel size of one replica on one --gpu and "
                         "--runtime (timed alone, no search)", ge=1, le=1024)
    pp: int | None = opt(None, "pin one deployment: pipeline stages of one replica (with --tp)", ge=1, le=256)
    requests: int | None = opt(None, "time a benchmark run of this many requests (`vllm bench serve "
                               "--num-prompts`): the --users' first round is sent at once; with "
                               "--requests-per-s, a stage of that many arrivals (inference-perf); default: "
                               "the steady state", ge=1, le=1_000_000)
    warm_requests: int | None = opt(None, "with --requests: prompts of the same sequence sent before the "
                                    "run (an earlier stage of the same benchmark, e.g. inference-perf's), "
                                    "whose prefix groups are computed already; default: the cache starts "
                                    "cold (the first request of each --prefix-groups group computes its "
                                    "prefix)",
                                    ge=0, le=10_000_000)
    random_lengths: bool = opt(False, "the benchmark's requests vary in length around the means (a ShareGPT "
                               "or random dataset), not all the same: each has its own prompt and answer "
                               "length (an exponential around the means, assumed, within the ShareGPT "
                               "sampler's limits: --length-distribution sharegpt) and a burst lasts until "
                               "its longest answer ends")
    length_distribution: str | None = opt(
        None, "how the benchmark draws each request's lengths around the means (implies --random-lengths): "
        "sharegpt (--random-lengths: an exponential, assumed, within the ShareGPT sampler's limits), "
        "exponential (no such limits), uniform:RATIO (`vllm bench serve --random-range-ratio RATIO`: each "
        "length within ± RATIO × its mean) or sonnet (every prompt at the mean, the answers vary); each "
        "prompt + answer within --max-model-len (default: the model's context). It times runs of one round "
        "(--requests <= --users); a longer run is timed at the mean lengths, and a stage of arrivals "
        "(--requests-per-s) at the mean lengths but its TTFT p90 over the prompts drawn", max_length=32)
    max_output_tokens: int | None = opt(None, "the benchmark's max_tokens: every answer at most this many "
                                        "tokens, the answers varying below it around --output-tokens "
                                        "(MLPerf's 128 for CNN-DailyMail, --sonnet-output-len); with "
                                        "--random-lengths or --length-distribution", ge=1, le=10_000_000)
    # the engine settings (services/inputs.py ENGINE_OPTIONS: one definition, shared with `cardfit speed`)
    max_num_seqs: int | None = engine_opt("max_num_seqs")
    max_num_batched_tokens: int | None = engine_opt("max_num_batched_tokens")
    gpu_memory_utilization: float | None = engine_opt("gpu_memory_utilization")
    max_prefill_tokens: int | None = engine_opt("max_prefill_tokens")
    attention_dp: int | None = engine_opt("attention_dp")
    expert_parallel: int | None = engine_opt("expert_parallel")
    max_model_len: int | None = engine_opt("max_model_len")
    scheduler_recv_interval: int | None = engine_opt("scheduler_recv_interval")
    cuda_graph_max_bs: int | None = engine_opt("cuda_graph_max_bs")
    attention_dp_timeout_iters: int | None = engine_opt("attention_dp_timeout_iters")
    enable_mixed_chunk: bool = opt(False, "engine: the running decodes ride in each prompt step instead of "
                                   "pausing for it (SGLang --enable-mixed-chunk; a benchmark run's "
                                   "steps, --requests); default off, the engine's")
    # one disaggregated deployment pinned (core/disagg.py): its prefill and decode pools, each worker a
    # replica of its own, named as the serving records state them (validation/records.py SETTINGS)
    prefill_workers: int | None = opt(None, "pin a disaggregated deployment: prefill workers (SGLang "
                                      "--disaggregation-mode prefill, vLLM with a KV connector), with "
                                      "--decode-workers", ge=1, le=PD_PINNED_WORKERS)
    decode_workers: int | None = opt(None, "pin a disaggregated deployment: decode workers, with "
                                     "--prefill-workers", ge=1, le=PD_PINNED_WORKERS)
    prefill_tp: int | None = opt(None, "tensor-parallel ranks of a prefill worker (default --tp)", ge=1,
                                 le=1024)
    decode_tp: int | None = opt(None, "tensor-parallel ranks of a decode worker (default --tp)", ge=1,
                                le=1024)
    prefill_dp: int | None = opt(None, "attention data-parallel groups of a prefill worker, its experts "
                                 "expert-parallel over all its ranks (default --attention-dp, else 1)", ge=1,
                                 le=1024)
    decode_dp: int | None = opt(None, "attention data-parallel groups of a decode worker, its experts "
                                "expert-parallel over all its ranks (default --attention-dp, else 1)", ge=1,
                                le=1024)
    prefill_batch_size: int | None = opt(None, "sequences a prefill worker schedules at once, per attention "
                                         "group (its --max-num-seqs; default --max-num-seqs, else the "
                                         "engine's)", ge=1, le=1_000_000)
    decode_batch_size: int | None = opt(None, "sequences a decode worker schedules at once, per attention "
                                        "group (its --max-num-seqs; default --max-num-seqs, else the "
                                        "engine's)", ge=1, le=1_000_000)


def check(inp: DeployInput) -> None:
    if inp.users is not None and inp.requests_per_s is not None:
        raise InputError("give the load: --users N (concurrent) or --requests-per-s R, one of the two",
                         field="users")
    if inp.users is None and inp.requests_per_s is None and not inp.cards:
        raise InputError("give the load: --users N (concurrent) or --requests-per-s R, one of the two "
                         "(or --cards N alone: the most users N cards serve)", field="users")
    if inp.cards and inp.max_cards:
        raise InputError("give --cards (exactly) or --max-cards (at most), not both", field="cards")
    if inp.tpot_ms is not None and inp.tokens_per_s_per_user is not None:
        raise InputError("give --tpot-ms or --tokens-per-s-per-user, not both", field="tpot_ms")
    if inp.sessions is not None and inp.turns == 1:
        raise InputError("--sessions counts conversations of several turns: give --turns too",
                         field="sessions")
    if inp.prefix_groups > 1 and not inp.shared_prefix_tokens:
        raise InputError("--prefix-groups counts different shared prefixes: give --shared-prefix-tokens too",
                         field="prefix_groups")
    if inp.shared_prefix_tokens > inp.input_tokens:
        raise InputError(f"--shared-prefix-tokens {inp.shared_prefix_tokens:,} is longer than the prompt "
                         f"(--input-tokens {inp.input_tokens:,}); the shared prefix is part of it",
                         field="shared_prefix_tokens")
    if inp.tp is None and inp.pp is None:
        given = [f for f in PINNED_ONLY if getattr(inp, f) not in (None, False)]
        if given:
            flag = "--" + given[0].replace("_", "-")
            value = getattr(inp, given[0])
            as_given = flag if isinstance(value, bool) else f"{flag} {value}" if isinstance(value, str) \
                else f"{flag} {value:g}"
            runtime = inp.runtime or "NAME"
            raise InputError(f"{flag} applies to one pinned deployment: add --tp (and one --gpu and "
                             "--runtime)", field=given[0],
                             hint=f"e.g. --gpu 'H100 SXM' --runtime {runtime} --tp 1 {as_given}")
    check_pools(inp)


# the options that describe one pinned deployment (services/pinned.py), not a search
PINNED_ONLY = ("requests", "warm_requests", "random_lengths", "length_distribution", "max_output_tokens",
               "max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization", "max_prefill_tokens",
               "attention_dp", "expert_parallel", "max_model_len", "prefill_workers", "decode_workers",
               "prefill_tp", "decode_tp", "prefill_dp", "decode_dp", "prefill_batch_size",
               "decode_batch_size", "scheduler_recv_interval", "cuda_graph_max_bs",
               "attention_dp_timeout_iters", "enable_mixed_chunk")
# what shapes one pool of a pinned disaggregated deployment (pool_shape); given without the workers, refused
POOL_OPTIONS = ("tp", "dp", "batch_size")


def pd_pinned(inp: DeployInput) -> bool:
    """Whether the question pins a disaggregated deployment (--prefill-workers / --decode-workers)."""
    return inp.prefill_workers is not None or inp.decode_workers is not None


def pool_shape(inp: DeployInput, role: str) -> tuple[int, int, int, int]:
    """(workers, tensor-parallel ranks, attention-DP groups, sequence cap per group; 0: the engine's) of the
    `role` ("prefill" | "decode") pool of a pinned disaggregated deployment, from its own options, else the
    pin's (--tp, --attention-dp, --max-num-seqs)."""
    workers = int(getattr(inp, f"{role}_workers") or 0)
    tp = int(getattr(inp, f"{role}_tp") or inp.tp or 1)
    dp = int(getattr(inp, f"{role}_dp") or inp.attention_dp or 1)
    cap = int(getattr(inp, f"{role}_batch_size") or inp.max_num_seqs or 0)
    return workers, tp, dp, cap


def check_pools(inp: DeployInput) -> None:
    """The pools of a pinned disaggregated deployment: both given, each worker's attention groups a divisor
    of its ranks; a benchmark run (--requests) a closed loop of --users (core/disagg.py benchmark), not a
    stage of arrivals."""
    if not pd_pinned(inp):
        given = [f"{role}_{o}" for role in ("prefill", "decode") for o in POOL_OPTIONS
                 if getattr(inp, f"{role}_{o}") is not None]
        if given:
            flag = "--" + given[0].replace("_", "-")
            raise InputError(f"{flag} shapes a pool of a disaggregated deployment: give --prefill-workers "
                             "and --decode-workers with it", field=given[0])
        return
    if inp.prefill_workers is None or inp.decode_workers is None:
        raise InputError("a disaggregated deployment has both pools: give --prefill-workers and "
                         "--decode-workers", field="prefill_workers" if inp.prefill_workers is None
                         else "decode_workers")
    if inp.requests is not None and inp.users is None:
        raise InputError("--requests with --requests-per-s times a stage of arrivals on one pool of "
                         "replicas; a disaggregated deployment times a closed-loop run (--requests at "
                         "--users) or its steady state: give --users, or leave out --requests",
                         field="requests")
    if inp.expert_parallel is not None:
        raise InputError("--expert-parallel: a disaggregated worker with attention groups (--prefill-dp, "
                         "--decode-dp) runs its experts over all its ranks; leave it out",
                         field="expert_parallel")
    for role in ("prefill", "decode"):
        _, tp, dp, _ = pool_shape(inp, role)
        if tp % dp:
            raise InputError(f"a {role} worker's {dp} attention groups do not divide its {tp} "
                             f"tensor-parallel ranks: give --{role}-dp a divisor of {tp}", field=f"{role}_dp")


# --- what is searched ------------------------------------------------------------------------------------

@record
class Setting:
    """Runtime × quantization × KV type × (llama.cpp / Ollama) slots: one memory estimate."""

    ctx: Any  # services.plan.Context
    mem: Memory
    slots: int  # llama.cpp/Ollama parallel slots; 0 for paged runtimes
    quality: str | None
    kv_flag: str | None  # the cache type as the runtime spells it (None: its default)

    @cached_property
    def built(self) -> dict[tuple, Any]:
        """What _replica built on this setting (its plan context and memory never change), by the rest of
        its arguments: a search builds the replica of a card × split × sequences once, not once a shape."""
        return {}

    @cached_property
    def margins(self) -> dict[tuple[int, float], int]:
        """The error bar of this setting's memory on a set (plan's _margin), by (cards, KV copies): every card
        kind of the same memory, and every attention-DP layout of a count, asks for the same ones."""
        return {}

    def margin(self, count: int, copies: float) -> int:
        """plan's _margin of this setting's memory on `count` cards holding `copies` of the cache, kept."""
        hit = self.margins.get((count, copies))
        if hit is None:
            from .plan import _margin

            hit = self.margins[count, copies] = _margin(self.ctx, self.mem, count, copies)
        return hit

    @cached_property
    def attention_groups(self) -> dict[int, Setting]:
        """This setting as `dp` attention groups hold it (expert_parallel_memory), by dp: one setting for
        every card and count of that layout, so that their replicas share what `built` keeps."""
        return {}

    @cached_property
    def key(self) -> tuple[Any, ...]:
        """What makes this setting, as a key that holds values, not an object's id() (a setting garbage-
        collected after a search frees its id for a later one, which would hit the stale entry): the plan
        input its context was resolved from (runtime, quantization, KV type, context, slots, --speculative),
        the server cap a pinned one pins, its memory estimate (an attention-DP layout's own:
        attention_groups), its slots and KV flag. Its context, quality and memos follow from them.
        (A Setting itself hashes by value, but its context carries a list, so it is no key.)"""
        return (self.ctx.inp, self.ctx.server_max_num_seqs, self.mem, self.slots, self.kv_flag)


@record
class Candidate:
    setting: Setting
    gpu: Gpu
    per_node: int
    nodes: int
    tp: int
    pp: int
    option: fitting.Option
    seqs: int  # sequences scheduled at once: the runtime's cap, the KV pool's or the slots
    price: float | None  # one replica, before the volume discount of the whole fleet
    kv_tokens: int  # KV pool per replica, tokens (pessimistic: after the need's error bar)
    margin_bytes: int  # the need's error bar (data/accuracy.toml), kept free
    inp: DeployInput
    chunk_tokens: int = 0  # token budget of a step; 0: the runtime's default (the plan's prefill chunk)
    attention_dp: int = 1  # data-parallel attention groups (core/speed.py Machine.attention_dp)
    ep: int = 1  # ranks the routed experts are sharded over (core/moe_parallel.py; 1: tensor parallel)
    # the engine's own sequence cap where it schedules fewer (`seqs`, its KV pool's): a pinned deployment
    # started with its --max-num-seqs or the engine's default (timed), which sizes its CUDA graphs
    # (core/serving.py eager_s); 0: `seqs` (the search launches the engine with --max-num-seqs seqs)
    engine_seqs: int = 0

    @property
    def cards(self) -> int:
        return self.per_node * self.nodes

    @cached_property
    def replica(self) -> sv.Replica:
        """Built when first timed: most candidates are never timed (search stops on price)."""
        # a runtime that does not pipeline runs a layer split one card at a time, as one stage
        # (services/served.py replica): over 1, 2, 4 or 8 cards it is one replica
        stages = self.pp if self.setting.ctx.runtime.pipeline_parallel else 1
        key = ("replica", self.inp.input_tokens, self.inp.output_tokens, self.gpu, self.tp, stages,
               self.seqs, self.chunk_tokens, self.attention_dp, self.ep, self.inp.scheduler_recv_interval,
               self.inp.cuda_graph_max_bs, self.inp.attention_dp_timeout_iters, self.engine_seqs)
        built = self.setting.built
        if key not in built:
            built[key] = _replica(self.inp, self.setting, self.gpu, self.tp, stages, self.seqs,
                                  self.chunk_tokens, self.attention_dp, self.ep, self.engine_seqs)
        return built[key]  # type: ignore[no-any-return]

    @cached_property
    def shape(self) -> tuple[Any, ...]:
        """This candidate as a key whatever load its `inp` carries (the --cards search with no load hands on
        copies of the candidates at the users found: replace(c, inp=...)): its setting's key and every other
        field, values, not id()s (Setting.key). The P/D timings (PdTimed) are keyed by it."""
        return (self.setting.key, *(getattr(self, name) for name in _SHAPE_FIELDS))


# every field of a Candidate but its setting (Setting.key in its place) and its load (Candidate.shape)
_SHAPE_FIELDS = tuple(f.name for f in fields(Candidate) if f.name not in ("setting", "inp"))


@record
class Result:
    cand: Candidate
    replicas: int
    served: sv.Served
    monthly_usd: float | None
    cost_per_million_usd: float | None
    served_tokens_per_s: float  # all replicas, at this load
    meets: bool  # the targets hold at the pessimistic end of the likely range (likely_misses)
    misses: dict[str, float]  # target → achieved / target (> 1 misses)
    tight: bool = False  # the prediction meets the targets, its pessimistic end does not
    # the production features it uses (_features), whose serving error bands widen its likely range
    features: tuple[str, ...] = ()

    @property
    def count(self) -> int:
        return self.cand.cards * self.replicas


@record
class Targets:
    ttft_s: float
    tpot_s: float
    given: dict[str, float]


def targets(inp: DeployInput) -> Targets:
    tpot_ms = inp.tpot_ms or (1000 / inp.tokens_per_s_per_user if inp.tokens_per_s_per_user
                              else DEFAULT_TPOT_MS)
    ttft_ms = inp.ttft_ms or DEFAULT_TTFT_MS
    return Targets(ttft_ms / 1e3, tpot_ms / 1e3, {"ttft_ms": ttft_ms, "tpot_ms": tpot_ms})


def _runtimes(inp: DeployInput, resolved: Any, any_runtime: bool = False) -> list[RuntimeProfile]:
    reg = default_runtimes()
    if inp.runtime:
        rt = reg.get(inp.runtime)
        if not rt.serves and not any_runtime:
            raise InputError(f"deploy plans servers: {', '.join(r.id for r in servers())}; {rt.name} is "
                             "not one", field="runtime", hint="pick one of those or leave --runtime out")
        return [rt]
    checkpoint_quant = inp.quant is not None and not gguf_holds(default_quants().get(inp.quant))
    ollama_only = resolved.checkpoint is None  # 'deepseek-v3' is also the checkpoint's id: every runtime
    if (resolved.gguf or resolved.tag is not None or resolved.ollama) and not checkpoint_quant \
            and ollama_only:
        return servers("gguf")
    return servers()


def _quants(inp: DeployInput, rt: RuntimeProfile, resolved: Any) -> list[str]:
    if inp.quant:
        return [inp.quant]
    if native := resolved.native_file(rt):
        return [native]  # the GGUF file its users download for the checkpoint (llama.cpp: gpt-oss MXFP4_MOE)
    if resolved.checkpoint is not None and rt.weights_format != "gguf":
        resolved = resolved.checkpoint  # the checkpoint runtimes serve the checkpoint the name is the id of
    if resolved.gguf or resolved.tag is not None or resolved.quant_hint:
        return [resolved.quant_hint or "Q4_K_M"]
    if rt.weights_format == "gguf":
        return list(GGUF_QUANTS)
    own = resolved.model.dtype if resolved.model.dtype in ("bf16", "fp16") else "bf16"
    return [own, *[q for q in HF_QUANTS if q != own and _servable(q, rt, resolved.model)]]


def _servable(quant: str, rt: RuntimeProfile, m: Any) -> bool:
    """Whether the launch line can serve the model in `quant` from the checkpoint it names (the model's
    own): the checkpoint's own format, or one the engine quantizes to on load (its adapter's ONLINE_QUANT:
    vLLM and SGLang `--quantization fp8`). Any other format needs a checkpoint quantized to it, which the
    catalog does not name: the line would name the 16-bit one, which need not fit the plan."""
    from ..runtimes import adapter

    return quant == m.native_quant or quant in getattr(adapter(rt), "ONLINE_QUANT", {})


def _unservable(inp: DeployInput, resolved: Any, rts: list[RuntimeProfile]) -> list[str]:
    """The default search's formats left out for want of a checkpoint (_servable), as notes."""
    if inp.quant or resolved.gguf or resolved.tag is not None or resolved.quant_hint:
        return []
    out: dict[str, list[str]] = {}
    for rt in rts:
        if rt.weights_format != "gguf":
            for q in HF_QUANTS[1:]:
                if not _servable(q, rt, resolved.model):
                    out.setdefault(q, []).append(rt.id)
    notes = []
    for q, ids in out.items():
        quant = default_quants().get(q)
        notes.append(f"{quant.name} on {', '.join(ids)}: the catalog names no checkpoint of "
                     f"{resolved.model.name} in it and the engine does not quantize to it on load (--quant "
                     f"{(quant.aliases or (q,))[0]} plans one, to serve from such a checkpoint)")
    return notes


def _kv_options(inp: DeployInput, rt: RuntimeProfile) -> list[str | None]:
    if inp.kv_dtype:
        return [inp.kv_dtype]
    return [None, rt.kv_cache_8bit] if rt.kv_cache_8bit else [None]


def _spec_options(inp: DeployInput, rt: RuntimeProfile) -> list[dict[str, Any]]:
    """--speculative: searched off and on where the runtime drafts that way, a tree too where one is asked
    (services/speculative.py supports), off alone elsewhere."""
    from .speculative import asks_tree, method_of, supports

    off: dict[str, Any] = {}
    if not inp.speculative or not supports(rt, method_of(inp.speculative), asks_tree(inp)):
        return [off]
    return [off, {"speculative": inp.speculative, "num_speculative_tokens": inp.num_speculative_tokens,
                  "acceptance": inp.acceptance, "speculative_topk": inp.speculative_topk,
                  "speculative_draft_tokens": inp.speculative_draft_tokens}]


def _quality(q: Quant) -> str | None:
    """What cardfit knows of the quality cost: GGUF perplexity (data/quality.toml), else nothing."""
    from ..catalog.loader import builtin

    quality = builtin("quality.toml")
    ppl = {p["name"].upper(): p["ppl"] for p in quality["perplexity"]}
    base = ppl.get("F16")
    name = q.name.upper()
    if isinstance(q, QuantType) and q.id in ("bf16", "fp16"):
        return "reference (16-bit)"
    if name in ppl and base:
        return f"perplexity {ppl[name] / base - 1:+.1%} vs F16 (Llama 3 8B, llama.cpp)"
    return None


def is_gguf(q: Quant) -> bool:
    return isinstance(q, GgufMix) or q.kind == "gguf"


def _plan_input(inp: DeployInput, **kw: Any) -> Any:
    import dataclasses

    from .inputs import PlanInput

    base = {f.name: getattr(inp, f.name) for f in dataclasses.fields(ModelInput)}
    return PlanInput(**base, allow_long_context=True, **kw)


# The production features a deployment may use, in the order `cardfit validate` prints their errors
# (validation/features.py tags each record's question with them) and data/accuracy.toml `[[feature_range]]`
# names them: a served figure of a deployment using one takes the widest of its runtime's range and theirs.
FEATURES = ("dp_ep", "disaggregated", "speculative", "kv_offload", "prefix_reuse")


def features(dp: int = 1, ep: int = 1, disaggregated: bool = False, speculative: bool = False,
             kv_offload_gb: float = 0.0, shared_prefix_tokens: int = 0, turns: int = 1) -> tuple[str, ...]:
    """The production features (FEATURES order) of a deployment, from the fields its JSON carries: attention
    data-parallel groups `dp` and expert-parallel ranks `ep` (any pool's), separate prefill/decode pools,
    speculative decoding, a host KV tier (GB), and the workload's reuse (a shared prefix, turns). The one
    rule: a validation record's question (validation/features.py) and a candidate of deploy's search
    (_features) are both tagged by it."""
    on = (max(int(dp or 1), int(ep or 1)) > 1, bool(disaggregated), bool(speculative),
          float(kv_offload_gb or 0) > 0, int(shared_prefix_tokens or 0) > 0 or int(turns or 1) > 1)
    return tuple(f for f, yes in zip(FEATURES, on, strict=True) if yes)


def _features(inp: DeployInput, c: Candidate, offload_gb: float = 0.0, pools: Candidate | None = None,
              ) -> tuple[str, ...]:
    """features() of candidate `c` serving `inp` with a host tier of `offload_gb` (the one it runs with:
    _offload_gb); `pools`: the prefill worker of a disaggregated deployment whose decode worker is `c`. The
    workload's reuse counts where the runtime caches prefixes (elsewhere it is served as no reuse: its
    prefix_hit_rate is 0, and the prediction does not model it)."""
    shapes_ = (c,) if pools is None else (pools, c)
    reuses = c.setting.ctx.runtime.prefix_caching
    return features(max(x.attention_dp for x in shapes_), max(x.ep for x in shapes_), pools is not None,
                    getattr(c.setting.ctx, "speculation", None) is not None, offload_gb,
                    inp.shared_prefix_tokens if reuses else 0, inp.turns if reuses else 1)


def reuse_of(inp: DeployInput) -> ru.Reuse:
    """The reuse the question states (core/reuse.py): its shared prefix, sessions and prefix groups, and for a
    benchmark run (--requests) its size and the prompts sent before it (--warm-requests), whose first
    request of each group finds nothing cached."""
    return ru.Reuse(inp.shared_prefix_tokens, inp.turns, inp.prefix_groups, int(inp.requests or 0),
                    int(inp.warm_requests or 0) if inp.requests else 0)


def prompt_tokens(inp: DeployInput) -> int:
    """The mean prompt a request sends: --input-tokens, and over a session of --turns its history so far."""
    last = _LAST_PROMPT  # a search asks it of one input thousands of times
    if last[0] is inp:
        return last[1]
    n = round(ru.prompt_tokens(inp.input_tokens, inp.output_tokens, reuse_of(inp)))
    globals()["_LAST_PROMPT"] = (inp, n)  # one assignment: threads that share it read either pair whole
    return n


_LAST_PROMPT: tuple[Any, int] = (None, 0)


def request(inp: DeployInput) -> sv.Workload:
    """One request of the workload (means), as services/served.py takes it."""
    return sv.Workload(prompt_tokens(inp), inp.output_tokens)


def shared_tokens(inp: DeployInput, rt: RuntimeProfile) -> int:
    """The prompt tokens the KV pool holds once for every sequence: the shared prefix, where the runtime
    caches prefixes (core/reuse.py)."""
    return inp.shared_prefix_tokens if rt.prefix_caching else 0


def prefix_layouts(inp: DeployInput, rt: RuntimeProfile) -> tuple[tuple[int, int], ...]:
    """How the pool may hold the shared prefixes (core/reuse.py prefix_layouts): (tokens held once for every
    sequence, prefix tokens each sequence holds beyond kv_held); nothing held once without prefix caching."""
    if not rt.prefix_caching:
        return ((0, 0),)
    return ru.prefix_layouts(reuse_of(inp))


def _in_flight(inp: DeployInput) -> int:
    """Tokens a sequence holds on average while it decodes: the prompt and half the answer."""
    return served.in_flight(request(inp))


def kv_held(inp: DeployInput, rt: RuntimeProfile, admission: bool = True) -> int:
    """The KV tokens one sequence takes from the pool, which sizes the sequences in flight: what it holds on
    average (prompt and half the answer: vLLM and SGLang allocate blocks as tokens arrive and preempt when
    the pool runs out), plus what the engine's admission keeps free for its answer still to come
    (`answer_reserve`: SGLang), or the whole request (prompt and answer) for a runtime whose admission
    reserves it before the request starts (TensorRT-LLM's GUARANTEED_NO_EVICT, `kv_reserve_whole`): a
    request beyond those waits in the queue, however few tokens the running ones hold yet.
    `admission=False`: the tokens held alone, for a P/D decode worker, which admits by its own reserve
    (core/disagg.py admitted)."""
    if rt.kv_reserve_whole:
        return prompt_tokens(inp) + inp.output_tokens - shared_tokens(inp, rt)
    return _in_flight(inp) - shared_tokens(inp, rt) + (answer_reserve(inp, rt) if admission else 0)


def answer_reserve(inp: DeployInput, rt: RuntimeProfile) -> int:
    """The tokens a running request's admission reserve keeps free on average in the steady state: the
    runtime's share (`kv_reserve_answer_share`, times `kv_reserve_dp_attention_factor` where the question
    asks for attention data parallel) of the answer tokens it has still to decode, each clipped at
    `kv_reserve_answer_clip`, over a remainder spread evenly from the whole answer to none (SGLang's
    PrefillAdder at its decayed new_token_ratio: data/runtimes.toml kv_reserve_answer_source). 0 where the
    runtime keeps none. A searched layout whose attention-DP groups the question does not name takes the
    share without the factor (the larger reserve)."""
    share = rt.kv_reserve_answer_share
    if not share:
        return 0
    if int(inp.attention_dp or 1) > 1:
        share *= rt.kv_reserve_dp_attention_factor
    o = max(int(inp.output_tokens), 0)
    clip = rt.kv_reserve_answer_clip or o
    # the mean of min(r, clip) over r uniform on [0, o]
    mean = o / 2 if o <= clip else (clip * (o - clip) + clip * clip / 2) / o
    return int(share * mean)


# The standard normal's 0.99 quantile: with a spread given, the launch line admits the 99th percentile
# prompt and answer of the log-normal through the stated mean and p90 (core/serving.py lognormal_cv2).
Z99 = 2.3263478740408408


def longest(mean: int, p90: int | None) -> int:
    """The longest prompt (answer) the launch line admits: the stated length where no spread is given (every
    request taken at it), else the 99th percentile of the log-normal with this mean and p90 (at least p90):
    fewer than 1 request in 100 is longer, and the engine refuses those."""
    if p90 is None or p90 <= mean:
        return max(mean, p90 or 0)
    sigma = math.sqrt(math.log1p(sv.lognormal_cv2(mean, p90)))
    mu = math.log(mean) - sigma * sigma / 2
    return max(p90, math.ceil(math.exp(mu + Z99 * sigma)))


def max_model_len(inp: DeployInput, trained: int = 0) -> int:
    """The context a replica is launched and sized for: the longest prompt plus the longest answer (longest),
    at most the model's trained maximum (`trained`; 0: none known)."""
    n = longest(inp.input_tokens, inp.input_tokens_p90) + longest(inp.output_tokens, inp.output_tokens_p90)
    n += _history(inp)
    return min(n, trained) if trained else n


def _history(inp: DeployInput) -> int:
    """The history the last turn of a session sends before its new tokens (--turns)."""
    return (inp.turns - 1) * (inp.input_tokens + inp.output_tokens)


def stated_len(inp: DeployInput) -> int:
    """The request as stated (p90s where given): beyond the trained maximum it is an input error."""
    return (inp.input_tokens_p90 or inp.input_tokens) + (inp.output_tokens_p90 or inp.output_tokens) + \
        _history(inp)


def settings(inp: DeployInput, any_runtime: bool = False) -> tuple[list[Setting], list[str]]:
    """Every runtime × quant × KV type (× slots) the model can be served with, each sized once."""
    from .plan import build_context, memory_for, needs_generator
    from .resolve import resolve

    resolved = resolve(inp)
    needs_generator(resolved.model)
    from .speculative import check as check_speculative

    check_speculative(inp, resolved.model)  # its rules on every runtime: one line, not each runtime left out
    length = stated_len(inp)
    if resolved.model.max_context and length > resolved.model.max_context:
        what = "a session's last turn" if inp.turns > 1 else "a request"
        raise InputError(f"{what} of {length:,} tokens is beyond {resolved.model.name}'s trained "
                         f"maximum of {resolved.model.max_context:,}", field="input_tokens",
                         hint="shorten the prompt or answer" + (", or take fewer --turns" if inp.turns > 1
                                                                else ""))
    length = max_model_len(inp, resolved.model.max_context)
    out: list[Setting] = []
    rts = _runtimes(inp, resolved, any_runtime)
    skipped: list[str] = _unservable(inp, resolved, rts)
    mismatched: list[tuple[RuntimeProfile, str]] = []  # a GGUF build asked of a checkpoint runtime, or back
    for rt in rts:
        for qname in _quants(inp, rt, resolved):
            if rt.weights_format == "gguf" and not gguf_holds(default_quants().get(qname)):
                mismatched.append((rt, default_quants().get(qname).name))
                continue  # FP8, AWQ/GPTQ, NF4: checkpoint formats a GGUF runtime does not load
            for kvd, spec in ((k, v) for k in _kv_options(inp, rt) for v in _spec_options(inp, rt)):
                slots = (0,) if rt.paged_kv else SLOTS  # llama-server -np / OLLAMA_NUM_PARALLEL
                for n in slots:
                    try:
                        ctx = build_context(_plan_input(inp, runtime=rt.named, quant=qname, kv_dtype=kvd,
                                                        context=length, batch=max(n, 1), **spec))
                    except CardfitError as e:
                        # a --kv-dtype one of the searched runtimes does not take (Ollama: no bf16) leaves
                        # that runtime out; the others still answer
                        kv_refused = isinstance(e, InputError) and e.field == "kv_dtype" and not inp.runtime
                        if (inp.quant or inp.kv_dtype or inp.runtime) and not kv_refused:
                            raise
                        skipped.append(f"{rt.id} {qname}: {e}")
                        break
                    if is_gguf(ctx.quant) != (rt.weights_format == "gguf"):
                        mismatched.append((rt, ctx.quant.name))
                        break  # GGUF builds run on llama.cpp / Ollama, the rest on the others
                    if ctx.sequences < n:
                        break  # Ollama runs this model with one slot (plan.py _ollama_slots): 1 was sized
                    out.append(Setting(ctx, memory_for(ctx, length), n, _quality(ctx.quant), kvd))
    if not out and mismatched and not skipped:
        raise _format_mismatch(resolved, *mismatched[0])
    if not out:
        raise InputError("no runtime serves this model with these options"
                         + (f" ({skipped[0]})" if skipped else ""), field="runtime")
    return out, skipped


def _format_mismatch(resolved: Any, rt: RuntimeProfile, quant: str) -> InputError:
    """Why no setting is left when every one asked is a GGUF build on a checkpoint runtime (an Ollama tag or
    --quant Q4_K_M with --runtime vllm) or a checkpoint format on llama.cpp / Ollama, and what to pass."""
    if rt.weights_format == "gguf":
        return InputError(f"{rt.name} serves GGUF builds, not {quant}", field="quant",
                          hint="pass a GGUF --quant (Q4_K_M, Q8_0, ...), or another --runtime (vllm, sglang)")
    name = resolved.model.name
    hf = getattr(resolved.model, "hf", "") or ""
    what = f"an Ollama tag ({quant}, a GGUF build)" if resolved.tag is not None else f"{quant} (a GGUF build)"
    fix = (f"name the checkpoint ({hf}) to serve {name} on {rt.id}" if hf and resolved.tag is not None
           else f"pass a checkpoint --quant (bf16, fp8, awq) for {rt.id}")
    # vLLM's GGUF loader is experimental (https://docs.vllm.ai/en/latest/features/quantization/gguf/), so the
    # line says what cardfit plans, not what the engine can load
    return InputError(f"cardfit plans {rt.name} on checkpoints, not {what}: deploy runs GGUF builds on "
                      "llama.cpp and Ollama",
                      field="runtime", hint=f"{fix}, or --runtime llama.cpp / ollama")


def _gpus(inp: DeployInput, ctx: Any) -> list[Gpu]:
    if inp.gpu:
        return [ctx.gpus.get(g) for g in inp.gpu]
    return [g for g in ctx.gpus if g.monthly_usd is not None and g.bandwidth_gbps]


def candidates(inp: DeployInput, sets: list[Setting]) -> list[Candidate]:
    """Every shape that holds the model by cardfit's own pessimistic bound (need + its error bar)."""
    from .plan import engine_defaults, memory_for, requires, split_cards

    out = []
    # what the settings of one runtime share: the cards searched (one catalog), each card's shapes
    cards: dict[int, list[Gpu]] = {}
    shaped: dict[tuple[RuntimeProfile, Gpu], list] = {}
    parts: dict[tuple, fitting.CardSet] = {}  # _checked's set parts, which the settings of a runtime share
    for each in sets:
        ctx, rt, m = each.ctx, each.ctx.runtime, each.ctx.model
        engine = ctx.engine
        # per layout of the shared prefixes (prefix_layouts): a sequence's own bytes, the bytes held once
        layouts = [(engine.kv_bytes(m, MemorySettings(context=kv_held(inp, rt) + own, sequences=1,
                                                      kv_dtype=each.mem.kv_dtype)) + _draft_kv(each, inp, rt),
                    engine.kv_bytes(m, MemorySettings(context=once, sequences=1,
                                                      kv_dtype=each.mem.kv_dtype)) if once else 0)
                   for once, own in prefix_layouts(inp, rt)]
        on_card: dict[tuple[int, int, bool], Setting] = {}
        split_of: dict[tuple[int, int, bool], Callable[[int], list[int] | None] | None] = {}
        if id(ctx.gpus) not in cards:
            cards[id(ctx.gpus)] = _gpus(inp, ctx)
        for gpu in cards[id(ctx.gpus)]:
            # the memory as the plan sizes it on this card (vLLM's profile-run defaults depend on the card)
            key = (*engine_defaults(ctx, gpu), gpu.unified_memory)
            if key not in on_card:
                on_card[key] = replace(each, mem=memory_for(ctx, each.mem.context, gpu))
                split_of[key] = _per_count(split_cards(ctx, on_card[key].mem))
            s = on_card[key]
            mem = s.mem
            if (
                rt.stacks
                and gpu.stack not in rt.stacks
                or mem.kv_dtype.startswith("fp8")
                and not gpu.supports(Feature.FP8)
            ):
                continue  # TensorRT-LLM is NVIDIA-only; an FP8 cache only where the card has FP8
            one_node = False  # a set inside one node holds it: no pipeline split across nodes is offered
            if (rt, gpu) not in shaped:  # the model is the same in every setting
                shaped[rt, gpu] = shapes(rt, gpu, m, ctx.rules.set_sizes, ctx.rules.node_size, inp.max_nodes)
            for shp in shaped[rt, gpu]:
                per_node, nodes, tp, pp, count = shp.per_node, shp.nodes, shp.tp, shp.pp, shp.cards
                if nodes > 1 and one_node:
                    break  # shapes come smallest first: the rest span nodes
                copies = engine.kv_copies(m, tp)
                # the set's error bar, as plan's: every card's overhead and workspace, each copy of the cache
                # (the same for every card of this memory at this count and copies)
                margin = s.margin(count, copies)
                opt = _checked(parts, ctx, mem, gpu, count, engine, requires(ctx.quant), margin, tp, pp,
                               split_of[key])
                if not opt.fits or opt.free_bytes < margin:
                    continue
                if rt.paged_kv:
                    pooled = _most_pooled(mem, opt, count, copies, rt, layouts, margin)
                    if pooled is None:  # one whole request must fit
                        continue
                    seqs, tokens = min(key[1], pooled[0]), pooled[1]  # the engine's cap on this card
                else:
                    seqs, tokens = s.slots, mem.context * s.slots
                if seqs < 1 or gpu.bandwidth_gbps is None:
                    continue
                out.append(Candidate(s, gpu, per_node, nodes, tp, pp, opt, seqs, opt.monthly_usd, tokens,
                                     margin, inp))  # the option's price: fitting.set_price of the set
                if nodes == 1 and pp == 1 and tp == count > 1 and expert_parallel(ctx):
                    out += _expert_parallel(inp, s, gpu, per_node, count, layouts, parts)
                one_node = one_node or nodes == 1
    return out


def _per_count(cards: Callable[[int], list[int] | None] | None) -> Callable[[int], list[int] | None] | None:
    """plan.split_cards' per-card needs of one memory, worked out once per card count: every card kind of
    the same memory (one key of candidates' on_card) asks for the same splits (fitting.check copies them)."""
    if cards is None:
        return None
    done: dict[int, list[int] | None] = {}

    def on(count: int) -> list[int] | None:
        if count not in done:
            done[count] = cards(count)
        return done[count]
    return on


def _draft_kv(s: Setting, inp: DeployInput, rt: RuntimeProfile) -> int:
    """A sequence's drafter cache beside its own (speculative decoding; 0 without): the pool holds both."""
    spec = getattr(s.ctx, "speculation", None)
    if spec is None or spec.method == "ngram":
        return 0
    from .speculative import kv_bytes_per_token

    return kv_bytes_per_token(spec, s.ctx, s.mem.kv_dtype) * kv_held(inp, rt)


def expert_parallel(ctx: Any) -> bool:
    """Whether deploy searches attention-DP + expert-parallel layouts for this plan: a mixture-of-experts
    model on an engine whose launch line places them (its adapter's EXPERT_PARALLEL: vLLM, SGLang,
    TensorRT-LLM, which runs attention DP over every rank: ATTENTION_DP_ALL_RANKS), unless the plan drafts
    with a method the engine refuses beside attention DP (its adapter's DRAFTS_WITHOUT_DP_ATTENTION)."""
    if not (ctx.model.is_moe and getattr(ctx.engine, "EXPERT_PARALLEL", False)):
        return False
    spec = getattr(ctx, "speculation", None)
    return spec is None or not refuses_dp_attention(ctx.engine, spec.method)


def refuses_dp_attention(engine: Any, method: str) -> bool:
    """Whether the engine (a runtime adapter) refuses drafting `method` beside attention data parallelism
    (its DRAFTS_WITHOUT_DP_ATTENTION: SGLang's n-gram and draft model, server_args.py)."""
    return method in getattr(engine, "DRAFTS_WITHOUT_DP_ATTENTION", ())


def expert_parallel_memory(s: Setting, dp: int) -> Memory:
    """The setting's memory as `dp` attention groups hold it (core/moe_parallel.py weights_bytes_in_all):
    weights_bytes over all the cards, the non-expert weights once per group."""
    share = sp.weight_shares(s.ctx.model, s.ctx.quant).experts
    return replace(s.mem, weights_bytes=moe_parallel.weights_bytes_in_all(s.mem.weights_bytes, share, dp))


def attention_dp_memory(s: Setting, dp: int) -> Memory:
    """The setting's memory as `dp` attention groups hold it without expert parallelism (SGLang's
    --enable-dp-attention alone, runtimes/launch.py attention_groups): the attention projections and the
    input embedding once per group, split over its tp / dp ranks (models/qwen3_moe.py Qwen3MoeAttention
    'attn_tp_size = get_parallel().attn_tp_size'; models/qwen2_moe.py Qwen2MoeModel embed_tokens
    'use_attn_tp_group=is_dp_attention_enabled()'), every other weight (the MoE layers' experts, a dense
    MLP, the output head without --enable-dp-lm-head) tensor-parallel over all the ranks once; PyPI wheel
    sglang 0.5.23, https://pypi.org/project/sglang/0.5.23/; TensorRT-LLM's enable_attention_dp the same
    (runtimes/trtllm.py ATTENTION_DP_ALONE). Where the model's attention share is not known, or on vLLM,
    whose DP engine cores of a MoE model share only the MoE layers (runtimes/vllm.py
    DP_GROUPS_ALL_BUT_EXPERTS), every weight but the routed experts once per group (expert_parallel_memory's,
    the larger)."""
    shares = sp.weight_shares(s.ctx.model, s.ctx.quant)
    grouped = shares.attention + shares.embed if shares.attention > 0 else 1.0 - shares.experts
    if getattr(s.ctx.engine, "DP_GROUPS_ALL_BUT_EXPERTS", False):
        grouped = 1.0 - shares.experts
    return replace(s.mem, weights_bytes=moe_parallel.weights_bytes_in_all(s.mem.weights_bytes, 1.0 - grouped,
                                                                           dp))


def _checked(parts: dict[tuple, fitting.CardSet], ctx: Any, mem: Memory, gpu: Gpu, count: int, engine: Any,
             need: Feature | None, margin: int, tp: int, pp: int,
             cards: Callable[[int], list[int] | None] | None = None) -> fitting.Option:
    """core/fit.py check of `mem` on `count` cards of `gpu` split tp × pp under `engine` (the plan's rules,
    --gpu-memory-utilization and model; `need`: the feature its quantization requires), its set's part
    (card_set: the budget, price and split, whatever the memory) kept in `parts` by everything card_set
    reads: the settings of one runtime and quantization (each KV type, each slot count) ask it of the same
    sets."""
    key = (engine, gpu, count, tp, pp, need, ctx.utilization, ctx.rules, ctx.model)
    part = parts.get(key)
    if part is None:
        part = parts[key] = fitting.card_set(gpu, count, engine, ctx.rules, requires=need,
                                             utilization=ctx.utilization, model=ctx.model, tp=tp, pp=pp)
    return fitting.check_set(mem, part, engine, ctx.rules, margin_bytes=margin, model=ctx.model, cards=cards)


def _expert_parallel(inp: DeployInput, s: Setting, gpu: Gpu, per_node: int, count: int,
                     layouts: list[tuple[int, int]],
                     parts: dict[tuple, fitting.CardSet] | None = None) -> list[Candidate]:
    """The attention-DP + EP layouts of `count` cards of one node (core/moe_parallel.py layouts): the
    non-expert weights once per attention group, the experts once over all cards, each group's KV cache its
    own (copied only over the group's own tensor-parallel ranks), each group's engine scheduling up to the
    engine's sequence cap on the card (plan.engine_defaults: vLLM V1's 1,024 on a big card). `layouts`: a
    sequence's own KV bytes and the shared prefixes' bytes held once,
    per prefix layout (candidates); each group's engine keeps its own prefix cache, so the bytes held once
    are held once per group."""
    from .plan import engine_defaults, requires

    ctx, rt, m = s.ctx, s.ctx.runtime, s.ctx.model
    out = []
    for lay in moe_parallel.layouts(count):
        if getattr(ctx.engine, "ATTENTION_DP_ALL_RANKS", False) and lay.dp != count:
            continue  # TensorRT-LLM: one attention group per rank
        if lay.dp not in s.attention_groups:
            s.attention_groups[lay.dp] = replace(s, mem=expert_parallel_memory(s, lay.dp))
        grouped = s.attention_groups[lay.dp]
        mem = grouped.mem
        copies = ctx.engine.kv_copies(m, lay.tp)
        margin = grouped.margin(count, copies)  # every card kind of this layout's memory asks the same
        # the layout's attention-DP ranks size the engine's reserve, and its --tp-size all `count` cards
        # (SGLang: runtimes/sglang.py reserved_mib), each group's cache copied over lay.tp
        engine = ctx.engine_at(lay.dp, server_tp=count)
        opt = _checked({} if parts is None else parts, ctx, mem, gpu, count, engine, requires(ctx.quant),
                       margin, lay.tp, 1)
        if not opt.fits or opt.free_bytes < margin:
            continue
        pooled = _most_pooled(mem, opt, count, copies, rt, layouts, margin, lay.dp)
        if pooled is None:
            continue
        seqs = min(engine_defaults(ctx, gpu)[1] * lay.dp, pooled[0])  # each group's engine: its card's cap
        if seqs < lay.dp:
            continue
        out.append(Candidate(grouped, gpu, per_node, 1, count, 1, opt, seqs, opt.monthly_usd,
                             pooled[1], margin, inp, attention_dp=lay.dp, ep=lay.ep))
    return out


def _most_pooled(mem: Memory, opt: fitting.Option, count: int, copies: float, rt: RuntimeProfile,
                 layouts: Sequence[tuple[int, int]], margin: int = 0, caches: int = 1
                 ) -> tuple[int, int] | None:
    """The KV pool (kv_pool) under the prefix layout that admits the most sequences (None: none fits).
    `layouts`: per layout of the shared prefixes (prefix_layouts), a sequence's own KV bytes and the bytes
    held once; `caches`: the prefix caches the set keeps, one per attention data-parallel group, each
    holding its own copy of the prefixes its requests read: each group's engine schedules its own requests
    in its own KV cache (vLLM: "each DP rank is deployed as a separate 'core engine' process",
    https://docs.vllm.ai/en/latest/serving/data_parallel_deployment/; TensorRT-LLM: "multiple attention DP
    ranks run within a single worker, each with its own KV cache", NVIDIA Dynamo, "DP Rank Routing",
    https://docs.nvidia.com/dynamo/additional-resources/tensor-rt-llm-details/dp-rank-routing; SGLang's DP
    attention, LMSYS "SGLang v0.4", https://lmsys.org/blog/2024-12-04-sglang-v0-4/). Requests spread over
    the groups without regard to their prefix (no prefix-aware routing is modelled: core/reuse.py)."""
    pools = (kv_pool(mem, opt, count, copies, rt, seq_bytes, margin, once_bytes * caches)
             for seq_bytes, once_bytes in layouts)
    return max((p for p in pools if p is not None), key=lambda p: p[0], default=None)


def kv_pool(mem: Memory, opt: fitting.Option, count: int, copies: float, rt: RuntimeProfile, per_seq: int,
            margin: int = 0, shared_bytes: int = 0) -> tuple[int, int] | None:
    """A paged runtime's KV pool on a set, once the weights, every card's fixed bytes and `margin` (the need's
    error bar; 0 for the point estimate) are in: (sequences whose tokens in flight fit, tokens per copy), or
    None when not even one whole request of `mem.context` tokens fits (the engine refuses to start).
    `shared_bytes`: a prompt prefix every sequence shares, held once (prefix caching) beside their own
    `per_seq`."""
    pool = fitting.kv_room(mem, opt.budget_bytes, count) - margin
    if rt.kv_free_fraction:
        pool = int(pool * rt.kv_free_fraction)
    if pool < mem.kv_cache_bytes * copies:
        return None
    return (int(max(pool - shared_bytes * copies, 0) // max(per_seq * copies, 1)),
            int(pool / copies / max(mem.kv_cache_bytes / max(mem.context, 1), 1)))


def _replica(inp: DeployInput, s: Setting, gpu: Gpu, tp: int, pp: int, seqs: int,
             chunk_tokens: int = 0, attention_dp: int = 1, ep: int = 1, engine_seqs: int = 0) -> sv.Replica:
    """One replica, built as plan, speed and breakeven build theirs (services/served.py), with the constants
    of the kernels its engine release ran where they differ from the current release's (older_kernels)."""
    older = older_kernels(inp, s, gpu, tp)
    if older:
        from ..core.constants import beside, constants

        with constants(beside(older)):
            return _built_replica(inp, s, gpu, tp, pp, seqs, chunk_tokens, attention_dp, ep, engine_seqs)
    return _built_replica(inp, s, gpu, tp, pp, seqs, chunk_tokens, attention_dp, ep, engine_seqs)


def older_kernels(inp: DeployInput, s: Setting, gpu: Gpu, tp: int) -> dict[str, float]:
    """The constants of the kernels the setting's engine release ran (services/pinned.py older_kernels), for
    this load: its scheduling (V0 chunks its prompts or not by the context it is started with: a pinned
    deployment's --max-model-len, else V0's own default; the launch line's in a search)."""
    from . import pinned

    rt, m = s.ctx.runtime, s.ctx.model
    first = prefill_first(inp, s)
    return pinned.older_kernels(rt, gpu, m, str(inp.quant or s.ctx.quant.id),
                                inp.input_tokens + inp.output_tokens // 2, tp, not first,
                                inp.max_model_len or 0)


def prefill_first(inp: DeployInput, s: Setting) -> bool:
    """Whether the setting's engine release schedules a waiting prompt before its running decodes, in a step
    of its own (services/pinned.py schedule: runtimes.toml prefill_first, vLLM V0's chunking rule, SGLang's
    --enable-mixed-chunk), started with the pinned deployment's --max-model-len, else V0's own default, or the
    launch line's context in a search."""
    from . import pinned

    started = inp.max_model_len or (None if pinned.pins(inp) else s.mem.context)
    return pinned.schedule(s.ctx.runtime, s.ctx.model, inp.max_num_batched_tokens, started,
                           inp.enable_mixed_chunk)[1]


def _built_replica(inp: DeployInput, s: Setting, gpu: Gpu, tp: int, pp: int, seqs: int,
                   chunk_tokens: int = 0, attention_dp: int = 1, ep: int = 1,
                   engine_seqs: int = 0) -> sv.Replica:
    from ..runtimes.launch import attention_groups
    from .plan import _machine, engine_defaults

    w = request(inp)
    built = s.built  # the load other replicas on this setting share
    if (w, "load") not in built:
        built[w, "load"] = served.load(s.ctx, s.mem, w)
    # the card × tp machine, which every setting of this runtime and quantization shares (plan's memo)
    whole, mc = built[w, "load"], _machine(s.ctx, gpu, tp, 0.0)
    if attention_dp > 1:
        # vLLM's DP engine cores without EP hold every weight but the routed experts as their own
        # (runtimes/vllm.py DP_GROUPS_ALL_BUT_EXPERTS)
        mc = replace(mc, attention_dp=attention_dp, expert_parallel=ep,
                     dp_holds_all_but_experts=getattr(s.ctx.engine, "DP_GROUPS_ALL_BUT_EXPERTS", False))
    if inp.cuda_graph_max_bs and gpu.stack in s.ctx.runtime.graph_stacks:
        # a pinned deployment's --cuda-graph-max-bs in place of the engine's own cap (catalog/runtimes.py
        # graph_max_batch): a larger decode batch launches every kernel (core/speed.py per_layer_s)
        mc = replace(mc, graph_max_batch=int(inp.cuda_graph_max_bs))
    # the step budget the engine runs with on this card, the one its memory was sized for (vLLM V1: 2048
    # tokens on an A100 or a card under 70 GiB, 8192 on the others); where the line runs attention groups
    # (runtimes/launch.py attention_groups: with expert parallelism, or SGLang's attention DP alone) each
    # group's scheduler takes its share of the server's (dp_total: vLLM and TensorRT-LLM the whole, SGLang a
    # 1/dp whether or not EP is on: arg_groups/parallel_hook.py lines 314-332 'if
    # attn_dp_enabled_of(...)': 'chunked_prefill_size=cfg.chunked_prefill_size // cfg.attn_dp_size', PyPI
    # wheel sglang 0.5.23, https://pypi.org/project/sglang/0.5.23/)
    groups = attention_groups(s.ctx.engine, attention_dp, ep)
    budget = dp_total(s.ctx.runtime, "max_num_batched_tokens", chunk_tokens or engine_defaults(s.ctx, gpu)[0],
                      groups)
    r = served.replica(s.ctx, whole, mc, w, pp, seqs, budget, engine_seqs)
    if prefill_first(inp, s):  # its prompt steps carry no decodes (core/serving.py prompt_share_s)
        r = replace(r, prefill_first=True)
    if inp.scheduler_recv_interval:  # a pinned SGLang deployment's --scheduler-recv-interval
        r = replace(r, recv_interval=int(inp.scheduler_recv_interval))
    if inp.attention_dp_timeout_iters and attention_dp > 1:  # TensorRT-LLM's attention-DP balancing
        r = replace(r, adp_timeout_iters=int(inp.attention_dp_timeout_iters))
    return _interned(r)


def dp_total(rt: RuntimeProfile, setting: str, value: int, dp: int) -> int:
    """A replica's limit over its `dp` attention data-parallel groups when its server is started with `value`
    for an engine setting (`max_num_batched_tokens`, `max_num_seqs`; 0: the engine's default, kept): each
    group's engine its own share (runtimes/base.py per_dp_rank) times the groups. vLLM's DP ranks ("each DP
    rank is deployed as a separate 'core engine' process", docs/serving/data_parallel_deployment.md: its own
    scheduler, --max-num-seqs and --max-num-batched-tokens) and TensorRT-LLM's attention-DP ranks
    (max_batch_size, max_num_tokens per rank, as aiconfigurator's generator writes them and its silicon
    sample's concurrency = batch_size x attention_dp_size: validation/aic_sample.py) take the whole setting
    each; SGLang divides it (runtimes/sglang.py DP_DIVIDED). The step budget the memory is sized for stays
    the server's (SGLang sizes its reserve before it divides the chunk)."""
    from ..runtimes import adapter

    if dp <= 1 or value <= 0:
        return value
    return adapter(rt).per_dp_rank(setting, value, dp) * dp


# Equal replicas are one object: the memos of core/serving.py (step_s) and of this module (_solo_of,
# _fewest_of) then find a replica by identity, not by comparing its records field by field (a llama.cpp
# layer split over 1, 2, 4 or 8 cards, or llama.cpp and Ollama at the same slots, is one replica).
@lru_cache(maxsize=4096)
def _interned(r: sv.Replica) -> sv.Replica:
    return r


# --- timing and choosing -----------------------------------------------------------------------------

def _workload(inp: DeployInput, replicas: int, scale: float = 1.0) -> sv.Workload:
    cv2 = sv.lognormal_cv2(inp.output_tokens, inp.output_tokens_p90) if inp.output_tokens_p90 else 0.0
    users = inp.users * scale / replicas if inp.users is not None else None
    rate = inp.requests_per_s * scale / replicas if inp.requests_per_s is not None else None
    return sv.Workload(prompt_tokens(inp), inp.output_tokens, users, rate, cv2, prompts=prompt_spread(inp))


def prompt_spread(inp: DeployInput) -> tuple[tuple[float, float], ...]:
    """The requests by prompt length the question states (core/serving.py prompt_classes, Workload.prompts),
    which its p90 TTFT takes: a pinned stage of arrivals (--requests with --requests-per-s) that states how
    its benchmark draws the lengths (--random-lengths, --length-distribution: services/pinned.py
    length_law) the prompts it draws (core/serving.py varied, as a closed-loop run of the same law sends
    them; at most PROMPT_DRAWS of them), else the log-normal through --input-tokens and --input-tokens-p90
    (the law `longest` sizes the context with); none (every prompt the mean) where neither is given. The
    spread is of the request's own prompt: over --turns its history is the mean's."""
    from .pinned import is_stage, pins

    if pins(inp) and is_stage(inp) and (inp.random_lengths or inp.length_distribution):
        from .pinned import length_law

        law = length_law(inp, law_context(inp))
        if law is not None:
            n = min(int(inp.requests or 1), sv.PROMPT_DRAWS)
            drawn = sv.varied(inp.input_tokens, inp.output_tokens, n, law)[0]
            return sv.prompt_classes(inp.input_tokens, drawn=drawn)
    return sv.prompt_classes(inp.input_tokens, inp.input_tokens_p90)


def law_context(inp: DeployInput) -> int:
    """The context a pinned benchmark's lengths are drawn within (services/pinned.py length_law):
    --max-model-len, else the model's trained context (vLLM's default max_model_len); 0 unknown."""
    from ..catalog.models import default_models
    from .resolve import resolve

    model = default_models().find(inp.model) if inp.model else None
    if model is None:
        model = resolve(inp).model
    return int(inp.max_model_len or getattr(model, "max_context", 0) or 0)


def _misses(served: sv.Served, t: Targets) -> dict[str, float]:
    return {"ttft_ms": served.ttft_s / t.ttft_s, "tpot_ms": served.tpot_s / t.tpot_s}


def likely(served: sv.Served, runtime: str, replicas: int = 1,
           feats: tuple[str, ...] = ()) -> dict[str, list[float] | None]:
    """The range each served figure may really take: the 10th-90th percentile of predicted / measured on
    the serving records (out of sample, data/accuracy.toml serving_*), per runtime where it has enough;
    for a deployment using production features `feats` (features()), the widest of that range and those
    of the records using each feature (core/uncertainty.py band)."""
    return ranges(served.ttft_s, served.tpot_s, served.output_tokens_per_s * replicas, runtime, feats)


def ranges(ttft_s: float, tpot_s: float, tokens_per_s: float, runtime: str,
           feats: tuple[str, ...] = ()) -> dict[str, list[float] | None]:
    """likely() of three figures (TTFT p90 and TPOT in seconds, output tokens/s of the whole deployment)."""
    def one(v: float | None, figure: str) -> list[float] | None:
        r = value_range(v, figure, runtime, features=feats) if v is not None else None
        return [round(r[0], 1), round(r[1], 1)] if r else None

    return {"ttft_ms": one(_ms(ttft_s), "serving_ttft_ms"), "tpot_ms": one(_ms(tpot_s), "serving_tpot_ms"),
            "aggregate_tokens_per_s": one(round(tokens_per_s, 1), "serving_tokens_per_s")}


def likely_misses(served: sv.Served, t: Targets, runtime: str,
                  feats: tuple[str, ...] = ()) -> dict[str, float]:
    """achieved / target at the pessimistic end of the likely range (the prediction where no band)."""
    return {"ttft_ms": _pessimistic(served.ttft_s, "serving_ttft_ms", runtime, feats) / t.ttft_s,
            "tpot_ms": _pessimistic(served.tpot_s, "serving_tpot_ms", runtime, feats) / t.tpot_s}


@lru_cache(maxsize=4096)  # pure: a search asks it again of each served load it finds again (_served)
def _pessimistic(seconds: float, figure: str, runtime: str, feats: tuple[str, ...] = ()) -> float:
    """The high end of `likely`'s range of a time (as it rounds it), seconds; the time where no band."""
    ms = _ms(seconds)
    r = value_range(ms, figure, runtime, features=feats) if ms is not None else None
    return round(r[1], 1) / 1e3 if r else seconds


def _gpu_hits(inp: DeployInput, c: Candidate, w: sv.Workload, host_tokens: float = 0.0) -> ru.Hits | None:
    """The prefix-cache hits of a replica of `c` serving `w` (None: nothing reused, or a runtime without
    prefix caching). The sessions are --sessions (this replica's share), else a closed loop's users, all but
    those decoding waiting for their next turn; under arrivals the sessions in flight are those decoding (no
    time between turns is given)."""
    if not c.setting.ctx.runtime.prefix_caching or (inp.shared_prefix_tokens == 0 and inp.turns == 1):
        return None
    running = min(w.users, c.seqs) if w.users is not None else float(c.seqs)
    sessions = max(_share(inp, w) * inp.sessions, running) if inp.sessions else (w.users or running)
    # one prefix cache per attention group where the groups are engines of their own (_most_pooled): each
    # caches in its share of the pool (and of the replica's host tier) for its share of the sequences and
    # sessions, the requests spread equally over the groups
    caches = _prefix_caches(c)
    return ru.hits(inp.input_tokens, inp.output_tokens, reuse_of(inp), pool_tokens=c.kv_tokens / caches,
                   running=min(running, sessions) / caches, sessions=sessions / caches,
                   host_tokens=host_tokens / caches)


def _prefix_caches(c: Candidate) -> int:
    """The prefix caches a replica of `c` keeps: one per attention data-parallel group its line runs (each
    group's scheduler its own: launched_dp, with expert parallelism or SGLang's attention DP alone), else
    one."""
    return launched_dp(c)


def _share(inp: DeployInput, w: sv.Workload) -> float:
    """The share of the whole load one replica's workload `w` carries."""
    if w.users is not None and inp.users:
        return w.users / inp.users
    return (w.requests_per_s or 0.0) / inp.requests_per_s if inp.requests_per_s else 1.0


def _kv_bytes_per_token(c: Candidate) -> float:
    return c.setting.mem.kv_cache_bytes / max(c.setting.mem.context, 1)


def _copy_s_per_token(c: Candidate) -> float:
    """Copying one token's KV cache from host RAM: every card of the replica copies its share over its own
    host link (core/reuse.py host_link_gbps); inf where the catalog gives no link."""
    g = c.gpu
    link = ru.host_link_gbps(g.pcie_gen, g.interconnect, g.link_gbps)
    return ru.host_load_s(1.0, _kv_bytes_per_token(c), link * c.tp * c.pp) if link else math.inf


def _recompute_s_per_token(inp: DeployInput, c: Candidate) -> float:
    """Computing one prompt token again: the prefill of a lone request's whole prompt, per token."""
    n = prompt_tokens(inp)
    return sv.prefill_s(c.replica, sv.Workload(n, inp.output_tokens), 0.0) / max(n, 1)


def offload(inp: DeployInput, c: Candidate, w: sv.Workload) -> tuple[ru.Hits | None, ru.OffloadReason | None]:
    """The hits of a replica of `c` with the host tier where it helps (core/reuse.py offload_reason), and
    that verdict (None: no --kv-offload-gb, or a runtime without a host tier or prefix caching)."""
    base = _gpu_hits(inp, c, w)
    rt = c.setting.ctx.runtime
    if not inp.kv_offload_gb or not rt.host_kv_cache or not rt.prefix_caching:
        return base, None
    host = inp.kv_offload_gb * 1e9 / max(_kv_bytes_per_token(c), 1.0)
    with_host = _gpu_hits(inp, c, w, host)
    if base is None or with_host is None:
        return base, ru.OffloadReason.NO_REUSE
    reason = ru.offload_reason(with_host, base, _copy_s_per_token(c), _recompute_s_per_token(inp, c))
    return (with_host if reason is ru.OffloadReason.HELPS else base), reason


def hits(inp: DeployInput, c: Candidate, w: sv.Workload) -> ru.Hits | None:
    return offload(inp, c, w)[0]


def _reused(inp: DeployInput, c: Candidate, w: sv.Workload) -> sv.Workload:
    return _with_hits(c, w, hits(inp, c, w))


def _with_hits(c: Candidate, w: sv.Workload, h: ru.Hits | None) -> sv.Workload:
    """`w` with what the prefix cache serves of it on `c` (its hits `h`)."""
    return ru.with_hits(w, h, _copy_s_per_token(c) if h is not None and h.host_tokens else None)


def _best_cached(inp: DeployInput, c: Candidate) -> float:
    """The most a request can find cached on `c` (every reusable token): what the bounds of the search
    (_solo, _fewest_by_throughput) take, so that they stay bounds."""
    if not c.setting.ctx.runtime.prefix_caching:
        return 0.0
    return ru.reusable_tokens(inp.input_tokens, inp.output_tokens, reuse_of(inp))


def evaluate(inp: DeployInput, c: Candidate, replicas: int, t: Targets, scale: float = 1.0) -> Result:
    w = _workload(inp, replicas, scale)
    h = hits(inp, c, w)
    served = _served(c.replica, _with_hits(c, w, h))
    misses = _misses(served, t)
    predicted = served.stable and all(v <= 1 for v in misses.values())
    rt = c.setting.ctx.runtime.id
    feats = _features(inp, c, _tier_gb(inp, h))
    meets = predicted and all(v <= 1 for v in likely_misses(served, t, rt, feats).values())
    total = served.output_tokens_per_s * replicas
    price = fitting.set_price(c.gpu, c.cards * replicas, c.setting.ctx.rules)
    per_m = None
    if price is not None and total > 0:
        per_m = price / cost.capacity_millions(total, cost.HOURS_PER_MONTH)
    return Result(c, replicas, served, price, per_m, total, meets, misses, predicted and not meets, feats)


# Memoized on the replica and the load on it (frozen, hashable): the candidates that share a replica (a layer
# split over 1-8 cards, llama.cpp and Ollama at the same slots) are timed at the same replica counts, about
# half of a search's served loads.
@lru_cache(maxsize=4096)
def _served(r: sv.Replica, w: sv.Workload) -> sv.Served:
    return sv.serve(r, w)


def _limit(inp: DeployInput, c: Candidate) -> int:
    most = MAX_REPLICAS
    if inp.users is not None:  # a closed loop of N users has at most N requests in flight: replica N+1 idles
        most = min(most, math.ceil(inp.users))
    if inp.max_cards:
        most = min(most, inp.max_cards // c.cards)
    if inp.budget_usd_month is not None and c.price:
        most = min(most, int(inp.budget_usd_month // c.price) + 1)  # the discount may let one more in
    return most


def _fewest_replicas(inp: DeployInput, c: Candidate, t: Targets, lo: int, most: int) -> Result | None:
    """The smallest replica count ≥ lo that meets every target (more replicas: less load on each)."""
    if most < max(lo, 1):
        return None
    res = evaluate(inp, c, lo, t)
    if res.meets:
        return res
    hi = lo * 2
    while hi <= most and not (res := evaluate(inp, c, hi, t)).meets:
        lo, hi = hi, hi * 2
    if hi > most:
        res = evaluate(inp, c, most, t)
        if not res.meets:
            return None
        hi = most
    timed = {hi: res}

    def meets(n: int) -> bool:
        timed[n] = evaluate(inp, c, n, t)
        return timed[n].meets

    return timed[smallest_true(meets, lo + 1, hi)]  # lo misses, hi meets


def replicas_at(inp: DeployInput, c: Candidate, t: Targets, requests_per_s: float) -> Result | None:
    """Candidate `c` (one replica's card set and settings) at the fewest replicas meeting the targets under
    `requests_per_s` arrivals, by the same search deploy runs (`breakeven --traffic`: one deployment shape
    scaled hour by hour); None when no count up to MAX_REPLICAS does."""
    at = replace(inp, users=None, requests_per_s=requests_per_s)
    return _fewest_replicas(at, c, t, min(_fewest_by_throughput(at, c, t), MAX_REPLICAS), MAX_REPLICAS)


def _over_budget(inp: DeployInput, c: Candidate, most: int, fewest: int = 1) -> bool:
    """Whether every count of `fewest` to `most` replicas of `c` rents for more than --budget-usd-month
    (_least_price of those counts): _within refuses each, so none is timed."""
    return inp.budget_usd_month is not None and c.price is not None and fewest <= most and \
        _least_price(c.gpu, c.cards, c.setting.ctx.rules, fewest, most) > inp.budget_usd_month


def _within(inp: DeployInput, r: Result) -> bool:
    return _allowed(inp, r.cand, r.replicas)


def _allowed(inp: DeployInput, c: Candidate, replicas: int) -> bool:
    """Whether `replicas` copies of `c` keep within --max-cards and --budget-usd-month: a matter of the count
    and its rent (evaluate's monthly_usd, fitting.set_price), not of the timing."""
    if inp.max_cards and c.cards * replicas > inp.max_cards:
        return False
    rent = fitting.set_price(c.gpu, c.cards * replicas, c.setting.ctx.rules)
    return not (inp.budget_usd_month is not None and (rent or 0) > inp.budget_usd_month)


def _key(r: Result) -> tuple:
    # a card with no rental price ranks after every priced one, and among its kind by the cards it takes
    # (else 20 one-slot replicas "cost" the same $0 as one card with 20 slots and win on speed)
    unpriced = r.monthly_usd is None
    return (math.inf if unpriced else r.monthly_usd, r.count if unpriced else 0, r.served.tpot_s,
            r.served.ttft_s)


def _rank(r: Result) -> tuple:
    """The order deployments are offered in: by rent (_key), and at the same rent, for a closed loop of
    users, the one serving them the most tokens/s (the lowest $/M at this load: 4 llama.cpp slots on a card
    before 1 slot that queues 3 of 4 users 7 s for the same rent); under arrivals every stable deployment
    serves the offered load, so TPOT then TTFT decide."""
    k = _key(r)
    served = -r.served_tokens_per_s if r.cand.inp.users is not None else 0.0
    return (*k[:2], served, *k[2:])


def _solo(inp: DeployInput, c: Candidate) -> tuple[float, float]:
    """(TPOT, TTFT) of one request alone: the best this candidate reaches at any replica count."""
    return _solo_of(c.replica, prompt_tokens(inp), inp.output_tokens, _best_cached(inp, c))


# Memoized on the replica (a frozen, hashable record: equal replicas time the same), not on the candidate: a
# llama.cpp layer split over 1, 2, 4 or 8 cards, or llama.cpp and Ollama at the same slots, is one replica.
@lru_cache(maxsize=4096)
def _solo_of(r: sv.Replica, input_tokens: int, output_tokens: int,
             cached: float = 0.0) -> tuple[float, float]:
    w = sv.Workload(input_tokens, output_tokens, users=1.0, cached_tokens=cached)
    return sv.tpot_s(r, w, 1.0), sv.prefill_s(r, w, 0.0)


def _fewest_by_throughput(inp: DeployInput, c: Candidate, t: Targets) -> int:
    """A lower bound on the replicas that meet the targets (the search starts there and prices its floor
    there, so it must never be above the fewest that meet: tests/test_properties.py checks the search
    against trying every count)."""
    return _fewest_of(c.replica, prompt_tokens(inp), inp.output_tokens, t.tpot_s, t.ttft_s, inp.users,
                      inp.requests_per_s, _best_cached(inp, c))


@lru_cache(maxsize=4096)
def _fewest_of(r: sv.Replica, input_tokens: int, output_tokens: int, tpot_s: float, ttft_s: float,
               users: float | None, requests_per_s: float | None, cached: float = 0.0) -> int:
    """As core/serving.py serve() times a replica: B_t, the most sequences decoding together within the TPOT
    target, bounds what one replica takes.

    - Users (closed loop): a replica's users all decode together up to its sequence cap, so fewer than
      B_t + 1 of them (the load per replica is a fraction: TPOT(B) is timed between whole B); where B_t is the
      whole cap, the users past it wait in the queue for a slot, (n − cap) × service ÷ cap each, which the
      TTFT target bounds (a service takes at least (O − 1) steps of TPOT(B_t)).
    - Arrivals: Little's law, B = λ × (prefill + (O − 1) × TPOT(B)), so λ < (B_t + 1) ÷ ((O − 1) × TPOT(B_t)).
    B_t is found by bisection: TPOT grows with B. `cached`: the most prompt tokens a request finds cached."""
    w = sv.Workload(input_tokens, output_tokens, users=1.0, cached_tokens=cached)
    cap = max(r.max_seqs, 1)
    lo = largest_true(lambda n: sv.tpot_s(r, w, n) <= tpot_s, 1, cap,
                      _settled(users, cap) if users is not None else
                      _settled_rate(requests_per_s or 0.0, output_tokens, tpot_s))
    steps = max(output_tokens - 1, 1) * sv.tpot_s(r, w, lo)
    held = float(lo + 1) if lo < cap else cap * (1 + ttft_s / steps)
    if users is not None:
        return max(1, math.ceil(users / held - 1e-9))
    rate = (held if lo < cap else cap) / steps  # requests/s one replica can finish within the TPOT target
    return max(1, math.ceil((requests_per_s or 0) / rate - 1e-9))


def _settled(users: float, cap: int) -> Callable[[int, int], bool]:
    """When _fewest_of's users answer, max(1, ⌈users ÷ held − 1e-9⌉), no longer depends on where in the
    bisection's bracket [lo, hi] B_t lies: held is B_t + 1 below the cap and at least cap at it, so it is at
    least lo + 1 while lo < cap and at most hi + 1 while hi < cap; the answer falls as held grows, so it is
    settled once both ends give the same (while hi < cap), or once lo + 1 gives 1, the least it can be."""
    def answer(held: int) -> int:
        return max(1, math.ceil(users / held - 1e-9))

    def settled(lo: int, hi: int) -> bool:
        if lo >= cap:
            return False
        return answer(lo + 1) == 1 or (hi < cap and answer(lo + 1) == answer(hi + 1))

    return settled


def _settled_rate(requests_per_s: float, output_tokens: int, tpot_s: float) -> Callable[[int, int], bool]:
    """When _fewest_of's arrivals answer, max(1, ⌈λ ÷ rate − 1e-9⌉), is 1 wherever B_t lies in the bracket:
    once a probe B = lo ≥ 2 has met the TPOT target (the bisection moves lo only to such a B), B_t ≥ B and
    TPOT(B_t) ≤ the target, so rate = (B_t + 1 or the cap, at least B + 1) ÷ ((O − 1) × TPOT(B_t)) is at
    least (B + 1) ÷ ((O − 1) × target); when λ is below that by a millionth (far more than the rounding of
    the division), the answer is 1."""
    def settled(lo: int, hi: int) -> bool:
        return lo >= 2 and requests_per_s * max(output_tokens - 1, 1) * tpot_s <= (lo + 1) * (1 - 1e-6)

    return settled


def clear_memos() -> None:
    """Forget the timings memoized across searches (core/serving.py's step times, the interned replicas,
    _served, _solo_of, _fewest_of, the error bars of core/uncertainty.py, plan's machines):
    benchmarks/bench_cli.py times each search as a new question."""
    from ..core.uncertainty import clear_memos as clear_bars
    from .plan import clear_memos as clear_machines

    for memo in (_solo_of, _fewest_of, _interned, _served, _pessimistic, _least_price):
        memo.cache_clear()
    sv.clear_memos()
    clear_bars()
    clear_machines()


def search(inp: DeployInput, cands: list[Candidate], t: Targets, keep: int | None = None) -> list[Result]:
    """Cheapest first: each candidate at the fewest replicas meeting the targets. A candidate is timed only
    if it could be cheaper than the best found, or faster (per user or to the first token) than every
    deployment found at its price or less; otherwise it is skipped on bounds, never on guesses.

    `keep`: only the first `keep` deployments of the Pareto front (pareto(found, keep)) and the best
    (found[0]) are asked for. A candidate whose least rent (_least_price of its counts) is above the rent
    of the keep-th deployment of the front found so far is set aside, the rest of the order too once its
    floor (_rent_floors) is; at the end those whose least rent is not above the keep-th of the front then
    found are timed, cheapest first, until none is left that is: every result not timed would rank after
    the front's first `keep` (_rank leads with the rent), so it changes none of them nor the best
    (tests/test_deploy_search.py against the whole search)."""
    order = sorted(cands, key=lambda c: (c.price if c.price is not None else math.inf, c.setting.slots,
                                         -c.seqs))
    floors = _rent_floors(inp, order) if keep else []
    found: list[tuple[tuple, int, Result]] = []  # (_rank, place in the order, result), in that order
    # (rent, TPOT, TTFT) of each deployment on the front found so far, by rent: what a later candidate must
    # beat to be worth timing (_beaten)
    front: list[tuple[float, float, float]] = []
    best: float = math.inf
    aside: list[tuple[float, int]] = []  # (least rent, place) of the candidates set aside: a heap
    bar = (math.inf, 0)  # (the keep-th front deployment's rent, results when it was read)

    def rent_bar(exact: bool) -> float:
        """The keep-th front deployment's rent (inf: fewer on the front), read again once the results have
        grown by FRONT_REREAD_GROWTH (exact: at every new one): a stale rent sets aside more or fewer, and
        the end loop, which reads it exactly, times every one set aside that the answer may need."""
        nonlocal bar
        if keep and len(found) >= keep and len(found) != bar[1] and \
                (exact or not bar[1] or len(found) > bar[1] * (1 + FRONT_REREAD_GROWTH)):
            on = _front((r for _, _, r in found), keep)
            bar = (_key(on[-1])[0] if len(on) == keep else math.inf, len(found))
        return bar[0]

    def priced_out(rent: float, tpot: float, ttft: float) -> bool:
        """Whether a deployment renting at least `rent` whose TPOT and TTFT are at best `tpot` and `ttft` is
        not worth timing: beyond the span of the best rent, or, at or above it, no faster per user nor to
        the first token than one on the front found at its rent or less (true at a rent, true above it)."""
        return rent >= best * PARETO_COST_SPAN or rent >= best and _beaten(front, rent, tpot, ttft)

    def time_one(i: int, c: Candidate, exact: bool) -> None:
        nonlocal best
        most = _limit(inp, c)
        if most < 1 or _over_budget(inp, c, most):
            return
        if keep and c.price is not None and \
                (least := _least_price(c.gpu, c.cards, c.setting.ctx.rules, 1, most)) > rent_bar(exact):
            heapq.heappush(aside, (least, i))
            return
        tpot, ttft = _solo(inp, c)
        if tpot > t.tpot_s or ttft > t.ttft_s:
            return  # one request alone misses a target: no replica count helps
        # the rent of any count of it (_least_price over every count): where even that is priced out, so is
        # the rent at the fewest replicas that may meet (lo below), not worked out then
        if c.price is not None and priced_out(
                _least_price(c.gpu, c.cards, c.setting.ctx.rules, 1, EVERY_COUNT), tpot, ttft):
            return
        lo = _fewest_by_throughput(inp, c, t)
        floor = fitting.set_price(c.gpu, c.cards * lo, c.setting.ctx.rules) if c.price is not None else None
        if floor is not None and priced_out(floor, tpot, ttft):
            return
        if _over_budget(inp, c, most, min(lo, most)):
            return  # _fewest_replicas answers a count from min(lo, most) to most: none within the budget
        if keep and c.price is not None and (least := _least_price(
                c.gpu, c.cards, c.setting.ctx.rules, min(lo, most), most)) > rent_bar(exact):
            heapq.heappush(aside, (least, i))
            return
        res = _fewest_replicas(inp, c, t, min(lo, most), most)
        if res is not None and _within(inp, res):
            bisect.insort(found, (_rank(res), i, res), key=lambda e: e[:2])
            rent = res.monthly_usd or 0
            if not (rent != rent or _beaten(front, rent, res.served.tpot_s, res.served.ttft_s)):
                # (a rent that is not a number is at most no rent: it can beat nothing)
                bisect.insort(front, (rent, res.served.tpot_s, res.served.ttft_s))
            if res.monthly_usd is not None:
                best = min(best, res.monthly_usd)

    rest = len(order)  # the place from which the whole order was set aside
    for i, c in enumerate(order):
        if c.price is not None and c.price >= best * PARETO_COST_SPAN:
            rest = len(order)
            break  # sorted by price: every later one costs more still
        if keep and floors[i] > rent_bar(False):
            rest = i  # every later candidate's least rent is above the bar: set aside, as a whole
            break
        time_one(i, c, False)
    if rest < len(order):
        heapq.heappush(aside, (floors[rest], -1))  # the rest of the order, from `rest`, at its floor
    while aside and aside[0][0] <= rent_bar(True):
        _, i = heapq.heappop(aside)
        if i >= 0:
            time_one(i, order[i], True)
            continue
        c = order[rest]  # the next one of the order set aside as a whole
        if c.price is not None and c.price >= best * PARETO_COST_SPAN:
            continue  # as the loop above stops: every later one costs more still
        time_one(rest, c, True)
        rest += 1
        if rest < len(order):
            heapq.heappush(aside, (floors[rest], -1))
    return [r for _, _, r in found]


def _beaten(front: list[tuple[float, float, float]], rent: float, tpot: float, ttft: float) -> bool:
    """Whether a deployment of `front` ((rent, TPOT, TTFT) of each, sorted: search's front found so far)
    rents for at most `rent` and is at least as fast per user and to the first token. Only those up to the
    rent are read: one renting for more cannot be (tests/test_deploy_search.py against every one)."""
    for i in range(bisect.bisect_right(front, (rent, math.inf, math.inf))):
        a, b, c = front[i]
        if a <= rent and b <= tpot and c <= ttft:
            return True
    return False


def on_cards(inp: DeployInput, cands: list[Candidate], t: Targets) -> list[Result]:
    """--cards N: each set that splits N cards evenly, at the N / set replicas that fill them, where it meets
    the targets (cheapest first: the kinds of card differ in rent)."""
    found = []
    for c in cands:
        res = evaluate(inp, c, (inp.cards or c.cards) // c.cards, t)
        if res.meets and _within(inp, res):
            found.append(res)
    return sorted(found, key=_rank)


def most_users(inp: DeployInput, cands: list[Candidate],
               t: Targets) -> tuple[DeployInput, list[Candidate], bool]:
    """--cards N with no load: the most users (closed loop) any set filling the N cards serves within the
    targets, the sets that serve that many (the input then asks for them) and True; the input with one user,
    every set and False where not even one is served (the answer then says what fails)."""
    best, reach = 1.0, 0
    one = replace(inp, users=1.0)
    served_by: dict[int, list[tuple[int, Candidate]]] = {}
    # the sets that may serve the most first (_most_users_bound), so that the reach found early skips the
    # rest: a set whose bound is below it cannot serve that many, nor be among those that serve the most
    order = sorted(range(len(cands)), key=lambda i: -_most_users_bound(inp, cands[i]))
    for i in order:
        c = cands[i]
        if _most_users_bound(inp, c) < reach:
            break  # sorted by bound: every later one's is lower still
        n = _most_users_on(one, c, (inp.cards or c.cards) // c.cards, t, reach)
        if n < reach:
            continue  # fewer than a set found already serves: not among those that serve the most
        served_by.setdefault(n, []).append((i, c))
        reach = n
    if reach >= 1:
        best = float(reach)
        cands = [replace(c, inp=replace(c.inp, users=best)) for _, c in sorted(served_by[reach],
                                                                                key=lambda ic: ic[0])]
    return replace(inp, users=best), cands, reach >= 1


# users one replica may be asked to serve at most in the --cards search: every scheduled slot, then as many
# again waiting (their TTFT grows with each, so the targets stop it long before)
MOST_USERS_PER_SLOT = 2


def _most_users_bound(inp: DeployInput, c: Candidate) -> int:
    """The most users _most_users_on can answer for candidate `c` on --cards: its `hi`, every slot of every
    replica MOST_USERS_PER_SLOT times (a replica's sequence cap is the candidate's `seqs`: services/served.py
    replica takes max(seqs, 1)). A bound by construction, whatever the timings: _most_users_on returns 0 or
    largest_true over [lo, min(hi, …)] with lo ≤ hi, never more than hi (tests/test_deploy_search.py)."""
    return (inp.cards or c.cards) // c.cards * max(c.seqs, 1) * MOST_USERS_PER_SLOT


def _most_users_on(inp: DeployInput, c: Candidate, replicas: int, t: Targets, floor: int = 0) -> int:
    """The most users `replicas` copies of candidate `c` serve within the targets (0: not one).

    `floor`: only an answer of at least `floor` is wanted (most_users: the most a set found already serves).
    The answer is the doubling's last count that met, or a count bisection found to meet up to the top of
    its bracket, so never above that top, nor at a count already found to miss: where the bracket's top
    (less the doubling's miss at it) is below `floor`, the answer is, and that bound is returned in its
    place (below `floor`) without the rest of the bisection (tests/test_deploy_search.py against the whole
    search). The counts asked are the same up to there, so the answer at or above `floor` is the same."""
    def meets(n: int) -> bool:
        return evaluate(inp, c, replicas, t, float(n)).meets

    if not meets(1):
        return 0
    hi = replicas * max(c.replica.max_seqs, 1) * MOST_USERS_PER_SLOT
    lo, step = 1, 1
    while lo * 2 <= hi and meets(lo * 2):  # doubling, then bisection between the last that met and the next
        lo *= 2
        step = lo
    top = min(hi, lo + step)
    missed = lo * 2 <= hi  # the doubling stopped at a count that misses: lo + step, the bracket's top
    if top - missed < floor:
        return top - missed
    return largest_true(meets, lo, top, (lambda _, high: high < floor) if floor else None)


def _rent_floors(inp: DeployInput, order: list[Candidate]) -> list[float]:
    """For each place in search's order, the least rent any result of a candidate from there on can have
    (_least_price of each one's counts from 1 to _limit; inf for one without a price or a count)."""
    floors, least = [math.inf] * len(order), math.inf
    for i in range(len(order) - 1, -1, -1):
        c = order[i]
        most = _limit(inp, c)
        if c.price is not None and most >= 1:
            least = min(least, _least_price(c.gpu, c.cards, c.setting.ctx.rules, 1, most))
        floors[i] = least
    return floors


def pareto(results: list[Result], size: int = 8) -> list[Result]:
    """Deployments no other beats on all three of cost, per-user speed and TTFT (a sweep in order of cost: a
    point is dominated if a cheaper-or-equal point on the front is at least as good). Cost is the rent for
    this load: at a given arrival rate it is proportional to the cost per million tokens."""
    return _front(sorted(results, key=_rank), size)


def _front(ranked: Iterable[Result], size: int) -> list[Result]:
    """The first `size` deployments of the Pareto front of results read in _rank order (pareto): a result
    read later changes none of those already on it, so the reading stops at `size`."""
    front: list[Result] = []
    keys: list[tuple] = []  # _key of each one on the front, and of each left off it as shown already
    shown: list[tuple] = []  # _shown of each
    for r in ranked:
        if len(front) == size:
            break
        rent, cards, tpot, ttft = kr = _key(r)
        if any(a <= rent and b <= cards and c <= tpot and e <= ttft for a, b, c, e in keys):
            continue  # one on the front is as good on each of _key's four figures
        sr = _shown(r)
        keys.append(kr)  # shown or not, it is on offer: what it beats is off the front (search's _beaten too)
        if sr in shown:
            continue  # told apart from one already on the front by nothing the answer shows
        front.append(r)
        shown.append(sr)
    return front


def _shown(r: Result) -> tuple:
    """What tells two deployments of the front apart in the answer: the card, count, layout, runtime, quant,
    KV type and draft its row names, and the sequence cap and step budget its launch line starts the engine
    with (two launches that differ only there are two offers: the front lists the one not beaten)."""
    c, s = r.cand, r.cand.setting
    spec = getattr(s.ctx, "speculation", None)  # (hand-built results in tests carry a bare context)
    return (c.gpu.id, r.count, c.tp, c.pp, c.attention_dp, c.ep, s.ctx.runtime.id, s.ctx.quant.name,
            s.mem.kv_dtype, spec.method if spec is not None else None, launched_seqs(c.replica),
            c.replica.chunk_tokens)


def closest(inp: DeployInput, cands: list[Candidate], t: Targets) -> Result | None:
    """When nothing meets the targets: the least miss any deployment within the limits reaches (its worst
    target ratio, each candidate at the most replicas allowed), then the cheapest deployment that comes
    within CLOSE of it, at the fewest replicas that do: more replicas than that buy nothing. With --cards N,
    the replicas that fill exactly the N cards and come closest."""
    if inp.cards:
        on = [evaluate(inp, c, inp.cards // c.cards, t) for c in cands if inp.cards % c.cards == 0]
        return min(on, key=lambda r: (_worst(r), _rank(r))) if on else None
    at_most: list[Result] = []
    for c in cands:
        n = _limit(inp, c)
        if n < 1 or _over_budget(inp, c, n):
            continue
        while n > 1 and not _allowed(inp, c, n):
            n -= 1  # the most replicas within the limits (none: one, which is not within them either)
        r = evaluate(inp, c, n, t)
        if _within(inp, r):
            at_most.append(r)
    if not at_most:
        return None
    least = min(_worst(r) for r in at_most)
    if not math.isfinite(least):  # every one overloaded within the limits: the one that serves the most
        return max(at_most, key=lambda r: (r.served_tokens_per_s, -(r.monthly_usd or 0)))
    near = [_fewest_reaching(inp, r, t, least * CLOSE) for r in at_most if _worst(r) <= least * CLOSE]
    return min(near, key=_rank)


# "As close": within 1 % of the least miss, the precision its ratio is printed at (0.01×)
CLOSE = 1.01


def _fewest_reaching(inp: DeployInput, r: Result, t: Targets, ratio: float) -> Result:
    """`r`'s candidate at the fewest replicas whose worst target ratio is at most `ratio` (r's reaches it)."""
    timed = {r.replicas: r}

    def reaches(n: int) -> bool:
        timed[n] = evaluate(inp, r.cand, n, t)
        return _worst(timed[n]) <= ratio

    return timed[smallest_true(reaches, 1, r.replicas)]


def _worst(r: Result) -> float:
    """The largest achieved / target ratio; a tight result ranks by its pessimistic figures (below 1 for none
    but a met one)."""
    if not r.served.stable:
        return math.inf
    if r.tight:
        return max(likely_misses(r.served, targets(r.cand.inp), r.cand.setting.ctx.runtime.id,
                                 r.features).values())
    return max(r.misses.values())


def headroom(inp: DeployInput, r: Result, t: Targets, most: float = 64.0) -> float:
    """How much more traffic (×) the deployment takes before a target breaks."""
    if not evaluate(inp, r.cand, r.replicas, t, 1.0).meets:
        return 0.0
    if evaluate(inp, r.cand, r.replicas, t, most).meets:
        return most
    # 14 halvings of log(64): within 64 ** (1 / 16384) ≈ 1.0003× (the 2-decimal figure printed)
    return largest_true_ratio(lambda x: evaluate(inp, r.cand, r.replicas, t, x).meets, 1.0, most, 14)


# --- the answer ------------------------------------------------------------------------------------------

def launched_seqs(r: sv.Replica) -> int:
    """The sequence cap the engine is started with (its launch line's --max-num-seqs and the JSON's
    max_num_seqs): the engine's own cap where a pinned deployment runs it above what its KV pool holds (the
    CUDA graphs it captures are sized from it: core/serving.py eager_s), else the sequences it schedules."""
    return r.engine_seqs or r.max_seqs


def command(inp: DeployInput, r: Result) -> str:
    """The command line that starts the deployment (runtimes/launch.py): every replica in one server where
    one node holds them all and the engine has data parallelism, else one replica, with a note to start the
    others behind a load balancer."""
    c = r.cand
    one_node = c.nodes == 1 and c.cards * r.replicas <= c.setting.ctx.rules.node_size
    length = inp.max_model_len or c.setting.mem.context  # a pinned deployment's own --max-model-len
    return launch_command(c.setting.ctx, c.tp, c.pp, length, launched_seqs(c.replica),
                          c.setting.kv_flag, c.setting.slots, c.nodes, r.replicas, one_node,
                          kv_offload_gb=_offload_gb(inp, r), dp=c.attention_dp, ep=c.ep,
                          recv_interval=int(inp.scheduler_recv_interval or 0),
                          graph_max_bs=int(inp.cuda_graph_max_bs or 0),
                          adp_timeout_iters=int(inp.attention_dp_timeout_iters or 0),
                          mixed_chunk=inp.enable_mixed_chunk, fraction=stated_fraction(c))


def sized_engine(c: Candidate, role: str = "") -> Any:
    """The engine a candidate's memory was sized with (Context.engine_at: its attention-DP groups, a
    disaggregated worker's `role`, and the server's --tp-size where each group copies its cache over fewer
    ranks, an attention-DP + EP layout)."""
    return c.setting.ctx.engine_at(c.attention_dp, role, server_tp=c.tp if c.option.tp != c.tp else 0)


def stated_fraction(c: Candidate, role: str = "") -> float | None:
    """The memory share the launch line states where the question gives none: the one the candidate's
    budget was sized with where the engine works it out itself (Runtime.launch_fraction: SGLang's
    --mem-fraction-static from its reserve), so the engine starts with the KV pool that was timed; None
    elsewhere (the profile's default)."""
    return sized_fraction(c.setting.ctx, sized_engine(c, role), c.gpu, c.option.tp, c.option.pp)


def _emitted(inp: DeployInput, r: Result | None) -> Emitted:
    """--emit: the manifest of the cheapest deployment, from the launch line its command prints
    (services/emit.py): the same replicas, one server per copy unless data parallelism serves them in one."""
    from .emit import Served, emit

    if r is None:
        raise InputError("--emit: nothing meets the targets, so there is no deployment to write",
                         field="emit", hint="run without --emit to see the closest one and what it misses")
    c = r.cand
    one_node = c.nodes == 1 and c.cards * r.replicas <= c.setting.ctx.rules.node_size
    line = launch_of(c.setting.ctx, c.tp, c.pp, c.setting.mem.context, launched_seqs(c.replica),
                     c.setting.kv_flag, c.setting.slots, c.nodes, r.replicas, one_node,
                     kv_offload_gb=_offload_gb(inp, r), dp=c.attention_dp, ep=c.ep,
                     fraction=stated_fraction(c))
    served_by = max(line.replicas, 1) if line is not None else 1  # copies one server runs (data parallel)
    return emit(inp.emit or "", Served(c.setting.ctx.model.id, line, c.setting.ctx.runtime, c.gpu,
                                       c.per_node * served_by, c.nodes, r.replicas // served_by))


@record
class DeploymentMemory(table.Result):
    """One card of the deployment against its budget (the plan's sizing, with the need's error bar)."""

    need_bytes: int
    budget_bytes: int
    free_bytes: int
    margin_bytes: int
    kv_pool_tokens: int


@record
class BenchmarkRun(table.Result):
    """What a benchmark harness reports for a pinned deployment (--requests N at --users C: `vllm bench serve
    --num-prompts N --max-concurrency C`): means over every request, the first round's burst included; or
    (--requests N at --requests-per-s R) a stage of N Poisson arrivals from an empty queue (core/serving.py
    open_stage): its p90 TTFT given, no scheduler (a closed-loop round's), its ITL median at the stage's
    decoding batch."""

    requests: int
    ttft_mean_ms: float | None
    ttft_median_ms: float | None
    tpot_mean_ms: float | None
    itl_median_ms: float | None
    output_tokens_per_s: float
    requests_per_s: float
    seconds: float
    # "prefill-first" or "decode-first" (one pool of replicas), "disaggregated" (prefill and decode pools:
    # PD_SCHEDULER); a stage of arrivals: left out
    scheduler: str | None
    ttft_p90_ms: float | None = None  # a stage of arrivals (--requests-per-s); else left out

    omit_none = ("ttft_p90_ms", "scheduler")


# BenchmarkRun.scheduler of a run on prefill and decode pools (core/disagg.py benchmark): prompts and answers
# on separate workers, neither order
PD_SCHEDULER = "disaggregated"


@record
class Deployment(table.Result):
    """One deployment: the card set, its split and replicas, the runtime settings, its rent and its timing
    at the load."""

    gpu: str
    count: int
    nodes: int
    cards_per_node: int
    tp: int
    pp: int
    replicas: int
    runtime: str
    quant: str
    kv_dtype: str
    max_num_seqs: int
    monthly_usd: float | None
    cost_per_million_usd: float | None
    ttft_ms: float | None  # None: infinite (the queue grows without end)
    tpot_ms: float | None
    aggregate_tokens_per_s: float
    per_user_tokens_per_s: float
    ttft_mean_ms: float | None
    prefill_ms: float | None
    batch_per_replica: float
    utilization: float
    meets_targets: bool
    quality: str | None
    memory: DeploymentMemory
    command: str | None
    # the range each figure may really take (validation's out-of-sample serving errors), [low, high]
    likely: dict[str, list[float] | None] | None = None
    tight: bool = False  # meets the targets as predicted, not at the pessimistic end of `likely`
    # the engine release planned (--runtime NAME@RELEASE, else the current one: data/releases.toml); None for
    # a runtime cardfit knows no releases of
    release: str | None = None
    # a pinned deployment's benchmark run (--requests; absent from the JSON otherwise)
    benchmark: BenchmarkRun | None = None
    # the share of the prompt tokens sent that the prefix cache serves (--shared-prefix-tokens, --turns; 0:
    # nothing reused or no prefix caching), and the host-RAM KV tier planned per replica, GB (0: none)
    prefix_hit_rate: float = 0.0
    kv_offload_gb: float = 0.0
    # speculative decoding (--speculative): {method, tokens, acceptance, ...}; None: off
    speculative: dict[str, Any] | None = None
    # attention data-parallel groups and expert-parallel ranks of one replica (core/moe_parallel.py; 1, 1:
    # tensor parallel over all `tp` cards, whose count stays tp × pp × replicas)
    dp: int = 1
    ep: int = 1
    # separate prefill and decode pools (core/disagg.py): {"prefill": {gpu, count, tp, replicas},
    # "decode": {…}}; None: prefill and decode share every replica
    disaggregated: dict[str, dict[str, Any]] | None = None
    # a disaggregated deployment under NVIDIA Dynamo: its frontend, then one worker line per role (the
    # engine's flags, `python3 -m dynamo.sglang|vllm`); absent from the JSON otherwise
    dynamo_command: str | None = None
    # the production features it uses whose out-of-sample serving errors widen `likely` beyond the
    # runtime's (FEATURES: dp_ep, disaggregated, speculative, kv_offload, prefix_reuse; those with a band in
    # data/accuracy.toml); absent from the JSON for none
    likely_features: list[str] | None = None

    omit_none = ("benchmark", "dynamo_command", "likely_features")


def hit_rate(inp: DeployInput, r: Result) -> float:
    h = hits(inp, r.cand, _workload(inp, r.replicas))
    return round(h.cached_tokens / prompt_tokens(inp), 4) if h is not None else 0.0


def _offload_gb(inp: DeployInput, r: Result) -> float:
    """The host tier the deployment runs with: --kv-offload-gb where it helps there, else 0."""
    return _tier_gb(inp, hits(inp, r.cand, _workload(inp, r.replicas)))


def _tier_gb(inp: DeployInput, h: ru.Hits | None) -> float:
    """The host tier a replica with hits `h` runs with: --kv-offload-gb where its hits reach it, else 0."""
    return float(inp.kv_offload_gb or 0.0) if h is not None and h.host_tokens > 0 else 0.0


def deployment(inp: DeployInput, r: Result) -> Deployment:
    c, s = r.cand, r.served
    return Deployment(
        gpu=c.gpu.name, count=r.count, nodes=c.nodes * r.replicas, cards_per_node=c.per_node, tp=c.tp,
        pp=c.pp, replicas=r.replicas, runtime=c.setting.ctx.runtime.named, quant=c.setting.ctx.quant.name,
        kv_dtype=c.setting.mem.kv_dtype, max_num_seqs=launched_seqs(c.replica),
        monthly_usd=round(r.monthly_usd, 2) if r.monthly_usd is not None else None,
        cost_per_million_usd=(round(r.cost_per_million_usd, 4) if r.cost_per_million_usd is not None
                              else None),
        ttft_ms=_ms(s.ttft_s), tpot_ms=_ms(s.tpot_s),
        aggregate_tokens_per_s=round(r.served_tokens_per_s, 1),
        per_user_tokens_per_s=round(s.per_user_tokens_per_s, 2),
        ttft_mean_ms=_ms(s.ttft_mean_s), prefill_ms=_ms(s.prefill_s),
        batch_per_replica=round(s.batch, 2), utilization=round(s.utilization, 4),
        meets_targets=r.meets, quality=c.setting.quality,
        memory=DeploymentMemory(c.option.need_bytes, c.option.budget_bytes, c.option.free_bytes,
                                c.margin_bytes, c.kv_tokens),
        command=command(inp, r), likely=likely(s, c.setting.ctx.runtime.id, r.replicas, r.features),
        tight=r.tight, likely_features=list(banded(r.features)) or None,
        release=release_name(c.setting.ctx.runtime), prefix_hit_rate=hit_rate(inp, r),
        kv_offload_gb=_offload_gb(inp, r), speculative=_speculative_view(c.setting.ctx),
        dp=launched_dp(c), ep=c.ep)


def launched_dp(c: Candidate) -> int:
    """The attention data-parallel groups the candidate's launch line runs (runtimes/launch.py
    attention_groups: with expert parallelism, or alone on SGLang), the JSON's `dp`."""
    from ..runtimes.launch import attention_groups

    return attention_groups(c.setting.ctx.engine, c.attention_dp, c.ep)


def _speculative_view(ctx: Any) -> dict[str, Any] | None:
    spec = getattr(ctx, "speculation", None)
    return spec.to_json() if spec is not None else None


def _ms(x: float) -> float | None:
    return round(x * 1e3, 1) if math.isfinite(x) else None


@record
class ApiComparison(table.Result):
    """The same traffic bought from one API tier, against the deployment's rent."""

    name: str
    price_per_million_usd: float  # output + input per output token
    api_monthly_usd: float
    breakeven_millions_per_month: float
    rent_cheaper: bool


def _apis(r: Result, inp: DeployInput) -> tuple[ApiComparison, ...]:
    """The same traffic bought from each API tier (the break-even guide's three), against this rent."""
    return _apis_of(r.served_tokens_per_s, r.monthly_usd, inp)


def _apis_of(tokens_per_s: float, monthly_usd: float | None, inp: DeployInput) -> tuple[ApiComparison, ...]:
    """_apis of a deployment serving `tokens_per_s` output tokens for `monthly_usd` (a disaggregated one)."""
    from ..catalog.apis import apis, breakeven_guide_tiers

    served_m = cost.capacity_millions(tokens_per_s, cost.HOURS_PER_MONTH)
    out = []
    for a in breakeven_guide_tiers(apis(tuple(inp.catalog))):
        price = a.output_usd_per_m + a.input_usd_per_m * inp.input_tokens / inp.output_tokens
        bill = served_m * price
        out.append(ApiComparison(a.name, round(price, 4), round(bill, 2),
                                 round(cost.breakeven_millions(monthly_usd or 0, price), 2),
                                 monthly_usd is not None and monthly_usd < bill))
    return tuple(out)


# the words that open the answer when a limit, not a target, leaves none (by Failing.target)
NO_ANSWER = {"memory": "nothing holds the model", "max_cards": "nothing within --max-cards",
             "budget": "nothing within the budget", "cards": "nothing on exactly --cards cards"}


@record
class Failing(table.Result):
    """Why there is no answer: a target ("ttft_ms", "tpot_ms": the one the closest deployment misses by the
    largest ratio, with the value reached and the limit; `text` when no deployment could reach it, however
    many replicas), "load" (overloaded within the limits), a limit ("max_cards", "budget": the smallest or
    cheapest set that holds the model, against the limit) or "memory" (no set holds it), with a sentence."""

    target: str
    achieved: float | None
    limit: float | None
    ratio: float | None
    text: str | None = None  # absent from the JSON where the numbers say it all

    omit_none = ("text",)


def _failing(r: Result, t: Targets, reach: dict[str, tuple[float, Candidate]]) -> Failing:
    """What keeps the closest deployment `r` from the targets; `reach`: the best each target reaches with
    one request alone, on the candidate that reaches it (out_of_reach)."""
    if not r.served.stable:
        return Failing("load", None, None, None,
                       "the deployment cannot keep up with the arrivals (its queue grows without end)")
    if r.tight:  # met as predicted: what fails is the pessimistic end of the likely range
        name, ratio = max(likely_misses(r.served, t, r.cand.setting.ctx.runtime.id, r.features).items(),
                          key=lambda kv: kv[1])
        return Failing(name, round(ratio * t.given[name], 1), t.given[name], round(ratio, 3),
                       "tight: the prediction meets the targets, the pessimistic end of its likely range "
                       "(cardfit's out-of-sample serving error) does not")
    out = [name for name in ("ttft_ms", "tpot_ms") if reach[name][0] > t.given[name] / 1e3]
    name, ratio = max(((k, v) for k, v in r.misses.items() if not out or k in out), key=lambda kv: kv[1])
    achieved = r.served.ttft_s * 1e3 if name == "ttft_ms" else r.served.tpot_s * 1e3
    text = None
    if name in out:
        best, c = reach[name]
        what = ("to its first token (the prefill alone)" if name == "ttft_ms" else "per output token")
        flag = "--ttft-ms" if name == "ttft_ms" else "--tpot-ms"
        text = (f"no deployment reaches {'a TTFT p90' if name == 'ttft_ms' else 'a TPOT'} of "
                f"{t.given[name]:,g} ms, however many replicas: one request alone takes {best * 1e3:,.1f} ms "
                f"{what} on the fastest set searched ({c.cards}× {c.gpu.name}, {c.setting.ctx.runtime.id}, "
                f"{c.setting.ctx.quant.name}); relax {flag}")
    return Failing(name, round(achieved, 1), t.given[name], round(ratio, 3), text)


def out_of_reach(inp: DeployInput, cands: list[Candidate]) -> dict[str, tuple[float, Candidate]]:
    """The least TTFT and TPOT (s) one request alone reaches on any candidate, and that candidate: what no
    replica count improves on."""
    solo = [(_solo(inp, c), c) for c in cands]
    tpot = min(solo, key=lambda x: x[0][0])
    ttft = min(solo, key=lambda x: x[0][1])
    return {"tpot_ms": (tpot[0][0], tpot[1]), "ttft_ms": (ttft[0][1], ttft[1])}


def _limits_failing(inp: DeployInput, cands: list[Candidate]) -> Failing:
    """No set that holds the model is within --max-cards or --budget-usd-month: the smallest (cheapest) one
    against the limit."""
    if inp.max_cards and all(c.cards > inp.max_cards for c in cands):
        c = min(cands, key=lambda c: (c.cards, c.price if c.price is not None else math.inf))
        sets = f" ({c.gpu.name} rents in sets of at least {c.gpu.min_count})" if c.gpu.min_count > 1 else ""
        return Failing("max_cards", c.cards, inp.max_cards, round(c.cards / inp.max_cards, 3),
                       f"the smallest set that holds the model is {c.cards}× {c.gpu.name} "
                       f"({c.setting.ctx.quant.name}){sets}, more than --max-cards {inp.max_cards}")
    allowed = [c for c in cands if c.price is not None and (not inp.max_cards or c.cards <= inp.max_cards)]
    if inp.budget_usd_month is None or not allowed:
        return Failing("memory", None, None, None, "no card set holds the model within the limits given")
    c = min(allowed, key=lambda c: c.price or 0.0)
    price = c.price or 0.0
    return Failing("budget", round(price, 2), inp.budget_usd_month, round(price / inp.budget_usd_month, 3),
                   f"the cheapest set that holds the model, {c.cards}× {c.gpu.name} "
                   f"({c.setting.ctx.quant.name}), rents for ${price:,.0f}/month, more than "
                   f"--budget-usd-month {inp.budget_usd_month:,g}")


@record
class TargetsGiven(table.Result):
    ttft_ms: bool
    tpot_ms: bool


@record
class Workload(table.Result):
    """The load deploy sized for, with the targets it held (given or the rule-of-thumb defaults)."""

    users: float | None
    requests_per_s: float | None
    input_tokens: int
    output_tokens: int
    input_tokens_p90: int | None
    output_tokens_p90: int | None
    max_model_len: int
    ttft_ms: float
    tpot_ms: float
    tokens_per_s_per_user: float
    targets_given: TargetsGiven
    shared_prefix_tokens: int = 0
    turns: int = 1
    prompt_tokens_mean: int = 0  # a request's mean prompt: --input-tokens and, over --turns, the history
    sessions: float | None = None  # --sessions (None: the users, or the requests in flight)
    kv_offload_gb: float | None = None  # --kv-offload-gb asked (each deployment says whether it uses it)
    cards: int | None = None  # --cards: exactly this many cards
    cards_found_users: bool = False  # --cards without a load: `users` is the most the cards serve
    prefix_groups: int = 1  # --prefix-groups: different shared prefixes of --shared-prefix-tokens each
    requests: int | None = None  # --requests: a finite run of this many requests (left out: an endless load)
    warm_requests: int | None = None  # --warm-requests: prompts of the same sequence sent before it

    omit_none = ("requests", "warm_requests")


@record
class Searched(table.Result):
    settings: int  # runtime × quantization × KV cache settings that built
    fitting_shapes: int  # card sets × splits that hold the model


@record
class DeployReport(table.Result):
    """`cardfit deploy`: the cheapest deployment that meets the targets (`best`) and the Pareto front, or
    the closest one and what it fails on."""

    model: str
    workload: Workload
    meets_targets: bool
    best: Deployment | None
    pareto: tuple[Deployment, ...]
    failing: Failing | None
    closest: Deployment | None
    headroom: float | None  # how many times the traffic the best deployment takes before a target breaks
    apis: tuple[ApiComparison, ...]
    searched: Searched
    hours_per_month: float
    notes: tuple[str, ...]
    plot: str | None = None  # the chart written (absent from the JSON when none was asked for)
    emit: Emitted | None = None  # --emit: the manifest (absent from the JSON when none was asked for)
    # prefill and decode on separate workers beside aggregated serving (disaggregation()); absent from the
    # JSON where the search does not try it (a model and load one card serves alone)
    disaggregation: Disaggregation | None = None

    omit_none = ("plot", "emit", "disaggregation")

    @property
    def no_answer(self) -> str | None:
        """Why there is no `best`, in one line (None where there is one): the CLI prints it as its error and
        exits 3 after the answer (cli/commands.py run)."""
        if self.best is not None:
            return None
        f = self.failing
        if f is None:
            return "no deployment meets the targets"
        if f.target in NO_ANSWER:
            return f"{NO_ANSWER[f.target]}: {f.text}"
        if f.text:
            return f.text
        what = {"ttft_ms": "TTFT p90", "tpot_ms": "TPOT"}.get(f.target, f.target)
        return (f"no deployment meets the targets: {what} fails first ({f.achieved or 0:,.1f} ms against "
                f"{f.limit or 0:,g} ms on the closest)")


# --- disaggregated prefill / decode (core/disagg.py) --------------------------------------------------------

# Workers a disaggregated deployment may run in all, prefill and decode together (a bound on the search: one
# disaggregated deployment per count of workers is timed, each its prefill/decode split by bisection)
PD_MAX_WORKERS = 16


@record
class Disaggregation(table.Result):
    """Prefill and decode on separate workers, searched beside aggregated serving: which wins and why."""

    winner: Literal["aggregated", "disaggregated"]
    why: str
    deployment: Deployment | None  # the cheapest disaggregated one that meets the targets (None: none does)
    # how much more traffic (×) that deployment takes before a target breaks (the report's `headroom` where
    # it wins); absent from the JSON where no deployment is given
    headroom: float | None = None
    # where no split meets the targets at the pessimistic end of its likely range: the rent of the one `why`
    # names, which meets them as predicted ($/month; absent from the JSON elsewhere, and where none does)
    predicted_monthly_usd: float | None = None
    # --cards N with no load: the most users a split of the N cards into prefill and decode pools serves
    # within the targets (pd_most_users; 0: none serves one); absent from the JSON elsewhere
    users: int | None = None

    omit_none = ("headroom", "predicted_monthly_usd", "users")


def pd_engine(ctx: Any) -> bool:
    """Whether the engine's launch line can split prefill from decode (its adapter's PD_DISAGGREGATION)."""
    return bool(getattr(ctx.engine, "PD_DISAGGREGATION", False)) and ctx.runtime.paged_kv


def _pools(c: Candidate, prefill: int, decode: int, pre: Candidate | None = None) -> Any:
    """`prefill` + `decode` workers each shaped like candidate `c` (the prefill workers like `pre` where
    given: _prefill_shapes), each sized for its role (_pd_workers)."""
    first, dec = _pd_workers(pre or c, c)
    return pd_pools(first, prefill, dec, decode)


def _pd_workers(pre: Candidate, c: Candidate) -> tuple[Candidate, Candidate]:
    """A prefill worker shaped like `pre` and a decode worker shaped like `c`, each sized for its role
    (_workers, as_worker): the pools' workers (_pools) and the answer's (disaggregation)."""
    workers = _workers(c)
    assert workers is not None  # the search keeps only the candidates whose two workers hold the model
    first = workers[0] if pre is c else as_worker(pre, "prefill")
    assert first is not None
    return first, workers[1]


def _prefill_shapes(same: list[Candidate], c: Candidate) -> list[Candidate]:
    """The shapes a prefill worker beside decode workers shaped like `c` takes: `c`'s own, and each tensor-
    parallel split of the same setting and card on fewer cards whose prefill worker holds the model.
    aiconfigurator searches the two pools' parallelism apart (its exp config's prefill_worker_config and
    decode_worker_config tp_list) and its published picks for Qwen3-32B-FP8 on H200 run prefill workers on
    fewer cards than decode workers: 4 x TP1 prefill + 1 x TP4 decode for 3,000 / 512 tokens at TTFT 1 s,
    TPOT 10 ms (1.43x aggregated's tokens/s/gpu), 10 x TP1 + 3 x TP2 at 4,000 / 500 tokens
    (ai-dynamo/aiconfigurator docs/cli_user_guide.md, https://github.com/ai-dynamo/aiconfigurator/blob/main/
    docs/cli_user_guide.md). A prompt's prefill is compute-bound, so a worker of fewer cards prefills at about
    the same tokens/s per card without the tensor-parallel all-reduce, while the decode worker's split sets
    the TPOT. Tensor-parallel only: an attention-DP / EP worker keeps its one layout (disaggregation)."""
    if c.ep > 1 or c.attention_dp > 1:
        return [c]
    return [c] + [p for p in same if p.cards < c.cards and p.ep == 1 and p.attention_dp == 1 and p.pp == 1
                  and as_worker(p, "prefill") is not None]


def _workers(c: Candidate) -> tuple[Candidate, Candidate] | None:
    """Candidate `c` (a replica the search shaped) as a prefill and a decode worker (as_worker); None where
    one of them does not hold the model."""
    pre, dec = as_worker(c, "prefill"), as_worker(c, "decode")
    return (pre, dec) if pre is not None and dec is not None else None


def as_worker(c: Candidate, role: str) -> Candidate | None:
    """Candidate `c` as one `role` worker ("prefill" | "decode") of a disaggregated deployment: its memory
    budget sized by the engine of that role (sized_engine: Context.engine_at, which the pinned path's
    `timed` asks too; SGLang's reserve by role, runtimes/sglang.py reserved_mib), its KV pool and sequence
    cap with it, as candidates() / _expert_parallel size a replica; `c` itself where the role moves no
    budget, None where the worker does not hold the model with its margin."""
    from .plan import engine_defaults, requires, split_cards

    memo = c.setting.built
    key = ("worker", role, c.gpu, c.cards, c.tp, c.pp, c.option.tp, c.option.pp, c.attention_dp, c.ep)
    if key in memo:
        return memo[key]  # type: ignore[no-any-return]
    ctx, inp, mem, m, rt = c.setting.ctx, c.inp, c.setting.mem, c.setting.ctx.model, c.setting.ctx.runtime
    engine = sized_engine(c, role)
    opt = fitting.check(mem, c.gpu, c.cards, engine, ctx.rules, requires=requires(ctx.quant),
                        utilization=ctx.utilization, margin_bytes=c.margin_bytes, model=m, tp=c.option.tp,
                        pp=c.option.pp, cards=_per_count(split_cards(ctx, mem)))
    out: Candidate | None = c
    if opt.budget_bytes != c.option.budget_bytes:
        out = None
        if opt.fits and opt.free_bytes >= c.margin_bytes:
            def kv(tokens: int) -> int:
                return engine.kv_bytes(m, MemorySettings(context=tokens, sequences=1, kv_dtype=mem.kv_dtype))

            draft = _draft_kv(c.setting, inp, rt)
            layouts = [(kv(kv_held(inp, rt) + own) + draft, kv(once) if once else 0)
                       for once, own in prefix_layouts(inp, rt)]
            groups = launched_dp(c)  # each attention group's scheduler its own prefix cache and cap
            pooled = _most_pooled(mem, opt, c.cards, engine.kv_copies(m, c.option.tp), rt, layouts,
                                  c.margin_bytes, groups)
            if pooled is not None:
                seqs = min(engine_defaults(ctx, c.gpu)[1] * groups, pooled[0])
                if seqs >= groups:
                    out = replace(c, option=opt, seqs=seqs, kv_tokens=pooled[1])
    memo[key] = out
    return out


def pd_pools(pre: Candidate, prefill: int, dec: Candidate, decode: int) -> Any:
    """`prefill` workers shaped like `pre` and `decode` workers shaped like `dec` (core/disagg.py Pools), the
    prompt's cache crossing NVLink or PCIe inside one node, the node link (core/placement.py) between
    nodes."""
    from ..core import disagg
    from ..core.kv import kv_cache_bytes
    from ..core.placement import NODE_HOP_LATENCY_S, NODE_LINK_GBPS

    m, mem, gpu = dec.setting.ctx.model, dec.setting.mem, dec.gpu
    one_node = prefill * pre.cards + decode * dec.cards <= dec.setting.ctx.rules.node_size
    link = disagg.link_bytes_per_s(gpu.link_gbps or sp.DEFAULT_LINK_GBPS, gpu.interconnect == "nvlink")
    if not one_node:
        link = disagg.link_bytes_per_s(NODE_LINK_GBPS, False)
    kv = kv_cache_bytes(m, 1, 1, mem.kv_dtype)
    held = bool(getattr(pre.setting.ctx.engine, "PD_SLOT_HELD_THROUGH_TRANSFER", False))
    next_pass = bool(getattr(dec.setting.ctx.engine, "PD_FIRST_TOKEN_NEXT_PASS", False))
    return disagg.Pools(pre.replica, prefill, _admitted_decode(dec), decode, kv, link,
                        0.0 if one_node else NODE_HOP_LATENCY_S, held, next_pass)


def _admitted_decode(dec: Candidate) -> Any:
    """A decode worker's replica, its sequence cap the fewer of its own and those its engine's P/D admission
    lets into its KV pool: where the engine reserves decode room for each request it holds
    (PD_DECODE_RESERVED_TOKENS, SGLang's decode server), a sequence takes what it holds in flight (kv_held)
    plus that reserve, each attention-DP rank from its own pool (core/disagg.py admitted)."""
    from ..core import disagg

    reserve = int(getattr(dec.setting.ctx.engine, "PD_DECODE_RESERVED_TOKENS", 0))
    r = dec.replica
    if not reserve or dec.kv_tokens <= 0:
        return r
    ranks = launched_dp(dec)  # each attention group admits from its own pool
    seqs = disagg.admitted(dec.kv_tokens, kv_held(dec.inp, dec.setting.ctx.runtime, admission=False), reserve,
                           ranks)
    return disagg.with_decode_cap(r, min(r.max_seqs, seqs)) if seqs < r.max_seqs else r


# the disaggregated searches' timings, one per split and load (core/disagg.py serve, each a few
# milliseconds): by (prefill shape, decode shape, prefill workers, decode workers, the load as served), each
# shape Candidate.shape (values: a key outlives no object whose id a later one could take), _pools_meet's
# answer. Kept for one deploy call, whose targets it holds to: shared by the no-load search of --cards N
# (pd_most_users) and the search at the load (disaggregation: at the pessimistic end, then as predicted to
# word why P/D lost, _pd_none_why), and the winner's headroom does not time that load again
# (_pools_headroom), so no split is timed twice at one load
PdTimed = dict[tuple[tuple[Any, ...], tuple[Any, ...], int, int, sv.Workload], tuple[Any, bool, bool]]


def _pd_timed(inp: DeployInput, pre: Candidate, c: Candidate, prefill: int, decode: int, t: Targets,
              memo: PdTimed | None = None, pools: Any = None,
              feats: tuple[str, ...] | None = None) -> tuple[Any, bool, bool]:
    """_pools_meet of `prefill` workers shaped like `pre` and `decode` workers shaped like `c` under the load
    of `inp`, from `memo` where timed already (and kept there). `pools` / `feats`: those pools and their
    features where the caller built them (_pools, _features)."""
    key = (pre.shape, c.shape, prefill, decode, _workload(inp, 1))
    got = memo.get(key) if memo is not None else None
    if got is None:
        got = _pools_meet(inp, _pools(c, prefill, decode, pre) if pools is None else pools,
                          c.setting.ctx.runtime.id, t,
                          feats=_features(inp, c, pools=pre) if feats is None else feats)
        if memo is not None:
            memo[key] = got
    return got


def _pd_meets(inp: DeployInput, c: Candidate, prefill: int, decode: int, t: Targets,
              pre: Candidate | None = None, memo: PdTimed | None = None,
              predicted: bool = False) -> tuple[Any, bool, bool, bool]:
    """The pools of `prefill` + `decode` workers shaped like `c` (the prefill workers like `pre` where given)
    under the load, whether they meet the targets (_pools_meet), and whether they are stable with their TTFT
    holding, and with their TPOT holding, each at the pessimistic end of its likely range (`predicted`: as
    predicted). `memo`: timings already made (PdTimed)."""
    pre = pre or c
    rt, feats = c.setting.ctx.runtime.id, _features(inp, c, pools=pre)
    res, meets, as_predicted = _pd_timed(inp, pre, c, prefill, decode, t, memo, feats=feats)
    if predicted:
        return res, as_predicted, res.stable and res.ttft_s <= t.ttft_s, res.stable and res.tpot_s <= t.tpot_s
    ttft, tpot = _pools_ends(res, rt, feats)
    return res, meets, res.stable and ttft <= t.ttft_s, res.stable and tpot <= t.tpot_s


def _fewest_prefill(meets: Callable[[int], tuple[Any, bool, bool, bool]], most: int) -> tuple[int, Any, bool]:
    """Of 1 to `most` prefill workers beside a set of decode workers (`meets`: _pd_meets of a count), the
    fewest whose TTFT holds (by bisection: more prefill workers only shorten it), the pools there and whether
    they meet the targets; (0, None, False) as soon as a probe shows that none does: pools stable with
    neither their TTFT nor their TPOT holding (the fewest whose TTFT holds are more, and more prefill workers
    only lengthen the TPOT: in a closed loop they send the decode workers more requests a second, so more
    sequences a step; at a rate of arrivals, as many)."""
    lo, hi = 1, most
    while lo < hi:
        mid = (lo + hi) // 2
        res, _, ttft, tpot = meets(mid)
        if ttft:
            hi = mid
        elif res.stable and not tpot:
            return 0, None, False
        else:
            lo = mid + 1
    res, ok, _, _ = meets(lo)
    return lo, res, ok


def _pools_meet(inp: DeployInput, pools: Any, runtime: str, t: Targets, scale: float = 1.0,
                feats: tuple[str, ...] = ()) -> tuple[Any, bool, bool]:
    """The pools under the whole load (× `scale`; core/disagg.py serve), whether they meet the targets at
    the pessimistic end of the runtime's serving error widened by their features' (`feats`: _features, as
    aggregated serving is held), and as predicted."""
    from ..core import disagg

    w = _workload(inp, 1, scale)
    res = disagg.serve(pools, w)
    if not res.stable or not _holds_users(res, w):
        return res, False, False
    ttft, tpot = _pools_ends(res, runtime, feats)
    return (res, ttft <= t.ttft_s and tpot <= t.tpot_s, res.ttft_s <= t.ttft_s and res.tpot_s <= t.tpot_s)


def _pools_ends(res: Any, runtime: str, feats: tuple[str, ...]) -> tuple[float, float]:
    """The pessimistic ends of the pools' TTFT p90 and TPOT (seconds): the runtime's serving error widened
    by their features' (the prediction where no band)."""
    ttft = value_range(res.ttft_s, "serving_ttft_ms", runtime, features=feats)
    tpot = value_range(res.tpot_s, "serving_tpot_ms", runtime, features=feats)
    return (ttft[1] if ttft else res.ttft_s), (tpot[1] if tpot else res.tpot_s)


def _pd_cheapest(inp: DeployInput, c: Candidate, t: Targets, below: float = math.inf,
                 memo: PdTimed | None = None, predicted: bool = False) -> tuple[int, int, Any] | None:
    """The fewest workers shaped like `c` that meet the targets disaggregated: for each count, the fewest
    prefill workers whose TTFT holds (more prefill workers only shorten it), then whether the decode workers
    left hold the TPOT (fewer decode workers only lengthen it). `below`: only an answer whose rent is below
    it is wanted; None as soon as no count left can cost less (_least_price over the counts left).
    `predicted`: the targets met as predicted, not at the pessimistic end (_pd_meets)."""
    if _workers(c) is None:  # a worker sized for its role does not hold the model (vLLM 0.34's P/D worker)
        return None
    if _prefill_alone_misses(inp, c, c, t, predicted):  # no count meets the TTFT: none is timed
        return None
    most = min(PD_MAX_WORKERS, (inp.max_cards or PD_MAX_WORKERS * c.cards) // c.cards)
    memo = {} if memo is None else memo

    def meets(prefill: int, n: int) -> tuple[Any, bool, bool, bool]:
        return _pd_meets(inp, c, prefill, n - prefill, t, memo=memo, predicted=predicted)

    for n in range(2, most + 1):
        if below < math.inf and _least_price(c.gpu, c.cards, c.setting.ctx.rules, n, most) >= below:
            return None
        # the fewest prefill workers whose TTFT holds with the rest decoding, at the pessimistic end of its
        # likely range as the pools are held to (_pools_meet): with the predicted TTFT the fewest could fall
        # short of that end, and a count whose pools would meet it with one more prefill worker be passed by
        # (fewer decode workers, as more prefill ones, only lengthen the TPOT: _fewest_prefill)
        lo, res, ok = _fewest_prefill(lambda x, n=n: meets(x, n), n - 1)
        if ok:
            return lo, n - lo, res
    return None


def _pd_cheapest_apart(inp: DeployInput, pre: Candidate, c: Candidate, t: Targets, below: float = math.inf,
                       memo: PdTimed | None = None, predicted: bool = False) -> tuple[int, int, Any] | None:
    """_pd_cheapest where the prefill workers are shaped like `pre` (fewer cards than `c`'s decode workers:
    _prefill_shapes): for each count of decode workers, the fewest prefill workers whose TTFT holds (more
    only shorten it), then whether the pools meet the targets; the one of least rent (then _pd_rank) below
    `below`. Each pool at most PD_MAX_WORKERS workers, the whole at most --max-cards."""
    if _prefill_alone_misses(inp, pre, c, t, predicted):
        return None
    rules = c.setting.ctx.rules
    most_cards = inp.max_cards or PD_MAX_WORKERS * c.cards
    memo = {} if memo is None else memo
    best: tuple[tuple[float, tuple[float, float, float]], int, int, Any] | None = None
    for y in range(1, PD_MAX_WORKERS + 1):
        fewest = y * c.cards + pre.cards
        if fewest > most_cards:
            break
        bar = min(below, math.nextafter(best[0][0], math.inf)) if best is not None else below
        if bar < math.inf and _least_price(c.gpu, 1, rules, fewest, most_cards) >= bar:
            break

        def meets(x: int, y: int = y) -> tuple[Any, bool, bool, bool]:
            return _pd_meets(inp, c, x, y, t, pre, memo, predicted)

        hi = min(PD_MAX_WORKERS, (most_cards - y * c.cards) // pre.cards)
        if bar < math.inf:  # the most prefill workers whose rent is below the bar: a split of more is not
            # wanted, so the fewest whose TTFT holds is searched below them (the same where it is one of them)
            hi = max((x for x in range(1, hi + 1) if _rent(c.gpu, x * pre.cards + y * c.cards, rules) < bar),
                     default=0)
            if hi == 0:
                continue
        lo, res, ok = _fewest_prefill(meets, hi)
        if not ok:
            continue
        key = (_rent(c.gpu, lo * pre.cards + y * c.cards, rules), _pd_rank(inp, res))
        if key[0] < below and (best is None or key < best[0]):
            best = (key, lo, y, res)
    return best[1:] if best is not None else None


def _prefill_alone_misses(inp: DeployInput, pre: Candidate, c: Candidate, t: Targets,
                          predicted: bool = False) -> bool:
    """Whether one prompt prefilled alone on an idle prefill worker shaped like `pre` (core/disagg.py alone_s,
    a floor under every TTFT the pools serve: serve adds the queue, the transfer and the handoff to it) is
    already past the TTFT target at the pessimistic end of its likely range (`predicted`: as predicted):
    then no count of either pool meets the targets, and none is timed."""
    from ..core import disagg

    worker = as_worker(pre, "prefill")
    if worker is None:
        return True
    floor = disagg.alone_s(worker.replica, _workload(inp, 1).input_tokens)
    if predicted:
        return floor > t.ttft_s
    return _pools_ends_ttft(floor, c.setting.ctx.runtime.id, _features(inp, c, pools=pre)) > t.ttft_s


def _pools_ends_ttft(seconds: float, runtime: str, feats: tuple[str, ...]) -> float:
    """The pessimistic end of a P/D TTFT of `seconds` (_pools_ends)."""
    ttft = value_range(seconds, "serving_ttft_ms", runtime, features=feats)
    return ttft[1] if ttft else seconds


def _pd_on_cards(inp: DeployInput, pre: Candidate, c: Candidate, t: Targets, memo: PdTimed | None = None,
                 predicted: bool = False) -> tuple[int, int, Any] | None:
    """--cards N: of every split of the N cards into prefill workers shaped like `pre` and decode workers
    shaped like `c` (splits_on_cards: where `pre` is `c`, each split of the N / c.cards workers), the one
    that meets the targets and serves best (_pd_rank); None where none does."""
    if _prefill_alone_misses(inp, pre, c, t, predicted):  # no split meets the TTFT: none is timed
        return None
    best: tuple[tuple[float, float, float], int, int, Any] | None = None
    for x, y in splits_on_cards(inp, pre, c):
        res, ok, _, _ = _pd_meets(inp, c, x, y, t, pre, memo, predicted)
        if ok and (best is None or _pd_rank(inp, res) < best[0]):
            best = (_pd_rank(inp, res), x, y, res)
    return best[1:] if best is not None else None


def _pd_rank(inp: DeployInput, res: Any) -> tuple[float, float, float]:
    """The order of deployments on the same cards (--cards N), as _rank orders aggregated ones at one rent:
    for a closed loop of users the most tokens/s served, then TPOT, then TTFT p90."""
    return (-res.output_tokens_per_s if inp.users is not None else 0.0, res.tpot_s, res.ttft_s)


def _pd_workers_on(inp: DeployInput, c: Candidate) -> int:
    """--cards N: the workers shaped like `c` that fill the N cards (0: they do not split into two pools
    within PD_MAX_WORKERS)."""
    n = (inp.cards or 0) // c.cards
    return n if 2 <= n <= PD_MAX_WORKERS and n * c.cards == inp.cards else 0


def splits_on_cards(inp: DeployInput, pre: Candidate, c: Candidate) -> list[tuple[int, int]]:
    """--cards N: every split of the N cards into prefill workers shaped like `pre` and decode workers shaped
    like `c`, as (prefill, decode) workers: workers of one shape (`pre` is `c`) each count of the N / c.cards
    that fill the cards (_pd_workers_on), else each pool at most PD_MAX_WORKERS workers. The loaded search
    (_pd_on_cards) and the no-load one (pd_most_users) try the same splits."""
    if pre is c:
        n = _pd_workers_on(inp, c)
        return [(x, n - x) for x in range(1, n)]
    n, out = inp.cards or 0, []
    for x in range(1, min(PD_MAX_WORKERS, n // pre.cards) + 1):
        rest = n - x * pre.cards
        if rest >= c.cards and not rest % c.cards and rest // c.cards <= PD_MAX_WORKERS:
            out.append((x, rest // c.cards))
    return out


@record
class PdReach:
    """--cards N with no load: the most users a split of the N cards into prefill and decode pools serves
    within the targets at the pessimistic end of its likely range (pd_most_users), and why no more."""

    users: int  # 0: no split serves one user
    named: str  # the split that serves them (_pd_pools_named; "" where none does)
    # what breaks at one user more on that split: the pessimistic ends past the targets, or that the pools
    # no longer keep up ("" where the search's bound, every decode slot MOST_USERS_PER_SLOT times, stops it)
    broke: str


def pd_most_users(inp: DeployInput, cands: list[Candidate], t: Targets, ref: Candidate,
                  memo: PdTimed | None = None) -> PdReach | None:
    """--cards N with no load: the most users (closed loop) any split of the N cards into prefill and decode
    workers serves within the targets at the pessimistic end of its likely range (_pools_meet), the splits
    the loaded search tries (pd_pairs beside `ref`, the aggregated answer: each tensor-parallel decode shape
    with prefill workers of its own or fewer cards; splits_on_cards), each split a doubling then bisection of
    the users, asked only from one more than the most found so far. None where P/D is not searched there
    (disaggregation's rule: an engine without P/D, or `ref` on one card). `memo`: the deploy call's P/D
    timings (PdTimed), which the search at the users found then reads (disaggregation)."""
    if not pd_engine(ref.setting.ctx) or ref.cards < 2:
        return None
    rt = ref.setting.ctx.runtime.id
    splits = []
    for pre, c in pd_pairs(cands, ref):
        if _prefill_alone_misses(inp, pre, c, t):  # one prompt alone is past the TTFT target
            continue
        for x, y in splits_on_cards(inp, pre, c):
            pools = _pools(c, x, y, pre)
            # users the split may be asked to serve at most: every decode slot MOST_USERS_PER_SLOT times
            splits.append((y * max(pools.decode.max_seqs, 1) * MOST_USERS_PER_SLOT, pre, c, x, y, pools))
    splits.sort(key=lambda s: -s[0])  # the most slots first, so a large reach skips the rest early
    memo = {} if memo is None else memo
    most, best = 0, None
    for hi, pre, c, x, y, pools in splits:
        if hi <= most:
            break  # sorted by bound: no split left can serve more
        feats = _features(inp, c, pools=pre)

        def timed(users: int, pre: Candidate = pre, c: Candidate = c, x: int = x, y: int = y,
                  pools: Any = pools, feats: tuple[str, ...] = feats) -> tuple[Any, bool, bool]:
            return _pd_timed(replace(inp, users=float(users)), pre, c, x, y, t, memo, pools, feats)

        def meets(users: int, timed: Callable[[int], tuple[Any, bool, bool]] = timed) -> bool:
            return timed(users)[1]

        lo = most + 1
        if not meets(lo):  # serves no more users than a split already found
            continue
        while lo * 2 <= hi and meets(lo * 2):
            lo *= 2
        most = largest_true(meets, lo, min(hi, lo * 2))
        best = (pre, c, x, y, feats, timed, hi)
    if best is None:
        return PdReach(0, "", "")
    pre, c, x, y, feats, timed, hi = best
    broke = ""
    if most < hi:
        broke = _pools_broke(timed(most + 1)[0], rt, feats, t, replace(inp, users=float(most + 1)))
    return PdReach(most, _pd_pools_named(pre, x, c, y), broke)


def _pools_broke(res: Any, runtime: str, feats: tuple[str, ...], t: Targets, inp: DeployInput) -> str:
    """What breaks on pools served `res` (_pools_meet's) that miss the targets: the pessimistic ends of their
    TTFT p90 and TPOT past the targets, or that they do not keep up with the load."""
    if not res.stable or not _holds_users(res, _workload(inp, 1)):
        return "the pools no longer keep up" if not res.stable else "users wait for a decode slot"
    misses = _ends_missed(*_pools_ends(res, runtime, feats), t)
    return " and ".join(misses) + " at the pessimistic end of its likely range" if misses else ""


def _ends_missed(ttft: float, tpot: float, t: Targets) -> list[str]:
    """The targets a TTFT p90 and a TPOT (seconds: the pools' pessimistic ends) miss, each with its target."""
    return [m for m in (f"TTFT p90 {ttft * 1e3:,.0f} ms against {t.ttft_s * 1e3:,.0f}" if ttft > t.ttft_s
                        else "",
                        f"TPOT {tpot * 1e3:.1f} ms against {t.tpot_s * 1e3:.1f}" if tpot > t.tpot_s else "")
            if m]


def _rent(gpu: Gpu, cards: int, rules: Any) -> float:
    """fitting.set_price of `cards` cards, inf for a card without a price ($0, owned, is 0)."""
    rent = fitting.set_price(gpu, cards, rules)
    return rent if rent is not None else math.inf


@lru_cache(maxsize=1024)
def _least_price(gpu: Gpu, cards: int, rules: Any, fewest: int, most: int) -> float:
    """The least rent of n sets of `cards` cards for n from `fewest` to `most` (fitting.set_price of n ×
    cards; inf for a card without a price): a floor under the rent of every count left to try. The volume
    discount changes only where the count reaches a tier's `min_count` (data/rental.toml), and between two
    such counts the rent grows with n, so the least is at `fewest` or at the first n of a tier up to `most`
    (tests/test_deploy_search.py against every n)."""
    firsts = {fewest, *(k for k in (-(-n // cards) for n, _ in rules.discounts) if fewest < k <= most)}
    prices = [fitting.set_price(gpu, cards * n, rules) for n in firsts]
    return min(p if p is not None else math.inf for p in prices)


def disaggregation(inp: DeployInput, cands: list[Candidate], t: Targets, agg: Result | None,
                   memo: PdTimed | None = None, ref: Candidate | None = None) -> Disaggregation | None:
    """Prefill/decode pools beside aggregated serving, on the setting and card of the aggregated answer
    (its every split inside a node): the cheapest that meets the targets, against the aggregated one. None
    where it is not searched: an engine without P/D, or a model whose aggregated replica is one card (a
    prompt's prefill there is short beside the decode steps it rides in, and the engines' own guides point
    P/D at large models and long prompts: SGLang "PD Disaggregation", vLLM "Disaggregated Prefilling").
    `memo`: the deploy call's P/D timings (PdTimed). `ref`: the candidate the pools are shaped beside where
    not `agg`'s (--cards N with no load: the one pd_most_users searched beside, pd_pairs)."""
    ref = agg.cand if ref is None and agg is not None else ref
    if agg is None or ref is None or not pd_engine(ref.setting.ctx) or ref.cards < 2:
        return None
    pairs = pd_pairs(cands, ref)
    memo = {} if memo is None else memo
    found = _pd_search(inp, pairs, t, memo)
    if found is None:
        why, near = _pd_none_why(inp, pairs, t, ref.gpu.name, memo)
        return Disaggregation("aggregated", why, None, predicted_monthly_usd=near)
    price, pre, c, x, y, res = found
    first, dec = _pd_workers(pre, c)
    d = _pd_deployment(inp, first, x, dec, y, res, price)
    room = round(_pools_headroom(inp, pd_pools(first, x, dec, y), c.setting.ctx.runtime.id, t,
                                 feats=_features(inp, c, pools=pre)), 2)
    return replace(_pd_winner(inp, agg, d, _pd_pools_named(pre, x, c, y), res, price), headroom=room)


def pd_pairs(cands: list[Candidate], ref: Candidate) -> list[tuple[Candidate, Candidate]]:
    """The (prefill shape, decode shape) pairs the P/D search tries beside candidate `ref` (the aggregated
    answer), workers on `ref`'s card inside one node whose two roles hold the model (_workers): each
    tensor-parallel split of `ref`'s setting with the prefill shapes _prefill_shapes gives it, then each
    attention-DP + EP layout of that setting (candidates' _expert_parallel; the setting's attention_groups)
    as both pools' workers, whichever of the two `ref` is. SGLang's DeepSeek P/D recipe runs both pools
    with attention DP and expert parallelism (SGLang "PD Disaggregation", DeepSeek Multi-Node: prefill and
    decode each `--tp-size 16 --dp-size 8 --enable-dp-attention --moe-a2a-backend
    deepep`, https://github.com/sgl-project/sglang/blob/main/docs/advanced_features/pd_disaggregation.md),
    so an aggregated answer in one layout no longer confines the pools to it (before, an attention-DP
    answer was its one pair and a tensor-parallel one never had attention-DP workers)."""
    here = [c for c in pd_family(cands, ref) if _workers(c) is not None]
    same = [c for c in here if c.attention_dp == 1 and c.ep == 1]
    layouts = [c for c in here if c.attention_dp > 1 or c.ep > 1]
    return [(pre, c) for c in same for pre in _prefill_shapes(same, c)] + [(c, c) for c in layouts]


def pd_family(cands: list[Candidate], ref: Candidate) -> list[Candidate]:
    """The candidates the P/D search shapes workers from beside `ref` (pd_pairs): on `ref`'s card inside one
    node, of `ref`'s setting (or the one its attention-DP + EP layout comes from) or one of its layouts."""
    base = ref.setting
    if ref.attention_dp > 1 or ref.ep > 1:  # an attention-DP + EP answer: the setting its layouts come from
        base = next((c.setting for c in cands if c.attention_dp == 1 and c.ep == 1 and c.gpu == ref.gpu
                     and any(g is ref.setting for g in c.setting.attention_groups.values())), ref.setting)
    family = (base, ref.setting, *base.attention_groups.values())
    return [c for c in cands if any(c.setting is s for s in family) and c.gpu == ref.gpu and c.nodes == 1]


def _pd_search(inp: DeployInput, pairs: list[tuple[Candidate, Candidate]], t: Targets, memo: PdTimed,
               predicted: bool = False) -> tuple[float, Candidate, Candidate, int, int, Any] | None:
    """Of the (prefill shape, decode shape) `pairs`, the cheapest split of prefill and decode workers that
    meets the targets at the pessimistic end of its likely range (`predicted`: as predicted), then the one
    that serves best (_pd_rank); with --cards N, of the splits of the N cards, the one that serves best:
    (rent, the two shapes, prefill, decode workers, the pools served); None where none does."""
    found: tuple[float, tuple[float, float, float], Candidate, Candidate, int, int, Any] | None = None
    for pre, c in pairs:
        # without --cards, a set that cannot come in at or below the cheapest found is not timed: only a lower
        # rent, or the same rent serving better (_pd_rank), replaces it
        below = math.nextafter(found[0], math.inf) if found is not None else math.inf
        if inp.cards:
            got = _pd_on_cards(inp, pre, c, t, memo, predicted)
        elif pre is c:
            got = _pd_cheapest(inp, c, t, below, memo, predicted)
        else:
            got = _pd_cheapest_apart(inp, pre, c, t, below, memo, predicted)
        if got is None:
            continue
        rent = fitting.set_price(c.gpu, got[0] * pre.cards + got[1] * c.cards, c.setting.ctx.rules)
        price = rent if rent is not None else math.inf  # no price: never the cheapest; $0 (owned) is 0
        key = (price, _pd_rank(inp, got[2]))
        if found is None or key < found[:2]:
            found = (*key, pre, c, *got)
    return (found[0], *found[2:]) if found is not None else None


def _pd_none_why(inp: DeployInput, pairs: list[tuple[Candidate, Candidate]], t: Targets, gpu: str,
                 memo: PdTimed | None = None) -> tuple[str, float | None]:
    """Why P/D lost where no split of prefill and decode workers meets the targets: the split the same search
    finds meeting them as predicted (_pd_search, its timings shared through `memo`) and its TTFT p90 / TPOT
    at the pessimistic end of its likely range (a P/D deployment is held to the runtime's serving error
    widened by the disaggregated records' own, data/accuracy.toml [[feature_range]]), or that none meets
    them even as predicted; with the rent of the split named (None where none is, or it has no price).
    `gpu`: the card the pairs are on."""
    within = f"on exactly {inp.cards} cards" if inp.cards else f"within {PD_MAX_WORKERS} workers"
    why = f"aggregated: no split of prefill and decode workers on {gpu} meets the targets {within}"
    near = _pd_search(inp, pairs, t, {} if memo is None else memo, predicted=True)
    if near is None:
        return why + ", even as predicted", None
    price, pre, c, x, y, res = near
    misses = _ends_missed(*_pools_ends(res, c.setting.ctx.runtime.id, _features(inp, c, pools=pre)), t)
    if not misses:  # the split holds at that end too (its pools' TTFT not falling with more prefill workers
        return why, None  # as the search's bisection takes it): nothing to name it by
    rent = f" for ${price:,.0f}/month" if math.isfinite(price) else ""
    return (why + f" at the pessimistic end of its likely range: the {'best' if inp.cards else 'cheapest'} "
            f"that meets them as predicted, {_pd_pools_named(pre, x, c, y)}{rent} (TTFT p90 "
            f"{res.ttft_s * 1e3:,.0f} ms, TPOT {res.tpot_s * 1e3:.1f} ms), reaches " + " and ".join(misses)
            + " there (cardfit's out-of-sample error on disaggregated serving records)",
            round(price, 2) if math.isfinite(price) else None)


def _pd_winner(inp: DeployInput, agg: Result, d: Deployment, named: str, res: Any,
               price: float) -> Disaggregation:
    """Which wins, the aggregated answer `agg` or the disaggregated deployment `d`, and why."""
    if inp.cards:
        return _pd_on_cards_winner(inp, agg, d, named, res)
    agg_price = agg.monthly_usd if agg.meets and agg.monthly_usd is not None else math.inf
    if price < agg_price:
        why = (f"disaggregated: {named} meet the targets for ${price:,.0f}/month, "
               f"aggregated serving for ${agg.monthly_usd or 0:,.0f}"
               + ("" if agg.meets else " (and it misses them)")
               + ": prefilled apart, the prompts no longer ride in the decode steps, so fewer decode cards "
               f"hold the TPOT ({res.tpot_s * 1e3:.1f} ms; TTFT p90 {res.ttft_s * 1e3:,.0f} ms with each "
               f"prompt's KV cache crossing in {res.transfer_s * 1e3:.1f} ms)")
        return Disaggregation("disaggregated", why, d)
    pools = f"the cheapest disaggregated deployment that meets the targets ({named})"
    if price == agg_price:
        why = (f"aggregated: ${price:,.0f}/month, the same as {pools}; one pool needs no KV transfer between "
               "workers nor a prefill/decode router")
    else:
        why = (f"aggregated: ${agg.monthly_usd or 0:,.0f}/month against ${price:,.0f} for {pools}: mixing "
               "prompts into the decode steps costs less here than capacity split between two pools")
    return Disaggregation("aggregated", why, d)


def _pd_on_cards_winner(inp: DeployInput, agg: Result, d: Deployment, named: str,
                        res: Any) -> Disaggregation:
    """--cards N: the same cards either way, so the pools win where they meet the targets and the aggregated
    replicas do not, or where they serve the load better (_pd_rank: more tokens/s to a closed loop, else a
    shorter TPOT, then TTFT)."""
    pools = f"{named} on the {inp.cards} cards"
    agg_rank = (-agg.served_tokens_per_s if inp.users is not None else 0.0, agg.served.tpot_s,
                agg.served.ttft_s)
    figures = (f"{res.output_tokens_per_s:,.0f} tok/s, TPOT {res.tpot_s * 1e3:.1f} ms, TTFT p90 "
               f"{res.ttft_s * 1e3:,.0f} ms against {agg.served_tokens_per_s:,.0f} tok/s, TPOT "
               f"{agg.served.tpot_s * 1e3:.1f} ms, TTFT p90 {agg.served.ttft_s * 1e3:,.0f} ms aggregated")
    if not agg.meets:
        return Disaggregation("disaggregated", f"disaggregated: {pools} meet the targets, aggregated "
                              f"replicas on them do not ({figures})", d)
    if _pd_rank(inp, res) < agg_rank:
        return Disaggregation("disaggregated", f"disaggregated: {pools} serve the load better ({figures}): "
                              "prefilled apart, the prompts no longer ride in the decode steps", d)
    return Disaggregation("aggregated", f"aggregated: the replicas serve the load as well or better than "
                          f"the best split into pools, {pools} ({figures}), with no KV transfer between "
                          "workers nor a prefill/decode router", d)


def _pd_deployment(inp: DeployInput, pre: Candidate, x: int, dec: Candidate, y: int, res: Any, price: float,
                   meets: bool = True, tight: bool = False) -> Deployment:
    """The disaggregated deployment as deploy answers one: `x` prefill workers shaped like `pre` and `y`
    decode workers shaped like `dec`, each role started by its own command (one line per role). The
    top-level split (tp, pp, dp, ep, max_num_seqs, memory) is a decode worker's; `disaggregated` gives
    each pool's."""
    from ..runtimes.launch import DYNAMO_FRONTEND

    total = res.output_tokens_per_s
    per_m = None
    if total > 0 and math.isfinite(price):
        per_m = price / cost.capacity_millions(total, cost.HOURS_PER_MONTH)
    count = x * pre.cards + y * dec.cards
    cmds = [_pd_command(c, role) for c, role in ((pre, "prefill"), (dec, "decode"))]
    dynamo = [_pd_command(c, role, dynamo=True) for c, role in ((pre, "prefill"), (dec, "decode"))]
    rt = dec.setting.ctx.runtime
    feats = _features(inp, dec, pools=pre)  # disaggregated: never none
    return Deployment(
        gpu=dec.gpu.name, count=count, nodes=math.ceil(count / dec.setting.ctx.rules.node_size),
        cards_per_node=dec.per_node, tp=dec.tp, pp=dec.pp, replicas=x + y, runtime=rt.named,
        quant=dec.setting.ctx.quant.name, kv_dtype=dec.setting.mem.kv_dtype,
        max_num_seqs=launched_seqs(dec.replica),
        monthly_usd=round(price, 2) if math.isfinite(price) else None,
        cost_per_million_usd=round(per_m, 4) if per_m is not None else None,
        ttft_ms=_ms(res.ttft_s), tpot_ms=_ms(res.tpot_s), aggregate_tokens_per_s=round(total, 1),
        per_user_tokens_per_s=round(res.per_user_tokens_per_s, 2), ttft_mean_ms=_ms(res.ttft_mean_s),
        prefill_ms=_ms(res.prefill_s), batch_per_replica=round(res.batch, 2),
        utilization=round(res.utilization, 4), meets_targets=meets, quality=dec.setting.quality,
        memory=DeploymentMemory(dec.option.need_bytes, dec.option.budget_bytes, dec.option.free_bytes,
                                dec.margin_bytes, dec.kv_tokens),
        command="\n".join(x for x in cmds if x),
        likely=ranges(res.ttft_s, res.tpot_s, total, rt.id, feats), tight=tight,
        likely_features=list(banded(feats)) or None,
        release=release_name(rt), dp=launched_dp(dec), ep=dec.ep,
        disaggregated={"prefill": _pool_view(pre, x), "decode": _pool_view(dec, y)},
        dynamo_command="\n".join((shlex.join(DYNAMO_FRONTEND), *(x for x in dynamo if x)))
        if all(dynamo) else None)


def _pool_view(c: Candidate, workers: int) -> dict[str, Any]:
    """One pool of a disaggregated deployment in its JSON: {gpu, count (cards a worker), tp, replicas
    (workers)}, and its worker's attention-DP groups as its line runs them (launched_dp, as the deployment's
    own `dp`) and expert-parallel ranks (1, 1: tensor parallel)."""
    return {"gpu": c.gpu.name, "count": c.cards, "tp": c.tp, "replicas": workers,
            "dp": launched_dp(c), "ep": c.ep}


def _pd_command(c: Candidate, role: str, dynamo: bool = False) -> str | None:
    """One `role` worker's launch line: the engine's own, or (`dynamo`) as NVIDIA Dynamo starts it (None
    where Dynamo has no worker of the engine)."""
    if dynamo and not hasattr(c.setting.ctx.engine, "dynamo_launch"):
        return None
    return launch_command(c.setting.ctx, c.tp, c.pp, c.setting.mem.context, launched_seqs(c.replica),
                          c.setting.kv_flag, c.setting.slots, c.nodes, 1, False,
                          dp=c.attention_dp, ep=c.ep, disaggregation=role, dynamo=dynamo,
                          fraction=stated_fraction(c, role))


def _with_disaggregation(inp: DeployInput, cands: list[Candidate], t: Targets, report: DeployReport,
                         best: Result | None, near: Result | None = None,
                         no_load: tuple[PdReach, int, Candidate] | None = None,
                         pd_cands: list[Candidate] | None = None,
                         memo: PdTimed | None = None) -> DeployReport:
    """The report with the disaggregated search beside it; its deployment is `best` where it wins (with
    --cards N, pools that fill exactly the N cards), against `best`, else `near` (closest()'s answer, which
    the report shows: deploy_report found it already; None only where closest() is, and then there is
    nothing to weigh the pools against). `no_load`: --cards N with no load, the most users the pools serve
    (pd_most_users), the most the aggregated replicas serve and the aggregated answer the pools were searched
    beside; where the pools serve more, they are searched beside that answer at their users (its setting
    and card, as pd_most_users searched them: disaggregation's `ref`), and `why` weighs the two counts of
    users (_no_load_why). `pd_cands`: the sets the pools are shaped from where not `cands` (deploy_report's
    no-load path: every set that fills the cards, where `cands` are those that serve the most users).
    `memo`: the deploy call's P/D timings (PdTimed), pd_most_users' among them."""
    agg = best if best is not None else near
    shaped = cands if pd_cands is None else pd_cands
    ref = no_load[2] if no_load is not None and best is None and no_load[0].users > no_load[1] else None
    pd = disaggregation(inp, shaped, t, agg, memo, ref)
    if pd is None:
        return report
    if no_load is not None:
        pd = _no_load_why(inp, pd, no_load[0], no_load[1])
    if pd.winner == "disaggregated" and pd.deployment is not None:
        return replace(report, disaggregation=pd, best=pd.deployment, meets_targets=True, failing=None,
                       headroom=pd.headroom,
                       apis=_apis_of(pd.deployment.aggregate_tokens_per_s, pd.deployment.monthly_usd, inp),
                       closest=None if best is None else report.closest)
    return replace(report, disaggregation=pd)


def _no_load_why(inp: DeployInput, pd: Disaggregation, reach: PdReach, agg_users: int) -> Disaggregation:
    """--cards N with no load: why P/D won or lost, in users. The most users each way serves within the
    targets, then the loaded search's reason at the users found (_pd_on_cards_winner, _pd_none_why); where
    the pools serve fewer users than the replicas, what breaks them at one user more (PdReach.broke) in its
    place. Where no split serves one user, the loaded search's reason alone."""
    if reach.users == 0:
        return replace(pd, users=0)
    head = (f"the most users the {inp.cards} cards serve within the targets: {agg_users:,} as aggregated "
            f"replicas, {reach.users:,} split into pools")
    if pd.winner == "aggregated" and reach.users < agg_users:
        broke = f"; at {reach.users + 1:,} users its {reach.broke}" if reach.broke else ""
        # the loaded reason is not given, so neither is the rent of the split it names (the JSON's
        # predicted_monthly_usd: the rent of the split `why` names)
        return replace(pd, why=f"aggregated: {head} ({reach.named}{broke})", users=reach.users,
                       predicted_monthly_usd=None)
    loaded = pd.why.removeprefix(pd.winner + ": ")
    return replace(pd, why=f"{pd.winner}: {head}; at {int(inp.users or 0):,} users, {loaded}",
                   users=reach.users)


def _asked(inp: DeployInput, t: Targets, length: int, found: bool = False) -> Workload:
    return Workload(inp.users, inp.requests_per_s, inp.input_tokens, inp.output_tokens, inp.input_tokens_p90,
                    inp.output_tokens_p90, length, t.given["ttft_ms"], t.given["tpot_ms"],
                    round(1000 / t.given["tpot_ms"], 2),
                    TargetsGiven(inp.ttft_ms is not None,
                                 inp.tpot_ms is not None or inp.tokens_per_s_per_user is not None),
                    inp.shared_prefix_tokens, inp.turns, prompt_tokens(inp), inp.sessions, inp.kv_offload_gb,
                    inp.cards, found, inp.prefix_groups, int(inp.requests) if inp.requests else None,
                    int(inp.warm_requests) if inp.requests and inp.warm_requests else None)


# --- one deployment pinned (services/pinned.py: what an engine release schedules with) ---------------------

@record
class Pinned:
    """A pinned deployment timed: deploy's Result for its steady state, the benchmark run where --requests
    asks for one, and how it was set up (one line)."""

    result: Any  # services.deploy.Result
    bench: sv.Benchmark | None
    itl_median_s: float  # the middle gap between tokens: a decode-only step at the load, mostly
    prefill_first: bool
    how: str
    pools: PinnedPools | None = None  # a disaggregated deployment (--prefill-workers): its two pools timed
    # the benchmark's KV pool binds (core/serving.py binds): every request stepped through it, its TPOT
    # carrying the stalls of the requests it preempts and computes again
    preempting: bool = False


def pinned_answer(inp: DeployInput) -> Pinned:
    """The pinned deployment `inp` names, timed (its replica built with its release's older-kernel constants:
    _replica)."""
    from ..catalog.gpus import default_gpus
    from ..catalog.models import default_models
    from ..core.constants import snapshot
    from .pinned import (
        check_adp_balance,
        check_graph_max_bs,
        check_mixed_chunk,
        check_pinned,
        check_pinned_model,
        check_recv_interval,
        length_law,
        schedule,
    )
    from .resolve import resolve

    check_pinned(inp)
    rt = default_runtimes().get(inp.runtime or "")
    check_recv_interval(inp, rt)
    check_mixed_chunk(inp, rt)
    check_adp_balance(inp, rt)
    check_graph_max_bs(inp, rt)
    _check_drafting_beside_dp(inp, rt)
    gpu = default_gpus().get(inp.gpu[0])
    model = default_models().find(inp.model) if inp.model else None
    if model is None:
        model = resolve(inp).model
    check_pinned_model(inp, model)
    law = length_law(inp, law_context(inp))
    tp, pp = int(inp.tp or 1), int(inp.pp or 1)
    budget, first = schedule(rt, model, inp.max_num_batched_tokens, inp.max_model_len, inp.enable_mixed_chunk)
    if pd_pinned(inp):
        return _pools_answer(inp, rt, gpu, pp, budget, first, snapshot(rt.id))
    return _answer(inp, rt, gpu, tp, pp, budget, first, snapshot(rt.id), law)


def _check_drafting_beside_dp(inp: DeployInput, rt: RuntimeProfile) -> None:
    """A pinned deployment with attention groups that drafts with a method its engine refuses beside
    attention DP (refuses_dp_attention) is an error, as the engine's own start is."""
    from ..runtimes import adapter
    from .speculative import method_of

    if (inp.attention_dp or 1) > 1 and refuses_dp_attention(adapter(rt), method_of(inp.speculative)):
        raise InputError(f"{rt.name} does not run --speculative {inp.speculative} beside attention data "
                         f"parallelism (--attention-dp {inp.attention_dp}): drop one of the two",
                         field="speculative")


def _answer(inp: DeployInput, rt: RuntimeProfile, gpu: Gpu, tp: int, pp: int, budget: int, first: bool,
            consts: tuple[tuple[str, float], ...], law: sv.Lengths | None = None) -> Pinned:
    """`law`: how the benchmark run (--requests) draws its lengths (services/pinned.py length_law); None:
    every request at the means."""
    from .pinned import _paged, bench_run, is_stage, law_text

    v0 = not rt.has("v1_engine")
    dp, ep = int(inp.attention_dp or 1), int(inp.expert_parallel or 1)
    server = int(inp.max_num_seqs or 0)  # the server's --max-num-seqs as the question states it
    res, how = _timed_worker(inp, rt, gpu, tp, pp, per_rank_cap(rt, server, dp, ep), dp, ep, budget, consts,
                             server_cap=server)
    replica = res.cand.replica
    users = int(inp.users or 1)
    stage = is_stage(inp)  # a stage of arrivals (--requests-per-s)
    # the median token gap at the batch the run decodes: a closed loop's users, a stage's decoding sequences
    itl = sv.itl_median_s(replica, sv.Workload(inp.input_tokens, inp.output_tokens),
                          min(res.served.batch if stage else users, replica.max_seqs))
    bench = None
    preempting = False
    if stage:
        rate = float(inp.requests_per_s or 0.0) / max(res.replicas, 1)
        bench = sv.open_stage(res.served, int(inp.requests), rate, inp.output_tokens)
        if bench is not None:
            queue = ("within the replica's capacity: its queue bounded by what the stage builds"
                     if res.served.stable else
                     "above the replica's capacity: its queue grows through the stage")
            how = (f"{how}; a stage of {inp.requests} requests arriving at {rate:g}/s from an empty queue, "
                   f"{queue}")
            if law is not None:
                how = f"{how}; its p90 TTFT over the prompts drawn ({law_text(law)}), the rest at the means"
    elif inp.requests:
        asked = int(inp.max_num_seqs or 0) or (rt.max_num_seqs if v0 else 0)  # the server's (a group's) cap
        # the replica's cap over the attention groups its line runs, each group's scheduler its share
        # (launched_dp, dp_total)
        groups = launched_dp(res.cand)
        paged = _paged(res.cand, rt, dp_total(rt, "max_num_seqs", asked, groups) if asked else 0)
        # TensorRT-LLM's PyTorch backend keeps a benchmark's rounds in lockstep (runtimes.toml
        # lockstep_rounds); a TensorRT engine (no PyTorch backend at its release) does not. SGLang with
        # --enable-mixed-chunk is stepped round by round as without it (a prefill-first engine's rounds:
        # core/serving.py benchmark), its decodes now riding in the prompt steps
        lockstep = (bool(rt.lockstep_rounds) and rt.has("pytorch_backend")) or inp.enable_mixed_chunk
        w = sv.Workload(inp.input_tokens, inp.output_tokens, users=float(users))
        reused = _reused(inp, res.cand, w)
        bench = bench_run(paged, inp, users, int(inp.requests), first, True if law is None else law, lockstep,
                          reused)
        if reused is not None:
            w = sv.reused_as(w, reused)
        order = "prefill-first" if first else "decode-first"
        how = (f"{how}; a benchmark of {inp.requests} requests at {users} in flight, {order} scheduler, "
               f"{replica.chunk_tokens:,} tokens a step")
        preempting = sv.binds(paged, w, users)
        if int(inp.requests) > users and preempting:
            how = f"{how}, every request stepped through the KV pool (it cannot hold {users} requests whole)"
        if law is not None:
            # core/serving.py benchmark(): a drawn law times a run of one round (--requests <= --users) or a
            # run whose paged pool binds (stepped whole); a longer run is otherwise its first round and the
            # steady state at the mean lengths
            how = f"{how}, {law_text(law)}" if int(inp.requests) <= users or preempting else \
                f"{how}, at the mean lengths (a length law times runs of one round: --requests <= --users)"
    return Pinned(res, bench, itl, first, how, preempting=preempting)


def per_rank_cap(rt: RuntimeProfile, cap: int, dp: int, ep: int) -> int:
    """One attention group's sequence cap when the server is started with --max-num-seqs `cap` (0: the
    engine's): the engine's share per group where the line runs attention groups, each a scheduler of its
    own (runtimes/launch.py attention_groups: with `ep` > 1, or SGLang's attention DP alone; timed multiplies
    it back by the groups; vLLM and TensorRT-LLM the whole, SGLang --max-running-requests // dp:
    runtimes/base.py per_dp_rank, whether or not EP is on: each DP worker's scheduler takes 'max(1,
    max_num_reqs // self.attn_dp_size)', mem_cache/kv_cache_configurator.py resolve_max_num_reqs lines
    3126-3130 of the PyPI wheel sglang 0.5.23, https://pypi.org/project/sglang/0.5.23/), else the cap
    itself."""
    from ..runtimes import adapter
    from ..runtimes.launch import attention_groups

    engine = adapter(rt)
    return engine.per_dp_rank("max_num_seqs", cap, attention_groups(engine, dp, ep))


def _timed_worker(inp: DeployInput, rt: RuntimeProfile, gpu: Gpu, tp: int, pp: int, cap: int, dp: int,
                  ep: int, budget: int, consts: tuple[tuple[str, float], ...],
                  role: str = "", server_cap: int = 0) -> tuple[Result, str]:
    """One replica (or one `role` worker of a disaggregated pool) of a pinned deployment timed with the
    engine settings its release launches it with: `cap` one attention group's sequence cap (per_rank_cap),
    `server_cap` the server's --max-num-seqs its line states (0: none)."""
    from .pinned import prefill_batch_tokens

    v0 = not rt.has("v1_engine")
    step = prefill_batch_tokens(inp, rt, gpu, budget)
    # vLLM V0 sizes its profile run (and so its KV pool) for its own budget and schedules at most its
    # 256-sequence default, chunked prefill on or off (vllm/engine/arg_utils.py EngineArgs.max_num_seqs = 256,
    # v0.6.3); V1's default on a big card is 1,024
    return timed(inp, gpu.name, tp, pp, cap, consts, budget, rt.max_num_seqs if v0 else 0,
                 float(inp.gpu_memory_utilization or 0.0), dp, step, ep, role, server_cap)


@record
class PinnedPools:
    """A pinned disaggregated deployment timed: one worker of each pool (deploy's Result of it alone), the
    workers of each, and the two pools under the whole load (core/disagg.py serve)."""

    prefill: Result
    prefill_workers: int
    decode: Result
    decode_workers: int
    pools: Any  # core.disagg.Pools
    served: Any  # core.disagg.Disaggregated
    meets: bool  # the targets hold at the pessimistic end of the likely range
    predicted: bool  # the targets hold as predicted
    price: float


def _pools_answer(inp: DeployInput, rt: RuntimeProfile, gpu: Gpu, pp: int, budget: int, first: bool,
                  consts: tuple[tuple[str, float], ...]) -> Pinned:
    """--prefill-workers X --decode-workers Y: each pool's worker timed as a pinned replica of its split
    (_timed_worker), the two pools under the load by the code deploy's own P/D search uses (pd_pools,
    _pools_meet)."""
    from ..runtimes import adapter

    if not (getattr(adapter(rt), "PD_DISAGGREGATION", False) and rt.paged_kv):
        able = ", ".join(r.id for r in servers() if getattr(adapter(r), "PD_DISAGGREGATION", False))
        raise InputError(f"{rt.id} has no disaggregated prefill/decode that cardfit launches ({able} have): "
                         "leave out --prefill-workers / --decode-workers", field="prefill_workers")
    from ..runtimes.launch import attention_groups

    workers = []
    for role in ("prefill", "decode"):
        n, tp, dp, cap = pool_shape(inp, role)
        ep = tp if dp > 1 else 1
        # --{role}-batch-size is one group's batch, the server started with the flag that gives each group
        # its batch (runtimes/base.py dp_server_value); --max-num-seqs the server's flag, each group its share
        if getattr(inp, f"{role}_batch_size"):
            server = adapter(rt).dp_server_value("max_num_seqs", cap, attention_groups(adapter(rt), dp, ep))
        else:
            server, cap = cap, per_rank_cap(rt, cap, dp, ep)
        res, _ = _timed_worker(inp, rt, gpu, tp, pp, cap, dp, ep, budget, consts, role, server)
        workers.append((res, n))
    (pre, x), (dec, y) = workers
    pools = pd_pools(pre.cand, x, dec.cand, y)
    res, meets, predicted = _pools_meet(inp, pools, rt.id, targets(inp),
                                        feats=_features(inp, dec.cand, pools=pre.cand))
    count = x * pre.cand.cards + y * dec.cand.cards
    price = fitting.set_price(dec.cand.gpu, count, dec.cand.setting.ctx.rules)
    how = (f"disaggregated timing: {_count(x, 'prefill worker')} of {_split(pre.cand)} + "
           f"{_count(y, 'decode worker')} of {_split(dec.cand)}, {gpu.name}, "
           f"{dec.cand.setting.ctx.quant.name}; "
           f"{_load_of(inp)}: prefill {res.prefill_s * 1e3:,.0f} ms, KV transfer {res.transfer_s * 1e3:.1f} "
           f"ms, {res.batch:.1f} sequences decoding a worker, {'stable' if res.stable else 'overloaded'}")
    itl = res.tpot_s  # a decode worker's steps carry no prompt: every gap is a decode step
    bench = None
    if inp.requests:  # a closed loop's finite run (check_pools): its first wave, then the steady state
        from ..core import disagg

        users = int(inp.users or 1)
        bench = disagg.benchmark(pools, _workload(inp, 1), users, int(inp.requests))
        how = (f"{how}; a benchmark of {int(inp.requests)} requests at {users} in flight: the first {users} "
               "prompts queued on the prefill pool at once, then the steady state, at the mean lengths")
    return Pinned(dec, bench, itl, first, how,
                  PinnedPools(pre, x, dec, y, pools, res, meets, predicted,
                              price if price is not None else math.inf))


def _load_of(inp: DeployInput) -> str:
    if inp.requests_per_s is not None:
        return f"{inp.requests_per_s:g} requests/s arriving"
    return f"closed loop of {inp.users or 1:g} users"


def _pd_pools_named(pre: Candidate, x: int, c: Candidate, y: int) -> str:
    """`x` prefill workers shaped like `pre` and `y` decode workers shaped like `c`, in words (one owner with
    the pinned pools' timing: _pools_answer)."""
    if pre is c or (pre.cards, pre.tp, pre.attention_dp, pre.ep) == (c.cards, c.tp, c.attention_dp, c.ep):
        return f"{x} prefill + {y} decode workers of {_split(c)}"  # two or more workers in all
    return f"{_count(x, 'prefill worker')} of {_split(pre)} + {_count(y, 'decode worker')} of {_split(c)}"


def _count(n: int, what: str) -> str:
    """`n` of `what`, in words: "1 card", "3 cards"."""
    return f"{n} {what}" + ("" if n == 1 else "s")


def _split(c: Candidate) -> str:
    """One worker's cards and split, as a pinned disaggregated deployment's timing names it."""
    if c.ep > 1:
        return f"{_count(c.cards, 'card')} (attention DP {c.attention_dp}, EP {c.ep})"
    return f"{_count(c.cards, 'card')} (TP {c.tp})"



@lru_cache(maxsize=256)
def timed(inp: DeployInput, gpu_name: str, tp: int, pp: int, cap: int,
          constants: tuple[tuple[str, float], ...] = (), chunk_tokens: int = 0,
          engine_seqs: int = 0, utilization: float = 0.0, dp: int = 1,
          step_tokens: int = 0, ep: int = 1, role: str = "", server_cap: int = 0) -> tuple[Result, str]:
    """One replica of the deployment, timed by deploy's model: memory sized on the card with the engine's own
    step budget (`chunk_tokens`), sequence cap (`cap`, the server's --max-num-seqs as one attention group's
    engine takes it; else its default `engine_seqs`) and share of the card (`utilization`, vLLM's
    gpu_memory_utilization) where they differ from the runtime's current defaults (0: those), as `cardfit
    plan` sizes the same settings;
    `step_tokens`: the tokens a step carries where the engine caps its prompt batches below the chunk its
    memory was sized for (prefill_batch_tokens; 0: the chunk); `ep` > 1: the experts expert-parallel over
    the tp ranks beside `dp` attention groups (expert_parallel_memory); with them or without (SGLang's
    attention DP alone: attention_dp_memory), each attention group the line runs (runtimes/launch.py
    attention_groups) a scheduler of its own with the given per-rank sequence cap and its share of the step
    budget (_replica); `server_cap`: the server's --max-num-seqs as its line states it (0: none), which
    SGLang's reserve reads whole where `cap` is one group's share of it (plan.py Context.engine_at).
    `constants`: the runtime's constants in place (core/constants.py snapshot), which key the memo.
    `role`: "prefill" | "decode" for one worker of a disaggregated deployment ("" a replica), whose engine
    sizes its memory for that role, its attention DP and drafter (Runtime.as_worker: SGLang's prompt-step
    graphs, runtimes/sglang.py prompt_graphs_captured)."""
    from ..runtimes.launch import attention_groups
    from .plan import build_context, engine_defaults, memory_for, ollama_one_slot, split_cards

    check(inp)
    rt = default_runtimes().get(inp.runtime or "")
    sets, _ = settings(inp, any_runtime=True)  # TGI is timed for its records, not offered by the search
    s = pinned_setting(inp, sets)
    if chunk_tokens or engine_seqs or utilization or cap:
        # the engine's profile run, which sizes its KV pool, samples one row of logits for each of
        # min(max_num_seqs, batched tokens) sequences, max_num_seqs the server's --max-num-seqs where given
        # (each attention group's engine its own: per_rank_cap), else its default (vLLM's
        # vllm/v1/worker/gpu_model_runner.py profile_run -> _dummy_run: num_reqs = min(num_tokens,
        # max_num_reqs = scheduler_config.max_num_seqs) -> _dummy_sampler_run over their last hidden states,
        # https://github.com/vllm-project/vllm/blob/v0.22.0/vllm/v1/worker/gpu_model_runner.py, the same at
        # v0.11.2): the plan's memory (plan.py engine_defaults) reads it from the input
        s = replace(s, ctx=build_context(replace(s.ctx.inp, prefill_chunk=chunk_tokens or None,
                                                 max_num_seqs=cap or engine_seqs or None,
                                                 gpu_memory_utilization=utilization or None)))
    ctx, m = s.ctx, s.ctx.model
    gpu = ctx.gpus.get(gpu_name)
    s = replace(s, mem=memory_for(ctx, s.mem.context, gpu))  # sized on the card, as the search does
    cards = tp * pp
    # the ranks that copy a sequence's cache: one attention group's wherever the line runs attention DP,
    # with or without expert parallelism (SGLang sizes each rank's KV heads by the attention-TP size tp / dp:
    # model_executor/pool_configurator.py lines 356, 492 'tp_size = get_parallel().attn_tp_size',
    # 'get_num_kv_heads(tp_size, dcp_size)'; runtime_context.py derive_attn_tp_size 'tp_size //
    # attn_dp_size', PyPI wheel sglang 0.5.23)
    groups = attention_groups(ctx.engine, dp, ep)
    group = tp // groups
    if groups > 1 and ep == 1:
        _check_attention_dp_alone(ctx, groups, tp)
        s = replace(s, mem=attention_dp_memory(s, groups))
    if ep > 1:
        s = replace(s, mem=expert_parallel_memory(s, dp))
    if groups > 1:
        cap *= groups  # each attention group's scheduler takes up to its own cap (per_rank_cap)
        if server_cap:  # the server's --max-num-seqs as stated, which SGLang's reserve reads whole (not the
            # groups' shares added back: --max-running-requests 100 over 8 groups schedules 8 x 12 = 96 and
            # caps the decode graphs at 100; plan.py Context.engine_at)
            ctx = replace(ctx, server_max_num_seqs=server_cap)
            s = replace(s, ctx=ctx)
    # the pinned attention-DP ranks, the worker's role and the server's --tp-size (all `tp` ranks, where
    # each attention group copies its cache over `group`) size the engine's reserve (SGLang:
    # runtimes/sglang.py reserved_mib)
    engine = ctx.engine_at(dp, role, server_tp=tp if group != tp else 0)
    opt = fitting.check(s.mem, gpu, cards, engine, ctx.rules, utilization=ctx.utilization,
                        model=m, tp=group, pp=pp, cards=split_cards(ctx, s.mem))
    seqs = cap or max(int(inp.users or 0), engine_defaults(ctx, gpu)[1] if rt.paged_kv else 1)
    if ollama_one_slot(rt, m):
        seqs = 1  # whatever OLLAMA_NUM_PARALLEL says
    # the engine's own cap, as it is started (--max-num-seqs, else its default on the card, for each
    # attention group where they are engines of their own: the cap services/pinned.py _paged steps a
    # benchmark's pool with), which its KV pool may cut below (seqs)
    own = (cap or engine_defaults(ctx, gpu)[1] * groups) if rt.paged_kv else 0
    pooled = None
    if rt.paged_kv and opt.fits:  # the engine's own pool (point estimate): it caps the sequences in flight
        def kv(tokens: int) -> int:
            return ctx.engine.kv_bytes(m, MemorySettings(context=tokens, sequences=1,
                                                         kv_dtype=s.mem.kv_dtype)) if tokens else 0
        # the shared prefixes as the search holds them (prefix_layouts: one prefix once, several once each or
        # per sequence), once per attention group where the groups are schedulers of their own (`groups`)
        # (and a sequence's drafter cache beside its own, _draft_kv, as the search's layouts hold it)
        draft = _draft_kv(s, inp, rt)
        layouts = [(kv(kv_held(inp, rt) + own) + draft, kv(once)) for once, own in prefix_layouts(inp, rt)]
        pooled = _most_pooled(s.mem, opt, cards, ctx.engine.kv_copies(m, group), rt, layouts, 0, groups)
        if pooled is not None:
            seqs = max(1, min(seqs, pooled[0]))
    # the engine is started (and its CUDA graphs sized: core/serving.py eager_s) with its own cap where the
    # pool holds every user asked for, so it never preempts; where it cannot, the launch line caps the
    # engine at what its pool holds, as the steady state times it (a run stepped through a pool that
    # preempts is the benchmark's: services/pinned.py _paged)
    users = int(inp.users or 0)
    engine_cap = own if own > seqs and ctx.runtime.prefill_graph_tokens and users and seqs >= users else 0
    c = Candidate(s, gpu, cards if pp == 1 else cards // pp, pp, tp, pp, opt, seqs, opt.monthly_usd,
                  pooled[1] if pooled else 0, 0, inp, step_tokens or chunk_tokens, dp, ep, engine_cap)
    res = evaluate(inp, c, 1, targets(inp))
    held = f", KV pool {pooled[1]:,} tokens" if pooled else ("" if opt.fits else ", does not fit by cardfit")
    how = (f"deploy timing: {cards}x {gpu.name} TP {tp}{f' (attention DP {dp})' if dp > 1 else ''}"
           f"{f' EP {ep}' if ep > 1 else ''} PP {pp}, "
           f"{rt.id}, {ctx.quant.name}, "
           f"{res.served.batch:.1f} sequences decoding (at most {seqs}{held}), "
           f"{'stable' if res.served.stable else 'overloaded'}")
    return res, how


def _check_attention_dp_alone(ctx: Any, groups: int, tp: int) -> None:
    """A pinned --attention-dp without --expert-parallel the engine does not launch as attention groups is
    an error: vLLM's DP ranks of a dense model are whole replicas (runtimes/vllm.py DP_GROUPS_MOE_ONLY),
    TensorRT-LLM's enable_attention_dp spans every rank (ATTENTION_DP_ALL_RANKS)."""
    name = ctx.runtime.name
    if getattr(ctx.engine, "DP_GROUPS_MOE_ONLY", False) and not ctx.model.is_moe:
        raise InputError(f"{name}'s data-parallel ranks of a dense model are whole replicas, not attention "
                         f"groups: leave out --attention-dp {groups} (deploy's search counts replicas)",
                         field="attention_dp")
    from ..runtimes.launch import check_all_ranks

    check_all_ranks(ctx.engine, name, tp, groups, "attention_dp")


def pinned_setting(inp: DeployInput, sets: list[Setting]) -> Setting:
    """The setting a pinned deployment runs: the first the search built (its KV cache type), drafting where
    the question names --speculative and the runtime drafts that way (_spec_options builds it beside the plain
    one; the search weighs both, a pinned question has asked for it), plain otherwise; on llama.cpp and
    Ollama with a slot for each of --users."""
    if inp.speculative:
        drafting = [s for s in sets if getattr(s.ctx, "speculation", None) is not None]
        if drafting:
            sets = drafting
    # llama-server / Ollama hold a slot's KV cache for each sequence they run at once (-np,
    # OLLAMA_NUM_PARALLEL): a slot for every user timed, as the launch line then starts it (not the one slot
    # of the search's first setting, timed with every user decoding)
    first, users = sets[0], int(inp.users or 0)
    if not first.slots or users <= first.slots:
        return first
    from .plan import build_context, memory_for

    ctx = build_context(replace(first.ctx.inp, batch=users))
    if ctx.sequences < users:
        return first  # Ollama runs this model with one slot (plan.py _ollama_slots)
    return replace(first, ctx=ctx, mem=memory_for(ctx, first.mem.context), slots=users)


def _with_emit(inp: DeployInput, report: DeployReport, best: Result | None) -> DeployReport:
    """--emit: the best deployment's manifests (a searched or a pinned one); prefill and decode workers apart
    are refused in one line."""
    if report.best is not None and report.best.disaggregated:
        raise InputError("--emit writes one pool of replicas; the cheapest deployment here is prefill "
                         "and decode workers apart, whose manifests it does not write", field="emit",
                         hint="run without --emit for its two commands")
    return replace(report, emit=_emitted(inp, best))


def _benchmark_run(inp: DeployInput, p: Pinned, scheduler: str | None) -> BenchmarkRun:
    """The benchmark run of a pinned answer (`p.bench`), as its JSON and table print it."""
    b = p.bench
    assert b is not None
    return BenchmarkRun(int(inp.requests or 0), _ms(b.ttft_mean_s), _ms(b.ttft_median_s), _ms(b.tpot_mean_s),
                        _ms(p.itl_median_s), round(b.output_tokens_per_s, 1), round(b.requests_per_s, 3),
                        round(b.seconds, 2), scheduler, _ms(b.ttft_p90_s) if b.ttft_p90_s else None)


def pinned_report(inp: DeployInput) -> DeployReport:
    """`cardfit deploy --tp N …`: the one deployment the question pins, timed (services/pinned.py), as `best`
    when it meets the targets, else as `closest` with what fails."""
    from .pinned import is_stage

    t = targets(inp)
    p = pinned_answer(inp)
    if p.pools is not None:
        pools = _pools_report(inp, t, p)
        return _with_emit(inp, pools, None) if inp.emit else pools
    r = p.result
    one = deployment(inp, r)
    if p.bench is not None:
        # the steady state (what a server under this load settles to) stays the deployment's figures; the
        # run a benchmark harness reports, its first round's burst included, is beside them
        order = None if is_stage(inp) else "prefill-first" if p.prefill_first else "decode-first"
        one = replace(one, benchmark=_benchmark_run(inp, p, order))
    report = DeployReport(model=r.cand.setting.ctx.model.name,
                          workload=_asked(inp, t, r.cand.setting.mem.context),
                          meets_targets=r.meets, best=one if r.meets else None, pareto=(one,),
                          failing=None if r.meets else _failing(r, t, out_of_reach(inp, [r.cand])),
                          closest=None if r.meets else one,
                          headroom=round(headroom(inp, r, t), 2) if r.meets else None,
                          apis=_apis(r, inp) if r.meets else (), searched=Searched(1, 1),
                          hours_per_month=cost.HOURS_PER_MONTH, notes=())
    notes = (*_notes(inp, [], one), *_cold_note(inp), f"pinned: {p.how}")
    report = replace(report, notes=notes)
    return _with_emit(inp, report, r if r.meets else None) if inp.emit else report


def _cold_note(inp: DeployInput) -> tuple[str, ...]:
    """Why a finite run (--requests) finds fewer prefixes cached than the endless load: its compulsory misses
    (core/reuse.py cold_share), said where there are any."""
    share = ru.cold_share(reuse_of(inp))
    if share <= 0:
        return ()
    who = "sessions" if inp.turns > 1 else "requests"
    before = (f" after {int(inp.warm_requests):,} prompts of the same sequence (--warm-requests)"
              if inp.warm_requests else "")
    return (f"a run of {int(inp.requests or 0):,} requests from a cold cache{before}: {share:.1%} of its "
            f"{who} compute their group's shared prefix (the first to reach it; core/reuse.py cold_share), "
            "so its prefix hit rate is below the endless load's",)


def _pools_report(inp: DeployInput, t: Targets, p: Pinned) -> DeployReport:
    """`cardfit deploy --tp N --prefill-workers X --decode-workers Y …`: the pinned disaggregated deployment,
    as `best` when it meets the targets, else as `closest` with what fails."""
    pp = p.pools
    assert pp is not None
    pre, dec, res = pp.prefill.cand, pp.decode.cand, pp.served
    one = _pd_deployment(inp, pre, pp.prefill_workers, dec, pp.decode_workers, res, pp.price, pp.meets,
                         pp.predicted and not pp.meets)
    if p.bench is not None:  # the run a harness reports beside the steady state (as pinned_report)
        one = replace(one, benchmark=_benchmark_run(inp, p, PD_SCHEDULER))
    failing = None if pp.meets else _pools_failing(res, t, one, _holds_users(res, _workload(inp, 1)))
    report = DeployReport(model=dec.setting.ctx.model.name, workload=_asked(inp, t, dec.setting.mem.context),
                          meets_targets=pp.meets, best=one if pp.meets else None, pareto=(one,),
                          failing=failing, closest=None if pp.meets else one,
                          headroom=round(_pools_headroom(inp, pp.pools, dec.setting.ctx.runtime.id, t,
                                                         feats=_features(inp, dec, pools=pre)), 2)
                          if pp.meets else None,
                          apis=_apis_of(one.aggregate_tokens_per_s, one.monthly_usd, inp) if pp.meets else (),
                          searched=Searched(1, 2), hours_per_month=cost.HOURS_PER_MONTH, notes=())
    return replace(report, notes=(*_notes(inp, [], one), f"pinned: {p.how}"))


def _holds_users(res: Any, w: sv.Workload) -> bool:
    """Whether the pools hold every user of a closed loop: past their capacity (the decode workers' sequence
    caps full) core/disagg.py's loop settles at the capacity's rate and the users beyond it wait for a slot
    (Disaggregated.slot_wait_s, counted in its TTFT); deploy does not offer such a load as met, and says the
    load is why."""
    return w.users is None or res.slot_wait_s <= 0


def _pools_headroom(inp: DeployInput, pools: Any, runtime: str, t: Targets, most: float = 64.0,
                    feats: tuple[str, ...] = ()) -> float:
    """How much more traffic (×) a disaggregated deployment takes before a target breaks (as headroom()), of
    pools that meet the targets at the load: both callers time that first and ask only then (the search's
    answer, disaggregation: _pd_search returns only pools that meet them; a pinned one, _pools_report: where
    its pp.meets, the same _pools_meet of the same pools at the same load), so it is not timed again."""
    def meets(x: float) -> bool:
        return _pools_meet(inp, pools, runtime, t, x, feats)[1]

    return most if meets(most) else largest_true_ratio(meets, 1.0, most, 14)


def _pools_failing(res: Any, t: Targets, d: Deployment, holds: bool) -> Failing:
    """What keeps a pinned disaggregated deployment from the targets: the load (`holds`: whether its decode
    workers hold every user of a closed loop, _holds_users), else the target it misses by the largest ratio
    (at the pessimistic end of its likely range where only that misses)."""
    if not res.stable:
        return Failing("load", None, None, None, "the prefill or decode pool cannot keep up with the load "
                       "(its queue grows without end): add workers to it")
    if not holds:
        return Failing("load", None, None, None, f"the decode workers hold {res.batch:,.0f} sequences each, "
                       f"fewer than the users in flight: the rest wait {res.slot_wait_s:,.1f} s for a slot "
                       "(in the TTFT shown); add decode workers or raise --decode-batch-size")
    likely_ = d.likely or {}
    got = {"ttft_ms": res.ttft_s * 1e3, "tpot_ms": res.tpot_s * 1e3}
    tight = all(got[k] <= t.given[k] for k in got)
    if tight:
        got = {k: (likely_[k] or [0.0, v])[1] for k, v in got.items()}
    name = max(got, key=lambda k: got[k] / t.given[k])
    ratio = got[name] / t.given[name]
    text = ("tight: the prediction meets the targets, the pessimistic end of its likely range (cardfit's "
            "out-of-sample serving error) does not") if tight else None
    return Failing(name, round(got[name], 1), t.given[name], round(ratio, 3), text)


def deploy_report(inp: DeployInput) -> DeployReport:
    """`cardfit deploy` for one input (and its chart when --plot asks for one)."""
    check(inp)
    from .pinned import pins

    if pins(inp):
        return pinned_report(inp)
    t = targets(inp)
    sets, skipped = settings(inp)
    cands = candidates(inp, sets)
    report = DeployReport(model=sets[0].ctx.model.name, workload=_asked(inp, t, sets[0].mem.context),
                          meets_targets=False,
                          best=None, pareto=(), failing=None, closest=None, headroom=None, apis=(),
                          searched=Searched(len(sets), len(cands)), hours_per_month=cost.HOURS_PER_MONTH,
                          notes=_notes(inp, skipped))
    if not cands:
        return replace(report, failing=Failing(
            "memory", None, None, None,
            f"no set of {'the cards given' if inp.gpu else 'the cards with a rental price'} holds "
            f"{sets[0].ctx.model.name} with a whole request of {sets[0].mem.context:,} tokens, within "
            f"--max-nodes {inp.max_nodes} (nodes of {sets[0].ctx.rules.node_size})"))
    found: list[Result] | None = None
    no_load: tuple[PdReach, int, Candidate] | None = None
    pd_cands: list[Candidate] | None = None  # the sets the P/D search is shaped from (None: `cands`)
    memo: PdTimed = {}  # every P/D timing of this call, at whatever load (pd_most_users, disaggregation)
    if inp.cards:
        fill = [c for c in cands if inp.cards % c.cards == 0]
        if not fill:
            c = min(cands, key=lambda c: (c.cards, c.price if c.price is not None else math.inf))
            why = (f"the smallest set that holds {sets[0].ctx.model.name} is {c.cards}× {c.gpu.name}, more "
                   f"than {inp.cards}" if c.cards > inp.cards else
                   f"no set that holds {sets[0].ctx.model.name} splits {inp.cards} cards of "
                   f"{'the cards given' if inp.gpu else 'a rented kind'} evenly into replicas")
            return replace(report, failing=Failing("cards", c.cards, inp.cards,
                                                   round(c.cards / inp.cards, 3), why))
        cands = fill
        if inp.users is None and inp.requests_per_s is None:
            every = cands
            inp, cands, served_any = most_users(inp, cands, t)
            agg_users = int(inp.users or 0) if served_any else 0
            found = on_cards(inp, cands, t) if served_any else None
            # P/D is searched beside the aggregated answer at its most users (disaggregation's `agg`), else
            # beside the cheapest set
            ref = (found[0].cand if found else
                   min(cands, key=lambda c: (c.price if c.price is not None else math.inf, c.cards)))
            # prefill and decode pools on the same cards may serve more: the load is then theirs
            reach = pd_most_users(replace(inp, users=1.0), every, t, ref, memo)
            if reach is not None:
                no_load = (reach, agg_users, ref)
                if reach.users > agg_users:
                    inp, served_any = replace(inp, users=float(reach.users)), True
                    cands, found = [replace(c, inp=inp) for c in every], None
                # the P/D search at the users found tries every set's shape, as pd_most_users did (and as
                # the same question with that load does), not only those of the sets that serve the most
                pd_cands = cands if found is None else [replace(c, inp=inp) for c in pd_family(every, ref)]
            report = replace(report, workload=_asked(inp, t, sets[0].mem.context, served_any))
    if found is None:
        found = on_cards(inp, cands, t) if inp.cards else search(inp, cands, t, PARETO_SIZE)
    if found:
        best = found[0]
        report = replace(report, meets_targets=True, best=deployment(inp, best),
                         headroom=round(headroom(inp, best, t), 2), apis=_apis(best, inp),
                         pareto=tuple(deployment(inp, r) for r in pareto(found, PARETO_SIZE)))
    else:
        near = closest(inp, cands, t)
        if near is not None:
            closest_one = deployment(inp, near)
            report = replace(report, closest=closest_one, failing=_failing(near, t, out_of_reach(inp, cands)),
                             pareto=(closest_one,))
        else:
            report = replace(report, failing=_limits_failing(inp, cands))
    report = _with_disaggregation(inp, cands, t, report, found[0] if found else None, None if found else near,
                                  no_load, pd_cands, memo)
    report = replace(report, notes=_notes(inp, skipped, report.best or report.closest)
                     + _offload_note(inp, found[0] if found else near))
    if inp.emit:
        report = _with_emit(inp, report, found[0] if found else None)
    if inp.plot:
        from ..charts.deploy import write_chart

        write_chart(report, inp.plot)
        report = replace(report, plot=inp.plot)
    return report


def _offload_note(inp: DeployInput, r: Result | None) -> tuple[str, ...]:
    """--kv-offload-gb: whether the host tier helps the deployment shown, and why (core/reuse.py)."""
    if not inp.kv_offload_gb or r is None:
        return ()
    c, gb = r.cand, f"{inp.kv_offload_gb:g} GB"
    rt = c.setting.ctx.runtime
    if not rt.host_kv_cache or not rt.prefix_caching:
        return (f"KV offload ({gb}): not planned on {rt.name}, which has no host KV tier cardfit launches "
                "(vLLM and SGLang have one)",)
    h, reason = offload(inp, c, _workload(inp, r.replicas))
    why = ru.OFFLOAD_WHY[reason] if reason is not None else ""
    if reason is ru.OffloadReason.HELPS and h is not None:
        return (f"KV offload ({gb} of host RAM per replica, pinned): used, {why}; "
                f"{h.host_tokens / max(prompt_tokens(inp), 1):.0%} of the prompt tokens come from the host "
                f"tier at {_copy_s_per_token(c) * 1e6:.3g} µs a token against "
                f"{_recompute_s_per_token(inp, c) * 1e6:.3g} µs to compute it",)
    return (f"KV offload ({gb}): not used, {why}",)


def _length_note(inp: DeployInput) -> str:
    """What the launch line's context (max_model_len) admits, and where it comes from."""
    if inp.input_tokens_p90 is None and inp.output_tokens_p90 is None:
        return (f"each request is taken at the {inp.input_tokens:,} + {inp.output_tokens:,} tokens stated, "
                "and the server is started for no request longer than that; give --input-tokens-p90 / "
                "--output-tokens-p90 for a spread (the context then holds their 99th percentile)")
    note = ("the server's context holds the 99th percentile prompt and answer of a log-normal through the "
            "stated mean and p90 (fewer than 1 request in 100 is longer; the engine refuses those)")
    if sv.prompt_classes(inp.input_tokens, inp.input_tokens_p90):
        note += (f"; the TTFT p90 takes each prompt's own prefill over {sv.PROMPT_CLASSES} classes of that "
                 "log-normal (the p90 request's prompt is longer than the mean), the queue and the means the "
                 "mean prompt's")
    return note


def _spec_notes(inp: DeployInput, chosen: Deployment | None) -> list[str]:
    """--speculative: whether the answer drafts, and why (both were searched where the runtime drafts)."""
    if not inp.speculative or chosen is None:
        return []
    rt = default_runtimes().get(chosen.runtime)
    from .speculative import asks_tree, drafted, method_of, supports

    shape = _spec_shape_note(inp)
    if chosen.speculative is not None:
        sp = chosen.speculative
        return [f"speculative decoding ({sp['method']}, {drafted(sp, 'tokens a step')} at acceptance "
                f"{sp['acceptance']:g}: {sp['tokens_per_step']:g} tokens a step) is on: it met the targets "
                "for less than every deployment without it (searched both)"
                + _spec_cap(inp, rt, chosen)] + shape
    tree = (f" as a tree (top-{inp.speculative_topk}, {inp.speculative_draft_tokens} tokens verified a step)"
            if asks_tree(inp) else "")
    if not supports(rt, method_of(inp.speculative), asks_tree(inp)):
        return [f"--speculative {inp.speculative}{tree}: {rt.id} does not "
                "draft that way, so it was searched without it"] + shape
    return [f"--speculative {inp.speculative}{tree} was searched and not chosen: at this load the "
            "verification of the drafted tokens costs more compute than the steps it saves, or the drafter's "
            "memory leaves fewer sequences (the deployment without it is as cheap and as fast or better)"
            + _spec_cap(inp, rt, None)] + shape


def _spec_shape_note(inp: DeployInput) -> list[str]:
    """Where the tree's flags were taken as another shape (top-k 1 with verified tokens other than K + 1:
    the chain, services/speculative.py _tree), the note saying so."""
    if (inp.speculative_topk or 1) > 1 or inp.speculative_draft_tokens is None:
        return []
    from .resolve import resolve
    from .speculative import choose

    c = choose(inp, resolve(inp).model)
    return [c.shape_note] if c is not None and c.shape_note else []


def _spec_cap(inp: DeployInput, rt: RuntimeProfile | None, chosen: Deployment | None) -> str:
    """Where the load asks more sequences of a replica than the runtime schedules when it drafts
    (runtimes.toml speculative_max_num_seqs: SGLang's 48 when --max-running-requests is not given,
    server_args.py _handle_speculative_decoding), the clause that says which cap the answer runs at: the
    chosen drafting deployment's own (its launch line states it), or the default the search kept."""
    cap = int(getattr(rt, "speculative_max_num_seqs", 0) or 0)
    if not cap or float(inp.users or 0) <= cap:
        return ""
    why = (f"; with a drafter {rt.name} runs at most {cap} requests at once an engine unless "
           "--max-running-requests is given (server_args.py: \"Max running requests is reset to "
           f"{cap} for speculative decoding\"), so ")
    if chosen is None:
        return why + (f"each drafting replica was searched with {cap} of the {float(inp.users or 0):g} "
                      "users at once")
    if chosen.max_num_seqs != cap:
        return why + f"the launch line above gives --max-running-requests {chosen.max_num_seqs}"
    return why + f"the drafting replicas above serve at most {cap} users each"


def _notes(inp: DeployInput, skipped: list[str], chosen: Deployment | None = None) -> tuple[str, ...]:
    notes = ["TTFT is the p90 (queueing: users by mean-value analysis of the closed loop, arrivals by the "
             "Allen–Cunneen approximation; + prefill); TPOT the steady-state mean; both from cardfit's speed "
             "model, not a measurement"]
    if inp.ttft_ms is None or (inp.tpot_ms is None and inp.tokens_per_s_per_user is None):
        notes.append(f"targets not given default to TTFT {DEFAULT_TTFT_MS:g} ms and TPOT "
                     f"{DEFAULT_TPOT_MS:g} ms (rule of thumb: faster than people read)")
    notes.append(_length_note(inp))
    notes += [f"left out: {s}" for s in skipped[:3]]
    notes += _spec_notes(inp, chosen)
    rt = default_runtimes().get(chosen.runtime) if chosen is not None else None
    if rt is not None and chosen is not None and chosen.max_num_seqs > 1 and not rt.paged_kv and \
            not rt.decode_overhead_us_per_sequence:
        notes.append(f"{rt.id}: the cost of each extra slot is not calibrated (no aggregate-throughput "
                     f"record); deploy charges it {served.uncalibrated_sequence_cost_s() * 1e6:g} µs per "
                     "sequence per step, the cost of engines that schedule on the CPU between steps "
                     "(vLLM before 0.6)")
    if rt is not None:
        notes += _one_slot_notes(inp, rt)
    return tuple(notes)


def _one_slot_notes(inp: DeployInput, rt: RuntimeProfile) -> list[str]:
    """Why an Ollama deployment serves one request at a time per replica (plan.py ollama_one_slot)."""
    from .plan import ollama_one_slot, one_slot_note
    from .resolve import resolve

    what = ollama_one_slot(rt, resolve(inp).model)
    return [] if what is None else [one_slot_note(what, "each replica serves one request at a time, the "
                                                        "others queue")]


__all__ = ["DeployInput", "DeployReport", "deploy_report"]

"""A served load on one deployment: time to first token, time per output token and throughput under
continuous batching, on top of the decode step of core/speed.py (`step(load, machine, sequences)`).

One replica is `pp` pipeline stages of `tp` tensor-parallel cards. Per replica, with B sequences decoding:

- Continuous batching with chunked prefill (vLLM, SGLang, TensorRT-LLM; llama-server mixes prompt tokens
  into its decode batches the same way, up to n_batch): every step decodes one token for each of the B
  sequences and spends what is left of its token budget on prompts. In steady state each request brings
  I prompt tokens per O answer tokens, so a step carries B decode tokens plus B × I / O prompt tokens on
  average. The step reads the weights once (MoE: the experts the B × (1 + I/O) tokens touch), each decoding
  sequence's KV cache (tokens in flight: the prompt plus half the answer), and costs the FLOPs of all its
  tokens. TPOT = the time of that step (mean, steady state).
- Pipeline parallel (across nodes): the B sequences run as `pp` micro-batches of B / pp; each stage holds
  1 / pp of the layers, weights and cache, so a token takes pp stage steps plus pp − 1 activation hops over
  the network (the pipeline bubble when B < pp: stages wait).
- TTFT (p90) = waiting for a free sequence slot (M/G/c, c = max_num_seqs) + waiting for the prompt budget
  (M/G/1) + the prefill itself, ceil(I / (chunk − B)) steps of chunk tokens beside the B decodes, each
  paying its eager kernel launches past the CUDA-graph sizes (eager_s); an overlap scheduler (TensorRT-LLM's
  PyTorch backend, SGLang) has planned the next step when a request arrives: one step more
  (Replica.schedule_ahead).
  The waits use the Allen–Cunneen approximation for GI/G/c queues: Wq ≈ Wq(M/M/c) × (Ca² + Cs²) / 2
  (A. O. Allen, "Probability, Statistics, and Queueing Theory", 2nd ed., Academic Press 1990, §6; the same
  formula as Kingman's for c = 1), with Erlang C for Wq(M/M/c); the p90 of a wait takes the M/M/c tail
  P(W > t) = C · exp(−t / (Wq / C)) with the Allen–Cunneen mean. Poisson arrivals: Ca² = 1.
- Closed loop (`users`: each user sends the next request when the previous answer ends, as `vllm bench
  serve --max-concurrency` does): B = min(users, slots); users beyond the slots wait (users − slots) ×
  S / slots on average (mean-value analysis of a closed system, Reiser & Lavenberg, J. ACM 27(2), 1980).

- Prefix reuse (core/reuse.py): I is the prompt a request sends; the tokens a prefix cache already holds
  (Workload.cached_tokens) are not prefilled, so the prefill, its chunks and the prompt budget count only
  I − cached (`prefilled`), and a host tier's hits add their copy time to the prefill (Workload.load_s).
- The p90 TTFT of requests that differ (by what they find cached: Workload.classes; by prompt length:
  Workload.prompts, prompt_classes) is the quantile of the wait and each class's own prefill together
  (class_prefills, ttft_p90_s); the queues, the steps and the means are the mean request's.

Everything is per replica; replicas split the traffic evenly (a load balancer in front)."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ..catalog.records import record
from ..errors import InputError
from .moe_parallel import imbalance
from .speed import Load, Machine, link_seconds, step

if TYPE_CHECKING:  # core/speculative.py is imported where a step drafts (_step_s): most questions never do
    from .speculative import Speculation

P90_TAIL = 0.10  # the target percentile's tail: p90
# how much later than the first the rest of a burst reaches a router that prefills its first request alone
# (any time shorter than a step: only the order matters)
BURST_LAG_S = 1e-6


@record(slots=True)
class Workload:
    input_tokens: int
    output_tokens: int
    users: float | None = None  # closed loop: concurrent users per replica
    requests_per_s: float | None = None  # open loop: Poisson arrivals per replica
    # squared coefficient of variation of the answer length (0: every answer O tokens)
    output_cv2: float = 0.0
    # prompt tokens per request found in a prefix cache (core/reuse.py hits): not prefilled, so neither timed
    # nor queued at the prompt budget; and the seconds per request copying the host tier's hits to the card
    cached_tokens: float = 0.0
    load_s: float = 0.0
    # the requests by what they find in the prefix cache (core/reuse.py with_hits: a mix of hits and misses),
    # as (share of the requests, prompt tokens found, seconds copying from the host tier), which the p90 TTFT
    # takes as a mixture (ttft_p90_s); empty: every request finds the mean (cached_tokens, load_s)
    classes: tuple[tuple[float, float, float], ...] = ()
    # the requests by prompt length (prompt_classes), as (share of the requests, prompt tokens more than the
    # mean prompt `input_tokens`; fewer: negative), which the p90 TTFT takes as a mixture with `classes`
    # (class_prefills); empty: every prompt the mean. Only the p90 reads them: the queue, the steps and the
    # means are the mean prompt's
    prompts: tuple[tuple[float, float], ...] = ()


def reused_as(w: Workload, reused: Workload) -> Workload:
    """`w` finding what `reused` finds in the prefix cache and the host tier (its means and its classes)."""
    return replace(w, cached_tokens=reused.cached_tokens, load_s=reused.load_s, classes=reused.classes)


def prefilled(w: Workload) -> float:
    """The prompt tokens a request computes: its prompt less what the prefix cache holds (at least its last
    token, which is computed again to sample the first answer token: vLLM's prefix-cache hit stops one token
    short of the prompt)."""
    if not w.cached_tokens:
        return w.input_tokens
    return max(w.input_tokens - w.cached_tokens, 1.0) if w.input_tokens else 0.0


@record(slots=True)
class Replica:
    """One copy of the model, and how its runtime schedules work."""

    load: Load  # one pipeline stage (stage(whole, pp)); per-token work at the mean tokens in flight
    machine: Machine  # one stage: tp cards
    prefill_flops_per_token: float  # 2 × active params + causal attention over half the prompt
    chunk_tokens: int  # token budget of one step (vLLM max_num_batched_tokens, llama.cpp n_ubatch)
    max_seqs: int  # sequences scheduled at once (runtime cap, KV-cache cap)
    pp: int = 1
    hop_latency_s: float = 0.0  # one activation transfer between pipeline stages
    hop_gbps: float = 0.0
    # steps planned ahead of the GPU (an overlap scheduler: 1): a request arriving during step n joins step
    # n + 1 + this at the earliest
    schedule_ahead: int = 0
    prompt_tokens: int = 0  # one request's prompt: a step's prompt tokens come from that many requests
    prefill_attention_flops_per_token: float = 0.0  # the attention share of prefill_flops_per_token
    # a paged KV pool that admits prompts by their blocks and preempts when full (vLLM; rounds() steps it):
    # its tokens (0: none, the sequences capped by max_seqs), tokens per block, and whether a preempted
    # request finds its blocks still cached (prefix caching)
    kv_tokens: int = 0
    kv_block: int = 16
    prefix_cache: bool = False
    # the engine's own sequence cap, as it was started (vLLM --max-num-seqs, else its default on the card),
    # where it is more than `max_seqs` (what the KV pool holds at the mean tokens in flight): the engine sizes
    # its CUDA-graph captures by it (eager_s), and a paged pool that preempts schedules up to it (rounds);
    # 0: `max_seqs` itself (deploy's search launches the engine with --max-num-seqs max_seqs)
    engine_seqs: int = 0
    # a burst's first request is prefilled alone: the router starts a prompt step as soon as one request is
    # queued, while the rest of the burst is still being validated (TGI: runtimes.toml burst_first_alone)
    burst_first_alone: bool = False
    # decode steps between the step that computes a token and its response leaving the engine (TensorRT-LLM's
    # overlap scheduler: runtimes.toml response_lag_steps): every token, the first included, arrives late
    response_lag: int = 0
    # speculative decoding (core/speculative.py): each decode step verifies K + 1 tokens per sequence (a
    # tree's verified tokens) after K drafter steps and yields `per_step` tokens per sequence on average
    # (None: one token a step)
    spec: Speculation | None = None
    # decode steps between two reads of new requests while the engine decodes (SGLang
    # --scheduler-recv-interval N: recv_wait_steps); 1: every step
    recv_interval: int = 1
    # TensorRT-LLM's attention-DP balancing (attention_dp_config enable_balance, batching_wait_iters 0): a
    # prompt waits until every attention-DP rank has one or this many steps pass (timeout_iters:
    # adp_hold_steps); 0: off, TensorRT-LLM's default
    adp_timeout_iters: int = 0
    # a prefill-first engine (SGLang, TGI, vLLM's V0 without chunked prefill: services/pinned.py schedule,
    # from runtimes.toml prefill_first and releases.toml): a waiting prompt runs in a step of its own, no
    # decodes beside it (prompt_share_s); False: decode-first, the running decodes ride in every prompt step
    prefill_first: bool = False

    @property
    def per_step(self) -> float:
        """Mean output tokens a decode step yields per sequence."""
        return self.spec.per_step if self.spec is not None else 1.0


def recv_wait_steps(r: Replica) -> float:
    """Decode steps a request that reaches a decoding engine waits, on average, before the engine reads it,
    beyond the step running as it arrives: (N - 1) / 2 for SGLang's --scheduler-recv-interval N.

    SGLang's scheduler reads new requests at the top of its loop only when SchedulerRecvSkipper.handle says
    so (python/sglang/srt/managers/scheduler_recv_skipper.py at sgl-project/sglang@70310f05): each loop adds
    the weight of the batch it last ran (a decode step or a target verify 1, no batch 1, any other batch,
    a prompt step, 1,000: SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_* in python/sglang/srt/environ.py) and reads
    once the sum reaches N, then starts again from 0. While it decodes it reads every N steps; right after a
    prompt step, or while idle, at once. A request sent as another user's answer ends arrives at a phase of
    that N-step cycle that the answer lengths spread evenly, so it waits 0 to N - 1 steps more than with a
    read every step: (N - 1) / 2 on average. An idle engine reads it at once (a lone user: no wait)."""
    return (max(r.recv_interval, 1) - 1) / 2


def adp_hold_steps(r: Replica, arrivals_per_step: float, users: float) -> float:
    """Steps a new prompt is held, on average, by TensorRT-LLM's attention-DP balancing
    (Replica.adp_timeout_iters T, over the Machine's attention_dp ranks), with new requests reaching the
    engine at `arrivals_per_step` and `users` sequences in flight.

    PyExecutor._balance_adp_requests (tensorrt_llm/_torch/pyexecutor/py_executor.py, NVIDIA/TensorRT-LLM
    1.1-1.2; llm_args.py AttentionDpConfig: enable_balance default False, timeout_iters 50,
    batching_wait_iters 10) runs every step when attention_dp_config.enable_balance is set: the ranks'
    scheduled context requests are all-gathered, and unless every rank has one (and a free slot), none is
    run and a counter of such steps grows; at timeout_iters steps, or when some rank has nothing to decode,
    the waiting ones run and the counter starts again. The counter also grows in steps with no prompt
    waiting, so prompts too sparse to reach every rank run once every T steps: a prompt arriving at a
    random step waits T / 2 on average. With batching_wait_iters 0 (the setting written with it by
    TensorRT-LLM's DeepSeek-R1 recipe and InferenceX's scripts) a step in which every rank has one runs them
    at once. Each request goes to the rank with the fewest active requests (executor_request_queue.py), the
    one that ended one, so arrivals reach the ranks at random: the cycle is min(T, the steps until every one
    of the dp ranks has had an arrival), P(all reached by step t) = (1 - exp(-a t / dp))^dp for arrivals at
    a per step; a prompt waits half of it. Fewer users than ranks leave a rank with nothing to decode: no
    hold. A benchmark's stepped rounds (`rounds`: a burst, or lockstep rounds of equal answers) send their
    requests together, spread over every rank, so they run at once: no hold there either."""
    dp = max(r.machine.attention_dp, 1)
    if r.adp_timeout_iters <= 0 or dp <= 1 or users < dp or arrivals_per_step <= 0:
        return 0.0
    per_rank = arrivals_per_step / dp
    cycle = sum(1 - (1 - math.exp(-per_rank * t)) ** dp for t in range(r.adp_timeout_iters))
    return cycle / 2


def adp_together(r: Replica, arrivals_per_step: float, users: float) -> float:
    """Prompts that run in one step under attention-DP balancing (adp_hold_steps): those that arrived in
    one cycle, at most one a rank (each on its own rank, their attention side by side); 1 without it."""
    hold = adp_hold_steps(r, arrivals_per_step, users)
    if hold <= 0:
        return 1.0
    return min(max(2 * hold * arrivals_per_step, 1.0), float(max(r.machine.attention_dp, 1)))


@record(slots=True)
class Served:
    batch: float  # mean sequences decoding
    tpot_s: float
    prefill_s: float
    ttft_s: float  # p90
    ttft_mean_s: float
    wait_p90_s: float
    output_tokens_per_s: float  # per replica, at this load
    utilization: float  # the busiest resource: slots or the prompt budget (≥ 1: unstable)
    stable: bool
    # the part of the mean and p90 TTFT before the prefill that is no queue (the steps planned ahead, the
    # response's lag, the attention-DP hold): what a finite stage's queue bound leaves as it is (open_stage)
    fixed_mean_s: float = 0.0
    fixed_p90_s: float = 0.0
    # the prefills of the requests by what they find in the prefix cache (Workload.classes), as (share of
    # the requests, prefill seconds); empty: every request's is prefill_s
    prefills: tuple[tuple[float, float], ...] = ()
    # the queue wait before the prefill beyond fixed_p90_s, as (offset s, waiting probability c, scale s):
    # P(W > y) = 1 below the offset, c e^(−(y − offset) / scale) above it (wait_tail), which the p90 TTFT
    # takes jointly with the prefills (ttft_p90_s)
    queue_tail: tuple[float, float, float] = (0.0, 0.0, 0.0)

    @property
    def prefill_p90_s(self) -> float | None:
        """The p90 of the prefill alone over the requests' classes; None: one class (prefill_s)."""
        return ttft_p90_s(self.prefills, _no_wait, 0.0) if self.prefills else None

    @property
    def per_user_tokens_per_s(self) -> float:
        return 1 / self.tpot_s


def stage(load: Load, pp: int) -> Load:
    """One of `pp` pipeline stages: its share of the layers, weights, cache reads and FLOPs."""
    if pp <= 1:
        return load
    return replace(load, weights_bytes=load.weights_bytes // pp, kv_bytes=load.kv_bytes // pp,
                   flops_per_token=load.flops_per_token / pp, layers=-(-load.layers // pp))


def _mixed(load: Load, decode: int, prompt_tokens: float, prefill_flops: float,
           per_sequence: int = 1) -> tuple[Load, int]:
    """The load of one step that decodes `decode` sequences (`per_sequence` query tokens each: K + 1 when it
    verifies speculated tokens) and prefills `prompt_tokens` tokens, written as `step(load, machine,
    max(decode, 1))`: FLOPs, expert reads and the routed tokens (the expert-parallel ranks' imbalance) of all
    tokens, KV reads of the decodes (once per sequence)."""
    b = max(decode, 1)
    tokens = decode * per_sequence + prompt_tokens
    sh = load.shares
    if sh.experts and sh.route < 1:  # experts touched by all the step's tokens, spread over b "sequences"
        sh = sh.routed(1 - (1 - sh.route) ** (tokens / b))
    flops = (decode * per_sequence * load.flops_per_token + prompt_tokens * prefill_flops) / b
    return Load(load.weights_bytes, sh, load.kv_bytes * decode // b, flops, load.layers, load.hidden,
                load.cpu_weight_fraction, load.cpu_expert_fraction, load.low_bit_params, load.kv_split,
                load.experts_active, load.moe_layers, routed_per_sequence=max(tokens, 1) / b), b


def _hop_s(r: Replica, tokens: float) -> float:
    if r.pp <= 1:
        return 0.0
    hidden_bytes = tokens * r.load.hidden * 2  # bf16 activations
    return r.hop_latency_s + (hidden_bytes / (r.hop_gbps * 1e9) if r.hop_gbps else 0.0)


@lru_cache(maxsize=1 << 16)  # pure in its (hashable, frozen) arguments: a search asks each many times
def step_s(r: Replica, decode: float, prompt_tokens: float) -> float:
    """Time for each decoding sequence to get one token while `prompt_tokens` prompt tokens ride along."""
    # a micro-batch decodes whole sequences: the fractional batches of a fixed point or a root search time
    # the step of the next whole one
    return _step_s(_stepping(r), math.ceil(decode / r.pp) if decode else 0, prompt_tokens)


@lru_cache(maxsize=4096)
def _stepping(r: Replica) -> Replica:
    """`r` as far as one step's time goes: its work, machine, stages and links, and the prompt a step's
    tokens come from (what _step_s reads); its scheduling (sequence cap, token budget, KV pool, the steps it
    plans ahead) set to the defaults. Replicas that differ only there (a KV pool of another size on another
    set of the same card) time their steps once (as one interned object)."""
    return _one_stepping(Replica(r.load, r.machine, r.prefill_flops_per_token, 0, 0, r.pp, r.hop_latency_s,
                                 r.hop_gbps, prompt_tokens=r.prompt_tokens,
                                 prefill_attention_flops_per_token=r.prefill_attention_flops_per_token,
                                 spec=r.spec))


@lru_cache(maxsize=4096)
def _one_stepping(r: Replica) -> Replica:
    return r


def clear_memos() -> None:
    """Forget the step times memoized (benchmarks time each search as a new question)."""
    for memo in (step_s, _step_s, _stepping, _one_stepping, _parts_of):
        memo.cache_clear()


@lru_cache(maxsize=1 << 16)
def _step_s(r: Replica, micro_decode: int, prompt_tokens: float) -> float:
    """step_s of a replica as _stepping keeps it, `micro_decode` sequences decoding in each of its pp
    micro-batches: read nothing here (nor in what this calls) that _stepping leaves out
    (tests/test_search_memos.py holds the two equal)."""
    micro_prompt = prompt_tokens / r.pp
    # tokens verified beyond one a sequence: a chain's K drafts, a tree's verified tokens less one
    k = r.spec.verified - 1 if r.spec is not None and micro_decode else 0
    if not k and _fused(r):
        flops = prompt_flops(r, prompt_tokens) / r.pp
        t = _plain_step_s(r.load, r.machine, micro_decode, micro_prompt, flops, _parts_of(r))
        return r.pp * t + (r.pp - 1) * _hop_s(r, micro_decode + micro_prompt)
    load, b = _mixed(r.load, micro_decode, micro_prompt, prompt_flops(r, prompt_tokens) / r.pp, k + 1)
    mc = r.machine
    if mc.serial_gemm and micro_prompt:  # prompt tokens make the GEMMs tall: their bytes overlap the FLOPs
        mc = replace(mc, serial_gemm=False)
    t = step(load, mc, b).seconds + _prompt_link_s(load, mc, b, micro_prompt)
    if k:  # the drafted tokens' all-reduces, the drafter's steps and any plain steps (core/speculative.py)
        from .speculative import draft_s, plain_s, verify_link_s, verify_overhead_s

        t += (verify_link_s(load, mc, b, micro_decode * k)
              + verify_overhead_s(r.load, mc, micro_decode, k, r.spec.verify_graph_by_sequences)
              + draft_s(r.spec, mc, micro_decode) + plain_s(r.spec, r.load, mc, micro_decode))
    return r.pp * t + (r.pp - 1) * _hop_s(r, micro_decode * (k + 1) + micro_prompt)


def _fused(r: Replica) -> bool:
    """Whether _plain_step_s times this replica's plain steps: no low-bit weights to unpack; those steps take
    the composed path (_mixed, step)."""
    return not r.load.low_bit_params


def _plain_step_s(whole: Load, mc: Machine, decode: int, prompt: float, prefill_flops: float,
                  parts: tuple | None = None) -> float:
    """One stage's step without speculation, as _step_s times it: `step(load, mc', b).seconds +
    _prompt_link_s(load, mc', b, prompt)` for `load, b = _mixed(whole, decode, prompt, prefill_flops)` and
    mc' = mc run as a plain GEMM where prompt tokens ride along, worked out on the numbers alone, in the same
    order, without building the step's Shares, Load, Machine and Step records (a search times tens of
    thousands of steps; tests/test_search_memos.py holds the two equal to the bit). Only for replicas
    _fused takes: no low-bit weights (no unpacking time). With expert parallelism the busiest rank's share
    of the step's routed tokens (core/speed.py _step_times) and the MoE layers' all-to-all (link_seconds)
    are charged as step() charges them. `parts`: what it reads of the load and machine alone (_plain_parts;
    _step_s keeps them per replica), worked out here where not given."""
    (dense, experts, route, wb, wb_experts, cpu_w, cpu_e, kept_w, kept_e, tp, dp, kv_share, copies, ep,
     attention, rate, expert_slower, ram_rate, gemm_rate, layers, graph_max, eager_layer, graph_layer,
     per_sequence, moe_overhead, serial, links) = parts or _plain_parts(whole, mc)
    b = max(decode, 1)
    if experts and route < 1:  # _mixed: the experts all the step's tokens touch, spread over b "sequences"
        route = 1 - (1 - route) ** ((decode + prompt) / b)
    flops_per_token = (decode * whole.flops_per_token + prompt * prefill_flops) / b
    kv_bytes = whole.kv_bytes * decode // b
    # core/speed.py _step_reads
    touched = 1 - (1 - route) ** b
    weights = wb * (dense + experts * touched)
    expert_read = wb_experts * touched
    cpu = weights * cpu_w + expert_read * cpu_e * kept_w
    kv_card = b * kv_bytes * kv_share / dp * copies
    if dp > 1 and (ep > 1 or mc.dp_holds_all_but_experts):
        attention = (weights - cpu) - expert_read * kept_w
    memory_s = ((weights - cpu - attention) / tp + attention * dp / tp + kv_card) / rate
    if expert_slower and expert_read:
        on_gpu = expert_read * kept_w * kept_e
        memory_s += on_gpu / tp / rate * expert_slower
    if cpu:
        memory_s += cpu / ram_rate
    # core/speed.py step and Step.seconds (dequant_seconds: 0 without low-bit parameters)
    compute_s = b * flops_per_token / tp / gemm_rate if gemm_rate is not None else 0.0
    if ep > 1:  # core/speed.py _step_times: _mixed's routed_per_sequence, _expert_flops_share
        routed = experts * route
        share = routed / (dense + routed) if dense + routed > 0 else 0.0
        compute_s *= 1 + share * (imbalance(b * (max(decode + prompt, 1) / b), whole.experts_active, ep) - 1)
    kv_s = kv_card / rate
    scheduled = math.ceil(b / dp)  # each attention group's own batch (core/speed.py _step_times)
    # core/speed.py per_layer_s: the eager value past the graphs' largest batch
    overhead = (layers * (eager_layer if graph_max and scheduled > graph_max else graph_layer)
                + (scheduled - 1) * per_sequence + moe_overhead)
    link = links.get(b)
    if link is None:
        link = _kept_link(links, b, link_seconds(whole, mc, b))
    if serial and not prompt:  # prompt tokens make the GEMMs tall: their bytes overlap the FLOPs
        roofline = memory_s + max(compute_s, 0.0)
    else:
        roofline = max(memory_s - kv_s, compute_s, 0.0) + kv_s
    t = roofline + overhead + link
    if tp <= 1 or prompt <= 0:  # _prompt_link_s
        return t + 0.0
    n = b + math.ceil(prompt)
    with_prompt = links.get(n)
    if with_prompt is None:
        with_prompt = _kept_link(links, n, link_seconds(whole, mc, n))
    return t + (with_prompt - link)


def _plain_parts(whole: Load, mc: Machine) -> tuple:
    """What _plain_step_s reads of a load and a machine alone, whatever the step (each figure as core/speed.py
    _step_reads, _step_times and per_layer_s work it out), and a memo of the step's link time (link_seconds)
    by the sequences it carries."""
    sh = whole.shares
    cpu_w, cpu_e = whole.cpu_weight_fraction, whole.cpu_expert_fraction
    tp = max(mc.tp, 1)
    dp = max(min(mc.attention_dp, tp), 1)
    eager = mc.overhead_s_per_layer_eager
    return (sh.dense, sh.experts, sh.route, whole.weights_bytes, whole.weights_bytes * sh.experts, cpu_w,
            cpu_e, 1 - cpu_w, 1 - cpu_e, tp, dp, whole.kv_per_card(tp // dp), max(mc.kv_read_copies, 1.0),
            max(mc.expert_parallel, 1), whole.weights_bytes * sh.attention * (1 - cpu_w) if dp > 1 else 0,
            mc.read_bytes_per_s,
            mc.decode_efficiency / mc.expert_efficiency - 1 if mc.expert_efficiency else 0.0,
            mc.ram_bandwidth_gbps * 1e9 * mc.ram_efficiency,
            mc.tflops * 1e12 * mc.compute_efficiency if mc.tflops else None,
            whole.layers, mc.graph_max_batch if eager else 0, max(eager, mc.overhead_s_per_layer),
            mc.overhead_s_per_layer, mc.overhead_s_per_sequence,
            whole.moe_layer_count * mc.overhead_s_per_moe_layer if sh.experts else 0.0, mc.serial_gemm, {})


# link times _plain_parts keeps per replica, forgotten all at once past this many (a long-running server's
# memory stays bounded: _parts_of keeps PARTS_KEPT replicas)
LINKS_KEPT = 256
PARTS_KEPT = 1024


def _kept_link(links: dict[int, float], sequences: int, seconds: float) -> float:
    if len(links) >= LINKS_KEPT:
        links.clear()  # one atomic step
    links[sequences] = seconds
    return seconds


@lru_cache(maxsize=PARTS_KEPT)
def _parts_of(r: Replica) -> tuple:
    """_plain_parts of a replica as _stepping keeps it (one object per step's work and machine)."""
    return _plain_parts(r.load, r.machine)


def prompt_flops(r: Replica, prompt_tokens: float) -> float:
    """A prompt token's FLOPs as the step divides them over its tp ranks. With data-parallel attention
    (Machine.attention_dp) a request's attention runs in the one group of tp / dp ranks it was sent to, so
    the attention of a step's prompt tokens is spread over only as many groups as the step has requests
    (the prompt tokens ÷ one request's prompt), at most dp: its share is charged dp / groups times."""
    dp = max(r.machine.attention_dp, 1)
    if dp <= 1 or prompt_tokens <= 0 or not r.prefill_attention_flops_per_token:
        return r.prefill_flops_per_token
    groups = min(dp, math.ceil(prompt_tokens / r.prompt_tokens) if r.prompt_tokens else 1)
    return r.prefill_flops_per_token + r.prefill_attention_flops_per_token * (dp / groups - 1)


def _prompt_link_s(load: Load, mc: Machine, b: int, prompt_tokens: float) -> float:
    """Tensor parallel all-reduces the hidden state of every token of the step, the prompt chunk's too
    (`step` sizes the messages by the `b` decoding sequences only): the transfer of the prompt tokens' share,
    the per-call latency being paid once already."""
    if mc.tp <= 1 or prompt_tokens <= 0:
        return 0.0
    return link_seconds(load, mc, b + math.ceil(prompt_tokens)) - link_seconds(load, mc, b)


def eager_s(r: Replica, decode: float, prompt_tokens: float) -> float:
    """CPU time of a step that carries prompt tokens and runs without CUDA graphs: the engines replay graphs
    for decode batches (vLLM V1 also for steps up to its largest capture size), and launch a prefill step's
    kernels one by one from Python, a time per layer the GPU work does not hide (aiconfigurator-core
    0.12.0, sdk/backends/vllm_backend.py `_prefill_dispatch_overhead_ms`: "CPU-side dispatch overhead scales
    with layer count and is not captured in silicon benchmarks"). Every stage of a pipeline pays it for its
    layers. The largest graph is the runtime's capture size, at most twice the engine's configured sequence
    cap (vLLM: min(2 x max_num_seqs, 512), vllm/config/vllm.py _set_cudagraph_sizes): `engine_seqs`, not
    the fewer sequences its KV pool holds (`max_seqs`), which the capture list never reads."""
    mc = r.machine
    if prompt_tokens <= 0 or not mc.overhead_s_per_layer_prefill:
        return 0.0
    if decode + prompt_tokens <= min(mc.prefill_graph_tokens, 2 * (r.engine_seqs or r.max_seqs)):
        return 0.0
    return r.load.layers * r.pp * mc.overhead_s_per_layer_prefill


def prompt_step_s(r: Replica, decode: float, prompt_tokens: float) -> float:
    """One step that decodes `decode` sequences and carries `prompt_tokens` prompt tokens (a chunk of one or
    more prompts): the GPU step and, past the graph size, its eager launch time."""
    return step_s(r, decode, prompt_tokens) + eager_s(r, decode, prompt_tokens)


def free_tokens(r: Replica, batch: float) -> int:
    """The prompt tokens a step's budget leaves beside `batch` decodes (at least 256, or the whole budget)."""
    return max(r.chunk_tokens - math.ceil(batch), min(r.chunk_tokens, 256))


def chunk_tokens(r: Replica, w: Workload, batch: float) -> float:
    """One chunk of a prompt, the prompt cut into equal chunks of at most `free_tokens`."""
    new = prefilled(w)
    return new / math.ceil(new / free_tokens(r, batch))


def tpot_s(r: Replica, w: Workload, batch: float, others: float = 1.0, together: float = 1.0) -> float:
    """Steady state: B decodes per step plus the prompts of the requests that replace finished ones, B × I / O
    prompt tokens a step on average. A prompt is scheduled whole (in chunks of what the budget leaves beside
    the decodes), not spread thinly over every step: a share B × I / O ÷ chunk of the steps carries a chunk
    and the rest decode alone. The mean of those steps is longer than one step carrying the average: a step
    with a chunk is compute bound (its prompt FLOPs cannot hide under the weight reads the decode-only steps
    are bound by), and an MoE decode-only step reads the experts of its own few tokens, 1 − (1 − k/E)^B of
    them, not those of a prompt spread over it (gpt-oss-120b at 4 users, 1,024 in / 1,024 out: 12 % of its
    experts a step, not 22 %). It is the mean a benchmark's TPOT takes: (end − first token) ÷ (O − 1) per
    request, every step the request decodes in, those that carried another request's prompt too. Timed on
    the GPU alone: the eager launch time of a step carrying a chunk (eager_s) is not charged here; charging
    it is not borne out by the served TPOT records (the routed-expert share fitted on them would rise above
    the dense GEMV's).

    `others`: the share of the prompt traffic that comes from other requests than the decoding ones. Open
    arrivals are independent of the requests in service (1). In a closed loop of m users a request's own
    prompt never rides along with its own decode steps: only the other m - 1 users' prompts do, (m - 1) / m
    of the traffic (one user: none, its prompt and its answer alternate).

    `together`: prompts that run in one step, each on its own attention-DP rank (adp_together: TensorRT-LLM's
    attention-DP balancing holds them until they do); 1 otherwise."""
    # speculative decoding: a step yields per_step tokens a sequence, so it carries per_step times the
    # prompt tokens per decode step, and a token takes the step over per_step
    n = r.per_step
    return mean_step_s(r, w, batch, others * n, together) / n


def mean_step_s(r: Replica, w: Workload, batch: float, others: float = 1.0, together: float = 1.0) -> float:
    """The mean decode step of tpot_s: `others` × B × I / O prompt tokens ride along per step, in steps of
    `together` prompts' chunks."""
    b = max(batch, 1.0)
    prompt = others * b * prefilled(w) / max(w.output_tokens, 1)
    if prompt <= 0:
        return step_s(r, b, 0.0)
    chunk = chunk_tokens(r, w, b) * max(together, 1.0)
    if prompt >= chunk:  # every step carries prompt tokens
        return step_s(r, b, prompt)
    share = prompt / chunk
    return (1 - share) * step_s(r, b, 0.0) + share * step_s(r, b, chunk)


def itl_median_s(r: Replica, w: Workload, batch: float) -> float:
    """The median gap between two tokens of an answer in the steady state of `tpot_s`: the step that decodes
    alone while fewer than half the steps carry a prompt chunk (the chunk steps are the long tail of the
    gaps, not their middle), else the step that carries one."""
    b = max(batch, 1.0)
    n = r.per_step  # a speculative step's tokens arrive together: the gap is the step over its tokens
    prompt = b * n * prefilled(w) / max(w.output_tokens, 1)
    chunk = chunk_tokens(r, w, b) if w.input_tokens else 0.0
    if prompt <= 0 or prompt < chunk / 2:
        return step_s(r, b, 0.0) / n
    return step_s(r, b, max(chunk, prompt)) / n  # a chunk step; every step's budget full above one chunk


def prefill_s(r: Replica, w: Workload, batch: float) -> float:
    """One prompt of I tokens, in chunks of what the step budget leaves beside B decodes (no prompt: its
    first token is a decode step). Only the tokens not found in the prefix cache are computed (`prefilled`);
    the host tier's hits are copied in first (`Workload.load_s`)."""
    if w.input_tokens <= 0:
        return step_s(r, max(batch, 1.0), 0.0)
    free = free_tokens(r, batch)
    new = prefilled(w)
    chunks = math.ceil(new / free)
    last = new - (chunks - 1) * free
    full = prompt_step_s(r, batch, free) / r.pp if chunks > 1 else 0.0  # one stage's time: chunks pipeline
    tail = prompt_step_s(r, batch, last)
    return (chunks - 1) * full + tail + w.load_s


def erlang_c(servers: int, offered: float) -> float:
    """Probability that an arrival waits in M/M/c (Erlang C), from Erlang B = P(N = c) / P(N ≤ c) for
    N ~ Poisson(offered): by the stable recursion, or, when c is far above the offered load (P(N ≤ c) = 1
    to 1e-12), from the Poisson term alone."""
    if offered <= 0:
        return 0.0
    if offered >= servers:
        return 1.0
    if servers > offered + 10 * math.sqrt(offered) + 10:
        b = math.exp(servers * math.log(offered) - offered - math.lgamma(servers + 1))
    else:
        b = 1.0
        for k in range(1, servers + 1):
            b = offered * b / (k + offered * b)
    rho = offered / servers
    return b / (1 - rho * (1 - b))


def wait_s(servers: int, arrival_per_s: float, service_s: float, cs2: float,
           ca2: float = 1.0) -> tuple[float, float]:
    """Mean and p90 wait in a GI/G/c queue, Allen–Cunneen: Wq(M/M/c) × (Ca² + Cs²) / 2."""
    offered = arrival_per_s * service_s
    if offered >= servers:
        return math.inf, math.inf
    if offered <= 0:
        return 0.0, 0.0
    c, cond = wait_shape(servers, arrival_per_s, service_s, cs2, ca2)
    return c * cond, queue_p90_s((0.0, c, cond))


def wait_shape(servers: int, arrival_per_s: float, service_s: float, cs2: float,
               ca2: float = 1.0) -> tuple[float, float]:
    """The probability an arrival waits (Erlang C) and the mean wait of those who wait (Allen–Cunneen's
    scaled M/M/c figure) of wait_s's queue: its wait's tail c e^(−y / scale) (wait_tail). A stable queue."""
    offered = arrival_per_s * service_s
    if offered <= 0 or offered >= servers:
        return 0.0, 0.0
    c = erlang_c(servers, offered)
    return c, service_s / (servers - offered) * (ca2 + cs2) / 2


def queue_p90_s(tail: tuple[float, float, float]) -> float:
    """The p90 of a queue wait of this tail (Served.queue_tail: offset, waiting probability, scale): the
    offset plus scale × ln(c / 0.1) where more than a tenth wait (wait_s)."""
    offset, c, scale = tail
    return offset + (scale * math.log(c / P90_TAIL) if c > P90_TAIL else 0.0)


def wait_tail(tail: tuple[float, float, float]) -> Callable[[float], float]:
    """P(W > y) of a queue wait of this tail (Served.queue_tail): 1 below the offset, c e^(−(y − offset) /
    scale) above it: the M/M/c wait's tail (an arrival waits with probability c, those who wait
    exponentially, Erlang C), which wait_s's p90 and closed_loop's take (Allen–Cunneen's scaled mean)."""
    offset, c, scale = tail

    def over(y: float) -> float:
        if y < offset:
            return 1.0
        return c * math.exp(-(y - offset) / scale) if scale > 0 else 0.0

    return over


def _no_wait(y: float) -> float:
    return 1.0 if y < 0 else 0.0


def ttft_p90_s(prefills: tuple[tuple[float, float], ...], tail: Callable[[float], float],
               wait_p90: float) -> float:
    """The p90 of the wait and the prefill together over requests of several classes (Served.prefills: a
    mix of prefix hits and misses, as (share of the requests, prefill seconds)): the x where
    Σ_k share_k P(W > x − prefill_k) = 0.1, W the wait before the prefill (its tail P(W > y) `tail`, its own
    p90 `wait_p90`), the same whatever the request's class (a request waits for the prompts before it, not
    for its own). The quantile of the mixture of W + prefill_k, by bisection: continuous in the shares (no
    jump where a tenth of the requests miss), a miss's prefill plus the whole p90 wait only where nearly all
    miss; one class: its prefill plus the p90 wait. Every p90 TTFT of a stage with classes is formed here
    (_finish, closed_loop, open_stage)."""
    if not prefills:
        return wait_p90
    lo = min(pre for _, pre in prefills)
    hi = max(pre for _, pre in prefills)
    if hi - lo <= 0:
        return hi + wait_p90
    total = sum(share for share, _ in prefills)

    def over(x: float) -> bool:
        """Whether more than a tenth of the requests are past x. The sum is added in the classes' order and
        its terms are ≥ 0, so a partial sum past the tenth decides as the whole would (the longest prompt
        classes first: class_prefills)."""
        acc = 0.0
        for share, pre in prefills:
            acc += share * tail(x - pre)
            if acc / total > P90_TAIL:
                return True
        return False

    # at hi + wait_p90 every class's wait is past its p90 (the tail at most 0.1); below lo every request waits
    hi += wait_p90
    for _ in range(200):
        mid = (lo + hi) / 2
        if over(mid):
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return hi


def prompt_share_s(r: Replica, w: Workload, batch: float, step: float) -> float:
    """A prompt's service at the prompt budget, seen as one server: the share I / free of a step's budget it
    takes, for the time of the step that carries it: a step with a full budget of prompt tokens beside the
    decodes (prompt_step_s), or the mean step `step` where that is longer; a prompt longer than the budget
    takes whole steps. vLLM V1's scheduler fills one token budget a step, the running requests (decodes and
    the chunks of prompts already started) first, then the waiting ones in order
    (vllm/v1/core/sched/scheduler.py Scheduler.schedule, `token_budget = self.max_num_scheduled_tokens`):
    a waiting prompt waits out the chunk steps of the prompts before it, each as long as a step carrying a
    chunk, not as the mean step (TPOT), which the decode-only steps between chunks shorten (Qwen3-32B on 2
    H100s, 16,256-token prompts at 0.625 a second: chunk steps of ~0.42 s, a mean step of ~0.05 s). A prompt
    waits only for the budget other prompts hold, not for a full-chunk step that does not run (with 8,192
    tokens a step, eight 1,000-token prompts share one). Closed loops and open arrivals both queue on it.
    A prefill-first engine (`r.prefill_first`) runs a waiting prompt in a step with no decodes, so its
    prompt step carries the whole budget and 0 decodes: SGLang's scheduler builds a new prefill batch and
    runs it, the running decode batch only when there is none ("Run prefill first if possible",
    get_next_batch_to_run, https://github.com/sgl-project/sglang/blob/main/python/sglang/srt/managers/
    scheduler.py; without --enable-mixed-chunk), TGI's router prefills a new batch before it concatenates it
    with the running one (data/runtimes.toml tgi prefill_first), and vLLM's V0 scheduler without chunked
    prefill schedules the waiting prompts first ("Don't schedule decodes if prefills are scheduled",
    Scheduler._schedule_default, https://github.com/vllm-project/vllm/blob/v0.7.3/vllm/core/scheduler.py)."""
    if w.input_tokens <= 0:
        return 0.0
    beside = 0.0 if r.prefill_first else batch
    free = free_tokens(r, beside)
    return prefilled(w) / free * max(prompt_step_s(r, beside, free), step)


def _finish(r: Replica, w: Workload, batch: float, lam: float, slot_wait: tuple[float, float],
            timed: tuple[float, float] | None = None) -> Served:
    pre, t = timed or (prefill_s(r, w, batch), tpot_s(r, w, batch))
    prompt_service = prompt_share_s(r, w, batch, t)
    p_mean, p_p90 = wait_s(1, lam, prompt_service, 0.0)
    queue = (slot_wait[1], *wait_shape(1, lam, prompt_service, 0.0))  # the slot wait taken at its p90
    rho = max(lam * prompt_service, batch / r.max_seqs if r.max_seqs else math.inf)
    stable = math.isfinite(p_mean) and math.isfinite(slot_wait[0]) and rho < 1 + 1e-9
    # steps planned ahead; the response's lag; the steps until a decoding engine reads new requests (an
    # arrival finds it decoding min(B, 1) of the time: below one sequence in flight, it is idle the rest)
    recv = recv_wait_steps(r) * min(batch, 1.0) * step_s(r, max(batch, 1.0), 0.0)
    ahead = (r.schedule_ahead + r.response_lag) * t + recv
    hold = adp_hold_steps(r, lam * t, batch) * t  # attention-DP balancing (open arrivals: Poisson)
    wait90 = slot_wait[1] + p_p90 + ahead + 1.8 * hold
    # a stable open load serves what arrives, lambda O tokens a second (flow conservation); B / TPOT counted
    # the sequences still prefilling (Little's law's B holds each request for its prefill too) as decoding
    out = lam * max(w.output_tokens, 1) if stable else batch / t if t else 0.0
    prefills = class_prefills(r, w, batch)
    ttft90 = (ahead + 1.8 * hold + ttft_p90_s(prefills, wait_tail(queue), slot_wait[1] + p_p90) if prefills
              else wait90 + pre)
    return Served(batch, t, pre, ttft90, slot_wait[0] + p_mean + ahead + hold + pre, wait90, out, rho,
                  stable, ahead + hold, ahead + 1.8 * hold, prefills, queue)


def class_prefills(r: Replica, w: Workload, batch: float) -> tuple[tuple[float, float], ...]:
    """The prefill of each class of requests, as (share of the requests, seconds): by what they find in the
    prefix cache (Workload.classes) and, where the prompts vary in length (Workload.prompts), by their
    length too, every prompt class with every cache class (shares multiplied: a request's length taken as
    independent of what it finds), each class's prompt its own length, the tokens it finds the cache
    class's (a longer prompt computes its extra tokens). A class shorter than the mean prompt is timed as
    the mean one: prefill_s times a prompt alone beside the decodes, which a short prompt is only on an idle
    engine, where the p90 is a long class's anyway (the top two fifteenths hold more than a tenth); where
    prompts queue, and only there do the short classes reach the p90 through the wait, the step that
    carries a short prompt carries the waiting prompts behind it too (vLLM V1 fills each step's token
    budget from its waiting queue: prompt_share_s), not a lone short prompt's cheaper step (under a CUDA
    graph's size: eager_s). So no class is timed faster than the mean request, and a spread never gives a
    p90 below the mean prompt's. Empty where every request is the mean one. The one place a request's class
    becomes a prefill: every p90 TTFT with classes (ttft_p90_s) reads it (_finish, closed_loop, open_stage's
    Served.prefills)."""
    if not w.prompts:
        return tuple((share, prefill_s(r, replace(w, cached_tokens=cached, load_s=load, classes=()), batch))
                     for share, cached, load in w.classes)
    hits = w.classes or ((1.0, w.cached_tokens, w.load_s),)
    merged: dict[tuple[int, float, float], float] = {}  # classes alike (the short ones, at the mean) are one
    for part, extra in w.prompts:
        tokens = round(w.input_tokens + max(extra, 0.0))
        for share, cached, load in hits:
            merged[tokens, cached, load] = merged.get((tokens, cached, load), 0.0) + part * share
    return tuple((share, prefill_s(r, replace(w, input_tokens=tokens, cached_tokens=cached, load_s=load,
                                              classes=(), prompts=()), batch))
                 for (tokens, cached, load), share in sorted(merged.items(), reverse=True))


def serve(r: Replica, w: Workload) -> Served:
    """The served load on one replica (workload figures per replica)."""
    o = max(w.output_tokens, 1)
    cap = max(r.max_seqs, 1)
    if w.users is not None:
        return closed_loop(r, w, max(w.users, 0.0))
    lam = w.requests_per_s or 0.0
    timed: dict[float, tuple[float, float]] = {}  # (prefill, TPOT) at each batch tried: the root search
    # asks the bracket's ends again, and the answer's batch is timed once more for its figures

    def at(b: float) -> tuple[float, float]:
        if b not in timed:  # attention-DP balancing runs the prompts of a cycle together (adp_together;
            # without it, 1 whatever the arrivals per step: adp_hold_steps)
            together = (adp_together(r, lam * step_s(r, max(b, 1.0), 0.0), b) if r.adp_timeout_iters > 0
                        else 1.0)
            timed[b] = (prefill_s(r, w, b), tpot_s(r, w, b, 1.0, together))
        return timed[b]

    def excess(b: float) -> float:  # Little's law: sequences in service = arrivals × time in service
        pre, t = at(b)
        return lam * (pre + (o - 1) * t) - b

    if excess(cap) > 0:
        pre, t = at(cap)
        service = pre + (o - 1) * t
        return _unstable(r, w, cap, lam * service / cap)
    hi = _root(excess, float(cap))
    b = hi
    pre, t = at(b)
    service = pre + (o - 1) * t
    slot = wait_s(cap, lam, service, w.output_cv2)
    return _finish(r, w, b, lam, slot, (pre, t))


# Schweitzer's approximate mean-value analysis: fixed-point sweeps of the closed system (users, the prompt
# budget, the decode steps) until the mean decoding batch moves less than this share
CLOSED_LOOP_TOL = 1e-4
CLOSED_LOOP_SWEEPS = 60


def closed_loop(r: Replica, w: Workload, users: float) -> Served:
    """`users` clients, each sending its next request when the previous answer ends (`vllm bench serve
    --max-concurrency`), in steady state. A closed system, not an open queue: a user never waits behind
    itself, and more users than the replica serves at once make the cycle longer, never an infinite queue.

    m = min(users, slots) requests hold a slot; each cycles through the prompt budget (a queue: a prompt
    waits for the prompts before it, then takes I / free of a step's budget, `prompt_share_s`), its prefill,
    and O − 1 decode steps. With X requests/s ending, X (O − 1) TPOT sequences decode on average (Little's
    law), and a decode step carries the other users' prompts ((m − 1) / m of the prompt traffic,
    `tpot_s(others=…)`). The prompt budget's wait is Schweitzer's approximate mean-value analysis of a
    closed queue with m customers (P. J. Schweitzer, "Approximate analysis of multiclass closed networks of
    queues", Proc. Int. Conf. Stochastic Control and Optimization, 1979: an arrival sees (m − 1) / m of the
    mean queue), with the residual service of the prompt in progress at (1 + Cs²) / 2 of a service (fixed
    prompt lengths: Cs² = 0; Reiser's FCFS correction, M. Reiser, "Mean-value analysis and convolution method
    for queue-dependent servers in closed queueing networks", Performance Evaluation 1(1), 1981). Users beyond
    the slots wait their turn for one: (users − m) × the time in service ÷ m on average (mean-value analysis
    of a closed system, Reiser & Lavenberg, J. ACM 27(2), 1980). The p90 wait takes the M/M/c tail shape with
    the waiting probability an arrival sees (its queue's utilization with one customer fewer).
    Throughput: users × O ÷ (TTFT + (O − 1) × TPOT), the cycle of one user."""
    o = max(w.output_tokens, 1)
    cap = float(max(r.max_seqs, 1))
    m = min(users, cap)
    if m <= 0:
        t = tpot_s(r, w, 1.0, 0.0)
        pre = prefill_s(r, w, 0.0)
        return Served(0.0, t, pre, pre, pre, 0.0, 0.0, 0.0, True)
    others = max(m - 1.0, 0.0) / m
    ahead_steps = r.schedule_ahead
    recv = recv_wait_steps(r)
    b = m * (o - 1) / o  # decoding, first guess: the prompt a short share of the cycle
    u = 0.0  # the prompt budget's utilization (the residual correction reads the last sweep's)
    # requests ending a step (the last sweep's; first guess: each user's cycle O decode steps), which the
    # attention-DP balancing's hold reads (adp_hold_steps)
    t = step_s(r, max(b, 1.0), 0.0)
    x = m / (o * t)
    damping, last = 1.0, math.inf  # full steps while the sweeps contract; halved when one does not
    for _ in range(CLOSED_LOOP_SWEEPS):
        per_step = x * t
        t = tpot_s(r, w, b, others, adp_together(r, per_step, m))
        hold = adp_hold_steps(r, per_step, m) * t
        beside = b * others  # the other users' decodes a prompt's steps carry
        pre = prefill_s(r, w, beside)
        s_p = prompt_share_s(r, w, beside, t)
        # the step running when the request arrives, and the steps until the engine reads it (recv_wait_steps)
        arrive = others * (1 + recv) * step_s(r, max(b, 1.0), 0.0)
        lag = r.response_lag * t  # its tokens reach the client late: so does the end of its answer
        z = (o - 1) * t + max(pre - s_p, 0.0) + ahead_steps * t + arrive + lag  # the rest of its cycle
        z += hold
        res = _prompt_residence(s_p, z, m, others, u)
        x = m / (res + z)
        u = min(x * s_p, 1.0)
        b_new = min(x * (o - 1) * t, m)
        moved = abs(b_new - b) / max(b, 1.0)
        if moved < CLOSED_LOOP_TOL:
            b = b_new
            break
        if moved >= last:
            damping /= 2
        last = moved
        b += damping * (b_new - b)
    wait = res - s_p
    in_service = res + z  # one request's time holding its slot
    slot_wait = max(users - m, 0.0) * in_service / m
    seen_u = u * others
    wait90 = wait / seen_u * math.log(seen_u / P90_TAIL) if seen_u > P90_TAIL and wait > 0 else 0.0
    # the other users' decode step running when a request arrives (its predecessor's answer ended in the
    # step before), and the steps until the engine reads it: the prompt joins the step after them; a lone
    # user finds the engine idle
    ahead = ahead_steps * t + others * (1 + recv) * step_s(r, max(b, 1.0), 0.0) + r.response_lag * t
    # the attention-DP balancing's hold, uniform over its cycle: its p90 0.9 of the cycle, 1.8 × the mean
    ttft_mean = slot_wait + wait + ahead + pre + hold
    queue = (slot_wait + ahead + 1.8 * hold, seen_u, wait / seen_u if seen_u > 0 else 0.0)
    prefills = class_prefills(r, w, beside)
    ttft90 = (ttft_p90_s(prefills, wait_tail(queue), slot_wait + wait90 + ahead + 1.8 * hold) if prefills
              else slot_wait + wait90 + ahead + pre + 1.8 * hold)
    out = m * o / in_service if in_service else 0.0
    return Served(b, t, pre, ttft90, ttft_mean, slot_wait + wait90 + ahead, out, max(u, m / cap), True,
                  prefills=prefills, queue_tail=queue)


def _prompt_residence(s_p: float, z: float, m: float, others: float, u: float) -> float:
    """A prompt's time at the prompt budget (its wait and its own share of the steps) in a closed loop of m
    users who spend `z` elsewhere per cycle: Schweitzer's fixed point q = X R, X = m / (R + z), with an
    arrival finding (m - 1) / m of the mean queue and the prompt in progress half done (fixed lengths: its
    residual s_p / 2, at the utilization `u`). R is linear in q past the prompts in progress, so q is the
    positive root of a quadratic: B q^2 + (A + z - m B) q - m A = 0 with R = A + B q."""
    if s_p <= 0:
        return 0.0
    seen_u = u * others
    flat = s_p * (1 + seen_u / 2)  # an arrival that finds no more prompts than those in progress
    if m * flat / (flat + z) * others <= seen_u:
        return flat
    a, b = s_p * (1 - seen_u / 2), s_p * others
    c1 = a + z - m * b
    q = (-c1 + math.sqrt(c1 * c1 + 4 * b * m * a)) / (2 * b)
    return a + b * q


def _unstable(r: Replica, w: Workload, cap: int, rho: float) -> Served:
    t = tpot_s(r, w, cap)
    pre = prefill_s(r, w, cap)
    return Served(float(cap), t, pre, math.inf, math.inf, math.inf, cap / t, rho, False,
                  prefills=class_prefills(r, w, cap))


def lognormal_cv2(mean: float, p90: float) -> float:
    """Squared coefficient of variation of a log-normal length with this mean and p90:
    ln(p90 / mean) = 1.2816 σ − σ² / 2 (z of the 90th percentile = 1.2816), CV² = exp(σ²) − 1."""
    if p90 <= mean:
        return 0.0
    x = math.log(p90 / mean)
    z = 1.2815515655446004
    disc = z * z - 2 * x
    sigma = z - math.sqrt(disc) if disc >= 0 else z
    return math.exp(sigma * sigma) - 1


# The classes a spread of prompt lengths is cut into for the p90 TTFT (prompt_classes), of equal shares: a
# share of 1/15 puts the 90th percentile in the middle of the 14th class (13/15 to 14/15 of the requests),
# so that with no queue the p90 TTFT is that class's prefill (its prompt the mean length of its share, at
# the p90 length or just above it) and moves continuously as a queue's wait grows. With shares of a tenth
# the 90th percentile sits on a class edge: the top class holds exactly the tail's tenth, and the least
# wait moves the p90 from the ninth class's prefill to the tenth's (a jump of the whole top tenth's spread);
# 5 classes centre it too, but in one class for the top fifth, whose mean is 18 % above the p90 at a p90
# twice the mean. A numerical setting of the mixture, not a figure fitted to a record (docs/VALIDATION.md
# "The p90 TTFT over the prompt lengths").
PROMPT_CLASSES = 15
# A benchmark run's prompts are read for its classes from at most this many of its draws (varied at this n,
# its law's quantiles on a grid of this size): a speed setting, not a figure from a source. A run of 75,195
# requests takes 0.4 s to draw whole, and its classes from 3,000 draws are the same to 1 token in the 14th
# class and 0.1 % in the top one (ShareGPT and exponential laws of 870-4,000-token prompts).
PROMPT_DRAWS = 3000
Z90 = 1.2815515655446004  # the standard normal's 0.9 quantile


@lru_cache(maxsize=256)
def prompt_classes(mean: int, p90: int | None = None, drawn: tuple[int, ...] = ()
                   ) -> tuple[tuple[float, float], ...]:
    """The requests by prompt length (Workload.prompts): PROMPT_CLASSES classes of equal share, as (share,
    the class's mean prompt less `mean`), the one owner of a workload's prompt classes.
    - `drawn`: the prompts a benchmark run sends (varied: its law's quantiles, scaled to the mean and
      clipped to its caps), sorted, each class the mean of its share of them;
    - else the log-normal through the mean and its 90th percentile `p90` (σ from lognormal_cv2, the law
      services/deploy.py `longest` sizes the context with), each class its conditional mean over its share
      (a, b) of the requests, mean × (Φ(z_b − σ) − Φ(z_a − σ)) / (b − a) (the log-normal's partial
      expectation E[L; L ≤ e^(μ + σ z)] = mean × Φ(z − σ): "Log-normal distribution", Partial expectation,
      https://en.wikipedia.org/wiki/Log-normal_distribution#Partial_expectation), so the classes keep the
      mean up to a p90 of 2.27 × the mean: a log-normal of this mean has a 90th percentile of at most
      e^(z²/2) = 2.27 × the mean (at σ = z, where lognormal_cv2 stops); for a p90 beyond it the classes that
      hold the top tenth (from 13/15 up) are stretched by p90 / that law's p90, so the 14th class keeps the
      stated p90 and the classes' mean rises above `mean` (the queue and the means still read `mean`:
      Workload.prompts).
    Empty: no spread (no p90 above the mean, or every drawn prompt alike)."""
    if drawn:
        n = len(drawn)
        ordered = sorted(drawn)
        if ordered[0] == ordered[-1]:
            return ()
        out = []
        for k in range(PROMPT_CLASSES):
            lo, hi = round(k * n / PROMPT_CLASSES), round((k + 1) * n / PROMPT_CLASSES)
            if hi > lo:
                out.append(((hi - lo) / n, sum(ordered[lo:hi]) / (hi - lo) - mean))
        return tuple(out)
    if p90 is None or p90 <= mean or mean <= 0:
        return ()
    from statistics import NormalDist  # only where a spread is given: kept off the CLI's start-up

    sigma = math.sqrt(math.log1p(lognormal_cv2(mean, p90)))
    law_p90 = mean * math.exp(-sigma * sigma / 2 + Z90 * sigma)
    stretch = max(p90 / law_p90, 1.0)
    unit = NormalDist()

    def below(u: float) -> float:  # Φ(z_u − σ): the share of the mean held by the prompts below quantile u
        return 0.0 if u <= 0 else 1.0 if u >= 1 else unit.cdf(unit.inv_cdf(u) - sigma)

    out = []
    for k in range(PROMPT_CLASSES):
        a, b = k / PROMPT_CLASSES, (k + 1) / PROMPT_CLASSES
        tokens = mean * (below(b) - below(a)) / (b - a)
        if b > 0.9:
            tokens *= stretch
        out.append((1 / PROMPT_CLASSES, tokens - mean))
    return tuple(out)


def _root(f: Callable[[float], float], hi: float, tol: float = 0.01) -> float:
    """Where f crosses zero in [0, hi] (f(0) > 0 ≥ f(hi)), by regula falsi with the Illinois step. Stops
    when |f| < tol × B and never returns below the root (more sequences: the pessimistic side)."""
    a, fa = 0.0, f(0.0)
    b, fb = hi, f(hi)
    if fa <= 0:
        return 1e-9
    side = 0
    for _ in range(40):
        x = (a * fb - b * fa) / (fb - fa) if fb != fa else (a + b) / 2
        fx = f(x)
        if abs(fx) < tol * max(x, 1.0) or b - a < tol:
            return min(x + max(fx, 0.0) * 2, hi)
        if fx > 0:
            a, fa = x, fx
            if side == -1:
                fb /= 2
            side = -1
        else:
            b, fb = x, fx
            if side == 1:
                fa /= 2
            side = 1
    return b


# --- a finite benchmark: N requests at a concurrency cap (`vllm bench serve`, SGLang's bench_serving) ---

@record(slots=True)
class Benchmark:
    """What a serving benchmark reports for `requests` requests at most `concurrency` in flight."""

    ttft_mean_s: float
    ttft_median_s: float
    tpot_mean_s: float
    seconds: float
    output_tokens_per_s: float
    requests_per_s: float
    ttft_p90_s: float = 0.0  # where the run gives it (open_stage); 0: not timed


# A queue that starts empty, in the diffusion (heavy-traffic) approximation: its work is a reflected Brownian
# motion of variance λ s² (Ca² + Cs²) a second, s = 1 / the replica's capacity in requests/s, which with no
# drift (ρ = 1) and started at 0 has the law of |B(t)| (P. Lévy; J. M. Harrison, "Brownian Motion and
# Stochastic Flow Systems", Wiley 1985, §1.9 and ch. 5): the request arriving k-th waits s √k |Z| (Poisson
# arrivals Ca² = 1, equal lengths Cs² = 0). With a negative drift (ρ < 1) the reflected motion lies below the
# driftless one, so over a stage of n arrivals (k uniform on [0, n]) the wait is at most s √n √U |Z|: mean
# E[√U] E[|Z|] = (2/3) √(2/π) = 0.532 s √n, p90 1.180 s √n (P(√U |Z| > 1.180) = 0.1, U uniform, computed
# numerically: ∫₀¹ erfc(c / √(2u)) du = 0.1)
STAGE_WAIT_MEAN = 2 / 3 * math.sqrt(2 / math.pi)
STAGE_WAIT_P90 = 1.1803


def open_stage(s: Served, requests: int, requests_per_s: float, output_tokens: int) -> Benchmark | None:
    """A finite stage of open-loop arrivals: `requests` requests arriving at `requests_per_s` (Poisson) for
    D = requests / rate seconds, the stage over when the last answer ends (inference-perf's stages: `rate` x
    `duration` requests on a Poisson timer, then every request waited for before the next stage,
    kubernetes-sigs/inference-perf inference_perf/loadgen/load_generator.py run_stage @ad65fe0), the queue
    empty at its start. Its wait is continuous and monotone in rho = `s.utilization` (the replica serving
    rate / rho requests/s, one request taking s = rho / rate of its capacity):
    - the diffusion bound a stage of n requests can build (STAGE_WAIT_MEAN, STAGE_WAIT_P90: s √n times 0.532
      mean, 1.180 p90), whatever rho;
    - below capacity (`s` stable) the steady state's queue wait where smaller (it grows without bound as
      rho -> 1; a short stage never builds it);
    - above capacity the queue grows through the stage instead of without end: a fluid queue (arrivals at
      rate, departures at rate / rho; L. Kleinrock, "Queueing Systems, Vol. 2", Wiley 1976, ch. 2, the fluid
      approximation of a saturated queue), where the request arriving at t waits (rho − 1) t: mean
      (rho − 1) D / 2, p90 (rho − 1) 0.9 D, or the diffusion bound where larger (near rho = 1, where the
      fluid queue is empty).
    TTFT is that wait plus the prefill (s.prefill_s; the p90 of a mix of prefix hits and misses, s.prefills,
    the wait and the prefill together: _stage_p90_s) and the steps no queue makes (s.fixed_*); the stage
    lasts D max(rho, 1) plus one request's service. None: no stage (no requests or rate, or a rho not
    timed)."""
    if requests <= 0 or requests_per_s <= 0 or not math.isfinite(s.utilization):
        return None
    rho = max(s.utilization, 0.0)
    d = requests / requests_per_s
    o = max(output_tokens, 1)
    bound = rho / requests_per_s * math.sqrt(requests)
    if s.stable:
        mean = s.fixed_mean_s + min(s.ttft_mean_s - s.prefill_s - s.fixed_mean_s, STAGE_WAIT_MEAN * bound)
        p90 = s.fixed_p90_s + min(s.ttft_s - s.prefill_s - s.fixed_p90_s, STAGE_WAIT_P90 * bound)
    else:
        mean = max((rho - 1) * d / 2, STAGE_WAIT_MEAN * bound)
        p90 = max((rho - 1) * 0.9 * d, STAGE_WAIT_P90 * bound)
    mean += s.prefill_s
    if s.prefills:  # a mix of prefix hits and misses: the p90 of the wait and the prefill together
        p90 = _stage_p90_s(s, rho, d, bound)
    else:
        p90 += s.prefill_s
    seconds = d * max(rho, 1.0) + s.prefill_s + (o - 1) * s.tpot_s
    return Benchmark(mean, mean, s.tpot_s, seconds, requests * o / seconds, requests / seconds, p90)


def _stage_p90_s(s: Served, rho: float, d: float, bound: float) -> float:
    """open_stage's p90 TTFT where its requests are of several classes (s.prefills): ttft_p90_s over the
    stage's wait, whose tail is, below capacity, the smaller of the steady state's (s.queue_tail, wait_tail)
    and the diffusion bound's (_diffusion_tail: the wait is at most either, so its tail is at most the
    smaller), above it the larger of the fluid queue's (the request arriving at t, uniform over the stage,
    waits (rho − 1) t: P(W > y) = 1 − y / ((rho − 1) D)) and the diffusion bound's. Each tail's p90 is
    open_stage's figure for one class (the smaller or larger of the two p90s)."""
    diffusion = _diffusion_tail(bound)
    if s.stable:
        steady = wait_tail(s.queue_tail)
        wait_p90 = min(queue_p90_s(s.queue_tail), STAGE_WAIT_P90 * bound)

        def tail(y: float) -> float:
            return min(steady(y), diffusion(y))

        return s.fixed_p90_s + ttft_p90_s(s.prefills, tail, wait_p90)
    top = (rho - 1) * d

    def tail_over(y: float) -> float:
        fluid = 1.0 if y < 0 else max(1.0 - y / top, 0.0) if top > 0 else 0.0
        return max(fluid, diffusion(y))

    return ttft_p90_s(s.prefills, tail_over, max(0.9 * top, STAGE_WAIT_P90 * bound))


def _diffusion_tail(bound: float) -> Callable[[float], float]:
    """P(W > y) of the stage's diffusion bound W = bound √U |Z| (STAGE_WAIT_P90's law, U uniform, Z normal):
    ∫₀¹ erfc(a / √u) du = (1 + 2a²) erfc(a) − 2a e^(−a²) / √π with a = y / (bound √2) (integrating by
    parts; its p90 is STAGE_WAIT_P90 × bound, its mean STAGE_WAIT_MEAN × bound)."""

    def over(y: float) -> float:
        if y < 0:
            return 1.0
        if bound <= 0:
            return 0.0
        a = y / (bound * math.sqrt(2))
        return max((1 + 2 * a * a) * math.erfc(a) - 2 * a * math.exp(-a * a) / math.sqrt(math.pi), 0.0)

    return over


def binds(r: Replica, w: Workload, concurrency: int) -> bool:
    """Whether a benchmark run's paged pool that preempts (`r.kv_tokens`: vLLM, services/pinned.py `_paged`)
    decides which requests run: it cannot hold `concurrency` requests whole (prompt and answer), so vLLM V1
    admits prompts by their first chunk's blocks and preempts the newest when the answers outgrow the pool
    (`Pool`). A pool that holds them all never preempts, and every user has a slot in the steady state too.
    Runs whose prompts hit a prefix cache or a host tier (`w.cached_tokens`, `w.load_s`: deploy's reuse)
    keep the steady state, which counts those hits; `rounds` computes every prompt whole."""
    if not r.kv_tokens or w.cached_tokens or w.load_s:
        return False
    return concurrency * (w.input_tokens + w.output_tokens) > r.kv_tokens


def benchmark(r: Replica, w: Workload, concurrency: int, requests: int, prefill_first: bool,
              fixed_lengths: bool | Lengths = True, lockstep: bool = False) -> Benchmark:
    """`requests` requests, at most `concurrency` in flight (a client sends the next one when one ends), all
    answers O tokens: the first `concurrency` arrive together (a burst round, stepped by `rounds`). After it:
    - prefill-first engine, equal lengths: the round's prompts are prefilled together and their answers end
      together, so the next `concurrency` requests arrive together again: every round is stepped the same
      way (the measured spread of such runs' TTFT is a few ms: dstackai/benchmarks DeepSeek-R1 online
      results, vLLM V0 on 8x H200 at 4 in flight, std_ttft_ms 10.9 of a 975.7 ms mean);
    - a decode-first engine that stays in lockstep (`lockstep`, runtimes.toml lockstep_rounds: TensorRT-LLM's
      PyTorch backend), equal lengths: the prompts prefilled in one step end in one step, and their
      replacements arrive together and share a step again: every round is stepped, as above;
    - otherwise the answers end one after another (their first tokens were spread over the burst's steps, and
      a few ms of client and network jitter split what one step would batch), the requests that replace them
      arrive spread out, and each later request meets the steady state of `serve` with `concurrency` users
      (a prompt waits for the step running when it arrives, then prefills in the budget left beside the
      decodes);
    - except where a paged pool that preempts binds (`binds`), stepped for every request: the steady state
      gives a request a slot only where the pool holds it at the mean tokens in flight (prompt and half the
      answer) and queues the rest for one, while vLLM V1 admits a waiting
      prompt as soon as the blocks of its first chunk are free and preempts the newest running request when
      a decode step finds none (`Pool`; vllm/v1/core/sched/scheduler.py Scheduler.schedule at v0.10.1.1,
      https://github.com/vllm-project/vllm/blob/v0.10.1.1/vllm/v1/core/sched/scheduler.py): past the pool,
      prompts start early and the answers they crowd out stall, which the steady state cannot express
      (CloudRift's RTX 5090 sweep, data/validation/serving_cloudrift_rtx5090_sweep.toml: the median TTFT
      stays 2.8-6.1 s at 24-32 users while the steady state queued most prompts for 18-54 s).
    The means are over all requests (the first round weighs 1 / rounds)."""
    import statistics  # only validation scores benchmarks: kept off the CLI's start-up

    c = max(1, min(int(concurrency), int(requests)))
    n = max(int(requests), c)
    o = max(w.output_tokens, 1)
    if n <= c or binds(r, w, c) or ((prefill_first or lockstep) and drawn(fixed_lengths) is None):
        ttfts, tpots, seconds = rounds(r, w, c, n, prefill_first, fixed_lengths)
        return Benchmark(statistics.fmean(ttfts), statistics.median(ttfts), statistics.fmean(tpots), seconds,
                         n * o / seconds, n / seconds)
    b_ttfts, b_tpots, b_seconds = rounds(r, w, c, c, prefill_first)
    s = serve(r, replace(w, users=float(c), requests_per_s=None))
    # closed_loop's TTFT: the step running as the request arrives included
    return after_burst(c, n, o, (b_ttfts, b_tpots, b_seconds), s.ttft_mean_s, s.tpot_s)


def after_burst(c: int, n: int, o: int, burst: tuple[list[float], list[float], float], ttft: float,
                tpot: float) -> Benchmark:
    """A finite closed-loop run of `n` requests at `c` in flight, answers of `o` tokens: its first `c`
    requests stepped as the burst they are (`burst`: their TTFTs, TPOTs and the seconds until the last
    answer ends), each later one at the steady state of `c` users (mean `ttft`, `tpot`), one user's cycle
    ttft + (o - 1) × tpot. The means are over all requests (the burst weighs c / n); the median is the
    steady state's where the later requests are at least half the run. One owner for benchmark (one pool of
    replicas) and core/disagg.py benchmark (prefill and decode pools)."""
    import statistics

    b_ttfts, b_tpots, b_seconds = burst
    later = n - c
    per_request = ttft + (o - 1) * tpot  # one user's cycle in the steady state
    seconds = b_seconds + later * per_request / c
    mean_ttft = (c * statistics.fmean(b_ttfts) + later * ttft) / n
    mean_tpot = (c * statistics.fmean(b_tpots) + later * tpot) / n
    median = ttft if later >= n / 2 else statistics.median(b_ttfts)
    return Benchmark(mean_ttft, median, mean_tpot, seconds, n * o / seconds, n / seconds)


# A benchmark whose requests vary in length (`--random-lengths`, a ShareGPT run): vLLM's ShareGPT sampler
# keeps a prompt/answer pair only with both >= 4 tokens, the prompt <= 1024 and the two <= 2048 tokens (vllm
# benchmarks/datasets.py is_valid_sequence, min_len / max_prompt_len / max_total_len at commit f2e97dda,
# https://github.com/vllm-project/vllm/blob/f2e97ddaf5902a9727f48b70d001b6117b8b8b12/vllm/benchmarks/datasets.py)
SAMPLED_MIN_TOKENS = 4
SAMPLED_MAX_PROMPT = 1024
SAMPLED_MAX_TOTAL = 2048
# the R2 quasirandom sequence's generator, the plastic number (M. Roberts, "The unreasonable effectiveness of
# quasirandom sequences", 2018, https://extremelearning.com.au/unreasonable-effectiveness-of-quasirandom-sequences/):
# request k takes the quantile ranked by frac(k / g) (prompt) and frac(k / g^2) (answer), two well-mixed,
# mutually independent-looking orders, so FCFS admission never sees the lengths sorted
PLASTIC = 1.32471795724474602596
# the length shapes a benchmark draws (`deploy --length-distribution`):
# - sharegpt (`--random-lengths`): prompt and answer lengths each an exponential around its mean (assumed: no
#   source states the shape; the maximum-entropy law of a positive length with a known mean), within the
#   ShareGPT sampler's limits above where the means fit them;
# - exponential: the same law without the sampler's limits (a dataset of another source, e.g. MLPerf's
#   CNN-DailyMail articles), capped only by the answer cap and the context;
# - uniform: each length uniform in [mean × (1 − ratio), mean × (1 + ratio)], `vllm bench serve --dataset-name
#   random --random-range-ratio ratio` (vllm/benchmarks/datasets.py RandomDataset.sample: np.random.randint
#   over [int(L (1 − r)), int(L (1 + r))], "a symmetric sampling range", default 0); SGLang's bench_serving
#   draws [ratio' × L, L] (python/sglang/bench_serving.py sample_random_requests), the same law with mean
#   L (1 + ratio') / 2 and ratio (1 − ratio') / (1 + ratio');
# - sonnet: every prompt at the mean (vLLM's sonnet sampler fills each prompt with poem lines up to
#   --sonnet-input-len: benchmarks/benchmark_dataset.py SonnetDataset), each answer an exponential (assumed)
#   stopped at its EOS, capped by the request's max_tokens (--sonnet-output-len).
LENGTH_SHAPES = ("sharegpt", "exponential", "uniform", "sonnet")


@record(slots=True)
class Lengths:
    """How a benchmark draws each request's prompt and answer length around the means (`varied`)."""

    shape: str = "sharegpt"  # one of LENGTH_SHAPES
    ratio: float = 0.0  # uniform: each length within ± ratio × its mean
    max_output: int = 0  # every answer at most this many tokens (the request's max_tokens); 0: no cap
    context: int = 0  # prompt + answer at most this (the engine's max_model_len, which vLLM holds); 0: none


def drawn(fixed_lengths: bool | Lengths) -> Lengths | None:
    """The length law of a run: None where every request has the mean lengths (True), the ShareGPT law of
    `--random-lengths` (False), or the law given."""
    if isinstance(fixed_lengths, Lengths):
        return fixed_lengths
    return None if fixed_lengths else Lengths()


def spread(mean: int, n: int, caps: list[int], low: int, alpha: float, quantiles: list[float] | None = None
           ) -> list[int]:
    """`n` whole lengths, in the order sent, whose sum is exactly n × mean, each in [low, caps[k]]: the
    quantiles (j + 0.5) / n of an exponential (assumed: no source states the shape of a benchmark's length
    distribution; the exponential is the maximum-entropy law of a positive length with a known mean), or the
    `quantiles` given (relative to the mean, ascending), scaled so that, clipped to [low, cap], they sum to
    n × mean (the largest remainders rounded up), request k taking the quantile ranked by
    frac((k + 1) × alpha). Needs n × low <= n × mean <= sum(caps)."""
    target = n * mean
    q = quantiles if quantiles is not None else sorted(-math.log(1.0 - (j + 0.5) / n) for j in range(n))
    ranked = sorted(range(n), key=lambda k: ((k + 1) * alpha) % 1.0)
    quant = [0.0] * n
    for j, k in enumerate(ranked):
        quant[k] = q[j]

    scale = _scale(quant, caps, low, target)
    real = [min(max(scale * x, low), cap) for x, cap in zip(quant, caps, strict=True)]
    out = [int(x) for x in real]
    short = target - sum(out)
    order = sorted(range(n), key=lambda k: out[k] - real[k])  # the largest remainders first
    while short:
        step = 1 if short > 0 else -1
        for k in order if step > 0 else reversed(order):
            if short and low <= out[k] + step <= caps[k]:
                out[k] += step
                short -= step
    return out


def _scale(quant: list[float], caps: list[int], low: int, target: int) -> float:
    """The s at which the sum of min(max(s × x, low), cap) over the requests reaches `target`: a piecewise
    linear sum, swept across its breakpoints (where each term leaves `low`, then reaches its cap)."""
    points = sorted([(low / x, 0, k) for k, x in enumerate(quant)]
                    + [(cap / x, 1, k) for k, (x, cap) in enumerate(zip(quant, caps, strict=True))])
    const, slope, at = float(low * len(quant)), 0.0, 0.0
    for s, leaves, k in points:
        if const + slope * s >= target:
            break
        at = s
        if leaves:
            slope -= quant[k]
            const += caps[k]
        else:
            slope += quant[k]
            const -= low
    return (target - const) / slope if slope > 0 else at


def uniform_quantiles(n: int, ratio: float) -> list[float]:
    """The quantiles (j + 0.5) / n of a uniform law on [1 − ratio, 1 + ratio] (mean 1), ascending."""
    return [1.0 - ratio + 2.0 * ratio * (j + 0.5) / n for j in range(n)]


@lru_cache(maxsize=256)
def varied(input_tokens: int, output_tokens: int, n: int, law: Lengths | None = None
           ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Each of `n` requests' prompt and answer lengths (`spread`) with the means given, drawn by `law`
    (default: the ShareGPT law of `--random-lengths`): the exponential within the ShareGPT sampler's limits
    where the means fit them (each answer capped at what its own prompt leaves of the total), otherwise
    (means the sampler cannot have drawn) capped only as below. Every answer is at most `law.max_output`
    and every prompt at most the context less what its answer may take (the answer cap, else the shortest
    answer), each answer at most what its prompt leaves: vLLM admits a request only if prompt + max_tokens
    fit max_model_len (vllm/entrypoints/openai/serving_engine.py _validate_input: "This model's maximum
    context length is …", HTTP 400), and a benchmark
    counts a refused request as failed, never as served. The caller keeps the means within those caps
    (services/pinned.py length_law: output <= max_output, input + max(output, max_output) <= context)."""
    law = law or Lengths()
    i, o = input_tokens, output_tokens
    low_i, low_o = min(SAMPLED_MIN_TOKENS, i), min(SAMPLED_MIN_TOKENS, o)
    room = law.max_output or low_o  # what each prompt leaves of the context for its answer
    sampled = law.shape == "sharegpt" and i <= SAMPLED_MAX_PROMPT and i + max(o, room) <= SAMPLED_MAX_TOTAL
    unbounded = n * (i + o) + law.max_output  # more than any request can hold
    total = min(law.context or unbounded, SAMPLED_MAX_TOTAL if sampled else unbounded)
    top = min(SAMPLED_MAX_PROMPT if sampled else n * i, total - room)
    shape = uniform_quantiles(n, law.ratio) if law.shape == "uniform" else None
    ins = [i] * n if law.shape == "sonnet" else spread(i, n, [top] * n, low_i, 1 / PLASTIC, shape)
    caps = [min(law.max_output or n * o, total - x) for x in ins]
    outs = spread(o, n, caps, low_o, 1 / PLASTIC ** 2, shape)
    return tuple(ins), tuple(outs)


def rounds(r: Replica, w: Workload, concurrency: int, requests: int, prefill_first: bool,
           fixed_lengths: bool | Lengths = True) -> tuple[list[float], list[float], float]:
    """Step the engine through `requests` requests, `concurrency` sent at once and the next each time an
    answer ends: (TTFT and TPOT per request, seconds until the last answer ends). As the engine schedules:

    - at most `r.max_seqs` sequences hold a slot (the runtime's cap, or what its KV pool holds at the mean
      tokens in flight); a prompt waits until one frees. With a paged pool that preempts (`r.kv_tokens`,
      vLLM), the slots are the engine's own cap (`r.engine_seqs`) and the pool is stepped block by block
      (`Pool`);
    - decode-first engines (vLLM V1, TensorRT-LLM in-flight batching, vLLM V0 with chunked prefill) put every
      running sequence in the step and fill the rest of its token budget (`chunk_tokens`) with prompt chunks
      (the chunks of prompts already started first, as V1 schedules its running list before its waiting one);
    - prefill-first engines (SGLang's default scheduler, vLLM V0 without chunked prefill, TGI) run a prompt
      step, up to the budget, while an admissible prompt waits, and the decodes resume only then.

    A prompt's first token comes at the end of the step that finishes it; an answer of O tokens ends O − 1
    decode steps later. Stretches without an admissible prompt are decode steps of a fixed batch, jumped to
    the next answer's end (or to the step the pool runs out of blocks).

    `fixed_lengths` False (the ShareGPT law) or a `Lengths` law: each request has its own prompt and answer
    length around the means (`varied`), so
    the slots and blocks free as each answer ends and the run lasts until the longest one ends."""
    import heapq  # here, where the run is stepped (`cardfit plan` never is)

    n = max(int(requests), 1)
    c = max(1, min(int(concurrency), n))
    i, o = max(w.input_tokens, 1), max(w.output_tokens, 1)
    law = drawn(fixed_lengths)
    ins, outs = ((i,) * n, (o,) * n) if law is None else varied(i, o, n, law)
    chunk = max(r.chunk_tokens, 1)
    pool = Pool(r, n) if r.kv_tokens else None
    if pool:
        _fits_alone(pool, ins, outs)
    cap = max(r.engine_seqs or r.max_seqs, 1) if pool else max(r.max_seqs, 1)
    timed: dict[tuple[int, float], float] = {}

    def dt(decodes: int, prompt: float) -> float:
        key = (decodes, prompt)
        if key not in timed:
            timed[key] = prompt_step_s(r, decodes, prompt)
        return timed[key]

    def lag_s(at: float) -> float:
        """The response lag: that many decode steps of the batch running now (Replica.response_lag)."""
        return r.response_lag * dt(max(len(running), 1), 0.0) if r.response_lag else 0.0

    arrival = [0.0] * c  # per request, in the order sent
    if r.burst_first_alone and c > 1:  # the others are queued just after the first one's step started
        arrival[1:] = [BURST_LAG_S] * (c - 1)
    queue: deque[list[Any]] = deque([k, float(ins[k])] for k in range(c))  # [request, tokens left]: FCFS
    started: list[list[Any]] = []  # admitted prompts part-prefilled (they hold a slot), in admission order
    # decoding requests: the decode step (of `clock`, the steps in which the running requests decode) at
    # which each one's answer ends, and the same as a heap to find the next end
    running: dict[int, int] = {}
    ends: list[tuple[int, int]] = []
    clock = 0
    admitted: set[int] = set()  # requests holding a slot (running, or a prompt part-prefilled)
    first = [math.nan] * n
    end = [0.0] * n
    t, sent, done = 0.0, c, 0
    # an overlap scheduler plans step m + 1 as step m starts: a request that arrives after that waits for
    # the step after (`planned`: when the step about to start was planned)
    planned = 0.0
    decode_until = -1  # after a stalled prompt step: the answers ended by then (none admitted until one more)

    def finish(k: int, at: float) -> None:
        nonlocal sent, done
        at += lag_s(at)  # the last token reaches the client after the engine's response lag
        end[k] = at
        done += 1
        admitted.discard(k)
        if pool:
            pool.release(k)
        if sent < n:  # the client sends the next request as this answer ends
            arrival.append(at)
            queue.append([sent, float(ins[sent])])
            sent += 1
            if len(queue) > 1 and arrival[queue[-2][0]] > at:  # a shorter lag: it arrives first (FCFS)
                ordered = sorted(queue, key=lambda x: arrival[x[0]])
                queue.clear()
                queue.extend(ordered)

    def next_end() -> int:
        while running.get(ends[0][1]) != ends[0][0]:  # dropped: preempted since
            heapq.heappop(ends)
        return ends[0][0]

    def ended(at: float) -> None:
        """Every answer whose last decode step has run ends at `at`."""
        while ends and ends[0][0] <= clock:
            end, k = heapq.heappop(ends)
            if running.get(k) == end:
                del running[k]
                finish(k, at)

    def evict_newest() -> None:
        """Preempt the newest admitted request: its blocks freed, sent back to the front of the queue to be
        computed again (vLLM's recompute preemption)."""
        assert pool is not None
        k = max(admitted, key=pool.stamp.__getitem__)
        admitted.discard(k)
        if k in running:
            pool.resume[k] = running.pop(k) - clock
            left = pool.tokens(k) + 1  # every token so far, the last sampled one too
        else:
            x = next(x for x in started if x[0] == k)
            started.remove(x)
            left = pool.tokens(k) + x[1]
        pool.evict(k)
        queue.appendleft([k, float(left)])

    def preempt() -> bool:
        """Free blocks until the running requests' next tokens fit: the newest admitted request first."""
        assert pool is not None
        hit = False
        while pool.free() < pool.growth(1) and admitted:
            evict_newest()
            hit = True
        return hit

    while done < n:
        room = cap - len(running) - len(started)
        seen = planned if r.schedule_ahead else t
        # a prompt step with no decodes in it (prefill-first, or nothing running) whose oldest part-prefilled
        # prompt finds no free block can take no token (and no new prompt fits). A prefill-first engine then
        # runs its decode batch (SGLang and vLLM V0 decode when no prefill can be scheduled) and admits no
        # prompt until an answer has ended and freed its blocks (neither admits a prompt whose blocks are not
        # all free: vLLM V0 BlockSpaceManager.can_allocate, SGLang PrefillAdder); with nothing to decode the
        # pool holds only part-prefilled prompts, and the newest is preempted so the oldest can go on (vLLM
        # V1's scheduler preempts the newest running request when one cannot get its blocks)
        stalled = bool(pool and started and (prefill_first or not running)
                       and pool.room_for(started[0][0]) <= 0)
        if stalled and not running:
            evict_newest()
            continue
        if stalled:
            decode_until = done
        admissible = not (running and decode_until == done) and (
            bool(started) or (bool(queue) and arrival[queue[0][0]] <= seen and room > 0
                              and (not pool or pool.admits(queue[0], chunk, pool.growth(1)))))
        if not admissible:
            if not running:  # idle until the next request arrives: an idle engine plans at once
                t = planned = min(arrival[x[0]] for x in queue)
                continue
            step = dt(len(running), 0.0)
            if queue and room > 0 and planned < arrival[queue[0][0]] <= t:
                k = 1  # it came after the running step was planned: one more step, then the plan sees it
            else:
                k = next_end() - clock  # decode-only steps until the next answer ends
            if pool:
                k = pool.steps_fitting(k)
                if k == 0:  # the next decode step does not fit: preempt, then step the rest
                    preempt()
                    continue
                pool.decode(k)
            planned = t + (k - 1) * step
            t += k * step
            clock += k
            ended(t)
            continue
        decodes = 0 if prefill_first else len(running)
        hit = False
        if pool and decodes:
            hit = preempt()
            decodes = len(running)
            pool.decode(decodes and 1)
        budget = max(chunk - decodes, min(chunk, 256))
        took = 0.0
        completed: list[int] = []
        for x in started:  # the prompts already admitted go on first
            if took >= budget:
                break
            take = min(x[1], budget - took)
            if pool:
                take = min(take, pool.room_for(x[0]))
                if take <= 0:
                    break
                pool.prefill(x[0], take)
            x[1] -= take
            took += take
            if x[1] <= 0:
                completed.append(x[0])
        room = cap - len(running) - len(started)
        while queue and took < budget and not hit and room > 0:  # then new prompts, a slot each
            x = queue[0]
            if arrival[x[0]] > seen or (pool and not pool.admits(x, budget - took)):
                break
            queue.popleft()
            room -= 1
            admitted.add(x[0])
            started.append(x)
            if pool:
                x[1] -= pool.admit(x[0], x[1])  # its blocks still cached: computed already
            take = min(x[1], budget - took)
            if pool:
                pool.prefill(x[0], take)
            x[1] -= take
            took += take
            if x[1] <= 0:
                completed.append(x[0])
        if completed:
            started = [x for x in started if x[1] > 0]
        planned = t
        t += dt(decodes, took)
        if decodes:
            clock += 1
            ended(t)
        for k in completed:
            if math.isnan(first[k]):
                first[k] = t + lag_s(t)
                left = outs[k] - 1
            else:  # a preempted request computed again: its step samples the next token
                left = pool.resume[k] - 1 if pool else 0
            if left > 0:
                running[k] = clock + left
                heapq.heappush(ends, (clock + left, k))
                if pool:
                    pool.start(k)
            else:
                finish(k, t)
    ttft = [first[k] - arrival[k] for k in range(n)]
    # TPOT over the answers longer than one token, as `vllm bench serve` averages it
    tpot = [(end[k] - first[k]) / (outs[k] - 1) for k in range(n) if outs[k] > 1] or [0.0] * n
    return ttft, tpot, max(end)


def _fits_alone(pool: Pool, ins: tuple[int, ...], outs: tuple[int, ...]) -> None:
    """Each request must fit the KV pool on its own (its prompt and all but its last answer token held),
    else it is preempted and computed again forever: vLLM refuses to start where max_model_len exceeds what
    its KV cache holds ("The model's max seq len ... is larger than the maximum number of tokens that can be
    stored in KV cache", vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory)."""
    longest = max(i + o for i, o in zip(ins, outs, strict=True))
    if pool.need(longest - 1) > pool.blocks:
        raise InputError(f"a request of {longest:,} tokens (prompt + answer) does not fit a KV pool of "
                         f"{pool.blocks * pool.block:,} tokens", field="kv_tokens",
                         hint="give the pool more memory or ask for shorter requests")


class Pool:
    """A paged KV pool stepped as vLLM's scheduler and block pool hand it out (vllm/v1/core/sched/scheduler.py
    Scheduler.schedule and vllm/v1/core/block_pool.py at v0.10.1.1,
    https://github.com/vllm-project/vllm/blob/v0.10.1.1/vllm/v1/core/sched/scheduler.py):

    - a request holds ceil(tokens / block) blocks of the tokens it has computed; a step first gives each
      running request the blocks its new tokens need, and when none is free preempts the newest running
      request ("self.running.pop()", RECOMPUTE: its blocks freed, its computed tokens reset to 0, put back at
      the front of the waiting queue); a step that preempted admits no new request;
    - a waiting request is admitted when the blocks of its first chunk are free (no reserve kept for the
      answers to come: allocate_slots), so the pool fills with prompts and their answers then preempt;
    - with prefix caching (V1's default), freed blocks stay cached in the free queue until they are handed
      out again, least recently freed first (a request's last block first): a preempted request admitted
      again computes only the blocks it lost meanwhile; without it (V0's default) it computes everything."""

    __slots__ = ("blocks", "block", "held", "stamp", "resume", "queue", "segment", "cache", "_n", "used",
                 "clock", "since", "hist", "decoding")

    def __init__(self, r: Replica, n: int) -> None:
        self.block = max(r.kv_block, 1)
        self.blocks = max(r.kv_tokens // self.block, 1)
        self.held = [0] * n  # tokens whose KV each request holds (a decoding one: when it started decoding)
        self.stamp = [0] * n  # admission order: the newest is preempted first
        self.resume = [0] * n  # decode steps left when preempted
        self.cache = r.prefix_cache
        self.queue: list[list[int]] = [[-1, self.blocks]]  # free blocks in eviction order: [owner, blocks]
        self.segment: dict[int, list[int]] = {}  # a preempted request's cached blocks in the queue
        self._n = 0
        self.used = 0
        # the decoding requests advance together: decode steps so far (clock), the clock when each started
        # decoding, and how many sit at each place in their last block (the steps that need new blocks)
        self.clock = 0
        self.since = [0] * n
        self.hist = [0] * self.block
        self.decoding = [False] * n

    def need(self, tokens: float) -> int:
        return -(-int(tokens) // self.block)

    def free(self) -> int:
        return self.blocks - self.used

    def tokens(self, k: int) -> int:
        return self.held[k] + (self.clock - self.since[k] if self.decoding[k] else 0)

    def _key(self, k: int) -> int:
        return (self.held[k] - 1 - self.since[k]) % self.block

    def start(self, k: int) -> None:
        """Request k starts decoding (a token a step from now on)."""
        self.since[k] = self.clock
        self.decoding[k] = True
        self.hist[self._key(k)] += 1

    def _stop(self, k: int) -> None:
        if self.decoding[k]:
            self.hist[self._key(k)] -= 1
            self.held[k] = self.tokens(k)
            self.decoding[k] = False

    def _take(self, count: int) -> None:
        """Hand out `count` blocks from the head of the free queue (evicting what they cached)."""
        self.used += count
        q = self.queue
        while count > 0 and q:
            seg = q[0]
            got = min(seg[1], count)
            seg[1] -= got
            count -= got
            if seg[1] <= 0:
                q.pop(0)

    def _give(self, k: int) -> None:
        """Free request k's blocks to the tail of the free queue, its last block first: only whole blocks
        stay cached (a partly filled last block is evicted first)."""
        self._stop(k)
        blocks, whole = self.need(self.held[k]), self.held[k] // self.block
        self.used -= blocks
        self.held[k] = 0
        if blocks > whole:
            self.queue.append([-1, blocks - whole])
        if whole:
            seg = [k, whole]
            self.queue.append(seg)
            if self.cache:
                self.segment[k] = seg

    def release(self, k: int) -> None:
        """A finished request's blocks go back to the free queue (cached, never asked for again)."""
        self._give(k)
        self.segment.pop(k, None)

    def evict(self, k: int) -> None:
        self._give(k)

    def cached(self, k: int) -> int:
        seg = self.segment.get(k)
        return seg[1] if seg is not None else 0

    def admits(self, x: list[Any], budget: float, reserve: int = 0) -> bool:
        """Whether the first chunk of waiting request `x` finds its blocks free (`reserve`: the blocks this
        step's decodes take first)."""
        have = min(self.cached(x[0]) * self.block, int(x[1]) - 1)
        take = min(x[1] - have, budget)
        return self.need(have + take) <= self.free() - reserve

    def admit(self, k: int, tokens: float) -> int:
        """Admit request k: its blocks still cached are taken back (computed: at most all but its last
        token, which is computed again to sample the next). Returns the tokens it need not compute."""
        self._n += 1
        self.stamp[k] = self._n
        blocks = self.cached(k)
        seg = self.segment.pop(k, None)
        if seg is not None:
            seg[1] = 0
            self.queue = [s for s in self.queue if s[1] > 0]
        hit = max(min(blocks * self.block, int(tokens) - 1), 0)
        self.used += self.need(hit)
        self.held[k] = hit
        return hit

    def room_for(self, k: int) -> int:
        return self.free() * self.block + (self.need(self.held[k]) * self.block - self.held[k])

    def prefill(self, k: int, tokens: float) -> None:
        more = self.need(self.held[k] + tokens) - self.need(self.held[k])
        self._take(more)
        self.held[k] += int(tokens)

    def growth(self, steps: int) -> int:
        """New blocks the decoding requests take in the next `steps` steps: a request whose last token sits
        at place p of its block (0-based) takes one more block each time p + steps passes a block end."""
        if steps <= 0:
            return 0
        whole, part = divmod(steps, self.block)
        n = sum(self.hist)
        if not part:
            return n * whole
        edge = self.block - part  # places p from here on cross a block end within `part` steps
        crossing = sum(c for key, c in enumerate(self.hist) if (key + self.clock) % self.block >= edge)
        return n * whole + crossing

    def decode(self, steps: int) -> None:
        self._take(self.growth(steps))
        self.clock += steps

    def steps_fitting(self, most: int) -> int:
        """The decode steps (at most `most`) whose new blocks the free ones hold."""
        free = self.free()
        if self.growth(most) <= free:
            return most
        lo, hi = 0, most  # growth(lo) fits, growth(hi) does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.growth(mid) <= free:
                lo = mid
            else:
                hi = mid
        return lo

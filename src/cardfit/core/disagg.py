"""Disaggregated prefill and decode (xPyD): `x` prefill workers and `y` decode workers, each a replica of its
own (its own cards and split), the prompt's KV cache sent from the prefill worker that computed it to the
decode worker that generates the answer (SGLang `--disaggregation-mode prefill|decode`, vLLM with a KV
connector, NVIDIA Dynamo, llm-d).

A request waits for a prefill worker, is prefilled (several prompts share a step up to the worker's token
budget), its cache crosses the link between the pools, and its answer decodes on a decode worker whose steps
carry no prompt: TTFT is the prefill pool's queue + the prefill + the transfer + the decode worker's handoff
steps (handoff_s: it reads the request before the prefill may start, and merges the request whose cache has
arrived at the top of a later step), TPOT the decode pool's step at the sequences each decode worker holds
(Little's law). In a closed loop with more users than the decode workers' sequence caps hold, the users
beyond them wait for a slot, and that wait is part of their TTFT. A prefill worker whose engine keeps a
prompt's slot until its cache has crossed (SGLang: held_slots) serves no faster than its slots turn over
through a step and a transfer. Built on core/serving.py's replica, step and queue.

Not modelled, for want of a source that sizes it: aiconfigurator's SGLang 0.5.8 P/D runs
(data/validation/serving_aic_pd.toml) take 100-300 ms more TTFT at 4 users than the prefill, the transfer
and these steps explain (no constant is fitted to those records). Every stage SGLang 0.5.8's two servers
put a request through (docs/VALIDATION.md "The P/D TTFT at 4-8 users, stage by stage") is polled once a
loop, a loop a decode step of 9-15 ms on these runs' decode workers and next to nothing on an idle prefill
worker: all of them together are the handoff_s steps; the transfer's real rate is bounded from the runs
themselves (at least 7 GB/s: 10 ms at 1,024 tokens); the rest is none of these stages, and part of it is
not P/D's at all (aiconfigurator's aggregated SGLang runs of the same sample are 65 ms short at 4-8 users
too). A finite closed-loop benchmark (benchmark) opens with its first wave, every user's prompt queued on
the prefill pool at once (first_wave), then meets the steady state. Nor is it a handoff cost that the
runs whose prefill pool saturates miss by: their rate (users ÷ (TTFT + the answer's decode time))
implies an attention-DP prefill worker 2x slower than this one (B200 FP8 DP 8 at 8,192-token prompts, B200
FP4 DP 4 at 1,024) or 1.14x faster (GB200 FP8 DP 8 at 1,024, B200 FP4 DP 4 at 8,192), while the decode step
at the batch those runs held is within 0 % to −28 % (docs/VALIDATION.md "The P/D records of DeepSeek-R1,
taken apart"). Read at SGLang v0.5.8 and found not to explain them: the prefill server's admission
(held_slots, modelled: a transfer of 1-12 ms against a 80-320 ms prefill), its bootstrap queue (polled at the
top of each loop, not capped beyond the metadata buffers), the decode server's pre-allocation polling (every
loop with disaggregation_decode_polling_interval 1) and the KV sender's heartbeat
(SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL 5 s, not per request). The pre-allocation's token reserve (512 a
request held: admitted, modelled) binds only where a decode rank's pool is nearly full: GB200 FP8 DP 8 at
4,096 users admits 3,872 (the run's own rate gives 3,876 decoding), the other 224 waiting before their
prefill, its 3.5 s TTFT (docs/VALIDATION.md "The P/D TTFT at high load"). SGLang divides
--chunked-prefill-size by the attention-DP ranks (server_args.py; modelled: services/deploy.py dp_total, so a
DP 8 B200 worker's steps carry the server's 8,192 tokens, not 8 x 8,192), which chunks an 8,192-token prompt
into 1,024-token pieces on its rank while the other ranks take other prompts' pieces: a DP worker's step holds
a prompt (or a batch) a rank, each rank's attention its own (ranks_batch_s, prompts_per_step).
aiconfigurator's generator starts a prefill worker at max_batch_size 1 (its --max-running-requests) and
max_prefill_tokens ISL + 1,500 (generator/rule_plugin/sglang.rule at ai-dynamo/aiconfigurator@095f58a5, later
than 0.12.0), as the records' prefill_batch_size 1 pins them."""

from __future__ import annotations

import math
from dataclasses import replace

from ..catalog.records import record
from . import serving as sv

# Where the pools sit on different nodes their cache crosses the network: core/placement.py's node link, one
# 400 Gb/s InfiniBand NDR port per node (50 GB/s, NVIDIA ConnectX-7 data sheet), ~20 µs a transfer. Inside one
# node it crosses NVLink or PCIe at the card's link rate (gpus.toml link_gbps; NVLink's figure counts both
# directions, of which a transfer uses one).
CLOSED_LOOP_STEPS = 40  # bisection steps on the closed loop's request rate (to 1e-12 of the capacity)
# a decode worker whose mean sequences reach its cap to within this share is full: a closed loop's users
# beyond rate × cycle then wait for a slot (below the cap, the loop's shortfall is the decode step's jumps
# between batch sizes, e.g. CUDA-graph sizes, that the bisection straddles, not users left waiting)
FULL_SHARE = 1e-6


@record(slots=True)
class Pools:
    """A disaggregated deployment: its prefill and decode workers and the link between the pools."""

    prefill: sv.Replica  # one prefill worker
    prefill_workers: int
    decode: sv.Replica  # one decode worker
    decode_workers: int
    kv_bytes_per_token: int  # the cache a prompt token leaves on the prefill worker (all its layers)
    link_bytes_per_s: float  # one transfer's rate between the pools
    link_latency_s: float = 0.0
    # a prefill worker's prompt keeps its request slot until its cache has crossed (held_slots; SGLang's
    # adapter PD_SLOT_HELD_THROUGH_TRANSFER), so a worker whose slots one step fills waits for the transfer
    slots_held: bool = False
    # the decode worker streams an arrived request's first token from a batch without a forward whose output
    # its overlap loop handles one pass later, after the step then running (handoff_s `next_pass`; SGLang's
    # adapter PD_FIRST_TOKEN_NEXT_PASS)
    first_token_next_pass: bool = False


@record(slots=True)
class Disaggregated:
    batch: float  # mean sequences decoding on one decode worker
    tpot_s: float
    prefill_s: float  # one prompt's prefill on a prefill worker at this load
    transfer_s: float  # one prompt's cache from the prefill pool to the decode pool
    ttft_s: float  # p90: wait + prefill + transfer + handoff (+ a closed loop's wait for a decode slot)
    ttft_mean_s: float
    output_tokens_per_s: float  # all workers together
    utilization: float  # the busier pool: prefill offered load per server, decode sequences per cap
    stable: bool
    handoff_s: float = 0.0  # the decode worker's loop: reading the request, merging it (handoff_s)
    slot_wait_s: float = 0.0  # a closed loop's users beyond the decode slots: their mean wait for one

    @property
    def per_user_tokens_per_s(self) -> float:
        return 1 / self.tpot_s


def transfer_s(kv_bytes_per_token: int, input_tokens: int, bytes_per_s: float,
               latency_s: float = 0.0) -> float:
    """One prompt's KV cache (its tokens × the cache of a token) over the link between the pools."""
    if input_tokens <= 0 or kv_bytes_per_token <= 0:
        return 0.0
    return kv_bytes_per_token * input_tokens / bytes_per_s + latency_s


def link_bytes_per_s(link_gbps: float, bidirectional: bool) -> float:
    """One direction of a link, bytes/s (`bidirectional`: the figure counts both, as NVLink's 900 GB/s)."""
    return link_gbps * (0.5 if bidirectional else 1.0) * 1e9


def rank_chunk_tokens(r: sv.Replica) -> int:
    """One attention-DP rank's step budget: the worker's (Replica.chunk_tokens, the ranks' budgets added up:
    services/deploy.py dp_total) over its ranks; the whole budget without attention DP."""
    return max(r.chunk_tokens // max(r.machine.attention_dp, 1), 1)


def prompts_per_step(r: sv.Replica, input_tokens: int) -> int:
    """Prompts a prefill worker takes into one step: as many whole prompts as its token budget holds (one, in
    chunks, when a prompt is longer), at most its sequence cap. With attention data parallel each rank
    schedules its own prompts at its own budget and cap (rank_chunk_tokens, max_seqs ÷ the ranks), so the
    worker's step holds a batch of each rank's, one chunk of a longer prompt a rank (ranks_batch_s)."""
    dp = max(r.machine.attention_dp, 1)
    if dp == 1:
        return max(1, min(r.chunk_tokens // max(input_tokens, 1), r.max_seqs))
    return dp * max(1, min(rank_chunk_tokens(r) // max(input_tokens, 1), max(r.max_seqs // dp, 1)))


def prefill_batch_s(r: sv.Replica, input_tokens: int) -> float:
    """A prefill worker's step over one batch of prompts (prompts_per_step), decoding nothing; a prompt longer
    than the budget in chunks (core/serving.py prefill_s); an attention-DP worker's ranks side by side
    (ranks_batch_s)."""
    if max(r.machine.attention_dp, 1) > 1:
        return ranks_batch_s(r, input_tokens)
    k = prompts_per_step(r, input_tokens)
    if k == 1:
        return sv.prefill_s(r, sv.Workload(input_tokens, 1), 0.0)
    return sv.prompt_step_s(r, 0.0, k * input_tokens)


def ranks_batch_s(r: sv.Replica, input_tokens: int, prompts: int = 0) -> float:
    """An attention data-parallel prefill worker (`r`, Machine.attention_dp ranks) over one batch of prompts,
    every rank busy, SGLang's prefill server at v0.5.8 (PyPI wheel sglang 0.5.8, sglang/srt/): the DP
    controller sends each request to one rank (managers/data_parallel_controller.py
    round_robin_scheduler); each rank's scheduler forms its own batch in its own loop
    (disaggregation/prefill.py event_loop_normal_disagg_prefill: get_new_batch_prefill) with its share of
    --chunked-prefill-size (server_args.py _handle_data_parallelism: chunked_prefill_size // dp_size), a
    longer prompt chunked on its rank (managers/scheduler.py get_new_batch_prefill, PrefillAdder); the
    ranks' batches then run as one forward (maybe_prepare_mlp_sync_batch_and_log_stats,
    managers/scheduler_dp_attn_mixin.py prepare_mlp_sync_batch_raw: every rank's token count gathered, a
    rank without prompts an idle batch; layers/dp_attention.py: the attention on each rank's own tokens,
    gathered for the MoE). So a step carries each rank's piece (its prompts, or one chunk of rank_chunk_tokens
    of its prompt), timed by the step model at the step's tokens with each piece's attention in its own
    group (core/serving.py prompt_flops, its group count the pieces: Replica.prompt_tokens one piece), and a
    prompt longer than a rank's chunk takes ceil(prompt ÷ chunk) such steps, the last of the pieces left.
    `prompts` (0: a full batch, prompts_per_step): fewer prompts than a full batch (a finite run's last
    batch, first_wave), dealt over the ranks as the DP controller's round robin does, the busiest rank's piece
    the step's group, the ranks without one idle."""
    dp = max(r.machine.attention_dp, 1)
    c = rank_chunk_tokens(r)
    tokens = max(input_tokens, 1)
    full_batch = prompts_per_step(r, tokens)
    m = full_batch if prompts <= 0 else min(prompts, full_batch)
    if tokens <= c:
        if m == full_batch:
            piece = full_batch // dp * tokens
            return sv.prompt_step_s(replace(r, prompt_tokens=piece), 0.0, dp * piece)
        return sv.prompt_step_s(replace(r, prompt_tokens=math.ceil(m / dp) * tokens), 0.0, m * tokens)
    busy = dp if m == full_batch else min(m, dp)  # one prompt a rank, chunked
    chunks = math.ceil(tokens / c)
    last = tokens - (chunks - 1) * c
    # one stage's time for the full chunks, as core/serving.py prefill_s pipelines a prompt's chunks
    full = sv.prompt_step_s(replace(r, prompt_tokens=c), 0.0, busy * c) / r.pp
    return (chunks - 1) * full + sv.prompt_step_s(replace(r, prompt_tokens=last), 0.0, busy * last)


def alone_s(r: sv.Replica, input_tokens: int) -> float:
    """One prompt's prefill on an idle prefill worker (`r`): core/serving.py prefill_s at the worker's budget,
    an attention-DP worker's at one rank's (rank_chunk_tokens), the prompt's attention in its one group."""
    if max(r.machine.attention_dp, 1) > 1:
        r = replace(r, chunk_tokens=rank_chunk_tokens(r), prompt_tokens=max(input_tokens, 1))
    return sv.prefill_s(r, sv.Workload(input_tokens, 1), 0.0)


def held_slots(r: sv.Replica) -> int:
    """Prompts a prefill worker (`r`) can hold between the start of their prefill and the end of their KV
    transfer, SGLang's prefill server at v0.5.8 (sgl-project/sglang tag v0.5.8, python/sglang/srt/): each
    attention-DP rank sizes its request pool with the whole --max-running-requests (`max_seqs`;
    model_executor/model_runner_kv_cache_mixin.py init_memory_pool), schedules at most that ÷ the DP ranks
    a step (model_executor/model_runner.py, managers/scheduler.py pp_max_micro_batch_size) and bootstraps
    at most twice that (managers/scheduler.py init_disaggregation: the metadata buffers, "*2 for the
    headroom"; disaggregation/prefill.py pop_bootstrapped); a prompt is admitted only while its rank's pool
    has a free slot ("In prefill mode, prealloc queue and transfer queue can also take memory",
    managers/scheduler.py get_new_batch_prefill) and frees its slot and buffer when its transfer is polled
    done (disaggregation/prefill.py process_disagg_prefill_inflight_queue)."""
    dp = max(r.machine.attention_dp, 1)
    m = max(r.max_seqs, 1)
    return dp * min(m, 2 * max(m // dp, 1))


def prompt_service_s(p: Pools, input_tokens: int, move: float) -> tuple[float, float]:
    """(A prefill worker's seconds per prompt, its step over a full batch): it takes prompts_per_step
    prompts a step, so serves one every batch ÷ k seconds; where a prompt keeps its slot through its
    transfer (`p.slots_held`), its held_slots turn over once per step and transfer (`move`), so no faster
    than one prompt every (batch + move) ÷ slots (a worker of one slot: prefill, then transfer, then the
    next prompt)."""
    k = prompts_per_step(p.prefill, input_tokens)
    batch = prefill_batch_s(p.prefill, input_tokens)
    service = batch / k
    if p.slots_held:
        service = max(service, (batch + move) / held_slots(p.prefill))
    return service, batch


def handoff_s(r: sv.Replica, step: float, busy: float, closed: bool, next_pass: bool = False) -> float:
    """The decode worker's share of one request's TTFT (`r`: a decode worker; `step`: its decode step at the
    load; `busy`: the share of the time it is decoding other users' sequences, 0 to 1; `closed`: a closed
    loop's request, sent as the same user's answer ended). SGLang's decode server
    (python/sglang/srt/disaggregation/decode.py at sgl-project/sglang@278e503a: the request life cycle in
    its docstring, event_loop_overlap_disagg_decode, process_decode_queue,
    get_next_disagg_decode_batch_to_run) reads new requests at the top of its event loop, which runs once a
    decode step while it decodes, creates each one's KV receiver and, in the same pass
    (DecodePreallocQueue.pop_preallocated), pre-allocates its KV slots and hands their indices to the
    prefill server, which holds the prompt in its bootstrap queue until then; each later pass polls the
    transfers (pop_transferred) and streams the first token (computed on the prefill server) of each
    request whose cache has arrived, in a prebuilt batch without a forward.
    So the request waits:
    - to be read: the decode step running as it arrives, its whole length in a closed loop (the answer
      before it ended at a step's end, as core/serving.py closed_loop counts) and half of it for open
      arrivals, and the steps until the engine reads new requests (recv_wait_steps);
    - to be merged: half a step on average (its cache lands at any point of a step), then the engine's
      response lag (Replica.response_lag);
    - `next_pass` (SGLang's decode server, PyPI wheel sglang 0.5.8, https://pypi.org/project/sglang/0.5.8/,
      sglang/srt/): on its overlap loop (disaggregation/decode.py event_loop_overlap_disagg_decode, run
      unless the overlap scheduler is off: managers/scheduler.py, as Replica.schedule_ahead counts) the pass
      that takes the arrived request runs its prebuilt batch instead of a decode step, then handles the
      output of the step launched the pass before, waiting for it on the GPU; the prebuilt batch's output,
      the first token (scheduler_output_processor_mixin.py process_batch_result_prebuilt: stream_output),
      is handled at the next pass. So the token leaves a step after the pass that merged it:
      schedule_ahead steps more. Without the overlap scheduler (event_loop_normal_disagg_decode) the pass
      runs the prebuilt batch and streams it at once.
    An idle decode worker (`busy` 0) reads and merges at once: only the response lag."""
    b = min(max(busy, 0.0), 1.0)
    read = b * ((1.0 if closed else 0.5) + sv.recv_wait_steps(r)) * step
    merge = b * (0.5 + (r.schedule_ahead if next_pass else 0)) * step
    return read + merge + r.response_lag * step


def serve(p: Pools, w: sv.Workload) -> Disaggregated:
    """The deployment under the whole load `w` (users: a closed loop over all workers; requests_per_s: open
    Poisson arrivals)."""
    move = transfer_s(p.kv_bytes_per_token, w.input_tokens, p.link_bytes_per_s, p.link_latency_s)
    service, batch = prompt_service_s(p, w.input_tokens, move)
    servers = p.prefill_workers
    alone = alone_s(p.prefill, w.input_tokens)  # the same at every rate
    classes = prompt_classes(p, w)
    if w.requests_per_s is not None:
        return _at_rate(p, w, w.requests_per_s, service, servers, move, alone, 1.0, batch, classes)
    users = max(w.users or 1.0, 1.0)
    others = (users - 1) / users  # a user's own sequence is not decoding while it waits for its first token
    # a closed loop: each user cycles through a wait, a prefill, a transfer and its answer's steps, so the
    # rate is the root of rate × cycle(rate) = users below the pools' capacity (cycle grows with the rate)
    top = capacity_per_s(p, w, service, servers)
    lo, hi = 0.0, top
    for _ in range(CLOSED_LOOP_STEPS):
        mid = (lo + hi) / 2
        # the root reads the stability and the mean only: the p90 over the classes at the answer alone
        res = _at_rate(p, w, mid, service, servers, move, alone, others, batch)
        if res.stable and mid * (res.ttft_mean_s + w.output_tokens * res.tpot_s) < users:
            lo = mid
        else:
            hi = mid
    res = _at_rate(p, w, lo if lo > 0 else top, service, servers, move, alone, others, batch, classes)
    return _beyond_slots(res, w, users, p.decode.max_seqs)


def prompt_classes(p: Pools, w: sv.Workload) -> tuple[tuple[float, float, float], ...]:
    """The requests by prompt length (Workload.prompts, core/serving.py prompt_classes), as (share, the
    class's prompt alone on an idle prefill worker, its cache's transfer), which the p90 TTFT takes as a
    mixture (_at_rate), a class shorter than the mean timed as the mean (core/serving.py class_prefills);
    empty where every prompt is the mean."""
    merged: dict[int, float] = {}  # a shorter class as the mean (core/serving.py class_prefills): one class
    for share, extra in w.prompts:
        tokens = round(w.input_tokens + max(extra, 0.0))
        merged[tokens] = merged.get(tokens, 0.0) + share
    return tuple((share, alone_s(p.prefill, tokens),
                  transfer_s(p.kv_bytes_per_token, tokens, p.link_bytes_per_s, p.link_latency_s))
                 for tokens, share in merged.items())


def _beyond_slots(res: Disaggregated, w: sv.Workload, users: float, cap: int) -> Disaggregated:
    """A closed loop past the decode workers' sequence caps (`cap` each, full): the loop settles at their
    capacity's rate X with X × cycle users in service, and the rest wait their turn for a slot,
    (users − X × cycle) ÷ X on average
    (Little's law over the queue of waiting users: the mean-value analysis of a closed system, Reiser &
    Lavenberg, J. ACM 27(2), 1980, as core/serving.py closed_loop counts the users beyond its slots). The
    wait comes before the prompt's prefill, so it is TTFT (mean and p90 alike: every such user waits)."""
    rate = res.output_tokens_per_s / max(w.output_tokens, 1)
    if not res.stable or rate <= 0 or res.batch < max(cap, 1) * (1 - FULL_SHARE):
        return res
    held = rate * (res.ttft_mean_s + w.output_tokens * res.tpot_s)
    if held >= users:
        return res
    wait = (users - held) / rate
    return replace(res, ttft_s=res.ttft_s + wait, ttft_mean_s=res.ttft_mean_s + wait, slot_wait_s=wait)


def capacity_per_s(p: Pools, w: sv.Workload, service: float, servers: int) -> float:
    """The requests/s the busier pool can take: its prefill workers at one prompt every `service` seconds
    each, or its decode workers' sequence caps over an answer's steps at that cap."""
    prefill = servers / service if service > 0 else math.inf
    full = sv.step_s(p.decode, float(p.decode.max_seqs), 0.0)
    decode = p.decode_workers * p.decode.max_seqs / (max(w.output_tokens, 1) * full)
    return min(prefill, decode)


def decode_batch(p: Pools, rate: float, output_tokens: int) -> tuple[float, float]:
    """(Sequences decoding on a decode worker, its step) at `rate` requests/s: Little's law on the decode
    pool, B = rate × O × step(B) ÷ workers, its sequences setting its step and its step its sequences. Solved
    by bisection on the whole batch (core/serving.py step_s times the next whole one) for where the step's
    demand falls to the batch, not by passes of the law from one sequence: near the pool's capacity each pass
    gains little (the step grows almost as fast as the batch it serves), and a few passes stop far below the
    fixed point (GB200 DP 8 at 4,096 users, at its capacity: 3,007 of its 3,872 sequences after 8 passes),
    losing the users the closed loop should hold waiting. Past the cap (the demand at the cap above it) the
    batch returned is that demand, over the cap: the pool is overloaded."""
    cap = max(p.decode.max_seqs, 1)

    def demand(b: int) -> float:
        return rate * max(output_tokens, 1) * sv.step_s(p.decode, float(b), 0.0) / p.decode_workers

    if demand(cap) > cap:
        return demand(cap), sv.step_s(p.decode, float(cap), 0.0)
    lo, hi = 1, cap  # demand(hi) <= hi; the smallest whole batch that holds its own demand
    if demand(1) <= 1:
        hi = 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if demand(mid) <= mid:
            hi = mid
        else:
            lo = mid
    return max(demand(hi), 1.0), sv.step_s(p.decode, float(hi), 0.0)


def _at_rate(p: Pools, w: sv.Workload, rate: float, service: float, servers: int,
             move: float, alone: float, others: float, batch_s: float,
             classes: tuple[tuple[float, float, float], ...] = ()) -> Disaggregated:
    """Both pools at `rate` requests/s: the prefill pool a GI/G/c queue of `servers` prompt slots (fixed
    lengths: deterministic service), the decode pool `rate × O × TPOT` sequences over its workers. `alone`:
    one prompt's prefill on an idle prefill worker; `batch_s`: a prefill worker's step over a full batch;
    `others`: the share of a decode worker's sequences that are other users' (a closed loop's
    (users − 1) ÷ users; open arrivals: 1). `classes` (prompt_classes): where the prompts vary in length,
    the p90 TTFT is the quantile of the prefill pool's wait and each class's own prefill and transfer
    together (core/serving.py ttft_p90_s over the wait's M/M/c tail, as the aggregated replica's), the
    batch's share of the step the mean prompt's (the other prompts in it); the queue and the means stay the
    mean prompt's."""
    mean_wait, p90_wait = sv.wait_s(servers, rate, service, 0.0)
    prefill_load = rate * service / max(servers, 1)
    # a prompt's own prefill: alone when the pool is idle, in a fuller batch as its load grows
    fuller = max(batch_s - alone, 0.0) * min(prefill_load, 1.0)
    prefill = alone + fuller
    batch, tpot = decode_batch(p, rate, w.output_tokens)
    decode_load = batch / max(p.decode.max_seqs, 1)
    stable = prefill_load < 1 and decode_load <= 1 and math.isfinite(p90_wait)
    # below one sequence in flight the decode worker is idle the rest of the time (as core/serving.py _finish)
    hand = handoff_s(p.decode, tpot, min(rate * w.output_tokens * tpot / p.decode_workers, 1.0) * others,
                     w.requests_per_s is None, p.first_token_next_pass)
    fixed = prefill + move + hand
    ttft90 = p90_wait + fixed
    if classes and stable:
        tail = sv.wait_tail((0.0, *sv.wait_shape(servers, rate, service, 0.0)))
        own = tuple((share, alone_k + fuller + sent) for share, alone_k, sent in classes)
        ttft90 = hand + sv.ttft_p90_s(own, tail, p90_wait)
    return Disaggregated(min(batch, p.decode.max_seqs), tpot, prefill, move,
                         ttft90 if stable else math.inf,
                         mean_wait + fixed if stable else math.inf,
                         rate * w.output_tokens if stable else 0.0, max(prefill_load, decode_load), stable,
                         hand)


def admitted(pool_tokens: int, held_tokens: int, reserve_tokens: int, ranks: int = 1) -> int:
    """Sequences a decode worker's P/D admission lets into its KV pool (`pool_tokens`, all its attention-DP
    `ranks` together, each rank its own share): each holds `held_tokens` on average (its prompt and half its
    answer) and the engine keeps `reserve_tokens` free for each it holds. SGLang's decode server at v0.5.8
    (PyPI wheel sglang 0.5.8, https://pypi.org/project/sglang/0.5.8/, sglang/srt/disaggregation/decode.py):
    pop_preallocated pre-allocates a request (its prompt's KV slots, before the prefill server may start it)
    only while `_allocatable_tokens` (the pool's free tokens less num_reserved_decode_tokens for every request
    running, in the transfer queue or waiting) holds its prompt plus that reserve; the rest wait in the
    pre-allocation queue, their prefill not started. So a rank holds at most pool ÷ (held + reserve)
    sequences (at least one: the engine starts with room for one whole request)."""
    per_rank = max(pool_tokens, 0) // max(ranks, 1)
    return max(ranks, 1) * max(per_rank // max(held_tokens + reserve_tokens, 1), 1)


def with_decode_cap(r: sv.Replica, seqs: int) -> sv.Replica:
    """A decode worker holding `seqs` sequences (its KV pool over the request's whole context)."""
    return replace(r, max_seqs=max(seqs, 1))


def wave_batch_s(r: sv.Replica, input_tokens: int, prompts: int) -> float:
    """A prefill worker's step over `prompts` prompts of a finite run's wave (at most prompts_per_step): the
    full batch's step (prefill_batch_s), or the fewer prompts' own, one prompt alone as on an idle worker."""
    if prompts >= prompts_per_step(r, input_tokens):
        return prefill_batch_s(r, input_tokens)
    if max(r.machine.attention_dp, 1) > 1:
        return ranks_batch_s(r, input_tokens, prompts)
    if prompts <= 1:
        return sv.prefill_s(r, sv.Workload(input_tokens, 1), 0.0)
    return sv.prompt_step_s(r, 0.0, prompts * input_tokens)


def first_wave(p: Pools, w: sv.Workload, users: int, steady: Disaggregated
               ) -> tuple[list[float], list[float], float]:
    """A finite closed-loop run's first `users` requests on the pools, all sent at once as every harness
    starts its users (vllm bench serve and SGLang's bench_serving create every task at once under their
    --max-concurrency semaphore; aiperf starts its users together after its warmup's responses have all
    come back: ai-dynamo/aiperf docs/tutorials/warmup.md, "By default, AIPerf waits indefinitely for all
    warmup responses before starting profiling"): (TTFT and TPOT per request, seconds until the last
    answer ends), the requests that follow not sent (core/serving.py benchmark steps its burst the same way).

    - The router deals the prompts over the prefill workers in turn (sglang_router --policy round_robin, as
      dstack launched it; any balancing router deals equal prompts alike), and each worker takes its queue
      in order, prompts_per_step at a time (wave_batch_s), its next batch once its slots allow
      (prompt_service_s: a worker whose prompts keep their slots through the transfer takes the next batch
      no sooner than its held_slots turn over);
    - a prompt may start only once the decode pool has admitted it (SGLang's decode server pre-allocates
      its KV before the prefill server starts it: admitted): past the decode workers' caps it waits for a
      first-wave answer to end, each answer taken to end (O − 1) steady-state TPOTs after its first token;
    - its first token comes after its batch's step, its cache's transfer and the decode worker's handoff
      (the steady state's: handoff_s);
    - the decode workers take the requests in turn, each request joining its worker's batch at its first
      token and decoding O − 1 more steps, every step timed at the sequences its worker then holds
      (core/serving.py step_s, as decode_batch times them), so its TPOT is its answer's time ÷ (O − 1).
    At the mean lengths (a run of drawn lengths too, as core/serving.py benchmark times a run longer than
    one round)."""
    import heapq

    c = max(int(users), 1)
    i, o = max(w.input_tokens, 1), max(w.output_tokens, 1)
    move = transfer_s(p.kv_bytes_per_token, w.input_tokens, p.link_bytes_per_s, p.link_latency_s)
    k = prompts_per_step(p.prefill, i)
    slots = held_slots(p.prefill)
    x, y = max(p.prefill_workers, 1), max(p.decode_workers, 1)
    admits = y * max(p.decode.max_seqs, 1)
    after = move + steady.handoff_s
    timed: dict[int, float] = {}

    def batch_s(m: int) -> float:
        if m not in timed:
            timed[m] = wave_batch_s(p.prefill, i, m)
        return timed[m]

    # per prompt, the batch it runs in; per batch [start, prompts]; per prefill worker, its current batch
    # and when it may start the next
    of: list[int] = []
    batches: list[list[float]] = []
    current = [-1] * x
    free = [0.0] * x

    def first(j: int) -> float:
        start, m = batches[of[j]]
        return start + batch_s(int(m)) + after

    for j in range(c):
        wk = j % x
        gate = 0.0 if j < admits else first(j - admits) + (o - 1) * steady.tpot_s
        b = current[wk]
        if b >= 0 and batches[b][1] < k and batches[b][0] >= gate:
            batches[b][1] += 1
        else:
            b = len(batches)
            batches.append([max(free[wk], gate), 1.0])
            current[wk] = b
        of.append(b)
        start, m = batches[b]
        step = batch_s(int(m))
        free[wk] = start + (max(step, (step + move) * m / slots) if p.slots_held else step)
    firsts = [first(j) for j in range(c)]
    if o <= 1:
        return firsts, [steady.tpot_s] * c, max(firsts)
    steps: dict[int, float] = {}

    def step_s(b: int) -> float:
        if b not in steps:
            steps[b] = sv.step_s(p.decode, float(b), 0.0)
        return steps[b]

    ends = [0.0] * c
    for d in range(y):
        mine = sorted((firsts[j], j) for j in range(d, c, y))
        t, s, nxt = mine[0][0], 0, 0
        running: list[tuple[int, int]] = []  # (the step count at which it ends, request)
        while nxt < len(mine) or running:
            while nxt < len(mine) and mine[nxt][0] <= t:
                heapq.heappush(running, (s + o - 1, mine[nxt][1]))
                nxt += 1
            if not running:
                t = mine[nxt][0]
                continue
            dt = step_s(len(running))
            n = running[0][0] - s
            if nxt < len(mine):
                n = min(n, max(1, math.ceil((mine[nxt][0] - t) / dt)))
            t += n * dt
            s += n
            while running and running[0][0] <= s:
                ends[heapq.heappop(running)[1]] = t
    tpots = [(ends[j] - firsts[j]) / (o - 1) for j in range(c)]
    return firsts, tpots, max(ends)


def benchmark(p: Pools, w: sv.Workload, concurrency: int, requests: int) -> sv.Benchmark:
    """A finite closed-loop run on the pools: `requests` requests, at most `concurrency` in flight (the next
    sent as an answer ends), the first `concurrency` sent at once (first_wave), each later one meeting the
    pools' steady state at `concurrency` users (serve); weighed as core/serving.py benchmark weighs a run of
    one pool (after_burst: the wave 1 / rounds of the means)."""
    import statistics

    c = max(1, min(int(concurrency), int(requests)))
    n = max(int(requests), c)
    o = max(w.output_tokens, 1)
    steady = serve(p, replace(w, users=float(c), requests_per_s=None))
    if not steady.stable:
        return sv.Benchmark(math.inf, math.inf, math.inf, math.inf, 0.0, 0.0)
    ttfts, tpots, seconds = first_wave(p, w, c, steady)
    if n <= c:
        return sv.Benchmark(statistics.fmean(ttfts), statistics.median(ttfts), statistics.fmean(tpots),
                            seconds, n * o / seconds, n / seconds)
    return sv.after_burst(c, n, o, (ttfts, tpots, seconds), steady.ttft_mean_s, steady.tpot_s)

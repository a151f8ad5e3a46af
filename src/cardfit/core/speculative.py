"""Speculative decoding: a drafter proposes K tokens per sequence, the target verifies them (and the token
after them) in one step of K + 1 query tokens per sequence, and keeps the longest accepted prefix plus one
token of its own.

The engines report the acceptance as the share of drafted tokens accepted, A = accepted / drafted (vLLM's
spec-decode metrics "Draft acceptance rate", llama.cpp's "accept", SGLang's accept length - 1 over K), so a
target step yields on average

    E[tokens] = 1 + A x K

tokens per sequence (vLLM's "mean acceptance length" = 1 + accepted / drafts, the same count). A figure
measured at one K is carried to another through the chain model in which each drafted token is accepted with
probability alpha, independently, until the first rejection: E[tokens] = (1 - alpha^(K+1)) / (1 - alpha)
(Leviathan, Kalman & Matias, "Fast Inference from Transformers via Speculative Decoding", ICML 2023,
arXiv:2211.17192, equation 1). A step costs the target's step with K + 1 query tokens
per sequence (core/speed.py `step`: the weights are read once, each sequence's cache once, the FLOPs are
those of every token) plus K steps of the drafter. At one sequence the verification is as memory-bound as a
plain step and the gain is about E[tokens]; as the batch grows the step becomes compute-bound, the K + 1
tokens cost K + 1 times the FLOPs, and the gain shrinks (below 1 where the FLOPs dominate): nothing here
sets that, it is the step model's roofline.

The drafters:
- `draft`: a smaller model of the same tokenizer (llama.cpp `--model-draft`, vLLM `"method": "draft_model"`,
  SGLang STANDALONE), with its own weights and KV cache, one full forward step per drafted token;
- `eagle3`: an EAGLE-3 head (Li et al., "EAGLE-3", arXiv:2503.01840): one decoder layer whose attention takes
  the token embedding and a fused feature of three target layers (2 x hidden wide: vLLM
  model_executor/models/llama_eagle3.py, qkv_proj input_size = 2 * hidden_size), the fusion `fc`
  (3 x hidden -> hidden) and its own lm_head over a reduced draft vocabulary (yuhuili/EAGLE3-LLaMA3.1-
  Instruct-8B config.json: "num_hidden_layers": 1, "draft_vocab_size": 32000); it shares the target's
  embedding;
- `mtp`: the model's own multi-token-prediction layers (DeepSeek-V3 `num_nextn_predict_layers`): each one
  decoder layer of the model plus the projection eh_proj (2 x hidden -> hidden) and, as vLLM loads them, its
  own embedding and head (vllm model_executor/models/deepseek_mtp.py: DeepSeekMultiTokenPredictor
  embed_tokens, SharedHead.head);
- `ngram`: prompt lookup on the CPU, no weights and no GPU step.

A tree of drafts (SGLang's EAGLE worker, `--speculative-eagle-topk` > 1): each of the K - 1 draft forwards
after the first expands the `topk` best branches so far, `topk` query tokens per sequence (python/sglang/srt/
speculative/eagle_worker.py at sgl-project/sglang@00559eac, draft_forward: "for i in
range(self.speculative_num_steps)", one forward of the draft model over batch x topk tokens per step but the
last; the first token's top-k come from the draft forward over the accepted tokens,
forward_draft_extend_after_decode); the tree's best
`--speculative-num-draft-tokens` nodes (organize_draft_results) are then verified in one target forward of
that many query tokens per sequence under a tree mask (verify, ForwardMode.TARGET_VERIFY). A chain is the
tree of top-k 1 and K + 1 verified tokens (SGLang's server_args sets num_draft_tokens = num_steps + 1 where
topk is 1). A path the target accepts is at most min(K, verified - 1) drafts deep; the extra branches raise
the acceptance over the chain's by an amount no public figure gives for a head and a tree shape, so the
tokens a step yields are counted as the chain's of that depth (the tree is grown from the likeliest branches,
the chain's among them as a rule, so it accepts about that much or more: the safe side), while the
verification and the draft forwards cost what the tree's tokens cost."""

from __future__ import annotations

from dataclasses import replace

from ..catalog.models import ModelSpec
from ..catalog.records import record
from .speed import Load, Machine, link_seconds, per_layer_s, step

# EAGLE-3 heads predict over a reduced vocabulary (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B config.json
# "draft_vocab_size": 32000, the vocabulary SpecForge trains its heads with as well)
EAGLE3_DRAFT_VOCAB = 32_000


def tokens_per_step(acceptance: float, tokens: int) -> float:
    """Mean tokens a target step yields per sequence (Leviathan et al. 2023, eq. 1): 1 + alpha + ... +
    alpha^K; K + 1 where every draft is accepted."""
    a = min(max(acceptance, 0.0), 1.0)
    k = max(tokens, 0)
    if a >= 1.0:
        return float(k + 1)
    return (1 - a ** (k + 1)) / (1 - a)


def rate_for_length(length: float, tokens: int) -> float:
    """The per-token acceptance alpha at which K = `tokens` drafts yield `length` tokens a step (the inverse
    of tokens_per_step, which rises with alpha from 1 to K + 1), by bisection."""
    k = max(tokens, 1)
    if length <= 1:
        return 0.0
    if length >= k + 1:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if tokens_per_step(mid, k) < length:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def length_at(acceptance: float, tokens: int) -> float:
    """Mean tokens a step yields with K = `tokens` drafts of which the share `acceptance` is accepted."""
    return 1 + min(max(acceptance, 0.0), 1.0) * max(tokens, 0)


def acceptance_at(length: float, measured_at: int, tokens: int) -> float:
    """The accepted share at K = `tokens` of a drafter whose steps yielded `length` tokens at K =
    `measured_at`: its per-token rate in the chain model (rate_for_length), then that model's length at K."""
    if tokens <= 0:
        return 0.0
    alpha = rate_for_length(length, measured_at)
    return (tokens_per_step(alpha, tokens) - 1) / tokens


@record(slots=True)
class Speculation:
    """What a step of speculative decoding does: K drafted tokens per sequence of which the share
    `acceptance` is accepted, and the drafter's per-token work on the target's cards (None: drafting costs no
    GPU time, n-gram lookup)."""

    method: str
    tokens: int
    acceptance: float
    draft: Load | None = None
    # single-token target steps a cycle runs beside its verification, each yielding one token:
    # llama-server before ggml-org/llama.cpp PR #17808 (services/speculative.py plain_steps) decoded a slot's
    # sampled token in its main batch first, then drafted from the token that step sampled and verified that
    # token and its draft in a llama_decode of their own (examples/server/server.cpp update_slots, "do
    # speculative decoding"): two target steps a cycle. 0: the draft rides in the one step
    plain_steps: int = 0
    # a tree of drafts (SGLang --speculative-eagle-topk, --speculative-num-draft-tokens): the branches each
    # draft forward after the first expands per sequence, and the tokens a verification carries per sequence
    # (0: the chain's K + 1)
    topk: int = 1
    verify_tokens: int = 0
    # the runtime replays its verification as the CUDA graph of its sequences whatever the tokens each
    # carries (SGLang: the target-verify graphs are captured per batch size, num_tokens_per_bs verified tokens
    # each, CudaGraphRunner.can_run comparing the batch size with cuda_graph_max_bs); False: by its tokens
    # (vLLM's capture sizes count tokens), or none past one token a sequence (llama.cpp)
    verify_graph_by_sequences: bool = False
    # the drafter's forwards run inside the engine's step, between two passes of its scheduler (SGLang: the
    # scheduler loop's run_batch runs draft(), verify() and the draft extend, then process_batch_result once,
    # python/sglang/srt/managers/scheduler.py event_loop_normal, speculative/eagle_worker.py
    # forward_batch_generation, sglang 0.5.3.post3 wheel): the scheduler's time per sequence
    # (Machine.overhead_s_per_sequence) is paid once a cycle, by the verification, not by each draft forward.
    # False: each draft forward pays it as a step would (llama.cpp, vLLM: not read)
    draft_in_step: bool = False
    # the host's time in each cycle between its GPU phases, which the runtime does not overlap with them
    # (seconds; 0: none). SGLang's spec-v1 EAGLE worker syncs the host on the GPU inside the cycle
    # (eagle_worker.py `.item()`, eagle_info.py `.tolist()` / `.cpu()`, per-request Python over the accepted
    # tokens) and runs with the overlap scheduler off (runtimes.toml speculative_cycle_host_us, its source)
    host_s: float = 0.0

    @property
    def verified(self) -> int:
        """Query tokens a verification step carries per sequence: the tree's, else the chain's K + 1."""
        return self.verify_tokens or self.tokens + 1

    @property
    def depth(self) -> int:
        """Drafts the longest path the target can accept holds: K, or fewer where the tree verifies fewer
        than K + 1 tokens."""
        return min(self.tokens, self.verified - 1)

    @property
    def per_step(self) -> float:
        """Mean tokens a cycle yields per sequence: the verification's and the plain steps' one each."""
        return length_at(self.acceptance, self.depth) + self.plain_steps


def layer_params(m: ModelSpec) -> float:
    """One decoder layer's parameters: the model's less its embedding and head, over its layers (all of
    them: an MTP layer of an MoE model holds its experts; eagle3_params takes the active ones)."""
    embed = m.vocab * (m.hidden or 0) * (1 if m.tied_embeddings else 2)
    return max((m.text_params or m.params) - embed, 0) / max(m.layers, 1)


def eagle3_params(m: ModelSpec) -> float:
    """An EAGLE-3 head: one decoder layer with its attention projections taking 2 x hidden inputs, the
    3 x hidden -> hidden fusion, and an lm_head over the draft vocabulary."""
    h = m.hidden or 0
    embed = m.vocab * h * (1 if m.tied_embeddings else 2)
    dense_layer = max(m.active - embed, 0) / max(m.layers, 1)
    qkv_extra = h * ((m.heads or m.kv_heads) + 2 * m.kv_heads) * m.head_dim
    return dense_layer + qkv_extra + 3 * h * h + EAGLE3_DRAFT_VOCAB * h


def mtp_params(m: ModelSpec, layers: int) -> float:
    """`layers` MTP modules: each a decoder layer of the model and eh_proj (2 x hidden -> hidden), plus the
    embedding and head vLLM loads for them."""
    h = m.hidden or 0
    return layers * (layer_params(m) + 2 * h * h) + 2 * m.vocab * h


def head_load(target: Load, params: float, bytes_per_param: float, layers: int, flops_per_token: float,
              like_target: bool) -> Load:
    """The per-token work of a head drafting on the target's cards: its weights (a dense head reads all of
    them each step; an MTP layer of an MoE model splits like the target's, `like_target`), `layers` layers'
    worth of the target's cache reads, and its FLOPs."""
    per_layer_kv = target.kv_bytes / max(target.layers, 1)
    shares = target.shares if like_target else replace(target.shares, dense=1.0, experts=0.0, embed=0.0,
                                                       route=1.0, attention=0.0)
    return Load(round(params * bytes_per_param), shares, round(per_layer_kv * layers), flops_per_token,
                layers, target.hidden, kv_split=target.kv_split)


def verify_link_s(load: Load, mc: Machine, sequences: int, extra_tokens: float) -> float:
    """The tensor-parallel all-reduces of the `extra_tokens` a verification step carries beyond its one
    token per sequence (`step` sizes its messages by the sequences only)."""
    if mc.tp <= 1 or extra_tokens <= 0:
        return 0.0
    return link_seconds(load, mc, sequences + round(extra_tokens)) - link_seconds(load, mc, sequences)


def verify_overhead_s(load: Load, mc: Machine, sequences: int, tokens: int,
                      by_sequences: bool = False) -> float:
    """What a verification step's fixed time per layer adds over a decode step's: a runtime that replays only
    single-token steps as a CUDA graph launches a step of K + 1 tokens per sequence eagerly (core/speed.py
    per_layer_s: llama.cpp), where a step of `sequences` tokens alone would replay its graph. Nothing where
    the runtime's verification graphs are captured per sequence count (`by_sequences`: SGLang), which the
    decode step's own graph limit already holds."""
    if by_sequences:
        return 0.0
    b = max(sequences, 1)
    return load.layers * (per_layer_s(mc, b * (tokens + 1)) - per_layer_s(mc, b))


def draft_s(spec: Speculation, mc: Machine, sequences: int) -> float:
    """The drafter's time in one speculative step: K of its forwards for `sequences` sequences, the first
    over the tokens the last verification accepted (timed as a decode step), each of the other K - 1 over
    the `topk` branches of every sequence (a chain's: one token each), plus the host's time between the
    cycle's phases that the runtime leaves exposed (Speculation.host_s: the one place both timings, serving
    and per-token, read it)."""
    if spec.draft is None or spec.tokens <= 0:
        return 0.0
    b = max(sequences, 1)
    if spec.draft_in_step and mc.overhead_s_per_sequence:
        mc = replace(mc, overhead_s_per_sequence=0.0)
    first = step(spec.draft, mc, b).seconds
    if spec.topk <= 1:
        return spec.tokens * first + spec.host_s
    return first + (spec.tokens - 1) * step(verify_load(spec.draft, spec.topk), mc, b).seconds + spec.host_s


def plain_s(spec: Speculation, load: Load, mc: Machine, sequences: int) -> float:
    """The single-token target steps a cycle runs beside its verification (Speculation.plain_steps)."""
    if spec.plain_steps <= 0:
        return 0.0
    return spec.plain_steps * step(load, mc, max(sequences, 1)).seconds


def per_token_s(load: Load, mc: Machine, sequences: int, spec: Speculation) -> float:
    """Decode alone (no prompt tokens riding along): the time per output token of each of `sequences`
    sequences, a verification step of K + 1 tokens per sequence (a tree's: its verified tokens) plus the
    drafting (and any plain steps), over the tokens the cycle yields."""
    b = max(sequences, 1)
    extra = spec.verified - 1  # query tokens a verification carries per sequence beyond the decode token
    verify = verify_load(load, extra + 1)
    seconds = (step(verify, mc, b).seconds + verify_link_s(load, mc, b, b * extra)
               + verify_overhead_s(load, mc, b, extra, spec.verify_graph_by_sequences) + draft_s(spec, mc, b)
               + plain_s(spec, load, mc, b))
    return seconds / spec.per_step


def verify_load(load: Load, per_sequence: int) -> Load:
    """The load of a step in which each sequence carries `per_sequence` query tokens, written as
    `step(load, machine, sequences)`: FLOPs and routed experts of every token, each cache read once."""
    if per_sequence <= 1:
        return load
    sh = load.shares
    if sh.experts and sh.route < 1:  # experts touched by all the step's tokens
        sh = replace(sh, route=1 - (1 - sh.route) ** per_sequence)
    return replace(load, shares=sh, flops_per_token=load.flops_per_token * per_sequence)

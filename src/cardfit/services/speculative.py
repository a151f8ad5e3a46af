"""`--speculative METHOD` for plan, speed, max-context and deploy: the drafter chosen and checked against the
model (a draft model of the catalog, an EAGLE-3 head, the model's MTP layers, n-gram lookup), its acceptance
(given, else the published figure of data/speculative.toml), the memory it adds (`draft_bytes`: its weights
and KV cache) and the per-token work the served-load model times it with (core/speculative.py)."""

from __future__ import annotations

from typing import Any

from ..catalog import speculative as table
from ..catalog.models import ModelSpec, default_models
from ..catalog.records import record
from ..core import speculative as spc
from ..core import speed as sp
from ..core.kv import kv_cache_bytes, kv_split_ranks
from ..core.weights import weights
from ..errors import InputError

# llama.cpp accepts a draft whose vocabulary differs from the target's by at most this many tokens
# (common/speculative.cpp SPEC_VOCAB_MAX_SIZE_DIFFERENCE); vLLM and SGLang need the same tokenizer
VOCAB_MAX_DIFFERENCE = 128
# EAGLE-3 heads are published in 16-bit (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B config.json "torch_dtype":
# "float16"), whatever the target's quantization
HEAD_BYTES_PER_PARAM = 2.0
FLAGS = "--num-speculative-tokens, --acceptance, --speculative-topk and --speculative-draft-tokens"
# the methods whose drafts SGLang's EAGLE worker can grow as a tree (--speculative-eagle-topk: EAGLE, EAGLE3,
# and MTP and STANDALONE, which run that worker: python/sglang/srt/speculative/eagle_worker.py). SGLang's
# server_args.py _handle_speculative_decoding keeps the given top-k for "EAGLE", "EAGLE3", "STANDALONE"
# (NEXTN, MTP, becomes EAGLE) and overwrites it for NGRAM with its own --speculative-ngram-max-bfs-breadth
# (`self.speculative_eagle_topk = self.speculative_ngram_max_bfs_breadth`, sglang 0.5.3.post3 wheel line 1281,
# 0.5.9 line 2475, https://pypi.org/project/sglang/0.5.9/): n-gram lookup's tree is shaped by other flags,
# not by --speculative-topk, and its verified tokens are cardfit's K + 1 (runtimes/sglang.py)
TREE_METHODS = ("draft", "eagle3", "mtp")
# with top-k 1 SGLang verifies the chain's K + 1 tokens whatever --speculative-num-draft-tokens says: "if
# self.speculative_eagle_topk == 1 and self.speculative_num_draft_tokens != self.speculative_num_steps + 1:
# logger.warning(...); self.speculative_num_draft_tokens = self.speculative_num_steps + 1" (server_args.py,
# sglang 0.4.6.post5 wheel line 425, 0.5.3.post3 line 1259, 0.5.9 line 2448)
CHAIN_RESET = ("SGLang resets --speculative-num-draft-tokens to --speculative-num-steps + 1 where top-k is "
               "1, with a warning (server_args.py)")
# llama-server's speculative cycle from ggml-org/llama.cpp PR #17808 on (data/releases.toml llama.cpp
# server_draft_in_batch): one target step verifies the last sampled token and its draft. Before it, a
# single-token step of that token came first (core/speculative.py Speculation.plain_steps)
DRAFT_IN_BATCH = "server_draft_in_batch"


@record
class Choice:
    """The drafter a plan runs with and its figures."""

    method: str  # draft | eagle3 | mtp | ngram
    tokens: int  # K: drafted tokens per step
    acceptance: float  # the share of drafted tokens accepted (accepted / drafted, as the engines log it)
    source: str  # "given", or where the default acceptance is published
    draft_model: ModelSpec | None = None
    mtp_layers: int = 0
    # single-token target steps the runtime's cycle runs beside its verification (plain_steps: 1 on a
    # llama-server release before PR #17808), as the timing counts them (core/speculative.py Speculation)
    plain_steps: int = 0
    # a tree of drafts (--speculative-topk, --speculative-draft-tokens: SGLang's --speculative-eagle-topk and
    # --speculative-num-draft-tokens): branches per draft forward and tokens verified per sequence; a chain
    # (top-k 1, K + 1 verified) where not given
    topk: int = 1
    draft_tokens: int = 0
    # the runtime replays its verification as the graph of its sequences (its adapter's
    # VERIFY_GRAPH_BY_SEQUENCES: SGLang), not of its tokens (core/speculative.py verify_overhead_s)
    verify_graph_by_sequences: bool = False
    # its drafter's forwards run inside one engine step, the scheduler's per-sequence time paid once a cycle
    # (its adapter's DRAFT_IN_STEP: SGLang; core/speculative.py Speculation.draft_in_step)
    draft_in_step: bool = False
    # the host's time per cycle the runtime leaves exposed between its GPU phases (µs: runtimes.toml
    # speculative_cycle_host_us; core/speculative.py Speculation.host_s)
    host_us: float = 0.0
    # the cycle runs on the runtime's overlapped speculative path (overlapped(): SGLang's spec v2), which
    # keeps its overlap scheduler (catalog/releases.py drafting) and leaves no host time exposed
    overlapped: bool = False
    # what the input's tree flags were taken as where that is not what they say (top-k 1 with verified tokens
    # other than K + 1: the chain, as SGLang runs it); "" where as given
    shape_note: str = ""

    @property
    def verified(self) -> int:
        """Tokens a verification carries per sequence (core/speculative.py Speculation.verified)."""
        return self.draft_tokens or self.tokens + 1

    @property
    def depth(self) -> int:
        """Drafts the longest accepted path holds (core/speculative.py Speculation.depth)."""
        return min(self.tokens, self.verified - 1)

    @property
    def tokens_per_cycle(self) -> float:
        """Mean tokens a cycle yields per sequence (core/speculative.py Speculation.per_step)."""
        return spc.Speculation(self.method, self.tokens, self.acceptance, None, self.plain_steps, self.topk,
                               self.draft_tokens).per_step

    @property
    def tokens_per_step(self) -> float:
        """Mean tokens per target step: a cycle's tokens over its verification and its plain steps."""
        return self.tokens_per_cycle / (1 + self.plain_steps)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"method": self.method, "tokens": self.tokens,
                               "acceptance": round(self.acceptance, 4)}
        if self.draft_model is not None:
            out["draft_model"] = self.draft_model.id
        if self.topk > 1 or self.verified != self.tokens + 1:  # a tree: its shape (a chain's JSON as before)
            out["topk"], out["draft_tokens"] = self.topk, self.verified
        out["tokens_per_step"] = round(self.tokens_per_step, 3)
        return out


def supports(runtime: Any, method: str, tree: bool = False) -> bool:
    """Whether the runtime's launch line drafts with `method` (its adapter's SPECULATIVE), and, for `tree`,
    grows a tree of drafts (its SPECULATIVE_TREE)."""
    from ..runtimes import adapter

    a = adapter(runtime)
    return method in getattr(a, "SPECULATIVE", ()) and (not tree or getattr(a, "SPECULATIVE_TREE", False))


def asks_tree(inp: Any) -> bool:
    """Whether the input asks a tree of drafts: --speculative-topk above 1 (top-k 1, whatever
    --speculative-draft-tokens says, is the chain: _tree)."""
    return (getattr(inp, "speculative_topk", None) or 1) > 1


def check(inp: Any, model: ModelSpec) -> None:
    """The rules of --speculative and its flags that hold on every runtime (the method, its draft model or
    MTP layers, the tree's shape), checked once before any runtime is weighed: a deploy search that would
    leave each runtime out over them (or search it without drafting) answers one line instead."""
    if any(getattr(inp, f, None) is not None for f in ("speculative", "num_speculative_tokens", "acceptance",
                                                        "speculative_topk", "speculative_draft_tokens")):
        choose(inp, model)


def drafted(sp: dict[str, Any], chain: str = "tokens drafted a step") -> str:
    """What a drafter drafts a step, from its JSON (Choice.to_json), as the text answers say it: "K `chain`"
    for a chain, the tree's shape (draft steps, top-k, tokens verified) for a tree."""
    if "topk" in sp:
        return (f"a tree of {sp['tokens']} draft steps at top-{sp['topk']}, {sp['draft_tokens']} tokens "
                "verified a step,")
    return f"{sp['tokens']} {chain}"


def method_of(text: str | None) -> str:
    return (text or "").strip().partition(":")[0].strip().lower()


def choose(inp: Any, model: ModelSpec, runtime: Any = None) -> Choice | None:
    """The input's --speculative, checked against the model and the runtime (None: off)."""
    text = (getattr(inp, "speculative", None) or "").strip()
    tokens, alpha = getattr(inp, "num_speculative_tokens", None), getattr(inp, "acceptance", None)
    topk, verified = getattr(inp, "speculative_topk", None), getattr(inp, "speculative_draft_tokens", None)
    if not text:
        if any(v is not None for v in (tokens, alpha, topk, verified)):
            raise InputError(f"{FLAGS} go with --speculative", field="speculative",
                             hint="add --speculative draft:MODEL, eagle3, mtp or ngram")
        return None
    method, _, arg = text.partition(":")
    method = method.strip().lower()
    if method not in table.METHODS:
        raise InputError(f"unknown --speculative '{text}'", field="speculative",
                         hint="one of draft:MODEL, eagle3, mtp, ngram")
    if runtime is not None and not supports(runtime, method):
        from ..runtimes import adapter

        can = getattr(adapter(runtime), "SPECULATIVE", ())
        raise InputError(f"{runtime.name} has no '{method}' speculative decoding"
                         + (f" (it has {', '.join(can)})" if can else ""), field="speculative",
                         hint="pick another --speculative, or --runtime vllm / sglang")
    draft = _draft(model, arg.strip()) if method == "draft" else None
    if method != "draft" and arg:
        raise InputError(f"--speculative {method} takes no ':' argument", field="speculative")
    layers = _mtp(model) if method == "mtp" else 0
    row = table.acceptance_for(method, model.id)
    k = tokens or row.tokens
    topk, verified, shape_note = _tree(method, k, topk, verified, runtime)
    depth = min(k, verified - 1) if verified else k
    if alpha is None:  # the published figure, carried to this depth (core/speculative.py acceptance_at)
        length = row.acceptance_length or spc.length_at(row.acceptance, row.tokens)
        alpha = spc.acceptance_at(length, row.tokens, depth)
        source = row.source
    else:
        source = "given"
    by_sequences = runtime is not None and bool(getattr(_adapter(runtime), "VERIFY_GRAPH_BY_SEQUENCES",
                                                        False))
    in_step = runtime is not None and bool(getattr(_adapter(runtime), "DRAFT_IN_STEP", False))
    lap = overlapped(method, topk, runtime)
    host = 0.0 if lap or runtime is None else float(getattr(runtime, "speculative_cycle_host_us", 0.0) or 0.0)
    return Choice(method, k, float(alpha), source, draft, layers, plain_steps(runtime), topk, verified,
                  by_sequences, in_step, host, lap, shape_note)


def overlapped(method: str, topk: int, runtime: Any) -> bool:
    """Whether the runtime's release runs this drafter on its overlapped speculative path: a method of its
    `speculative_overlap_methods` (runtimes.toml; empty on a release without data/releases.toml
    spec_overlap, without "ngram" before spec_overlap_ngram) drafting a chain, or a tree from the release of
    spec_overlap_tree. SGLang 0.5.11 to 0.5.12 keep spec v1 where top-k > 1 ("spec v2 currently only supports
    topk = 1", server_args.py _handle_speculative_decoding); 0.5.13 runs every EAGLE-family drafter on
    spec v2.
    The profile is read at its release (the current one where none is named), as drafting() reads it: its
    `speculative_overlap_methods` field as that release sets it (spec_overlap's `without`), which a
    registry row holds as runtimes.toml writes it."""
    if runtime is None or not getattr(runtime, "speculative_overlap_methods", ()):
        return False
    if runtime.release is None:
        from ..catalog.releases import at_release

        runtime = at_release(runtime, "")
    if topk > 1 and not runtime.has("spec_overlap_tree"):
        return False
    return method in runtime.speculative_overlap_methods


def _tree(method: str, k: int, topk: int | None, verified: int | None,
          runtime: Any) -> tuple[int, int, str]:
    """--speculative-topk and --speculative-draft-tokens checked: (top-k, verified tokens, 0 for the chain's
    K + 1; a note where the input was taken as another shape). SGLang grows a tree of `topk` branches per
    draft step and verifies its best `verified` nodes (the root, the last accepted token, among them: at most
    1 + topk + (K - 1) x topk^2 candidates, eagle_worker.py organize_draft_results); with top-k 1 it verifies
    the chain's K + 1 whatever the verified tokens given (CHAIN_RESET). The chain is settled first, so it
    runs on every runtime that drafts; the rules of a tree hold whatever the runtime, and only then does the
    runtime need to grow one."""
    t = topk or 1
    if t == 1:
        if verified is None or verified == k + 1:
            return 1, 0, ""
        if method not in TREE_METHODS:
            raise InputError(f"--speculative {method} verifies its K + 1 drafted tokens a step, not "
                             f"--speculative-draft-tokens {verified}: --speculative-topk and "
                             "--speculative-draft-tokens shape the tree of draft:MODEL, eagle3 and mtp",
                             field="speculative_draft_tokens",
                             hint=f"--num-speculative-tokens {verified - 1} (K) instead")
        return 1, 0, (f"with top-k 1 the drafts are a chain and a step verifies its K + 1 = {k + 1} tokens, "
                      f"not --speculative-draft-tokens {verified}: {CHAIN_RESET}, so it is planned as "
                      "that chain")
    if method not in TREE_METHODS:
        raise InputError(f"--speculative {method} drafts no tree: --speculative-topk and "
                         "--speculative-draft-tokens are for draft:MODEL, eagle3 and mtp (SGLang shapes "
                         "n-gram lookup's tree with its own --speculative-ngram-* flags)",
                         field="speculative_topk")
    if verified is None:
        raise InputError(f"--speculative-topk {t} needs --speculative-draft-tokens: the tree's nodes "
                         "verified per sequence", field="speculative_draft_tokens",
                         hint="SGLang's default tree is --num-speculative-tokens 5 --speculative-topk 4 "
                              "--speculative-draft-tokens 8")
    most = 1 + t + (k - 1) * t * t
    if not 2 <= verified <= most:
        raise InputError(f"a tree of {k} draft steps at top-k {t} has {most} nodes to verify (the last token "
                         f"and its drafts), not {verified}", field="speculative_draft_tokens")
    if runtime is not None and not getattr(_adapter(runtime), "SPECULATIVE_TREE", False):
        raise InputError(f"{runtime.name} drafts a chain of K tokens, not a tree: --speculative-topk above 1 "
                         "is SGLang's", field="speculative_topk",
                         hint="drop --speculative-topk and --speculative-draft-tokens, or --runtime sglang")
    return t, verified, ""


def _adapter(runtime: Any) -> Any:
    from ..runtimes import adapter

    return adapter(runtime)


def _draft(model: ModelSpec, name: str) -> ModelSpec:
    if not name:
        raise InputError("--speculative draft needs the draft model: draft:MODEL", field="speculative",
                         hint="e.g. --speculative draft:llama-3.2-1b")
    d = default_models().get(name)
    if d.params >= model.params:
        raise InputError(f"the draft {d.name} is not smaller than {model.name}", field="speculative",
                         hint="a draft model is a small model of the same family")
    if d.vocab and model.vocab and abs(d.vocab - model.vocab) > VOCAB_MAX_DIFFERENCE:
        raise InputError(f"the draft {d.name} has a vocabulary of {d.vocab:,} tokens, {model.name} "
                         f"{model.vocab:,}: a draft needs the target's tokenizer", field="speculative")
    return d


def _mtp(model: ModelSpec) -> int:
    found = table.mtp_layers(model.id, model.hf)
    if found is None:
        raise InputError(f"{model.name} has no multi-token-prediction layers that cardfit knows of",
                         field="speculative", hint="mtp is for DeepSeek-V3/R1 and Qwen3-Next; try eagle3 "
                                                   "or draft:MODEL")
    return found.layers


def _bytes_per_param(ctx: Any) -> float:
    m = ctx.model
    return weights(m, ctx.quant).total_bytes / max(m.params, 1)


def head_params(c: Choice, m: ModelSpec) -> float:
    if c.method == "eagle3":
        return spc.eagle3_params(m)
    if c.method == "mtp":
        return spc.mtp_params(m, c.mtp_layers)
    return 0.0


def kv_bytes_per_token(c: Choice, ctx: Any, kv_dtype: str) -> int:
    """The drafter's KV cache per token of a sequence: the draft model's own, or its layers' share of the
    target's (an EAGLE-3 head is one layer, MTP its layers)."""
    m = ctx.model
    if c.method == "draft" and c.draft_model is not None:
        return kv_cache_bytes(c.draft_model, 1024, 1, kv_dtype) // 1024
    layers = 1 if c.method == "eagle3" else c.mtp_layers
    return kv_cache_bytes(m, 1024, 1, kv_dtype) * layers // max(m.layers, 1) // 1024


def draft_bytes(c: Choice | None, ctx: Any, context: int, sequences: int, kv_dtype: str) -> int:
    """What the drafter adds to the plan's memory: its weights and its cache for `sequences` sequences of
    `context` tokens (0 without speculative decoding, and for n-gram lookup)."""
    if c is None or c.method == "ngram":
        return 0
    if c.method == "draft" and c.draft_model is not None:
        held = weights(c.draft_model, ctx.quant).total_bytes
    else:
        per = HEAD_BYTES_PER_PARAM if c.method == "eagle3" else _bytes_per_param(ctx)
        held = round(head_params(c, ctx.model) * per)
    return held + kv_bytes_per_token(c, ctx, kv_dtype) * context * max(sequences, 1)


def speculation(c: Choice | None, ctx: Any, target: sp.Load, filled: int,
                kv_dtype: str) -> spc.Speculation | None:
    """The drafter's per-token work beside the target's `target` load at `filled` tokens in flight."""
    if c is None:
        return None
    plain = c.plain_steps  # the runtime's, as choose() read it: the JSON's tokens_per_step counts the same

    def of(draft: sp.Load | None) -> spc.Speculation:
        return spc.Speculation(c.method, c.tokens, c.acceptance, draft, plain, c.topk, c.draft_tokens,
                               c.verify_graph_by_sequences, c.draft_in_step, c.host_us * 1e-6)

    if c.method == "ngram":
        return of(None)
    m = ctx.model
    if c.method == "draft" and c.draft_model is not None:
        d = c.draft_model
        load = sp.Load(weights(d, ctx.quant).total_bytes, sp.weight_shares(d, ctx.quant),
                       kv_cache_bytes(d, max(filled, 1), 1, kv_dtype), sp.decode_flops_per_token(d, filled),
                       d.layers, sp.hidden_size(d), kv_split=kv_split_ranks(d))
        return of(load)
    params = head_params(c, m)
    layers = 1 if c.method == "eagle3" else c.mtp_layers
    attention = (target.flops_per_token - 2 * m.active) / max(m.layers, 1)  # per layer at this fill
    flops = 2 * params + attention * layers
    per = HEAD_BYTES_PER_PARAM if c.method == "eagle3" else _bytes_per_param(ctx)
    return of(spc.head_load(target, params, per, layers, flops, c.method == "mtp"))


def plain_steps(runtime: Any) -> int:
    """Single-token target steps a speculative cycle runs beside its verification: 1 on a llama-server
    release before PR #17808 (DRAFT_IN_BATCH), 0 elsewhere."""
    return 0 if runtime is None or runtime.has(DRAFT_IN_BATCH) else 1


def note(c: Choice | None, runtime: Any = None) -> list[str]:
    """One line on the drafter for the text answers (none without --speculative), and one where the
    runtime's release runs a single-token step beside each verification (plain_steps): a cycle's tokens and
    its tokens per target step (the JSON's tokens_per_step)."""
    if c is None:
        return []
    name = runtime.name if runtime is not None else "llama-server"
    extra = ([f"{name} before build b7370 (llama.cpp PR #17808) decodes each sampled token in a step of its "
              f"own before drafting from the next one: {1 + c.plain_steps} target steps a cycle yield "
              f"{c.tokens_per_cycle:.2f} tokens, {c.tokens_per_step:.2f} a target step"]
             if c.plain_steps else []) + ([c.shape_note] if c.shape_note else [])
    what = {"draft": f"the draft model {c.draft_model.name if c.draft_model else ''}",
            "eagle3": "an EAGLE-3 head", "mtp": f"the model's {c.mtp_layers} MTP layer(s)",
            "ngram": "n-gram prompt lookup"}[c.method]
    given = "as given" if c.source == "given" else "published: data/speculative.toml"
    if c.topk > 1 or c.verified != c.tokens + 1:
        return [f"speculative decoding with {what}: a tree of {c.tokens} draft steps of top-{c.topk} "
                f"branches, {c.verified} tokens verified per sequence; at acceptance {c.acceptance:.2f} "
                f"({given}) a step yields {spc.length_at(c.acceptance, c.depth):.2f} tokens, counted as a "
                f"chain {c.depth} deep (no published figure gives what the other branches add); each draft "
                f"step runs {c.topk} tokens per sequence, so the gain falls as the batch grows (the ceiling "
                "is without it)"] + extra
    return [f"speculative decoding with {what}: {c.tokens} drafted tokens a step at acceptance "
            f"{c.acceptance:.2f} ({given}) yield {spc.length_at(c.acceptance, c.tokens):.2f} tokens a step; "
            "each step verifies "
            f"{c.tokens + 1} tokens per sequence and runs the drafter "
            f"{c.tokens if c.method != 'ngram' else 0} "
            "times, so the gain falls as the batch grows (the ceiling is without it)"] + extra

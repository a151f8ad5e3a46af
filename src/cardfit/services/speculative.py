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
FLAGS = "--num-speculative-tokens and --acceptance"
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

    @property
    def tokens_per_cycle(self) -> float:
        """Mean tokens a cycle yields per sequence (core/speculative.py Speculation.per_step)."""
        return spc.Speculation(self.method, self.tokens, self.acceptance, None, self.plain_steps).per_step

    @property
    def tokens_per_step(self) -> float:
        """Mean tokens per target step: a cycle's tokens over its verification and its plain steps."""
        return self.tokens_per_cycle / (1 + self.plain_steps)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"method": self.method, "tokens": self.tokens,
                               "acceptance": round(self.acceptance, 4)}
        if self.draft_model is not None:
            out["draft_model"] = self.draft_model.id
        out["tokens_per_step"] = round(self.tokens_per_step, 3)
        return out


def supports(runtime: Any, method: str) -> bool:
    """Whether the runtime's launch line drafts with `method` (its adapter's SPECULATIVE)."""
    from ..runtimes import adapter

    return method in getattr(adapter(runtime), "SPECULATIVE", ())


def method_of(text: str | None) -> str:
    return (text or "").strip().partition(":")[0].strip().lower()


def choose(inp: Any, model: ModelSpec, runtime: Any = None) -> Choice | None:
    """The input's --speculative, checked against the model and the runtime (None: off)."""
    text = (getattr(inp, "speculative", None) or "").strip()
    tokens, alpha = getattr(inp, "num_speculative_tokens", None), getattr(inp, "acceptance", None)
    if not text:
        if tokens is not None or alpha is not None:
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
    if alpha is None:  # the published figure, carried to this K (core/speculative.py acceptance_at)
        length = row.acceptance_length or spc.length_at(row.acceptance, row.tokens)
        alpha = spc.acceptance_at(length, row.tokens, k)
        source = row.source
    else:
        source = "given"
    return Choice(method, k, float(alpha), source, draft, layers, plain_steps(runtime))


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
    if c.method == "ngram":
        return spc.Speculation(c.method, c.tokens, c.acceptance, None, plain)
    m = ctx.model
    if c.method == "draft" and c.draft_model is not None:
        d = c.draft_model
        load = sp.Load(weights(d, ctx.quant).total_bytes, sp.weight_shares(d, ctx.quant),
                       kv_cache_bytes(d, max(filled, 1), 1, kv_dtype), sp.decode_flops_per_token(d, filled),
                       d.layers, sp.hidden_size(d), kv_split=kv_split_ranks(d))
        return spc.Speculation(c.method, c.tokens, c.acceptance, load, plain)
    params = head_params(c, m)
    layers = 1 if c.method == "eagle3" else c.mtp_layers
    attention = (target.flops_per_token - 2 * m.active) / max(m.layers, 1)  # per layer at this fill
    flops = 2 * params + attention * layers
    per = HEAD_BYTES_PER_PARAM if c.method == "eagle3" else _bytes_per_param(ctx)
    return spc.Speculation(c.method, c.tokens, c.acceptance,
                           spc.head_load(target, params, per, layers, flops, c.method == "mtp"), plain)


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
             if c.plain_steps else [])
    what = {"draft": f"the draft model {c.draft_model.name if c.draft_model else ''}",
            "eagle3": "an EAGLE-3 head", "mtp": f"the model's {c.mtp_layers} MTP layer(s)",
            "ngram": "n-gram prompt lookup"}[c.method]
    given = "as given" if c.source == "given" else "published: data/speculative.toml"
    return [f"speculative decoding with {what}: {c.tokens} drafted tokens a step at acceptance "
            f"{c.acceptance:.2f} ({given}) yield {spc.length_at(c.acceptance, c.tokens):.2f} tokens a step; "
            "each step verifies "
            f"{c.tokens + 1} tokens per sequence and runs the drafter "
            f"{c.tokens if c.method != 'ngram' else 0} "
            "times, so the gain falls as the batch grows (the ceiling is without it)"] + extra

"""The plan: resolve the inputs, size the memory per card, rank the cards, and attach speed and cost.
Everything here is wiring; the arithmetic lives in core/."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import field, replace
from functools import lru_cache, partial
from typing import Any

from ..catalog.apis import ApiPrice, apis, breakeven_guide_tiers
from ..catalog.gpus import Feature, Gpu, default_gpus, load_gpus
from ..catalog.models import ModelSpec
from ..catalog.quants import GgufMix, Quant, QuantType, default_quants, gguf_holds
from ..catalog.records import record
from ..catalog.registry import Registry
from ..catalog.rental import RentalRules, default_rental
from ..catalog.runtimes import RuntimeProfile, default_runtime, default_runtimes, on_card, runs_on
from ..core import cost
from ..core import fit as fitting
from ..core import speed as speedmod
from ..core.constants import snapshot
from ..core.fit import Option
from ..core.kv import kv_bytes_per_token, kv_dtype
from ..core.memory import Memory, MemorySettings, estimate
from ..core.placement import Shape, shape_of
from ..core.speed import Speed
from ..core.uncertainty import cost_range, need_margin_bytes, value_range
from ..errors import InputError
from ..runtimes import Runtime, adapter
from ..runtimes.llamacpp_like import LlamaCppLike
from ..runtimes.vllm_like import MAX_SUGGESTED_UTILIZATION, VllmLike
from ..units import rounded
from .inputs import PlanInput
from .launch_line import launched_split, sized_fraction
from .resolve import Resolved, resolve
from .table import ModelBasics, Result

GIB = 2**30


@record
class Context:
    """Everything resolved from a PlanInput: the same for every card except Ollama's default context."""

    inp: PlanInput
    resolved: Resolved
    quant: Quant
    runtime: RuntimeProfile
    sequences: int
    kv_dtype: str
    prefill_chunk: int
    flash_attn: bool
    utilization: float | None
    gpus: Registry[Gpu]
    rules: RentalRules
    notes: list[str] = field(default_factory=list)
    # --speculative: the drafter and its acceptance (services/speculative.py Choice; None: off)
    speculation: Any = None
    # what the plan works out once for many cards (the decode load of each memory estimate)
    kept: dict[tuple, Any] = field(default_factory=dict, compare=False, repr=False)
    # the server's --max-num-seqs where `inp.max_num_seqs` holds one attention group's share of it (a pinned
    # attention-DP + EP deployment: services/deploy.py timed); 0: `inp.max_num_seqs` is the server's
    server_max_num_seqs: int = 0

    @property
    def model(self) -> ModelSpec:
        return self.resolved.model

    @property
    def engine(self) -> Runtime:
        """The runtime's family adapter (runtimes/): how it allocates memory and its speed constants, for the
        server this question launches (Runtime.serving: its --speculative method, the attention-DP ranks and
        the --max-num-seqs it pins, which SGLang's reserve reads). The pinned cap is the server's whole
        --max-running-requests, with or without attention DP: SGLang caps the decode graphs with it before
        any division (arg_groups/memory_hook.py handle_gpu_memory_settings lines 181-188 of the PyPI wheel
        sglang 0.5.23, 'cfg.max_running_requests'), and only each DP worker's scheduler takes its share
        (mem_cache/kv_cache_configurator.py resolve_max_num_reqs lines 3126-3130, 'max_num_reqs //
        self.attn_dp_size'; runtimes/sglang.py DP_DIVIDED), https://pypi.org/project/sglang/0.5.23/."""
        return self.engine_at(int(getattr(self.inp, "attention_dp", None) or 1))

    def engine_at(self, attention_dp: int, role: str = "", server_tp: int = 0) -> Runtime:
        """`engine` for a layout of `attention_dp` attention data-parallel ranks (services/deploy.py's
        searched layouts), as a disaggregated deployment's `role` worker where one is named; `server_tp`:
        the server's tensor-parallel size where its budget is asked for fewer ranks (an attention-DP + EP
        layout: all its cards, each group's cache copied over cards / dp)."""
        engine = adapter(self.runtime)
        method = str(getattr(self.speculation, "method", "") or "")
        running = self.server_max_num_seqs or int(getattr(self.inp, "max_num_seqs", None) or 0)
        # the verified tokens the launch line gives (--speculative-num-draft-tokens: Choice.verified)
        verified = int(getattr(self.speculation, "verified", 0) or 0) if method else 0
        if method or attention_dp > 1 or running or role or server_tp:
            return engine.serving(role=role, attention_dp=attention_dp, speculative=method,
                                  max_running=running, draft_tokens=verified, server_tp=server_tp)
        return engine


def _quant(r: Resolved, name: str | None) -> Quant:
    quants = default_quants()
    return quants.get(name or r.quant_hint or r.model.dtype)


def _runtime(r: Resolved, q: Quant, name: str | None) -> RuntimeProfile:
    runtimes = default_runtimes()
    if name:
        return runtimes.get(name)
    if r.tag is not None or r.ollama:
        return default_runtime("ollama")
    if r.gguf or isinstance(q, GgufMix) or q.kind == "gguf":
        return default_runtime("gguf")
    return default_runtime("checkpoint")


def _kv(rt: RuntimeProfile, m: ModelSpec, name: str | None) -> str:
    d = kv_dtype(name or rt.default_kv_dtype)
    native = "bf16" if m.dtype == "bf16" else "f16"
    allowed = {native if o == "auto" else kv_dtype(o) for o in rt.kv_dtype_options}
    if "auto" in rt.kv_dtype_options:
        allowed |= {"f16", "bf16"}  # 'auto' is the model's own 16-bit type
    if d != "auto" and allowed and d not in allowed:
        raise InputError(f"{rt.name} has no '{name}' KV cache; it takes {', '.join(rt.kv_dtype_options)}",
                         field="kv_dtype", hint="pick one of those or another --runtime")
    return native if d == "auto" else d


def build_context(inp: PlanInput) -> Context:
    r = resolve(inp)
    q = _quant(r, inp.quant)
    rt = _runtime(r, q, inp.runtime)
    notes: list[str] = []
    if (
        inp.quant is None
        and isinstance(q, QuantType)
        and q.id == "fp32"
        and r.origin != "shape"
        and not r.gguf
    ):
        # float32 in config.json is a training artefact: serving runtimes load 16-bit ('auto' dtype)
        q = default_quants().get("bf16")
        notes.append("config.json says float32; runtimes load it in 16-bit (vLLM's 'auto' dtype), so this "
                     "plan uses BF16: pass --quant fp32 to plan float32")
    if rt.weights_format == "gguf" and not gguf_holds(q) and not inp.runtime:
        checkpoint = default_runtime("checkpoint")
        notes.append(f"{q.name} is a checkpoint format that Ollama and llama.cpp do not load (GGUF has no "
                     f"such type): planned for {checkpoint.name}")
        rt = checkpoint
    gpus = load_gpus(tuple(inp.catalog)) if inp.catalog else default_gpus()
    card = gpus.get(inp.gpu) if inp.gpu else None
    if card is not None and card.unified_memory:
        rt = _runtime_on_metal(rt, inp.runtime, card, notes)
    if inp.quant is None and (native := r.native_file(rt)):
        own, q = q, default_quants().get(native)
        notes.append(f"{rt.name} loads a GGUF file: planned for the {q.name} file its users download for "
                     f"this {own.name} checkpoint; --quant {own.id} plans the checkpoint's own tensors")
    if rt.weights_format == "gguf" and not gguf_holds(q):
        metal = card is not None and card.unified_memory
        raise InputError(f"{rt.name} loads GGUF files, which have no {q.name} weights"
                         + (" (and the checkpoint runtimes do not run on Apple Metal)" if metal else ""),
                         field="quant", hint="pick a GGUF type (Q4_K_M, Q8_0, …) or bf16"
                         + ("" if metal else ", or a runtime that loads checkpoints (--runtime vllm)"))
    check_tp(inp, rt, r.model)
    # the whole fixed overhead per card, for every family (non-torch memory too)
    if inp.overhead_gb is not None:
        rt = replace(rt, context_bytes=round(inp.overhead_gb * 1e9), cuda_graph_bytes=0, non_torch_bytes=0)
    if inp.batch and inp.parallel and inp.batch != inp.parallel:
        raise InputError("--batch and --parallel both set the number of concurrent sequences; give one",
                         field="batch")
    seqs = _ollama_slots(rt, r.model, inp.batch or inp.parallel or rt.default_parallel, notes)
    kvd = _kv(rt, r.model, inp.kv_dtype)
    if kvd in ("q8_0", "q4_0") and adapter(rt).quantized_kv_needs_flash_attn and inp.flash_attn is False:
        raise InputError(f"a {kvd} KV cache needs flash attention in {rt.name}", field="kv_dtype",
                         hint="drop --no-flash-attn or use --kv-dtype f16")
    flash = rt.flash_attn or r.model.model_type in rt.flash_attn_models if inp.flash_attn is None \
        else inp.flash_attn
    if kvd in ("q8_0", "q4_0"):
        flash = True
    spec = _speculation(inp, r.model, rt)
    if spec is not None:  # what the engine changes when it drafts (SGLang: 48 sequences; spec v1: no overlap)
        from ..catalog.releases import drafting

        rt = drafting(rt, spec.overlapped)
    return Context(inp, r, q, rt, seqs, kvd, inp.prefill_chunk or rt.prefill_chunk, flash,
                   inp.gpu_memory_utilization, gpus, default_rental(), notes, spec)


def ollama_one_slot(rt: RuntimeProfile, model: Any) -> str | None:
    """What Ollama's scheduler runs with one slot whatever OLLAMA_NUM_PARALLEL says, where this model is one
    of them ("embedders", "qwen3_5 models": runtimes/ollama.py one_slot, the rule `cardfit stack` applies
    too); None where the runtime is another or the model keeps its slots. Plan, speed and deploy count one
    sequence for it."""
    if not rt.num_parallel_default:  # a runtime without Ollama's OLLAMA_NUM_PARALLEL slots (runtimes.toml)
        return None
    from ..runtimes.ollama import model_role, one_slot, one_slot_words

    why = one_slot(rt, model, model_role(model))
    return None if why is None else one_slot_words(why, model)


def one_slot_note(what: str, tail: str) -> str:
    return f"Ollama runs {what} with one slot whatever OLLAMA_NUM_PARALLEL says (server/sched.go): {tail}"


def _ollama_slots(rt: RuntimeProfile, model: Any, seqs: int, notes: list[str]) -> int:
    """The sequences Ollama runs at once: 1 for a model its scheduler loads with one slot (ollama_one_slot),
    with a note where more were asked; `seqs` otherwise."""
    what = ollama_one_slot(rt, model) if seqs > 1 else None
    if what is None:
        return seqs
    notes.append(one_slot_note(what, f"planned for 1 sequence at a time, not {seqs}; more requests queue"))
    return 1


def _speculation(inp: Any, model: Any, rt: RuntimeProfile) -> Any:
    """The input's --speculative (services/speculative.py choose), imported only where one of its flags is
    given: a plan without them starts without the drafter's modules."""
    flags = ("speculative", "num_speculative_tokens", "acceptance", "speculative_topk",
             "speculative_draft_tokens")
    if all(getattr(inp, f, None) is None for f in flags):
        return None
    from .speculative import choose

    return choose(inp, model, rt)


def _runtime_on_metal(rt: RuntimeProfile, asked: str | None, card: Gpu, notes: list[str]) -> RuntimeProfile:
    """An Apple card: the runtime as it runs on unified memory; vLLM-like defaults become llama.cpp."""
    if not asked and not runs_on(rt, card.stack):
        notes.append(f"{rt.name} does not run on Apple Metal: planned for llama.cpp (--runtime ollama for "
                     "Ollama)")
        rt = default_runtime("gguf")
    return on_card(rt, True)


def _runtime_for(ctx: Context, gpu: Gpu | None) -> RuntimeProfile:
    if gpu is None or ctx.inp.overhead_gb is not None or not gpu.unified_memory:
        return ctx.runtime  # (on_card returns the profile itself off unified memory)
    return _on_card(ctx.runtime, gpu.unified_memory)


# on_card is pure in a frozen profile: the every-card plan asks it twice for each of the catalog's Apple
# cards, and one profile object per (runtime, card kind) lets runtimes.adapter find its adapter by identity
@lru_cache(maxsize=256)
def _on_card(rt: RuntimeProfile, unified_memory: bool) -> RuntimeProfile:
    return on_card(rt, unified_memory)


def default_context(ctx: Context, gpu: Gpu | None, count: int | None = None) -> tuple[int, str]:
    """The context the runtime would use when the user gives none, and why (Ollama: from the total VRAM of
    the `count` cards)."""
    if ctx.inp.context:
        return ctx.inp.context, "given"
    if ctx.inp.input_tokens or ctx.inp.output_tokens:
        w = request(ctx, 0)
        return w.input_tokens + w.output_tokens, "one request (--input-tokens + --output-tokens)"
    count = count or ctx.inp.gpus or ctx.inp.tp or 1
    return ctx.engine.default_context(ctx.model, gpu.usable_bytes * count if gpu else 0)


def cards_per_set(ctx: Context, gpu: Gpu) -> int:
    """--gpus, else the tensor-parallel degree, else the card's smallest rentable set (B200: a pair)."""
    return ctx.inp.gpus or ctx.inp.tp or (1 if 1 > gpu.min_count else gpu.min_count)  # max(min_count, 1)


def check_tp(inp: PlanInput, rt: RuntimeProfile, m: ModelSpec) -> None:
    tp = inp.tp
    if not tp or tp == 1:
        return
    if not rt.tensor_parallel:
        tp_runtimes = [r.id for r in default_runtimes() if r.tensor_parallel]
        raise InputError(f"{rt.name} splits a model across cards by layers; --tp is for "
                         f"{', '.join(tp_runtimes)}", field="tp", hint="use --gpus N for more cards")
    if inp.gpus and tp > inp.gpus:
        raise InputError(f"--tp {tp} is more than --gpus {inp.gpus}", field="tp")
    if not speedmod.tp_divides(m, tp):
        raise InputError(f"--tp {tp}: {m.name}'s {m.heads or m.kv_heads} attention heads and {m.kv_heads} "
                         "KV heads do not divide by it (vLLM refuses)", field="tp", hint="try a power of two")


def check_context(ctx: Context, context: int) -> None:
    m = ctx.model
    if m.max_context and context > m.max_context and not ctx.inp.allow_long_context:
        raise InputError(f"context {context:,} is beyond {m.name}'s trained maximum of {m.max_context:,} "
                         "tokens", field="context", hint="pass --allow-long-context to plan it anyway")


def engine_defaults(ctx: Context, gpu: Gpu | None, row: CardRow | None = None) -> tuple[int, int]:
    """(batched tokens, max sequences) of the engine's profile run: --prefill-chunk when given, else the
    engine's own default on this card (vLLM V1: 8192 tokens and 1024 sequences on a >= 70 GiB card that
    is not an A100, 2048 and 256 on the others; runtimes/vllm_like.py), and never fewer sequences than
    the plan runs at once (the launch line's --max-num-seqs). Without a card, the profile's defaults.
    `row`: the card's row of the every-card plan, which keeps the engine's own defaults on the card
    (_engine_on)."""
    asked = getattr(ctx.inp, "max_num_seqs", None)
    if gpu is None:
        return ctx.prefill_chunk, max(asked or ctx.runtime.max_num_seqs, ctx.sequences)
    on = row.engine if row is not None else None
    if on is None:
        on = _engine_on(ctx, gpu)
        if row is not None:
            row.engine = on
    engine, own_chunk, own_seqs = on
    if ctx.inp.prefill_chunk:
        chunk = ctx.inp.prefill_chunk
    elif own_chunk is None:  # vLLM-like: V0's budget is its max_model_len (the plan's context)
        chunk = engine.serve_batched_tokens(gpu, ctx.inp.context or ctx.model.max_context or 0)
    else:
        chunk = own_chunk
    seqs = asked or own_seqs  # at least ctx.sequences (max() as a conditional)
    return chunk, ctx.sequences if ctx.sequences > seqs else seqs


def _engine_on(ctx: Context, gpu: Gpu) -> tuple[Runtime, int | None, int]:
    """The runtime's adapter on the card (Apple's unified memory changes it) and its own defaults there:
    batched tokens (None for a vLLM-like engine, whose V0 budget reads the plan's context) and sequences."""
    engine = adapter(_runtime_for(ctx, gpu))
    chunk = None if isinstance(engine, VllmLike) else engine.serve_batched_tokens(gpu)
    return engine, chunk, engine.serve_max_num_seqs(gpu)


def memory_for(ctx: Context, context: int, gpu: Gpu | None = None) -> Memory:
    """gpu: the card the plan is for (Apple's unified memory changes the overhead; vLLM's batch defaults
    depend on the card)."""
    # a rank's workspace is per rank where --tp says how many ranks share each layer (else sized whole)
    tp = ctx.inp.tp if ctx.inp.tp and ctx.runtime.tensor_parallel else 1
    chunk, seqs = engine_defaults(ctx, gpu)
    s = MemorySettings(context=context, sequences=ctx.sequences, kv_dtype=ctx.kv_dtype,
                       prefill_chunk=chunk, flash_attn=ctx.flash_attn, max_num_seqs=seqs, tp=tp)
    mem = estimate(ctx.model, ctx.quant, adapter(_runtime_for(ctx, gpu)), s, gpu)
    if ctx.speculation is None:
        return mem
    from .speculative import draft_bytes

    return replace(mem, draft_bytes=draft_bytes(ctx.speculation, ctx, context, ctx.sequences, mem.kv_dtype))


def requires(q: Quant) -> Feature | None:
    return q.requires if isinstance(q, QuantType) else None


def placed(ctx: Context, count: int) -> Shape:
    """How `count` cards run the model (core/placement.py, the split deploy searches): tensor parallel
    inside a node (--tp when given), pipeline stages across nodes, or layers split over the cards."""
    return shape_of(ctx.runtime, count, ctx.model, ctx.rules.node_size, ctx.inp.tp)


def option_for(ctx: Context, mem: Memory, gpu: Gpu, count: int,
               part: fitting.CardSet | None = None) -> fitting.Option:
    """The fit check of `count` cards of `gpu`; `part`: their set's part (card_set) where the caller has it
    (the every-card plan's rows, _card_rows)."""
    return fit_check(ctx, mem)(part or card_set(ctx, gpu, count))


def fit_check(ctx: Context, mem: Memory) -> Callable[[fitting.CardSet], fitting.Option]:
    """option_for of a memory estimate as a function of the set's part, with what it reads of the plan (the
    runtime's adapter, the rental rules, the model, --ram-gb, the margin and split of _fit_parts) read once:
    the every-card plan checks ~120 sets against a few estimates."""
    ram = int(ctx.inp.ram_gb * 1e9) if ctx.inp.ram_gb else 0
    margin, split = _fit_parts(ctx, mem)
    return partial(fitting.check_set, mem, rt=ctx.engine, rules=ctx.rules, ram_bytes=ram, margin_bytes=margin,
                   model=ctx.model, cards=split)


LAST_FIT = "last fit parts"  # Context.kept: the memory estimate _fit_parts was asked last, and its parts


def _fit_parts(ctx: Context, mem: Memory) -> tuple[Callable[[int, float], int],
                                                    Callable[[int], list[int] | None] | None]:
    """The margin of each set (_set_margin) and the split (split_cards) of a memory estimate, made once for
    the cards that share it (the ranking asks one card after another: the estimate asked last is found by
    identity, with what the two read of the plan, as a context copied with another runtime or quantization
    shares `kept`), the margin kept for each (cards, KV copies) asked."""
    rt, model, quant, flash, chunk = ctx.runtime, ctx.model, ctx.quant, ctx.flash_attn, ctx.inp.prefill_chunk
    last = ctx.kept.get(LAST_FIT)
    if last is not None and last[0] is mem and last[3] is rt and last[4] is model and last[5] is quant \
            and last[6] == flash and last[7] == chunk:
        return last[1], last[2]
    own = _set_margin(ctx, mem)
    margins: dict[tuple[int, float], int] = {}

    def margin(count: int, copies: float) -> int:
        key = (count, copies)
        found = margins.get(key)
        if found is None:
            found = margins[key] = own(count, copies)
        return found

    split = split_cards(ctx, mem)
    ctx.kept[LAST_FIT] = (mem, margin, split, rt, model, quant, flash, chunk)
    return margin, split


def card_set(ctx: Context, gpu: Gpu, count: int) -> fitting.CardSet:
    """The set's part of its fit check (core/fit.py card_set: budget, price, split, whether the card runs the
    plan at all), kept like _machine: what it reads of the plan (its runtime, the quantization's required
    feature, --gpu-memory-utilization, the model, --tp and the rental rules), the card and the count are the
    key, so the page's every-card plans, asked again at another context, work out each card's once."""
    need = requires(ctx.quant)
    key = (ctx.runtime, need, gpu, count, ctx.utilization, ctx.model, ctx.inp.tp, ctx.rules)
    hit = _CARD_SETS.get(key)
    if hit is None:
        s = placed(ctx, count)
        hit = fitting.card_set(gpu, count, ctx.engine, ctx.rules, requires=need, utilization=ctx.utilization,
                               model=ctx.model, tp=s.tp, pp=s.pp)
        if len(_CARD_SETS) >= MACHINES_KEPT:
            _CARD_SETS.clear()  # one atomic step, as _MACHINES
        _CARD_SETS[key] = hit
    return hit


class CardRow:
    """A card of the every-card plan with its parts that no context changes: the card, its cards per set
    (cards_per_set), the set's part of the fit check (card_set; None where not kept), its card part of
    the decode estimate (_decode_card), the parts of the larger sets tried where the card alone cannot hold
    the model (_row_sets) and the engine's own defaults on it (_engine_on), each found when first asked.
    _card_rows keeps them for each plan's settings, so a plan asked again at another context finds each
    card's parts in its row, not by hashing its keys again."""

    __slots__ = ("gpu", "count", "part", "decode", "sets", "engine")

    def __init__(self, gpu: Gpu, count: int, part: fitting.CardSet | None) -> None:
        self.gpu, self.count, self.part = gpu, count, part
        # (set once, to the same object by every thread that sets it: _decode_card's own memo)
        self.decode: speedmod.DecodeCard | None = None
        self.sets: tuple[fitting.CardSet, ...] = ()  # the larger sets' parts tried so far (_row_sets)
        self.engine: tuple[Runtime, int | None, int] | None = None  # _engine_on, found when first asked


def _card_rows(ctx: Context) -> tuple[CardRow, ...]:
    """Every card the plan ranks (the catalog's, or its priced ones with --priced), each with its parts that
    no context changes (CardRow), kept for what they read of the plan: the card catalog (the registry
    itself), --priced, the runtime, quantization and model, --gpu-memory-utilization, --tp, --gpus, the
    rental rules, the host RAM's bandwidth, the runtime's fitted constants in place (core/constants.py, as
    _machine) and whether --overhead-gb replaced the runtime's overhead (_runtime_for). At most ROWS_KEPT
    plans' rows."""
    rt = ctx.runtime
    ram = getattr(ctx.inp, "ram_bandwidth", speedmod.DEFAULT_RAM_GBPS)
    key = (ctx.gpus, bool(ctx.inp.priced), rt, ctx.quant, ctx.model, ctx.utilization, ctx.inp.tp,
           ctx.inp.gpus, ctx.rules, ram, snapshot(rt.id), ctx.inp.overhead_gb is not None)
    hit = _CARD_ROWS.get(key)
    if hit is None:
        gpus = [g for g in ctx.gpus if not ctx.inp.priced or g.monthly_usd is not None]
        hit = tuple(CardRow(g, n, card_set(ctx, g, n)) for g in gpus for n in (cards_per_set(ctx, g),))
        if len(_CARD_ROWS) >= ROWS_KEPT:
            _CARD_ROWS.clear()  # one atomic step, as _MACHINES
        _CARD_ROWS[key] = hit
    return hit


# plans' rows kept: ~120 cards each, ~20 KB a plan's settings, and the larger sets a card tried where it
# cannot hold the model alone (at most the shapes of up to 64 nodes: a model no set holds tries them all on
# the ~20 multi-node cards, ~1,300 set parts of ~250 bytes)
ROWS_KEPT = 32
_CARD_ROWS: dict[tuple, tuple[CardRow, ...]] = {}


def split_cards(ctx: Context, mem: Memory) -> Callable[[int], list[int] | None] | None:
    """Each card's need when a llama.cpp-like runtime splits the model's layers over equal cards (its
    default split: equal free memory), from the split's one owner (runtimes/llamacpp_like.py split_cards,
    which `cardfit stack` sizes its cards with); a speculative drafter spread over the cards as need_on
    counts it. None for runtimes that split evenly (tensor parallel)."""
    engine = ctx.engine
    if not isinstance(engine, LlamaCppLike):
        return None
    # what it reads of the plan, not the plan itself: the plan keeps this function (_fit_parts, in
    # Context.kept), and one that held the plan would make a reference cycle, the plan's context then freed
    # only by the garbage collector's next pass instead of when its answer is written (_set_margin)
    model, quant, flash, chunk = ctx.model, ctx.quant, ctx.flash_attn, ctx.inp.prefill_chunk or 0

    def on(count: int) -> list[int]:
        cards = engine.split_cards(model, quant, mem, [1.0] * count, flash_attn=flash, prefill_chunk=chunk)
        draft = fitting.drafter_bytes(mem)
        return [b + draft // count + (draft % count if i == 0 else 0) for i, b in enumerate(cards)]
    return on


def _margin(ctx: Context, mem: Memory, count: int = 1, kv_copies: float = 1.0) -> int:
    """Error bar of the need (data/accuracy.toml) on a set of `count` cards: a fit with less free memory than
    this is "tight" (the likely range of the total crosses the budget)."""
    return _runtime_margin(ctx.runtime.id, mem, count, kv_copies)


def _runtime_margin(runtime: str, mem: Memory, count: int, kv_copies: float) -> int:
    return need_margin_bytes({"weights_bytes": mem.weights_bytes, "kv_cache_bytes": mem.kv_cache_bytes,
                              "overhead_bytes": mem.overhead_bytes, "activation_bytes": mem.activation_bytes},
                             runtime, count, kv_copies)


def _set_margin(ctx: Context, mem: Memory) -> Callable[[int, float], int]:
    """The margin of each set core/fit.py sizes (cards, KV copies). It holds the runtime's id, not the plan:
    the plan keeps it (_fit_parts, in Context.kept), and holding the plan would make a reference cycle
    (split_cards)."""
    runtime = ctx.runtime.id
    return lambda count, copies: _runtime_margin(runtime, mem, count, copies)


@record
class CardPlan:
    """One card (or set) of the ranking: its verdict, memory and context. Its speed is worked out when first
    read and kept: the every-card plan shows each card's decode speed (`decode`), but the served throughput
    (`speed`: a closed-loop model of the card, services/served.py) only where the cost section prices it,
    on the fitting priced cards."""

    option: fitting.Option
    memory: Memory
    context_note: str
    ctx: Context = field(compare=False, repr=False)
    _kept: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    # the card's row of the every-card plan (_card_rows: its parts that no context changes) where the option
    # is that row's set; None else
    row: CardRow | None = field(default=None, compare=False, repr=False)

    @property
    def decode(self) -> speedmod.Speed | None:
        """Decode (ceiling and realistic), prefill, and the decode step's aggregate at the plan's batch: the
        card's speed without the served throughput (its decode figures are `speed`'s)."""
        if "decode" not in self._kept:
            self._kept["decode"] = _unserved_speed(self.ctx, self.memory, self.option)
        return self._kept["decode"]

    @property
    def decode_rates(self) -> tuple[float | None, float | None]:
        """`decode`'s (ceiling, decode) tokens/s, the figures each card of the ranking lists: read from
        `decode` where it was worked out, else by the same steps without its prefill and aggregate
        (core/speed.py decode_rates_on), which only the first card and the priced ones show."""
        s = self._kept.get("decode", False)
        if s is False and self.option.gpu.bandwidth_gbps is not None and self.ctx.model.generates \
                and self.ctx.speculation is None:
            # kept: the ranking's row and the cost section both read them
            rates = self._kept.get("rates")
            if rates is None:
                rates = self._kept["rates"] = _decode_rates(
                    self.ctx, *_decode_inputs(self.ctx, self.memory, self.option, self.row))
            return rates  # type: ignore[no-any-return]
        s = self.decode
        return (s.decode_ceiling_tokens_per_s, s.decode_tokens_per_s) if s else (None, None)

    @property
    def speed(self) -> speedmod.Speed | None:
        """`decode` with the aggregate the served throughput at the plan's batch (_speed)."""
        if "speed" not in self._kept:
            self._kept["speed"] = _served(self.ctx, self.memory, self.option, self.decode)
        return self._kept["speed"]

    @property
    def tokens_per_s(self) -> float | None:
        """What the set serves at the plan's concurrency, the figure the cost section prices: _tokens_per_s
        of `speed`. Where `decode` was not worked out (every priced card but the first), by the same steps
        without the prefill figure `decode` adds: its aggregate is there exactly where its realistic decode
        is (a calibrated runtime on a card of known bandwidth: core/speed.py estimate_on), and `speed` puts
        the served throughput in its place."""
        if "speed" in self._kept or "decode" in self._kept or self.option.gpu.bandwidth_gbps is None \
                or not self.ctx.model.generates or self.ctx.speculation is not None:
            return _tokens_per_s(self.speed)
        ceiling, realistic = self.decode_rates
        if realistic is None:  # no aggregate: the ceiling (_tokens_per_s)
            return ceiling
        return served_tokens_per_s(self.ctx, self.memory, self.option, self.row) or realistic or ceiling


@record
class Plan:
    ctx: Context
    cards: list[CardPlan]

    @property
    def first(self) -> CardPlan:
        return self.cards[0]

    def view(self) -> PlanView:
        return plan_view(self)

    def to_json(self) -> dict[str, Any]:
        return plan_view(self).to_json()

    def json_text(self) -> str:
        """The web API's JSON text (services/table.py json_text) of `to_json`."""
        return plan_view(self).json_text()


def _speed(ctx: Context, mem: Memory, opt: fitting.Option) -> speedmod.Speed | None:
    return _served(ctx, mem, opt, _unserved_speed(ctx, mem, opt))


def _unserved_speed(ctx: Context, mem: Memory, opt: fitting.Option) -> speedmod.Speed | None:
    if opt.gpu.bandwidth_gbps is None:
        return None
    s = _decode_speed(ctx, mem, opt)
    if not ctx.model.generates:  # an embedding or reranking model reads its input once and generates nothing
        return speedmod.Speed(None, None, s.prefill_tokens_per_s, 0)
    if ctx.speculation is not None and s.decode_tokens_per_s is not None:
        s = replace(s, decode_tokens_per_s=speculative_decode_tokens_per_s(ctx, mem, opt))
    return s


def speculative_decode_tokens_per_s(ctx: Context, mem: Memory, opt: fitting.Option) -> float:
    """One stream's decode with the plan's --speculative: a verification step of K + 1 tokens and the
    drafter's K steps, over the tokens a step yields (core/speculative.py per_token_s)."""
    from ..core.speculative import per_token_s
    from . import served

    w = request(ctx, mem.context)
    offloaded = 1 - opt.gpu_layer_fraction if opt.verdict == fitting.OFFLOAD else 0.0
    load = served.load(ctx, mem, w, offloaded)
    mc = _machine(ctx, opt.gpu, opt.tp, getattr(ctx.inp, "ram_bandwidth", speedmod.DEFAULT_RAM_GBPS))
    spec = served.speculation_of(ctx, load, w, mem.kv_dtype)
    return 1 / per_token_s(load, mc, 1, spec) if spec is not None else 0.0


def _served(ctx: Context, mem: Memory, opt: fitting.Option,
            s: speedmod.Speed | None) -> speedmod.Speed | None:
    """The speed with its aggregate the served throughput at the plan's batch."""
    if s is None or s.aggregate_tokens_per_s is None:
        return s
    return replace(s, aggregate_tokens_per_s=served_tokens_per_s(ctx, mem, opt))


def request(ctx: Context, context: int) -> Any:
    """The request each of the plan's streams serves (services/served.py workload), made once per plan and
    context (the priced cards ask it one after another; one object, so the loads kept by it are found by
    identity)."""
    inp = ctx.inp
    key = ("request", inp.input_tokens, inp.output_tokens, context)
    w = ctx.kept.get(key)
    if w is None:
        from .served import workload

        w = ctx.kept[key] = workload(inp.input_tokens, inp.output_tokens, context)
    return w


def scheduled(ctx: Context, gpu: Gpu, sequences: int, row: CardRow | None = None) -> int:
    """The sequences the engine may schedule at once while `sequences` streams run: a paged engine's own cap
    (--max-num-seqs, else its default on the card: engine_defaults), never fewer than the streams (they all
    decode); a slot runtime's slots. The engine captures its CUDA graphs for that cap (core/serving.py
    eager_s: vLLM min(2 x max_num_seqs, 512) tokens), not for the streams a question asks about, as deploy
    times it. `row`: the card's row of the every-card plan (engine_defaults)."""
    n = max(int(sequences), 1)
    if ctx.runtime.paged_kv:
        return max(n, engine_defaults(ctx, gpu, row)[1])
    return 1 if ollama_one_slot(ctx.runtime, ctx.model) else n


def served_tokens_per_s(ctx: Context, mem: Memory, opt: fitting.Option, row: CardRow | None = None) -> float:
    """Output tokens/s of the set with the plan's --batch streams: the served throughput `cardfit speed`,
    `breakeven --model` and `deploy` report for the same question (services/served.py). `row`: the set's row
    of the every-card plan, which keeps the engine's own defaults on its card (engine_defaults)."""
    from . import served

    w = request(ctx, mem.context)
    offloaded = 1 - opt.gpu_layer_fraction if opt.verdict == fitting.OFFLOAD else 0.0
    mc = _machine(ctx, opt.gpu, opt.tp, getattr(ctx.inp, "ram_bandwidth", speedmod.DEFAULT_RAM_GBPS))
    r = served.replica(ctx, _served_load(ctx, mem, w, offloaded), mc, w, opt.pp,
                       scheduled(ctx, opt.gpu, ctx.sequences, row),
                       engine_defaults(ctx, opt.gpu, row)[0])  # the step budget deploy times this card with
    return served.tokens_per_s(r, w, max(ctx.sequences, 1))


def _served_load(ctx: Context, mem: Memory, w: Any, offloaded: float) -> speedmod.Load:
    """services/served.py load(), kept in the plan like the decode load (_decode_inputs): the same on every
    card that holds this memory estimate, keyed by all it reads of the plan (a context copied with another
    runtime or quantization shares `kept`)."""
    key = ("served load", ctx.model, ctx.quant, ctx.runtime, ctx.prefill_chunk, mem, w, offloaded)
    hit = ctx.kept.get(key)
    if hit is None:
        from . import served  # (where it is made: an import statement costs ~1 us even when loaded)

        hit = ctx.kept[key] = served.load(ctx, mem, w, offloaded)
    return hit


def _machine(ctx: Context, gpu: Gpu, tp: int, ram_bandwidth_gbps: float) -> speedmod.Machine:
    """services/served.py machine(), kept: what it reads of the plan (its runtime, quantization and model),
    the card, the split and the runtime's constants in place (core/constants.py: validation's refits) are the
    key, so the page's every-card plans, asked again at another context, build each card's machine once."""
    key = (ctx.runtime, ctx.quant, ctx.model, gpu, tp, ram_bandwidth_gbps, snapshot(ctx.runtime.id))
    hit = _MACHINES.get(key)
    if hit is None:
        from . import served  # (where it is made, as _served_load)

        if len(_MACHINES) >= MACHINES_KEPT:
            _MACHINES.clear()  # one atomic step (the web app's workers share it and take no lock)
        hit = _MACHINES[key] = served.machine(ctx, gpu, tp, ram_bandwidth_gbps=ram_bandwidth_gbps)
    return hit


MACHINES_KEPT = 4096  # a few hundred bytes each: every catalog card on every runtime × quantization asked
_MACHINES: dict[tuple, speedmod.Machine] = {}
_DECODE_CARDS: dict[tuple, speedmod.DecodeCard] = {}
_CARD_PARTS: dict[speedmod.DecodeCard, speedmod.DecodeCard] = {}  # each card part kept once (_decode_card)
_CARD_SETS: dict[tuple, fitting.CardSet] = {}


def clear_memos() -> None:
    """Forget the machines, card profiles, speed ranges and card sets' shapes kept across plans (benchmarks
    time a question from cold)."""
    from ..core import placement

    _MACHINES.clear()
    _DECODE_CARDS.clear()
    _CARD_PARTS.clear()
    _CARD_SETS.clear()
    _CARD_ROWS.clear()
    _on_card.cache_clear()
    _rounded_range.cache_clear()
    placement.clear_memos()


def _decode_speed(ctx: Context, mem: Memory, opt: fitting.Option) -> speedmod.Speed:
    card, load = _decode_inputs(ctx, mem, opt)
    return speedmod.estimate_on(card, ctx.model, load, sequences=max(ctx.sequences, 1),
                                prefill_ubatch=ctx.prefill_chunk or 512)


def _decode_inputs(ctx: Context, mem: Memory, opt: fitting.Option,
                   row: CardRow | None = None) -> tuple[speedmod.DecodeCard, speedmod.Load]:
    """The card's part and the model's part of a set's decode estimate (core/speed.py estimate_on); `row`:
    the set's row of the every-card plan (_card_rows), which keeps its card part."""
    rt = ctx.runtime
    offloaded = 1 - opt.gpu_layer_fraction if opt.verdict == fitting.OFFLOAD else 0.0
    card = row.decode if row is not None else None
    if card is None:
        ram = getattr(ctx.inp, "ram_bandwidth", speedmod.DEFAULT_RAM_GBPS)
        card = _decode_card(ctx, opt.gpu, opt.tp, ram)
        if row is not None:
            row.decode = card
    # the same on every card that holds this memory estimate (and whatever the load reads of the plan in the
    # key: a context copied with another runtime or quantization shares `kept`)
    model, quant, chunk = ctx.model, ctx.quant, ctx.prefill_chunk
    last = ctx.kept.get(LAST_LOAD)  # the key asked last, by identity: the ranking asks one card after another
    if last is not None and last[0] is mem and last[1] is model and last[2] is quant and last[3] is rt \
            and last[4] == chunk and last[5] == offloaded:
        return card, last[6]
    key = ("decode load", model, quant, rt, chunk, mem, offloaded)
    load = ctx.kept.get(key)
    if load is None:
        load = ctx.kept[key] = speedmod.decode_load(
            model, mem, quant, mem.context // 2, offloaded, rt.window_cache,
            # the cache read `cardfit speed`, the served figure and validate time
            ctx.engine.window_read_cells(model, chunk), fitting.experts_first(rt, model))
    ctx.kept[LAST_LOAD] = (mem, model, quant, rt, chunk, offloaded, load)
    return card, load


LAST_LOAD = "last decode load"  # Context.kept: the decode load asked last, with what its key held


def _decode_rates(ctx: Context, card: speedmod.DecodeCard,
                  load: speedmod.Load) -> tuple[float | None, float | None]:
    """core/speed.py decode_rates_on, kept in the plan by its two arguments (frozen records, compared by
    value): cards of one chip and bandwidth in several memory sizes (Apple's M-series, 40 and 80 GB A100s)
    hold equal card parts, and one memory estimate serves most cards, so a fifth of the ranking's cards find
    their figures worked out already."""
    key = ("decode rates", card, load)
    hit = ctx.kept.get(key)
    if hit is None:
        hit = ctx.kept[key] = speedmod.decode_rates_on(card, load)
    return hit


def _decode_card(ctx: Context, gpu: Gpu, tp: int, ram_bandwidth_gbps: float) -> speedmod.DecodeCard:
    """The card's part of the decode estimate (core/speed.py decode_card), kept like _machine: what it reads
    of the plan (its runtime and quantization), the card, the split and the constants in place are the key,
    so the page's every-card plans, asked again at another context or batch, build each card's once."""
    rt = ctx.runtime
    # (whether the model routes experts: the one thing of it the card's part reads, through
    # services/served.py expert_stream_share)
    key = (rt, ctx.quant, gpu, tp, ram_bandwidth_gbps, bool(ctx.model.is_moe), snapshot(rt.id))
    hit = _DECODE_CARDS.get(key)
    if hit is None:
        from .served import expert_stream_share

        k = ctx.engine.speed()
        experts = expert_stream_share(rt, ctx.quant, ctx.model, gpu, k.expert_efficiency)
        peak = speedmod.prefill_peak_tflops(gpu, ctx.quant, rt.fp16_accumulate)
        precision = speedmod.precision_of(ctx.quant, gpu)
        share = speedmod.prefill_efficiency(k.prefill_efficiency, rt.prefill_efficiency_quantized, ctx.quant,
                                            rt.prefill_efficiency_metal, gpu)
        efficiency = speedmod.power_capped(share, peak, gpu.tdp_w, rt.prefill_tflops_per_watt,
                                           gpu.gemm_share_at(precision))
        hit = speedmod.decode_card(gpu, decode_efficiency=k.decode_efficiency, prefill_efficiency=efficiency,
                                   fp16_accumulate=rt.fp16_accumulate, precision=precision, tp=tp,
                                   quant=ctx.quant, overhead_s_per_layer=k.overhead_s_per_layer,
                                   overhead_s_per_sequence=k.overhead_s_per_sequence,
                                   ram_bandwidth_gbps=ram_bandwidth_gbps, ram_efficiency=k.ram_efficiency,
                                   dequant_ops_per_weight=rt.dequant_ops_per_weight,
                                   expert_efficiency=experts,
                                   overhead_s_per_moe_layer=k.overhead_s_per_moe_layer,
                                   rocm_custom_allreduce=rt.rocm_custom_allreduce)
        if len(_DECODE_CARDS) >= MACHINES_KEPT:
            _DECODE_CARDS.clear()  # one atomic step, as _MACHINES
            _CARD_PARTS.clear()
        # one object for equal card parts (cards of one chip in several memory sizes): the decode rates kept
        # by card part and load (_decode_rates) then find theirs by identity, not by comparing two records
        hit = _DECODE_CARDS[key] = _CARD_PARTS.setdefault(hit, hit)
    return hit


def _smallest_set(ctx: Context, mem: Memory, gpu: Gpu, row: CardRow | None = None) -> fitting.Option | None:
    """core/fit.py smallest_set of the card; `row`: its row of the every-card plan, which keeps the parts of
    the sets it tries (_row_sets)."""
    if row is None:
        return fitting.smallest_set(mem, gpu, ctx.engine, ctx.rules, requires=requires(ctx.quant),
                                    utilization=ctx.utilization, margin_bytes=_set_margin(ctx, mem),
                                    model=ctx.model)
    return fitting.smallest_of(mem, _row_sets(ctx, row), ctx.engine, ctx.rules,
                               margin_bytes=_set_margin(ctx, mem), model=ctx.model)


def _row_sets(ctx: Context, row: CardRow) -> Iterator[fitting.CardSet]:
    """The parts of the sets smallest_set tries for the row's card (core/fit.py set_shapes, set_part), each
    made when first tried and kept in the row (what they read of the plan is the row's key): a plan asked
    again at another context tries them again without making them. The row keeps the tried ones in order
    (a tuple replaced whole: a thread that made one again writes an equal prefix)."""
    kept = row.sets
    for i, shape in enumerate(fitting.set_shapes(row.gpu, ctx.engine, ctx.rules, ctx.model)):
        if i < len(kept):
            yield kept[i]
            continue
        s = fitting.set_part(row.gpu, shape, ctx.engine, ctx.rules, requires=requires(ctx.quant),
                             utilization=ctx.utilization, model=ctx.model)
        row.sets = kept = (*kept, s)  # (i == len(kept) here)
        yield s


def _at_set_context(ctx: Context, gpu: Gpu, opt: fitting.Option, mem: Memory, why: str,
                    row: CardRow | None = None) -> tuple[fitting.Option, Memory, str]:
    """Ollama picks its default context from the VRAM of all the cards: plan the set at that context (the
    smallest set that holds it there), or keep the smaller context and say what to set."""
    context, set_why = default_context(ctx, gpu, opt.count)
    if context == mem.context:
        return opt, mem, set_why if ctx.runtime.context_tiers else why
    check_context(ctx, context)
    wide = memory_for(ctx, context, gpu)
    again = _smallest_set(ctx, wide, gpu, row)
    if again is not None:
        return again, wide, default_context(ctx, gpu, again.count)[1]
    return opt, mem, f"{why}; Ollama would pick {context:,} for {opt.count} cards, which needs more: " \
                     f"set OLLAMA_CONTEXT_LENGTH={mem.context}"


def card_plans(ctx: Context) -> list[CardPlan]:
    if ctx.inp.gpu:
        gpu = ctx.gpus.get(ctx.inp.gpu)
        rows: tuple[CardRow, ...] = (CardRow(gpu, cards_per_set(ctx, gpu), None),)
    else:
        rows = _card_rows(ctx)
    mems: dict[tuple[int, bool, int, int], tuple[Memory, str, Callable[..., fitting.Option]]] = {}
    out = []
    for row in rows:
        gpu = row.gpu
        context, why = default_context(ctx, gpu)
        key = (context, gpu.unified_memory, *engine_defaults(ctx, gpu, row))
        found = mems.get(key)
        if found is None:
            check_context(ctx, context)
            m = memory_for(ctx, context, gpu)
            found = mems[key] = (m, why, fit_check(ctx, m))
        mem, _, check = found
        count = row.count
        opt = check(row.part or card_set(ctx, gpu, count))
        own: CardRow | None = row if row.part is not None else None
        # a card that cannot hold it alone: the smallest set that does beats offloading to system RAM; a
        # card the user named is planned as the smallest set of it when one card is too small (a named card
        # that llama.cpp/Ollama can run with offload keeps that answer: it may be the only card there is)
        named_too_small = ctx.inp.gpu and opt.refusal is fitting.Refusal.MEMORY
        if not opt.fits and not ctx.inp.gpus and not ctx.inp.tp and (not ctx.inp.gpu or named_too_small):
            bigger = _smallest_set(ctx, mem, gpu, row if row.part is not None else None)
            if bigger is not None:
                if named_too_small:
                    ctx.notes.append(f"{_TOO_SMALL.format(gpu.name)} ({opt.reason}); planned on the smallest "
                                     f"set that does, {bigger.count}× {gpu.name} (--gpus 1 shows one card)")
                opt, mem, why = _at_set_context(ctx, gpu, bigger, mem, why,
                                                row if row.part is not None else None)
                own = None  # another set than the row's
        out.append(CardPlan(opt, mem, why, ctx, row=own))
    ranked = fitting.rank([c.option for c in out], ctx.rules.node_size)
    by_opt = {id(c.option): c for c in out}
    return [by_opt[id(o)] for o in ranked]


_TOO_SMALL = "one {} cannot hold it"


def set_notes(ctx: Any, gpu: Any) -> list[str]:
    """The note card_plans leaves where the named card alone cannot hold the plan and the smallest set of it
    that does was planned instead: `speed` (which times that set) prints it too."""
    return [n for n in ctx.notes if n.startswith(_TOO_SMALL.format(gpu.name) + " (")]


def plan(inp: PlanInput) -> Plan:
    ctx = build_context(inp)
    cards = card_plans(ctx)
    ctx.notes.extend(advice(ctx, cards[0].memory))
    ctx.notes.extend(utilization_advice(ctx, cards[0]))
    ctx.notes.extend(task_notes(ctx, cards[0]))
    ctx.notes.extend(offload_notes(ctx, cards[0]))
    ctx.notes.extend(kv_offload_notes(ctx, cards[0]))
    if ctx.speculation is not None:
        from .speculative import note

        ctx.notes.extend(note(ctx.speculation, ctx.runtime))
    return Plan(ctx, cards)


def kv_offload_notes(ctx: Context, card: CardPlan) -> list[str]:
    """--kv-offload-gb: the host RAM the tier takes (against --ram-gb) and whether it helps on the card
    (kv_offload_check)."""
    gb = getattr(ctx.inp, "kv_offload_gb", None)
    if not gb:
        return []
    o, mem = card.option, card.memory
    ram = fitting.offload_ram_bytes(mem, o.budget_bytes) if o.verdict == fitting.OFFLOAD else 0
    if ctx.inp.ram_gb and gb * 1e9 + ram > ctx.inp.ram_gb * 1e9:
        raise InputError(f"--kv-offload-gb {gb:g} needs {(gb * 1e9 + ram) / 1e9:,.1f} GB of system RAM with "
                         f"what else the plan keeps there; --ram-gb gives {ctx.inp.ram_gb:g}",
                         field="kv_offload_gb", hint="a smaller host tier, or more RAM")
    return [kv_offload_check(ctx, card)[1]]


def kv_offload_check(ctx: Context, card: CardPlan) -> tuple[Any, str]:
    """Whether a --kv-offload-gb host tier can help on the card (core/reuse.py OffloadReason: HELPS,
    NOT_LARGER, SLOWER; None where the runtime has no such tier or the copy time is unknown) and the note
    that says so: only a tier larger than the GPU's KV pool adds hits (it holds copies), and only where
    copying a token back over the host link beats computing it again (the plan's prefill rate)."""
    from ..core import reuse as ru

    gb = float(getattr(ctx.inp, "kv_offload_gb", None) or 0.0)
    rt, o, mem = ctx.runtime, card.option, card.memory
    if not rt.host_kv_cache or not rt.prefix_caching:
        return None, (f"--kv-offload-gb: {rt.name} has no host KV tier cardfit plans (vLLM's native CPU "
                      "offload and SGLang HiCache have one)")
    per_token = mem.kv_cache_bytes / max(mem.context * max(mem.sequences, 1), 1)
    pool = max(fitting.kv_room(mem, o.budget_bytes, o.count), 0) / max(per_token, 1.0)
    host = gb * 1e9 / max(per_token, 1.0)
    head = (f"KV offload: {gb:g} GB of pinned host RAM hold {host:,.0f} tokens of KV cache against "
            f"{pool:,.0f} in the GPU pool")
    if host <= pool:
        return ru.OffloadReason.NOT_LARGER, \
            f"{head}: does not help here, {ru.OFFLOAD_WHY[ru.OffloadReason.NOT_LARGER]}"
    link = ru.host_link_gbps(o.gpu.pcie_gen, o.gpu.interconnect, o.gpu.link_gbps)
    prefill = card.speed.prefill_tokens_per_s if card.speed else None
    if not link or not prefill:
        return None, f"{head}; the copy time is unknown (no host link or prefill rate for {o.gpu.name})"
    copy, recompute = ru.host_load_s(1.0, per_token, link * o.count), 1 / prefill
    if copy >= recompute:
        return ru.OffloadReason.SLOWER, (f"{head}: does not help here, "
                                         f"{ru.OFFLOAD_WHY[ru.OffloadReason.SLOWER]} ({copy * 1e6:.3g} "
                                         f"against {recompute * 1e6:.3g} µs)")
    return ru.OffloadReason.HELPS, (
        f"{head}: helps where the workload reuses more prompt tokens (shared prefixes, chat histories) than "
        f"the GPU pool keeps, copying a token back in {copy * 1e6:.3g} µs against {recompute * 1e6:.3g} µs "
        f"to compute it (`cardfit deploy --turns T --sessions S --kv-offload-gb {gb:g}` times it on a load)")


def offload_notes(ctx: Context, card: CardPlan) -> list[str]:
    """An offload on one card: the system RAM it needs, and the smallest set of the same card that holds the
    model whole at the same context, with both decode speeds (one owner for the CLI and the page)."""
    o, mem = card.option, card.memory
    if o.verdict != fitting.OFFLOAD:
        return []
    ram = fitting.offload_ram_bytes(mem, o.budget_bytes)
    host = f", {mem.host_weights_bytes / 1e9:,.1f} GB of it the token embedding (kept there in any case)" \
        if mem.host_weights_bytes else ""
    out = [f"the offload needs about {ram / 1e9:,.1f} GB of free system RAM{host}; --ram-gb checks it "
           "against yours"]
    whole = _smallest_set(ctx, mem, o.gpu)
    slow = card.speed.decode_tokens_per_s if card.speed else None
    fast = _speed(ctx, mem, whole) if whole is not None else None
    if whole is None or fast is None or fast.decode_tokens_per_s is None or slow is None:
        return out
    n = whole.count
    line = (f"{n}× {o.gpu.name} hold the whole model at the same context ({mem.context:,} tokens): about "
            f"{fast.decode_tokens_per_s:,.1f} tokens/s per stream, against {slow:,.1f} with "
            f"{o.reason} on one (--gpus {n})")
    tier, _ = default_context(ctx, o.gpu, n)
    if ctx.runtime.context_tiers and tier != mem.context:
        line += f"; Ollama picks {tier:,} tokens on {n} cards: set OLLAMA_CONTEXT_LENGTH={mem.context}"
    return out + [line]


TASK_WORDS = {"embed": ("an embedding model", "embeds"), "rerank": ("a reranker", "scores")}


def needs_generator(m: ModelSpec) -> None:
    """speed, breakeven and deploy answer for generated tokens: an embedding model or a reranker is one line
    that points at `cardfit plan`, which answers it in its own terms (input tokens/s)."""
    if not m.generates:
        raise InputError(f"{m.name} is {TASK_WORDS[m.task][0]}: it generates no tokens, so it has no decode "
                         "speed and no output tokens to serve or price", field="model",
                         hint="`cardfit plan MODEL --gpu G` gives its throughput in input tokens/s")


def task_notes(ctx: Context, card: CardPlan) -> list[str]:
    a = task_answer(ctx, card)
    if a is None:
        return []
    what, verb = TASK_WORDS[a.task]
    cache = "no KV cache" if ctx.model.encoder_only else "no cache kept between requests"
    head = f"{ctx.model.name} is {what}: {cache} and no generated tokens, so no decode speed"
    if a.tokens_per_s is None:
        return [f"{head}; throughput unknown ({a.gpu} has no tensor TFLOPS in the catalog)"]
    return [f"{head}; on {a.gpu} it {verb} about {a.tokens_per_s:,.0f} input tokens/s "
            f"(≈{a.inputs_per_s or 0:,.1f} inputs/s of {a.input_tokens:,} tokens; compute-bound, like a "
            "prefill)"]


def utilization_advice(ctx: Context, card: CardPlan) -> list[str]:
    """A card refused only by vLLM's reserved fraction: say which --gpu-memory-utilization would hold it."""
    o, rt = card.option, ctx.runtime
    if (
        o.refusal is not fitting.Refusal.MEMORY
        or not rt.gpu_memory_utilization
        or rt.gpu_memory_utilization >= 1
    ):
        return []
    per_card = o.gpu.usable_bytes - rt.cuda_total_shortfall_bytes
    total = o.count * per_card
    needed = o.need_bytes / total
    # what the process holds outside the fraction must still fit on the card: the CUDA context, and on an
    # NVSwitch set of more than 2 ranks NCCL's NVLink SHARP buffers (V1 starts NCCL before its memory
    # snapshot; runtimes/vllm_like.py nvls_bytes)
    outside = rt.context_bytes + ctx.engine.nvls_bytes(o.gpu, o.tp, rt.nccl_communicators_v0) \
        if isinstance(ctx.engine, VllmLike) else rt.context_bytes
    ceiling = min(MAX_SUGGESTED_UTILIZATION, 1 - outside / per_card)
    if needed > ceiling:
        return []
    # half a hundredth up, so the two-decimal flag printed is never below the share needed
    suggest = min(ceiling, needed + 0.005)
    return [f"{rt.name} takes {ctx.utilization or rt.gpu_memory_utilization:g} of the card by default; "
            f"--gpu-memory-utilization {suggest:.2f} would hold this plan on {o.count}x "
            f"{o.gpu.name} (tight), and --runtime transformers takes no fixed fraction"]


def advice(ctx: Context, mem: Memory) -> list[str]:
    """Short notes that help read the numbers: the guides' rules of thumb and quality of the quant."""
    from ..catalog.loader import builtin

    out = []
    lo, hi = ctx.rules.rule_of_thumb
    out.append(f"rule of thumb: provision {lo}-{hi}x the weights = {mem.weights.total_bytes * lo / 1e9:,.1f}-"
               f"{mem.weights.total_bytes * hi / 1e9:,.1f} GB; this plan needs "
               f"{mem.total_bytes / 1e9:,.1f} GB")
    tag = ctx.resolved.tag
    if tag is not None and tag.download_gb and ctx.quant.name.upper() == (tag.quant or "").upper():
        out.append(f"Ollama lists {tag.tag} as a {tag.download_gb:g} GB download; cardfit counts "
                   f"{mem.weights.total_bytes / 1e9:,.2f} GB of weights")
    q = ctx.quant
    m = ctx.model
    if 0 < m.text_params < m.params:  # a vision-language model: its vision encoder is part of the weights
        from ..core.weights import projector_bytes

        mmproj = projector_bytes(m, q)
        vision = (m.params - m.text_params) / 1e9
        out.append(f"the weights include {m.name}'s vision encoder ({vision:,.2f}B parameters"
                   + (f", {mmproj / 1e9:,.2f} GB as the F16 projector file llama.cpp and Ollama load beside "
                      "the model, --mmproj)" if mmproj else ")"))
    if getattr(q, "scope", "") == "experts" and not ctx.model.is_moe:
        out.append(f"{q.name} quantizes MoE experts only; {ctx.model.name} is dense, so its weights stay at "
                   f"{ctx.model.dtype.upper()}")
    quality = builtin("quality.toml")
    ppl = {p["name"].upper(): p["ppl"] for p in quality["perplexity"]}
    base = ppl.get("F16")
    if ctx.quant.name.upper() in ppl and base:
        delta = ppl[ctx.quant.name.upper()] / base - 1
        out.append(f"{ctx.quant.name}: Llama 3 8B perplexity {delta:+.1%} vs F16 "
                   f"({quality['source'].split(' (')[0]}); "
                   + quality["advice"])
    return out


def kv_per_token(ctx: Context) -> int:
    return kv_bytes_per_token(ctx.model, ctx.kv_dtype)


# The answer as typed records (PlanView): what the text renderer shows, and, through to_json(), the JSON the
# CLI prints with --json, the web API and the Python API return. Keys are only ever added to, never renamed.


@record
class ModelView(ModelBasics):
    max_context: int | None
    origin: str  # how the name was resolved: catalog, config, gguf, shape …
    source: str
    ollama_tag: str | None
    provenance: dict[str, str] | None  # figure → where it was read


def model_view(ctx: Context) -> ModelView:
    m = ctx.model
    return ModelView(m.id, m.name, m.hf or None, m.params, m.active_params or m.params, m.layers, m.attention,
                     m.max_context or None, ctx.resolved.origin, m.source,
                     (ctx.inp.model if ctx.resolved.ollama else None)
                     or (ctx.resolved.tag.tag if ctx.resolved.tag else None),
                     dict(m.provenance) or None)


@record
class InputsView(Result):
    """The settings the plan used (given or the runtime's defaults)."""

    quant: str
    quant_kind: str
    runtime: str
    context: int
    context_source: str
    batch: int
    # the engine release planned (--runtime NAME@RELEASE; else the current one, data/releases.toml); None: a
    # runtime whose releases cardfit does not know
    release: str | None
    kv_dtype: str
    prefill_chunk: int
    flash_attn: bool
    gpu_memory_utilization: float | None
    gpus: int | None
    tp: int | None
    gpu: str | None
    headroom: float | None


def inputs_view(ctx: Context, card: CardPlan) -> InputsView:
    q = ctx.quant
    util = ctx.utilization if ctx.utilization is not None else (ctx.runtime.gpu_memory_utilization or None)
    from ..catalog.releases import release_name

    return InputsView(q.name, q.kind, ctx.runtime.id, card.memory.context, card.context_note, ctx.sequences,
                      release_name(ctx.runtime), ctx.kv_dtype, ctx.prefill_chunk, ctx.flash_attn, util,
                      ctx.inp.gpus, ctx.inp.tp, ctx.inp.gpu, ctx.inp.headroom)


@record
class MemoryView(Result):
    """The need per card, term by term, with the likely range of each term (`*_range`: [low, high] bytes
    from the validation errors, core/uncertainty.py and data/accuracy.toml; None: no band)."""

    weights_bytes: int
    kv_cache_bytes: int
    overhead_bytes: int
    activation_bytes: int
    total_bytes: int
    bits_per_weight: float | None
    weights_method: str
    weights_by_type: dict[str, int]
    file_weights_bytes: int
    host_weights_bytes: int
    unified_memory: bool
    kv_bytes_per_token: int
    context: int
    sequences: int
    gguf_mix: str | None
    weights_bytes_range: list[int] | None
    kv_cache_bytes_range: list[int] | None
    overhead_bytes_range: list[int] | None
    activation_bytes_range: list[int] | None
    total_bytes_range: list[int] | None
    # --speculative: the drafter's weights and KV cache, inside total_bytes (0: none)
    draft_bytes: int = 0


def memory_view(ctx: Context, mem: Memory) -> MemoryView:
    from ..core.uncertainty import memory_ranges

    q = ctx.quant
    r = memory_ranges({"weights_bytes": mem.weights_bytes, "kv_cache_bytes": mem.kv_cache_bytes,
                       "overhead_bytes": mem.overhead_bytes, "activation_bytes": mem.activation_bytes},
                      ctx.runtime.id)
    return MemoryView(mem.weights_bytes, mem.kv_cache_bytes, mem.overhead_bytes, mem.activation_bytes,
                      mem.total_bytes, rounded(mem.weights.bits_per_weight, 3), mem.weights.method,
                      dict(mem.weights.by_type), mem.weights.total_bytes, mem.host_weights_bytes,
                      mem.unified_memory, kv_per_token(ctx), mem.context, mem.sequences,
                      q.name if isinstance(q, GgufMix) else None, r["weights_bytes"], r["kv_cache_bytes"],
                      r["overhead_bytes"], r["activation_bytes"],
                      [b + mem.draft_bytes for b in r["total_bytes"]] if r["total_bytes"] and mem.draft_bytes
                      else r["total_bytes"], mem.draft_bytes)


def _speed_range(value: float | None, figure: str, runtime: str) -> list[float] | None:
    """[low, high] of a realistic speed figure from the validation errors (None: no figure or no band), a
    list of its own for each caller."""
    r = _rounded_range(value, figure, runtime)
    return None if r is None else list(r)


# pure in its arguments (the bands are read once: core/uncertainty.py band); the every-card plan asks it for
# each card's decode figure, rounded to 0.1 tokens/s: most cards' figures recur from one context to the next
@lru_cache(maxsize=4096, typed=True)
def _rounded_range(value: float | None, figure: str, runtime: str) -> tuple[float, float] | None:
    r = value_range(value, figure, runtime)
    return None if r is None else (round(r[0], 1), round(r[1], 1))


@record
class LaunchLine(Result):
    command: str | None  # None: the runtime has no launch line (transformers, TGI, the rule of thumb)


@record
class GpuPlan(Result):
    """One card (or set) of the ranking: the verdict, the split, and where it fits the command that starts
    it (`command`, absent where it does not fit)."""

    gpu: str
    gpu_id: str
    count: int
    nodes: int
    context: int
    usable_bytes: int
    budget_bytes: int
    need_bytes: int
    free_bytes: int
    verdict: fitting.Verdict
    reason: str | None
    monthly_usd: float | None
    gpu_layer_fraction: float | None
    decode_tokens_per_s: float | None
    decode_ceiling_tokens_per_s: float | None
    tp: int
    pp: int
    replicas: int
    launch: LaunchLine | None  # where the set fits
    decode_tokens_per_s_range: list[float] | None
    # the host-RAM KV tier in its launch line, GB: --kv-offload-gb where it can help on the set
    # (kv_offload_check), else 0
    kv_offload_gb: float = 0.0
    # --speculative: {method, tokens, acceptance, tokens_per_step} (as deploy's deployments); None: off
    speculative: dict[str, Any] | None = None
    # the keys every deployment of `deploy --json` carries (issue 26): a plan places one tensor-parallel
    # replica over its `tp` cards, so no attention data-parallel groups or expert-parallel ranks (1, 1) and
    # no separate prefill and decode pools (None); deploy searches those layouts
    dp: int = 1
    ep: int = 1
    disaggregated: dict[str, dict[str, Any]] | None = None
    # each card's bytes where a llama.cpp/Ollama layer split places the model unevenly (the first card one
    # layer more, the output layer on the last: runtimes/llamacpp_like.py split_cards); None when even
    card_need_bytes: list[int] | None = None

    flatten = ("launch",)


def gpu_plan(ctx: Context, card: CardPlan, launches: dict[Any, Any] | None = None) -> GpuPlan:
    """A set runs the model tensor parallel inside a node, pipeline stages across nodes (or layers split over
    the cards for llama.cpp / Ollama), one replica; where it fits, the command that starts it (the same
    launch line `cardfit deploy` prints: services/launch_line.py). `launches`: the lines already made for
    this plan, by what they are made of (the split and the context, not the card: most cards share one), and
    what every row reads of the plan's settings (_row_settings, made once)."""
    o, (ceiling, realistic), mem = card.option, card.decode_rates, card.memory
    shared = launches.get(ROW_SETTINGS) if launches is not None else None
    if shared is None:
        shared = _row_settings(ctx)
        if launches is not None:
            launches[ROW_SETTINGS] = shared
    offload_gb, slots, seqs, rt_id = shared
    launch = None
    tier = 0.0
    if offload_gb:
        from ..core.reuse import OffloadReason

        if kv_offload_check(ctx, card)[0] is OffloadReason.HELPS:
            tier = float(offload_gb)
    if o.fits:
        kv = None if mem.kv_dtype in ("f16", "bf16") else ctx.inp.kv_dtype
        tp, pp = launched_split(ctx.runtime, o.tp, o.pp)  # what the line states of the split
        # the memory share the set's budget was sized with (SGLang's --mem-fraction-static for the card), as
        # deploy's line states it (launch_line.sized_fraction)
        fraction = sized_fraction(ctx, ctx.engine, o.gpu, o.tp, o.pp)
        launch = _launch_line(ctx, (tp, pp, mem.context, seqs, kv, slots), launches, tier, fraction)
    decode = rounded(realistic, 1)
    return GpuPlan(o.gpu.name, o.gpu.id, o.count, o.nodes, mem.context, o.usable_bytes, o.budget_bytes,
                   o.need_bytes, o.free_bytes, o.verdict, o.reason or None, rounded(o.monthly_usd),
                   rounded(o.gpu_layer_fraction, 4), decode,
                   rounded(ceiling, 1), o.tp, o.pp, 1, launch,
                   _speed_range(decode, "decode_tokens_per_s", rt_id), tier,
                   ctx.speculation.to_json() if ctx.speculation is not None else None,
                   card_need_bytes=list(o.card_need_bytes) or None)


ROW_SETTINGS = "row settings"  # gpu_plan's `launches`: what every row of the plan reads of its settings


def _row_settings(ctx: Context) -> tuple[Any, int, int, str]:
    """What each card's row reads of the plan alike (gpu_plan): --kv-offload-gb, the launch line's slots
    (llama.cpp / Ollama: -np; 0 for a paged or tensor-parallel engine) and sequences (at least the plan's, as
    engine_defaults), and the runtime's id (its speed ranges)."""
    rt = ctx.runtime
    slots = 0 if rt.paged_kv or rt.tensor_parallel else ctx.sequences
    seqs = max(getattr(ctx.inp, "max_num_seqs", None) or 0, ctx.sequences, 1)
    return getattr(ctx.inp, "kv_offload_gb", None), slots, seqs, rt.id


def _launch_line(ctx: Context, args: tuple[int, int, int, int, str | None, int],
                 launches: dict[Any, Any] | None, tier: float = 0.0, fraction: float | None = None
                 ) -> LaunchLine:
    """The plan's launch line for a split, context, batch, KV type and slots (launch_line.launch_command), a
    host KV tier of `tier` GB and the memory share `fraction` (launch_line.sized_fraction; None: the
    question's or the profile's), made once per plan for each such set of arguments."""
    key = (*args, tier, fraction)
    line = launches.get(key) if launches is not None else None
    if line is None:  # imported here, where a line is made: most cards find theirs made
        from .launch_line import launch_command

        line = LaunchLine(launch_command(ctx, *args, kv_offload_gb=tier, fraction=fraction))
        if launches is not None:
            launches[key] = line
    return line


@record
class SpeedView(Result):
    """Decode and prefill on the first card (or set) of the ranking."""

    gpu: str
    decode_ceiling_tokens_per_s: float | None
    decode_tokens_per_s: float | None
    prefill_tokens_per_s: float | None
    bytes_per_token: int | None
    decode_tokens_per_s_range: list[float] | None
    prefill_tokens_per_s_range: list[float] | None


def speed_view(ctx: Context, card: CardPlan) -> SpeedView:
    s, rt = card.speed, ctx.runtime.id
    decode = rounded(s.decode_tokens_per_s, 1) if s else None
    prefill = rounded(s.prefill_tokens_per_s, 0) if s else None
    return SpeedView(card.option.gpu.name, rounded(s.decode_ceiling_tokens_per_s, 1) if s else None, decode,
                     prefill, s.bytes_per_token if s else None,
                     _speed_range(decode, "decode_tokens_per_s", rt),
                     _speed_range(prefill, "prefill_tokens_per_s", rt))


@record
class TaskAnswer(Result):
    """An embedding model or reranker in its own terms."""

    task: str
    input_tokens: int
    tokens_per_s: float | None
    inputs_per_s: float | None
    gpu: str


def task_answer(ctx: Context, card: CardPlan) -> TaskAnswer | None:
    """An embedding model or reranker in its own terms: input tokens per second (the prefill rate, compute
    bound: 2 x params per token plus attention over the input) and inputs per second at the plan's context."""
    m, gpu = ctx.model, card.option.gpu
    if m.generates:
        return None
    tokens = card.memory.context
    tflops = gpu.tflops(speedmod.precision_of(ctx.quant, gpu)) or gpu.tflops("bf16")
    # an encoder's tokens attend to the whole input (a causal prefill: half of it on average)
    rate = speedmod.prefill_tokens_per_s(m, tflops, ctx.engine.speed().prefill_efficiency,
                                         prompt_tokens=tokens * (2 if m.encoder_only else 1))
    return TaskAnswer(m.task, tokens, rounded(rate, 0), rounded(rate / tokens, 1) if rate else None,
                      card.option.gpu.name)


@record
class Answers(Result):
    """The short answers: the cheapest card that fits, the smallest one, the cheapest set when no single card
    holds the plan, and the smallest card holding --headroom × the weights."""

    smallest_card_by_headroom: str | None
    cheapest_card: str | None
    smallest_card: str | None
    cheapest_set: str | None


@record
class ApiTier(Result):
    id: str
    name: str
    price_per_million_usd: float
    date: str | None


@record
class CardBreakeven(Result):
    api: str
    breakeven_millions_per_month: float | None
    required_duty: float | None
    breaks_even: bool


@record
class CostRanges(Result):
    """Likely ranges of a card's cost figures, from the validation errors of the throughput they rest on."""

    cost_per_million_usd_range: list[float] | None
    cost_per_million_full_duty_usd_range: list[float] | None
    tokens_per_s_range: list[float] | None


@record
class CardCost(Result):
    gpu: str
    count: int
    monthly_usd: float | None
    hourly_usd: float | None
    tokens_per_s: float | None
    capacity_millions_per_month: float | None
    cost_per_million_full_duty_usd: float | None
    cost_per_million_usd: float | None
    breakeven: tuple[CardBreakeven, ...]
    ranges: CostRanges | None = None  # where the throughput is a calibrated one

    flatten = ("ranges",)


@record
class CostView(Result):
    """The cost section of `cardfit plan`: rent, $/M at 100 % and at --duty, and the break-even volume
    against --api (default the tiers of the break-even guide), for each fitting, priced card."""

    monthly_usd: float | None
    hours_per_month: float
    hourly_usd: float | None
    duty: float
    apis: tuple[ApiTier, ...]
    tokens_per_s_basis: str
    cards: tuple[CardCost, ...]
    input_per_output: float  # prompt tokens each API bills per output token (in price_per_million_usd)
    input_per_output_source: str


@record
class PlanView(Result):
    """`cardfit plan`: the model, the settings, the memory, every card ranked, speed, cost, the short answers,
    an embedding model's task throughput, notes."""

    model: ModelView
    inputs: InputsView
    memory: MemoryView
    gpus: tuple[GpuPlan, ...]
    speed: SpeedView
    cost: CostView
    answers: Answers
    task: TaskAnswer | None
    notes: tuple[str, ...]


def plan_view(p: Plan) -> PlanView:
    first = p.first
    launches: dict[Any, Any] = {}
    return PlanView(model_view(p.ctx), inputs_view(p.ctx, first), memory_view(p.ctx, first.memory),
                    tuple(gpu_plan(p.ctx, c, launches) for c in p.cards), speed_view(p.ctx, first),
                    plan_cost(p),
                    answers(p), task_answer(p.ctx, first), tuple(p.ctx.notes))


def answers(p: Plan) -> Answers:
    """The short answers: the cheapest card that fits, the smallest one, and the cheapest set when no
    single card holds the plan."""
    # one pass over the ranking (~120 cards): the first cheapest priced single card, the first smallest
    # single card (min()'s choice on ties), and in rank order the first priced set (a set inside one node
    # before whole nodes: GPU Rent Hub VRAM guide, 05)
    cheapest: Option | None = None
    smallest: Option | None = None
    first_set: Option | None = None
    for c in p.cards:
        o = c.option
        if not o.fits:
            continue
        if o.count == 1:
            if o.monthly_usd is not None and (cheapest is None
                                              or (o.monthly_usd or 0) < (cheapest.monthly_usd or 0)):
                cheapest = o
            if smallest is None or o.usable_bytes < smallest.usable_bytes:
                smallest = o
        elif o.count > 1 and first_set is None and o.monthly_usd is not None:
            first_set = o

    def name(o: Option | None) -> str | None:
        return None if o is None else (o.gpu.name if o.count == 1 else f"{o.count}× {o.gpu.name}")

    by_rule = None
    if p.ctx.inp.headroom:
        from ..core.fit import smallest_by_headroom

        card = smallest_by_headroom(p.first.memory.weights.total_bytes, [c.option.gpu for c in p.cards],
                                    p.ctx.inp.headroom)
        by_rule = card.name if card else "more than one card"
    return Answers(by_rule, name(cheapest), name(smallest), None if smallest is not None else name(first_set))


def plan_cost(p: Plan) -> CostView:
    """The cost section for each fitting, priced card. Tokens/s is the plan's served throughput at its
    concurrency (one stream: an upper bound of $/M; `cardfit breakeven --model … --gpu …` uses the
    aggregate)."""
    inp, hours = p.ctx.inp, cost.HOURS_PER_MONTH
    o = p.first.option
    duty = getattr(inp, "duty", None) or 1.0
    reg = apis(tuple(inp.catalog))
    chosen = [reg.get(inp.api)] if getattr(inp, "api", None) else breakeven_guide_tiers(reg)
    basis, figure = _cost_basis(p)
    rt = p.ctx.runtime.id
    ratio, why = _input_per_output(inp)
    # an API bills the prompt tokens sent with each output token too, as `cardfit breakeven` prices it
    prices = {a.id: cost.api_price_per_output_million(a.output_usd_per_m, a.input_usd_per_m, ratio)
              for a in chosen}
    # (_card_cost's own first test first: no call for each card that does not fit or has no price)
    cards = tuple(row for c in p.cards if c.option.fits and c.option.monthly_usd is not None
                  and (row := _card_cost(c, hours, duty, chosen, figure, rt, prices)) is not None)
    return CostView(rounded(o.monthly_usd), hours,
                    rounded(o.monthly_usd / hours, 4) if o.monthly_usd is not None else None, duty,
                    tuple(ApiTier(a.id, a.name, rounded(prices[a.id], 4), a.date or None) for a in chosen),
                    basis, cards, rounded(ratio, 4), why)


def _input_per_output(inp: Any) -> tuple[float, str]:
    """Prompt tokens per output token the APIs bill: the plan's request (--input-tokens/--output-tokens),
    else the default blend (core/cost.py)."""
    if getattr(inp, "input_tokens", None) or getattr(inp, "output_tokens", None):
        from .served import workload

        w = workload(inp.input_tokens, inp.output_tokens, 0)
        return w.input_tokens / w.output_tokens, (f"the request: {w.input_tokens:,} prompt / "
                                                  f"{w.output_tokens:,} answer tokens")
    return cost.DEFAULT_INPUT_PER_OUTPUT, cost.DEFAULT_INPUT_PER_OUTPUT_SOURCE


def _cost_basis(p: Plan) -> tuple[str, str | None]:
    """What the tokens/s of the cost rests on, and the figure whose validation errors give its ranges (None:
    no calibrated throughput, no ranges)."""
    if not p.ctx.model.generates:
        return "none: the model generates no tokens (its throughput is under 'task')", None
    if p.first.speed is not None and p.first.speed.decode_tokens_per_s is None:
        # no calibrated speed for this runtime (transformers, rule-of-thumb): the figures rest on the ceiling
        return "bandwidth ceiling per stream (no calibrated speed for this runtime)", None
    figure = "aggregate_tokens_per_s" if p.ctx.sequences > 1 else "decode_tokens_per_s"
    return _basis(p.ctx.sequences, p.ctx.inp), figure


def _basis(sequences: int, inp: Any = None) -> str:
    asked = inp is not None and (getattr(inp, "input_tokens", None) or getattr(inp, "output_tokens", None))
    if asked:
        from .served import workload

        w = workload(inp.input_tokens, inp.output_tokens, 0)
        return (f"{sequences} stream{'s' if sequences > 1 else ''} serving {w.input_tokens:,}-token "
                f"prompts and {w.output_tokens:,}-token answers (the served throughput `cardfit speed`, "
                "`breakeven --model` and `deploy` report at this concurrency)")
    if sequences > 1:
        return (f"{sequences} streams (the aggregate decode of --batch {sequences} concurrent sequences, "
                "the step `cardfit speed` and `cardfit deploy` time)")
    return "one stream (decode_tokens_per_s of each card); batching makes more"


def _tokens_per_s(s: Speed | None) -> float | None:
    """What a card serves at the plan's concurrency: the aggregate of --batch B sequences, or one stream."""
    if s is None:
        return None
    if s.aggregate_tokens_per_s:
        return s.aggregate_tokens_per_s
    return s.decode_tokens_per_s or s.decode_ceiling_tokens_per_s


def _card_cost(card: CardPlan, hours: float, duty: float, chosen: list[ApiPrice], figure: str | None,
               runtime: str, prices: dict[str, float]) -> CardCost | None:
    o = card.option
    if not o.fits or o.monthly_usd is None:
        return None
    tps = card.tokens_per_s  # the served throughput: worked out for these cards only
    if not tps:
        return None
    hourly = cost.hourly_from_monthly(o.monthly_usd, hours)
    capacity = cost.capacity_millions(tps, hours)
    rows = []
    for a in chosen:
        be = cost.breakeven_millions(o.monthly_usd, prices[a.id])
        duty_needed = cost.required_duty(be, capacity)
        rows.append(CardBreakeven(a.id, rounded(be, 3), rounded(duty_needed, 4), duty_needed <= 1))
    per_m = rounded(cost.cost_per_million(hourly, tps, duty), 4)
    full = rounded(cost.cost_per_million(hourly, tps, 1.0), 4)
    tokens = rounded(tps, 1)
    ranges = None
    if figure is not None:
        ranges = CostRanges(cost_range(per_m, figure, runtime), cost_range(full, figure, runtime),
                            value_range(tokens, figure, runtime))
    return CardCost(o.gpu.name, o.count, rounded(o.monthly_usd, 2), rounded(hourly, 4), tokens,
                    rounded(capacity, 3), full, per_m, tuple(rows), ranges)

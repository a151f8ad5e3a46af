"""Fit verdicts on one card or a set of cards, and the ranking of every card."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import replace
from enum import StrEnum

from ..catalog.gpus import Feature, Gpu
from ..catalog.models import ModelSpec
from ..catalog.records import record
from ..catalog.rental import RentalRules
from ..catalog.runtimes import RuntimeProfile, runs_on
from ..units import fmt_bytes, fmt_shortfall
from .memory import Memory, RuntimeModel
from .placement import Shape, shapes


class Verdict(StrEnum):
    """The answer for one card or set; the value is what JSON and the web page show."""

    FITS = "fits"
    TIGHT = "tight"  # fits with less headroom than the rental guide's margin or the estimate's error bar
    NO = "no"
    OFFLOAD = "offload"  # fits only with whole layers in system RAM (llama.cpp, Ollama, transformers)


class Refusal(StrEnum):
    """Why a card or set says no (the printed reason is text for people; code tests this)."""

    UNSUPPORTED = "unsupported"  # the card cannot compute in the quantization's format (FP8, FP4, BF16)
    MEMORY = "memory"  # the plan needs more than the runtime's budget
    HOST_RAM = "host_ram"  # what spills to system RAM is more than the RAM given
    LINKS = "links"  # a full fine-tune on several cards needs NVLink/NVSwitch and the card has PCIe


FITS, TIGHT, NO, OFFLOAD = Verdict.FITS, Verdict.TIGHT, Verdict.NO, Verdict.OFFLOAD


# without slots: built with one __dict__ update (catalog/records.py _compiled_init), where setting its 14
# slots one call each cost ~20,000 instructions; the every-card plan builds one per card, deploy's search one
# per set
@record
class Option:
    gpu: Gpu
    count: int  # cards in the set (all nodes together)
    usable_bytes: int  # all cards, as the driver reports them
    budget_bytes: int  # what the runtime lets itself use (vLLM: × gpu_memory_utilization)
    need_bytes: int  # memory the plan needs on this set
    verdict: Verdict
    reason: str = ""
    refusal: Refusal | None = None  # set with verdict NO
    monthly_usd: float | None = None  # whole set, after volume discount
    gpu_layer_fraction: float = 1.0  # offload: share of the weights+cache that stays on the GPU
    nodes: int = 1  # nodes the set spans (RentalRules.node_size cards each)
    tp: int = 1  # cards per tensor-parallel group (core/placement.py)
    pp: int = 1  # pipeline stages: across nodes, or layers split over the cards
    # each card's need where the runtime places the model unevenly (a llama.cpp layer split); () when even
    card_need_bytes: tuple[int, ...] = ()

    @property
    def free_bytes(self) -> int:
        """What the set still holds: with an uneven split, what it holds spread as its cards are, each card
        as free as the fullest one (count x the fullest card's room)."""
        return free_on(self.budget_bytes, self.need_bytes, self.count, self.card_need_bytes)


    @property
    def fits(self) -> bool:
        return self.verdict in (FITS, TIGHT)


def free_on(budget: int, need: int, count: int, card_need: tuple[int, ...] = ()) -> int:
    """Option.free_bytes of a set: its budget less its need, and with an uneven split (each card's need in
    `card_need`) at most `count` times the fullest card's room."""
    free = budget - need
    if card_need:
        free = min(free, count * (budget // count - max(card_need)))
    return free


def drafter_bytes(mem: Memory) -> int:
    """A speculative drafter's weights and cache (Memory.draft_bytes); 0 for a need without one (the training
    split of services/finetune.py has the same terms and no drafter)."""
    return getattr(mem, "draft_bytes", 0)


def need_on(mem: Memory, count: int, kv_copies: float = 1.0) -> int:
    """Weights and cache split across the cards; every card pays its own context and workspace; a
    tensor-parallel set may hold more than one copy of the cache (core/kv.py kv_replication)."""
    return (mem.weights_bytes + drafter_bytes(mem) + round(mem.kv_cache_bytes * kv_copies)
            + count * mem.per_card_fixed_bytes)


def set_price(gpu: Gpu, count: int, rules: RentalRules) -> float | None:
    if gpu.monthly_usd is None:
        return None
    return count * gpu.monthly_usd * (1 - rules.discount(count))


STACK_NAMES = {"cuda": "CUDA", "rocm": "ROCm", "metal": "Apple Metal"}


def unsupported(gpu: Gpu, requires: Feature | None, rt: RuntimeProfile | None = None, count: int = 1) -> str:
    """Why the card cannot run this at all, whatever the memory (Refusal.UNSUPPORTED ends a search for a set):
    the runtime does not run on the card's software stack, the card comes one per machine, or it cannot
    compute in the quantization's format."""
    if rt is not None and not runs_on(rt, gpu.stack):
        return (f"{rt.name} has no {STACK_NAMES.get(gpu.stack, gpu.stack)} support; "
                "use --runtime ollama or --runtime llama.cpp")
    if gpu.max_count and count > gpu.max_count:
        return f"{gpu.name} is one GPU per machine (no sets of {count})"
    if requires is not None and not gpu.supports(requires):
        return f"{gpu.name} has no {requires.upper()} support"
    return ""


def tight_below(count: int, rules: RentalRules, margin_bytes: int = 0) -> int:
    """Free bytes under which a fit is tight (GPU Rent Hub VRAM guide, section 05: under 5 GB on one card,
    under 2 GB per card on several; or inside the error bar of the estimate, `margin_bytes`)."""
    guide = rules.tight_single_bytes if count == 1 else rules.tight_per_card_bytes * count
    return guide if guide > margin_bytes else margin_bytes  # max(margin_bytes, guide), each card a call less


def classify(free: int, count: int, rules: RentalRules, margin_bytes: int = 0) -> Verdict:
    """fits / tight / no from the bytes left over."""
    if free < 0:
        return NO
    return TIGHT if free < tight_below(count, rules, margin_bytes) else FITS


class CardBudgets:
    """The runtime budgets of many single cards (-1: a card that cannot run the plan at all), prepared for
    `classify_many`: sorted once. Which cards say no or tight depends only on how many budgets fall below the
    need and below the tight line (ties fall together), so the verdict list of each such pair is worked out
    once and copied after."""

    def __init__(self, budgets: list[int]) -> None:
        self.budgets = list(budgets)
        self._sorted = sorted(self.budgets)
        self._lists: dict[tuple[int, int], list[Verdict]] = {}

    def verdicts(self, need: int, tight: int) -> list[Verdict]:
        key = bisect_left(self._sorted, need), bisect_left(self._sorted, tight)
        found = self._lists.get(key)
        if found is None:
            found = [NO if b < need else TIGHT if b < tight else FITS for b in self.budgets]
            self._lists[key] = found
        return found.copy()


def classify_many(need: int, budgets: list[int] | CardBudgets, rules: RentalRules,
                  margin_bytes: int = 0) -> list[Verdict]:
    """`classify` of one plan (`need` bytes) on many single cards at once (their runtime budgets; a card that
    cannot run the plan at all given as a budget of -1), in the order of `budgets`: no call per card; with
    the budgets as CardBudgets, two bisections and a list copy, so a whole-catalog question (every model ×
    quantization × context on every card) costs a few ns per verdict."""
    tight = need + tight_below(1, rules, margin_bytes)
    if isinstance(budgets, CardBudgets):
        return budgets.verdicts(need, tight)
    return [NO if b < need else TIGHT if b < tight else FITS for b in budgets]


def kv_room(mem: Memory, budget_bytes: int, count: int) -> int:
    """What a set's budget leaves for the KV cache once the weights and every card's fixed bytes are in
    (vLLM's pool: total × gpu_memory_utilization − weights − activation peak − non-torch − CUDA graphs)."""
    return budget_bytes - (mem.weights_bytes + drafter_bytes(mem) + count * mem.per_card_fixed_bytes)


def check(mem: Memory, gpu: Gpu, count: int, rt: RuntimeModel, rules: RentalRules, *,
          requires: Feature | None = None, utilization: float | None = None, ram_bytes: int = 0,
          margin_bytes: int | Callable[[int, float], int] = 0, model: ModelSpec | None = None,
          tp: int | None = None, pp: int | None = None,
          cards: Callable[[int], list[int] | None] | None = None) -> Option:
    """margin_bytes: how much more the plan may really need (core/uncertainty.py need_margin_bytes); a fit
    within it is tight. Given as a function of (cards, KV copies), it is the set's own margin (the overhead
    and workspace of every card, each copy of the cache); as a number, the same for every set.
    tp, pp: the set's split (core/placement.py; default: one tensor-parallel group of the whole set);
    pipeline stages each hold their own layers' cache, so only the tensor-parallel group copies it.
    cards: each card's need on a set of that many cards where the runtime places the model unevenly (a
    llama.cpp layer split: runtimes/llamacpp_like.py split_cards), None where it splits evenly; the fullest
    card then decides the verdict. The set's own part (card_set) and the memory's (check_set)."""
    s = card_set(gpu, count, rt, rules, requires=requires, utilization=utilization, model=model, tp=tp, pp=pp)
    return check_set(mem, s, rt, rules, ram_bytes=ram_bytes, margin_bytes=margin_bytes, model=model,
                     cards=cards)


@record(slots=True)
class CardSet:
    """What `check` reads of a card set, its split and the runtime, the same for every memory estimate: the
    every-card plan keeps one per card (services/plan.py) and asks it again at each context."""

    gpu: Gpu
    count: int
    usable_bytes: int  # all cards, as the driver reports them
    budget_bytes: int  # all cards, what the runtime lets itself use
    kv_copies: float  # copies of the cache the tensor-parallel group holds (core/kv.py kv_replication)
    monthly_usd: float | None  # whole set, after volume discount
    nodes: int
    tp: int
    pp: int
    unsupported: str  # why the set cannot run the plan at all, whatever the memory ("": it can)


def card_set(gpu: Gpu, count: int, rt: RuntimeModel, rules: RentalRules, *, requires: Feature | None = None,
             utilization: float | None = None, model: ModelSpec | None = None, tp: int | None = None,
             pp: int | None = None) -> CardSet:
    """The set's part of `check` (its arguments of the same names)."""
    tp = tp or count
    budget = count * rt.budget_per_card(gpu, utilization, tp, pp or 1, model)
    return CardSet(gpu, count, count * gpu.usable_bytes, budget, rt.kv_copies(model, tp),
                   set_price(gpu, count, rules), rules.nodes(count), tp, pp or max(count // tp, 1),
                   unsupported(gpu, requires, rt.profile, count))


def check_set(mem: Memory, s: CardSet, rt: RuntimeModel, rules: RentalRules, *, ram_bytes: int = 0,
              margin_bytes: int | Callable[[int, float], int] = 0, model: ModelSpec | None = None,
              cards: Callable[[int], list[int] | None] | None = None) -> Option:
    """`check` of a memory estimate on a set's part (card_set)."""
    count, budget, copies = s.count, s.budget_bytes, s.kv_copies
    held = count * rt.budget_for(mem, s.gpu, budget // count, s.tp)  # its own workspace's margin (vLLM 0.34)
    if held != budget:
        s, budget = replace(s, budget_bytes=held), held
    need = need_on(mem, count, copies)
    per_card = tuple(cards(count) or ()) if cards is not None and count > 1 else ()
    if per_card:
        need = sum(per_card)
    if s.unsupported:
        return _option(s, need, per_card, NO, s.unsupported, Refusal.UNSUPPORTED)
    free = free_on(budget, need, count, per_card)  # the fullest card decides an uneven split
    if free >= 0:  # the margin tells fits from tight only: worked out for the sets that hold the plan
        if callable(margin_bytes):
            margin_bytes = margin_bytes(count, copies)
        return _option(s, need, per_card, classify(free, count, rules, margin_bytes))
    if rt.profile.offload and count == 1:
        return _offload(mem, s, need, ram_bytes, model is not None and experts_first(rt.profile, model))
    if per_card and need <= budget:
        over = max(per_card) - budget // count
        why = f"the fullest card of its layer split needs {fmt_shortfall(over)} more"
        return _option(s, need, per_card, NO, why, Refusal.MEMORY)
    return _option(s, need, per_card, NO, f"needs {fmt_shortfall(need - budget)} more", Refusal.MEMORY)


def _option(s: CardSet, need: int, per_card: tuple[int, ...], verdict: Verdict, reason: str = "",
            refusal: Refusal | None = None, gpu_layer_fraction: float = 1.0) -> Option:
    """The Option of a set (its part, `s`) needing `need` bytes (`per_card`: each card's, for an uneven
    split)."""
    return Option(s.gpu, s.count, s.usable_bytes, s.budget_bytes, need, verdict, reason, refusal,
                  s.monthly_usd, gpu_layer_fraction, s.nodes, s.tp, s.pp, per_card)


def experts_first(profile: RuntimeProfile, model: ModelSpec) -> bool:
    """Whether the runtime offloads a MoE model's routed experts before whole layers: llama.cpp at a release
    with --fit (data/releases.toml feature `fit`; its profile keeps fit_target_bytes free; common/fit.cpp
    common_params_fit_impl steps 3-4)."""
    return bool(profile.fit_target_bytes) and model.is_moe


def _on_gpu(mem: Memory, budget: int) -> tuple[int, int]:
    """(layer bytes a card holds beside its fixed workspace, layer bytes: weights + KV cache)."""
    # a speculative drafter (draft_bytes) stays on the card whole: the layers share what it leaves
    held = max(budget - mem.per_card_fixed_bytes - drafter_bytes(mem), 0)
    return held, mem.weights_bytes + mem.kv_cache_bytes


def offload_ram_bytes(mem: Memory, budget: int) -> int:
    """System RAM an offload needs on a card with `budget` bytes: the layers (weights and their KV cache)
    that do not fit on the GPU, plus what the runtime keeps in RAM anyway (llama.cpp: token_embd)."""
    on_gpu, layered = _on_gpu(mem, budget)
    return max(layered - on_gpu, 0) + mem.host_weights_bytes


def _offload(mem: Memory, s: CardSet, need: int, ram_bytes: int, experts_first: bool = False) -> Option:
    """llama.cpp / Ollama put whole layers in system RAM: what stays on the GPU is what fits beside the
    fixed workspace. experts_first: llama-server's --fit moves a MoE model's routed experts first (the same
    bytes; core/speed.py offload_split times them)."""
    budget = s.budget_bytes
    on_gpu, layered = _on_gpu(mem, budget)
    fraction = min(on_gpu / layered, 1.0) if layered else 0.0
    needed = offload_ram_bytes(mem, budget)
    if ram_bytes and needed > ram_bytes:
        return _option(s, need, (), NO, f"offload needs {fmt_bytes(needed)} of system RAM; "
                       f"{fmt_bytes(ram_bytes)} given", Refusal.HOST_RAM)
    moved = (f"{1 - fraction:.0%} of the weights in system RAM, the routed experts first (llama-server --fit)"
             if experts_first else f"{1 - fraction:.0%} of the layers in system RAM")
    return _option(s, need, (), OFFLOAD, moved, gpu_layer_fraction=fraction)


def smallest_set(mem: Memory, gpu: Gpu, rt: RuntimeModel, rules: RentalRules, *,
                 requires: Feature | None = None, utilization: float | None = None, max_nodes: int = 64,
                 margin_bytes: int | Callable[[int, float], int] = 0,
                 model: ModelSpec | None = None) -> Option | None:
    """The fewest cards of this kind that hold the plan: 2/4/8 in one node, then whole nodes, each split as
    core/placement.py places it (the shapes `cardfit deploy` searches)."""
    sets = (set_part(gpu, s, rt, rules, requires=requires, utilization=utilization, model=model)
            for s in set_shapes(gpu, rt, rules, model, max_nodes))
    return smallest_of(mem, sets, rt, rules, margin_bytes=margin_bytes, model=model)


def set_shapes(gpu: Gpu, rt: RuntimeModel, rules: RentalRules, model: ModelSpec | None = None,
               max_nodes: int = 64) -> list[Shape]:
    """The sets smallest_set tries, smallest first: every shape of two cards or more (core/placement.py);
    none for a card sold one per machine."""
    if gpu.max_count == 1:
        return []
    return [s for s in shapes(rt.profile, gpu, model, rules.set_sizes, rules.node_size, max_nodes)
            if s.cards >= 2]


def set_part(gpu: Gpu, shape: Shape, rt: RuntimeModel, rules: RentalRules, *, requires: Feature | None = None,
             utilization: float | None = None, model: ModelSpec | None = None) -> CardSet:
    """The part of a set of `shape` that smallest_set checks (card_set, split as the shape)."""
    return card_set(gpu, shape.cards, rt, rules, requires=requires, utilization=utilization, model=model,
                    tp=shape.tp, pp=shape.pp)


def smallest_of(mem: Memory, sets: Iterable[CardSet], rt: RuntimeModel, rules: RentalRules, *,
                margin_bytes: int | Callable[[int, float], int] = 0,
                model: ModelSpec | None = None) -> Option | None:
    """The first of `sets` (their parts, in smallest_set's order) that holds the plan; None where none does
    or one cannot run it at all (Refusal.UNSUPPORTED: nor can a larger set of the card)."""
    for s in sets:
        opt = check_set(mem, s, rt, rules, margin_bytes=margin_bytes, model=model)
        if opt.fits:
            return opt
        if opt.refusal is Refusal.UNSUPPORTED:
            return None
    return None


def rank(options: list[Option], node_size: int) -> list[Option]:
    """Cheapest first among what fits, in the rental guide's order of preference (GPU Rent Hub VRAM guide,
    section 05): a single card,
    then a set inside one node, then whole nodes; unpriced cards after priced ones of their group, the
    smallest first; then CPU offload; then what does not fit, largest first."""
    def key(o: Option) -> tuple:
        if o.verdict == OFFLOAD:
            return (6, -o.gpu_layer_fraction, o.usable_bytes)
        if not o.fits:
            return (7, -o.usable_bytes, 0)
        size_group = 0 if o.count == 1 else 2 if o.count <= node_size else 4
        priced = o.monthly_usd is not None
        return (size_group + (0 if priced else 1), o.monthly_usd if priced else 0, o.usable_bytes)
    return sorted(options, key=key)


def smallest_by_headroom(weights_bytes: int, gpus: list[Gpu], factor: float) -> Gpu | None:
    """The bare-metal page's lens (Primcast, https://primcast.com/hpc): the smallest card whose usable memory
    holds `factor` × the weights (its table uses
    1.5, "the generous end of the quarter-to-a-half head-room rule")."""
    need = weights_bytes * factor
    holding = [g for g in gpus if g.usable_bytes >= need]
    return min(holding, key=lambda g: g.usable_bytes, default=None)

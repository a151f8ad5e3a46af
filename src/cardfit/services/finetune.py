"""`cardfit finetune`: the fine-tuning inputs, the constants from data/training.toml, and the wiring from
a model name to training memory per method and the cards (or nodes) that hold it. Arithmetic lives in
core/training.py; verdicts and ranking are core/fit.py's, as for inference."""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from typing import Any, Literal

from ..catalog.gpus import Gpu, default_gpus, load_gpus
from ..catalog.loader import builtin
from ..catalog.models import ModelSpec
from ..catalog.records import record
from ..catalog.rental import RentalRules, default_rental
from ..catalog.runtimes import RuntimeProfile, default_runtime
from ..core import fit as fitting
from ..core import training as tr
from ..core.weights import weights
from ..errors import InputError
from ..runtimes import adapter
from ..units import rounded
from .inputs import MAX_CONTEXT, ModelInput, opt
from .resolve import resolve
from .table import Result


@record
class FinetuneInput(ModelInput):
    """A fine-tuning run: method, sequence, micro-batch, cards, adapter and optimizer."""

    method: Literal["full", "lora", "qlora"] = opt("full", "full fine-tune, LoRA on a BF16 base, or QLoRA on "
                                                   "an NF4 (double-quantized) base")
    seq: int = opt(2048, "tokens per training sequence (default 2,048, the rental guide's table)", ge=1,
                   le=MAX_CONTEXT)
    batch: int = opt(1, "micro-batch: sequences per card per step", ge=1, le=65_536)
    gpus: int | None = opt(None, "cards in the set (default: the fewest that hold it)", ge=1, le=4096)
    gpu: str | None = opt(None, "only this card (H100 SXM, MI300X, …)", max_length=128)
    rank: int = opt(16, "LoRA rank r", ge=1, le=65_536)
    targets: Literal["attention", "all", "all+experts"] = opt("attention", "LoRA target modules: attention "
                                                              "projections, all linear layers (MLP too), or "
                                                              "all linear layers and every MoE expert")
    optimizer: str = opt("adamw", "adamw (16 B/param with BF16 weights and grads), adamw-8bit, adafactor, "
                         "sgd (with momentum)", max_length=32)
    checkpointing: bool = opt(True, "gradient checkpointing (activation recomputation)")
    flash_attn: bool = opt(True, "flash attention (no seq × seq score matrix kept)")
    zero: int | None = opt(None, "DeepSpeed ZeRO stage across the cards: 0 (plain data parallel), 1, 2, 3 "
                           "(default 3 on several cards, like FSDP full shard)", ge=0, le=3)
    offload_optimizer: bool = opt(False, "keep master weights and optimizer state in host RAM (ZeRO-Offload)")
    offload_params: bool = opt(False, "also keep the weights in host RAM (ZeRO-Infinity; needs ZeRO 3)")
    flat_activations: bool = opt(False, "use the rental guide's flat 15 % for activations and "
                                 "fragmentation instead of cardfit's activation model")
    priced: bool = opt(False, "rank only cards with a rental price (the rental guide's fleet)")
    require_nvlink: bool = opt(True, "full fine-tunes on several cards need NVLink/NVSwitch (or Infinity "
                               "Fabric), as the rental guide assumes")


@cache
def constants() -> tuple[tr.TrainingConstants, dict[str, tr.Optimizer]]:
    d = builtin("training.toml")
    p, a, lo, link = d["precision"], d["activations"], d["lora"], d["interconnect"]
    c = tr.TrainingConstants(
        weights_bytes=p["weights_bytes"], gradients_bytes=p["gradients_bytes"],
        adapter_bytes=lo["adapter_bytes"], act_bytes=a["bytes_per_element"],
        score_bytes=a["score_bytes_per_element"], swiglu_tensors=a["swiglu_tensors"],
        logits_bytes=a["logits_bytes_per_element"], checkpoint_bytes=a["checkpoint_bytes_per_element"],
        backward_layers=a["backward_layers"], flat_fraction=a["flat_fraction"],
        full_links=tuple(link["full_finetune_links"]), pair_links=tuple(link["pair_links"]))
    opts: dict[str, tr.Optimizer] = {}
    for row in d["optimizer"]:
        o = tr.Optimizer(row["id"], row["name"], row["master_bytes"], row["state_bytes"], row["factored"],
                         row["source"])
        for name in (row["id"], *row.get("aliases", ())):
            opts[name.lower()] = o
    return c, opts


def measurements() -> list[dict[str, Any]]:
    return list(builtin("training.toml")["measurement"])


def optimizer(name: str) -> tr.Optimizer:
    _, opts = constants()
    found = opts.get(name.strip().lower())
    if found is None:
        ids = sorted({o.id for o in opts.values()})
        raise InputError(f"unknown optimizer '{name}'", field="optimizer",
                         hint=f"choose one of {', '.join(ids)}")
    return found


def base_weights_bytes(m: ModelSpec, method: str) -> int:
    """Frozen or trained weights at their training precision: BF16, or NF4 with double quantization and
    16-bit embeddings/output for QLoRA (the quant catalog's nf4 type, scope 'linear')."""
    from ..catalog.quants import default_quants

    q = default_quants().get("nf4" if method == tr.QLORA else "bf16")
    return weights(m, q).total_bytes


def settings(inp: FinetuneInput, method: str | None = None) -> tr.TrainingSettings:
    rt = _runtime()
    return tr.TrainingSettings(method=method or inp.method, seq=inp.seq, batch=inp.batch, rank=inp.rank,
                               targets=inp.targets, checkpointing=inp.checkpointing,
                               flash_attn=inp.flash_attn, flat_activations=inp.flat_activations,
                               overhead_bytes=rt.context_bytes)


def memory(m: ModelSpec, inp: FinetuneInput, method: str | None = None) -> tr.TrainingMemory:
    c, _ = constants()
    s = settings(inp, method)
    return tr.training_memory(m, base_weights_bytes(m, s.method), optimizer(inp.optimizer), c, s)


def _runtime() -> RuntimeProfile:
    """Training runs in PyTorch: its CUDA context, the whole card, no layer offload (that is ZeRO's job)."""
    rt = default_runtime("training")
    return replace(rt, offload=False, gpu_memory_utilization=1.0)


def link_ok(gpu: Gpu, count: int, method: str, c: tr.TrainingConstants) -> bool:
    if method != tr.FULL or count == 1:
        return True
    return gpu.interconnect in c.full_links or (count == 2 and gpu.interconnect in c.pair_links)


@record
class Choice:
    option: fitting.Option
    split: tr.Split


def _zero(inp: FinetuneInput, count: int) -> int:
    if inp.offload_params and inp.zero is not None and inp.zero < 3:
        raise InputError("--offload-params needs ZeRO stage 3", field="offload_params", hint="pass --zero 3")
    return inp.zero if inp.zero is not None else (3 if count > 1 else 0)


def check(mem: tr.TrainingMemory, inp: FinetuneInput, gpu: Gpu, count: int, rules: RentalRules) -> Choice:
    c, _ = constants()
    sp = tr.split(mem, count, _zero(inp, count), inp.offload_optimizer, inp.offload_params)
    opt = fitting.check(sp, gpu, count, adapter(_runtime()), rules, utilization=1.0)  # type: ignore[arg-type]
    host = builtin("training.toml").get("host", {})
    nodes = rules.nodes(count)
    host_ram = int(host.get("ram_bytes_per_node", 0)) * nodes
    if opt.fits and host_ram and sp.host_bytes > host_ram:
        opt = replace(opt, verdict=fitting.NO, refusal=fitting.Refusal.HOST_RAM,
                      reason=f"offload needs {sp.host_bytes / 1e12:,.1f} TB of host RAM; {nodes} node(s) "
                             f"have {host_ram / 1e12:,.0f} TB (GPU Rent Hub VRAM guide (2026-09-01))")
    if opt.fits and inp.require_nvlink and not link_ok(gpu, count, mem.method, c):
        opt = replace(opt, verdict=fitting.NO, refusal=fitting.Refusal.LINKS,
                      reason=f"a full fine-tune on {count} cards needs NVLink/NVSwitch; "
                      f"{gpu.name} has {gpu.interconnect}")
    return Choice(opt, sp)


def smallest(mem: tr.TrainingMemory, inp: FinetuneInput, gpu: Gpu, rules: RentalRules,
             max_nodes: int = 64) -> Choice:
    first = check(mem, inp, gpu, max(gpu.min_count, 1), rules)
    if first.option.fits or inp.gpus:
        return first
    for n in rules.larger_sets(gpu.min_count, max_nodes):
        ch = check(mem, inp, gpu, n, rules)
        if ch.option.fits:
            return ch
        if ch.option.refusal is fitting.Refusal.LINKS:
            return ch
    return first


def choices(mem: tr.TrainingMemory, inp: FinetuneInput) -> list[Choice]:
    gpus = load_gpus(tuple(inp.catalog)) if inp.catalog else default_gpus()
    rules = default_rental()
    pool = ([gpus.get(inp.gpu)] if inp.gpu
            else [g for g in gpus if g.monthly_usd is not None or not inp.priced])
    out = [check(mem, inp, g, inp.gpus, rules) if inp.gpus else smallest(mem, inp, g, rules) for g in pool]
    by_id = {id(ch.option): ch for ch in out}
    return [by_id[id(o)] for o in fitting.rank([ch.option for ch in out], rules.node_size)]


def model_for(inp: FinetuneInput) -> tuple[ModelSpec, bool, str]:
    r = resolve(inp)
    m, guessed = tr.estimated_shape(r.model)
    return m, guessed, r.origin



@record
class FinetuneModel(Result):
    id: str
    name: str
    params: int
    layers: int
    hidden: int
    vocab: int
    attention: str
    origin: str  # where the model came from (catalog, file, Hub …)
    shape_estimated: bool  # widths estimated from the size with Llama proportions


@record
class FinetuneSettings(Result):
    """The run as understood (the `inputs` of the JSON)."""

    method: str
    seq: int
    batch: int
    rank: int
    targets: str
    optimizer: str
    checkpointing: bool
    flash_attn: bool
    zero: int | None
    offload_optimizer: bool
    offload_params: bool
    flat_activations: bool
    gpus: int | None
    gpu: str | None


@record
class MemoryTerm(Result):
    name: str
    bytes: int
    how: str


@record
class TrainingMemoryView(Result):
    weights_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    master_bytes_in_optimizer: int  # the FP32 master copy, part of optimizer_bytes; never to be added again
    activation_bytes: int
    adapter_bytes: int
    overhead_bytes: int
    total_bytes: int
    flat_activation_bytes: int
    trainable_params: int
    adapter_params: int
    terms: tuple[MemoryTerm, ...]


@record
class FinetuneCard(Result):
    """One card or set of cards for the run."""

    gpu: str
    gpu_id: str
    count: int
    nodes: int
    usable_bytes: int
    need_bytes: int
    free_bytes: int
    per_card_bytes: int
    host_ram_bytes: int
    zero: int
    interconnect: str
    verdict: fitting.Verdict
    reason: str | None
    monthly_usd: float | None


@record
class MethodRow(Result):
    """One method in the side-by-side table."""

    method: str
    total_bytes: int
    weights_bytes: int
    trainable_params: int
    activation_bytes: int


@record
class GuideRule(Result):
    """The rental guide's rules of thumb, for comparison (JSON key `seed_rule`)."""

    full_bytes: int
    full_with_activations_bytes: int
    lora_bytes: int
    qlora_bytes: int


@record
class Finetune(Result):
    """`cardfit finetune`: memory by term, the three methods side by side, and the cards that hold it."""

    model: FinetuneModel
    inputs: FinetuneSettings
    memory: TrainingMemoryView
    gpus: tuple[FinetuneCard, ...]
    methods: tuple[MethodRow, ...]
    seed_rule: GuideRule
    notes: tuple[str, ...]


def memory_view(mem: tr.TrainingMemory) -> TrainingMemoryView:
    return TrainingMemoryView(mem.weights_bytes, mem.gradients_bytes, mem.optimizer_bytes, mem.master_bytes,
                              mem.activation_bytes, mem.adapter_bytes, mem.overhead_bytes, mem.total_bytes,
                              mem.flat_activation_bytes, mem.trainable_params, mem.adapter_params,
                              tuple(MemoryTerm(t.name, t.nbytes, t.how) for t in mem.terms))


def card_view(ch: Choice) -> FinetuneCard:
    o, sp = ch.option, ch.split
    return FinetuneCard(o.gpu.name, o.gpu.id, o.count, o.nodes, o.usable_bytes, o.need_bytes, o.free_bytes,
                        sp.per_card_bytes, sp.host_bytes, sp.zero, o.gpu.interconnect, o.verdict,
                        o.reason or None, rounded(o.monthly_usd))


def guide_rule(m: ModelSpec, c: tr.TrainingConstants) -> GuideRule:
    """The rental guide's rules (GPU Rent Hub VRAM guide, section 04), for comparison: 16 B/param (+15 %),
    LoRA 2 B/param + 0.5 % adapter at 16 B, QLoRA 0.5 B/param + the same adapter."""
    adapter = round(m.params * 0.005) * 16
    return GuideRule(16 * m.params, round(16 * m.params * (1 + c.flat_fraction)), 2 * m.params + adapter,
                     m.params // 2 + adapter)


DIFFERENCE_NOTE = ("The rental guide's LoRA/QLoRA columns are 6-14 GB above its own rule (2 or 0.5 B/param "
                   "+ adapter) without saying why; cardfit adds what it computes instead: activations for "
                   "the sequence and micro-batch (checkpointed layer inputs, one layer recomputed, fp32 "
                   "logits) and the CUDA context.")


def compare(m: ModelSpec, inp: FinetuneInput) -> tuple[MethodRow, ...]:
    rows = []
    for method in tr.METHODS:
        mem = memory(m, inp, method)
        rows.append(MethodRow(method, mem.total_bytes, mem.weights_bytes, mem.trainable_params,
                              mem.activation_bytes))
    return tuple(rows)


def finetune_report(inp: FinetuneInput) -> Finetune:
    m, guessed, origin = model_for(inp)
    c, _ = constants()
    opt = optimizer(inp.optimizer)
    mem = memory(m, inp)
    ranked = choices(mem, inp)
    notes = []
    if guessed:
        notes.append(f"{m.name} gives no layer widths: hidden {m.hidden:,}, FFN {m.intermediate:,}, "
                     f"vocabulary {m.vocab:,} estimated from its size with Llama proportions (adapter and "
                     "activations only)")
    if inp.method != tr.FULL:
        notes.append(DIFFERENCE_NOTE)
    if inp.method == tr.FULL and not inp.require_nvlink:
        notes.append("NVLink requirement off: PCIe all-reduce every step is slow")
    return Finetune(
        model=FinetuneModel(m.id, m.name, m.params, m.layers, m.hidden, m.vocab, m.attention, origin,
                            guessed),
        inputs=FinetuneSettings(inp.method, inp.seq, inp.batch, inp.rank, inp.targets, opt.id,
                                inp.checkpointing, inp.flash_attn, inp.zero, inp.offload_optimizer,
                                inp.offload_params, inp.flat_activations, inp.gpus, inp.gpu),
        memory=memory_view(mem),
        gpus=tuple(card_view(ch) for ch in ranked),
        methods=compare(m, inp),
        seed_rule=guide_rule(m, c),
        notes=tuple(notes),
    )

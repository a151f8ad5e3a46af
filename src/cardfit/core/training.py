"""Fine-tuning memory: weights, gradients, master weights and optimizer state for what is
trained, LoRA adapters from the real layer shapes, activations from sequence, micro-batch and the
model's widths, and how ZeRO stages and offload split it across cards and host RAM. Pure arithmetic:
every constant arrives in a TrainingConstants record read from data/training.toml."""

from __future__ import annotations

import math

from ..catalog.models import ModelSpec
from ..catalog.records import record
from .tensors import TensorGroup, has_shapes, tensor_groups

FULL, LORA, QLORA = "full", "lora", "qlora"
METHODS = (FULL, LORA, QLORA)
TARGETS = ("attention", "all", "all+experts")
ATTENTION_KINDS = frozenset({"attn_q", "attn_k", "attn_v", "attn_output", "attn_q_a", "attn_q_b",
                             "attn_kv_a_mqa", "attn_kv_b", "ssm_in", "ssm_out"})
MLP_KINDS = frozenset({"ffn_gate", "ffn_up", "ffn_down", "ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp"})
EXPERT_KINDS = frozenset({"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"})
DEFAULT_VOCAB = 32000  # a shape without a vocabulary: the smallest common one (Llama 2, Mistral 7B)
SWIGLU_RATIO = 11008 / 4096  # Llama 2 7B intermediate / hidden, used only to guess a bare shape's widths


@record(slots=True)
class Optimizer:
    id: str
    name: str
    master_bytes: int  # FP32 master copy per trainable parameter
    state_bytes: int  # per trainable parameter (0 for a factored optimizer: computed from shapes)
    factored: bool = False
    source: str = ""


@record(slots=True)
class TrainingConstants:
    weights_bytes: int  # trained weights' working copy (BF16)
    gradients_bytes: int
    adapter_bytes: int
    act_bytes: int  # per activation element
    score_bytes: int  # per attention-score element without flash attention
    swiglu_tensors: int
    logits_bytes: int  # per logit element (bf16 + fp32 copies)
    checkpoint_bytes: int
    # layers' worth of activations live while one layer runs backward (its own + gradients)
    backward_layers: int
    flat_fraction: float
    full_links: tuple[str, ...]
    pair_links: tuple[str, ...]


@record(slots=True)
class TrainingSettings:
    method: str = FULL
    seq: int = 2048
    batch: int = 1  # micro-batch per card
    rank: int = 16
    targets: str = "attention"
    checkpointing: bool = True
    flash_attn: bool = True
    flat_activations: bool = False  # the rental guide's flat 15 % instead of the activation model
    overhead_bytes: int = 0  # CUDA context + framework per card


@record(slots=True)
class Term:
    name: str
    nbytes: int
    how: str
    sharded_from: int  # ZeRO stage from which this term is split across cards (4: never)
    offload: str = ""  # "optimizer" | "params": moves to host RAM when that offload is on


@record(slots=True)
class TrainingMemory:
    method: str
    weights_bytes: int
    gradients_bytes: int
    optimizer_bytes: int  # FP32 master + optimizer state
    master_bytes: int
    activation_bytes: int
    adapter_bytes: int
    overhead_bytes: int
    trainable_params: int
    adapter_params: int
    flat_activation_bytes: int  # the rental guide's 15 % of the state, for comparison
    terms: tuple[Term, ...]

    @property
    def total_bytes(self) -> int:
        return sum(t.nbytes for t in self.terms)


def estimated_shape(m: ModelSpec) -> tuple[ModelSpec, bool]:
    """A model known only by its size and attention (the rental guide's generic shapes): hidden, heads,
    FFN width and vocabulary guessed from the parameter count with Llama proportions, so adapters and
    activations have widths. Returns (model, guessed)."""
    if has_shapes(m):
        return m, False
    vocab = m.vocab or DEFAULT_VOCAB
    kv = m.kv_heads * m.head_dim
    hidden = m.hidden
    if not hidden:  # params ≈ L·(2h² + 2h·kv + 3·r·h²) + 2·V·h, solved for h
        a, b = m.layers * (2 + 3 * SWIGLU_RATIO), m.layers * 2 * kv + 2 * vocab
        h = (-b + math.sqrt(b * b + 4 * a * m.params)) / (2 * a)
        hidden = max(round(h / m.head_dim), 1) * m.head_dim
    heads = m.heads or max(hidden // m.head_dim, 1)
    q = heads * m.head_dim
    attn = m.layers * (2 * hidden * q + 2 * hidden * kv)
    ffn = max((m.params - attn - 2 * vocab * hidden) // (3 * hidden * m.layers), hidden)
    return m.with_(hidden=hidden, heads=heads, intermediate=m.intermediate or ffn, vocab=vocab), True


def _targeted(g: TensorGroup, targets: str) -> bool:
    if not g.matrix or g.kind in ("token_embd", "output"):
        return False
    if g.kind in ATTENTION_KINDS:
        return True
    if g.kind in MLP_KINDS:
        return targets in ("all", "all+experts")
    return g.kind in EXPERT_KINDS and targets == "all+experts"


def lora_params(m: ModelSpec, rank: int, targets: str) -> int:
    """LoRA adds A (r × in) and B (out × r) beside each targeted matrix: r·(in + out) parameters; a
    stacked expert tensor gets one adapter per expert (Hu et al. 2021)."""
    total = 0
    for g in tensor_groups(m):
        if not _targeted(g, targets):
            continue
        n_mats = m.experts if g.kind in EXPERT_KINDS else 1
        inp = g.row
        out = g.n_params // (inp * n_mats)
        total += n_mats * rank * (inp + out)
    return total


def _factored_state(m: ModelSpec, trainable: str, rank: int, targets: str) -> int:
    """Adafactor: FP32 row + column statistics per matrix (n + m values), full FP32 for vectors."""
    total = 0
    for g in tensor_groups(m):
        if trainable == FULL:
            n_mats = m.experts if g.kind in EXPERT_KINDS else 1
            out = g.n_params // (g.row * n_mats)
            total += 4 * (n_mats * (g.row + out) if g.matrix else g.n_params)
        elif _targeted(g, targets):
            n_mats = m.experts if g.kind in EXPERT_KINDS else 1
            out = g.n_params // (g.row * n_mats)
            total += 4 * n_mats * (2 * rank + g.row + out)  # A: r + in, B: out + r
    return total


def layer_bytes_per_token(m: ModelSpec, c: TrainingConstants, s: TrainingSettings) -> int:
    """Activations one decoder layer keeps per token for its backward pass (Korthikanti et al. 2022
    eq. 2 with the model's real widths, no dropout; flash attention drops the a·s score matrices)."""
    h, e = m.hidden, c.act_bytes
    if m.attention == "mla":
        q = m.heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
        qkv = q + m.kv_lora_rank + m.qk_rope_head_dim + m.heads * (m.qk_nope_head_dim + m.v_head_dim)
        attn_out = m.heads * m.v_head_dim
    else:
        q = m.heads * m.head_dim
        qkv = q + 2 * m.kv_heads * m.head_dim
        attn_out = q
    attention = e * (h + qkv + attn_out)  # QKV input, Q/K/V, attention output (= out-proj input)
    if not s.flash_attn:
        attention += c.score_bytes * m.heads * s.seq  # scores + softmax + mask, per query token
    if m.is_moe:
        f = m.moe_intermediate * m.experts_active + (m.shared_intermediate
                                                     or m.shared_experts * m.moe_intermediate)
        mlp = e * (h * (1 + m.experts_active) + c.swiglu_tensors * f)  # routed copies of the input
    else:
        mlp = e * (h + c.swiglu_tensors * m.intermediate)
    norms = 2 * e * h  # two RMSNorm inputs
    lora = 0
    if s.method != FULL:
        per = 2 if s.targets == "attention" else 7
        lora = per * 2 * e * s.rank  # the r-wide intermediate of each adapter (input is shared)
    return attention + mlp + norms + lora


def activation_bytes(m: ModelSpec, c: TrainingConstants, s: TrainingSettings) -> int:
    """Per card, for one micro-batch: layer activations (all layers, or with checkpointing one BF16
    hidden state per layer boundary plus one layer recomputed), plus the logits of the loss."""
    tokens = s.seq * s.batch
    per_layer = layer_bytes_per_token(m, c, s)
    if s.checkpointing:  # stored layer inputs, then the layer being recomputed and its gradients
        layers = m.layers * c.checkpoint_bytes * m.hidden + c.backward_layers * per_layer
    else:
        layers = (m.layers + c.backward_layers - 1) * per_layer
    return tokens * (layers + c.logits_bytes * m.vocab)


def training_memory(m: ModelSpec, base_weights_bytes: int, opt: Optimizer, c: TrainingConstants,
                    s: TrainingSettings) -> TrainingMemory:
    """The memory of one training replica before any sharding. base_weights_bytes: the model's weights at
    the precision it is held in (BF16 for full and LoRA, NF4 with 16-bit embeddings for QLoRA)."""
    if s.method == FULL:
        trainable, adapter_params = m.params, 0
        weights = base_weights_bytes
    else:
        adapter_params = lora_params(m, s.rank, s.targets)
        trainable = adapter_params
        weights = base_weights_bytes
    grads = trainable * c.gradients_bytes
    master = trainable * opt.master_bytes
    state = _factored_state(m, s.method, s.rank, s.targets) if opt.factored else trainable * opt.state_bytes
    adapter = adapter_params * c.adapter_bytes
    states = weights + grads + master + state + adapter
    flat = round(states * c.flat_fraction)
    act = flat if s.flat_activations else activation_bytes(m, c, s)
    overhead = 0 if s.flat_activations else s.overhead_bytes
    frozen = s.method != FULL
    terms = (
        Term("weights", weights,
             ("frozen base" if frozen else "trained weights") + f", {8 * weights / m.params:.2f} bits/param",
             3, "params"),
        Term("adapter", adapter, f"{adapter_params:,} adapter params × {c.adapter_bytes} B", 3, "params"),
        Term("gradients", grads, f"{trainable:,} trainable params × {c.gradients_bytes} B", 2),
        Term("master weights", master, f"FP32 copy, {opt.master_bytes} B per trainable param", 1,
             "optimizer"),
        Term("optimizer state", state,
             f"{opt.name}" + ("" if opt.factored else f", {opt.state_bytes} B per trainable param"), 1,
             "optimizer"),
        Term("activations", act, "flat 15 % of the above (rental guide)" if s.flat_activations else
             f"seq {s.seq:,} × micro-batch {s.batch}, checkpointing {'on' if s.checkpointing else 'off'}",
             3 if s.flat_activations else 4),
        Term("overhead", overhead, "CUDA context and framework", 4),
    )
    return TrainingMemory(s.method, weights, grads, master + state, master, act, adapter, overhead, trainable,
                          adapter_params, flat, terms)


@record(slots=True)
class Split:
    """A TrainingMemory laid out on `count` cards: `weights_bytes` is the part split across the set and
    `per_card_fixed_bytes` the part every card holds (the shape core.fit.check expects), plus host RAM."""

    weights_bytes: int
    per_card_fixed_bytes: int
    host_bytes: int
    count: int
    zero: int
    kv_cache_bytes: int = 0

    @property
    def per_card_bytes(self) -> int:
        return -(-self.weights_bytes // self.count) + self.per_card_fixed_bytes


def split(mem: TrainingMemory, count: int, zero: int, offload_optimizer: bool = False,
          offload_params: bool = False) -> Split:
    """ZeRO stage 1 shards optimizer state (master + moments), 2 also gradients, 3 also the weights
    (Rajbhandari et al. 2020); offload moves optimizer state (ZeRO-Offload) or also parameters (ZeRO-Infinity,
    stage 3) to host RAM."""
    sharded = fixed = host = 0
    for t in mem.terms:
        if (t.offload == "optimizer" and offload_optimizer) or (t.offload == "params" and offload_params):
            host += t.nbytes
        elif count > 1 and zero >= t.sharded_from:
            sharded += t.nbytes
        elif count == 1 and t.sharded_from < 4:
            sharded += t.nbytes
        else:
            fixed += t.nbytes
    return Split(sharded, fixed, host, count, zero)

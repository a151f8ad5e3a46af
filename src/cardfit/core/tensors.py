"""Where a model's parameters live: a list of tensor groups computed from config.json shapes, named
like GGUF tensors (token_embd, attn_v, ffn_down_exps …) so quantization mixes can be applied per kind."""

from __future__ import annotations

from functools import lru_cache

from ..catalog.models import ModelSpec
from ..catalog.records import record


@record(slots=True)
class TensorGroup:
    kind: str  # GGUF-style tensor kind
    layer: int  # -1 outside the repeated blocks
    n_params: int
    row: int  # length of one row (ne[0]): the input width, which must divide into quant blocks
    matrix: bool = True  # 1-D tensors (norms, biases) are never quantized


def has_shapes(m: ModelSpec) -> bool:
    """Decoder layouts only: an encoder's tensors (biases, two-matrix FFN, position table) are counted by
    encoder_params."""
    shaped = m.hidden and m.vocab and m.heads and (m.intermediate or m.moe_intermediate)
    return bool(shaped) and not m.encoder_only


def encoder_params(m: ModelSpec) -> int:
    """BERT / XLM-R layout (transformers' BertModel): word + position + one token-type embedding and their
    LayerNorm; per layer Q, K, V, O with biases, a two-matrix FFN with biases and two LayerNorms; the pooler.
    XLM-R large (24 x 1024, FFN 4096, vocab 250,002, 514 positions) gives 559.9M, its model card's 560M."""
    h, f = m.hidden, m.intermediate
    embeddings = (m.vocab + m.max_context + 1) * h + 2 * h
    layer = 4 * (h * h + h) + (h * f + f) + (f * h + h) + 4 * h
    return embeddings + m.layers * layer + h * h + h


def _attention(m: ModelSpec, i: int) -> list[TensorGroup]:
    h = m.hidden
    if m.attention == "mla":
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        out = []
        if m.q_lora_rank:
            out += [TensorGroup("attn_q_a", i, h * m.q_lora_rank, h),
                    TensorGroup("attn_q_a_norm", i, m.q_lora_rank, m.q_lora_rank, False),
                    TensorGroup("attn_q_b", i, m.q_lora_rank * m.heads * qk, m.q_lora_rank)]
        else:
            out.append(TensorGroup("attn_q", i, h * m.heads * qk, h))
        out += [TensorGroup("attn_kv_a_mqa", i, h * (m.kv_lora_rank + m.qk_rope_head_dim), h),
                TensorGroup("attn_kv_a_norm", i, m.kv_lora_rank, m.kv_lora_rank, False),
                TensorGroup("attn_kv_b", i, m.kv_lora_rank * m.heads * (m.qk_nope_head_dim + m.v_head_dim),
                            m.kv_lora_rank),
                TensorGroup("attn_output", i, m.heads * m.v_head_dim * h, m.heads * m.v_head_dim)]
        return out
    q, kv = m.heads * m.head_dim, m.kv_heads * m.head_dim
    out = [TensorGroup("attn_q", i, h * q, h), TensorGroup("attn_k", i, h * kv, h),
           TensorGroup("attn_v", i, h * kv, h), TensorGroup("attn_output", i, q * h, q)]
    if m.attention_bias or m.model_type in ("qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl"):
        out.append(TensorGroup("attn_bias", i, q + 2 * kv, q + 2 * kv, False))
    return out


def _linear_attention(m: ModelSpec, i: int) -> list[TensorGroup]:
    """Gated DeltaNet (Qwen3-Next / Qwen3.5) projections: qkvz in, beta/alpha in, conv, out."""
    h = m.hidden
    k = m.linear_key_heads * m.linear_key_head_dim
    v = m.linear_value_heads * m.linear_value_head_dim
    conv_dim = 2 * k + v
    return [TensorGroup("ssm_in", i, h * (2 * k + 2 * v), h),
            TensorGroup("ssm_ba", i, h * 2 * m.linear_value_heads, h),
            TensorGroup("ssm_conv1d", i, conv_dim * max(m.linear_conv_kernel, 1),
                        max(m.linear_conv_kernel, 1), False),
            TensorGroup("ssm_misc", i, 2 * m.linear_value_heads + m.linear_value_head_dim, 1, False),
            TensorGroup("ssm_out", i, v * h, v)]


def _ffn(m: ModelSpec, i: int) -> list[TensorGroup]:
    h = m.hidden
    if not m.is_moe or i < m.dense_layers:
        f = m.intermediate
        up = [TensorGroup("ffn_up", i, h * f, h), TensorGroup("ffn_down", i, f * h, f)]
        return [TensorGroup("ffn_gate", i, h * f, h), *up] if m.gated_ffn else up
    e, f = m.experts, m.moe_intermediate
    out = [TensorGroup("ffn_gate_inp", i, h * e, h, False),
           TensorGroup("ffn_gate_exps", i, e * h * f, h), TensorGroup("ffn_up_exps", i, e * h * f, h),
           TensorGroup("ffn_down_exps", i, e * f * h, f)]
    sf = m.shared_intermediate or (m.shared_experts * f if m.shared_experts else 0)
    if sf:
        out += [TensorGroup("ffn_gate_shexp", i, h * sf, h), TensorGroup("ffn_up_shexp", i, h * sf, h),
                TensorGroup("ffn_down_shexp", i, sf * h, sf)]
    return out


def _is_linear_layer(m: ModelSpec, i: int) -> bool:
    """Hybrid layouts put one full-attention layer after every (ratio) linear ones (Qwen3-Next: 3 of 4)."""
    if not m.linear_layers:
        return False
    full = m.layers - m.linear_layers
    every = m.layers // full if full else m.layers + 1
    return (i + 1) % every != 0


def tensor_groups(m: ModelSpec) -> list[TensorGroup]:
    """All weight tensors of the model, from its shapes (requires has_shapes)."""
    return list(_tensor_groups(m))


@lru_cache(maxsize=1024)  # weights, speed and validation each ask for the same model's tensors
def _tensor_groups(m: ModelSpec) -> tuple[TensorGroup, ...]:
    return tuple(TensorGroup(kind, layer, n, row, matrix) for kind, layer, n, row, matrix in shapes(m))


@lru_cache(maxsize=1024)
def shapes(m: ModelSpec) -> tuple[tuple[str, int, int, int, bool], ...]:
    """tensor_groups as (kind, layer, n_params, row, matrix), in the same order, without a record per
    tensor: the layers of one kind (full or linear attention, dense or MoE FFN) share their shapes."""
    h = m.hidden
    out = [("token_embd", -1, m.vocab * h, h, True)]
    templates: dict[tuple[bool, bool], tuple[tuple[str, int, int, bool], ...]] = {}
    for i in range(m.layers):
        linear, dense = _is_linear_layer(m, i), not m.is_moe or i < m.dense_layers
        template = templates.get((linear, dense))
        if template is None:
            groups = [TensorGroup("attn_norm", i, 2 * h, h, False),
                      *(_linear_attention(m, i) if linear else _attention(m, i)), *_ffn(m, i)]
            template = templates[linear, dense] = tuple((g.kind, g.n_params, g.row, g.matrix) for g in groups)
        out += [(kind, i, n, row, matrix) for kind, n, row, matrix in template]
    out.append(("output_norm", -1, h, h, False))
    if not m.tied_embeddings:
        out.append(("output", -1, m.vocab * h, h, True))
    return tuple(out)


@lru_cache(maxsize=1024)  # a deploy search asks it for every replica of an attention-DP layout
def attention_params(m: ModelSpec) -> int:
    """Parameters of the attention projections (q, k, v or MLA's low-rank ones, and the output), every layer
    of full attention: the weights a data-parallel attention rank holds whole (requires has_shapes)."""
    return sum(n for kind, _, n, _, matrix in shapes(m) if kind.startswith("attn_") and matrix)


def shape_params(m: ModelSpec) -> int:
    return sum(g.n_params for g in tensor_groups(m))


def active_shape_params(m: ModelSpec) -> int:
    """Parameters touched per token: routed experts count only experts_active of experts; the
    embedding table is a lookup, not a read of the whole matrix."""
    total = 0
    for g in tensor_groups(m):
        if g.kind.endswith("_exps"):
            total += g.n_params * m.experts_active // m.experts
        elif g.kind != "token_embd" or m.tied_embeddings:
            total += g.n_params
    return total


def expert_active_params(m: ModelSpec) -> int:
    """Routed-expert parameters one token goes through (experts_active of the experts of every MoE layer;
    requires has_shapes); 0 for a dense model."""
    if not (m.is_moe and m.experts):
        return 0
    routed = sum(g.n_params for g in tensor_groups(m) if g.kind.endswith("_exps"))
    return routed * m.experts_active // m.experts


# Architectures whose checkpoints store fused projections, kept fused by llama.cpp's convert_hf_to_gguf.py:
# Phi-3/Phi-4 ship qkv_proj and gate_up_proj (GGUF attn_qkv, and ffn_up with 2 × n_ff rows, no ffn_gate).
_FUSED_QKV_GATE_UP = frozenset({"phi3"})


def fused_in_gguf(m: ModelSpec) -> bool:
    """Whether the GGUF file stores some of the model's projections fused (gguf_tensor_groups)."""
    return m.model_type in _FUSED_QKV_GATE_UP


def gguf_tensor_groups(m: ModelSpec) -> list[TensorGroup]:
    """tensor_groups as a GGUF file names them: fused where the architecture is stored fused, which
    changes the mix rules (attn_qkv follows attn_v's rule as one tensor)."""
    groups = tensor_groups(m)
    if m.model_type not in _FUSED_QKV_GATE_UP:
        return groups
    out: list[TensorGroup] = []
    pending: dict[tuple[int, str], int] = {}  # (layer, fused kind) → where its tensor is in `out`
    for g in groups:
        fused = {"attn_q": "attn_qkv", "attn_k": "attn_qkv", "attn_v": "attn_qkv",
                 "ffn_gate": "ffn_up", "ffn_up": "ffn_up"}.get(g.kind)
        if fused is None:
            out.append(g)
            continue
        at = pending.get((g.layer, fused))
        prev = 0 if at is None else out[at].n_params
        merged = TensorGroup(fused, g.layer, g.n_params + prev, g.row)
        if at is None:
            pending[(g.layer, fused)] = len(out)
            out.append(merged)
        else:
            out[at] = merged
    return out

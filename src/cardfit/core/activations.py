"""Prefill workspace: memory a runtime needs besides weights and cache while it processes a chunk of
prompt tokens. It grows with the chunk (and, without flash attention, with the context), which is why a
model can load and still fail on its first long prompt.

Three shapes, one per family of runtimes (runtimes/vllm_like.py, llamacpp_like.py, torch_like.py call them):
- llamacpp: ggml reserves one compute buffer for the worst-case graph of one micro-batch (n_ubatch
  tokens) against the full cache; the buffer holds the largest set of live f32 tensors of any phase.
- vllm: the profile run pushes max_num_batched_tokens tokens through the model once, then samples one
  token for each of up to max_num_seqs sequences; the PyTorch peak is the larger of the two.
- torch: transformers `generate` prefills the whole prompt at once in the model dtype (unless chunked)."""

from __future__ import annotations

from ..catalog.models import ModelSpec

F32 = 4  # ggml graph activations are f32
ACT = 2  # bf16/fp16 activations in PyTorch runtimes


def _dims(m: ModelSpec) -> tuple[int, int, int, int]:
    hidden = m.hidden or m.heads * m.head_dim or m.kv_heads * m.head_dim * 4
    heads = m.heads or max(hidden // m.head_dim, 1)
    ffn = max(m.intermediate, m.moe_intermediate * max(m.experts_active, 1),
              4 * hidden if not m.intermediate else 0)
    vocab = m.vocab or 32000  # a model given only by its shape: the smallest common vocabulary
    return hidden, heads, ffn, vocab


def llamacpp_compute_bytes(m: ModelSpec, n_ubatch: int, n_ctx: int, flash_attn: bool) -> int:
    """Largest phase of one micro-batch's graph (ggml-alloc reuses memory between phases)."""
    hidden, heads, ffn, vocab = _dims(m)
    t = n_ubatch
    residual = 4 * t * hidden * F32  # input, norm output, attention output and residual in flight
    if flash_attn:
        attention = t * n_ctx * 2 + residual  # f16 KQ mask only; scores stay in on-chip tiles
    else:
        attention = t * n_ctx * heads * F32 + t * n_ctx * F32 + residual  # KQ scores + f32 mask
    logits = t * vocab * F32 + t * hidden * F32
    ffn_phase = 2 * t * ffn * F32 + 2 * t * hidden * F32
    return max(attention, logits, ffn_phase)


def vllm_profile_bytes(m: ModelSpec, batched_tokens: int, max_num_seqs: int, tp: int = 1,
                       sampler_bytes_per_logit: int = 2 * F32) -> int:
    """PyTorch activation peak of vLLM's profile run on one rank: the larger of the forward pass over
    `batched_tokens` tokens (flash attention) and the dummy sampler run over the last token of each of
    min(max_num_seqs, tokens) sequences (the batch's final hidden states still held). The sampler keeps
    `sampler_bytes_per_logit` bytes per (sequence x vocabulary entry) live at its peak (the runtime's
    profile: the bf16 logits, their fp32 copy, and the sort, masks and re-sort of top-k/top-p).
    Tensor parallel splits the MLP and attention projections (column/row parallel layers) but every rank
    holds the whole residual stream; the rank that samples sizes the pool (vLLM takes the smallest pool)."""
    hidden, heads, ffn, vocab = _dims(m)
    t = batched_tokens
    tp = max(tp, 1)
    qkv = (heads + 2 * m.kv_heads) * m.head_dim if m.attention != "mla" else heads * m.head_dim * 3
    # the MLP's peak (vllm/model_executor/models/llama.py LlamaMLP.forward): gate_up (2 x ffn) and the
    # activation's output (ffn) are alive when down_proj writes its output, beside the residual and the
    # normed input the decoder layer still holds: 3 x ffn / tp + 3 x hidden per token
    layer_peak = t * max(3 * ffn // tp, qkv // tp + hidden) * ACT + 3 * t * hidden * ACT
    sampler = min(max_num_seqs, t) * vocab * sampler_bytes_per_logit + t * hidden * ACT
    return max(layer_peak, sampler)


def torch_prefill_bytes(m: ModelSpec, tokens: int, cache_tokens: int = 0) -> int:
    """transformers: prefill of `tokens` prompt tokens in the model dtype; logits for the last position only.
    A chunk that attends to a longer cache (chunked prefill, `cache_tokens` > `tokens`) cannot take SDPA's
    causal fast path: the explicit 4-D mask (one element per chunk token x cache position, a boolean at
    least) goes to SDPA, and with a mask grouped-query attention falls back to repeat_kv, which copies K and
    V out to every query head over the whole cache length
    (src/transformers/integrations/sdpa_attention.py use_gqa_in_sdpa / repeat_kv, huggingface/transformers
    at commit e2feb59b62124ad52a51616968f1465613bf8644; a preallocated StaticCache's key length is its
    max_cache_len). The peak is the larger of the MLP phase and that attention phase."""
    hidden, heads, ffn, vocab = _dims(m)
    mlp = tokens * (3 * ffn + 4 * hidden) * ACT
    attention = 0
    if cache_tokens > tokens:
        mask = tokens * cache_tokens  # bool
        grouped = m.kv_heads and m.kv_heads < heads and m.attention != "mla"
        repeated = 2 * heads * cache_tokens * m.head_dim * ACT if grouped else 0
        attention = mask + repeated + tokens * 4 * hidden * ACT
    return max(mlp, attention) + vocab * F32

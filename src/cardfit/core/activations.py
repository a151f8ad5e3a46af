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
    """transformers: prefill of `tokens` prompt tokens in the model dtype.

    Unchunked (`cache_tokens` = 0): generate() prefills the prompt in one forward and keeps the logits of the
    last position only (logits_to_keep=1). The peak is the MLP phase.

    Chunked (`cache_tokens` > `tokens`: a loop of forward calls over a preallocated cache): each chunk
    - attends to the whole cache without SDPA's causal fast path: transformers builds a boolean 4-D mask (one
      element per chunk token x cache position), PyTorch's scaled_dot_product_attention turns it into an
      additive mask in the query's dtype before dispatching (aten/src/ATen/native/transformers/attention.cpp
      convert_boolean_attn_mask, pytorch/pytorch at commit 008887dc557e28d59f84ccc584ce831ac0bbdeb1), and
      with a mask grouped-query attention falls back to repeat_kv, which copies K and V out to every query
      head over the whole cache length (src/transformers/integrations/sdpa_attention.py use_gqa_in_sdpa /
      repeat_kv, huggingface/transformers at commit e2feb59b62124ad52a51616968f1465613bf8644; a StaticCache's
      key length is its max_cache_len);
    - returns the logits of every chunk position (a forward's logits_to_keep defaults to 0), upcast to fp32
      (transformers v4.45.0 models/llama/modeling_llama.py LlamaForCausalLM.forward:
      `self.lm_head(hidden_states[:, -num_logits_to_keep:, :]).float()`; later versions return the model
      dtype and the caller upcasts to score or sample), the bf16 ones alive while the copy is made;
    - and the loop's `out = model(chunk, ...)` holds the previous chunk's output until the call returns, so
      one chunk of fp32 logits stays allocated through every phase of the next forward.
    The peak is that held chunk plus the largest of the MLP, attention and logits phases."""
    hidden, heads, ffn, vocab = _dims(m)
    mlp = tokens * (3 * ffn + 4 * hidden) * ACT
    if cache_tokens <= tokens:
        return mlp + vocab * F32
    mask = tokens * cache_tokens * (1 + ACT)  # the boolean mask and SDPA's additive copy of it
    grouped = m.kv_heads and m.kv_heads < heads and m.attention != "mla"
    repeated = 2 * heads * cache_tokens * m.head_dim * ACT if grouped else 0
    attention = mask + repeated + tokens * 4 * hidden * ACT
    chunk_logits = tokens * vocab * F32
    logits = chunk_logits + tokens * vocab * ACT + tokens * hidden * ACT
    return chunk_logits + max(mlp, attention, logits)

"""Limits on model shapes, shared by the file readers and the command-line inputs (kept light: the CLI
imports it at start-up)."""

from __future__ import annotations

# The largest value a shape field may take, from a model file or typed on the command line: beyond them the
# arithmetic would loop over absurd layer counts instead of answering (no published model comes near).
# The deepest transformer published: DeepNet (Wang et al. 2022, "DeepNet: Scaling Transformers to 1,000
# Layers", https://arxiv.org/abs/2203.00555); released LLMs stop far below (Llama 3.1 405B: 126). A model's
# layer count sets the work of every question about it (tensors and KV are counted per layer).
MAX_LAYERS = 1024
SHAPE_LIMITS: dict[str, int] = {
    "layers": MAX_LAYERS, "kv_heads": 100_000, "heads": 100_000, "head_dim": 65_536, "hidden": 1_000_000,
    "vocab": 100_000_000, "intermediate": 10_000_000, "moe_intermediate": 10_000_000, "experts": 100_000,
    "experts_active": 100_000, "shared_experts": 100_000, "shared_intermediate": 10_000_000,
    "dense_layers": MAX_LAYERS, "kv_lora_rank": 1_000_000, "q_lora_rank": 1_000_000,
    "qk_rope_head_dim": 65_536, "qk_nope_head_dim": 65_536, "v_head_dim": 65_536,
    "sliding_layers": MAX_LAYERS, "linear_layers": MAX_LAYERS, "linear_key_heads": 100_000,
    "linear_value_heads": 100_000, "linear_key_head_dim": 65_536, "linear_value_head_dim": 65_536,
    "linear_conv_kernel": 65_536, "kv_shared_layers": MAX_LAYERS, "global_kv_heads": 100_000,
    "global_head_dim": 65_536
}

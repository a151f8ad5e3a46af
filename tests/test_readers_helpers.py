"""Builders for small real model files (used by the test_readers* modules; no tests here)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

# Llama 3.1 8B Instruct config.json as published (https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct)
LLAMA_31_8B = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
    "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "llama", "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.43.0.dev0", "use_cache": True, "vocab_size": 128256}

TINY_LLAMA = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
              "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100,
              "max_position_embeddings": 2048, "torch_dtype": "bfloat16", "tie_word_embeddings": False}


def write_json(path: Path, obj: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))
    return path


def tiny_llama_tensors(dtype: Any = np.float16, layers: int = 2) -> dict[str, np.ndarray]:
    """The real tensor layout of a Llama checkpoint at TINY_LLAMA's sizes."""
    h, kv, f, v = 64, 32, 128, 100
    ts = {"model.embed_tokens.weight": np.zeros((v, h), dtype), "model.norm.weight": np.zeros((h,), dtype),
          "lm_head.weight": np.zeros((v, h), dtype)}
    for i in range(layers):
        p = f"model.layers.{i}."
        ts |= {p + "input_layernorm.weight": np.zeros((h,), dtype),
               p + "post_attention_layernorm.weight": np.zeros((h,), dtype),
               p + "self_attn.q_proj.weight": np.zeros((h, h), dtype),
               p + "self_attn.k_proj.weight": np.zeros((kv, h), dtype),
               p + "self_attn.v_proj.weight": np.zeros((kv, h), dtype),
               p + "self_attn.o_proj.weight": np.zeros((h, h), dtype),
               p + "mlp.gate_proj.weight": np.zeros((f, h), dtype),
               p + "mlp.up_proj.weight": np.zeros((f, h), dtype),
               p + "mlp.down_proj.weight": np.zeros((h, f), dtype)}
    return ts


def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> Path:
    from safetensors.numpy import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path))
    return path


def write_gguf(path: Path, arch: str = "llama", kv: dict[str, Any] | None = None,
               tensors: list[tuple[str, tuple[int, ...], str]] | None = None, file_type: int | None = 15,
               split_max_tensors: int = 0, vocab: int = 100) -> Path:
    """A real GGUF: metadata, a tokenizer vocabulary and tensors of the given ggml types (shape outermost
    first); quantized tensors are written as raw zero bytes of the exact size."""
    import gguf

    path.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(path), arch, split_max_tensors=split_max_tensors)
    for k, v in (kv or {}).items():
        key = k.replace("{arch}", arch)
        if isinstance(v, bool):
            w.add_bool(key, v)
        elif isinstance(v, int):
            w.add_uint32(key, v)
        elif isinstance(v, float):
            w.add_float32(key, v)
        elif isinstance(v, str):
            w.add_string(key, v)
        else:
            w.add_array(key, v)
    if file_type is not None:
        w.add_file_type(file_type)
    w.add_token_list([f"t{i}".encode() for i in range(vocab)])
    for name, shape, tname in tensors or []:
        qt = gguf.GGMLQuantizationType[tname]
        block, size = gguf.GGML_QUANT_SIZES[qt]
        if tname in ("F32", "F16"):
            w.add_tensor(name, np.zeros(shape, np.float32 if tname == "F32" else np.float16))
        else:
            row_bytes = shape[-1] // block * size
            w.add_tensor(name, np.zeros((*shape[:-1], row_bytes), np.uint8), raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def tiny_gguf_tensors(layers: int = 2, qtype: str = "Q4_K",
                      tied: bool = False) -> list[tuple[str, tuple[int, ...], str]]:
    h, kv, f, v = 256, 128, 512, 100
    ts = [("token_embd.weight", (v, h), "Q6_K"), ("output_norm.weight", (h,), "F32")]
    if not tied:
        ts.append(("output.weight", (v, h), "Q6_K"))
    for i in range(layers):
        b = f"blk.{i}."
        ts += [(b + "attn_norm.weight", (h,), "F32"), (b + "ffn_norm.weight", (h,), "F32"),
               (b + "attn_q.weight", (h, h), qtype), (b + "attn_k.weight", (kv, h), qtype),
               (b + "attn_v.weight", (kv, h), "Q6_K"), (b + "attn_output.weight", (h, h), qtype),
               (b + "ffn_gate.weight", (f, h), qtype), (b + "ffn_up.weight", (f, h), qtype),
               (b + "ffn_down.weight", (h, f), "Q6_K")]
    return ts


TINY_GGUF_KV = {"{arch}.block_count": 2, "{arch}.embedding_length": 256, "{arch}.attention.head_count": 4,
                "{arch}.attention.head_count_kv": 2, "{arch}.feed_forward_length": 512,
                "{arch}.context_length": 8192}

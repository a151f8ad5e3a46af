"""Models that are not text decoders: encoder-only embedders and rerankers (no KV cache, no decode speed), and
vision-language checkpoints whose vision tower weighs on the GPU too."""

from __future__ import annotations

from pathlib import Path

import pytest

from cardfit.catalog.models import ModelSpec
from cardfit.core.kv import kv_bytes_per_token, kv_cache_bytes
from cardfit.core.tensors import encoder_params
from cardfit.readers.config import vision_params

CONFIGS = Path(__file__).parent / "fixtures" / "configs"


def test_encoder_config_is_not_planned_as_a_decoder(run_json):
    """BAAI/bge-m3's config.json (XLM-RoBERTa large, 8,194 positions): 568M parameters on its model card."""
    out = run_json("plan", str(CONFIGS / "bge-m3" / "config.json"), "--gpu", "RTX 4090", "--context", "512")
    mem = out["memory"]
    assert mem["kv_cache_bytes"] == 0 and mem["kv_bytes_per_token"] == 0
    assert 567e6 <= mem["weights_bytes"] / 2 <= 569e6  # BF16: 2 bytes per parameter
    assert out["speed"]["decode_tokens_per_s"] is None and out["gpus"][0]["decode_tokens_per_s"] is None
    task = out["task"]
    assert task["task"] == "embed" and task["input_tokens"] == 512 and task["tokens_per_s"] > 0
    assert any("embedding model: no KV cache" in n for n in out["notes"])


def test_encoder_params_match_xlm_r_large():
    """XLM-R large: 24 layers x 1024, FFN 4096, vocab 250,002, 514 positions: 560M (its model card)."""
    m = ModelSpec(id="x", name="x", params=1, layers=24, kv_heads=16, head_dim=64, hidden=1024, heads=16,
                  intermediate=4096, vocab=250002, max_context=514, model_type="xlm-roberta")
    assert 559e6 <= encoder_params(m) <= 561e6
    assert kv_bytes_per_token(m) == 0 and kv_cache_bytes(m, 512, 8) == 0


def test_reranker_from_architectures(tmp_path, run_json):
    cfg = (CONFIGS / "bge-m3" / "config.json").read_text().replace('"XLMRobertaModel"',
                                                                    '"XLMRobertaForSequenceClassification"')
    (tmp_path / "bge-reranker-v2-m3").mkdir()
    (tmp_path / "bge-reranker-v2-m3" / "config.json").write_text(cfg)
    out = run_json("plan", str(tmp_path / "bge-reranker-v2-m3" / "config.json"), "--gpu", "L4", "--context",
                   "512")
    assert out["task"]["task"] == "rerank" and out["memory"]["kv_cache_bytes"] == 0


def test_qwen2_vl_counts_its_vision_tower(run_json):
    """Qwen/Qwen2-VL-7B-Instruct: the safetensors hold 8,291,375,616 parameters (16.58 GB in BF16); the
    language model alone is 7.62B (15.2 GB, what was planned before the vision tower was counted)."""
    out = run_json("plan", str(CONFIGS / "Qwen2-VL-7B-Instruct" / "config.json"), "--gpu", "H100")
    w = out["memory"]["weights_bytes"]
    assert abs(w - 16_582_751_232) / 16_582_751_232 < 0.005


@pytest.mark.parametrize("cfg,expected,why", [
    ({"model_type": "qwen2_vl",
      "vision_config": {"depth": 32, "embed_dim": 1280, "mlp_ratio": 4, "hidden_size": 3584,
                        "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2, "in_chans": 3}},
     675.5e6, "Qwen2-VL's ViT-600M + merger: 675.5M in the checkpoint"),
    ({"model_type": "gemma3",
      "vision_config": {"hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27,
                        "patch_size": 14, "image_size": 896}}, 419.3e6,
     "Gemma 3's SigLIP-So400m + projector (2560 wide)"),
])
def test_vision_params(cfg, expected, why):
    assert abs(vision_params(cfg, 2560) - expected) / expected < 0.01, why


def test_a_two_matrix_mlp_is_counted_as_two(tmp_path, run_json):
    """bigcode/starcoder2-3b's config.json (GELU c_fc/c_proj MLP, no gate): 3.03B parameters in its
    safetensors; counted as a gated MLP it would be 3.9B."""
    cfg = {"architectures": ["Starcoder2ForCausalLM"], "model_type": "starcoder2", "hidden_size": 3072,
           "num_hidden_layers": 30, "num_attention_heads": 24, "num_key_value_heads": 2,
           "intermediate_size": 12288, "vocab_size": 49152, "max_position_embeddings": 16384,
           "sliding_window": 4096, "tie_word_embeddings": True, "torch_dtype": "bfloat16"}
    (tmp_path / "starcoder2-3b").mkdir()
    path = tmp_path / "starcoder2-3b" / "config.json"
    path.write_text(__import__("json").dumps(cfg))
    out = run_json("plan", str(path), "--gpu", "RTX 4090", "--quant", "bf16", "--runtime", "vllm")
    assert abs(out["memory"]["weights_bytes"] / 2 / 3.03e9 - 1) < 0.01

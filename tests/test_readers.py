"""Readers on small real files built here: config.json, safetensors (written by the safetensors package),
GGUF (written by gguf.GGUFWriter), a fake Hugging Face cache and Ollama store."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from cardfit.catalog.models import default_models
from cardfit.core.weights import weights
from cardfit.errors import CardfitError, FileFormatError
from cardfit.readers import read_model_path
from cardfit.readers.stores import find_local

from .test_readers_helpers import (
    LLAMA_31_8B,
    TINY_GGUF_KV,
    TINY_LLAMA,
    tiny_gguf_tensors,
    tiny_llama_tensors,
    write_gguf,
    write_json,
    write_safetensors,
)

# ---- config.json: real configs of catalog models give the catalog's architecture ------------------

GEMMA_3_4B = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
              "torch_dtype": "bfloat16", "image_token_index": 262144, "mm_tokens_per_image": 256,
              "text_config": {"model_type": "gemma3_text", "hidden_size": 2560, "intermediate_size": 10240,
                              "num_hidden_layers": 34, "num_attention_heads": 8, "num_key_value_heads": 4,
                              "head_dim": 256, "sliding_window": 1024, "sliding_window_pattern": 6,
                              "max_position_embeddings": 131072, "vocab_size": 262208,
                              "rope_scaling": {"factor": 8.0, "rope_type": "linear"}},
              "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152,
                                "num_hidden_layers": 27}}
GEMMA_2_9B = {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "hidden_size": 3584,
              "intermediate_size": 14336, "num_hidden_layers": 42, "num_attention_heads": 16,
              "num_key_value_heads": 8, "head_dim": 256, "sliding_window": 4096,
              "max_position_embeddings": 8192, "vocab_size": 256000, "torch_dtype": "float32",
              "final_logit_softcapping": 30.0}
QWEN25_7B = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 3584,
             "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
             "num_key_value_heads": 4, "max_position_embeddings": 32768, "sliding_window": 131072,
             "use_sliding_window": False, "max_window_layers": 28, "vocab_size": 152064,
             "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
MIXTRAL_8X7B = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": 4096,
                "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
                "num_key_value_heads": 8, "num_local_experts": 8, "num_experts_per_tok": 2,
                "max_position_embeddings": 32768, "sliding_window": None, "vocab_size": 32000,
                "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
DEEPSEEK_V3 = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 7168,
               "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_hidden_layers": 61,
               "num_attention_heads": 128, "num_key_value_heads": 128, "n_shared_experts": 1,
               "n_routed_experts": 256, "num_experts_per_tok": 8, "first_k_dense_replace": 3,
               "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
               "v_head_dim": 128, "vocab_size": 129280, "max_position_embeddings": 163840,
               "tie_word_embeddings": False, "torch_dtype": "bfloat16", "num_nextn_predict_layers": 1,
               "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                       "weight_block_size": [128, 128]}}
GPT_OSS_20B = {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": 2880,
               "intermediate_size": 2880, "num_hidden_layers": 24, "num_attention_heads": 64,
               "num_key_value_heads": 8, "head_dim": 64, "num_local_experts": 32, "num_experts_per_tok": 4,
               "experts_per_token": 4, "vocab_size": 201088, "sliding_window": 128,
               "max_position_embeddings": 131072, "tie_word_embeddings": False, "attention_bias": True,
               "layer_types": ["sliding_attention", "full_attention"] * 12,
               "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert":
                                       ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                        "model.embed_tokens", "lm_head"]}}
QWEN3_NEXT = {"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "hidden_size": 2048,
              "intermediate_size": 5120, "num_hidden_layers": 48, "num_attention_heads": 16,
              "num_key_value_heads": 2, "head_dim": 256, "num_experts": 512, "num_experts_per_tok": 10,
              "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "decoder_sparse_step": 1,
              "full_attention_interval": 4, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
              "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
              "vocab_size": 151936, "max_position_embeddings": 262144, "tie_word_embeddings": False,
              "torch_dtype": "bfloat16"}

ARCH_FIELDS = ("layers", "kv_heads", "head_dim", "hidden", "heads", "vocab", "max_context", "tied_embeddings",
               "attention", "experts", "experts_active", "moe_intermediate", "shared_experts",
               "shared_intermediate", "dense_layers", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim",
               "qk_nope_head_dim", "v_head_dim", "sliding_window", "sliding_layers", "linear_layers",
               "linear_key_heads", "linear_value_heads", "linear_key_head_dim", "linear_value_head_dim",
               "linear_conv_kernel")

# (catalog id, config, params must equal the catalog's?, why the case is tricky)
CASES = [
    ("llama-3.1-8b", LLAMA_31_8B, True, "plain GQA; params exact from shapes"),
    ("qwen2.5-7b", QWEN25_7B, True,
     "sliding_window set but use_sliding_window false: no windowed layers; qkv bias"),
    ("gemma-2-9b", GEMMA_2_9B, False, "no layer_types: alternating local/global; tied by Gemma default "
     "(params: core/tensors.py counts 2 of Gemma 2's 4 norms per layer)"),
    ("gemma-3-4b", GEMMA_3_4B, False, "text_config nesting; sliding_window_pattern 6; params incl. vision"),
    ("mixtral-8x7b", MIXTRAL_8X7B, True, "each expert is a full intermediate_size FFN"),
    ("deepseek-v3", DEEPSEEK_V3, False, "MLA latent cache; 3 dense layers; fp8 quantization_config "
     "(params: core/tensors.py leaves out the 58 x 256 router bias terms)"),
    ("gpt-oss-20b", GPT_OSS_20B, False, "layer_types alternate sliding/full; mxfp4 experts"),
    ("qwen3-next-80b-a3b", QWEN3_NEXT, False, "hybrid: full_attention_interval 4 → 36 linear layers "
     "(params: core/tensors.py has no output gate on the 12 attention layers; catalog is 0.13% higher)"),
]


@pytest.mark.parametrize("model_id, cfg, same_params, why", CASES, ids=[c[0] for c in CASES])
def test_config_matches_catalog(tmp_path, model_id, cfg, same_params, why):
    path = write_json(tmp_path / model_id / "config.json", cfg)
    m = read_model_path(str(path))
    ref = default_models().get(model_id)
    diffs = {f: (getattr(m, f), getattr(ref, f)) for f in ARCH_FIELDS if getattr(m, f) != getattr(ref, f)}
    assert not diffs, why
    if same_params:
        assert m.params == ref.params, why
    assert m.origin == "file" and m.tensors is None
    assert dict(m.provenance)["layers"] == "config.json"


def test_config_quantization_sections(tmp_path):
    cases = {"awq": ({"quant_method": "awq", "bits": 4, "group_size": 128}, "int4"),
             "gptq": ({"quant_method": "gptq", "bits": 4}, "int4"),
             "gptq8": ({"quant_method": "gptq", "bits": 8}, "int8"),
             "bnb4": ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
                       "bnb_4bit_use_double_quant": True}, "nf4"),
             "bnb8": ({"quant_method": "bitsandbytes", "load_in_8bit": True}, "int8"),
             "fp8": ({"quant_method": "fp8", "weight_block_size": [128, 128]}, "fp8"),
             "ct-fp8": ({"quant_method": "compressed-tensors", "format": "float-quantized"}, "fp8"),
             "ct-w4": ({"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups":
                        {"group_0": {"weights": {"num_bits": 4, "type": "int"}}}}, "int4"),
             "mxfp4": ({"quant_method": "mxfp4"}, "mxfp4")}
    for key, (qc, want) in cases.items():
        m = read_model_path(str(write_json(tmp_path / key / "config.json",
                                           LLAMA_31_8B | {"quantization_config": qc})))
        assert m.file_quant == want, key
        assert weights(m).method == "shapes"


def test_unknown_model_type_warns_and_uses_generic_keys(tmp_path):
    cfg = TINY_LLAMA | {"model_type": "brand_new_lm"}
    m = read_model_path(str(write_json(tmp_path / "x" / "config.json", cfg)))
    assert m.layers == 2 and m.kv_heads == 2 and m.head_dim == 16
    assert m.warnings and "unknown model_type 'brand_new_lm'" in m.warnings[0]
    assert "num_hidden_layers" in m.warnings[0] and "hidden_size" in m.warnings[0]


@pytest.mark.parametrize("cfg, problem", [
    ({"model_type": "llama"}, "num_hidden_layers"),
    (TINY_LLAMA | {"num_hidden_layers": "32"}, "non-negative integer"),
    (TINY_LLAMA | {"num_hidden_layers": -1}, "non-negative integer"),
    ([1, 2], "not a JSON object"),
    ({"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16},
     "cannot count parameters"),
])
def test_config_errors(tmp_path, cfg, problem):
    path = write_json(tmp_path / "config.json", cfg)
    with pytest.raises(FileFormatError) as e:
        read_model_path(str(path))
    assert problem in str(e.value) and str(path) in str(e.value) and "\n" not in str(e.value)


def test_config_not_json_deep_and_non_utf8(tmp_path):
    for name, data in {"deep": b"[" * 100_000 + b"]" * 100_000, "bad": b"{\"a\": \xff}",
                       "nan": b'{"num_hidden_layers": NaN}', "trunc": b'{"num_hidden'}.items():
        p = tmp_path / name / "config.json"
        p.parent.mkdir()
        p.write_bytes(data)
        with pytest.raises(FileFormatError):
            read_model_path(str(p))


# ---- safetensors ---------------------------------------------------------------------------------

def test_safetensors_folder_exact_bytes(tmp_path):
    d = tmp_path / "tiny"
    write_json(d / "config.json", TINY_LLAMA)
    ts = tiny_llama_tensors(np.float16)
    write_safetensors(d / "model.safetensors", ts)
    m = read_model_path(str(d))
    assert {t.name: t.nbytes for t in m.tensors} == {k: v.nbytes for k, v in ts.items()}
    assert m.params == sum(v.size for v in ts.values())
    assert m.params == read_model_path(str(d / "config.json")).params  # the shapes agree with the tensors
    assert m.dtype == "fp16" and m.file_quant == "fp16"
    w = weights(m)
    assert w.method == "file" and w.total_bytes == sum(v.nbytes for v in ts.values())
    prov = dict(m.provenance)
    assert prov["params"] == "safetensors header" and prov["layers"] == "config.json"


def test_safetensors_sharded_index(tmp_path):
    d = tmp_path / "sharded"
    write_json(d / "config.json", TINY_LLAMA)
    ts = tiny_llama_tensors(np.float32)
    names = sorted(ts)
    half = len(names) // 2
    parts = {"model-00001-of-00002.safetensors": names[:half],
             "model-00002-of-00002.safetensors": names[half:]}
    for fname, keys in parts.items():
        write_safetensors(d / fname, {k: ts[k] for k in keys})
    write_json(d / "model.safetensors.index.json",
               {"metadata": {"total_size": sum(v.nbytes for v in ts.values())},
                "weight_map": {k: f for f, ks in parts.items() for k in ks}})
    m = read_model_path(str(d))
    assert len(m.tensors) == len(ts) and weights(m).total_bytes == sum(v.nbytes for v in ts.values())
    assert m.dtype == "fp32"


def test_safetensors_alone_guesses_from_shapes(tmp_path):
    p = write_safetensors(tmp_path / "model.safetensors", tiny_llama_tensors(np.float16))
    m = read_model_path(str(p))
    assert m.layers == 2 and m.hidden == 64 and m.vocab == 100 and m.warnings
    assert "default" in dict(m.provenance)["head_dim"]


def test_safetensors_header_only_is_read(tmp_path, monkeypatch):
    """A 'huge' file (sparse, 10 GB) is sized from its header: only the header bytes are read."""
    from cardfit.readers import source

    ts = {"w": np.zeros((4, 4), np.float16)}
    p = write_safetensors(tmp_path / "big" / "model.safetensors", ts)
    write_json(tmp_path / "big" / "config.json", TINY_LLAMA)
    # rewrite the header to claim a 10 GB tensor, and make the file that long (sparse)
    n = 5 * 2**30
    header = json.dumps({"w": {"dtype": "BF16", "shape": [n], "data_offsets": [0, 2 * n]}}).encode()
    with open(p, "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header)
        f.truncate(8 + len(header) + 2 * n)
    read = []
    orig = source.LocalFile.read
    monkeypatch.setattr(source.LocalFile, "read", lambda self, o, k: read.append(k) or orig(self, o, k))
    m = read_model_path(str(p))
    assert m.tensors[0].nbytes == 2 * n and sum(read) < 10_000


@pytest.mark.parametrize("mutate, problem", [
    (lambda h, body: (2**40).to_bytes(8, "little") + body, "header length"),
    (lambda h, body: (len(body) + 100).to_bytes(8, "little") + body, "past the end"),
    (lambda h, body: h[:8] + body.replace(b'"F16"', b'"F17"'), "unknown dtype"),
    (lambda h, body: h[:8] + body[:-40], "past the end"),
])
def test_safetensors_strict(tmp_path, mutate, problem):
    p = write_safetensors(tmp_path / "model.safetensors", {"a": np.zeros((8,), np.float16)})
    raw = p.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    p.write_bytes(mutate(raw[:8 + n], raw[8:]))
    with pytest.raises(FileFormatError) as e:
        read_model_path(str(p))
    assert problem in str(e.value)


def test_safetensors_overlap_and_size_mismatch(tmp_path):
    for name, header in {
        "overlap": {"a": {"dtype": "F16", "shape": [4], "data_offsets": [0, 8]},
                    "b": {"dtype": "F16", "shape": [4], "data_offsets": [4, 12]}},
        "size": {"a": {"dtype": "F16", "shape": [4], "data_offsets": [0, 6]}},
        "shape": {"a": {"dtype": "F16", "shape": [-4], "data_offsets": [0, 8]}},
    }.items():
        h = json.dumps(header).encode()
        p = tmp_path / f"{name}.safetensors"
        p.write_bytes(len(h).to_bytes(8, "little") + h + bytes(16))
        with pytest.raises(FileFormatError):
            read_model_path(str(p))


# ---- GGUF ----------------------------------------------------------------------------------------

def test_gguf_exact_bytes_match_gguf_reader(tmp_path):
    import gguf

    p = write_gguf(tmp_path / "tiny-Q4_K_M.gguf", kv=TINY_GGUF_KV, tensors=tiny_gguf_tensors())
    m = read_model_path(str(p))
    ref = gguf.GGUFReader(str(p))
    assert {t.name: t.nbytes for t in m.tensors} == {t.name: int(t.n_bytes) for t in ref.tensors}
    assert {t.name: t.dtype for t in m.tensors} == {t.name: t.tensor_type.name for t in ref.tensors}
    assert m.params == sum(int(t.n_elements) for t in ref.tensors)
    assert (m.layers, m.kv_heads, m.head_dim, m.heads, m.hidden, m.max_context) == (2, 2, 64, 4, 256, 8192)
    assert m.file_quant == "Q4_K_M" and m.vocab == 100 and not m.tied_embeddings
    w = weights(m)
    assert w.method == "file" and w.total_bytes == sum(int(t.n_bytes) for t in ref.tensors)
    assert dict(m.provenance)["kv_heads"] == "GGUF header"


def test_gguf_header_read_without_data(tmp_path):
    """A file cut after its header (a download stopped early) is called truncated; a file whose size is right
    (here a 10 GB sparse tail) is read by its header only, never its data."""
    import gguf

    p = write_gguf(tmp_path / "full.gguf", kv=TINY_GGUF_KV, tensors=tiny_gguf_tensors())
    start = gguf.GGUFReader(str(p)).data_offset
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(p.read_bytes()[:start])
    with pytest.raises(FileFormatError, match="truncated"):
        read_model_path(str(cut))
    a = read_model_path(str(p))
    with open(cut, "ab") as f:  # a 10 GB sparse tail is never read
        f.truncate(10 * 10**9)
    assert read_model_path(str(cut)).params == a.params


def test_gguf_keys_by_exact_name(tmp_path):
    """`{arch}.rope.scaling.original_context_length` must not be taken for the context length."""
    kv = TINY_GGUF_KV | {"{arch}.rope.scaling.original_context_length": 4096, "{arch}.context_length": 163840}
    m = read_model_path(str(write_gguf(tmp_path / "m.gguf", kv=kv, tensors=tiny_gguf_tensors())))
    assert m.max_context == 163840


def test_gguf_sliding_moe_mla(tmp_path):
    g2 = write_gguf(tmp_path / "g2.gguf", "gemma2", TINY_GGUF_KV | {"{arch}.attention.sliding_window": 4096,
                                                                    "{arch}.attention.key_length": 256},
                    tiny_gguf_tensors(tied=True))
    m = read_model_path(str(g2))
    assert (m.sliding_window, m.sliding_layers, m.head_dim, m.tied_embeddings) == (4096, 1, 256, True)
    kv = TINY_GGUF_KV | {"{arch}.expert_count": 8, "{arch}.expert_used_count": 2,
                         "{arch}.expert_feed_forward_length": 128, "{arch}.leading_dense_block_count": 1,
                         "{arch}.expert_shared_count": 1, "{arch}.attention.kv_lora_rank": 512,
                         "{arch}.attention.q_lora_rank": 1536, "{arch}.attention.key_length": 192,
                         "{arch}.attention.value_length": 128, "{arch}.rope.dimension_count": 64}
    m = read_model_path(str(write_gguf(tmp_path / "ds.gguf", "deepseek2", kv, tiny_gguf_tensors())))
    assert (m.attention, m.kv_lora_rank, m.qk_rope_head_dim, m.qk_nope_head_dim, m.v_head_dim) == \
        ("mla", 512, 64, 128, 128)
    assert (m.experts, m.experts_active, m.moe_intermediate, m.dense_layers, m.shared_intermediate) == \
        (8, 2, 128, 1, 128)


def test_gguf_sharded(tmp_path):
    import gguf

    tensors = tiny_gguf_tensors()
    write_gguf(tmp_path / "split.gguf", kv=TINY_GGUF_KV, tensors=tensors, split_max_tensors=8)
    shards = sorted(os.listdir(tmp_path))
    assert len(shards) == 3 and shards[0] == "split-00001-of-00003.gguf"
    m = read_model_path(str(tmp_path / shards[1]))  # any shard names the whole model
    want = sum(int(t.n_bytes) for s in shards for t in gguf.GGUFReader(str(tmp_path / s)).tensors)
    assert len(m.tensors) == len(tensors) and weights(m).total_bytes == want
    assert read_model_path(str(tmp_path)).params == m.params  # the folder: one split model
    os.remove(tmp_path / shards[2])
    with pytest.raises(FileFormatError, match="missing"):
        read_model_path(str(tmp_path / shards[0]))


@pytest.mark.parametrize("mutate, problem", [
    (lambda b: b"GGUF" + (7).to_bytes(4, "little") + b[8:], "version 7"),
    (lambda b: b"GGML" + b[4:], "wrong magic"),
    (lambda b: b[:8] + (2**40).to_bytes(8, "little") + b[16:], "tensors, over the 65,536 limit"),
    (lambda b: b[:200], "truncated"),
])
def test_gguf_bad(tmp_path, mutate, problem):
    p = write_gguf(tmp_path / "m.gguf", kv=TINY_GGUF_KV, tensors=tiny_gguf_tensors())
    p.write_bytes(mutate(p.read_bytes()))
    with pytest.raises(FileFormatError) as e:
        read_model_path(str(p))
    assert problem in str(e.value) and str(p) in str(e.value)


# ---- paths, folders, stores ------------------------------------------------------------------------

def test_bad_paths(tmp_path):
    (tmp_path / "empty").mkdir()
    os.symlink(tmp_path / "loop1", tmp_path / "loop2")
    os.symlink(tmp_path / "loop2", tmp_path / "loop1")
    (tmp_path / "x.bin").write_bytes(b"PK\x03\x04 not a model")
    for p in ("empty", "loop1", "x.bin", "missing.gguf"):
        with pytest.raises(FileFormatError) as e:
            read_model_path(str(tmp_path / p))
        assert str(tmp_path / p) in str(e.value)


def _hf_cache(root, repo: str, files: dict[str, bytes]) -> None:
    base = root / ("models--" + repo.replace("/", "--"))
    rev = "a" * 40
    (base / "refs").mkdir(parents=True)
    (base / "refs" / "main").write_text(rev)
    snap = base / "snapshots" / rev
    snap.mkdir(parents=True)
    (base / "blobs").mkdir()
    for name, data in files.items():  # the real layout: snapshot entries are symlinks into blobs/
        blob = base / "blobs" / f"blob-{name}"
        blob.write_bytes(data)
        os.symlink(blob, snap / name)


def test_hf_cache(tmp_path, monkeypatch):
    src = tmp_path / "src"
    write_json(src / "config.json", TINY_LLAMA)
    write_safetensors(src / "model.safetensors", tiny_llama_tensors())
    _hf_cache(tmp_path / "hub", "acme/tiny",
              {f: (src / f).read_bytes() for f in ("config.json", "model.safetensors")})
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    m = find_local("acme/tiny")
    assert m is not None and m.origin == "hf-cache" and m.hf == "acme/tiny" and len(m.tensors) == 21
    assert find_local("acme/other") is None
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "nowhere"))
    assert find_local("acme/tiny") is None


def _ollama_store(root, name: str, tag: str, blob: bytes,
                  media: str = "application/vnd.ollama.image.model") -> None:
    import hashlib

    digest = hashlib.sha256(blob).hexdigest()
    (root / "blobs").mkdir(parents=True, exist_ok=True)
    (root / "blobs" / f"sha256-{digest}").write_bytes(blob)
    write_json(root / "manifests" / "registry.ollama.ai" / "library" / name / tag,
               {"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                "layers": [{"mediaType": "application/vnd.ollama.image.template",
                            "digest": "sha256:" + "0" * 64},
                           {"mediaType": media, "digest": f"sha256:{digest}", "size": len(blob)}]})


def test_ollama_store(tmp_path, monkeypatch):
    g = write_gguf(tmp_path / "g.gguf", kv=TINY_GGUF_KV, tensors=tiny_gguf_tensors())
    _ollama_store(tmp_path / "models", "tinyllm", "1b", g.read_bytes())
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "models"))
    m = find_local("tinyllm:1b")
    assert m is not None and m.origin == "ollama-store" and m.file_quant == "Q4_K_M"
    assert weights(m).total_bytes == sum(t.nbytes for t in read_model_path(str(g)).tensors)
    assert find_local("tinyllm:7b") is None and find_local("nothere") is None
    _ollama_store(tmp_path / "models", "broken", "latest", b"x", media="application/other")
    with pytest.raises(FileFormatError, match="ollama pull broken"):
        find_local("broken")


def test_no_reader_error_is_a_traceback(tmp_path):
    """Every failure above is a CardfitError (the CLI turns those into one `Error:` line)."""
    assert issubclass(FileFormatError, CardfitError)


# ---- the CLI: a file gives the catalog's answer -------------------------------------------------------

def test_plan_config_json_equals_catalog(tmp_path, run_json):
    path = write_json(tmp_path / "Llama-3.1-8B-Instruct" / "config.json", LLAMA_31_8B)
    for extra in (["--quant", "Q4_K_M", "--runtime", "llama.cpp", "--context", "8192"],
                  ["--quant", "bf16", "--runtime", "vllm", "--context", "32768"]):
        a = run_json("plan", str(path), "--gpu", "RTX 4090", *extra)
        b = run_json("plan", "llama-3.1-8b", "--gpu", "RTX 4090", *extra)
        assert a["memory"] == b["memory"]
        assert a["gpus"][0]["verdict"] == b["gpus"][0]["verdict"]
        assert a["model"]["origin"] == "file" and a["model"]["provenance"]["layers"] == "config.json"
    a = run_json("plan", str(path), "--gpu", "H100 SXM", "--context", "8192")  # default: the file's bf16
    assert a["inputs"]["quant"] == "BF16"


def test_plan_gguf_counts_the_file(tmp_path, run_json):
    p = write_gguf(tmp_path / "tiny.gguf", kv=TINY_GGUF_KV, tensors=tiny_gguf_tensors())
    out = run_json("plan", str(p), "--gpu", "RTX 4090", "--context", "4096")
    assert out["memory"]["weights_method"] == "file"
    # every byte of the file is counted (weights_bytes may leave out what the runtime keeps in system RAM)
    assert sum(out["memory"]["weights_by_type"].values()) == sum(t.nbytes
                                                                 for t in read_model_path(str(p)).tensors)
    assert out["inputs"]["runtime"] == "llama.cpp"


def test_plan_bad_file_is_one_line(tmp_path, run_cli):
    p = tmp_path / "m.gguf"
    p.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 16)
    code, out, err = run_cli("plan", str(p), "--gpu", "RTX 4090", "--json")
    assert code == 2 and out == "" and err.startswith("Error:") and err.count("\n") == 1 and str(p) in err


def test_absurd_sizes_are_refused_not_computed(tmp_path):
    """A claim of 2^40 layers must not make the arithmetic loop (it once ran out of memory here)."""
    for key in ("num_hidden_layers", "num_experts", "hidden_size"):
        p = write_json(tmp_path / key / "config.json", TINY_LLAMA | {key: 2**40, "num_experts_per_tok": 2})
        with pytest.raises(FileFormatError, match="outside"):
            read_model_path(str(p))
    g = write_gguf(tmp_path / "g.gguf", kv=TINY_GGUF_KV | {"{arch}.block_count": 2**31},
                   tensors=tiny_gguf_tensors())
    with pytest.raises(FileFormatError, match="layers of 2,147,483,648"):
        read_model_path(str(g))


def test_plan_prefers_the_pulled_ollama_model(tmp_path, run_cli, run_json):
    """A tag pulled into the local Ollama store is read from its blob (runtime ollama), not the catalog."""
    g = write_gguf(tmp_path / "g.gguf", kv=TINY_GGUF_KV, tensors=tiny_gguf_tensors())
    store = tmp_path / "home" / ".ollama" / "models"
    _ollama_store(store, "llama3.1", "8b", g.read_bytes())
    code, text, err = run_cli("plan", "llama3.1:8b", "--gpu", "RTX 4090", "--context", "4096", "--json",
                              env={"HOME": str(tmp_path / "home")})
    assert code == 0, err
    out = json.loads(text)
    assert out["model"]["origin"] == "ollama-store" and out["inputs"]["runtime"] == "ollama"
    assert out["memory"]["weights_method"] == "file"
    assert sum(out["memory"]["weights_by_type"].values()) == sum(t.nbytes
                                                                 for t in read_model_path(str(g)).tensors)
    out = run_json("plan", "llama3.1:8b", "--gpu", "RTX 4090", "--context", "4096")  # no store: the catalog
    assert out["model"]["origin"] == "catalog"


def test_gguf_hybrid_linear_attention(tmp_path):
    """Qwen3-Next in llama.cpp's keys: full_attention_interval and the ssm.* geometry of the DeltaNet
    layers."""
    kv = TINY_GGUF_KV | {"{arch}.block_count": 48, "{arch}.full_attention_interval": 4,
                         "{arch}.ssm.conv_kernel": 4, "{arch}.ssm.state_size": 128,
                         "{arch}.ssm.group_count": 16, "{arch}.ssm.time_step_rank": 32,
                         "{arch}.ssm.inner_size": 4096}
    m = read_model_path(str(write_gguf(tmp_path / "q.gguf", "qwen3next", kv, tiny_gguf_tensors())))
    ref = default_models().get("qwen3-next-80b-a3b")
    got = (m.linear_layers, m.linear_key_heads, m.linear_value_heads, m.linear_key_head_dim,
           m.linear_value_head_dim, m.linear_conv_kernel)
    assert got == (ref.linear_layers, ref.linear_key_heads, ref.linear_value_heads, ref.linear_key_head_dim,
                   ref.linear_value_head_dim, ref.linear_conv_kernel)


def _raw_safetensors(path, tensors: dict[str, tuple[str, list[int]]]) -> None:
    """A valid safetensors file for dtypes numpy cannot write (F8_E4M3, packed U8/I32), zero-filled."""
    from cardfit.readers.safetensors import DTYPE_BITS

    header, off = {}, 0
    for name, (dtype, shape) in tensors.items():
        n = int(np.prod(shape)) * DTYPE_BITS[dtype] // 8
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    raw = json.dumps(header).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + bytes(off))


def _tiny_layout(weight: str, packed_rows: int = 1, scale: tuple[str, str] | None = None) -> dict:
    ts: dict[str, tuple[str, list[int]]] = {"model.embed_tokens.weight": ("BF16", [100, 64]),
                                            "lm_head.weight": ("BF16", [100, 64]),
                                            "model.norm.weight": ("BF16", [64])}
    for i in range(2):
        p = f"model.layers.{i}."
        ts[p + "input_layernorm.weight"] = ("BF16", [64])
        ts[p + "post_attention_layernorm.weight"] = ("BF16", [64])
        for proj, rows, cols in (("self_attn.q_proj", 64, 64), ("self_attn.k_proj", 32, 64),
                                 ("self_attn.v_proj", 32, 64), ("self_attn.o_proj", 64, 64),
                                 ("mlp.gate_proj", 128, 64), ("mlp.up_proj", 128, 64),
                                 ("mlp.down_proj", 64, 128)):
            ts[p + proj + ".weight"] = (weight, [rows, cols // packed_rows])
            if scale:
                ts[p + proj + scale[0]] = (scale[1], [rows // 32 or 1, cols // 32 or 1])
    return ts


def test_fp8_and_int4_checkpoints(tmp_path):
    full = read_model_path(str(write_json(tmp_path / "ref" / "config.json", TINY_LLAMA))).params
    fp8 = tmp_path / "fp8"
    write_json(fp8 / "config.json", TINY_LLAMA | {"quantization_config": {"quant_method": "fp8"}})
    _raw_safetensors(fp8 / "model.safetensors", _tiny_layout("F8_E4M3", scale=(".weight_scale_inv", "F32")))
    m = read_model_path(str(fp8))
    assert m.file_quant == "fp8" and m.native_quant == "fp8" and m.dtype == "bf16"
    assert m.params == full  # scale tensors are not parameters
    assert weights(m).total_bytes == sum(t.nbytes for t in m.tensors)  # but their bytes count
    awq = tmp_path / "awq"
    write_json(awq / "config.json", TINY_LLAMA | {"quantization_config": {"quant_method": "awq", "bits": 4}})
    _raw_safetensors(awq / "model.safetensors", _tiny_layout("I32", packed_rows=8, scale=(".scales", "F16")))
    m = read_model_path(str(awq))
    # packed int32 words: parameters from the config shapes
    assert m.file_quant == "int4" and m.params == full
    assert "shapes" in dict(m.provenance)["params"]
    nof = tmp_path / "fp8-noconfig-quant"
    write_json(nof / "config.json", TINY_LLAMA)
    _raw_safetensors(nof / "model.safetensors", _tiny_layout("F8_E4M3"))
    assert read_model_path(str(nof)).file_quant == "fp8"  # told by the tensors themselves


def test_gguf_folder_with_several_builds(tmp_path):
    write_gguf(tmp_path / "m-Q8_0.gguf", kv=TINY_GGUF_KV, tensors=tiny_gguf_tensors(qtype="Q8_0"),
               file_type=7)
    write_gguf(tmp_path / "m-Q4_K_M.gguf", kv=TINY_GGUF_KV, tensors=tiny_gguf_tensors())
    assert read_model_path(str(tmp_path)).file_quant == "Q4_K_M"
    os.remove(tmp_path / "m-Q4_K_M.gguf")
    write_gguf(tmp_path / "m-Q6_K.gguf", kv=TINY_GGUF_KV, tensors=tiny_gguf_tensors(qtype="Q6_K"),
               file_type=18)
    with pytest.raises(FileFormatError, match="name the .gguf file"):
        read_model_path(str(tmp_path))


def test_any_gguf_file_plans_for_llama_cpp(tmp_path, run_json):
    """A GGUF file is a llama.cpp file whatever its tensor types (an F16 GGUF is not a vLLM checkpoint)."""
    p = write_gguf(tmp_path / "tiny.gguf", kv=TINY_GGUF_KV, tensors=tiny_gguf_tensors())
    r = run_json("plan", str(p), "--gpu", "RTX 4090")
    assert r["inputs"]["runtime"] == "llama.cpp"


def test_model_and_shape_together_is_an_error(run_cli):
    code, _, err = run_cli("plan", "llama3.1:8b", "--params", "7e9")
    assert code == 2 and "give the model or the shape, not both" in err

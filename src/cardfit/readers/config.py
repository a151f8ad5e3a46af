"""config.json → ModelSpec. Key names follow Hugging Face transformers per model_type; multimodal configs
nest the language model under `text_config`. Nothing in the file is executed (no trust_remote_code)."""

from __future__ import annotations

import re
from typing import Any

from ..catalog.models import ENCODER_TYPES, TWO_MATRIX_FFN_TYPES, ModelSpec
from ..errors import FileFormatError
from .quantization import quant_from_config
from .source import shown

# model_types whose keys cardfit knows (the catalog's, their text sub-configs, and close relatives)
KNOWN_TYPES = {"llama", "mistral", "mistral3", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
               "qwen3_next", "qwen3_5", "qwen3_5_moe", "qwen3_5_text", "qwen3_5_moe_text", "gemma", "gemma2",
               "gemma3", "gemma3_text", "gemma4", "gemma4_text", "phi3", "deepseek_v2", "deepseek_v3",
               "kimi_k2", "gpt_oss", "qwen2_vl", "qwen2_5_vl", "llava", *ENCODER_TYPES}
_TIED_BY_DEFAULT = ("gemma",)  # transformers' Gemma configs default tie_word_embeddings to True
_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32"}
_MAX_INT = 1 << 40
_NESTED = ("text_config", "language_config", "llm_config", "thinker_config")
_HINT = "is this a Hugging Face config.json?"


class Fields:
    """Values for ModelSpec plus where each came from."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.values: dict[str, Any] = {}
        self.prov: dict[str, str] = {}
        self.warnings: list[str] = []

    def set(self, name: str, value: Any, where: str | None = None) -> None:
        if value is None:
            return
        self.values[name] = value
        self.prov[name] = where or self.where


class _Cfg:
    def __init__(self, top: dict[str, Any], name: str) -> None:
        self.top, self.name = top, name
        self.text = top
        for key in _NESTED:
            sub = top.get(key)
            if isinstance(sub, dict) and ("num_hidden_layers" in sub or "hidden_size" in sub):
                self.text = sub
                break
        self.used: list[str] = []

    def raw(self, *keys: str) -> Any:
        for d in (self.text, self.top):
            for k in keys:
                if d.get(k) is not None:
                    self.used.append(k)
                    return d[k]
        return None

    def int(self, *keys: str) -> int | None:
        v = self.raw(*keys)
        if v is None:
            return None
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if type(v) is not int or not 0 <= v <= _MAX_INT:
            raise FileFormatError(self.name, f"{keys[0]} must be a non-negative integer (got {shown(v, 40)})",
                                  hint=_HINT)
        return v

    def bool(self, *keys: str) -> bool | None:
        v = self.raw(*keys)
        return None if v is None else bool(v)


def _slug(s: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", s.lower()).strip("-") or "model"


def _windows(c: _Cfg, f: Fields, layers: int, mtype: str) -> None:
    window = c.int("sliding_window") or 0
    types = c.raw("layer_types")
    sliding = linear = 0
    if isinstance(types, list) and types:
        names = [str(t) for t in types[:layers]]
        sliding = sum(t in ("sliding_attention", "sliding", "local") for t in names)
        linear = sum(t in ("linear_attention", "mamba", "linear") for t in names)
    elif (interval := c.int("full_attention_interval")) is not None:
        linear = layers - layers // _interval(c, interval, layers)
    if not isinstance(types, list) and window:
        pattern = c.int("sliding_window_pattern", "_sliding_window_pattern")
        if pattern:
            sliding = layers - layers // pattern
        elif mtype.startswith("gemma2") or mtype == "gpt_oss":
            sliding = (layers + 1) // 2  # alternating local/global, local first
        elif c.raw("use_sliding_window") is False:
            sliding = 0
        else:
            sliding = layers  # Mistral v0.1 style: every layer windowed
    max_ctx = c.int("max_position_embeddings") or 0
    if window and sliding and (not max_ctx or window < max_ctx):
        f.set("sliding_window", window)
        f.set("sliding_layers", sliding)
    if linear:
        f.set("linear_layers", linear)
        f.set("linear_key_heads", c.int("linear_num_key_heads"))
        f.set("linear_value_heads", c.int("linear_num_value_heads"))
        f.set("linear_key_head_dim", c.int("linear_key_head_dim"))
        f.set("linear_value_head_dim", c.int("linear_value_head_dim"))
        f.set("linear_conv_kernel", c.int("linear_conv_kernel_dim", "conv_kernel"))


def _interval(c: _Cfg, interval: int, layers: int) -> int:
    """full_attention_interval (Qwen3-Next, Qwen3.5: every Nth layer has full attention, the others linear
    attention): 1..layers, and only in a hybrid config, one that gives the linear layers' shape."""
    if not 1 <= interval <= layers:
        raise FileFormatError(c.name, f"full_attention_interval {interval:,} must be 1..{layers:,} (one "
                              "full-attention layer every that many)", hint=_HINT)
    if interval > 1 and c.raw("linear_num_key_heads", "linear_key_head_dim") is None:
        raise FileFormatError(c.name, "full_attention_interval is for hybrid models, but this config gives "
                              "no linear-attention layers (no linear_num_key_heads or linear_key_head_dim)",
                              hint=_HINT)
    return interval


def _moe(c: _Cfg, f: Fields, mtype: str) -> None:
    experts = c.int("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
    if mtype.startswith("gemma4") and c.raw("enable_moe_block") is False:
        experts = 0
    if not experts or experts < 2:
        return
    f.set("experts", experts)
    f.set("experts_active", c.int("num_experts_per_tok", "experts_per_token", "top_k_experts", "moe_topk"))
    moe_ff = c.int("moe_intermediate_size")
    if moe_ff is None and mtype in ("mixtral", "gpt_oss"):
        moe_ff = c.int("intermediate_size")  # each expert is a full-width FFN
    f.set("moe_intermediate", moe_ff)
    shared_ff = c.int("shared_expert_intermediate_size")
    n_shared = c.int("n_shared_experts", "num_shared_experts")
    if shared_ff and not n_shared:
        n_shared = 1
    if n_shared and not shared_ff and moe_ff:
        shared_ff = n_shared * moe_ff
    f.set("shared_experts", n_shared or None)
    f.set("shared_intermediate", shared_ff or None)
    f.set("dense_layers", c.int("first_k_dense_replace") or None)


def _attention(c: _Cfg, f: Fields, hidden: int, heads: int) -> None:
    kv = c.int("num_key_value_heads", "n_head_kv", "multi_query_group_num") or heads
    f.set("kv_heads", kv)
    rank = c.int("kv_lora_rank")
    if rank:
        nope, rope = c.int("qk_nope_head_dim") or 0, c.int("qk_rope_head_dim") or 0
        f.set("attention", "mla")
        f.set("kv_lora_rank", rank)
        f.set("q_lora_rank", c.int("q_lora_rank") or 0)
        f.set("qk_rope_head_dim", rope)
        f.set("qk_nope_head_dim", nope)
        f.set("v_head_dim", c.int("v_head_dim"))
        f.set("head_dim", nope + rope)
        return
    hd = c.int("head_dim")
    if not hd:
        if not heads or not hidden:
            raise FileFormatError(c.name, "needs head_dim or hidden_size and num_attention_heads", hint=_HINT)
        hd = hidden // heads
        f.set("head_dim", hd, f"{f.where} (hidden_size / num_attention_heads)")
    else:
        f.set("head_dim", hd)
    f.set("attention", "gqa" if kv < heads else "mha")
    f.set("global_kv_heads", c.int("num_global_key_value_heads"))
    f.set("global_head_dim", c.int("global_head_dim") if c.raw("num_global_key_value_heads") else None)
    f.set("k_eq_v", c.bool("attention_k_eq_v"))
    f.set("kv_shared_layers", c.int("num_kv_shared_layers") or None)
    f.set("attention_bias", c.bool("attention_bias"))


def _task(cfg: dict[str, Any], mtype: str) -> str | None:
    """Encoder-only checkpoints embed (…Model, …ForMaskedLM) or rerank (…ForSequenceClassification)."""
    if mtype not in ENCODER_TYPES:
        return None
    archs = cfg.get("architectures")
    archs = [str(a) for a in archs] if isinstance(archs, list) else []
    return "rerank" if any(a.endswith("ForSequenceClassification") for a in archs) else "embed"


def _vint(v: dict[str, Any], *keys: str) -> int:
    for k in keys:
        x = v.get(k)
        if isinstance(x, float) and x.is_integer():
            x = int(x)
        if type(x) is int and 0 < x <= _MAX_INT:
            return x
    return 0


def vision_params(cfg: dict[str, Any], text_hidden: int) -> int:
    """Parameters of a multimodal checkpoint's vision tower and projector, from its vision_config: ViT blocks
    (Q, K, V, O with biases; a two- or, with SiLU, three-matrix MLP; two norms), the patch embedding, the
    position table, and the projector into the language model (Qwen2-VL's patch merger; Gemma 3's single
    projection; a LLaVA-style two-layer MLP otherwise). Qwen2-VL 7B: 675.5M, the checkpoint's vision share."""
    v = cfg.get("vision_config")
    if not isinstance(v, dict):
        return 0
    d = _vint(v, "embed_dim") or _vint(v, "hidden_size")
    layers = _vint(v, "depth", "num_hidden_layers", "num_layers")
    if not d or not layers:
        return 0
    ffn = _vint(v, "intermediate_size") or d * (_vint(v, "mlp_ratio") or 4)
    gated = str(v.get("hidden_act", "")) in ("silu", "swiglu")
    block = 4 * (d * d + d) + (3 if gated else 2) * d * ffn + ffn + d + 4 * d
    patch = _vint(v, "patch_size") or 14
    embed = ((_vint(v, "in_chans", "num_channels") or 3) * (_vint(v, "temporal_patch_size") or 1)
             * patch * patch * d)
    if (image := _vint(v, "image_size")) and image >= patch:
        embed += (image // patch) ** 2 * d
    out = (
        _vint(v, "out_hidden_size")
        or (_vint(v, "hidden_size") if _vint(v, "embed_dim") else 0)
        or text_hidden
    )
    if (merge := _vint(v, "spatial_merge_size")):
        m = d * merge * merge
        projector = d + m * m + m + m * out + out
    elif str(cfg.get("model_type", "")).startswith("gemma3"):
        projector = d * out + d
    else:
        projector = d * out + out + out * out + out
    return layers * block + embed + projector


def fields_from_config(cfg: Any, name: str, where: str = "config.json") -> Fields:
    if not isinstance(cfg, dict):
        raise FileFormatError(name, "config.json is not a JSON object", hint=_HINT)
    c = _Cfg(cfg, name)
    f = Fields(where)
    mtype = str(cfg.get("model_type") or c.text.get("model_type") or "")
    f.set("model_type", mtype or None)
    layers = c.int("num_hidden_layers", "n_layer", "num_layers", "n_layers")
    hidden = c.int("hidden_size", "n_embd", "d_model", "dim") or 0
    heads = c.int("num_attention_heads", "n_head", "n_heads") or 0
    if not layers:
        raise FileFormatError(name, "config.json has no num_hidden_layers", hint=_HINT)
    if not heads and not c.raw("head_dim"):
        raise FileFormatError(name, "config.json has no num_attention_heads", hint=_HINT)
    f.set("layers", layers)
    f.set("hidden", hidden or None)
    f.set("heads", heads or None)
    _attention(c, f, hidden, heads)
    f.set("intermediate", c.int("intermediate_size", "ffn_hidden_size", "n_inner"))
    f.set("vocab", c.int("vocab_size", "padded_vocab_size"))
    f.set("max_context", c.int("max_position_embeddings", "n_positions", "max_seq_len", "seq_length"))
    tied = c.bool("tie_word_embeddings")
    if tied is None:
        f.set("tied_embeddings", mtype.startswith(_TIED_BY_DEFAULT), "default")
    else:
        f.set("tied_embeddings", tied)
    dt = c.raw("torch_dtype", "dtype")
    if isinstance(dt, str) and dt.removeprefix("torch.") in _DTYPES:
        f.set("dtype", _DTYPES[dt.removeprefix("torch.")])
    else:
        f.set("dtype", "bf16", "default")
    _moe(c, f, mtype)
    _windows(c, f, layers, mtype)
    if mtype in TWO_MATRIX_FFN_TYPES:
        f.set("gated_ffn", False, f"{where} model_type {mtype}: a two-matrix MLP")
    f.set("task", _task(cfg, mtype))
    if vp := vision_params(cfg, hidden):
        f.set("vision_params", vp, f"{where} vision_config (estimated from its shapes)")
    q = quant_from_config(cfg.get("quantization_config") or c.text.get("quantization_config"), name)
    if q:
        f.set("file_quant", q, f"{where} quantization_config")
        if q in ("fp8", "mxfp4"):
            f.set("native_quant", q, f"{where} quantization_config")
    elif "quantization_config" in cfg:
        f.warnings.append("quantization_config not recognised; sizes assume the unquantized dtype")
    if mtype not in KNOWN_TYPES and mtype.removesuffix("_text") not in KNOWN_TYPES:
        used = ", ".join(dict.fromkeys(c.used))
        f.warnings.append(f"unknown model_type '{shown(mtype or '?', 40)}': read the generic keys ({used})")
    return f


def spec_from_fields(f: Fields, *, name: str, source: str, origin: str, params: int) -> ModelSpec:
    v = dict(f.values)
    v.pop("vision_params", None)  # added to params by the caller (readers/model.py build)
    spec = ModelSpec(id=_slug(name), name=name, params=params, source=source, origin=origin,
                     layers=v.pop("layers"), kv_heads=v.pop("kv_heads"), head_dim=v.pop("head_dim"), **v)
    if f.warnings:
        spec = spec.with_(note="; ".join(f.warnings), warnings=tuple(f.warnings))
    estimated = tuple(k for k, w in f.prov.items() if w == "default")
    return spec.with_(provenance=tuple(f.prov.items()), estimated=estimated)

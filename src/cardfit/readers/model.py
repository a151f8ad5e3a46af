"""Model files and folders → ModelSpec: config.json for the architecture, safetensors or GGUF headers for
the exact tensors. Fields say where they came from (ModelSpec.provenance)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from ..catalog.limits import MAX_LAYERS as MAX_LAYERS  # re-exported: the readers' layer cap
from ..catalog.limits import SHAPE_LIMITS
from ..catalog.models import ModelSpec, TensorInfo, shape_problem
from ..core.tensors import active_shape_params, encoder_params, has_shapes, shape_params
from ..errors import FileFormatError
from . import gguf as gguf_reader
from . import safetensors as st
from . import source as _source
from .config import Fields, fields_from_config, spec_from_fields
from .source import MAX_SHARDS, LocalFile, Source, read_json_file, shown

_AUX = ("_scale", "_scale_inv", "scales", "_zero", "zeros", "qzeros", "g_idx", "absmax", "quant_map",
        "quant_state", "nested_absmax", "nested_quant_map", "_blocks_scale", "input_scale", "weight_shape")
_PACKED = {"int4", "nf4", "nf4_single", "mxfp4", "nvfp4"}
_FLOAT = {"BF16": "bf16", "F16": "fp16", "F32": "fp32"}
_LAYER = re.compile(r"(?:^|\.)(?:layers|h|blocks|layer)\.(\d+)\.")
NO_MODEL_HINT = "point at a config.json, a model folder, a .gguf or a .safetensors file"


def _is_aux(t: TensorInfo) -> bool:
    return t.name.endswith(_AUX) or any(a + "." in t.name for a in ("absmax", "quant_map"))


def _stat(path: str) -> os.stat_result:
    try:
        return os.stat(path)
    except OSError as e:
        raise FileFormatError(path, f"cannot open ({e.strerror or e})", hint=NO_MODEL_HINT) from None


def _guess_from_tensors(tensors: list[TensorInfo], name: str) -> Fields:
    """No config.json: layers, widths and heads from tensor names and shapes (head_dim assumed)."""
    f = Fields("safetensors header")
    by = {t.name: t for t in tensors}
    layers = {int(m[1]) for t in tensors if (m := _LAYER.search(t.name))}

    def first(*suffixes: str) -> TensorInfo | None:
        return next((t for t in tensors if t.name.endswith(suffixes) and len(t.shape) == 2), None)

    embd, q, k = first("embed_tokens.weight", "wte.weight"), first("q_proj.weight"), first("k_proj.weight")
    if not layers or embd is None or q is None or k is None:
        raise FileFormatError(name, "no config.json next to it and the tensor names are not a known "
                              "transformer layout", hint="put the model's config.json beside the file")
    hd = 128 if q.shape[0] % 128 == 0 and k.shape[0] % 128 == 0 else 64
    f.set("layers", max(layers) + 1)
    f.set("vocab", embd.shape[0])
    f.set("hidden", embd.shape[1])
    f.set("head_dim", hd, "default")
    f.set("heads", q.shape[0] // hd)
    f.set("kv_heads", max(k.shape[0] // hd, 1))
    f.set("attention", "gqa" if k.shape[0] < q.shape[0] else "mha")
    gate = first("gate_proj.weight", "up_proj.weight")
    f.set("intermediate", gate.shape[0] if gate is not None else None)
    f.set("tied_embeddings", not any(n.endswith("lm_head.weight") for n in by))
    f.warnings.append(f"no config.json: architecture guessed from tensor shapes (head_dim {hd} assumed)")
    return f


def _with_tensors(f: Fields, tensors: list[TensorInfo], where: str) -> tuple[int, Fields]:
    """Dtype, file quantization and parameter count from the tensors."""
    main = [t for t in tensors if not _is_aux(t)]
    by: dict[str, int] = {}
    for t in main:
        by[t.dtype] = by.get(t.dtype, 0) + t.nbytes
    top = max(by, key=lambda k: by[k]) if by else "BF16"
    floats = {d: n for d, n in by.items() if d in _FLOAT}
    if floats and where != "GGUF header":  # GGUF norms are F32 whatever the model's dtype
        f.set("dtype", _FLOAT[max(floats, key=lambda k: floats[k])], where)
    fq = f.values.get("file_quant")
    if not fq:
        fq = "fp8" if top.startswith("F8") else ("" if top in _FLOAT else "")
        if fq:
            f.set("native_quant", fq, where)
        fq = fq or f.values.get("dtype", "bf16")
        f.set("file_quant", fq, where)
    packed = fq in _PACKED or any(t.dtype in ("U8", "I32", "U32", "I8") and len(t.shape) == 2 for t in main)
    probe = ModelSpec(id="x", name="x", params=1, layers=f.values["layers"], kv_heads=f.values["kv_heads"],
                      head_dim=f.values["head_dim"],
                      **{k: v for k, v in f.values.items() if k not in ("layers", "kv_heads", "head_dim")})
    if packed and has_shapes(probe):
        f.prov["params"] = "config.json shapes (packed quantized tensors)"
        return shape_params(probe), f
    f.prov["params"] = where
    return sum(t.n_params for t in main), f


# Caps on what a file may claim (catalog/limits.py SHAPE_LIMITS, the same limits as a shape typed on the
# command line): beyond them the arithmetic would loop over absurd layer counts instead of answering.
_CAPS = SHAPE_LIMITS


def _require(f: Fields, source: str) -> None:
    for key in ("layers", "kv_heads", "head_dim"):
        v = f.values.get(key)
        if not isinstance(v, int) or v <= 0:
            raise FileFormatError(source,
                                  f"cannot tell the model's {key.replace('_', ' ')} from its metadata",
                                  hint="the file is damaged or lacks its architecture keys")
    for key, cap in _CAPS.items():
        v = f.values.get(key)
        if isinstance(v, int) and not 0 <= v <= cap:
            raise FileFormatError(source, f"{key.replace('_', ' ')} of {v:,} is outside 0..{cap:,}",
                                  hint="the file is damaged")


def _check_shape(f: Fields, source: str) -> None:
    """An impossible shape (more KV heads than heads, more experts per token than experts, no layer left
    with attention) is refused before any arithmetic runs on it."""
    probe = spec_from_fields(f, name="x", source=source, origin="file", params=1)
    if problem := shape_problem(probe):
        raise FileFormatError(source, problem, hint="the file is damaged or not a transformer's config")


def build(f: Fields, tensors: list[TensorInfo] | None, *, name: str, source: str, origin: str,
          where: str = "") -> ModelSpec:
    _require(f, source)
    _check_shape(f, source)
    if tensors is not None:
        params, f = _with_tensors(f, tensors, where)
    else:
        probe = spec_from_fields(f, name=name, source=source, origin=origin, params=1)
        missing = [k for k in ("hidden", "vocab", "heads", "intermediate") if not f.values.get(k)]
        if not has_shapes(probe) and (missing or not probe.encoder_only):
            raise FileFormatError(source,
                                  f"cannot count parameters: no {', '.join(missing)} and no weight files",
                                  hint="add the .safetensors files or give --params")
        params = encoder_params(probe) if probe.encoder_only else shape_params(probe)
        f.prov["params"] = f"{f.where} shapes"
        if vision := f.values.get("vision_params", 0):  # the tower's own tensors are not in the text shapes
            f.set("text_params", params, f"{f.where} shapes")
            params += vision
            f.prov["params"] = f"{f.where} shapes + vision_config (estimated)"
        if not f.values.get("file_quant"):
            f.set("file_quant", f.values.get("dtype", "bf16"), f.prov.get("dtype"))
    if params <= 0:
        raise FileFormatError(source, "the file holds no weights", hint=NO_MODEL_HINT)
    spec = spec_from_fields(f, name=name, source=source, origin=origin, params=params)
    if spec.is_moe and has_shapes(spec) and spec.experts_active:
        active = active_shape_params(spec)
        spec = spec.with_(active_params=min(active, params),
                          provenance=(*spec.provenance, ("active_params", "computed from shapes")))
    return spec.with_(tensors=tuple(tensors) if tensors is not None else None)


# ---- GGUF ---------------------------------------------------------------------------------------

def _add_tensors(tensors: list[TensorInfo], more: list[TensorInfo], where: str, seen: set[str]) -> None:
    """All shards' tensors: a name twice is an error (llama-model-loader.cpp: "tensor '%s' is duplicated"),
    and the model as a whole stays under the tensor cap."""
    if len(tensors) + len(more) > _source.MAX_TENSORS:
        raise FileFormatError(where, f"the shards hold over {_source.MAX_TENSORS:,} tensors",
                              hint="is this one model?")
    for t in more:
        if t.name in seen:
            raise FileFormatError(where, f"tensor '{shown(t.name)}' appears in two shards",
                                  hint="the folder mixes two models or two downloads")
        seen.add(t.name)
    tensors += more


def gguf_spec(sources: list[Source], *, name: str, source: str, origin: str) -> ModelSpec:
    head = gguf_reader.parse(sources[0])
    tensors = list(head.tensors)
    seen = {t.name for t in tensors}
    for s in sources[1:]:
        _add_tensors(tensors, gguf_reader.parse(s).tensors, s.name, seen)
    f = gguf_reader.fields_from_gguf(head, sources[0].name)
    if tensors:
        f.set("tied_embeddings", not any(t.name == "output.weight" for t in tensors), "GGUF tensors")
    f.prov["params"] = "GGUF tensors"
    spec = build(f, None if not tensors else tensors, name=name, source=source, origin=origin,
                 where="GGUF header")
    return spec.with_(params=sum(t.n_params for t in tensors) or spec.params)


def read_gguf(path: str, origin: str = "file", name: str = "") -> ModelSpec:
    paths = gguf_reader.shard_paths(path)
    base = gguf_reader.SHARD_RE.sub(r"\g<stem>", os.path.basename(path)).removesuffix(".gguf")
    return gguf_spec([LocalFile(p) for p in paths], name=name or base, source=path, origin=origin)


# ---- safetensors / config.json ------------------------------------------------------------------

def safetensors_tensors(
    files: list[str], read: Callable[[str, st.HeaderBudget], tuple[list[TensorInfo], Any]]
) -> list[TensorInfo]:
    """All shards' tensors, the shards' headers read within one budget (st.HeaderBudget)."""
    tensors: list[TensorInfo] = []
    seen: set[str] = set()
    budget = st.HeaderBudget()
    for p in files:
        _add_tensors(tensors, read(p, budget)[0], p, seen)
    return tensors


def read_folder(folder: str, origin: str = "file", name: str = "") -> ModelSpec:
    name = name or os.path.basename(os.path.normpath(folder)) or folder
    try:
        entries = sorted(os.listdir(folder))
    except OSError as e:
        raise FileFormatError(folder, f"cannot list folder ({e.strerror or e})", hint=NO_MODEL_HINT) from None
    cfg_path = os.path.join(folder, "config.json")
    shards = [e for e in entries if e.endswith(".safetensors") and not e.startswith(".")]
    ggufs = [e for e in entries if e.endswith(".gguf") and not e.startswith(".")]
    if not os.path.isfile(cfg_path) and not shards and ggufs:
        firsts = sorted({gguf_reader.SHARD_RE.sub(r"\g<stem>-00001-of-\g<n>.gguf", g) for g in ggufs})
        # a GGUF repo with several builds: take Q4_K_M, Ollama's and the Hub reader's default
        if len(firsts) > 1:
            firsts = [g for g in firsts if "q4_k_m" in g.lower()] or firsts
        if len(firsts) > 1:
            raise FileFormatError(folder, f"holds {len(firsts)} GGUF models ({', '.join(firsts[:3])}…)",
                                  hint="name the .gguf file you mean")
        return read_gguf(os.path.join(folder, firsts[0]), origin, name)
    if not os.path.isfile(cfg_path) and not shards:
        raise FileFormatError(folder, "no config.json, .safetensors or .gguf file here", hint=NO_MODEL_HINT)
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.lexists(index):  # read (and checked to be a regular file) when present at all
        shards = st.shard_names(read_json_file(index, "safetensors index", _source.index_values()), index)
    if len(shards) > MAX_SHARDS:
        raise FileFormatError(folder, f"{len(shards):,} safetensors files is over the limit",
                              hint=NO_MODEL_HINT)
    tensors = safetensors_tensors([os.path.join(folder, s) for s in shards], st.read_file) if shards else None
    if os.path.isfile(cfg_path):
        f = fields_from_config(read_json_file(cfg_path, "config.json"), cfg_path)
    else:
        f = _guess_from_tensors(tensors or [], folder)
    return build(f, tensors, name=name, source=folder, origin=origin, where="safetensors header")


def read_safetensors(path: str, origin: str = "file") -> ModelSpec:
    folder = os.path.dirname(path) or "."
    tensors, _ = st.read_file(path)
    cfg_path = os.path.join(folder, "config.json")
    if os.path.isfile(cfg_path):
        f = fields_from_config(read_json_file(cfg_path, "config.json"), cfg_path)
    else:
        f = _guess_from_tensors(tensors, path)
    name = os.path.basename(os.path.normpath(folder)) if os.path.isfile(cfg_path) else os.path.basename(path)
    return build(f, tensors, name=name, source=path, origin=origin, where="safetensors header")


def read_config(path: str, origin: str = "file") -> ModelSpec:
    folder = os.path.dirname(path) or "."
    if os.path.basename(path) == "model.safetensors.index.json" or os.path.basename(path) == "config.json":
        if any(e.endswith(".safetensors") for e in os.listdir(folder)):
            return read_folder(folder, origin)
    f = fields_from_config(read_json_file(path, "config.json"), path)
    name = os.path.basename(os.path.normpath(os.path.abspath(folder)))
    return build(f, None, name=name, source=path, origin=origin)


def read_path(path: str, origin: str = "file", name: str = "") -> ModelSpec:
    st_ = _stat(path)
    if os.path.isdir(path):
        return read_folder(path, origin, name)
    if not os.path.isfile(path) or st_.st_size == 0:
        raise FileFormatError(path, "is empty or not a regular file", hint=NO_MODEL_HINT)
    if path.endswith(".gguf"):
        return read_gguf(path, origin, name)
    if path.endswith(".safetensors"):
        return read_safetensors(path, origin)
    if path.endswith(".json"):
        return read_config(path, origin)
    magic = LocalFile(path).read(0, 4)
    if magic == b"GGUF":  # Ollama blobs have no extension
        return gguf_spec([LocalFile(path)], name=name or os.path.basename(path), source=path, origin=origin)
    raise FileFormatError(path, "is not a config.json, .gguf or .safetensors file", hint=NO_MODEL_HINT)

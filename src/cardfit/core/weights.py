"""Weight bytes: exact from a file's tensors, per tensor kind from shapes (GGUF mixes, formats that keep
embeddings in 16-bit), or parameters × bits per weight when only the parameter count is known."""

from __future__ import annotations

from collections import defaultdict
from functools import cache, lru_cache

from ..catalog.models import ModelSpec
from ..catalog.quants import GgufMix, Quant, QuantCatalog, QuantType, default_quants
from ..catalog.records import record
from .gguf_mix import (
    _ATTN_V_KINDS,
    MixModel,
    applies_at,
    position_dependent,
    position_free_type,
    stored_type,
    tensor_type,
)
from .tensors import TensorGroup, fused_in_gguf, gguf_tensor_groups, has_shapes, shapes

# Cache sizes: a whole-catalog question (the plan of every card, largest-model, the benchmark's sweep) asks
# for every catalog model at every quantization (~300 x ~45): the cache must hold them all or it thrashes.
_CACHE = 1 << 15


@record(slots=True)
class Weights:
    total_bytes: int
    params: int
    by_type: tuple[tuple[str, int], ...]  # storage type → bytes
    method: str  # "file" | "shapes" | "params"

    @property
    def bits_per_weight(self) -> float:
        return 8 * self.total_bytes / self.params if self.params else 0.0


def _native(m: ModelSpec, quants: QuantCatalog) -> QuantType:
    return quants.type(m.dtype if m.dtype in ("bf16", "fp16", "fp32") else "bf16")


def _group_type(g: TensorGroup, m: ModelSpec, q: Quant, quants: QuantCatalog, layers_of: dict[str, int],
                index_of: dict[tuple[str, int], int], legacy_qkv: bool = False) -> QuantType:
    if isinstance(q, GgufMix):
        if not g.matrix:
            return quants.type("F32")
        i, n = _position(g, m, layers_of, index_of)
        return tensor_type(q, g.kind, i, n, g.row, quants, tied_output=m.tied_embeddings,
                           mm=_mix_model(m, legacy_qkv))
    if q.kind == "gguf":
        return q if g.matrix else quants.type("F32")
    if q.scope == "all":
        return q if g.matrix or q.kind == "float" else _native(m, quants)
    if not g.matrix or g.kind in ("token_embd", "output"):
        return _native(m, quants)
    if q.scope == "experts" and not g.kind.endswith("_exps"):
        return _native(m, quants)
    if q.scope == "ffn_inner":  # weights_from_shapes counts the inner layers; elsewhere: the 16-bit type
        return _native(m, quants)
    return q


@cache  # a handful of kinds, asked for once per tensor of every model
def _counter(kind: str) -> str:
    """llama-quant.cpp counters: attn_v/attn_qkv/attn_kv_b share one; every 'ffn_down*' tensor counts."""
    if kind in _ATTN_V_KINDS:
        return "attn_v"
    for key in ("ffn_down", "ffn_gate", "ffn_up"):
        if kind.startswith(key) and kind != "ffn_gate_inp":
            return key
    return kind


def _indices(groups: list[TensorGroup]) -> tuple[dict[str, int], dict[tuple[str, int], int]]:
    """Per counter: how many tensors there are, and each tensor's ordinal (visited by layer)."""
    count: dict[str, int] = defaultdict(int)
    index: dict[tuple[str, int], int] = {}
    for g in groups:
        if g.layer >= 0 and g.matrix:
            c = _counter(g.kind)
            index[(g.kind, g.layer)] = count[c]
            count[c] += 1
    return dict(count), index


def _position(g: TensorGroup, m: ModelSpec, layers_of: dict[str, int],
              index_of: dict[tuple[str, int], int]) -> tuple[int, int]:
    """(i, n) as llama-quant.cpp sees them: attn_v by its running counter over attn_v tensors; the FFN
    tensors over n_layer, by the running counter in dense models and by the layer number in MoE models."""
    c = _counter(g.kind)
    if c in ("ffn_down", "ffn_gate", "ffn_up"):
        return (g.layer if m.is_moe else index_of.get((g.kind, g.layer), g.layer)), m.layers
    return index_of.get((g.kind, g.layer), g.layer), layers_of.get(c, m.layers)


@lru_cache(maxsize=_CACHE)  # one frozen record per model: its hash is computed once, not per mix lookup
def _mix_model(m: ModelSpec, legacy_qkv: bool = False) -> MixModel:
    gqa = m.heads // m.kv_heads if m.heads and m.kv_heads else 1
    return MixModel(n_gqa=gqa, n_expert=m.experts, is_70b=m.model_type == "llama" and m.layers == 80,
                    legacy_qkv=legacy_qkv)


@lru_cache(maxsize=_CACHE)
def _buckets(m: ModelSpec, gguf: bool) -> tuple[tuple[TensorGroup, tuple[tuple[int, int], ...]], ...]:
    """The model's tensor groups, identical groups merged: (one group, the (i, n) position of each copy; in a
    GGUF file the position llama-quant.cpp sees, as _indices and _position give it). From the shapes, one
    record per merged group (tests/test_fast_paths.py holds it to the walk over every tensor)."""
    if gguf and fused_in_gguf(m):
        rows = [(g.kind, g.layer, g.n_params, g.row, g.matrix) for g in gguf_tensor_groups(m)]
    else:
        rows = shapes(m)
    n_layers, moe = m.layers, m.is_moe
    # per key: the first row (its group) and the position of every copy
    merged: dict[tuple[str, int, int, bool], tuple[int, list[tuple[int, int]]]] = {}
    if gguf:
        counter = {kind: _counter(kind) for kind in {r[0] for r in rows}}
        count: dict[str, int] = defaultdict(int)
        index: dict[tuple[str, int], int] = {}
        for kind, layer, _, _, matrix in rows:
            if layer >= 0 and matrix:
                c = counter[kind]
                index[(kind, layer)] = count[c]
                count[c] += 1
        for kind, layer, n, row, matrix in rows:
            if matrix:
                c = counter[kind]
                if c in ("ffn_down", "ffn_gate", "ffn_up"):
                    pos = (layer if moe else index.get((kind, layer), layer)), n_layers
                else:
                    pos = index.get((kind, layer), layer), count.get(c, n_layers)
            else:
                pos = (layer, n_layers)
            found = merged.get((kind, n, row, matrix))
            if found is None:
                merged[kind, n, row, matrix] = (layer, [pos])
            else:
                found[1].append(pos)
    else:
        for kind, layer, n, row, matrix in rows:
            found = merged.get((kind, n, row, matrix))
            if found is None:
                merged[kind, n, row, matrix] = (layer, [(layer, n_layers)])
            else:
                found[1].append((layer, n_layers))
    return tuple((TensorGroup(kind, layer, n, row, matrix), tuple(p))
                 for (kind, n, row, matrix), (layer, p) in merged.items())


@lru_cache(maxsize=_CACHE)
def _shape_params(m: ModelSpec, gguf: bool) -> int:
    """Parameters the shapes give (every copy of every bucket), once per model."""
    return sum(g.n_params * len(p) for g, p in _buckets(m, gguf))


def _mix_counts(q: GgufMix, g: TensorGroup, positions: tuple[tuple[int, int], ...], tied: bool,
                mm: MixModel) -> tuple[tuple[QuantType, int], ...]:
    """Storage type → how many of these identical tensors get it under the mix. Not cached itself (its key
    would hash every position of the group, and _weights_from_shapes keeps its result per model and mix)."""
    quants = default_quants()
    i, n = positions[0]
    if not position_dependent(q, g.kind):
        return ((tensor_type(q, g.kind, i, n, g.row, quants, tied_output=tied, mm=mm), len(positions)),)
    # the rule looks at the position only to decide whether it applies: count where it does, type both cases
    hits = applies_at(q, g.kind, positions, mm)
    counts: dict[QuantType, int] = defaultdict(int)
    for applies, count in ((True, hits), (False, len(positions) - hits)):
        if count:
            t = tensor_type(q, g.kind, i, n, g.row, quants, tied_output=tied, mm=mm, applies=applies)
            counts[t] += count
    return tuple(counts.items())


@lru_cache(maxsize=256)
def _positional(q: GgufMix) -> dict[str, bool]:
    """Per tensor kind, whether the mix types it by position (position_dependent), filled as kinds come."""
    return {}


@lru_cache(maxsize=_CACHE)
def _names(q: GgufMix, mm: MixModel) -> dict[str, str | None]:
    """Per tensor kind, position_free_type under this mix for models like mm, filled as kinds come (one dict
    per mix and model shape, so a lookup hashes no record)."""
    return {}


def projector_bytes(m: ModelSpec, q: Quant | None) -> int:
    """llama.cpp / Ollama keep a multimodal model's vision tower and projector in their own F16 file
    (convert_hf_to_gguf.py --mmproj; Ollama's library pages list it as a separate 'projector' layer): the
    quantization mix applies to the language model only, and text decoding never reads the projector."""
    if isinstance(q, GgufMix) and 0 < m.text_params < m.params:
        return (m.params - m.text_params) * 2
    return 0


def weights_from_shapes(m: ModelSpec, q: Quant, legacy_qkv: bool = False) -> Weights:
    """Per tensor group; `legacy_qkv`: GGUF files quantized before llama.cpp's tensor-category refactor."""
    return _weights_from_shapes(m, q, legacy_qkv)  # one cache key however the caller passes legacy_qkv


@lru_cache(maxsize=_CACHE)
def _weights_from_shapes(m: ModelSpec, q: Quant, legacy_qkv: bool) -> Weights:
    quants = default_quants()
    gguf = isinstance(q, GgufMix)
    buckets = _buckets(m, gguf)
    by_type: dict[str, float] = defaultdict(float)
    total_params = _shape_params(m, gguf)
    scale = m.params / total_params if m.params else 1.0  # shapes give proportions, the stated count the size
    vision = projector_bytes(m, q)
    if vision:
        scale = m.text_params / total_params
        by_type["F16"] += vision
    mm = _mix_model(m, legacy_qkv)
    if gguf:
        positional, names = _positional(q), _names(q, mm)
    for g, positions in buckets:
        if gguf and g.matrix:
            kind = g.kind
            moves = positional.get(kind)
            if moves is None:
                moves = positional[kind] = position_dependent(q, kind)  # type: ignore[arg-type]
            if moves:
                for t, count in _mix_counts(q, g, positions, m.tied_embeddings, mm):  # type: ignore[arg-type]
                    by_type[t.name] += t.nbytes(g.n_params) * count * scale
                continue
            # one type for every copy (_mix_counts' first case): where neither the position nor the row
            # decides, the name is kept per mix and model shape (tests/test_fast_paths.py holds it)
            name = names.get(kind, "")
            if name == "":
                name = names[kind] = position_free_type(q, kind, mm, quants)  # type: ignore[arg-type]
            if name is None:
                i, n = positions[0]
                t = tensor_type(q, kind, i, n, g.row, quants,  # type: ignore[arg-type]
                                tied_output=m.tied_embeddings, mm=mm)
            else:
                t = stored_type(name, g.row, quants)
            by_type[t.name] += t.nbytes(g.n_params) * len(positions) * scale
        elif getattr(q, "scope", "") == "ffn_inner" and g.matrix and g.kind.startswith("ffn_") \
                and g.kind != "ffn_gate_inp":
            inner = sum(1 for layer, n in positions if 0 < layer < n - 1)  # not the first and last layers
            native = _native(m, quants)
            by_type[q.name] += q.nbytes(g.n_params) * inner * scale
            by_type[native.name] += native.nbytes(g.n_params) * (len(positions) - inner) * scale
        else:
            t = _group_type(g, m, q, quants, {}, {}, legacy_qkv)
            by_type[t.name] += t.nbytes(g.n_params) * len(positions) * scale
    items = tuple(sorted(((k, round(v)) for k, v in by_type.items()), key=lambda kv: -kv[1]))
    return Weights(sum(v for _, v in items), m.params or total_params, items, "shapes")


def _mix_bpw(q: GgufMix, quants: QuantCatalog) -> QuantType:
    return quants.type(q.default)


@lru_cache(maxsize=_CACHE)  # every memory estimate asks; a whole-catalog sweep asks per context as well
def weights(m: ModelSpec, q: Quant | None = None, legacy_qkv: bool = False) -> Weights:
    """Bytes of the model's weights at quantization q (None: as the file/catalog holds it)."""
    quants = default_quants()
    if m.tensors is not None and (q is None or quants.find(m.file_quant) is q):
        by: dict[str, int] = defaultdict(int)
        for t in m.tensors:
            by[t.dtype] += t.nbytes
        items = tuple(sorted(by.items(), key=lambda kv: -kv[1]))
        return Weights(sum(by.values()), sum(t.n_params for t in m.tensors), items, "file")
    if q is None:
        q = quants.get(m.file_quant or m.dtype)
    if has_shapes(m):
        return weights_from_shapes(m, q, legacy_qkv)
    t = _mix_bpw(q, quants) if isinstance(q, GgufMix) else q
    nbytes = round(m.params * t.bits_per_weight / 8)
    return Weights(nbytes, m.params, ((t.name, nbytes),), "params")


_EMBD_NAMES = ("token_embd.weight", "model.embed_tokens.weight", "embed_tokens.weight",
               "transformer.wte.weight")


@lru_cache(maxsize=_CACHE)
def embedding_bytes(m: ModelSpec, q: Quant | None = None) -> int:
    """Bytes of the input token embedding at its storage type (0 when it doubles as the output matrix, which
    must then live on the GPU). llama.cpp keeps this tensor in system RAM: it is a row lookup."""
    if m.tied_embeddings:
        return 0
    quants = default_quants()
    if m.tensors is not None and (q is None or quants.find(m.file_quant) is q):
        return next((t.nbytes for t in m.tensors if t.name.endswith(_EMBD_NAMES)), 0)
    if not has_shapes(m):
        return 0
    if q is None:
        q = quants.get(m.file_quant or m.dtype)
    w = weights_from_shapes(m, q)
    buckets = _buckets(m, isinstance(q, GgufMix))
    embd = next(((g, p) for g, p in buckets if g.kind == "token_embd"), None)
    if embd is None:
        return 0
    g, positions = embd
    total_params = _shape_params(m, isinstance(q, GgufMix))
    scale = m.params / total_params if m.params else 1.0
    if isinstance(q, GgufMix):
        t = tensor_type(q, g.kind, *positions[0], g.row, quants, tied_output=False, mm=_mix_model(m))
    else:
        t = _group_type(g, m, q, quants, {}, {})
    return min(round(t.nbytes(g.n_params) * scale), w.total_bytes)


def tensor_bytes(m: ModelSpec, q: Quant) -> list[tuple[str, int, int]]:
    """(kind, layer, bytes) of every tensor of the model at q (a GGUF mix types each by its rules), scaled
    to the stated parameter count: what a runtime's own per-layer estimate adds up (runtimes/ollama.py)."""
    from .tensors import tensor_groups

    quants = default_quants()
    groups = gguf_tensor_groups(m) if isinstance(q, GgufMix) else tensor_groups(m)
    layers_of, index_of = _indices(groups)
    scale = m.params / sum(g.n_params for g in groups) if m.params else 1.0
    return [(g.kind, g.layer,
             round(_group_type(g, m, q, quants, layers_of, index_of).nbytes(g.n_params) * scale))
            for g in groups]

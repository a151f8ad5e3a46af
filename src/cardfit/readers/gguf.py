"""GGUF headers: magic, version, tensor and metadata counts (capped), the metadata key/values and the
tensor infos, parsed from bytes fetched in growing chunks (local file or HTTP range read) so a multi-GB
file is never read past its header. Type numbers and block sizes come from the `gguf` package."""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import Any

from ..catalog.models import TensorInfo
from ..errors import FileFormatError, need_extra
from . import source
from .source import GGUF_MAX_DIMS, GGUF_MAX_NAME, MAX_DIM, Source, shown

_HINT = "the file is damaged, truncated or not a GGUF file; download it again"
SHARD_RE = re.compile(r"^(?P<stem>.*)-(?P<i>\d{5})-of-(?P<n>\d{5})\.gguf$")
# scalar value types (gguf.GGUFValueType): format for struct
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q",
           12: "<d"}
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True)
class GgufHeader:
    version: int
    metadata: dict[str, Any]  # arrays of strings are kept only as their length (tokenizer vocabularies)
    tensors: list[TensorInfo]
    ggml_types: list[int]


class _Cursor:
    def __init__(self, src: Source, chunk: int = 1 << 20) -> None:
        self.src, self.pos, self.buf, self.chunk = src, 0, bytearray(), chunk

    def take(self, n: int) -> bytes:
        end = self.pos + n
        self.ensure(end)
        out = bytes(self.buf[self.pos:end])
        self.pos = end
        return out

    def ensure(self, end: int) -> None:
        """Fetch until the buffer holds bytes [0, end)."""
        if end <= len(self.buf):
            return
        if end > source.MAX_GGUF_HEADER:
            raise FileFormatError(self.src.name, f"GGUF header is over {source.MAX_GGUF_HEADER:,} bytes",
                                  hint=_HINT)
        while end > len(self.buf):
            want = max(self.chunk, end - len(self.buf))
            got = self.src.read(len(self.buf), want)
            if not got:
                raise FileFormatError(self.src.name, f"GGUF header is truncated at byte {len(self.buf):,}",
                                      hint=_HINT)
            self.buf += got
            self.chunk = min(self.chunk * 2, 64 << 20)

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        n = self.unpack("<Q")
        if n > source.MAX_GGUF_STRING:
            raise FileFormatError(self.src.name, f"GGUF string of {n:,} bytes is over the "
                                  f"{source.MAX_GGUF_STRING:,}-byte limit", hint=_HINT)
        raw = self.take(n)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw.decode("utf-8", "replace")

    def skip_strings(self, count: int) -> None:
        """Walk past `count` length-prefixed strings (a vocabulary) without copying them."""
        unpack, pos, most = struct.unpack_from, self.pos, source.MAX_GGUF_STRING
        for _ in range(count):
            if pos + 8 > len(self.buf):
                self.ensure(pos + 8)
            (n,) = unpack("<Q", self.buf, pos)
            if n > most:
                raise FileFormatError(self.src.name, f"GGUF string of {n:,} bytes is over the {most:,}-byte "
                                      "limit", hint=_HINT)
            pos += 8 + n
            if pos > len(self.buf):
                self.ensure(pos)
        self.pos = pos


def _value(c: _Cursor, vtype: int, depth: int = 0) -> Any:
    if vtype in _SCALAR:
        return c.unpack(_SCALAR[vtype])
    if vtype == _STRING:
        return c.string()
    if vtype == _ARRAY and depth < 2:
        etype, count = c.unpack("<I"), c.unpack("<Q")
        if count > source.MAX_GGUF_ARRAY:
            raise FileFormatError(c.src.name, f"GGUF array of {count:,} items is over the "
                                  f"{source.MAX_GGUF_ARRAY:,}-item limit", hint=_HINT)
        if etype == _STRING:
            c.skip_strings(count)
            return _StringArray(count)
        if etype in _SCALAR:
            fmt = _SCALAR[etype]
            size = struct.calcsize(fmt)
            if count > 4096:  # vocab scores, token types: keep only the length
                c.take(count * size)
                return _StringArray(count)
            data = c.take(count * size)
            return list(struct.unpack(f"<{count}{fmt[1]}", data))
        return [_value(c, etype, depth + 1) for _ in range(count)]
    raise FileFormatError(c.src.name, f"unknown GGUF value type {vtype}", hint=_HINT)


class _StringArray(int):
    """A long array whose items cardfit does not need: only its length is kept."""


def parse(src: Source) -> GgufHeader:
    need_extra("gguf", extra="gguf", what="reading a .gguf file")
    import gguf  # heavy; only when a GGUF is read

    c = _Cursor(src)
    if c.take(4) != b"GGUF":
        raise FileFormatError(src.name, "not a GGUF file (wrong magic)", hint=_HINT)
    version = c.unpack("<I")
    if version not in (2, 3):
        raise FileFormatError(src.name, f"GGUF version {version} is not supported (2 or 3)",
                              hint="convert it with a current llama.cpp")
    n_tensors, n_kv = c.unpack("<Q"), c.unpack("<Q")
    if n_tensors > source.MAX_GGUF_TENSORS:
        raise FileFormatError(src.name, f"GGUF claims {n_tensors:,} tensors, over the "
                              f"{source.MAX_GGUF_TENSORS:,} limit", hint=_HINT)
    if n_kv > source.MAX_GGUF_KV:
        raise FileFormatError(src.name, f"GGUF claims {n_kv:,} metadata keys, over the "
                              f"{source.MAX_GGUF_KV:,} limit", hint=_HINT)
    meta: dict[str, Any] = {}
    for _ in range(n_kv):
        key = c.string()
        if key in meta:  # llama.cpp gguf.cpp gguf_init_from_reader: "duplicate key" (source.GGUF_MAX_NAME)
            raise FileFormatError(src.name, f"GGUF metadata key '{shown(key)}' appears twice", hint=_HINT)
        meta[key] = _value(c, c.unpack("<I"))
    tensors, types, data_end, seen = [], [], 0, set()
    for _ in range(n_tensors):
        tname = c.string()
        if len(tname.encode()) >= GGUF_MAX_NAME:
            raise FileFormatError(src.name, f"tensor name '{shown(tname)}' is over ggml's "
                                  f"{GGUF_MAX_NAME - 1}-byte limit", hint=_HINT)
        if tname in seen:  # llama.cpp gguf.cpp gguf_init_from_reader: "duplicate tensor name" (ditto)
            raise FileFormatError(src.name, f"tensor '{shown(tname)}' appears twice (llama.cpp refuses such "
                                  "files)", hint=_HINT)
        seen.add(tname)
        nd = c.unpack("<I")
        if nd > GGUF_MAX_DIMS:
            raise FileFormatError(src.name, f"tensor '{shown(tname)}' has {nd} dimensions, over ggml's "
                                  f"{GGUF_MAX_DIMS}", hint=_HINT)
        dims = [c.unpack("<Q") for _ in range(nd)]
        ttype = c.unpack("<I")
        offset = c.unpack("<Q")  # data offset: never followed, only checked against the file's size
        tensors.append(_tensor(src.name, tname, dims, ttype, gguf))
        types.append(ttype)
        data_end = max(data_end, offset + tensors[-1].nbytes)
    _check_size(src, c.pos, meta, data_end)
    return GgufHeader(version, meta, tensors, types)


def _check_size(src: Source, header_end: int, meta: dict[str, Any], data_end: int) -> None:
    """The tensor data starts at the header's end rounded up to general.alignment (32 by default): a file
    shorter than its last tensor is a truncated download, whatever its header says."""
    align = meta.get("general.alignment", 32)
    align = align if isinstance(align, int) and 0 < align <= 1 << 20 else 32
    need = -(-header_end // align) * align + data_end
    if src.size is not None and data_end and need > src.size:
        raise FileFormatError(src.name,
                              f"the tensors end at byte {need:,} but the file has {src.size:,} bytes",
                              hint="the download looks truncated: fetch the file again")


def _tensor(name: str, tname: str, dims: list[int], ttype: int, gguf: Any) -> TensorInfo:
    try:
        qt = gguf.GGMLQuantizationType(ttype)
        block, size = gguf.GGML_QUANT_SIZES[qt]
    except (ValueError, KeyError):
        raise FileFormatError(name, f"tensor '{shown(tname)}' has unknown ggml type {ttype}",
                              hint="update cardfit's gguf package, or check the file") from None
    if any(d > MAX_DIM for d in dims):
        raise FileFormatError(name, f"tensor '{shown(tname)}' has an absurd dimension", hint=_HINT)
    n = 1
    for d in dims:
        n *= d
    if dims and dims[0] % block:
        raise FileFormatError(name, f"tensor '{shown(tname)}' row of {dims[0]} is not a multiple of its "
                              f"{qt.name} block of {block}", hint=_HINT)
    return TensorInfo(tname, tuple(reversed(dims)), qt.name, n // block * size)


def shard_paths(path: str) -> list[str]:
    """All shards of a split GGUF given any one of them (model-00001-of-00003.gguf)."""
    import os

    m = SHARD_RE.match(os.path.basename(path))
    if not m:
        return [path]
    n = int(m["n"])
    if not 1 <= n <= 4096:
        raise FileFormatError(path, f"split GGUF of {n} shards is not plausible", hint=_HINT)
    folder = os.path.dirname(path)
    paths = [os.path.join(folder, f"{m['stem']}-{i:05d}-of-{n:05d}.gguf") for i in range(1, n + 1)]
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        raise FileFormatError(missing[0],
                              f"shard {len(paths) - len(missing)}/{n} present; this one is missing",
                              hint="download every shard of the split model")
    return paths


def _one(v: Any) -> int | None:
    """A per-model number, or the largest of a per-layer array."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, list) and v and all(isinstance(x, int) for x in v):
        return max(v)
    return None


def file_type_name(meta: dict[str, Any], tensors: list[TensorInfo]) -> str:
    """llama.cpp's file type (general.file_type) as a cardfit quant name; else the commonest tensor type."""
    from ..catalog.quants import default_quants

    ft = meta.get("general.file_type")
    for mix in default_quants().mixes:
        if isinstance(ft, int) and mix.ftype == ft:
            return mix.name
    by: dict[str, int] = {}
    for t in tensors:
        if len(t.shape) > 1:
            by[t.dtype] = by.get(t.dtype, 0) + t.nbytes
    return max(by, key=lambda k: by[k]) if by else "F16"


def fields_from_gguf(h: GgufHeader, name: str):  # -> config.Fields
    from .config import Fields

    meta = h.metadata
    arch = meta.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise FileFormatError(name, "GGUF has no general.architecture", hint=_HINT)
    f = Fields("GGUF header")

    def key(k: str) -> int | None:
        return _one(meta.get(f"{arch}.{k}"))

    layers = key("block_count")
    if not layers:
        raise FileFormatError(name, f"GGUF has no {shown(arch, 40)}.block_count", hint=_HINT)
    hidden, heads = key("embedding_length") or 0, key("attention.head_count") or 0
    f.set("model_type", arch)
    f.set("layers", layers)
    f.set("hidden", hidden or None)
    f.set("heads", heads or None)
    kv = key("attention.head_count_kv") or heads
    if not kv:
        raise FileFormatError(name, f"GGUF has no {shown(arch, 40)}.attention.head_count", hint=_HINT)
    f.set("kv_heads", kv)
    f.set("intermediate", key("feed_forward_length"))
    f.set("max_context", key("context_length"))
    _gguf_attention(f, key, hidden, heads)
    _gguf_moe(f, key)
    _gguf_windows(f, meta, arch, key, layers)
    vocab = key("vocab_size") or _one(meta.get("tokenizer.ggml.tokens"))
    embd = next((t for t in h.tensors if t.name == "token_embd.weight"), None)
    if not vocab and embd is not None and len(embd.shape) == 2:
        vocab = embd.shape[0]
    f.set("vocab", vocab)
    f.set("tied_embeddings", not any(t.name == "output.weight" for t in h.tensors), "GGUF tensors")
    f.set("file_quant", file_type_name(meta, h.tensors), "GGUF header")
    return f


def _gguf_attention(f: Any, key: Any, hidden: int, heads: int) -> None:
    rank = key("attention.kv_lora_rank")
    if rank:
        rope = key("rope.dimension_count") or 0
        qk = key("attention.key_length_mla") or key("attention.key_length") or 0
        f.set("attention", "mla")
        f.set("kv_lora_rank", rank)
        f.set("q_lora_rank", key("attention.q_lora_rank") or 0)
        f.set("qk_rope_head_dim", rope)
        f.set("qk_nope_head_dim", max(qk - rope, 0))
        f.set("v_head_dim", key("attention.value_length_mla") or key("attention.value_length"))
        f.set("head_dim", qk)
        return
    hd = key("attention.key_length")
    if not hd and heads:
        hd = hidden // heads
        f.set("head_dim", hd, "GGUF header (embedding_length / head_count)")
    else:
        f.set("head_dim", hd)
    f.set("attention", "gqa" if f.values["kv_heads"] < heads else "mha")


def _gguf_moe(f: Any, key: Any) -> None:
    experts = key("expert_count")
    if not experts or experts < 2:
        return
    f.set("experts", experts)
    f.set("experts_active", key("expert_used_count"))
    f.set("moe_intermediate", key("expert_feed_forward_length") or f.values.get("intermediate"))
    shared = key("expert_shared_count")
    f.set("shared_experts", shared or None)
    sf = key("expert_shared_feed_forward_length")
    if shared and not sf:
        sf = shared * (f.values.get("moe_intermediate") or 0)
    f.set("shared_intermediate", sf or None)
    f.set("dense_layers", key("leading_dense_block_count") or None)


def _gguf_windows(f: Any, meta: dict[str, Any], arch: str, key: Any, layers: int) -> None:
    window = key("attention.sliding_window")
    if window:
        pattern = meta.get(f"{arch}.attention.sliding_window_pattern")
        if isinstance(pattern, list):
            sliding = sum(bool(x) for x in pattern[:layers])
        elif isinstance(pattern, int) and pattern > 0:
            sliding = layers - layers // pattern
        elif arch.startswith("gemma3"):
            sliding = layers - layers // 6  # llama.cpp's fixed Gemma 3 pattern: 5 local, 1 global
        elif arch.startswith("gemma2") or arch == "gpt-oss":
            sliding = (layers + 1) // 2
        else:
            sliding = layers
        f.set("sliding_window", window)
        f.set("sliding_layers", sliding)
    interval = key("full_attention_interval")
    kv_arr = meta.get(f"{arch}.attention.head_count_kv")
    if interval:
        linear = layers - layers // interval
    elif isinstance(kv_arr, list) and key("ssm.conv_kernel"):
        linear = sum(1 for x in kv_arr[:layers] if x == 0)
    else:
        linear = 0
    if linear:
        groups, state, rank = (
            key("ssm.group_count") or 0,
            key("ssm.state_size") or 0,
            key("ssm.time_step_rank") or 0,
        )
        inner = key("ssm.inner_size") or 0
        f.set("linear_layers", linear)
        f.set("linear_key_heads", groups or None)
        f.set("linear_key_head_dim", state or None)
        f.set("linear_value_heads", rank or None)
        f.set("linear_value_head_dim", inner // rank if rank else None)
        f.set("linear_conv_kernel", key("ssm.conv_kernel"))

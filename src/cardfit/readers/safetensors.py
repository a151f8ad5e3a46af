"""safetensors headers, strictly per the format: an 8-byte little-endian header length (capped), a UTF-8
JSON object of tensors {dtype, shape, data_offsets} plus optional __metadata__, offsets inside the data
area and not overlapping. Only the header is read, never the tensors."""

from __future__ import annotations

import os
import struct
from typing import Any

from ..catalog.models import TensorInfo
from ..errors import FileFormatError
from . import source
from .source import (
    MAX_DIM,
    MAX_DIMS,
    MAX_SAFETENSORS_HEADER,
    MAX_SHARDS,
    LocalFile,
    Source,
    json_values_bound,
    parse_json,
    shown,
)

# bits per element of each safetensors dtype (the format's own list)
DTYPE_BITS = {"BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F4": 4, "F6_E2M3": 6,
              "F6_E3M2": 6, "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32,
              "I64": 64, "U64": 64, "F64": 64, "C64": 64}
_HINT = "the file is damaged or not a safetensors file; download it again"
# JSON values (source.json_values_bound) one tensor's entry holds, "name": {"dtype": …, "shape": [d, …],
# "data_offsets": [begin, end]}: ndim + 3 commas and 3 brackets, ndim at most MAX_DIMS
VALUES_PER_TENSOR = MAX_DIMS + 6
# __metadata__: the safetensors library writes {"format": "pt"}; transformers, MLX and quantizers add a
# handful of keys. A header padded with 7.5 million entries (100 MB) took 18 s and 1.5 GB to parse.
MAX_METADATA_VALUES = 4096
# Header bytes of all the shards of one model together: 512 bytes per tensor at the tensor cap, 128 MiB (Kimi
# K2's longest entry, "model.layers.60.mlp.experts.383.down_proj.weight_scale_inv" with its dtype, shape and
# offsets, is 138 bytes); the per-file cap alone let MAX_SHARDS files of MAX_SAFETENSORS_HEADER add up.
HEADER_BYTES_PER_TENSOR = 512


class HeaderBudget:
    """What the headers of one model's shards may cost together (bytes read, JSON values parsed): the
    per-file caps alone let MAX_SHARDS files of legal size add up. One per model read."""

    __slots__ = ("bytes_left", "values_left")

    def __init__(self) -> None:
        self.bytes_left = source.MAX_TENSORS * HEADER_BYTES_PER_TENSOR
        self.values_left = source.MAX_TENSORS * VALUES_PER_TENSOR + MAX_METADATA_VALUES

    def spend(self, name: str, n_bytes: int, values: int) -> None:
        if n_bytes > self.bytes_left or values > self.values_left:
            raise FileFormatError(name, "the model's safetensors headers together are over the limit for "
                                  f"{source.MAX_TENSORS:,} tensors", hint="is this one model?")
        self.bytes_left -= n_bytes
        self.values_left -= values


def header_length(first8: bytes, name: str, size: int | None) -> int:
    if len(first8) < 8:
        raise FileFormatError(name, "too short for a safetensors header", hint=_HINT)
    (n,) = struct.unpack("<Q", first8[:8])
    if n < 2 or n > MAX_SAFETENSORS_HEADER:
        raise FileFormatError(name,
                              f"safetensors header length {n:,} is outside 2..{MAX_SAFETENSORS_HEADER:,}",
                              hint=_HINT)
    if size is not None and 8 + n > size:
        raise FileFormatError(name, f"safetensors header length {n:,} runs past the end of the "
                              f"{size:,}-byte file", hint=_HINT)
    return n


def _shape(v: Any, name: str, key: str) -> tuple[int, ...]:
    if not isinstance(v, list) or len(v) > MAX_DIMS or not all(type(d) is int and 0 <= d <= MAX_DIM
                                                               for d in v):
        raise FileFormatError(name, f"tensor '{shown(key)}' has an invalid shape", hint=_HINT)
    return tuple(v)


def _tensor(key: str, v: Any, name: str) -> tuple[TensorInfo, int, int]:
    if not isinstance(v, dict):
        raise FileFormatError(name, f"tensor '{shown(key)}' is not an object", hint=_HINT)
    dtype, offs = v.get("dtype"), v.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        raise FileFormatError(name, f"tensor '{shown(key)}' has unknown dtype '{shown(dtype, 20)}'",
                              hint=_HINT)
    shape = _shape(v.get("shape"), name, key)
    if (not isinstance(offs, list) or len(offs) != 2 or not all(type(o) is int for o in offs)
            or not 0 <= offs[0] <= offs[1]):
        raise FileFormatError(name, f"tensor '{shown(key)}' has invalid data_offsets", hint=_HINT)
    n = 1
    for d in shape:
        n *= d
    nbytes = -(-n * DTYPE_BITS[dtype] // 8)
    if offs[1] - offs[0] != nbytes:
        raise FileFormatError(name,
                              f"tensor '{shown(key)}' spans {offs[1] - offs[0]:,} bytes but its shape and "
                              f"dtype need {nbytes:,}", hint=_HINT)
    return TensorInfo(key, shape, dtype, nbytes), offs[0], offs[1]


def _values(header: bytes, name: str, budget: HeaderBudget | None) -> int:
    """The JSON values the header may hold, checked before it is parsed: as many as the tensors it claims
    need, plus __metadata__, and within what the model's other shards left."""
    claimed = header.count(b'"data_offsets"')  # every tensor has one: counted before parsing, in C
    if claimed > source.MAX_TENSORS:
        raise FileFormatError(name, f"{claimed:,} tensors is over the {source.MAX_TENSORS:,} limit",
                              hint=_HINT)
    limit = claimed * VALUES_PER_TENSOR + MAX_METADATA_VALUES
    values = json_values_bound(header)
    if values > limit:
        raise FileFormatError(name, f"safetensors header holds up to {values:,} JSON values, over the "
                              f"{limit:,} allowed for {claimed:,} tensor entries and __metadata__",
                              hint=_HINT)
    if budget is not None:
        budget.spend(name, 0, values)
    return values


def parse_header(header: bytes, name: str, data_size: int | None,
                 budget: HeaderBudget | None = None) -> tuple[list[TensorInfo], dict[str, str]]:
    """Tensors and __metadata__ from the JSON header bytes; data_size = file size - 8 - header length."""
    values = _values(header, name, budget)
    obj = parse_json(header, name, "safetensors header", max_values=values)
    if not isinstance(obj, dict):
        raise FileFormatError(name, "safetensors header is not a JSON object", hint=_HINT)
    meta = obj.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise FileFormatError(name, "safetensors __metadata__ must map strings to strings", hint=_HINT)
    if len(obj) > source.MAX_TENSORS:
        raise FileFormatError(name, f"{len(obj):,} tensors is over the {source.MAX_TENSORS:,} limit",
                              hint=_HINT)
    spans = []
    tensors = []
    for key, v in obj.items():
        t, start, end = _tensor(key, v, name)
        tensors.append(t)
        spans.append((start, end, key))
    spans.sort()
    for (_, end, a), (start, _, b) in zip(spans, spans[1:], strict=False):
        if start < end:
            raise FileFormatError(name, f"tensors '{shown(a)}' and '{shown(b)}' overlap", hint=_HINT)
    if data_size is not None and spans and spans[-1][1] > data_size:
        raise FileFormatError(name, f"tensor '{shown(spans[-1][2])}' ends past the end of the file "
                              "(truncated download?)", hint=_HINT)
    return tensors, meta


def read_header(src: Source, budget: HeaderBudget | None = None) -> tuple[list[TensorInfo], dict[str, str]]:
    """One file's header; `budget`: what the model's shards read so far left (a new one for a single file)."""
    n = header_length(src.read(0, 8), src.name, src.size)
    budget = budget or HeaderBudget()
    budget.spend(src.name, n, 0)  # before the header is read
    header = src.read(8, n)
    if len(header) < n:
        raise FileFormatError(src.name, "safetensors header is truncated", hint=_HINT)
    return parse_header(header, src.name, None if src.size is None else src.size - 8 - n, budget)


def read_file(path: str, budget: HeaderBudget | None = None) -> tuple[list[TensorInfo], dict[str, str]]:
    return read_header(LocalFile(path), budget)


def shard_names(index: Any, name: str) -> list[str]:
    """Shard file names from a model.safetensors.index.json (weight_map: tensor → file)."""
    wm = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(wm, dict) or not wm or not all(isinstance(v, str) for v in wm.values()):
        raise FileFormatError(name, "index has no weight_map of tensor → file", hint=_HINT)
    files = sorted(set(wm.values()))
    if len(files) > MAX_SHARDS:
        raise FileFormatError(name, f"{len(files):,} shards is over the {MAX_SHARDS:,} limit", hint=_HINT)
    for f in files:
        if os.path.isabs(f) or ".." in f.replace("\\", "/").split("/") or not f.endswith(".safetensors"):
            raise FileFormatError(name,
                                  f"shard name '{shown(f)}' is not a .safetensors file in the model folder",
                                  hint=_HINT)
    return files

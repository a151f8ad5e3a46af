"""Getting bytes, kept apart from parsing them: a local file or an HTTP range read both offer
`read(offset, n)`, so one parser serves both. Also the caps every reader applies and a strict JSON loader."""

from __future__ import annotations

import json
import os
from typing import Any, Protocol

from ..errors import FileFormatError

MAX_JSON_BYTES = 16 * 2**20  # config.json, index files, Ollama manifests: real ones are < 1 MB
MAX_JSON_DEPTH = 64
MAX_SAFETENSORS_HEADER = 100 * 2**20  # the safetensors library's own limit (100 MB)
MAX_GGUF_HEADER = 256 * 2**20  # metadata + tensor infos; a 256k-token vocabulary is ~10 MB
MAX_TENSORS = 1_000_000
MAX_DIMS = 8
MAX_DIM = 2**40
MAX_SHARDS = 4096


class Source(Protocol):
    """Bytes of one file, read by range. `size` is None when unknown."""

    name: str
    size: int | None

    def read(self, offset: int, n: int) -> bytes: ...


class LocalFile:
    def __init__(self, path: str) -> None:
        self.name = path
        try:
            self.size: int | None = os.path.getsize(path)
        except OSError as e:
            raise FileFormatError(path, f"cannot read ({e.strerror or e})", hint="check the path") from None

    def read(self, offset: int, n: int) -> bytes:
        try:
            with open(self.name, "rb") as f:
                f.seek(offset)
                return f.read(n)
        except OSError as e:
            raise FileFormatError(self.name, f"cannot read ({e.strerror or e})", hint="check the path") from None


def _depth_ok(obj: Any, limit: int) -> bool:
    stack = [(obj, 1)]
    while stack:
        o, d = stack.pop()
        if d > limit:
            return False
        if isinstance(o, dict):
            stack.extend((v, d + 1) for v in o.values())
        elif isinstance(o, list):
            stack.extend((v, d + 1) for v in o)
    return True


def parse_json(data: bytes, name: str, what: str = "JSON") -> Any:
    """Strict JSON from bytes: UTF-8, no NaN, bounded depth. Errors name the file."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FileFormatError(name, f"{what} is not valid UTF-8 (byte {e.start})",
                              hint="the file is damaged; download it again") from None
    try:
        obj = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise FileFormatError(name, f"{what} is nested too deeply", hint="the file is damaged") from None
    except ValueError as e:
        raise FileFormatError(name, f"{what} is not valid JSON ({e})".replace("\n", " "),
                              hint="the file is damaged or truncated; download it again") from None
    if not _depth_ok(obj, MAX_JSON_DEPTH):
        raise FileFormatError(name, f"{what} is nested deeper than {MAX_JSON_DEPTH} levels",
                              hint="the file is damaged")
    return obj


def _no_constant(c: str) -> Any:
    raise ValueError(f"{c} is not allowed")


def read_json_file(path: str, what: str = "JSON") -> Any:
    src = LocalFile(path)
    if src.size is not None and src.size > MAX_JSON_BYTES:
        raise FileFormatError(path, f"{what} is {src.size:,} bytes, over the {MAX_JSON_BYTES:,}-byte limit",
                              hint="is this the right file?")
    return parse_json(src.read(0, min(src.size or 0, MAX_JSON_BYTES)), path, what)


def shown(s: object, limit: int = 80) -> str:
    """A name from a file, safe for a one-line message: printable and short."""
    text = str(s)
    out = "".join(c if c.isprintable() else "?" for c in text[:limit])
    return out + ("…" if len(text) > limit else "")

"""Getting bytes, kept apart from parsing them: a local file or an HTTP range read both offer
`read(offset, n)`, so one parser serves both. Also the caps every reader applies and a strict JSON loader."""

from __future__ import annotations

import json
import os
import stat
from contextvars import ContextVar
from typing import Any, Protocol

from ..errors import FileFormatError, InputError

MAX_JSON_BYTES = 16 * 2**20  # config.json, index files, Ollama manifests: real ones are < 1 MB
MAX_JSON_DEPTH = 64
# JSON values in a config.json or an Ollama manifest (json_values_bound): real configs hold tens to a few
# thousand (tests/test_readers.py's copies of Llama 3.1 8B's, DeepSeek V3's and gpt-oss-20b's: 35, 31, 50;
# Qwen2-VL-7B's in tests/fixtures: 46; an FP8 checkpoint's quantization_config lists at most a few hundred
# modules). Parsing costs about one Python object per value: 5 million `{}` in 15 MB took 10 s and 789 MB.
MAX_JSON_VALUES = 2**16
MAX_SAFETENSORS_HEADER = 100 * 2**20  # the safetensors library's own limit (100 MB)
# Tensors in one model (all shards together). The most in a real checkpoint: Kimi K2 (moonshotai/Kimi-K2-
# Instruct, config.json: 61 layers, the first dense, 384 routed experts, block-FP8 with a weight_scale_inv
# per projection) holds 60 x 384 x 3 x 2 = 138,240 expert tensors alone; twice that is the cap.
MAX_TENSORS = 2**18
# GGUF files store a layer's experts as one tensor (ffn_*_exps), so they hold far fewer: Llama 3.1 405B
# has 126 blocks x 9 + 3 = 1,137. The cap leaves room for old GGUFs with one tensor per expert.
MAX_GGUF_TENSORS = 2**16
MAX_GGUF_KV = 4096  # metadata keys: real files carry 20-60 (general.*, {arch}.*, tokenizer.*)
# The longest GGUF arrays are tokenizer vocabularies: Gemma 3's 262,144 tokens, Llama 3's 280,147 merges.
MAX_GGUF_ARRAY = 2**20
MAX_GGUF_STRING = 2**20  # the longest strings are chat templates, a few KB (Llama 3.1's: about 4 KB)
# ggml.h GGML_MAX_NAME = 64 including the NUL; llama.cpp ggml/src/gguf.cpp gguf_init_from_reader (commit
# 067d44f6c48459f7a82dbafc6fbd0bae97755a4e) rejects a name of 64 bytes or more, and duplicate names and keys
GGUF_MAX_NAME = 64
GGUF_MAX_DIMS = 4  # ggml.h GGML_MAX_DIMS; gguf.cpp rejects a tensor with more dimensions
# metadata + tensor infos: Gemma 3's 262,144-token vocabulary with its scores and types is about 6 MB
MAX_GGUF_HEADER = 64 * 2**20
MAX_DIMS = 8
MAX_DIM = 2**40
MAX_SHARDS = 4096
NOT_REGULAR_HINT = "point at the model file itself, not a pipe, device or socket"


# False while the web API answers a request: no model file, folder or store on the server is read or looked
# up because of what a request says (web/app.py sets it per request; the CLI reads what its user names).
LOCAL_MODEL_FILES: ContextVar[bool] = ContextVar("cardfit_local_model_files", default=True)


def local_files_allowed() -> bool:
    return LOCAL_MODEL_FILES.get()


def _guard() -> None:
    if not LOCAL_MODEL_FILES.get():
        raise InputError("the web API reads no files on the server", field="model",
                         hint="upload the model's config.json instead")


class Source(Protocol):
    """Bytes of one file, read by range. `size` is None when unknown."""

    name: str
    size: int | None

    def read(self, offset: int, n: int) -> bytes: ...


def _open_regular(path: str, what: str = "") -> tuple[int, int]:
    """(fd, size) of a regular file, or FileFormatError. The one check every reader goes through: opened
    without blocking (a FIFO would wait for a writer) and tested on the open descriptor (no race with a
    path swapped after a stat), so a pipe, /dev/zero or a socket is refused before a byte is read."""
    cannot = f"cannot read {what}" if what else "cannot read"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as e:
        raise FileFormatError(path, f"{cannot} ({e.strerror or e})", hint="check the path") from None
    try:
        st = os.fstat(fd)
    except OSError as e:
        os.close(fd)
        raise FileFormatError(path, f"{cannot} ({e.strerror or e})", hint="check the path") from None
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        hint = f"point at the {what.removeprefix('the ')} itself, not a pipe, device or socket" if what else \
            NOT_REGULAR_HINT  # the file the caller reads (a stack file, a catalog file), else a model's
        raise FileFormatError(path, "is not a regular file", hint=hint)
    return fd, st.st_size


def _read_fd(fd: int, offset: int, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        want = min(n - got, 1 << 24)
        if hasattr(os, "pread"):
            part = os.pread(fd, want, offset + got)
        else:  # Windows
            os.lseek(fd, offset + got, os.SEEK_SET)
            part = os.read(fd, want)
        if not part:
            break
        chunks.append(part)
        got += len(part)
    return b"".join(chunks)


def regular_size(path: str) -> int:
    fd, size = _open_regular(path)
    os.close(fd)
    return size


def read_regular(path: str, limit: int, what: str = "file", offset: int = 0, n: int | None = None) -> bytes:
    """Bytes of a regular file: all of it (at most `limit`, else FileFormatError), or `n` from `offset`."""
    fd, size = _open_regular(path, what if n is None else "")
    try:
        if n is None:
            if size > limit:
                raise FileFormatError(path, f"{what} is {size:,} bytes, over the {limit:,}-byte limit",
                                      hint="is this the right file?")
            data = _read_fd(fd, 0, limit + 1)
            if len(data) > limit:  # grew while read
                raise FileFormatError(path, f"{what} is over the {limit:,}-byte limit",
                                      hint="is this the right file?")
            return data
        return _read_fd(fd, offset, min(n, limit))
    except OSError as e:
        raise FileFormatError(path, f"cannot read ({e.strerror or e})", hint="check the path") from None
    finally:
        os.close(fd)


class LocalFile:
    def __init__(self, path: str) -> None:
        _guard()
        self.name = path
        self.size: int | None = regular_size(path)

    def read(self, offset: int, n: int) -> bytes:
        return read_regular(self.name, n, offset=offset, n=n)


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


def json_values_bound(data: bytes) -> int:
    """An upper bound on the values a JSON text holds, counted in C before it is parsed: every value after the
    first in an array or object follows a comma, and every array and object opens with a bracket (one inside a
    string only raises the bound). Parsing makes about one object per value (two for an object member), so a
    cap on this caps the parser's work and memory, not only the bytes."""
    return data.count(b",") + data.count(b"[") + data.count(b"{") + 1


def index_values() -> int:
    """Values a safetensors index may hold: one weight_map entry per tensor of the model, and its metadata."""
    return MAX_TENSORS + MAX_JSON_VALUES


def parse_json(data: bytes, name: str, what: str = "JSON", max_values: int | None = None) -> Any:
    """Strict JSON from bytes: UTF-8, no NaN, bounded depth, at most `max_values` values (MAX_JSON_VALUES
    unless given), refused before parsing. Errors name the file."""
    limit = MAX_JSON_VALUES if max_values is None else max_values
    if (values := json_values_bound(data)) > limit:
        raise FileFormatError(name, f"{what} holds up to {values:,} JSON values, over the {limit:,} limit",
                              hint="is this the right file?")
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


def read_json_file(path: str, what: str = "JSON", max_values: int | None = None) -> Any:
    _guard()
    return parse_json(read_regular(path, MAX_JSON_BYTES, what), path, what, max_values)


def shown(s: object, limit: int = 80) -> str:
    """A name from a file, safe for a one-line message: printable and short."""
    text = str(s)
    out = "".join(c if c.isprintable() else "?" for c in text[:limit])
    return out + ("…" if len(text) > limit else "")

"""Crafted files, generated here: not-regular files where a model file should be, counts and field sizes
over what any real checkpoint has, duplicate tensor names. Each must give one FileFormatError line, fast,
without reading what the header only claims."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest

from cardfit.errors import CardfitError, FileFormatError
from cardfit.readers import read_model_path
from cardfit.readers import source as src_mod

from .helpers import within
from .test_readers_helpers import TINY_LLAMA, write_json

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs need a POSIX system")


def _s(b: bytes | str) -> bytes:
    b = b.encode() if isinstance(b, str) else b
    return struct.pack("<Q", len(b)) + b


def gguf_bytes(kv: list[tuple[str, int, bytes]], tensors: list[tuple[str, list[int], int, int]],
               n_tensors: int | None = None, n_kv: int | None = None) -> bytes:
    """A GGUF v3 header written by hand (the gguf package refuses what these tests need to write):
    kv = (key, value type, packed value), tensors = (name, dims innermost first, ggml type, offset)."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors) if n_tensors is None else n_tensors,
                                len(kv) if n_kv is None else n_kv)
    for key, vtype, value in kv:
        out += _s(key) + struct.pack("<I", vtype) + value
    for name, dims, ttype, offset in tensors:
        out += _s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", ttype, offset)
    return out


ARCH = [("general.architecture", 8, _s("llama")), ("llama.block_count", 4, struct.pack("<I", 1)),
        ("llama.embedding_length", 4, struct.pack("<I", 32)),
        ("llama.attention.head_count", 4, struct.pack("<I", 4))]


def _gguf_file(path: Path, kv, tensors, **kw) -> Path:
    data = gguf_bytes(kv, tensors, **kw)
    path.write_bytes(data + b"\0" * (-len(data) % 32) + b"\0" * 4096)
    return path


def _error(path: Path, seconds: float = 2.0) -> str:
    with within(seconds), pytest.raises(FileFormatError) as e:
        read_model_path(str(path))
    msg = str(e.value)
    assert "\n" not in msg
    return msg


# ---- not a regular file ---------------------------------------------------------------------------

@pytest.mark.parametrize("shard", ["model.safetensors", "model.gguf", "model-00001-of-00002.safetensors"])
def test_fifo_in_a_model_folder_is_refused(tmp_path, shard):
    if shard.endswith(".safetensors"):
        write_json(tmp_path / "config.json", TINY_LLAMA)
    os.mkfifo(tmp_path / shard)
    assert "not a regular file" in _error(tmp_path)


@pytest.mark.parametrize("name", ["model.safetensors", "model.gguf", "config.json"])
def test_fifo_named_directly_is_refused(tmp_path, name):
    os.mkfifo(tmp_path / name)
    assert "not a regular file" in _error(tmp_path / name)


@pytest.mark.parametrize("name", ["model.safetensors", "model.gguf"])
def test_link_to_a_device_in_a_folder_is_refused(tmp_path, name):
    if name.endswith(".safetensors"):
        write_json(tmp_path / "config.json", TINY_LLAMA)
    (tmp_path / name).symlink_to("/dev/zero")
    assert "not a regular file" in _error(tmp_path)


def test_fifo_as_safetensors_index_is_refused(tmp_path):
    write_json(tmp_path / "config.json", TINY_LLAMA)
    (tmp_path / "model-00001-of-00001.safetensors").write_bytes(b"")
    os.mkfifo(tmp_path / "model.safetensors.index.json")
    assert "not a regular file" in _error(tmp_path)


def test_one_regular_file_check_for_every_reader(tmp_path):
    """The check lives in one place: every byte a reader takes comes through source.read_regular."""
    os.mkfifo(tmp_path / "fifo")
    with within(2), pytest.raises(FileFormatError, match="not a regular file"):
        src_mod.read_regular(str(tmp_path / "fifo"), 1024)
    with within(2), pytest.raises(FileFormatError, match="not a regular file"):
        src_mod.LocalFile(str(tmp_path / "fifo")).read(0, 8)


def test_log_fifo_is_refused(tmp_path):
    from cardfit.readers.logs import read_log

    os.mkfifo(tmp_path / "vllm.log")
    with within(2), pytest.raises(CardfitError, match="not a regular file"):
        read_log(str(tmp_path / "vllm.log"))


# ---- counts and field sizes over any real checkpoint's ---------------------------------------------

def test_safetensors_with_too_many_tensors_fails_fast(tmp_path):
    n = src_mod.MAX_TENSORS + 1
    one = '{"dtype":"U8","shape":[0],"data_offsets":[0,0]}'
    header = "{" + ",".join(f'"t{i}":{one}' for i in range(n)) + "}"
    raw = header.encode()
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw)
    write_json(tmp_path / "config.json", TINY_LLAMA)
    assert f"{n:,} tensors" in _error(tmp_path / "model.safetensors", seconds=1.0)


def test_safetensors_shards_together_are_capped(tmp_path, monkeypatch):
    """The cap is on the whole model, not each file: many shards of legal size add up."""
    monkeypatch.setattr(src_mod, "MAX_TENSORS", 3)
    write_json(tmp_path / "config.json", TINY_LLAMA)
    for k in range(2):
        empty = {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]}
        header = json.dumps({f"s{k}t{i}": empty for i in range(2)})
        (tmp_path / f"model-0000{k + 1}-of-00002.safetensors").write_bytes(struct.pack("<Q", len(header))
                                                                            + header.encode())
    assert "tensors" in _error(tmp_path)


def _no_parse(monkeypatch) -> None:
    """The parser must not run: what these files cost is refused from a count made before parsing."""
    def parse(*a, **k):
        raise AssertionError("json.loads ran on a file its counts should have refused")

    monkeypatch.setattr(src_mod.json, "loads", parse)


def test_safetensors_header_padded_with_metadata_fails_fast(tmp_path, monkeypatch):
    """7.5 million __metadata__ entries (52 MB, under the 100 MB header cap) took 18 s and 1.5 GB to parse."""
    entries = b'"k":"",' * 7_500_000
    tensor = b'"w":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}'
    raw = b'{"__metadata__":{' + entries + b'"format":"pt"},' + tensor + b"}"
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw)
    write_json(tmp_path / "config.json", TINY_LLAMA)
    _no_parse(monkeypatch)
    msg = _error(tmp_path / "model.safetensors", seconds=2.0)
    assert "up to 7,500,010 JSON values, over the 4,110 allowed for 1 tensor entries and __metadata__" in msg


def test_config_json_of_5m_empty_objects_fails_fast(tmp_path, monkeypatch):
    """5 million `{}` (15 MB, under the 16 MiB cap) took 10 s and 789 MB to parse before being refused as not
    an object."""
    (tmp_path / "config.json").write_bytes(b"[" + b"{}," * 5_000_000 + b"{}]")
    _no_parse(monkeypatch)
    msg = _error(tmp_path / "config.json", seconds=2.0)
    assert f"over the {src_mod.MAX_JSON_VALUES:,} limit" in msg and "config.json holds up to 10,000,00" in msg


def test_safetensors_index_holds_one_entry_per_tensor(tmp_path):
    """The index's weight_map has an entry per tensor: it may hold as many values as the tensor cap."""
    write_json(tmp_path / "config.json", TINY_LLAMA)
    wm = {f"t{i}": "model-00001-of-00001.safetensors" for i in range(src_mod.MAX_JSON_VALUES + 10)}
    write_json(tmp_path / "model.safetensors.index.json", {"metadata": {}, "weight_map": wm})
    (tmp_path / "model-00001-of-00001.safetensors").write_bytes(struct.pack("<Q", 2) + b"{}")
    assert "holds no weights" in _error(tmp_path)  # the index is read; the empty shard is what is refused


def test_safetensors_shards_share_one_budget(tmp_path, monkeypatch):
    """Each shard's metadata is under the per-file allowance; together they are over the model's."""
    from cardfit.readers import safetensors as st_mod

    monkeypatch.setattr(src_mod, "MAX_TENSORS", 4)  # budget: 4 x 14 + 4,096 values, 4 x 512 bytes
    monkeypatch.setattr(st_mod, "HEADER_BYTES_PER_TENSOR", 1 << 20)  # bytes not the limit here
    write_json(tmp_path / "config.json", TINY_LLAMA)
    meta = {f"m{j}": "" for j in range(3000)}
    empty = {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]}
    for k in range(2):
        header = json.dumps({"__metadata__": meta, f"s{k}": empty})
        (tmp_path / f"model-0000{k + 1}-of-00002.safetensors").write_bytes(struct.pack("<Q", len(header))
                                                                            + header.encode())
    st_mod.read_file(str(tmp_path / "model-00001-of-00002.safetensors"))  # one alone is within its caps
    assert "headers together are over the limit" in _error(tmp_path)


def test_safetensors_shards_header_bytes_are_capped_together(tmp_path, monkeypatch):
    from cardfit.readers import safetensors as st_mod

    monkeypatch.setattr(st_mod, "HEADER_BYTES_PER_TENSOR", 16)  # 262,144 x 16 bytes: 4 MiB for the model
    write_json(tmp_path / "config.json", TINY_LLAMA)
    for k in range(2):
        header = json.dumps({"__metadata__": {"pad": "x" * 3_000_000},
                             f"s{k}": {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]}})
        (tmp_path / f"model-0000{k + 1}-of-00002.safetensors").write_bytes(struct.pack("<Q", len(header))
                                                                            + header.encode())
    assert "headers together are over the limit" in _error(tmp_path)


def test_gguf_array_of_30m_empty_strings_fails_fast(tmp_path):
    kv = [*ARCH, ("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 30_000_000))]
    path = tmp_path / "m.gguf"
    path.write_bytes(gguf_bytes(kv, []) + b"\0" * 8 * 1000)  # the count is refused before any item is read
    assert "30,000,000 items" in _error(path, seconds=0.5)


def test_gguf_string_over_the_field_cap(tmp_path):
    big = src_mod.MAX_GGUF_STRING + 1
    kv = [*ARCH, ("tokenizer.chat_template", 8, struct.pack("<Q", big))]
    path = tmp_path / "m.gguf"
    path.write_bytes(gguf_bytes(kv, []) + b"x" * 100)
    assert f"{big:,} bytes" in _error(path, seconds=0.5)


def test_gguf_tensor_count_over_the_cap(tmp_path):
    path = _gguf_file(tmp_path / "m.gguf", ARCH, [], n_tensors=src_mod.MAX_GGUF_TENSORS + 1)
    assert "tensors" in _error(path, seconds=0.5)


def test_gguf_metadata_count_over_the_cap(tmp_path):
    path = _gguf_file(tmp_path / "m.gguf", ARCH, [], n_kv=src_mod.MAX_GGUF_KV + 1)
    assert "metadata keys" in _error(path, seconds=0.5)


def test_gguf_tensor_name_of_64_bytes_is_refused(tmp_path):
    """ggml's GGML_MAX_NAME is 64 with the terminating NUL: llama.cpp rejects names of 64 bytes or more."""
    path = _gguf_file(tmp_path / "m.gguf", ARCH, [("x" * 64, [32], 0, 0)])
    assert "name" in _error(path)


def test_gguf_duplicate_tensor_names_are_an_error(tmp_path):
    tensors = [("token_embd.weight", [32, 10], 0, 0), ("blk.0.attn_q.weight", [32, 32], 0, 1280),
               ("blk.0.attn_q.weight", [32, 32], 0, 5376)]
    path = _gguf_file(tmp_path / "m.gguf", ARCH, tensors)
    assert "blk.0.attn_q.weight" in _error(path) and "twice" in _error(path)


def test_gguf_duplicate_metadata_keys_are_an_error(tmp_path):
    kv = [*ARCH, ("llama.block_count", 4, struct.pack("<I", 7))]
    assert "twice" in _error(_gguf_file(tmp_path / "m.gguf", kv, []))


def test_gguf_more_than_four_dimensions(tmp_path):
    path = _gguf_file(tmp_path / "m.gguf", ARCH, [("t", [32, 1, 1, 1, 1], 0, 0)])
    assert "dimensions" in _error(path)

"""Fuzz: every reader on mutated headers (truncated, flipped bytes, huge lengths, deep JSON, non-UTF-8)
raises only cardfit errors (one line each), never a traceback; the CLI exits 2 with one `Error:` line."""

from __future__ import annotations

import functools
import json
import os
import struct
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cardfit.errors import CardfitError
from cardfit.readers import read_model_path

from .test_readers_helpers import TINY_GGUF_KV, TINY_LLAMA, tiny_gguf_tensors, write_gguf, write_safetensors

SETTINGS = settings(max_examples=int(os.environ.get("CARDFIT_FUZZ_EXAMPLES", "150")), deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@functools.cache
def _seeds() -> dict[str, bytes]:
    import gguf

    d = Path(tempfile.mkdtemp())
    g = write_gguf(d / "m.gguf", kv=TINY_GGUF_KV | {"{arch}.attention.sliding_window": 512},
                   tensors=tiny_gguf_tensors(layers=1), vocab=20)
    s = write_safetensors(
        d / "m.safetensors",
        {
            "model.embed_tokens.weight": np.zeros((10, 8), np.float16),
            "model.layers.0.self_attn.q_proj.weight": np.zeros((8, 8), np.float16),
            "model.layers.0.self_attn.k_proj.weight": np.zeros((4, 8), np.float16),
        },
    )
    cfg = json.dumps(TINY_LLAMA).encode()
    header = g.read_bytes()[:gguf.GGUFReader(str(g)).data_offset]  # the header alone: readers never need more
    return {"gguf": header, "safetensors": s.read_bytes(), "json": cfg}


def _mutate(data: bytes, draw_ops) -> bytes:
    b = bytearray(data)
    for kind, pos, val in draw_ops:
        if not b:
            break
        i = pos % len(b)
        if kind == "flip":
            b[i] ^= 1 << (val % 8)
        elif kind == "byte":
            b[i] = val % 256
        elif kind == "truncate":
            del b[i:]
        elif kind == "u64":  # a huge or odd length/count at an 8-byte-aligned spot
            i -= i % 8
            b[i:i + 8] = struct.pack("<Q", [0, 2**63 - 1, 2**32, val, 1 << 40][val % 5])
        elif kind == "insert":
            b[i:i] = bytes([val % 256]) * (val % 17)
    return bytes(b)


OPS = st.lists(st.tuples(st.sampled_from(["flip", "byte", "truncate", "u64", "insert"]),
                         st.integers(0, 1 << 20), st.integers(0, 1 << 32)), min_size=1, max_size=4)


def _read_only_cardfit_errors(path) -> None:
    try:
        read_model_path(str(path))
    except CardfitError as e:
        assert "\n" not in str(e)


@pytest.mark.parametrize("kind, name", [("gguf", "m.gguf"), ("safetensors", "m.safetensors"),
                                        ("json", "config.json")])
@SETTINGS
@given(ops=OPS)
def test_mutated_headers(tmp_path, kind, name, ops):
    p = tmp_path / name
    p.write_bytes(_mutate(_seeds()[kind], ops))
    _read_only_cardfit_errors(p)


@SETTINGS
@given(
    obj=st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
        lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4),
        max_leaves=30,
    ),
    keys=st.dictionaries(
        st.sampled_from(
            sorted(TINY_LLAMA)
            + ["text_config", "layer_types", "quantization_config", "kv_lora_rank", "num_experts", "head_dim"]
        ),
        st.none() | st.integers(-5, 1 << 45) | st.text(max_size=4) | st.lists(st.integers(0, 4)),
        max_size=6,
    ),
)
def test_odd_config_values(tmp_path, obj, keys):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(TINY_LLAMA | keys | {"extra": obj}))
    _read_only_cardfit_errors(p)


@SETTINGS
@given(header=st.recursive(st.integers(-3, 1 << 41) | st.text(max_size=5) | st.none(),
                           lambda c: st.lists(c, max_size=3) | st.dictionaries(
                               st.sampled_from(["dtype", "shape", "data_offsets", "__metadata__", "w", "x"]),
                               c, max_size=4), max_leaves=20))
def test_safetensors_odd_headers(tmp_path, header):
    raw = json.dumps(header).encode()
    p = tmp_path / "m.safetensors"
    p.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(64))
    _read_only_cardfit_errors(p)


def _values(o) -> int:
    """Values in a parsed JSON document: every container and every scalar (object keys are not values)."""
    if isinstance(o, dict):
        return 1 + sum(_values(v) for v in o.values())
    if isinstance(o, list):
        return 1 + sum(_values(v) for v in o)
    return 1


@SETTINGS
@given(obj=st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=6),
                        lambda c: st.lists(c, max_size=5) | st.dictionaries(st.text(max_size=4), c,
                                                                            max_size=5),
                        max_leaves=60),
       compact=st.booleans())
def test_json_values_bound_is_an_upper_bound(obj, compact):
    """The count the readers refuse on before parsing never undercounts: a file under the cap is never
    refused for values it does not hold, and one over it never reaches the parser."""
    from cardfit.readers.source import json_values_bound

    text = json.dumps(obj, separators=(",", ":") if compact else None).encode()
    assert json_values_bound(text) >= _values(obj)


@pytest.mark.parametrize("data", [b"[" * 200_000, b'{"a":' * 50_000 + b"1" + b"}" * 50_000, b"\xfe\xff{}",
                                  b"\x00" * 8])
def test_deep_or_binary_json(tmp_path, data):
    p = tmp_path / "config.json"
    p.write_bytes(data)
    _read_only_cardfit_errors(p)


def test_cli_exits_2_with_one_line(tmp_path, run_cli):
    bad = {"m.gguf": _seeds()["gguf"][:300], "m.safetensors": struct.pack("<Q", 1 << 50) + b"{}",
           "config.json": b'{"model_type": "llama"'}
    for name, data in bad.items():
        p = tmp_path / name
        p.write_bytes(data)
        code, out, err = run_cli("plan", str(p), "--json")
        assert code == 2 and out == "", name
        assert err.startswith("Error: ") and err.count("\n") == 1 and "Traceback" not in err, err

"""--hub: config.json by GET, safetensors/GGUF headers by HTTP range requests, on a mocked transport
(no network). Checks that only header bytes travel, that HF_TOKEN and HF_ENDPOINT are honoured, and
that failures say how to work offline."""

from __future__ import annotations

import json
import re

import httpx
import numpy as np
import pytest

from cardfit.core.weights import weights
from cardfit.errors import NetworkError
from cardfit.readers import read_model_path
from cardfit.readers.hub import read_hub_model

from .test_readers_helpers import (
    TINY_GGUF_KV,
    TINY_LLAMA,
    tiny_gguf_tensors,
    tiny_llama_tensors,
    write_gguf,
    write_json,
    write_safetensors,
)


class FakeHub:
    def __init__(self, repo: str, files: dict[str, bytes], host: str = "huggingface.co",
                 honour_range: bool = True) -> None:
        self.repo, self.files, self.host, self.honour_range = repo, files, host, honour_range
        self.sent = 0
        self.auth: set[str] = set()

    def __call__(self, req: httpx.Request) -> httpx.Response:
        assert req.url.host == self.host
        self.auth.add(req.headers.get("Authorization", ""))
        path = req.url.path
        if path == f"/api/models/{self.repo}":
            return httpx.Response(200, json={"id": self.repo, "siblings": [{"rfilename": f} for f in self.files]})
        prefix = f"/{self.repo}/resolve/main/"
        if not path.startswith(prefix) or path[len(prefix):] not in self.files:
            return httpx.Response(404)
        data = self.files[path[len(prefix):]]
        rng = req.headers.get("Range")
        if rng and self.honour_range:
            m = re.fullmatch(r"bytes=(\d+)-(\d+)", rng)
            a, b = int(m[1]), min(int(m[2]), len(data) - 1)
            body = data[a:b + 1]
            self.sent += len(body)
            return httpx.Response(206, content=body, headers={"Content-Range": f"bytes {a}-{b}/{len(data)}"})
        self.sent += len(data)
        return httpx.Response(200, content=data)


def _safetensors_repo(tmp_path):
    d = tmp_path / "repo"
    write_json(d / "config.json", TINY_LLAMA)
    ts = tiny_llama_tensors(np.float32)
    names = sorted(ts)
    parts = {"model-00001-of-00002.safetensors": names[:10], "model-00002-of-00002.safetensors": names[10:]}
    for fname, keys in parts.items():
        write_safetensors(d / fname, {k: ts[k] for k in keys})
    write_json(d / "model.safetensors.index.json", {"weight_map": {k: f for f, ks in parts.items() for k in ks}})
    return d, {p.name: p.read_bytes() for p in d.iterdir()}


def test_hub_safetensors_by_range(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    d, files = _safetensors_repo(tmp_path)
    hub = FakeHub("acme/tiny", files)
    m = read_hub_model("acme/tiny", transport=httpx.MockTransport(hub))
    local = read_model_path(str(d))
    assert m.origin == "hub" and m.hf == "acme/tiny"
    assert m.tensors == local.tensors and weights(m).total_bytes == weights(local).total_bytes
    assert m.params == local.params and m.layers == 2
    weight_bytes = sum(t.nbytes for t in m.tensors)
    assert hub.sent < sum(len(v) for v in files.values()) - weight_bytes + 64  # headers only, no weights
    assert hub.auth == {"Bearer hf_secret"}
    assert dict(m.provenance)["layers"] == "config.json (Hub)"


def test_hub_server_ignoring_range_is_still_bounded(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    _, files = _safetensors_repo(tmp_path)
    m = read_hub_model("acme/tiny", transport=httpx.MockTransport(FakeHub("acme/tiny", files, honour_range=False)))
    assert m.layers == 2 and len(m.tensors) == 21


def test_hub_gguf_and_endpoint(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "https://mirror.example.org/")
    g = write_gguf(tmp_path / "tiny-Q4_K_M.gguf", kv=TINY_GGUF_KV, tensors=tiny_gguf_tensors())
    other = write_gguf(tmp_path / "tiny-Q8_0.gguf", kv=TINY_GGUF_KV, tensors=tiny_gguf_tensors(qtype="Q8_0"),
                       file_type=7)
    hub = FakeHub("acme/tiny-GGUF", {"README.md": b"hi", g.name: g.read_bytes(), other.name: other.read_bytes()},
                  host="mirror.example.org")
    m = read_hub_model("acme/tiny-GGUF", transport=httpx.MockTransport(hub))
    assert m.file_quant == "Q4_K_M" and m.tensors == read_model_path(str(g)).tensors  # Q4_K_M preferred
    m = read_hub_model("acme/tiny-GGUF/tiny-Q8_0.gguf", transport=httpx.MockTransport(hub))
    assert m.file_quant == "Q8_0" and m.source.endswith("tiny-Q8_0.gguf")


@pytest.mark.parametrize("status, text", [(401, "HF_TOKEN"), (403, "HF_TOKEN"), (404, "not found"),
                                          (500, "work offline")])
def test_hub_http_errors(status, text):
    t = httpx.MockTransport(lambda req: httpx.Response(status))
    with pytest.raises(NetworkError) as e:
        read_hub_model("acme/tiny", transport=t)
    assert text in str(e.value) and "\n" not in str(e.value)


def test_hub_offline_says_how_to_work_offline():
    def fail(req):
        raise httpx.ConnectError("no route to host", request=req)

    with pytest.raises(NetworkError) as e:
        read_hub_model("acme/tiny", transport=httpx.MockTransport(fail))
    assert "work offline" in str(e.value) and "huggingface-cli download" in str(e.value)


def test_hub_bad_repo_id():
    from cardfit.errors import InputError

    for bad in ("nope", "../../etc/passwd", "a/b/c/d"):
        with pytest.raises(InputError):
            read_hub_model(bad, transport=httpx.MockTransport(lambda r: httpx.Response(500)))


def test_hub_bad_json(tmp_path):
    hub = FakeHub("acme/x", {"config.json": b"{" * 10})
    from cardfit.errors import FileFormatError

    with pytest.raises(FileFormatError, match="config.json"):
        read_hub_model("acme/x", transport=httpx.MockTransport(hub))
    hub = FakeHub("acme/x", {"config.json": json.dumps(TINY_LLAMA).encode(), "model.safetensors": b"\xff" * 7})
    with pytest.raises(FileFormatError, match="too short"):
        read_hub_model("acme/x", transport=httpx.MockTransport(hub))

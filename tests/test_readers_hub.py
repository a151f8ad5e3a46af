"""--hub through huggingface_hub, against a fake Hub on 127.0.0.1 (HF_ENDPOINT): the file list from the model
API, config.json and the index by hf_hub_download (into a private cache), safetensors/GGUF headers by HTTP
range requests. Checks that only header bytes travel, that HF_TOKEN and HF_ENDPOINT are honoured, that the
bytes go through the same parsers as a local file, and that failures say how to work offline. No network."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from cardfit.core.weights import weights
from cardfit.errors import FileFormatError, InputError, NetworkError
from cardfit.readers import read_model_path

from .test_readers_helpers import (
    TINY_GGUF_KV,
    TINY_LLAMA,
    tiny_gguf_tensors,
    tiny_llama_tensors,
    write_gguf,
    write_json,
    write_safetensors,
)

pytest.importorskip("huggingface_hub", reason="the `hub` extra (pip install 'cardfit[hub]') is not installed")

SHA = "0123456789abcdef0123456789abcdef01234567"


class FakeHub:
    """The few Hub routes huggingface_hub uses for one repo: GET /api/models/REPO[/revision/REV] and
    HEAD/GET /REPO/resolve/REV/FILE (with Range, X-Repo-Commit and ETag)."""

    def __init__(self, repo: str, files: dict[str, bytes], honour_range: bool = True,
                 status: int = 200) -> None:
        self.repo, self.files, self.honour_range, self.status = repo, files, honour_range, status
        self.sent = 0
        self.auth: set[str] = set()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_HEAD(self):  # noqa: N802
                hub.answer(self, head=True)

            def do_GET(self):  # noqa: N802
                hub.answer(self, head=False)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeHub:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, h: BaseHTTPRequestHandler, head: bool) -> None:
        self.auth.add(h.headers.get("Authorization", ""))
        path = h.path.split("?")[0]
        if self.status != 200:
            return self.send(h, self.status, b'{"error": "no"}', head, {"X-Error-Code": "GatedRepo"}
                             if self.status == 403 else {})
        if re.fullmatch(rf"/api/models/{re.escape(self.repo)}(/revision/[\w.-]+)?", path):
            doc = {"id": self.repo, "modelId": self.repo, "sha": SHA, "private": False,
                   "siblings": [{"rfilename": f} for f in self.files]}
            return self.send(h, 200, json.dumps(doc).encode(), head, {"Content-Type": "application/json"})
        m = re.fullmatch(rf"/{re.escape(self.repo)}/resolve/([\w.-]+)/(.+)", path)
        if not m or m[2] not in self.files:
            return self.send(h, 404, b"", head, {"X-Error-Code": "EntryNotFound"})
        data = self.files[m[2]]
        extra = {"X-Repo-Commit": SHA, "ETag": f'"{hashlib.sha256(data).hexdigest()}"',
                 "Accept-Ranges": "bytes"}
        rng = h.headers.get("Range")
        if rng and self.honour_range and not head:
            a, b = (int(x) for x in re.fullmatch(r"bytes=(\d+)-(\d+)", rng).groups())
            b = min(b, len(data) - 1)
            return self.send(h, 206, data[a:b + 1], head,
                             {**extra, "Content-Range": f"bytes {a}-{b}/{len(data)}"})
        return self.send(h, 200, data, head, extra)

    def send(self, h: BaseHTTPRequestHandler, code: int, body: bytes, head: bool, headers: dict) -> None:
        h.send_response(code)
        for k, v in headers.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if not head:
            h.wfile.write(body)
            self.sent += len(body)


@pytest.fixture()
def hub_env(monkeypatch, tmp_path):
    """Point huggingface_hub at a fake endpoint and a private cache (it reads both at import time)."""
    from huggingface_hub import constants
    from huggingface_hub.utils import close_session

    def use(fake: FakeHub, token: str | None = None) -> None:
        monkeypatch.setattr(constants, "ENDPOINT", fake.url)  # what HF_ENDPOINT sets at import
        monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE",
                            fake.url + "/{repo_id}/resolve/{revision}/{filename}")
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        if token:
            monkeypatch.setenv("HF_TOKEN", token)
        else:
            monkeypatch.delenv("HF_TOKEN", raising=False)
        monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
        monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
        close_session()

    return use


def _read(name: str):
    from cardfit.readers.hub import read_hub_model

    return read_hub_model(name)


def _safetensors_repo(tmp_path):
    d = tmp_path / "repo"
    write_json(d / "config.json", TINY_LLAMA)
    ts = tiny_llama_tensors(np.float32)
    names = sorted(ts)
    parts = {"model-00001-of-00002.safetensors": names[:10], "model-00002-of-00002.safetensors": names[10:]}
    for fname, keys in parts.items():
        write_safetensors(d / fname, {k: ts[k] for k in keys})
    write_json(d / "model.safetensors.index.json",
               {"weight_map": {k: f for f, ks in parts.items() for k in ks}})
    return d, {p.name: p.read_bytes() for p in d.iterdir()}


def test_hub_safetensors_by_range(tmp_path, hub_env):
    d, files = _safetensors_repo(tmp_path)
    with FakeHub("acme/tiny", files) as fake:
        hub_env(fake, token="hf_secret")
        m = _read("acme/tiny")
    local = read_model_path(str(d))
    assert m.origin == "hub" and m.hf == "acme/tiny"
    assert m.tensors == local.tensors and weights(m).total_bytes == weights(local).total_bytes
    assert m.params == local.params and m.layers == 2
    weight_bytes = sum(t.nbytes for t in m.tensors)
    assert fake.sent < sum(len(v) for v in files.values()) - weight_bytes + 4096  # headers only, no weights
    assert "Bearer hf_secret" in fake.auth
    assert dict(m.provenance)["layers"] == "config.json (Hub)"
    assert m.source == f"{fake.url}/acme/tiny"  # HF_ENDPOINT honoured
    # config.json went into huggingface_hub's cache, as `hf download` would put it
    assert list((tmp_path / "hf-cache").glob("models--acme--tiny/snapshots/*/config.json"))


def test_hub_server_ignoring_range_is_still_bounded(tmp_path, hub_env):
    _, files = _safetensors_repo(tmp_path)
    with FakeHub("acme/tiny", files, honour_range=False) as fake:
        hub_env(fake)
        m = _read("acme/tiny")
    assert m.layers == 2 and len(m.tensors) == 21


def test_hub_gguf(tmp_path, hub_env):
    g = write_gguf(tmp_path / "tiny-Q4_K_M.gguf", kv=TINY_GGUF_KV, tensors=tiny_gguf_tensors())
    other = write_gguf(tmp_path / "tiny-Q8_0.gguf", kv=TINY_GGUF_KV, tensors=tiny_gguf_tensors(qtype="Q8_0"),
                       file_type=7)
    files = {"README.md": b"hi", g.name: g.read_bytes(), other.name: other.read_bytes()}
    with FakeHub("acme/tiny-GGUF", files) as fake:
        hub_env(fake)
        m = _read("acme/tiny-GGUF")
        assert m.file_quant == "Q4_K_M" and m.tensors == read_model_path(str(g)).tensors  # Q4_K_M preferred
        m = _read("acme/tiny-GGUF/tiny-Q8_0.gguf")
        assert m.file_quant == "Q8_0" and m.source.endswith("tiny-Q8_0.gguf")


@pytest.mark.parametrize("status, text", [(401, "HF_TOKEN"), (403, "HF_TOKEN"), (404, "not found"),
                                          (500, "work offline")])
def test_hub_http_errors(hub_env, status, text):
    with FakeHub("acme/tiny", {}, status=status) as fake:
        hub_env(fake)
        with pytest.raises(NetworkError) as e:
            _read("acme/tiny")
    assert text in str(e.value) and "\n" not in str(e.value)


def test_hub_offline_says_how_to_work_offline(hub_env):
    fake = FakeHub("acme/tiny", {})
    fake.server.server_close()  # nothing listens there
    hub_env(fake)
    with pytest.raises(NetworkError) as e:
        _read("acme/tiny")
    assert "work offline" in str(e.value) and "hf download" in str(e.value)


def test_hub_bad_repo_id():
    for bad in ("nope", "../../etc/passwd", "a/b/c/d"):
        with pytest.raises(InputError):
            _read(bad)


def test_hub_bad_json(tmp_path, hub_env):
    with FakeHub("acme/x", {"config.json": b"{" * 10}) as fake:
        hub_env(fake)
        with pytest.raises(FileFormatError, match="config.json"):
            _read("acme/x")
    files = {"config.json": json.dumps(TINY_LLAMA).encode(), "model.safetensors": b"\xff" * 7}
    with FakeHub("acme/y", files) as fake:
        hub_env(fake)
        with pytest.raises(FileFormatError, match="too short"):
            _read("acme/y")


def test_cli_hub_end_to_end(tmp_path, run_json):
    """`cardfit plan ORG/NAME --hub` in a fresh process with HF_ENDPOINT set, as a user would run it."""
    _, files = _safetensors_repo(tmp_path)
    with FakeHub("acme/tiny", files) as fake:
        import subprocess
        import sys

        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_ENDPOINT": fake.url, "LANG": "C.UTF-8",
               "HF_HUB_CACHE": str(tmp_path / "cache"), "COLUMNS": "120"}
        out = subprocess.run([sys.executable, "-m", "cardfit", "plan", "acme/tiny", "--hub", "--gpu",
                              "RTX 4090", "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["model"]["name"] == "acme/tiny" and r["memory"]["weights_bytes"] > 0


def test_missing_extra_is_one_line(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_hub(name, *args, **kwargs):
        if name == "huggingface_hub" or name.startswith("huggingface_hub."):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_hub)
    with pytest.raises(InputError) as e:
        _read("acme/tiny")
    assert str(e.value) == ("--hub reads the Hugging Face Hub with the huggingface_hub package, which is not "
                            "installed; pip install 'cardfit[hub]'")


def _cached_repo(tmp_path):
    from .test_readers import _hf_cache

    src = tmp_path / "src"
    write_json(src / "config.json", TINY_LLAMA)
    write_safetensors(src / "model.safetensors", tiny_llama_tensors())
    _hf_cache(tmp_path / "hub", "acme/tiny",
              {f: (src / f).read_bytes() for f in ("config.json", "model.safetensors")})


def test_hf_cache_is_found_by_huggingface_hubs_scanner(tmp_path, monkeypatch):
    import huggingface_hub

    from cardfit.readers.stores import find_local

    _cached_repo(tmp_path)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    calls = []
    real = huggingface_hub.scan_cache_dir
    monkeypatch.setattr(huggingface_hub, "scan_cache_dir", lambda d=None: calls.append(d) or real(d))
    m = find_local("acme/tiny")
    assert calls == [str(tmp_path / "hub")]
    assert m is not None and m.origin == "hf-cache" and len(m.tensors) == 21
    assert find_local("acme/other") is None and len(calls) == 1  # an uncached repo costs no scan


def test_hf_cache_without_the_extra(tmp_path, monkeypatch):
    import builtins

    from cardfit.readers.stores import find_local

    _cached_repo(tmp_path)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    real = builtins.__import__

    def no_hub(name, *args, **kwargs):
        if name.startswith("huggingface_hub"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_hub)
    m = find_local("acme/tiny")
    assert m is not None and m.origin == "hf-cache" and len(m.tensors) == 21

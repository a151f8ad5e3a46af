"""The Hugging Face Hub (with --hub): config.json by HTTP GET, safetensors and GGUF headers by HTTP range
requests, so no weights are downloaded. Honours HF_ENDPOINT and HF_TOKEN. The same parsers read the bytes
as for local files."""

from __future__ import annotations

import os
import re
from typing import Any

from ..catalog.models import ModelSpec
from ..errors import FileFormatError, InputError, NetworkError
from .source import MAX_JSON_BYTES, MAX_SHARDS, parse_json

_REPO = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96})(?:@(?P<rev>[\w.-]{1,64}))?"
                   r"(?:/(?P<file>[\w./-]{1,300}\.gguf))?$")
OFFLINE_HINT = ("check the network, or work offline: `huggingface-cli download REPO --include '*.json'` and "
                "pass the folder, or drop --hub to use the built-in catalog")
TIMEOUT_S = 20.0


def endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def _headers() -> dict[str, str]:
    token = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
    h = {"User-Agent": "cardfit"}
    if token:
        h["Authorization"] = f"Bearer {token.strip()}"
    return h


class Hub:
    def __init__(self, repo: str, rev: str, client: Any) -> None:
        self.repo, self.rev, self.client = repo, rev, client

    def url(self, path: str) -> str:
        return f"{endpoint()}/{self.repo}/resolve/{self.rev}/{path}"

    def _check(self, r: Any, what: str) -> None:
        if r.status_code in (401, 403):
            raise NetworkError(f"{self.repo}: the Hub refused {what} (HTTP {r.status_code}): gated or private",
                               hint="accept the licence on the model page and set HF_TOKEN")
        if r.status_code == 404:
            raise NetworkError(f"{self.repo}: {what} not found on the Hub (HTTP 404)",
                               hint="check the repo id (org/name) and revision")
        if r.status_code >= 400:
            raise NetworkError(f"{self.repo}: the Hub answered HTTP {r.status_code} for {what}", hint=OFFLINE_HINT)

    def get(self, url: str, what: str, limit: int, headers: dict[str, str] | None = None) -> tuple[Any, bytes]:
        import httpx

        try:
            with self.client.stream("GET", url, headers=headers or {}) as r:
                self._check(r, what)
                body = bytearray()
                for chunk in r.iter_bytes():
                    body += chunk
                    if len(body) >= limit:
                        break
                return r, bytes(body[:limit])
        except httpx.HTTPError as e:
            raise NetworkError(f"cannot reach {endpoint()} for {self.repo} ({type(e).__name__})",
                               hint=OFFLINE_HINT) from None

    def json(self, url: str, what: str) -> Any:
        r, body = self.get(url, what, MAX_JSON_BYTES + 1)
        if len(body) > MAX_JSON_BYTES:
            raise FileFormatError(url, f"{what} is over {MAX_JSON_BYTES:,} bytes", hint="is this the right repo?")
        return parse_json(body, url, what)

    def exists(self, path: str) -> bool:
        return path in self.files()

    def files(self) -> list[str]:
        if not hasattr(self, "_files"):
            rev = "" if self.rev == "main" else f"/revision/{self.rev}"
            doc = self.json(f"{endpoint()}/api/models/{self.repo}{rev}", "the file list")
            sib = doc.get("siblings") if isinstance(doc, dict) else None
            self._files = [s["rfilename"] for s in sib or [] if isinstance(s, dict)
                           and isinstance(s.get("rfilename"), str)]
        return self._files


class RangeFile:
    """A Hub file read by HTTP range requests (the Source protocol)."""

    def __init__(self, hub: Hub, path: str) -> None:
        self.hub, self.path = hub, path
        self.name = hub.url(path)
        self.size: int | None = None

    def read(self, offset: int, n: int) -> bytes:
        if n <= 0:
            return b""
        # a server that ignores Range sends the file from byte 0: read no further than offset + n
        r, body = self.hub.get(self.name, self.path, offset + n, {"Range": f"bytes={offset}-{offset + n - 1}"})
        total = r.headers.get("Content-Range", "").rpartition("/")[2]
        if total.isdigit():
            self.size = int(total)
        if r.status_code == 206:
            return body[:n]
        if self.size is None and r.headers.get("Content-Length", "").isdigit():
            self.size = int(r.headers["Content-Length"])
        return body[offset:offset + n]


def _gguf_files(files: list[str], chosen: str | None) -> list[str]:
    from .gguf import SHARD_RE

    ggufs = sorted(f for f in files if f.endswith(".gguf"))
    if chosen:
        pick = chosen
    else:
        pref = [f for f in ggufs if "q4_k_m" in f.lower()] or ggufs
        pick = pref[0]
    m = SHARD_RE.match(pick.rsplit("/", 1)[-1])
    if not m:
        return [pick]
    prefix = pick[: len(pick) - len(pick.rsplit("/", 1)[-1])]
    return [f"{prefix}{m['stem']}-{i:05d}-of-{m['n']}.gguf" for i in range(1, min(int(m["n"]), MAX_SHARDS) + 1)]


def read_hub_model(name: str, transport: Any = None) -> ModelSpec:
    """config.json plus safetensors (or GGUF) headers of a Hub repo: org/name[@revision][/file.gguf].
    `transport` (an httpx transport) is for tests."""
    m = _REPO.match(name.strip())
    if not m or ".." in name:
        raise InputError(f"'{name}' is not a Hub repo id", field="model", hint="give org/name, e.g. "
                         "meta-llama/Llama-3.1-8B-Instruct")
    import httpx

    with httpx.Client(headers=_headers(), timeout=TIMEOUT_S, follow_redirects=True, transport=transport) as client:
        return _read(Hub(m["repo"], m["rev"] or "main", client), m["file"])


def _read(hub: Hub, gguf_file: str | None) -> ModelSpec:
    from . import safetensors as st
    from .config import fields_from_config
    from .model import build, gguf_spec

    files = hub.files()
    source = f"{endpoint()}/{hub.repo}"
    if gguf_file or ("config.json" not in files and any(f.endswith(".gguf") for f in files)):
        paths = _gguf_files(files, gguf_file)
        return gguf_spec([RangeFile(hub, p) for p in paths], name=hub.repo, source=hub.url(paths[0]),
                         origin="hub").with_(hf=hub.repo)
    if "config.json" not in files:
        raise NetworkError(f"{hub.repo} has no config.json or .gguf file on the Hub", hint="check the repo id")
    f = fields_from_config(hub.json(hub.url("config.json"), "config.json"), hub.url("config.json"),
                           "config.json (Hub)")
    if "model.safetensors.index.json" in files:
        index = hub.url("model.safetensors.index.json")
        shards = st.shard_names(hub.json(index, "safetensors index"), index)
    else:
        shards = sorted(x for x in files if x.endswith(".safetensors") and "/" not in x)
    tensors = []
    for s in shards:
        tensors += st.read_header(RangeFile(hub, s))[0]
    return build(f, tensors if shards else None, name=hub.repo, source=source, origin="hub",
                 where="safetensors header (Hub)").with_(hf=hub.repo)

"""The Hugging Face Hub (with --hub), read through `huggingface_hub` (the optional `hub` extra): the file list
from `HfApi.model_info`, config.json and the safetensors index with `hf_hub_download` (its cache, HF_TOKEN,
HF_ENDPOINT mirrors, HF_HUB_OFFLINE and retries), and the safetensors / GGUF headers by HTTP range requests
on the library's own session and headers, so no weights are downloaded. The bytes go through the same
strict parsers as a local file (readers/safetensors.py, readers/gguf.py, source.parse_json)."""

from __future__ import annotations

import re
from typing import Any

from ..catalog.models import ModelSpec
from ..errors import CardfitError, InputError, NetworkError
from .source import MAX_SHARDS, index_values, read_json_file

_REPO = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96})(?:@(?P<rev>[\w.-]{1,64}))?"
                   r"(?:/(?P<file>[\w./-]{1,300}\.gguf))?$")
OFFLINE_HINT = ("check the network, or work offline: `hf download REPO --include '*.json'` and pass the "
                "folder, or drop --hub to use the built-in catalog")
EXTRA_HINT = "pip install 'cardfit[hub]'"
TIMEOUT_S = 20.0


def _hf() -> Any:
    """The huggingface_hub module, or one line naming the extra that brings it."""
    try:
        import huggingface_hub
    except ImportError:
        raise InputError("--hub reads the Hugging Face Hub with the huggingface_hub package, which is not "
                         "installed", field="hub", hint=EXTRA_HINT) from None
    return huggingface_hub


def endpoint() -> str:
    from huggingface_hub import constants

    return constants.ENDPOINT.rstrip("/")


class Hub:
    """One repo at one revision, through huggingface_hub."""

    def __init__(self, repo: str, rev: str | None) -> None:
        self.repo, self.rev = repo, rev

    def url(self, path: str) -> str:
        from huggingface_hub import hf_hub_url

        return hf_hub_url(self.repo, path, revision=self.rev, endpoint=endpoint())

    def _failed(self, e: Exception, what: str) -> NetworkError:
        """huggingface_hub's errors (and the transport's) as one line that says what to do."""
        from huggingface_hub import errors

        if isinstance(e, errors.GatedRepoError) or (
                getattr(getattr(e, "response", None), "status_code", 0) in (401, 403)):
            return NetworkError(f"{self.repo}: the Hub refused {what}: gated or private",
                                hint="accept the licence on the model page and set HF_TOKEN")
        code = getattr(getattr(e, "response", None), "status_code", None)
        if isinstance(e, errors.RepositoryNotFoundError | errors.RevisionNotFoundError) or (
                code == 404 and not isinstance(e, errors.EntryNotFoundError)):
            return NetworkError(
                f"{self.repo}: repo or revision not found on the Hub",
                hint="check the repo id (org/name) and revision, and HF_TOKEN for a private one",
            )
        if isinstance(e, errors.EntryNotFoundError):
            return NetworkError(f"{self.repo}: {what} not found on the Hub",
                                hint="check the repo id and revision")
        if isinstance(e, errors.HfHubHTTPError):
            return NetworkError(f"{self.repo}: the Hub answered HTTP {code} for {what}", hint=OFFLINE_HINT)
        return NetworkError(f"cannot reach {endpoint()} for {self.repo} ({type(e).__name__})",
                            hint=OFFLINE_HINT)

    def files(self) -> list[str]:
        if not hasattr(self, "_files"):
            from huggingface_hub import HfApi

            try:
                info = HfApi(endpoint=endpoint()).model_info(self.repo, revision=self.rev)
            except CardfitError:
                raise
            except Exception as e:  # the network boundary: every failure becomes one NetworkError line
                raise self._failed(e, "the file list") from None
            self._files = [s.rfilename for s in info.siblings or [] if isinstance(s.rfilename, str)]
        return self._files

    def json(self, path: str, what: str, max_values: int | None = None) -> Any:
        """A small JSON file through hf_hub_download (cached), parsed by the same strict loader as a local
        one."""
        from huggingface_hub import hf_hub_download

        try:
            local = hf_hub_download(self.repo, path, revision=self.rev, endpoint=endpoint())
        except Exception as e:
            raise self._failed(e, what) from None
        return read_json_file(local, what, max_values)

    def get(self, url: str, what: str, limit: int, headers: dict[str, str]) -> tuple[Any, bytes]:
        """At most `limit` bytes of a GET on huggingface_hub's session, with its auth and user-agent
        headers."""
        from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

        try:
            with get_session().stream("GET", url, headers={**build_hf_headers(), **headers},
                                      follow_redirects=True, timeout=TIMEOUT_S) as r:
                hf_raise_for_status(r)
                body = bytearray()
                for chunk in r.iter_bytes():
                    body += chunk
                    if len(body) >= limit:
                        break
                return r, bytes(body[:limit])
        except Exception as e:
            raise self._failed(e, what) from None


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
        r, body = self.hub.get(self.name, self.path, offset + n,
                               {"Range": f"bytes={offset}-{offset + n - 1}"})
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
    return [f"{prefix}{m['stem']}-{i:05d}-of-{m['n']}.gguf"
            for i in range(1, min(int(m["n"]), MAX_SHARDS) + 1)]


def read_hub_model(name: str) -> ModelSpec:
    """config.json plus safetensors (or GGUF) headers of a Hub repo: org/name[@revision][/file.gguf]."""
    m = _REPO.match(name.strip())
    if not m or ".." in name:
        raise InputError(f"'{name}' is not a Hub repo id", field="model", hint="give org/name, e.g. "
                         "meta-llama/Llama-3.1-8B-Instruct")
    _hf()
    return _read(Hub(m["repo"], m["rev"]), m["file"])


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
        raise NetworkError(f"{hub.repo} has no config.json or .gguf file on the Hub",
                           hint="check the repo id")
    config_url = hub.url("config.json")
    f = fields_from_config(hub.json("config.json", "config.json"), config_url, "config.json (Hub)")
    if "model.safetensors.index.json" in files:
        index = hub.url("model.safetensors.index.json")
        shards = st.shard_names(hub.json("model.safetensors.index.json", "safetensors index", index_values()),
                                index)
    else:
        shards = sorted(x for x in files if x.endswith(".safetensors") and "/" not in x)
    tensors = []
    budget = st.HeaderBudget()  # the shards together, as a local folder's
    for s in shards:
        tensors += st.read_header(RangeFile(hub, s), budget)[0]
    return build(f, tensors if shards else None, name=hub.repo, source=source, origin="hub",
                 where="safetensors header (Hub)").with_(hf=hub.repo)


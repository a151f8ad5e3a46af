"""Local model stores: the Hugging Face cache (HF_HUB_CACHE, else HF_HOME/hub, else
~/.cache/huggingface/hub: models--org--name/snapshots/<rev>/) and the Ollama store (OLLAMA_MODELS, else
~/.ollama/models: manifests/<registry>/<namespace>/<model>/<tag> → the layer of media type
application/vnd.ollama.image.model → blobs/sha256-<hex>, a GGUF)."""

from __future__ import annotations

import os
import re

from ..catalog.models import ModelSpec
from ..errors import FileFormatError

OLLAMA_MODEL_MEDIA = "application/vnd.ollama.image.model"
# patterns as text, compiled on first use by re's own cache (`cardfit plan` reads _OLLAMA only where an
# Ollama store is)
_HF_ID = r"^[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}$"
_OLLAMA = (r"^(?:(?P<host>[\w.-]+\.[\w.-]+(?::\d+)?)/)?(?:(?P<ns>[\w.-]+)/)?(?P<model>[\w.-]+)"
           r"(?::(?P<tag>[\w.-]+))?$")
_DIGEST = r"^sha256[:-](?P<hex>[0-9a-f]{64})$"


def hf_cache_dir() -> str:
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    return os.path.join(home, "hub")


def ollama_dir() -> str:
    return os.environ.get("OLLAMA_MODELS") or os.path.join(os.path.expanduser("~"), ".ollama", "models")


def hf_snapshot(repo_id: str) -> str | None:
    """The snapshot folder of a cached repo: the revision refs/main points to, else the newest."""
    if not re.match(_HF_ID, repo_id) or ".." in repo_id:
        return None
    root = os.path.join(hf_cache_dir(), "models--" + repo_id.replace("/", "--"))
    snaps = os.path.join(root, "snapshots")
    if not os.path.isdir(snaps):  # not cached: answered without importing anything
        return None
    try:
        return _hf_snapshot_by_library(repo_id)
    except ImportError:  # no `hub` extra: read refs/main ourselves, as huggingface_hub would
        pass
    from ..errors import FileFormatError as _Unreadable
    from .source import read_regular

    try:
        rev = read_regular(os.path.join(root, "refs", "main"), 100, n=100).decode("utf-8", "replace").strip()
        if re.fullmatch(r"[0-9a-f]{40}", rev) and os.path.isdir(os.path.join(snaps, rev)):
            return os.path.join(snaps, rev)
    except _Unreadable:
        pass
    try:
        revs = [os.path.join(snaps, r) for r in os.listdir(snaps)]
    except OSError:
        return None
    revs = [r for r in revs if os.path.isdir(r)]
    return max(revs, key=os.path.getmtime) if revs else None


def _hf_snapshot_by_library(repo_id: str) -> str | None:
    """The same answer from huggingface_hub's own cache scanner (`scan_cache_dir`), which knows its layout
    (refs, snapshots, blobs) across versions: the revision `main` points to, else the newest."""
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound, CorruptedCacheException

    try:
        info = scan_cache_dir(hf_cache_dir())
    except (CacheNotFound, CorruptedCacheException, OSError):
        return None
    repo = next((r for r in info.repos if r.repo_type == "model" and r.repo_id == repo_id), None)
    if repo is None or not repo.revisions:
        return None
    main = [r for r in repo.revisions if "main" in r.refs]
    rev = main[0] if main else max(repo.revisions, key=lambda r: r.last_modified)
    return str(rev.snapshot_path)


def ollama_blob(name: str) -> str | None:
    """Path of the GGUF blob of an Ollama tag in the local store (None when the tag is not pulled)."""
    store = ollama_dir()
    if not os.path.isdir(os.path.join(store, "manifests")):  # no store (or nothing ever pulled): no tag
        return None
    m = re.match(_OLLAMA, name.strip())
    if not m or ".." in name:
        return None
    host, ns = m["host"] or "registry.ollama.ai", m["ns"] or "library"
    manifest = os.path.join(store, "manifests", host, ns, m["model"], m["tag"] or "latest")
    if not os.path.isfile(manifest):
        return None
    from .source import read_json_file

    doc = read_json_file(manifest, "Ollama manifest")
    layers = doc.get("layers") if isinstance(doc, dict) else None
    layer = next((x for x in layers if isinstance(x, dict) and x.get("mediaType") == OLLAMA_MODEL_MEDIA),
                 None) if isinstance(layers, list) else None
    if layer is None:
        raise FileFormatError(manifest, f"Ollama manifest has no {OLLAMA_MODEL_MEDIA} layer",
                              hint=f"pull it again: ollama pull {name}")
    d = re.match(_DIGEST, str(layer.get("digest", "")))
    if not d:
        raise FileFormatError(manifest, "Ollama manifest's model layer has no sha256 digest",
                              hint=f"pull it again: ollama pull {name}")
    blob = os.path.join(store, "blobs", f"sha256-{d['hex']}")
    if not os.path.isfile(blob):
        raise FileFormatError(blob, "the model blob named by the Ollama manifest is missing",
                              hint=f"pull it again: ollama pull {name}")
    return blob


def find_local(name: str) -> ModelSpec | None:
    """A model id found in the HF cache or an Ollama tag in the local store (None when absent, and always
    while the web API answers a request: the server's stores are not the requester's)."""
    from .source import local_files_allowed

    if not local_files_allowed():
        return None
    snap = hf_snapshot(name) if "/" in name and ":" not in name else None
    if snap is not None:
        from .model import read_folder

        return read_folder(snap, "hf-cache", name).with_(hf=name)
    blob = ollama_blob(name)
    if blob is not None:
        from .model import gguf_spec
        from .source import LocalFile

        return gguf_spec([LocalFile(blob)], name=name, source=blob, origin="ollama-store")
    return None

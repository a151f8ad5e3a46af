"""Loads catalog data files: the built-ins shipped in `cardfit/data/` and the user's own TOML or JSON
files, through one path. A repeated id is an error unless the later record says `override = true`."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from ..errors import CatalogError
from .schema import check_keys, check_tables

MAX_USER_FILE_BYTES = 8 * 2**20
# the package's data folder, read by path: importlib.resources costs ~10 ms of imports at start-up
DATA = Path(__file__).resolve().parent.parent / "data"
# The tables a user's --catalog file may hold (GPUs, models, API tiers and APIs) and its format version.
USER_TABLES = ("schema", "gpu", "model", "tier", "api")


def builtin_path(name: str) -> str:
    """How errors name a built-in data file."""
    return f"cardfit/data/{name}"


CACHE_FORMAT = 1
# A record is the catalog's JSON form: a few times its TOML at most (every built-in is < 100 KB as TOML).
CACHE_SIZE_FACTOR = 8
CACHE_SIZE_FLOOR = 1 << 20


def _cache_dir() -> Path | None:
    """$XDG_CACHE_HOME/cardfit when XDG_CACHE_HOME is absolute, else ~/.cache/cardfit when the home exists.
    XDG Base Directory spec (https://specifications.freedesktop.org/basedir-spec/latest/): "All paths set in
    these environment variables must be absolute. If an implementation encounters a relative path in any of
    these variables it should consider the path invalid and ignore it." A missing home is never created."""
    if os.environ.get("CARDFIT_NO_CACHE"):
        return None
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "cardfit"
    home = os.path.expanduser("~")
    if not os.path.isabs(home) or not os.path.isdir(home):
        return None
    return Path(home) / ".cache" / "cardfit"


@cache
def builtin(name: str) -> dict[str, Any]:
    """Parse `cardfit/data/<name>` once per process. TOML parsing is pure Python and slow at start-up, so
    the parsed form is kept as JSON in the user's cache. A record is trusted only when it checks out (see
    _read_cache); anything else is parsed again and rewritten (an unwritable cache just means parsing every
    time)."""
    raw = (DATA / name).read_bytes()
    source_sha = hashlib.sha256(raw).hexdigest()
    cache_dir = _cache_dir()
    cached = cache_dir / f"{name}.{source_sha[:20]}.json" if cache_dir else None
    if cached is not None:
        data = _read_cache(cached, name, source_sha, CACHE_SIZE_FLOOR + CACHE_SIZE_FACTOR * len(raw))
        if data is not None:
            return data
    import tomllib  # only when the cache misses: the parser's imports cost ~10 ms at start-up

    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:  # a broken built-in is a packaging bug
        raise CatalogError(f"built-in catalog is malformed: {e}", path=name) from e
    if cached is not None:
        _write_cache(cached, name, source_sha, data)
    return data


def _read_cache(path: Path, name: str, source_sha: str, limit: int) -> dict[str, Any] | None:
    """The cached catalog, or None when the record is missing or wrong in any way: not a regular file (a FIFO
    would hang, /dev/zero never ends), over `limit` bytes, not the record schema, made from other source
    bytes, or data whose hash does not match (truncated, edited)."""
    from ..errors import CardfitError
    from ..readers.source import read_regular

    try:
        record = json.loads(read_regular(str(path), limit, "catalog cache"))
    except (CardfitError, ValueError, RecursionError):
        return None
    if not (isinstance(record, dict) and record.get("format") == CACHE_FORMAT and record.get("source") == name
            and record.get("source_sha256") == source_sha and isinstance(record.get("data"), str)
            and isinstance(record.get("data_sha256"), str)):
        return None
    text = record["data"]
    if hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest() != record["data_sha256"]:
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _write_cache(path: Path, name: str, source_sha: str, data: dict[str, Any]) -> None:
    try:
        text = json.dumps(data)  # TOML dates are not JSON: such a file is simply not cached
        data_sha = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        record = {"format": CACHE_FORMAT, "source": name, "source_sha256": source_sha,
                  "data_sha256": data_sha, "data": text}
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # the XDG spec's mode for new folders
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(record), encoding="utf-8")
        tmp.replace(path)
    except (OSError, TypeError, ValueError):
        pass


def read_user_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Parse a user catalog file (TOML or JSON); every failure is a one-line CatalogError."""
    import tomllib

    from ..errors import FileFormatError
    from ..readers.source import read_regular

    p = Path(path)
    try:
        raw = read_regular(str(p), MAX_USER_FILE_BYTES, "catalog file")
    except FileFormatError as e:
        raise CatalogError(e.problem, path=str(p)) from None
    try:
        text = raw.decode("utf-8")
        if p.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            data = tomllib.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError, tomllib.TOMLDecodeError, RecursionError) as e:
        raise CatalogError(f"not valid {'JSON' if p.suffix.lower() == '.json' else 'TOML'}: {e}",
                           path=str(p)) from e
    if not isinstance(data, dict):
        raise CatalogError("top level must be a table/object", path=str(p))
    check_tables(data, USER_TABLES, path=str(p))
    return data


def merge_records(
    builtin_rows: Iterable[dict[str, Any]], user_rows: Iterable[tuple[str, dict[str, Any]]], key: str = "id",
    *, table: str, allowed: frozenset[str], builtin_file: str,
) -> list[dict[str, Any]]:
    """Built-in rows then user rows; a user row with an existing id must say `override = true`. Every row
    holds only the keys `allowed` lists (catalog/schema.py), else a CatalogError names file, record and
    key."""
    out: dict[str, dict[str, Any]] = {}
    for row in builtin_rows:
        check_keys(row, allowed, table=table, path=builtin_path(builtin_file))
        if row[key] in out:
            raise CatalogError(f"duplicate id '{row[key]}' in built-in catalog")
        out[row[key]] = row
    for origin, row in user_rows:
        if not isinstance(row, dict) or key not in row:
            raise CatalogError(f"every record needs an '{key}'", path=origin)
        check_keys(row, allowed, table=table, path=origin)
        rid = row[key]
        if rid in out and not row.get("override"):
            raise CatalogError(f"id '{rid}' already exists; add `override = true` to replace it", path=origin)
        base = out.get(rid, {}) if row.get("override") else {}
        out[rid] = {**base, **{k: v for k, v in row.items() if k != "override"}, "origin": origin}
    return list(out.values())

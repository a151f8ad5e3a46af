"""Loads catalog data files: the built-ins shipped in `cardfit/data/` and the user's own TOML or JSON
files, through one path. A repeated id is an error unless the later record says `override = true`."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from functools import cache
from typing import Any

from ..errors import CatalogError
from .schema import check_keys, check_tables

MAX_USER_FILE_BYTES = 8 * 2**20
# the package's data folder, read by path: importlib.resources costs ~10 ms of imports at start-up (and
# pathlib another ~5 ms: every command reads this folder, so plain os.path)
DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
# The tables a user's --catalog file may hold (GPUs, models, API tiers and APIs) and its format version.
USER_TABLES = ("schema", "gpu", "model", "tier", "api")


def builtin_path(name: str) -> str:
    """How errors name a built-in data file."""
    return f"cardfit/data/{name}"


# 3: a record is a line of JSON (the header: format, source, its SHA-256, the data's CRC-32) and then the
# data's JSON, parsed once (2: the data was a string inside the record, so every read scanned it twice, ~10 %
# of `cardfit plan`'s instructions; 1: a SHA-256 of the data in place of the CRC-32, ~4 ms per cold start)
CACHE_FORMAT = 3
# A record is the catalog's JSON form: a few times its TOML at most (every built-in is < 100 KB as TOML).
CACHE_SIZE_FACTOR = 8
CACHE_SIZE_FLOOR = 1 << 20


def _sha256(data: bytes) -> str:
    """SHA-256 hex digest of a built-in file (the cache key). hashlib loads OpenSSL's libcrypto (3-15 ms of a
    cold start on a 2-core machine); CPython's own sha256 module (`_sha256` in 3.11, `_sha2` from 3.12) gives
    the same digest without it."""
    try:
        from _sha256 import sha256  # type: ignore[import-not-found]
    except ImportError:
        try:
            from _sha2 import sha256  # type: ignore[import-not-found,no-redef]
        except ImportError:
            from hashlib import sha256  # type: ignore[assignment]
    return sha256(data).hexdigest()  # type: ignore[no-any-return]


def xdg_dir(variable: str, default: tuple[str, ...]) -> str | None:
    """$VARIABLE/cardfit when the variable holds an absolute path, else ~/<default…>/cardfit when the home
    exists; None without a home. XDG Base Directory spec (https://specifications.freedesktop.org/basedir-spec/
    latest/): "All paths set in these environment variables must be absolute. If an implementation encounters
    a relative path in any of these variables it should consider the path invalid and ignore it." A missing
    home is never created."""
    xdg = os.environ.get(variable, "")
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "cardfit")
    home = os.path.expanduser("~")
    if not os.path.isabs(home) or not os.path.isdir(home):
        return None
    return os.path.join(home, *default, "cardfit")


def _cache_dir() -> str | None:
    """$XDG_CACHE_HOME/cardfit, else ~/.cache/cardfit (xdg_dir); None with CARDFIT_NO_CACHE set."""
    if os.environ.get("CARDFIT_NO_CACHE"):
        return None
    return xdg_dir("XDG_CACHE_HOME", (".cache",))


# The snapshot built with the package (scripts/build_catalog.py writes it, its --check holds it equal to the
# TOML): each built-in catalog's parsed form, `data/snapshot/<name>.json`, a header line (format, source, the
# source's size and CRC-32, the data's CRC-32) and then the data's compact JSON. Reading it costs a JSON parse
# where TOML's pure-Python parser costs ~5x more (json vs tomllib, Python docs).
SNAPSHOT_FORMAT = 1


def snapshot_path(name: str) -> str:
    return os.path.join(DATA, "snapshot", name + ".json")


def snapshot_record(name: str, raw: bytes, data: dict[str, Any]) -> bytes:
    """The snapshot of catalog NAME (source bytes RAW, parsed DATA); TypeError for data JSON cannot hold (a
    TOML date)."""
    import zlib

    body = json.dumps(data, separators=(",", ":")).encode("ascii")
    header = {"format": SNAPSHOT_FORMAT, "source": name, "source_bytes": len(raw),
              "source_crc32": zlib.crc32(raw), "data_crc32": zlib.crc32(body)}
    return json.dumps(header).encode("ascii") + b"\n" + body


def _read_snapshot(name: str, raw: bytes) -> dict[str, Any] | None:
    """The snapshot of catalog NAME when it was made from exactly these source bytes, else None (no
    snapshot, a TOML edited since it was built, a damaged or foreign file: then the TOML is parsed). Size and
    CRC-32 tell a stale snapshot from its source (an edit that keeps both is a 1 in 2^32 chance, and the test
    suite's build --check compares the data itself); anyone who can rewrite the package can rewrite its
    code."""
    import zlib

    from ..errors import CardfitError
    from ..readers.source import read_regular

    try:
        limit = CACHE_SIZE_FLOOR + CACHE_SIZE_FACTOR * len(raw)
        head, newline, body = read_regular(snapshot_path(name), limit, "catalog snapshot").partition(b"\n")
        header = json.loads(head)
    except (CardfitError, ValueError, RecursionError):
        return None
    want = {"format": SNAPSHOT_FORMAT, "source": name, "source_bytes": len(raw)}
    if not (newline and isinstance(header, dict) and all(header.get(k) == v for k, v in want.items())
            and header.get("source_crc32") == zlib.crc32(raw)
            and header.get("data_crc32") == zlib.crc32(body)):
        return None
    return _json_object(body)


def _json_object(body: bytes) -> dict[str, Any] | None:
    """A checked record's data: a JSON object, else None (the TOML is parsed instead)."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


@cache
def builtin(name: str) -> dict[str, Any]:
    """Parse `cardfit/data/<name>` once per process: from the snapshot built with the package when it was made
    from this very file, else from the user's cache, else from the TOML. TOML parsing is pure Python and slow
    at start-up, so the parsed form is kept as JSON in the user's cache, under the source's SHA-256. A record
    is trusted only when it checks out (see _read_cache); anything else is parsed again and rewritten (an
    unwritable cache just means parsing every time)."""
    path = os.path.join(DATA, name)
    with open(path, "rb") as f:
        raw = f.read()
    data = _read_snapshot(name, raw)
    if data is not None:
        return data
    cache_dir = _cache_dir()
    if cache_dir is not None:
        stamp = _stamp(path)
        known = _known_sha(cache_dir, name, stamp)
        if known is not None:  # the file is the one hashed before: no need to read and hash it again
            data = _read_cache(_record_path(cache_dir, name, known), name, known, _cache_limit(stamp))
            if data is not None:
                return data
    source_sha = _sha256(raw)
    cached = _record_path(cache_dir, name, source_sha) if cache_dir else None
    if cached is not None:
        data = _read_cache(cached, name, source_sha, CACHE_SIZE_FLOOR + CACHE_SIZE_FACTOR * len(raw))
        if data is not None:
            _remember_sha(cache_dir, name, stamp, source_sha)  # type: ignore[arg-type]
            return data
    import tomllib  # only when the cache misses: the parser's imports cost ~10 ms at start-up

    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:  # a broken built-in is a packaging bug
        raise CatalogError(f"built-in catalog is malformed: {e}", path=name) from e
    if cached is not None:
        _write_cache(cached, name, source_sha, data)
        _remember_sha(cache_dir, name, stamp, source_sha)  # type: ignore[arg-type]
        _prune(cache_dir, name, cached)  # type: ignore[arg-type]
    return data


def _record_path(cache_dir: str, name: str, source_sha: str) -> str:
    """`<name>.<20 hex digits>.json`: the source's SHA-256 (18 digits) and the record's format (2), so that
    installs of two formats sharing a cache each keep their own record instead of rewriting one."""
    return os.path.join(cache_dir, f"{name}.{source_sha[:18]}{CACHE_FORMAT:02x}.json")


# Records of one catalog kept besides the one just written: other installs sharing the cache (two virtual
# environments, two checkouts at different versions) keep theirs, older versions go (rule of thumb).
CACHE_KEEP = 3


def _prune(cache_dir: str, name: str, keep: str) -> None:
    """Remove this catalog's records of other versions (`<name>.<20 hex digits>.json`, regular files only,
    symbolic links never followed nor removed) but the CACHE_KEEP most recently written; any error leaves
    the file where it is. Runs only when a record was written (a cache miss), never on the hot path."""
    prefix, keep_name = f"{name}.", os.path.basename(keep)
    found: list[tuple[int, str]] = []
    try:
        with os.scandir(cache_dir) as entries:
            for e in entries:
                digest = e.name[len(prefix):-len(".json")]
                if (e.name == keep_name or not e.name.startswith(prefix) or not e.name.endswith(".json")
                        or len(digest) != 20 or not all(c in "0123456789abcdef" for c in digest)):
                    continue
                try:
                    if e.is_symlink() or not e.is_file(follow_symlinks=False):
                        continue
                    found.append((e.stat(follow_symlinks=False).st_mtime_ns, e.path))
                except OSError:
                    continue
    except OSError:
        return
    for _, path in sorted(found, reverse=True)[CACHE_KEEP:]:
        try:
            os.remove(path)
        except OSError:
            pass


def _stamp(path: str) -> str:
    """Size, modification and change times (ns) and inode of a built-in file: what Python's own bytecode cache
    checks (size and mtime), plus the change time and inode, which any rewrite or replacement of the file
    moves, whatever its mtime says."""
    st = os.stat(path)
    return f"{st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} {st.st_ino}"


def _cache_limit(stamp: str) -> int:
    return CACHE_SIZE_FLOOR + CACHE_SIZE_FACTOR * int(stamp.split()[0])


def _note_path(cache_dir: str, name: str) -> str:
    """`<name>.<folder>.sha`: one note per installed data folder, so that two installs sharing a cache (two
    virtual environments, two checkouts) do not rewrite each other's note, and hash again, on every run."""
    import zlib

    return os.path.join(cache_dir, f"{name}.{zlib.crc32(DATA.encode('utf-8', 'surrogatepass')):08x}.sha")


def _known_sha(cache_dir: str, name: str, stamp: str) -> str | None:
    """The SHA-256 this file had when it was last hashed, if its stamp has not moved since (`<name>.sha`:
    one line, the stamp and the digest); None when anything about that note is off."""
    from ..errors import CardfitError
    from ..readers.source import read_regular

    try:
        line = read_regular(_note_path(cache_dir, name), 256, "catalog cache").decode("ascii")
    except (CardfitError, ValueError):
        return None
    seen, _, sha = line.strip().rpartition(" ")
    ok = seen == stamp and len(sha) == 64 and all(c in "0123456789abcdef" for c in sha)
    return sha if ok else None


def _remember_sha(cache_dir: str, name: str, stamp: str, sha: str) -> None:
    try:
        os.makedirs(cache_dir, mode=0o700, exist_ok=True)
        tmp = os.path.join(cache_dir, f"{name}.{os.getpid()}.tmp")
        with open(tmp, "w", encoding="ascii") as f:
            f.write(f"{stamp} {sha}\n")
        os.replace(tmp, _note_path(cache_dir, name))
    except OSError:
        pass


def _data_check(data: bytes) -> int:
    """The cached data's check: CRC-32 (zlib) catches a truncated or edited record as a hash would, at a
    fraction of the cost; it is no seal against someone who can write the user's cache (no hash stored next to
    the data would be: they could rewrite both)."""
    import zlib

    return zlib.crc32(data)


def _read_cache(path: str, name: str, source_sha: str, limit: int) -> dict[str, Any] | None:
    """The cached catalog, or None when the record is missing or wrong in any way: not a regular file (a FIFO
    would hang, /dev/zero never ends), over `limit` bytes, not the record schema (a header line, then the
    data), made from other source bytes, or data whose check does not match (truncated, edited)."""
    from ..errors import CardfitError
    from ..readers.source import read_regular

    try:
        head, newline, body = read_regular(path, limit, "catalog cache").partition(b"\n")
        header = json.loads(head)
    except (CardfitError, ValueError, RecursionError):
        return None
    if not (newline and isinstance(header, dict) and header.get("format") == CACHE_FORMAT
            and header.get("source") == name and header.get("source_sha256") == source_sha
            and isinstance(header.get("data_crc32"), int)):
        return None
    if _data_check(body) != header["data_crc32"]:
        return None
    return _json_object(body)


def _write_cache(path: str, name: str, source_sha: str, data: dict[str, Any]) -> None:
    try:
        body = json.dumps(data).encode("ascii")  # TOML dates are not JSON: such a file is simply not cached
        header = {"format": CACHE_FORMAT, "source": name, "source_sha256": source_sha,
                  "data_crc32": _data_check(body)}
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)  # the XDG spec's mode for new folders
        tmp = f"{path.removesuffix('.json')}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(json.dumps(header).encode("ascii") + b"\n" + body)
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError):
        pass


def read_user_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Parse a user catalog file (TOML or JSON); every failure is a one-line CatalogError."""
    import tomllib

    from ..errors import FileFormatError
    from ..readers.source import read_regular

    p = os.fspath(path)
    is_json = os.path.splitext(p)[1].lower() == ".json"
    try:
        raw = read_regular(p, MAX_USER_FILE_BYTES, "catalog file")
    except FileFormatError as e:
        raise CatalogError(e.problem, path=p) from None
    try:
        text = raw.decode("utf-8")
        data = json.loads(text) if is_json else tomllib.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError, tomllib.TOMLDecodeError, RecursionError) as e:
        raise CatalogError(f"not valid {'JSON' if is_json else 'TOML'}: {e}", path=p) from e
    if not isinstance(data, dict):
        raise CatalogError("top level must be a table/object", path=p)
    check_tables(data, USER_TABLES, path=p)
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

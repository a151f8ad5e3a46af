"""The parsed-catalog cache under $XDG_CACHE_HOME/cardfit: a record is used only when it is a regular file
of bounded size whose schema, source hash (SHA-256) and content check (CRC-32) hold; anything else is rebuilt.
The cache never creates a missing home and ignores a relative XDG_CACHE_HOME (XDG Base Directory spec:
https://specifications.freedesktop.org/basedir-spec/latest/ "a relative path ... should consider the path
invalid and ignore it")."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cardfit.catalog import loader

from .helpers import within

NAME = "rental.toml"  # the smallest built-in catalog


@pytest.fixture(autouse=True)
def _no_snapshot(monkeypatch, tmp_path):
    """These tests are about the user's cache: the snapshot built with the package (which the loader reads
    first, tests/test_catalog_snapshot.py) is out of the way."""
    monkeypatch.setattr(loader, "snapshot_path", lambda name: str(tmp_path / "no-snapshot" / name))


def _fresh(monkeypatch, cache_home: Path | str | None, home: Path | str | None = None) -> dict:
    monkeypatch.delenv("CARDFIT_NO_CACHE", raising=False)
    if cache_home is None:
        monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    else:
        monkeypatch.setenv("XDG_CACHE_HOME", str(cache_home))
    if home is not None:
        monkeypatch.setenv("HOME", str(home))
    return loader.builtin.__wrapped__(NAME)


def _cache_file(root: Path) -> Path:
    files = list((root / "cardfit").glob(f"{NAME}.*.json"))
    assert len(files) == 1, files
    return files[0]


def _timed(fn, seconds: float = 2.0):
    with within(seconds):
        return fn()


@pytest.fixture()
def good(monkeypatch, tmp_path) -> dict:
    monkeypatch.setenv("CARDFIT_NO_CACHE", "1")
    return loader.builtin.__wrapped__(NAME)


def _corrupt_then_read(monkeypatch, tmp_path, good, write) -> Path:
    assert _fresh(monkeypatch, tmp_path) == good  # writes the record
    path = _cache_file(tmp_path)
    write(path)
    assert _timed(lambda: _fresh(monkeypatch, tmp_path)) == good
    return path


def _record(p: Path) -> tuple[dict, bytes]:
    """A record's header (its first line, JSON) and its data (the rest: the catalog's JSON)."""
    head, _, body = p.read_bytes().partition(b"\n")
    return json.loads(head), body


def _with_header(p: Path, **changes) -> None:
    header, body = _record(p)
    p.write_bytes(json.dumps({**header, **changes}).encode() + b"\n" + body)


CORRUPTIONS = {
    "empty object": lambda p: p.write_text("{}"),
    "empty file": lambda p: p.write_bytes(b""),
    "a list": lambda p: p.write_text("[1, 2]"),
    "not JSON": lambda p: p.write_bytes(b"\xff\xfe garbage"),
    "other data, same header": lambda p: p.write_bytes(p.read_bytes().partition(b"\n")[0] + b"\n{}"),
    "no data": lambda p: p.write_bytes(p.read_bytes().partition(b"\n")[0]),
    "an older format": lambda p: _with_header(p, format=2),
    "truncated": lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]),
    "another source": lambda p: _with_header(p, source_sha256="0" * 64),
    "huge": lambda p: p.write_bytes(b" " * (64 * 2**20)),
}


@pytest.mark.parametrize("write", CORRUPTIONS.values(), ids=CORRUPTIONS.keys())
def test_bad_record_is_rebuilt(monkeypatch, tmp_path, good, write):
    path = _corrupt_then_read(monkeypatch, tmp_path, good, write)
    header, body = _record(path)  # rebuilt: a valid record again
    assert header["source_sha256"] and header["format"] == loader.CACHE_FORMAT and json.loads(body) == good


def test_fifo_in_the_cache_does_not_hang(monkeypatch, tmp_path, good):
    def fifo(p: Path) -> None:
        p.unlink()
        os.mkfifo(p)

    path = _corrupt_then_read(monkeypatch, tmp_path, good, fifo)
    assert path.is_file()


def test_link_to_dev_zero_is_not_read(monkeypatch, tmp_path, good):
    def zero(p: Path) -> None:
        p.unlink()
        p.symlink_to("/dev/zero")

    _corrupt_then_read(monkeypatch, tmp_path, good, zero)


def test_missing_home_is_not_created(monkeypatch, tmp_path, good):
    home = tmp_path / "no-such-home"
    assert _fresh(monkeypatch, None, home=home) == good
    assert not home.exists()


def test_existing_home_gets_the_cache(monkeypatch, tmp_path, good):
    assert _fresh(monkeypatch, None, home=tmp_path) == good
    assert _cache_file(tmp_path / ".cache")


def test_relative_xdg_cache_home_is_ignored(monkeypatch, tmp_path, good):
    monkeypatch.chdir(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    assert _fresh(monkeypatch, "relative-cache", home=home) == good
    assert not (tmp_path / "relative-cache").exists()
    assert _cache_file(home / ".cache")


def test_cli_survives_a_broken_cache(run_cli, tmp_path):
    """`{}` in every cache file used to break every command until the user deleted it."""
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    assert run_cli("gpus", "--json", env=env)[0] == 0
    for p in (tmp_path / "cardfit").glob("*.json"):
        p.write_text("{}")
    code, out, err = run_cli("plan", "llama3.1:8b", "--gpu", "RTX 4090", "--json", env=env)
    assert code == 0, err
    assert json.loads(out)["gpus"][0]["verdict"]


def _note(root: Path) -> Path:
    return Path(loader._note_path(str(root / "cardfit"), NAME))


NOTES = {
    "empty": lambda p: p.write_text(""),
    "garbage": lambda p: p.write_bytes(b"\xff\xfe garbage"),
    "another stamp": lambda p: p.write_text("1 2 3 4 " + p.read_text().split()[-1]),
    "another digest": lambda p: p.write_text(" ".join(p.read_text().split()[:-1]) + " " + "0" * 64),
    "not hex": lambda p: p.write_text(" ".join(p.read_text().split()[:-1]) + " " + "z" * 64),
    "huge": lambda p: p.write_bytes(b"1" * (2 * 2**20)),
}


@pytest.mark.parametrize("write", NOTES.values(), ids=NOTES.keys())
def test_bad_digest_note_means_hashing_again(monkeypatch, tmp_path, good, write):
    """`<name>.<folder>.sha` remembers the file's SHA-256 while its size, times and inode stay put; any other
    note is ignored (the file is read and hashed) and written again."""
    assert _fresh(monkeypatch, tmp_path) == good
    note = _note(tmp_path)
    stamp, sha = note.read_text().rsplit(" ", 1)
    assert sha.strip() == _record(_cache_file(tmp_path))[0]["source_sha256"]
    write(note)
    assert _timed(lambda: _fresh(monkeypatch, tmp_path)) == good
    assert note.read_text() == f"{stamp} {sha}"


def test_a_changed_file_is_hashed_again(monkeypatch, tmp_path, good):
    """The note names the file by size, mtime, ctime and inode: a rewrite (even keeping the mtime) is seen."""
    assert _fresh(monkeypatch, tmp_path) == good
    note = _note(tmp_path)
    calls = []
    real = loader._sha256
    monkeypatch.setattr(loader, "_sha256", lambda raw: calls.append(1) or real(raw))
    assert _fresh(monkeypatch, tmp_path) == good and not calls  # the note stands for the hash
    stamp = note.read_text().split()
    note.write_text(" ".join([stamp[0], stamp[1], str(int(stamp[2]) + 1), *stamp[3:]]))  # as after a rewrite
    assert _fresh(monkeypatch, tmp_path) == good and calls == [1]


def test_two_installs_keep_their_own_note(monkeypatch, tmp_path):
    """Two data folders (two virtual environments or checkouts) sharing one cache each keep their note: they
    no longer rewrite one note, and hash their files again, on every run."""
    first = loader._note_path(str(tmp_path), NAME)
    monkeypatch.setattr(loader, "DATA", str(tmp_path / "another" / "data"))
    assert loader._note_path(str(tmp_path), NAME) != first


def test_writing_a_record_prunes_this_catalogs_old_versions(monkeypatch, tmp_path, good):
    """A new record removes the same catalog's records of other digests but the CACHE_KEEP newest (other
    installs sharing the cache keep theirs); nothing else: other catalogs, names off the pattern, folders,
    symbolic links (nor what they point to), in-progress temporary files."""
    cache = tmp_path / "cardfit"
    cache.mkdir()
    stale = []
    for i in range(loader.CACHE_KEEP + 4):
        p = cache / f"{NAME}.{i:020x}.json"
        p.write_text("{}")
        os.utime(p, ns=(10**18 + i * 10**9, 10**18 + i * 10**9))  # i: later is newer
        stale.append(p)
    outside = tmp_path / "outside.json"
    outside.write_text("keep me")
    link = cache / f"{NAME}.{'f' * 20}.json"
    link.symlink_to(outside)
    folder = cache / f"{NAME}.{'e' * 20}.json"
    folder.mkdir()
    others = [cache / f"gpus.toml.{0:020x}.json", cache / f"{NAME}.1234.tmp", cache / f"{NAME}.abc.json",
              cache / f"{NAME}.{'A' * 20}.json", cache / f"x{NAME}.{0:020x}.json"]
    for p in others:
        p.write_text("{}")
    assert _fresh(monkeypatch, tmp_path) == good
    written = [p for p in cache.glob(f"{NAME}.*.json") if p not in (*stale, link, folder, *others)]
    assert len(written) == 1 and _fresh(monkeypatch, tmp_path) == good  # the new record is read back
    kept = stale[-loader.CACHE_KEEP:]
    assert [p for p in stale if p.exists()] == kept
    assert link.is_symlink() and outside.read_text() == "keep me" and folder.is_dir()
    assert all(p.exists() for p in others)


def test_pruning_ignores_an_unreadable_cache(tmp_path):
    loader._prune(str(tmp_path / "missing"), NAME, str(tmp_path / "missing" / "x.json"))  # no error

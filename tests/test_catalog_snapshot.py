"""The catalog snapshot built with the package (`data/snapshot/<name>.json`, scripts/build_catalog.py): it
holds exactly what tomllib parses from every built-in TOML, the loader reads it in place of the TOML, and a
snapshot that is stale (its source edited), damaged or foreign is ignored: the TOML is parsed instead."""

from __future__ import annotations

import json
import shutil
import tomllib
import zlib
from pathlib import Path

import pytest

from cardfit.catalog import loader

DATA = Path(loader.DATA)
CATALOGS = sorted(p.relative_to(DATA).as_posix() for p in DATA.rglob("*.toml"))


@pytest.mark.parametrize("name", CATALOGS)
def test_snapshot_holds_what_the_toml_parses_to(name):
    raw = (DATA / name).read_bytes()
    head, _, body = Path(loader.snapshot_path(name)).read_bytes().partition(b"\n")
    header = json.loads(head)
    assert header == {"format": loader.SNAPSHOT_FORMAT, "source": name, "source_bytes": len(raw),
                      "source_crc32": zlib.crc32(raw), "data_crc32": zlib.crc32(body)}
    assert json.loads(body) == tomllib.loads(raw.decode("utf-8"))
    assert loader._read_snapshot(name, raw) == tomllib.loads(raw.decode("utf-8"))


@pytest.fixture()
def copy(monkeypatch, tmp_path) -> Path:
    """A data folder of one catalog (rental.toml) and its snapshot, read by the loader, no user cache."""
    monkeypatch.setenv("CARDFIT_NO_CACHE", "1")
    (tmp_path / "snapshot").mkdir()
    shutil.copy(DATA / "rental.toml", tmp_path / "rental.toml")
    shutil.copy(loader.snapshot_path("rental.toml"), tmp_path / "snapshot" / "rental.toml.json")
    monkeypatch.setattr(loader, "DATA", str(tmp_path))
    return tmp_path


def _parsed(folder: Path) -> dict:
    return tomllib.loads((folder / "rental.toml").read_text(encoding="utf-8"))


def test_the_loader_reads_the_snapshot(copy):
    marked = copy / "snapshot" / "rental.toml.json"
    raw = (copy / "rental.toml").read_bytes()
    data = {**_parsed(copy), "marker": 1}  # a snapshot that differs from the TOML only by what it holds
    marked.write_bytes(loader.snapshot_record("rental.toml", raw, data))
    assert loader.builtin.__wrapped__("rental.toml") == data


def _edit_toml(folder: Path) -> None:
    path = folder / "rental.toml"
    path.write_bytes(path.read_bytes() + b"\n# edited after the snapshot was built\n")


def _same_size_edit(folder: Path) -> None:
    path = folder / "rental.toml"
    raw = path.read_bytes()
    i = raw.index(b"#")
    path.write_bytes(raw[:i + 1] + (b"x" if raw[i + 1:i + 2] != b"x" else b"y") + raw[i + 2:])


def _snapshot(folder: Path, change) -> None:
    path = folder / "snapshot" / "rental.toml.json"
    path.write_bytes(change(path.read_bytes()))


def _header(folder: Path, **fields) -> None:
    def change(b: bytes) -> bytes:
        head, _, body = b.partition(b"\n")
        return json.dumps({**json.loads(head), **fields}).encode() + b"\n" + body
    _snapshot(folder, change)


@pytest.mark.parametrize("spoil", [
    _edit_toml,
    _same_size_edit,
    lambda f: _snapshot(f, lambda b: b[:-10]),  # truncated
    lambda f: _snapshot(f, lambda b: b.replace(b"\n", b" ", 1)),  # no header line
    lambda f: _snapshot(f, lambda b: b"\n" + b),  # empty header
    lambda f: _snapshot(f, lambda b: b"[1]\n" + b.partition(b"\n")[2]),
    lambda f: _header(f, format=loader.SNAPSHOT_FORMAT + 1),
    lambda f: _header(f, source="quants.toml"),
    lambda f: _header(f, data_crc32=0),
    lambda f: (f / "snapshot" / "rental.toml.json").unlink(),
    lambda f: ((f / "snapshot" / "rental.toml.json").unlink(),
               (f / "snapshot" / "rental.toml.json").symlink_to("/dev/zero")),
], ids=["toml-edited", "toml-edited-same-size", "truncated", "no-header", "empty-header", "header-not-object",
        "other-format", "other-catalog", "data-check", "missing", "dev-zero"])
def test_a_stale_or_bad_snapshot_means_parsing_the_toml(copy, spoil):
    spoil(copy)
    assert loader.builtin.__wrapped__("rental.toml") == _parsed(copy)

"""`pip install cardfit` is the CLI and the library; the web server, charts, GGUF files and the Hub are
extras. A feature whose extra is missing says in one line which extra to install, and exits 2."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OPTIONAL = ("pydantic", "fastapi", "uvicorn", "matplotlib", "numpy", "gguf", "httpx", "huggingface_hub",
            "rich", "yaml")


def _run(args: list[str], block: tuple[str, ...] = (), extra_code: str = "") -> subprocess.CompletedProcess:
    """cardfit ARGS in a fresh interpreter where the modules in `block` cannot be imported (as if not
    installed)."""
    code = (f"import sys; sys.modules.update(dict.fromkeys({list(block)!r})); {extra_code}"
            f"from cardfit.cli import main; rc = main({args!r}); "
            f"print('IMPORTED', sorted(m for m in {list(OPTIONAL)!r} if sys.modules.get(m)), "
            "file=sys.stderr); sys.exit(rc)")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_core_dependencies_are_click_rich_and_pyyaml():
    """PyYAML reads YAML stack files (`cardfit stack FILE.yaml`), imported only then."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert sorted(d.split(">")[0] for d in deps) == ["click", "pyyaml", "rich"]


def test_json_plan_imports_no_optional_package():
    r = _run(["plan", "llama3.1:8b", "--gpu", "RTX 4090", "--json"], block=OPTIONAL)
    assert r.returncode == 0, r.stderr
    assert "IMPORTED []" in r.stderr


@pytest.mark.parametrize(("args", "block", "extra"), [
    (["serve", "--port", "0"], ("fastapi", "uvicorn"), "web"),
    (["mcp"], ("mcp",), "mcp"),
    (["speed", "llama3.1:8b", "--gpu", "RTX 4090", "--plot", "speed.png"], ("matplotlib",), "plot"),
    (["validate", "--kind", "kv_cache", "--plot", "v.svg"], ("matplotlib",), "plot"),
])
def test_missing_extra_is_one_line(args, block, extra, tmp_path):
    args = [str(tmp_path / a) if a.endswith((".png", ".svg")) else a for a in args]
    r = _run(args, block=block)
    err = r.stderr.split("IMPORTED")[0].strip()
    assert r.returncode == 2, r.stderr
    assert len(err.splitlines()) == 1 and err.startswith("Error: ")
    assert f"pip install 'cardfit[{extra}]'" in err
    assert not list(tmp_path.iterdir())


def test_gguf_file_without_the_gguf_extra(tmp_path):
    from .test_readers_helpers import TINY_GGUF_KV, tiny_gguf_tensors, write_gguf

    path = tmp_path / "tiny.gguf"
    write_gguf(path, kv=TINY_GGUF_KV, tensors=tiny_gguf_tensors())
    r = _run(["plan", str(path), "--json"], block=("gguf",))
    err = r.stderr.split("IMPORTED")[0].strip()
    assert r.returncode == 2 and err.startswith("Error: ") and len(err.splitlines()) == 1, r.stderr
    assert "pip install 'cardfit[gguf]'" in err


def _closure(name: str, seen: set[str]) -> set[str]:
    """The distributions a plain `pip install NAME` pulls: its requirements without extras, recursively, with
    environment markers evaluated for this interpreter (read from the installed metadata: offline)."""
    from importlib.metadata import PackageNotFoundError, distribution

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    key = canonicalize_name(name)
    if key in seen:
        return seen
    seen.add(key)
    try:
        reqs = distribution(name).requires or []
    except PackageNotFoundError:
        return seen
    for line in reqs:
        r = Requirement(line)
        if r.marker is None or r.marker.evaluate({"extra": ""}):
            _closure(r.name, seen)
    return seen


def test_a_plain_install_is_at_most_12_packages():
    """`pip install .` without extras: cardfit, click, rich, pyyaml and what they need (markdown-it-py, mdurl,
    Pygments) plus the venv's own pip and setuptools stay within 12 installed packages (the issue's limit;
    the README says 9)."""
    pulled = _closure("cardfit", set())
    assert {"cardfit", "click", "rich", "pyyaml"} <= pulled
    assert len(pulled) + 2 <= 12, sorted(pulled)
    said = re.search(r"(\d+) packages in a fresh venv", (ROOT / "README.md").read_text())
    assert said and int(said.group(1)) == len(pulled) + 2, "the README's package count"
    heavy = {"pydantic", "fastapi", "uvicorn", "matplotlib", "numpy", "httpx", "gguf"}
    assert not pulled & heavy, sorted(pulled)

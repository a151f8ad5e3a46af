from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# In-process tests get a private catalog cache as well (CLI runs get a private HOME below): the user's
# ~/.cache/cardfit may hold files another cardfit version wrote, and a test run must not write there.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="cardfit-test-cache-")


@pytest.fixture(scope="session")
def validation_report():
    """`validate()` over the whole validation set, computed once per test run (it refits every fold)."""
    from cardfit.validation.validate import validate

    return validate()


@pytest.fixture(scope="session")
def cli_home(tmp_path_factory) -> Path:
    """An empty home directory: no HF cache, no Ollama store, a private catalog cache."""
    return tmp_path_factory.mktemp("home")


def cli_env(home: Path) -> dict[str, str]:
    """The environment of a CLI run: a bare one (no user settings), with this tree's src/ first on the path so
    that `python -m cardfit` runs the code under test, not another installed copy of cardfit."""
    return {"COLUMNS": "120", "PATH": "/usr/bin:/bin", "NO_COLOR": "1", "HOME": str(home), "LANG": "C.UTF-8",
            "PYTHONPATH": str(ROOT / "src")}


@pytest.fixture()
def run_cli(cli_home):
    """Run the real `cardfit` entry point (`python -m cardfit`); returns (exit code, stdout, stderr)."""

    def _run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
        proc = subprocess.run([sys.executable, "-m", "cardfit", *args], capture_output=True, text=True,
                              timeout=120, env={**cli_env(cli_home), **(env or {})})
        return proc.returncode, proc.stdout, proc.stderr

    return _run


@pytest.fixture()
def run_json(run_cli):
    def _run(*args: str) -> dict:
        code, out, err = run_cli(*args, "--json")
        assert code == 0, err
        return json.loads(out)

    return _run

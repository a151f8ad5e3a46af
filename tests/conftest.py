from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture()
def run_cli():
    """Run the real `cardfit` entry point in-process; returns (exit code, stdout, stderr)."""
    from click.testing import CliRunner  # noqa: F401  (kept for API parity)

    def _run(*args: str) -> tuple[int, str, str]:
        proc = subprocess.run([sys.executable, "-m", "cardfit", *args], capture_output=True, text=True,
                              timeout=120, env={"COLUMNS": "120", "PATH": "/usr/bin:/bin", "NO_COLOR": "1",
                                                "HOME": str(ROOT)})
        return proc.returncode, proc.stdout, proc.stderr

    return _run


@pytest.fixture()
def run_json(run_cli):
    def _run(*args: str) -> dict:
        code, out, err = run_cli(*args, "--json")
        assert code == 0, err
        return json.loads(out)

    return _run

"""What `cardfit plan` loads on its way to an answer (issue 25 item 18: start-up speed comes from doing less):
no heavy or unneeded module, the catalogs from the snapshot built with the package (never the TOML parser),
and no regular expression compiled at import that the question never matches."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .conftest import cli_env

QUESTION = ["plan", "llama3.1:8b", "--gpu", "RTX 4090"]

# Modules the one-card plan has no use for, each with why it would be there: a third-party package (rich is
# loaded only for a terminal, tests/test_console.py), the TOML parser (the catalogs come from
# data/snapshot/*.json: a stale snapshot parses the TOML), decimal (units.fmt_num rounds in integers), and
# cardfit's own wings that other commands use.
NOT_ON_THE_PLAN_PATH = (
    "rich", "pydantic", "fastapi", "starlette", "uvicorn", "httpx", "huggingface_hub", "gguf", "numpy",
    "matplotlib", "yaml", "mcp",
    "tomllib", "decimal", "fractions", "difflib", "asyncio", "email", "http", "urllib.request",
    "cardfit.web", "cardfit.validation", "cardfit.charts", "cardfit.readers.gguf", "cardfit.readers.hub",
    "cardfit.readers.safetensors", "cardfit.services.deploy", "cardfit.services.validate",
)

LOADED = ("import sys\n"
          "from cardfit.cli import main\n"
          "main({args!r})\n"
          "print('LOADED', sorted(sys.modules), file=sys.stderr)\n")


@pytest.mark.parametrize("extra", [[], ["--json"]], ids=["text", "json"])
def test_plan_loads_only_what_it_uses(extra, cli_home):
    code = LOADED.format(args=[*QUESTION, *extra])
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=cli_env(cli_home))
    assert proc.returncode == 0, proc.stderr
    loaded = set(json.loads(proc.stderr.split("LOADED", 1)[1].strip().replace("'", '"')))
    found = sorted(m for m in loaded if any(m == n or m.startswith(n + ".") for n in NOT_ON_THE_PLAN_PATH))
    assert found == [], (f"`cardfit {' '.join(QUESTION + extra)}` imported {found}"
                         + ("; tomllib: a catalog snapshot is stale (scripts/build_catalog.py rebuilds it)"
                            if "tomllib" in found else ""))
    assert "cardfit.services.plan" in loaded  # (the question ran)


# Every pattern a cardfit module compiles with re.compile while the plan runs (most at import), wrapped so
# that its first use is seen; the names of those never used are printed.
UNUSED_PATTERNS = """\
import re, sys
made, used = {}, set()
compile_ = re.compile
class Seen:
    def __init__(self, pattern, key):
        self._pattern, self._key = pattern, key
    def __getattr__(self, name):
        used.add(self._key)
        return getattr(self._pattern, name)
def spy(pattern, flags=0):
    compiled = compile_(pattern, flags)
    caller = sys._getframe(1).f_code.co_filename
    if "cardfit" not in caller:
        return compiled
    key = (caller.rsplit("cardfit", 1)[1], str(pattern))
    made[key] = True
    return Seen(compiled, key)
re.compile = spy
from cardfit.cli import _run
for args in QUESTIONS:
    assert _run(args) == 0
print("UNUSED", sorted(k for k in made if k not in used), file=sys.stderr)
"""


def test_plan_compiles_no_pattern_it_does_not_match(cli_home):
    """A pattern compiled at import costs every command (~0.5 M instructions each, tens of them across the
    catalogs and readers); those the plan never matches are kept as text and compiled on first use
    (`re.match(PATTERN, text)`: re's own cache)."""
    code = UNUSED_PATTERNS.replace("QUESTIONS", repr((QUESTION, [*QUESTION, "--json"])))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=cli_env(cli_home))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().endswith("UNUSED []"), proc.stderr[-2000:]

"""What `cardfit plan` loads on its way to an answer (issue 25 item 18: start-up speed comes from doing less):
no heavy or unneeded module, the catalogs from the snapshot built with the package (never the TOML parser),
and no regular expression compiled at import that the question never matches."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cardfit.services.resolve import _TAG_QUANT_TEXT, tag_quant

from .conftest import cli_env

QUESTION = ["plan", "llama3.1:8b", "--gpu", "RTX 4090"]

# Modules the one-card plan has no use for, each with why it would be there: a third-party package (rich is
# loaded only for a terminal, tests/test_console.py), the TOML parser (the catalogs come from
# data/snapshot/*.json: a stale snapshot parses the TOML), decimal (units.fmt_num rounds in integers), heapq
# (core/serving.py rounds: a stepped run, which the plan never asks for), and cardfit's own wings that other
# commands use (core/speculative.py: only a plan with --speculative drafts; services/catalogs.py: the catalog
# listings, whose ModelBasics the plan's model view shares from services/table.py).
NOT_ON_THE_PLAN_PATH = (
    "rich", "pydantic", "fastapi", "starlette", "uvicorn", "httpx", "huggingface_hub", "gguf", "numpy",
    "matplotlib", "yaml", "mcp",
    "tomllib", "decimal", "fractions", "difflib", "asyncio", "email", "http", "urllib.request", "heapq",
    "cardfit.web", "cardfit.validation", "cardfit.charts", "cardfit.readers.gguf", "cardfit.readers.hub",
    "cardfit.readers.safetensors", "cardfit.services.deploy", "cardfit.services.validate",
    "cardfit.core.speculative", "cardfit.services.catalogs",
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


# After both questions (text and --json, one card, no Ollama store): the result classes whose to_json was
# compiled, and whether re's cache holds the Ollama-tag pattern or the tag-with-quantization one.
COMPILED = """\
import re, sys
from cardfit.cli import _run
from cardfit.readers import stores
from cardfit.services import resolve, table
for args in QUESTIONS:
    assert _run(args) == 0
re.compile(r"cardfit-positive-control-\\d+")  # a control that must show up below (else re._cache moved)
cached = {key[1] for c in (getattr(re, "_cache", {}), getattr(re, "_cache2", {})) for key in c}
print("COMPILED", sorted(c.__name__ for c in table._CONVERTERS),
      sorted(n for n, p in (("ollama", stores._OLLAMA), ("tag", resolve._TAG_QUANT_TEXT)) if p in cached),
      r"cardfit-positive-control-\\d+" in cached, file=sys.stderr)
"""


def test_plan_compiles_no_converter_and_no_tag_pattern(cli_home):
    """A one-card `--json` plan converts each result class once or twice: the field loop, no to_json source
    compiled (services/table.py HOT: ~2 ms of a ~55 ms answer); 'llama3.1:8b' has no quantization suffix
    and there is no Ollama store to look in, so neither pattern is compiled (services/resolve.py tag_quant,
    readers/stores.py ollama_blob)."""
    code = COMPILED.replace("QUESTIONS", repr((QUESTION, [*QUESTION, "--json"])))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=cli_env(cli_home))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().endswith("COMPILED [] [] True"), proc.stderr[-2000:]  # True: the control


@given(st.text(alphabet=":-_.qQfFbBpPmMxXiInNsStTrRuUcChH0123456789", max_size=16))
@settings(max_examples=500, deadline=None)
def test_tag_quant_is_the_pattern(name):
    """tag_quant answers a name without a '-' after its first ':' without the pattern: what the pattern
    itself answers (every name drawn from the letters the pattern reads)."""
    want = re.match(_TAG_QUANT_TEXT, name, re.I)
    got = tag_quant(name)
    assert (got and got.groupdict()) == (want and want.groupdict())


def test_command_line_imports_nothing_heavy_before_main(cli_home):
    """What `python -m cardfit` (and the `cardfit` script: `from cardfit.cli import main`) imports before
    main() sets the one-shot garbage-collection threshold (cli/__init__.py GC_THRESHOLD): neither typing nor
    dataclasses nor the command table, whose imports ran ~6 collections (~3 M instructions) that found
    nothing; the Python API's functions come on first use (cardfit/__init__.py __getattr__)."""
    code = ("import sys\nimport cardfit.cli\n"
            "print('LOADED', sorted(m for m in ('typing', 'dataclasses', 'cardfit.services.table') "
            "if m in sys.modules))\n"
            "import cardfit\n"
            "print('API', cardfit.plan.__name__, len(cardfit.__all__), 'plan' in dir(cardfit))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=cli_env(cli_home))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["LOADED []", "API plan 11 True"], proc.stdout + proc.stderr

"""`cardfit plan` prints through cli/console.py, which writes the bytes rich writes without importing rich.
These tests render real plans (the README's questions and others that reach every line and column kind:
offload, no fit, per-card context, sets, Apple cards, an embedding model) through both, at many widths, to a
pipe and to a terminal (styles on, NO_COLOR, TERM=dumb, FORCE_COLOR), and compare byte for byte; and they
hold the pieces (markup, word wrapping, cell widths) against rich on random input."""

from __future__ import annotations

import io
import os
import random
import sys

import pytest

from cardfit.cli import console as light
from cardfit.cli.plan_cmd import _print_plan
from cardfit.services.table import BY_NAME

QUESTIONS = [
    {"model": "llama3.1:8b", "gpu": "RTX 4090"},  # README
    {"model": "llama3.1:8b"},  # README: Ollama's context per card (a context column)
    {"model": "meta-llama/Llama-3.3-70B-Instruct", "quant": "fp8", "context": 32768, "runtime": "vllm",
     "top": None},  # README
    {"model": "llama-3.1-405b", "quant": "int4", "context": 8192},  # sets of cards, several nodes
    {"model": "deepseek-r1:70b", "gpu": "RTX 4090"},  # offload (magenta verdict) and its reason line
    {"model": "qwen2.5:14b", "gpu": "RTX 4060 Ti", "context": 16384},
    {"params": 70e9, "layers": 80, "kv_heads": 8, "head_dim": 128, "quant": "fp8", "context": 8192},
    {"model": "llama3.1:8b", "gpu": "Apple M3 Max 64GB"},  # unified memory
    {"model": "nomic-embed-text"},  # no decode speed
    {"model": "llama-3.1-8b", "batch": 8, "runtime": "vllm"},
    {"model": "llama-3.1-70b", "gpu": "H100", "gpus": 2, "runtime": "vllm", "headroom": 1.2},
]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(scope="module")
def plans() -> list:
    """The typed answers `cardfit plan` renders (services/plan.py PlanView)."""
    return [BY_NAME["plan"].call({k: v for k, v in q.items() if k != "top"}).view() for q in QUESTIONS]


def _render(plan: object, unit: str, top: int, env: dict[str, str], terminal: bool, through_rich: bool,
            monkeypatch: pytest.MonkeyPatch) -> tuple[str, bool]:
    """The text `cardfit plan` prints for `plan`, and whether rich printed it."""
    used_rich = []
    original = light.Console._rich

    def rich(self: light.Console, items: list) -> None:
        used_rich.append(True)
        original(self, items)

    with monkeypatch.context() as m:
        for key in ("COLUMNS", "LINES", "TERM", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "COLORTERM"):
            m.delenv(key, raising=False)
        for key, value in env.items():
            m.setenv(key, value)
        out = _Terminal() if terminal else io.StringIO()
        m.setattr(sys, "stdout", out)
        m.setattr(light.Console, "_rich", rich)
        if through_rich:
            def unhandled(self: object, items: list) -> str:
                raise light.Unhandled("rich asked for")

            m.setattr(light._Writer, "render", unhandled)
        _print_plan(plan, unit, top)
    return out.getvalue(), bool(used_rich)


SETTINGS = [
    ({"COLUMNS": "100"}, False),  # the README's examples
    ({}, False),  # a pipe: 120 columns
    ({"COLUMNS": "80", "TERM": "xterm-256color"}, True),
    ({"COLUMNS": "60", "TERM": "xterm"}, True),  # tables collapse and wrap
    ({"COLUMNS": "41", "TERM": "xterm", "NO_COLOR": "1"}, True),
    ({"COLUMNS": "150", "FORCE_COLOR": "1"}, False),
    ({"COLUMNS": "33", "FORCE_COLOR": "1", "COLORTERM": "truecolor"}, False),
    ({"TERM": "dumb"}, True),  # rich: 80 columns, no styles
    ({"COLUMNS": "100", "LINES": "30", "TERM": "dumb"}, True),
    ({"COLUMNS": "90", "TTY_COMPATIBLE": "0"}, True),
    ({"COLUMNS": "12"}, False),  # narrower than the tables' padding: rich prints it
]


@pytest.mark.parametrize(("env", "terminal"), SETTINGS, ids=lambda v: str(v))
def test_plan_text_is_the_bytes_rich_writes(plans, env, terminal, monkeypatch):
    for plan, q in zip(plans, QUESTIONS, strict=True):
        for unit, top in (("GB", 12), ("GiB", 3)):
            ours, fell_back = _render(plan, unit, top, env, terminal, False, monkeypatch)
            theirs, _ = _render(plan, unit, top, env, terminal, True, monkeypatch)
            assert ours == theirs, (q, unit, env, terminal)
            assert fell_back == (env.get("COLUMNS") == "12"), (q, env)  # rich only where it must


def test_styles_reach_a_terminal(plans, monkeypatch):
    """The comparison above covers styled output: the fits verdict is green, the notes dim, headers bold."""
    out, _ = _render(plans[0], "GB", 12, {"COLUMNS": "120", "TERM": "xterm"}, True, False, monkeypatch)
    assert "\x1b[32mfits\x1b[0m" in out and "\x1b[2mnote: " in out and "\x1b[1mmemory" in out
    plain, _ = _render(plans[0], "GB", 12, {"COLUMNS": "120", "TERM": "xterm", "NO_COLOR": "1"}, True, False,
                       monkeypatch)
    assert "\x1b[32m" not in plain and "\x1b[1mmemory" in plain  # NO_COLOR keeps bold and dim, as rich does


def test_wrapping_matches_rich_on_random_text(monkeypatch):
    """Lines of random words (long ones, runs of spaces, styled spans across the breaks) at random widths."""
    from rich.console import Console as Rich

    rng = random.Random(13)
    words = ["a", "bb", "note:", "≈1.5", "×", "—", "tokens/s", "supercalifragilistic" * 3, "(30%", "duty);"]
    monkeypatch.delenv("NO_COLOR", raising=False)
    compared = 0
    for _ in range(400):
        text = "".join(rng.choice(words) + rng.choice([" ", " ", "  ", "\n", ""])
                       for _ in range(rng.randint(0, 40)))
        if rng.random() < 0.5 and "[" not in text:
            a, b = sorted(rng.sample(range(len(text) + 1), 2)) if len(text) > 1 else (0, len(text))
            text = f"{text[:a]}[{rng.choice(['bold', 'dim', 'green', 'bold red'])}]{text[a:b]}[/]{text[b:]}"
        width = rng.randint(1, 70)
        ours, theirs = _Terminal(), _Terminal()
        monkeypatch.setattr(sys, "stdout", ours)
        try:
            lines = light._Writer(width).render([text])
        except light.Unhandled:
            continue
        monkeypatch.setattr(sys, "stdout", theirs)
        monkeypatch.setenv("TERM", "xterm")
        Rich(highlight=False, soft_wrap=False, width=width, emoji=False).print(text)
        assert lines == theirs.getvalue(), (text, width)
        compared += 1
    assert compared > 300


def test_markup_reads_as_rich_reads_it():
    """Random strings with brackets, slashes and backslashes: the plain text and spans rich's markup gives,
    or Unhandled (then rich prints it)."""
    from rich.markup import render

    rng = random.Random(7)
    alphabet = ["[", "]", "/", "\\", "bold", "dim", "green", "x", " ", "[/]", "[bold]", "[dim]", "[/bold]",
                "[red]", "1", "=", "@", "#"]
    handled = 0
    for _ in range(3000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        try:
            plain, spans = light._markup(s)
        except light.Unhandled:
            continue
        handled += 1
        text = render(s)
        assert plain == text.plain, s
        assert [(a, b) for a, b, _ in spans] == [(sp.start, sp.end) for sp in text.spans], s
        assert [light._style(str(sp.style)) for sp in text.spans] == [st for _, _, st in spans], s
    assert handled > 1000


def test_the_characters_taken_as_one_cell_are_one_cell():
    from rich.cells import cell_len

    chars = [chr(c) for c in range(0x20, 0x7F)] + [chr(c) for c in range(0xA0, 0x300) if c != 0xAD]
    assert all(cell_len(ch) == 1 for ch in [*chars, *light.NARROW])
    with pytest.raises(light.Unhandled):
        light._markup("模型")  # two cells each: rich measures it


def test_plan_on_a_pipe_does_not_load_rich(cli_home):
    import subprocess

    code = ("import sys; from cardfit.cli import main; main(['plan', 'llama3.1:8b', '--gpu', 'RTX 4090']); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'rich'), file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HOME": str(cli_home), "COLUMNS": "120"})
    assert "Best: 1× RTX 4090" in proc.stdout and proc.stderr.strip() == "[]", proc.stderr


def test_a_columns_that_is_no_number_is_ignored(run_cli):
    """COLUMNS=abc used to end `cardfit plan` with an internal error (int('abc')); rich ignores such a value,
    and so does the pipe's width: 120 columns."""
    code, out, err = run_cli("plan", "llama3.1:8b", "--gpu", "RTX 4090", env={"COLUMNS": "abc"})
    assert code == 0 and not err
    assert out == run_cli("plan", "llama3.1:8b", "--gpu", "RTX 4090", env={"COLUMNS": "120"})[1]

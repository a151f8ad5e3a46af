"""`cardfit plan` prints through cli/console.py: plain text of its own format where rich would write no escape
codes and the format holds the output, rich itself everywhere else. These tests render real plans (the
README's questions and others that reach every line and column kind: offload, no fit, per-card context, sets,
Apple cards, an embedding model) both ways at many widths and compare the bytes; they hold the plain format
against rich on random text and tables (hypothesis), and check where rich is and is not imported."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cardfit.cli import console as light
from cardfit.cli.plan_cmd import _print_plan
from cardfit.services.table import BY_NAME

QUESTIONS = [
    {"model": "llama3.1:8b", "gpu": "RTX 4090"},  # README
    {"model": "llama3.1:8b"},  # README: Ollama's context per card (a context column)
    {"model": "meta-llama/Llama-3.3-70B-Instruct", "quant": "fp8", "context": 32768, "runtime": "vllm"},
    {"model": "llama-3.1-405b", "quant": "int4", "context": 8192},  # sets of cards, several nodes
    {"model": "deepseek-r1:70b", "gpu": "RTX 4090"},  # offload (magenta verdict) and its reason line
    {"model": "qwen2.5:14b", "gpu": "RTX 4060 Ti", "context": 16384},
    {"params": 70e9, "layers": 80, "kv_heads": 8, "head_dim": 128, "quant": "fp8", "context": 8192},
    {"model": "llama3.1:8b", "gpu": "Apple M3 Max 64GB"},  # unified memory
    {"model": "nomic-embed-text"},  # no decode speed
    {"model": "llama-3.1-8b", "batch": 8, "runtime": "vllm"},
    {"model": "llama-3.1-70b", "gpu": "H100", "gpus": 2, "runtime": "vllm", "headroom": 1.2},
]
ENV_KEYS = ("COLUMNS", "LINES", "TERM", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "COLORTERM")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(scope="module")
def plans() -> list:
    """The typed answers `cardfit plan` renders (services/plan.py PlanView)."""
    return [BY_NAME["plan"].call(q).view() for q in QUESTIONS]


def render_with(print_it: Callable[[], None], env: dict[str, str], terminal: bool, through_rich: bool,
                monkeypatch: pytest.MonkeyPatch) -> tuple[str, bool]:
    """What `print_it()` writes to stdout under `env` (to a terminal or a pipe), and whether rich printed it;
    `through_rich` sends it to rich whatever the plain writer could do (what the command printed before it
    had a plain path). tests/test_console_deploy.py renders deploy's answers with it."""
    used_rich = []
    original = light.Console._rich

    def rich(self: light.Console, items: list) -> None:
        used_rich.append(True)
        original(self, items)

    with monkeypatch.context() as m:
        for key in ENV_KEYS:
            m.delenv(key, raising=False)
        for key, value in env.items():
            m.setenv(key, value)
        out = _Terminal() if terminal else io.StringIO()
        m.setattr(sys, "stdout", out)
        m.setattr(light.Console, "_rich", rich)
        if through_rich:
            m.setattr(light, "plain_width", lambda asked: None)
        print_it()
    return out.getvalue(), bool(used_rich)


def _render(plan: object, unit: str, top: int, env: dict[str, str], terminal: bool, through_rich: bool,
            monkeypatch: pytest.MonkeyPatch) -> tuple[str, bool]:
    """The text `cardfit plan` prints for `plan` (as cli/render.py's `plan_console` sets the width), and
    whether rich printed it (render_with)."""
    return render_with(lambda: _print_plan(plan, unit, top), env, terminal, through_rich, monkeypatch)


PIPES = [{"COLUMNS": "100"}, {}, {"COLUMNS": "150"}, {"COLUMNS": "80"}, {"COLUMNS": "60"}, {"COLUMNS": "41"},
         {"COLUMNS": "12"}, {"COLUMNS": "0"}, {"COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"}]


@pytest.mark.parametrize("env", PIPES, ids=str)
def test_plan_on_a_pipe_is_the_text_rich_writes(plans, env, monkeypatch):
    plain = []
    for plan, q in zip(plans, QUESTIONS, strict=True):
        for unit, top in (("GB", 12), ("GiB", 3)):
            ours, fell_back = _render(plan, unit, top, env, False, False, monkeypatch)
            theirs, _ = _render(plan, unit, top, env, False, True, monkeypatch)
            assert ours == theirs, (q, unit, env)
            if not fell_back:
                plain.append(q)
    width = env.get("COLUMNS", "120")
    if width == "120":  # a pipe's width: the tables fit but the Apple card's memory notes (rich wraps them)
        assert len(plain) == 2 * (len(QUESTIONS) - 1) and QUESTIONS[7] not in plain, plain
    if width == "150":
        assert len(plain) == 2 * len(QUESTIONS)
    if width in ("12", "0"):
        assert not plain  # narrower than the tables: rich wraps them


@pytest.mark.parametrize(("env", "terminal"), [
    ({"COLUMNS": "100", "TERM": "xterm"}, True), ({"COLUMNS": "100", "FORCE_COLOR": "1"}, False),
    ({"COLUMNS": "100", "TTY_COMPATIBLE": "1"}, False), ({"COLUMNS": "100", "TTY_COMPATIBLE": "0"}, False),
    ({"TERM": "dumb"}, True)], ids=str)
def test_terminals_and_colour_requests_go_to_rich(plans, env, terminal, monkeypatch):
    """Where rich may write escape codes (a terminal, FORCE_COLOR, TTY_COMPATIBLE) rich prints, with them."""
    out, fell_back = _render(plans[0], "GB", 12, env, terminal, False, monkeypatch)
    assert fell_back
    styled = env.get("TERM") == "xterm" or env.get("FORCE_COLOR") or env.get("TTY_COMPATIBLE") == "1"
    assert ("\x1b[32mfits\x1b[0m" in out) == bool(styled), env


WORDS = ["a", "bb", "note:", "≈1.5", "×", "—", "tokens/s", "x" * 45, "(30%", "duty);", "Ωµ", "é", "[green]",
         "[/]", "[bold red]", "[dim]", "1,234.5", "$0.54/h", "a]", "]"]


@st.composite
def markup_lines(draw: st.DrawFn) -> str:
    separators = st.sampled_from([" ", " ", "  ", "   ", "\n", ""])
    parts = draw(st.lists(st.tuples(st.sampled_from(WORDS), separators), max_size=30))
    return "".join(w + sep for w, sep in parts)


def rich_text(width: int, item: object, **print_args: object) -> str:
    """What rich itself writes for `item` at `width` to a pipe (no colour, no highlighting): the bytes the
    plain writer must equal wherever it prints."""
    from rich.console import Console as Rich

    out = io.StringIO()
    Rich(file=out, highlight=False, soft_wrap=False, width=width, emoji=False, force_terminal=False,
         color_system=None).print(item, **print_args)
    return out.getvalue()


@settings(max_examples=300, deadline=None)
@given(markup_lines(), st.integers(1, 90))
def test_plain_text_is_rich_text(text, width):
    """A markup line at any width: where the plain writer prints it, rich prints the same."""
    try:
        ours = light.render_plain([text], width)
    except light.Unhandled:
        return
    assert ours == rich_text(width, text)


CELLS = ["", "7", "24.0", "fits", "[green]fits[/]", "[magenta]offload[/] 40% GPU", "RTX 4090", "1 (2 nodes)",
         "[bold]total[/]", "4.5 bits/weight (GGUF mix)", "—", "≤12.3", "$1,690", "a b c", "Ω"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["memory", "GB", "#", "likely range", "x"]),
                          st.sampled_from(["left", "right"]), st.sampled_from(["", "dim"])),
                min_size=1, max_size=6),
       st.lists(st.lists(st.sampled_from(CELLS), min_size=6, max_size=6), max_size=5), st.integers(1, 110))
def test_plain_tables_are_rich_tables(columns, rows, width):
    """A borderless table at any width: where the plain writer prints it (it fits), rich prints the same."""
    t = light.Table()
    for header, justify, style in columns:
        t.add_column(header, justify, style)
    for row in rows:
        t.add_row(*row[:len(columns)])
    try:
        ours = light.render_plain([t], width)
    except light.Unhandled:
        return
    assert ours == rich_text(width, t.to_rich())


@pytest.mark.parametrize(("markup", "why"), [
    ("[link=x]a[/]", "a tag that is no cardfit style"), ("[/]a", "a close with nothing open"),
    ("a \\[b]", "a backslash"), ("[1] a", "a bracket rich may read"), ("模型", "two cells a character"),
    ("e\u0301", "a combining accent"), ("a\tb", "a tab"), ("a\u00a0b", "a no-break space")])
def test_what_the_plain_writer_leaves_to_rich(markup, why):
    with pytest.raises(light.Unhandled):
        light.render_plain([markup], 80)


@pytest.mark.parametrize(("items", "width", "expected"), [
    (["[bold]Llama 3.1 8B[/] · Q4_K_M"], 80, "Llama 3.1 8B · Q4_K_M\n"),
    (["one two three"], 6, "one \ntwo \nthree\n"),  # a line keeps the space after its last word
    (["one  two"], 4, "one \ntwo\n"),  # spaces past the width are dropped
    (["", "a\n\nb"], 5, "\na\n\nb\n"),
])
def test_plain_lines_by_hand(items, width, expected):
    assert light.render_plain(items, width) == expected


def test_a_plain_table_by_hand():
    t = light.Table()
    t.add_column("GPU")
    t.add_column("tok/s", justify="right")
    t.add_row("RTX 4090", "[green]101[/]")
    t.add_row("H100", "≤9")
    assert light.render_plain([t], 15) == "GPU       tok/s\nRTX 4090    101\nH100         ≤9\n"
    with pytest.raises(light.Unhandled):
        light.render_plain([t], 14)  # 15 columns do not fit 14: rich narrows and wraps them


def test_the_characters_taken_as_one_cell_are_one_cell():
    from rich.cells import cell_len

    chars = [chr(c) for lo, hi in light.ONE_CELL_RANGES for c in range(lo, hi) if light.one_cell(chr(c))]
    assert len(chars) > 3000 and all(cell_len(ch) == 1 for ch in chars)
    assert all(light.one_cell(ch) for ch in "·×–—…≈≤≥−‘’“”•→←µΩé")


def test_plan_on_a_pipe_does_not_load_rich(cli_home):
    """The README's question to a pipe: plain text, rich never imported; with FORCE_COLOR rich prints it."""
    code = ("import sys; from cardfit.cli import main; main(['plan', 'llama3.1:8b', '--gpu', 'RTX 4090']); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'rich'), file=sys.stderr)")
    env = {k: v for k, v in os.environ.items() if k not in ENV_KEYS}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**env, "HOME": str(cli_home), "COLUMNS": "120"})
    assert "Best: 1× RTX 4090" in proc.stdout and proc.stderr.strip() == "[]", proc.stderr
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**env, "HOME": str(cli_home), "COLUMNS": "120", "FORCE_COLOR": "1"})
    assert "\x1b[32mfits\x1b[0m" in proc.stdout and "'rich.console'" in proc.stderr, proc.stderr


def test_a_columns_that_is_no_number_is_ignored(run_cli):
    """COLUMNS=abc used to end `cardfit plan` with an internal error (int('abc')); rich ignores such a value,
    and so does the pipe's width: 120 columns."""
    code, out, err = run_cli("plan", "llama3.1:8b", "--gpu", "RTX 4090", env={"COLUMNS": "abc"})
    assert code == 0 and not err
    assert out == run_cli("plan", "llama3.1:8b", "--gpu", "RTX 4090", env={"COLUMNS": "120"})[1]


@pytest.mark.parametrize("name", ["a[red]b", "x[/]y", "plain", "c:\\m\\[x]", "[bold]"])
def test_a_name_is_printed_as_it_is_on_both_paths(name, monkeypatch, capsys):
    """A model or card name read from a file or a catalog goes into markup escaped (console.escape): its
    brackets are printed, never read as a style or a closing tag, by the plain writer and by rich."""
    from cardfit.cli.console import Console, escape

    for width, env in ((120, {}), (120, {"FORCE_COLOR": "1"})):
        for k in ("FORCE_COLOR",):
            monkeypatch.delenv(k, raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        c = Console(width)
        c.print(f"[bold]{escape(name)}[/] · plan")
        c.flush()
        out = capsys.readouterr().out
        assert name + " · plan" in out.replace("\x1b[1m", "").replace("\x1b[0m", ""), (env, out)


MARKUP_CARD = """[[gpu]]
id = "markup-card"
name = "Fake[red]Card[/]"
vendor = "nvidia"
stack = "cuda"
arch = "ada"
tier = "consumer"
memory_gb = 24.0
usable_bytes = 25000000000
usable_measured = false
usable_source = "a user's own card"
memory_type = "GDDR6X"
interconnect = "pcie"
bandwidth_gbps = 1000.0
bf16_tflops = 100.0
fp16_tflops = 100.0
fp8 = false
bf16 = true
fp4 = false
"""


@pytest.mark.parametrize("args", [("gpus",), ("plan", "llama-3.1-8b", "--gpu", "markup-card")])
def test_a_catalog_name_with_brackets_prints_as_written_in_tables_and_lines(args, run_cli, tmp_path):
    """A card from a user's --catalog named `Fake[red]Card[/]` is printed as written in table cells, the
    `Best:` line, the decode line and the notes: never read as a style (it printed `FakeCard` before)."""
    path = tmp_path / "cards.toml"
    path.write_text(MARKUP_CARD)
    code, out, err = run_cli(*args, "--catalog", str(path), env={"COLUMNS": "150"})
    assert code == 0, err
    assert "Fake[red]Card[/]" in out
    assert "FakeCard" not in out


@st.composite
def record_rows(draw: st.DrawFn) -> list[tuple[str, ...]]:
    kinds = st.sampled_from(["decode", "serving", "kv_cache", "file_size", "aggregate_decode"])
    ids = st.sampled_from(["xd-m3max40coregpu64gb-llama3.1-70b-q4km-tg512", "dennislee-test4-100", "a", "a]b",
                           "aic-h200-sxm-vllm-0.10.1-llama3.1-8b-fp8-isl1024-osl1024-c64", "[bold]b[/]",
                           "x" * 70, "模型-wide"])
    runtimes = st.sampled_from(["llama.cpp", "vllm@0.10.1.1", "sglang", "trtllm"])
    values = st.sampled_from(["—", "8 tok/s", "1,234 tok/s", "0.12 GiB", "35 ms", "12,345 ms"])
    errors = st.sampled_from(["skipped", "+0.0%", "-12.3%", "+880.0%", "+1,234.5%"])
    return draw(st.lists(st.tuples(kinds, ids, runtimes, values, values, errors), max_size=12))


@settings(max_examples=100, deadline=None)
@given(record_rows(), st.sampled_from(["", "40", "80", "120", "300"]))
def test_validate_records_on_a_pipe_are_the_bytes_rich_writes(rows, columns):
    """`cardfit validate` writes its records table (thousands of rows) with the plain writer where rich would
    write no escape codes: the bytes rich writes for the same rows, and the width the rest is printed at."""
    from rich.console import Console as Rich
    from rich.table import Table as RichTable

    from cardfit.cli import validate_cmd as v

    with pytest.MonkeyPatch.context() as m:
        for key in ENV_KEYS:
            m.delenv(key, raising=False)
        if columns:
            m.setenv("COLUMNS", columns)
        ours = io.StringIO()
        m.setattr(sys, "stdout", ours)
        width = v._plain_records(rows)
        theirs = io.StringIO()
        m.setattr(sys, "stdout", theirs)
        t = RichTable(show_header=True, header_style="bold", box=None, pad_edge=False)
        for col, just in v.RECORD_COLUMNS:
            t.add_column(col, justify=just, no_wrap=True)
        for row in rows:
            t.add_row(*row)
        c = v._wide(Rich(highlight=False, soft_wrap=False, width=int(columns or 120), emoji=False), t)
        c.print(t)
    if any("模" in cell for row in rows for cell in row):  # wide characters: rich prints them
        assert width == 0 and ours.getvalue() == ""
        return
    assert ours.getvalue() == theirs.getvalue()
    assert v._widened(Rich(width=int(columns or 120)), width).width == c.width

"""`cardfit deploy` prints through cli/console.py as `cardfit plan` does: plain text where rich would write no
escape codes and the format holds it (a titled table, launch lines written as they are), rich itself
elsewhere. These tests render real deploy answers (a Pareto front, a pinned benchmark run, a deployment
under NVIDIA Dynamo, no answer) both ways at many widths and compare the bytes, hold titled tables and
verbatim lines against rich on random input (hypothesis), and check that a deploy to a pipe imports no
rich."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cardfit.cli import console as light
from cardfit.cli.deploy_cmd import _print
from cardfit.services.table import BY_NAME

from .test_console import ENV_KEYS, render_with, rich_text

QUESTIONS = [
    # the README's question: a Pareto front (the titled table) and a launch line wider than 120 columns
    {"model": "meta-llama/Llama-3.1-8B-Instruct", "users": 32, "ttft_ms": 1500, "tpot_ms": 50,
     "runtime": "vllm"},
    # the README's pinned deployment: its benchmark run line
    {"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": ("H100 SXM",), "runtime": "vllm", "tp": 1,
     "quant": "fp8", "users": 64, "requests": 640, "input_tokens": 1000, "output_tokens": 100},
    # no deployment meets a TPOT no card reaches: the failing line and the closest deployment
    {"model": "meta-llama/Llama-3.3-70B-Instruct", "users": 8, "tpot_ms": 1, "gpu": ("H100",)},
    # --cards 8 with no load: the most users the cards serve
    {"model": "Qwen/Qwen3-30B-A3B", "cards": 8},
]


@pytest.fixture(scope="module")
def reports() -> list:
    """The typed answers `cardfit deploy` renders (services/deploy.py DeployReport)."""
    return [BY_NAME["deploy"].call(q) for q in QUESTIONS]


def _render(report: object, env: dict[str, str], through_rich: bool,
            monkeypatch: pytest.MonkeyPatch) -> tuple[str, bool]:
    """The text `cardfit deploy` prints for `report` to a pipe, and whether rich printed it (render_with)."""
    return render_with(lambda: _print(report), env, False, through_rich, monkeypatch)


@pytest.mark.parametrize("env", [{}, {"COLUMNS": "100"}, {"COLUMNS": "150"}, {"COLUMNS": "80"},
                                 {"COLUMNS": "41"}, {"COLUMNS": "12"}], ids=str)
def test_deploy_on_a_pipe_is_the_text_rich_writes(reports, env, monkeypatch):
    plain = []
    for report, q in zip(reports, QUESTIONS, strict=True):
        ours, fell_back = _render(report, env, False, monkeypatch)
        theirs, _ = _render(report, env, True, monkeypatch)
        assert ours == theirs, (q, env)
        if not fell_back:
            plain.append(q)
    if env.get("COLUMNS", "120") in ("120", "150"):  # the tables fit: every answer is plain text
        assert plain == QUESTIONS
    if env.get("COLUMNS") == "100":  # every table but the --cards answer's fits: its deployment's name is 99
        # wide as 8× B200 (attention DP 8 · EP 8), 114 as DP 2 · EP 2 × 4 replicas (each group's engine at
        # vLLM's own 1,024-sequence cap on the card)
        assert [q for q in plain if "cards" not in q] == [q for q in QUESTIONS if "cards" not in q]
    if env.get("COLUMNS") == "12":
        assert not plain  # narrower than the Pareto table and words: rich wraps them


WORDS = ["vllm", "serve", "--tensor-parallel-size", "2", "meta-llama/Llama-3.1-8B-Instruct", "x" * 130, "·",
         "×", "[bold]", "[/]", "a\\[b]", "模型", "\t", "é", "e\u0301", "$1,690", "'a b'"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from([" ", "  ", ""])), max_size=20),
       st.integers(1, 130), st.sampled_from(["", "bold"]))
def test_a_verbatim_line_is_the_text_rich_writes(parts, width, style):
    """A line written as it is (a launch command): never wrapped nor read as markup, on both paths."""
    text = "".join(w + sep for w, sep in parts)
    try:
        ours = light.render_plain([light.Verbatim(text, style)], width)
    except light.Unhandled:
        assert not text.isprintable() or any(ord(ch) > 0x2300 or ch == "\u0301" for ch in text)
        return
    assert ours == rich_text(width, text, style=style or None, markup=False, soft_wrap=True) == text + "\n"


LINE_WORDS = ["TTFT", "p90", "146", "ms", "·", "1,212", "tok/s", "x" * 45, "(rent", "wins);", "–", "é",
              "[dim]", "[/]"]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["", " ", "  ", "    "]),
       st.lists(st.tuples(st.sampled_from(LINE_WORDS), st.sampled_from([" ", "  ", ""])), max_size=25),
       st.integers(1, 90))
def test_an_indented_line_is_the_text_rich_writes(indent, parts, width):
    """A markup line that starts with spaces (deploy's figures under its answer) at any width: where the plain
    writer prints it, rich prints the same (the indent belongs to the first word, as rich's _wrap.words)."""
    text = indent + "".join(w + sep for w, sep in parts)
    try:
        ours = light.render_plain([text], width)
    except light.Unhandled:
        return
    assert ours == rich_text(width, text)


@pytest.mark.parametrize(("line", "width", "expected"), [
    ("  TTFT 146 ms", 80, "  TTFT 146 ms\n"),
    ("  TTFT 146 ms", 8, "  TTFT \n146 ms\n"),  # the indent stays with the first word; later lines have none
])
def test_indented_lines_by_hand(line, width, expected):
    assert light.render_plain([line], width) == expected
    with pytest.raises(light.Unhandled):
        light.render_plain(["   "], width)  # a line of spaces: rich's own


TITLES = ["Pareto front: rent vs per-user speed vs TTFT", "x", "[bold]t[/]", "a  b", " t", "模型", "a b c"]
CELLS = ["", "7", "24.0", "[green]fits[/]", "2× RTX A5000 (TP 2)", "—", "$1,690", "a b c"]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(TITLES),
       st.lists(st.sampled_from(["left", "right"]), min_size=1, max_size=5),
       st.lists(st.lists(st.sampled_from(CELLS), min_size=5, max_size=5), max_size=4), st.integers(1, 90))
def test_titled_tables_are_rich_tables(title, justify, rows, width):
    """A borderless table with a title at any width: where the plain writer prints it (the title no wider
    than the table), rich prints the same, the title padded to the table's width."""
    t = light.Table(title=title)
    for i, just in enumerate(justify):
        t.add_column(f"c{i}", just)
    for row in rows:
        t.add_row(*row[:len(justify)])
    try:
        ours = light.render_plain([t], width)
    except light.Unhandled:
        return
    assert ours == rich_text(width, t.to_rich())


def test_a_titled_table_by_hand():
    t = light.Table(title="front")
    t.add_column("GPU")
    t.add_column("$", justify="right")
    t.add_row("H100", "1,690")
    assert light.render_plain([t], 20) == "front      \nGPU       $\nH100  1,690\n"
    t.title = "a longer title"  # 14 letters over an 11-column table: rich wraps it
    with pytest.raises(light.Unhandled):
        light.render_plain([t], 20)


def test_deploy_on_a_pipe_does_not_load_rich(cli_home):
    """The README's deploy question to a pipe: plain text, rich never imported; with FORCE_COLOR rich prints
    it (the launch line bold)."""
    code = ("import sys; from cardfit.cli import main; main(['deploy', 'meta-llama/Llama-3.1-8B-Instruct', "
            "'--users', '32', '--ttft-ms', '1500', '--tpot-ms', '50', '--runtime', 'vllm']); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'rich'), file=sys.stderr)")
    env = {k: v for k, v in os.environ.items() if k not in ENV_KEYS}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**env, "HOME": str(cli_home), "COLUMNS": "120"})
    assert "Pareto front: rent vs per-user speed vs TTFT" in proc.stdout and proc.stderr.strip() == "[]", \
        proc.stderr
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**env, "HOME": str(cli_home), "COLUMNS": "120", "FORCE_COLOR": "1"})
    assert "\x1b[1m  vllm serve " in proc.stdout and "'rich.console'" in proc.stderr, proc.stderr


def test_a_chart_path_with_brackets_is_printed_as_written(run_cli, tmp_path):
    """`--plot` takes any file name; the line that names it prints it as written, not as rich markup (a
    '[bold]' in the name was swallowed; a folder 'd[' holding 'bold]' makes '[/bold]', a MarkupError)."""
    folder = tmp_path / "d[" / "bold]"
    folder.mkdir(parents=True)
    svg = folder / "x[bold].svg"
    code, out, err = run_cli("deploy", "meta-llama/Llama-3.1-8B-Instruct", "--users", "32", "--ttft-ms",
                             "1500", "--tpot-ms", "50", "--runtime", "vllm", "--plot", str(svg),
                             env={"COLUMNS": "400"})
    assert code == 0, err
    assert svg.exists()
    assert f"Chart written to {svg}" in out

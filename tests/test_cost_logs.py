"""Throughput from real logs (tests/fixtures/logs/**, each file names its source on its first line).
Several releases of each tool: the lines around the numbers change, the numbers must not."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cardfit.errors import FileFormatError
from cardfit.readers.logs import go_duration_s, parse_log, read_log

LOGS = Path(__file__).parent / "fixtures" / "logs"

CASES = [
    # file, kind, tokens/s, busy samples, idle samples, why it is tricky
    ("ollama/breakeven_guide.txt", "ollama", 42.86, 1, 0,
     "the break-even guide's three-line block, no prompt lines"),
    ("ollama/2024-01_issue1806.txt", "ollama", 24.61, 1, 0,
     "`prompt eval rate` must not be taken for `eval rate`"),
    ("ollama/2025-01_minutes_llm-ollama-32.txt", "ollama", 8.87, 1, 0, "durations in minutes (2m7.682s)"),
    ("ollama/2025-10_pr12742_two_runs.txt", "ollama", 3642 / (18.173182374 + 17.148014223), 2, 0,
     "two runs: total eval count ÷ total eval duration"),
    ("vllm-server/breakeven_guide_line.txt", "vllm-server", 396.1, 1, 0,
     "bare status line, no logger prefix"),
    ("vllm-server/v0.2_2024-01_issue2595_one_line.txt", "vllm-server", (77.3 + 77.3 + 76.8 + 76.4) / 4, 4, 1,
     "records glued onto one line; the first interval generated nothing and is skipped"),
    ("vllm-server/v0.3_2024-02_issue2731_extra_fields.txt", "vllm-server", 118.5, 1, 0,
     "extra `Max iteration time` fields between the numbers"),
    ("vllm-server/v0.7_2025-01_issue12314.txt", "vllm-server", 41.7, 6, 0,
     "V0 metrics.py with Swapped/Pending"),
    ("vllm-server/v1_2026-05_issue43295_engine.txt", "vllm-server",
     (1055.3 + 1226.3 + 734.9 + 589.8 + 1242.7) / 5, 5, 0,
     "V1 `Engine 000:` prefix, Waiting instead of Pending"),
    ("vllm-bench/2025-05_pr18566.txt", "vllm-bench", 6582.87, 1, 0,
     "`Total Token throughput` must not be taken"),
    ("vllm-bench/2026_pr43276_peak.txt", "vllm-bench", 862.09, 1, 0,
     "`Peak output token throughput` line too"),
]


@pytest.mark.parametrize("name, kind, tps, busy, idle, why", CASES, ids=[c[0] for c in CASES])
def test_real_logs(name, kind, tps, busy, idle, why):
    m = read_log(str(LOGS / name))
    assert m.kind == kind
    assert m.tokens_per_s == pytest.approx(tps, abs=0.005)
    assert (m.samples, m.idle_samples) == (busy, idle)


def test_every_fixture_names_its_source():
    for f in LOGS.rglob("*.txt"):
        first = f.read_text().splitlines()[0]
        assert first.startswith("# source: ") and ("https://" in first or "guide ('" in first), f


def test_busy_fraction_and_concurrency():
    m = read_log(str(LOGS / "vllm-server/v0.2_2024-01_issue2595_one_line.txt"))
    assert m.busy_fraction == 0.8
    m = read_log(str(LOGS / "vllm-server/v1_2026-05_issue43295_engine.txt"))
    assert m.concurrency == pytest.approx(19.0)
    assert read_log(str(LOGS / "vllm-bench/2026_pr43276_peak.txt")).concurrency == 16
    assert read_log(str(LOGS / "ollama/breakeven_guide.txt")).single_stream


def test_idle_server_log_is_a_clear_error():
    with pytest.raises(FileFormatError, match="all 3 vLLM throughput lines are idle"):
        read_log(str(LOGS / "vllm-server/v0.5_2024-08_issue6689_idle.txt"))


def test_requests_only_benchmark_is_a_clear_error():
    with pytest.raises(FileFormatError, match="requests/s only"):
        read_log(str(LOGS / "vllm-bench/2023-07_issue359_requests_only.txt"))


def test_nothing_usable():
    with pytest.raises(FileFormatError, match="no `eval rate`"):
        parse_log("hello\nworld\n", "x.log")


def test_missing_file():
    with pytest.raises(FileFormatError, match="cannot read the log"):
        read_log("/nonexistent/vllm.log")


def test_two_engines_add_up():
    # data-parallel: one line per engine per interval; the server makes the sum
    text = (LOGS / "vllm-server/v1_2026-05_issue43295_engine.txt").read_text()
    twin = text + text.replace("Engine 000:", "Engine 001:")
    assert parse_log(twin).tokens_per_s == pytest.approx(2 * 969.8, abs=0.01)


def test_crlf_and_colour_codes():
    text = (LOGS / "ollama/2024-01_issue1806.txt").read_text().replace("\n", "\r\n")
    assert parse_log("\x1b[1m" + text + "\x1b[0m").tokens_per_s == 24.61


@pytest.mark.parametrize("text, seconds", [("9.612s", 9.612), ("796.532ms", 0.796532), ("2m7.682s", 127.682),
                                           ("891.933µs", 0.000891933), ("1h2m3s", 3723.0), ("fast", None)])
def test_go_durations(text, seconds):
    got = go_duration_s(text)
    assert got == (pytest.approx(seconds) if seconds is not None else None)


@given(st.text(max_size=400))
def test_any_text_gives_a_number_or_a_file_format_error(text):
    try:
        m = parse_log(text)
    except FileFormatError:
        return
    assert m.tokens_per_s > 0


# ---- linear-time patterns (issue 25 item 10) --------------------------------------------------------------

_OLD_FORMS = {  # the `\s*` forms these patterns replaced: quadratic on runs of newlines or tabs
    "_OLLAMA_RATE": (r"(?<![\w ])\s*eval rate:\s*{n}\s*tokens?/s", re.I),
    "_OLLAMA_COUNT": (r"^\s*eval count:\s*{n}", re.I | re.M),
    "_OLLAMA_DURATION": (r"^\s*eval duration:\s*(\S+)", re.I | re.M),
    "_BENCH_OUT": (r"^\s*Output token throughput \(tok/s\):\s*{n}", re.I | re.M),
}
_PIECES = ["eval rate: 12.5 tokens/s", "prompt ", "eval count: 7", "eval duration: 1.5s", " ", "\t", "\n",
           "\x0b", "x", ":", "Output token throughput (tok/s): 9", "3", "\u2028"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=24))
def test_linear_patterns_find_what_the_old_ones_found(pieces):
    from cardfit.readers import logs

    text = "".join(pieces)
    for name, (form, flags) in _OLD_FORMS.items():
        old = re.compile(form.replace("{n}", logs._NUM), flags)
        assert getattr(logs, name).findall(text) == old.findall(text), (name, text)


@pytest.mark.parametrize("text", [
    "x" + "\n" * 2**20,  # the 60 KB '\n' paste held the web server for 51 s
    "x" + "\t" * 2**20,
    "\t\n \x0b" * 2**18,
    "eval rate:" + "\n" * 2**20,
    "eval duration: " + "1" * 2**20,
    "eval rate: " + "1," * 2**19,
    "INFO " * 2**18,
    "\x1b[" * 2**19,
])
def test_a_pasted_megabyte_parses_in_linear_time(text):
    """The web API takes pasted logs up to 1 MiB (web/limits.py); any of them reads in well under a second
    (about 0.25 s on the 2-core test machine; the quadratic patterns took minutes)."""
    t = time.process_time()
    with pytest.raises(FileFormatError):
        parse_log(text)
    assert time.process_time() - t < 2.0


@pytest.mark.parametrize(("name", "join"), [
    *((c[0], "\n") for c in CASES if c[1] != "vllm-bench"),
    # every record glued onto one line (records a logger prefix starts: the bare status line has none)
    *((c[0], " ") for c in CASES if c[1] == "vllm-server" and "INFO " in (LOGS / c[0]).read_text()),
])
def test_a_log_longer_than_a_piece_reads_as_the_short_one(name, join):
    """Logs are searched CHUNK_CHARS at a time: a real log repeated past many pieces (as lines, or glued
    onto one long line) gives the short log's reading with every sample counted."""
    from cardfit.readers.logs import CHUNK_CHARS

    text = (LOGS / name).read_text()
    if join == " ":
        text = text.replace("\n", " ")
    one = parse_log(text)
    times = 3 * CHUNK_CHARS // len(text) + 1
    many = parse_log(join.join([text] * times))
    # Ollama runs: total eval count ÷ total eval duration, which the printed rate rounds
    assert many.tokens_per_s == pytest.approx(one.tokens_per_s, rel=1e-3 if one.kind == "ollama" else 1e-9)
    assert (many.samples, many.idle_samples) == (one.samples * times, one.idle_samples * times)


@given(st.lists(st.sampled_from(["a", " ", "\n", "INFO 01-02 ", "9"]), max_size=300).map("".join))
def test_pieces_cover_the_text_and_are_bounded(text):
    from cardfit.readers import logs

    size, logs.CHUNK_CHARS = logs.CHUNK_CHARS, 40  # small pieces, so random text needs many
    try:
        pieces = logs._chunks(text)
    finally:
        logs.CHUNK_CHARS = size
    assert "".join(pieces) == text and all(0 < len(p) <= 40 for p in pieces)

"""Throughput from real logs (tests/fixtures/logs/**, each file names its source on its first line).
Several releases of each tool: the lines around the numbers change, the numbers must not."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
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

"""Measured throughput from the logs people already have:

- `ollama run MODEL --verbose`: the `eval rate` line (generation only; `prompt eval rate` is prefill).
  One stream: the speed of a single user, not of a busy server.
- a vLLM server log: the periodic `Avg generation throughput` line, averaged over the busy intervals
  (idle ones, where nothing was generated or nothing was running, are skipped but counted).
- a `vllm bench serve` (or `benchmark_serving.py`) summary: `Output token throughput (tok/s)`.

The fields around these numbers move between releases (Pending → Waiting, `Engine 000:` prefixes, log
records glued onto one line by some log collectors), so each value is found by its own label, anywhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from statistics import fmean

from ..errors import FileFormatError

MAX_LOG_BYTES = 64 * 2**20

_NUM = r"([0-9][0-9,]*(?:\.[0-9]+)?)"
# Every pattern runs in linear time, so a pasted log costs work in proportion to its size: a label at the
# start of a line is found as `^[^\S\n]*label` (the whitespace before it on its own line; `^\s*label` let each
# of n blank lines scan all the blank lines after it, n²/2 steps), and `eval rate` not after `prompt ` as
# `(?<![\w ]) *eval rate` (only spaces between the lookbehind and the label, so a run of tabs or newlines is
# not rescanned from each of its characters). Each matches exactly what its `\s*` form matched
# (tests/test_cost_logs.py holds the two forms equal on random text).
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_OLLAMA_RATE = re.compile(rf"(?<![\w ]) *eval rate:\s*{_NUM}\s*tokens?/s", re.I)
_OLLAMA_PROMPT_RATE = re.compile(rf"prompt eval rate:\s*{_NUM}\s*tokens?/s", re.I)
_OLLAMA_COUNT = re.compile(rf"^[^\S\n]*eval count:\s*{_NUM}", re.I | re.M)
_OLLAMA_DURATION = re.compile(r"^[^\S\n]*eval duration:\s*(\S+)", re.I | re.M)
_VLLM_GEN = re.compile(rf"Avg generation throughput:\s*{_NUM}\s*tokens/s", re.I)
_VLLM_PROMPT = re.compile(rf"Avg prompt throughput:\s*{_NUM}\s*tokens/s", re.I)
_VLLM_RUNNING = re.compile(r"Running:\s*(\d+)\s*reqs?", re.I)
_VLLM_ENGINE = re.compile(r"Engine\s+(\d+)\s*:", re.I)
_RECORD_START = re.compile(r"\n|(?=\b(?:INFO|DEBUG|WARNING)\s+\d\d-\d\d\s)")
_BENCH_OUT = re.compile(rf"^[^\S\n]*Output token throughput \(tok/s\):\s*{_NUM}", re.I | re.M)
_BENCH_FIELDS = {
    "successful_requests": re.compile(rf"^[^\S\n]*Successful requests:\s*{_NUM}", re.I | re.M),
    "duration_s": re.compile(rf"^[^\S\n]*Benchmark duration \(s\):\s*{_NUM}", re.I | re.M),
    "generated_tokens": re.compile(rf"^[^\S\n]*Total generated tokens:\s*{_NUM}", re.I | re.M),
    "input_tokens": re.compile(rf"^[^\S\n]*Total input tokens:\s*{_NUM}", re.I | re.M),
    "max_concurrency": re.compile(rf"^[^\S\n]*Max(?:imum)? request concurrency:\s*{_NUM}", re.I | re.M),
    "peak_output_tokens_per_s": re.compile(rf"^[^\S\n]*Peak output token throughput \(tok/s\):\s*{_NUM}",
                                           re.I | re.M),
}
# A long log is searched a piece at a time: pieces of at most CHUNK_CHARS characters, cut after a line's end
# (in a longer line, before a glued log record or after a space), so no pattern runs over more than that in
# one call. A regex call holds the GIL for its whole run (up to ~17 ms for 64 KiB on the 2-core test machine
# under load, 270 ms for a MiB), and the web server's other requests wait for it. No pattern matches across
# a line's end except `\s*` between a label and its number, which real logs never split.
CHUNK_CHARS = 64 * 1024
_DURATION_PART = re.compile(r"([0-9.]+)(h|ms|µs|us|μs|ns|m|s)")
_REQUESTS_ONLY = re.compile(r"Throughput:\s*[0-9.]+\s*requests/s")
_DURATION_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "µs": 1e-6, "μs": 1e-6, "us": 1e-6,
                  "ns": 1e-9}

HINT = ("paste the timing block of `ollama run MODEL --verbose`, a vLLM server log with "
        "`Avg generation throughput` lines, or a `vllm bench serve` summary")


@dataclass(frozen=True, slots=True)
class Measurement:
    """Tokens/s read from a log, and how it was read."""

    kind: str  # "ollama" | "vllm-server" | "vllm-bench"
    tokens_per_s: float  # output (generation) tokens per second
    prompt_tokens_per_s: float | None = None  # informational: prompt tokens/s the log shows
    samples: int = 1  # runs, intervals or summaries the number comes from
    idle_samples: int = 0  # vLLM intervals skipped as idle
    concurrency: float | None = None  # mean running requests (vLLM server) or the benchmark's cap
    single_stream: bool = False
    notes: tuple[str, ...] = field(default=())

    @property
    def busy_fraction(self) -> float | None:
        total = self.samples + self.idle_samples
        return self.samples / total if self.kind == "vllm-server" and total else None


def _chunks(text: str) -> list[str]:
    out, start, n = [], 0, len(text)
    while start < n:
        end = start + CHUNK_CHARS
        if end < n:
            end = _cut(text, start, end)
        out.append(text[start:end])
        start = end
    return out


def _cut(text: str, start: int, end: int) -> int:
    """Where a piece of text[start:end] ends: after its last line end, else before its last glued log record,
    else after its last space (so no label or number is cut), else at `end`."""
    cut = text.rfind("\n", start, end)
    if cut >= start:
        return cut + 1
    glued = [m.start() for m in _RECORD_START.finditer(text, start + 1, end)]
    if glued:
        return glued[-1]
    cut = text.rfind(" ", start, end)
    return cut + 1 if cut > start else end


def _findall(rx: re.Pattern[str], text: str) -> list[str]:
    return [found for piece in _chunks(text) for found in rx.findall(piece)]


def _search(rx: re.Pattern[str], text: str) -> re.Match[str] | None:
    for piece in _chunks(text):
        if m := rx.search(piece):
            return m
    return None


def _num(s: str) -> float:
    return float(s.replace(",", ""))


def go_duration_s(text: str) -> float | None:
    """Go's time.Duration text (Ollama prints it): '9.612s', '796.532ms', '2m7.682s', '891.933µs'."""
    if len(text) > 64:  # Ollama prints ~12 characters; a longer one is no duration (and bounds the work)
        return None
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(a + b for a, b in parts) != text.strip():
        return None
    return sum(float(v) * _DURATION_UNIT[u] for v, u in parts)


def parse_ollama(text: str) -> Measurement | None:
    rates = [_num(m) for m in _findall(_OLLAMA_RATE, text)]
    if not rates:
        return None
    counts = [_num(m) for m in _findall(_OLLAMA_COUNT, text)]
    durations = [go_duration_s(m) for m in _findall(_OLLAMA_DURATION, text)]
    notes = ["single stream: one request at a time; a batched server makes several times more tokens/s"]
    tps = fmean(rates)
    if len(rates) > 1 and len(counts) == len(durations) == len(rates) and all(durations):
        tps = sum(counts) / sum(d for d in durations if d)
        notes.append(f"{len(rates)} runs: total eval count ÷ total eval duration")
    prompt = [_num(m) for m in _findall(_OLLAMA_PROMPT_RATE, text)]
    return Measurement("ollama", tps, fmean(prompt) if prompt else None, samples=len(rates),
                       single_stream=True, notes=tuple(notes))


@dataclass(frozen=True, slots=True)
class _Interval:
    engine: str
    generation: float
    prompt: float | None
    running: int | None


def _vllm_intervals(text: str) -> list[_Interval]:
    out = []
    records = (r for piece in _chunks(text) if _VLLM_GEN.search(piece) for r in _RECORD_START.split(piece))
    for record in records:
        gen = _VLLM_GEN.search(record)
        if not gen:
            continue
        prompt, running, engine = (
            _VLLM_PROMPT.search(record),
            _VLLM_RUNNING.search(record),
            _VLLM_ENGINE.search(record),
        )
        out.append(_Interval(engine.group(1) if engine else "", _num(gen.group(1)),
                             _num(prompt.group(1)) if prompt else None,
                             int(running.group(1)) if running else None))
    return out


def _busy(i: _Interval) -> bool:
    return i.generation > 0 and i.running != 0


def parse_vllm_server(text: str, path: str = "<log>") -> Measurement | None:
    intervals = _vllm_intervals(text)
    if not intervals:
        return None
    busy = [i for i in intervals if _busy(i)]
    if not busy:
        raise FileFormatError(path,
                              f"all {len(intervals)} vLLM throughput lines are idle (0 tokens/s generated)",
                              hint="log while requests are being served, e.g. during `vllm bench serve`")
    engines = sorted({i.engine for i in busy})
    # Data-parallel servers log one line per engine: average each engine, then add them up.
    tps = sum(fmean(i.generation for i in busy if i.engine == e) for e in engines)
    prompts = [i.prompt for i in busy if i.prompt is not None]
    running = [i.running for i in busy if i.running is not None]
    notes = [f"mean of {len(busy)} busy intervals; {len(intervals) - len(busy)} idle ones skipped"]
    if len(engines) > 1:
        notes.append(f"{len(engines)} engines: their means added")
    prefill = sum(fmean(i.prompt for i in busy if i.engine == e and i.prompt is not None) for e in engines
                  if any(i.prompt is not None for i in busy if i.engine == e)) if prompts else None
    return Measurement("vllm-server", tps, prefill, samples=len(busy),
                       idle_samples=len(intervals) - len(busy),
                       concurrency=fmean(running) * len(engines) if running else None, notes=tuple(notes))


def parse_vllm_bench(text: str) -> Measurement | None:
    found, start, last, last_at = 0, 0, None, 0
    for piece in _chunks(text):
        for m in _BENCH_OUT.finditer(piece):
            found, last, last_at = found + 1, m, start + m.start()
        start += len(piece)
    if last is None:
        return None
    block = text[max(text.rfind("Serving Benchmark Result", 0, last_at), 0):]
    extra = {k: _num(m.group(1)) for k, rx in _BENCH_FIELDS.items() if (m := _search(rx, block))}
    notes = ["`Output token throughput` of the benchmark summary "
             f"({', '.join(f'{k} {v:g}' for k, v in extra.items())})"]
    if found > 1:
        notes.append(f"{found} summaries in the file; the last one is used")
    prefill = None
    if extra.get("input_tokens") and extra.get("duration_s"):
        prefill = extra["input_tokens"] / extra["duration_s"]
    return Measurement("vllm-bench", _num(last.group(1)), prefill, samples=found,
                       concurrency=extra.get("max_concurrency"), notes=tuple(notes))


def parse_log(text: str, path: str = "<log>") -> Measurement:
    """The output tokens/s in `text`; FileFormatError (one line) when there is nothing usable."""
    text = "".join(_ANSI.sub("", piece) for piece in _chunks(text.replace("\r\n", "\n").replace("\r", "\n")))
    for parse in (parse_vllm_bench, lambda t: parse_vllm_server(t, path), parse_ollama):
        m = parse(text)
        if m is not None:
            if m.tokens_per_s <= 0:
                raise FileFormatError(path, f"the {m.kind} throughput in this log is 0 tokens/s", hint=HINT)
            return m
    if _search(_REQUESTS_ONLY, text):
        raise FileFormatError(path, "this benchmark summary gives requests/s only, not output tokens/s",
                              hint="rerun with `vllm bench serve`, which prints `Output token throughput "
                              "(tok/s)`")
    raise FileFormatError(path,
                          "no `eval rate`, `Avg generation throughput` or `Output token throughput` found",
                          hint=HINT)


def read_log(path: str) -> Measurement:
    from .source import read_regular

    raw = read_regular(path, MAX_LOG_BYTES, "the log")
    return parse_log(raw.decode("utf-8", errors="replace"), path)

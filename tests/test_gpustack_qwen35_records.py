"""GPUStack's Qwen3.5 performance-lab records (data/validation/serving_gpustack_qwen35.toml): each record's
load and figure are read off its own quoted block (github.com/gpustack/gpustack docs/performance-lab
@47277d79), so a slip in the lengths, the closed loop's size or the figure shows here, not as a model
error."""

import re
import tomllib
from pathlib import Path

import pytest

FILE = Path(__file__).resolve().parents[1] / "src/cardfit/data/validation/serving_gpustack_qwen35.toml"
RECORDS = tomllib.loads(FILE.read_text(encoding="utf-8"))["record"]
# the block's line each metric is read from, and its scale to the record's unit
LINE = {"output_tokens_per_s": ("Output token throughput (tok/s)", 1.0), "ttft_ms": ("Mean TTFT (ms)", 1.0),
        "e2e_latency_ms": ("Mean Latency(s)", 1000.0)}


def field(excerpt: str, name: str) -> float:
    m = re.search(rf"^{re.escape(name)}:\s+([\d.]+)$", excerpt, re.M)
    assert m, name
    return float(m.group(1))


def test_the_source_holds_both_pages_of_vllm_0171():
    assert len(RECORDS) == 24
    assert {r["model"] for r in RECORDS} == {"qwen3.5-9b", "qwen3.5-35b-a3b"}
    assert {r["settings"]["version"] for r in RECORDS} == {"0.17.1"}


@pytest.mark.parametrize("r", RECORDS, ids=lambda r: r["id"])
def test_record_is_read_off_its_block(r):
    ex = r["excerpt"]
    n = field(ex, "Successful requests")
    # guidellm's constant rate of 1,000/s under its 512 cap: a closed loop of the block's requests
    cap = field(ex, "Maximum request concurrency")
    assert (r["load"], r["requests"], r["concurrency"]) == ("closed", n, cap)
    assert r["concurrency"] == 512
    assert r["input_tokens"] == round(field(ex, "Total input tokens") / n)
    assert r["output_tokens"] == round(field(ex, "Total generated tokens") / n)
    name, scale = LINE[r["metric"]]
    assert r["measured"] == pytest.approx(field(ex, name) * scale)
    assert r["statistic"] == "mean"

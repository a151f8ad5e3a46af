"""GPUStack's single-H100 pages and the card their own decode-only steps say they ran on (issue
24; docs/VALIDATION.md "GPUStack's single-H100 pages").

A decode step with nothing else in it, a few sequences reading the weights and their 32,000-token KV caches,
is set by memory bandwidth alone: 3.35 TB/s on an H100 SXM, 2.0 TB/s on an H100 PCIe (NVIDIA H100 datasheet;
data/gpus.toml). The pages' "random 32K input" runs report it as their median ITL (= their median TPOT)."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from cardfit.core import serving as sv
from cardfit.services.deploy import pinned_answer
from cardfit.validation.serving import record_input
from cardfit.validation.validate import load_records

PCIE_PAGES = ("qwen3-14b/h100.md", "qwen3-32b/h100.md")  # added 2025-11-13, gpustack/gpustack ccf4b940


@pytest.fixture(scope="module")
def records() -> dict[str, dict]:
    return {r["id"]: r for r in load_records("serving") if r["id"].startswith("gpustack-")}


def _page(r: dict) -> str:
    return r["source"].split("/docs/performance-lab/")[-1]


def test_the_records_keep_the_card_the_pages_name(records):
    """The pages' Hardware line says "A single NVIDIA H100 SXM GPU." (written after the runs, in a commit
    about card counts); their decode steps say a 2.0 TB/s board (below), but a card read off the runs' own
    steps would be a setting adopted because it fits them: the records keep the board the pages name."""
    pcie = [r for r in records.values() if _page(r) in PCIE_PAGES]
    assert len(pcie) == 72  # 24 runs x TTFT, TPOT, output tokens/s
    assert all(r["gpu"] == "H100 SXM" and "gpu" not in r.get("assumed", []) for r in pcie)


def _median_itl_ms(r: dict) -> float:
    m = re.search(r"Median ITL \(ms\):\s*([\d.]+)", r["excerpt"])
    assert m, r["id"]
    return float(m.group(1))


def _decode_step_ms(r: dict, gpu: str, sequences: int) -> float:
    inp, _, _ = record_input(r)
    p = pinned_answer(replace(inp, gpu=(gpu,)))
    return sv.prompt_step_s(p.result.cand.replica, sequences, 0) * 1e3


# (record, sequences decoding: what one card's KV pool holds at 32,100 tokens, measured median ITL in ms)
DECODE_ONLY = [
    # qwen3-32b/h100.md line 270: vLLM 0.11, Qwen3-32B BF16, one 32K sequence at a time (65.5 GB of
    # weights + 8.4 GB of KV a step), median ITL 43.30 ms
    ("gpustack-qwen3-32b-h100-vllm-bf16-tp1-random-32k-input-L270-tpot", 1, 43.30),
    # qwen3-14b/h100.md line 321: vLLM 0.11, Qwen3-14B BF16, 8 sequences, median ITL 43.48 ms
    ("gpustack-qwen3-14b-h100-vllm-bf16-tp1-random-32k-input-L321-tpot", 8, 43.48),
]


@pytest.mark.parametrize(("rid", "sequences", "itl_ms"), DECODE_ONLY)
def test_the_pages_decode_only_steps_run_at_a_pcie_boards_bandwidth(records, rid, sequences, itl_ms):
    r = records[rid]
    assert _median_itl_ms(r) == itl_ms
    pcie = _decode_step_ms(r, "H100 PCIe", sequences)
    sxm = _decode_step_ms(r, "H100 SXM", sequences)
    assert pcie == pytest.approx(itl_ms, rel=0.10)  # +2 % and -3 %
    assert sxm < 0.7 * itl_ms  # an SXM board would take 26-27 ms: 37-40 % short


def test_the_eight_card_page_decodes_at_an_sxm_boards_bandwidth(records):
    """qwen3-235b-a22b/h100.md (8 cards, TP 8, vLLM 0.11 BF16) keeps "H100 SXM": its decode-only step at 32K
    (median ITL 23.29 ms, 8 sequences) is within 20 % of an SXM board's and 75 % short of a PCIe board's."""
    r = records["gpustack-qwen3-235b-a22b-h100-vllm-bf16-tp8-random-32k-input-L336-tpot"]
    itl = _median_itl_ms(r)
    assert itl == 23.29
    assert _decode_step_ms(r, "H100 SXM", 8) == pytest.approx(itl, rel=0.20)
    assert _decode_step_ms(r, "H100 PCIe", 8) > 1.5 * itl

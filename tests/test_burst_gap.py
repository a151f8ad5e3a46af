"""scripts/burst_gap.py: served runs of many streams, each beside the streamed responses per second its
measured TPOT implies and how its tokens arrived (docs/VALIDATION.md "Bursts of 1,000 streams")."""

from __future__ import annotations

from pathlib import Path

import pytest

from cardfit.validation.validate import load_records

from .helpers import load_script

ROOT = Path(__file__).resolve().parent.parent

# GPUStack's gpt-oss-20b/h100.md, line 154: trtllm-serve 1.2.0rc1, 1,000 ShareGPT prompts at once
RUN = "gpustack-gpt-oss-20b-h100-trtllm-mxfp4-tp1-sharegpt-L154"


def _script():
    return load_script("burst_gap")


@pytest.fixture(scope="module")
def run_records() -> list[dict]:
    return [r for r in load_records("serving") if r["id"].startswith(RUN + "-")]


def test_excerpt_figures_read_the_bench_summary(run_records):
    gap = _script()
    tpot = next(r for r in run_records if r["metric"] == "tpot_ms")
    # the excerpt's own lines: "Median ITL (ms): 0.07", "P99 ITL (ms): 963.17", "Peak output token
    # throughput (tok/s): 18641.00", "Output token throughput (tok/s): 3615.45"
    assert gap.excerpt_figures(tpot["excerpt"]) == {"median_itl_ms": 0.07, "p99_itl_ms": 963.17,
                                                    "peak_output": 18641.0, "mean_output": 3615.45}
    assert gap.excerpt_figures("no summary here") == {}


def test_one_row_per_run_from_its_mean_tpot_record(run_records):
    gap = _script()
    assert {r["metric"] for r in run_records} == {"ttft_ms", "tpot_ms", "output_tokens_per_s"}
    rows = gap.runs(run_records)
    assert [x["record"]["id"] for x in rows] == [f"{RUN}-tpot"]
    assert gap.release(rows[0]["record"]) == "1.2.0rc1"


def test_streamed_per_second_is_the_streams_over_the_measured_tpot(run_records):
    gap = _script()
    (row,) = gap.rows(run_records, min_streams=300)
    # 1,000 prompts at once on a pool of 2,048 slots: nearly all of them decode together
    assert 900 < row["streams"] <= 1000
    assert row["measured_tpot_ms"] == 224.49
    assert row["streamed_per_s"] == pytest.approx(row["streams"] / 0.22449)
    assert row["tpot_ms"] < row["measured_tpot_ms"]  # cardfit's step: the run's misfit (issue 24)
    assert gap.rows(run_records, min_streams=2000) == []

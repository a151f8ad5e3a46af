"""scripts/first_wave.py: InferenceX's mean TTFT taken apart into the median request and one first wave of
CONC requests (docs/VALIDATION.md, "InferenceX's mean TTFT: the first wave, taken apart")."""

from __future__ import annotations

import pytest

from cardfit.validation.validate import load_records

from .helpers import load_script

# InferenceX run 22469096331 (2026-02-27), DeepSeek-R1 FP8 on 8x MI300X, SGLang 0.5.9, 1,024 x 8,192 at 4
# users, 40 requests: the InferenceX-app fixture row's mean_ttft 0.5918, median_ttft 0.1606, p99_ttft 4.0384 s
MI300X_C4 = "ix-dsr1-mi300x-sglang-fp8-tp8-1024x8192-c4-run22469096331-ttft-median"


def _script():
    return load_script("first_wave")


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return _script().rows(load_records("serving"))


def test_implied_first_wave_is_the_mean_excess_times_the_rounds():
    wave = _script().implied_first_wave
    # 40 requests at 4 users: (0.5918 - 0.1606) x 10 + 0.1606 = 4.473 s, beside the run's p99 of 4.038 s
    assert wave(0.5918096375185996, 0.1605987697839737, 40, 4) == pytest.approx(4.4727, abs=1e-3)
    assert wave(0.3, 0.3, 80, 8) == pytest.approx(0.3)  # no excess: the wave waits the median


def test_excerpt_figures_need_all_three_statistics():
    figs = _script().excerpt_figures
    assert figs('{"mean_ttft": 0.5, "median_ttft": 0.2, "p99_ttft": 3.1}') == {
        "mean_ttft": 0.5, "median_ttft": 0.2, "p99_ttft": 3.1}
    assert figs('{"mean_ttft": 0.5, "mean_tpot": 0.02}') is None  # a mean record's excerpt: no median
    assert figs("Mean TTFT (ms): 12.0") is None


def test_every_median_record_with_a_p99_has_its_wave_near_the_p99(rows):
    """The finding the doc rests on: the mean's excess over the median is one wave of CONC requests that
    waits about the p99 (0.63-1.43 of it on the 24 runs; the 128-user run's wave is prefilled in chunks, so
    its mean lies under its slowest)."""
    assert len(rows) >= 24
    ratios = {x["record"]["id"]: x["wave"] / x["p99_ttft"] for x in rows}
    assert all(0.6 < q < 1.5 for q in ratios.values()), ratios
    assert ratios[MI300X_C4] == pytest.approx(4.4727 / 4.0384, abs=0.01)


def test_the_mi300x_runs_first_wave_waits_seconds_where_its_median_waits_tenths(rows):
    """The measured side of the finding (docs/VALIDATION.md "InferenceX's mean TTFT: the first wave"): the
    MI300X 4-user run's first wave waits about 4.5 s where its median request waits 0.16 s, a one-off cost
    of the run's start. cardfit's own first wave for it (scripts/first_wave.py prints it) is in the doc, not
    pinned here: a sourced model of that cost would move it, rightly."""
    x = next(x for x in rows if x["record"]["id"] == MI300X_C4)
    assert x["pred"] is not None  # cardfit answers the run's question
    assert x["wave"] > 4.0 > 1.0 > 0.2 > x["median_ttft"]

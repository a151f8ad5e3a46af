"""scripts/spec_gap.py: a drafted serving run's measured cycle (mean ITL, one chunk a cycle) and tokens a
cycle (ITL / TPOT) beside cardfit's cycle in parts (docs/VALIDATION.md, "SGLang's EAGLE cycle, read in its
source")."""

from __future__ import annotations

from pathlib import Path

import pytest

from cardfit.validation.validate import load_records

from .helpers import load_script

ROOT = Path(__file__).resolve().parent.parent
# GPUStack qwen3-8b/h100-latency.md line 733: SGLang 0.5.3.post3, Qwen3-8B FP8, one H100, EAGLE-3 (4 draft
# steps, top-4, 16 verified), 1 in flight: "Mean TPOT (ms): 2.67", "Mean ITL (ms): 8.74"
L733 = "gpustack-qwen3-8b-h100-sglang-fp8-eagle3-bs-1-L733-tpot"


def _script():
    return load_script("spec_gap")


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return load_records("serving")


def test_the_measured_cycle_is_the_excerpts_itl_and_its_tokens_itl_over_tpot(records):
    gap = _script()
    r = next(r for r in records if r["id"] == L733)
    itl, per_cycle = gap.measured_cycle(r)
    assert itl == 8.74
    assert per_cycle == pytest.approx(8.74 / 2.67)
    assert gap.measured_cycle({"excerpt": "Mean TPOT (ms): 2.67"}) is None  # no ITL quoted: no reading


def test_every_drafted_run_with_both_lines_is_read_once(records):
    gap = _script()
    runs = gap.drafted_runs(records)
    assert {r["id"] for r in runs} >= {L733}
    assert all(r["metric"] == "tpot_ms" and r["settings"]["speculative"] for r in runs)
    assert len({r["id"] for r in runs}) == len(runs) >= 13  # GPUStack's 13 drafted runs


def test_cardfits_cycle_is_its_verification_and_its_drafts(records):
    gap = _script()
    c = gap.cardfit_cycle(next(r for r in records if r["id"] == L733))
    assert c["sequences"] == 1
    # one card: no link time, so the step the served model times is the verification plus the K forwards
    assert c["total"] == pytest.approx(c["verify"] + c["draft"], rel=1e-9)
    # at one sequence the 16-token verification is bound by its reads, not its FLOPs
    assert c["reads"] > c["flops"]
    assert c["verify"] == pytest.approx(max(c["reads"], c["flops"]) + c["fixed"], rel=1e-6)


def test_the_gap_at_one_user_is_the_cycles_time_not_the_acceptance(records):
    """The finding the page's own ITL gives: the run yields at least the tokens a cycle cardfit credits its
    drafter with (EAGLE-3 default, data/speculative.toml), and its cycle is longer than cardfit's: 1.57x
    before the spec-v1 host time (runtimes.toml speculative_cycle_host_us, sgl-project/sglang PR #11398) was
    counted, still 1.31x (about 2 ms) with it: what the overlap does not hide stays unsized."""
    gap = _script()
    r = next(r for r in records if r["id"] == L733)
    itl, per_cycle = gap.measured_cycle(r)
    c = gap.cardfit_cycle(r)
    assert per_cycle >= c["tokens"]
    assert itl > c["total"] * 1.25
    assert itl - c["total"] > 1.5  # ms

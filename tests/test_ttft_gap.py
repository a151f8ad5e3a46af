"""scripts/ttft_gap.py: the user path's TTFT records split by publisher, engine, layout and statistic, each
beside the same runs' TPOT error (docs/VALIDATION.md "Where the user path's TTFT shortfall is")."""

from __future__ import annotations

from pathlib import Path

import pytest

from cardfit.validation.validate import Outcome, Report, load_records

from .helpers import load_script

ROOT = Path(__file__).resolve().parent.parent

# one InferenceX run (its mean TTFT and TPOT in serving_inferencex.toml, its median TTFT quoted from another
# snapshot of the same results in serving_inferencex_median.toml), an aiconfigurator DP/EP row and a P/D row
IX = "ix-dsr1-h200-sglang-fp8-tp8-1024x8192-c4-run23552373331"
DPEP = "aic-dpep-row-2026_03_25_deepseek_r1_b200_sxm_trtllm_fp4_agg_1024x1024_c64_tp8_0_ep8_0_976"
PD = "aic-pd-row-dsr1_gb200_sglang_fp4_disagg_1024x1024_c4_cfg486"
IDS = (f"{IX}-ttft", f"{IX}-tpot", f"{IX}-ttft-median", f"{DPEP}-ttft", f"{DPEP}-tpot", f"{PD}-ttft")


def _script():
    return load_script("ttft_gap")


def _outcome(r: dict, error: float) -> Outcome:
    return Outcome(r["id"], r["kind"], r["runtime"], r["model"], r["quant"], r["measured"], r["unit"],
                   predicted=r["measured"] * (1 + error))


@pytest.fixture(scope="module")
def records() -> list[dict]:
    by_id = {r["id"]: r for r in load_records("serving")}
    return [by_id[i] for i in IDS]


def test_records_of_one_run_share_a_key_across_files(records):
    gap = _script()
    keys = {r["id"]: gap.run_key(r) for r in records}
    assert keys[f"{IX}-ttft"] == keys[f"{IX}-tpot"] == keys[f"{IX}-ttft-median"]
    assert keys[f"{DPEP}-ttft"] == keys[f"{DPEP}-tpot"] != keys[f"{IX}-ttft"]


def test_split_groups_by_layout_and_statistic_with_the_runs_tpot(records):
    gap = _script()
    loo = {f"{IX}-ttft": -0.5, f"{IX}-tpot": 0.25, f"{IX}-ttft-median": -0.1, f"{DPEP}-ttft": -0.4,
           f"{DPEP}-tpot": 0.3, f"{PD}-ttft": -0.7}
    full = dict(loo, **{f"{DPEP}-ttft": -0.2})  # in sample: the typed-in constant kept
    pub = {i: "github:semianalysisai" if i.startswith("ix-") else "nvidia" for i in IDS}
    paths = dict.fromkeys(IDS, "user")
    paths[f"{PD}-ttft"] = "older"  # another path: left out
    rep = Report([_outcome(r, full[r["id"]]) for r in records],
                 loso=[_outcome(r, loo[r["id"]]) for r in records], publishers=pub, paths=paths)
    rows = {g["group"]: g for g in gap.split(rep, records)}
    assert sorted(rows) == ["github:semianalysisai sglang agg mean",
                            "github:semianalysisai sglang agg median", "nvidia trtllm DP/EP mean"]
    mean = rows["github:semianalysisai sglang agg mean"]
    assert (mean["n"], mean["throughput"]) == (1, None)
    assert mean["ttft"] == pytest.approx(-0.5) and mean["tpot"] == pytest.approx(0.25)
    assert rows["github:semianalysisai sglang agg median"]["tpot"] == pytest.approx(0.25)  # the same run's
    dpep = rows["nvidia trtllm DP/EP mean"]
    assert dpep["ttft"] == pytest.approx(-0.4) and dpep["ttft_in_sample"] == pytest.approx(-0.2)
    assert dpep["tpot"] == pytest.approx(0.3)
    rows_older = {g["group"] for g in gap.split(rep, records, "older")}
    assert rows_older == {"nvidia sglang P/D mean"}

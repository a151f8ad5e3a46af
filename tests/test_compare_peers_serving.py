"""scripts/compare_peers.py --serving: aiconfigurator's best row names one attention-DP rank's batch, so the
users it serves are batch x dp (docs/VALIDATION.md "Serving peers", the 2026-12-07 rerun)."""

from __future__ import annotations

from pathlib import Path

from .helpers import load_script

ROOT = Path(__file__).resolve().parent.parent


def _script():
    return load_script("compare_peers")


# aiconfigurator 0.12.0's best agg row for Qwen3-30B-A3B bf16 on 2x H100 SXM (vLLM 0.24 tables), run
# 2026-12-07: bs 320 at DP 2 (its `cli estimate` of that layout prints "Concurrency: 640")
QWEN_AIC = {"tokens_per_s": 13294.556, "batch": 320, "tpot_ms": 47.267, "ttft_ms": 261.007, "tp": "1",
            "dp": "2", "moe_tp": "2", "moe_ep": "1", "version": "0.24.0"}


def test_aic_users_is_batch_times_dp():
    cp = _script()
    assert cp.aic_users(QWEN_AIC)["concurrency"] == 640
    assert cp.aic_users(QWEN_AIC | {"dp": "1", "batch": 288})["concurrency"] == 288
    assert cp.aic_users({"tokens_per_s": None, "error": "x"}) == {"tokens_per_s": None, "error": "x"}


def test_table_prints_users_not_the_rank_batch(capsys):
    cp = _script()
    row = {"case": "Qwen3-30B-A3B bf16, 2x H100 SXM, vLLM",
           "cardfit": {"tokens_per_s": 14772.0, "batch": 512, "tpot_ms": 34.4},
           "aiconfigurator": cp.aic_users(QWEN_AIC), "genz": {"tokens_per_s": None}}
    cp.print_serving([row])
    out = capsys.readouterr().out
    assert "13,295 tok/s at 640 users" in out and "14,772 tok/s at 512 users" in out and "1.11x" in out

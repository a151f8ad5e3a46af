"""Issue 26, Nathan Scott's KV-offload runs on 2x L40S (data/validation/serving_natoscott_l40s_offload.toml):
why cardfit's "TPOT" was ~4x below the table's, taken apart (docs/VALIDATION.md, "natoscott's L40S TPOT,
taken apart").

1. The table's TPOT is GuideLLM's `time_per_output_token_ms`, counted from sending the request, the first
   token included: (last token - request start) / output tokens (vllm-project/guidellm
   src/guidellm/schemas/request_stats.py at v0.5.3, f9f1e318: "Average time per output token in milliseconds
   including first token"). At 10,128 prompt tokens a request spends a third of its time before its first
   token (Qwen3-8B: TTFT 10.7 s of 43.5 s), which that figure spreads over the 128 answer tokens. The
   records state metric `e2e_per_token_ms`, read off the same pinned answer as (TTFT + 127 x TPOT) / 128."""

from __future__ import annotations

import pytest

from cardfit.validation.serving import e2e_per_token_s, predict_serving
from cardfit.validation.validate import all_records

RECORDS = {r["id"]: r for r in all_records()}
NATOSCOTT = [r for r in RECORDS.values() if r["id"].startswith("natoscott-")]


def _as(r: dict, metric: str) -> dict:
    return {**r, "metric": metric, "unit": "ms"}


def test_guidellm_tpot_counts_the_first_token():
    """GuideLLM's figure is the e2e over the answer's tokens: the report's own rows hold together read so.
    Qwen3-14B no offload at rate=50: TTFT 21,943 ms, 'TPOT' 490 ms, so the gaps after the first token are
    (490 x 128 - 21,943) / 127 = 321 ms, where the same publisher's v0.5.1 report (vLLM 0.15.1) measured an
    ITL of 325.7 ms at a TTFT of 22.6 s (REPORT-v0.5.1.md); read as the gaps themselves they would be 490."""
    gaps = (490 * 128 - 21943) / 127  # 321 ms
    assert e2e_per_token_s(21.943, gaps / 1e3, 128) * 1e3 == pytest.approx(490, rel=1e-9)
    assert e2e_per_token_s(0.5, 0.01, 1) == pytest.approx(0.5)  # a one-token answer: its first token


def test_the_tpot_records_read_guidellms_metric():
    tpot = [r for r in NATOSCOTT if r["id"].endswith("-tpot")]
    assert len(tpot) == 12
    for r in tpot:
        assert r["metric"] == "e2e_per_token_ms" and r["statistic"] == "mean", r["id"]
        assert "request_stats.py" in r["note"], r["id"]


@pytest.mark.parametrize("rid", ["natoscott-l40s-tp2-qwen3-8b-no-offload-c50-tpot",
                                 "natoscott-l40s-tp2-qwen3-0.6b-lmcache-local-c50-tpot"])
def test_e2e_per_token_is_the_pinned_answers_e2e_over_its_tokens(rid):
    """The figure moves with the same answer's TTFT and TPOT and no other way; it is longer than the TPOT
    wherever the first token takes longer than a gap (every row here)."""
    r = RECORDS[rid]
    got, _ = predict_serving(r)
    ttft, _ = predict_serving(_as(r, "ttft_ms"))
    tpot, _ = predict_serving(_as(r, "tpot_ms"))
    o = int(r["output_tokens"])
    assert got == pytest.approx((ttft + (o - 1) * tpot) / o, rel=1e-9)
    assert got > tpot


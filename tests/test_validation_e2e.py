"""A serving record may state the mean end-to-end latency (metric e2e_latency_ms: SGLang bench_serving's
"Mean E2E Latency", the time from sending a request to its last token), read off the same pinned answer as
its TTFT and TPOT (validation/serving.py e2e_s). The records that use it: AMD's DeepSeek-V3 MTP table on
8x MI300X (serving_amd_mtp_mi300x.toml); beside them the KV-offload records of a publisher other than
llm-d and GPUStack (serving_natoscott_l40s_offload.toml)."""

from __future__ import annotations

import pytest

from cardfit.validation.serving import SERVING_METRICS, e2e_s, predict_serving
from cardfit.validation.validate import all_records, first_contact

RECORDS = {r["id"]: r for r in all_records()}


def _as(r: dict, metric: str) -> dict:
    return {**r, "metric": metric, "unit": "ms"}


def test_e2e_is_a_serving_metric():
    assert "e2e_latency_ms" in SERVING_METRICS
    assert e2e_s(0.5, 0.01, 101) == pytest.approx(1.5)
    assert e2e_s(0.5, 0.01, 1) == pytest.approx(0.5)  # a one-token answer ends with its first token


@pytest.mark.parametrize("rid", ["amd-mtp-dsv3-mi300x-sglang-random-c1-base-e2e",
                                 "amd-mtp-dsv3-mi300x-sglang-random-c8-mtp-e2e",
                                 "amd-mtp-dsv3-mi300x-sglang-random-c64-mtp-e2e"])
def test_e2e_is_ttft_plus_the_answer_at_tpot(rid):
    """The AMD rows (ROCm blogs, 'Efficient LLM Serving with MTP', Table 1: 'End-to-end latency indicates the
    total time taken for a user sending a request and getting a response back'): the e2e figure is the same
    answer's TTFT plus (O - 1) TPOTs, so it moves with them and no other way."""
    r = RECORDS[rid]
    e2e, _ = predict_serving(r)
    ttft, _ = predict_serving(_as(r, "ttft_ms"))
    tpot, _ = predict_serving(_as(r, "tpot_ms"))
    assert e2e == pytest.approx(ttft + (int(r["output_tokens"]) - 1) * tpot, rel=1e-9)


def test_mtp_shortens_the_e2e_as_the_table_says_and_less_as_the_batch_grows():
    """Table 1: MTP cut the mean E2E latency 2.11x at 1 in flight and 1.25x at 64; cardfit's gain falls with
    the batch too (speculation's benefit shrinks as decode becomes compute-bound)."""
    gains = []
    for c in (1, 64):
        base, _ = predict_serving(RECORDS[f"amd-mtp-dsv3-mi300x-sglang-random-c{c}-base-e2e"])
        mtp, _ = predict_serving(RECORDS[f"amd-mtp-dsv3-mi300x-sglang-random-c{c}-mtp-e2e"])
        gains.append(base / mtp)
    assert gains[0] > gains[1] > 1.0


def test_new_sources_were_scored_at_first_contact():
    fc = first_contact()
    ids = [i for i in RECORDS if i.startswith(("amd-mtp-dsv3-mi300x", "natoscott-l40s-tp2"))]
    assert len(ids) == 50
    assert all(i in fc and fc[i].get("predicted") is not None for i in ids)


def test_native_offload_tier_is_the_gpu_pool_size():
    """vLLM 0.11.2 raised num_cpu_blocks 10,000 to the GPU pool's size (REPORT-v0.4.0.md 'CPU Offload Memory
    Allocation': 26.83 GiB a rank for Qwen3-8B, the same as its GPU KV-cache memory); both TP ranks hold
    one."""
    r = RECORDS["natoscott-l40s-tp2-qwen3-8b-native-offload-c50-output"]
    assert r["settings"]["kv_offload_gb"] == pytest.approx(2 * 26.83 * 1.073741824, abs=1e-3)
    assert r["settings"]["prefix_groups"] == 100 and r["settings"]["shared_prefix_tokens"] == 10000


def test_amd_mem_fraction_reaches_the_question():
    """--mem-fraction-static 0.85 is stated as gpu_memory_utilization (InferenceX's and CloudRift's key for
    it), the setting the pinned deploy question takes (--gpu-memory-utilization); `mem_fraction` is not
    passed to the question (validation/serving.py record_input), so it must not be the key."""
    from cardfit.validation.serving import record_input

    recs = [r for i, r in RECORDS.items() if i.startswith("amd-mtp-dsv3-mi300x")]
    assert len(recs) == 14
    for r in recs:
        assert "mem_fraction" not in r["settings"], r["id"]
        assert record_input(r)[0].gpu_memory_utilization == 0.85, r["id"]
        assert {"input_tokens", "output_tokens", "length_distribution"} <= set(r["assumed"]), r["id"]


def test_natoscott_latency_tables_read_at_the_mean():
    """The rate=50 TTFT/TPOT tables of REPORT-v0.4.0.md are what the pinned analysis script tabulates,
    rate50_df.pivot(values='ttft_mean_ms' / 'tpot_mean_ms') (scripts/comprehensive-analysis.py @38330c1):
    the mean, though the prose calls them median; still assumed."""
    recs = [r for i, r in RECORDS.items()
            if i.startswith("natoscott-l40s-tp2") and r["metric"] != "output_tokens_per_s"]
    assert len(recs) == 24
    for r in recs:
        assert r["statistic"] == "mean" and "statistic" in r["assumed"], r["id"]

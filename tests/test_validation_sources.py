"""Every validation record can be checked by a reader: a public https link (GitHub file links pinned to a
commit) and the verbatim excerpt of the measured line; serving records state their load and statistic."""

from __future__ import annotations

import math
import re

import pytest

from cardfit.validation.validate import KINDS, all_records

RECORDS = all_records()
SERVING_METRICS = {"output_tokens_per_s", "ttft_ms", "tpot_ms", "itl_ms", "request_throughput",
                   "e2e_latency_ms", "e2e_per_token_ms"}
STATISTICS = {"mean", "median", "p90", "p99"}
SERVING_KEYS = {"id", "kind", "model", "quant", "runtime", "gpu", "gpus", "input_tokens", "output_tokens",
                "concurrency", "request_rate", "load", "requests", "fixed_lengths", "metric", "statistic",
                "measured", "unit", "settings", "excerpt", "source", "date", "note", "file", "assumed"}


@pytest.mark.parametrize("r", RECORDS, ids=[r["id"] for r in RECORDS])
def test_record_links_a_public_source_and_quotes_it(r):
    src = r["source"]
    assert re.fullmatch(r"https://[^\s/]+\.[a-z]{2,}/\S*", src), (
        f"{r['id']}: source must be one https URL: {src!r}"
    )
    assert "index" not in src.lower() or "index.php" in src, (
        f"{r['id']}: an internal index id is not a source"
    )
    if re.match(r"https://github\.com/[^/]+/[^/]+/blob/", src):
        assert re.match(r"https://github\.com/[^/]+/[^/]+/blob/[0-9a-f]{40}/", src), \
            f"{r['id']}: a GitHub file link must be pinned to a commit: {src}"
    assert str(r.get("excerpt", "")).strip(), f"{r['id']}: no excerpt"
    assert r["kind"] in KINDS, r["id"]


def test_ids_are_unique():
    ids = [r["id"] for r in RECORDS]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})


SERVING = [r for r in RECORDS if r["kind"] == "serving"]


def test_serving_records_exist():
    assert len(SERVING) >= 25


@pytest.mark.parametrize("r", SERVING, ids=[r["id"] for r in SERVING])
def test_serving_record_states_its_load(r):
    assert int(r["input_tokens"]) > 0 and int(r["output_tokens"]) > 0
    assert ("concurrency" in r) != ("request_rate" in r), (f"{r['id']}: concurrency or request_rate, one "
                                                           "of them")
    if "concurrency" in r:
        assert int(r["concurrency"]) >= 1
    else:
        rate = r["request_rate"]
        assert rate == "inf" or (isinstance(rate, (int, float)) and rate > 0), rate
    assert r["metric"] in SERVING_METRICS and r["statistic"] in STATISTICS
    assert math.isfinite(float(r["measured"])) and float(r["measured"]) > 0
    unit = {"ttft_ms": "ms", "tpot_ms": "ms", "itl_ms": "ms", "output_tokens_per_s": "tokens_per_s",
            "request_throughput": "requests_per_s", "e2e_latency_ms": "ms",
            "e2e_per_token_ms": "ms"}[r["metric"]]
    assert r["unit"] == unit, r["id"]
    assert set(r) <= SERVING_KEYS, f"{r['id']}: unknown keys {sorted(set(r) - SERVING_KEYS)}"
    # the load the benchmark ran: a closed loop (at most `concurrency` in flight, the next request sent
    # when one ends), a burst (all `requests` sent at once; equal lengths keep a prefill-first engine's
    # rounds in step) or open Poisson arrivals at `request_rate` per second (MLPerf's Server scenario)
    assert r["load"] in ("closed", "burst", "poisson"), r["id"]
    if r["load"] == "poisson":
        assert isinstance(r.get("request_rate"), (int, float)) and "concurrency" not in r, r["id"]
    else:
        assert int(r["requests"]) >= int(r.get("concurrency") or 1), r["id"]
    assert isinstance(r["fixed_lengths"], bool), r["id"]
    if r["load"] == "burst":
        assert "concurrency" not in r or int(r["concurrency"]) == int(r["requests"]), r["id"]
    s = r["settings"]
    assert int(s["tp"]) >= 1 and int(s.get("pp", 1)) >= 1 and s.get("version")
    if s.get("prefill_workers"):  # separate prefill and decode pools: every worker's cards
        pools = sum(int(s[f"{p}_workers"]) * int(s[f"{p}_tp"]) for p in ("prefill", "decode"))
        assert int(r["gpus"]) == pools, r["id"]
    else:
        assert int(r["gpus"]) == int(s["tp"]) * int(s.get("pp", 1)) * int(s.get("dp", 1)), r["id"]


def test_settings_keys_are_strict():
    """A record's settings are the options a user passes, its engine release, or an engine or harness
    setting validation/records.py lists; a typo is an error naming the file, the record and the key."""
    from cardfit.errors import CatalogError
    from cardfit.validation.records import SETTINGS, check_settings

    for r in RECORDS:
        check_settings(r, "x.toml")
    with pytest.raises(CatalogError, match="unknown settings key 'max_num_seq'"):
        check_settings({"id": "r", "settings": {"max_num_seq": 8}}, "x.toml")
    with pytest.raises(CatalogError, match="assumed 'lenght'"):
        check_settings({"id": "r", "settings": {}, "assumed": ["lenght"]}, "x.toml")
    assert {"tp", "version", "max_num_seqs", "kv_cache_dtype"} <= set(SETTINGS)


def test_mean_only_metric_rejects_other_statistics():
    """The end-to-end latency is read at its mean only (validation/serving.py figure: TTFT plus the mean
    answer's gaps); a record stating its median or p90 is rejected at load, one line naming the record."""
    from cardfit.errors import CatalogError
    from cardfit.validation.serving import check_statistic

    for r in RECORDS:
        check_statistic(r, "x.toml")
    check_statistic({"id": "r", "metric": "e2e_latency_ms", "statistic": "mean"}, "x.toml")
    check_statistic({"id": "r", "metric": "e2e_latency_ms"}, "x.toml")
    check_statistic({"id": "r", "metric": "ttft_ms", "statistic": "p90"}, "x.toml")
    for stat in ("median", "p90"):
        match = f"record 'r': metric 'e2e_latency_ms' .* not statistic '{stat}'"
        with pytest.raises(CatalogError, match=match):
            check_statistic({"id": "r", "metric": "e2e_latency_ms", "statistic": stat}, "x.toml")

"""Reuse settings of a serving record (validation/serving.py reuse_options): the prefix, turns, sessions and
host KV tier a record states become the deploy options a user passes, and they change the answer as deploy's
reuse model says (core/reuse.py)."""

from __future__ import annotations

import pytest

from cardfit.errors import CatalogError
from cardfit.validation.records import check_settings
from cardfit.validation.serving import predict_serving, record_input, reuse_options


@pytest.mark.parametrize(("settings", "options"), [
    ({}, {}),
    ({"tp": 1}, {}),
    ({"shared_prefix_tokens": 330}, {"shared_prefix_tokens": 330}),
    ({"turns": 4, "sessions": 32}, {"turns": 4, "sessions": 32.0}),
    ({"kv_offload_gb": 50, "kv_connector": "LMCacheConnectorV1"}, {"kv_offload_gb": 50.0}),
])
def test_reuse_settings_are_deploy_options(settings, options):
    assert reuse_options(settings) == options


def _record(**settings) -> dict:
    return {"id": "t", "kind": "serving", "model": "llama-3.1-8b", "quant": "fp8", "runtime": "vllm",
            "gpu": "L40S", "gpus": 1, "input_tokens": 880, "output_tokens": 147, "request_rate": 8,
            "metric": "ttft_ms", "statistic": "mean", "measured": 100.0,
            "settings": {"tp": 1, "version": "0.10.1.1", **settings}}


def test_record_input_carries_the_reuse():
    inp, _, _ = record_input(_record(shared_prefix_tokens=330, kv_offload_gb=50))
    assert (inp.shared_prefix_tokens, inp.kv_offload_gb) == (330, 50.0)


@pytest.mark.parametrize("prefix", [110, 330, 660])
def test_a_shared_prefix_shortens_the_first_token(prefix):
    without, _ = predict_serving(_record())
    with_, _ = predict_serving(_record(shared_prefix_tokens=prefix))
    assert with_ < without


def test_an_unknown_reuse_key_is_an_error():
    check_settings(_record(shared_prefix_tokens=1, turns=2, sessions=4, kv_offload_gb=8), "x.toml")
    with pytest.raises(CatalogError, match="prefix_tokens"):
        check_settings(_record(prefix_tokens=1), "x.toml")

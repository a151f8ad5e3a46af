"""Issue 26's interface: every deployment of `deploy --json` (best, pareto, closest, the disaggregation's) and
every entry of `plan --json`'s `gpus` carries `dp`, `ep`, `speculative`, `kv_offload_gb` and
`disaggregated`, with the types the interface names (SPEC §9)."""

from __future__ import annotations

from typing import Any

import pytest

from cardfit.services import deploy as dp
from cardfit.services import plan as pl
from cardfit.services.inputs import PlanInput

KEYS = ("dp", "ep", "speculative", "kv_offload_gb", "disaggregated")


def _typed(entry: dict[str, Any]) -> None:
    """The five keys, each of its type: dp and ep counts (≥ 1), speculative null or {method, tokens,
    acceptance}, kv_offload_gb a number of GB, disaggregated null or {prefill, decode: {gpu, count, tp,
    replicas}}."""
    assert set(KEYS) <= entry.keys(), sorted(set(KEYS) - entry.keys())
    assert isinstance(entry["dp"], int) and entry["dp"] >= 1
    assert isinstance(entry["ep"], int) and entry["ep"] >= 1
    spec = entry["speculative"]
    assert spec is None or {"method", "tokens", "acceptance"} <= spec.keys()
    assert isinstance(entry["kv_offload_gb"], (int, float)) and entry["kv_offload_gb"] >= 0
    pools = entry["disaggregated"]
    if pools is not None:
        for role in ("prefill", "decode"):
            assert {"gpu", "count", "tp", "replicas"} <= pools[role].keys()


# (plan options, why)
PLANS = [
    (dict(model="llama-3.1-8b"), "a dense model ranked over every card"),
    (dict(model="qwen3-30b-a3b", runtime="vllm", gpu="H100 SXM"), "a MoE model: plan still places TP only"),
    (dict(model="llama-3.1-8b", runtime="vllm", speculative="ngram", gpu="H100 SXM"),
     "speculative decoding on: its object in each row"),
    (dict(model="llama-3.1-70b", runtime="vllm", gpu="H100 SXM", gpus=4, tp=4), "a set of 4 cards"),
]


@pytest.mark.parametrize("options,why", PLANS)
def test_plan_gpus_carry_the_deployment_keys(options: dict[str, Any], why: str) -> None:
    out = pl.plan(PlanInput(**options)).to_json()
    assert out["gpus"]
    for g in out["gpus"]:
        _typed(g)
        assert (g["dp"], g["ep"], g["disaggregated"]) == (1, 1, None)  # plan places one TP replica
    if "speculative" in options:
        assert out["gpus"][0]["speculative"]["method"] == options["speculative"]


# (deploy options, why)
DEPLOYS = [
    (dict(model="llama-3.1-8b", users=32.0, gpu=("H100 SXM", "L40S")), "a search: best and its Pareto front"),
    (dict(model="deepseek-v3", users=64.0, input_tokens=8000, output_tokens=300, ttft_ms=5000.0,
          tpot_ms=50.0, gpu=("H200",), runtime="sglang", quant="fp8"), "P/D searched beside it"),
    (dict(model="llama-3.1-8b", users=100_000.0, gpu=("RTX 4090",), runtime="vllm", max_cards=1),
     "nothing meets the targets: the closest"),
    (dict(model="deepseek-v3", users=64.0, input_tokens=8000, output_tokens=1000, gpu=("H200",),
          runtime="sglang", quant="fp8", tp=8, prefill_workers=1, decode_workers=2, decode_dp=8),
     "a pinned disaggregated deployment"),
]


@pytest.mark.parametrize("options,why", DEPLOYS)
def test_every_deployment_carries_the_keys(options: dict[str, Any], why: str) -> None:
    d = dp.deploy_report(dp.DeployInput(**options)).to_json()
    shown = [x for x in (d["best"], d["closest"], *d["pareto"]) if x is not None]
    if d.get("disaggregation", {}).get("deployment"):
        shown.append(d["disaggregation"]["deployment"])
    assert shown
    for one in shown:
        _typed(one)

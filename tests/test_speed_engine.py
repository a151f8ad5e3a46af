"""`cardfit speed` takes the engine settings a served load is launched with, as `cardfit deploy --tp N` does
(one definition of the options: services/inputs.py ENGINE_OPTIONS), and queues the users beyond the engine's
sequence cap as deploy's steady state does (core/serving.py serve). tests/test_pinned.py holds speed to the
pinned deploy on the deployment of every serving record; here the options and the queue themselves."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cardfit
from cardfit.errors import InputError
from cardfit.services.deploy import DeployInput
from cardfit.services.inputs import ENGINE_OPTIONS, PlanInput
from cardfit.services.speed import SpeedInput

# Llama-3.1-8B FP8 on one H100 under vLLM, 1,000 / 200 tokens: a served load speed times as deploy does
SERVED = dict(gpu="H100 SXM", runtime="vllm", quant="fp8", input_tokens=1000, output_tokens=200)


def _limits(cls: type) -> dict[str, object]:
    return {f.name: f.metadata["limits"] for f in dataclasses.fields(cls) if f.name in ENGINE_OPTIONS}


def test_speed_and_deploy_take_the_same_engine_options():
    """Every engine setting has one help text and one set of limits, so one flag, one check and one error
    line, in speed, deploy and (for the two plan takes) plan."""
    speed, deploy, plan = _limits(SpeedInput), _limits(DeployInput), _limits(PlanInput)
    assert set(speed) == set(deploy) == set(ENGINE_OPTIONS)
    assert speed == deploy
    assert set(plan) == {"max_num_seqs", "gpu_memory_utilization"}
    assert all(plan[k] == deploy[k] for k in plan)


def _rows(cap: int, users: list[int], **kw) -> dict[int, dict]:
    levels = ",".join(str(n) for n in sorted({cap, *users}))
    out = cardfit.speed("llama-3.1-8b", concurrency=levels, max_num_seqs=cap, **kw)
    return {row["concurrency"]: row for row in out["rows"]}


@pytest.mark.parametrize("cap, users, served", [
    (64, [65, 128, 1000], True),  # deploy's path (a request on a paged engine)
    (8, [9, 16, 64], True),
    (64, [65, 128, 1000], False),  # decoding alone: speed's own path, the same queue
])
def test_users_beyond_the_sequence_cap_wait_their_turn(cap, users, served):
    """Beyond --max-num-seqs the engine runs its cap: the step, the aggregate and each answer's TPOT stay
    the cap's, and the users beyond it wait (their first token later the more there are)."""
    kw = SERVED if served else {k: v for k, v in SERVED.items() if not k.endswith("_tokens")}
    rows = _rows(cap, users, **kw)
    at_cap = rows[cap]
    for n in users:
        assert rows[n]["aggregate_tokens_per_s"] == pytest.approx(at_cap["aggregate_tokens_per_s"], rel=1e-3)
        assert rows[n]["step_ms"] == pytest.approx(at_cap["step_ms"], rel=1e-3)
    if served:
        ttft = [rows[n]["ttft_ms"] for n in [cap, *users]]
        assert ttft == sorted(ttft) and ttft[-1] > 2 * ttft[0]


@settings(max_examples=8, deadline=None)
@given(st.integers(1, 256), st.integers(1, 512))
def test_a_queued_load_serves_what_the_cap_serves(cap, extra):
    """Property: any load past the cap is served at the cap's throughput and step, never less (saturation
    queues, it does not collapse), with a first token no sooner than at the cap."""
    rows = _rows(cap, [cap + extra], **SERVED)
    assert rows[cap + extra]["aggregate_tokens_per_s"] == pytest.approx(rows[cap]["aggregate_tokens_per_s"],
                                                                        rel=1e-3)
    assert rows[cap + extra]["step_ms"] == pytest.approx(rows[cap]["step_ms"], rel=1e-3)
    assert rows[cap + extra]["ttft_ms"] >= rows[cap]["ttft_ms"]


@pytest.mark.parametrize("runtime, users, settings_", [
    ("vllm", 64, dict(max_num_seqs=32, max_num_batched_tokens=4096, gpu_memory_utilization=0.8)),
    ("vllm@0.6.3", 16, dict(max_model_len=32768)),  # V0: prompts first, its 256-sequence default
    ("sglang", 128, dict(max_prefill_tokens=4096, max_num_batched_tokens=8192)),
    ("trtllm@1.0.0", 256, dict(max_num_seqs=128)),
])
def test_speed_prints_the_pinned_deploy_of_its_settings(runtime, users, settings_):
    """Each engine setting reaches the timing: speed's row is the steady state deploy prints for the same
    deployment pinned (--tp 1), release and settings included."""
    q = dict(SERVED, runtime=runtime)
    row = cardfit.speed("llama-3.1-8b", concurrency=str(users), **q, **settings_)["rows"][0]
    d = cardfit.deploy("llama-3.1-8b", users=users, tp=1, kv_dtype=None,
                       **{k: (v,) if k == "gpu" else v for k, v in q.items()}, **settings_)
    one = d["best"] or d["closest"]
    assert row["aggregate_tokens_per_s"] == pytest.approx(one["aggregate_tokens_per_s"], rel=0.02)
    assert row["step_ms"] == pytest.approx(one["tpot_ms"], rel=0.02)
    assert row["ttft_ms"] == pytest.approx(one["ttft_mean_ms"], rel=0.02)


@pytest.mark.parametrize("kw, message", [
    (dict(attention_dp=2), "--attention-dp sets the engine of a served load: give --input-tokens"),
    (dict(SERVED, expert_parallel=2, bandwidth=3000.0), "without --bandwidth"),
    (dict(SERVED, max_num_batched_tokens=4096, prefill_chunk=2048),
     "--max-num-batched-tokens and --prefill-chunk are one setting"),
])
def test_engine_settings_speed_cannot_time_are_refused(kw, message):
    with pytest.raises(InputError, match=message):
        cardfit.speed("llama-3.1-8b", **{"gpu": "H100 SXM", **kw})


def test_one_budget_two_names():
    """--max-num-batched-tokens is --prefill-chunk's step budget under deploy's name: the same rows."""
    a = cardfit.speed("llama-3.1-8b", concurrency="64", max_num_batched_tokens=4096, **SERVED)["rows"]
    b = cardfit.speed("llama-3.1-8b", concurrency="64", prefill_chunk=4096, **SERVED)["rows"]
    assert a == b

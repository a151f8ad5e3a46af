"""SGLang's --scheduler-recv-interval N (core/serving.py recv_wait_steps): a decoding engine reads new
requests every N decode steps (python/sglang/srt/managers/scheduler_recv_skipper.py), so a request that
reaches it while others decode waits (N - 1) / 2 decode steps more on average; an idle engine reads at once.
A pinned deploy takes it (SGLang only) and prints it in the launch line; validation maps a record's setting
to it."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cardfit
from cardfit.core import serving as sv
from cardfit.core import speed as sp
from cardfit.validation.serving import record_input
from cardfit.validation.validate import all_records


def _replica(recv: int = 1, seqs: int = 256) -> sv.Replica:
    """An 8B dense model on one H100-like card (the shape tests/test_deploy.py times)."""
    shares = sp.Shares(1.0, 0.0, 0.0, 1.0, "params")
    load = sp.Load(16_000_000_000, shares, 131_072 * 1150, 1.6e10, 32, 4096)
    machine = sp.Machine(3350.0, 989.0, 1, decode_efficiency=0.873, overhead_s_per_layer=55.4e-6,
                         overhead_s_per_sequence=456e-6, compute_efficiency=0.81)
    return sv.Replica(load, machine, 1.7e10, 8192, seqs, prompt_tokens=1000, recv_interval=recv)


W = sv.Workload(1000, 1000)


@pytest.mark.parametrize("interval,steps", [
    (1, 0.0),    # the default: read every step, the step running as it arrives is the only wait
    (2, 0.5),    # read every other step: half the arrivals wait one step more
    (10, 4.5),   # InferenceX's B200/B300 scripts below 16 users
    (30, 14.5),  # ... and from 16 users
])
def test_a_request_waits_half_the_interval_less_one_step(interval, steps):
    assert sv.recv_wait_steps(_replica(interval)) == steps


@pytest.mark.parametrize("users,interval", [
    (4, 10),   # light load: the prompt queue is short, the wait is the recv wait
    (16, 30),
    (64, 30),  # the decode step is longer, so is each step's wait
])
def test_closed_loop_ttft_grows_by_the_recv_wait_of_the_other_users_steps(users, interval):
    """TTFT(N) - TTFT(1) = (m - 1) / m x (N - 1) / 2 x the decode-only step at the load, within the few per
    cent that the longer cycle moves the decoding batch (and so the step and the prompt queue) by."""
    one = sv.serve(_replica(1), replace(W, users=float(users)))
    many = sv.serve(_replica(interval), replace(W, users=float(users)))
    others = (users - 1) / users
    want = others * (interval - 1) / 2 * sv.step_s(_replica(interval), many.batch, 0.0)
    assert many.ttft_mean_s - one.ttft_mean_s == pytest.approx(want, rel=0.05)
    assert many.ttft_s > one.ttft_s  # the p90 pays it too
    assert many.tpot_s == pytest.approx(one.tpot_s, rel=0.02)  # the decode steps themselves are unchanged


def test_a_lone_user_finds_the_engine_idle_and_is_read_at_once():
    """An idle scheduler adds weight 1 each loop and reads within N quick loops (no GPU step between)."""
    one = sv.serve(_replica(1), replace(W, users=1.0))
    many = sv.serve(_replica(30), replace(W, users=1.0))
    assert many.ttft_mean_s == one.ttft_mean_s
    assert many.output_tokens_per_s == one.output_tokens_per_s


def test_open_arrivals_wait_for_the_next_read_too():
    """Poisson arrivals find the engine decoding min(B, 1) of the time (B: sequences in flight)."""
    for rate in (0.05, 0.5, 1.0):
        w = replace(W, requests_per_s=rate)
        one, many = sv.serve(_replica(1), w), sv.serve(_replica(10), w)
        assert many.stable
        want = 4.5 * min(many.batch, 1.0) * sv.step_s(_replica(10), max(many.batch, 1.0), 0.0)
        assert many.ttft_mean_s - one.ttft_mean_s == pytest.approx(want, rel=0.02)


@settings(max_examples=40, deadline=None)
@given(users=st.integers(1, 128), low=st.integers(1, 40), more=st.integers(0, 40))
def test_ttft_never_falls_as_the_interval_grows(users, low, more):
    a = sv.serve(_replica(low), replace(W, users=float(users)))
    b = sv.serve(_replica(low + more), replace(W, users=float(users)))
    assert b.ttft_mean_s >= a.ttft_mean_s * (1 - 1e-9)
    assert b.ttft_s >= a.ttft_s * (1 - 1e-9)


def test_pinned_deploy_times_and_launches_the_interval():
    kw = dict(model="llama-3.1-8b", gpu=("H100 SXM",), runtime="sglang", tp=1, users=32, input_tokens=1000,
              output_tokens=200)
    base = (d := cardfit.deploy(**kw))["best"] or d["closest"]
    slow = (d := cardfit.deploy(**kw, scheduler_recv_interval=30))["best"] or d["closest"]
    assert slow["ttft_mean_ms"] > base["ttft_mean_ms"]
    assert "--scheduler-recv-interval 30" in slow["command"]
    assert "--scheduler-recv-interval" not in base["command"]


@pytest.mark.parametrize("args,message", [
    (["--gpu", "H100 SXM", "--runtime", "sglang"],
     "--scheduler-recv-interval applies to one pinned deployment"),
    (["--gpu", "H100 SXM", "--runtime", "vllm", "--tp", "1"], "--scheduler-recv-interval is an SGLang flag"),
    (["--gpu", "H100 SXM", "--runtime", "sglang", "--tp", "1", "--scheduler-recv-interval", "0"],
     "--scheduler-recv-interval must be greater than or equal to 1"),
])
def test_the_option_needs_a_pinned_sglang_deployment(run_cli, args, message):
    extra = [] if "--scheduler-recv-interval" in args else ["--scheduler-recv-interval", "10"]
    code, out, err = run_cli("deploy", "llama-3.1-8b", "--users", "8", *args, *extra)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0], err
    assert "Traceback" not in err and out == ""


def test_inferencex_records_pass_their_scripts_interval_to_the_pinned_deploy():
    """The B200/B300 scripts set --scheduler-recv-interval 10 below 16 users and 30 from 16 (TP 4 of the FP8
    recipe: 10); the H200 script sets none (the engine's 1)."""
    seen = {}
    for r in all_records():
        if not r["id"].startswith("ix-dsr1-") or r.get("runtime") != "sglang":
            continue
        inp, _, _ = record_input(r)
        seen.setdefault(r["gpu"], set()).add((int(r["concurrency"]) >= 16, inp.scheduler_recv_interval))
    assert seen["B200"] >= {(False, 10), (True, 30)} and seen["B300"] >= {(False, 10), (True, 30)}
    assert seen["H200 SXM"] == {(False, None), (True, None)}

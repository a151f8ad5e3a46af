"""core/serving.py closed_loop: `users` clients each sending the next request when the previous answer
ends (`vllm bench serve --max-concurrency`). docs/VALIDATION.md "A closed loop on a decode-first engine"
(issue 24, h-closedloop) scores a change to it that was tried and not adopted; these tests hold what any
closed loop must keep, the model as it stands and a future one alike."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cardfit.core import serving as sv
from cardfit.core import speed as sp


def _replica(prefill_first: bool = False) -> sv.Replica:
    """An 8B dense model on one H100-like card with a budget of 8,192 tokens a step (the shape
    tests/test_serving_recv.py times), decode-first (vLLM V1) or prefill-first (SGLang's default)."""
    shares = sp.Shares(1.0, 0.0, 0.0, 1.0, "params")
    load = sp.Load(16_000_000_000, shares, 131_072 * 1150, 1.6e10, 32, 4096)
    machine = sp.Machine(3350.0, 989.0, 1, decode_efficiency=0.873, overhead_s_per_layer=55.4e-6,
                         overhead_s_per_sequence=456e-6, compute_efficiency=0.81)
    return sv.Replica(load, machine, 1.7e10, 8192, 1024, prompt_tokens=8192, prefill_first=prefill_first)


# llm-benchmaq's long-prompt shape (data/validation/serving_benchmaq_h100.toml): 4,096-token prompts,
# 128-token answers, fixed lengths
W = sv.Workload(4096, 128)


@pytest.mark.parametrize("prefill_first", [False, True])
@pytest.mark.parametrize("users", [1, 10, 50, 200])
def test_throughput_is_the_users_over_one_users_cycle(prefill_first, users):
    """Little's law on the closed system (closed_loop's docstring): X = m / (TTFT + (O - 1) x TPOT), the
    output m x O over the cycle, and the sequences decoding X x (O - 1) x TPOT (none of the slots idle: 1,024
    of them)."""
    s = sv.serve(_replica(prefill_first), replace(W, users=float(users)))
    cycle = s.ttft_mean_s + (W.output_tokens - 1) * s.tpot_s
    assert s.output_tokens_per_s == pytest.approx(users * W.output_tokens / cycle, rel=2e-3)
    x = s.output_tokens_per_s / W.output_tokens
    assert s.batch == pytest.approx(x * (W.output_tokens - 1) * s.tpot_s, rel=2e-3)
    assert s.stable and s.batch <= users


@settings(max_examples=40, deadline=None)
@given(users=st.integers(1, 300), more=st.integers(1, 100), prefill_first=st.booleans())
def test_more_users_never_shorten_the_wait_or_the_step(users, more, prefill_first):
    """A user more can only add to the work the others share: neither the mean TTFT nor the mean TPOT falls,
    and the throughput does not fall by more than Schweitzer's approximation errs near saturation (a closed
    loop saturates, it does not collapse): 294 -> 299 users here, u = 0.99, a dip of 0.1 % (832.4 -> 831.6
    tok/s)."""
    r = _replica(prefill_first)
    a = sv.serve(r, replace(W, users=float(users)))
    b = sv.serve(r, replace(W, users=float(users + more)))
    assert b.ttft_mean_s >= a.ttft_mean_s * (1 - 1e-6)
    assert b.tpot_s >= a.tpot_s * (1 - 1e-6)
    assert b.output_tokens_per_s >= a.output_tokens_per_s * (1 - 5e-3)

"""A burst of requests whose answers vary in length (issue 24): `rounds` gives each request its own prompt and
answer length around the means (core/serving.py spread / varied), so a ShareGPT burst lasts until its longest
answer ends, and `deploy --requests N --random-lengths` prints that run."""

from __future__ import annotations

import statistics
from dataclasses import replace

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import cardfit
from cardfit.core import serving as sv

from .test_kv_pool import _replica  # a 7.6B model on one H100-class card


# hand-worked: the exponential's quantiles at (j + 0.5) / 4 are -ln(0.875, 0.625, 0.375, 0.125) = 0.1335,
# 0.4700, 0.9808, 2.0794 (sum 3.6638); scaled by 400 / 3.6638 = 109.18 they are 14.58, 51.31, 107.09, 227.03,
# floored 399, the largest remainder (.58) rounded up: 15; request k takes the rank of frac((k + 1) / 1.3247)
# = .755, .510, .265, .020, so the first request gets the longest. With a cap of 150 the two longest sit at
# the cap and the rest are rescaled: s = 100 / 0.6035 = 165.7 -> 77.9, 22.1 -> 78, 22.
@pytest.mark.parametrize(("mean", "caps", "want"), [
    (100, [1000] * 4, [227, 107, 51, 15]),
    (100, [150] * 4, [150, 150, 78, 22]),
    (100, [100] * 4, [100] * 4),  # the cap at the mean leaves one length
    (7, [1000], [7]),  # one request: the mean itself
])
def test_spread_hand_worked(mean: int, caps: list[int], want: list[int]) -> None:
    assert sv.spread(mean, len(caps), caps, 4, 1 / sv.PLASTIC) == want


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 1500), st.integers(1, 1000), st.integers(1, 400))
def test_drawn_lengths_have_the_exact_mean_and_respect_the_sampler(i: int, o: int, n: int) -> None:
    ins, outs = sv.varied(i, o, n)
    assert len(ins) == len(outs) == n
    assert sum(ins) == n * i and sum(outs) == n * o  # the stated means, exactly
    assert min(ins) >= min(4, i) and min(outs) >= min(4, o)  # the sampler's shortest pair (4 tokens)
    if i <= sv.SAMPLED_MAX_PROMPT and i + o <= sv.SAMPLED_MAX_TOTAL:
        assert max(ins) <= sv.SAMPLED_MAX_PROMPT
        assert max(x + y for x, y in zip(ins, outs, strict=True)) <= sv.SAMPLED_MAX_TOTAL


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 3000), st.integers(1, 300), st.data())
def test_spread_holds_any_feasible_cap(mean: int, n: int, data: st.DataObject) -> None:
    low = min(4, mean)
    caps = data.draw(st.lists(st.integers(max(low, 1), 4 * mean + 10), min_size=n, max_size=n))
    if sum(caps) < n * mean:
        caps = [max(c, mean) for c in caps]
    got = sv.spread(mean, n, caps, low, 1 / sv.PLASTIC ** 2)
    assert sum(got) == n * mean
    assert all(low <= x <= c for x, c in zip(got, caps, strict=True))


def test_the_order_is_mixed_not_sorted() -> None:
    """FCFS admission must not meet the lengths sorted: every block of 50 requests in the order sent holds
    20 to 30 of the shorter half (a sorted order holds 0 or 50), and prompt and answer lengths are drawn in
    orders independent of each other (correlation within ±0.1)."""
    ins, outs = sv.varied(219, 201, 1000)
    for seq in (ins, outs):
        median = sorted(seq)[500]
        assert all(20 <= sum(x < median for x in seq[at:at + 50]) <= 30 for at in range(0, 1000, 50))
    assert abs(statistics.correlation(ins, outs)) < 0.1


@settings(max_examples=40, deadline=None)
@given(st.integers(8, 1000), st.integers(5, 1000), st.integers(1, 48), st.sampled_from([8, 64, 256]),
       st.booleans())
def test_a_random_length_burst_never_ends_sooner(i: int, o: int, n: int, seqs: int, first: bool) -> None:
    """The same means, all sent at once and all holding a slot: the run whose answers vary ends no sooner
    than the one whose answers are all O tokens (its longest answer is longer; its total work the same).
    With more requests than slots it may end sooner, rightly: a short answer frees a slot early and the
    queued request starts before the equal answers would all have ended (n 9, 8 slots, 690 + 728 tokens)."""
    assume(n <= seqs)
    r = _replica(seqs=seqs)
    w = sv.Workload(i, o)
    _, _, fixed = sv.rounds(r, w, n, n, first)
    _, _, varied = sv.rounds(r, w, n, n, first, fixed_lengths=False)
    assert varied >= fixed * (1 - 1e-9)


def test_one_slot_runs_each_request_alone() -> None:
    """Hand-worked: one slot (max_seqs 1), four requests sent at once: each prompt is prefilled alone in one
    step (every prompt fits the 2,048-token budget) and its O_k − 1 decode steps run at batch 1, so the run
    lasts the sum over requests of prompt_step_s(r, 0, I_k) + (O_k − 1) × prompt_step_s(r, 1, 0)."""
    r = _replica(seqs=1)
    w = sv.Workload(219, 201)
    ins, outs = sv.varied(219, 201, 4)
    ttft, tpot, seconds = sv.rounds(r, w, 4, 4, False, fixed_lengths=False)
    want = sum(sv.prompt_step_s(r, 0, float(x)) + (y - 1) * sv.prompt_step_s(r, 1, 0.0)
               for x, y in zip(ins, outs, strict=True))
    assert seconds == pytest.approx(want, rel=1e-9)
    assert tpot == pytest.approx([sv.prompt_step_s(r, 1, 0.0)] * 4, rel=1e-9)
    assert ttft[0] == pytest.approx(sv.prompt_step_s(r, 0, float(ins[0])), rel=1e-9)


def test_lengths_that_cannot_vary_step_as_the_fixed_path() -> None:
    """Means at the sampler's shortest pair (4 and 4 tokens) leave every request at the means: the varied
    path then steps exactly as the fixed one, with a paged pool that preempts."""
    r = replace(_replica(seqs=64), kv_tokens=600, kv_block=16, engine_seqs=64, prefix_cache=True)
    w = sv.Workload(4, 4)
    assert sv.varied(4, 4, 64) == ((4,) * 64, (4,) * 64)
    assert sv.rounds(r, w, 64, 64, False, fixed_lengths=False) == sv.rounds(r, w, 64, 64, False)


def test_random_lengths_reach_deploy() -> None:
    """`deploy --requests 200 --random-lengths`: the benchmark ends with its longest answer, so its output
    tokens per second fall well below the equal-length run's (the measured ShareGPT bursts run at 20-40 % of
    their peak: GPUStack gpt-oss-20b on an H100, 3,615 tok/s against a peak of 18,641)."""
    kw = dict(model="Qwen/Qwen3-8B", gpu=("H100 SXM",), runtime="vllm", tp=1, users=200, requests=200,
              input_tokens=219, output_tokens=201)
    runs = []
    for random_lengths in (False, True):
        d = cardfit.deploy(**kw, random_lengths=random_lengths)
        runs.append((d["best"] or d["closest"])["benchmark"])
    fixed, varied = runs
    assert varied["seconds"] > 1.5 * fixed["seconds"]
    assert varied["output_tokens_per_s"] < fixed["output_tokens_per_s"] / 1.5
    assert varied["requests"] == fixed["requests"] == 200


# ------------------------------------------------ the law a benchmark draws (--length-distribution)

def test_uniform_hand_worked() -> None:
    """uniform ±50 % around 100, four requests: the quantiles (j + 0.5) / 4 of U[0.5, 1.5] are 0.625, 0.875,
    1.125, 1.375 (sum 4: the scale is the mean, 100), so 62.5, 87.5, 112.5, 137.5; request k takes the rank of
    frac((k + 1) / 1.3247) = .755, .510, .265, .020 (the first the longest); floored they sum 398 and the two
    equal remainders go to the first two requests: 138, 113, 87, 62."""
    got = sv.spread(100, 4, [1000] * 4, 4, 1 / sv.PLASTIC, sv.uniform_quantiles(4, 0.5))
    assert got == [138, 113, 87, 62]


LAWS = st.builds(sv.Lengths, st.sampled_from(sv.LENGTH_SHAPES), st.floats(0.0, 1.0), st.integers(0, 3000),
                 st.integers(0, 40_000))


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 20_000), st.integers(1, 2000), st.integers(1, 300), LAWS)
def test_every_law_keeps_its_caps_and_the_exact_means(i: int, o: int, n: int, law: sv.Lengths) -> None:
    """Whatever the law: the means exact, every answer within the answer cap, every prompt + answer within
    the context (the engine refuses longer: never drawn), the sampler's shortest pair kept; sonnet prompts all
    at the mean; a uniform law without a binding cap within ± ratio of each mean (one token of rounding)."""
    assume(not law.max_output or law.max_output >= o)
    assume(not law.context or i + max(o, law.max_output) <= law.context)
    ins, outs = sv.varied(i, o, n, law)
    assert sum(ins) == n * i and sum(outs) == n * o
    assert min(ins) >= min(4, i) and min(outs) >= min(4, o)
    if law.max_output:
        assert max(outs) <= law.max_output
    if law.context:
        assert max(x + y for x, y in zip(ins, outs, strict=True)) <= law.context
    if law.shape == "sonnet":
        assert set(ins) == {i}
    if law.shape == "uniform" and not law.context and not law.max_output and i >= 4 / (1 - law.ratio + 1e-9):
        assert all(i * (1 - law.ratio) - 1 <= x <= i * (1 + law.ratio) + 1 for x in ins)


@pytest.mark.parametrize(("law", "longest_prompt", "answers"), [
    # dstack's 10,000-token sonnet runs on TGI (--max-total-tokens 130000): every prompt 10,000 tokens, the
    # answers under --sonnet-output-len 150; the ShareGPT law drew prompts up to 28,962 tokens
    (sv.Lengths("sonnet", 0.0, 150, 130_000), 10_000, (1, 150)),
    (sv.Lengths(), 28_962, (1, 336)),
    # the same means within a 16,384-token context: no prompt + answer beyond it
    (sv.Lengths("exponential", 0.0, 0, 16_384), 16_380, (1, 16_384)),
])
def test_long_prompts_as_the_benchmark_draws_them(law: sv.Lengths, longest_prompt: int,
                                                   answers: tuple[int, int]) -> None:
    ins, outs = sv.varied(10_000, 116, 8, law)
    assert max(ins) == longest_prompt
    assert answers[0] <= min(outs) and max(outs) <= answers[1]


def test_mlperf_offline_answers_run_to_the_cap() -> None:
    """MLPerf Llama-3.1-8B Offline on Red Hat's L40S (max_model_len 2,668, max_tokens 128, a mean answer of
    128): every answer 128 tokens, every prompt at most 2,668 − 128 = 2,540 (the ShareGPT law capped them
    at 1,024, a sampler MLPerf does not use), the mean prompt exact."""
    ins, outs = sv.varied(880, 128, 13_368, sv.Lengths("exponential", 0.0, 128, 2668))
    assert set(outs) == {128}
    assert max(ins) == 2540 and sum(ins) == 880 * 13_368


@settings(max_examples=30, deadline=None)
@given(st.integers(8, 1000), st.integers(5, 1000), st.integers(1, 48), st.booleans())
def test_a_law_that_cannot_vary_steps_as_the_fixed_path(i: int, o: int, n: int, first: bool) -> None:
    """uniform:0 (`--random-range-ratio 0`) leaves every request at the means: the run is the fixed one."""
    r = _replica(seqs=64)
    w = sv.Workload(i, o)
    assert sv.varied(i, o, n, sv.Lengths("uniform", 0.0)) == ((i,) * n, (o,) * n)
    assert sv.rounds(r, w, n, n, first, sv.Lengths("uniform", 0.0)) == sv.rounds(r, w, n, n, first)


def test_the_law_reaches_deploy() -> None:
    """`deploy --length-distribution uniform:0.1` on 200 requests at once: lengths within ±10 % end closer
    together than the ShareGPT law's, so the run ends sooner (more output tokens a second), and the note
    says which law was drawn."""
    kw = dict(model="Qwen/Qwen3-8B", gpu=("H100 SXM",), runtime="vllm", tp=1, users=200, requests=200,
              input_tokens=219, output_tokens=201)
    sharegpt = cardfit.deploy(**kw, random_lengths=True)
    uniform = cardfit.deploy(**kw, length_distribution="uniform:0.1")
    tokens = [(d["best"] or d["closest"])["benchmark"]["output_tokens_per_s"] for d in (sharegpt, uniform)]
    assert tokens[1] > 1.3 * tokens[0]
    assert "lengths drawn uniform ±10%" in str(uniform)

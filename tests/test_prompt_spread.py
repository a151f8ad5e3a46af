"""Issue 24 items 1 and 3 (h-p90prompt): deploy's TTFT p90 over the prompt lengths. With a spread of prompt
lengths (--input-tokens-p90: the log-normal through the mean and the p90 that `longest` sizes the context
with; a pinned stage's drawn prompts) the p90 request's prompt is longer than the mean, so its own prefill is
longer: the requests are cut into core/serving.py PROMPT_CLASSES classes of equal share (prompt_classes, the
one owner), each with its own prefill (class_prefills, crossed with the prefix-hit classes), and the p90 TTFT
is the mixture's (ttft_p90_s), on every path that gives one: the steady state (closed loop and open
arrivals), a pinned stage of arrivals (open_stage) and the P/D pools (core/disagg.py). The queue, the steps
and every mean stay the mean prompt's, and a question without a spread is answered as before."""

from __future__ import annotations

import math
from dataclasses import replace
from statistics import NormalDist

import pytest

from cardfit.core import disagg as pd
from cardfit.core import serving as sv
from cardfit.services.deploy import DeployInput, deploy_report, pinned_answer
from cardfit.validation.serving import predict_serving
from cardfit.validation.validate import all_records

Z = NormalDist()
PIN = dict(model="meta-llama/Llama-3.1-8B-Instruct", gpu=("H100 SXM",), runtime="vllm", tp=1,
           input_tokens=1000, output_tokens=300, ttft_ms=2000, tpot_ms=50)
SPREADS = (None, 1000, 1100, 1300, 1600, 2000, 2270, 3000, 5000)


def test_lognormal_classes_hand_computed():
    """Mean 1,000 and p90 2,000 tokens: ln 2 = 1.2816 σ − σ² / 2, σ = 1.2816 − √(1.2816² − 2 ln 2) = 0.77551.
    The 14th class (13/15 to 14/15 of the requests) is the log-normal's conditional mean there,
    1,000 × 15 × (Φ(z(14/15) − σ) − Φ(z(13/15) − σ)) = 2,019.97 tokens: between the quantiles 13/15
    (1,751.9) and 14/15 (2,371.2), just above the p90 (2,000; the law is convex there). Shares of 1/15 that
    add up to one, and the classes keep the mean."""
    c = sv.prompt_classes(1000, 2000)
    assert len(c) == sv.PROMPT_CLASSES == 15
    assert sum(s for s, _ in c) == pytest.approx(1.0, abs=1e-12)
    assert all(s == pytest.approx(1 / 15) for s, _ in c)
    assert sum(s * (1000 + x) for s, x in c) == pytest.approx(1000.0, abs=1e-9)
    tokens = [1000 + x for _, x in c]
    assert tokens == sorted(tokens)
    sigma = sv.Z90 - math.sqrt(sv.Z90 ** 2 - 2 * math.log(2))
    assert sigma == pytest.approx(0.77551, abs=1e-5)
    hand = 1000 * 15 * (Z.cdf(Z.inv_cdf(14 / 15) - sigma) - Z.cdf(Z.inv_cdf(13 / 15) - sigma))
    assert tokens[13] == pytest.approx(hand, rel=1e-12)
    assert tokens[13] == pytest.approx(2019.97, abs=0.01)
    q = [1000 * math.exp(-sigma * sigma / 2 + Z.inv_cdf(u) * sigma) for u in (13 / 15, 0.9, 14 / 15)]
    assert q == pytest.approx([1751.91, 2000.0, 2371.20], abs=0.01)
    assert q[0] < q[1] <= tokens[13] < q[2]
    # the top and bottom classes, each its share's conditional mean
    assert tokens[0] == pytest.approx(1000 * 15 * Z.cdf(Z.inv_cdf(1 / 15) - sigma), rel=1e-12)
    assert tokens[14] == pytest.approx(1000 * 15 * (1 - Z.cdf(Z.inv_cdf(14 / 15) - sigma)), rel=1e-12)


def test_no_spread_no_classes():
    """No p90, a p90 at or below the mean, or drawn prompts all alike: no classes (every prompt the mean)."""
    assert sv.prompt_classes(1000) == sv.prompt_classes(1000, 1000) == sv.prompt_classes(1000, 800) == ()
    assert sv.prompt_classes(256, drawn=(256,) * 300) == ()


def test_a_p90_beyond_the_lognormal_reach_keeps_the_stated_p90():
    """A log-normal of mean 1,000 has a p90 of at most e^(z²/2) × 1,000 = 2,273 (σ = z, where lognormal_cv2
    stops): for a stated p90 of 4,000 the classes that hold the top tenth (14th, 15th) are stretched by
    4,000 / 2,273, so the 14th class keeps the stated p90; the classes below are that law's."""
    law_p90 = 1000 * math.exp(sv.Z90 ** 2 / 2)
    assert law_p90 == pytest.approx(2273.0, abs=0.5)
    z = sv.Z90

    def below(u: float) -> float:
        return 0.0 if u <= 0 else 1.0 if u >= 1 else Z.cdf(Z.inv_cdf(u) - z)

    at_z = [1000 * 15 * (below((k + 1) / 15) - below(k / 15)) for k in range(15)]
    far = [1000 + x for _, x in sv.prompt_classes(1000, 4000)]
    assert far[:13] == pytest.approx(at_z[:13], rel=1e-9)
    assert far[13:] == pytest.approx([t * 4000 / law_p90 for t in at_z[13:]], rel=1e-9)
    assert far[13] >= 4000


def test_drawn_classes_are_the_means_of_their_shares():
    """A run's own prompts, 1 to 30 tokens (mean 15.5): 15 classes of 2 requests each, at 1.5, 3.5, … 29.5;
    300 prompts of 256 ± 50 % (uniform): the 14th class holds the 261st-280th."""
    c = sv.prompt_classes(15, drawn=tuple(range(30, 0, -1)))
    assert [s for s, _ in c] == pytest.approx([1 / 15] * 15)
    assert [15 + x for _, x in c] == pytest.approx([1.5 + 2 * k for k in range(15)])
    drawn = sv.varied(256, 100, 300, sv.Lengths("uniform", 0.5))[0]
    c = sv.prompt_classes(256, drawn=drawn)
    assert 256 + c[13][1] == pytest.approx(sum(sorted(drawn)[260:280]) / 20)


def test_zero_spread_is_todays_figure():
    """A workload with no prompt classes times as before: class_prefills of the prefix classes alone, the
    p90 of one class its prefill plus the p90 wait."""
    r = pinned_answer(DeployInput(**PIN, users=8.0)).result.cand.replica
    w = sv.Workload(1000, 300, users=8.0)
    assert sv.class_prefills(r, w, 8.0) == ()
    assert sv.serve(r, w) == sv.serve(r, replace(w, prompts=sv.prompt_classes(1000, 1000)))


def test_one_user_exact_case():
    """One user (a closed loop of 1: no queue, an idle engine): the p90 TTFT is the 14th class's prompt's
    prefill (2,020 tokens: the top two classes hold 2/15 > a tenth, the top one 1/15 < a tenth), the rest
    of the TTFT as before: p90(spread) − p90(none) = prefill(2,020) − prefill(1,000) exactly, at 0 decodes
    beside; the mean TTFT and the TPOT unchanged."""
    r = pinned_answer(DeployInput(**PIN, users=1.0)).result.cand.replica
    w = sv.Workload(1000, 300, users=1.0)
    spread = replace(w, prompts=sv.prompt_classes(1000, 2000))
    a, b = sv.serve(r, w), sv.serve(r, spread)
    own = sv.prefill_s(r, sv.Workload(2020, 300), 0.0) - sv.prefill_s(r, sv.Workload(1000, 300), 0.0)
    assert own > 0
    assert b.ttft_s - a.ttft_s == pytest.approx(own, rel=1e-9)
    assert (b.ttft_mean_s, b.tpot_s) == (a.ttft_mean_s, a.tpot_s)
    assert b.output_tokens_per_s == a.output_tokens_per_s


def _figures(**kw) -> tuple[float, float, float]:
    """(TTFT p90, TTFT mean, TPOT) of a pinned deploy: its stage's where it runs one."""
    p = pinned_answer(DeployInput(**PIN, **kw))
    if p.pools is not None:
        d = p.pools.served
        return d.ttft_s, d.ttft_mean_s, d.tpot_s
    if p.bench is not None:
        return p.bench.ttft_p90_s, p.bench.ttft_mean_s, p.bench.tpot_mean_s
    s = p.result.served
    return s.ttft_s, s.ttft_mean_s, s.tpot_s


@pytest.mark.parametrize("load", [dict(users=32.0), dict(users=1.0), dict(requests_per_s=5.0),
                                  dict(requests_per_s=20.0), dict(requests_per_s=5.0, requests=300),
                                  dict(users=8.0, prefill_workers=1, decode_workers=1),
                                  dict(requests_per_s=5.0, prefill_workers=2, decode_workers=1)],
                         ids=["closed-32", "closed-1", "open-5", "open-20", "stage-5", "pd-closed-8",
                              "pd-open-5"])
def test_p90_ttft_non_decreasing_in_the_spread(load):
    """At a fixed mean prompt the p90 TTFT never falls as the p90 prompt grows, on every path that prints
    one (steady state closed and open, a stage of arrivals, the P/D pools, closed and open); no spread (none
    or p90 = mean) is exactly the figure without one; the mean TTFT and the TPOT never move."""
    figures = [_figures(input_tokens_p90=p90, **load) for p90 in SPREADS]
    p90s = [f[0] for f in figures]
    assert all(math.isfinite(x) for x in p90s), p90s
    assert p90s == sorted(p90s), p90s
    assert figures[1] == figures[0]
    assert p90s[-1] > p90s[0]
    assert {f[1:] for f in figures} == {figures[0][1:]}


def test_pools_mixture_is_the_aggregated_one():
    """core/disagg.py takes the p90 of the prefill pool's wait and each class's prefill and transfer with
    core/serving.py ttft_p90_s; with the classes all at the mean prompt it is the one-class figure."""
    p = pinned_answer(DeployInput(**PIN, users=8.0, prefill_workers=1, decode_workers=1)).pools
    assert p is not None
    w = sv.Workload(1000, 300, requests_per_s=5.0)
    flat = replace(w, prompts=((0.5, 0.0), (0.5, 0.0)))
    assert pd.serve(p.pools, flat).ttft_s == pytest.approx(pd.serve(p.pools, w).ttft_s, rel=1e-9)
    assert pd.prompt_classes(p.pools, w) == ()
    spread = pd.serve(p.pools, replace(w, prompts=sv.prompt_classes(1000, 2000)))
    assert spread.ttft_s > pd.serve(p.pools, w).ttft_s
    assert spread.ttft_mean_s == pd.serve(p.pools, w).ttft_mean_s


def test_deploy_json_with_a_spread():
    """`cardfit deploy meta-llama/Llama-3.1-8B-Instruct --users 32 --input-tokens 1000 --input-tokens-p90 2000
    --gpu 'H100 SXM' --runtime vllm --json`: the same deployment as without the p90 (one H100, FP8, the same
    TPOT, slots and throughput), launched for the 99th percentile prompt (--max-model-len 4797, its memory
    sized for it), its TTFT p90 the mixture's, 55.2 -> 68.6 ms, and its likely range with it; the note
    says how it is formed."""
    base = dict(model="meta-llama/Llama-3.1-8B-Instruct", users=32.0, input_tokens=1000, gpu=("H100 SXM",),
                runtime="vllm")
    plain = deploy_report(DeployInput(**base)).to_json()
    spread = deploy_report(DeployInput(**base, input_tokens_p90=2000)).to_json()
    a, b = plain["best"], spread["best"]
    moved = {k for k in a if a[k] != b[k]}
    assert moved == {"ttft_ms", "likely", "memory", "command"}, moved
    assert (a["ttft_ms"], b["ttft_ms"]) == (55.2, 68.6)
    assert b["command"] == a["command"].replace("--max-model-len 1300", "--max-model-len 4797")
    assert a["likely"]["tpot_ms"] == b["likely"]["tpot_ms"]
    assert b["likely"]["ttft_ms"][1] > a["likely"]["ttft_ms"][1]
    assert spread["workload"]["input_tokens_p90"] == 2000 and spread["workload"]["max_model_len"] == 4797
    assert any("the TTFT p90 takes each prompt's own prefill over 15 classes" in n for n in spread["notes"])
    assert not any("classes" in n for n in plain["notes"])


STAGE = dict(model="qwen3-32b", runtime="vllm", gpu=("H100 SXM",), input_tokens=1000, output_tokens=200, tp=2,
             requests=60, requests_per_s=1.0)


@pytest.mark.parametrize("opt", [dict(random_lengths=True), dict(length_distribution="uniform:0.5"),
                                 dict(length_distribution="exponential"),
                                 dict(random_lengths=True, max_output_tokens=1024)])
def test_a_stage_reads_its_length_law_for_its_p90(opt):
    """A stage of arrivals (--requests with --requests-per-s) stated with a length law (reviewer finding 7
    refused it, then silently ignored) now takes the prompts it draws for its p90 TTFT (services/deploy.py
    prompt_spread) and says so; its means stay the mean lengths'."""
    plain = pinned_answer(DeployInput(**STAGE))
    law = pinned_answer(DeployInput(**STAGE, **opt))
    assert plain.bench is not None and law.bench is not None
    assert law.bench.ttft_mean_s == plain.bench.ttft_mean_s
    assert law.bench.tpot_mean_s == plain.bench.tpot_mean_s
    assert law.bench.ttft_p90_s > plain.bench.ttft_p90_s
    assert "its p90 TTFT over the prompts drawn (lengths drawn" in law.how


def test_a_sonnet_stage_draws_no_prompt_spread():
    """sonnet: every prompt at the mean (the answers vary): the stage's p90 as without a law."""
    plain = pinned_answer(DeployInput(**STAGE))
    sonnet = pinned_answer(DeployInput(**STAGE, length_distribution="sonnet"))
    assert sonnet.bench == plain.bench


def _record(rid: str) -> dict:
    return next(r for r in all_records() if r["id"] == rid)


P90_RECORDS = [r for r in all_records() if r.get("file") == "serving_accelmark_p90.toml"]


@pytest.mark.parametrize("r", P90_RECORDS, ids=[r["id"] for r in P90_RECORDS])
def test_accelmark_stage_p90_not_below_its_mean(r):
    """AccelMark's online stages (exponential prompts around 256 or ~28.6K tokens): cardfit's stage p90 fell
    below its own mean on the A100's 5/s stage (45.0 against 46.1 ms: fewer than a tenth wait, so the p90
    wait is 0 while the mean wait is not, and the p90 took the mean prompt's prefill); over the drawn
    prompts the p90 is at least the stage's mean TTFT (the median twin's figure) on every stage."""
    twin = _record(r["id"].replace("-ttft-p90", "-ttft-median"))
    assert predict_serving(r)[0] >= predict_serving(twin)[0]

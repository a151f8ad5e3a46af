"""The deploy search's shortcuts (services/deploy.py) against doing every step: each bound that lets it skip a
candidate holds for every candidate of a small catalog, and the search with the skips answers exactly what it
answers without them (issue 25 items 19 and 21)."""

from __future__ import annotations

import functools
from dataclasses import replace

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cardfit.services import deploy as d

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
# a few cards: every runtime family's candidates (paged and slotted), a brute force of seconds
CARDS = ["L4", "RTX 4090", "A40", "L40S", "H100 SXM", "RTX 3090"]
RUNTIMES = ["vllm", "llama.cpp", "sglang", "ollama"]


def _cards_input(runtime: str | None, gpus: tuple[str, ...], cards: int, tpot_ms: float,
                 ttft_ms: float) -> d.DeployInput:
    return d.DeployInput(model=MODEL, runtime=runtime, gpu=gpus, cards=cards, tpot_ms=tpot_ms,
                         ttft_ms=ttft_ms)


def _filling(inp: d.DeployInput) -> list[d.Candidate]:
    """The candidates deploy_report hands most_users: the sets that split --cards evenly."""
    return [c for c in d.candidates(inp, d.settings(inp)[0]) if (inp.cards or 1) % c.cards == 0]


def _most_users_brute(inp: d.DeployInput, cands: list[d.Candidate],
                      t: d.Targets) -> tuple[int, list[d.Candidate]]:
    """most_users without its bound: every set asked, the most users (0: none) and the sets reaching it, in
    order."""
    ns = [d._most_users_on(replace(inp, users=1.0), c, (inp.cards or c.cards) // c.cards, t) for c in cands]
    reach = max(ns)
    return reach, [c for c, n in zip(cands, ns, strict=True) if n == reach]


@settings(max_examples=10, deadline=None)
@given(st.sampled_from(RUNTIMES), st.lists(st.sampled_from(CARDS), min_size=1, max_size=2, unique=True),
       st.sampled_from([1, 2, 4, 8]), st.sampled_from([20.0, 50.0, 100.0]), st.sampled_from([300.0, 2000.0]),
       st.data())
def test_most_users_bound_is_never_below_what_a_set_serves(runtime, gpus, cards, tpot_ms, ttft_ms, data):
    inp = _cards_input(runtime, tuple(gpus), cards, tpot_ms, ttft_ms)
    cands = _filling(inp)
    if not cands:
        return
    c = data.draw(st.sampled_from(cands))
    n = d._most_users_on(replace(inp, users=1.0), c, cards // c.cards, d.targets(inp))
    assert n <= d._most_users_bound(inp, c)


@settings(max_examples=10, deadline=None)
@given(st.sampled_from(RUNTIMES), st.lists(st.sampled_from(CARDS), min_size=1, max_size=2, unique=True),
       st.sampled_from([1, 2, 4, 8]), st.sampled_from([20.0, 50.0, 100.0]), st.sampled_from([300.0, 2000.0]),
       st.data())
def test_most_users_on_a_floor_answers_the_same_or_below_it(runtime, gpus, cards, tpot_ms, ttft_ms, data):
    """_most_users_on(floor): the answer asked without a floor where it is at least the floor, else a number
    below the floor (most_users then skips the set: a set found before serves more)."""
    inp = _cards_input(runtime, tuple(gpus), cards, tpot_ms, ttft_ms)
    cands = _filling(inp)
    if not cands:
        return
    c, t, one = data.draw(st.sampled_from(cands)), d.targets(inp), replace(inp, users=1.0)
    n = d._most_users_on(one, c, cards // c.cards, t)
    for floor in sorted({1, 2, 3, max(n - 1, 1), n, n + 1, 2 * n + 1, data.draw(st.integers(1, 4096))}):
        got = d._most_users_on(one, c, cards // c.cards, t, floor)
        assert got == n if n >= floor else got < floor, (n, floor, got)


@pytest.mark.parametrize(("runtime", "gpus", "cards", "tpot_ms", "ttft_ms"), [
    (None, ("RTX 4090", "L40S"), 8, 100.0, 2000.0),  # every runtime: llama.cpp/Ollama slots beside vLLM's
    (None, ("L4", "H100 SXM"), 4, 50.0, 1500.0),
    ("llama.cpp", ("RTX 3090", "A40"), 2, 100.0, 2000.0),  # slots only: the bound prunes among them
    ("vllm", ("L4",), 1, 20.0, 300.0),  # tight targets
])
def test_most_users_answers_what_asking_every_set_answers(runtime, gpus, cards, tpot_ms, ttft_ms) -> None:
    inp = _cards_input(runtime, gpus, cards, tpot_ms, ttft_ms)
    cands, t = _filling(inp), d.targets(inp)
    reach, reaching = _most_users_brute(inp, cands, t)
    got, got_cands, served = d.most_users(inp, cands, t)
    assert served == (reach >= 1) and got.users == max(reach, 1)
    if served:
        assert [(c.gpu.id, c.setting.ctx.runtime.id, c.cards, c.seqs, c.tp, c.pp) for c in got_cands] == \
            [(c.gpu.id, c.setting.ctx.runtime.id, c.cards, c.seqs, c.tp, c.pp) for c in reaching]


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 2000), st.integers(1, 2000), st.integers(1, 300))
def test_largest_true_stops_once_the_answer_is_settled(edge, hi, coarse):
    """With `enough(lo, hi)` (the caller's answer, here n // coarse, is the same at both ends of the bracket),
    the bisection's early answer is the caller's answer at the edge it would have found."""
    from cardfit.core.search import largest_true

    def answer(n: int) -> int:
        return n // coarse

    plain = largest_true(lambda n: n <= edge, 1, hi)
    got = largest_true(lambda n: n <= edge, 1, hi, lambda lo, top: answer(lo) == answer(top))
    assert answer(got) == answer(plain) and got <= plain


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(RUNTIMES), st.sampled_from(CARDS), st.sampled_from([10.0, 30.0, 50.0, 100.0]),
       st.sampled_from([300.0, 2000.0]), st.floats(0.5, 5000.0), st.booleans(), st.data())
def test_fewest_replicas_bound_stops_early_with_the_same_answer(runtime, card, tpot_ms, ttft_ms, n, arrivals,
                                                                data):
    """_fewest_of's early stop (once the answer is settled wherever B_t lies: users or arrivals) answers what
    the whole bisection answers, on every candidate of a small catalog."""
    from unittest import mock

    from cardfit.core import search

    load = {"requests_per_s": n / 50} if arrivals else {"users": n}
    inp = d.DeployInput(model=MODEL, runtime=runtime, gpu=(card,), tpot_ms=tpot_ms, ttft_ms=ttft_ms, **load)
    cands = d.candidates(inp, d.settings(inp)[0])
    if not cands:
        return
    c, t = data.draw(st.sampled_from(cands)), d.targets(inp)
    args = (c.replica, d.prompt_tokens(inp), inp.output_tokens, t.tpot_s, t.ttft_s, inp.users,
            inp.requests_per_s, d._best_cached(inp, c))
    early = d._fewest_of.__wrapped__(*args)
    def whole_bisection(ok, lo, hi, enough=None):
        return search.largest_true(ok, lo, hi)

    with mock.patch.object(d, "largest_true", whole_bisection):
        whole = d._fewest_of.__wrapped__(*args)
    assert early == whole


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["H100 SXM", "RTX 4090", "L4", "B200"]), st.sampled_from([1, 2, 3, 4, 8, 16]),
       st.integers(1, 40), st.integers(0, 80),
       st.lists(st.tuples(st.integers(1, 300), st.floats(0.0, 0.6)), max_size=4))
def test_least_price_is_the_least_rent_of_every_count(gpu, cards, fewest, more, tiers):
    """_least_price against every count from `fewest` to `most`, on the shipped discounts and on any tiers
    (a steep one makes more cards cost less than fewer)."""
    from cardfit.catalog.gpus import default_gpus
    from cardfit.catalog.rental import default_rental
    from cardfit.core.fit import set_price

    g = default_gpus().get(gpu)
    for rules in (default_rental(), replace(default_rental(), discounts=tuple(sorted(tiers)))):
        most = fewest + more
        brute = min(set_price(g, cards * n, rules) for n in range(fewest, most + 1))
        assert d._least_price(g, cards, rules, fewest, most) == brute


# (model, options, why): deploys whose aggregated answer spans 2+ cards on an engine with P/D
PD_CASES = [
    (MODEL, {"users": 32.0, "ttft_ms": 1500.0, "tpot_ms": 50.0, "runtime": "vllm"},
     "a disaggregated deployment meets the targets: the sets after the first are held to its rent"),
    ("meta-llama/Llama-3.3-70B-Instruct", {"requests_per_s": 5.0, "tpot_ms": 50.0, "runtime": "vllm",
                                            "gpu": ("H100 SXM", "A100 80GB")}, "open arrivals"),
    # SGLang 0.5.9: from 0.5.20 a 24 GB card reserves 7.3 GB outside --mem-fraction-static (the 4096 chunk,
    # 48 decode graphs and the prompt graphs: releases.toml tier_35gib_4k_48, prefill_cuda_graph), and no set
    # of RTX A5000 holds the 70B model at all
    ("meta-llama/Llama-3.3-70B-Instruct", {"users": 16.0, "runtime": "sglang@0.5.9", "gpu": ("RTX A5000",)},
     "none meets: every set timed to the end"),
]


@pytest.mark.parametrize(("model", "options", "why"), PD_CASES, ids=[c[2][:30] for c in PD_CASES])
def test_disaggregation_answers_what_timing_every_set_answers(model, options, why) -> None:
    """The P/D search with its rent bound (_pd_cheapest's and _pd_cheapest_apart's `below`, and the bar that
    caps the prefill workers tried) against timing every set to the end."""
    from unittest import mock

    inp = d.DeployInput(model=model, **options)
    t = d.targets(inp)
    cands = d.candidates(inp, d.settings(inp)[0])
    found = d.search(inp, cands, t)
    agg = found[0] if found else d.closest(inp, cands, t)
    assert agg is not None and agg.cand.cards >= 2 and d.pd_engine(agg.cand.setting.ctx), why
    bounded = d.disaggregation(inp, cands, t, agg)
    whole, apart = d._pd_cheapest, d._pd_cheapest_apart

    def unbounded(inp, c, t, below=float("inf"), memo=None, predicted=False):
        return whole(inp, c, t, memo=memo, predicted=predicted)

    def unbounded_apart(inp, pre, c, t, below=float("inf"), memo=None, predicted=False):
        return apart(inp, pre, c, t, memo=memo, predicted=predicted)

    with mock.patch.object(d, "_pd_cheapest", unbounded), mock.patch.object(d, "_pd_cheapest_apart",
                                                                            unbounded_apart):
        assert d.disaggregation(inp, cands, t, agg) == bounded


def test_pd_cheapest_apart_answers_what_timing_every_split_answers() -> None:
    """_pd_cheapest_apart (for each count of decode workers, a bisection on the prefill workers for the fewest
    whose TTFT holds, stopped at a probe whose TTFT and TPOT both miss, then capped by the rent found) against
    timing every split: for each count of decode workers, the fewest prefill workers whose pools meet the
    targets, and of those the one of least rent, then _pd_rank. aiconfigurator's 16-card question
    (tests/test_disagg.py _AIC_16: Qwen3-32B FP8 on H200, 384 users), TP 2 prefill workers beside TP 4 decode
    workers, as deploy's answer runs them."""
    inp = d.DeployInput(model="qwen3-32b", users=384.0, input_tokens=4000, output_tokens=500, ttft_ms=4000.0,
                        tpot_ms=17.4, gpu=("H200",), runtime="sglang", quant="fp8")
    t = d.targets(inp)
    cands = d.candidates(inp, d.settings(inp)[0])
    agg = d.search(inp, cands, t)[0]
    same = [c for c in cands if c.setting is agg.cand.setting and c.gpu == agg.cand.gpu and c.nodes == 1
            and d._workers(c) is not None]
    pre, c = (next(x for x in same if x.tp == tp and x.pp == 1) for tp in (2, 4))
    assert pre in d._prefill_shapes(same, c)
    got = d._pd_cheapest_apart(inp, pre, c, t)
    memo: d.PdTimed = {}
    best = None
    for y in range(1, d.PD_MAX_WORKERS + 1):
        for x in range(1, min(d.PD_MAX_WORKERS, (d.PD_MAX_WORKERS * c.cards - y * c.cards) // pre.cards) + 1):
            res, ok, _, _ = d._pd_meets(inp, c, x, y, t, pre, memo)
            if ok:
                key = (d._rent(c.gpu, x * pre.cards + y * c.cards, c.setting.ctx.rules), d._pd_rank(inp, res))
                best = min(best, (key, x, y)) if best is not None else (key, x, y)
                break
    assert got is not None and best is not None
    assert got[:2] == best[1:]


@pytest.mark.parametrize(("model", "options", "why"), PD_CASES, ids=[c[2][:30] for c in PD_CASES])
def test_pd_cheapest_below_a_rent_is_the_answer_when_it_costs_less(model, options, why) -> None:
    """_pd_cheapest(below=b) answers what it answers unbounded when that costs less than b, else None."""
    inp = d.DeployInput(model=model, **options)
    t = d.targets(inp)
    cands = d.candidates(inp, d.settings(inp)[0])
    found = d.search(inp, cands, t)
    agg = found[0] if found else d.closest(inp, cands, t)
    same = [c for c in cands if c.setting is agg.cand.setting and c.gpu == agg.cand.gpu and c.nodes == 1]
    for c in same:
        got = d._pd_cheapest(inp, c, t)
        if got is None:
            assert d._pd_cheapest(inp, c, t, 1e12) is None
            continue
        price = d.fitting.set_price(c.gpu, (got[0] + got[1]) * c.cards, c.setting.ctx.rules)
        for below in (price * 0.999, price, price * 1.001, price * 3):
            assert d._pd_cheapest(inp, c, t, below) == (got if price < below else None), (c.cards, below)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.floats(1e-4, 1e3), st.just(float("inf"))), st.floats(1e-4, 10.0),
       st.sampled_from(["vllm", "sglang", "llama.cpp", "ollama", "trtllm", "tgi", "no-such-runtime"]),
       st.floats(0.01, 10.0), st.floats(0.001, 1.0))
def test_likely_misses_read_the_high_end_likely_prints(ttft_s, tpot_s, runtime, ttft_target, tpot_target):
    """likely_misses (the search's pessimistic test) against the range `likely` answers with."""
    from cardfit.core import serving as sv

    served = sv.Served(8.0, tpot_s, 0.1, ttft_s, ttft_s, 0.0, 8.0 / tpot_s, 0.5, True)
    t = d.Targets(ttft_target, tpot_target, {})
    r = d.likely(served, runtime)
    ttft = r["ttft_ms"][1] / 1e3 if r["ttft_ms"] else served.ttft_s
    tpot = r["tpot_ms"][1] / 1e3 if r["tpot_ms"] else served.tpot_s
    assert d.likely_misses(served, t, runtime) == {"ttft_ms": ttft / t.ttft_s, "tpot_ms": tpot / t.tpot_s}


# (runtime, cards, users, budget, skips): budgets that leave some sets in, none, or only the closest; whether
# _over_budget skips a set there
BUDGETS = [
    (None, ("RTX 4090", "L40S", "H100 SXM"), 32.0, 500.0, True),
    ("vllm", ("L4", "A40", "H100 SXM"), 200.0, 3000.0, True),
    ("llama.cpp", ("RTX 3090", "RTX 4090"), 16.0, 1.0, True),
    ("vllm", ("H100 SXM",), 2000.0, 9000.0, True),  # nothing meets within it: the closest one does
    ("vllm", ("L4",), 300.0, 5500.0, False),  # the best (6 replicas of 4 cards, $5,400) just within it
]


@pytest.mark.parametrize(("runtime", "gpus", "users", "budget", "skips"), BUDGETS)
def test_budget_skips_change_no_answer(runtime, gpus, users, budget, skips) -> None:
    """search and closest skip the sets every count of which rents above --budget-usd-month
    (_over_budget), from 1 or from search's replica bound: their answers are those of timing every set."""
    from unittest import mock

    inp = d.DeployInput(model=MODEL, runtime=runtime, gpu=gpus, users=users, tpot_ms=40.0,
                        budget_usd_month=budget)
    t = d.targets(inp)
    cands = d.candidates(inp, d.settings(inp)[0])
    skipped = (d.search(inp, cands, t), d.closest(inp, cands, t))
    # a set over the budget at every count, or from search's replica bound up
    assert skips == any(d._over_budget(inp, c, d._limit(inp, c), fewest)
               for c in cands for fewest in (1, min(d._fewest_by_throughput(inp, c, t), d._limit(inp, c))))
    with mock.patch.object(d, "_over_budget", lambda inp, c, most, fewest=1: False):
        assert (d.search(inp, cands, t), d.closest(inp, cands, t)) == skipped


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(RUNTIMES), st.sampled_from(CARDS), st.integers(1, 64),
       st.one_of(st.none(), st.integers(1, 64)), st.one_of(st.none(), st.floats(100.0, 60_000.0)), st.data())
def test_limits_read_from_the_count_are_those_of_the_timed_result(runtime, card, n, max_cards, budget, data):
    """closest walks down to the most replicas within --max-cards and --budget-usd-month before timing one
    (_allowed, from the count and its rent): the same verdict as on the timed result's count and rent."""
    inp = d.DeployInput(model=MODEL, runtime=runtime, gpu=(card,), users=64.0, max_cards=max_cards,
                        budget_usd_month=budget)
    cands = d.candidates(inp, d.settings(inp)[0])
    if not cands:
        return
    c = data.draw(st.sampled_from(cands))
    r = d.evaluate(inp, c, n, d.targets(inp))
    timed = not (inp.max_cards and r.count > inp.max_cards) and not (
        inp.budget_usd_month is not None and (r.monthly_usd or 0) > inp.budget_usd_month)
    assert d._allowed(inp, c, n) == timed


def _whole_bisection(ok, lo, hi, enough=None):
    from cardfit.core.search import largest_true

    return largest_true(ok, lo, hi)


EDGES = [("vllm", "L4", 30.0), ("vllm", "H100 SXM", 20.0), ("llama.cpp", "RTX 4090", 50.0),
         ("sglang", "A40", 40.0)]


@pytest.mark.parametrize(("runtime", "card", "tpot_ms"), EDGES)
def test_fewest_replicas_bound_at_the_edge_of_one_replica(runtime, card, tpot_ms) -> None:
    """Arrivals at and around what one replica takes within the TPOT target (λ = (B_t + 1) ÷ ((O − 1) ×
    TPOT(B_t)) × f): the early stop answers what the whole bisection does, 1 below the edge, 2 above it."""
    from unittest import mock

    from cardfit.core import serving as sv

    inp = d.DeployInput(model=MODEL, runtime=runtime, gpu=(card,), tpot_ms=tpot_ms, requests_per_s=1.0)
    t = d.targets(inp)
    for c in d.candidates(inp, d.settings(inp)[0])[:6]:
        r, o = c.replica, inp.output_tokens
        w = sv.Workload(d.prompt_tokens(inp), o, users=1.0)
        with mock.patch.object(d, "largest_true", _whole_bisection):
            b = _whole_bisection(lambda n, r=r, w=w: sv.tpot_s(r, w, n) <= t.tpot_s, 1, max(r.max_seqs, 1))
        if b < 2 or b >= r.max_seqs:
            continue
        edge = (b + 1) / ((o - 1) * sv.tpot_s(r, w, b))
        for f in (0.5, 0.999, 1.0, 1.001, 1.2, 3.0):
            args = (r, d.prompt_tokens(inp), o, t.tpot_s, t.ttft_s, None, edge * f, 0.0)
            with mock.patch.object(d, "largest_true", _whole_bisection):
                whole = d._fewest_of.__wrapped__(*args)
            assert d._fewest_of.__wrapped__(*args) == whole, (c.gpu.name, c.cards, f)


# (model, options): searches whose front of PARETO_SIZE fills early (candidates set aside, the rest of the
# order too), and some whose front never fills (a narrow catalog); users and arrivals, paged and slotted
KEEP_CASES = [
    (MODEL, {"users": 32.0, "ttft_ms": 1500.0, "tpot_ms": 50.0}),
    (MODEL, {"requests_per_s": 5.0, "input_tokens": 1000, "output_tokens": 300, "ttft_ms": 2000.0,
             "tpot_ms": 50.0}),
    (MODEL, {"users": 200.0, "tpot_ms": 30.0, "gpu": tuple(CARDS)}),
    (MODEL, {"users": 16.0, "runtime": "llama.cpp", "gpu": ("RTX 4090", "RTX 3090", "L4")}),
    ("Qwen/Qwen3-30B-A3B", {"users": 32.0, "ttft_ms": 1500.0, "tpot_ms": 50.0, "runtime": "vllm"}),
    ("meta-llama/Llama-3.3-70B-Instruct", {"users": 64.0, "gpu": ("H100", "H200", "A100"),
                                           "max_cards": 8}),
]


@pytest.mark.parametrize(("model", "options"), KEEP_CASES, ids=[str(sorted(c[1]))[:40] for c in KEEP_CASES])
@pytest.mark.parametrize("keep", [1, 3, d.PARETO_SIZE])
@pytest.mark.parametrize("reread", [d.FRONT_REREAD_GROWTH, 0.0, 3.0])
def test_search_keeping_a_front_answers_what_the_whole_search_does(model, options, keep, reread,
                                                                   monkeypatch) -> None:
    """search(keep=n) sets aside the candidates whose least rent is above the n-th deployment of the Pareto
    front found so far (and the rest of the order once _rent_floors is), and times those the final front
    does not rank ahead of: its best and its front are those of the whole search. The front's rent read at
    every result, and only once they have grown fourfold (stale: the end loop then times what is needed)."""
    monkeypatch.setattr(d, "FRONT_REREAD_GROWTH", reread)
    inp = d.DeployInput(model=model, **options)
    t = d.targets(inp)
    cands = d.candidates(inp, d.settings(inp)[0])
    whole, kept = d.search(inp, cands, t), d.search(inp, cands, t, keep)
    assert (kept[:1], d.pareto(kept, keep)) == (whole[:1], d.pareto(whole, keep))
    assert {id(r.cand) for r in kept} <= {id(r.cand) for r in whole}


def test_search_keeping_a_front_times_fewer() -> None:
    """Candidates are left untimed (else the equality above holds trivially)."""
    model, options = KEEP_CASES[0]
    inp = d.DeployInput(model=model, **options)
    t = d.targets(inp)
    cands = d.candidates(inp, d.settings(inp)[0])
    assert len(d.search(inp, cands, t, d.PARETO_SIZE)) < len(d.search(inp, cands, t))


@functools.cache
def _three_cards() -> list:
    """One real candidate under three card names (built once: candidates() sizes the whole catalog)."""
    inp = d.DeployInput(model=MODEL, users=8.0)
    cand = d.candidates(inp, d.settings(inp)[0])[0]
    return [replace(cand, gpu=replace(cand.gpu, id=f"g{g}")) for g in range(3)]


def test_the_front_tells_launches_apart():
    """Two launches of one card, count, runtime and quant that differ only in their step budget (or layout, or
    sequence cap) are two offers: neither beaten, both on the front (review of 2026-12-07: a hidden variant
    with a better TTFT had pushed a listed one off while the table showed neither)."""
    cand = _three_cards()[0]
    wide = replace(cand, chunk_tokens=2 * cand.replica.chunk_tokens)
    assert d._shown(_result(cand, 0.010, 0.2)) != d._shown(_result(wide, 0.012, 0.1))
    front = d.pareto([_result(cand, 0.010, 0.2), _result(wide, 0.012, 0.1)], d.PARETO_SIZE)
    assert [r.served.ttft_s for r in front] == [0.2, 0.1]


def _result(cand, tpot: float, ttft: float):
    from cardfit.core import serving as sv

    return d.Result(cand, 1, sv.Served(8.0, tpot, 0.1, ttft, ttft, 0.0, 100.0, 0.5, True), 100.0, 1.0, 100.0,
                    True, {})


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 6), st.integers(1, 4), st.integers(1, 4), st.integers(0, 2)),
                max_size=14), st.integers(1, 5))
def test_front_reads_results_until_it_holds_size(points, size) -> None:
    """_front (pareto's sweep, stopping at `size`) against the whole sweep cut to `size`, on results whose
    rent, TPOT, TTFT and card tie often. One left off as shown already (the same card, count, runtime, quant
    and KV type as one on the front) is still on offer: what it beats is not on the front either (search's
    dominance skip reads it so; seed 2592 of the test below found the two apart)."""
    from cardfit.core import serving as sv

    cards = _three_cards()
    results = [d.Result(cards[g], 1, sv.Served(8.0, tpot / 1e3, 0.1, ttft, ttft, 0.0, 100.0, 0.5, True),
                        float(rent), 1.0, 100.0, True, {}) for rent, tpot, ttft, g in points]

    def whole(rs):
        k, offered, front = d._key, [], []
        for r in sorted(rs, key=d._rank):
            if any(all(y <= x for x, y in zip(k(r), k(f), strict=True)) for f in offered):
                continue  # one not beaten before it is as good on each figure, shown or not
            offered.append(r)
            if any(d._shown(r) == d._shown(f) for f in front):
                continue
            front.append(r)
        return front[:size]

    assert d.pareto(results, size) == whole(results)


def _drawn_timings(drawn: dict):
    """The search's timing functions answered from `drawn` (candidate id -> (fewest replicas by throughput,
    replicas, Result)): one request alone at half the drawn TPOT and TTFT."""
    from contextlib import ExitStack
    from unittest import mock

    def fewest(inp, c, t, lo, most):
        n, res = drawn[id(c)][1:]
        return res if n <= most else None

    def solo(inp, c):
        served = drawn[id(c)][2].served
        return served.tpot_s / 2, served.ttft_s / 2

    stack = ExitStack()
    for name, fake in (("_solo", solo), ("_fewest_replicas", fewest),
                       ("_fewest_by_throughput", lambda inp, c, t: drawn[id(c)][0])):
        stack.enter_context(mock.patch.object(d, name, fake))
    return stack


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32), st.sampled_from([1, 3, d.PARETO_SIZE]),
       st.sampled_from([0.0, d.FRONT_REREAD_GROWTH, 3.0]))
def test_search_keeping_a_front_on_any_timings(seed, keep, reread) -> None:
    """search(keep) against the whole search where each candidate's timing is drawn (replicas, TPOT, TTFT,
    tokens/s; its rent that of its replicas), on every runtime and the small catalog: results found late
    rank ahead of and dominate front members found before them, so the front's n-th rent moves both ways
    (a wrong reading of it is caught: the rent of the front's first or last deployment in its place)."""
    import random
    from unittest import mock

    rnd = random.Random(seed)  # a timing for each of ~1,500 candidates: too many for hypothesis to draw
    inp = d.DeployInput(model=MODEL, gpu=tuple(CARDS), users=32.0)
    t = d.targets(inp)
    cands = _small_catalog_candidates(inp)
    drawn = _drawn_results(rnd, cands, tied=False)

    with _drawn_timings(drawn), mock.patch.object(d, "FRONT_REREAD_GROWTH", reread):
        whole, kept = d.search(inp, cands, t), d.search(inp, cands, t, keep)
    assert (kept[:1], d.pareto(kept, keep)) == (whole[:1], d.pareto(whole, keep))


def _drawn_results(rnd, cands: list[d.Candidate], tied: bool) -> dict[int, tuple[int, int, d.Result]]:
    """A drawn timing per candidate (its fewest replicas that may meet, the count found, the Result: TPOT,
    TTFT and, where `tied`, the served tokens/s of a closed loop of 32 users of 300 tokens at them, else
    drawn apart; its rent that of its replicas), for _drawn_timings."""
    from cardfit.core import serving as sv

    drawn: dict[int, tuple[int, int, d.Result]] = {}
    for c in cands:
        lo = rnd.randint(1, 4)
        n = lo + rnd.randint(0, 3)
        tpot, ttft = rnd.randint(1, 9) / 200, rnd.randint(1, 9) / 20
        served = sv.Served(8.0, tpot, 0.1, ttft, 0.1, 0.0, 100.0, 0.5, True)
        rent = d.fitting.set_price(c.gpu, c.cards * n, c.setting.ctx.rules)
        tokens = 32 * 300 / (ttft + 299 * tpot) if tied else rnd.randint(1, 5) * 100.0
        drawn[id(c)] = (lo, n, d.Result(c, n, served, rent, 1.0, tokens, True, {}))
    return drawn


_CANDIDATES: dict[d.DeployInput, list[d.Candidate]] = {}


def _small_catalog_candidates(inp: d.DeployInput) -> list[d.Candidate]:
    if inp not in _CANDIDATES:
        _CANDIDATES[inp] = d.candidates(inp, d.settings(inp)[0])
    return _CANDIDATES[inp]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 8), st.integers(1, 6), st.integers(1, 6)), max_size=20),
       st.integers(0, 9), st.integers(0, 7), st.integers(0, 7))
def test_beaten_reads_the_front_up_to_the_rent(points, rent, tpot, ttft) -> None:
    """search's dominance check reads its front (sorted by rent) only up to the rent asked: the same answer
    as asking every deployment on it, on fronts whose rents, TPOTs and TTFTs tie often."""
    front = sorted((float(a), b / 10, c / 10) for a, b, c in points)
    every = any(a <= rent and b <= tpot / 10 and c <= ttft / 10 for a, b, c in front)
    assert d._beaten(front, float(rent), tpot / 10, ttft / 10) == every


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32), st.sampled_from([None, d.PARETO_SIZE]))
@example(2592, None)  # a deployment left off the front as shown already beat the one that took its place
def test_dominance_skips_change_no_answer_on_any_timings(seed, keep) -> None:
    """A candidate is left untimed where its floor rent is at least the best found and a deployment on the
    front found so far rents no more and beats its best case (one request alone) on TPOT and TTFT: the best
    and the Pareto front are those of the search that times it (each candidate's timing drawn, as above,
    with the served tokens/s tied to its figures: more TPOT or TTFT serves fewer)."""
    import random
    from unittest import mock

    rnd = random.Random(seed)
    inp = d.DeployInput(model=MODEL, gpu=tuple(CARDS), users=32.0)
    t = d.targets(inp)
    cands = _small_catalog_candidates(inp)
    drawn = _drawn_results(rnd, cands, tied=True)

    with _drawn_timings(drawn):
        pruned = d.search(inp, cands, t, keep)
        with mock.patch.object(d, "_beaten", lambda *a: False):
            whole = d.search(inp, cands, t, keep)
    size = keep or d.PARETO_SIZE
    assert (pruned[:1], d.pareto(pruned, size)) == (whole[:1], d.pareto(whole, size))
    assert len(pruned) < len(whole)  # the skip does skip (else the equality holds trivially)


# The early price cut (search: a candidate whose rent at any count is already priced out is dropped before its
# fewest replicas are bounded) is a speed setting: the answer is the one the search gives without it.
EARLY_CUT_QUESTIONS = (
    dict(model="meta-llama/Llama-3.1-8B-Instruct", requests_per_s=5.0, input_tokens=1000, output_tokens=300,
         ttft_ms=2000.0, tpot_ms=50.0),
    dict(model="meta-llama/Llama-3.1-8B-Instruct", users=32, ttft_ms=1500.0, tpot_ms=50.0, runtime="vllm"),
    dict(model="meta-llama/Llama-3.3-70B-Instruct", requests_per_s=5.0, input_tokens=1000, output_tokens=300,
         ttft_ms=2000.0, tpot_ms=50.0, runtime="vllm"),
)


@pytest.mark.parametrize("question", EARLY_CUT_QUESTIONS)
def test_the_early_price_cut_changes_no_answer(question, monkeypatch):
    d.clear_memos()
    with_cut = d.deploy_report(d.DeployInput(**question)).to_json()
    least, floors = d._least_price, []

    def no_floor(gpu, cards, rules, fewest, most):  # the floor over every count, the early cut's only input
        if most == d.EVERY_COUNT:
            floors.append(gpu)
            return 0.0
        return least(gpu, cards, rules, fewest, most)

    d.clear_memos()
    monkeypatch.setattr(d, "_least_price", no_floor)
    without = d.deploy_report(d.DeployInput(**question)).to_json()
    monkeypatch.undo()
    d.clear_memos()
    assert floors, "the search never reached the early cut"
    assert without == with_cut

"""Property tests for the arithmetic: more context, more sequences or more bits never need less memory."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cardfit.catalog.models import default_models
from cardfit.catalog.quants import default_quants
from cardfit.catalog.runtimes import default_runtimes
from cardfit.core.kv import kv_cache_bytes, max_tokens_in
from cardfit.core.memory import MemorySettings, estimate
from cardfit.core.weights import weights
from cardfit.runtimes import adapter

MODELS = [m for m in default_models()]
RUNTIMES = [r for r in default_runtimes()]
KV = ["f16", "bf16", "fp8", "q8_0", "q4_0"]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(MODELS), st.integers(1, 300_000), st.integers(1, 300_000), st.integers(1, 64),
       st.sampled_from(KV))
def test_kv_monotone_in_context_and_sequences(m, a, b, seqs, dtype):
    lo, hi = sorted((a, b))
    assert kv_cache_bytes(m, lo, seqs, dtype) <= kv_cache_bytes(m, hi, seqs, dtype)
    assert kv_cache_bytes(m, lo, seqs, dtype) <= kv_cache_bytes(m, lo, seqs + 1, dtype)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(MODELS), st.integers(1, 10**12))
def test_max_tokens_in_is_the_edge(m, budget):
    n = max_tokens_in(m, budget)
    if n:
        assert kv_cache_bytes(m, n) <= budget
    assert kv_cache_bytes(m, n + 1) > budget or n >= 1 << 40


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from(RUNTIMES), st.integers(1, 131_072), st.integers(1, 131_072),
       st.integers(1, 16))
def test_total_memory_monotone_in_context(m, rt, a, b, seqs):
    lo, hi = sorted((a, b))
    q = default_quants().get("Q4_K_M")

    def total(c):
        return estimate(m, q, adapter(rt),
                        MemorySettings(context=c, sequences=seqs, prefill_chunk=rt.prefill_chunk)).total_bytes

    assert total(lo) <= total(hi)


def test_weights_grow_with_bits():
    order = ["Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0", "bf16", "fp32"]
    qc = default_quants()
    for m in MODELS:
        sizes = [weights(m, qc.get(q)).total_bytes for q in order]
        assert sizes == sorted(sizes), m.id


OFFLOADERS = [r for r in RUNTIMES if r.offload]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from(OFFLOADERS), st.integers(1, 131_072), st.integers(0, 10**12),
       st.integers(0, 10**12))
def test_offload_ram_is_what_spills_plus_what_stays_in_ram(m, rt, context, a, b):
    """The system RAM an offload needs (the figure `plan` states and `--ram-gb` is checked against): the
    runtime's host-resident weights plus whatever does not fit on the card; never less on a smaller card, and
    exactly the shortfall plus the host weights when the card holds its fixed workspace."""
    from cardfit.core.fit import offload_ram_bytes

    mem = estimate(m, default_quants().get("Q4_K_M"), adapter(rt),
                   MemorySettings(context=context, prefill_chunk=rt.prefill_chunk))
    small, big = sorted((a, b))
    assert offload_ram_bytes(mem, small) >= offload_ram_bytes(mem, big) >= mem.host_weights_bytes
    if mem.per_card_fixed_bytes <= small < mem.total_bytes:
        assert offload_ram_bytes(mem, small) == mem.total_bytes - small + mem.host_weights_bytes
    if big >= mem.total_bytes:
        assert offload_ram_bytes(mem, big) == mem.host_weights_bytes
# --- the deploy search (services/deploy.py) against trying every replica count ----------------------------
# Small catalogs (two cards, one runtime) keep the brute force short; the loads reach tens of replicas.

DEPLOY_CARDS = ["A40", "RTX A5000", "L4", "L40S", "RTX 4090", "RTX 3090", "H100 SXM", "A100 80GB"]
DEPLOY_MAX_REPLICAS = 64  # the brute force tries every count up to this (the loads below need fewer)


def _deploy_input(runtime, cards, tpot_ms, ttft_ms, users, rate):
    from cardfit.services.deploy import DeployInput

    load = {"users": float(users)} if users else {"requests_per_s": rate}
    return DeployInput(model="meta-llama/Llama-3.1-8B-Instruct", runtime=runtime, gpu=tuple(cards),
                       tpot_ms=tpot_ms, ttft_ms=ttft_ms, **load)


def _brute_cheapest(inp):
    """Every candidate at every replica count from 1 up: the cheapest count that meets, cheapest overall."""
    from cardfit.services import deploy as d

    t = d.targets(inp)
    cands = d.candidates(inp, d.settings(inp)[0])
    best = None
    for c in cands:
        for n in range(1, min(d._limit(inp, c), DEPLOY_MAX_REPLICAS) + 1):
            r = d.evaluate(inp, c, n, t)
            if r.meets:
                if d._within(inp, r) and (best is None or d._key(r)[:2] < d._key(best)[:2]):
                    best = r
                break
    found = d.search(inp, cands, t)
    return best, (found[0] if found else None)


def _check_cheapest(inp):
    """The search's best costs no more than anything the brute force finds, and no less where it lies within
    the brute force's counts (up to DEPLOY_MAX_REPLICAS)."""
    best, searched = _brute_cheapest(inp)
    assert best is None or searched is not None, best
    if searched is None:
        return
    assert searched.meets
    if inp.users is not None:  # a closed loop of N users keeps at most N replicas busy
        assert searched.replicas <= inp.users + 1 - 1e-9
    shown = (f"search: {searched.count}x {searched.cand.gpu.name} ({searched.replicas} replicas); "
             f"brute force: {best.count}x {best.cand.gpu.name} ({best.replicas} replicas)" if best else "")
    if best is not None:
        assert searched.monthly_usd <= best.monthly_usd + 1e-6, shown
    if searched.replicas <= DEPLOY_MAX_REPLICAS:
        assert best is not None and best.monthly_usd <= searched.monthly_usd + 1e-6, shown


@pytest.mark.parametrize(("runtime", "cards", "tpot_ms", "ttft_ms", "users", "rate", "why"), [
    ("vllm", ("L4", "RTX A5000"), 30, 1000, 584, None,
     "23 replicas hold 25.4 users each: TPOT at a fractional batch between 25 and 26 sequences meets; the "
     "bound counted whole sequences (25 a replica) and started at 24, which met, so 23 was never tried"),
    ("llama.cpp", ("RTX 4090", "A100 80GB"), 20, 3000, 449, None,
     "every slot within TPOT: users past the slots queue, within the TTFT target, so fewer replicas than "
     "users ÷ slots meet; the bound started above the fewest"),
    ("vllm", ("A40", "RTX A5000"), 50, 2000, None, 30.0, "issue 25.21's pair of cards, under arrivals"),
])
def test_deploy_best_is_the_brute_force_cheapest(runtime, cards, tpot_ms, ttft_ms, users, rate, why):
    _check_cheapest(_deploy_input(runtime, cards, tpot_ms, ttft_ms, users, rate))


@settings(max_examples=12, deadline=None)
@given(st.sampled_from(["vllm", "llama.cpp"]), st.lists(st.sampled_from(DEPLOY_CARDS), min_size=2, max_size=2,
                                                       unique=True),
       st.sampled_from([20, 30, 50, 100]), st.sampled_from([300, 1000, 3000]),
       st.one_of(st.integers(1, 400), st.none()), st.floats(0.1, 30.0))
def test_deploy_search_finds_what_every_count_finds(runtime, cards, tpot_ms, ttft_ms, users, rate):
    _check_cheapest(_deploy_input(runtime, cards, tpot_ms, ttft_ms, users, rate))


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["vllm", "llama.cpp", "sglang"]), st.sampled_from(DEPLOY_CARDS),
       st.one_of(st.integers(1, 400), st.none()), st.floats(0.1, 30.0), st.integers(1, 40), st.data())
def test_fewer_replicas_never_meet_what_more_could_not(runtime, card, users, rate, n, data):
    """Meeting the targets is monotone in the replica count (what the search's bisection needs)."""
    from cardfit.services import deploy as d

    inp = _deploy_input(runtime, (card,), 50, 1000, users, rate)
    cands = d.candidates(inp, d.settings(inp)[0])
    if not cands:
        return
    c = data.draw(st.sampled_from(cands))
    t = d.targets(inp)
    if d.evaluate(inp, c, n, t).meets:
        assert d.evaluate(inp, c, n + 1, t).meets

"""Property tests for the arithmetic: more context, more sequences or more bits never need less memory."""

from __future__ import annotations

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

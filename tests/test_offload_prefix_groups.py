"""A host KV tier behind many prefix groups (issue 26, KV offload): the prefixes of the groups no running
sequence reads, which the GPU pool keeps only as room is left, are kept by the host tier's own LRU beside the
waiting histories (core/reuse.py hits; vLLM's OffloadingConnector, LRUOffloadingManager; SGLang HiCache's L2),
and copied back instead of computed. llm-d's tiered prefix-cache benchmarks measure that case
(data/validation/serving_llmd_tiered.toml): before this, cardfit's host tier served only session histories and
answered the same with or without it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cardfit.core import reuse as ru
from cardfit.services.deploy import DeployInput, deploy_report
from cardfit.validation.serving import predict_serving
from cardfit.validation.validate import all_records


def test_host_keeps_the_groups_the_gpu_pool_loses_hand_derived():
    """10 groups of 1,000 tokens, 4 running sequences of 500 own tokens each (2,000 tokens). The groups they
    read: 10 (1 - 0.9^4) = 3.439; another running sequence reads a request's group with 1 - 0.9^3 = 0.271. A
    pool with no room beyond the running sequences and the read prefixes keeps none of the 6,561 unread
    prefix tokens; a host tier of half that keeps half (LRU, Fagin 1977), found by the requests whose group
    no other running sequence reads: 1,000 x 0.729 x 0.5 tokens a request, copied, not computed."""
    reuse = ru.Reuse(1000, 1, 10)
    i, o = 1400, 200
    used, others = 10 * (1 - 0.9 ** 4), 1 - 0.9 ** 3
    unread = (10 - used) * 1000
    pool = 2000 + used * 1000
    gpu_only = ru.hits(i, o, reuse, pool_tokens=pool, running=4, sessions=4)
    tiered = ru.hits(i, o, reuse, pool_tokens=pool, running=4, sessions=4, host_tokens=unread / 2)
    assert gpu_only.host_tokens == 0.0
    assert tiered.gpu_tokens == pytest.approx(gpu_only.gpu_tokens) == pytest.approx(1000 * others)
    assert tiered.host_tokens == pytest.approx(1000 * (1 - others) * 0.5)
    # a host tier no larger than what the GPU pool keeps adds nothing (inclusive: it holds copies)
    half = ru.hits(i, o, reuse, pool_tokens=pool + unread / 2, running=4, sessions=4, host_tokens=unread / 2)
    assert half.host_tokens == 0.0
    # one larger than every unread prefix: every request finds its prefix in one tier or the other
    full = ru.hits(i, o, reuse, pool_tokens=pool, running=4, sessions=4, host_tokens=2 * unread)
    assert full.cached_tokens == pytest.approx(1000)


_WORKLOAD = dict(i=st.integers(1, 20_000), o=st.integers(1, 4_000), n=st.integers(0, 20_000),
                 turns=st.integers(1, 8), pool=st.floats(0, 2e6), running=st.floats(0, 512),
                 waiting=st.floats(0, 512), groups=st.integers(1, 500), host=st.floats(0, 4e6),
                 more=st.floats(0, 4e6))


@settings(max_examples=300, deadline=None)
@given(**_WORKLOAD)
def test_a_host_tier_never_changes_the_gpu_hits_and_never_serves_more_than_the_reuse(
        i, o, n, turns, pool, running, waiting, groups, host, more):
    kw = dict(pool_tokens=pool, running=running, sessions=running + waiting)
    reuse = ru.Reuse(n, turns, groups)
    none, a = (ru.hits(i, o, reuse, host_tokens=x, **kw) for x in (0.0, host))
    assert a.gpu_tokens == none.gpu_tokens
    assert a.cached_tokens >= none.cached_tokens - 1e-9
    assert a.cached_tokens <= a.reusable_tokens * (1 + 1e-9) + 1e-9
    if turns == 1:  # no histories competing for the host: a larger tier never hits less
        b = ru.hits(i, o, reuse, host_tokens=host + more, **kw)
        assert b.cached_tokens >= a.cached_tokens - 1e-9


def test_deploy_uses_the_host_tier_for_prefix_groups_the_gpu_pool_cannot_keep():
    """llm-d's workload on one replica (Qwen3-32B, TP 2 on H100, 31 groups x 16,000 tokens, ~495,000 prefix
    tokens against a pool of ~295,000): with 200 GiB of host RAM the prefixes fit, and deploy launches it."""
    kw = dict(model="qwen3-32b", gpu=("H100 SXM",), runtime="vllm", tp=2, requests_per_s=0.625,
              input_tokens=16256, output_tokens=256, shared_prefix_tokens=16000, prefix_groups=31,
              ttft_ms=5000, tpot_ms=200)
    plain = deploy_report(DeployInput(**kw))
    tiered = deploy_report(DeployInput(**kw, kv_offload_gb=214.748))
    # without the tier it hits little of its prefixes (its TTFT meets the target, safely or only as
    # predicted, by the prefix-reuse band of the day), with it nearly all, safely
    p = plain.to_json()["best"] or plain.to_json()["closest"]
    t = tiered.to_json()["best"]
    assert t["kv_offload_gb"] == 214.748 and p["prefix_hit_rate"] < 0.7 < 0.95 < t["prefix_hit_rate"]
    assert "--kv-offloading-backend native" in t["command"]
    assert "prefixes of groups" in ru.OFFLOAD_WHY[ru.OffloadReason.HELPS]


def _record(rid: str) -> dict:
    return next(r for r in all_records() if r["id"] == rid)


@pytest.mark.parametrize("rate", [10, 20, 40])
def test_llmd_host_tier_throughput(rate):
    """llm-d's Qwen3-32B fleet with a 200 GiB host tier a replica served 1.26 / 2.28 / 2.51 requests/s a
    replica at 10 / 20 / 40 requests/s offered (the HBM-only fleet 0.93 / 0.87 / 0.88). At first contact
    cardfit answered the same for both (1.25, the HBM-only capacity: -1 %, -45 %, -50 % with the tier); the
    host tier now holds the groups the pool loses, and the tiered throughput is within 15 %."""
    r = _record(f"llmd-tiered-qwen3-32b-h100-tp2-rate{rate}-cpu200gib-throughput")
    hbm = _record(f"llmd-tiered-qwen3-32b-h100-tp2-rate{rate}-hbm-throughput")
    tiered, _ = predict_serving(r)
    plain, _ = predict_serving(hbm)
    assert tiered == pytest.approx(r["measured"], rel=0.15)
    assert tiered >= plain

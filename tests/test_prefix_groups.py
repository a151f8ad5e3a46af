"""Many prefix groups (issue 26, prefix reuse): G different shared prefixes of N tokens, the workload
SGLang's `generated-shared-prefix` dataset and vLLM's `prefix_repetition` dataset send
(core/reuse.py: each group's prefix held once while the LRU keeps it beside the running sequences)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cardfit.core import reuse as ru
from cardfit.services.deploy import DeployInput, deploy_report
from cardfit.services.speed import SpeedInput, speed_report


def _hits_before(i, o, reuse, *, pool_tokens, running, sessions, host_tokens=0.0):
    """core/reuse.py hits as it stood before prefix groups (main 13a7d97), the reference for G = 1."""
    shared = min(reuse.shared_prefix_tokens, i)
    whole = ru.reusable_tokens(i, o, reuse)
    if whole <= 0:
        return ru.Hits(0.0, 0.0, 0.0)
    shared_hit = shared / reuse.turns if pool_tokens >= shared else 0.0
    history = whole - shared / reuse.turns
    waiting = max(sessions - running, 0.0) * ru.history_tokens(i, o, reuse)
    room = pool_tokens - shared - running * ru.held_tokens(i, o, reuse, True)
    gpu_share = ru.lru_hit_share(room, waiting)
    host_share = max(ru.lru_hit_share(host_tokens, waiting) - gpu_share, 0.0)
    return ru.Hits(shared_hit + history * gpu_share, history * host_share, whole)


_WORKLOAD = dict(i=st.integers(1, 20_000), o=st.integers(1, 4_000), n=st.integers(0, 20_000),
                 turns=st.integers(1, 8), pool=st.floats(0, 2e6), running=st.floats(0, 512),
                 waiting=st.floats(0, 512), host=st.floats(0, 2e6))


@settings(max_examples=300, deadline=None)
@given(**_WORKLOAD)
def test_one_group_is_todays_answer_exactly(i, o, n, turns, pool, running, waiting, host):
    kw = dict(pool_tokens=pool, running=running, sessions=running + waiting, host_tokens=host)
    now, before = ru.hits(i, o, ru.Reuse(n, turns, 1), **kw), _hits_before(i, o, ru.Reuse(n, turns), **kw)
    # the token figures (the request classes, Hits.classes, came later: tests/test_slow_prefill.py)
    assert (now.gpu_tokens, now.host_tokens, now.reusable_tokens) == \
        (before.gpu_tokens, before.host_tokens, before.reusable_tokens)


@settings(max_examples=300, deadline=None)
@given(**_WORKLOAD, groups=st.integers(1, 500), more=st.integers(1, 500))
def test_more_groups_never_hit_more(i, o, n, turns, pool, running, waiting, host, groups, more):
    kw = dict(pool_tokens=pool, running=running, sessions=running + waiting, host_tokens=host)
    few = ru.hits(i, o, ru.Reuse(n, turns, groups), **kw)
    many = ru.hits(i, o, ru.Reuse(n, turns, groups + more), **kw)
    assert many.gpu_tokens <= few.gpu_tokens + 1e-6
    assert many.reusable_tokens == few.reusable_tokens  # what could be hit is the same: each prompt's prefix


def test_groups_hand_derived():
    """10 groups of 1,000 tokens, 4 running sequences of 500 own tokens each (2,000). The groups they read:
    10 (1 − 0.9⁴) = 3.439; another running sequence reads a request's group with 1 − 0.9³ = 0.271."""
    reuse = ru.Reuse(1000, 1, 10)
    i, o = 1400, 200  # a sequence holds 1,400 + 100 − 1,000 = 500 own tokens
    used, others = 10 * (1 - 0.9 ** 4), 1 - 0.9 ** 3
    # a pool with room for every prefix: every request hits its prefix
    h = ru.hits(i, o, reuse, pool_tokens=2000 + 10_000, running=4, sessions=4)
    assert h.gpu_tokens == pytest.approx(1000)
    # room for half the unread prefixes beside the read ones: those hit half the time (LRU, Fagin 1977)
    unread = (10 - used) * 1000
    h = ru.hits(i, o, reuse, pool_tokens=2000 + used * 1000 + unread / 2, running=4, sessions=4)
    assert h.gpu_tokens == pytest.approx(1000 * (others + (1 - others) / 2))
    # no room beyond the running sequences: only a group another sequence reads hits
    h = ru.hits(i, o, reuse, pool_tokens=2000 + used * 1000, running=4, sessions=4)
    assert h.gpu_tokens == pytest.approx(1000 * others)


def test_groups_in_use():
    assert ru.groups_in_use(ru.Reuse(100, 1, 1), 0) == 1.0
    assert ru.groups_in_use(ru.Reuse(100, 1, 4), 0) == 0.0
    assert ru.groups_in_use(ru.Reuse(100, 1, 4), 2) == pytest.approx(4 * (1 - 0.75 ** 2))


# SGLang bench_serving's generated-shared-prefix defaults (python/sglang/bench_serving.py, argument group
# "generated-shared-prefix dataset arguments": --gsp-num-groups 64, --gsp-prompts-per-group 16,
# --gsp-system-prompt-len 2048, --gsp-question-len 128, --gsp-output-len 256), and the shape sglang PRs
# 11214 and 13584 ran with and without the radix cache (https://github.com/sgl-project/sglang/pull/11214:
# --gsp-num-groups 50 --gsp-prompts-per-group 10 --gsp-system-prompt-len 10240 --gsp-question-len 256
# --gsp-output-len 128 --max-concurrency 5).
GSP_DEFAULT = dict(input_tokens=2048 + 128, output_tokens=256, shared_prefix_tokens=2048, prefix_groups=64)
GSP_PR11214 = dict(input_tokens=10240 + 256, output_tokens=128, shared_prefix_tokens=10240, prefix_groups=50)


def _deploy(**kw):
    base = dict(model="meta-llama/Llama-3.1-8B-Instruct", runtime="vllm", tp=1, ttft_ms=60_000, tpot_ms=500)
    return deploy_report(DeployInput(**{**base, **kw})).to_json()


def test_deploy_one_group_is_the_option_left_out():
    kw = dict(gpu=("H100 SXM",), users=16, input_tokens=2176, output_tokens=256, shared_prefix_tokens=2048)
    plain, one = _deploy(**kw), _deploy(**kw, prefix_groups=1)
    assert one == plain and one["workload"]["prefix_groups"] == 1


@pytest.mark.parametrize(("gpu", "users", "shape", "fits"), [
    # 64 × 2,048 = 131k tokens of prefixes: an H100's pool for an 8B model holds them beside 16 sequences
    ("H100 SXM", 16, GSP_DEFAULT, True),
    # 50 × 10,240 = 512k tokens: beyond an L40S's pool for the 8B model, the unread groups are recomputed
    ("L40S", 5, GSP_PR11214, False),
])
def test_deploy_groups_hit_as_the_pool_allows(gpu, users, shape, fits):
    one = _deploy(gpu=(gpu,), users=users, **{**shape, "prefix_groups": 1})["best"]
    many = _deploy(gpu=(gpu,), users=users, **shape)["best"]
    assert many["prefix_hit_rate"] <= one["prefix_hit_rate"]
    assert (many["prefix_hit_rate"] == pytest.approx(one["prefix_hit_rate"], abs=1e-3)) is fits
    # never faster than one shared prefix
    assert many["ttft_ms"] >= one["ttft_ms"] and many["tpot_ms"] >= one["tpot_ms"]
    assert many["aggregate_tokens_per_s"] <= one["aggregate_tokens_per_s"]


def test_speed_takes_groups():
    kw = dict(model="llama3.1:8b", gpu="L40S", runtime="vllm", concurrency=(1, 5), **GSP_PR11214)
    many = speed_report(SpeedInput(**kw)).to_json()["rows"]
    one = speed_report(SpeedInput(**{**kw, "prefix_groups": 1})).to_json()["rows"]
    assert all(m["prefix_hit_rate"] <= s["prefix_hit_rate"] for m, s in zip(many, one, strict=True))
    assert all(m["ttft_ms"] >= s["ttft_ms"] for m, s in zip(many, one, strict=True))


@pytest.mark.parametrize("cmd", [("deploy", "llama3.1:8b", "--users", "2"),
                                 ("speed", "llama3.1:8b", "--gpu", "H100 SXM", "--input-tokens", "1000")])
def test_groups_need_a_shared_prefix(run_cli, cmd):
    code, out, err = run_cli(*cmd, "--prefix-groups", "4")
    assert code == 2 and "give --shared-prefix-tokens too" in err and "Traceback" not in err


# --- attention data-parallel groups and the pinned path (review of the prefix-groups change) ------------
# Each attention-DP group of an expert-parallel layout is an engine of its own with its own prefix cache
# (vLLM: "each DP rank is deployed as a separate 'core engine' process",
# https://docs.vllm.ai/en/latest/serving/data_parallel_deployment.html), so it holds its own copy of the
# prefixes its requests read. The shape: SGLang PR 11214's long prefixes (above) at 64 groups of 30,000
# tokens on Qwen3-30B-A3B (1.92M prefix tokens, beyond one attention group's share of four H100s' pool).

def _moe(**kw):
    from cardfit.services import deploy as dp

    base = dict(model="qwen3-30b-a3b", runtime="vllm", gpu=("H100 SXM",), users=512, input_tokens=30128,
                output_tokens=256, shared_prefix_tokens=30000, prefix_groups=64, quant="bf16")
    inp = DeployInput(**{**base, **kw})
    sets, _ = dp.settings(inp)
    return inp, [c for c in dp.candidates(inp, sets) if c.nodes == 1 and c.cards <= 4]


def test_expert_parallel_layouts_hold_the_prefixes():
    """Two H100s: TP 2 holds 26 sequences beside the prefixes (each its own 30,000 tokens: 64 × 30,000 do not
    fit); two attention groups hold less (the non-expert weights twice), not 512 as when the expert-parallel
    layouts charged no prefix memory."""
    _, cands = _moe()
    tp = next(c for c in cands if c.cards == 2 and c.ep == 1)
    ep = next(c for c in cands if c.cards == 2 and c.ep == 2)
    assert tp.seqs < 64 and ep.seqs <= tp.seqs


def test_each_attention_group_caches_its_own_prefixes():
    """Four H100s, KV fp8: one group per card has ~1.08M tokens, less than the 1.92M of the 64 prefixes, so
    not every request finds its prefix; two groups (2.2M each) and TP 4 (4.5M, one cache) hold them all."""
    from cardfit.services import deploy as dp

    inp, cands = _moe(kv_dtype="fp8")
    w = dp._workload(inp, 1)
    rate = {(c.attention_dp, c.ep): dp.hits(inp, c, w).hit_rate for c in cands if c.cards == 4}
    assert rate[1, 1] == pytest.approx(1.0) and rate[2, 4] == pytest.approx(1.0)
    assert rate[4, 4] < 0.9
    c = next(c for c in cands if c.cards == 4 and c.attention_dp == 4)
    running = min(w.users, c.seqs)
    mine = ru.hits(inp.input_tokens, inp.output_tokens, dp.reuse_of(inp), pool_tokens=c.kv_tokens / 4,
                   running=running / 4, sessions=w.users / 4)
    assert dp.hits(inp, c, w).hit_rate == pytest.approx(mine.hit_rate)


def test_one_prefix_is_held_once_per_attention_group():
    """G = 1 on two H100s: 20,000 shared + 20,000 own prompt tokens (20,128 held by a decoding sequence);
    two attention groups hold the prefix twice, so they admit at most (pool − 2 × 20,000) / 20,128."""
    from cardfit.services import deploy as dp

    inp, cands = _moe(input_tokens=40000, shared_prefix_tokens=20000, prefix_groups=1)
    ep = next(c for c in cands if c.cards == 2 and c.ep == 2)
    held = dp.kv_held(inp, ep.setting.ctx.runtime)
    assert held == 20128
    assert 0.95 * (ep.kv_tokens - 2 * 20000) / held <= ep.seqs <= (ep.kv_tokens - 2 * 20000) / held


@pytest.mark.parametrize(("kw", "caches"), [
    (dict(model="llama-3.1-8b", gpu=("L40S",), tp=1), 1),
    (dict(model="qwen3-30b-a3b", gpu=("H100 SXM",), tp=2, quant="bf16"), 1),
    (dict(model="qwen3-30b-a3b", gpu=("H100 SXM",), tp=2, attention_dp=2, expert_parallel=2, quant="bf16"),
     2),
])
@pytest.mark.parametrize("groups", [1, 2, 8])
def test_pinned_deployment_holds_the_prefixes_as_the_search_does(kw, caches, groups):
    """A pinned deployment (timed) sizes its pool with the prefixes held as the search holds them, at every
    G: one prefix once (it charged none at G = 1), G prefixes once each or a copy per sequence, once per
    attention group of an expert-parallel layout. 30,000 shared + 1,000 own prompt tokens, 200 answer tokens
    (1,100 held by a decoding sequence); the engine's blocks (64 tokens from vLLM 0.34.0: data/releases.toml
    kv_block_64) only take sequences away: a sequence holds whole blocks."""
    from cardfit.services import deploy as dp

    inp = DeployInput(**{**dict(runtime="vllm", users=1000, input_tokens=31000, output_tokens=200,
                                shared_prefix_tokens=30000, prefix_groups=groups), **kw})
    c = dp.pinned_answer(inp).result.cand
    held, n, kv = dp.kv_held(inp, c.setting.ctx.runtime), 30000, c.kv_tokens
    assert held == 1100
    block = c.setting.ctx.runtime.kv_block_tokens

    def most(each: int) -> float:
        if groups == 1:
            return (kv - caches * n) / each
        return max((kv - caches * groups * n) / each, kv / (each + n))

    assert 0.97 * most(-(-held // block) * block) - 1 <= c.seqs <= most(held)


def test_pinned_deployment_holds_the_drafters_cache_as_the_search_does():
    """A pinned deployment's pool holds each sequence's drafter cache beside its own (deploy.py _draft_kv), as
    the search's layouts do: Llama-3.1-8B with a Llama-3.2-1B drafter on one L40S, 16,000-token prompts. The
    1B's cache is a quarter of the 8B's a token (16 layers against 32, same 8 KV heads of 128), so the pool
    admits a fifth fewer sequences; before, the pinned path admitted 10 where the search admits 8."""
    from cardfit.services import deploy as dp

    kw = dict(model="llama-3.1-8b", gpu=("L40S",), tp=1, runtime="vllm", users=64, input_tokens=16000,
              output_tokens=300)
    inp = DeployInput(**kw, speculative="draft:llama-3.2-1b")
    c = dp.pinned_answer(inp).result.cand
    held = dp.kv_held(inp, c.setting.ctx.runtime)
    # the pool's tokens are the target's; a sequence takes its own held tokens and a quarter as many again
    most = c.kv_tokens / (held * 1.25)
    assert 0.95 * most - 1 <= c.seqs <= most

"""KV offload to host RAM (issue 26 item 4): the hits a host tier adds (core/reuse.py: an inclusive copy, so
only a tier larger than the GPU pool's room adds any), the copy over the card's host link against computing
the tokens again, `deploy --kv-offload-gb` using it where it helps, and the launch flags, checked against the
engines' option lists as tests/test_launch.py checks every line."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cardfit.core import reuse as ru
from cardfit.runtimes import launch
from cardfit.services.deploy import DeployInput, deploy_report
from tests.test_launch import options

R = ru.OffloadReason
WHOLE = 1300.0  # reusable tokens per request in these cases


@pytest.mark.parametrize(("with_host", "gpu_only", "copy", "recompute", "reason"), [
    # nothing reused: nothing to keep, whatever the tier
    (ru.Hits(0, 0, 0), ru.Hits(0, 0, 0), 1e-6, 1e-4, R.NO_REUSE),
    # the GPU pool keeps every reused token already
    (ru.Hits(WHOLE, 0, WHOLE), ru.Hits(WHOLE, 0, WHOLE), 1e-6, 1e-4, R.GPU_HOLDS),
    # the host tier adds no hit (not larger than the GPU's room: it holds copies of the same blocks)
    (ru.Hits(650, 0, WHOLE), ru.Hits(650, 0, WHOLE), 1e-6, 1e-4, R.NOT_LARGER),
    # it adds hits but a copy takes longer than the recompute (a slow link, a small model)
    (ru.Hits(650, 650, WHOLE), ru.Hits(650, 0, WHOLE), 2e-5, 1e-5, R.SLOWER),
    # it adds hits, copied faster than computed
    (ru.Hits(650, 650, WHOLE), ru.Hits(650, 0, WHOLE), 1.3e-6, 8.2e-5, R.HELPS),
])
def test_offload_reason(with_host, gpu_only, copy, recompute, reason):
    assert ru.offload_reason(with_host, gpu_only, copy, recompute) is reason
    assert reason in ru.OFFLOAD_WHY


@pytest.mark.parametrize(("gen", "interconnect", "link", "expected", "why"), [
    (5, "nvlink", 900.0, 63.0, "an SXM card: its host link is a PCIe 5.0 x16, not its NVLink"),
    (4, "pcie", 16.0, 16.0, "a PCIe card's own link figure (an x8 card: RTX 4060)"),
    (4, "nvlink-bridge", 112.0, 31.5, "a bridge is between cards; the host link is PCIe 4.0 x16"),
    (None, "nvlink", 900.0, None, "no PCIe generation in the catalog: no figure"),
])
def test_host_link(gen, interconnect, link, expected, why):
    assert ru.host_link_gbps(gen, interconnect, link) == expected, why


def test_host_copy_time_hand_derived():
    """Llama 3.1 70B with an FP8 cache: 80 layers x 8 KV heads x 128 x 2 (K, V) x 1 B = 163,840 B a token;
    over two H100s' PCIe 5.0 x16 links (2 x 63 GB/s): 1.30 µs a token."""
    assert ru.host_load_s(1, 163_840, 126.0) == pytest.approx(1.3003e-6, rel=1e-4)
    assert ru.host_load_s(10_000, 163_840, 126.0) == pytest.approx(0.013003, rel=1e-4)


@given(host=st.floats(0, 1e7), more=st.floats(0, 1e7), pool=st.floats(0, 1e6), running=st.integers(0, 64),
       waiting=st.integers(0, 512), turns=st.integers(2, 20))
def test_a_larger_host_tier_never_hits_less_and_never_changes_the_gpu_hits(host, more, pool, running, waiting,
                                                                         turns):
    reuse = ru.Reuse(0, turns)
    kw = dict(pool_tokens=pool, running=running, sessions=running + waiting)
    none, a, b = (ru.hits(2000, 500, reuse, host_tokens=x, **kw) for x in (0.0, host, host + more))
    assert a.gpu_tokens == b.gpu_tokens == none.gpu_tokens
    assert b.cached_tokens >= a.cached_tokens - 1e-9 >= none.cached_tokens - 2e-9
    assert b.cached_tokens <= b.reusable_tokens * (1 + 1e-12)


@pytest.mark.parametrize(("runtime", "tp", "flags"), [
    # 100 GB = 93.13 GiB, the whole buffer over the ranks (vllm/config/cache.py kv_offloading_size)
    ("vllm", 2, ["--kv-offloading-backend", "native", "--kv-offloading-size", "93.13"]),
    # HiCache's --hicache-size is each rank's own pool: 100 GB over 2 ranks
    ("sglang", 2, ["--enable-hierarchical-cache", "--hicache-size", "50"]),
])
def test_launch_flags_exist_in_the_tool(runtime, tp, flags):
    known = options(runtime)
    cmd = launch.build(runtime, "meta-llama/Llama-3.1-70B-Instruct", tp=tp, max_model_len=25000,
                       max_num_seqs=64, kv_offload_gb=100)
    argv = list(cmd.argv)
    assert argv[-len(flags):] == flags
    for flag in cmd.flags():
        assert flag in known["flags"], f"{flag} is not an option of {known['tool']} {known['version']}"
    for flag, allowed in known.get("choices", {}).items():
        if flag in argv:
            assert argv[argv.index(flag) + 1] in allowed


def test_a_runtime_without_a_host_tier_is_refused():
    with pytest.raises(ValueError, match="no host KV tier"):
        launch.build("llama.cpp", "m.gguf", max_model_len=4096, kv_offload_gb=10)


# 3,000 conversations of 10 turns (2,000 new tokens, 500 answer tokens a turn) at 5 requests/s on Llama 3.1
# 70B: their histories (12,500 tokens each between turns) are far beyond the H100s' KV pools
LONG_CHATS = dict(model="meta-llama/Llama-3.1-70B-Instruct", ttft_ms=3000, tpot_ms=60, runtime="vllm",
                  gpu=("H100 SXM",), requests_per_s=5, sessions=3000, turns=10, input_tokens=2000,
                  output_tokens=500)


def _best(**kw):
    report = deploy_report(DeployInput(**{**LONG_CHATS, **kw}))
    return report.to_json()["best"], report.notes


def test_deploy_uses_a_host_tier_where_it_keeps_the_histories():
    plain, _ = _best()
    tiered, notes = _best(kv_offload_gb=1000)
    # without a host tier the cheapest set that meets the targets at the pessimistic end of the prefix-reuse
    # records' band is 112 cards, whose pools hold the histories too; the tier serves them from 24
    assert plain["kv_offload_gb"] == 0.0 and plain["count"] > 3 * tiered["count"]
    assert tiered["kv_offload_gb"] == 1000.0
    assert tiered["prefix_hit_rate"] > 0.5
    assert "--kv-offloading-backend native --kv-offloading-size 931.32" in tiered["command"]
    assert tiered["monthly_usd"] < plain["monthly_usd"]
    assert any("KV offload (1000 GB of host RAM per replica, pinned): used" in n for n in notes)


def test_deploy_says_why_a_host_tier_is_not_used():
    best, notes = _best(kv_offload_gb=100, sessions=None, turns=1, requests_per_s=None, users=8,
                        input_tokens=1000, output_tokens=300)
    assert best["kv_offload_gb"] == 0.0 and "--kv-offloading" not in best["command"]
    assert any("not used, the workload reuses no prompt tokens" in n for n in notes)
    best, notes = _best(kv_offload_gb=100, runtime="llama.cpp", model="llama3.1:8b", gpu=("RTX 4090",),
                        requests_per_s=None, users=2, sessions=None, turns=3, input_tokens=500,
                        output_tokens=200)
    assert best["kv_offload_gb"] == 0.0
    assert any("no host KV tier cardfit launches" in n for n in notes)


def test_sessions_need_turns(run_cli):
    code, _, err = run_cli("deploy", "llama3.1:8b", "--users", "2", "--sessions", "100")
    assert code == 2 and "give --turns too" in err and "Traceback" not in err


def _plan_notes(**kw):
    from cardfit.services.inputs import PlanInput
    from cardfit.services.plan import plan

    base = dict(model="meta-llama/Llama-3.1-70B-Instruct", gpu="H100 SXM", gpus=2, quant="fp8", context=32768)
    return [n for n in plan(PlanInput(**{**base, **kw})).ctx.notes if "offload" in n.lower()]


def test_plan_says_whether_the_tier_helps_on_the_card():
    """Two H100s hold about 218K tokens of the 70B's 16-bit cache (327,680 B a token) beside the weights:
    400 GB of host RAM hold 1.22 M tokens (more: it helps), 20 GB 61 K (fewer: it cannot)."""
    big = _plan_notes(kv_offload_gb=400)
    assert len(big) == 1 and "hold 1,220," in big[0] and "helps where the workload reuses" in big[0]
    assert "2.6 µs" in big[0]  # 327,680 B over 2 x 63 GB/s
    small = _plan_notes(kv_offload_gb=20)
    assert len(small) == 1 and "does not help here, the host tier is not larger" in small[0]
    assert _plan_notes(kv_offload_gb=400, runtime="llama.cpp", quant="Q4_K_M", model="llama3.1:8b")[0] \
        .startswith("--kv-offload-gb: llama.cpp")
    assert _plan_notes() == []


@pytest.mark.parametrize(("args", "message"), [
    (("plan", "llama-3.1-70b", "--gpu", "H100 SXM", "--gpus", "2", "--quant", "fp8", "--kv-offload-gb", "400",
      "--ram-gb", "256"), "--ram-gb gives 256"),
    (("max-context", "llama3.1:8b", "--gpu", "RTX 4090", "--kv-offload-gb", "8"), "does not change what"),
    (("plan", "llama3.1:8b", "--kv-offload-gb", "-1"), "kv-offload-gb"),
])
def test_bad_offload_input_is_one_line(run_cli, args, message):
    code, _, err = run_cli(*args)
    assert code == 2 and message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_speed_takes_host_hits_for_the_sessions_the_gpu_cannot_keep():
    from cardfit.services.speed import SpeedInput, speed_report

    kw = dict(model="llama-3.1-70b", quant="fp8", gpu="H100 SXM", gpus=2, runtime="vllm", input_tokens=2000,
              output_tokens=500, turns=10, sessions=100, concurrency=(8,))
    gpu_only = speed_report(SpeedInput(**kw)).rows[0]
    tiered = speed_report(SpeedInput(**kw, kv_offload_gb=400)).rows[0]
    assert gpu_only.prefix_hit_rate < 0.2 < 0.8 < tiered.prefix_hit_rate
    assert tiered.ttft_ms < gpu_only.ttft_ms


def test_the_web_api_takes_reuse_and_offload():
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from cardfit.web.app import create_app

    body = {k: v for k, v in LONG_CHATS.items() if k != "gpu"} | {"gpu": ["H100 SXM"], "kv_offload_gb": 1000}
    r = TestClient(create_app()).post("/api/deploy", json=body)
    assert r.status_code == 200, r.text
    best = r.json()["best"]
    assert best["kv_offload_gb"] == 1000.0 and best["prefix_hit_rate"] > 0.5
    bad = TestClient(create_app()).post("/api/deploy", json={**body, "shared_prefix_tokens": 5000})
    assert bad.status_code == 400 and "longer than the prompt" in bad.text


def test_plan_gpus_entries_carry_the_tier_where_it_can_help(run_json):
    args = ("plan", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100 SXM", "--gpus", "2", "--quant", "fp8",
            "--context", "32768", "--runtime", "vllm")
    plain = run_json(*args)["gpus"][0]
    big = run_json(*args, "--kv-offload-gb", "400")["gpus"][0]
    small = run_json(*args, "--kv-offload-gb", "20")["gpus"][0]
    assert plain["kv_offload_gb"] == 0.0 and "--kv-offloading" not in plain["command"]
    assert big["kv_offload_gb"] == 400.0
    assert big["command"].endswith("--kv-offloading-backend native --kv-offloading-size 372.52")
    assert small["kv_offload_gb"] == 0.0 and "--kv-offloading" not in small["command"]


def test_deploy_on_sglang_launches_hicache_per_rank():
    best, _ = _best(runtime="sglang", kv_offload_gb=1000)
    assert best["kv_offload_gb"] == 1000.0
    # HiCache's --hicache-size is each rank's pool: the replica's 1,000 GB over its TP ranks
    assert f"--enable-hierarchical-cache --hicache-size {1000 // best['tp']}" in best["command"]

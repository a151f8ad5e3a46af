"""`cardfit deploy` and the served-load timing under it (core/serving.py)."""

from __future__ import annotations

import itertools
import json
import math
import shlex
from dataclasses import replace
from functools import cache

import pytest

from cardfit.core import serving as sv
from cardfit.core import speed as sp
from cardfit.errors import InputError
from cardfit.services.deploy import DeployInput, deploy_report
from cardfit.services.inputs import parse

# the aic-* records built from whole CSV rows by a generator, not by hand (serving_aic_dp_ep.toml,
# serving_aic_pd.toml): the tests of the hand-made aic-* records of serving.toml leave them out
GENERATED = ("aic-dpep-row-", "aic-pd-row-")
DEPLOYMENT_KEYS = {"gpu", "count", "nodes", "tp", "pp", "replicas", "runtime", "quant", "kv_dtype",
                   "max_num_seqs", "monthly_usd", "cost_per_million_usd", "ttft_ms", "tpot_ms",
                   "aggregate_tokens_per_s", "per_user_tokens_per_s", "command"}


@cache
def report(**kw) -> dict:
    return deploy_report(DeployInput(**kw)).to_json()


# --- queueing formulas: textbook values -------------------------------------------------------------------

@pytest.mark.parametrize(("servers", "offered", "expected", "why"), [
    (1, 0.5, 0.5, "M/M/1: an arrival waits with probability rho"),
    (2, 1.0, 1 / 3, "M/M/2 at a = 1: C = (a^2/2 · 1/(1-a/2)) / (1 + a + a^2/2 · 1/(1-a/2)) = 1/3"),
    (3, 2.0, 4 / 9, "M/M/3 at a = 2: 4/9 (Erlang C table)"),
    (200, 100.0, 0.0, "far below capacity: practically nobody waits"),
])
def test_erlang_c(servers, offered, expected, why):
    assert sv.erlang_c(servers, offered) == pytest.approx(expected, abs=1e-9), why


def test_allen_cunneen_is_exact_for_mm1_and_md1():
    # M/M/1, rho = 0.8, S = 1: Wq = rho / (1 - rho) · S = 4; M/D/1 (Cs² = 0): half of it (Pollaczek–Khinchine)
    assert sv.wait_s(1, 0.8, 1.0, 1.0)[0] == pytest.approx(4.0)
    assert sv.wait_s(1, 0.8, 1.0, 0.0)[0] == pytest.approx(2.0)
    assert sv.wait_s(1, 1.0, 1.0, 0.0)[0] == math.inf


def test_lognormal_cv2_round_trips():
    sigma = 0.6
    mean = math.exp(sigma ** 2 / 2)  # mu = 0
    p90 = math.exp(1.2815515655446004 * sigma)
    assert sv.lognormal_cv2(mean, p90) == pytest.approx(math.exp(sigma ** 2) - 1, rel=1e-9)
    assert sv.lognormal_cv2(300, 300) == 0.0


# --- the served-load model: monotone in load, physical limits ----------------------------------------------

def _replica(pp: int = 1, seqs: int = 256) -> sv.Replica:
    shares = sp.Shares(1.0, 0.0, 0.0, 1.0, "params")
    load = sp.Load(16_000_000_000, shares, 131_072 * 1150, 1.6e10, 32, 4096)
    machine = sp.Machine(3350.0, 989.0, 1, decode_efficiency=0.873, overhead_s_per_layer=55.4e-6,
                         overhead_s_per_sequence=456e-6, compute_efficiency=0.81)
    return sv.Replica(sv.stage(load, pp), machine, 1.7e10, 8192, seqs, pp, 20e-6 if pp > 1 else 0.0, 50.0)


def test_tpot_and_ttft_grow_with_the_arrival_rate():
    r = _replica()
    served = [sv.serve(r, sv.Workload(1000, 300, requests_per_s=x)) for x in (0.5, 1, 2, 4)]
    assert all(a.tpot_s <= b.tpot_s for a, b in zip(served, served[1:], strict=False))
    assert all(a.ttft_s <= b.ttft_s for a, b in zip(served, served[1:], strict=False))
    assert all(a.batch < b.batch for a, b in zip(served, served[1:], strict=False))


def test_littles_law_holds_at_the_answer():
    r = _replica()
    w = sv.Workload(1000, 300, requests_per_s=4)
    s = sv.serve(r, w)
    in_service = 4 * (sv.prefill_s(r, w, s.batch) + 299 * sv.tpot_s(r, w, s.batch))
    assert s.batch == pytest.approx(in_service, rel=0.03)
    # a stable open load serves what arrives, rate x O (flow conservation); B / TPOT (1,202.7 here) counted
    # the requests still prefilling as decoding
    assert s.output_tokens_per_s == pytest.approx(4 * 300)


def test_overload_is_unstable_not_fast():
    r = _replica(seqs=16)
    s = sv.serve(r, sv.Workload(1000, 300, requests_per_s=1000))
    assert not s.stable and s.ttft_s == math.inf


def test_closed_loop_users_beyond_the_slots_wait():
    r = _replica(seqs=8)
    few = sv.serve(r, sv.Workload(1000, 300, users=8))
    many = sv.serve(r, sv.Workload(1000, 300, users=32))
    # 24 users beyond the 8 slots: each waits 24 / 8 times a request's time in service (8 x 300 tokens at
    # the served rate) for a slot (Little's law in the closed loop); the 8 in service are timed as before
    in_service = 8 * 300 / few.output_tokens_per_s
    assert many.ttft_mean_s - few.ttft_mean_s == pytest.approx(3 * in_service, rel=1e-6)
    assert many.batch == few.batch and many.output_tokens_per_s == few.output_tokens_per_s


def test_pipeline_stages_add_bubbles_for_one_sequence():
    """One request decoding on 2 stages reads the same bytes as on one card, plus a network hop: never
    faster. (A step that carries another request's prompt is faster on two stages: its chunk's FLOPs run on
    two cards.)"""
    one, two = _replica(1), _replica(2)
    w = sv.Workload(0, 300, users=1)
    assert sv.tpot_s(two, w, 1) >= sv.tpot_s(one, w, 1)
    assert sv.step_s(two, 1, 1000) < sv.step_s(one, 1, 1000)


def test_steady_state_steps_carry_whole_prompt_chunks():
    """1,000-token prompts, 300-token answers, 64 decoding: 213 prompt tokens a step on average, carried as
    one whole prompt in 21 % of the steps (the rest decode alone). Their mean is longer than a step carrying
    the average: the prompt's FLOPs do not hide under the weight reads."""
    r = _replica()
    w = sv.Workload(1000, 300)
    share = 64 * 1000 / 300 / 1000
    lumpy = (1 - share) * sv.step_s(r, 64, 0) + share * sv.step_s(r, 64, 1000)
    assert sv.tpot_s(r, w, 64) == pytest.approx(lumpy)
    assert sv.tpot_s(r, w, 64) > sv.step_s(r, 64, 64 * 1000 / 300) * 1.02
    # more prompt tokens a step than a chunk: every step carries them
    assert sv.tpot_s(r, sv.Workload(1000, 10), 64) == pytest.approx(sv.step_s(r, 64, 6400))
    # no prompt: the decode step itself
    assert sv.tpot_s(r, sv.Workload(0, 300), 64) == sv.step_s(r, 64, 0)


def test_moe_steps_touch_more_experts_with_more_tokens():
    shares = sp.Shares(0.1, 0.9, 0.0, 8 / 128, "params")
    load = sp.Load(60_000_000_000, shares, 100_000, 6e9, 48, 2048)
    machine = sp.Machine(3350.0, 989.0, 1, decode_efficiency=0.873)
    r = sv.Replica(load, machine, 6e9, 8192, 256)
    times = [sv.step_s(r, b, 0) for b in (1, 4, 16, 64)]
    assert times == sorted(times) and times[-1] > 3 * times[0]


def test_a_prompt_step_past_the_graph_size_pays_the_eager_launch_per_layer():
    """vLLM V1 replays CUDA graphs up to min(2 x max_num_seqs, 512) tokens (vllm/config/vllm.py
    _set_cudagraph_sizes); a larger step carrying a prompt launches its kernels from the CPU one by one:
    0.8 ms per layer (aiconfigurator-core 0.12.0, sdk/backends/vllm_backend.py _prefill_dispatch_overhead_ms).
    Decode steps (graphs) and small prompt steps do not pay it; a pipeline pays it on every stage."""
    base = _replica()
    mc = replace(base.machine, overhead_s_per_layer_prefill=800e-6, prefill_graph_tokens=512)
    eager = replace(base, machine=mc)
    assert sv.eager_s(eager, 8, 0) == 0.0  # a decode step: a graph
    assert sv.eager_s(eager, 8, 200) == 0.0  # 208 tokens: inside the largest graph
    assert sv.eager_s(eager, 8, 1000) == pytest.approx(32 * 800e-6)  # 32 layers x 0.8 ms
    few = replace(eager, max_seqs=4)  # vLLM captures at most 2 x max_num_seqs tokens: 8
    assert sv.eager_s(few, 4, 100) == pytest.approx(32 * 800e-6)
    # ... of the max_num_seqs it was started with: a KV pool holding 4 sequences of an engine started with
    # 256 leaves its 512-token graphs as they were (issue 24)
    pooled = replace(few, engine_seqs=256)
    assert sv.eager_s(pooled, 4, 100) == 0.0
    assert sv.eager_s(pooled, 4, 1000) == pytest.approx(32 * 800e-6)
    assert sv.prompt_step_s(eager, 8, 1000) == pytest.approx(sv.step_s(eager, 8, 1000) + 32 * 800e-6)
    w = sv.Workload(1000, 300)
    assert sv.prefill_s(eager, w, 8) - sv.prefill_s(base, w, 8) == pytest.approx(32 * 800e-6, rel=0.02)
    two = sv.Replica(sv.stage(base.load, 2), eager.machine, base.prefill_flops_per_token, 8192, 256, 2)
    assert sv.eager_s(two, 8, 1000) == pytest.approx(32 * 800e-6)  # 16 layers on each of 2 stages
    # the average step of the steady state is timed on the GPU alone (eager_s docstring in tpot_s)
    assert sv.tpot_s(eager, w, 8) == sv.tpot_s(base, w, 8)


def test_the_engines_prompt_steps_are_eager_where_they_capture_decode_only():
    """The runtime rows carry the eager launch time of a prompt step (data/runtimes.toml): vLLM past its
    512-token graphs, SGLang and TensorRT-LLM for every prompt step (decode-only graphs)."""
    from cardfit.catalog.runtimes import default_runtimes

    rts = default_runtimes()
    for rid, graph, ahead in (("vllm", 512, 0), ("sglang", 0, 1), ("trtllm", 0, 1)):
        rt = rts.get(rid)
        assert (rt.prefill_graph_tokens, rt.prefill_overhead_us_per_layer) == (graph, 800.0)
        assert rt.schedule_ahead_steps == ahead  # vLLM V1 schedules after the step ends (no async scheduling)
    assert rts.get("llama.cpp").prefill_overhead_us_per_layer == 0.0


def test_an_overlap_scheduler_makes_a_new_request_wait_one_step_more():
    """TensorRT-LLM's PyTorch backend and SGLang launch step n + 1 before they look at new requests
    (TensorRT-LLM docs/source/torch/features/overlap_scheduler.md; SGLang event_loop_overlap): a request that
    arrives while step n runs is prefilled in step n + 2, one step later than on vLLM V1; an idle engine
    takes it at once."""
    base = _replica(seqs=64)
    ahead = replace(base, schedule_ahead=1)
    w = sv.Workload(1000, 300, users=16)
    now, later = sv.serve(base, w), sv.serve(ahead, w)
    # one step more (the closed loop's fixed point moves the batch a little with it)
    assert later.ttft_mean_s - now.ttft_mean_s == pytest.approx(now.tpot_s, rel=0.01)
    assert later.tpot_s == pytest.approx(now.tpot_s, rel=0.01)
    # a lone request meets an idle engine: no step to wait for
    one = sv.Workload(1000, 300)
    assert sv.rounds(ahead, one, 1, 1, False)[0] == sv.rounds(base, one, 1, 1, False)[0]
    # 8 users prefilled two a step (a 2,048-token budget): their answers end in different steps, so the next
    # requests arrive while the others decode, and wait one step more
    small = replace(base, chunk_tokens=2048)
    t0, _, _ = sv.rounds(small, one, 8, 40, False)
    t1, _, _ = sv.rounds(replace(small, schedule_ahead=1), one, 8, 40, False)
    assert t1[:8] == t0[:8]  # the first burst meets an idle engine
    assert sum(t1[8:]) > sum(t0[8:]) + 32 * sv.step_s(small, 7, 0.0)


def test_a_lockstep_engine_steps_every_round_of_an_equal_length_benchmark():
    """TensorRT-LLM's PyTorch backend keeps an equal-length closed-loop benchmark in lockstep rounds
    (runtimes.toml lockstep_rounds: aiconfigurator-core 0.12.0 models its TTFT as prompts that arrive
    together, its vLLM TTFT as a steady state): every round is stepped as the first, so a later request meets
    the prompts sent with it, not the steady state of `serve`. The benchmark is then `rounds` itself; answers
    of unequal length (fixed_lengths False) spread out and keep the steady state."""
    from cardfit.catalog.runtimes import default_runtimes

    rts = default_runtimes()
    assert rts.get("trtllm").lockstep_rounds and "_ttft_queuing_factor" in rts.get("trtllm").lockstep_source
    assert not rts.get("vllm").lockstep_rounds and not rts.get("sglang").lockstep_rounds
    r = replace(_replica(seqs=64), chunk_tokens=2560, schedule_ahead=1)
    w = sv.Workload(1024, 512, users=8)
    steady = sv.benchmark(r, w, 8, 80, False)
    lock = sv.benchmark(r, w, 8, 80, False, lockstep=True)
    ttfts, tpots, seconds = sv.rounds(r, w, 8, 80, False)
    assert lock.ttft_mean_s == pytest.approx(sum(ttfts) / 80, rel=1e-12) and lock.seconds == seconds
    assert lock.ttft_mean_s > steady.ttft_mean_s  # later rounds queue their prompts behind each other
    assert sv.benchmark(r, w, 8, 80, False, fixed_lengths=False, lockstep=True) == steady


def test_a_tensorrt_engine_record_pays_neither_python_dispatch_nor_the_overlap_step():
    """NVIDIA NIM's TensorRT-LLM profiles are engines run by the C++ runtime: a prompt step launches no Python
    kernels one by one and there is no overlap scheduler. NIM 1.8.0, Llama-3.1-8B FP8 on one H100, 500 prompt
    tokens at one request: TTFT 13.84 ms (NVIDIA NIM LLM benchmarking guide, as transcribed in
    zivbeker42/llm-guesstimator tested_benchmarks/nim_llama3.1_8b_v1.8.0_1xH100_80GB.csv)."""
    from cardfit.validation.serving import predict_serving, tensorrt_engine

    r = {"id": "nim-8b-c1", "kind": "serving", "model": "llama-3.1-8b", "quant": "fp8", "runtime": "trtllm",
         "gpu": "H100 SXM", "gpus": 1, "input_tokens": 500, "output_tokens": 2000, "concurrency": 1,
         "load": "closed", "requests": 10, "fixed_lengths": True, "metric": "ttft_ms", "statistic": "mean",
         "measured": 13.84,
         "settings": {"tp": 1, "pp": 1, "version": "NIM 1.8.0 (TensorRT-LLM profile fp8 TP1)"}}
    pytorch = {**r, "settings": {"tp": 1, "pp": 1, "version": "1.0.0rc3"}}
    assert tensorrt_engine(r) and not tensorrt_engine(pytorch)
    assert tensorrt_engine({**pytorch, "settings": {"backend": "tensorrt"}})
    engine, eager = predict_serving(r)[0], predict_serving(pytorch)[0]
    assert engine == pytest.approx(13.84, rel=0.25)
    # 32 layers of 0.8 ms of Python dispatch; the PyTorch backend's benchmark is stepped round by round
    # (lockstep_rounds); both emit a token's response one decode step late (runtimes.toml response_lag_steps:
    # TensorRT-LLM PR 14061), so the lone request's TTFT is its prefill plus one step (13.8 ms measured)
    step = predict_serving({**r, "metric": "tpot_ms"})[0]
    assert eager - engine >= 32 * 0.8 - step


def test_a_vllm_v0_record_launches_every_prompt_step_eagerly():
    """vLLM V0 replays a graph only for decode-only steps (vllm/worker/model_runner.py _use_captured_graph:
    'decode_only and not ... enforce_eager and ...'), so even a prompt of 80 tokens, which V1 runs inside its
    piecewise graphs (up to 512 tokens), pays the eager dispatch of all 126 layers of Llama 3.1 405B. dstack's
    vLLM 0.6.3 on 8x MI300X, one request of ~80 prompt tokens: TTFT 314.58 ms (dstackai/benchmarks
    amd/tgi_vs_vllm/vllm/data/result_vllm_short.csv)."""
    from cardfit.catalog.runtimes import default_runtimes
    from cardfit.validation.serving import predict_serving

    assert default_runtimes().get("vllm@0.6.3").prefill_graph_tokens == 0
    assert default_runtimes().get("vllm@0.8").prefill_graph_tokens == 512
    r = {"id": "dstack-405b-n1", "kind": "serving", "model": "llama-3.1-405b", "quant": "bf16",
         "runtime": "vllm", "gpu": "MI300X", "gpus": 8, "input_tokens": 80, "output_tokens": 85,
         "request_rate": "inf",
         "load": "burst", "requests": 1, "fixed_lengths": False, "metric": "ttft_ms", "statistic": "mean",
         "measured": 314.58, "settings": {"tp": 8, "pp": 1, "version": "0.6.3.dev116+g151ef4ef"}}
    v1 = {**r, "settings": {"tp": 8, "pp": 1, "version": "0.10.1"}}
    v0_ttft, v1_ttft = predict_serving(r)[0], predict_serving(v1)[0]
    assert v0_ttft - v1_ttft >= 126 * 0.8 * 0.99  # 126 layers of 0.8 ms eager dispatch
    assert v0_ttft < 314.58  # still short of it: V0's Triton prompt path on ROCm is not in the model


def test_a_vllm_v1_record_before_async_scheduling_pays_the_engine_loop_per_sequence():
    """vLLM V1 ran schedule() -> execute_model() -> update_from_output() in one thread until 0.14.0 made async
    scheduling the default (vllm/v1/engine/core.py EngineCore.step at v0.10.1.1; v0.14.0 release notes, PR
    #27614): a step of B sequences pays the fitted time per sequence on top of the GPU step. Dennis Lee's
    vLLM 0.10.1.1, Qwen2-7B on one A100 PCIe, 200 prompts of 1,024 + 1,024 tokens sent at once: mean TPOT
    40.34 ms (github.com/dennislee22/vLLM-benchmarking README.md, Test 5)."""
    from cardfit.catalog.runtimes import default_runtimes
    from cardfit.validation.serving import predict_serving, synchronous_loop

    vllm = default_runtimes().get("vllm")
    r = {"id": "dennislee-n200", "kind": "serving", "model": "qwen2-7b", "quant": "bf16", "runtime": "vllm",
         "gpu": "A100 PCIe 80GB", "gpus": 1, "input_tokens": 1024, "output_tokens": 1024,
         "request_rate": "inf", "load": "burst", "requests": 200, "fixed_lengths": True, "metric": "tpot_ms",
         "statistic": "mean", "measured": 40.34,
         "settings": {"tp": 1, "pp": 1, "version": "0.10.1.1", "gpu_memory_utilization": 0.5}}
    current = {**r, "settings": {**r["settings"], "version": "0.14.0"}}
    opted = {**r, "settings": {**r["settings"], "async_scheduling": True}}
    v0 = {**r, "settings": {**r["settings"], "version": "0.7.3"}}
    unstated = {**r, "settings": {**r["settings"], "version": "not stated"}}
    assert synchronous_loop(r)
    assert not any(synchronous_loop(x) for x in (current, opted, v0, unstated))
    sync, overlapped = predict_serving(r)[0], predict_serving(current)[0]
    per = vllm.decode_overhead_us_per_sequence_sync
    assert 20 <= per <= 200  # tens of microseconds of Python per request per step
    assert sync - overlapped >= 0.5 * 200 * per / 1e3  # most of the 200 sequences decode in most steps
    # +33 % since MLPerf v5.1's Red Hat vLLM 0.10.0 runs (a fourth publisher of the synchronous loop) moved
    # the fitted time per sequence 86 -> 120 us (median of the publishers' medians): new evidence, not a
    # change of the model, and this record's own source still fits lower
    assert sync == pytest.approx(40.34, rel=0.35) and overlapped < 0.8 * 40.34
    rocm = {**r, "model": "llama-3.1-8b", "gpu": "MI300X"}  # not charged where no record measures it
    assert predict_serving(rocm)[0] == predict_serving({**rocm, "settings": current["settings"]})[0]


# --- the deploy service -------------------------------------------------------------------------------------

def _check_deployment(d: dict, w: dict, meets: bool) -> None:
    assert DEPLOYMENT_KEYS <= set(d)
    assert d["count"] == d["tp"] * d["pp"] * d["replicas"]
    mem = d["memory"]
    assert mem["free_bytes"] >= 0 and mem["need_bytes"] <= mem["budget_bytes"]
    if meets:
        assert d["ttft_ms"] <= w["ttft_ms"] and d["tpot_ms"] <= w["tpot_ms"]


def test_llama_8b_on_vllm_meets_its_targets_with_the_command():
    r = report(model="meta-llama/Llama-3.1-8B-Instruct", users=64, ttft_ms=2000, tpot_ms=50, runtime="vllm")
    assert r["meets_targets"] and r["failing"] is None
    b = r["best"]
    _check_deployment(b, r["workload"], True)
    assert b["runtime"] == "vllm" and b["command"].startswith("vllm serve meta-llama/Llama-3.1-8B-Instruct")
    assert f"--max-model-len {r['workload']['max_model_len']}" in b["command"]
    assert r["headroom"] >= 1
    for d in r["pareto"]:
        _check_deployment(d, r["workload"], True)
    assert min(d["monthly_usd"] for d in r["pareto"]) == b["monthly_usd"]


def test_the_search_schedules_up_to_the_engines_own_cap_on_the_card():
    """vLLM V1 schedules up to 1,024 sequences on an H100 when --max-num-seqs is not given
    (runtimes.toml max_num_seqs_big_card, vllm/engine/arg_utils.py default_max_num_seqs for the OpenAI API
    server); the search once capped a replica at the profile's 256, so 600 users on one H100 queued behind
    it (TTFT 8.6 s) where the engine would have admitted them all."""
    r = report(model="meta-llama/Llama-3.1-8B-Instruct", users=600, input_tokens=1000, output_tokens=300,
               runtime="vllm", gpu=("H100 SXM",), max_cards=1)
    d = r["best"] or r["closest"]
    assert d["count"] == 1 and 600 <= d["max_num_seqs"] <= 1024
    assert f"--max-num-seqs {d['max_num_seqs']}" in d["command"]
    assert d["ttft_ms"] < 1000


def test_best_is_the_cheapest_that_meets():
    r = report(model="meta-llama/Llama-3.1-8B-Instruct", requests_per_s=4, ttft_ms=1500, tpot_ms=40,
               runtime="vllm", gpu=("L40S", "H100 SXM", "RTX 4090"))
    costs = [d["monthly_usd"] for d in r["pareto"]]
    assert r["best"]["monthly_usd"] == min(costs)


def test_the_memory_bound_is_pessimistic():
    """Every chosen deployment keeps the need's error bar (data/accuracy.toml) free."""
    r = report(model="meta-llama/Llama-3.1-70B-Instruct", requests_per_s=1, tpot_ms=60, runtime="vllm",
               quant="fp8")
    assert r["pareto"]
    for d in r["pareto"]:
        assert d["memory"]["margin_bytes"] > 0
        assert d["memory"]["free_bytes"] >= d["memory"]["margin_bytes"]


def test_a_set_keeps_the_error_bar_of_the_whole_set():
    """A set of cards keeps free the error bar of its whole need (every card's overhead and workspace, each
    copy of the cache), as plan does: larger sets of the same card and setting keep more free."""
    from cardfit.services.deploy import candidates, settings

    inp = DeployInput(model="meta-llama/Llama-3.1-70B-Instruct", requests_per_s=1, tpot_ms=60,
                      runtime="vllm", quant="fp8", gpu=("H100 SXM",))
    sets, _ = settings(inp)
    by: dict[tuple, dict[int, int]] = {}
    for c in candidates(inp, sets):
        by.setdefault((id(c.setting), c.gpu.name), {})[c.cards] = c.margin_bytes
    grown = [m for m in by.values() if len(m) > 1]
    assert grown
    for margins in grown:
        counts = sorted(margins)
        assert all(margins[a] < margins[b] for a, b in itertools.pairwise(counts)), margins


def test_nothing_meets_names_the_target_and_the_closest():
    r = report(model="meta-llama/Llama-3.1-70B-Instruct", users=4, tpot_ms=1, runtime="vllm", gpu=("L40S",))
    assert not r["meets_targets"] and r["best"] is None
    assert r["failing"]["target"] == "tpot_ms" and r["failing"]["ratio"] > 1
    assert r["closest"]["tpot_ms"] > 1


@pytest.mark.parametrize(("args", "target", "achieved", "limit", "words"), [
    (("meta-llama/Llama-3.1-8B-Instruct", "--users", "32", "--budget-usd-month", "1"), "budget", 190.0, 1,
     "Nothing within the budget: the cheapest set that holds the model, 1× RTX A5000"),
    (("meta-llama/Llama-3.1-70B-Instruct", "--users", "32", "--quant", "bf16", "--gpu", "H100",
      "--max-cards", "1"), "max_cards", 2, 1,
     "Nothing within --max-cards: the smallest set that holds the model is 2× H100 SXM (BF16)"),
    (("meta-llama/Llama-3.1-8B-Instruct", "--users", "32", "--gpu", "B200", "--max-cards", "1"), "max_cards",
     2, 1, "(B200 rents in sets of at least 2), more than --max-cards 1"),
    (("meta-llama/Llama-3.1-405B-Instruct", "--users", "2", "--gpu", "RTX 4090", "--max-nodes", "1"),
     "memory", None, None, "Nothing holds the model: no set of the cards given holds Llama 3.1 405B"),
])
def test_no_answer_says_why_and_exits_3(run_cli, args, target, achieved, limit, words):
    """Issue 25.4: with nothing within the budget or the card limit, deploy printed 'Nothing meets the
    targets: ' with no reason and exited 0. The answer (text or JSON) says why, then one `Error:` line on
    stderr, exit status 3 (bad input stays 2)."""
    code, out, err = run_cli("deploy", *args, env={"COLUMNS": "300"})
    assert code == 3 and words in out, out
    assert err.startswith("Error: ") and len(err.strip().splitlines()) == 1
    code, js, err = run_cli("deploy", *args, "--json")
    r = json.loads(js)
    assert code == 3 and r["best"] is None and r["closest"] is None and not r["meets_targets"]
    f = r["failing"]
    assert (f["target"], f["achieved"], f["limit"]) == (target, achieved, limit) and f["text"] in err


def test_an_answer_exits_0(run_cli):
    code, _, err = run_cli("deploy", "meta-llama/Llama-3.1-8B-Instruct", "--users", "8", "--gpu", "L40S",
                           "--runtime", "vllm", "--json")
    assert (code, err) == (0, "")


@pytest.mark.parametrize(("target", "value", "flag"), [
    ("tpot_ms", 1, "--tpot-ms"),
    ("ttft_ms", 2, "--ttft-ms"),  # (10 ms once: 8x B200 TP 8 prefills 1,000 tokens in ~4 ms in graphs)
])
def test_a_target_out_of_reach_is_said_plainly(target, value, flag):
    """Issue 25.5: with TTFT 10 ms for 200 users the closest was 16,384× B200 (TP 8 × PP 4 × 512 replicas,
    $57M/month). A target no deployment reaches even for one request alone is named as such, with the best
    one request reaches; the closest takes no more replicas than users and no nodes it does not need."""
    r = report(model="meta-llama/Llama-3.1-8B-Instruct", users=200, gpu=("B200", "H100 SXM"),
               **{target: value})
    f, near = r["failing"], r["closest"]
    assert r["best"] is None and f["target"] == target
    assert "however many replicas: one request alone takes" in f["text"] and flag in f["text"]
    assert near["replicas"] <= 200 and near["pp"] == 1 and near["nodes"] == near["replicas"]
    assert near[target] > value


def test_no_more_replicas_than_users():
    """Issue 25.5: 104× RTX 3060 (TP 8 × 13 replicas) for a 70B: a closed loop of N users holds at most N
    requests, so a replica past the N-th idles."""
    for users, tpot_ms in ((2, 100), (5, 100), (3, 5)):  # TPOT 5 ms: out of reach, the closest is shown
        r = report(model="meta-llama/Llama-3.1-70B-Instruct", users=users, gpu=("RTX 3060",), runtime="vllm",
                   quant="awq", tpot_ms=tpot_ms)
        assert r["pareto"]
        for d in r["pareto"]:
            assert d["replicas"] <= users, d


@pytest.mark.parametrize("gpu", ["B200", "H100 SXM", "RTX 4090"])
def test_no_pipeline_split_across_nodes_for_a_model_one_node_holds(gpu):
    """A card and setting with a set inside one node that holds the model offers no set spanning nodes."""
    from cardfit.services.deploy import candidates, settings

    inp = DeployInput(model="meta-llama/Llama-3.1-8B-Instruct", users=8, gpu=(gpu,))
    one: set[tuple] = set()
    cands = candidates(inp, settings(inp)[0])
    for c in cands:
        if c.nodes == 1:
            one.add((id(c.setting.ctx), c.setting.mem.kv_dtype, c.setting.slots))
    assert one
    assert not [c for c in cands if c.nodes > 1 and (id(c.setting.ctx), c.setting.mem.kv_dtype,
                                                    c.setting.slots) in one]
    big = DeployInput(model="meta-llama/Llama-3.1-405B-Instruct", users=8, gpu=("H100 SXM",), quant="bf16",
                      runtime="vllm")
    assert any(c.nodes > 1 for c in candidates(big, settings(big)[0])), "a model one node cannot hold spans"


@pytest.mark.parametrize(("runtime", "users", "gpu", "started"), [
    ("vllm", 1000, "L40S", "--data-parallel-size"),
    ("llama.cpp", 200, "RTX 4090", None),
])
def test_the_command_starts_every_replica_or_says_how(runtime, users, gpu, started):
    """Issue 25.6: the command of a deployment of several replicas started one. In one node vLLM serves them
    all with --data-parallel-size; llama.cpp has no data parallelism: a note says to run one server each."""
    b = report(model="meta-llama/Llama-3.1-8B-Instruct", users=users, runtime=runtime, gpu=(gpu,))["best"]
    assert b["replicas"] > 1
    if started:
        assert f"{started} {b['replicas']} " in b["command"] + " "
    else:
        assert f"# {b['replicas']} replicas: run this command {b['replicas']} times" in b["command"]


@pytest.mark.parametrize(("mean", "p90", "sigma"), [
    (1133, 1898, 0.5),  # mu = ln 1000: mean e^(mu + σ²/2) 1,133, p90 e^(mu + 1.2816 σ) 1,898, p99 3,200
    (306, 430, 0.3),  # mu = ln 292.7 (answers): mean 306, p90 430, p99 588; a narrow spread
    (1000, 3000, None),  # p90 far above the mean: σ at its cap (core/serving.py lognormal_cv2), still ≥ p90
])
def test_the_context_holds_the_99th_percentile(mean, p90, sigma):
    """Issue 25.6: --max-model-len was the stated request (the mean, or the p90 with a spread), so every
    longer request was refused. With a spread it is the log-normal's 99th percentile (z = 2.3263)."""
    from cardfit.services.deploy import longest

    n = longest(mean, p90)
    assert n >= p90 and longest(mean, None) == mean
    if sigma is not None:
        mu = math.log(mean) - sigma ** 2 / 2
        assert n == pytest.approx(math.exp(mu + 2.3263478740408408 * sigma), rel=0.01)


def test_the_launched_context_is_the_sized_one_and_within_the_model():
    r = report(model="meta-llama/Llama-3.1-8B-Instruct", users=2, runtime="vllm", gpu=("H100 SXM",),
               input_tokens=60_000, input_tokens_p90=120_000, output_tokens=1000, output_tokens_p90=2000,
               ttft_ms=600_000, tpot_ms=1000)
    n = r["workload"]["max_model_len"]
    assert n == 131_072  # the 99th percentile passes the trained maximum: held at it
    assert f"--max-model-len {n} " in (r["best"] or r["closest"])["command"]


def test_a_default_search_names_no_checkpoint_it_cannot_serve():
    """Issue 25.6: INT4 (AWQ) and TensorRT-LLM FP8 picks named the BF16 repository (the 70B case runs out
    of memory as printed). The default search keeps to what the line can serve from the checkpoint it
    names: the model's own format, or one the engine quantizes to on load (--quantization fp8); the rest is
    a note."""
    r = report(model="meta-llama/Llama-3.1-70B-Instruct", users=32)
    for d in r["pareto"]:
        assert d["quant"] in ("BF16", "FP8 (E4M3)"), d
        assert "16-bit checkpoint" not in d["command"]
        if d["quant"] != "BF16":
            assert d["runtime"] in ("vllm", "sglang") and "--quantization fp8" in d["command"]
    assert any(n.startswith("left out: INT4 g128 (AWQ/GPTQ) on ") for n in r["notes"])
    asked = report(model="meta-llama/Llama-3.1-70B-Instruct", users=32, quant="awq", runtime="vllm")["best"]
    assert "serve a checkpoint quantized as INT4 g128 (AWQ/GPTQ) in its place" in asked["command"]


@pytest.mark.parametrize(("model", "runtime", "start"), [
    ("meta-llama/Llama-3.1-8B-Instruct", "sglang", "python -m sglang.launch_server"),
    ("meta-llama/Llama-3.1-8B-Instruct", "trtllm", "trtllm-serve"),
    ("qwen3:30b-a3b", "llama.cpp", "llama-server"),
    ("qwen3:30b-a3b", "ollama", "OLLAMA_CONTEXT_LENGTH="),
    ("Qwen/Qwen3-30B-A3B", "vllm", "vllm serve"),
])
def test_every_runtime_answers_with_its_command(model, runtime, start):
    r = report(model=model, users=8, runtime=runtime)
    d = r["best"] or r["closest"]
    assert d["runtime"] == runtime
    assert start in d["command"]


def test_trtllm_is_never_planned_on_amd():
    r = report(model="meta-llama/Llama-3.1-8B-Instruct", users=8, runtime="trtllm",
               gpu=("MI300X", "H100 SXM"))
    assert all(d["gpu"] != "MI300X" for d in r["pareto"])


def test_405b_in_bf16_spans_nodes_with_pipeline_parallel():
    r = report(model="meta-llama/Llama-3.1-405B-Instruct", requests_per_s=1, runtime="vllm", quant="bf16",
               gpu=("H100 SXM",))
    b = r["best"]
    assert b["tp"] == 8 and b["pp"] >= 2 and b["nodes"] >= 2
    assert "--pipeline-parallel-size" in b["command"]


def test_budget_and_card_limits_are_kept():
    r = report(model="meta-llama/Llama-3.1-8B-Instruct", requests_per_s=20, runtime="vllm", max_cards=2)
    for d in r["pareto"] + ([r["closest"]] if r["closest"] else []):
        assert d["count"] <= 2


def test_input_errors(run_cli):
    code, out, err = run_cli("deploy", "llama3.1:8b")
    assert code == 2 and err.startswith("Error:") and "--users" in err and len(err.strip().splitlines()) == 1
    with pytest.raises(InputError, match="tpot-ms or --tokens-per-s-per-user"):
        deploy_report(parse(DeployInput, {"model": "llama3.1:8b", "users": 2, "tpot_ms": 50,
                                          "tokens_per_s_per_user": 20}))


def test_cli_json_has_the_stable_keys(run_json):
    r = run_json("deploy", "meta-llama/Llama-3.1-8B-Instruct", "--users", "16", "--runtime", "vllm",
                 "--gpu", "L40S")
    assert {"workload", "meets_targets", "best", "pareto", "failing"} <= set(r)
    _check_deployment(r["best"], r["workload"], True)


@pytest.mark.parametrize(("args", "program"), [
    (("meta-llama/Llama-3.1-8B-Instruct", "--users", "32", "--runtime", "vllm", "--gpu", "L40S"),
     ["vllm", "serve"]),
    (("meta-llama/Llama-3.1-405B-Instruct", "--requests-per-s", "1", "--runtime", "vllm", "--quant", "bf16",
      "--gpu", "H100 SXM"), ["vllm", "serve"]),  # the longest line: PP over nodes, its head-node flags
    (("qwen3:30b-a3b", "--users", "4", "--runtime", "ollama", "--gpu", "RTX 4090"), ["ollama", "serve"]),
])
def test_the_printed_command_pastes_as_one_command(run_cli, args, program):
    """Issue 25.1: on a narrow terminal the command was broken at the width with real newlines, so a pasted
    `vllm serve` ran without the flags after the break. The printed command, split as the shell splits it,
    is the command of the JSON, whole (the argv of its one line: a newline in it would end the command)."""
    code, out, err = run_cli("deploy", *args, env={"COLUMNS": "60"})
    assert code == 0, err
    code, js, err = run_cli("deploy", *args, "--json")
    assert code == 0, err
    command = json.loads(js)["best"]["command"]
    assert "\n" not in command
    argv = shlex.split(command, comments=True)
    printed = [line for line in out.splitlines() if " ".join(program) in line]
    assert len(printed) == 1, out
    words = shlex.split(printed[0], comments=True)
    assert words == argv and words[words.index(program[0]):][:2] == program


def test_plan_entries_carry_the_split_and_the_command(run_json):
    """The stable JSON: plan's gpus entries gain tp, pp and replicas (count = tp × pp × replicas) and, where
    the set fits, the command that starts it (the same launch function as deploy)."""
    r = run_json("plan", "meta-llama/Llama-3.1-70B-Instruct", "--quant", "bf16", "--context", "8192",
                 "--runtime", "vllm")
    for g in r["gpus"]:
        assert g["count"] == g["tp"] * g["pp"] * g["replicas"]
        if g["verdict"] in ("fits", "tight"):
            assert g["command"].startswith("vllm serve meta-llama/Llama-3.1-70B-Instruct")
            assert f"--tensor-parallel-size {g['tp']}" in g["command"]
        else:
            assert "command" not in g
    multi = [g for g in r["gpus"] if g["count"] > 8]
    assert all(g["tp"] <= 8 and g["pp"] >= 2 for g in multi)  # beyond a node: pipeline stages, not TP


def test_a_record_states_the_share_of_the_card_its_engine_had():
    """Dennis Lee's vLLM runs of Qwen2-7B on one A100 80GB at --gpu-memory-utilization 0.25 (the server log:
    'Available KV cache memory: 5.01 GiB', about 94k tokens): the KV pool, and so the sequences that decode at
    once, come from that share, not from vLLM's default 0.9 (a pool of a million tokens)."""
    import re

    from cardfit.validation.serving import predict_serving
    from cardfit.validation.validate import all_records

    r = next(r for r in all_records() if r["id"] == "dennislee-qwen2-7b-a100-vllm-test4-n1000-1024x1024-tpot")
    assert r["settings"]["gpu_memory_utilization"] == 0.25

    def pool(rec: dict) -> int:
        return int(re.search(r"KV pool ([\d,]+) tokens", predict_serving(rec)[1])[1].replace(",", ""))

    stated = pool(r)
    settings = {k: v for k, v in r["settings"].items() if k != "gpu_memory_utilization"}
    default = pool({**r, "settings": settings})
    assert 60_000 < stated < 100_000 < 1_000_000 < default


def test_tensorrt_llm_admits_a_request_by_its_whole_length():
    """TensorRT-LLM's GUARANTEED_NO_EVICT capacity scheduler (its default) starts a request only when the KV
    blocks of its prompt and its whole answer are free; vLLM allocates blocks as tokens arrive, so its pool
    holds requests by the prompt and half the answer on average. The NIM 1.8.0 Llama 3.3 70B tables bear the
    first out: the sequences decoding at once (output tokens/s x ITL) at 500 + 2,000 tokens and 200 users and
    at 20,000 + 2,000 and 250 users fill one pool only when each holds its whole length."""
    from cardfit.catalog.runtimes import default_runtimes
    from cardfit.services.deploy import kv_held
    from cardfit.validation.validate import all_records

    rts = default_runtimes()
    trt, vllm = rts.get("trtllm"), rts.get("vllm")
    assert trt.kv_reserve_whole and "GUARANTEED_NO_EVICT" in trt.kv_reserve_source
    assert not vllm.kv_reserve_whole
    inp = DeployInput(model="llama3.1:8b", users=8, input_tokens=1000, output_tokens=2000)
    assert kv_held(inp, trt) == 3000
    assert kv_held(inp, vllm) == 2000
    recs = {r["id"]: r for r in all_records()}

    def decoding(run: str) -> float:  # Little's law: tokens/s x seconds per token
        base = f"nim-llama-3.3-70b-h100-fp8-tp2-{run}"
        return recs[base + "-output"]["measured"] * recs[base + "-itl"]["measured"] / 1000

    short, long_ = decoding("500x2000-c200"), decoding("20000x2000-c250")
    assert short * 2_500 == pytest.approx(long_ * 22_000, rel=0.02)  # whole lengths: one pool
    assert short * 1_500 < 0.7 * long_ * 21_000  # prompt + half the answer: no one pool


def test_nim_fp8_profiles_hold_an_fp8_kv_cache():
    """A NIM 1.8.0 TensorRT-LLM fp8 record is timed with an FP8 KV cache (ModelOpt's default for its FP8
    exports): Llama 3.1 8B at 20,000 + 2,000 tokens keeps 42 sequences decoding on one H100 (1,337.7 tokens/s
    at 31.6 ms ITL), 924k tokens, which the 16-bit pool cardfit sizes on that card (about 0.5 M) cannot hold;
    a record of another engine keeps the type it states (or the runtime's default)."""
    import re

    from cardfit.validation.serving import checkpoint_kv_dtype, predict_serving
    from cardfit.validation.validate import all_records

    recs = {r["id"]: r for r in all_records()}
    nim = recs["nim-llama-3.1-8b-h100-fp8-tp1-20000x2000-c250-itl"]
    assert checkpoint_kv_dtype(nim) == "fp8"
    assert checkpoint_kv_dtype(recs["aic-llama-3.1-8b-h100-trtllm-bf16-tp1-1024x512-c8-ttft"]) is None
    pool = int(re.search(r"KV pool ([\d,]+) tokens", predict_serving(nim)[1])[1].replace(",", ""))
    assert pool > 42 * 22_000


def test_aiconfigurator_trtllm_fp8_runs_hold_an_fp8_kv_cache():
    """aiconfigurator's TensorRT-LLM fp8 runs set an FP8 KV cache (its generator writes the sdk profile's
    kvcache_quant_mode, fp8 for the fp8 profile, into the engine's kv_cache_dtype): the records carry it in
    their settings. DeepSeek-R1 on 8x H200 at 1,024 + 8,192 tokens and 128 in flight measured a TTFT of 1.4 s,
    no queue: TensorRT-LLM admits by whole length, and 128 x 9,216 tokens fit the FP8 pool cardfit sizes,
    where the 16-bit pool on the same cards holds half as many."""
    import copy
    import re

    from cardfit.validation.serving import predict_serving
    from cardfit.validation.validate import all_records

    recs = {r["id"]: r for r in all_records()}
    r1 = recs["aic-deepseek-r1-h200-trtllm-fp8-tp8-1024x8192-c128-ttft"]
    assert r1["settings"]["kv_cache_dtype"] == "fp8" and "module_bridge.py" in r1["note"]
    # the generator's benchmark rule for the step budget: batch + input + 1,500, whole 32-token blocks
    assert r1["settings"]["max_num_tokens"] == 2_656 == -(-(128 + 1_024 + 1_500) // 32) * 32
    assert "kv_cache_dtype" not in recs["aic-llama-3.1-8b-h100-trtllm-bf16-tp1-1024x512-c8-ttft"]["settings"]

    def pool(r: dict) -> int:
        return int(re.search(r"KV pool ([\d,]+) tokens", predict_serving(r)[1])[1].replace(",", ""))

    sixteen = copy.deepcopy(r1)
    del sixteen["settings"]["kv_cache_dtype"]
    assert pool(r1) >= 128 * 9_216 > pool(sixteen)
    assert predict_serving(r1)[0] < 2 * r1["measured"] < predict_serving(sixteen)[0]


def test_aiconfigurator_vllm_runs_take_the_generators_step_budget():
    """aiconfigurator's generator writes max_num_tokens = max_batch_size + input + 1,500 into an aggregated
    vLLM run it benchmarks (rule_plugin/benchmark/vllm.rule), passed as --max-num-batched-tokens: every aic
    vLLM record carries it. With 2,652 tokens a step instead of vLLM's 8,192, the 128 prompts of 1,024 tokens
    that open a run at 128 in flight take three times as many steps to prefill: a longer mean TTFT
    (Qwen3-32B on 2x H100, measured 652 ms: 520 ms with the default budget, within 10 % with the run's)."""
    import copy

    from cardfit.validation.serving import predict_serving
    from cardfit.validation.validate import all_records

    recs = [r for r in all_records()
            if r["id"].startswith("aic-") and not r["id"].startswith(GENERATED) and r["runtime"] == "vllm"]
    assert len(recs) == 26
    for r in recs:
        st = r["settings"]
        assert st["max_num_batched_tokens"] == st["max_batch_size"] + r["input_tokens"] + 1_500, r["id"]
        assert "rule_plugin/benchmark/vllm.rule" in r["note"], r["id"]
    r = next(r for r in recs if r["id"] == "aic-qwen3-32b-h100-vllm-bf16-tp2-1024x1024-c128-ttft")
    default = copy.deepcopy(r)
    del default["settings"]["max_num_batched_tokens"]
    ran, engine_default = predict_serving(r)[0], predict_serving(default)[0]
    assert engine_default < 0.85 * r["measured"] and abs(ran / r["measured"] - 1) < 0.1


def test_vllm_before_0_21_captures_its_graphs_outside_the_budget():
    """vLLM profiles its CUDA-graph pool inside --gpu-memory-utilization only from 0.21 ('CUDA graph memory
    profiling is enabled (default since v0.21.0)'); an older release captures its graphs after sizing the KV
    cache, so its pool keeps those bytes. Dennis Lee's vLLM 0.10.1.1 at utilization 0.25 on an A100 logged
    'GPU KV cache size: 93,872 tokens': the record's pool grows by the graph pool (0.36 GiB, 6,740 tokens of
    Qwen2-7B at 57,344 bytes), towards the logged one; the same record read as 0.21 keeps cardfit's plan."""
    import copy
    import re

    from cardfit.catalog.runtimes import default_runtimes
    from cardfit.validation.serving import predict_serving
    from cardfit.validation.validate import all_records

    rts = default_runtimes()
    assert not rts.get("vllm@0.10").has("graphs_in_budget") and rts.get("vllm@0.21").has("graphs_in_budget")
    assert rts.get("vllm@0.10").cuda_graph_bytes == 0 < rts.get("vllm").cuda_graph_bytes
    assert rts.get("sglang@0.1").has("graphs_in_budget")  # not a feature of SGLang's table
    r = next(x for x in all_records() if x["id"] == "dennislee-qwen2-7b-a100-vllm-test4-n1000-1024x1024-tpot")
    current = copy.deepcopy(r)
    current["settings"]["version"] = "0.21.0"

    def pool(x: dict) -> int:
        return int(re.search(r"KV pool ([\d,]+) tokens", predict_serving(x)[1])[1].replace(",", ""))

    grown = pool(r) - pool(current)
    assert abs(grown - rts.get("vllm").cuda_graph_bytes / 57_344) < 100
    assert pool(r) < 93_872


def test_aiconfigurator_sglang_runs_take_the_generators_prefill_batch():
    """aiconfigurator's generator writes max_prefill_tokens = input + 1,500 into an aggregated SGLang run it
    benchmarks (rule_plugin/benchmark/sglang.rule), passed as --max-prefill-tokens: every aic SGLang record
    carries it. SGLang's PrefillAdder stops adding prompts to a prefill batch past it, while the chunk (and
    memory reserved for it) stays the card's default: Qwen3-235B on 4x H200 at 9 in flight opens with nine
    1,000-token prompts in four steps of 2,500 tokens, not two of 8,192 (measured mean TTFT 362 ms: about
    40 % short with the chunk, within 20 % with the run's batch)."""
    import copy

    from cardfit.catalog.runtimes import default_runtimes
    from cardfit.validation.serving import predict_serving, prefill_batch_tokens
    from cardfit.validation.validate import all_records

    recs = [r for r in all_records()
            if r["id"].startswith("aic-") and not r["id"].startswith(GENERATED) and r["runtime"] == "sglang"]
    assert len(recs) == 14
    for r in recs:
        assert r["settings"]["max_prefill_tokens"] == r["input_tokens"] + 1_500, r["id"]
        assert "rule_plugin/benchmark/sglang.rule" in r["note"], r["id"]
    r = next(r for r in recs if r["id"] == "aic-qwen3-235b-a22b-h200-sglang-fp8-tp4-1000x1000-c9-ttft")
    rt = default_runtimes().get("sglang")
    assert prefill_batch_tokens(r, rt, 0) == 2_500  # below the H200's 8,192-token chunk
    assert prefill_batch_tokens(r, rt, 2_048) == 2_048  # never above the chunk
    default = copy.deepcopy(r)
    del default["settings"]["max_prefill_tokens"]
    assert prefill_batch_tokens(default, rt, 0) == 0
    ran, engine_default = predict_serving(r)[0], predict_serving(default)[0]
    assert engine_default < 0.7 * r["measured"] and abs(ran / r["measured"] - 1) < 0.2

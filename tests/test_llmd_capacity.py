"""Issue 24/26, llm-d's tiered prefix-cache stages (data/validation/serving_llmd_tiered.toml): what set
cardfit's capacity for them, by mechanism (docs/VALIDATION.md, "The capacity of the llm-d stages, taken
apart").

1. The gpt-oss-120b stages ran the guide's model server, `--gpu-memory-utilization=0.95 --max-num-seqs=512`
   (llm-d guides/tiered-prefix-cache/modelserver/gpu/vllm/base/patch-vllm-gpt-oss-120b.yaml @a660ed2f), not
   vLLM's default 0.9 the records assumed: the KV pool beside the weights nearly doubles (130,747 -> 245,118
   tokens), and so does the number of 17,137-token sequences it holds (7 -> 14).
2. A prompt queues on the step's prompt budget (vLLM V1's scheduler fills one token budget a step, running
   requests first: vllm/v1/core/sched/scheduler.py `token_budget`), and holds it for the steps that carry its
   chunks: its service is the time of those steps, not of the mean step (TPOT), which the decode-only steps
   between them shorten. A 16,256-token prompt of Qwen3-32B on 2 H100s takes two 8,192-token chunk steps of
   ~0.42 s; the mean step at 0.625 requests/s is ~0.05 s."""

from __future__ import annotations

import pytest

from cardfit.core import serving as sv
from cardfit.core import speed as sp
from cardfit.services.deploy import DeployInput, deploy_report
from cardfit.validation.serving import predict_serving
from cardfit.validation.validate import all_records


def _record(rid: str) -> dict:
    return {r["id"]: r for r in all_records()}[rid]


def test_gptoss_stages_state_the_guides_model_server():
    """Every gpt-oss-120b stage states the guide's --gpu-memory-utilization 0.95 and --max-num-seqs 512, read
    in the guide's current patch file (the copy at llm-d PR 1676's own commit is not retrievable), so both
    are marked assumed."""
    recs = [r for r in all_records() if r["id"].startswith("llmd-tiered-gptoss120b")]
    assert len(recs) == 48
    for r in recs:
        st = r["settings"]
        assert st["gpu_memory_utilization"] == 0.95 and st["max_num_seqs"] == 512, r["id"]
        assert {"gpu_memory_utilization", "max_num_seqs"} <= set(r.get("assumed", [])), r["id"]
        assert "patch-vllm-gpt-oss-120b.yaml" in r["note"], r["id"]


def _pool(**kw) -> tuple[int, int]:
    base = dict(model="gpt-oss-120b", runtime="vllm@0.22.0", gpu=("H100 SXM",), tp=1, input_tokens=16755,
                output_tokens=382, requests_per_s=1.25, requests=75, warm_requests=56,
                shared_prefix_tokens=16000, prefix_groups=16)
    rep = deploy_report(DeployInput(**base, **kw))
    one = rep.best or rep.closest
    assert one is not None
    return one.memory.kv_pool_tokens, one.max_num_seqs


def test_gptoss_pool_at_the_guides_utilization_holds_more_sequences():
    """At 0.9 the pool beside gpt-oss-120b's 69 GB of weights on one H100 (vLLM 0.22's triton_kernels layout:
    the file's 65 GB and the swizzled copy of the expert scales, runtimes/vllm.py triton_hopper_scale_bytes)
    holds one sequence of 16,755 + 382 tokens; at the guide's 0.95 (4.3 GB more of the card's 85.5 GB) 8.
    Before the scale copy was counted: 7 and 14 (130,747 and 245,118 tokens)."""
    pool90, seqs90 = _pool(gpu_memory_utilization=0.9)  # (vLLM's default is 0.92 from 0.20.0)
    pool95, seqs95 = _pool(gpu_memory_utilization=0.95)
    assert seqs90 == 1 and seqs95 == 8
    assert pool90 == 28_639 and pool95 == 143_010


def test_gptoss_pool_at_the_guides_sequence_cap():
    """--max-num-seqs 512 halves the rows of vLLM's profile-run sampler (an H100's default is 1,024; vllm/v1/
    worker/gpu_model_runner.py profile_run samples min(max_num_tokens, max_num_seqs) rows at v0.22.0):
    512 x 201,088 vocabulary x 28 B a logit = 2.88 GB more pool, 143,010 -> 220,563 tokens, 13 sequences
    (docs/VALIDATION.md, "deploy's --max-num-seqs and the KV pool": the guide's own server metrics, a 1.1 %
    GPU prefix-cache hit rate, say the real pool held far less than every group's 16,000-token prefix; before
    the scale copy was counted the pool passed 16 groups x 16,000 = 256,000 tokens: 322,671, 63 sequences)."""
    pool95, seqs95 = _pool(gpu_memory_utilization=0.95)
    pool, seqs = _pool(gpu_memory_utilization=0.95, max_num_seqs=512)
    assert (pool95, seqs95) == (143_010, 8)
    assert pool == 220_563 and seqs == 13
    per_token = 512 * 201_088 * 28 / (pool - pool95)
    assert 36_000 < per_token < 38_500  # the 18 full-attention layers' 36,864 B a token, and the window's


def test_rate20_host_tier_stage_is_within_its_capacity():
    """gpt-oss-120b with the 100 GB host tier at 20 requests/s for the fleet (1.25 a replica): the fleet
    measured 0.32 s mean TTFT and 435 output tokens/s a replica, well inside its capacity (it reached 734 at
    40). At the default 0.9 cardfit called the stage nearly saturated (TTFT 352 ms, p90 1.1 s, the pool's 7
    sequences); at the guide's settings the answer is the host hit's prefill, the output what arrives."""
    r = _record("llmd-tiered-gptoss120b-h100-tp1-rate20-cpu100gb-output")
    v, _ = predict_serving(r)
    assert v == pytest.approx(r["measured"], rel=0.05)
    t = _record("llmd-tiered-gptoss120b-h100-tp1-rate20-cpu100gb-ttft-p90")
    assert predict_serving(t)[0] < 200


def _replica() -> sv.Replica:
    """An 8B dense model on one H100-like card (tests/test_serving_recv.py's shape), 8,192 tokens a step."""
    shares = sp.Shares(1.0, 0.0, 0.0, 1.0, "params")
    load = sp.Load(16_000_000_000, shares, 131_072 * 1150, 1.6e10, 32, 4096)
    machine = sp.Machine(3350.0, 989.0, 1, decode_efficiency=0.873, overhead_s_per_layer=55.4e-6,
                         overhead_s_per_sequence=456e-6, compute_efficiency=0.81)
    return sv.Replica(load, machine, 1.7e10, 8192, 256, prompt_tokens=16000)


def test_prompt_service_is_the_time_of_its_chunk_steps():
    """The prompt budget's server is busy for the steps that carry a prompt's chunks: a 16,000-token prompt
    beside 4 decodes holds it for 16,000 / 8,188 chunk steps of 8,188 tokens, whatever the mean step; a
    1,000-token prompt for 1,000 / 8,188 of one (eight share a step)."""
    r = _replica()
    for prompt in (16000, 1000):
        w = sv.Workload(prompt, 200)
        free = sv.free_tokens(r, 4.0)
        chunk_step = sv.prompt_step_s(r, 4.0, free)
        t = sv.tpot_s(r, w, 4.0)
        assert t < chunk_step  # the mean step: decode-only steps between the chunk steps
        assert sv.prompt_share_s(r, w, 4.0, t) == pytest.approx(prompt / free * chunk_step)
    # a step longer than a full chunk step (a mean step of a speculative or eager engine) still bounds it
    w = sv.Workload(16000, 200)
    long = 10 * sv.prompt_step_s(r, 4.0, sv.free_tokens(r, 4.0))
    assert sv.prompt_share_s(r, w, 4.0, long) == pytest.approx(16000 / sv.free_tokens(r, 4.0) * long)


def test_qwen_first_stage_ttft_pays_the_prompt_queue():
    """Qwen3-32B on 2 H100s, the first stage (0.625 requests/s a replica, 38 requests, cold: most compute
    their 16,256 tokens, ~0.85 s of two chunk steps): the prompt budget is busy about half the time, so a
    prompt waits for the one before it (M/D/1 on the budget). llm-d measured 1.62 s mean, 2.65 s p90; the
    mean step as the prompt's service (0.05 s a chunk) made the wait vanish (0.846 s, the prefill alone)."""
    mean = _record("llmd-tiered-qwen3-32b-h100-tp2-rate5-hbm-ttft")
    p90 = _record("llmd-tiered-qwen3-32b-h100-tp2-rate5-hbm-ttft-p90")
    v_mean, v_p90 = predict_serving(mean)[0], predict_serving(p90)[0]
    assert 1100 < v_mean < mean["measured"]
    assert 1800 < v_p90 < p90["measured"]


def test_prefill_first_prompt_step_carries_no_decodes():
    """A prefill-first engine (SGLang, TGI, vLLM V0 without chunked prefill) runs a waiting prompt in a step
    of its own: the prompt's service is I / budget of a step with the whole budget and 0 decodes, not one
    beside the batch's decodes (decode-first, vLLM V1). Hand case: 64 decoding, 4,000-token prompts."""
    from dataclasses import replace

    r = _replica()
    first = replace(r, prefill_first=True)
    w = sv.Workload(4000, 200)
    t = sv.tpot_s(r, w, 64.0)
    alone = sv.prompt_step_s(r, 0.0, 8192)
    assert sv.prompt_share_s(first, w, 64.0, t) == pytest.approx(4000 / 8192 * max(alone, t))
    beside = sv.prompt_step_s(r, 64.0, sv.free_tokens(r, 64.0))
    assert sv.prompt_share_s(r, w, 64.0, t) == pytest.approx(4000 / sv.free_tokens(r, 64.0) * max(beside, t))
    assert sv.prompt_share_s(first, w, 64.0, t) < sv.prompt_share_s(r, w, 64.0, t)


def test_pinned_replica_carries_the_engines_prefill_first():
    """The pinned deploy's replica knows its engine's scheduling (services/pinned.py schedule, one owner):
    SGLang prefill-first, vLLM V1 decode-first, SGLang with --enable-mixed-chunk decode-first."""
    from dataclasses import replace

    from cardfit.services.deploy import pinned_answer

    base = DeployInput(model="llama-3.1-8b", gpu=("H100 SXM",), tp=1, users=8.0, input_tokens=1000,
                       output_tokens=200)
    for runtime, mixed, want in (("sglang@0.5.0rc0", False, True), ("vllm@0.11.0", False, False),
                                 ("sglang@0.5.0rc0", True, False)):
        p = pinned_answer(replace(base, runtime=runtime, enable_mixed_chunk=mixed))
        assert p.result.cand.replica.prefill_first is want, (runtime, mixed)
        assert p.prefill_first is want

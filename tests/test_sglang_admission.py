"""SGLang's admission reserve for the answers still to come (issue 24): its PrefillAdder admits a waiting
request only while the pool holds, besides the tokens held, min(max_new_tokens - decoded, 4096) x
new_token_ratio for each running request; the ratio decays from 0.7 to 0.7 x 0.14 = 0.098 (x 0.3 with
--enable-dp-attention). cardfit's steady state counts that floor per sequence (services/deploy.py kv_held,
answer_reserve; data/runtimes.toml kv_reserve_answer_source: python/sglang/srt/managers/schedule_policy.py,
scheduler.py, environ.py / global_config.py, server_args.py, read in the sglang 0.4.6.post5 to 0.5.9
wheels)."""

from __future__ import annotations

import re

import pytest

from cardfit.catalog.runtimes import default_runtimes
from cardfit.services.deploy import DeployInput, answer_reserve, kv_held


def test_the_sglang_row_carries_the_decayed_ratio_and_its_source():
    rts = default_runtimes()
    sgl, vllm, trt = rts.get("sglang"), rts.get("vllm"), rts.get("trtllm")
    # SGLANG_INIT_NEW_TOKEN_RATIO 0.7 x SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR 0.14, schedule_conservativeness 1.0
    assert sgl.kv_reserve_answer_share == pytest.approx(0.7 * 0.14)
    assert sgl.kv_reserve_answer_clip == 4096  # SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION
    assert sgl.kv_reserve_dp_attention_factor == 0.3  # server_args.py, --enable-dp-attention
    for name in ("PrefillAdder", "SGLANG_INIT_NEW_TOKEN_RATIO 0.7", "SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR 0.14",
                 "SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS 600", "CLIP_MAX_NEW_TOKENS", "retract_decode",
                 "schedule_conservativeness * 0.3", "https://pypi.org/project/sglang/"):
        assert name in sgl.kv_reserve_answer_source, name
    # vLLM admits by the blocks of a prompt's first chunk (no reserve); TensorRT-LLM reserves whole requests
    assert vllm.kv_reserve_answer_share == 0 and trt.kv_reserve_answer_share == 0


def test_a_sequence_holds_its_average_tokens_plus_the_reserve():
    rts = default_runtimes()
    sgl, vllm, trt = rts.get("sglang"), rts.get("vllm"), rts.get("trtllm")
    inp = DeployInput(model="llama3.1:8b", users=8, input_tokens=1000, output_tokens=1000)
    # the remainder spread evenly over 1,000..0 tokens: 500 on average, 0.098 of it kept free
    assert answer_reserve(inp, sgl) == int(0.098 * 500) == 49
    assert kv_held(inp, sgl) == 1000 + 500 + 49
    assert kv_held(inp, sgl, admission=False) == 1500  # a P/D decode worker admits by its own reserve
    assert kv_held(inp, vllm) == 1500 and kv_held(inp, trt) == 2000
    # attention data parallel: schedule_conservativeness x 0.3
    dp = DeployInput(model="llama3.1:8b", users=8, input_tokens=1000, output_tokens=1000, attention_dp=2)
    assert answer_reserve(dp, sgl) == int(0.098 * 0.3 * 500)
    # each remainder clipped at 4,096 tokens: over 10,000..0, the mean of min(r, 4096)
    long_ = DeployInput(model="llama3.1:8b", users=8, input_tokens=1000, output_tokens=10_000)
    mean = (4096 * (10_000 - 4096) + 4096 * 4096 / 2) / 10_000
    assert answer_reserve(long_, sgl) == int(0.098 * mean) == 319


def test_a_gpustack_sglang_run_whose_pool_binds_decodes_fewer_sequences():
    """GPUStack's Qwen3-32B BF16 ShareGPT run on one H100 (data/validation/serving_gpustack.toml, SGLang
    0.5.x, 1,000 prompts at once): the KV pool, not the engine's cap, bounds the batch. With the reserve a
    sequence takes 217 + 101 + 9 tokens, so the pool holds 60 of them where it held 62 before."""
    from cardfit.validation.serving import record_input
    from cardfit.validation.validate import all_records, predict

    rid = "gpustack-qwen3-32b-h100-sglang-bf16-tp1-sharegpt-L122-output"
    (r,) = [x for x in all_records() if x["id"] == rid]
    inp, _, _ = record_input(r)
    sgl = default_runtimes().get("sglang")
    held = kv_held(inp, sgl)
    assert held == kv_held(inp, sgl, admission=False) + answer_reserve(inp, sgl)
    assert answer_reserve(inp, sgl) > 0
    how = predict(r).how
    pool = int(re.search(r"KV pool ([\d,]+) tokens", how)[1].replace(",", ""))
    most = int(re.search(r"at most (\d+)", how)[1])
    assert most == pool // held == 60
    assert pool // kv_held(inp, sgl, admission=False) == 62  # the old count: no reserve

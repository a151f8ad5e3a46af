"""TensorRT-LLM's trtllm-bench runs: the batch limits its heuristic picks for a dataset
(runtimes/trtllm_bench.py bench_engine_settings, after TensorRT-LLM tensorrt_llm/bench/build/tuning.py),
the engine a harness shares between length pairs (the Azure AI-benchmarking-guide builds one per model for
its 2048/2048 dataset), and the per-sequence time of the pre-1.0 C++ runtime (fitted on two sources)."""

from __future__ import annotations

import math

import pytest

from cardfit.catalog.gpus import default_gpus
from cardfit.catalog.models import default_models
from cardfit.runtimes.trtllm_bench import _round_up, bench_engine_settings


def _settings(model: str, gpu: str, tp: int, isl: int, osl: int, kv_bytes: float = 1.0) -> tuple[int, int]:
    m, g = default_models().get(model), default_gpus().get(gpu)
    return bench_engine_settings(m.params, m.layers, m.kv_heads, m.head_dim, g.usable_bytes, tp, 1, isl, osl,
                                 weight_bytes=1.0, kv_bytes=kv_bytes)


@pytest.mark.parametrize("model, gpu, tp, isl, osl, want", [
    # FP8 weights and KV cache (trtllm-bench build forces the KV cache to FP8 with FP8 weights): 8B on one
    # H100 fits ~272 requests of 4,096 tokens in 95 % of what the weights leave -> 384 (rounded up to 128),
    # 544 tokens -> the 2,048 floor
    ("llama-3.1-8b", "H100 SXM", 1, 2048, 2048, (384, 2048)),
    ("llama-3.1-8b", "H200 SXM", 1, 2048, 2048, (512, 2048)),
    # short requests: the 4,096-sequence cap and a budget of twice that
    ("llama-3.1-8b", "H100 SXM", 1, 128, 128, (4096, 8192)),
    # 70B over eight H200: ~1,592 requests -> 1,792 (rounded up to 256), 3,184 tokens -> 3,328
    ("llama-3.1-70b", "H200 SXM", 8, 2048, 2048, (1792, 3328)),
])
def test_bench_engine_settings(model, gpu, tp, isl, osl, want):
    assert _settings(model, gpu, tp, isl, osl) == want


BATCH = ((256, 32), (1024, 128), (math.inf, 256))  # tuning.py finetune_setting: the batch's ladder
TOKENS = ((4096, 256), (8192, 512), (math.inf, 1024))  # and the token budget's


@pytest.mark.parametrize("value, least, bands, want", [
    (1, 64, BATCH, 64), (64.5, 64, BATCH, 96), (255.5, 64, BATCH, 256), (256, 64, BATCH, 256),
    (257, 64, BATCH, 384), (1023, 64, BATCH, 1024), (1024, 64, BATCH, 1024), (1025, 64, BATCH, 1280),
    (544, 2048, TOKENS, 2048), (3184, 2048, TOKENS, 3328), (4096, 2048, TOKENS, 4096),
    (4097, 2048, TOKENS, 4608), (8192, 2048, TOKENS, 8192), (8193, 2048, TOKENS, 9216),
])
def test_round_up_to_the_step_of_the_band(value, least, bands, want):
    assert _round_up(value, least, bands) == want


def test_bench_settings_grow_with_memory_and_shrink_with_longer_requests():
    small = _settings("llama-3.1-8b", "H100 SXM", 1, 1000, 1000)
    assert _settings("llama-3.1-8b", "H200 SXM", 1, 1000, 1000)[0] > small[0]
    assert _settings("llama-3.1-8b", "H100 SXM", 1, 2000, 2000)[0] < small[0]
    # a 16-bit KV cache holds half the requests
    assert _settings("llama-3.1-8b", "H100 SXM", 1, 1000, 1000, kv_bytes=2.0)[0] < small[0]


def _record(rid: str) -> dict:
    from cardfit.validation.validate import load_records

    return next(r for r in load_records() if r["id"] == rid)


def test_azure_runs_on_the_engine_built_for_its_largest_dataset():
    """Benchmarks/NVIDIA/LLMBenchmark.py builds one engine per model for the 2048/2048 dataset and runs the
    128/128 pair on it: 384 sequences and 2,048 tokens a step, not trtllm-serve's 2,048 and 8,192."""
    from cardfit.validation.serving import predict_serving

    _, how = predict_serving(_record("azure-llama-3.1-8b-h100-trtllm-fp8-tp1-128x128-output"))
    assert "at most 384" in how and "2,048 tokens a step" in how, how


def test_pre_1_0_engines_pay_a_time_per_sequence():
    from cardfit.core.constants import constants, snapshot
    from cardfit.validation.serving import predict_serving, tensorrt_engine_v0

    azure = _record("azure-llama-3.1-8b-h100-trtllm-fp8-tp1-128x128-output")
    assert tensorrt_engine_v0(azure)
    assert tensorrt_engine_v0(_record("trtllm015-llama-3.1-70b-h100-fp8-tp8-1000x1000-output"))
    # NIM 1.x before 1.15 ran its TensorRT-LLM profiles as pre-compiled engines on the C++ executor; 1.15
    # made the PyTorch backend the default; the 1.0 table ran the PyTorch backend
    nim = _record("nim-llama-3.1-8b-h100-fp8-tp1-1000x1000-c250-output")
    assert tensorrt_engine_v0(nim)
    later = {**nim, "settings": {**nim["settings"], "version": "NIM 1.15.0"}}
    assert not tensorrt_engine_v0(later)
    assert not tensorrt_engine_v0(_record("trtllm-perf-llama-3.1-8b-h100-fp8-tp1-1000x1000-output"))
    charged = predict_serving(azure)[0]
    with constants({**dict(snapshot()), "trtllm.decode_overhead_us_per_sequence_v0": 0.0}):
        free = predict_serving(azure)[0]
    assert charged < 0.75 * free


def _bench_record(rid: str, **settings) -> dict:
    """A TensorRT-LLM 1.0 perf-overview record (PyTorch backend) as if it named trtllm-bench's dataset."""
    r = _record(rid)
    isl, osl = r["input_tokens"], r["output_tokens"]
    return {**r, "settings": {**r["settings"], "trtllm_bench_dataset": f"{isl}x{osl}", **settings}}


def test_nvfp4_weights_take_half_a_byte_in_the_bench_heuristic():
    """tuning.py BYTES_PER_ELEM: NVFP4 0.5 bytes a weight (FP8 1, else 2). Llama 3.3 70B NVFP4 on one B200
    at 128/2048 with an FP8 cache: the weights leave room for ~450 requests of 2,176 tokens -> 512; counted
    at two bytes a weight (the old reading) only 128."""
    from cardfit.validation.serving import trtllm_bench_limits

    r = _bench_record("trtllm-perf-llama-3.3-70b-b200-nvfp4-tp1-128x2048-output", kv_cache_dtype="fp8")
    assert trtllm_bench_limits(r, 1, 1) == (512, 2048)


def test_pytorch_bench_without_chunking_holds_the_prompt_beside_the_batch():
    """trtllm-bench throughput on the PyTorch backend leaves chunked prefill off (its default) and then
    forces max_num_tokens to at least max ISL + max_batch_size (tensorrt_llm/bench/benchmark/utils/general.py
    get_settings): 8B FP8 on one H100 at 5000/500 -> 224 sequences, 2,304 tokens by the heuristic, 5,224
    after the floor. A TensorRT engine (the Azure 0.15 runs) keeps the heuristic's budget."""
    from cardfit.validation.serving import trtllm_bench_limits

    r = _bench_record("trtllm-perf-llama-3.1-8b-h100-fp8-tp1-5000x500-output", kv_cache_dtype="fp8")
    assert trtllm_bench_limits(r, 1, 1) == (224, 5000 + 224)
    chunked = {**r, "settings": {**r["settings"], "enable_chunked_prefill": True}}
    assert trtllm_bench_limits(chunked, 1, 1) == (224, 2304)
    azure = _record("azure-llama-3.1-8b-h100-trtllm-fp8-tp1-128x128-output")
    assert trtllm_bench_limits(azure, 1, 1) == (384, 2048)

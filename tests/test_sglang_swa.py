"""SGLang's KV pool for sliding-window models (runtimes/sglang.py HYBRID_SWA). SGLang profiles its pool with
every layer at full length (python/sglang/srt/model_executor/model_runner.py profile_max_num_token); a model
it runs with the hybrid SWA pool keeps swa_full_tokens_ratio (0.8, ServerArgs default) sliding-window tokens
per full-layer token (set_num_token_hybrid / set_num_tokens_hybrid_swa); every other model, and gpt-oss
before 0.5.8 (server_args.py model_specific_adjustments: disable_hybrid_swa_memory for GptOssForCausalLM in
the 0.5.3rc0-0.5.7 wheels), holds the whole context in every layer. vLLM's hybrid allocator keeps only the
window, so the same model is cheaper there."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cardfit.catalog.models import default_models
from cardfit.catalog.releases import at_release
from cardfit.catalog.runtimes import default_runtimes
from cardfit.core.kv import kv_cache_bytes
from cardfit.core.memory import MemorySettings
from cardfit.runtimes import adapter
from cardfit.validation.validate import path_of


def _kv(runtime: str, release: str, model: str, context: int, sequences: int = 1) -> int:
    rt = at_release(default_runtimes().get(runtime), release)
    settings = MemorySettings(context=context, sequences=sequences)
    return adapter(rt).kv_bytes(default_models().get(model), settings)


# (runtime, release, model, bytes of one token's cache in bf16, where the number comes from)
CASES = [
    # config.json: 36 layers (18 sliding, window 128), 8 KV heads x 64: 2 x 8 x 64 x 2 B = 2,048 B per layer
    ("sglang", "0.5.3rc0", "gpt-oss-120b", 36 * 2048, "GPUStack's release: every layer full length"),
    ("sglang", "0.5.7", "gpt-oss-20b", 24 * 2048, "last release that disabled the hybrid pool for gpt-oss"),
    ("sglang", "0.5.8", "gpt-oss-120b", 18 * 2048 + 0.8 * 18 * 2048, "hybrid: 0.8 window tokens per token"),
    ("sglang", "", "gpt-oss-20b", 12 * 2048 + 0.8 * 12 * 2048, "current (0.5.23): hybrid"),
    ("sglang", "0.5.9", "gpt-oss-20b", 12 * 2048 + 0.8 * 12 * 2048, "0.5.9: hybrid"),
    # Gemma 3 27B: 62 layers (52 sliding, window 1024), 16 KV heads x 128: 8,192 B per layer; SGLang disables
    # the hybrid pool for Gemma 2/3 on every release ("not yet supported")
    ("sglang", "", "gemma-3-27b", 62 * 8192, "Gemma 3: full length even at the current release"),
]


@pytest.mark.parametrize("runtime,release,model,per_token,why", CASES)
def test_sglang_sizes_sliding_window_layers_by_the_context(runtime, release, model, per_token, why):
    assert _kv(runtime, release, model, 10_000) == round(10_000 * per_token), why


def test_vllm_keeps_only_the_window_of_the_same_model():
    """The contrast: vLLM's hybrid KV cache manager (v0.10+) holds the 128-token window of gpt-oss's sliding
    layers, so at 10,000 tokens its cache is about half (1 / 1.975) of SGLang 0.5.3's. From 0.34.0 the
    full layers hold whole 64-token blocks (data/releases.toml kv_block_64): 10,048 tokens; 16 before."""
    vllm = _kv("vllm", "", "gpt-oss-120b", 10_000)
    assert vllm == 18 * 2048 * 10_048 + 18 * 2048 * 128
    assert _kv("vllm", "0.33.0", "gpt-oss-120b", 10_000) == 18 * 2048 * 10_000 + 18 * 2048 * 128
    sglang = _kv("sglang", "0.5.3rc0", "gpt-oss-120b", 10_000)
    assert sglang / vllm == pytest.approx(36 * 10_000 / (18 * 10_176))


def test_models_without_a_window_are_unchanged():
    m = default_models().get("qwen3-32b")
    assert _kv("sglang", "0.5.3rc0", "qwen3-32b", 4096, 3) == kv_cache_bytes(m, 4096, 3)


@given(context=st.integers(1, 131_072), sequences=st.integers(1, 64))
def test_hybrid_pool_lies_between_the_window_and_full_length(context, sequences):
    m = default_models().get("gpt-oss-120b")
    full = _kv("sglang", "0.5.3rc0", "gpt-oss-120b", context, sequences)
    hybrid = _kv("sglang", "", "gpt-oss-120b", context, sequences)
    assert full == kv_cache_bytes(m, context, sequences, window_cache=False)
    assert kv_cache_bytes(m, context, sequences) <= hybrid <= full or context < 160
    assert hybrid < full or context < 3  # round(0.8 x 2) = 2: a 2-token pool rounds to full


def _record(model: str, version: str) -> dict:
    return {"kind": "serving", "runtime": "sglang", "model": model, "gpu": "H100 SXM", "gpus": 1,
            "settings": {"tp": 1, "pp": 1, "version": version}}


@pytest.mark.parametrize("model,version,path", [
    ("gpt-oss-120b", "0.5.5", "older"),  # GPUStack's gpt-oss pages: a pool no current user gets
    ("gpt-oss-120b", "0.5.12", "user"),
    ("qwen3-32b", "0.5.12", "user"),  # the hybrid pool changes only gpt-oss
    # before 0.5.10 (releases.toml prefill_cuda_graph) prompt steps ran without graphs and the reserve had
    # none of theirs: every model's figures differ from the current release's
    ("qwen3-32b", "0.5.9", "older"),
    ("qwen3-32b", "0.5.3rc0", "older"),  # before the reserve by chunk: every model's budget differs
])
def test_records_of_a_full_length_release_are_older_only_for_gpt_oss(model, version, path):
    assert path_of(_record(model, version)) == path


# --mem-fraction-static when not given (runtimes/sglang.py reserved_mib; server_args.py
# _handle_gpu_memory_settings in the PyPI wheels): (card MiB, as torch reports it, - reserve) / card MiB.
# (card, release, tp, fraction, reserve in MiB worked by hand)
FRACTIONS = [
    ("H200 SXM", "0.5.9", 1, 0.907, "143,771 MiB: 512 + 8,192 x 1.5 + 256 x 2 + 128 = 13,440"),
    ("RTX 4090", "0.5.9", 1, 0.847, "24,564 MiB: 512 + 2,048 x 1.5 + 24 x 2 + 128 = 3,760 (no 10 GiB floor)"),
    ("H100 SXM", "0.5.9", 1, 0.835, "81,559 MiB: 13,440 as the H200"),
    ("H100 SXM", "0.5.9", 4, 0.824, "TP 4: 512 + 12,288 + 512 x 2 + 512 = 14,336"),
    # the current release (0.5.23, arg_groups/memory_hook.py): + 8 MiB per captured prompt size up to the
    # chunk (58 up to 8,192; 50 up to 4,096) for a dense model; the 20-35 GiB row 4,096 / 48
    ("H200 SXM", "", 1, 0.903, "13,440 + 58 x 8 = 13,904"),
    ("RTX 4090", "", 1, 0.704, "512 + 4,096 x 1.5 + 48 x 2 + 128 + 50 x 8 = 7,280"),
    ("H100 SXM", "", 1, 0.830, "13,904 as the H200"),
    ("H100 SXM", "", 4, 0.819, "14,336 + 464 = 14,800"),
    ("H100 SXM", "0.5.3rc0", 1, 0.874, "0.5.3rc0's table: (9.5 + 1 / 2) GiB = 10,240"),
    ("H100 SXM", "0.5.3rc0", 4, 0.856, "(9.5 + 4 / 2) GiB = 11,776"),
]


@pytest.mark.parametrize("card,release,tp,fraction,why", FRACTIONS)
def test_sglang_default_memory_fraction_by_card_split_and_release(card, release, tp, fraction, why):
    from cardfit.catalog.gpus import default_gpus

    gpu = default_gpus().get(card)
    engine = adapter(at_release(default_runtimes().get("sglang"), release))
    total = engine.cuda_total(gpu)
    assert engine.budget_per_card(gpu, None, tp) == int(total * fraction), why


def test_a_given_fraction_wins_and_activations_sit_outside_it():
    from cardfit.catalog.gpus import default_gpus

    gpu = default_gpus().get("H100 SXM")
    engine = adapter(default_runtimes().get("sglang"))
    assert engine.budget_per_card(gpu, 0.9, 1) == int(engine.cuda_total(gpu) * 0.9)
    m = default_models().get("qwen3-32b")
    assert engine.activation_bytes(m, MemorySettings(context=8192, prefill_chunk=8192, max_num_seqs=256)) == 0

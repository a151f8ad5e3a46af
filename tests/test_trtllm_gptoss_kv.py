"""TensorRT-LLM's KV pool and admission for gpt-oss, as docs/VALIDATION.md "GPUStack's single-H100 pages"
(5 checks, issue 24) read them against the `trtllm` row: these pin the row to what that reading found, so a
later change that makes the GPUStack gpt-oss runs fit by moving one of them is caught against its source."""

from __future__ import annotations

from cardfit.catalog.models import default_models
from cardfit.catalog.runtimes import default_runtimes
from cardfit.core.kv import kv_cache_bytes


def test_gpt_oss_sliding_layers_hold_full_length_caches_on_trtllm():
    """TensorRT-LLM's KV cache manager gives a sliding-window layer "as many blocks as full attention" and
    splits the pool as if every layer were full attention (cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp,
    BlockManager constructor and calculateWindowSizeToShare: "not used for
    BaseKVCacheManager::calculateMaxNumBlocks"): gpt-oss-120b's 36 layers x 8 KV heads x 64 x (K, V) x 2
    bytes = 72 KiB a token of context, its 128-token windows included."""
    rt = default_runtimes().get("trtllm")
    assert rt.window_cache is False
    m = default_models().get("gpt-oss-120b")
    assert kv_cache_bytes(m, 1000, 1, "f16", window_cache=rt.window_cache) == 1000 * 36 * 8 * 64 * 2 * 2
    # a runtime that keeps only the window (vLLM) holds less for the same context
    assert kv_cache_bytes(m, 1000, 1, "f16", window_cache=True) < 1000 * 36 * 8 * 64 * 2 * 2


def test_trtllm_serve_admission_defaults():
    """trtllm-serve's defaults (tensorrt_llm/commands/serve.py; BuildConfig): --max_batch_size 2048,
    --max_num_tokens 8192, --kv_cache_free_gpu_memory_fraction 0.9, and GUARANTEED_NO_EVICT reserving a
    request's prompt and max output tokens; the default CUDA-graph sizes (CudaGraphConfig, up to 128, no
    padding) are not modelled (graph_max_batch 0: every decode batch timed as a graph replay)."""
    rt = default_runtimes().get("trtllm")
    assert (rt.max_num_seqs, rt.prefill_chunk, rt.kv_free_fraction) == (2048, 8192, 0.9)
    assert rt.kv_reserve_whole is True
    assert rt.graph_max_batch == 0

"""Runtime profiles (vLLM, llama.cpp, Ollama, transformers, SGLang, TGI): what each one allocates
besides weights and KV cache, and how it chunks prefill. Numbers live in data/runtimes.toml."""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cache
from typing import Any

from ..errors import CatalogError
from .loader import builtin
from .registry import Registry


@dataclass(frozen=True, slots=True)
class RuntimeProfile:
    id: str
    name: str
    context_bytes: int  # CUDA context + framework + allocator before any tensor
    activation_model: str  # "llamacpp" | "vllm" | "torch": how prefill workspace is sized (core/activations.py)
    gpu_memory_utilization: float = 0.0  # 0: the runtime does not pre-reserve a fraction of the card
    kv_block_tokens: int = 1  # KV allocation granularity (vLLM: 16-token blocks)
    ctx_pad: int = 1  # context rounded up to a multiple of this (llama.cpp pads n_ctx to 256)
    prefill_chunk: int = 0  # tokens prefilled at once by default (0: the whole prompt)
    max_num_seqs: int = 1  # sequences scheduled at once by default (vLLM 256): sizes sampler buffers
    cuda_graph_bytes: int = 0
    non_torch_bytes: int = 0  # vLLM: non-PyTorch memory counted inside its budget (replaces context_bytes)
    cuda_total_shortfall_bytes: int = 0  # nvidia-smi total minus what cudaMemGetInfo reports (vLLM's total)
    tensor_parallel: bool = False  # shards every layer over the cards of a set (vLLM, SGLang, TGI)
    embeddings_on_host: bool = False  # llama.cpp keeps token_embd in system RAM (a row lookup)
    default_context: int = 0  # 0: the model's own maximum
    context_tiers: tuple[tuple[float, int], ...] = ()  # Ollama: (min total VRAM GiB, default context)
    default_kv_dtype: str = "f16"
    window_cache: bool = True  # sliding-window layers keep only the window
    flash_attn: bool = True  # flash attention on by default
    offload: bool = False  # can place whole layers in system RAM
    default_parallel: int = 1
    decode_efficiency: float = 0.0  # realistic fraction of the bandwidth ceiling (calibrated; see validation)
    prefill_efficiency: float = 0.0  # realistic fraction of dense tensor TFLOPS
    decode_overhead_us_per_layer: float = 0.0  # fixed time per layer per decode step (launches, syncs)
    decode_overhead_us_per_sequence: float = 0.0  # per sequence per step under concurrency (scheduler, sampler)
    ram_efficiency: float = 0.0  # fraction of system RAM bandwidth reached by offloaded layers / experts
    kv_dtype_options: tuple[str, ...] = ()  # the cache types the runtime accepts (empty: any)
    aliases: tuple[str, ...] = ()
    source: str = ""
    notes: str = ""


_FIELDS = {f.name for f in fields(RuntimeProfile)}


def _from_row(row: dict[str, Any]) -> RuntimeProfile:
    known = {k: (tuple(v) if k in ("aliases", "kv_dtype_options") else v) for k, v in row.items() if k in _FIELDS}
    known["context_tiers"] = tuple((float(a), int(b)) for a, b in row.get("context_tiers", ()))
    try:
        return RuntimeProfile(**known)
    except TypeError as e:
        raise CatalogError(f"runtime '{row.get('id', '?')}': {e}") from e


@cache
def default_runtimes() -> Registry[RuntimeProfile]:
    rows = builtin("runtimes.toml")["runtime"]
    return Registry("runtime", "cardfit plan --help", [_from_row(r) for r in rows],
                    lambda r: [r.id, r.name, *r.aliases])

"""VRAM needed = weights + KV cache + runtime overhead + activations (SPEC §2)."""

from __future__ import annotations

from dataclasses import dataclass

from ..catalog.models import ModelSpec
from ..catalog.quants import Quant
from ..catalog.runtimes import RuntimeProfile
from .activations import activation_bytes
from .kv import kv_cache_bytes, llamacpp_swa_cells
from .weights import Weights, embedding_bytes, weights


@dataclass(frozen=True, slots=True)
class MemorySettings:
    """The knobs that change memory for one model: everything is explicit, nothing is looked up."""

    context: int
    sequences: int = 1
    kv_dtype: str = "f16"
    prefill_chunk: int = 0  # 0: unchunked
    flash_attn: bool = True
    max_num_seqs: int = 1


@dataclass(frozen=True, slots=True)
class Memory:
    weights_bytes: int
    kv_cache_bytes: int
    overhead_bytes: int
    activation_bytes: int
    weights: Weights
    context: int
    sequences: int
    kv_dtype: str
    host_weights_bytes: int = 0  # weights the runtime keeps in system RAM (llama.cpp: token_embd)

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_cache_bytes + self.overhead_bytes + self.activation_bytes

    @property
    def per_card_fixed_bytes(self) -> int:
        """Bytes every card of a set pays again (its own CUDA context and workspace)."""
        return self.overhead_bytes + self.activation_bytes


def padded_context(context: int, rt: RuntimeProfile) -> int:
    pad = max(rt.ctx_pad, rt.kv_block_tokens, 1)
    return -(-context // pad) * pad


def kv_bytes(m: ModelSpec, rt: RuntimeProfile, s: MemorySettings) -> int:
    ctx = padded_context(s.context, rt)
    cells = 0
    if rt.activation_model == "llamacpp" and m.sliding_window:  # llama.cpp's iSWA cache (core/kv.py)
        cells = llamacpp_swa_cells(m.sliding_window, s.sequences, s.prefill_chunk or rt.prefill_chunk or 512,
                                   ctx * s.sequences, max(rt.ctx_pad, 1))
    return kv_cache_bytes(m, ctx, s.sequences, s.kv_dtype, rt.window_cache, cells)


def estimate(m: ModelSpec, q: Quant | None, rt: RuntimeProfile, s: MemorySettings) -> Memory:
    w = weights(m, q)
    act = activation_bytes(m, rt.activation_model, s.prefill_chunk, padded_context(s.context, rt), s.sequences,
                           s.flash_attn, s.max_num_seqs)
    # vLLM accounts its own process: non-torch memory inside the budget (the CUDA context sits outside it)
    overhead = (rt.non_torch_bytes or rt.context_bytes) + rt.cuda_graph_bytes
    host = embedding_bytes(m, q) if rt.embeddings_on_host else 0
    return Memory(w.total_bytes - host, kv_bytes(m, rt, s), overhead, act, w, s.context, s.sequences, s.kv_dtype,
                  host)

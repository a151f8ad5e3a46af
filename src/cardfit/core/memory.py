"""VRAM needed = weights + KV cache + runtime overhead + activations."""

from __future__ import annotations

from typing import Protocol

from ..catalog.gpus import Gpu
from ..catalog.models import ModelSpec
from ..catalog.quants import Quant
from ..catalog.records import record
from ..catalog.runtimes import RuntimeProfile
from .weights import Weights, weights


@record(slots=True)
class MemorySettings:
    """The knobs that change memory for one model: everything is explicit, nothing is looked up."""

    context: int
    sequences: int = 1
    kv_dtype: str = "f16"
    prefill_chunk: int = 0  # 0: unchunked
    flash_attn: bool = True
    max_num_seqs: int = 1
    tp: int = 1  # tensor-parallel ranks each layer is split over (a vLLM-like rank has less workspace)


@record(slots=True)
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
    unified_memory: bool = False  # Apple silicon: no CUDA context; the overhead line is Metal's
    # speculative decoding's drafter: its weights and its KV cache (core/speculative.py; 0: none)
    draft_bytes: int = 0

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_cache_bytes + self.overhead_bytes + self.activation_bytes + (
            self.draft_bytes)

    @property
    def per_card_fixed_bytes(self) -> int:
        """Bytes every card of a set pays again (its own CUDA context and workspace)."""
        return self.overhead_bytes + self.activation_bytes


def padded_context(context: int, rt: RuntimeProfile) -> int:
    pad = max(rt.ctx_pad, rt.kv_block_tokens, 1)
    return -(-context // pad) * pad


class RuntimeModel(Protocol):
    """What the memory and fit arithmetic asks of a runtime. One implementation per family of runtimes
    lives in runtimes/ (vLLM-like, llama.cpp-like, torch-like, rule of thumb); `runtimes.adapter(profile)`
    gives the one a catalog profile names."""

    @property
    def profile(self) -> RuntimeProfile: ...

    def kv_bytes(self, m: ModelSpec, s: MemorySettings) -> int:
        """KV cache of `s.sequences` sequences of `s.context` tokens, as the runtime allocates it."""
        ...

    def activation_bytes(self, m: ModelSpec, s: MemorySettings) -> int:
        """Workspace per card for prefilling (compute buffer, profile-run peak, prompt activations)."""
        ...

    def overhead_bytes(self, gpu: Gpu | None = None) -> int:
        """Per card: the process's own memory before any tensor (CUDA context, framework, graphs); `gpu`: the
        card, where its stack changes what the runtime counts (None: as on a CUDA card)."""
        ...

    def host_weights_bytes(self, m: ModelSpec, q: Quant | None) -> int:
        """Weights the runtime keeps in system RAM, not on the card."""
        ...

    def weights_padding_bytes(self, m: ModelSpec, q: Quant | None, s: MemorySettings, gpu: Gpu | None) -> int:
        """Bytes the runtime adds to the file's weights when it lays them out for its kernels on this card
        (vLLM's MXFP4 MoE kernels pad the expert matrices to their tiles)."""
        ...

    def budget_for(self, mem: Memory, gpu: Gpu, budget: int, tp: int = 1) -> int:
        """Per card: the budget (`budget`, budget_per_card's) a memory estimate may fill, where the runtime's
        headroom depends on the estimate's own workspace (vLLM 0.34's margin); else `budget`."""
        ...

    def startup_margin(self, mem: Memory, gpu: Gpu) -> int:
        """Bytes a server must find free at startup beyond its stated share of the card to get the KV cache
        that share gives (vLLM 0.34's margin; else 0)."""
        ...

    def budget_per_card(self, gpu: Gpu, utilization: float | None = None, tp: int = 1, pp: int = 1,
                        model: ModelSpec | None = None) -> int:
        """What the runtime lets itself use on one card of a set split `tp` x `pp`."""
        ...

    def kv_copies(self, m: ModelSpec | None, count: int) -> float:
        """Copies of the KV cache a set of `count` cards holds, relative to an even split."""
        ...


def estimate(m: ModelSpec, q: Quant | None, runtime: RuntimeModel, s: MemorySettings,
             gpu: Gpu | None = None) -> Memory:
    """gpu: the card the weights are laid out for (a runtime's kernels may pad them); None: unpadded."""
    w = weights(m, q)
    host = runtime.host_weights_bytes(m, q)
    pad = runtime.weights_padding_bytes(m, q, s, gpu)
    return Memory(w.total_bytes - host + pad, runtime.kv_bytes(m, s), runtime.overhead_bytes(gpu),
                  runtime.activation_bytes(m, s), w, s.context, s.sequences, s.kv_dtype, host,
                  runtime.profile.unified_memory)

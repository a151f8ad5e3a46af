"""llama.cpp-like engines (llama.cpp's llama-server, Ollama, ik_llama.cpp): ggml reserves one compute
buffer for the worst-case graph of one micro-batch (n_ubatch tokens) against the whole cache; the cache
is one contiguous buffer of n_ctx cells padded to 256 (llama-context.cpp); sliding-window layers keep the
window plus a micro-batch (llama-kv-cache-iswa.cpp); token_embd stays in host RAM (llama-model.cpp assigns
the input layer to the CPU); whole layers may sit in system RAM (-ngl)."""

from __future__ import annotations

from typing import ClassVar

from ..catalog.models import ModelSpec
from ..catalog.records import record
from ..core.activations import llamacpp_compute_bytes
from ..core.kv import kv_cache_bytes, llamacpp_swa_cells
from ..core.memory import MemorySettings
from .base import Runtime

# Forks that allocate as a catalog runtime but for the fields named (validation records measure them; no
# catalog row of their own): ik_llama.cpp is llama.cpp's graph without the sliding-window cache.
FORKS: dict[str, tuple[str, dict[str, object]]] = {"ik-llamacpp": ("llama.cpp", {"window_cache": False})}

# llama.cpp's default physical batch when neither the caller nor the profile gives one
# (common/common.h: n_ubatch = 512)
DEFAULT_UBATCH = 512


@record(slots=True)
class LlamaCppLike(Runtime):
    quantized_kv_needs_flash_attn: ClassVar[bool] = True

    def ubatch(self, s: MemorySettings) -> int:
        return s.prefill_chunk or self.profile.prefill_chunk or DEFAULT_UBATCH

    def kv_bytes(self, m: ModelSpec, s: MemorySettings) -> int:
        ctx = self.padded_context(s.context)
        cells = 0
        if m.sliding_window:
            cells = llamacpp_swa_cells(m.sliding_window, s.sequences, self.ubatch(s), ctx * s.sequences,
                                       max(self.profile.ctx_pad, 1))
        return kv_cache_bytes(m, ctx, s.sequences, s.kv_dtype, self.profile.window_cache, cells)

    def window_read_cells(self, m: ModelSpec, ubatch: int) -> int:
        """The sliding-window cache is a ring of window + ubatch cells per stream (llamacpp_swa_cells) and the
        attention of a step spans every used cell of it, masked to the window (llama_kv_cache get_n_kv: the
        used cells up to the highest, padded to 256): once wrapped, a step reads the whole ring."""
        if not m.sliding_window or not self.profile.window_cache:
            return 0
        ub = ubatch or self.profile.prefill_chunk or DEFAULT_UBATCH
        return llamacpp_swa_cells(m.sliding_window, 1, ub, 1 << 30, max(self.profile.ctx_pad, 1))

    def activation_bytes(self, m: ModelSpec, s: MemorySettings) -> int:
        cells = self.padded_context(s.context) * s.sequences
        tokens = min(s.prefill_chunk, cells) if s.prefill_chunk else cells
        return llamacpp_compute_bytes(m, tokens, cells, s.flash_attn)


ADAPTER = LlamaCppLike

"""torch-like engines (Hugging Face transformers `generate`): no reserved share of the card, the whole
prompt prefilled at once in the model dtype unless chunked, a DynamicCache that keeps every token even for
sliding-window layers (transformers cache_utils.py), whole layers offloaded by device_map="auto"."""

from __future__ import annotations

from ..catalog.models import ModelSpec
from ..catalog.records import record
from ..core.activations import torch_prefill_bytes
from ..core.memory import MemorySettings
from .base import Runtime


@record(slots=True)
class TorchLike(Runtime):
    def activation_bytes(self, m: ModelSpec, s: MemorySettings) -> int:
        cells = self.padded_context(s.context) * s.sequences
        tokens = min(s.prefill_chunk, cells) if s.prefill_chunk else cells
        return torch_prefill_bytes(m, tokens, cells if tokens < cells else 0)


ADAPTER = TorchLike

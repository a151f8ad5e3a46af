"""The rental guide's sizing block (rule of thumb): weights + KV cache + a flat buffer for everything
else (the profile's context_bytes); no workspace term, no reserved share, no runtime-specific allocation."""

from __future__ import annotations

from ..catalog.records import record
from .base import Runtime


@record(slots=True)
class RuleOfThumb(Runtime):
    pass  # the base accounting with activation_bytes = 0 is the whole rule


ADAPTER = RuleOfThumb

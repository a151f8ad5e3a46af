"""Local model stores: the Hugging Face cache and the Ollama store."""

from __future__ import annotations

from ..catalog.models import ModelSpec


def find_local(name: str) -> ModelSpec | None:
    """A model id found in the HF cache or an Ollama tag in the local store (None when absent)."""
    return None

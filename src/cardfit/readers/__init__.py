"""Readers turn model files into the same ModelSpec the catalog produces. Getting bytes (local file,
HTTP range read) is kept apart from parsing them: source.py fetches, safetensors.py / gguf.py / config.py
parse, model.py puts a folder's pieces together, stores.py finds models in the HF cache and the Ollama
store, hub.py reads the Hugging Face Hub."""

from __future__ import annotations

from ..catalog.models import ModelSpec


def read_model_path(path: str) -> ModelSpec:
    """A config.json, a model folder, a .gguf or a .safetensors file."""
    from .model import read_path

    return read_path(path)

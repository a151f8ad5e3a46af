"""Readers turn model files into the same ModelSpec the catalog produces. Getting bytes (local file,
HTTP range read) is kept apart from parsing them."""

from __future__ import annotations

from ..catalog.models import ModelSpec
from ..errors import FileFormatError


def read_model_path(path: str) -> ModelSpec:
    """A config.json, a model folder, a .gguf or a .safetensors file."""
    raise FileFormatError(path, "reading model files is not built yet", hint="name a catalog model instead")

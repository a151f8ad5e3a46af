"""Catalogs: GPUs, models, quantization types, runtime profiles and API prices, loaded from data files."""

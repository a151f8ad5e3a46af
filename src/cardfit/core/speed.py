"""Speed model (SPEC §4). Decode is memory-bandwidth bound: one stream cannot beat bandwidth ÷ bytes read
per token (resident weights for dense models, active weights for MoE, plus the KV cache read so far).
Prefill is compute bound: about 2 × active parameters FLOPs per prompt token."""

from __future__ import annotations

from dataclasses import dataclass

from ..catalog.gpus import Gpu
from ..catalog.models import ModelSpec
from .memory import Memory


@dataclass(frozen=True, slots=True)
class Speed:
    decode_ceiling_tokens_per_s: float | None
    decode_tokens_per_s: float | None
    prefill_tokens_per_s: float | None
    bytes_per_token: int


def active_weight_bytes(m: ModelSpec, mem: Memory) -> int:
    """Weight bytes read per decoded token: all of them for a dense model, the active share for MoE."""
    if not m.is_moe or not m.active_params:
        return mem.weights_bytes
    return round(mem.weights_bytes * m.active_params / m.params)


def decode_bytes_per_token(m: ModelSpec, mem: Memory, context_filled: int | None = None) -> int:
    """Weights read once per step plus the cache of one sequence filled to `context_filled` tokens."""
    filled = mem.context if context_filled is None else context_filled
    kv_one = mem.kv_cache_bytes // max(mem.sequences, 1)
    kv_read = kv_one * min(filled, mem.context) // max(mem.context, 1)
    return active_weight_bytes(m, mem) + kv_read


def decode_ceiling(bandwidth_gbps: float, bytes_per_token: int) -> float:
    """Seed 002 §07: 14 GB of BF16 weights on a 696 GB/s A40 → at most 49.7 tokens/s."""
    return bandwidth_gbps * 1e9 / bytes_per_token


def estimate(m: ModelSpec, mem: Memory, gpu: Gpu, count: int = 1, *, decode_efficiency: float = 0.0,
             prefill_efficiency: float = 0.0, precision: str = "bf16", tp: int = 1,
             context_filled: int | None = None) -> Speed:
    per_token = decode_bytes_per_token(m, mem, context_filled)
    bw = gpu.bandwidth_gbps
    ceiling = None if bw is None else decode_ceiling(bw * max(tp, 1), per_token)
    realistic = None if ceiling is None or not decode_efficiency else ceiling * decode_efficiency
    tflops = gpu.tflops(precision) or gpu.tflops("bf16")
    prefill = None
    if tflops and prefill_efficiency:
        prefill = tflops * 1e12 * prefill_efficiency * max(tp, 1) / (2 * m.active)
    return Speed(ceiling, realistic, prefill, per_token)

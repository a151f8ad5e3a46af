"""The batch limits `trtllm-bench` picks for itself when a run states none: TensorRT-LLM's benchmark tool
sizes an engine (`trtllm-bench build --dataset`) or a PyTorch-backend run (`trtllm-bench throughput`) from the
dataset's lengths and the card's memory. Validation times trtllm-bench records with them
(validation/serving.py
trtllm_bench_limits)."""

from __future__ import annotations

import math


def bench_engine_settings(params: int, layers: int, kv_heads: int, head_dim: int, card_bytes: int,
                          tp: int, pp: int, input_len: float, output_len: float, weight_bytes: float = 1.0,
                          kv_bytes: float = 1.0, kv_fraction: float = 0.95) -> tuple[int, int]:
    """(max_batch_size, max_num_tokens) that `trtllm-bench` picks for a dataset of `input_len` /
    `output_len` tokens when none is given: `trtllm-bench build --dataset` bakes them into the engine, and
    the PyTorch backend's `trtllm-bench throughput` takes them the same way. Its heuristic, as written in
    NVIDIA/TensorRT-LLM tensorrt_llm/bench/build/tuning.py (calc_engine_setting, finetune_setting; the
    same in v0.15 and 1.0): the KV cache a request of input + output tokens needs, in the memory the weights
    leave on all cards (card GiB x cards - parameters x bytes per weight, x the KV fraction, 0.95 at build),
    gives the requests that fit; the batch is that, capped at 4,096 per pipeline stage and rounded up
    ('slightly optimistic': at least 64, to 32 below 256, to 128 below 1,024, else to 256), the token
    budget the batch x (1 + input / output), capped at 32,768 and rounded up (at least 2,048, to 256 below
    4,096, to 512 below 8,192, else to 1,024). A KV head is kept per tensor-parallel rank."""
    gib = 1024**3
    per_token = 2 * layers * max(tp, kv_heads) * head_dim * kv_bytes / gib
    memory = card_bytes / gib * tp * pp - params / 1000**3 * weight_bytes
    requests = memory * kv_fraction / per_token / (input_len + output_len)
    raw_bs = min(requests, 4096) / pp
    raw_tokens = min(raw_bs * (1 + input_len / output_len), 32768)
    bs = _round_up(raw_bs, 64, ((256, 32), (1024, 128), (math.inf, 256)))
    tokens = _round_up(raw_tokens, 2048, ((4096, 256), (8192, 512), (math.inf, 1024)))
    return bs, tokens


def _round_up(value: float, least: int, bands: tuple[tuple[float, int], ...]) -> int:
    """`value` rounded up to the step of its band (`bands`: (upper bound, step), bounds rising, the last
    one infinite), and at least `least` (tuning.py finetune_setting's ladders)."""
    step = next(step for bound, step in bands if value < bound)
    return max(least, step * math.ceil(value / step))

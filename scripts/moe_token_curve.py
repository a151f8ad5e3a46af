#!/usr/bin/env python
"""The MoE layer's time by tokens a step: aiconfigurator's measured kernel tables against cardfit's terms.

Not a test, and not run by cardfit (the tables need pandas + pyarrow; they live in the peers' environment
`python scripts/compare_peers.py --setup-serving` builds). Run with that environment's python:

    /tmp/cardfit-serving-peers/bin/python scripts/moe_token_curve.py

Source of the measurements: aiconfigurator-core 0.12.0 (https://pypi.org/project/aiconfigurator-core/0.12.0/),
`aiconfigurator_core/systems/data/<card>/moe/<engine>/<release>/moe_perf.parquet`: the MoE operator (grouped
expert GEMMs, activation, routing permute / finalize; not the router GEMM) timed alone on the named card, by
tokens a step (num_tokens), moe_tp_size / moe_ep_size and routing distribution. Rows taken here: the
'balanced' distribution, the fastest kernel_source of each row, the smallest tp / ep the table has unless
asked.

Columns (ms per MoE layer on one rank):
- meas: the table.
- bytes: the routed experts the step touches, E·(1 − (1 − 1/E)^(T·k)) of a rank's E, × 3·hidden·N/tp ×
  bytes per weight, at the bandwidth × expert_efficiency 0.697 (runtimes.toml, fitted).
- flops: 2·T·k·3·hidden·N/tp at the dense peak × the card's measured GEMM share (gpus.toml gemm_*_tflops ÷
  peak, core/speed.py measured_gemm_share) × compute_efficiency 0.813 (runtimes.toml vLLM prefill_efficiency).
- cardfit: max(bytes, flops) + moe_overhead_us_per_layer 70.5 µs, the terms core/speed.py _step_times and
  core/serving.py _step_s give an MoE layer (the roofline max of a whole step taken per layer here).
- m/exp: routed tokens per touched expert; tile64 / tile128: every touched expert padded to whole 64 / 128-row
  tiles at the dense peak (the padding hypothesis).
- act: the routed tokens' activations written and read between the kernels of vLLM's Triton path
  (vllm/model_executor/layers/fused_moe/fused_moe.py: the gathered input read, intermediate_cache1 (2N) and
  intermediate_cache2 (N) written and read, intermediate_cache3 (hidden) written and read by moe_sum), bf16:
  (6·hidden + 12·N/tp) bytes per routed token, at bandwidth × decode_efficiency 0.873.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

DATA = Path("/tmp/cardfit-serving-peers/lib/python3.11/site-packages/aiconfigurator_core/systems/data")

# card: (bandwidth TB/s, dense peak TFLOPS by precision, measured GEMM share): data/gpus.toml
# (bandwidth_gbps, bf16/fp8/fp4_tflops, gemm_fp8_tflops / gemm_fp4_tflops over the peak)
CARDS = {
    "h100_sxm": (3.35, {"bf16": 989.4, "fp8": 1978.9}, 1382.2 / 1978.9),
    "h200_sxm": (4.8, {"bf16": 989.5, "fp8": 1978.9}, 1366.3 / 1978.9),
    "b200_sxm": (8.0, {"bf16": 2250.0, "fp8": 4500.0, "fp4": 9000.0}, 5239.0 / 9000.0),
}
# bytes per expert weight (NVFP4: 4 bits + an E4M3 scale per 16; MXFP4: + an E8M0 scale per 32) and the
# tensor-core precision the kernel runs at
DTYPES = {"bfloat16": (2.0, "bf16"), "fp8": (1.0, "fp8"), "fp8_block": (1.0, "fp8"), "nvfp4": (0.5625, "fp4"),
          "w4a16_mxfp4": (0.53125, "bf16"), "w4a8_mxfp4_mxfp8": (0.53125, "fp8")}
EXPERT_EFFICIENCY, COMPUTE_EFFICIENCY, DECODE_EFFICIENCY = 0.697, 0.813, 0.873  # runtimes.toml
MOE_OVERHEAD_S = 70.5e-6  # runtimes.toml moe_overhead_us_per_layer
TOKENS = (1, 16, 64, 256, 512, 1024, 2048, 4096, 8192, 16384)

# (card, engine, release, dtype, hidden, N, top-k, experts, kernel_source or None, moe_tp or None)
TRITON_BF16 = "vllm_unquantizedfusedmoe_triton_tritonexperts"
CASES = (
    ("h100_sxm", "vllm", "0.24.0", "bfloat16", 2048, 768, 8, 128, TRITON_BF16, 1),
    ("h100_sxm", "vllm", "0.24.0", "bfloat16", 2048, 768, 8, 128, TRITON_BF16, 2),
    ("b200_sxm", "trtllm", "1.3.0rc20", "nvfp4", 2048, 768, 8, 128, None, 1),
    ("h200_sxm", "vllm", "0.24.0", "fp8_block", 7168, 2048, 8, 256, "vllm_fp8moe_triton_tritonexperts", 8),
    ("b200_sxm", "trtllm", "1.3.0rc20", "nvfp4", 7168, 2048, 8, 256, None, 8),
    ("b200_sxm", "trtllm", "1.3.0rc20", "w4a8_mxfp4_mxfp8", 2880, 2880, 4, 128, None, 1),
    ("h100_sxm", "vllm", "0.24.0", "w4a16_mxfp4", 2880, 2880, 4, 128, None, 1),
)


def curve(case: tuple, data: Path) -> None:
    import pandas as pd

    card, engine, release, dtype, hidden, n, k, experts, kernel, tp = case
    d = pd.read_parquet(data / card / "moe" / engine / release / "moe_perf.parquet")
    d = d[(d.moe_dtype == dtype) & (d.hidden_size == hidden) & (d.inter_size == n) & (d.topk == k)
          & (d.num_experts == experts) & (d.distribution == "balanced")]
    if kernel:
        d = d[d.kernel_source == kernel]
    tp = tp or int(d.moe_tp_size.min())
    d = d[d.moe_tp_size == tp]
    ep = int(d.moe_ep_size.min())
    d = d[d.moe_ep_size == ep]
    bandwidth, peaks, gemm_share = CARDS[card]
    weight_bytes, precision = DTYPES[dtype]
    peak = peaks[precision] * 1e12
    rank_experts, nn = experts // ep, n / tp
    print(f"\n{card} {engine} {release} {dtype}: hidden {hidden}, N {n}, top {k} of {experts}, moe tp {tp}, "
          f"ep {ep} ({', '.join(sorted(d.kernel_source.unique()))})")
    print(f"{'T':>6} {'meas':>7} {'bytes':>7} {'flops':>7} {'cardfit':>8} {'ratio':>6} {'m/exp':>6} "
          f"{'tile64':>7} {'tile128':>7} {'act':>7}")
    for tokens, rows in d.groupby("num_tokens"):
        if tokens not in TOKENS:
            continue
        measured = float(rows.latency.min())
        routed = tokens * k / ep
        touched = rank_experts * (1 - (1 - 1 / rank_experts) ** routed)
        bytes_s = touched * 3 * hidden * nn * weight_bytes / (bandwidth * 1e12 * EXPERT_EFFICIENCY)
        flops_s = 2 * routed * 3 * hidden * nn / (peak * gemm_share * COMPUTE_EFFICIENCY)
        cardfit = (max(bytes_s, flops_s) + MOE_OVERHEAD_S) * 1e3
        m = routed / touched
        tiles = [touched * math.ceil(m / t) * t * 2 * 3 * hidden * nn / peak * 1e3 for t in (64, 128)]
        act = routed * (6 * hidden + 12 * nn) / (bandwidth * 1e12 * DECODE_EFFICIENCY) * 1e3
        print(f"{tokens:6d} {measured:7.3f} {bytes_s * 1e3:7.3f} {flops_s * 1e3:7.3f} {cardfit:8.3f} "
              f"{measured / cardfit:6.2f} {m:6.1f} {tiles[0]:7.3f} {tiles[1]:7.3f} {act:7.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA, help="aiconfigurator_core/systems/data")
    args = ap.parse_args()
    for case in CASES:
        curve(case, args.data)


if __name__ == "__main__":
    main()

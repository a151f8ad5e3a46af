#!/usr/bin/env python
"""DeepSeek-R1's decode step on NVIDIA cards, op by op, from NVIDIA's measured kernel tables
(docs/VALIDATION.md, "DeepSeek-R1's decode step on NVIDIA cards, component by component"). Read-only.

Not a test, and not run by cardfit (the tables need pandas + pyarrow): run it with a python that has them and
the unpacked aiconfigurator-core 0.12.0 wheel (https://pypi.org/project/aiconfigurator-core/0.12.0/,
Apache-2.0), e.g. the peers' environment `python scripts/compare_peers.py --setup-serving` builds:

    python scripts/dsr1_step_tables.py --data .../aiconfigurator_core/systems/data \\
        b200_sxm sglang 0.5.14 fp8_block fp8 8 1 1536

Arguments: card, engine, release (of the MLA, MoE and GEMM tables), weight format (fp8_block / nvfp4), KV
cache dtype (fp8 / bfloat16), tensor parallel, sequences a step, mean cached tokens; --comm RELEASE for the
all-reduce table where it differs. Each op is the fastest kernel of its table at DeepSeek-R1's shapes (hidden
7,168, 128 heads, q LoRA 1,536, KV LoRA 512 + RoPE 64, 256 routed experts of 2,048, top 8, a shared expert of
2,048, three dense layers of 18,432; experts tensor-parallel over the ranks, attention heads split): its time
in one layer, the layers that run it, and the step's total. The tables time each op alone; norms, RoPE, the
activations' quantization and sampling are not in them."""

from __future__ import annotations

import argparse
import glob

import numpy as np
import pandas as pd

H, INTER, DENSE_INTER, E, K = 7168, 2048, 18432, 256, 8
Q_LORA, KV_LORA, ROPE, HEADS, VOCAB = 1536, 512, 64, 128, 129280
LAYERS, MOE_LAYERS = 61, 58


def _interp(x: float, xs, ys) -> float:
    return float(np.interp(np.log(x), np.log(np.asarray(xs, dtype=float)), ys))


def _one(pattern: str) -> str:
    found = sorted(glob.glob(pattern))
    if not found:
        raise SystemExit(f"no table {pattern}")
    return found[0]


def attention(data: str, card: str, eng: str, ver: str, b: int, ctx: int, heads: int, quant: str,
              kv: str) -> tuple[float, float]:
    """The MLA generation kernel and the two absorbed BMMs (pre + post), seconds."""
    d = pd.read_parquet(f"{data}/{card}/mla/{eng}/{ver}/generation_mla_perf.parquet")
    d = d[(d.num_heads == heads) & (d.batch_size == b) & (d.kv_cache_dtype == kv)]
    s = d.groupby("step").latency.min().sort_index()
    att = _interp(ctx, s.index.values, s.values)
    bm = pd.read_parquet(_one(f"{data}/{card}/mla_bmm/{eng}/*/mla_bmm_perf.parquet"))
    bm = bm[(bm.num_heads == heads) & (bm.bmm_dtype == ("bfloat16" if quant == "bfloat16" else "fp8"))]
    bmm = 0.0
    for side in ("pre", "post"):
        t = bm[bm.op_name.str.endswith(side)].groupby("num_tokens").latency.min().sort_index()
        bmm += _interp(b, t.index.values, t.values)
    return att * 1e-3, bmm * 1e-3


def moe(data: str, card: str, eng: str, ver: str, tokens: int, quant: str, tp: int) -> tuple[float, str]:
    """The routed-expert op (balanced routing), seconds, and its fastest kernel."""
    d = pd.read_parquet(f"{data}/{card}/moe/{eng}/{ver}/moe_perf.parquet")
    d = d[(d.hidden_size == H) & (d.inter_size == INTER) & (d.topk == K) & (d.num_experts == E)
          & (d.moe_dtype == quant) & (d.moe_tp_size == tp) & (d.moe_ep_size == 1)
          & (d.distribution == "balanced")]
    g = d.groupby(["num_tokens", "kernel_source"]).latency.min().unstack()
    best = g.min(axis=1)
    near = g.index[int(np.argmin(abs(np.log(g.index.values / tokens))))]
    return _interp(tokens, best.index.values, best.values) * 1e-3, str(g.loc[near].idxmin())


def gemm(data: str, card: str, eng: str, ver: str, m: int, n: int, k: int, quant: str) -> float:
    """A GEMM of m rows at the nearest (n, k) the table has, scaled to (n, k) by its weights: seconds."""
    d = pd.read_parquet(_one(f"{data}/{card}/gemm/{eng}/*/gemm_perf.parquet"))
    d = d[d.gemm_dtype == quant]
    ns, ks = d.n.unique(), d.k.unique()
    n0 = ns[int(np.argmin(abs(np.log(ns / n))))]
    k0 = ks[int(np.argmin(abs(np.log(ks / k))))]
    t = d[(d.n == n0) & (d.k == k0)].groupby("m").latency.min().sort_index()
    return _interp(m, t.index.values, t.values) * (n * k) / (n0 * k0) * 1e-3


def allreduce(data: str, card: str, eng: str, ver: str, ranks: int, elements: int) -> float:
    """The engine's own all-reduce of `elements` bf16 values (the table's message_size counts elements: its
    largest message, 2^29, takes 4.0 ms on 8x H200, 467 GB/s of bus bandwidth as elements, 233 as bytes)."""
    d = pd.read_parquet(f"{data}/{card}/comm/{eng}/{ver}/custom_allreduce_perf.parquet")
    t = d[d.num_gpus == ranks].groupby("message_size").latency.min().sort_index()
    return _interp(elements, t.index.values, t.values) * 1e-3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="aiconfigurator_core/systems/data")
    ap.add_argument("--comm", help="release of the all-reduce table (default: the release)")
    for name in ("card", "engine", "release", "quant", "kv"):
        ap.add_argument(name)
    ap.add_argument("tp", type=int)
    ap.add_argument("batch", type=int)
    ap.add_argument("context", type=int)
    a = ap.parse_args()
    d, c, e, v, q, tp, b = a.data, a.card, a.engine, a.release, a.quant, a.tp, a.batch
    att, bmm = attention(d, c, e, v, b, a.context, HEADS // tp, q, a.kv)
    routed, kernel = moe(d, c, e, v, b, q, tp)
    projections = (gemm(d, c, e, v, b, Q_LORA + KV_LORA + ROPE, H, q)  # q_a + kv_a (one fused GEMM)
                   + gemm(d, c, e, v, b, HEADS * (128 + ROPE) // tp, Q_LORA, q)  # q_b
                   + gemm(d, c, e, v, b, H, HEADS * 128 // tp, q))  # o_proj
    shared = gemm(d, c, e, v, b, 2 * INTER // tp, H, q) + gemm(d, c, e, v, b, H, INTER // tp, q)
    router = gemm(d, c, e, v, b, E, H, "bfloat16")
    dense = gemm(d, c, e, v, b, 2 * DENSE_INTER // tp, H, q) + gemm(d, c, e, v, b, H, DENSE_INTER // tp, q)
    ar = allreduce(d, c, e, a.comm or v, tp, b * H)
    rows = (("MLA attention kernel", att, LAYERS), ("MLA absorbed BMMs (pre + post)", bmm, LAYERS),
            ("attention projections (q_a/kv_a, q_b, o_proj)", projections, LAYERS),
            (f"routed experts ({kernel})", routed, MOE_LAYERS), ("shared expert GEMMs", shared, MOE_LAYERS),
            ("router GEMM (bf16)", router, MOE_LAYERS), ("dense MLP GEMMs", dense, LAYERS - MOE_LAYERS),
            ("all-reduce, two a layer", 2 * ar, LAYERS),
            ("LM head (bf16)", gemm(d, c, e, v, b, VOCAB // tp, H, "bfloat16"), 1))
    print("| op | us a layer | layers | ms a step |")
    print("|---|---|---|---|")
    for name, t, n in rows:
        print(f"| {name} | {t * 1e6:.1f} | {n} | {t * n * 1e3:.2f} |")
    print(f"| sum | | | {sum(t * n for _, t, n in rows) * 1e3:.2f} |")


if __name__ == "__main__":
    main()

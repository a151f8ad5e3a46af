#!/usr/bin/env python
"""Block-scaled FP8 checkpoints against the other serving records, out of sample (docs/VALIDATION.md, "The
decode step of block-scaled FP8 checkpoints"). Read-only: it writes nothing.

    python scripts/fp8_gap.py

cardfit has one FP8 (data/quants.toml `fp8`): a checkpoint with one scale per tensor or per channel and one
with a scale per 128 x 128 weight block are timed alike. Three tables of the serving records' signed
out-of-sample error (leave one publisher out; +: cardfit's figure longer / larger than measured):

1. each FP8 run beside the BF16 run of the same page, engine, card, model, lengths, load and metric (the one
   comparison that holds the publisher's harness and the rest of the step fixed);
2. each DeepSeek-V3/R1 FP8 run (block-scaled: its only FP8 checkpoint) beside the FP4 run of the same
   publisher, engine release, card, lengths, users and metric (the same MLA + MoE step, other GEMMs);
3. the block-FP8 runs' TPOT / ITL by model family, publisher, engine and card."""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from typing import Any

from cardfit.validation.validate import Report, load_records, validate

# Qwen's own FP8 checkpoints (Qwen/Qwen3-*-FP8) are block-scaled: "fine-grained fp8 quantization with block
# size of 128" (the model cards, e.g. https://huggingface.co/Qwen/Qwen3-8B-FP8; config.json
# quantization_config "weight_block_size": [128, 128]); a record names the checkpoint in its launch line or
# note
_QWEN_BLOCK = re.compile(r"qwen/qwen3[-\w.]*-fp8", re.IGNORECASE)
# DeepSeek-V3/R1 ship FP8 weights only block-scaled (deepseek-ai/DeepSeek-V3 config.json quantization_config:
# "quant_method": "fp8", "weight_block_size": [128, 128]; DeepSeek-R1 the same architecture and format)
_DEEPSEEK = ("deepseek-v3", "deepseek-r1")
_TPOT = ("tpot_ms", "itl_ms")
_ACTIVE = re.compile(r"-a\d+b")  # a MoE id names its active parameters (qwen3-235b-a22b)


def is_fp8(r: dict[str, Any]) -> bool:
    return "fp8" in str(r.get("quant") or "").lower()


def scaling(r: dict[str, Any]) -> str:
    """'block' for a checkpoint with a scale per 128 x 128 weight block (DeepSeek-V3/R1 FP8, Qwen's
    Qwen3-*-FP8), 'tensor' for any other FP8 run (per-tensor or per-channel weight scales: NVIDIA ModelOpt,
    RedHatAI, Meta's FBGEMM rowwise, an engine's own `--quantization fp8` of BF16 weights), '' if not FP8."""
    if not is_fp8(r):
        return ""
    if str(r.get("model") or "").startswith(_DEEPSEEK):
        return "block"
    text = f"{r.get('excerpt') or ''} {r.get('note') or ''}"
    return "block" if _QWEN_BLOCK.search(text) else "tensor"


def _family(r: dict[str, Any]) -> str:
    model = str(r.get("model") or "")
    if model.startswith(_DEEPSEEK):
        return "DeepSeek-V3/R1"
    kind = "MoE" if _ACTIVE.search(model) else "dense"
    return f"{model} ({kind})"


def gemm(gpu: str) -> str:
    """W8A8 where the card computes in FP8 (its FP8 tensor rate is in the catalog), else W8A16: on an A100
    the engines run FP8 checkpoints as weight-only FP8 in Marlin (vllm fp8.py Fp8LinearMethod: use_marlin
    "not current_platform.has_device_capability(89)"), not as an FP8 GEMM."""
    from cardfit.catalog.gpus import default_gpus

    g = default_gpus().find(gpu)
    return "W8A8" if g is not None and g.tflops("fp8") else "W8A16"


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:+.0%}"


def _settings(r: dict[str, Any]) -> str:
    s = {k: v for k, v in (r.get("settings") or {}).items() if k not in ("gemm_quant", "moe_quant")}
    return repr(sorted(s.items()))


def _run(r: dict[str, Any]) -> tuple[Any, ...]:
    """What two records of one page share when they differ only in the checkpoint's precision."""
    return (str(r.get("source") or "").split("#")[0], r["runtime"], r.get("gpu"), r["model"], r.get("gpus"),
            r.get("input_tokens"), r.get("output_tokens"), r.get("concurrency"), r.get("load"),
            r.get("metric"), _settings(r))


def _release(r: dict[str, Any]) -> str:
    s = r.get("settings") or {}
    return str(s.get("version") or s.get("vllm_version") or "?")


def _loo(rep: Report) -> dict[str, float]:
    return {o.id: o.error for o in rep.loso if o.error is not None}


def bf16_pairs(rep: Report, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Table 1: per FP8 run with a BF16 run of the same page and question, both out-of-sample errors."""
    loo = _loo(rep)
    runs: dict[tuple[Any, ...], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if r.get("kind") != "serving" or r["id"] not in loo:
            continue
        precision = scaling(r) or str(r.get("quant") or "").lower()
        runs[_run(r)][precision].append(loo[r["id"]])
    out = []
    for key, by in runs.items():
        if "bf16" not in by:
            continue
        for precision in ("block", "tensor"):
            if precision in by:
                bf16, fp8 = _median(by["bf16"]), _median(by[precision])
                assert bf16 is not None and fp8 is not None
                out.append({"scaling": precision, "runtime": key[1], "gpu": key[2], "model": key[3],
                            "concurrency": key[7], "metric": key[9], "bf16": bf16, "fp8": fp8,
                            "gap": fp8 - bf16})
    return sorted(out, key=lambda x: (x["scaling"], x["model"], str(x["runtime"]), str(x["metric"])))


def fp4_pairs(rep: Report, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Table 2: DeepSeek-V3/R1 FP8 runs beside the FP4 (NVFP4 / MXFP4) run of the same publisher, release,
    card, lengths, users and metric, grouped by (publisher, engine, release, card, metric)."""
    loo = _loo(rep)
    runs: dict[tuple[Any, ...], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if (r.get("kind") != "serving" or r["id"] not in loo
                or not str(r.get("model") or "").startswith(_DEEPSEEK)):
            continue
        quant = str(r.get("quant") or "").lower()
        precision = "fp8" if "fp8" in quant else ("fp4" if "fp4" in quant else "")
        if precision:
            key = (rep.publishers.get(r["id"], ""), r["runtime"], _release(r), r.get("gpu"), r.get("gpus"),
                   r.get("input_tokens"), r.get("output_tokens"), r.get("concurrency"), r.get("metric"))
            runs[key][precision].append(loo[r["id"]])
    grouped: dict[tuple[Any, ...], list[tuple[float, float]]] = defaultdict(list)
    for key, by in runs.items():
        fp8, fp4 = _median(by["fp8"]), _median(by["fp4"])
        if fp8 is not None and fp4 is not None:
            grouped[(*key[:4], key[8])].append((fp8, fp4))
    return [{"publisher": k[0], "runtime": k[1], "release": k[2], "gpu": k[3], "metric": k[4], "n": len(v),
             "fp8": _median([a for a, _ in v]), "fp4": _median([b for _, b in v])}
            for k, v in sorted(grouped.items(), key=lambda kv: tuple(str(x) for x in kv[0]))]


def block_tpot(rep: Report, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Table 3: the block-FP8 runs' TPOT / ITL records (no drafter), by family, publisher, engine and card."""
    loo = _loo(rep)
    groups: dict[tuple[str, ...], list[float]] = defaultdict(list)
    for r in records:
        if (r.get("kind") != "serving" or r.get("metric") not in _TPOT or r["id"] not in loo
                or scaling(r) != "block" or (r.get("settings") or {}).get("speculative")):
            continue
        groups[(_family(r), rep.publishers.get(r["id"], ""), r["runtime"], str(r.get("gpu")))].append(
            loo[r["id"]])
    return [{"family": k[0], "publisher": k[1], "runtime": k[2], "gpu": k[3], "gemm": gemm(k[3]), "n": len(v),
             "median": _median(v), "low": min(v), "high": max(v)}
            for k, v in sorted(groups.items())]


def main(argv: list[str] | None = None) -> int:
    records = load_records("serving")
    rep = validate("serving")
    print("1. FP8 beside BF16: same page, engine, card, model, lengths, load, metric (out of sample)")
    print(f"{'scaling':8s} {'engine':8s} {'card':10s} {'model':18s} {'users':>6s} {'metric':22s} "
          f"{'BF16':>6s} {'FP8':>6s} {'gap':>6s}")
    for p in bf16_pairs(rep, records):
        print(f"{p['scaling']:8s} {p['runtime']:8s} {str(p['gpu'])[:10]:10s} {p['model'][:18]:18s} "
              f"{str(p['concurrency'] or 'all'):>6s} {str(p['metric']):22s} {_pct(p['bf16']):>6s} "
              f"{_pct(p['fp8']):>6s} {_pct(p['gap']):>6s}")
    print("\n2. DeepSeek-V3/R1 FP8 (block) beside FP4: same publisher, release, card, lengths, users, metric")
    print(f"{'publisher':22s} {'engine':7s} {'release':16s} {'card':9s} {'metric':8s} {'n':>3s} "
          f"{'FP8':>6s} {'FP4':>6s}")
    for p in fp4_pairs(rep, records):
        print(f"{p['publisher'][:22]:22s} {p['runtime']:7s} {p['release'][:16]:16s} {str(p['gpu'])[:9]:9s} "
              f"{str(p['metric'])[:8]:8s} {p['n']:3d} {_pct(p['fp8']):>6s} {_pct(p['fp4']):>6s}")
    print("\n3. Block-FP8 TPOT / ITL (no drafter), out of sample")
    print(f"{'family':26s} {'publisher':22s} {'engine':7s} {'card':10s} {'GEMM':5s} {'n':>3s} {'median':>7s} "
          f"{'range':>14s}")
    for g in block_tpot(rep, records):
        print(f"{g['family'][:26]:26s} {g['publisher'][:22]:22s} {g['runtime']:7s} {g['gpu'][:10]:10s} "
              f"{g['gemm']:5s} {g['n']:3d} {_pct(g['median']):>7s} "
              f"{_pct(g['low']):>6s}..{_pct(g['high']):>6s}")
    print("error = predicted / measured - 1, the publisher's constants refitted without it (+: cardfit's "
          "TPOT longer, its throughput larger)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

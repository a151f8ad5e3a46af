#!/usr/bin/env python
"""Side by side: cardfit and other memory calculators from PyPI on the same validation records.

Not a test (the peers need not be installed in CI). The peers run in their own throwaway virtual environment
so nothing of theirs enters the project:

    python scripts/compare_peers.py --setup            # creates /tmp/cardfit-peers with pinned peers
    python scripts/compare_peers.py [--peers-python /tmp/cardfit-peers/bin/python] [--json]

Peers (versions pinned below and printed with the results):
- accelerate `estimate-memory` (Hugging Face): parameters × bytes of the chosen dtype, counted on an empty
  model built from config.json. Run offline here: the script builds the model from the catalog's shape
  with `init_empty_weights` and calls accelerate's own `calculate_maximum_sizes`.
- llm-mem (`LLMMemoryCalculator`): model memory = parameters × bytes × 1.18, KV = layers × KV heads ×
  head dim × bytes × 2 × context. Its Hub fetches (config.json, safetensors parameter count) are replaced
  with the catalog's values so its own code runs on the record's model.
- hf-mem (GGUF path): `compute_gguf_kv_cache_size` on the GGUF metadata keys, fed from the catalog.
A peer that does not accept a record's input (a GGUF k-quant mix, a sliding-window model, …) is shown as
"n/a", never guessed for it."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

PEERS = {"accelerate": "1.15.0", "llm-mem": "0.1.1", "hf-mem": "0.5.6", "transformers": "5.24.0",
         "torch": "2.14.1"}
DEFAULT_VENV = Path("/tmp/cardfit-peers")

# --- what each record asks, in terms the peers understand ------------------------------------------------

# peers' dtype vocabularies: accelerate float32/float16/int8/int4, llm-mem float32/float16/int8/int4/float8
_DTYPE = {"bf16": "float16", "fp16": "float16", "f16": "float16", "fp32": "float32", "f32": "float32",
          "fp8": "int8", "int8": "int8", "int8-w8a8": "int8", "Q8_0": "int8", "Q4_0": "int4",
          "Q4_K_M": "int4", "Q4_K_S": "int4", "IQ4_XS": "int4", "mxfp4": "int4", "MXFP4_MOE": "int4",
          "F16": "float16", "GPTQ-int4": "int4"}


def _peer_dtype(quant: str) -> str | None:
    return _DTYPE.get(quant.split(" ")[0])


def build_inputs() -> list[dict]:
    """Every weights / file_size / kv_cache record with cardfit's own prediction and the model's shape."""
    from cardfit.validation.validate import _model, load_records, predict

    rows = []
    for r in load_records():
        if r["kind"] not in ("weights", "file_size", "kv_cache"):
            continue
        o = predict(r)
        try:
            m = _model(r)
        except Exception:  # noqa: BLE001  (skipped records are listed by cardfit validate)
            continue
        if r["kind"] == "kv_cache" and r["runtime"] == "vllm":
            continue  # vLLM's kv_cache records are its whole pool, not a per-context cache
        rows.append({"id": r["id"], "kind": r["kind"], "runtime": r["runtime"],
                     "quant": str(r.get("quant", "")), "measured": float(r["measured"]),
                     "cardfit": o.predicted, "tp": int((r.get("settings") or {}).get("tp") or 1),
                     "dtype": _peer_dtype(str(r.get("quant", ""))),
                     "kv_dtype": str(r.get("kv_dtype") or "f16"), "context": int(r.get("context") or 0),
                     "parallel": int(r.get("parallel") or 1),
                     "shape": {"params": m.params, "layers": m.layers, "kv_heads": m.kv_heads,
                               "heads": m.heads, "hidden": m.hidden, "head_dim": m.head_dim,
                               "intermediate": m.intermediate, "vocab": m.vocab, "model_type": m.model_type,
                               "tied": m.tied_embeddings, "experts": m.experts,
                               "moe_intermediate": m.moe_intermediate, "sliding_window": m.sliding_window,
                               "sliding_layers": m.sliding_layers}})
    return rows


# --- the part that runs inside the peers' venv -----------------------------------------------------------

DRIVER = textwrap.dedent(r'''
    import json, sys, tempfile, os
    from importlib.metadata import version
    rows = json.load(sys.stdin)
    out = {"versions": {}, "results": {}}
    for dist in ("accelerate", "llm-mem", "hf-mem", "transformers", "torch"):
        try:
            out["versions"][dist] = version(dist)
        except Exception:
            out["versions"][dist] = None

    def llama_config(s):
        return {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": s["hidden"],
                "num_attention_heads": s["heads"], "num_key_value_heads": s["kv_heads"],
                "num_hidden_layers": s["layers"], "intermediate_size": s["intermediate"] or 4 * s["hidden"],
                "vocab_size": s["vocab"], "head_dim": s["head_dim"], "tie_word_embeddings": s["tied"]}

    # accelerate: empty model from the config, then accelerate.utils.calculate_maximum_sizes
    def accelerate_weights(r):
        from accelerate import init_empty_weights
        from accelerate.utils import calculate_maximum_sizes
        import transformers
        s = r["shape"]
        if r["dtype"] is None or s["experts"] or not s["hidden"]:
            return None  # dense llama-like shapes only; MoE / GGUF k-quant mixes are not its inputs
        cfg = transformers.LlamaConfig(**{k: v for k, v in llama_config(s).items()
                                          if k not in ("model_type", "architectures")})
        with init_empty_weights():
            model = transformers.AutoModelForCausalLM.from_config(cfg)
        total, _ = calculate_maximum_sizes(model)  # bytes at float32
        div = {"float32": 1, "float16": 2, "int8": 4, "int4": 8}[r["dtype"]]
        # accelerate's own note: it counts the shape's parameters; scale to the stated count like cardfit
        return total / div / r["tp"]

    def llm_mem(r):
        import llm_mem.llm_memory_calculator as L
        s = r["shape"]
        calc = L.LLMMemoryCalculator()
        class Meta:  # stands in for huggingface_hub.get_safetensors_metadata
            parameter_count = {"BF16": s["params"]}
        L.get_safetensors_metadata = lambda *a, **k: Meta()
        d = tempfile.mkdtemp()
        p = os.path.join(d, "config.json")
        with open(p, "w") as f:
            json.dump(llama_config(s), f)
        L.hf_hub_download = lambda *a, **k: p
        if r["kind"] == "kv_cache":
            if r["kv_dtype"] not in ("f16", "fp16", "bf16"):
                return None
            gb = calc.calculate_kv_cache_memory(r["context"], "catalog/model", "float16")
            return None if isinstance(gb, str) else gb * 1e9
        if r["dtype"] is None:
            return None
        gb = calc.get_model_size("catalog/model", r["dtype"])
        return None if isinstance(gb, str) else gb * 1e9 / r["tp"]

    def hf_mem_kv(r):
        from hf_mem.gguf.kv_cache import compute_gguf_kv_cache_size
        s = r["shape"]
        dt = {"f16": "F16", "fp16": "F16", "bf16": "BF16", "q8_0": "Q8_0", "q4_0": "Q4_0"}.get(r["kv_dtype"])
        if dt is None or not s["heads"]:
            return None
        meta = {"block_count": s["layers"], "head_count_kv": s["kv_heads"], "head_count": s["heads"],
                "embedding_length": s["hidden"], "context_length": r["context"]}
        return float(compute_gguf_kv_cache_size(meta, dt, 1))

    for r in rows:
        res = {}
        for name, fn, kinds in (("accelerate", accelerate_weights, ("weights", "file_size")),
                                ("llm-mem", llm_mem, ("weights", "file_size", "kv_cache")),
                                ("hf-mem", hf_mem_kv, ("kv_cache",))):
            if r["kind"] not in kinds:
                continue
            try:
                res[name] = fn(r)
            except Exception as e:
                res[name] = None
                res[name + ":error"] = f"{type(e).__name__}: {e}"[:160]
        out["results"][r["id"]] = res
    json.dump(out, sys.stdout)
''')


def run_peers(rows: list[dict], python: str) -> dict:
    proc = subprocess.run([python, "-c", DRIVER], input=json.dumps(rows), capture_output=True, text=True,
                          timeout=900)
    if proc.returncode:
        sys.exit(f"peers failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout)


def setup(venv: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pins = [f"{k}=={v}" for k, v in PEERS.items()]
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", *pins], check=True)


def _err(pred: float | None, measured: float) -> float | None:
    return None if pred is None or not measured else pred / measured - 1


def report(rows: list[dict], peers: dict) -> dict:
    tools = ["cardfit", "accelerate", "llm-mem", "hf-mem"]
    table = []
    for r in rows:
        res = peers["results"].get(r["id"], {})
        preds = {"cardfit": r["cardfit"], **{t: res.get(t) for t in tools[1:]}}
        table.append({"id": r["id"], "kind": r["kind"], "quant": r["quant"], "measured": r["measured"],
                      "errors": {t: _err(preds.get(t), r["measured"]) for t in tools}})
    summary: dict[str, dict[str, dict]] = {}
    for kind in ("file_size", "weights", "kv_cache"):
        summary[kind] = {}
        for t in tools:
            errs = [abs(x["errors"][t]) for x in table if x["kind"] == kind and x["errors"][t] is not None]
            summary[kind][t] = {"n": len(errs), "median_abs_error": statistics.median(errs) if errs else None}
    return {"versions": {"cardfit": _cardfit_version(), **peers["versions"]}, "summary": summary,
            "records": table}


def _cardfit_version() -> str:
    from importlib.metadata import version

    return version("cardfit")


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.1%}"


def print_text(d: dict) -> None:
    print("versions: " + ", ".join(f"{k} {v}" for k, v in d["versions"].items()))
    tools = ["cardfit", "accelerate", "llm-mem", "hf-mem"]
    print(f"\n{'record':48} {'kind':10} " + " ".join(f"{t:>11}" for t in tools))
    for r in d["records"]:
        print(f"{r['id'][:48]:48} {r['kind']:10} " + " ".join(f"{_pct(r['errors'][t]):>11}" for t in tools))
    print("\nmedian |error| per kind (n records the tool accepts):")
    for kind, s in d["summary"].items():
        cells = []
        for t in tools:
            med = s[t]["median_abs_error"]
            cells.append(f"{t} {'n/a' if med is None else format(med, '.1%')} (n={s[t]['n']})")
        print(f"  {kind:10} " + " · ".join(cells))


# --- serving peers: aiconfigurator 0.12 and GenZ on the served-load cases of the deploy issue -------------
# `python scripts/compare_peers.py --serving [--setup-serving]` (not run in CI: the peers need their own venv,
# and aiconfigurator takes 10–40 s per question). Both run offline: aiconfigurator reads a local config.json
# written from the catalog's shape and its own measured perf database (aiconfigurator-core wheel); GenZ uses
# its built-in model and system tables.

SERVING_PEERS = {"aiconfigurator": "0.12.0", "genz-llm": "0.0.16"}
SERVING_VENV = Path("/tmp/cardfit-serving-peers")
# (case, cardfit model id, HF config name, quant, cards, ISL, OSL, TTFT ms, TPOT ms, aiconfigurator system,
# GenZ system)
SERVING_CASES = [
    ("Llama-3.1-8B bf16, 1x H100 SXM, vLLM", "llama-3.1-8b", "meta-llama/Llama-3.1-8B", "bf16", "H100 SXM", 1,
     1000, 300, 2000, 50, "h100_sxm", "H100_GPU"),
    ("Llama-3.1-70B fp8, 2x H100 SXM, vLLM", "llama-3.1-70b", "meta-llama/Llama-3.1-70B", "fp8", "H100 SXM",
     2, 1000, 300, 2000, 50, "h100_sxm", "H100_GPU"),
    # MoE cases (issue 26): aiconfigurator reads its own config of the named checkpoint (no config written)
    ("Qwen3-30B-A3B bf16, 2x H100 SXM, vLLM", "qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B", "bf16", "H100 SXM", 2,
     1000, 300, 2000, 50, "h100_sxm", "H100_GPU"),
    ("DeepSeek-V3 fp8, 8x H200 SXM, vLLM", "deepseek-v3", "deepseek-ai/DeepSeek-V3", "fp8", "H200 SXM", 8,
     1000, 300, 2000, 50, "h200_sxm", "H200_GPU"),
]
# Users the deploy scan tries on a fixed card set (_cardfit_best): the concurrencies aiconfigurator's
# default sweep reports beside them
# The KV cache aiconfigurator 0.12.0 ran each case with (its best_config_topn.csv `kvcache` column): BF16
# but for DeepSeek-V3's FP8 checkpoint (FP8); cardfit's scan is held to the same
SERVING_KV = {"deepseek-v3": "fp8"}
SCAN_USERS = (8, 16, 32, 48, 64, 96, 128, 160, 192, 256, 320, 384, 448, 512, 576, 640, 768, 896, 1024, 1280,
              1536)


def setup_serving(venv: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q"]
                   + [f"{k}=={v}" for k, v in SERVING_PEERS.items()], check=True)


def _cardfit_best(model: str, quant: str, gpu: str, cards: int, isl: int, osl: int, ttft: float,
                  tpot: float) -> dict:
    """cardfit deploy's model on exactly `cards` cards: every layout deploy searches (TP, attention DP x EP,
    replicas) at each of SCAN_USERS users, the most output tokens/s per card whose predicted TTFT p90 and
    TPOT meet the targets (aiconfigurator's `default` answers the same question)."""
    from dataclasses import replace

    from cardfit.services import deploy as d

    inp = d.DeployInput(model=model, users=1.0, input_tokens=isl, output_tokens=osl, ttft_ms=ttft,
                        tpot_ms=tpot, gpu=(gpu,), runtime="vllm", quant=quant,
                        kv_dtype=SERVING_KV.get(model, "bf16"), max_cards=cards)
    t = d.targets(inp)
    best: dict = {"tokens_per_s": None}
    for c in d.candidates(inp, d.settings(inp)[0]):
        if cards % c.cards:
            continue
        for users in SCAN_USERS:
            at = replace(inp, users=float(users))
            r = d.evaluate(at, replace(c, inp=at), cards // c.cards, t)
            if r.served.stable and max(r.misses.values()) <= 1 and (
                    best["tokens_per_s"] is None or r.served_tokens_per_s > best["tokens_per_s"]):
                best = {"tokens_per_s": round(r.served_tokens_per_s, 1), "batch": users,
                        "tpot_ms": round(r.served.tpot_s * 1e3, 1), "ttft_ms": round(r.served.ttft_s * 1e3),
                        "tp": c.tp, "dp": c.attention_dp if c.ep > 1 else 1, "ep": c.ep,
                        "replicas": cards // c.cards}
    return best


def _hf_config(model_id: str, quant: str) -> dict | None:
    """A config.json for aiconfigurator, written from the catalog's shape (no Hub access); an fp8 case carries
    the quantization_config an FP8 checkpoint has (quant_method fp8, per-tensor, bf16 KV cache)."""
    from cardfit.catalog.models import default_models

    m = default_models().get(model_id)
    if m.is_moe:
        return None  # aiconfigurator's own config of the checkpoint
    quant_cfg = {"quantization_config": {"quant_method": "fp8"}} if quant == "fp8" else {}
    return quant_cfg | {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": m.hidden,
            "intermediate_size": m.intermediate, "num_hidden_layers": m.layers,
            "num_attention_heads": m.heads, "num_key_value_heads": m.kv_heads, "head_dim": m.head_dim,
            "vocab_size": m.vocab, "max_position_embeddings": 131072, "rope_theta": 500000.0,
            "hidden_act": "silu", "rms_norm_eps": 1e-05,
            "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                             "original_max_position_embeddings": 8192, "rope_type": "llama3"},
            "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


def _cardfit_serving(model: str, quant: str, gpu: str, cards: int, isl: int, osl: int, ttft: float,
                     tpot: float) -> dict:
    """cardfit speed's concurrency table: the highest aggregate whose step time meets the TPOT target."""
    conc = ",".join(str(c) for c in (1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 288, 384, 512))
    cmd = [sys.executable, "-m", "cardfit", "speed", model, "--quant", quant, "--gpu", gpu, "--runtime",
           "vllm", "--context", str(isl + osl), "--filled", str(isl + osl // 2), "--prompt", str(isl),
           "--concurrency", conc, "--json"]
    if cards > 1:
        cmd += ["--gpus", str(cards), "--tp", str(cards)]
    d = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    ok = [r for r in d["rows"] if r["kv_fits"] and r["step_ms"] <= tpot
          and d["time_to_first_token_s"] * 1000 <= ttft]
    best = max(ok, key=lambda r: r["aggregate_tokens_per_s"]) if ok else None
    return {"tokens_per_s": best and best["aggregate_tokens_per_s"], "batch": best and best["concurrency"],
            "tpot_ms": best and best["step_ms"], "ttft_ms": round(d["time_to_first_token_s"] * 1000, 1)}


_AIC = """
import csv, glob, json, os, subprocess, sys, tempfile
case = json.loads(sys.argv[1])
work = tempfile.mkdtemp()
mdir = case["name"]
if case["config"] is not None:
    mdir = os.path.join(work, case["name"].split("/")[-1])
    os.makedirs(mdir)
    json.dump(case["config"], open(os.path.join(mdir, "config.json"), "w"))
cmd = [os.path.join(os.path.dirname(sys.executable), "aiconfigurator"), "cli", "default",
       "--model-path", mdir, "--system", case["system"], "--total-gpus", str(case["cards"]),
       "--backend", "vllm", "--serving-mode", "agg", "--isl", str(case["isl"]), "--osl", str(case["osl"]),
       "--ttft", str(case["ttft"]), "--tpot", str(case["tpot"]),
       "--top-n", "1", "--no-color", "--log-level", "ERROR", "--save-dir", work]
subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, HF_HUB_OFFLINE="1"))
rows = [r for f in glob.glob(os.path.join(work, "**", "agg", "best_config_topn.csv"), recursive=True)
        for r in csv.DictReader(open(f))]
r = rows[0] if rows else {}
print(json.dumps({"tokens_per_s": float(r["tokens/s"]) if r else None, "batch": int(r["bs"]) if r else None,
                  "tpot_ms": float(r["tpot"]) if r else None, "ttft_ms": float(r["ttft"]) if r else None,
                  "tp": r.get("tp"), "dp": r.get("dp"), "moe_tp": r.get("moe_tp"), "moe_ep": r.get("moe_ep"),
                  "version": r.get("version")}))
"""

_GENZ = """
import json, sys, warnings
warnings.filterwarnings("ignore")
from GenZ import decode_moddeling, prefill_moddeling
c = json.loads(sys.argv[1])
bits = "fp8" if c["quant"] == "fp8" else "bf16"
kw = dict(model=c["name"], system_name=c["genz_system"], bits=bits, tensor_parallel=c["cards"])
ttft = prefill_moddeling(batch_size=1, input_tokens=c["isl"], **kw)["Latency"]
best = None
for b in list(range(1, 64)) + list(range(64, 2049, 16)):
    try:
        d = decode_moddeling(batch_size=b, input_tokens=c["isl"], output_tokens=c["osl"], **kw)
    except ValueError:  # KV cache no longer fits
        break
    if d["Latency"] <= c["tpot"] and ttft <= c["ttft"] and (best is None
                                                             or d["Throughput"] > best["tokens_per_s"]):
        best = {"tokens_per_s": round(d["Throughput"], 1), "batch": b, "tpot_ms": round(d["Latency"], 2),
                "ttft_ms": round(ttft, 1)}
print(json.dumps(best or {"tokens_per_s": None}))
"""


def aic_users(res: dict) -> dict:
    """aiconfigurator's result with the users it serves: its best_config_topn.csv `bs` is one attention-DP
    rank's batch (aiconfigurator 0.12.0 `cli estimate` prints "Batch Size: 320 ... Attention DP: 2 ...
    Concurrency: 640" for Qwen3-30B-A3B on 2x H100), so the users in flight are bs x dp."""
    if res.get("batch") is None:
        return res
    return res | {"concurrency": int(res["batch"]) * int(res.get("dp") or 1)}


def run_serving(python: str) -> list[dict]:
    out = []
    for (case, model, hf, quant, gpu, cards, isl, osl, ttft, tpot, aic_system, genz_system) in SERVING_CASES:
        spec = {"name": hf, "config": _hf_config(model, quant), "quant": quant, "cards": cards, "isl": isl,
                "osl": osl, "ttft": ttft, "tpot": tpot, "system": aic_system, "genz_system": genz_system}
        row = {"case": case, "cardfit": _cardfit_best(model, quant, gpu, cards, isl, osl, ttft, tpot),
               "cardfit_speed_table": _cardfit_serving(model, quant, gpu, cards, isl, osl, ttft, tpot)}
        for peer, code in (("aiconfigurator", _AIC), ("genz", _GENZ)):
            try:
                res = subprocess.run([python, "-c", code, json.dumps(spec)], capture_output=True, text=True,
                                     timeout=600)
                row[peer] = json.loads(res.stdout.strip().splitlines()[-1])
                if peer == "aiconfigurator":
                    row[peer] = aic_users(row[peer])
            except (subprocess.SubprocessError, ValueError, IndexError, OSError) as e:
                row[peer] = {"tokens_per_s": None, "error": f"{type(e).__name__}: {e}"}
        out.append(row)
    return out


def print_serving(rows: list[dict]) -> None:
    print("| case | cardfit (deploy, every layout) | aiconfigurator " + SERVING_PEERS["aiconfigurator"]
          + " | GenZ " + SERVING_PEERS["genz-llm"] + " | cardfit / aiconfigurator |")
    print("|---|---|---|---|---|")
    for r in rows:
        cells = []
        for peer in ("cardfit", "aiconfigurator", "genz"):
            v = r[peer]
            users = v.get("concurrency") or v.get("batch")  # aiconfigurator's batch is per attention-DP rank
            cells.append("—" if not v.get("tokens_per_s") else
                         f"{v['tokens_per_s']:,.0f} tok/s at {users} users (TPOT {v['tpot_ms']} ms)")
        a, c = r["aiconfigurator"].get("tokens_per_s"), r["cardfit"].get("tokens_per_s")
        cells.append(f"{c / a:.2f}x" if a and c else "—")
        print(f"| {r['case']} | " + " | ".join(cells) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--setup", action="store_true", help=f"create {DEFAULT_VENV} with the pinned peers")
    ap.add_argument("--peers-python", default=str(DEFAULT_VENV / "bin" / "python"))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--serving", action="store_true",
                    help="serving cases: aiconfigurator and GenZ beside cardfit")
    ap.add_argument("--setup-serving", action="store_true",
                    help=f"create {SERVING_VENV} with the serving peers")
    a = ap.parse_args()
    if a.setup_serving:
        setup_serving(SERVING_VENV)
    if a.serving or a.setup_serving:
        rows = run_serving(str(SERVING_VENV / "bin" / "python"))
        print(json.dumps(rows, indent=2)) if a.json else print_serving(rows)
        return
    if a.setup:
        setup(DEFAULT_VENV)
    rows = build_inputs()
    d = report(rows, run_peers(rows, a.peers_python))
    if a.json:
        print(json.dumps(d, indent=2))
    else:
        print_text(d)


if __name__ == "__main__":
    main()

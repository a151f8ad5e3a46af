"""The whole eligible aiconfigurator silicon sample as serving records (`cardfit validate --source
aiconfigurator`).

aiconfigurator-core 0.12.0 (Apache-2.0, NVIDIA; https://pypi.org/project/aiconfigurator-core/0.12.0/) ships
aiconfigurator_core/systems/silicon_sample.csv: 5,221 measured serving runs, one row each with the TTFT and
TPOT it measured. `eligibility` sorts every row into the ones cardfit can express (an aggregated run of a
catalog model on a catalog card, at a precision and layout cardfit sets up) and the reasons for the rest;
data/aiconfigurator/silicon_sample_eligible.csv keeps the eligible rows (scripts/aic_sample.py writes it) and
`records` turns each row into two serving records, TTFT and TPOT, with the conventions of the hand-made
`aic-*` records of data/validation/serving.toml (their notes cite aiconfigurator's source for each one):
10 x the concurrency requests in a closed load of fixed lengths, the mean as the statistic, max_batch_size =
the row's batch size and the step budget aiconfigurator's generator writes for the engine."""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

from ..catalog.gpus import default_gpus
from ..catalog.models import ModelSpec, default_models
from ..errors import InputError

SOURCE = "https://pypi.org/project/aiconfigurator-core/0.12.0/"
DATA = "aiconfigurator/silicon_sample_eligible.csv"
# The wheel's date, where a row names no measurement date (the aic-* records of serving.toml: "Measurement
# date not stated: the wheel's date").
WHEEL_DATE = "2026-09-01"
# The columns kept of silicon_sample.csv (the prefill_*/decode_* columns describe disaggregated runs only)
COLUMNS = ("id", "silicon_data_source", "backend", "backend_version", "model_path", "system", "precision",
           "mode", "isl", "osl", "gemm_quant_mode", "moe_quant_mode", "batch_size", "tp_size", "pp_size",
           "attention_dp_size", "moe_tp_size", "moe_ep_size", "silicon_ttft_ms", "silicon_tpot_ms")
METRICS = (("ttft", "ttft_ms", "silicon_ttft_ms"), ("tpot", "tpot_ms", "silicon_tpot_ms"))
RUNTIMES = ("vllm", "sglang", "trtllm")
# Extra tokens aiconfigurator's generator gives an aggregated run's step budget above the prompt
# (src/aiconfigurator/generator/rule_plugin/benchmark/{trtllm,vllm,sglang}.rule: '... + SlaConfig.isl + 1500')
BUDGET_EXTRA_TOKENS = 1500
# TensorRT-LLM's budget is rounded up to its KV block (trtllm.rule: tokens_per_block 32)
TRTLLM_TOKENS_PER_BLOCK = 32
# Requests per run: 10 x the concurrency (src/aiconfigurator/sdk/backends/trtllm_backend.py, run_agg: 'assume
# we have requests 10x of concurrency ... to mitigate the impact of first round latency')
REQUESTS_PER_CONCURRENCY = 10
# Checkpoint suffixes that name a format, not a model ('Qwen/Qwen3-235B-A22B-FP8', 'nvidia/…-NVFP4')
_FORMAT_SUFFIX = re.compile(r"-(fp8|nvfp4|fp4)$", re.IGNORECASE)
MAX_ROWS = 20_000  # the upstream file has 5,221 rows: a bound on the work, not a limit on the data


def _int(row: Mapping[str, str], key: str, default: int = 0) -> int:
    v = (row.get(key) or "").strip()
    return int(v) if v.isdigit() else default


def catalog_model(path: str) -> ModelSpec | None:
    """The catalog model of a row's model_path: the path itself, else its name without a format suffix."""
    models = default_models()
    name = path.strip()
    found = models.find(name)
    if found is None:
        found = models.find(_FORMAT_SUFFIX.sub("", name.rsplit("/", 1)[-1]))
    return found


def quant_of(row: Mapping[str, str], m: ModelSpec) -> str | None:
    """cardfit's quantization for the row's precision: none stated = the checkpoint's BF16 (the aic-*
    records), fp4 = the model's own 4-bit float format where it ships one (gpt-oss: MXFP4), else NVFP4 (the
    row's gemm_quant_mode); None: one cardfit does not set up (int4 weight-only)."""
    p = (row.get("precision") or "").strip().lower()
    if p in ("", "bf16"):
        return "bf16"
    if p == "fp8":
        return "fp8"
    if p == "fp4":
        native = (m.native_quant or "").lower()
        return native if native in ("mxfp4", "nvfp4") else "nvfp4"
    return None


def why_not(row: Mapping[str, str]) -> str:
    """'' when cardfit can express the row, else the reason it cannot (one short phrase per reason)."""
    if (row.get("mode") or "") != "agg":
        return "disaggregated serving (prefill and decode workers)"
    if (row.get("backend") or "") not in RUNTIMES:
        return "engine not vllm, sglang or trtllm"
    if not (row.get("silicon_ttft_ms") or "").strip() or not (row.get("silicon_tpot_ms") or "").strip():
        return "a metric is missing"
    m = catalog_model(row.get("model_path") or "")
    if m is None:
        return "model not in the catalog"
    if default_gpus().find(row.get("system") or "") is None:
        return "card not in the catalog"
    if quant_of(row, m) is None:
        return "precision cardfit does not set up (int4 weight-only)"
    return _layout_why_not(row, m)


def _layout_why_not(row: Mapping[str, str], m: ModelSpec) -> str:
    tp, adp = _int(row, "tp_size"), _int(row, "attention_dp_size", 1)
    moe_tp, moe_ep = _int(row, "moe_tp_size"), _int(row, "moe_ep_size")
    if tp < 1 or _int(row, "pp_size") < 1 or _int(row, "batch_size") < 1 or _int(row, "isl") < 1 \
            or _int(row, "osl") < 1 or "0" in (row.get("attention_dp_size"), row.get("moe_tp_size"),
                                             row.get("moe_ep_size")):
        return "layout or load not stated (a size of 0)"
    if adp > 1:
        return "attention data parallel (attention_dp_size > 1)"
    if m.is_moe and moe_tp * moe_ep != tp:
        return "MoE split differs from the attention split (moe_tp x moe_ep != tp)"
    stated = re.search(r"silicon_concurrency=(\d+)", row.get("silicon_data_source") or "")
    if stated and int(stated.group(1)) != _int(row, "batch_size"):
        return "silicon_concurrency differs from batch_size"
    return ""


def eligibility(rows: Iterable[Mapping[str, str]]) -> tuple[list[Mapping[str, str]], Counter[str]]:
    """(the rows cardfit can express, the count of every other row's reason)."""
    keep: list[Mapping[str, str]] = []
    reasons: Counter[str] = Counter()
    for row in rows:
        why = why_not(row)
        if why:
            reasons[why] += 1
        else:
            keep.append(row)
    return keep, reasons


def read_rows(text: str) -> list[dict[str, str]]:
    """The rows of a silicon_sample CSV (the whole upstream file or the trimmed one), checked: the columns
    cardfit reads must be there, and the file is bounded."""
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise InputError(f"not an aiconfigurator silicon_sample CSV: no column {', '.join(missing)}",
                         field="source")
    rows: list[dict[str, str]] = []
    for row in reader:
        if len(rows) >= MAX_ROWS:
            raise InputError(f"silicon_sample CSV has more than {MAX_ROWS:,} rows", field="source")
        rows.append({c: row.get(c) or "" for c in COLUMNS})
    return rows


def _budget(runtime: str, batch: int, isl: int) -> tuple[str, int]:
    """The step budget aiconfigurator's generator writes into an aggregated run (the aic-* records' notes)."""
    if runtime == "trtllm":
        tokens = batch + isl + BUDGET_EXTRA_TOKENS
        return "max_num_tokens", -(-tokens // TRTLLM_TOKENS_PER_BLOCK) * TRTLLM_TOKENS_PER_BLOCK
    if runtime == "vllm":
        return "max_num_batched_tokens", batch + isl + BUDGET_EXTRA_TOKENS
    return "max_prefill_tokens", isl + BUDGET_EXTRA_TOKENS


def settings_of(row: Mapping[str, str], m: ModelSpec, quant: str) -> tuple[dict[str, Any], list[str]]:
    """(settings, assumed) of the row's run, as the aic-* records state them."""
    runtime, batch, isl = row["backend"], _int(row, "batch_size"), _int(row, "isl")
    version = (row.get("backend_version") or "").strip() or "not stated"
    s: dict[str, Any] = {"tp": _int(row, "tp_size"), "pp": _int(row, "pp_size"), "version": version,
                         "max_batch_size": batch}
    if _int(row, "moe_tp_size") > 1:
        s["moe_tp"] = _int(row, "moe_tp_size")
    if _int(row, "moe_ep_size") > 1:
        s["moe_ep"] = _int(row, "moe_ep_size")
    if quant != "bf16" and row.get("gemm_quant_mode"):
        s["gemm_quant"] = row["gemm_quant_mode"]
    if quant != "bf16" and m.is_moe and row.get("moe_quant_mode"):
        s["moe_quant"] = row["moe_quant_mode"]
    if runtime == "trtllm" and quant == "fp8":  # aiconfigurator's fp8 profile: kvcache_quant_mode fp8
        s["kv_cache_dtype"] = "fp8"
    key, tokens = _budget(runtime, batch, isl)
    s[key] = tokens
    assumed = ["requests", "statistic", key] + (["version"] if version == "not stated" else [])
    if runtime in ("sglang", "trtllm"):
        # graphs captured for every batch up to the run's own: the generator's rules write the same list for
        # both engines (generator/rule_plugin/benchmark/sglang.rule and trtllm.rule: 'agg_prefill_decode
        # cuda_graph_batch_sizes = ((range(1, max_batch_size + 1) | list) ...)'). SGLang takes it as
        # --cuda-graph-bs, whose largest is its cuda_graph_max_bs (server_args.py); TensorRT-LLM as
        # cuda_graph_config batch_sizes with enable_padding false (generator/config/backend_templates/trtllm/
        # extra_engine_args.<release>.yaml.j2), not its default of 1-31, 32, 64, 128 (llm_args.py
        # CudaGraphConfig), so no decode batch of the run falls outside a captured size
        s["cuda_graph_max_bs"] = batch
        assumed.append("cuda_graph_max_bs")
    return s, assumed


def build(row: Mapping[str, str], header: str = ",".join(COLUMNS)) -> list[dict[str, Any]]:
    """The TTFT and TPOT records of one eligible row (an ineligible row raises InputError with its reason)."""
    why = why_not(row)
    if why:
        raise InputError(f"row {row.get('id')}: {why}", field="source")
    m = catalog_model(row["model_path"])
    assert m is not None  # why_not checked it
    quant = quant_of(row, m) or ""
    gpu = default_gpus().find(row["system"])
    settings, assumed = settings_of(row, m, quant)
    measured = re.search(r"measured=(\d{4}-\d{2}-\d{2})", row.get("silicon_data_source") or "")
    batch = _int(row, "batch_size")
    excerpt = header + "\n" + ",".join(_csv_field(row.get(c, "")) for c in header.split(","))
    base = {"kind": "serving", "model": m.id, "quant": quant, "runtime": row["backend"],
            "gpu": gpu.name if gpu else row["system"], "gpus": settings["tp"] * settings["pp"],
            "input_tokens": _int(row, "isl"), "output_tokens": _int(row, "osl"), "concurrency": batch,
            "load": "closed", "requests": REQUESTS_PER_CONCURRENCY * batch, "fixed_lengths": True,
            "statistic": "mean", "assumed": assumed, "settings": settings, "excerpt": excerpt,
            "source": SOURCE, "date": measured.group(1) if measured else WHEEL_DATE,
            "note": f"aiconfigurator-core 0.12.0 silicon_sample.csv row {row['id']}, built by "
                    "validation/aic_sample.py with the conventions of the aic-* records of serving.toml."}
    return [{"id": f"aic-row-{row['id']}-{short}", **base, "metric": metric,
             "measured": round(float(row[column]), 3), "unit": "ms"} for short, metric, column in METRICS]


def _csv_field(v: str) -> str:
    if any(ch in v for ch in ',"\n'):
        return '"' + v.replace('"', '""') + '"'
    return v


@cache
def records() -> tuple[dict[str, Any], ...]:
    """Every record of the shipped eligible sample (two per row: TTFT and TPOT)."""
    from importlib import resources

    text = resources.files("cardfit.data").joinpath(DATA).read_text(encoding="utf-8")
    rows = read_rows(text)
    out: list[dict[str, Any]] = []
    for row in rows:
        out += build(row)
    return tuple(out)


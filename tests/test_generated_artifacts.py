"""The generated tables held against something the code did not write (issue 25 item 22): accuracy.toml's
bands recomputed from the out-of-sample errors by the statistics module, a fitted constant of runtimes.toml
recomputed by hand from its records, and the README plan's memory lines from Llama 3.1 8B's tensor shapes."""

from __future__ import annotations

import re
import statistics
import tomllib
from pathlib import Path

import pytest

from cardfit.core.uncertainty import band_group
from cardfit.validation.validate import all_records

from .test_mutants import L8_EMBD, L8_HEAD, L8_KV_HEADS, L8_LAYERS, Q4_K, llama8b_q4_k_m

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "src" / "cardfit" / "data"
# the figures of accuracy.toml that are speeds and served-load times, and the validation records behind each
# (a record's kind, and for a served record its metric: validation/validate.py FIGURE_KINDS, SERVING_FIGURES)
SPEED_FIGURES = {"decode_tokens_per_s": ("decode", ()), "prefill_tokens_per_s": ("prefill", ()),
                 "aggregate_tokens_per_s": ("aggregate_decode", ()),
                 "serving_ttft_ms": ("serving", ("ttft_ms",)),
                 "serving_tpot_ms": ("serving", ("tpot_ms", "itl_ms")),
                 "serving_tokens_per_s": ("serving", ("output_tokens_per_s", "request_throughput"))}


def _bands() -> list[dict]:
    return tomllib.loads((DATA / "accuracy.toml").read_text())["range"]


@pytest.mark.parametrize("band", [b for b in _bands() if b["figure"] in SPEED_FIGURES],
                         ids=lambda b: f"{b['figure']}-{b['runtime'] or 'all'}")
def test_speed_bands_are_the_percentiles_of_the_out_of_sample_errors(validation_report, band):
    kind, metrics = SPEED_FIGURES[band["figure"]]
    metric = {r["id"]: r.get("metric") for r in all_records()}
    ratios = [o.predicted / o.measured for o in validation_report.loso
              if o.kind == kind and o.predicted is not None and o.measured
              and (not metrics or metric.get(o.id) in metrics)
              and (not band["runtime"] or band_group(o.runtime) == band["runtime"])]
    assert len(ratios) == band["n"]
    # deciles by linear interpolation between closest ranks ('inclusive': numpy's default percentile)
    deciles = statistics.quantiles(ratios, n=10, method="inclusive")
    assert band["low"] == pytest.approx(deciles[0], abs=6e-6)
    assert band["high"] == pytest.approx(deciles[-1], abs=6e-6)
    assert band["median_abs_error"] == pytest.approx(statistics.median(abs(x - 1) for x in ratios), abs=6e-6)


def test_non_torch_bytes_is_the_median_of_the_profiler_lines():
    """runtimes.toml vllm non_torch_bytes: the median of the unskipped vLLM 'non_torch_memory takes X GiB'
    records (four of them: 0.16, 0.25, 0.26 and 0.30 GiB)."""
    recs = [r for r in all_records() if r.get("kind") == "overhead" and not r.get("skip")]
    gib = sorted(round(r["measured"] / 2**30, 2) for r in recs)
    assert gib == [0.16, 0.25, 0.26, 0.30]
    text = (DATA / "runtimes.toml").read_text()
    stored = int(re.search(r"^non_torch_bytes = (\d+)", text, re.M).group(1))
    assert stored == statistics.median(r["measured"] for r in recs)
    assert stored == pytest.approx((0.25 + 0.26) / 2 * 2**30, rel=0.02)


def _readme_plan() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index('$ cardfit plan llama3.1:8b --gpu "RTX 4090"')
    return text[start:text.index("```", start)]


def test_readme_plan_memory_lines_by_hand():
    """Llama 3.1 8B Q4_K_M in Ollama at its 32K default: weights from the tensor shapes × ggml's block sizes,
    the Q4_K token embedding kept in system RAM; KV = 2 × layers × KV heads × head dim × 2 bytes × context."""
    block = _readme_plan()
    weights = sum(llama8b_q4_k_m().values())
    embd = L8_EMBD * Q4_K
    per_token = 2 * L8_LAYERS * L8_KV_HEADS * L8_HEAD * 2
    context = 32 * 1024
    m = re.search(r"^weights\s+([\d.]+)\s.*?([\d.]+) bits/weight", block, re.M)
    assert float(m.group(1)) == round((weights - embd) / 1e9, 1) == 4.6
    assert float(m.group(2)) == round(weights * 8 / 8_030_261_248, 3)
    assert f"token embedding {embd / 1e9:.1f} GB kept in" in block
    m = re.search(r"^KV cache\s+([\d.]+)\s+exact\s+([\d,]+) B/token × 32K × 1", block, re.M)
    assert int(m.group(2).replace(",", "")) == per_token == 131_072
    assert float(m.group(1)) == round(per_token * context / 1e9, 1)
    assert f"cardfit counts {weights / 1e9:.2f} GB of weights" in block


def _readme_kind_rows() -> dict[str, list[str]]:
    text = (ROOT / "README.md").read_text()
    start = text.index("| kind | records | sources (largest) | out of sample: median")
    rows = text[start:text.index("<!-- end of accuracy tables -->", start)].splitlines()[2:]
    cells = [[c.strip() for c in r.split("|")[1:-1]] for r in rows if r.startswith("|")]
    return {c[0]: c[1:] for c in cells}


def test_readme_accuracy_table_medians_and_p90s_recomputed(validation_report):
    """The README's 'every record' table: per kind, the records scored and the median and 90th percentile of
    |predicted / measured - 1|, out of sample and in sample, recomputed here with the statistics module."""
    rows = _readme_kind_rows()
    assert rows
    for kind, cells in rows.items():
        ins = [abs(o.predicted / o.measured - 1) for o in validation_report.outcomes
               if o.kind == kind and o.predicted is not None and o.measured]
        out = [abs(o.predicted / o.measured - 1) for o in validation_report.loso
               if o.kind == kind and o.predicted is not None and o.measured]
        assert cells[0] == str(len(ins)), kind
        for got, errs in ((cells[2:4], out), (cells[5:7], ins)):
            p90 = statistics.quantiles(errs, n=10, method="inclusive")[-1]
            # printed to 0.1 %: within half a unit of the last digit (and the report's own 4-digit rounding)
            shown = [float(c.rstrip("%")) / 100 for c in got]
            assert shown == pytest.approx([statistics.median(errs), p90], abs=0.0006), kind

"""The whole aiconfigurator silicon sample (validation/aic_sample.py, `cardfit validate --source
aiconfigurator`): its rows become records with the conventions of the hand-made aic-* records, every row
left out is counted with its reason, and the mode reports its own error rows."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cardfit.errors import InputError
from cardfit.validation import aic_sample
from cardfit.validation.aic_sample import COLUMNS, build, eligibility, read_rows, records, why_not
from cardfit.validation.validate import all_records, first_contact

# the aic-* records built from whole CSV rows by a generator, not by hand: the attention-DP + EP and the
# disaggregated runs (data/validation/serving_aic_dp_ep.toml, serving_aic_pd.toml)
GENERATED = ("aic-dpep-row-", "aic-pd-row-")
HAND_MADE = {r["id"]: r for r in all_records()
             if r["id"].startswith("aic-") and not r["id"].startswith(GENERATED) and r["kind"] == "serving"}
KEYS = ("model", "quant", "runtime", "gpu", "gpus", "input_tokens", "output_tokens", "concurrency", "load",
        "requests", "fixed_lengths", "metric", "statistic", "assumed", "measured", "unit", "settings",
        "source", "date")


def _row(record: dict) -> dict[str, str]:
    """The silicon_sample row a hand-made record quotes as its excerpt."""
    return dict(next(iter(csv.DictReader(io.StringIO(record["excerpt"])))))


def _built(record_id: str) -> dict:
    r = HAND_MADE[record_id]
    short = "ttft" if r["metric"] == "ttft_ms" else "tpot"
    return {b["id"]: b for b in build(_row(r))}[f"aic-row-{_row(r)['id']}-{short}"]


# (hand-made record, why the case is tricky)
CASES = [
    ("aic-llama-3.1-8b-h100-trtllm-bf16-tp1-1024x512-c128-ttft",
     "no precision stated: BF16; TensorRT-LLM budget 128 + 1,024 + 1,500 rounded up to 32 = 2,656"),
    ("aic-llama-3.1-8b-h200-sglang-fp8-tp1-8000x500-c56-ttft",
     "SGLang: max_prefill_tokens = input + 1,500; dense model: no moe_quant although the row has one"),
    ("aic-llama-3.1-70b-h200-trtllm-fp8-tp2-8192x1024-c4-ttft",
     "no backend_version: 'not stated' and assumed; fp8 TensorRT-LLM profile: FP8 KV cache; measured date"),
    ("aic-gpt-oss-120b-h100-vllm-mxfp4-tp2-1024x1024-c4-ttft",
     "precision fp4 on gpt-oss: its own MXFP4 checkpoint; vLLM budget 4 + 1,024 + 1,500 unrounded"),
    ("aic-qwen3-235b-a22b-h100-trtllm-fp8-tp8-1024x512-c128-tpot",
     "an -FP8 checkpoint path of a catalog model; expert parallel 8 kept as moe_ep"),
    ("aic-deepseek-r1-h200-sglang-fp8-tp8-1024x1024-c64-ttft",
     "MoE: gemm fp8 and moe fp8_block both kept; MoE tensor parallel 8"),
]


@pytest.mark.parametrize("record_id,why", CASES)
def test_builder_reproduces_hand_made_records(record_id, why):
    want, got = HAND_MADE[record_id], _built(record_id)
    assert {k: got[k] for k in KEYS} == {k: want[k] for k in KEYS}, why


def test_builder_reproduces_every_hand_made_record():
    assert len(HAND_MADE) == 70
    for record_id, want in HAND_MADE.items():
        got = _built(record_id)
        assert {k: got[k] for k in KEYS} == {k: want[k] for k in KEYS}, record_id


def _variant(**changes: str) -> dict[str, str]:
    row = _row(HAND_MADE["aic-deepseek-r1-h200-sglang-fp8-tp8-1024x1024-c64-ttft"])
    return {**row, **changes}


# (row change, the reason it is left out; "" = eligible)
REASONS = [
    ({}, ""),
    ({"mode": "disagg"}, "disaggregated serving (prefill and decode workers)"),
    ({"model_path": "MiniMaxAI/MiniMax-M2.5"}, "model not in the catalog"),
    ({"system": "a100_sxm_80gb_unknown_card"}, "card not in the catalog"),
    ({"precision": "int4", "gemm_quant_mode": "int4_wo"},
     "precision cardfit does not set up (int4 weight-only)"),
    ({"tp_size": "1", "attention_dp_size": "8", "moe_tp_size": "1", "moe_ep_size": "8"},
     "attention data parallel (attention_dp_size > 1)"),
    ({"attention_dp_size": "0", "moe_tp_size": "0", "moe_ep_size": "0"},
     "layout or load not stated (a size of 0)"),
    ({"moe_tp_size": "4"}, "MoE split differs from the attention split (moe_tp x moe_ep != tp)"),
    ({"batch_size": "32"}, "silicon_concurrency differs from batch_size"),
    ({"silicon_tpot_ms": ""}, "a metric is missing"),
]


@pytest.mark.parametrize("change,reason", REASONS)
def test_why_not(change, reason):
    assert why_not(_variant(**change)) == reason


def test_eligibility_counts_every_reason():
    rows = [_variant(**change) for change, _ in REASONS] + [_variant(mode="disagg")]
    keep, reasons = eligibility(rows)
    assert len(keep) == 1
    assert reasons == Counter({r: 1 for _, r in REASONS if r}) + Counter({REASONS[1][1]: 1})
    assert len(keep) + sum(reasons.values()) == len(rows)


def test_ineligible_row_and_foreign_csv_are_input_errors():
    with pytest.raises(InputError, match="disaggregated"):
        build(_variant(mode="disagg"))
    with pytest.raises(InputError, match="not an aiconfigurator silicon_sample CSV"):
        read_rows("id,backend\nx,vllm\n")


def test_shipped_sample_is_whole_and_eligible():
    """Every shipped row is eligible, both metrics per row, the three engines, and more than 1,000 rows; each
    record has a first-contact figure scored by main's code before the sample was added."""
    recs = records()
    rows = {r["id"].rsplit("-", 1)[0] for r in recs}
    assert len(rows) >= 1_000 and len(recs) == 2 * len(rows)
    assert Counter(r["metric"] for r in recs) == {"ttft_ms": len(rows), "tpot_ms": len(rows)}
    assert {r["runtime"] for r in recs} == {"vllm", "sglang", "trtllm"}
    assert all(r["measured"] > 0 and r["source"] == aic_sample.SOURCE for r in recs)
    fc = first_contact()
    assert all(r["id"] in fc for r in recs)
    assert {fc[r["id"]]["code_at"] for r in recs} == {"90341c89f951ed6d3cd5e9449e2011ac9d8d6e0f"}


@given(batch=st.integers(1, 4096), isl=st.integers(1, 200_000))
def test_step_budgets(batch, isl):
    """The generator's rules: TensorRT-LLM rounds batch + input + 1,500 up to its 32-token block; vLLM takes
    it as is; SGLang's prefill cap is input + 1,500."""
    key, trt = aic_sample._budget("trtllm", batch, isl)
    assert key == "max_num_tokens" and trt % 32 == 0 and 0 <= trt - (batch + isl + 1500) < 32
    assert aic_sample._budget("vllm", batch, isl) == ("max_num_batched_tokens", batch + isl + 1500)
    assert aic_sample._budget("sglang", batch, isl) == ("max_prefill_tokens", isl + 1500)


def _invoke(args: list[str]) -> tuple[int, str]:
    from click.testing import CliRunner

    from cardfit.cli.app import cli

    res = CliRunner().invoke(cli, args, prog_name="cardfit")
    return res.exit_code, res.output


def test_source_mode_reports_its_own_rows(monkeypatch):
    """A slice of the sample (one row per engine and card) through `validate --source aiconfigurator`: error
    per metric and overall, per runtime, and the first-contact figures of the same records."""
    seen: dict[tuple[str, str], list[dict]] = {}
    for r in records():
        seen.setdefault((r["runtime"], r["gpu"]), [])
        if len(seen[(r["runtime"], r["gpu"])]) < 2:
            seen[(r["runtime"], r["gpu"])].append(r)
    part = tuple(r for rs in seen.values() for r in rs)
    monkeypatch.setattr(aic_sample, "records", lambda: part)
    code, out = _invoke(["validate", "--source", "aiconfigurator", "--json"])
    assert code == 0, out
    data = json.loads(out)
    kinds = data["kinds"]
    assert list(kinds) == ["aiconfigurator_ttft_ms", "aiconfigurator_tpot_ms", "aiconfigurator"]
    assert kinds["aiconfigurator"]["n"] + kinds["aiconfigurator"]["skipped"] == len(part)
    assert kinds["aiconfigurator"]["first_contact"]["n"] == len(part)
    assert set(data["by_runtime"]["aiconfigurator_tpot_ms"]) == {"vllm", "sglang", "trtllm"}
    code, text = _invoke(["validate", "--source", "aiconfigurator"])
    assert code == 0 and "aiconfigurator_ttft_ms" in text and "first contact" in text


@pytest.mark.parametrize("args,message", [
    (["--source", "aiconfigurator", "--kind", "decode"], "--source scores a sample"),
    (["--source", "aiconfigurator", "--runtime", "ollama"], "has no run on runtime 'ollama'"),
    (["--source", "mlperf"], "mlperf"),
])
def test_source_mode_bad_input(run_cli, args, message):
    code, out, err = run_cli("validate", *args)
    assert code == 2 and out == "" and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and message in err


def test_columns_are_the_shipped_header():
    from importlib import resources

    text = resources.files("cardfit.data").joinpath(aic_sample.DATA).read_text(encoding="utf-8")
    assert text.splitlines()[0] == ",".join(COLUMNS)

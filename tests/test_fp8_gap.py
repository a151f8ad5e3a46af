"""scripts/fp8_gap.py: block-scaled FP8 serving records beside BF16 and FP4 ones (docs/VALIDATION.md, "The
decode step of block-scaled FP8 checkpoints")."""

from __future__ import annotations

from pathlib import Path

import pytest

from cardfit.validation.validate import Outcome, Report, load_records

from .helpers import load_script

ROOT = Path(__file__).resolve().parent.parent

# GPUStack's Qwen3-8B page on one H100 (sglang 0.5.3.post3, 4 users): the BF16 run and the Qwen/Qwen3-8B-FP8
# run; InferenceX's DeepSeek-R1 on four B300s (sglang 0.5.12, 8,192 / 1,024 tokens, 8 users) in FP8 and
# NVFP4; aiconfigurator's nvidia/Llama-3.1-8B-Instruct-FP8 row (per-tensor scales) on vLLM 0.12
BF16 = "gpustack-qwen3-8b-h100-sglang-bf16-tp1-sharegpt-L119-tpot"
QWEN_FP8 = "gpustack-qwen3-8b-h100-sglang-fp8-tp1-sharegpt-L223-tpot"
R1_FP8 = "ix-dsr1-b300-sglang-fp8-tp4-8192x1024-c8-run26306422380-tpot"
R1_FP4 = "ix-dsr1-b300-sglang-nvfp4-tp4-ep4-8192x1024-c8-run26306422380-tpot"
LLAMA_FP8 = "aic-llama-3.1-8b-h200-vllm-fp8-tp1-4000x1000-c128-tpot"
IDS = (BF16, QWEN_FP8, R1_FP8, R1_FP4, LLAMA_FP8)


def _script():
    return load_script("fp8_gap")


def _outcome(r: dict, error: float) -> Outcome:
    return Outcome(r["id"], r["kind"], r["runtime"], r["model"], r["quant"], r["measured"], r["unit"],
                   predicted=r["measured"] * (1 + error))


@pytest.fixture(scope="module")
def records() -> list[dict]:
    by_id = {r["id"]: r for r in load_records("serving")}
    return [by_id[i] for i in IDS]


def _report(records: list[dict], errors: dict[str, float]) -> Report:
    outs = [_outcome(r, errors[r["id"]]) for r in records]
    return Report(outs, loso=outs, publishers={r["id"]: r["id"].split("-")[0] for r in records})


def test_the_checkpoints_scaling_is_read_from_the_model_and_the_launch_line(records):
    m = _script()
    by = {r["id"]: r for r in records}
    assert m.scaling(by[BF16]) == ""
    assert m.scaling(by[QWEN_FP8]) == "block"  # `--model-path Qwen/Qwen3-8B-FP8`
    assert m.scaling(by[R1_FP8]) == "block"  # DeepSeek's only FP8 checkpoint
    assert m.scaling(by[R1_FP4]) == ""
    assert m.scaling(by[LLAMA_FP8]) == "tensor"
    assert m.gemm("H100 SXM") == "W8A8" and m.gemm("A100 SXM 80GB") == "W8A16"


def test_an_fp8_run_is_paired_with_the_bf16_run_of_its_page(records):
    m = _script()
    rep = _report(records, {BF16: -0.07, QWEN_FP8: -0.23, R1_FP8: 0.1, R1_FP4: 0.2, LLAMA_FP8: 0.5})
    pairs = m.bf16_pairs(rep, records)
    assert len(pairs) == 1
    p = pairs[0]
    assert (p["scaling"], p["model"], p["metric"], p["concurrency"]) == ("block", "qwen3-8b", "tpot_ms", 4)
    assert p["bf16"] == pytest.approx(-0.07) and p["fp8"] == pytest.approx(-0.23)
    assert p["gap"] == pytest.approx(-0.16)


def test_deepseek_fp8_is_paired_with_fp4_at_the_same_users_and_cards(records):
    m = _script()
    rep = _report(records, {BF16: 0.0, QWEN_FP8: 0.0, R1_FP8: 0.11, R1_FP4: 0.22, LLAMA_FP8: 0.0})
    pairs = m.fp4_pairs(rep, records)
    assert len(pairs) == 1
    p = pairs[0]
    assert (p["runtime"], p["gpu"], p["metric"], p["n"]) == ("sglang", "B300", "tpot_ms", 1)
    assert p["fp8"] == pytest.approx(0.11) and p["fp4"] == pytest.approx(0.22)


def test_the_block_tpot_table_holds_block_fp8_runs_only(records):
    m = _script()
    rep = _report(records, {BF16: -0.07, QWEN_FP8: -0.23, R1_FP8: 0.11, R1_FP4: 0.22, LLAMA_FP8: 0.7})
    rows = {(g["family"], g["gpu"]): g for g in m.block_tpot(rep, records)}
    assert set(rows) == {("qwen3-8b (dense)", "H100 SXM"), ("DeepSeek-V3/R1", "B300")}
    assert rows[("qwen3-8b (dense)", "H100 SXM")]["median"] == pytest.approx(-0.23)
    assert rows[("DeepSeek-V3/R1", "B300")]["gemm"] == "W8A8"

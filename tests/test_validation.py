"""cardfit against real measurements (data/validation/*.toml): the GGUF mix rules reproduce llama.cpp's own
table, every record is predicted or skipped with a reason, and the error levels of today are held so a
change that makes accuracy worse fails here."""

from __future__ import annotations

import pytest

from cardfit.catalog.loader import builtin
from cardfit.catalog.models import default_models
from cardfit.catalog.quants import default_quants
from cardfit.core.gguf_mix import MixModel, fallback_table, moe8_bumps, tensor_type
from cardfit.core.weights import weights
from cardfit.validation.validate import all_records, percentile

from .helpers import load_script

PUBLISHED = builtin("gguf_mixes.toml")["published"]


def _mix(name: str):
    return next(m for m in default_quants().mixes if m.name == name)


@pytest.mark.parametrize("row", [r for r in PUBLISHED if "bpw" in r],
                         ids=[r["name"] for r in PUBLISHED if "bpw" in r])
def test_llama31_8b_bits_per_weight_match_llamacpp_table(row):
    """llama.cpp tools/quantize/README.md (Llama 3.1 8B) to 4 decimals."""
    m = default_models().get("llama-3.1-8b")
    bpw = weights(m, _mix(row["name"])).bits_per_weight
    assert round(bpw, 4) == row["bpw"]


# Llama 3.1 8B's tensors (config.json: 32 layers, hidden 4096, 8 KV heads of 128, intermediate 14336, vocab
# 128256, untied): per layer q and o 4096², k and v 4096 x 1024, gate/up/down 3 x 4096 x 14336; two F32 norm
# vectors per layer plus the final norm.
_LAYER = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336
_BODY = 32 * _LAYER  # every 2-D tensor of the blocks
_EMBD = 128256 * 4096  # token_embd.weight, and output.weight the same size
_NORMS = 32 * 2 * 4096 + 4096
# Bits per weight of the legacy block types, ggml-common.h: block_q4_0 = fp16 d + 16 bytes (32 weights, 18
# bytes), block_q4_1 = d, m + 16 bytes (20), block_q5_0 = d + 4-byte qh + 16 (22), block_q5_1 = d, m + qh + 16
# (24); block_q6_k: 210 bytes per 256 weights.
_LEGACY_BITS = {"Q4_0": 18 * 8 / 32, "Q4_1": 20 * 8 / 32, "Q5_0": 22 * 8 / 32, "Q5_1": 24 * 8 / 32}
_Q6_K_BITS = 210 * 8 / 256


@pytest.mark.parametrize("name", sorted(_LEGACY_BITS))
def test_legacy_types_on_llama31_8b_match_a_hand_count(name):
    """The README has no Q4_0/Q4_1/Q5_0/Q5_1 rows, so the bits are counted by hand from llama-quant.cpp's
    rules for these ftypes (llama_tensor_get_type at 007dbbf3): every 2-D tensor, token_embd included, takes
    the ftype's type; output.weight becomes Q6_K (bumped to Q6_K unless the type is Q8_0); norms stay F32."""
    bits = (_BODY + _EMBD) * _LEGACY_BITS[name] + _EMBD * _Q6_K_BITS + _NORMS * 32
    params = _BODY + 2 * _EMBD + _NORMS
    m = default_models().get("llama-3.1-8b")
    assert m.params == params  # the shapes above are the catalog's model
    assert weights(m, _mix(name)).bits_per_weight == pytest.approx(bits / params, rel=1e-9)


@pytest.mark.parametrize("row", [r for r in PUBLISHED if "bpw" not in r],
                         ids=[r["name"] for r in PUBLISHED if "bpw" not in r])
def test_rows_without_bpw_match_quantize_help_sizes(row):
    """Rows the README lacks are held to the file size `llama-quantize --help` prints for Llama-3-8B (same
    shapes as 3.1: QUANT_OPTIONS in tools/quantize/quantize.cpp, "3.74G" for Q3_K_M): the file is the weights
    plus its metadata, which for Llama 3's 128,256-token vocabulary (tokens, types, 280,147 merges) is a few
    MB, under 0.01 GiB, and the help rounds to 0.01."""
    m = default_models().get("llama-3.1-8b")
    size_gib = weights(m, _mix(row["name"])).total_bytes / 2**30
    assert row["help_size_gib"] - 0.01 < size_gib <= row["help_size_gib"]


def test_fallback_table_is_data_and_q2k_falls_back_to_q4_0():
    """tensor_type_fallback: Q2_K/Q3_K → Q4_0 (not IQ4_NL), IQ types → IQ4_NL, Q6_K → Q8_0."""
    table, second = fallback_table()
    assert table["Q2_K"] == table["Q3_K"] == "Q4_0" and table["IQ4_XS"] == "IQ4_NL" and second == "F16"
    quants = default_quants()
    # an 896-wide row (Qwen2.5-0.5B) does not divide into 256-weight super-blocks
    assert tensor_type(_mix("Q3_K_S"), "attn_q", 5, 24, 896, quants).name.upper() == "Q4_0"
    assert tensor_type(_mix("Q4_K_M"), "attn_q", 5, 24, 896, quants).name.upper() == "Q5_0"
    assert tensor_type(_mix("Q5_K_M"), "attn_v", 0, 24, 896, quants).name.upper() == "Q8_0"  # Q6_K → Q8_0


def test_70b_and_moe8_bumps():
    quants = default_quants()
    big = MixModel(n_gqa=8, is_70b=True)
    # Q4_K_M attn_v outside more_bits would be Q4_K; a 70B model bumps it to Q5_K
    assert tensor_type(_mix("Q4_K_M"), "attn_v", 11, 80, 8192, quants, mm=big).name.upper() == "Q5_K"
    assert (
        tensor_type(_mix("Q4_K_M"), "attn_v", 11, 80, 8192, quants, mm=MixModel(n_gqa=8)).name.upper()
        == "Q4_K"
    )
    moe8 = MixModel(n_gqa=4, n_expert=8)
    assert tensor_type(_mix("Q4_K_M"), "attn_v", 9, 32, 4096, quants, mm=moe8).name.upper() == "Q8_0"
    assert tensor_type(_mix("Q4_K_M"), "attn_output", 9, 32, 4096, quants, mm=moe8).name.upper() == "Q5_K"
    assert moe8_bumps(_mix("IQ2_M").note) == {"attn_k": "Q4_K", "attn_output": "Q5_K"}  # IQ1/IQ2 branch
    assert moe8_bumps(_mix("TQ1_0").note) == {"attn_v": "Q8_0", "attn_k": "Q8_0"}


def test_else_types_are_used():
    """Q3_K_M: attn_v Q5_K in the first 2 layers, else Q4_K (the `attn_v_else` field)."""
    quants = default_quants()
    assert tensor_type(_mix("Q3_K_M"), "attn_v", 1, 32, 4096, quants).name.upper() == "Q5_K"
    assert tensor_type(_mix("Q3_K_M"), "attn_v", 2, 32, 4096, quants).name.upper() == "Q4_K"


def test_percentile_is_linear_interpolation():
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([0, 10], 90) == 9.0
    assert percentile([5], 90) == 5


@pytest.fixture(scope="module")
def report(validation_report):
    return validation_report


def test_every_record_is_predicted_or_skipped_with_a_reason(report):
    assert len(all_records()) >= 100
    assert len(report.outcomes) == len(all_records())
    for o in report.outcomes:
        assert (o.predicted is None) == bool(o.skipped), o.id
        assert o.skipped or o.predicted is not None
    memory_skips = [o for o in report.outcomes if o.skipped
                    and o.kind not in ("decode", "prefill", "aggregate_decode", "serving")]
    # 10: six records that cannot be predicted (card not stated, a finetune, a KV connector, utilization not
    # stated) and four whose log measures another quantity (PR 10511's pre-merge non_torch_memory twice, WSL's
    # non_torch_memory, a launch with settings the page does not show): each says why in its `skip`
    assert len(memory_skips) <= 10, [(o.id, o.skipped) for o in memory_skips]


def test_a_speed_record_without_a_figure_says_why():
    """A speed record the model gives no figure says what is missing (issue 24: no record dropped silently):
    llmfit's RTX 2080 and GTX 1050 Ti runs name a card the GPU catalog lacks, a prompt on a Tesla P40 (no FP16
    rate: 1/64 of FP32) or an M3 Max (Apple publishes no GPU clock) one without a compute rate in it; all
    read 'speed model cannot predict this record' before."""
    from cardfit.validation.validate import _unpredicted_speed

    recs = {r["id"]: r for r in all_records()}
    assert _unpredicted_speed(recs["llmfit773-2080-llama31-8b-q4km"]) == (
        "speed model: unknown GPU 'RTX 2080 8GB'")
    assert _unpredicted_speed(recs["pr4766-p40-llama7b-q4_0-pp512"]) == (
        "speed model: no compute rate for Tesla P40 in the GPU catalog (prefill)")


# Today's levels (validation of 2026-11-30) with a little room: a change that makes any of them worse fails.
# (median, p90) of |predicted / measured − 1| per kind.
HELD = {
    "file_size": (0.002, 0.01),
    # vLLM lays gpt-oss's MXFP4 experts out at its MoE kernel's tiles (Marlin +9 %): median 0.2 %, p90 2.0 %
    "weights": (0.005, 0.03),
    "kv_cache": (0.005, 0.05),  # the vLLM pools with the profile run's sampler peak: p90 3.0 %
    "compute_buffer": (0.005, 0.03),
    # 11 scored on linked records: median 2.0 %, p90 4.5 % once the profile run's dummy sampler (max_num_seqs
    # rows x vocabulary) is counted (was 5.4 % / 68 %)
    "max_context": (0.03, 0.06),
    "activation": (0.05, 0.30),  # 6 vLLM profile-run peaks: median 4.0 %, p90 25 %
    # 4 vLLM non_torch_memory lines scored like for like: 0.16 GiB (H100, eager) to 0.30 GiB (2x L40S); one
    # constant for all cards leaves p90 46 %
    "overhead": (0.15, 0.50),
    # 25 scored from 13 sources: Ollama's own estimate (12 `ollama ps` SIZE lines) and 13 totals through the
    # plan (ten llama.cpp-family loads' buffers, three PyTorch max_memory_allocated peaks): median 0.5 %, p90
    # 2.8 %. p90 0.02 -> 0.035: the bitsandbytes int8 (-3.1 %) and 4-bit (-10.4 %) peaks carry a
    # quantize/dequantize transient the plan does not model (their notes say which)
    "total_memory": (0.01, 0.035),
    # 118 scored from 15 sources, in sample: median 7.7 %, p90 24.1 % (the 4x A100 SXM and A40 70B rows)
    "prefill": (0.085, 0.26),
}
# Targets of issue 8 on the median: weights/file sizes 2 %, KV cache 3 %, total runtime memory 5 %,
# max-context 5 %, decode 20 %.
# max-context: 5 % on the linked records (issue 12) since the profile run's sampler is counted.
TARGETS = {"file_size": 0.02, "weights": 0.02, "kv_cache": 0.03, "total_memory": 0.05, "max_context": 0.05,
           "decode": 0.20}


@pytest.mark.parametrize("kind", sorted(HELD))
def test_error_levels_are_held(report, kind):
    k = report.kinds[kind]
    median, p90 = HELD[kind]
    assert k.n >= 1
    assert k.median_abs_error <= median, k
    assert k.p90_abs_error <= p90, k


@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_issue_targets(report, kind):
    k = report.kinds[kind]
    if k.n == 0:
        pytest.skip(f"no {kind} prediction yet: {[o.skipped for o in report.outcomes if o.kind == kind][:1]}")
    assert k.median_abs_error <= TARGETS[kind], k


# Issue 12: the 90th percentile of the over-prediction, out of sample (each source left out of every fit), per
# memory kind. Held at today's level with a little room, never above the issue's 20 %.
# Bytes are on the unsafe side when predicted too few (validation/validate.py optimism): weights and the
# compute buffers 0.01 -> 0.03 (their few under-predictions now count; before, the over-predictions did),
# overhead 0.50 -> 0.20 (its over-predictions are the safe side).
HELD_LOO_P90_OVER = {"file_size": 0.01, "weights": 0.03, "kv_cache": 0.05, "compute_buffer": 0.03,
                     "activation": 0.20, "max_context": 0.06, "total_memory": 0.035,
                     "overhead": 0.20}


@pytest.mark.parametrize("kind", sorted(HELD_LOO_P90_OVER))
def test_out_of_sample_over_prediction_is_held(report, kind):
    k = report.kinds[kind]
    assert k.loo_n >= 3, k
    assert k.loo_p90_over_error <= HELD_LOO_P90_OVER[kind], k


def test_max_context_out_of_sample_median(report):
    """Issue 12: max_context ≤ 5 % leave-one-source-out on linked records."""
    k = report.kinds["max_context"]
    assert k.loo_median_abs_error <= 0.05, k


def test_total_memory_out_of_sample_median(report):
    """Issue 12: total runtime memory ≤ 5 % leave-one-source-out, with n ≥ 20."""
    k = report.kinds["total_memory"]
    assert k.n >= 20, k
    assert k.loo_median_abs_error <= 0.05, k


@pytest.mark.parametrize("rid, within", [
    # tied embeddings: Ollama counts token_embd as the output layer (llm/memory.go); -14 % without it
    ("ollamabashlib-llama32-1b-q8_0-ps-4k", 0.03),
    # num_ctx 32768 clamped to the GGUF's trained 8192 (llm/server.go); +142 % without it
    ("ollamabashlib-smollm2-17b-q8_0-ps-32k", 0.02),
])
def test_ollama_estimate_follows_its_source(report, rid, within):
    o = next(o for o in report.outcomes if o.id == rid)
    assert abs(o.error) <= within, o


def test_llamacpp_kv_and_buffers_are_exact(report):
    """llama.cpp/Ollama KV buffers are exact arithmetic: n_ctx cells × layers × KV width × bytes."""
    for o in report.outcomes:
        if (
            o.kind == "kv_cache"
            and o.runtime in ("llama.cpp", "ollama", "ik_llama.cpp")
            and o.error is not None
        ):
            assert abs(o.error) < 0.01, (o.id, o.error)


def test_cli_json(run_json):
    d = run_json("validate", "--kind", "file_size")
    assert set(d["kinds"]) == {"file_size"}
    k = d["kinds"]["file_size"]
    assert {"n", "median_abs_error", "p90_abs_error", "max_abs_error"} <= set(k)
    assert d["records"] and all(r["kind"] == "file_size" for r in d["records"])


def test_cli_table_and_bad_kind(run_cli):
    code, out, _ = run_cli("validate", "--kind", "kv_cache")
    assert code == 0 and "median" in out and "kv_cache" in out
    code, out, err = run_cli("validate", "--kind", "nonsense")
    assert code == 2 and err.startswith("Error: unknown record kind")


def test_cli_plot(run_cli, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "acc.png"
    code, _, err = run_cli("validate", "--kind", "file_size", "--plot", str(out))
    assert code == 0, err
    assert out.stat().st_size > 1000


def test_total_memory_is_scored_through_the_plan_users_get(report, run_json):
    """A llama.cpp load's device buffers (model + KV + compute) against `cardfit plan` with the log's settings
    (Ollama 0.5.4, Llama 3.1 8B Q4_K_M, 4 slots x 2048 tokens, no flash attention, RTX 4090): the record's
    prediction is the plan's weights + KV cache + workspace, no CUDA context (the log lists buffers)."""
    o = next(o for o in report.outcomes if o.id == "securetag-ollama054-llama31-8b-q4km-4090-buffers")
    plan = run_json("plan", "llama-3.1-8b", "--runtime", "ollama", "--quant", "Q4_K_M", "--context", "2048",
                    "--parallel", "4", "--prefill-chunk", "512", "--no-flash-attn", "--gpu", "RTX 4090")
    m = plan["memory"]
    assert o.predicted == m["weights_bytes"] + m["kv_cache_bytes"] + m["activation_bytes"]
    assert abs(o.error) < 0.005


def test_text_only_load_leaves_the_vision_tower_off_the_card(report):
    """ik_llama.cpp discussion 334: Gemma 3 27B QAT Q4_K_M loaded without --mmproj on an RTX A6000. The three
    CUDA0 buffers match the plan's total less the F16 vision tower (params - text_params) that llama.cpp keeps
    in its separate mmproj file; counting the tower would over-predict by 2.5 %."""
    o = next(o for o in report.outcomes if o.id == "ikllama-d334-gemma3-27b-qat-q4km-a6000-buffers")
    assert o.error is not None and abs(o.error) < 0.005, o


def test_readme_accuracy_table_and_records_per_source_are_current(validation_report):
    """Issue 12: the README shows both error columns and the records each source gives each kind, as
    `python scripts/accuracy_table.py --readme` writes them from `cardfit validate` (rerun it when this
    fails)."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    script = load_script("accuracy_table")
    readme = (root / "README.md").read_text(encoding="utf-8")
    table = "\n".join(script.table(validation_report))
    block = "\n".join(script.per_source(validation_report))
    paths = "\n".join(script.by_path(validation_report))
    features = "\n".join(script.by_feature(validation_report))  # issue 26: the error per production feature
    assert paths in readme and readme.index(paths) < readme.index(table), "the user path comes first"
    assert features in readme and readme.index(paths) < readme.index(features) < readme.index(table)
    assert "user path" in paths and "first contact" in paths
    assert table in readme
    assert block in readme
    assert "out of sample: median" in table and "in sample: median" in table
    for kind, k in validation_report.kinds.items():
        if k.n:
            assert f"- **{kind}**: " in block, kind

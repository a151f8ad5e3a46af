"""Issue 26: `cardfit validate` prints its error per production feature. A record's features are read from the
question it is scored as (the deploy question of a serving record, the speed question of a decode record:
validation/features.py), never from its id; the per-feature figures come from the same blocks the per-kind
splits print (validate.py _block, data/first_contact.toml)."""

from __future__ import annotations

import statistics
from dataclasses import replace

import pytest

from cardfit.validation.features import FEATURES, question_features, record_features
from cardfit.validation.validate import all_records, first_contact

from .helpers import load_script

# One real record of each feature file, and what its question asks for (the file's own settings: the record's
# source states them; see each file's excerpts)
CASES = {
    # aiconfigurator 0.12.0 DP/EP row: TensorRT-LLM enable_attention_dp over 8 ranks, moe_ep 8
    "aic-dpep-row-2026_03_25_deepseek_r1_b200_sxm_trtllm_fp4_agg_8192x1024_c256_tp8_0_ep8_0_974-ttft":
        ("dp_ep",),
    # aiconfigurator P/D row: 1 prefill + 2 decode SGLang workers, no attention groups
    "aic-pd-row-dsr1_gb200_sglang_fp4_disagg_1024x1024_c4_cfg486-ttft": ("disaggregated",),
    # a P/D row whose decode workers run 8 attention groups (--decode-dp 8): both
    "aic-pd-row-dsr1_h200_sglang_fp8_disagg_8192x1024_c256_cfg434-ttft": ("dp_ep", "disaggregated"),
    # GPUStack's SGLang EAGLE-3 run
    "gpustack-qwen3-8b-h100-sglang-fp8-eagle3-sharegpt-L322-ttft": ("speculative",),
    # GPUStack's LMCache evaluation: 50 GB of host KV, and its baseline without the tier
    "gpustack-lmcache-qwen3-8b-rtx4090-random-1k-lmcache50-output": ("kv_offload",),
    "gpustack-lmcache-qwen3-8b-rtx4090-random-1k-none-output": (),
    # vLLM PR 9668: a 330-token shared prefix with prefix caching, and the same load without it
    "vllm-9668-llama3-8b-fp8-l40s-prefix330-rate8-cache-ttft": ("prefix_reuse",),
    "vllm-9668-llama3-8b-fp8-l40s-prefix330-rate8-nocache-ttft": (),
    # llm-d's tiered prefix cache: HBM only, and with a 200 GiB CPU tier
    "llmd-tiered-qwen3-32b-h100-tp2-rate5-hbm-ttft": ("prefix_reuse",),
    "llmd-tiered-qwen3-32b-h100-tp2-rate5-cpu200gib-ttft": ("kv_offload", "prefix_reuse"),
    # single-stream decode with a draft model (llama.cpp), and the same card without one
    "spec-llamacpp-3060-llama31-8b-q80-draft-llama32-1b-k5": ("speculative",),
    "spec-llamacpp-3060-llama31-8b-q80-base": (),
    "spec-llamacpp-w7900-qwen25-72b-iq4xs-draft-05b-k3": ("speculative",),
    # InferenceX: experts sharded (moe_ep 8) without data-parallel attention is asked as TP experts, as deploy
    # times it (validation/serving.py expert_parallel): not dp_ep
    "ix-dsr1-b200-trtllm-fp8-tp8-ep8-1024x8192-c64-run20216754736-ttft": (),
    # a plain TP 8 serving run and a file-size record
    "gpustack-deepseek-r1-671b-h200-vllm-fp8-tp8-sharegpt-L90-ttft": (),
    "llamacpp-readme-llama31-8b-iq2m-size": (),
}


def _record(rid: str) -> dict:
    return next(r for r in all_records() if r["id"] == rid)


@pytest.mark.parametrize("rid", list(CASES))
def test_tags_of_real_records(rid):
    assert record_features(_record(rid)) == CASES[rid]


def test_tags_come_from_the_question_not_the_id():
    """Renaming a record keeps its tags; taking the setting out of its question drops the tag."""
    r = _record("llmd-tiered-qwen3-32b-h100-tp2-rate5-cpu200gib-ttft")
    assert record_features({**r, "id": "plain-run"}) == ("kv_offload", "prefix_reuse")
    st = {k: v for k, v in r["settings"].items() if k != "kv_offload_gb"}
    assert record_features({**r, "settings": st}) == ("prefix_reuse",)
    plain = _record("gpustack-deepseek-r1-671b-h200-vllm-fp8-tp8-sharegpt-L90-ttft")
    assert record_features({**plain, "id": "disagg-eagle3-lmcache-prefix"}) == ()


def test_question_features_on_deploy_options():
    """The same tags from a deploy question a user types (services/deploy.py DeployInput)."""
    from cardfit.services.deploy import DeployInput

    base = DeployInput(model="llama-3.1-8b", users=8.0)
    assert question_features(base) == ()
    assert question_features(replace(base, attention_dp=2)) == ("dp_ep",)
    assert question_features(replace(base, speculative="ngram", kv_offload_gb=64.0)) == (
        "speculative", "kv_offload")
    assert question_features(replace(base, turns=4)) == ("prefix_reuse",)
    assert question_features(replace(base, prefill_workers=1, decode_workers=2, decode_dp=4)) == (
        "dp_ep", "disaggregated")


def test_every_feature_has_records():
    """Each of the five features has validation records (issue 26), and at least 40 among them."""
    tags = [record_features(r) for r in all_records()]
    count = {f: sum(f in t for t in tags) for f in FEATURES}
    assert all(count.values()), count
    assert sum(1 for t in tags if t) >= 40


def test_report_features_recomputed(validation_report):
    """Each feature row is its tagged records' figures: n scored, their publishers, the out-of-sample and
    first-contact median |error|, recomputed here."""
    rep = validation_report
    assert list(rep.features) == [f for f in FEATURES if f in rep.features] and len(rep.features) == 5
    loso = {o.id: o for o in rep.loso}
    fc = first_contact()
    for name, f in rep.features.items():
        mine = [o for o in rep.outcomes if name in rep.tags.get(o.id, ())]
        scored = [o for o in mine if o.error is not None]
        assert f.n == len(scored) and f.n > 0, name
        assert f.publishers == len({rep.publishers[o.id] for o in scored}), name
        assert set(f.kinds) == {o.kind for o in mine}, name
        out = [abs(loso[o.id].error) for o in mine if loso[o.id].error is not None]
        assert f.out_of_sample["n"] == len(out)
        assert f.out_of_sample["median_abs_error"] == pytest.approx(statistics.median(out), abs=1e-5), name
        first = [abs(fc[o.id]["predicted"] / o.measured - 1) for o in mine
                 if o.id in fc and fc[o.id].get("predicted") is not None]
        assert f.first_contact["n"] == len(first), name
        assert f.first_contact["median_abs_error"] == pytest.approx(statistics.median(first), abs=1e-5), name
        user = [o for o in mine if rep.paths[o.id] == "user" and loso[o.id].error is not None]
        assert (f.user_path or {"n": 0})["n"] == len(user), name
    assert "decode" in rep.features["speculative"].kinds and "serving" in rep.features["speculative"].kinds


def test_json_features_keys(validation_report):
    """`validate --json` gains a top-level `features` (additive: the existing keys unchanged)."""
    d = validation_report.to_json()
    assert {"groups", "kinds", "by_runtime", "records", "skipped", "total"} <= set(d)
    assert set(d["features"]) == set(FEATURES)
    for name, f in d["features"].items():
        assert isinstance(f["n"], int) and isinstance(f["publishers"], int), name
        assert isinstance(f["kinds"], list) and isinstance(f["scored_with_prior"], int), name
        for block in ("out_of_sample", "user_path", "first_contact"):
            b = f[block]
            assert b is None or (isinstance(b["n"], int) and isinstance(b["median_abs_error"], float)
                                 and isinstance(b["p90_over"], float)), (name, block)
        assert f["out_of_sample"] is not None and f["first_contact"] is not None, name
    row = next(r for r in d["records"] if r["id"] == "llmd-tiered-qwen3-32b-h100-tp2-rate5-cpu200gib-ttft")
    assert row["features"] == ["kv_offload", "prefix_reuse"]


def test_cli_prints_the_feature_table(run_cli, run_json):
    """The text table after the per-path one, and the JSON key, on a filter that holds a feature (llama.cpp's
    speculative decode records); a filter with no feature prints no table and an empty object."""
    code, out, err = run_cli("validate", "--kind", "decode", "--runtime", "llama.cpp")
    assert code == 0, err
    assert out.index("out of sample by path") < out.index("per production feature")
    row = next(line for line in out.splitlines() if line.startswith("speculative "))
    assert "decode" in row and row.count("·") >= 6
    assert "speculative --speculative" in out  # the footer says what a feature counts
    d = run_json("validate", "--kind", "decode", "--runtime", "llama.cpp")
    assert list(d["features"]) == ["speculative"] and d["features"]["speculative"]["kinds"] == ["decode"]
    code, out, _ = run_cli("validate", "--kind", "file_size")
    assert code == 0 and "per production feature" not in out
    assert run_json("validate", "--kind", "file_size")["features"] == {}


def test_accuracy_table_writes_the_feature_rows(validation_report):
    """scripts/accuracy_table.py: the README block's per-feature table, one row per feature, placed before the
    every-record table (test_generated_artifacts reads that one to the block's end)."""
    script = load_script("accuracy_table")
    rows = script.by_feature(validation_report)
    assert rows[0].startswith("| feature | kinds | records | publishers | out of sample | user path | "
                              "first contact |")
    assert [r.split("|")[1].strip() for r in rows[2:]] == list(validation_report.features)
    block = script.tables(validation_report)
    assert block.index(rows[0]) < block.index(script.table(validation_report)[0])


def test_a_bug_is_not_an_untagged_record(monkeypatch):
    """A question cardfit cannot build (a CardfitError, a ValueError) leaves a record untagged (it is skipped
    when scored, with its reason); a bug (TypeError, KeyError) is raised, not swallowed into no tag."""
    import cardfit.validation.serving as serving
    from cardfit.errors import InputError

    r = _record("llmd-tiered-qwen3-32b-h100-tp2-rate5-cpu200gib-ttft")

    def cannot(_r):
        raise InputError("no such card", field="gpu")

    monkeypatch.setattr(serving, "record_input", cannot)
    assert record_features(r) == ()
    for bug in (TypeError("bad"), KeyError("settings")):
        def broken(_r, bug=bug):
            raise bug

        monkeypatch.setattr(serving, "record_input", broken)
        with pytest.raises(type(bug)):
            record_features(r)


def test_expert_parallel_asked_tensor_parallel():
    """InferenceX's moe_ep 8 run without data-parallel attention is asked with the experts tensor-parallel
    (not dp_ep) and counted for the footer; aiconfigurator's DP/EP row is dp_ep and not counted; a plain TP
    run is neither."""
    from cardfit.validation.features import expert_parallel_asked_tp

    ix = "ix-dsr1-b200-trtllm-fp8-tp8-ep8-1024x8192-c64-run20216754736-ttft"
    aic = "aic-dpep-row-2026_03_25_deepseek_r1_b200_sxm_trtllm_fp4_agg_8192x1024_c256_tp8_0_ep8_0_974-ttft"
    plain = "gpustack-deepseek-r1-671b-h200-vllm-fp8-tp8-sharegpt-L90-ttft"
    assert expert_parallel_asked_tp(_record(ix))
    assert not expert_parallel_asked_tp(_record(aic))
    assert not expert_parallel_asked_tp(_record(plain))


def test_report_counts_expert_parallel_asked_tp(validation_report):
    """The report (and `validate --json`) lists the records that ran expert parallelism but are not dp_ep,
    the count the per-feature footer prints."""
    rep = validation_report
    ep = {r["id"] for r in all_records() if int((r.get("settings") or {}).get("moe_ep") or 1) > 1}
    want = {o.id for o in rep.outcomes if o.id in ep and "dp_ep" not in rep.tags.get(o.id, ())}
    assert set(rep.ep_asked_tp) == want and want
    assert rep.to_json()["ep_asked_tensor_parallel"] == list(rep.ep_asked_tp)


def test_footer_prints_the_expert_parallel_count():
    """The per-feature footer says how many records ran expert parallelism but are asked with the experts
    tensor-parallel (not dp_ep); no line where there is none."""
    import io

    from rich.console import Console

    from cardfit.cli.validate_cmd import _print_features
    from cardfit.validation.validate import FeatureSummary, Report

    block = {"n": 3, "median_abs_error": 0.1, "p90_over": 0.2}
    feats = {"dp_ep": FeatureSummary(3, 1, ("serving",), block, block, block, 0)}
    for ids, want in ((("a", "b"), "2 records ran expert parallelism (moe_ep > 1"), ((), None)):
        buf = io.StringIO()
        _print_features(Console(file=buf, width=200), Report([], features=feats, ep_asked_tp=ids))
        text = " ".join(buf.getvalue().split())
        if want:
            assert want in text and "not counted as dp_ep" in text
        else:
            assert "expert parallelism" not in text

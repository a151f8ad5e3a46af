"""What SGLang changes when it drafts (issue 26): python/sglang/srt/server_args.py
ServerArgs._handle_speculative_decoding, read in the PyPI wheels sglang 0.4.6.post5, 0.5.3.post3 and 0.5.9
(https://pypi.org/project/sglang/0.5.9/), for EAGLE, EAGLE3, NEXTN (mapped to EAGLE), STANDALONE and NGRAM:

    if self.max_running_requests is None:
        self.max_running_requests = 48
    ...
        self.disable_overlap_schedule = True   (spec v2 opt-in: --enable-beta-spec, SGLANG_ENABLE_SPEC_V2)

cardfit: data/runtimes.toml sglang speculative_max_num_seqs / speculative_lacks, applied by
catalog/releases.py drafting in services/plan.py build_context (one place: plan, speed, deploy, validate)."""

from __future__ import annotations

import pytest

from cardfit.catalog.runtimes import default_runtimes
from cardfit.core.constants import fitted
from cardfit.services.inputs import PlanInput
from cardfit.services.plan import build_context, engine_defaults


def _ctx(runtime: str, **kw: object):
    return build_context(PlanInput(model="qwen3-8b", quant="fp8", runtime=runtime, **kw))


def _h100():
    return _ctx("sglang").gpus.get("H100 SXM")


@pytest.mark.parametrize("method", ["eagle3", "mtp", "ngram", "draft:qwen3-0.6b"])
def test_sglang_drafting_schedules_48_requests_by_default(method: str) -> None:
    """"Max running requests is reset to 48 for speculative decoding" (server_args.py): the default the
    plan, speed and deploy time a drafting SGLang with; 256 (its plain default here) without a drafter."""
    if method == "mtp":
        ctx = build_context(PlanInput(model="deepseek-v3", runtime="sglang", speculative="mtp"))
    else:
        ctx = _ctx("sglang", speculative=method)
    assert engine_defaults(ctx, _h100())[1] == 48
    assert engine_defaults(_ctx("sglang"), _h100())[1] == 256


def test_an_explicit_max_num_seqs_wins_over_the_48() -> None:
    """"You can override this by explicitly setting --max-running-requests": only the default moves."""
    assert engine_defaults(_ctx("sglang", speculative="eagle3", max_num_seqs=128), _h100())[1] == 128


@pytest.mark.parametrize("release", ["", "@0.5.3.post3", "@0.4.6"])
def test_sglang_drafting_runs_without_the_overlap_scheduler(release: str) -> None:
    """disable_overlap_schedule = True: the step pays what SGLang before its overlap scheduler pays
    (data/releases.toml overlap_scheduler: decode_overhead_us_per_sequence_v0, no step planned ahead)."""
    rt = default_runtimes().get("sglang")
    plain = _ctx(f"sglang{release}").runtime
    on = _ctx(f"sglang{release}", speculative="eagle3").runtime
    assert plain.has("overlap_scheduler") and not on.has("overlap_scheduler")
    assert fitted(plain, "schedule_ahead_steps") == 1 and fitted(on, "schedule_ahead_steps") == 0
    assert fitted(plain, "decode_overhead_us_per_sequence") == 0.0
    assert fitted(on, "decode_overhead_us_per_sequence") == rt.decode_overhead_us_per_sequence_v0 > 0


def test_sglang_before_its_overlap_scheduler_planned_no_step_ahead() -> None:
    """SGLang 0.3 (before the zero-overhead scheduler of 0.4) received requests, ran a step and handled its
    output in turn (scheduler.py event_loop_normal): no step planned ahead, as a drafting run now."""
    old = _ctx("sglang@0.3.6").runtime
    assert fitted(old, "schedule_ahead_steps") == 0


def test_vllm_drafting_keeps_its_defaults() -> None:
    """vLLM caps nothing when it drafts: the data is SGLang's row, not a rule for every engine."""
    off, on = _ctx("vllm"), _ctx("vllm", speculative="eagle3")
    assert engine_defaults(on, _h100()) == engine_defaults(off, _h100())
    assert fitted(on.runtime, "decode_overhead_us_per_sequence") == fitted(off.runtime,
                                                                             "decode_overhead_us_per_sequence")


def test_the_drafting_step_is_slower_than_the_overlapped_one(run_json) -> None:
    """GPUStack qwen3-8b/h100-latency.md line 322 (data/validation/serving_speculative_gpustack.toml:
    SGLang 0.5.3.post3, EAGLE-3 tree 4/4/16, 4 in flight, mean TPOT 3.75 ms measured): the step without the
    overlap scheduler is timed longer than cardfit's 2.0 ms with it, and not past the measurement; the
    launch line says the 48 it assumes."""
    got = run_json("deploy", "qwen3-8b", "--quant", "fp8", "--gpu", "H100 SXM", "--runtime",
                   "sglang@0.5.3.post3", "--tp", "1", "--users", "4", "--input-tokens", "233",
                   "--output-tokens", "221", "--speculative", "eagle3", "--num-speculative-tokens", "4",
                   "--speculative-topk", "4", "--speculative-draft-tokens", "16")["best"]
    assert got["speculative"] is not None
    assert 2.2 < got["tpot_ms"] < 3.75
    assert "--max-running-requests 48" in got["command"]


def test_deploy_says_the_cap_where_the_load_passes_it(run_json) -> None:
    """200 users: each drafting SGLang replica runs at most 48 of them; the reason text says so."""
    got = run_json("deploy", "qwen3-8b", "--quant", "fp8", "--gpu", "H100 SXM", "--runtime", "sglang",
                   "--users", "200", "--speculative", "eagle3")
    text = " ".join(got["notes"])
    assert "at most 48 requests at once a replica" in text
    assert "Max running requests is reset to 48" in text

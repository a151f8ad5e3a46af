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
from cardfit.core import serving as sv
from cardfit.core.constants import fitted
from cardfit.services.inputs import PlanInput
from cardfit.services.plan import build_context, engine_defaults, memory_for


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


@pytest.mark.parametrize("release", ["@0.5.9", "@0.5.3.post3", "@0.4.6"])
def test_sglang_drafting_runs_without_the_overlap_scheduler(release: str) -> None:
    """disable_overlap_schedule = True (to 0.5.10.post1: spec v1): the step pays what SGLang before its
    overlap scheduler pays (data/releases.toml overlap_scheduler: decode_overhead_us_per_sequence_v0, no
    step planned ahead)."""
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


def test_the_drafting_step_pays_the_serial_scheduler_per_sequence() -> None:
    """The machine a drafting SGLang plan is timed on pays SGLang's serial scheduler time per sequence
    (runtimes.toml decode_overhead_us_per_sequence_v0); the plain plan's overlapped scheduler pays none."""
    from cardfit.services import served

    rt = default_runtimes().get("sglang")
    on, off = _ctx("sglang@0.5.9", speculative="eagle3"), _ctx("sglang@0.5.9")  # spec v1
    assert served.machine(on, _h100(), 1).overhead_s_per_sequence == pytest.approx(
        rt.decode_overhead_us_per_sequence_v0 * 1e-6)
    assert served.machine(off, _h100(), 1).overhead_s_per_sequence == 0.0


def test_the_scheduler_time_is_paid_once_a_cycle_where_the_drafter_runs_inside_the_step() -> None:
    """SGLang's scheduler loop runs a cycle's draft forwards and its verification in one run_batch and
    handles the result once (scheduler.py event_loop_normal, eagle_worker.py forward_batch_generation): its
    per-sequence time is the cycle's once, not once per draft forward as well."""
    from dataclasses import replace

    from cardfit.core import speculative as spc
    from cardfit.services import served

    ctx = _ctx("sglang", speculative="eagle3", num_speculative_tokens=4)
    gpu = _h100()
    w = sv.Workload(233, 221)
    whole = served.load(ctx, memory_for(ctx, 454, gpu), w)
    mc = served.machine(ctx, gpu, 1)
    spec = served.speculation_of(ctx, whole, w)
    assert spec.draft_in_step and spec.draft is not None
    b, per = 4, mc.overhead_s_per_sequence
    inside = spc.draft_s(spec, mc, b)
    each = spc.draft_s(replace(spec, draft_in_step=False), mc, b)
    assert each - inside == pytest.approx(spec.tokens * (b - 1) * per)


def test_deploy_says_the_cap_where_the_load_passes_it(run_json) -> None:
    """200 users: each drafting SGLang replica runs at most 48 of them; the reason text says so."""
    got = run_json("deploy", "qwen3-8b", "--quant", "fp8", "--gpu", "H100 SXM", "--runtime", "sglang",
                   "--users", "200", "--speculative", "eagle3")
    text = " ".join(got["notes"])
    assert "at most 48 requests at once an engine" in text
    assert "Max running requests is reset to 48" in text


def test_deploy_says_the_cap_its_launch_line_gives(run_json) -> None:
    """A pinned drafting SGLang deployment for 64 users starts with --max-running-requests 64: the note says
    so, not that the replicas serve at most 48 users each (which it said while its line gave 64)."""
    got = run_json("deploy", "llama-3.1-8b", "--users", "64", "--gpu", "H100", "--runtime", "sglang", "--tp",
                   "1", "--speculative", "eagle3")
    assert "--max-running-requests 64" in got["best"]["command"]
    text = " ".join(got["notes"])
    assert "the launch line above gives --max-running-requests 64" in text
    assert "serve at most 48 users each" not in text


@pytest.mark.parametrize("method", ["ngram", "draft:qwen3-0.6b"])
def test_no_attention_dp_layout_for_a_method_sglang_refuses_beside_it(run_json, method) -> None:
    """SGLang refuses n-gram and draft-model (STANDALONE) drafting with --enable-dp-attention (server_args.py
    _handle_speculative_decoding): deploy offers no attention-DP layout for them (it printed launch lines
    with --enable-dp-attention --speculative-algorithm NGRAM that SGLang will not start)."""
    got = run_json("deploy", "qwen3-30b-a3b", "--runtime", "sglang", "--gpu", "H100 SXM", "--users", "512",
                   "--quant", "bf16", "--speculative", method)
    for d in [got["best"], *got["pareto"]]:
        if d and d.get("speculative"):
            assert "--enable-dp-attention" not in d["command"], d["command"]


def test_a_pinned_sglang_deployment_cannot_draft_ngram_beside_attention_dp(run_cli) -> None:
    """Pinned, the same refusal is a one-line error (SGLang would not start: server_args.py), where deploy
    printed a launch line with --enable-dp-attention --speculative-algorithm NGRAM."""
    code, out, err = run_cli("deploy", "qwen3-30b-a3b", "--runtime", "sglang", "--gpu", "H100 SXM", "--users",
                             "64", "--quant", "bf16", "--tp", "2", "--attention-dp", "2", "--expert-parallel",
                             "2", "--speculative", "ngram")
    assert code == 2 and not out
    assert err.startswith("Error: ") and "beside attention data parallelism" in err
    assert len(err.strip().splitlines()) == 1


def test_a_spec_v1_cycle_pays_the_host_time_spec_v2_hides() -> None:
    """sgl-project/sglang PR #11398 ("Beta spec-overlap for EAGLE", 2025-10-09): Llama-3.1-8B-Instruct with
    lmsys/sglang-EAGLE-LLaMA3-Instruct-8B, 5 steps at top-k 1, 6 draft tokens, one request: the default (spec
    v1) path "acc_length=2.99 speed=246.80 token/s", the overlapped one "acc_length=3.01 speed=273.43
    token/s". A cycle is accept length / speed: 12.115 against 11.008 ms, 1.107 ms of host time the v1 cycle
    leaves exposed (runtimes.toml speculative_cycle_host_us). Every drafting SGLang cycle cardfit times pays
    it once, whatever its sequences, inside the one timing path (core/speculative.py draft_s); the old code
    charged nothing at one sequence."""
    from dataclasses import replace

    from cardfit.core import speculative as spc
    from cardfit.services import served

    rt = default_runtimes().get("sglang")
    assert rt.speculative_cycle_host_us == pytest.approx(1e6 * (2.99 / 246.80 - 3.01 / 273.43), abs=1.0)
    ctx = _ctx("sglang@0.5.9", speculative="eagle3", num_speculative_tokens=4)  # spec v1
    gpu = _h100()
    w = sv.Workload(233, 221)
    whole = served.load(ctx, memory_for(ctx, 454, gpu), w)
    mc = served.machine(ctx, gpu, 1)
    spec = served.speculation_of(ctx, whole, w)
    assert spec.host_s == pytest.approx(rt.speculative_cycle_host_us * 1e-6)
    for b in (1, 4, 8):
        assert spc.draft_s(spec, mc, b) - spc.draft_s(replace(spec, host_s=0.0), mc, b) == pytest.approx(
            spec.host_s)
    # the served per-token time and the serving step both read it (one owner: draft_s)
    bare = replace(spec, host_s=0.0)
    assert spc.per_token_s(whole, mc, 1, spec) - spc.per_token_s(whole, mc, 1, bare) == pytest.approx(
        spec.host_s / spec.per_step)


def test_vllm_and_llama_cpp_cycles_pay_no_sglang_host_time() -> None:
    """The host time is SGLang's v1 EAGLE worker's (runtimes.toml sglang row): vLLM's drafting cycle gets
    none of it, nor does n-gram lookup (no drafter on the GPU, core/speculative.py draft_s)."""
    from cardfit.core import speculative as spc
    from cardfit.services import served

    gpu = _h100()
    w = sv.Workload(233, 221)
    for ctx in (_ctx("vllm", speculative="eagle3"), _ctx("sglang", speculative="ngram")):
        whole = served.load(ctx, memory_for(ctx, 454, gpu), w)
        spec = served.speculation_of(ctx, whole, w)
        if ctx.runtime.id == "vllm":
            assert spec.host_s == 0.0
        else:  # n-gram: no drafter, so draft_s returns before any host time
            assert spec.draft is None and spc.draft_s(spec, served.machine(ctx, gpu, 1), 4) == 0.0


@pytest.mark.parametrize("release,kw,overlapped", [
    ("", {}, True),  # the current release (0.5.23): arg_groups/speculative_hook.py _handle_eagle_family
    ("@0.5.9", {}, False),  # SGLANG_ENABLE_SPEC_V2 = EnvBool(False), spec v1
    ("", {"speculative_topk": 4, "speculative_draft_tokens": 8}, True),  # 0.5.23: no top-k condition
    ("@0.5.3.post3", {}, False),  # GPUStack's runs: --enable-beta-spec opt-in
    ("@0.5.10.post1", {}, False),  # EnvBool(False)
    ("@0.5.11", {}, True),  # "Spec v2 is enabled by default for eagle/eagle3/standalone speculative decoding"
    ("@0.5.11", {"speculative": "draft:qwen3-0.6b"}, True),  # STANDALONE
    ("@0.5.11", {"speculative_topk": 4, "speculative_draft_tokens": 8}, False),  # "only supports topk = 1"
    ("@0.5.11", {"speculative": "ngram"}, False),  # NGRAM: disable_overlap_schedule = True
    # 0.5.12.post1: still "spec v2 currently only supports topk = 1"; 0.5.13 (spec_overlap_tree):
    # arg_groups/speculative_hook.py _handle_eagle_family without a top-k condition
    ("@0.5.12.post1", {"speculative_topk": 4, "speculative_draft_tokens": 8}, False),
    ("@0.5.13", {"speculative_topk": 4, "speculative_draft_tokens": 8}, True),
    # 0.5.13 _handle_ngram: disable_overlap_schedule = True; 0.5.14 (spec_overlap_ngram): not set
    ("@0.5.13", {"speculative": "ngram"}, False),
    ("@0.5.14", {"speculative": "ngram"}, True),
    ("@0.5.23", {"speculative": "ngram"}, True),
])
def test_sglang_0_5_11_drafts_a_chain_on_its_overlap_scheduler(release: str, kw: dict,
                                                                overlapped: bool) -> None:
    """From 0.5.11 (data/releases.toml sglang spec_overlap: the PyPI wheels' environ.py
    SGLANG_ENABLE_SPEC_V2 = EnvBool(True) there, EnvBool(False) in 0.5.10.post1) SGLang drafts EAGLE, EAGLE3
    and STANDALONE chains on spec v2: the overlap scheduler stays on and no cycle host time is exposed; a
    tree (top-k > 1) and n-gram lookup stay on spec v1. The old code turned the overlap scheduler off for
    every drafting run at every release. The 48-request default holds either way."""
    args = {"speculative": "eagle3", **kw}
    ctx = _ctx(f"sglang{release}", **args)
    rt = default_runtimes().get("sglang")
    assert ctx.speculation.overlapped is overlapped
    assert ctx.runtime.has("overlap_scheduler") is overlapped
    assert fitted(ctx.runtime, "schedule_ahead_steps") == (1 if overlapped else 0)
    want_host = 0.0 if overlapped else rt.speculative_cycle_host_us
    assert ctx.speculation.host_us == want_host
    assert engine_defaults(ctx, _h100())[1] == 48


def test_a_release_has_the_features_up_to_its_number_or_date() -> None:
    """A runtime named without a release is its `current` one, by number: SGLang 0.5.23 has spec_overlap
    (from 0.5.11) and the 0.5.20 card row; 0.5.9 lacks them. A record dated before spec_overlap lacks it; a
    record dated after it has it."""
    from cardfit.catalog.releases import release

    assert release("sglang").has("spec_overlap") and release("sglang").has("tier_35gib_4k_48")
    assert not release("sglang", "0.5.9").has("spec_overlap")
    assert not release("sglang", None, "2026-01").has("spec_overlap")
    assert release("sglang", None, "2026-06").has("spec_overlap")
    assert release("sglang").has("overlap_scheduler") and release("vllm").has("graphs_in_budget")

"""SGLang's attention data parallelism as the engine runs it (issue 26, h-sglfix), read in the PyPI wheel
sglang 0.5.23 (https://pypi.org/project/sglang/0.5.23/):

- the server's --max-running-requests caps the decode graphs whole, attention DP or not
  (arg_groups/memory_hook.py handle_gpu_memory_settings lines 181-188 'cfg.max_running_requests'); only
  each DP worker's scheduler takes its share (mem_cache/kv_cache_configurator.py resolve_max_num_reqs lines
  3126-3130 'max_num_reqs // self.attn_dp_size');
- without expert parallelism each attention group still holds its own requests' cache, its KV heads split
  over the attention-TP size tp / dp (model_executor/pool_configurator.py lines 356, 492 'tp_size =
  get_parallel().attn_tp_size', 'get_num_kv_heads(tp_size, dcp_size)'; runtime_context.py
  derive_attn_tp_size 'tp_size // attn_dp_size'), and its attention projections and input embedding whole
  over those ranks (models/qwen3_moe.py Qwen3MoeAttention 'attn_tp_size'; models/qwen2_moe.py
  Qwen2MoeModel embed_tokens 'use_attn_tp_group=is_dp_attention_enabled()');
- deploy's JSON `dp` is the attention-DP size the line runs (--dp-size N --enable-dp-attention);
- plan's launch line states the --mem-fraction-static its budget used, as deploy's does.
"""

import json
import re

import pytest

from cardfit.catalog.runtimes import default_runtimes
from cardfit.runtimes.sglang import reserved_mib

H100_MIB = 81559  # torch's total memory of an H100 SXM (tests/test_sglang_reserve_terms.py)
QWEN3_30B_TOKEN_BYTES = 48 * 4 * 128 * 2 * 2  # layers x KV heads x head dim x (K, V) x BF16 = 98,304

PINNED = ("deploy", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "--runtime", "sglang", "--tp", "8",
          "--attention-dp", "8", "--users", "256", "--input-tokens", "1000", "--output-tokens", "1000")


def _fraction(command: str) -> float:
    return float(re.search(r"--mem-fraction-static (\S+)", command).group(1))


def _deployment(r: dict) -> dict:
    return r.get("best") or r["closest"]


@pytest.fixture
def pinned(run_cli):
    """A pinned deployment's JSON, whether it meets deploy's default targets (exit 0) or not (exit 3)."""
    def _run(*args: str) -> dict:
        code, out, err = run_cli(*args, "--json")
        assert code in (0, 3), err
        return _deployment(json.JSONDecoder().raw_decode(out)[0])

    return _run


def test_the_reserve_at_dp_8_reads_the_servers_running_cap():
    """H100 TP 8, DP 8, a dense-attention model at 0.5.23: chunk 8192, max_bs 512 (TP >= 4): 512 + 12288 +
    512 * 2 + 8 / 8 * 1024 + 58 prompt graph sizes x 8 (464) + 512 * 8 * 3 + 512 * 8 * 1.5 = 33744 MiB;
    --max-running-requests 64 caps max_bs at 64: 512 + 12288 + 128 + 1024 + 464 + 64 * 8 * 3 = 15952."""
    rt = default_runtimes().get("sglang")
    assert reserved_mib(rt, H100_MIB, 8, 1, "cuda", False, attention_dp=8) == 33744
    assert reserved_mib(rt, H100_MIB, 8, 1, "cuda", False, attention_dp=8, max_running=64) == 15952


def test_engine_at_keeps_the_cap_under_attention_dp():
    """services/plan.py Context.engine_at: main dropped a stated cap wherever attention DP ran (0)."""
    from cardfit.services.inputs import PlanInput
    from cardfit.services.plan import build_context

    ctx = build_context(PlanInput(model="qwen3-30b-a3b", runtime="sglang", max_num_seqs=64, hub=False))
    assert ctx.engine_at(8).max_running == 64
    assert ctx.engine_at(1).max_running == 64


def test_pinned_dp_line_states_the_fraction_of_the_servers_cap(pinned):
    """The pinned TP 8 / DP 8 server with --max-num-seqs 64 starts at (81559 - 15952) / 81559 = 0.804 (main:
    (81559 - 33744) / 81559 = 0.586, the uncapped graphs' reserve), and states --max-running-requests 64."""
    d = pinned(*PINNED, "--max-num-seqs", "64")
    assert "--max-running-requests 64 " in d["command"]
    assert _fraction(d["command"]) == round((H100_MIB - 15952) / H100_MIB, 3) == 0.804


def test_pinned_dp_without_ep_copies_the_cache_over_one_group(pinned):
    """Qwen3-30B-A3B (4 KV heads) at TP 8 / DP 8: each group is one card holding its requests' whole KV heads,
    so the pool is the free room / 98,304 B a token, not / 2 x that (main copied the heads over all 8 ranks:
    kv_replication 2); the free room is after the attention projections and embedding held once per group
    (need > main's 66.78 GB); `dp` reports the 8 groups the line runs (main: 1)."""
    d = pinned(*PINNED)
    mem = d["memory"]
    one_request = 2000 * QWEN3_30B_TOKEN_BYTES  # the need holds one whole request's cache
    assert mem["kv_pool_tokens"] == (mem["free_bytes"] + one_request) // QWEN3_30B_TOKEN_BYTES
    assert mem["need_bytes"] > 66_783_220_696 * 1.2
    assert d["dp"] == 8 and d["ep"] == 1
    assert "--attn-dp-size 8" in d["command"]  # 0.5.23's flag (data/releases.toml attn_dp_size_flag)


# vLLM and TensorRT-LLM attention DP without expert parallelism (issue 26, h-attndp): the line launches the
# attention groups that are timed. vLLM: a MoE model's `--data-parallel-size N` without
# --enable-expert-parallel runs N engine cores whose expert layers "form a tensor parallel group of size DP x
# TP" (docs "Data Parallel Deployment", https://docs.vllm.ai/en/latest/serving/data_parallel_deployment/);
# TensorRT-LLM: enable_attention_dp without --ep_size keeps the experts tensor-parallel over all tp_size ranks
# (tensorrt_llm/mapping.py 'moe_tp_size = moe_world_size // moe_cluster_size; moe_ep_size = 1',
# NVIDIA/TensorRT-LLM@b35ac1b6). Main printed plain TP 2 and `dp` 1 for both while timing two groups.
DP_WITHOUT_EP = [
    ("sglang", ("--tp-size 2 ", "--attn-dp-size 2"), ("--ep-size",)),
    ("vllm", ("--tensor-parallel-size 1 ", "--data-parallel-size 2"), ("--enable-expert-parallel",)),
    ("trtllm", ("--tp_size 2 ", "enable_attention_dp: true"), ("--ep_size",)),
]


@pytest.mark.parametrize("runtime, stated, absent", DP_WITHOUT_EP)
def test_the_line_launches_the_attention_groups_it_times(pinned, runtime, stated, absent):
    base = ("deploy", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "--tp", "2", "--users", "16", "--input-tokens",
            "1000", "--output-tokens", "200", "--runtime", runtime)
    assert pinned(*base)["dp"] == 1
    d = pinned(*base, "--attention-dp", "2")
    assert (d["dp"], d["ep"]) == (2, 1)
    assert all(f in d["command"] for f in stated) and not any(f in d["command"] for f in absent)


@pytest.mark.parametrize("runtime, model, tp, why", [
    # a dense model's vLLM DP ranks are whole replicas (docs "Data Parallel Deployment": "model weights are
    # replicated across separate instances/GPUs"), not attention groups
    ("vllm", "llama-3.1-8b", "2", "whole replicas"),
    # TensorRT-LLM's attention DP is one group per rank (Mapping.dp_size = tp_size if enable_attention_dp)
    ("trtllm", "Qwen/Qwen3-30B-A3B", "4", "all 4 ranks or none"),
])
def test_attention_dp_the_engine_does_not_launch_is_an_error(run_cli, runtime, model, tp, why):
    code, out, err = run_cli("deploy", model, "--gpu", "H100", "--runtime", runtime, "--tp", tp,
                             "--attention-dp", "2", "--users", "16", "--input-tokens", "1000",
                             "--output-tokens", "200")
    assert code not in (0, 3) and why in err and "Traceback" not in err


def test_plan_line_states_the_budgets_fraction(run_json):
    """`cardfit plan llama-3.1-8b --gpu 'H100 SXM' --runtime sglang`: the line states the fraction the budget
    was sized with (budget = total x fraction), not the profile's 0.88 that main printed."""
    r = run_json("plan", "llama-3.1-8b", "--gpu", "H100 SXM", "--runtime", "sglang")
    row = r["gpus"][0]
    fraction = _fraction(row["command"])
    assert fraction != 0.88
    assert row["budget_bytes"] == int(H100_MIB * 2**20 * fraction)


# --enable-dp-attention without --dp-size, release by release (PyPI wheels' python/sglang/srt/server_args.py:
# 0.4.4 sets dp_size = tp_size; 0.4.4.post1-0.5.1.post3 refuse to start; from 0.5.2 'if self.dp_size == 1:
# self.enable_dp_attention = False'): data/releases.toml dp_attention_needs_dp_size
@pytest.mark.parametrize("release, groups", [("0.4.4", 8), ("0.5.2", 1), ("0.5.3", 1), ("", 1)])
def test_dp_attention_without_dp_size_is_off_from_052(release, groups):
    from cardfit.validation.serving import attention_dp

    rt = default_runtimes().find(f"sglang@{release}" if release else "sglang")
    assert attention_dp({"tp": 8, "enable_dp_attention": True}, 8, rt) == groups
    assert attention_dp({"tp": 8, "enable_dp_attention": True, "dp_size": 4}, 8, rt) == 4  # stated: always


def test_gpustack_053_runs_with_the_flag_and_no_dp_are_asked_as_plain_tensor_parallel():
    """GPUStack's DeepSeek-R1 on 8x H200 at SGLang 0.5.3 launched `--tp 8 --enable-dp-attention` with no
    --dp: the engine ran plain TP 8, so the pinned question has no --attention-dp, and the flag (no effect)
    is no knob the user could not pass; dstack's 2025-03 `latest` image (0.4.4 and before) ran dp = tp."""
    from cardfit.validation.serving import attention_dp, pinned_settings, record_input
    from cardfit.validation.single import record_runtime
    from cardfit.validation.validate import all_records

    recs = [r for r in all_records() if r["kind"] == "serving" and r["runtime"] == "sglang"
            and (r.get("settings") or {}).get("enable_dp_attention")
            and not (r.get("settings") or {}).get("dp_size")]
    gpustack = [r for r in recs if "gpustack" in r["source"]]
    dstack = [r for r in recs if "2025-03" in str(r["settings"].get("version"))]
    assert gpustack and dstack
    for r in gpustack:
        inp, tp, _ = record_input(r)
        assert inp.attention_dp is None and tp == 8
        assert "enable_dp_attention" in pinned_settings(r["settings"], tp, record_runtime(r))
    for r in dstack:
        assert attention_dp(r["settings"], 8, record_runtime(r)) == 8


# A pinned SGLang --attention-dp N without --expert-parallel runs N DP workers (--dp-size N
# --enable-dp-attention: attn_dp_size N, arg_groups/parallel_hook.py _handle_deprecated_dp_attention lines
# 40-61), each a scheduler of its own whether or not EP is on (PyPI wheel sglang 0.5.23): its chunk is
# 'cfg.chunked_prefill_size // cfg.attn_dp_size' (parallel_hook.py lines 314-332, under 'if
# attn_dp_enabled_of(...)' alone) and its running cap 'max(1, max_num_reqs // self.attn_dp_size)'
# (mem_cache/kv_cache_configurator.py resolve_max_num_reqs lines 3126-3130), while the decode graphs are
# capped by the server's whole --max-running-requests (arg_groups/memory_hook.py lines 182-188). Main timed
# these replicas as one engine (`attention_dp if ep > 1 else 1`).
DP_ALONE = [
    # model, TP = DP, --max-num-seqs, --max-num-batched-tokens: (replica's budget, most sequences scheduled)
    ("Qwen/Qwen3-30B-A3B", 4, 50, 3001, 4 * (3001 // 4), 4 * (50 // 4)),  # MoE: 3000, 48 (main 3001, 50)
    ("llama-3.1-70b", 8, 100, 4100, 8 * (4100 // 8), 8 * (100 // 8)),  # dense: 4096, 96 (main 4100, 100)
]


@pytest.mark.parametrize("model, dp, cap, chunk, budget, most", DP_ALONE)
def test_pinned_dp_alone_splits_the_servers_chunk_and_cap_over_groups(model, dp, cap, chunk, budget, most):
    from cardfit.services.deploy import DeployInput, pinned_answer

    p = pinned_answer(DeployInput(model=model, gpu=("H100",), runtime="sglang", tp=dp, attention_dp=dp,
                                  max_num_seqs=cap, max_num_batched_tokens=chunk, users=64,
                                  input_tokens=1000, output_tokens=500))
    c = p.result.cand
    assert (c.attention_dp, c.ep) == (dp, 1)
    assert c.replica.chunk_tokens == budget
    assert c.replica.max_seqs <= most
    assert c.setting.ctx.engine.max_running == cap  # the reserve reads the server's flag whole


def test_pinned_dp_alone_benchmark_steps_the_replica_as_timed():
    """The benchmark's cap over the groups (deploy.py _answer: dp_total over launched_dp, 4 x 12 = 48) is
    read only where the engine preempts by recompute (pinned.py _paged: runtimes.toml kv_preemption, vLLM's
    alone); SGLang's run steps the replica as the steady state built it: its 48 sequences and 3,000-token
    steps (4 x 750)."""
    from cardfit.catalog.runtimes import default_runtimes
    from cardfit.services.deploy import DeployInput, dp_total, launched_dp, pinned_answer
    from cardfit.services.pinned import _paged

    rt = default_runtimes().get("sglang")
    p = pinned_answer(DeployInput(model="Qwen/Qwen3-30B-A3B", gpu=("H100",), runtime="sglang", tp=4,
                                  attention_dp=4, max_num_seqs=50, max_num_batched_tokens=3001, users=64,
                                  requests=200, input_tokens=1000, output_tokens=500))
    c = p.result.cand
    assert launched_dp(c) == 4 and dp_total(rt, "max_num_seqs", 50, launched_dp(c)) == 48
    assert p.bench is not None and "3,000 tokens a step" in p.how
    assert _paged(c, rt, 48) is c.replica and c.replica.max_seqs <= 48


@pytest.mark.parametrize("runtime", ["sglang", "vllm"])
def test_the_servers_stated_cap_reaches_the_engine_whole(runtime):
    """--max-num-seqs 100 --attention-dp 8 --expert-parallel 8: the server's flag is 100 as stated. SGLang
    schedules 8 x (100 // 8) = 96 but caps its decode graphs at 100 (memory_hook.py lines 182-188); main
    rebuilt the server's cap as the per-group cap x 8 (96 for SGLang, 800 for vLLM, whose engine cores each
    take the whole 100)."""
    from cardfit.services.deploy import DeployInput, pinned_answer

    p = pinned_answer(DeployInput(model="Qwen/Qwen3-30B-A3B", gpu=("H100",), runtime=runtime, tp=8,
                                  attention_dp=8, expert_parallel=8, max_num_seqs=100, users=64,
                                  input_tokens=1000, output_tokens=500))
    c = p.result.cand
    assert c.setting.ctx.server_max_num_seqs == 100
    assert c.replica.max_seqs <= (96 if runtime == "sglang" else 800)
    if runtime == "sglang":
        assert c.setting.ctx.engine.max_running == 100


def test_the_pinned_ep_line_states_the_fraction_of_the_servers_whole_cap(pinned):
    """H100 TP 8, DP 8, EP 8 at --max-num-seqs 100: the reserve caps the graphs at 100: 512 + 12288 + 100 * 2
    + 1024 + 464 + 100 * 8 * 3 = 16888 MiB, the line (81559 - 16888) / 81559 = 0.793 (main 0.794: 96 graphs,
    16784 MiB); it states the 96 sequences the groups schedule, which SGLang splits as it does 100."""
    rt = default_runtimes().get("sglang")
    assert reserved_mib(rt, H100_MIB, 8, 1, "cuda", False, attention_dp=8, max_running=100) == 16888
    d = pinned(*PINNED, "--expert-parallel", "8", "--max-num-seqs", "100")
    assert _fraction(d["command"]) == round((H100_MIB - 16888) / H100_MIB, 3) == 0.793
    assert "--max-running-requests 96 " in d["command"] and "--ep-size 8" in d["command"]


def test_a_pools_batch_is_one_groups_and_its_server_flag_gives_each_group_it():
    """--decode-batch-size B with --decode-dp 8: SGLang's server flag is 8 x B (each DP worker B = 8B // 8),
    vLLM's B (each engine core its own): runtimes/base.py dp_server_value, per_dp_rank's inverse."""
    from cardfit.runtimes import adapter

    for runtime, want in (("sglang", 512), ("vllm", 64)):
        engine = adapter(default_runtimes().get(runtime))
        assert engine.dp_server_value("max_num_seqs", 64, 8) == want
        assert engine.per_dp_rank("max_num_seqs", want, 8) == 64


# The attention groups' flag by release (data/releases.toml attn_dp_size_flag; PyPI wheels): 0.5.21 (built
# 2026-10-01) has no attn_dp_size field, its groups are --dp-size N beside the --enable-dp-attention switch
# (arg_groups/fields/parallel.py); 0.5.22 (built 2026-10-15, https://pypi.org/project/sglang/0.5.22/) names
# them --attn-dp-size N (field attn_dp_size) and keeps --enable-dp-attention as a deprecated spelling
# (server_args.py DeprecatedStoreTrueAction new_flag="--attn-dp-size <dp-size>"; arg_groups/parallel_hook.py
# handle_deprecated_dp_attention 'attn_dp_size=cfg.dp_size, dp_size=1')
@pytest.mark.parametrize("release, stated, absent", [
    ("0.5.21", "--dp-size 8 --enable-dp-attention", "--attn-dp-size"),
    ("0.5.22", "--attn-dp-size 8", "--enable-dp-attention"),
])
def test_the_line_spells_the_attention_groups_as_its_release_takes_them(pinned, release, stated, absent):
    args = list(PINNED)
    args[args.index("sglang")] = f"sglang@{release}"
    d = pinned(*args)
    assert d["dp"] == 8 and stated in d["command"] and absent not in d["command"]
    assert "--dp-size" not in d["command"].replace(stated, "")  # the groups stated once, no replicas


def test_vllm_engine_cores_hold_every_weight_but_the_routed_experts():
    """vLLM's DP engine cores of a MoE model share only the MoE layers (docs "Data Parallel Deployment":
    "expert layers form a tensor parallel group of size DP x TP"; every other layer is each core's, TP over
    its --tensor-parallel-size): Qwen3-30B-A3B at TP 2 / DP 2 holds the non-expert weights twice, and a
    decode step reads them per core (core/speed.py Machine.dp_holds_all_but_experts). SGLang and
    TensorRT-LLM hold only the attention projections and the embedding per group (deploy.py
    attention_dp_memory)."""
    from dataclasses import replace

    from cardfit.core import moe_parallel
    from cardfit.core import speed as sp
    from cardfit.services.deploy import DeployInput, pinned_answer

    def cand(runtime, dp=None):
        return pinned_answer(DeployInput(model="Qwen/Qwen3-30B-A3B", gpu=("H100",), runtime=runtime, tp=2,
                                         attention_dp=dp, users=256, input_tokens=1000,
                                         output_tokens=200)).result.cand

    for runtime, grouped in (("vllm", "all_but_experts"), ("sglang", "attention"), ("trtllm", "attention")):
        one, two = cand(runtime), cand(runtime, 2)
        shares = sp.weight_shares(one.setting.ctx.model, one.setting.ctx.quant)
        held = 1 - shares.experts if grouped == "all_but_experts" else shares.attention + shares.embed
        assert two.setting.mem.weights_bytes == moe_parallel.weights_bytes_in_all(
            one.setting.mem.weights_bytes, 1 - held, 2)
        assert two.replica.machine.dp_holds_all_but_experts == (grouped == "all_but_experts")
    r = cand("vllm", 2).replica
    shared = replace(r.machine, dp_holds_all_but_experts=False)
    assert sp.step_seconds(r.load, r.machine, 64) > sp.step_seconds(r.load, shared, 64)


def test_each_attention_group_replays_graphs_for_its_own_batch():
    """SGLang under attention DP, with or without EP, replays a decode graph where the largest DP rank's
    request count is within the cap each rank captures up to
    (model_executor/runner/decode_cuda_graph_runner.py can_run_graph: 'cuda_graph_bs =
    self._max_dp_batch_size(forward_batch)', 'max(request_counts)';
    utils/common.py require_mlp_tp_gather; PyPI wheel sglang 0.5.23): Qwen3-30B-A3B on 8 H100 at TP 8 / DP 8
    decoding 2,048 sequences runs 256 a group, under the card's cap of 512, so the step is the all-graphs
    step; main timed the 2,048 against the cap and launched every kernel (TPOT 72.6 ms, now 36.2)."""
    from dataclasses import replace

    from cardfit.core import speed as sp
    from cardfit.services.deploy import DeployInput, pinned_answer

    r = pinned_answer(DeployInput(model="Qwen/Qwen3-30B-A3B", gpu=("H100",), runtime="sglang", tp=8,
                                  attention_dp=8, users=2048, input_tokens=1000,
                                  output_tokens=1000)).result.cand.replica
    mc = r.machine
    assert (mc.attention_dp, mc.expert_parallel, mc.graph_max_batch) == (8, 1, 512)
    graphs = replace(mc, graph_max_batch=0)  # every batch a replay
    assert sp.step_seconds(r.load, mc, 2048) == sp.step_seconds(r.load, graphs, 2048)
    assert sp.step_seconds(r.load, mc, 8 * 513) > sp.step_seconds(r.load, graphs, 8 * 513)  # 513 a group

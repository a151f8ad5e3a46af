"""Per-rank engine limits under attention data parallel (runtimes/base.py per_dp_rank, services/deploy.py
dp_total / per_rank_cap): SGLang divides a server's --chunked-prefill-size and --max-running-requests among
its --dp-size ranks from the releases data/releases.toml names; vLLM's DP engine cores and TensorRT-LLM's
attention-DP ranks each take the whole setting. The launch line keeps the flag the user passed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cardfit.catalog.runtimes import default_runtimes
from cardfit.runtimes import adapter
from cardfit.services.deploy import DeployInput, deployment, dp_total, per_rank_cap, pinned_answer

CHUNK, SEQS = "max_num_batched_tokens", "max_num_seqs"

# (runtime@release, dp, setting, server value, one rank's value, source)
RANK_LIMITS = [
    # sglang/srt/server_args.py _handle_data_parallelism (PyPI wheel 0.5.9):
    # 'self.chunked_prefill_size = self.chunked_prefill_size // self.dp_size'
    ("sglang@0.5.9", 8, CHUNK, 16384, 2048, "server_args.py 0.5.9"),
    ("sglang@0.5.8", 4, CHUNK, 8192, 2048, "server_args.py 0.5.8"),
    ("sglang@0.5.8", 8, CHUNK, 8191, 1023, "server_args.py 0.5.8: floor division"),
    ("sglang@0.4.5", 2, CHUNK, 4096, 2048, "server_args.py 0.4.5"),
    # 0.4.4 (wheel built 2025-03-13) has no division; 0.4.4.post1 (2025-03-14) has it (the release parser
    # orders .post1 after 0.4.4)
    ("sglang@0.4.4.post1", 8, CHUNK, 16384, 2048, "server_args.py 0.4.4.post1"),
    ("sglang@0.4.4", 8, CHUNK, 16384, 16384, "server_args.py 0.4.4: no division"),
    ("sglang@0.4.3", 8, CHUNK, 16384, 16384, "server_args.py 0.4.3.post4: no division"),
    # model_executor/model_runner.py 0.5.8/0.5.9 'server_args.max_running_requests // (dp_size if
    # enable_dp_attention else 1)'; managers/tp_worker.py from 0.4.2
    ("sglang@0.5.9", 8, SEQS, 256, 32, "model_runner.py 0.5.9"),
    ("sglang@0.4.2", 8, SEQS, 256, 32, "tp_worker.py 0.4.2"),
    ("sglang@0.4.1", 8, SEQS, 256, 256, "tp_worker.py 0.4.1: the whole value"),
    ("sglang@0.5.9", 1, CHUNK, 16384, 16384, "dp_size 1 turns DP attention off (_handle_data_parallelism)"),
    ("sglang@0.5.9", 8, SEQS, 0, 0, "unset: each rank's cap is its own pool's"),
    # vLLM --data-parallel-size: each DP rank is an engine core with its own scheduler limits
    ("vllm", 8, CHUNK, 8192, 8192, "vLLM DP engine core: its own max_num_batched_tokens"),
    ("vllm", 8, SEQS, 256, 256, "vLLM DP engine core: its own max_num_seqs"),
    # TensorRT-LLM attention DP: max_batch_size / max_num_tokens per rank (aiconfigurator's generator)
    ("trtllm@1.2.0", 8, CHUNK, 2560, 2560, "aiconfigurator generator: max_num_tokens per rank"),
    ("trtllm@1.0", 8, SEQS, 32, 32, "aiconfigurator generator: max_batch_size per rank"),
]


def _rt(name: str):
    return default_runtimes().get(name)


@pytest.mark.parametrize("runtime,dp,setting,server,rank,source", RANK_LIMITS)
def test_one_ranks_limit_follows_the_engine_and_release(runtime, dp, setting, server, rank, source):
    assert adapter(_rt(runtime)).per_dp_rank(setting, server, dp) == rank, source
    want = rank * dp if dp > 1 and server > 0 else server
    assert dp_total(_rt(runtime), setting, server, dp) == want, source


@given(value=st.integers(1, 1_000_000), dp=st.integers(2, 64))
def test_sglang_divides_and_the_others_multiply(value: int, dp: int) -> None:
    sglang = dp_total(_rt("sglang"), CHUNK, value, dp)
    assert sglang <= max(value, dp) and sglang > value - dp  # the groups' shares add up to the server's
    for other in ("vllm", "trtllm"):
        assert dp_total(_rt(other), CHUNK, value, dp) == value * dp


@pytest.mark.parametrize("runtime,dp,ep,cap,want", [
    ("sglang", 8, 8, 64, 8),  # --max-running-requests 64 over 8 groups
    # no expert parallel: SGLang still runs 8 DP workers, each scheduling max(1, 64 // attn_dp_size)
    # (mem_cache/kv_cache_configurator.py resolve_max_num_reqs lines 3126-3130, PyPI wheel sglang 0.5.23;
    # main took the whole 64 as one engine's)
    ("sglang", 8, 1, 64, 8),
    ("sglang", 8, 1, 100, 12),  # floor division: 8 x 12 = 96 scheduled
    ("vllm", 8, 8, 64, 64),  # each engine core its own --max-num-seqs
    ("vllm", 8, 1, 64, 64),  # vLLM's line runs no attention groups without EP (attention_groups 1)
])
def test_the_pinned_sequence_cap_is_one_groups(runtime, dp, ep, cap, want):
    assert per_rank_cap(_rt(runtime), cap, dp, ep) == want


def _pinned(runtime: str, **more) -> DeployInput:
    return DeployInput(model="deepseek-v3", gpu=("H200",), tp=8, attention_dp=8, expert_parallel=8,
                       runtime=runtime, users=64, input_tokens=8000, output_tokens=1000, **more)


@pytest.mark.parametrize("runtime,chunk,seqs,replica_chunk,most_seqs", [
    # SGLang 0.5.9: the server's chunk and cap, split over 8 ranks, add back to themselves
    ("sglang", 16384, 64, 16384, 64),
    # SGLang 0.4.1: each rank took the whole of both
    ("sglang@0.4.1", 16384, 64, 8 * 16384, 8 * 64),
    # vLLM: each of the 8 engine cores its own
    ("vllm", 16384, 64, 8 * 16384, 8 * 64),
])
def test_a_pinned_replica_holds_the_engines_limits(runtime, chunk, seqs, replica_chunk, most_seqs):
    r = pinned_answer(_pinned(runtime, max_num_batched_tokens=chunk, max_num_seqs=seqs)).result.cand.replica
    assert r.chunk_tokens == replica_chunk
    assert r.max_seqs <= most_seqs


def test_the_sglang_launch_line_states_the_servers_flags():
    inp = _pinned("sglang", max_num_batched_tokens=16384, max_num_seqs=64)
    argv = deployment(inp, pinned_answer(inp).result).command.split()
    assert argv[argv.index("--chunked-prefill-size") + 1] == "16384"
    assert argv[argv.index("--max-running-requests") + 1] == "64"
    assert argv[argv.index("--attn-dp-size") + 1] == "8"  # 0.5.23 (data/releases.toml attn_dp_size_flag)


def test_a_benchmark_on_attention_groups_steps_the_servers_cap_not_one_groups():
    """vLLM with --max-num-seqs 64 on 8 attention-DP engine cores schedules up to 512 sequences: a
    benchmark of 256 users stepped through its KV pool runs them all, as without the flag (the pool stepping
    took the per-core 64 as the whole server's cap: TTFT 13.7 s instead of 1.1 s)."""
    from dataclasses import replace

    base = replace(_pinned("vllm"), users=256, input_tokens=1000, requests=1024)
    capped = pinned_answer(replace(base, max_num_seqs=64))
    free = pinned_answer(base)
    assert capped.bench is not None and free.bench is not None
    assert capped.bench.ttft_mean_s == pytest.approx(free.bench.ttft_mean_s, rel=0.01)

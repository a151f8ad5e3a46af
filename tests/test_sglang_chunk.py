"""SGLang's default step budget (--chunked-prefill-size) is its own, by the card's memory and the release
(runtimes/sglang.py default_chunk; data/runtimes.toml sglang [[runtime.tier]]; data/releases.toml
chunk_16k_above_180gb, chunk_by_card_tier, chunk_4k_below_60gib), not vLLM's flat profile value. The plan's
memory, a deployment's replica and the launch line (which leaves the flag to the engine) agree on it."""

from __future__ import annotations

import pytest

from cardfit.catalog.gpus import default_gpus
from cardfit.catalog.runtimes import default_runtimes
from cardfit.runtimes import adapter
from cardfit.runtimes.sglang import default_chunk, prefill_graph_sizes, reserved_mib
from cardfit.services.deploy import DeployInput, deployment, pinned_answer
from cardfit.services.inputs import PlanInput
from cardfit.services.plan import build_context, engine_defaults

MIB = 2**20

# (runtime@release, card, --chunked-prefill-size SGLang picks, source: server_args.py in the PyPI wheels)
CHUNKS = [
    # the current release, 0.5.23 (arg_groups/memory_hook.py handle_gpu_memory_settings): < 20 GiB 2048,
    # < 35 GiB 4096 (from 0.5.20: releases.toml tier_35gib_4k_48), < 60 GiB 4096, < 90 GiB 8192,
    # < 160 GiB 8192, else 16384; 0.5.9 (server_args.py _handle_gpu_memory_settings) the same but 2048
    # below 35 GiB
    ("sglang", "Tesla T4", 2048, "0.5.23: gpu_mem < 20 * 1024 (T4, 4080)"),
    ("sglang", "RTX 4090", 4096, "0.5.23: gpu_mem < 35 * 1024 (A10, 4090, 5090)"),
    ("sglang", "RTX 5090", 4096, "0.5.23: gpu_mem < 35 * 1024 (A10, 4090, 5090)"),
    ("sglang@0.5.9", "RTX 4090", 2048, "0.5.9: gpu_mem < 35 * 1024 (A10, 4090, 5090)"),
    ("sglang@0.5.19", "RTX 5090", 2048, "0.5.19: gpu_mem < 35 * 1024 (A10, 4090, 5090)"),
    ("sglang@0.5.20", "RTX 5090", 4096, "0.5.20: (chunked_prefill_size 4k, max_bs 48 if tp < 4 else 160)"),
    ("sglang", "L40S", 4096, "0.5.9: gpu_mem < 60 * 1024 (A100 (40GB), L40)"),
    ("sglang", "A100 SXM 40GB", 4096, "0.5.9: gpu_mem < 60 * 1024 (A100 (40GB), L40)"),
    ("sglang", "A100 SXM 80GB", 8192, "0.5.9: gpu_mem < 90 * 1024 (H100, A100)"),
    ("sglang", "H100 SXM", 8192, "0.5.9: gpu_mem < 90 * 1024 (H100, A100)"),
    ("sglang", "H200 SXM", 8192, "0.5.9: gpu_mem < 160 * 1024 (H20, H200)"),
    ("sglang", "B200", 16384, "0.5.9: else (B200, MI300)"),
    ("sglang", "MI300X", 16384, "0.5.9: else (B200, MI300)"),
    ("sglang", "MI355X", 16384, "0.5.9: else (B200, MI300)"),
    ("sglang@0.5.3", "L40S", 4096, "0.5.3 (2025-10-06): the 4096 row first"),
    # 0.4.8-0.5.3rc0: < 35 GiB 2048, < 160 GiB 8192, else 16384
    ("sglang@0.5.2", "L40S", 8192, "0.5.2: gpu_mem < 160 * 1024 (H100, H200, A100, H20)"),
    ("sglang@0.5.2", "A100 SXM 40GB", 8192, "0.5.2: gpu_mem < 160 * 1024"),
    ("sglang@0.4.8", "RTX 5090", 2048, "0.4.8: gpu_mem < 35 * 1024 (A10, L40, 4090)"),
    ("sglang@0.4.8", "B200", 16384, "0.4.8: else (B200, MI300)"),
    # before 0.4.8: 2048 below 25,000 MiB, else 8192; from 0.4.7 16384 above 180,000 MiB
    ("sglang@0.4.7", "RTX 5090", 8192, "0.4.7: 32,607 MiB is not below 25_000"),
    ("sglang@0.4.7", "RTX 4090", 2048, "0.4.7: 24,564 MiB < 25_000"),
    ("sglang@0.4.7", "MI300X", 16384, "0.4.7: gpu_mem > 180_000"),
    ("sglang@0.4.6", "B200", 8192, "0.4.6.post5: no 16384 row outside P/D"),
]


def _rt(name: str):
    return default_runtimes().get(name)


def _gpu(name: str):
    return default_gpus().get(name)


@pytest.mark.parametrize("runtime,card,chunk,source", CHUNKS)
def test_sglang_picks_its_chunk_by_card_and_release(runtime, card, chunk, source):
    # the old adapter inherited vLLM's serve default: the profile's flat 8192 on every card
    assert adapter(_rt(runtime)).serve_batched_tokens(_gpu(card)) == chunk, source


def test_no_card_keeps_the_profiles_value():
    assert adapter(_rt("sglang")).serve_batched_tokens(None) == _rt("sglang").prefill_chunk


@pytest.mark.parametrize("name,graphs_4090,prompt_graphs",
                         [("sglang@0.5.9", 24, False), ("sglang", 48, True)])
def test_the_memory_reserve_reads_the_same_chunk(name, graphs_4090, prompt_graphs):
    # one owner: reserved_mib's chunk term is default_chunk's (512 + 1.5 x chunk + 2 x graphs + ranks / 8,
    # from 0.5.10 + 8 MiB per captured prompt size up to the chunk: releases.toml prefill_cuda_graph)
    rt = _rt(name)
    for card, graphs in (("RTX 4090", graphs_4090), ("L40S", 32), ("H100 SXM", 256), ("B200", 512)):
        mib = adapter(rt).cuda_total(_gpu(card)) / MIB
        chunk = default_chunk(rt, mib)
        want = (512 + max(chunk, 2048) * 1.5 + graphs * 2 + 1024 / 8
                + (len(prefill_graph_sizes(chunk)) * 8 if prompt_graphs else 0))
        assert reserved_mib(rt, mib, 1, 1) == (max(want, 10 * 1024) if mib > 60 * 1024 else want), card


@pytest.mark.parametrize("card,chunk", [("RTX 4090", 4096), ("L40S", 4096), ("H100 SXM", 8192)])
def test_plan_deploy_and_launch_line_agree_on_the_cards_chunk(card, chunk):
    gpu = _gpu(card)
    ctx = build_context(PlanInput(model="qwen3-8b", runtime="sglang"))
    assert engine_defaults(ctx, gpu)[0] == chunk  # the plan's memory and served figure
    inp = DeployInput(model="qwen3-8b", gpu=(card,), tp=1, runtime="sglang", users=16, input_tokens=4000,
                      output_tokens=500)
    answer = pinned_answer(inp)
    assert answer.result.cand.replica.chunk_tokens == chunk  # the replica deploy times
    # the launch line leaves the flag to the engine, whose own default on the card is that chunk
    assert "--chunked-prefill-size" not in deployment(inp, answer.result).command.split()


def test_a_given_chunk_wins_and_attention_dp_splits_the_cards_default():
    ctx = build_context(PlanInput(model="qwen3-8b", runtime="sglang", prefill_chunk=3072))
    assert engine_defaults(ctx, _gpu("RTX 4090"))[0] == 3072
    # B200's 16384 is the server's: 8 attention-DP ranks take 2048 each (releases.toml
    # dp_attention_chunk_split), 8 x 2048 over the replica
    inp = DeployInput(model="deepseek-v3", gpu=("B200",), tp=8, attention_dp=8, expert_parallel=8,
                      runtime="sglang", users=64, input_tokens=8000, output_tokens=1000)
    assert pinned_answer(inp).result.cand.replica.chunk_tokens == 16384
    given = DeployInput(model="deepseek-v3", gpu=("B200",), tp=8, attention_dp=8, expert_parallel=8,
                        runtime="sglang", users=64, input_tokens=8000, output_tokens=1000,
                        max_num_batched_tokens=4096)
    assert pinned_answer(given).result.cand.replica.chunk_tokens == 4096


def _record(rid: str) -> dict:
    from cardfit.validation.validate import load_records

    return next(r for r in load_records("serving") if r["id"] == rid)


@pytest.mark.parametrize("rid,chunk,why", [
    # InferenceX's 4x B200 launch script (benchmarks/single_node/dsr1_fp8_b200.sh @d4948f99) states
    # --chunked-prefill-size 8192: the stated chunk, not the card's 16384
    ("ix-dsr1-b200-sglang-fp8-tp4-8192x1024-c32-run26306422380-ttft", 8192, "stated"),
    # CloudRift's deplodock RTX 5090 run states none: SGLang's own 2048 on a 32 GB card (was 8192)
    ("cloudrift-deplodock-qwen3-coder-30b-a3b-rtx5090-sglang-awq-4000x4000-c4-vs-ttft", 2048, "the card's"),
])
def test_a_records_stated_chunk_wins_over_the_cards(rid, chunk, why):
    from cardfit.validation.serving import record_input

    inp = record_input(_record(rid))[0]
    assert pinned_answer(inp).result.cand.replica.chunk_tokens == chunk, why

"""Ollama's one-slot models in `plan`, `speed` and `deploy` (issue 27): Ollama's scheduler loads an embedder
and the architectures its release lists as not safe with num_parallel > 1 with 1 slot whatever
OLLAMA_NUM_PARALLEL says, so `--batch` / `--users` beyond one queue; the rule is the one `cardfit stack`
applies (runtimes/ollama.py one_slot), at the release asked:
- embedders from 0.3.7: https://github.com/ollama/ollama/blob/v0.3.7/server/sched.go ("Embedding models
  should always be loaded with parallel=1", PR #6467; absent at v0.3.6);
- qwen35 (model_type qwen3_5) from 0.17.1: https://github.com/ollama/ollama/blob/v0.17.1/server/sched.go
  ("Some architectures are not safe with num_parallel > 1": qwen35, qwen35moe, nemotron_h, nemotron_h_moe
  added; absent at v0.17.0)."""

from __future__ import annotations

import pytest

import cardfit

ONE_SLOT = "with one slot whatever OLLAMA_NUM_PARALLEL says (server/sched.go)"


@pytest.mark.parametrize("model, runtime, batch, sequences, why", [
    ("qwen3.5:9b", "ollama", 4, 1, "Ollama runs qwen3_5 models with one slot"),  # the current release
    ("qwen3.5:9b", "ollama@0.17.1", 4, 1, "Ollama runs qwen3_5 models with one slot"),
    ("qwen3.5:9b", "ollama@0.17.0", 4, 4, None),  # not yet in v0.17.0's list
    ("bge-m3", "ollama", 8, 1, "Ollama runs embedders with one slot"),
    ("bge-m3", "ollama@0.3.7", 8, 1, "Ollama runs embedders with one slot"),
    ("bge-m3", "ollama@0.3.6", 8, 8, None),  # before PR #6467
    ("llama3.1:8b", "ollama", 4, 4, None),  # a chat model keeps its slots
    ("qwen3.5:9b", "llama.cpp", 4, 4, None),  # llama-server runs the -np slots it is given
    ("qwen3.5:9b", "ollama", 1, 1, None),  # one asked: nothing to say
])
def test_plan_counts_the_slots_ollama_runs(model, runtime, batch, sequences, why):
    d = cardfit.plan(model=model, gpu="RTX 4090", runtime=runtime, batch=batch)
    assert d["inputs"]["batch"] == sequences
    said = [n for n in d["notes"] if ONE_SLOT in n]
    if why is None:
        assert said == []
    else:
        assert len(said) == 1 and said[0].startswith(why) and f"not {batch}" in said[0]


def test_speed_queues_the_streams_beyond_one():
    """Four streams on one slot: the aggregate is one stream's, where a chat model's grows with them."""
    one = cardfit.speed(model="qwen3.5:9b", gpu="RTX 4090", runtime="ollama", concurrency=(1, 4))
    before = cardfit.speed(model="qwen3.5:9b", gpu="RTX 4090", runtime="ollama@0.17.0", concurrency=(1, 4))
    rates = [r["aggregate_tokens_per_s"] for r in one["rows"]]
    assert rates[1] == rates[0]
    assert before["rows"][1]["aggregate_tokens_per_s"] > 1.5 * before["rows"][0]["aggregate_tokens_per_s"]
    assert any(n.startswith("Ollama runs qwen3_5 models with one slot") for n in one["notes"])
    assert not any(ONE_SLOT in n for n in before["notes"])


@pytest.mark.parametrize("runtime, seqs, noted", [("ollama", 1, True), ("ollama@0.17.0", 8, False)])
def test_a_pinned_deploy_runs_one_request_at_a_time(runtime, seqs, noted):
    """`deploy --tp 1 --users 8` on one RTX 4090: one slot queues the other seven users (a TTFT of several
    answers), where 0.17.0 ran all eight together."""
    d = cardfit.deploy(model="qwen3.5:9b", gpu=("RTX 4090",), runtime=runtime, users=8, tp=1)
    one = d["best"] or d["closest"]
    assert one["max_num_seqs"] == seqs
    assert any(n.startswith("Ollama runs qwen3_5 models with one slot") for n in d["notes"]) == noted
    if noted:
        assert one["ttft_ms"] > 5 * one["tpot_ms"] * 300  # behind several whole 300-token answers


def test_the_deploy_search_offers_only_one_slot_replicas():
    d = cardfit.deploy(model="qwen3.5:9b", gpu=("RTX 4090",), runtime="ollama", users=8)
    assert d["pareto"] and all(p["max_num_seqs"] == 1 for p in d["pareto"])
    assert any("each replica serves one request at a time" in n for n in d["notes"])

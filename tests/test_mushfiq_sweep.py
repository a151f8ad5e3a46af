"""mushfiqrahman.dev's Mistral-7B BF16 sweep on one RTX 4090 (vLLM, 256 prompt tokens, 100-token mean answers,
300 prompts at 4-48 in flight: data/validation/serving_mushfiq_rtx4090.toml), taken apart by mechanism
(docs/VALIDATION.md "The RTX 4090 sweep, taken apart"): what does not bind in the record's question, the one
GPU time law the page's own rates fit, the roofline step cardfit times instead, and the first-token wait that
neither explains. No model change rests on it: these hold the analysis, so that a change that moves it shows
here."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cardfit.core import serving as sv
from cardfit.services.deploy import pinned_answer
from cardfit.validation.serving import record_input
from cardfit.validation.validate import all_records

FILE = "serving_mushfiq_rtx4090.toml"
RECORDS = [r for r in all_records() if r.get("file") == FILE]
OUTPUT = {int(r["concurrency"]): r for r in RECORDS if r["metric"] == "output_tokens_per_s"}
MEAN_TTFT = {int(r["concurrency"]): r for r in RECORDS
             if r["metric"] == "ttft_ms" and r.get("statistic") == "mean"}
USERS = (4, 8, 16, 32, 48)


def test_the_file_is_the_sweep():
    assert sorted(OUTPUT) == sorted(MEAN_TTFT) == list(USERS)
    assert len(RECORDS) == 15
    for r in RECORDS:
        assert (r["input_tokens"], r["output_tokens"], r["requests"], r["load"]) == (256, 100, 300, "closed")


@pytest.mark.parametrize("users", USERS)
def test_nothing_binds_in_the_records_question(users):
    """vLLM V1's pool at its default 0.9 of the card holds every request whole (no preemption); a step of
    the users' decodes and one 256-token prompt fits the 2,048-token budget and replays a CUDA graph (vLLM
    captures up to min(2 x max_num_seqs, 512) tokens, vllm/config/vllm.py _set_cudagraph_sizes)."""
    inp, _, _ = record_input(OUTPUT[users])
    p = pinned_answer(inp)
    rep = p.result.cand.replica
    assert not p.preempting
    assert users * (256 + 128) < p.result.cand.kv_tokens
    assert rep.chunk_tokens == 2048 and users + 256 <= 512
    assert sv.eager_s(rep, users, 256) == 0.0


def _law() -> tuple[float, float, list[float]]:
    """The GPU time law the page's rates fit: its GPU never idles (a closed loop), so each second holds
    steps x a + tokens x b. A request decodes 99 tokens (100-token mean answers) in c / rate - TTFT seconds;
    a second carries rate x (256 + 100) prompt and answer tokens. Least squares over the five rows:
    (a, b, each row's busy seconds)."""
    rows = []
    for c in USERS:
        rate = float(OUTPUT[c]["measured"]) / 100  # requests/s: output tok/s over the 100-token answers
        decode_s = c / rate - float(MEAN_TTFT[c]["measured"]) / 1e3
        rows.append((99 / decode_s, rate * (256 + 100)))
    s11 = sum(x * x for x, _ in rows)
    s12 = sum(x * y for x, y in rows)
    s22 = sum(y * y for _, y in rows)
    t1, t2 = sum(x for x, _ in rows), sum(y for _, y in rows)
    det = s11 * s22 - s12 * s12
    a, b = (t1 * s22 - t2 * s12) / det, (s11 * t2 - s12 * t1) / det
    return a, b, [x * a + y * b for x, y in rows]


def test_the_run_fits_one_step_law():
    """17.1 ms a step + 119 us a token, every row within about 1 % (0.7 % with the page's own Req/s column,
    which the records round into their output tok/s): a token's 14.6 GFLOP at about 123 TFLOPS, added to the
    weight read rather than hidden under it."""
    a, b, busy = _law()
    assert a == pytest.approx(17.13e-3, abs=0.05e-3)
    assert b == pytest.approx(118.8e-6, abs=0.2e-6)
    assert all(abs(x - 1) < 0.011 for x in busy)


def test_cardfit_times_the_mixed_step_below_the_law():
    """48 decodes and one 256-token prompt: cardfit's step (the prompt's FLOPs hiding the weight read) is
    shorter than the law's 17.15 ms + 304 x 119 us (36.5 ms against 53.2 when written): the analysis in
    docs/VALIDATION.md holds while this does."""
    inp, _, _ = record_input(OUTPUT[48])
    rep = pinned_answer(inp).result.cand.replica
    a, b, _ = _law()
    law = a + (48 + 256) * b
    assert law == pytest.approx(53.2e-3, abs=0.3e-3)
    assert sv.step_s(rep, 48, 0.0) < sv.step_s(rep, 48, 256) < 0.8 * law


def test_the_graph_size_is_the_engines_cap_not_the_pools():
    """The record's question at --gpu-memory-utilization 0.75 (issue 24): the KV pool holds 75 sequences at
    the mean tokens in flight (84 at vLLM 0.33.0; 0.34.0 keeps the CUDA-graph estimate free beside the
    graphs: data/releases.toml extensible_kv_cache), but vLLM sizes its CUDA-graph capture list from the
    max_num_seqs it was started with (its default 256 on a card under 70 GiB: vllm/engine/arg_utils.py
    get_batch_defaults), up to min(2 x max_num_seqs, 512) = 512 tokens (vllm/config/vllm.py
    VllmConfig._set_cudagraph_sizes), never from the pool. A 16-decode + 256-token step replays a graph:
    no eager launches (the old code charged 32 layers x 0.8 ms, and the c16 benchmark's median TTFT read
    79 ms instead of 53)."""
    inp, _, _ = record_input(OUTPUT[16])
    inp = replace(inp, gpu_memory_utilization=0.75)
    p = pinned_answer(inp)
    rep = p.result.cand.replica
    assert rep.max_seqs == 75  # the pool's cap at the mean tokens in flight
    assert sv.eager_s(rep, 16, 256) == 0.0
    assert sv.eager_s(rep, 16, 512) > 0.0  # past 512 tokens vLLM runs eagerly whatever its cap
    assert p.bench is not None and p.bench.ttft_median_s * 1e3 == pytest.approx(53.1, abs=1.0)
    assert rep.engine_seqs == 256  # the engine's own default on an RTX 4090


def test_the_launch_line_starts_the_engine_the_timing_assumes():
    """The same question: the printed line and the JSON's max_num_seqs give the engine the cap its graphs are
    timed with (256, vLLM's default here), not the 84 the pool holds: started with --max-num-seqs 84, vLLM
    would capture graphs only up to 168 tokens and run the 272-token steps eagerly."""
    from cardfit.services.deploy import command, deployment, launched_seqs

    inp, _, _ = record_input(OUTPUT[16])
    inp = replace(inp, gpu_memory_utilization=0.75)
    r = pinned_answer(inp).result
    assert launched_seqs(r.cand.replica) == 256 > r.cand.replica.max_seqs
    assert deployment(inp, r).max_num_seqs == 256
    assert "--max-num-seqs 256" in command(inp, r)

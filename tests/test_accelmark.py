"""AccelMark's committed vLLM runs at current releases (issue 24 item 4; data/validation/
serving_accelmark.toml and serving_accelmark_longctx.toml): Meta-Llama-3-8B-Instruct (suite A),
Qwen2.5-0.5B-Instruct (suite F) and Llama-3.1-8B-Instruct at ~28.6K-token prompts (suite D) on one A100
SXM4 80GB at vLLM 0.20.1 and on one RTX 5090 at vLLM 0.19.1rc1.dev339, the model run in process through
vLLM's AsyncLLMEngine. Every record was scored at first contact by the code before the source was added
(data/first_contact.toml, never edited: HELD), and today's error of each is held so that a change of the
model shows here, record by record (docs/VALIDATION.md "AccelMark: a new publisher of current vLLM runs")."""

from __future__ import annotations

import pytest

from cardfit.validation.validate import all_records, path_of

from .helpers import check_first_contact, check_today, first_contact_rows

FILES = ("serving_accelmark.toml", "serving_accelmark_longctx.toml", "serving_accelmark_p90.toml")
RECORDS = [r for r in all_records() if r.get("file") in FILES]
FIRST = first_contact_rows()
# the commits whose code scored each file at first contact (scripts/first_contact.py --new, 2026-12-07; the
# second adds only records and tests to the first: the same model)
CODE_AT = {"serving_accelmark.toml": "dcdee205f5400c3bad5ea52cf6d99e27138a5108",
           "serving_accelmark_longctx.toml": "62f8cba61f2239850589319901c88851993ef301",
           "serving_accelmark_p90.toml": "602cd1fddf9371f47a300721e2a8b7b9d0138631"}

# predicted / measured - 1 at first contact, per record (dcdee20), the engine limits asked as `vllm serve`'s
# (256 sequences on the A100, 222 on the RTX 5090): the tiny model's TTFT -85..-96 % (a 10-48 ms floor of the
# in-process front end and host), the overloaded stages' TTFT and TPOT on the safe side
HELD = {
    "accelmark-llama-3-8b-a100-80gb-vllm0201-suiteA-interactive-c1-ttft-median": -0.367,
    "accelmark-llama-3-8b-a100-80gb-vllm0201-suiteA-interactive-c1-tpot-median": -0.093,
    "accelmark-llama-3-8b-a100-80gb-vllm0201-suiteA-online-r5-ttft-median": -0.490,
    "accelmark-llama-3-8b-a100-80gb-vllm0201-suiteA-online-r5-tpot-median": -0.180,
    "accelmark-llama-3-8b-a100-80gb-vllm0201-suiteA-online-r25-ttft-median": 21.636,
    "accelmark-llama-3-8b-a100-80gb-vllm0201-suiteA-online-r25-tpot-median": 0.700,
    "accelmark-llama-3-8b-a100-80gb-vllm0201-suiteA-online-r100-ttft-median": 2.627,
    "accelmark-llama-3-8b-a100-80gb-vllm0201-suiteA-online-r100-tpot-median": 0.708,
    "accelmark-llama-3-8b-a100-80gb-vllm0201-suiteA-sustained-c8-output": 0.100,
    "accelmark-llama-3-8b-rtx5090-vllm0191-suiteA-interactive-c1-ttft-median": -0.147,
    "accelmark-llama-3-8b-rtx5090-vllm0191-suiteA-interactive-c1-tpot-median": 0.071,
    "accelmark-llama-3-8b-rtx5090-vllm0191-suiteA-online-r5-ttft-median": -0.566,
    "accelmark-llama-3-8b-rtx5090-vllm0191-suiteA-online-r5-tpot-median": -0.177,
    "accelmark-llama-3-8b-rtx5090-vllm0191-suiteA-online-r25-ttft-median": 4.097,
    "accelmark-llama-3-8b-rtx5090-vllm0191-suiteA-online-r25-tpot-median": 0.608,
    "accelmark-llama-3-8b-rtx5090-vllm0191-suiteA-online-r100-ttft-median": 1.586,
    "accelmark-llama-3-8b-rtx5090-vllm0191-suiteA-online-r100-tpot-median": 0.625,
    "accelmark-llama-3-8b-rtx5090-vllm0191-suiteA-sustained-c8-output": -0.025,
    "accelmark-qwen2.5-0.5b-a100-80gb-vllm0201-suiteF-interactive-c1-ttft-median": -0.863,
    "accelmark-qwen2.5-0.5b-a100-80gb-vllm0201-suiteF-interactive-c1-tpot-median": -0.160,
    "accelmark-qwen2.5-0.5b-a100-80gb-vllm0201-suiteF-online-r10-ttft-median": -0.845,
    "accelmark-qwen2.5-0.5b-a100-80gb-vllm0201-suiteF-online-r10-tpot-median": -0.276,
    "accelmark-qwen2.5-0.5b-a100-80gb-vllm0201-suiteF-online-r40-ttft-median": -0.866,
    "accelmark-qwen2.5-0.5b-a100-80gb-vllm0201-suiteF-online-r40-tpot-median": -0.377,
    "accelmark-qwen2.5-0.5b-a100-80gb-vllm0201-suiteF-sustained-c32-output": 0.738,
    "accelmark-qwen2.5-0.5b-rtx5090-vllm0191-suiteF-interactive-c1-ttft-median": -0.928,
    "accelmark-qwen2.5-0.5b-rtx5090-vllm0191-suiteF-interactive-c1-tpot-median": -0.684,
    "accelmark-qwen2.5-0.5b-rtx5090-vllm0191-suiteF-online-r10-ttft-median": -0.949,
    "accelmark-qwen2.5-0.5b-rtx5090-vllm0191-suiteF-online-r10-tpot-median": -0.752,
    "accelmark-qwen2.5-0.5b-rtx5090-vllm0191-suiteF-online-r40-ttft-median": -0.963,
    "accelmark-qwen2.5-0.5b-rtx5090-vllm0191-suiteF-online-r40-tpot-median": -0.846,
    "accelmark-qwen2.5-0.5b-rtx5090-vllm0191-suiteF-sustained-c32-output": 3.775,
}
# suite D, long context (~28.6K-token prompts), scored with the async engine's limits from the start
LONGCTX = {
    "accelmark-longctx-llama-3.1-8b-a100-80gb-vllm0201-suiteD-interactive-c1-ttft-median": -0.044,
    "accelmark-longctx-llama-3.1-8b-a100-80gb-vllm0201-suiteD-interactive-c1-tpot-median": -0.095,
    "accelmark-longctx-llama-3.1-8b-a100-80gb-vllm0201-suiteD-online-r0.5-ttft-median": 0.185,
    "accelmark-longctx-llama-3.1-8b-a100-80gb-vllm0201-suiteD-online-r0.5-tpot-median": -0.174,
    "accelmark-longctx-llama-3.1-8b-a100-80gb-vllm0201-suiteD-online-r1-ttft-median": 0.545,
    "accelmark-longctx-llama-3.1-8b-a100-80gb-vllm0201-suiteD-online-r1-tpot-median": -0.175,
    "accelmark-longctx-llama-3.1-8b-a100-80gb-vllm0201-suiteD-online-r2-ttft-median": 0.534,
    "accelmark-longctx-llama-3.1-8b-a100-80gb-vllm0201-suiteD-online-r2-tpot-median": -0.174,
    "accelmark-longctx-llama-3.1-8b-a100-80gb-vllm0201-suiteD-sustained-c8-output": 0.304,
    "accelmark-longctx-llama-3.1-8b-rtx5090-vllm0191-suiteD-interactive-c1-ttft-median": 0.246,
    "accelmark-longctx-llama-3.1-8b-rtx5090-vllm0191-suiteD-interactive-c1-tpot-median": 0.080,
    "accelmark-longctx-llama-3.1-8b-rtx5090-vllm0191-suiteD-online-r0.5-ttft-median": 1.834,
    "accelmark-longctx-llama-3.1-8b-rtx5090-vllm0191-suiteD-online-r0.5-tpot-median": 0.439,
    "accelmark-longctx-llama-3.1-8b-rtx5090-vllm0191-suiteD-online-r1-ttft-median": 2.099,
    "accelmark-longctx-llama-3.1-8b-rtx5090-vllm0191-suiteD-online-r1-tpot-median": 0.437,
    "accelmark-longctx-llama-3.1-8b-rtx5090-vllm0191-suiteD-online-r2-ttft-median": 1.876,
    "accelmark-longctx-llama-3.1-8b-rtx5090-vllm0191-suiteD-online-r2-tpot-median": 0.439,
    "accelmark-longctx-llama-3.1-8b-rtx5090-vllm0191-suiteD-sustained-c8-output": -0.030,
}
HELD.update(LONGCTX)
# the online stages' TTFT p90 (serving_accelmark_p90.toml, issue 24 item 3: deploy's own TTFT-p90 target),
# the median records' twins, scored at first contact by 602cd1f (the same model): the overloaded stages within
# -15..+50 % on the A100; the RTX 5090's Llama-3-8B 5/s and Qwen2.5-0.5B 10/s p90s are 15 s and 28 s behind
# medians of 72 and 32 ms (a stall in the pooled runs, not a queue cardfit models: -99.6 %, -99.99 %)
P90 = {
    "accelmark-llama-3-8b-a100-80gb-vllm0201-suiteA-online-r5-ttft-p90": -0.252,
    "accelmark-llama-3-8b-a100-80gb-vllm0201-suiteA-online-r25-ttft-p90": -0.149,
    "accelmark-llama-3-8b-a100-80gb-vllm0201-suiteA-online-r100-ttft-p90": 0.156,
    "accelmark-llama-3-8b-rtx5090-vllm0191-suiteA-online-r5-ttft-p90": -0.996,
    "accelmark-llama-3-8b-rtx5090-vllm0191-suiteA-online-r25-ttft-p90": 0.155,
    "accelmark-llama-3-8b-rtx5090-vllm0191-suiteA-online-r100-ttft-p90": 0.230,
    "accelmark-qwen2.5-0.5b-a100-80gb-vllm0201-suiteF-online-r10-ttft-p90": -0.878,
    "accelmark-qwen2.5-0.5b-a100-80gb-vllm0201-suiteF-online-r40-ttft-p90": -0.902,
    "accelmark-qwen2.5-0.5b-rtx5090-vllm0191-suiteF-online-r10-ttft-p90": -1.000,
    "accelmark-qwen2.5-0.5b-rtx5090-vllm0191-suiteF-online-r40-ttft-p90": -0.972,
    "accelmark-longctx-llama-3.1-8b-a100-80gb-vllm0201-suiteD-online-r0.5-ttft-p90": 0.144,
    "accelmark-longctx-llama-3.1-8b-a100-80gb-vllm0201-suiteD-online-r1-ttft-p90": 0.487,
    "accelmark-longctx-llama-3.1-8b-a100-80gb-vllm0201-suiteD-online-r2-ttft-p90": 0.500,
    "accelmark-longctx-llama-3.1-8b-rtx5090-vllm0191-suiteD-online-r0.5-ttft-p90": 1.963,
    "accelmark-longctx-llama-3.1-8b-rtx5090-vllm0191-suiteD-online-r1-ttft-p90": 2.084,
    "accelmark-longctx-llama-3.1-8b-rtx5090-vllm0191-suiteD-online-r2-ttft-p90": 1.871,
}
HELD.update(P90)
# the records now state the engine's limits for AsyncLLMEngine's usage context (128 sequences, 2048 tokens a
# step: vLLM's SchedulerConfig defaults, `assumed`), which moves the Llama-3-8B stages (TPOT above capacity
# +70 % -> -11 % on the A100: the rows below; every other record as at first contact); no model change
TODAY = {
    **HELD,
    "accelmark-llama-3-8b-a100-80gb-vllm0201-suiteA-online-r5-ttft-median": 0.147,
    "accelmark-llama-3-8b-a100-80gb-vllm0201-suiteA-online-r25-ttft-median": 26.564,
    "accelmark-llama-3-8b-a100-80gb-vllm0201-suiteA-online-r25-tpot-median": -0.114,
    "accelmark-llama-3-8b-a100-80gb-vllm0201-suiteA-online-r100-ttft-median": 2.844,
    "accelmark-llama-3-8b-a100-80gb-vllm0201-suiteA-online-r100-tpot-median": -0.110,
    "accelmark-llama-3-8b-a100-80gb-vllm0201-suiteA-sustained-c8-output": 0.092,
    "accelmark-llama-3-8b-rtx5090-vllm0191-suiteA-interactive-c1-ttft-median": 0.697,
    "accelmark-llama-3-8b-rtx5090-vllm0191-suiteA-online-r5-ttft-median": -0.209,
    "accelmark-llama-3-8b-rtx5090-vllm0191-suiteA-online-r25-ttft-median": 4.341,
    "accelmark-llama-3-8b-rtx5090-vllm0191-suiteA-online-r25-tpot-median": -0.054,
    "accelmark-llama-3-8b-rtx5090-vllm0191-suiteA-online-r100-ttft-median": 1.651,
    "accelmark-llama-3-8b-rtx5090-vllm0191-suiteA-online-r100-tpot-median": -0.044,
    "accelmark-llama-3-8b-rtx5090-vllm0191-suiteA-sustained-c8-output": -0.031,
    "accelmark-qwen2.5-0.5b-rtx5090-vllm0191-suiteF-sustained-c32-output": 3.774,
}
# the sustained records ask the run they were (`requests`: the requests its post-warm-up samples completed)
# rather than the steady state first contact asked: a finite loop's ramp and drain, at 28.6K-token prompts
# 338 requests on the RTX 5090 (-3.0 % -> -14.3 %)
TODAY.update({
    "accelmark-longctx-llama-3.1-8b-a100-80gb-vllm0201-suiteD-sustained-c8-output": 0.299,
    "accelmark-longctx-llama-3.1-8b-rtx5090-vllm0191-suiteD-sustained-c8-output": -0.143,
})

# the online stages' TTFT p90 over the prompts their exponential law draws (issue 24 items 1 and 3,
# h-p90prompt: core/serving.py prompt_classes, the stage reading its length law): the p90 request's prompt
# ~2.3x the mean; the stages above capacity +6..+9 ms on seconds (classes below the mean timed as the mean)
TODAY.update({
    "accelmark-llama-3-8b-a100-80gb-vllm0201-suiteA-online-r5-ttft-p90": 0.106,
    "accelmark-llama-3-8b-a100-80gb-vllm0201-suiteA-online-r25-ttft-p90": -0.148,
    "accelmark-llama-3-8b-a100-80gb-vllm0201-suiteA-online-r100-ttft-p90": 0.157,
    "accelmark-llama-3-8b-rtx5090-vllm0191-suiteA-online-r5-ttft-p90": -0.994,
    "accelmark-llama-3-8b-rtx5090-vllm0191-suiteA-online-r25-ttft-p90": 0.156,
    "accelmark-llama-3-8b-rtx5090-vllm0191-suiteA-online-r100-ttft-p90": 0.231,
    "accelmark-qwen2.5-0.5b-a100-80gb-vllm0201-suiteF-online-r10-ttft-p90": -0.845,
    "accelmark-qwen2.5-0.5b-a100-80gb-vllm0201-suiteF-online-r40-ttft-p90": 0.329,
    "accelmark-qwen2.5-0.5b-rtx5090-vllm0191-suiteF-online-r10-ttft-p90": -1.000,
    "accelmark-qwen2.5-0.5b-rtx5090-vllm0191-suiteF-online-r40-ttft-p90": -0.644,
})


def test_every_record_has_a_held_error():
    assert sorted(HELD) == sorted(r["id"] for r in RECORDS) == sorted(TODAY)


@pytest.mark.parametrize("r", RECORDS, ids=[r["id"] for r in RECORDS])
def test_first_contact_row_is_the_code_before_the_source(r):
    check_first_contact(r, FIRST, r["file"], CODE_AT[r["file"]], HELD, kind="serving")


@pytest.mark.parametrize("r", RECORDS, ids=[r["id"] for r in RECORDS])
def test_record_scores_within_its_held_error(r):
    check_today(r, TODAY)


def test_the_a100_runs_are_on_the_path_users_get_and_the_rtx5090_runs_are_older():
    """vLLM 0.20.1 has every feature the current release's figures for these questions depend on; 0.19.1 lacks
    the CUDA graph pool inside the memory budget (0.20, data/releases.toml `graphs_in_budget`)."""
    paths = {r["id"]: path_of(r) for r in RECORDS}
    assert all(p == "user" for i, p in paths.items() if "-a100-80gb-vllm0201-" in i)
    assert all(p == "older" for i, p in paths.items() if "-rtx5090-vllm0191-" in i)
    assert len(paths) == 66  # 32 + 18 + 16 p90 twins


def test_the_engine_limits_are_the_async_engines_defaults():
    """The runners pass neither limit to AsyncLLMEngine, whose usage context (ENGINE_CONTEXT) vLLM's default
    tables do not list: SchedulerConfig's 128 sequences and 2,048 tokens a step, stated as assumed."""
    for r in RECORDS:
        st = r["settings"]
        assert (st["max_num_seqs"], st["max_num_batched_tokens"]) == (128, 2048), r["id"]
        assert {"max_num_seqs", "max_num_batched_tokens"} <= set(r["assumed"]), r["id"]

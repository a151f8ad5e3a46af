"""vLLM serving runs of two new publishers at current releases (issue 24 items 3-4): ai.wmx.dev's raw-vllm
concurrency sweep (Qwen2.5-0.5B on one L4, vLLM 0.23.0; data/validation/serving_wmx_l4.toml) and the
kvcached project's vanilla-vLLM rows on one H100 (Qwen3-0.6B, vLLM 0.19.0; serving_kvcached_h100.toml).
Every record was scored at first contact by the code before the sources were added (data/first_contact.toml,
never edited: HELD), and today's error of each is held so that a change of the model shows here, record by
record (docs/VALIDATION.md "Two new publishers of current vLLM serving runs")."""

from __future__ import annotations

import pytest

from cardfit.validation.validate import all_records, path_of

from .helpers import check_first_contact, check_today, first_contact_rows

FILES = ("serving_wmx_l4.toml", "serving_kvcached_h100.toml")
RECORDS = [r for r in all_records() if r.get("file") in FILES]
FIRST = first_contact_rows()
# the commit whose code scored both files at first contact (scripts/first_contact.py --new, 2026-12-07)
CODE_AT = "ec473efcfc70b378b24f67bf7c7407cfbb58b92c"

# predicted / measured - 1 at first contact, per record (ec473ef). Two small models whose served figures
# the engine's front end and host set, not the GPU step cardfit times: TTFT -81..-92 % at 27-135 ms measured
# (L4), output tok/s +13..+61 % (the unsafe side), the H100 burst's throughput +84 % (docs/VALIDATION.md)
HELD = {
    "wmx-qwen2.5-0.5b-l4-vllm0230-256x128-c1-output": 0.247,
    "wmx-qwen2.5-0.5b-l4-vllm0230-256x128-c1-ttft-median": -0.824,
    "wmx-qwen2.5-0.5b-l4-vllm0230-256x128-c1-itl-median": -0.065,
    "wmx-qwen2.5-0.5b-l4-vllm0230-256x128-c2-output": 0.134,
    "wmx-qwen2.5-0.5b-l4-vllm0230-256x128-c2-ttft-median": -0.810,
    "wmx-qwen2.5-0.5b-l4-vllm0230-256x128-c2-itl-median": -0.080,
    "wmx-qwen2.5-0.5b-l4-vllm0230-256x128-c4-output": 0.183,
    "wmx-qwen2.5-0.5b-l4-vllm0230-256x128-c4-ttft-median": -0.831,
    "wmx-qwen2.5-0.5b-l4-vllm0230-256x128-c4-itl-median": -0.092,
    "wmx-qwen2.5-0.5b-l4-vllm0230-256x128-c8-output": 0.242,
    "wmx-qwen2.5-0.5b-l4-vllm0230-256x128-c8-ttft-median": -0.848,
    "wmx-qwen2.5-0.5b-l4-vllm0230-256x128-c8-itl-median": -0.114,
    "wmx-qwen2.5-0.5b-l4-vllm0230-256x128-c16-output": 0.395,
    "wmx-qwen2.5-0.5b-l4-vllm0230-256x128-c16-ttft-median": -0.903,
    "wmx-qwen2.5-0.5b-l4-vllm0230-256x128-c16-itl-median": -0.168,
    "wmx-qwen2.5-0.5b-l4-vllm0230-256x128-c32-output": 0.606,
    "wmx-qwen2.5-0.5b-l4-vllm0230-256x128-c32-ttft-median": -0.918,
    "wmx-qwen2.5-0.5b-l4-vllm0230-256x128-c32-itl-median": -0.263,
    "kvcached-qwen3-0.6b-h100-vllm0190-512x128-rinf-request-throughput": 0.837,
    "kvcached-qwen3-0.6b-h100-vllm0190-512x128-rinf-ttft": -0.772,
    "kvcached-qwen3-0.6b-h100-vllm0190-512x128-rinf-tpot": 2.063,
    "kvcached-qwen3-0.6b-h100-vllm0190-512x128-r16-ttft": -0.370,
    "kvcached-qwen3-0.6b-h100-vllm0190-512x128-r16-tpot": -0.307,
}
# no model change since; the L4 sweep now asks the 1,000 prompts of vllm bench serve's default --num-prompts
# (assumed; the page states none): a finite loop's ramp and drain, 1-2 points off the steady state at 16-32
TODAY = {**HELD, "wmx-qwen2.5-0.5b-l4-vllm0230-256x128-c16-output": 0.393,
         "wmx-qwen2.5-0.5b-l4-vllm0230-256x128-c32-output": 0.594}


def test_every_record_has_a_held_error():
    assert sorted(HELD) == sorted(r["id"] for r in RECORDS)


@pytest.mark.parametrize("r", RECORDS, ids=[r["id"] for r in RECORDS])
def test_first_contact_row_is_the_code_before_the_source(r):
    check_first_contact(r, FIRST, r["file"], CODE_AT, HELD, kind="serving")


@pytest.mark.parametrize("r", RECORDS, ids=[r["id"] for r in RECORDS])
def test_record_scores_within_its_held_error(r):
    check_today(r, TODAY)


def test_the_l4_sweep_is_on_the_path_users_get_and_the_h100_rows_are_older():
    """vLLM 0.23.0 on an L4 lacks only features scoped to other cards and the 0.34 KV sizing, none of which
    moves these figures (validation/validate.py SCOPED_FEATURES); 0.19.0 lacks the graph pool inside the
    budget (0.20), which is not scoped."""
    paths = {r["id"]: path_of(r) for r in RECORDS}
    assert all(p == "user" for i, p in paths.items() if i.startswith("wmx-"))
    assert all(p == "older" for i, p in paths.items() if i.startswith("kvcached-"))

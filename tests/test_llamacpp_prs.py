"""llama.cpp decode from the master column of ggml-org/llama.cpp pull-request tables
(data/validation/speed_llamacpp_prs.toml, issue 24 item 6): every record was scored at first contact by
the code before the source was added (data/first_contact.toml, never edited afterwards: HELD), and today's
error of each is held (TODAY) so that a change of the llama.cpp decode model shows here, record by record."""

from __future__ import annotations

import pytest

from cardfit.validation.validate import all_records

from .helpers import check_first_contact, check_today, first_contact_rows

FILE = "speed_llamacpp_prs.toml"
RECORDS = [r for r in all_records() if r.get("file") == FILE]
FIRST = first_contact_rows()
# the commit whose code scored the file at first contact (scripts/first_contact.py --new, 2026-12-07)
CODE_AT = "3d870151ef4cc5b08ce4f0c4729cae1f99cdfdbe"

# predicted / measured - 1 at first contact, per record (3d87015). gpt-oss-20b's two RTX 4090
# masters eleven days apart (PR #16649: 167 tok/s at tg128, #16834: 186) differ by 11 % on one card: build
# churn, the band every llama.cpp figure carries. Qwen3-30B-A3B's 48 layers are charged the dense
# per-layer time (111 us): too slow by 16-17 % (docs/VALIDATION.md "llama.cpp single-stream decode").
HELD = {
    "pr16649-4090-gptoss20b-mxfp4moe-tg32": 0.117,
    "pr16649-4090-gptoss20b-mxfp4moe-tg64": 0.131,
    "pr16649-4090-gptoss20b-mxfp4moe-tg128": 0.143,
    "pr16834-4090-gptoss20b-mxfp4moe-tg128": 0.026,
    "pr16834-4090-gptoss20b-mxfp4moe-tg256": 0.033,
    "pr16834-4090-gptoss20b-mxfp4moe-tg512": 0.035,
    "pr16834-4090-qwen3-30b-a3b-q4_0-tg128": -0.166,
    "pr16834-4090-qwen3-30b-a3b-q4_0-tg256": -0.172,
    "pr16834-4090-qwen3-30b-a3b-q4_0-tg512": -0.156,
    "pr26284-7900xtx-llama3-8b-q4_k_m-tg64": 0.042,
    "pr26284-7900xtx-llama3-8b-q4_k_m-tg64-d4096": 0.043,
    "pr26284-7900xtx-llama3-8b-q5_k_m-tg64": -0.003,
    "pr4719-3090-llama2-7b-q4_0-tg128": -0.099,
    "pr5434-3090ti-llama2-7b-q4_0-tg1": -0.032,
}


def test_every_record_has_a_held_error():
    assert sorted(HELD) == sorted(r["id"] for r in RECORDS)


# predicted / measured - 1 today, per record: in sample since the source joined the llama.cpp decode fits
# (runtimes.toml refitted 2026-12-07: decode_overhead_us_per_layer 111.2 -> 117.8 us, the old-build per-layer
# time 110.3 -> 93.8; then 117.8 -> 111.2 us with llama.cpp #26663's HIP rows), so a change of the llama.cpp
# decode model shows here, record by record
TODAY = {
    "pr16649-4090-gptoss20b-mxfp4moe-tg32": 0.117,
    "pr16649-4090-gptoss20b-mxfp4moe-tg64": 0.131,
    "pr16649-4090-gptoss20b-mxfp4moe-tg128": 0.143,
    "pr16834-4090-gptoss20b-mxfp4moe-tg128": 0.026,
    "pr16834-4090-gptoss20b-mxfp4moe-tg256": 0.033,
    "pr16834-4090-gptoss20b-mxfp4moe-tg512": 0.035,
    "pr16834-4090-qwen3-30b-a3b-q4_0-tg128": -0.166,
    "pr16834-4090-qwen3-30b-a3b-q4_0-tg256": -0.172,
    "pr16834-4090-qwen3-30b-a3b-q4_0-tg512": -0.156,
    "pr26284-7900xtx-llama3-8b-q4_k_m-tg64": 0.042,
    "pr26284-7900xtx-llama3-8b-q4_k_m-tg64-d4096": 0.043,
    "pr26284-7900xtx-llama3-8b-q5_k_m-tg64": -0.003,
    "pr4719-3090-llama2-7b-q4_0-tg128": -0.037,
    "pr5434-3090ti-llama2-7b-q4_0-tg1": 0.038,
}


@pytest.mark.parametrize("r", RECORDS, ids=[r["id"] for r in RECORDS])
def test_first_contact_row_is_the_code_before_the_source(r):
    """The row scripts/first_contact.py wrote: the record's measured value, scored by 3d87015's code (the
    commit before the file), not by a later tree."""
    check_first_contact(r, FIRST, FILE, CODE_AT, HELD)


@pytest.mark.parametrize("r", RECORDS, ids=[r["id"] for r in RECORDS])
def test_record_scores_within_its_held_error(r):
    check_today(r, TODAY)


def test_master_column_is_a_decode_step_not_a_prompt_test():
    """Only llama-bench tg rows: a pp row at microbatch 1 skips the output projection on all but its last
    token (llama-bench's prompt batch asks the last token's logits only), a different question."""
    for r in RECORDS:
        assert r["kind"] == "decode" and str(r["settings"]["test"]).startswith("tg"), r["id"]
        assert "master" in r["settings"]["build"] or "master" in r["excerpt"], r["id"]

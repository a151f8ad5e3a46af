"""Attention data parallel + expert parallel from a publisher beside aiconfigurator, InferenceX, dstack
and GPUStack (issue 26): the SGLang project's own pull request #9359, gpt-oss-120b on 4x B200 at DP 4
attention and EP 4 experts (data/validation/serving_sglang_pr_dp_ep.toml). The record was scored at first
contact by the code before the source was added (data/first_contact.toml, never edited afterwards) and that
figure is held here; the record's question asks for the layout, the load and the engine limits its launch
line states (docs/VALIDATION.md "DP/EP from a fifth publisher")."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from cardfit.validation.features import record_features
from cardfit.validation.serving import record_input
from cardfit.validation.validate import all_records

FILE = "serving_sglang_pr_dp_ep.toml"
DATA = Path(__file__).resolve().parents[1] / "src" / "cardfit" / "data"
RECORDS = [r for r in all_records() if r.get("file") == FILE]
FIRST = {s["id"]: s
         for s in tomllib.loads((DATA / "first_contact.toml").read_text(encoding="utf-8"))["score"]}
# the commit whose code scored the file at first contact (scripts/first_contact.py --new, 2026-12-07)
CODE_AT = "9f0effb62a5ac1b9484b6466caa6bf4cada83c6a"
# record id -> predicted / measured - 1 at first contact
HELD_FIRST = {"sglang-pr9359-gpt-oss-120b-b200x4-dp4-ep4-1024x2048-c2560-output": 0.7250}


def test_every_record_has_its_first_contact_row():
    assert {r["id"] for r in RECORDS} == set(HELD_FIRST)
    for r in RECORDS:
        s = FIRST.get(r["id"])
        assert s is not None, f"{r['id']}: no first-contact row (scripts/first_contact.py --new)"
        assert s["file"] == FILE and s["kind"] == "serving" and s["code_at"] == CODE_AT, r["id"]
        assert s["measured"] == pytest.approx(float(r["measured"])), r["id"]
        assert s["predicted"] / s["measured"] - 1 == pytest.approx(HELD_FIRST[r["id"]], abs=5e-5)


def test_the_question_asks_the_layout_and_load_the_launch_line_states():
    """--tp 4 --dp 4 --enable-dp-attention --ep 4 on 4 cards: deploy --tp 4 --attention-dp 4 --expert-parallel
    4 (a dp_ep record); --max-running-requests 2560 the whole server's (SGLang gives each attention-DP rank
    640: data/releases.toml dp_attention_request_split); bench_serving's 12,800 prompts of exactly 1,024 +
    2,048 tokens (the totals the output prints) at --max-concurrency 2560."""
    (r,) = RECORDS
    inp, tp, pp = record_input(r)
    assert (tp, pp, inp.attention_dp, inp.expert_parallel) == (4, 1, 4, 4)
    assert (inp.max_num_seqs, inp.cuda_graph_max_bs, inp.gpu_memory_utilization) == (2560, 640, 0.9)
    assert (inp.users, inp.requests, inp.random_lengths) == (2560, 12800, False)
    assert record_features(r) == ("dp_ep",)
    ex = r["excerpt"]
    for flag in ("--tp 4", "--dp 4", "--ep 4", "--enable-dp-attention", "--max-running-requests 2560",
                 "--cuda-graph-max-bs 640", "--mem-fraction-static 0.9", "--num-prompt 12800",
                 "--random-input 1024", "--random-output 2048", "--random-range-ratio 1",
                 "--max-concurrency 2560", "4x B200"):
        assert flag in ex, flag
    totals = {k: float(v) for k, v in re.findall(r"^(Total input tokens|Total generated tokens):\s+(\d+)", ex,
                                                 re.M)}
    assert totals == {"Total input tokens": 12800 * 1024, "Total generated tokens": 12800 * 2048}
    measured = float(re.search(r"Output token throughput \(tok/s\):\s+([\d.]+)", ex)[1])
    assert measured == r["measured"]
    # the printed rate is the generated tokens over the benchmark's duration
    duration = float(re.search(r"Benchmark duration \(s\):\s+([\d.]+)", ex)[1])
    assert totals["Total generated tokens"] / duration == pytest.approx(measured, rel=1e-3)

"""Disaggregated prefill/decode from publishers beside NVIDIA's aiconfigurator sample (issue 26): the Mooncake
team's vLLM xPyD runs on A10 (data/validation/serving_mooncake_pd_a10.toml) and dstack's SGLang 3P1D / 2P2D /
1P3D runs of gpt-oss-120b on 8x H200 (serving_dstack_pd_h200.toml).
Every record was scored at first contact by the code before the sources were added (data/first_contact.toml,
never edited afterwards) and that figure is held here; the selection each file's header states is checked
against the quoted rows, and each record's question asks for the P/D pools its source ran (docs/VALIDATION.md
"P/D from a second and third publisher")."""

from __future__ import annotations

import statistics
import tomllib
from pathlib import Path

import pytest

from cardfit.validation.features import record_features
from cardfit.validation.serving import disaggregated_pools, record_input
from cardfit.validation.validate import all_records

FILES = ("serving_mooncake_pd_a10.toml", "serving_dstack_pd_h200.toml")
DATA = Path(__file__).resolve().parents[1] / "src" / "cardfit" / "data"
RECORDS = [r for r in all_records() if r.get("file") in FILES]
FIRST = {s["id"]: s
         for s in tomllib.loads((DATA / "first_contact.toml").read_text(encoding="utf-8"))["score"]}
# the commit whose code scored each file at first contact (scripts/first_contact.py --new, 2026-12-07): main's
# e59c9be, and for dstack's file the commit that added the Mooncake file (data only: the same code)
CODE_AT = {"serving_mooncake_pd_a10.toml": "e59c9bef703d8dee7fd13251368d384a54c5aa9d",
           "serving_dstack_pd_h200.toml": "c755f93399ca75c1c20a1e9659932769f58a6c58"}
# (records, median |predicted / measured - 1|) per file at first contact
HELD_FIRST = {"serving_mooncake_pd_a10.toml": (26, 0.4180),
              "serving_dstack_pd_h200.toml": (54, 0.2915)}


def test_every_record_has_its_first_contact_row():
    assert {r["file"] for r in RECORDS} == set(FILES)
    for r in RECORDS:
        s = FIRST.get(r["id"])
        assert s is not None, f"{r['id']}: no first-contact row (scripts/first_contact.py --new)"
        assert s["file"] == r["file"] and s["kind"] == "serving", r["id"]
        assert s["code_at"] == CODE_AT[r["file"]], r["id"]
        assert s["measured"] == pytest.approx(float(r["measured"])), r["id"]
        assert s.get("predicted") is not None, f"{r['id']}: not predicted at first contact"


@pytest.mark.parametrize("file", FILES)
def test_first_contact_figure_is_held(file):
    rows = [FIRST[r["id"]] for r in RECORDS if r["file"] == file]
    errors = [s["predicted"] / s["measured"] - 1 for s in rows]
    n, median = HELD_FIRST[file]
    assert len(errors) == n
    assert statistics.median(abs(e) for e in errors) == pytest.approx(median, abs=5e-5)


def test_every_question_pins_the_pools_the_source_ran():
    """Each record is asked as deploy --prefill-workers X --decode-workers Y with each worker's TP, on as many
    cards as the workers hold, and counts for the disaggregated feature (no attention groups: not dp_ep)."""
    for r in RECORDS:
        st = r["settings"]
        pools = disaggregated_pools(st)
        assert pools["prefill_workers"] >= 1 and pools["decode_workers"] >= 1, r["id"]
        assert r["gpus"] == sum(pools[f"{p}_workers"] * pools[f"{p}_tp"] for p in ("prefill", "decode"))
        inp = record_input(r)[0]
        assert (inp.prefill_workers, inp.decode_workers) == (st["prefill_workers"], st["decode_workers"])
        assert record_features(r) == ("disaggregated",), r["id"]
        assert "/blob/" in r["source"] and len(r["source"].split("/blob/")[1].split("/")[0]) == 40, r["id"]


def test_mooncake_selection_keeps_the_runs_that_kept_up_with_their_rate():
    """v0.2's rows at 2 RDMA NICs and v1's MooncakeStore (RDMA) rows, each run whose request throughput is
    within 5 % of its offered qps; the qps 8 run (7.36 req/s) and the 4,096- and 8,192-token runs (1.70, 0.81)
    are left out: an overloaded open loop has no steady state."""
    mine = [r for r in RECORDS if r["file"] == FILES[0]]
    assert len(mine) == 26
    v02 = [r for r in mine if "-v02-" in r["id"]]
    assert len(v02) == 16 and all("| 2            |" in r["excerpt"] for r in v02)
    for r in v02:
        row = [c.strip() for c in r["excerpt"].splitlines()[-1].strip("|").split("|")]
        assert abs(float(row[6]) / r["request_rate"] - 1) <= 0.05, r["id"]
        assert r["input_tokens"] == round(int(row[4]) / int(row[2])) and r["output_tokens"] == 6
    assert not [r for r in v02 if r["request_rate"] == 8 or r["input_tokens"] > 3000]
    v1 = [r for r in mine if "-v1-" in r["id"]]
    assert len(v1) == 10 and all("MooncakeStore (RDMA)" in r["excerpt"].splitlines()[-1] for r in v1)


def test_dstack_selection_is_the_written_up_grid():
    """The three ratios the README launches (every worker TP 2) at the blog's three profiles and the
    README's three concurrencies: 27 runs, a TTFT and a TPOT record each; a run's mean answer is its
    total_output_tokens / 500 (no --ignore-eos)."""
    mine = [r for r in RECORDS if r["file"] == FILES[1]]
    assert len(mine) == 54
    grid = {(r["settings"]["prefill_workers"], r["settings"]["decode_workers"], r["concurrency"],
             r["input_tokens"], r["settings"]["max_output_tokens"]) for r in mine}
    assert {g[:2] for g in grid} == {(3, 1), (2, 2), (1, 3)} and {g[2] for g in grid} == {32, 64, 128}
    assert {g[3:] for g in grid} == {(2046, 128), (128, 2048), (2046, 2048)} and len(grid) == 27
    for r in mine:
        assert r["runtime"] == "sglang" and r["gpu"] == "H200 SXM" and r["gpus"] == 8, r["id"]
        assert r["requests"] == 500 and not r["fixed_lengths"] and r["assumed"] == ["version"], r["id"]
        assert r["output_tokens"] <= r["settings"]["max_output_tokens"], r["id"]

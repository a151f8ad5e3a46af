"""Consumer and workstation cards under concurrency (issue 24 item 4): CloudRift's vLLM / SGLang runs on
RTX 4090, RTX 5090 and RTX PRO 6000 (data/validation/serving_cloudrift_rtx.toml,
serving_cloudrift_rtx5090_sweep.toml).
Every record was scored at first contact by the code before the sources were added (data/first_contact.toml,
never edited afterwards), and the errors that name a mechanism are held record by record, so that a change of
the model (or a refit of its constants: scripts/fit_constants.py) shows here (docs/VALIDATION.md "Consumer
cards under concurrency")."""

from __future__ import annotations

import statistics
import tomllib
from pathlib import Path

import pytest

from cardfit.validation.validate import all_records, predict

FILES = ("serving_cloudrift_rtx.toml", "serving_cloudrift_rtx5090_sweep.toml")
DATA = Path(__file__).resolve().parents[1] / "src" / "cardfit" / "data"
RECORDS = [r for r in all_records() if r.get("file") in FILES]
BY_ID = {r["id"]: r for r in RECORDS}
FIRST = {s["id"]: s
         for s in tomllib.loads((DATA / "first_contact.toml").read_text(encoding="utf-8"))["score"]}
# the commit whose code scored each file at first contact (scripts/first_contact.py --new, 2026-12-07): main's
# c1f87be, and for the sweep the commit that added the first file (data only: the same code)
CODE_AT = {"serving_cloudrift_rtx.toml": "c1f87bebd36fa7026360c775019d9c3e48723276",
           "serving_cloudrift_rtx5090_sweep.toml": "8f8990250e061f67153d684930faaef9e82d7828"}
# (records, median |predicted / measured - 1|) per file at first contact
HELD_FIRST = {"serving_cloudrift_rtx.toml": (24, 0.2609),
              "serving_cloudrift_rtx5090_sweep.toml": (44, 0.4771)}


def test_every_record_has_its_first_contact_row():
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


def test_selection_is_one_server_a_run_with_its_release_assumed():
    """Only runs of one engine server (CloudRift's NGINX-balanced replicas are left out: cardfit times one
    replica), each record's link pinned to a commit, the release the image tag stood for listed as assumed."""
    for r in RECORDS:
        assert r["runtime"] in ("vllm", "sglang") and r["load"] == "closed", r["id"]
        assert "/blob/" in r["source"] and len(r["source"].split("/blob/")[1].split("/")[0]) == 40, r["id"]
        assert r["assumed"] == ["version"], r["id"]
        assert r["excerpt"].count("serve") >= 1 and "vllm_1" not in r["excerpt"], r["id"]


# predicted / measured - 1 today for the records that name a mechanism (docs/VALIDATION.md "Consumer cards
# under concurrency"), at the refit of 2026-12-07 (these records in; vLLM's pool stepped through the whole run
# where it binds, so the 400-user steps carry the preemption stalls the engine had and the MoE step's excess
# shows: TPOT -3..-5 % at first contact -> +14..+19 %, the safe side).
TODAY = {
    # RTX 5090, Qwen3-Coder-30B-A3B AWQ, 4 users: decode charged the MoE layer's fitted fixed time (82 us a
    # layer on 48 layers), which vLLM's fused-MoE kernel does not spend; too slow (the safe side)
    # (0.477 -> 0.251 with the MoE refit of 2026-12-08: moe_overhead_us_per_layer 70.5 -> 21.1, its fixed time
    # nearer what the fused kernel spends)
    "cloudrift-deplodock-qwen3-coder-30b-a3b-rtx5090-vllm-awq-4000x4000-c4-vs-tpot": 0.251,
    # the same card and model at 400 users (every expert touched): too slow by the MoE step (safe side)
    # (0.143 -> 0.166 with the refit: expert_efficiency 0.697 -> 0.544)
    "cloudrift-qwen3-coder-30b-a3b-rtx5090-vllm-awq-1000x1000-c400-tpot": 0.166,
    # (0.192 -> 0.190 with the engine's memory sized at its started sequence cap: services/deploy.py timed)
    # (0.190 -> 0.280 with the refit)
    "cloudrift-qwen3-coder-30b-a3b-rtx4090-vllm-awq-1000x1000-c400-tpot": 0.280,
    # SGLang's moe_wna16 AWQ MoE kernel on a GeForce Blackwell card: 2.7x slower than vLLM's on the same
    # run, which cardfit does not know (the unsafe side); +82.9 % -> +81.8 % with SGLang's step budget by
    # card (2,048 tokens on a 32 GB card: runtimes/sglang.py default_chunk)
    # (+81.8 % -> +114.2 % with the refit: a smaller MoE fixed time makes the 4-user step shorter still; the
    # kernel's own slowness is the gap, unmodelled, and it stays on the unsafe side)
    "cloudrift-deplodock-qwen3-coder-30b-a3b-rtx5090-sglang-awq-4000x4000-c4-vs-output": 1.142,
    # a dense 70B W4A16 on one RTX PRO 6000 at 400 users: throughput over-predicted (the unsafe side)
    "cloudrift-llama-3.3-70b-rtxpro6000-vllm-awq-1000x1000-c400-output": 0.350,
}


@pytest.mark.parametrize("rid", sorted(TODAY))
def test_mechanism_records_score_as_held(rid):
    o = predict(BY_ID[rid])
    assert o.predicted is not None, o.skipped
    assert o.predicted / float(BY_ID[rid]["measured"]) - 1 == pytest.approx(TODAY[rid], abs=0.0015)

"""deploy --cards N: exactly N cards of a kind. With a load, the best layout on that hardware; without one,
the most users it serves within the targets, as `best` (issue 26 item 6)."""

from __future__ import annotations

import json

import pytest

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
BASE = ("deploy", MODEL, "--runtime", "vllm", "--input-tokens", "1000", "--output-tokens", "300")


def _deployments(report: dict) -> list[dict]:
    return [d for d in [report["best"], *report["pareto"]] if d]


@pytest.mark.parametrize("cards,gpus", [(4, ("H100", "A100 80GB")), (2, ("H100",)), (8, ("L40S",))])
def test_with_a_load_every_layout_fills_exactly_the_cards(run_json, cards: int,
                                                          gpus: tuple[str, ...]) -> None:
    """Every deployment offered takes exactly N cards (TP x PP x replicas), even where fewer would meet the
    targets (2 users need one H100: --cards 2 answers for two)."""
    args = [a for g in gpus for a in ("--gpu", g)]
    r = run_json(*BASE, "--users", "2", "--cards", str(cards), *args)
    assert r["best"] is not None and r["workload"]["cards"] == cards
    for d in _deployments(r):
        assert d["count"] == cards == d["tp"] * d["pp"] * d["replicas"]
        assert d["gpu"].split()[0] in " ".join(gpus)


def test_without_a_load_best_is_the_most_users_the_cards_serve(run_json, run_cli) -> None:
    """The answer's user count meets the targets on the same cards and one user more does not: checked by
    asking deploy again with each as the load."""
    gpu = ("--gpu", "L40S", "--tpot-ms", "40")
    r = run_json(*BASE, "--cards", "2", *gpu)
    users = r["workload"]["users"]
    assert r["workload"]["cards_found_users"] and users >= 1
    best = r["best"]
    assert best["count"] == 2 and best["meets_targets"]
    assert best["aggregate_tokens_per_s"] > 0
    again = run_json(*BASE, "--cards", "2", *gpu, "--users", f"{users:g}")
    assert again["best"] is not None
    code, out, _ = run_cli(*BASE, "--cards", "2", *gpu, "--users", f"{users + 1:g}", "--json")
    assert code == 3 and json.loads(out)["best"] is None


# (arguments, target of `failing`, its text, why the case is tricky)
FAILS = [
    (("--cards", "1", "--gpu", "RTX 3060 12GB"), "cards", "the smallest set that holds",
     "16 GB of BF16 weights do not fit one 12 GB card"),
    (("--cards", "3", "--gpu", "B200"), "cards", "evenly into replicas", "B200 rents in pairs"),
]


@pytest.mark.parametrize("args,target,text,why", FAILS, ids=[f[3] for f in FAILS])
def test_no_answer_on_those_cards_says_why(run_cli, args: tuple[str, ...], target: str, text: str,
                                           why: str) -> None:
    code, out, err = run_cli(*BASE, *args, "--json")
    assert code == 3, err
    r = json.loads(out)
    assert r["best"] is None and r["failing"]["target"] == target and text in r["failing"]["text"], why


@pytest.mark.parametrize("args,message", [
    (("--cards", "2", "--max-cards", "4"), "not both"),
    ((), "give the load"),
    (("--cards", "0"), "cards"),
])
def test_bad_input_is_one_line(run_cli, args: tuple[str, ...], message: str) -> None:
    code, out, err = run_cli(*BASE, *args)
    assert code == 2 and not out and err.startswith("Error: ") and message in err
    assert len(err.strip().splitlines()) == 1

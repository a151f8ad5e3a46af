"""stack_memory records (data/validation/memory_stack.toml): one card of a split or shared machine, the
record's stack file scored through `cardfit stack` (validation/validate.py _stack_memory), as a user asks."""

from __future__ import annotations

import tomllib

import pytest

import cardfit
from cardfit.catalog.runtimes import default_runtimes
from cardfit.validation.validate import PREDICTORS, all_records, predict

STACK = [r for r in all_records() if r["kind"] == "stack_memory"]
MIB = 2**20


def test_stack_records_exist_and_are_scored_by_the_stack():
    assert len(STACK) >= 2
    assert PREDICTORS["stack_memory"].__name__ == "_stack_memory"


@pytest.mark.parametrize("r", STACK, ids=[r["id"] for r in STACK])
def test_stack_record_is_a_stack_file_and_a_card(r):
    spec = tomllib.loads(r["stack"])  # the file a user would write: cardfit stack reads it as it is
    assert 0 <= r["device"] < len(spec["machine"]["gpu"])
    assert any(m["model"] == r["model"] for m in spec["model"])
    assert r["settings"]["measure"] in ("buffers", "device")


@pytest.mark.parametrize("r", STACK, ids=[r["id"] for r in STACK])
def test_stack_record_scores_within_its_held_error(r):
    """Held at today's level: both Nixiesearch cards within 0.5 % (first contact -56 % and -58 %: an even
    layer split, flash attention on, one copy of the KQ mask; data/first_contact.toml)."""
    o = predict(r)
    assert not o.skipped, o.skipped
    assert o.how.startswith("stack: card"), o.how
    assert abs(o.error) <= 0.01, o


@pytest.mark.parametrize("r", STACK, ids=[r["id"] for r in STACK])
def test_buffers_are_the_stack_card_less_its_cuda_context(r):
    """`buffers` (a llama.cpp log's device buffers) leave out the CUDA context the stack counts per
    server."""
    card = cardfit.stack(text=r["stack"])["devices"][r["device"]]
    context = default_runtimes().get(r["runtime"]).context_bytes
    assert predict(r).predicted == sum(e["bytes"] for e in card["entries"]) - context


def _with(r: dict, **changes) -> dict:
    return {**r, **changes}


@pytest.mark.parametrize("change, reason", [
    ({"stack": None}, "names its stack file"),
    ({"device": 7}, "device 7: the stack has 2 cards"),
    ({"settings": {"measure": "nvml"}}, "measure 'nvml' is not one of"),
    ({"model": "llama-3.1-8b"}, "the stack puts no 'llama-3.1-8b' on card"),
])
def test_a_record_the_stack_cannot_answer_is_skipped_with_its_reason(change, reason):
    o = predict(_with(STACK[0], **change))
    assert o.predicted is None and reason in (o.skipped or ""), o.skipped


def test_a_stack_file_the_service_refuses_is_skipped_with_its_error():
    o = predict(_with(STACK[0], stack=STACK[0]["stack"].replace("RTX 4090", "RTX 4900")))
    assert o.predicted is None and o.skipped.startswith("stack: ") and "RTX 4900" in o.skipped

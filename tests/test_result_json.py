"""Result.to_json, made once per class as source with a line per field (services/table.py _converter) after
the class's first HOT conversions and a loop over the fields before (_fields_json), gives the keys and values
the loop over the fields gave: held against that loop (written out below) on real answers of the commands
whose results leave keys out (omit_none) or put a nested result's keys in place (flatten), each way on its
own, and on records of every shape hypothesis draws."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cardfit.catalog.records import record
from cardfit.services import table
from cardfit.services.table import BY_NAME, Result


def _loop_to_json(r: Any) -> dict[str, Any]:
    """The field loop Result.to_json ran before its converters (to compare against, recursively)."""
    out: dict[str, Any] = {}
    for f in fields(r):
        v = getattr(r, f.name)
        if f.name in r.flatten:
            if v is not None:
                out.update(_loop_to_json(v))
        elif not (v is None and f.name in r.omit_none):
            out[f.name] = _loop_plain(v)
    return out


def _loop_plain(v: Any) -> Any:
    if isinstance(v, Result):
        return _loop_to_json(v)
    if isinstance(v, tuple | list):
        return [_loop_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _loop_plain(x) for k, x in v.items()}
    return v


ANSWERS = [
    ("plan", {"model": "llama3.1:8b", "context": 3001}),  # every card: GpuPlan flattens its launch line
    ("plan", {"model": "llama3.1:8b", "gpu": "RTX 4090", "batch": 4, "input_tokens": 1000}),  # cost ranges
    ("plan", {"model": "bge-m3"}),  # a task answer, no decode
    ("speed", {"model": "llama3.1:8b", "gpu": "RTX 4090"}),  # omit_none: no plot
    ("breakeven", {"model": "llama3.1:8b", "gpu": "RTX 4090"}),  # omit_none: plot, buy, traffic
    ("deploy", {"model": "llama3.1:8b", "users": 4, "gpu": "RTX 4090"}),  # omit_none on deployments
]


@pytest.mark.parametrize(("name", "body"), ANSWERS, ids=lambda x: x if isinstance(x, str) else None)
def test_converted_answers_are_the_field_loops(name, body):
    result = BY_NAME[name].call(body)
    if not isinstance(result, Result):  # a plan's JSON is its view's (services/plan.py Plan.to_json)
        result = result.view()
    assert isinstance(result, Result)
    got = result.to_json()
    assert got == _loop_to_json(result)
    assert list(got) == list(_loop_to_json(result))  # the keys in the same order


@pytest.mark.parametrize("hot", [1, 10**9], ids=["compiled", "field-loop"])
@pytest.mark.parametrize(("name", "body"), ANSWERS, ids=lambda x: x if isinstance(x, str) else None)
def test_both_converters_give_the_answer(name, body, hot, monkeypatch):
    """Every class converted by its compiled to_json (HOT 1: from the first use) or by the field loop alone
    (HOT never reached, no converter compiled yet): the same JSON, keys in the same order."""
    result = BY_NAME[name].call(body)
    if not isinstance(result, Result):
        result = result.view()
    monkeypatch.setattr(table, "HOT", hot)
    monkeypatch.setattr(table, "_CONVERTERS", {})
    monkeypatch.setattr(table, "_USES", {})
    got = result.to_json()
    assert (set(table._CONVERTERS) >= {type(result)}) if hot == 1 else table._CONVERTERS == {}
    assert got == _loop_to_json(result)
    assert list(got) == list(_loop_to_json(result))


@record
class _Inner(Result):
    a: int | None
    b: str | None = None
    omit_none = ("b",)


@record
class _Outer(Result):
    x: float | None
    inner: _Inner | None
    items: tuple[_Inner, ...]
    extra: dict[str, Any] | None
    y: int | None = None
    flatten = ("inner",)
    omit_none = ("extra", "y")


_inner = st.builds(_Inner, st.none() | st.integers(), st.none() | st.text(max_size=3))


@settings(max_examples=200, deadline=None)
@given(st.none() | st.floats(allow_nan=False), st.none() | _inner, st.lists(_inner, max_size=3).map(tuple),
       st.none() | st.dictionaries(st.text(max_size=2), st.integers() | _inner, max_size=3),
       st.none() | st.integers())
def test_every_shape_of_record_converts_as_the_loop(x, inner, items, extra, y):
    r = _Outer(x, inner, items, extra, y)
    got = r.to_json()
    assert got == _loop_to_json(r)
    assert list(got) == list(_loop_to_json(r))


# ---- the web API's JSON text (services/table.py json_text): json.dumps of to_json, written from the fields

def _dumps(data: Any) -> str:
    import json

    return json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


TEXT_ANSWERS = [*ANSWERS, ("max-context", {"model": "llama3.1:8b", "gpu": "RTX 4090"}),
                ("plan", {"model": "llama3.1:8b", "runtime": "vllm", "kv_offload_gb": 64, "context": 8192})]


@pytest.mark.parametrize(("name", "body"), TEXT_ANSWERS, ids=lambda x: x if isinstance(x, str) else None)
def test_json_text_is_the_encoders_text(name, body):
    """What the web API answers (the command's result as text, services/table.py json_text) is, byte for
    byte, json.dumps of its plain data as the app wrote it before (web/app.py Answers)."""
    from cardfit.services.table import json_text, to_json

    result = BY_NAME[name].call(body)
    assert json_text(result) == _dumps(to_json(result))
    assert json_text(result) == _dumps(to_json(result))  # again, every writer compiled


class _Kind(str, __import__("enum").Enum):
    A = "a\"b"
    B = "é\n"


@record
class _Values(Result):
    f: float | None
    b: bool | None
    k: _Kind | None
    s: str | None
    i: int | None
    many: tuple[Any, ...]
    inner: _Inner | None
    mapping: dict[Any, Any] | None = None
    flatten = ("inner",)
    omit_none = ("mapping",)


_scalar = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
           | st.text(max_size=4) | st.sampled_from(list(_Kind)))


@settings(max_examples=300, deadline=None)
@given(st.none() | st.floats(allow_nan=False, allow_infinity=False), st.none() | st.booleans(),
       st.none() | st.sampled_from(list(_Kind)), st.none() | st.text(max_size=6), st.none() | st.integers(),
       st.lists(_scalar | _inner, max_size=4).map(tuple), st.none() | _inner,
       st.none() | st.dictionaries(st.text(max_size=2) | st.integers(), _scalar | _inner, max_size=3))
def test_every_value_writes_as_the_encoder(f, b, k, s, i, many, inner, mapping):
    from cardfit.services.table import json_text

    r = _Values(f, b, k, s, i, many, inner, mapping)
    assert json_text(r) == _dumps(r.to_json())
    assert json_text(_Outer(f, inner, tuple(x for x in many if isinstance(x, _Inner)), None)) == \
        _dumps(_Outer(f, inner, tuple(x for x in many if isinstance(x, _Inner)), None).to_json())


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_json_text_refuses_what_the_encoder_refuses(bad):
    """A non-finite float is refused as json.dumps(allow_nan=False) refuses it (ValueError), in a field or
    inside a list."""
    from cardfit.services.table import json_text

    with pytest.raises(ValueError):
        _dumps(bad)
    with pytest.raises(ValueError):
        json_text(_Values(bad, None, None, None, None, (), None))
    with pytest.raises(ValueError):
        json_text(_Values(None, None, None, None, None, (1, bad), None))


def test_kept_float_texts_are_bounded_and_signed(monkeypatch):
    """The writer keeps the texts of the floats it wrote (services/table.py _FLOATS), at most FLOATS_KEPT of
    them; 0.0 and -0.0 (one key) are written each time, each with its sign."""
    from cardfit.services.table import json_text

    monkeypatch.setattr(table, "_FLOATS", {})
    monkeypatch.setattr(table, "FLOATS_KEPT", 8)
    table._ITEMS.pop(_Values, None), table._WRITERS.pop(_Values, None), table._VALUE.pop(_Values, None)
    for i in range(50):
        r = _Values(i / 7, None, None, None, None, (-0.0, 0.0, i / 3), None)
        assert json_text(r) == _dumps(r.to_json())
        assert len(table._FLOATS) <= 8 and 0.0 not in table._FLOATS
    assert json_text(_Values(-0.0, None, None, None, None, (), None)).startswith('{"f":-0.0,')

"""The shortcuts that keep start-up and whole-catalog questions fast give the answers of the plain way:
`@record` (catalog/records.py) behaves as a frozen dataclass before and after its `__init__` is compiled for a
class built often; the lazily built catalogs (catalog/registry.py `Registry.lazy`) find the same records by
the same names as registries of every record; `norm` without a regular expression; `classify_many` is
`classify` per card; a GGUF mix typed once per rule outcome is the mix typed tensor by tensor."""

from __future__ import annotations

import copy
import dataclasses
import random
import re
from collections import Counter, defaultdict

import pytest

from cardfit.catalog import records
from cardfit.catalog.gpus import _registry, default_gpus, load_gpus
from cardfit.catalog.models import default_models, load_models
from cardfit.catalog.quants import default_quants
from cardfit.catalog.records import record
from cardfit.catalog.registry import Registry
from cardfit.catalog.rental import default_rental
from cardfit.core.fit import CardBudgets, classify, classify_many
from cardfit.core.gguf_mix import tensor_type
from cardfit.core.tensors import gguf_tensor_groups, has_shapes, shapes, tensor_groups
from cardfit.core.weights import (
    _buckets,
    _indices,
    _mix_counts,
    _mix_model,
    _position,
    _shape_params,
    _weights_from_shapes,
    projector_bytes,
)
from cardfit.names import norm


def _post(self) -> None:
    if self.n < 0:
        raise ValueError("n must not be negative")


def _make(slots: bool):
    @record(slots=slots)
    class Thing:
        """A record with every kind of field."""

        name: str
        n: int
        tags: tuple[str, ...] = ()
        note: str | None = None
        seen: list[int] = dataclasses.field(default_factory=list, compare=False)

        __post_init__ = _post

    return Thing


def _calls(Thing) -> dict[str, object]:
    """What each call gives: the record's repr, or the error's type and message."""
    cases = {
        "positional": lambda: Thing("a", 1),
        "keywords": lambda: Thing(n=2, name="b", note="x"),
        "all positional": lambda: Thing("c", 3, ("t",), None, [1]),
        "missing": lambda: Thing("d"),
        "missing by keyword": lambda: Thing(n=1),
        "unknown keyword": lambda: Thing("e", 1, colour="red"),
        "too many": lambda: Thing("f", 1, (), None, [], 6),
        "post_init": lambda: Thing("g", -1),
    }
    out: dict[str, object] = {}
    for label, call in cases.items():
        try:
            out[label] = repr(call())
        except (TypeError, ValueError) as e:
            out[label] = (type(e).__name__, str(e))
    return out


@pytest.mark.parametrize("slots", [False, True])
def test_compiled_init_behaves_as_the_shared_one(slots):
    Thing = _make(slots)
    before = _calls(Thing)
    assert "__init__" in Thing.__dict__ and "<record" not in Thing.__init__.__code__.co_filename
    for i in range(records.HOT):
        Thing("warm", i)
    assert Thing.__init__.__code__.co_filename.startswith("<record"), "hot class not compiled"
    assert _calls(Thing) == before
    messages = {k: v[1] for k, v in before.items() if isinstance(v, tuple)}
    assert messages["missing"].endswith("Thing() missing required argument: 'n'")
    assert messages["too many"].endswith("Thing() takes 5 positional arguments but 6 were given")
    assert messages["unknown keyword"].endswith("Thing() got an unexpected keyword argument 'colour'")
    a, b = Thing("x", 1), Thing("x", 1)
    assert a == b and hash(a) == hash(b) and a.seen is not b.seen  # a fresh list per instance
    assert dataclasses.replace(a, n=5).n == 5 and dataclasses.asdict(a)["name"] == "x"
    assert copy.deepcopy(a) == a == copy.copy(a)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.n = 2
    if not slots:  # one update of its __dict__: the fields in order, as the assignments left them
        assert list(vars(a)) == [f.name for f in dataclasses.fields(Thing)]
        assert "_cf_set" not in Thing.__init__.__code__.co_names


def test_compiled_init_of_a_record_on_a_slotted_base_sets_its_slots():
    """A record without slots of its own whose base keeps fields in slots: the compiled __init__ assigns
    each field (an update of __dict__ would leave the base's slots empty)."""
    @records.record(slots=True)
    class Base:
        a: int

    @records.record
    class Child(Base):
        b: int = 2

    for i in range(records.HOT + 1):
        c = Child(i)
    assert Child.__init__.__code__.co_filename.startswith("<record")
    assert (c.a, c.b) == (records.HOT, 2) and "a" not in vars(c)


def test_lazy_registries_index_as_the_eager_ones():
    """Every name finds the same record in the lazily built catalogs as in registries of every record."""
    for lazy, eager in ((default_models(), Registry("model", "cardfit models", list(default_models()),
                                                    lambda m: m.names)),
                        (default_gpus(), _registry(list(default_gpus())))):
        assert lazy._index.keys() == eager._index.keys()
        assert all(lazy.find(k) is eager.find(k) for k in eager._index)
        assert lazy._display == eager._display


def test_one_question_builds_only_what_it_names():
    models, gpus = load_models(), load_gpus()
    assert models.find("llama3.1:8b").id == "llama-3.1-8b" and gpus.get("RTX 4090").id == "rtx-4090"
    assert sum(r is not None for r in models._records) == 1
    assert sum(r is not None for r in gpus._records) == 1
    assert models.find("llama3.1:8b") is models.find("Llama 3.1 8B")  # built once


def test_norm_is_the_regular_expression_it_replaced():
    """norm() used to be re.sub(r"[\\s_\\-./:]+", "", name.strip().lower()); Unicode spaces included."""
    before = re.compile(r"[\s_\-./:]+")
    alphabet = "aZ09 \t\n_-./:+()\u00a0\u2009\u3000İßΣ"
    ascii_only = "".join(map(chr, range(128)))  # the bytes path: every ASCII character, \x1c-\x1f spaces too
    rng = random.Random(13)
    for letters in (alphabet, ascii_only):
        for _ in range(20000):
            name = "".join(rng.choice(letters) for _ in range(rng.randint(0, 16)))
            assert norm(name) == before.sub("", name.strip().lower()), repr(name)


def test_classify_many_is_classify_per_card():
    rules = default_rental()
    gb = 10**9
    budgets = [-1, 0, 1, 4 * gb, 5 * gb, 9 * gb, 10 * gb, 10 * gb + 1, 24 * gb, 80 * gb]
    for need in (0, 1, 5 * gb, 5 * gb - 1, 10 * gb, 79 * gb):
        for margin in (0, 7 * gb):
            many = classify_many(need, budgets, rules, margin)
            assert many == [classify(-1 if b < 0 else b - need, 1, rules, margin) for b in budgets]


def test_mix_counts_are_the_mix_tensor_by_tensor():
    """Every 7th catalog model with shapes, every GGUF mix: the types counted per rule outcome equal the types
    of each tensor in turn (llama-quant.cpp's walk)."""
    quants = default_quants()
    models = [m for m in default_models() if _buckets(m, True)][::7]
    for m in models:
        mm = _mix_model(m)
        for mix in quants.mixes:
            for g, positions in _buckets(m, True):
                if not g.matrix:
                    continue
                walked = Counter(tensor_type(mix, g.kind, i, n, g.row, quants, tied_output=m.tied_embeddings,
                                             mm=mm) for i, n in positions)
                assert dict(_mix_counts(mix, g, positions, m.tied_embeddings, mm)) == dict(walked), \
                    (m.id, mix.name, g.kind)


def _walked_buckets(m, gguf: bool):
    """Identical tensor groups merged by walking every tensor record (what _buckets did before it read the
    shapes once per kind of layer)."""
    groups = gguf_tensor_groups(m) if gguf else tensor_groups(m)
    layers_of, index_of = _indices(groups)
    merged: dict = {}
    for g in groups:
        pos = _position(g, m, layers_of, index_of) if gguf and g.matrix else (g.layer, m.layers)
        merged.setdefault((g.kind, g.n_params, g.row, g.matrix), (g, []))[1].append(pos)
    return tuple((g, tuple(p)) for g, p in merged.values())


def test_buckets_are_the_walk_over_every_tensor():
    """Every catalog model with shapes (dense, MoE with dense first layers, hybrid linear attention, fused
    Phi-3 GGUF tensors), as the plain file and as a GGUF file: the same groups, in the same order, with the
    same positions; and tensor_groups is its shapes, record by record."""
    for m in default_models():
        if not has_shapes(m):
            continue
        assert [(g.kind, g.layer, g.n_params, g.row, g.matrix) for g in tensor_groups(m)] == list(shapes(m))
        for gguf in (False, True):
            assert _buckets(m, gguf) == _walked_buckets(m, gguf), (m.id, gguf)


def test_card_budgets_classify_as_the_plain_list():
    """Budgets with ties, cards that cannot run (-1), needs on and around every budget and tight line."""
    rules = default_rental()
    rng = random.Random(3)
    gb = 10**9
    for _ in range(50):
        values = [-1, *(rng.randint(1, 80) * gb for _ in range(5))]
        budgets = [rng.choice(values) for _ in range(rng.randint(0, 40))]
        cards = CardBudgets(budgets)
        needs = [0, 1, *budgets, *(b + d for b in budgets for d in (-1, 1, -5 * gb, 5 * gb - 1))]
        for need in needs:
            for margin in (0, 7 * gb):
                got = classify_many(need, cards, rules, margin)
                assert got == classify_many(need, budgets, rules, margin)
                got.append("mutated")  # a copy: the next answer is not changed
        assert all(len(v) == len(budgets) for v in cards._lists.values())


def test_fused_gguf_groups_are_the_search_they_replaced():
    """Phi-3's fused GGUF tensors (attn_qkv, ffn_up of gate and up): the fused group replaces the first part
    where it stood, as the list search did before it kept the place."""
    for m in default_models():
        if not has_shapes(m) or m.model_type != "phi3":
            continue
        out: list = []
        pending: dict = {}
        for g in tensor_groups(m):
            fused = {"attn_q": "attn_qkv", "attn_k": "attn_qkv", "attn_v": "attn_qkv",
                     "ffn_gate": "ffn_up", "ffn_up": "ffn_up"}.get(g.kind)
            if fused is None:
                out.append(g)
                continue
            prev = pending.get((g.layer, fused))
            merged = type(g)(fused, g.layer, g.n_params + (prev.n_params if prev else 0), g.row)
            if prev is None:
                out.append(merged)
            else:
                out[out.index(prev)] = merged
            pending[(g.layer, fused)] = merged
        assert gguf_tensor_groups(m) == out, m.id


def test_mix_weights_typed_once_per_shape_are_the_mix_counts():
    """Every catalog model with shapes, every GGUF mix (and the legacy attn_qkv rule): the weights with the
    types kept per mix and model shape are the weights summed from _mix_counts bucket by bucket."""
    quants = default_quants()
    for m in default_models():
        if not has_shapes(m):
            continue
        total = _shape_params(m, True)
        for mix in quants.mixes:
            for legacy in (False, True):
                scale = m.params / total if m.params else 1.0
                by: dict[str, float] = defaultdict(float)
                vision = projector_bytes(m, mix)
                if vision:
                    scale = m.text_params / total
                    by["F16"] += vision
                mm = _mix_model(m, legacy)
                for g, positions in _buckets(m, True):
                    if g.matrix:
                        for t, count in _mix_counts(mix, g, positions, m.tied_embeddings, mm):
                            by[t.name] += t.nbytes(g.n_params) * count * scale
                    else:
                        f32 = quants.type("F32")
                        by[f32.name] += f32.nbytes(g.n_params) * len(positions) * scale
                want = sorted(((k, round(v)) for k, v in by.items()), key=lambda kv: -kv[1])
                assert _weights_from_shapes(m, mix, legacy).by_type == tuple(want), (m.id, mix.name, legacy)


def test_library_plan_does_not_import_inspect():
    """The library's plan (`cardfit.plan`, what the web page and the CLI run) needs no inspect (and no ast,
    dis, tokenize: catalog/records.py imports dataclasses without it) and no click; a @dataclass without a
    docstring, the one thing dataclasses needs inspect for, still gets its signature, and `import inspect`
    afterwards is the real module. (The command line imports click, which imports inspect.)"""
    import subprocess
    import sys

    probe = ("import sys\n"
             "import cardfit\n"
             "out = cardfit.plan('llama-3.1-8b', gpu='RTX 4090')\n"
             "print(sorted(m for m in ('inspect', 'ast', 'dis', 'tokenize', 'click') if m in sys.modules))\n"
             "import dataclasses, inspect\n"
             "@dataclasses.dataclass\n"
             "class Point:\n"
             "    x: int\n"
             "print(Point.__doc__, inspect is sys.modules['inspect'], callable(inspect.signature))\n"
             "print(out['gpus'][0]['gpu'] == 'RTX 4090')\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.stdout == "[]\nPoint(x: int) True True\nTrue\n", done.stderr


def test_described_inputs_are_typing_s_hints():
    """services/inputs.py describe() evaluates each distinct annotation text once per module: every field of
    every command's input has the annotation typing.get_type_hints gives its class."""
    import typing

    from cardfit.services.inputs import _kind, describe
    from cardfit.services.table import COMMANDS

    for row in COMMANDS:
        cls = row.input_type()
        hints = typing.get_type_hints(cls)
        for f in describe(cls):
            assert f.annotation == hints[f.name], (cls.__name__, f.name)
            assert (f.kind, f.item, f.choices) == _kind(hints[f.name])


def test_rounded_is_round_for_every_float():
    """units.rounded finds a whole float without round() (its own rounding): the same value, type and sign
    (-0.0) as round() for whole and fractional floats, ints and bools, at 0-4 digits."""
    import math
    import struct

    from cardfit.units import rounded

    rng = random.Random(7)
    values = [0.0, -0.0, 1.0, -1.0, 190.0, 2.0**53, 2.0**53 + 2, 1e300, -1e300, 0.5, 2.5, -0.5, 3, -7, True,
              0, 2**70, 1.005, 2.675]
    values += [struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0] for _ in range(20000)]
    values += [float(rng.randint(-10**9, 10**9)) for _ in range(2000)] + [rng.uniform(-1e6, 1e6)
                                                                          for _ in range(2000)]
    for v in values:
        if isinstance(v, float) and not math.isfinite(v):
            assert rounded(v) is None
            continue
        for d in range(5):
            want = round(v, d)
            for _ in range(2):  # worked out, then kept
                got = rounded(v, d)
                assert type(got) is type(want) and repr(got) == repr(want), (v, d)
    from cardfit import units

    assert all(len(kept) <= units.ROUNDED_KEPT and 0.0 not in kept for kept in units._ROUNDED)


def test_kept_roundings_are_bounded_per_digits(monkeypatch):
    """units.rounded keeps at most ROUNDED_KEPT roundings for each number of digits (one float-keyed table per
    digits, cleared whole when full), never a zero (0.0 and -0.0 are one key), and answers as round() with
    or without them; digits past the tables (or negative) are rounded each time."""
    from cardfit import units

    monkeypatch.setattr(units, "ROUNDED_KEPT", 4)
    monkeypatch.setattr(units, "_ROUNDED", tuple({} for _ in range(units.ROUNDED_DIGITS)))
    rng = random.Random(11)
    values = [rng.uniform(-1e4, 1e4) for _ in range(50)] + [0.0, -0.0, 3.0, -2.0]
    for _ in range(2):
        for v in values:
            for d in (0, 1, 2, 4, units.ROUNDED_DIGITS, -1):
                want = round(v, d)
                got = units.rounded(v, d)
                assert type(got) is type(want) and repr(got) == repr(want), (v, d)
    assert all(len(kept) <= 4 and 0.0 not in kept for kept in units._ROUNDED)
    assert all(type(k) is float for kept in units._ROUNDED for k in kept)

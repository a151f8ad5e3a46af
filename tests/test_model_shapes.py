"""Impossible model shapes are refused where a config.json, a header or a catalog row becomes a ModelSpec,
with one line naming the key and what is allowed: never planned without a word, never an HTTP 500
(issue 25: num_experts_per_tok over the expert count raised OverflowError in plan and speed, and
full_attention_interval on a plain Llama config ZeroDivisionError in finetune)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cardfit.catalog.models import ModelSpec, default_models, load_models, shape_problem
from cardfit.errors import CatalogError, FileFormatError
from cardfit.readers import read_model_path

from .test_readers import QWEN3_NEXT
from .test_readers_helpers import TINY_LLAMA, write_json

MIXTRAL = {**TINY_LLAMA, "model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 2}

# (case, config, words the one-line error must hold); why each is tricky in the case name
IMPOSSIBLE = [
    ("more KV heads than heads", {**TINY_LLAMA, "num_key_value_heads": 1000},
     ["num_key_value_heads", "1,000", "must divide", "num_attention_heads", "4"]),
    ("KV heads not a divisor (4 heads, 3 KV)", {**TINY_LLAMA, "num_key_value_heads": 3},
     ["num_key_value_heads", "3", "must divide"]),
    ("100 of 8 experts per token (was OverflowError)", {**MIXTRAL, "num_experts_per_tok": 100},
     ["num_experts_per_tok", "100", "more than the 8 experts"]),
    ("9 of 8 experts per token", {**MIXTRAL, "num_experts_per_tok": 9}, ["num_experts_per_tok", "9"]),
    ("interval past the layer count on a plain Llama (was ZeroDivisionError)",
     {**TINY_LLAMA, "full_attention_interval": 1000}, ["full_attention_interval", "1,000", "must be 1..2"]),
    ("interval 0", {**TINY_LLAMA, "full_attention_interval": 0}, ["full_attention_interval", "must be 1..2"]),
    ("interval on a config without linear-attention layers", {**TINY_LLAMA, "full_attention_interval": 2},
     ["full_attention_interval", "hybrid", "linear_num_key_heads"]),
    ("every layer linear attention", {**TINY_LLAMA, "layer_types": ["linear_attention"] * 2,
                                      "linear_num_key_heads": 4, "linear_num_value_heads": 4,
                                      "linear_key_head_dim": 16, "linear_value_head_dim": 16},
     ["none of the 2 layers with attention"]),
    ("linear layers without their state's shape", {**TINY_LLAMA, "layer_types": ["linear_attention",
                                                                                "full_attention"]},
     ["linear-attention layers need", "linear_num_key_heads"]),
    ("more dense layers than layers", {**MIXTRAL, "first_k_dense_replace": 3},
     ["first_k_dense_replace", "3", "more than the 2 layers"]),
]


@pytest.mark.parametrize("case,cfg,words", IMPOSSIBLE, ids=[c[0] for c in IMPOSSIBLE])
def test_impossible_config_is_one_line_naming_the_key(tmp_path, case, cfg, words):
    with pytest.raises(FileFormatError) as e:
        read_model_path(str(write_json(tmp_path / "config.json", cfg)))
    msg = str(e.value)
    assert "\n" not in msg and all(w in msg for w in words), msg


# The shapes that look odd but are real: each must still read.
POSSIBLE = [
    ("Qwen3-Next: full_attention_interval 4 with its linear-attention keys", QWEN3_NEXT, 36),
    ("interval 1: every layer full attention", {**TINY_LLAMA, "full_attention_interval": 1}, 0),
    ("MHA: as many KV heads as heads", {**TINY_LLAMA, "num_key_value_heads": 4}, 0),
    ("MQA: one KV head", {**TINY_LLAMA, "num_key_value_heads": 1}, 0),
    ("every expert active", {**MIXTRAL, "num_experts_per_tok": 8}, 0),
]


@pytest.mark.parametrize("case,cfg,linear", POSSIBLE, ids=[c[0] for c in POSSIBLE])
def test_real_shapes_still_read(tmp_path, case, cfg, linear):
    spec = read_model_path(str(write_json(tmp_path / "config.json", cfg)))
    assert spec.linear_layers == linear and shape_problem(spec) is None


def test_every_catalog_model_holds_together():
    assert [m.id for m in default_models() if shape_problem(m)] == []


def test_a_user_catalog_row_with_an_impossible_shape_is_refused(tmp_path):
    path = tmp_path / "models.toml"
    path.write_text('[[model]]\nid = "odd"\nname = "Odd"\nparams = 1000000000\nlayers = 16\nheads = 32\n'
                    'kv_heads = 1000\nhead_dim = 64\n')
    with pytest.raises(CatalogError, match=r"model .odd.: kv_heads \(num_key_value_heads\) 1,000 must"):
        load_models((str(path),))


@settings(max_examples=200, deadline=None)
@given(heads=st.integers(1, 256), kv=st.integers(1, 256), experts=st.integers(0, 64),
       active=st.integers(0, 64))
def test_shape_problem_is_exactly_the_grouping_and_routing_rules(heads, kv, experts, active):
    """A shape passes when KV heads divide heads and a token is routed to at most every expert (and only a
    model with experts routes): the two rules, and nothing else, decide for these fields."""
    m = ModelSpec(id="x", name="x", params=1, layers=4, kv_heads=kv, head_dim=64, heads=heads,
                  experts=experts, experts_active=active)
    ok = heads % kv == 0 and active <= experts and not (active and not experts)
    assert (shape_problem(m) is None) == ok


@pytest.fixture(scope="module")
def client():
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from cardfit.web.app import create_app

    return TestClient(create_app())


@pytest.mark.parametrize("endpoint", ["/api/plan", "/api/speed", "/api/finetune"])
@pytest.mark.parametrize("case,cfg,words", [IMPOSSIBLE[0], IMPOSSIBLE[2], IMPOSSIBLE[4]],
                         ids=["kv heads", "experts per token", "interval"])
def test_web_answers_400_not_500(client, endpoint, case, cfg, words):
    r = client.post(endpoint, json={"config_json": json.loads(json.dumps(cfg)), "gpu": "H100 SXM"})
    assert r.status_code == 400, r.text
    assert words[0] in r.json()["error"] and "\n" not in r.json()["error"]

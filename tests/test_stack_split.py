"""One owner for a llama.cpp/Ollama layer split (runtimes/llamacpp_like.py split_cards): `cardfit plan
--gpus N` (its per-card need and verdict), `cardfit stack` (its cards) and `cardfit deploy` size the same
split the same way, and the plan's cards hold what real split logs printed."""

from __future__ import annotations

import tomllib
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cardfit
from cardfit.catalog.models import default_models
from cardfit.catalog.quants import default_quants
from cardfit.catalog.runtimes import default_runtimes
from cardfit.core import fit as fitting
from cardfit.core.memory import Memory
from cardfit.core.weights import Weights
from cardfit.runtimes import adapter
from cardfit.runtimes import llamacpp_like as llama

from .conftest import ROOT

MIB = 2**20


def _memory(weights: int, kv: int, overhead: int, activation: int, context: int, seqs: int) -> Memory:
    return Memory(weights, kv, overhead, activation, Weights(weights, 1, (), "params"), context, seqs, "f16")


@given(layers=st.integers(1, 160), shares=st.lists(st.integers(1, 1000), min_size=2, max_size=8),
       weights=st.integers(0, 10**12), kv=st.integers(0, 10**11), context=st.integers(1, 131072),
       seqs=st.integers(1, 16), flash=st.booleans(), runtime=st.sampled_from(["llama.cpp", "ollama"]))
def test_split_cards_keep_every_byte_and_every_card_pays_its_fixed_bytes(layers, shares, weights, kv, context,
                                                                          seqs, flash, runtime):
    """A split's cards add up to the pooled need (core/fit.py need_on) plus the pipeline's mask copies on
    every card (llama.cpp only), and each card holds its fixed bytes plus its layers."""
    engine = adapter(default_runtimes().get(runtime))
    spec = replace(default_models().get("qwen2.5-0.5b"), layers=layers)
    mem = _memory(weights, kv, 457 * MIB, 300 * MIB, context, seqs)
    cards = engine.split_cards(spec, None, mem, [float(s) for s in shares], flash_attn=flash)
    copies = engine.pipeline_bytes(mem, flash)
    assert (copies > 0) == (runtime == "llama.cpp")
    assert len(cards) == len(shares)
    assert sum(cards) == fitting.need_on(mem, len(shares)) + len(shares) * copies
    assert min(cards) >= mem.per_card_fixed_bytes + copies
    # one card: no pipeline, the card holds the whole need
    assert engine.split_cards(spec, None, mem, [1.0], flash_attn=flash) == [fitting.need_on(mem, 1)]


def _stack_text(model: str, gpu: str, count: int, runtime: str, quant: str, context: int, users: int,
                flash: bool | None) -> str:
    cards = ", ".join([f'"{gpu}"'] * count)
    fa = f"flash_attn = {str(flash).lower()}\n" if flash is not None else ""
    return (f'[machine]\ngpu = [{cards}]\n[[model]]\nmodel = "{model}"\nruntime = "{runtime}"\n'
            f'quant = "{quant}"\ncontext = {context}\nusers = {users}\ngpus = {count}\n{fa}')


@settings(max_examples=12, deadline=None)
@given(model=st.sampled_from([("qwen2.5-0.5b", "Q4_0"), ("llama3.1:8b", "Q4_K_M"), ("qwen2.5:32b", "Q4_K_M"),
                              ("mistral-7b", "Q8_0")]),
       count=st.integers(2, 4), context=st.sampled_from([2048, 8192, 16384]), users=st.integers(1, 4),
       runtime=st.sampled_from(["llama.cpp", "ollama"]), flash=st.booleans())
def test_plan_and_stack_size_the_same_split_alike(model, count, context, users, runtime, flash):
    """`cardfit plan --gpus N` and `cardfit stack` with the model alone over the same N cards (equal free
    memory: llama.cpp's default split) give every card the same bytes and the same verdict."""
    name, quant = model
    fa = flash if runtime == "llama.cpp" else None
    r = cardfit.stack(text=_stack_text(name, "H100 SXM", count, runtime, quant, context, users, fa))
    kw = {"flash_attn": fa} if fa is not None else {}
    p = cardfit.plan(name, gpu="H100 SXM", gpus=count, runtime=runtime, quant=quant, context=context,
                     batch=users, **kw)
    g = p["gpus"][0]
    assert [d["entries"][0]["bytes"] for d in r["devices"]] == g["card_need_bytes"]
    assert sum(g["card_need_bytes"]) == g["need_bytes"]
    assert (r["verdict"] != "no") == (g["verdict"] != "no")


# Real split loads whose every per-card buffer the log printed (model + KV + compute, no CUDA context):
# `cardfit plan --gpus 2` gives each card what the log shows, the same cards `cardfit stack` scores in
# memory_stack.toml.
PLAN_SPLITS = [
    # Nixiesearch GPU guide (memory_stack.toml, its two records): Qwen2-0.5B Q4_0, 2x RTX 4090, -c 32768
    # -np 4, flash attention off; CUDA0 104.91 + 208.00 + 1166.01 MiB, CUDA1 226.06 + 176.00 + 1166.02 MiB
    ("memory_stack.toml", "qwen2.5-0.5b", "Q4_0", "RTX 4090", 8192, 4, False,
     [104.91 + 208.00 + 1166.01, 226.06 + 176.00 + 1166.02]),
]


@pytest.mark.parametrize("file, model, quant, gpu, context, users, flash, buffers_mib", PLAN_SPLITS,
                         ids=[s[0] for s in PLAN_SPLITS])
def test_plan_cards_hold_what_a_real_split_printed(file, model, quant, gpu, context, users, flash,
                                                   buffers_mib):
    text = (ROOT / "src/cardfit/data/validation" / file).read_text(encoding="utf-8")
    records = tomllib.loads(text)["record"]
    assert [r["measured"] for r in records] == [round(b * MIB) for b in buffers_mib]  # the file's own numbers
    p = cardfit.plan(model, gpu=gpu, gpus=len(buffers_mib), runtime="llama.cpp", quant=quant, context=context,
                     batch=users, flash_attn=flash)
    overhead = p["memory"]["overhead_bytes"]  # each card's CUDA context, which the log's buffers leave out
    for got, want in zip(p["gpus"][0]["card_need_bytes"], buffers_mib, strict=True):
        assert (got - overhead) / (want * MIB) - 1 == pytest.approx(0, abs=0.01)


def test_a_model_over_equal_cards_is_refused_where_its_fullest_card_overflows():
    """405B BF16 on 4x MI300X: 8 GB to spare on the set, but llama.cpp's default split puts 32 of the 126
    layers on each of the first three cards (n_layer + 1 slots), each over its card: no, and the reason
    names the card (README "Where cardfit disagrees")."""
    p = cardfit.plan("llama3.1:405b", gpu="MI300X", gpus=4, runtime="llama.cpp", quant="bf16", context=8192)
    g = p["gpus"][0]
    assert g["budget_bytes"] > g["need_bytes"]  # the set as a pool would hold it
    assert g["verdict"] == "no" and "fullest card" in g["reason"]
    cards = g["card_need_bytes"]
    assert cards[0] == cards[1] == cards[2] > cards[3]
    assert g["free_bytes"] == 4 * (g["budget_bytes"] // 4 - cards[0]) < 0


# Real split loads whose per-card model buffers show where llama.cpp put the layers and the output matrix
# (the excerpts found give the model buffers, not each card's KV and compute buffers, so they are no
# stack_memory records): (source, n_layer, split, output matrix bytes, CUDA0/CUDA1 model MiB, layers on each
# card as layer_cards places them).
# llama.cpp issue 7217 (build b2849, `-ngl 61 -ts 1,1` over an RTX 3090 + RTX 3060): a Yi-34B merge in
# IQ4_XS, 60 layers; Yi-34B's config.json (https://huggingface.co/01-ai/Yi-34B/blob/main/config.json):
# hidden_size 7168, vocab_size 64000, untied; llama-quant.cpp stores output.weight as Q6_K (210 bytes per 256
# weights) in IQ4_XS, plus the f32 output_norm: 64000 x 7168 x 210 / 256 + 7168 x 4 bytes
YI_OUTPUT = 64000 * 7168 * 210 // 256 + 7168 * 4
MODEL_SPLITS = [
    ("ggml-org/llama.cpp/issues/7217", 60, [1, 1], YI_OUTPUT, [8796.98, 8588.34], [31, 29]),
]


@pytest.mark.parametrize("source, layers, split, output, model_mib, counts", MODEL_SPLITS,
                         ids=[s[0] for s in MODEL_SPLITS])
def test_the_output_layer_and_one_more_layer_land_where_a_real_split_printed(source, layers, split, output,
                                                                             model_mib, counts):
    """n_layer + 1 slots: the first card holds one layer more than an even split and the last card the
    output matrix, so the second card's buffer is its layers at the first card's bytes per layer plus the
    output matrix, within 0.1 %; an even split with the output shared out would not come near."""
    cards = llama.layer_cards(layers, split)
    assert [cards[:layers].count(d) for d in range(len(split))] == counts
    if source.endswith("7217"):  # the catalog's Yi 34B at IQ4_XS: the same output matrix, by the one owner
        m = default_models().get("yi-34b")
        assert m.layers == layers
        assert llama.output_bytes(m, default_quants().find("IQ4_XS"), 10**12) == output
    assert cards[layers] == len(split) - 1
    per_layer = model_mib[0] * MIB / counts[0]
    second = counts[1] * per_layer + output
    assert second / (model_mib[1] * MIB) - 1 == pytest.approx(0, abs=0.001)
    even = model_mib[0] * MIB + output  # n_layer slots, the output layer with the last card: off by its size
    assert abs(even / (model_mib[1] * MIB) - 1) > 0.03
    # and the split of those bytes, by the one owner, gives each card what the log printed
    got = llama.layer_split(round(layers * per_layer) + output, layers, split, output)
    for g, want in zip(got, model_mib, strict=True):
        assert g / (want * MIB) - 1 == pytest.approx(0, abs=0.001)

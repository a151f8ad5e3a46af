"""Fine-tuning memory (issue 6): the rental guide's full fine-tune table and card choices, optimizer terms,
LoRA adapter sizes from real shapes, activations, ZeRO / offload, NVLink, and the CLI."""

from __future__ import annotations

import json

import pytest

from cardfit.catalog.models import default_models
from cardfit.catalog.quants import default_quants
from cardfit.core import training as tr
from cardfit.core.weights import weights
from cardfit.errors import InputError
from cardfit.services.finetune import FinetuneInput, constants, memory, model_for
from cardfit.services.finetune import finetune_report as _typed

GB = 10**9

# the GPU Rent Hub guide section 04 table: (catalog id, full "weights + Adam" GB, full "with activations" GB)
SEED_FULL = [
    ("shape-7b", 112, 129),
    ("shape-13b", 208, 239),
    ("shape-34b", 544, 626),
    ("shape-70b", 1120, 1288),
    ("shape-405b", 6480, 7452),
]


def finetune_report(inp: FinetuneInput) -> dict:
    """The --json data of `cardfit finetune` (the typed result's to_json)."""
    return _typed(inp).to_json()


def _mem(model: str, **kw):
    inp = FinetuneInput(model=model, **kw)
    m, _, _ = model_for(inp)
    return m, memory(m, inp)


@pytest.mark.parametrize(("model", "states_gb", "with_act_gb"), SEED_FULL)
def test_seed_full_finetune_columns(model, states_gb, with_act_gb):
    """16 B/param exactly (2 + 2 + 4 + 4 + 4), and the guide's flat 15 % on top."""
    m, mem = _mem(model, flat_activations=True)
    states = mem.weights_bytes + mem.gradients_bytes + mem.optimizer_bytes
    assert states == 16 * m.params == states_gb * GB
    assert round(mem.total_bytes / GB) == with_act_gb
    assert (mem.weights_bytes, mem.gradients_bytes, mem.master_bytes) == (2 * m.params, 2 * m.params,
                                                                          4 * m.params)
    assert mem.optimizer_bytes - mem.master_bytes == 8 * m.params  # Adam m + v


# the GPU Rent Hub guide section 05 full fine-tune column vs cardfit's answer on the same rental fleet (usable
# bytes, not marketing
# GB): (model, cardfit card, count, monthly USD, the guide's card, count, its price as cardfit computes it).
GUIDE_CARDS = [
    ("shape-7b", "MI300X", 1, 1590.0, "MI300X", 1, 1590.0),
    # seed: 4x A100 $3,643; 2x MI300X (411.6e9 usable, $3,021 after 5 %) is cheaper and has Infinity Fabric
    ("shape-13b", "MI300X", 2, 3021.0, "A100 SXM 80GB", 4, 3643.2),
    # seed: 8x A100 $7,130 "tight"; 4x MI300X ($5,851, the same discount rule) holds 823e9 bytes
    ("shape-34b", "MI300X", 4, 5851.2, "A100 SXM 80GB", 8, 7128.0),
    ("shape-70b", "MI300X", 8, 11448.0, "MI300X", 8, 11448.0),
    ("shape-405b", "MI300X", 40, 57240.0, "MI300X", 40, 57240.0),  # seed: "five nodes, on request"
]


@pytest.mark.parametrize(("model", "gpu", "count", "usd", "seed_gpu", "seed_count", "seed_usd"), GUIDE_CARDS)
def test_seed_full_finetune_cards(model, gpu, count, usd, seed_gpu, seed_count, seed_usd):
    r = finetune_report(FinetuneInput(model=model, flat_activations=True, priced=True))
    best = r["gpus"][0]
    assert (best["gpu"], best["count"], best["monthly_usd"]) == (gpu, count, usd)
    assert best["verdict"] in ("fits", "tight")
    seed = next(o for o in r["gpus"] if o["gpu"] == seed_gpu)
    assert (seed["count"], seed["monthly_usd"]) == (seed_count, seed_usd)
    assert seed["verdict"] in ("fits", "tight")


def test_405b_is_five_nodes():
    r = finetune_report(FinetuneInput(model="shape-405b", flat_activations=True, priced=True))
    assert r["gpus"][0]["nodes"] == 5


def test_34b_on_8_a100_is_not_tight_with_usable_bytes():
    """The guide calls 626 GB on 8x A100 tight (640 marketing GB); the driver reports 8 x 85.9e9 bytes."""
    r = finetune_report(FinetuneInput(model="shape-34b", flat_activations=True, gpu="A100 SXM 80GB", gpus=8))
    o = r["gpus"][0]
    assert o["usable_bytes"] == 8 * 85899345920
    assert o["verdict"] == "fits" and o["free_bytes"] > 60 * GB


def test_full_finetune_needs_nvlink_on_several_cards():
    """8x A40 ($1,728) holds 13B's 239 GB but has only a pair bridge: the guide's NVLink rule excludes it."""
    r = finetune_report(FinetuneInput(model="shape-13b", flat_activations=True, gpu="A40"))
    o = r["gpus"][0]
    assert o["verdict"] == "no" and "NVLink" in o["reason"]
    relaxed = finetune_report(FinetuneInput(model="shape-13b", flat_activations=True, gpu="A40",
                                            require_nvlink=False))
    assert relaxed["gpus"][0]["verdict"] in ("fits", "tight") and relaxed["gpus"][0]["count"] == 8
    lora = finetune_report(FinetuneInput(model="shape-405b", method="qlora", gpu="A40"))
    assert lora["gpus"][0]["verdict"] in ("fits", "tight")  # the guide puts 405B QLoRA on 8x A40


@pytest.mark.parametrize(("optimizer", "per_param"), [("adamw", 16), ("adamw-8bit", 10), ("sgd", 12)])
def test_optimizers_bytes_per_param(optimizer, per_param):
    m, mem = _mem("shape-7b", optimizer=optimizer)
    assert mem.weights_bytes + mem.gradients_bytes + mem.optimizer_bytes == per_param * m.params


def test_adafactor_factored_state_is_small():
    """Row + column statistics: far under 1 B/param, but not zero; master copy still 4 B."""
    m, mem = _mem("llama-2-7b", optimizer="adafactor")
    state = mem.optimizer_bytes - mem.master_bytes
    assert 0 < state < 0.01 * m.params
    assert mem.master_bytes == 4 * m.params


@pytest.mark.parametrize(("model", "rank", "targets", "expected"), [
    # PEFT print_trainable_parameters for Llama-2-7B, r=16, all linear: 39,976,960 (MHA, FFN 11,008)
    ("llama-2-7b", 16, "all", 39_976_960),
    # Unsloth's Llama-3-8B notebooks, r=16 on q,k,v,o,gate,up,down: 41,943,040 (GQA: k,v are 1,024 wide)
    ("llama-3.1-8b", 16, "all", 41_943_040),
    # attention only: 32 layers x r x (in + out) for q, k, v, o
    ("llama-3.1-8b", 16, "attention", 32 * 16 * (2 * 8192 + 2 * 5120)),
])
def test_lora_params_from_real_shapes(model, rank, targets, expected):
    m = default_models().get(model)
    assert tr.lora_params(m, rank, targets) == expected


def test_lora_experts_targeted_moe():
    m = default_models().get("qwen3-30b-a3b")
    attention, linear, experts = (tr.lora_params(m, 16, t) for t in tr.TARGETS)
    per_expert = 16 * (m.hidden + m.moe_intermediate)  # gate: h -> f
    assert experts - linear == m.layers * m.experts * 3 * per_expert
    assert linear >= attention > 0


def test_lora_and_qlora_terms():
    m, lora = _mem("llama-3.1-8b", method="lora")
    _, qlora = _mem("llama-3.1-8b", method="qlora")
    assert lora.weights_bytes == weights(m, default_quants().get("bf16")).total_bytes
    nf4 = weights(m, default_quants().get("nf4"))
    assert qlora.weights_bytes == nf4.total_bytes
    assert qlora.weights_bytes > m.params // 2  # 16-bit embeddings and output, NF4 scales
    # 16 B per adapter parameter: weights 2 + grads 2 + master 4 + Adam 8 (the GPU Rent Hub guide section 04)
    n = lora.adapter_params
    assert lora.adapter_bytes + lora.gradients_bytes + lora.optimizer_bytes == 16 * n
    assert lora.activation_bytes == qlora.activation_bytes


def test_activations_monotone_and_levers():
    c, _ = constants()
    m = default_models().get("llama-3.1-8b")
    base = tr.TrainingSettings(method="lora", seq=2048)
    a = tr.activation_bytes(m, c, base)
    assert tr.activation_bytes(m, c, tr.TrainingSettings(method="lora", seq=4096)) > a
    assert tr.activation_bytes(m, c, tr.TrainingSettings(method="lora", seq=2048, batch=2)) == 2 * a
    assert tr.activation_bytes(m, c,
                               tr.TrainingSettings(method="lora", seq=2048, checkpointing=False)) > 3 * a
    no_flash = tr.TrainingSettings(method="lora", seq=2048, flash_attn=False)
    per_token = tr.layer_bytes_per_token(m, c, no_flash) - tr.layer_bytes_per_token(m, c, base)
    assert per_token == 5 * m.heads * 2048  # Korthikanti's 5as^2b term, per token


def test_logits_term_is_the_vocabulary():
    """Per token with checkpointing: 32 layer inputs (2h each), two layers' worth of recomputation, and
    10 B per logit; for a 128K vocabulary the logits are the largest part."""
    c, _ = constants()
    m = default_models().get("llama-3.1-8b")
    s = tr.TrainingSettings(method="full", seq=1)
    per_layer = tr.layer_bytes_per_token(m, c, s)
    assert tr.activation_bytes(m, c, s) == 32 * 2 * 4096 + 2 * per_layer + 10 * 128256
    assert 10 * 128256 > 32 * 2 * 4096 + 2 * per_layer


def test_zero_stages_and_offload():
    _, mem = _mem("llama-3.1-8b")
    per_card = [tr.split(mem, 8, z).per_card_bytes for z in range(4)]
    assert per_card == sorted(per_card, reverse=True) and len(set(per_card)) == 4
    assert tr.split(mem, 8, 0).per_card_bytes == mem.total_bytes  # plain data parallel: a full replica
    off = tr.split(mem, 8, 3, offload_optimizer=True)
    assert off.host_bytes == mem.optimizer_bytes
    both = tr.split(mem, 8, 3, offload_optimizer=True, offload_params=True)
    assert both.host_bytes == mem.optimizer_bytes + mem.weights_bytes


def test_offload_reported_per_option():
    r = finetune_report(FinetuneInput(model="llama-3.1-70b", offload_optimizer=True, gpu="H100 SXM", gpus=8))
    o = r["gpus"][0]
    assert o["host_ram_bytes"] == r["memory"]["optimizer_bytes"] and o["zero"] == 3


def test_offload_params_needs_zero3():
    with pytest.raises(InputError, match="ZeRO stage 3"):
        finetune_report(FinetuneInput(model="llama-3.1-8b", offload_params=True, zero=2, gpus=2))


def test_methods_table_and_seed_rule():
    r = finetune_report(FinetuneInput(model="shape-70b", method="qlora"))
    totals = {row["method"]: row["total_bytes"] for row in r["methods"]}
    assert totals["full"] > totals["lora"] > totals["qlora"]
    assert r["seed_rule"]["qlora_bytes"] == 35 * GB + 350_000_000 * 16
    assert any("6-14 GB" in n for n in r["notes"])


def test_cli_json(run_json):
    r = run_json("finetune", "llama3.1:8b", "--method", "qlora", "--seq", "4096")
    assert set(r["memory"]) >= {"weights_bytes", "gradients_bytes", "optimizer_bytes", "activation_bytes",
                                "adapter_bytes", "total_bytes"}
    g = r["gpus"][0]
    assert set(g) >= {"gpu", "count", "usable_bytes", "free_bytes", "verdict", "monthly_usd"}
    assert r["inputs"]["seq"] == 4096 and [m["method"] for m in r["methods"]] == ["full", "lora", "qlora"]


def test_cli_human_output(run_cli):
    code, out, err = run_cli("finetune", "shape-7b", "--method", "lora", "--gpu", "RTX 4090")
    assert code == 0, err
    assert "activations" in out and "qlora" in out and "RTX 4090" in out and "flat 15 %" in out


def test_pcie_pair_full_finetune_is_refused():
    """2x H100 PCIe (171e9 usable) holds a 7B full fine-tune by memory, but its link is PCIe."""
    r = finetune_report(FinetuneInput(model="shape-7b", gpu="H100 PCIe", gpus=2))
    o = r["gpus"][0]
    assert o["free_bytes"] > 0 and o["verdict"] == "no" and "pcie" in o["reason"]


@pytest.mark.parametrize("args", [
    ("finetune", "llama3.1:8b", "--optimizer", "lion"),
    ("finetune", "llama3.1:8b", "--method", "prefix"),
    ("finetune", "llama3.1:8b", "--seq", "0"),
    ("finetune", "llama3.1:8b", "--zero", "4"),
])
def test_cli_bad_input_one_line(run_cli, args):
    code, out, err = run_cli(*args)
    assert code == 2 and out == ""
    assert err.startswith("Error: ") and err.count("\n") == 1


def test_cli_json_is_one_object(run_cli):
    code, out, _ = run_cli("finetune", "shape-13b", "--flat-activations", "--priced", "--json")
    assert code == 0 and json.loads(out)["gpus"][0]["count"] == 2


def test_offload_is_bounded_by_host_ram(run_cli):
    """the GPU Rent Hub guide section 04: an 8-way node has 2 TB of host RAM for ZeRO offload; 405B full with
    everything offloaded
    needs 5.7 TB, so two nodes (4 TB) cannot hold it and three can."""
    import json

    def verdict(n: int) -> dict:
        code, out, err = run_cli("finetune", "llama-3.1-405b", "--method", "full", "--gpu", "H200", "--gpus",
                                 str(n), "--offload-optimizer", "--offload-params", "--json")
        assert code == 0, err
        return json.loads(out)["gpus"][0]

    two, three = verdict(16), verdict(24)
    assert two["verdict"] == "no" and "host RAM" in two["reason"]
    assert three["verdict"] in ("fits", "tight")

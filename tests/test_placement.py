"""Card sets beyond one node: tensor parallel inside a node, pipeline stages across nodes, the KV cache copied
only inside a tensor-parallel group. `cardfit plan`, `cardfit deploy` and `cardfit max-context` place a set
with the same code (core/placement.py) and size it with the same check (core/fit.py)."""

from __future__ import annotations

from functools import cache

import pytest

from cardfit.catalog.gpus import default_gpus
from cardfit.catalog.rental import default_rental
from cardfit.catalog.runtimes import default_runtimes
from cardfit.core.kv import kv_replication
from cardfit.core.placement import shape_of, shapes
from cardfit.services.inputs import PlanInput
from cardfit.services.plan import plan

# The issue's example (cardfit issue 11, "Serve a load"): Llama 3.1 70B in BF16, 16 sequences of 128K tokens
# on vLLM needs ~830 GB; the old plan ranked "104x H100 NVL (13 nodes)" and "48x RTX PRO 6000 (6 nodes)",
# one tensor-parallel group of the whole set with a copy of the cache on every eight cards (8 KV heads).
L70 = "meta-llama/Llama-3.1-70B-Instruct"
ISSUE = dict(model=L70, quant="bf16", context=131072, batch=16, runtime="vllm")


@cache
def issue_plan() -> dict:
    return plan(PlanInput(**ISSUE)).to_json()


def test_the_issue_example_never_copies_the_cache_per_card():
    d = issue_plan()
    gpus = {g.id: g for g in default_gpus()}
    multi = [e for e in d["gpus"] if e["verdict"] in ("fits", "tight") and e["nodes"] > 1]
    assert multi, "some NVLink card needs more than one node for 830 GB"
    kv = d["memory"]["kv_cache_bytes"]
    # each card's own fixed terms (vLLM's profile-run defaults depend on the card)
    mems = {(c.option.gpu.id, c.option.count): c.memory for c in plan(PlanInput(**ISSUE)).cards}
    for e in multi:
        g = gpus[e["gpu_id"]]
        assert g.interconnect in ("nvlink", "infinity-fabric"), f"{e['gpu']}: PCIe cards stay in one node"
        assert e["tp"] <= 8 and e["tp"] * e["pp"] == e["count"] and e["pp"] == e["nodes"], e
        # one cache for the whole set: Llama 3.1 70B has 8 KV heads, a TP group of 8 holds one head per card
        mem = mems[(e["gpu_id"], e["count"])]
        fixed = mem.overhead_bytes + mem.activation_bytes
        assert e["need_bytes"] - e["count"] * fixed == d["memory"]["weights_bytes"] + kv, e["gpu"]
    names = {(e["gpu"], e["count"]) for e in d["gpus"] if e["verdict"] in ("fits", "tight")}
    assert ("H100 NVL", 104) not in names
    assert not any(n.startswith("RTX PRO 6000") and c > 8 for n, c in names)
    # 2 nodes of 8 H100 SXM (1,306 GB of budget) hold it once the cache is not copied
    h100 = next(e for e in d["gpus"] if e["gpu"] == "H100 SXM")
    assert (h100["count"], h100["nodes"], h100["tp"], h100["pp"], h100["verdict"]) == (16, 2, 8, 2, "fits")


def test_plan_and_deploy_size_a_multi_node_set_alike():
    """The same set (16 H100 SXM, TP 8 x PP 2) has the same need in plan and in deploy's search (405B: deploy
    offers no set across nodes for a model one node holds)."""
    from cardfit.services.deploy import DeployInput, candidates, settings

    inp = DeployInput(model="meta-llama/Llama-3.1-405B-Instruct", users=16, input_tokens=7000,
                      output_tokens=1192, runtime="vllm", quant="bf16", kv_dtype="bf16", gpu=("H100 SXM",),
                      max_nodes=2)
    sets, _ = settings(inp)
    cand = next(c for c in candidates(inp, sets) if c.cards == 16)
    d = plan(PlanInput(model=inp.model, quant="bf16", kv_dtype="bf16", context=8192, batch=1,
                       runtime="vllm", gpu="H100 SXM", gpus=16)).to_json()
    e = d["gpus"][0]
    assert (e["tp"], e["pp"], e["nodes"]) == (cand.tp, cand.pp, cand.nodes) == (8, 2, 2)
    assert e["need_bytes"] == cand.option.need_bytes and e["budget_bytes"] == cand.option.budget_bytes


@pytest.mark.parametrize(("runtime", "gpu", "count", "expected", "why"), [
    ("vllm", "H100 SXM", 16, (8, 2, 8, 2), "two nodes: TP 8 inside each, 2 pipeline stages"),
    ("vllm", "H100 SXM", 8, (8, 1, 8, 1), "one node: all tensor parallel"),
    ("vllm", "H100 SXM", 24, (8, 3, 8, 3), "three nodes"),
    ("llama.cpp", "RTX 4090", 4, (4, 1, 1, 4), "llama.cpp splits layers over the cards (-sm layer)"),
])
def test_shape_of_a_set(runtime, gpu, count, expected, why):
    from cardfit.catalog.models import default_models

    rt = default_runtimes().get(runtime)
    m = default_models().get(L70)
    s = shape_of(rt, count, m, default_rental().node_size)
    assert (s.per_node, s.nodes, s.tp, s.pp) == expected, why


@pytest.mark.parametrize(("runtime", "gpu", "most"), [
    ("vllm", "H100 SXM", 64), ("vllm", "MI300X", 64), ("vllm", "L40S", 8), ("vllm", "H100 NVL", 8),
    ("tgi", "H100 SXM", 8), ("llama.cpp", "H100 SXM", 8), ("ollama", "RTX 4090", 8),
])
def test_which_sets_span_nodes(runtime, gpu, most):
    """Across nodes only with pipeline parallelism (not TGI, not llama.cpp / Ollama) and only for cards sold
    in multi-node servers (NVLink / Infinity Fabric; a PCIe or bridged card stays in its box)."""
    from cardfit.catalog.models import default_models

    rules = default_rental()
    m = default_models().get(L70)
    rt, card = default_runtimes().get(runtime), default_gpus().get(gpu)
    got = shapes(rt, card, m, rules.set_sizes, rules.node_size, 8)
    assert max(s.cards for s in got) == most
    assert [s.cards for s in got] == sorted(s.cards for s in got)


def test_an_mla_cache_is_copied_per_tp_group_not_per_card():
    """DeepSeek's latent cache is whole on every rank of a TP group (vLLM's MLA backends): 8 copies on a node
    of 8, still 8 (not 16) on two nodes with pipeline stages."""
    from cardfit.catalog.models import default_models

    m = default_models().get("deepseek-ai/DeepSeek-V3")
    s = shape_of(default_runtimes().get("vllm"), 16, m, 8)
    assert (s.tp, s.pp) == (8, 2) and kv_replication(m, s.tp) == 8.0


def test_max_context_on_two_nodes_counts_one_cache(run_json):
    """max-context on 16 H100 SXM: the cache bytes it allows are what 16 cards hold beside the weights, not
    half of it (the old single TP group of 16 copied Llama 3.1 70B's 8 KV heads twice)."""
    d = run_json("max-context", L70, "--gpu", "H100 SXM", "--gpus", "16",
                 "--batch", "64", "--quant", "bf16", "--allow-long-context")
    one = run_json("plan", L70, "--gpu", "H100 SXM", "--gpus", "16", "--batch", "64", "--quant", "bf16",
                   "--context", str(d["max_context_tokens"]), "--allow-long-context")
    e = one["gpus"][0]
    assert e["verdict"] in ("fits", "tight") and (e["tp"], e["pp"]) == (8, 2)
    mem = one["memory"]
    assert e["need_bytes"] == mem["weights_bytes"] + mem["kv_cache_bytes"] + 16 * (
        mem["overhead_bytes"] + mem["activation_bytes"])

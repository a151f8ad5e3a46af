"""`cardfit plan` / `max-context` / catalogs as scripts and people use them."""

from __future__ import annotations

import json

import pytest

from cardfit.units import GIB


def test_plan_json_keys(run_json):
    r = run_json("plan", "--params", "7000000000", "--layers", "32", "--kv-heads", "8", "--head-dim", "128",
                 "--quant", "bf16", "--context", "8192")
    assert set(r) >= {"model", "inputs", "memory", "gpus", "speed", "cost"}
    mem = r["memory"]
    assert mem["total_bytes"] == (mem["weights_bytes"] + mem["kv_cache_bytes"] + mem["overhead_bytes"]
                                  + mem["activation_bytes"])
    assert all(isinstance(mem[k], int) for k in ("weights_bytes", "kv_cache_bytes", "total_bytes"))
    assert mem["weights_bytes"] == 14_000_000_000
    assert mem["kv_cache_bytes"] == 32 * 8 * 128 * 2 * 2 * 8192
    g = r["gpus"][0]
    assert {"gpu", "count", "usable_bytes", "free_bytes", "verdict", "monthly_usd",
            "decode_tokens_per_s"} <= set(g)
    assert r["inputs"]["runtime"] == "vllm"


def test_plan_ollama_tag_defaults(run_json):
    """An Ollama tag plans for Ollama: Q4_K_M, and the context Ollama picks from VRAM (its num_ctx default by
    VRAM)."""
    r = run_json("plan", "llama3.1:8b", "--gpu", "RTX 4090")
    assert r["inputs"]["runtime"] == "ollama" and r["inputs"]["quant"] == "Q4_K_M"
    assert r["inputs"]["context"] == 32768  # 24,564 MiB reported: Ollama's 23 GiB cut-off gives 32K
    assert r["gpus"][0]["gpu"] == "RTX 4090" and len(r["gpus"]) == 1
    r8 = run_json("plan", "llama3.1:8b", "--gpu", "RTX 4060")
    assert r8["inputs"]["context"] == 4096
    r44 = run_json("plan", "llama3.1:8b", "--gpu", "L40S")
    assert r44["inputs"]["context"] == 32768  # "48 GB" L40S reports 46,068 MiB = 45.0 GiB: under 47 GiB
    r80 = run_json("plan", "llama3.1:8b", "--gpu", "A100 SXM 80GB")
    assert r80["inputs"]["context"] == 131072  # 256K default capped at the model's maximum


def test_plan_tag_with_quant_suffix(run_json):
    r = run_json("plan", "qwen3:8b-q8_0", "--gpu", "RTX 4090")
    assert r["inputs"]["quant"] == "Q8_0" and r["model"]["id"] == "qwen3-8b"


def test_gpu_names_match_loosely(run_json):
    for name in ("RTX 4090", "rtx4090", "GeForce RTX 4090", "4090", "RTX-4090 24GB"):
        assert run_json("plan", "llama3.1:8b", "--gpu", name)["gpus"][0]["gpu"] == "RTX 4090"
    assert run_json("plan", "llama3.1:8b", "--gpu", "H100 SXM")["gpus"][0]["gpu"] == "H100 SXM"
    assert run_json("plan", "llama3.1:8b", "--gpu", "h200")["gpus"][0]["gpu"] == "H200 SXM"


def test_kv_dtype_halves_cache(run_json):
    f16 = run_json("plan", "llama-3.1-8b", "--gpu", "H100", "--context", "32768")["memory"]["kv_cache_bytes"]
    fp8 = run_json("plan", "llama-3.1-8b", "--gpu", "H100", "--context", "32768", "--kv-dtype", "fp8")
    q4 = run_json("plan", "llama-3.1-8b", "--gpu", "H100", "--context", "32768", "--kv-dtype", "q4_0",
                  "--runtime", "llama.cpp")
    assert fp8["memory"]["kv_cache_bytes"] * 2 == f16
    assert q4["memory"]["kv_cache_bytes"] == f16 * 18 // 64


def test_parallel_multiplies_kv(run_json):
    one = run_json("plan", "llama3.1:8b", "--gpu", "RTX 4090", "--context", "8192")["memory"][
        "kv_cache_bytes"
    ]
    four = run_json("plan", "llama3.1:8b", "--gpu", "RTX 4090", "--context", "8192", "--parallel", "4")
    assert four["memory"]["kv_cache_bytes"] == 4 * one


def test_vllm_reserves_utilization(run_json):
    r = run_json("plan", "llama-3.1-8b", "--gpu", "H100 SXM", "--runtime", "vllm@0.33.0", "--context", "8192")
    g = r["gpus"][0]
    cuda_total = 81559 * 2**20 - 493_921_239  # nvidia-smi total less the driver's reserve (runtimes.toml)
    # vLLM's default, 0.92 from 0.20.0 (vllm/config/cache.py CacheConfig in the PyPI wheels 0.20.0-0.33.0)
    assert g["budget_bytes"] == int(cuda_total * 0.92)
    assert g["free_bytes"] == g["budget_bytes"] - g["need_bytes"]
    r95 = run_json("plan", "llama-3.1-8b", "--gpu", "H100 SXM", "--runtime", "vllm@0.33.0", "--context",
                   "8192", "--gpu-memory-utilization", "0.95")
    assert r95["gpus"][0]["budget_bytes"] == int(cuda_total * 0.95)
    # 0.34.0 sizes the KV cache from measured memory (utilization 1.0): the card less the CUDA context and
    # the margin, max(1 GiB, 0.75 x the transient peak) (vllm/v1/worker/extensible_kv_cache.py
    # measure_kv_cache_bytes)
    now = run_json("plan", "llama-3.1-8b", "--gpu", "H100 SXM", "--runtime", "vllm", "--context", "8192")
    margin = max(2**30, int(0.75 * now["memory"]["activation_bytes"]))
    assert now["gpus"][0]["budget_bytes"] == cuda_total - 665_719_931 - margin


def test_offload_verdict_on_small_card(run_json):
    r = run_json("plan", "llama3.3:70b", "--gpu", "RTX 4090")
    g = r["gpus"][0]
    assert g["verdict"] == "offload" and 0 < g["gpu_layer_fraction"] < 1


def test_multi_card_when_no_single_card_holds_it(run_json):
    r = run_json("plan", "llama-3.1-405b", "--quant", "fp8", "--context", "8192", "--priced")
    best = r["gpus"][0]
    assert best["count"] in (4, 8) and best["verdict"] in ("fits", "tight")


def test_max_context(run_json):
    r = run_json("max-context", "llama3.1:8b", "--gpu", "RTX 4090")
    assert 60_000 < r["max_context_tokens"] <= 131_072
    r2 = run_json("max-context", "llama-3.1-8b", "--gpu", "RTX 4090", "--quant", "bf16", "--runtime", "vllm")
    assert r2["max_context_tokens"] < r["max_context_tokens"]


def test_max_context_is_the_edge(run_json):
    """One token more than max-context must not fit (or must exceed the model's maximum)."""
    args = ("llama-3.1-8b", "--gpu", "RTX 4060 Ti 16GB", "--quant", "Q8_0", "--runtime", "llama.cpp")
    r = run_json("max-context", *args)
    n = r["max_context_tokens"]
    assert r["limited_by"] == "memory" and 30_000 < n < 131_072
    at = run_json("plan", *args, "--context", str(n))
    assert at["gpus"][0]["free_bytes"] >= 0
    over = run_json("plan", *args, "--context", str(n + 256))
    assert over["gpus"][0]["free_bytes"] < 0


def test_catalog_listings(run_json):
    g = run_json("gpus")["gpus"]
    assert len(g) >= 40 and all(isinstance(x["usable_bytes"], int) for x in g)
    h200 = next(x for x in g if x["name"] == "H200 SXM")
    assert h200["usable_bytes"] == 143_771 * 2**20 and h200["monthly_usd"] == 2290
    assert h200["usd_per_gb_month"] == 16.24  # the GPU Rent Hub guide section 06
    m = run_json("models")["models"]
    assert any(x["id"] == "llama-3.1-8b" and x["kv_bytes_per_token"] == 131072 for x in m)
    q = run_json("quants")
    assert any(t["name"] == "Q4_K" and t["bits_per_weight"] == 4.5 for t in q["types"])
    assert any(x["name"] == "Q4_K_M" for x in q["gguf_mixes"])


def test_human_output_labels_units(run_cli):
    code, out, _ = run_cli("plan", "llama3.1:8b", "--gpu", "RTX 4090")
    assert code == 0 and "Sizes in GB (10^9 bytes)" in out and "fits" in out
    code, out, _ = run_cli("plan", "llama3.1:8b", "--gpu", "RTX 4090", "--unit", "GiB")
    assert code == 0 and "usable GiB" in out and f"{24564 * 2**20 / GIB:.1f}" in out


def test_help_has_examples(run_cli):
    for cmd in ("plan", "max-context", "gpus", "models", "quants"):
        code, out, _ = run_cli(cmd, "--help")
        assert code == 0 and "Examples:" in out and f"cardfit {cmd}" in out


def test_json_is_one_object(run_cli):
    code, out, _ = run_cli("plan", "llama3.1:8b", "--json")
    assert code == 0
    json.loads(out)


def test_group_size_as_a_parameter(run_json):
    """INT4 with group scales: 4 bits + one fp16 scale + one 4-bit zero per group."""
    g128 = run_json("plan", "--params", "7e9", "--layers", "32", "--kv-heads", "8", "--head-dim", "128",
                    "--quant", "awq", "--context", "4096", "--gpu", "H100")
    g32 = run_json("plan", "--params", "7e9", "--layers", "32", "--kv-heads", "8", "--head-dim", "128",
                   "--quant", "int4-g32", "--context", "4096", "--gpu", "H100")
    assert g128["memory"]["bits_per_weight"] == pytest.approx(4 + 20 / 128, abs=1e-3)
    assert g32["memory"]["bits_per_weight"] == pytest.approx(4 + 20 / 32, abs=1e-3)


def test_group_size_must_be_a_power_of_two(run_cli):
    code, _, err = run_cli("plan", "llama-3.1-8b", "--quant", "int4-g100")
    assert code == 2 and "power of two" in err


def test_max_sequences_is_the_edge(run_json):
    args = ("llama-3.1-8b", "--gpu", "H100 SXM", "--context", "8192", "--runtime", "vllm")
    n = run_json("max-sequences", *args)["max_sequences"]
    assert 20 < n < 200
    # on one card (a named card too small for the batch is otherwise planned as its smallest set)
    assert run_json("plan", *args, "--gpus", "1", "--batch", str(n))["gpus"][0]["free_bytes"] >= 0
    assert run_json("plan", *args, "--gpus", "1", "--batch", str(n + 1))["gpus"][0]["free_bytes"] < 0


def test_largest_model_on_a_24gb_card(run_json):
    """GPUFlow's Ollama guide: a 24 GB card runs 24B-32B models at 4-bit; 70B does not fit."""
    r = run_json("largest-model", "--gpu", "RTX 4090", "--quant", "Q4_K_M", "--runtime", "llama.cpp")
    names = [m["id"] for m in r["models"]]
    assert "qwen2.5-32b" in names and "mistral-small-24b" in names
    assert "llama-3.3-70b" not in names
    assert all(m["free_bytes"] >= 0 for m in r["models"])


def test_answers_cheapest_and_smallest(run_json):
    r = run_json("plan", "qwen2.5:14b", "--priced")
    a = r["answers"]
    assert a["cheapest_card"] == r["gpus"][0]["gpu"]
    fitting = [g for g in r["gpus"] if g["verdict"] in ("fits", "tight") and g["count"] == 1]
    assert a["smallest_card"] == min(fitting, key=lambda g: g["usable_bytes"])["gpu"]
    assert a["cheapest_set"] is None
    big = run_json("plan", "llama-3.1-405b", "--quant", "fp8", "--context", "8192", "--priced")
    assert big["answers"]["cheapest_card"] is None and big["answers"]["cheapest_set"] == "4× MI300X"


def test_a_set_beats_offload_when_no_single_card_holds_it(run_json):
    """llama.cpp could offload Kimi K2 (620 GB at Q4_K_M) to system RAM on one card, but a set of cards that
    holds it is the better answer and ranks first."""
    r = run_json("plan", "kimi-k2", "--quant", "Q4_K_M", "--context", "32768", "--priced")
    best = r["gpus"][0]
    assert best["count"] > 1 and best["verdict"] in ("fits", "tight")
    assert r["answers"]["cheapest_set"] == f"{best['count']}× {best['gpu']}"


def test_ollama_sets_use_the_context_of_all_their_vram(run_json):
    """Ollama chooses num_ctx from the total VRAM it sees: 2× A40 (90 GiB) gets the 256K tier (capped at the
    model's 128K), not the 32K a single A40 would get."""
    r = run_json("plan", "llama3.3:70b", "--priced")
    pair = next(g for g in r["gpus"] if g["gpu"] == "A40")
    assert pair["count"] == 2 and pair["context"] == 131072 and pair["verdict"] in ("fits", "tight")


def test_named_card_too_small_is_planned_as_its_smallest_set(run_json):
    """A card the user names that cannot hold the model alone: the answer is the smallest set of that card
    (issue: `--gpu MI300X` said "needs 635 GB more" where 8 of them hold 405B BF16 under vLLM)."""
    args = ("plan", "meta-llama/Llama-3.1-405B-Instruct", "--quant", "bf16", "--gpu", "MI300X", "--runtime",
            "vllm", "--context", "8192")
    d = run_json(*args)
    assert d["gpus"][0]["gpu"] == "MI300X" and d["gpus"][0]["count"] == 8
    assert d["gpus"][0]["verdict"] in ("fits", "tight")
    assert any("smallest set that does, 8× MI300X" in n for n in d["notes"])
    one = run_json(*args, "--gpus", "1")
    assert one["gpus"][0]["count"] == 1 and one["gpus"][0]["verdict"] == "no"


OFFLOADS = [
    # (model and options on one named card, cards that hold it whole, Ollama's default context on them
    # differs, why the case is tricky)
    (("llama3.1:70b", "--quant", "Q4_K_M", "--runtime", "llama.cpp", "--gpu", "RTX 4090"), 2, False,
     "llama.cpp keeps the token embedding in RAM even on the GPU path: RAM need = spilled layers + it"),
    (("deepseek-r1:70b", "--gpu", "RTX 4090"), 4, True,
     "Ollama's 32K default on 24 GiB needs 53.4 GB: 2× 4090 (51.5 GB) are short, so the set is 4"),
    (("deepseek-r1:70b", "--context", "8192", "--gpu", "RTX 4090"), 2, False,
     "a given context: Ollama's own default on more VRAM is not mentioned"),
]


@pytest.mark.parametrize(("args", "cards", "ollama_hint", "why"), OFFLOADS,
                         ids=[" ".join(c[0]) for c in OFFLOADS])
def test_an_offload_says_its_ram_and_the_set_that_holds_it_whole(run_json, args, cards, ollama_hint, why):
    """A GGUF runtime offloading on one card: the notes give the system RAM the offload needs (what `--ram-gb`
    is checked against) and the smallest set of that card holding the model whole, with both decode speeds
    as `plan --gpus N` gives them (issue 25 item 8: 2× RTX 4090 at ~18 tok/s was never mentioned)."""
    r = run_json("plan", *args)
    one, mem = r["gpus"][0], r["memory"]
    assert one["verdict"] == "offload" and one["count"] == 1
    ram_gb = (-one["free_bytes"] + mem["host_weights_bytes"]) / 1e9
    ram = [n for n in r["notes"] if n.startswith("the offload needs")]
    assert ram == [n for n in ram if f"about {ram_gb:,.1f} GB of free system RAM" in n] and len(ram) == 1
    ctx = r["inputs"]["context"]
    same = () if "--context" in args else ("--context", str(ctx))
    whole = run_json("plan", *args, "--gpus", str(cards), *same)["gpus"][0]
    assert whole["count"] == cards and whole["verdict"] in ("fits", "tight")
    line = next(n for n in r["notes"] if "hold the whole model" in n)
    assert line.startswith(f"{cards}× RTX 4090 hold the whole model at the same context ({ctx:,} tokens): "
                           f"about {whole['decode_tokens_per_s']:,.1f} tokens/s per stream, against "
                           f"{one['decode_tokens_per_s']:,.1f} with ")
    assert f"(--gpus {cards})" in line
    assert ("OLLAMA_CONTEXT_LENGTH" in line) == ollama_hint
    # the RAM stated is the RAM --ram-gb is checked against: a little less refuses the offload
    short = run_json("plan", *args, "--ram-gb", f"{ram_gb - 0.2:.1f}")["gpus"][0]
    assert short["verdict"] == "no" and f"offload needs {ram_gb:,.1f} GB of system RAM" in short["reason"]
    enough = run_json("plan", *args, "--ram-gb", f"{ram_gb + 0.2:.1f}")["gpus"][0]
    assert enough["verdict"] == "offload"


def test_no_offload_note_when_the_card_holds_it(run_json):
    r = run_json("plan", "llama3.1:8b", "--gpu", "RTX 4090")
    assert r["gpus"][0]["verdict"] in ("fits", "tight")
    assert not any("offload needs" in n or "hold the whole model" in n for n in r["notes"])


def test_plan_batch_prices_at_its_concurrency(run_json):
    """`plan --batch B` prices the aggregate of B streams, the figure `cardfit speed` shows at B (one
    throughput for one question); without --batch it prices one stream."""
    args = ("meta-llama/Llama-3.1-8B-Instruct", "--quant", "fp8", "--gpu", "H100 SXM", "--runtime", "vllm",
            "--context", "4096")
    speed = run_json("speed", *args, "--concurrency", "1,64")
    by_b = {r["concurrency"]: r["aggregate_tokens_per_s"] for r in speed["rows"]}
    batched = run_json("plan", *args, "--batch", "64")["cost"]
    assert batched["cards"][0]["tokens_per_s"] == by_b[64]
    assert batched["tokens_per_s_basis"].startswith("64 streams")
    single = run_json("plan", *args)["cost"]
    assert single["cards"][0]["tokens_per_s"] == by_b[1]
    assert batched["cards"][0]["cost_per_million_usd"] < single["cards"][0]["cost_per_million_usd"] / 10


def test_breakeven_model_takes_plans_options_and_agrees(run_json, run_cli):
    """`breakeven --model` takes plan's model and runtime options and prices the same aggregate as
    `plan --batch B` (one throughput everywhere); those options without --model are an error."""
    args = ("--gpu", "H100 SXM", "--quant", "fp8", "--runtime", "vllm", "--context", "4096")
    plan = run_json("plan", "meta-llama/Llama-3.1-8B-Instruct", *args, "--batch", "64")
    be = run_json("breakeven", "--model", "meta-llama/Llama-3.1-8B-Instruct", *args, "--concurrency", "64")
    tps = plan["cost"]["cards"][0]["tokens_per_s"]
    assert any(f"{tps:,.0f} tok/s in all" in n for n in be["notes"])
    code, _, err = run_cli("breakeven", "--hourly", "1", "--tokens-per-s", "100", "--kv-dtype", "fp8")
    assert code == 2 and err.strip() == ("Error: --kv-dtype describes the model's runtime: it goes with "
                                         "--model M --gpu G")

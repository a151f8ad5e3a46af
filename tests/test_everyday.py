"""Everyday questions a new user asks, answered the same way whichever way the model or the option is named
(issue: "one answer everywhere"). Each case was a wrong or confusing answer before."""

from __future__ import annotations

import pytest

# Ollama's library serves a bare name as its ':latest' tag, the Q4_K_M build of the default size
# (https://ollama.com/library/llama3.2 : "latest" = 3b, Q4_K_M; https://ollama.com/library/gemma3 : "latest"
# = 4b, Q4_K_M; https://ollama.com/library/mistral : "latest" = 7b, Q4_K_M). Before, llama3.2 and gemma3
# were read as Hugging Face names and planned as vLLM BF16 at 128K while mistral planned for Ollama.
BARE_OLLAMA = [
    ("llama3.2", "Llama 3.2 3B"),
    ("gemma3", "Gemma 3 4B"),
    ("mistral", "Mistral 7B v0.3"),
    ("llama3.1", "Llama 3.1 8B"),
]


@pytest.mark.parametrize(("name", "model"), BARE_OLLAMA, ids=[n for n, _ in BARE_OLLAMA])
def test_a_bare_ollama_name_plans_for_ollama(run_json, name, model):
    r = run_json("plan", name, "--gpu", "RTX 4090")
    assert r["model"]["name"] == model
    assert (r["inputs"]["runtime"], r["inputs"]["quant"]) == ("ollama", "Q4_K_M")
    assert r["inputs"]["context_source"].startswith("Ollama default")


def test_a_hugging_face_id_still_plans_as_the_checkpoint(run_json):
    r = run_json("plan", "meta-llama/Llama-3.2-3B", "--gpu", "RTX 4090")
    assert (r["inputs"]["runtime"], r["inputs"]["quant"]) == ("vllm", "BF16")


def test_an_unknown_hugging_face_id_is_pointed_at_hub(run_cli):
    code, out, err = run_cli("plan", "some-org/some-model-7b")
    assert (code, out) == (2, "")
    assert err == ("Error: unknown model 'some-org/some-model-7b'; add --hub to read it from the Hugging "
                   "Face Hub; `cardfit models` lists the built-in ones\n")
    code, _, err = run_cli("plan", "unknown-model-name")  # not org/name: no --hub hint
    assert code == 2 and "--hub" not in err


def test_largest_model_rejects_an_unknown_quant(run_cli):
    code, out, err = run_cli("largest-model", "--gpu", "RTX 4090", "--quant", "Q9_K")
    assert (code, out) == (2, "")
    assert err.startswith("Error: unknown quantization 'Q9_K'; did you mean ")


def test_largest_model_says_the_card_cannot_run_the_format(run_cli):
    # the RTX 3090 (Ampere) has no FP8 tensor cores (NVIDIA Ampere GA102 whitepaper)
    code, out, err = run_cli("largest-model", "--gpu", "RTX 3090", "--quant", "fp8")
    assert (code, out) == (2, "")
    assert err == ("Error: RTX 3090 cannot run FP8 (E4M3) (no FP8 support), so no model fits at it; try "
                   "--quant int8, Q8_0 or Q4_K_M\n")


def test_max_context_names_the_offload_plan_offers(run_cli, run_json):
    plan = run_json("plan", "deepseek-r1:70b", "--gpu", "RTX 4090")["gpus"][0]
    assert plan["verdict"] == "offload"
    code, out, err = run_cli("max-context", "deepseek-r1:70b", "--gpu", "RTX 4090")
    assert (code, out) == (2, "")
    assert "leaves no room for even one token of context on 1x RTX 4090" in err
    assert (f"with CPU offload it runs ({plan['gpu_layer_fraction']:.0%} of the layers on the GPU, the "
            f"rest in system RAM) at {plan['context']:,} tokens, about {plan['decode_tokens_per_s']:,.1f} "
            "tokens/s") in err


@pytest.mark.parametrize(("args", "message"), [
    (("speed", "llama3.1:8b", "--gpu", "RTX 4090", "--concurrency", "1,abc"),
     "Error: --concurrency takes whole numbers, separated by commas (e.g. 1,8,64) (got 'abc')\n"),
    (("speed", "llama3.1:8b", "--gpu", "RTX 4090", "--concurrency", "1,0,-3"),
     "Error: --concurrency every value must be at least 1 (got 0)\n"),  # was "(got ('1,0,-3',))"
    (("speed", "llama3.1:8b", "--gpu", "H100", "--concurrency", ",".join(["1"] * 300)),
     "Error: --concurrency takes at most 64 values (got 300)\n"),  # was "Tuple should have at most 64 items…"
    (("plan", "a" * 5000),  # was the whole 5,000 characters back, after "String should have at most"
     "Error: MODEL must be at most 4,096 characters (got '" + "a" * 59 + "… 5,000 characters)\n"),
    (("plan", ""), "Error: MODEL is empty; give a value or leave it out\n"),
    (("max-context", "--gpu", "RTX 4090"),
     "Error: give a MODEL (a catalog name such as llama3.1:8b, an Ollama tag, a Hugging Face id, a "
     "config.json, folder, .gguf or .safetensors path) or a shape (--params, --layers, --kv-heads, "
     "--head-dim); `cardfit models` lists the built-in ones\n"),
    (("breakeven", "--hourly", "1", "--model", ""),
     "Error: --model is empty; give a value or leave it out\n"),
], ids=["concurrency", "concurrency-zero", "concurrency-count", "long-model", "empty-model", "no-model",
        "breakeven-option"])
def test_messages_name_what_the_user_typed(run_cli, args, message):
    code, out, err = run_cli(*args)
    assert (code, out, err) == (2, "", message)


# ---- words and pictures --------------------------------------------------------------------------------

def _svg_texts(path) -> list[str]:
    import html
    import re

    return [html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", path.read_text())]


def test_a_one_level_speed_chart_has_an_axis(run_json, tmp_path):
    """One concurrency level used to draw an empty axis with log ticks 2^0, 2^1, 2^2 and a y range of
    ±5 tokens/s around the point; now the level is the tick and speeds start at zero."""
    pytest.importorskip("matplotlib")
    svg = tmp_path / "one.svg"
    run_json("speed", "llama3.1:8b", "--gpu", "RTX 4090", "--concurrency", "1", "--plot", str(svg))
    texts = _svg_texts(svg)
    assert "1" in texts and not any("^" in t or "$" in t for t in texts)
    assert texts.count("0") == 2  # both y axes start at zero


def test_money_in_chart_labels_is_text_not_math(run_json, tmp_path):
    pytest.importorskip("matplotlib")
    svg = tmp_path / "be.svg"
    run_json("breakeven", "--hourly", "2", "--tokens-per-s", "20", "--api-price", "2", "--plot", str(svg))
    texts = _svg_texts(svg)
    assert "API at $2/M $2.00/M" in texts  # two "$" used to be read as mathtext: "API at 2/M2.00/M"
    assert any(t.endswith(": cannot break even even at full use") for t in texts)
    assert not any("% duty)" in t and "never" in t for t in texts)


def test_no_negative_zero():
    from cardfit.units import fmt_bytes

    assert fmt_bytes(-40_000_000) == "0.0 GB" and fmt_bytes(-60_000_000) == "-0.1 GB"
    assert fmt_bytes(-4_000, "GiB", 2) == "0.00 GiB"


def test_one_sequence_is_singular(run_cli):
    code, out, _ = run_cli("max-context", "llama3.1:8b", "--gpu", "RTX 4090")
    assert code == 0 and "KV f16, 1 sequence)" in out and "(s)" not in out
    code, out, _ = run_cli("max-context", "llama3.1:8b", "--gpu", "RTX 4090", "--batch", "2")
    assert code == 0 and "KV f16, 2 sequences)" in out


# ---- sources a user can look up -------------------------------------------------------------------------

SEED_REF = r"(?i)\bseeds?\s*0\d\d|seeds/0\d\d|\bseed (default|rule|tiers)\b|the seeds?'s?\b"


def _strings(x):
    if isinstance(x, str):
        yield x
    elif isinstance(x, dict):
        for v in x.values():
            yield from _strings(v)
    elif isinstance(x, list | tuple):
        for v in x:
            yield from _strings(v)


def test_data_sources_cite_the_guides_not_seed_files():
    """Every string value in the catalogs (sources, notes) names a public source or says "rule of thumb";
    an internal document number means nothing to a user."""
    import re
    import tomllib

    from .conftest import ROOT

    bad = []
    for path in sorted((ROOT / "src" / "cardfit" / "data").rglob("*.toml")):
        for s in _strings(tomllib.loads(path.read_text())):
            if re.search(SEED_REF, s):
                bad.append(f"{path.name}: {s[:80]}")
    assert not bad, bad


@pytest.mark.parametrize("args", [
    ("plan", "llama3.1:8b", "--gpu", "RTX 4090"), ("plan", "llama3.1:70b", "--headroom", "1.5"),
    ("finetune", "shape-70b", "--method", "full", "--flat-activations", "--priced"),
    ("breakeven", "--hourly", "1", "--tokens-per-s", "100"), ("apis",), ("speed", "shape-7b", "--gpu", "A40"),
], ids=lambda a: " ".join(a[:2]))
def test_answers_and_help_never_say_seed(run_cli, args):
    import re

    for extra in ((), ("--json",), ("--help",)):
        code, out, err = run_cli(*args, *extra)
        assert code == 0, err
        assert not re.search(SEED_REF, out), re.search(SEED_REF, out)


def test_the_web_page_never_says_seed():
    import re

    from .conftest import ROOT

    static = ROOT / "src" / "cardfit" / "web" / "static"
    for f in static.iterdir():
        assert not re.search(r"(?i)\bseed", f.read_text()), f.name


@pytest.mark.parametrize(("args", "key"), [
    (("plan", "llama3.1:8b", "--gpu", "RTX 4090"), lambda r: r["cost"]["hours_per_month"]),
    (("breakeven", "--gpu", "RTX 4090", "--tokens-per-s", "90"), lambda r: r["hours_per_month"]),
    (("deploy", "llama3.1:8b", "--users", "10"), lambda r: r["hours_per_month"]),
], ids=["plan", "breakeven", "deploy"])
def test_every_cost_answer_names_the_month(run_cli, run_json, args, key):
    from cardfit.core.cost import HOURS_PER_MONTH

    assert key(run_json(*args)) == HOURS_PER_MONTH == 720
    code, out, _ = run_cli(*args, env={"COLUMNS": "200"})
    assert code == 0 and "720 h" in out


@pytest.mark.parametrize("model", ["bge-m3", "BAAI/bge-reranker-v2-m3"])
def test_an_encoder_plan_says_it_has_no_kv_cache(run_cli, model):
    """An embedding or reranker model is answered in its own terms: no "KV f16" in the header and no
    "0 B/token × 4K × 1" line for a cache it never has."""
    code, out, err = run_cli("plan", model, "--gpu", "T4", env={"COLUMNS": "200"})
    assert code == 0, err
    assert "· no KV cache" in out.splitlines()[0] and "KV f16" not in out and "B/token" not in out
    assert "none: the model reads each input whole and keeps no cache between tokens" in out


def test_a_decoder_embedding_model_keeps_its_kv_cache_in_the_header(run_cli):
    """Qwen3 Embedding is a decoder: llama.cpp keeps a KV cache for it (the memory table counts it), so the
    header names its type instead of saying there is none."""
    code, out, err = run_cli("plan", "qwen3-embedding:8b", "--gpu", "RTX 4090", env={"COLUMNS": "200"})
    assert code == 0, err
    assert "· KV f16" in out.splitlines()[0] and "no KV cache" not in out.splitlines()[0]
    assert "147,456 B/token" in out


@pytest.mark.parametrize("command", ["max-context", "max-sequences"])
def test_reverse_answers_of_an_encoder_say_it_has_no_kv_cache(run_cli, run_json, command):
    code, out, err = run_cli(command, "nomic-embed-text", "--gpu", "RTX 4090")
    assert code == 0, err
    assert "no KV cache" in out and "KV f16" not in out
    assert run_json(command, "nomic-embed-text", "--gpu", "RTX 4090")["kv_bytes_per_token"] == 0
    assert run_json(command, "qwen3-embedding:8b", "--gpu", "RTX 4090")["kv_bytes_per_token"] == 147_456


def test_largest_model_plans_every_model_at_its_own_quantization(run_json):
    """Without --quant each model is planned at its checkpoint's own format: a catalog id that is also an
    Ollama library name (command-r7b, deepseek-r1) was planned as the Q4_K_M Ollama build, so Command R7B
    led a 16 GB card's list of BF16 models."""
    rows = run_json("largest-model", "--gpu", "RTX 4060 Ti 16GB")["models"]
    assert rows and {(r["quant"], r["runtime"]) for r in rows} == {("BF16", "vllm")}
    rows = run_json("largest-model", "--gpu", "H200", "--gpus", "8")["models"]
    # its checkpoint, not Q4_K_M
    assert {r["id"]: r["quant"] for r in rows}["deepseek-r1-671b"] == "FP8 (E4M3)"


# ---- a format the runtime cannot load --------------------------------------------------------------------

@pytest.mark.parametrize("quant", ["fp8", "awq", "gptq", "nf4", "int8"])
def test_an_ollama_tag_at_a_checkpoint_format_is_planned_for_vllm(run_json, quant):
    """GGUF (what Ollama and llama.cpp load) has no FP8, AWQ/GPTQ, NF4 or INT8 type (ggml.h enum ggml_type):
    `llama3.1:8b --quant fp8` was planned as Ollama at FP8, with an embedding 'kept in system RAM'."""
    out = run_json("plan", "llama3.1:8b", "--gpu", "H100", "--quant", quant)
    assert out["inputs"]["runtime"] == "vllm"
    assert any("checkpoint format that Ollama and llama.cpp do not load" in n for n in out["notes"])


@pytest.mark.parametrize("quant", ["bf16", "fp16", "Q8_0", "mxfp4"])
def test_an_ollama_tag_at_a_gguf_format_stays_on_ollama(run_json, quant):
    assert run_json("plan", "llama3.1:8b", "--gpu", "H100", "--quant", quant)["inputs"]["runtime"] == "ollama"


@pytest.mark.parametrize(("args", "message"), [
    (("--runtime", "ollama", "--gpu", "H100"),
     "Error: Ollama loads GGUF files, which have no INT4 g128 (AWQ/GPTQ) weights; pick a GGUF type (Q4_K_M, "
     "Q8_0, …) or bf16, or a runtime that loads checkpoints (--runtime vllm)\n"),
    (("--gpu", "M3 Max 64GB"),
     "Error: llama.cpp (llama-server / llama-cli) loads GGUF files, which have no INT4 g128 (AWQ/GPTQ) "
     "weights (and the checkpoint runtimes do not run on Apple Metal); pick a GGUF type (Q4_K_M, Q8_0, …) "
     "or bf16\n"),
], ids=["ollama", "apple"])
def test_a_gguf_runtime_refuses_a_checkpoint_format(run_cli, args, message):
    assert run_cli("plan", "llama3.1:8b", "--quant", "awq", *args) == (2, "", message)


def test_deploy_serves_an_ollama_tag_at_fp8_on_a_checkpoint_runtime(run_json):
    best = run_json("deploy", "llama3.1:8b", "--users", "20", "--quant", "fp8")["best"]
    assert best["runtime"] not in ("ollama", "llama.cpp") and best["quant"] == "FP8 (E4M3)"


@pytest.mark.parametrize(("text", "message"), [
    ('[[gpu]]\nid = "x"\nname = "X"\nusable_bytes = 25769803776\n', "gpu 'x': missing key 'vendor'"),
    ('[[gpu]]\nid = "x"\nname = "X"\nvendor = "nvidia"\nusable_bytes = "lots"\n',
     "gpu 'x': usable_bytes must be a positive integer"),
], ids=["missing-key", "bad-bytes"])
def test_a_bad_user_catalog_row_names_the_file_and_the_key(run_cli, tmp_path, text, message):
    """Was "Error: gpu 'x': Gpu() missing required argument: 'vendor'", without the file."""
    cat = tmp_path / "mine.toml"
    cat.write_text(text)
    code, out, err = run_cli("plan", "llama3.1:8b", "--gpu", "X", "--catalog", str(cat))
    assert (code, out, err) == (2, "", f"Error: {cat}: {message}\n")


@pytest.mark.parametrize(("model", "mmproj"), [("llama3.2-vision:11b", True), ("gemma3:12b", True),
                                               ("Qwen/Qwen2.5-VL-7B-Instruct", False)])
def test_a_vision_model_plan_names_its_vision_encoder(run_json, model, mmproj):
    """The vision tower is counted in the weights; the plan says how much of them it is (for llama.cpp and
    Ollama: the F16 projector file, which the weights by type show as F16)."""
    from cardfit.catalog.models import default_models

    out = run_json("plan", model, "--gpu", "H100")
    m = default_models().get(out["model"]["id"])
    note = next(n for n in out["notes"] if "vision encoder" in n)
    assert f"({(m.params - m.text_params) / 1e9:,.2f}B parameters" in note
    if mmproj:
        mm = (m.params - m.text_params) * 2
        assert f"{mm / 1e9:,.2f} GB as the F16 projector file" in note
        assert out["memory"]["weights_by_type"]["F16"] >= mm


def test_a_text_model_plan_has_no_vision_note(run_json):
    assert not any("vision encoder" in n for n in run_json("plan", "llama3.1:8b", "--gpu", "H100")["notes"])


@pytest.mark.parametrize("args", [
    ("speed", "nomic-embed-text", "--gpu", "T4"),
    ("speed", "BAAI/bge-reranker-v2-m3", "--gpu", "T4"),
    ("breakeven", "--model", "bge-m3", "--gpu", "L4"),
    ("deploy", "nomic-embed-text", "--users", "10"),
], ids=["speed-embed", "speed-rerank", "breakeven", "deploy"])
def test_an_encoder_has_no_decode_speed_anywhere(run_cli, args):
    """`speed` printed 'Decode: ceiling 1,170.2 tokens/s' and 'KV cache room: 0 sequences' for an embedding
    model, breakeven priced its 'output tokens'; `cardfit plan` answers it in input tokens/s."""
    code, out, err = run_cli(*args)
    assert (code, out) == (2, "")
    assert "it generates no tokens, so it has no decode speed and no output tokens to serve or price" in err
    assert "`cardfit plan MODEL --gpu G` gives its throughput in input tokens/s" in err


def test_the_docs_never_say_seed():
    """The README and docs/ cite the guides by title (the `seed_rule` JSON key keeps its 0.3.0 name)."""
    import re

    from .conftest import ROOT

    for f in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        hits = re.findall(r"(?i).{0,30}\bseeds?\b.{0,30}", f.read_text())
        assert not hits, (f.name, hits)


def test_deploy_on_an_unpriced_card_takes_the_fewest_cards(run_cli, run_json):
    """A card with no rental price has no cost to rank by: deploy printed 'Cheapest … 20× RTX PRO 6000
    Blackwell Max-Q (20 replicas) · $0/month, $0.000 per M' (every count 'cost' $0, the fastest won)."""
    args = ("deploy", "llama3.1:70b", "--users", "20", "--gpu", "RTX PRO 6000 Blackwell Server Edition")
    r = run_json(*args)
    assert r["best"]["monthly_usd"] is None
    fewest = r["best"]["count"]
    assert fewest == min(d["count"] for d in r["pareto"]) <= 2
    code, out, _ = run_cli(*args, env={"COLUMNS": "200"})
    assert code == 0
    assert f"Fewest cards that meet every target: {fewest}× RTX PRO 6000 Blackwell Server" in out
    assert "no rental price in the catalog" in out and "$0/month" not in out and "0.000" not in out


def test_a_deploy_chart_of_unpriced_cards_is_not_empty(run_json, tmp_path):
    """With no rental price every point used to be dropped (an empty chart); the card count is drawn."""
    pytest.importorskip("matplotlib")
    svg = tmp_path / "deploy.svg"
    run_json("deploy", "llama3.1:70b", "--users", "20", "--gpu", "RTX PRO 6000 Blackwell Server Edition",
             "--plot", str(svg))
    texts = _svg_texts(svg)
    assert "cards (no rental price in the catalog)" in texts
    assert any(t.startswith(("1× RTX PRO 6000 Blackwell Server llama.cpp",
                             "2× RTX PRO 6000 Blackwell Server llama.cpp")) for t in texts), texts


# What `ollama pull NAME` fetches (https://ollama.com/library/<family>/tags): a bare name and NAME:latest are
# the tag the library marks latest (deepseek-r1 = 8b, the R1-0528 Qwen3 distill, Q4_K_M; gpt-oss = 20b,
# MXFP4); an -it-qat tag is Gemma 3's quantization-aware-trained Q4_0 build. Before, deepseek-r1 planned the
# 671B model, gpt-oss:latest a Q4_K_M build and gemma3:27b-it-qat was unknown.
OLLAMA_PULL = [
    ("deepseek-r1", "deepseek-r1-0528-qwen3-8b", "Q4_K_M"),
    ("deepseek-r1:latest", "deepseek-r1-0528-qwen3-8b", "Q4_K_M"),
    ("deepseek-r1:8b", "deepseek-r1-0528-qwen3-8b", "Q4_K_M"),
    ("deepseek-r1:671b", "deepseek-r1-671b", "Q4_K_M"),
    ("gpt-oss", "gpt-oss-20b", "MXFP4"),
    ("gpt-oss:latest", "gpt-oss-20b", "MXFP4"),
    ("gpt-oss:120b", "gpt-oss-120b", "MXFP4"),
    ("gemma3:27b-it-qat", "gemma-3-27b", "Q4_0_QAT"),
    ("gemma3:4b-it-qat", "gemma-3-4b", "Q4_0_QAT"),
    ("gemma3:27b", "gemma-3-27b", "Q4_K_M"),
    ("qwen3:latest", "qwen3-8b", "Q4_K_M"),
    ("llama3.2:latest", "llama-3.2-3b", "Q4_K_M"),
    ("deepseek-v3:latest", "deepseek-v3", "Q4_K_M"),
]


@pytest.mark.parametrize(("name", "model_id", "quant"), OLLAMA_PULL, ids=[n for n, _, _ in OLLAMA_PULL])
def test_an_ollama_name_plans_what_ollama_pull_fetches(run_json, name, model_id, quant):
    r = run_json("plan", name, "--gpu", "RTX 4090")
    assert r["model"]["id"] == model_id
    assert (r["inputs"]["runtime"], r["inputs"]["quant"]) == ("ollama", quant)


def test_the_671b_r1_keeps_its_checkpoint_names(run_json):
    for name in ("deepseek-r1-671b", "deepseek-ai/DeepSeek-R1"):
        r = run_json("plan", name, "--gpu", "H200", "--gpus", "8")
        assert r["model"]["id"] == "deepseek-r1-671b"
        assert (r["inputs"]["runtime"], r["inputs"]["quant"]) == ("vllm", "FP8 (E4M3)")


def test_a_qat_build_counts_its_f16_embeddings(run_json):
    """Google's QAT GGUF is Q4_0 with the token embeddings left at F16: the weights exceed llama.cpp's Q4_0
    file type by exactly the embedding table's F16 - Q6_K difference (2 - 210/256 bytes per parameter: with
    tied embeddings llama-quantize gives the table the output's Q6_K)."""
    from cardfit.catalog.models import default_models

    m = default_models().get("gemma-3-27b")
    qat, q4 = (run_json("plan", "gemma3:27b-it-qat", "--quant", q, "--gpu", "RTX 4090")["memory"]
               ["weights_bytes"] for q in ("Q4_0_QAT", "Q4_0"))
    assert qat - q4 == pytest.approx(m.vocab * m.hidden * (2 - 210 / 256), rel=1e-3)
    # Google's text GGUF is 17.2 GB; with the 0.85 GB F16 vision projector Ollama loads beside it
    assert qat / 1e9 == pytest.approx(17.2 + 0.85, rel=0.02)


def test_a_name_that_is_also_the_checkpoint_id_deploys_on_every_runtime(run_json):
    """'deepseek-v3' is Ollama's library name and the catalog id of the checkpoint: deploy searches the
    checkpoint runtimes too (as for the Hub id), not only llama.cpp/Ollama; an explicit tag stays GGUF."""
    from cardfit.catalog.runtimes import servers

    gguf = {r.id for r in servers("gguf")}
    names = ("deepseek-v3", "deepseek-ai/DeepSeek-V3", "deepseek-v3:671b", "deepseek-v3:latest")
    bare, hub, tag, latest = (run_json("deploy", name, "--users", "32") for name in names)
    keys = ("gpu", "count", "runtime", "quant", "monthly_usd")
    # the Hub id's best (a checkpoint runtime) is among the bare name's answers, which also weigh GGUF builds
    assert {k: hub["best"][k] for k in keys} in [{k: p[k] for k in keys} for p in bare["pareto"]]
    assert hub["best"]["runtime"] not in gguf and hub["best"]["quant"] == "FP8 (E4M3)"
    assert bare["best"]["monthly_usd"] <= hub["best"]["monthly_usd"]
    for t in (tag, latest):
        assert {p["runtime"] for p in t["pareto"]} <= gguf and t["best"]["quant"] == "Q4_K_M"

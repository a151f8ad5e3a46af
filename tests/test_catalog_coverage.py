"""Catalog coverage: the generated GPU rows, Apple unified memory, and the generator staying in step with
its sourced input tables."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cardfit.catalog.gpus import default_gpus
from cardfit.errors import UnknownNameError

ROOT = Path(__file__).resolve().parent.parent
MIB = 2**20


def test_generated_catalogs_match_their_source_tables():
    """scripts/build_catalog.py --check: a hand edit of a generated file, or a table edit without a rebuild,
    fails here."""
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_catalog.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_at_least_100_gpus_each_with_sources():
    gpus = list(default_gpus())
    assert len(gpus) >= 100
    for g in gpus:
        assert g.source and g.usable_source, g.id
        assert g.bandwidth_gbps, g.id


@pytest.mark.parametrize("name,mib,why", [
    ("T4", 15360, "nvidia-smi, modal-labs/modal-client#2797"),
    ("A10", 23028, "nvidia-smi, modal-labs/modal-client#2797"),
    ("A10G", 23028, "nvidia-smi on AWS g5, NVIDIA/DCGM#232"),
    ("L4", 23034, "nvidia-smi, modal-labs/modal-client#2797"),
    ("A100 PCIe 40GB", 40960, "nvidia-smi, modal-labs/modal-client#2797"),
    ("RX 7900 XTX", 24560, "amdgpu VRAM size, ilya-zlobintsev/LACT#533"),
    # estimated by the gpus.toml rule: the sibling's reserve scaled by capacity
    ("GH200", 97871, "H100 SXM's 361 MiB reserve x 96/80"),
    ("L40", 46068, "same 48 GB board memory as the measured L40S"),
])
def test_usable_mib(name, mib, why):
    assert default_gpus().get(name).usable_bytes == mib * MIB, why


@pytest.mark.parametrize("name,mib", [
    # llama.cpp 'recommendedMaxWorkingSetSize' readings (MiB) the wired-limit rule must reproduce
    ("M1 Pro 16GB", 10922.67),  # abetlen/llama-cpp-python#687 (16 GiB machine)
    ("M1 Max 32GB", 21845.34),  # ggml-org/llama.cpp#2011
    ("M2 Max 32GB", 21845.34),  # ollama/ollama#434
    ("M1 Max 64GB", 49152.00),  # ggml-org/llama.cpp#1870
    ("M2 Max 96GB", 73728.00),  # ggml-org/llama.cpp#3213
])
def test_apple_wired_limit_reproduces_metal_readings(name, mib):
    g = default_gpus().get(name)
    assert g.unified_memory and g.stack == "metal" and g.max_count == 1
    assert abs(g.usable_bytes / MIB - mib) < 0.01


def test_apple_chip_without_size_suggests_the_sizes():
    with pytest.raises(UnknownNameError) as e:
        default_gpus().get("M3 Max")
    assert "Apple M3 Max" in str(e.value)


@pytest.mark.parametrize("name", ["T4", "A10", "A10G", "L4", "L40", "M1 16GB", "M2 Pro 32GB", "M3 Max 128GB",
                                  "M4 Max 128GB", "M3 Ultra 512GB", "M2 Ultra 192GB", "MI250", "MI325X",
                                  "MI355X", "RX 7900 XTX", "B300", "GB200", "RTX PRO 6000 Max-Q",
                                  "RTX PRO 6000 Server Edition"])
def test_cards_named_in_the_issue_resolve(name):
    assert default_gpus().get(name)


def test_apple_plan_has_no_cuda_context_and_no_host_embedding(run_json):
    """Unified memory: the GPU's share of RAM is the budget, nothing sits 'in system RAM' apart from it, and
    there is no CUDA context; vLLM (the default for a Hugging Face id) does not run on Metal."""
    out = run_json("plan", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "M3 Max 64GB")
    mem = out["memory"]
    assert mem["overhead_bytes"] == 0 and mem["host_weights_bytes"] == 0 and mem["unified_memory"]
    assert out["inputs"]["runtime"] == "llama.cpp"
    assert any("does not run on Apple Metal" in n for n in out["notes"])


def test_apple_card_from_user_catalog(run_cli, tmp_path):
    cat = tmp_path / "mac.toml"
    cat.write_text('[[gpu]]\nid = "my-mac"\nname = "My Mac"\nvendor = "apple"\nstack = "metal"\n'
                   'unified_memory = true\nmax_count = 1\nusable_bytes = 25769803776\nbandwidth_gbps = '
                   '273.0\nsource = "test"\n')
    code, out, err = run_cli("plan", "llama3.1:8b", "--gpu", "My Mac", "--catalog", str(cat))
    assert code == 0, err
    assert "kept in system RAM" not in out and "CUDA context" not in out and "Metal" in out


def test_vllm_refuses_apple_cards_in_a_listing(run_json):
    out = run_json("plan", "meta-llama/Llama-3.1-8B-Instruct")
    apple = [g for g in out["gpus"] if g["gpu"].startswith("Apple")]
    assert apple and all(g["verdict"] == "no" and "Metal" in g["reason"] for g in apple)


def test_at_least_250_models_and_tags_each_with_a_source():
    from cardfit.catalog.models import default_models

    models = list(default_models())
    tags = [t for m in models for t in m.ollama]
    assert len(models) + len(tags) >= 250
    for m in models:
        assert m.source, m.id
    for t in tags:
        assert t.source and t.quant, t.tag


@pytest.mark.parametrize("tag",
                         ["qwen2.5-coder:7b", "phi3:3.8b", "phi4-mini:3.8b", "llama3:8b", "codellama:13b",
                          "qwen2.5vl:7b", "llava:13b", "gemma3:12b", "qwq:32b", "smollm2:1.7b",
                          # VL downloads = GGUF + F16 projector; Gemma 3n's per-layer embeddings at 16 bits
                          "minicpm-v:8b", "llama3.2-vision:11b", "llama3.2-vision:90b", "moondream:1.8b",
                          "granite3.2-vision:2b", "llama4:16x17b", "gemma3n:e2b", "gemma3n:e4b",
                          "qwen:7b", "qwen:110b", "starcoder2:7b", "phi:2.7b", "glm4:9b", "exaone3.5:7.8b",
                          "command-r-plus:104b", "nemotron:70b"])
def test_ollama_weights_match_the_download(run_json, tag):
    """Ollama's listed download is the GGUF (+ the F16 vision projector for VL tags): cardfit's weights for
    the tag's own quantization land within 8 % of it (download sizes are rounded to 2 digits on the page)."""
    out = run_json("plan", tag, "--gpu", "H100")
    note = next(n for n in out["notes"] if n.startswith("Ollama lists"))
    listed = float(note.split(" as a ")[1].split(" GB")[0])
    weights = out["memory"]["file_weights_bytes"] / 1e9
    assert abs(weights - listed) / listed < 0.08, (weights, listed)


@pytest.mark.parametrize("tag", ["nomic-embed-text", "mxbai-embed-large", "bge-m3", "all-minilm:22m",
                                 "snowflake-arctic-embed2", "granite-embedding", "paraphrase-multilingual"])
def test_ollama_embedding_models_have_no_cache_and_no_decode(run_json, tag):
    out = run_json("plan", tag, "--gpu", "RTX 4090")
    assert out["memory"]["kv_cache_bytes"] == 0 and out["speed"]["decode_tokens_per_s"] is None
    assert out["task"]["task"] == "embed" and out["task"]["tokens_per_s"] > 0


def test_rerankers_answer_in_their_terms(run_json):
    out = run_json("plan", "BAAI/bge-reranker-v2-m3", "--gpu", "L4", "--context", "512")
    assert out["task"]["task"] == "rerank" and out["memory"]["kv_cache_bytes"] == 0
    assert any("reranker" in n and "scores about" in n for n in out["notes"])


@pytest.mark.parametrize("model_id,hf_params", [
    # the "Model size" each Hugging Face model page states (safetensors total); the generator counts the
    # parameters from config.json shapes alone, so a wrong shape in the source table shows up here
    ("deepseek-coder-v2-lite", 15.7e9), ("qwen3-coder-30b-a3b", 30.5e9), ("phi-3-mini", 3.82e9),
    ("phi-3-medium", 13.96e9), ("gemma-7b", 8.54e9), ("codellama-34b", 33.7e9), ("yi-34b", 34.4e9),
    ("llama-2-70b", 69.0e9), ("falcon3-7b", 7.46e9), ("granite-3.3-8b", 8.17e9), ("olmo-2-7b", 7.3e9),
    ("command-r-35b", 35.0e9), ("qwen2.5-vl-7b", 8.29e9), ("llava-1.6-7b", 7.06e9),
    ("mxbai-embed-large-v1", 335e6), ("bge-m3", 568e6), ("mistral-large-123b", 123e9), ("qwen2-72b", 72.7e9),
    ("qwen1.5-0.5b", 620e6), ("qwen1.5-7b", 7.72e9), ("qwen1.5-32b", 32.5e9), ("qwen1.5-110b", 111e9),
    ("codeqwen1.5-7b", 7.25e9), ("glm-4-9b", 9.4e9), ("exaone-3.5-7.8b", 7.82e9), ("yi-coder-9b", 8.83e9),
    ("granite-3b-code", 3.48e9), ("granite-8b-code", 8.05e9), ("command-r7b", 8.03e9),
    ("stablelm-2-1.6b", 1.64e9),
    ("embeddinggemma-300m", 303e6), ("granite-embedding-278m", 278e6),
])
def test_generated_params_match_the_model_pages(model_id, hf_params):
    from cardfit.catalog.models import default_models

    assert abs(default_models().get(model_id).params / hf_params - 1) < 0.006


def _library() -> dict:
    import tomllib

    return tomllib.loads((ROOT / "scripts" / "catalog_sources" / "models.toml").read_text(encoding="utf-8"))


def test_ollama_library_popular_families_are_one_hundred():
    popular = _library()["ollama_library"]["popular"]
    assert len(popular) == len(set(popular)) == 100


@pytest.mark.parametrize("family", _library()["ollama_library"]["popular"])
def test_each_popular_ollama_family_plans_its_latest_tag(family):
    """The bare library name is Ollama's ':latest': a catalog model with a tag of that family, planned for
    Ollama (not read as a Hugging Face name)."""
    from cardfit.services.inputs import ModelInput
    from cardfit.services.resolve import resolve

    r = resolve(ModelInput(model=family))
    assert r.ollama and r.origin == "catalog", family
    assert r.tag is not None and r.tag.tag.split(":")[0] == family, (family, r.tag)
    assert r.tag.source.startswith("https://ollama.com/library/") or r.tag.source, family


@pytest.mark.parametrize(("name", "tag"), [
    ("zephyr", "zephyr:7b"), ("wizardlm2", "wizardlm2:7b"), ("deepseek-coder", "deepseek-coder:1.3b"),
    ("qwen", "qwen:4b"), ("llama4", "llama4:16x17b"), ("mistral-small", "mistral-small:24b"),
])
def test_a_bare_name_is_its_latest_tag_not_the_models_first(name, tag):
    """Several families share one checkpoint row (zephyr and wizardlm2 are Mistral 7B v0.1 fine-tunes): the
    bare name picks its own family's tag."""
    from cardfit.services.inputs import ModelInput
    from cardfit.services.resolve import resolve

    assert resolve(ModelInput(model=name)).tag.tag == tag


# Cards that still have no dense tensor rate, each for a stated reason: Pascal runs FP16 at 1/64 of FP32 and
# has no tensor cores (a FP16 figure would be near zero, an FP32 one is not the rate the precision runs at);
# NVIDIA publishes no A10G sheet and third-party figures disagree (62.5 to 125 TFLOPS); the RTX PRO 6000
# Server sheet quotes sparse FP4 only; Apple chips from the M3 on have no published or measured GPU clock
# (M1 and M2 rows carry cores x 128 lanes x 2 x the clock github.com/philipturner/metal-benchmarks measured).
NO_RATE = {"tesla-p40", "quadro-p6000", "tesla-p4", "a10g", "rtx-pro-6000-blackwell-server"}


def test_every_card_has_a_compute_rate_or_a_stated_reason():
    missing = {g.id for g in default_gpus() if not g.tflops("bf16")}
    apple = {i for i in missing if i.startswith("apple-")}
    assert missing - apple == NO_RATE
    assert apple and all(i.startswith(("apple-m3", "apple-m4", "apple-m5")) for i in apple)


@pytest.mark.parametrize(("name", "tflops", "cores"), [
    ("Apple M1 8GB", 2.29, 7),  # metal-benchmarks: 8 cores 2.617 TFLOPS; the 7-core MacBook Air bin
    ("Apple M1 Max 64GB", 7.96, 24),  # 32 cores: 10.617 (metal-benchmarks); the 24-core bin
    ("Apple M2 Ultra 192GB", 21.47, 60),  # 76 cores would be 27.2
])
def test_apple_rate_is_the_smaller_gpu_of_the_chip(name, tflops, cores):
    g = default_gpus().find(name)
    assert g.fp16_tflops == tflops and g.gpu_cores == cores


@pytest.mark.parametrize(("name", "tflops", "why"), [
    ("RTX 5000 Ada", 261.1, "datasheet 1,044.4 FP8 sparse / 4"),
    ("RTX 4000 Ada", 106.9, "RTX 6000 Ada per-SM rate x 48 SMs x 2.175 GHz"),
    ("RTX A4000", 76.7, "datasheet 153.4 sparse / 2"),
    ("RTX A4500", 94.6, "datasheet 189.2 sparse / 2"),
    ("RTX 2080 Ti", 53.8, "Turing whitepaper, FP32 accumulate"),
    ("RTX 3090 Ti", 80.0, "GA102 whitepaper per-SM rate x 84 SMs x 1.86 GHz"),
])
def test_workstation_rates(name, tflops, why):
    assert default_gpus().get(name).tflops("fp16") == tflops, why


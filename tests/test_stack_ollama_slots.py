"""Ollama's automatic slots per model in `cardfit stack` (issue 27): from 0.2.0 until 0.10.0, with
OLLAMA_NUM_PARALLEL unset, Ollama's scheduler gives each model it loads 4 slots (2 from 0.6.7) where its
own estimate of the model at that many fits the memory then free, else 1 (server/sched.go
pickBestFullFitByLibrary; data/releases.toml auto_parallel, auto_parallel_2, parallel_default_one)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cardfit
from cardfit.catalog.gpus import default_gpus
from cardfit.catalog.models import default_models
from cardfit.catalog.quants import default_quants
from cardfit.core.kv import kv_bytes_per_token
from cardfit.errors import InputError
from cardfit.runtimes.ollama import FitEstimate, fit_estimate, ollama_graph

MIB, GIB = 2**20, 2**30
MINIMUM = 457 * MIB  # discover/gpu.go cudaMinimumMemory (data/runtimes.toml ollama context_bytes)


def _stack(models: list[tuple[str, str, str | None, int]], gpu: str, runtime: str, extra: str = "") -> dict:
    text = f'[machine]\ngpu = ["{gpu}"]\n'
    for model, role, quant, context in models:
        text += (f'\n[[model]]\nmodel = "{model}"\nrole = "{role}"\nruntime = "{runtime}"\n'
                 + (f'quant = "{quant}"\n' if quant else "") + f"context = {context}\n" + extra)
    return cardfit.stack(text=text)


def _slots(answer: dict) -> list[int]:
    return [e["slots"] for d in answer["devices"] for e in d["entries"]]


# The train-store course project's run (memory_stack_shared.toml): ollama/ollama:0.3.3 on one RTX 3060,
# llama3.1:8b-instruct-q4_K_M asked first, then gemma2:2b, both at llama-index's num_ctx 3900, flash
# attention off (0.3.3's default); its nvidia-smi table shows the two runners at 7842 and 2900 MiB, which is
# llama3.1 at 4 slots and gemma2 at 1
PAIR = [("llama-3.1-8b", "chat", "Q4_K_M", 3900), ("gemma-2-2b", "chat", "Q4_0", 3900)]


@pytest.mark.parametrize("runtime, slots", [
    ("ollama@0.3.3", [4, 1]),  # gemma2 at 4 (Ollama's estimate 4.66 GiB) > the 4.19 GiB llama3.1 leaves
    ("ollama@2024-08-05", [4, 1]),  # the release current at the run's date
    ("ollama@0.6.7", [2, 2]),  # defaultParallel = 2 (commit fe5b9bb2): both fit at 2
    ("ollama@0.1.48", [1, 1]),  # before PR #4218: NumParallel = 1
    ("ollama@0.10.0", [1, 1]),  # PR #11330: NumParallel = Uint("OLLAMA_NUM_PARALLEL", 1)
    ("ollama", [1, 1]),  # the current release: 1
])
def test_slots_by_release_on_the_train_store_card(runtime, slots):
    assert _slots(_stack(PAIR, "RTX 3060 12GB", runtime, "flash_attn = false\n")) == slots


@pytest.mark.parametrize("models, gpu, runtime, slots", [
    # an embedder gets 1 from 0.3.7 (PR #6467 'Embedding models should always be loaded with parallel=1')
    ([("llama-3.1-8b", "chat", "Q4_K_M", 8192), ("bge-m3", "embed", None, 8192)], "RTX 4090", "ollama@0.3.3",
     [4, 4]),
    ([("llama-3.1-8b", "chat", "Q4_K_M", 8192), ("bge-m3", "embed", None, 8192)], "RTX 4090", "ollama@0.3.7",
     [4, 1]),
    # a model with a projector gets 1 before 0.4.1 (ollama#4165); from 0.4.1 only mllama (commit 6cd56687)
    ([("gemma3:4b", "vision", None, 8192), ("llama3.2-vision", "vision", None, 8192)], "RTX 4090",
     "ollama@0.3.3", [1, 1]),
    ([("gemma3:4b", "vision", None, 8192), ("llama3.2-vision", "vision", None, 8192)], "RTX 4090",
     "ollama@0.4.1", [4, 1]),
    # public logs found in the code index (their repositories not named there, quoted here): a Kaggle
    # notebook's, rag-similares-ollama.ipynb (2024-08-30, Tesla T4): llama3.1 8B Q4_0 at num_ctx 2048 "will
    # fit in available VRAM in single GPU, loading ... parallel=4", runner --ctx-size 8192 --parallel 4
    ([("llama-3.1-8b", "chat", "Q4_0", 2048)], "T4", "ollama@2024-08-30", [4]),
    # a notes page, "OllamaでHello Worldを動かす" (2025-09-06), Ollama 0.7.0 on an M2 Pro 16 GB (Metal, 10.7
    # GiB available): llama2:7b Q4_0 at
    # OLLAMA_CONTEXT_LENGTH 4096 "will fit ... parallel=2 available=11453251584 required=8.8 GiB", runner
    # --ctx-size 8192 --parallel 2 (defaultParallel 2 from 0.6.7)
    ([("llama2:7b", "chat", "Q4_0", 4096)], "Apple M2 Pro 16GB", "ollama@0.7.0", [2]),
])
def test_slots_by_role_and_card(models, gpu, runtime, slots):
    assert _slots(_stack(models, gpu, runtime)) == slots


def test_ollamas_own_estimate_is_the_one_its_log_prints():
    """The same Kaggle log's "offload to cuda" line: memory.graph.full="560.0 MiB" memory.graph.partial=
    "677.5 MiB" memory.required.kv="1.0 GiB" memory.required.full="6.2 GiB" for llama3.1 8B Q4_0 at 8192
    cells (num_ctx 2048 x 4 slots), batch 512, f16 KV."""
    m, q = default_models().find("llama-3.1-8b"), default_quants().get("Q4_0")
    kv = kv_bytes_per_token(m, "f16") * 8192
    partial, full = ollama_graph(m, 512, 8192, kv)
    assert round(partial / MIB, 1) == 677.5 and round(full / MIB, 1) == 560.0 and kv == GIB
    est = fit_estimate(m, q, 8192, 512, "f16", MINIMUM)
    # the fit test reserves the larger graph; the log's full requirement counts the full one
    assert round((est.fixed + est.layers - (partial - full)) / GIB, 1) == 6.2


def test_ollamas_metal_estimate_is_the_one_its_log_prints():
    """The same M2 Pro log's "offload" line: memory.required.full="8.8 GiB" memory.required.kv="4.0 GiB"
    memory.graph.full="560.0 MiB" memory.graph.partial="560.0 MiB" for llama2 7B Q4_0 at 8192 cells: on
    Metal the partial graph is the full one and the minimum 512 MiB (gpu_darwin.go metalMinimumMemory)."""
    from cardfit.runtimes.ollama import METAL_MINIMUM_BYTES

    m, q = default_models().find("llama-2-7b"), default_quants().get("Q4_0")
    kv = kv_bytes_per_token(m, "f16") * 8192
    assert kv == 4 * GIB and round(ollama_graph(m, 512, 8192, kv)[1] / MIB, 1) == 560.0
    est = fit_estimate(m, q, 8192, 512, "f16", METAL_MINIMUM_BYTES, metal=True)
    assert round((est.fixed + est.layers) / GIB, 1) == 8.8


def test_a_stated_users_is_ollamas_one_setting_and_the_bundle_sets_it():
    explicit = _stack(PAIR[:1], "RTX 3060 12GB", "ollama@0.3.3", "users = 2\n")
    assert _slots(explicit) == [2] and "OLLAMA_NUM_PARALLEL=2" in explicit["bundle"]["text"]
    auto = _stack(PAIR, "RTX 3060 12GB", "ollama@0.3.3", "flash_attn = false\n")
    assert "OLLAMA_NUM_PARALLEL=" not in auto["bundle"]["text"]  # left to the release, as the run had it
    assert "# run Ollama 0.3.3: with OLLAMA_NUM_PARALLEL unset" in auto["bundle"]["text"]
    text = '[machine]\ngpu = ["RTX 3060 12GB"]\n[[model]]\nmodel = "llama3.1:8b"\nruntime = "ollama@0.3.3"\n'
    compose = cardfit.stack(text=text, bundle="compose")["bundle"]["text"]
    assert 'image: "ollama/ollama:0.3.3"' in compose and "OLLAMA_NUM_PARALLEL:" not in compose
    current = cardfit.stack(text=text.replace("@0.3.3", ""), bundle="compose")["bundle"]["text"]
    assert 'image: "ollama/ollama:0.33.3"' in current and 'OLLAMA_NUM_PARALLEL: "1"' in current
    assert auto["notes"][0].startswith("llama-3.1-8b: 4 slots, which Ollama 0.3.3 picks at its load")
    assert auto["notes"][1].startswith("gemma-2-2b: 1 slot, which Ollama 0.3.3 picks")


def test_two_ollama_releases_in_one_stack_are_an_error():
    text = ('[machine]\ngpu = ["RTX 4090"]\n[[model]]\nmodel = "llama3.1:8b"\nruntime = "ollama@0.3.3"\n'
            '[[model]]\nmodel = "gemma2:2b"\nruntime = "ollama@0.5.7"\n')
    with pytest.raises(InputError, match="name releases 0.3.3 and 0.5.7"):
        cardfit.stack(text=text)


def test_an_ollama_release_it_cannot_read_is_one_line():
    text = '[machine]\ngpu = ["RTX 4090"]\n[[model]]\nmodel = "llama3.1:8b"\nruntime = "ollama@banana"\n'
    with pytest.raises(InputError, match="not a ollama release"):
        cardfit.stack(text=text)


@settings(max_examples=15, deadline=None)
@given(context=st.integers(min_value=512, max_value=32768), gpu=st.sampled_from(["RTX 3060 12GB", "RTX 4090",
                                                                                "T4"]))
def test_one_model_gets_4_slots_exactly_when_its_estimate_at_4_fits_the_card(context, gpu):
    m, q = default_models().find("llama-3.1-8b"), default_quants().get("Q4_K_M")
    card = default_gpus().get(gpu)
    (slots,) = _slots(_stack([("llama-3.1-8b", "chat", "Q4_K_M", context)], gpu, "ollama@0.3.3"))
    fits = fit_estimate(m, q, context * 4, 512, "f16", MINIMUM).fits([card.usable_bytes])
    assert slots == (4 if fits else 1)


@given(fixed=st.integers(0, 10**10), layers=st.integers(0, 10**11),
       free=st.lists(st.integers(0, 10**11), min_size=1, max_size=4), more=st.integers(0, 10**10))
def test_more_free_memory_never_turns_a_fit_into_none(fixed, layers, free, more):
    est = FitEstimate(fixed, layers)
    if est.fits(free):
        assert est.fits([f + more for f in free])

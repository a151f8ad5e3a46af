"""Ollama's defaults by release (data/releases.toml, its Ollama features; issue 27/24): the default context,
OLLAMA_CONTEXT_LENGTH, OLLAMA_KV_CACHE_TYPE, flash attention, and the models its scheduler loads with one
slot whatever OLLAMA_NUM_PARALLEL says. Each row names the ollama/ollama source (file @tag) it holds."""

from __future__ import annotations

import pytest

import cardfit
from cardfit.catalog.runtimes import default_runtimes
from cardfit.errors import InputError


def _plan(model: str, runtime: str, gpu: str = "RTX 4090", **options: object) -> dict:
    return cardfit.plan(model, gpu=gpu, runtime=runtime, **options)


# (runtime, card, default context): Llama 3.1 8B (trained to 131,072 tokens) with no --context
@pytest.mark.parametrize("runtime, gpu, context", [
    ("ollama@0.1.48", "RTX 4090", 2048),  # api/types.go @v0.1.48 DefaultOptions: NumCtx: 2048
    ("ollama@0.3.3", "RTX 4090", 2048),  # api/types.go @v0.3.3: NumCtx: 2048 (no OLLAMA_CONTEXT_LENGTH)
    ("ollama@0.6.6", "H100", 2048),  # envconfig/config.go @v0.6.6: Uint("OLLAMA_CONTEXT_LENGTH", 2048)
    ("ollama@0.6.7", "RTX 4090", 4096),  # envconfig/config.go @v0.6.7: 4096 (commit 44b466ee)
    ("ollama@0.15.4", "H100", 4096),  # envconfig/config.go @v0.15.4: 4096, no VRAM tiers on an 80 GB card
    ("ollama@0.15.5", "RTX 3060 12GB", 4096),  # server/routes.go @v0.15.5: < 23 GiB -> 4096
    ("ollama@0.15.5", "RTX 4090", 32768),  # server/routes.go @v0.15.5: >= 23 GiB -> 32768
    ("ollama@0.15.5", "H100", 131072),  # >= 47 GiB -> 262144, capped at the model's 131,072
    ("ollama@2025-01-15", "RTX 4090", 2048),  # the release current then (0.5.x): 2048
    ("ollama@2025-06-01", "RTX 4090", 4096),  # 0.9.x: 4096
    ("ollama", "RTX 4090", 32768),  # the current release: the tiers (data/runtimes.toml context_tiers)
])
def test_default_context_by_release(runtime: str, gpu: str, context: int) -> None:
    inputs = _plan("llama3.1:8b", runtime, gpu)["inputs"]
    assert inputs["context"] == context and inputs["context_source"].startswith("Ollama default")


def test_an_older_default_wins_where_a_release_lacks_both() -> None:
    """profile_at applies the `without` of missing features newest first: a release before 0.6.7 lacks
    vram_context_tiers (default 4096) and context_4096 (default 2048), and must get 2048."""
    rt = default_runtimes().get("ollama@0.3.3")
    assert (rt.default_context, rt.context_tiers) == (2048, ())
    assert default_runtimes().get("ollama@0.15.4").default_context == 4096
    assert default_runtimes().get("ollama").context_tiers  # the current row keeps its tiers


# OLLAMA_KV_CACHE_TYPE: envconfig/config.go @v0.5.0 KvCacheType (absent @v0.4.7); quantized only with flash
# attention (llm/server.go @v0.5.0: '--kv-cache-type' under `if fa`)
@pytest.mark.parametrize("runtime, kv, error", [
    ("ollama@0.4.7", "q8_0", "has no 'q8_0' KV cache"),
    ("ollama@0.4.7", "f16", None),
    ("ollama@0.5.0", "q8_0", None),
    ("ollama@0.5.0", "q4_0", None),
    ("ollama", "q8_0", None),
])
def test_kv_cache_type_by_release(runtime: str, kv: str, error: str | None) -> None:
    if error:
        with pytest.raises(InputError, match=error):
            _plan("llama3.1:8b", runtime, kv_dtype=kv)
        return
    inputs = _plan("llama3.1:8b", runtime, kv_dtype=kv)["inputs"]
    assert inputs["kv_dtype"] == kv and (inputs["flash_attn"] or kv == "f16")


# flash attention with OLLAMA_FLASH_ATTENTION unset: (runtime, model, on)
@pytest.mark.parametrize("runtime, model, on", [
    ("ollama@0.3.3", "llama3.1:8b", False),  # envconfig/config.go @v0.3.3: Bool("OLLAMA_FLASH_ATTENTION")
    ("ollama@0.12.3", "qwen3:8b", False),  # @v0.12.3: still Bool(...), false
    ("ollama@0.12.4", "qwen3:8b", True),  # fs/ggml/ggml.go @v0.12.4 FlashAttention(): qwen3, qwen3moe, gptoss
    ("ollama@0.12.4", "llama3.1:8b", False),  # llama is not on the list (@v0.24.0 neither)
    ("ollama@0.24.0", "gemma3:4b", True),  # gemma3 on the list from v0.12.6
    ("ollama@0.24.0", "llama3.1:8b", False),
    ("ollama@0.30.0", "llama3.1:8b", True),  # llm/llama_server.go @v0.30.0: --flash-attn auto
    ("ollama", "llama3.1:8b", True),
])
def test_flash_attention_by_release(runtime: str, model: str, on: bool) -> None:
    assert _plan(model, runtime)["inputs"]["flash_attn"] is on


def test_flash_attention_off_costs_the_score_matrix() -> None:
    """llama.cpp without flash attention keeps the KQ scores (context x batch x heads, f32) in its compute
    buffer: at 32K tokens Ollama 0.24 (flash attention off for llama) needs more activation memory than
    0.30 (on), and the same with flash attention asked for explicitly."""
    def act(runtime: str, **o: object) -> int:
        return _plan("llama3.1:8b", runtime, context=32768, **o)["memory"]["activation_bytes"]

    assert act("ollama@0.24.0") > 4 * act("ollama@0.30.0")
    assert act("ollama@0.24.0", flash_attn=True) == act("ollama@0.30.0")


# OLLAMA_CONTEXT_LENGTH is read from 0.5.13 (envconfig/config.go @v0.5.13 ContextLength; absent @v0.5.12):
# the launch line of an older release sets num_ctx per request instead
@pytest.mark.parametrize("runtime, env", [("ollama@0.5.12", False), ("ollama@0.5.13", True),
                                          ("ollama", True)])
def test_launch_sets_the_context_where_the_release_reads_it(run_json, runtime: str, env: bool) -> None:
    args = ["deploy", "llama3.1:8b", "--gpu", "RTX 4090", "--users", "2", "--runtime", runtime]
    best = run_json(*args)["best"]
    line, _, notes = best["command"].partition("#")
    assert ("OLLAMA_CONTEXT_LENGTH=1300 " in line) is env  # 1,000 + 300 tokens, deploy's default request
    assert ('"num_ctx": 1300' in notes) is not env


def test_cli_at_two_releases(run_cli) -> None:
    code, old, err = run_cli("plan", "llama3.1:8b", "--gpu", "RTX 4090", "--runtime", "ollama@0.3.3")
    assert code == 0, err
    assert "runtime ollama 0.3.3 · context 2K (Ollama default) · 1 sequence · KV f16" in old
    code, now, err = run_cli("plan", "llama3.1:8b", "--gpu", "RTX 4090", "--runtime", "ollama")
    assert code == 0, err
    assert "context 32K (Ollama default for 23.99 GiB of VRAM)" in now
    code, out, err = run_cli("plan", "llama3.1:8b", "--runtime", "ollama@0.4.7", "--kv-dtype", "q8_0")
    assert code != 0 and "Traceback" not in err and "has no 'q8_0' KV cache" in err


def _stack(runtime: str, models: list[tuple[str, str, str | None]], users: int = 4) -> dict:
    text = '[machine]\ngpu = ["RTX 4090"]\n'
    for model, role, quant in models:
        text += (f'\n[[model]]\nmodel = "{model}"\nrole = "{role}"\nruntime = "{runtime}"\n'
                 + (f'quant = "{quant}"\n' if quant else "") + f"context = 8192\nusers = {users}\n")
    return cardfit.stack(text=text)


def _slots(answer: dict) -> dict[str, int]:
    return {e["model"]: e["slots"] for d in answer["devices"] for e in d["entries"]}


RAG = [("bge-m3", "embed", None), ("llama-3.1-8b", "chat", "Q4_K_M")]  # the embedder first: the bundle


# OLLAMA_NUM_PARALLEL set (users stated): server/sched.go still loads some models with 1 slot
@pytest.mark.parametrize("runtime, models, slots", [
    # 'Embedding models should always be loaded with parallel=1' (server/sched.go @v0.3.7, PR #6467)
    ("ollama@0.3.3", RAG, {"bge-m3": 4, "llama-3.1-8b": 4}),
    ("ollama@0.3.7", RAG, {"bge-m3": 1, "llama-3.1-8b": 4}),
    ("ollama", RAG, {"bge-m3": 1, "llama-3.1-8b": 4}),  # server/sched.go @v0.32.15 load: !completion
    # any model with a projector before 0.4.1 (@v0.3.7: len(ProjectorPaths) > 0), mllama alone after
    ("ollama@0.3.7", [("gemma3:4b", "vision", None)], {"gemma3:4b": 1}),
    ("ollama@0.4.1", [("gemma3:4b", "vision", None)], {"gemma3:4b": 4}),
    ("ollama@0.4.1", [("llama3.2-vision", "vision", None)], {"llama3.2-vision": 1}),
    # qwen35 on the list from v0.17.1 (server/sched.go @v0.17.1; @v0.17.0 not)
    ("ollama@0.17.0", [("qwen3.5-9b", "chat", "Q4_K_M")], {"qwen3.5-9b": 4}),
    ("ollama@0.17.1", [("qwen3.5-9b", "chat", "Q4_K_M")], {"qwen3.5-9b": 1}),
    ("ollama", [("qwen3.5-9b", "chat", "Q4_K_M")], {"qwen3.5-9b": 1}),
])
def test_one_slot_models_with_num_parallel_set(runtime: str, models: list, slots: dict[str, int]) -> None:
    assert _slots(_stack(runtime, models)) == slots


def test_the_bundle_sets_the_stacks_num_parallel_not_the_embedders() -> None:
    answer = _stack("ollama", RAG)
    line = next(ln for ln in answer["bundle"]["text"].splitlines() if "ollama serve" in ln)
    assert "OLLAMA_NUM_PARALLEL=4" in line and "OLLAMA_CONTEXT_LENGTH=" in line


def test_an_embedder_at_one_slot_holds_less() -> None:
    """The same embedder entry at 0.3.3 (4 slots: 4 x 8192 cells) and 0.3.7 (1 slot)."""
    def embed_bytes(runtime: str) -> int:
        return next(e["bytes"] for d in _stack(runtime, RAG)["devices"] for e in d["entries"]
                    if e["model"] == "bge-m3")

    assert embed_bytes("ollama@0.3.3") > embed_bytes("ollama@0.3.7")


# A validation record is timed at the Ollama release its source states (settings ollama_version), else at
# the one current at its date (data/validation/memory_runtime.toml, memory_stack_shared.toml)
@pytest.mark.parametrize("settings, date, want", [
    ({"ollama_version": "0.5.4"}, "2025-12-01", "ollama@0.5.4"),  # securetag's log: Ollama 0.5.4
    ({"ollama_version": "0.10.0-rc0"}, "2025-07-22", "ollama@0.10.0-rc0"),  # ollama#11499
    ({}, "2025-07-22", "ollama@2025-07-22"),  # none stated: the release current at its date
])
def test_a_record_states_its_ollama_release(settings: dict, date: str, want: str) -> None:
    from cardfit.validation.single import record_runtime_name

    assert record_runtime_name({"runtime": "ollama", "date": date, "settings": settings}) == want


def test_the_stack_says_why_a_model_got_one_slot() -> None:
    notes = _stack("ollama@0.3.7", [*RAG, ("gemma3:4b", "vision", None)])["notes"]
    assert any(n.startswith("bge-m3: 1 slot") and "an embedder" in n for n in notes)
    assert any(n.startswith("gemma3:4b: 1 slot") and "projector" in n for n in notes)
    assert not any(n.startswith("llama-3.1-8b: 1 slot") for n in notes)


def test_the_older_default_wins_whatever_the_table_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same with the table's Ollama features reversed: the order is by the features' dates, not the
    file's."""
    from dataclasses import replace

    from cardfit.catalog import releases

    table = dict(releases.release_table())
    table["ollama"] = replace(table["ollama"], features=tuple(reversed(table["ollama"].features)))
    monkeypatch.setattr(releases, "release_table", lambda: table)
    rt = default_runtimes().get("ollama")
    for rel, want in (("0.3.3", 2048), ("0.15.4", 4096)):
        assert releases.profile_at(rt, releases.release("ollama", rel, "")).default_context == want

"""Ollama (`ollama serve`): the llama.cpp-like engine (llamacpp_like.py), configured through its environment
(envconfig/config.go, checked against tests/data/runtime_options/ollama.toml), and its own estimate of a
loaded model, the SIZE `ollama ps` shows (llm/memory.go EstimateGPULayers; fs/ggml/ggml.go GraphSize): the
minimum (the profile's context_bytes, 457 MiB) + one spare layer + the graph (partial when layers spill to
the CPU) + every blk layer with its KV + the output layer (token_embd in its place when the embeddings are
tied; otherwise token_embd stays out)."""

from __future__ import annotations

from typing import Any

from ..catalog.models import ModelSpec
from ..catalog.quants import Quant
from ..catalog.records import record
from ..core.kv import kv_bytes_per_token, kv_cache_bytes
from ..core.memory import MemorySettings
from ..core.weights import tensor_bytes
from .base import NotModelled
from .launch import Launch, LaunchArgs
from .llamacpp_like import LlamaCppLike


@record(slots=True)
class Ollama(LlamaCppLike):
    KV_NAMES = {"q8_0": "q8_0", "q4_0": "q4_0"}  # OLLAMA_KV_CACHE_TYPE values
    # Ollama's engine creates ggml's scheduler with parallel = false (ml/backend/ggml/ggml.go New:
    # ggml_backend_sched_new(…, false, false) @001b36c5), so ggml keeps one copy of the graph inputs
    # (n_copies = 1): no pipeline copies on its cards. Assumption: models on Ollama's older llama.cpp runner
    # (its vendored llama_context) are counted the same, which no public log here confirms
    PIPELINE_COPIES = 1

    def model_ref(self, *, asked: str | None, model_id: str, hf: str | None, tag: str | None,
                  quant: str) -> str:
        return tag or asked or model_id

    def stack_flags(self, port: int, role: str,
                    split: tuple[float, ...]) -> tuple[list[str], list[tuple[str, str]]]:
        # one `ollama serve` for every model, at OLLAMA_HOST (envconfig.Host)
        return [], [("OLLAMA_HOST", f"127.0.0.1:{port}")]

    def health_check(self, port: int) -> list[str]:
        # the ollama CLI answers only while `ollama serve` does
        return ["CMD", "ollama", "list"]

    def launch(self, model: str, a: LaunchArgs) -> Launch:
        slots = a.parallel or a.max_num_seqs
        env = [("OLLAMA_NUM_PARALLEL", str(slots))]
        notes = [f"then `ollama pull {model}`; the first request to it loads the model"]
        if self.profile.has("context_length_env"):
            env.insert(0, ("OLLAMA_CONTEXT_LENGTH", str(a.max_model_len)))
        else:  # before 0.5.13 no OLLAMA_CONTEXT_LENGTH (data/releases.toml context_length_env)
            notes.append(f"this release reads no OLLAMA_CONTEXT_LENGTH (0.5.13 on): pass \"options\": "
                         f"{{\"num_ctx\": {a.max_model_len}}} with each request, or `PARAMETER num_ctx "
                         f"{a.max_model_len}` in a Modelfile (`ollama create`)")
        flash = a.flash_attn
        if a.kv:
            flash = True  # Ollama quantizes the KV cache only with flash attention on
            env.append(("OLLAMA_KV_CACHE_TYPE", a.kv))
        if flash is not None:
            env.append(("OLLAMA_FLASH_ATTENTION", "1" if flash else "0"))
        if a.tp * a.pp > 1:
            env.append(("OLLAMA_SCHED_SPREAD", "1"))
        return Launch(a.runtime, ("ollama", "serve"), env=tuple(env), program_words=2, notes=tuple(notes))

    def reported_total(self, m: ModelSpec, q: Quant, s: MemorySettings, partial: bool) -> tuple[int, str]:
        # Mistral 7B's GGUF is converted as general.architecture = "llama" (convert_hf_to_gguf MistralModel)
        if m.model_type not in ("llama", "mistral") or m.sliding_window or m.is_moe:
            raise NotModelled("Ollama's graph estimate is implemented for the llama architecture only")
        # llm/server.go: num_ctx above the GGUF's trained context is clamped to it ("requested context size
        # too large for model"), although `ollama ps` still shows the context asked for
        ctx = min(s.context, m.max_context) if m.max_context else s.context
        cells = ctx * s.sequences
        batch = min(ctx, self.ubatch(s))  # num_batch (default the profile's 512), at most num_ctx
        tensors = tensor_bytes(m, q)
        kv_layer = kv_cache_bytes(m, cells, 1, s.kv_dtype) // m.layers
        layers = sum(b for k, i, b in tensors if i >= 0) + kv_layer * m.layers
        layer0 = sum(b for k, i, b in tensors if i == 0) + kv_layer
        # llm/memory.go: output_norm + output, or token_embd where the file has no output tensor (tied
        # embeddings: Llama 3.2, SmolLM2)
        out_kind = "output" if any(k == "output" for k, i, b in tensors) else "token_embd"
        output = sum(b for k, i, b in tensors if k in (out_kind, "output_norm"))
        graph = graph_bytes(m, batch, cells, partial)
        total = self.profile.context_bytes + layer0 + graph + layers + output
        return total, (f"457 MiB + spare layer {layer0 / 1e6:.0f} MB + {'partial' if partial else 'full'} "
                       f"graph {graph / 1e6:.0f} MB + layers with KV {layers / 1e9:.2f} GB + output "
                       f"{output / 1e6:.0f} MB")


# Ollama's per-GPU minimum on Apple silicon: metalMinimumMemory = 512 * format.MebiByte (gpu/gpu_darwin.go
# v0.2-v0.3, discover/gpu_darwin.go after); CUDA and ROCm: the profile's context_bytes (457 MiB)
METAL_MINIMUM_BYTES = 512 * 2**20


@record(slots=True)
class FitEstimate:
    """Ollama's own estimate of a model fully loaded on its cards, as its scheduler tests the fit before a
    load (llm/memory.go EstimateGPULayers and PredictServerFit, v0.2-v0.9): `fixed` on every card it uses
    (the 457 MiB minimum + the spare blk.0 layer + the larger of the partial and full graph, which a card
    must hold before any layer goes on it), `layers` the blk layers with their KV cache plus the output
    layer, spread over the cards."""

    fixed: int
    layers: int

    def fits(self, free: list[int]) -> bool:
        """Every layer and the output layer placed on cards with `free` bytes each (Ollama's free memory):
        on one card, fixed + layers < free; over several, each card takes its fixed part and the layers
        go where room is left (the round-robin's granularity of one layer is not modelled)."""
        room = [f - self.fixed for f in free]
        return all(r > 0 for r in room) and sum(room) > self.layers


def fit_estimate(m: ModelSpec, q: Quant, cells: int, batch: int, kv_dtype: str, minimum: int,
                 cards: int = 1, metal: bool = False) -> FitEstimate:
    """Ollama's estimate at `cells` KV cells (num_ctx x slots), llm/memory.go v0.3.3: KV = cells x layers x
    (K + V head sizes) x KV heads at the cache type's bytes (f16 before OLLAMA_KV_CACHE_TYPE), every layer
    at the whole context (the estimate knows no sliding window); the graph by fs/ggml GraphSize for the
    architectures it names (llama, gemma, gemma2, qwen2), else its own fallback GQA x KV / 6; over several
    cards the partial graph ("multigpu should always use the partial graph size"); on Metal the full one
    ("on metal there's no partial offload overhead")."""
    tensors = tensor_bytes(m, q)
    kv = kv_bytes_per_token(m, kv_dtype) * cells
    kv_layer = kv // m.layers
    layers = sum(b for k, i, b in tensors if i >= 0) + kv_layer * m.layers
    layer0 = sum(b for k, i, b in tensors if i == 0) + kv_layer
    out_kind = "output" if any(k == "output" for k, i, b in tensors) else "token_embd"
    output = sum(b for k, i, b in tensors if k in (out_kind, "output_norm"))
    batch = min(cells, batch)
    partial, full = ollama_graph(m, batch, cells, kv)
    graph = full if metal else partial if cards > 1 else max(partial, full)
    return FitEstimate(minimum + layer0 + graph, layers + output)


def ollama_graph(m: ModelSpec, batch: int, ctx: int, kv: int) -> tuple[int, int]:
    """(partial, full) graph bytes of fs/ggml GraphSize (llm/ggml.go v0.3.3) for a model's architecture;
    an architecture it does not name: partial = GQA x KV / 6, full = partial (llm/memory.go)."""
    arch = m.model_type
    if arch in ("llama", "mistral") and not m.is_moe:
        return graph_bytes(m, batch, ctx, True), graph_bytes(m, batch, ctx, False)
    embd, heads, head_k, vocab = m.hidden, m.heads, m.head_dim, m.vocab
    if arch in ("gemma", "gemma2") and vocab:
        full = max(4 * batch * (embd + vocab),
                   4 * batch * (2 + ctx + ctx * heads + 2 * embd + 2 * head_k * heads))
        partial = max(4 * embd * batch + embd * vocab * 105 // 128 + 4 * vocab * batch,
                      4 * batch * (2 * embd + 1 + 2 * head_k * heads + ctx + ctx * heads)
                      + 4 * head_k * ctx * 8 + embd * head_k * heads * 9 // 16)
        return partial, full
    if arch == "qwen2" and vocab:
        full = max(4 * batch * (embd + vocab), 4 * batch * (1 + 2 * embd + ctx + ctx * heads))
        partial = max(4 * batch * (embd + vocab) + embd * vocab * 105 // 128,
                      4 * (batch * (1 + 2 * embd + ctx * (1 + heads)) + embd * (1 + ctx)))
        return partial, full
    gqa = heads // max(m.kv_heads, 1)
    return gqa * kv // 6, gqa * kv // 6


def graph_bytes(m: ModelSpec, batch: int, ctx: int, partial: bool) -> int:
    """fs/ggml GraphSize for the llama architecture (data/runtimes.toml ollama `notes`)."""
    embd, heads, kv_heads, head_dim, vocab = m.hidden, m.heads, m.kv_heads, m.head_dim, m.vocab
    if not partial:
        return max(4 * batch * (1 + 4 * embd + ctx * (1 + heads)), 4 * batch * (embd + vocab))
    return 4 * batch * embd + max(
        4 * batch * (1 + embd + max(ctx, embd))
        + embd * embd * 9 // 16
        + 4 * ctx * (batch * heads + head_dim * kv_heads),
        4 * batch * (embd + vocab) + embd * vocab * 105 // 128,
    )


def one_slot(rt: Any, model: ModelSpec, role: str) -> str | None:
    """Why Ollama's scheduler loads a model with 1 slot whatever OLLAMA_NUM_PARALLEL (or its automatic pick)
    says, at the profile's release (server/sched.go), or None where it keeps its slots: "embed", a model
    without the completion capability (an embedder) from 0.3.7 ("Embedding models should always be loaded
    with parallel=1", https://github.com/ollama/ollama/pull/6467); "vision", any model with a projector
    before 0.4.1; "arch", an architecture its release lists as not safe with num_parallel > 1
    (data/runtimes.toml single_slot_models: mllama from 0.4.1, qwen3vl from 0.12.7, qwen35 from 0.17.1, ...).
    The one rule of `cardfit stack`, `plan`, `speed` and `deploy`."""
    if role == "embed" and rt.has("embed_parallel_one"):
        return "embed"
    if role == "vision" and not rt.has("vision_parallel"):
        return "vision"
    return "arch" if model.model_type in rt.single_slot_models else None


def model_role(model: ModelSpec) -> str:
    """The role `one_slot` reads for a model asked alone (plan, speed, deploy): an embedder by its task, a
    model with a vision tower (text_params: the language model alone) as vision, else chat."""
    return "embed" if model.task == "embed" else "vision" if model.text_params else "chat"


def one_slot_words(why: str, model: ModelSpec) -> str:
    """`one_slot`'s reason as the answer says it: "Ollama runs … with one slot"."""
    return {"embed": "embedders", "vision": "models with a projector (before 0.4.1)"}.get(
        why, f"{model.model_type} models")


ADAPTER = Ollama

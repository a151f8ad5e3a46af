"""Ollama (`ollama serve`): the llama.cpp-like engine (llamacpp_like.py), configured through its environment
(envconfig/config.go, checked against tests/data/runtime_options/ollama.toml), and its own estimate of a
loaded model, the SIZE `ollama ps` shows (llm/memory.go EstimateGPULayers; fs/ggml/ggml.go GraphSize): the
minimum (the profile's context_bytes, 457 MiB) + one spare layer + the graph (partial when layers spill to
the CPU) + every blk layer with its KV + the output layer (token_embd in its place when the embeddings are
tied; otherwise token_embd stays out)."""

from __future__ import annotations

from ..catalog.models import ModelSpec
from ..catalog.quants import Quant
from ..catalog.records import record
from ..core.kv import kv_cache_bytes
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
        env = [("OLLAMA_CONTEXT_LENGTH", str(a.max_model_len)), ("OLLAMA_NUM_PARALLEL", str(slots))]
        flash = a.flash_attn
        if a.kv:
            flash = True  # Ollama quantizes the KV cache only with flash attention on
            env.append(("OLLAMA_KV_CACHE_TYPE", a.kv))
        if flash is not None:
            env.append(("OLLAMA_FLASH_ATTENTION", "1" if flash else "0"))
        if a.tp * a.pp > 1:
            env.append(("OLLAMA_SCHED_SPREAD", "1"))
        return Launch(a.runtime, ("ollama", "serve"), env=tuple(env), program_words=2,
                      notes=(f"then `ollama pull {model}`; the first request to it loads the model",))

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


ADAPTER = Ollama

"""llama.cpp-like engines (llama.cpp's llama-server, Ollama, ik_llama.cpp): ggml reserves one compute
buffer for the worst-case graph of one micro-batch (n_ubatch tokens) against the whole cache; the cache
is one contiguous buffer of n_ctx cells padded to 256 (llama-context.cpp); sliding-window layers keep the
window plus a micro-batch (llama-kv-cache-iswa.cpp); token_embd stays in host RAM (llama-model.cpp assigns
the input layer to the CPU); whole layers may sit in system RAM (-ngl)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import ClassVar

from ..catalog.models import ModelSpec
from ..catalog.quants import Quant
from ..catalog.records import record
from ..core.activations import llamacpp_compute_bytes
from ..core.kv import kv_cache_bytes, llamacpp_swa_cells
from ..core.memory import Memory, MemorySettings
from ..core.tensors import has_shapes
from ..core.weights import tensor_bytes
from .base import Runtime

# Forks that allocate as a catalog runtime but for the fields named (validation records measure them; no
# catalog row of their own): ik_llama.cpp is llama.cpp's graph without the sliding-window cache.
FORKS: dict[str, tuple[str, dict[str, object]]] = {"ik-llamacpp": ("llama.cpp", {"window_cache": False})}

# llama.cpp's default physical batch when neither the caller nor the profile gives one
# (common/common.h: n_ubatch = 512)
DEFAULT_UBATCH = 512

# A layer split (--split-mode layer, the default with several devices): llama_model::load_tensors assigns
# n_layer + 1 slots (the repeating layers, then the output layer) by the cumulative --tensor-split, which
# defaults to each device's free memory ("default split, by free memory")
LLAMA_SPLIT_SOURCE = "https://github.com/ggml-org/llama.cpp/blob/master/src/llama-model.cpp"
# llama.cpp's pipeline parallelism over a layer split: ggml's scheduler keeps GGML_SCHED_MAX_COPIES copies of
# the graph inputs on each card (ggml/CMakeLists.txt: GGML_SCHED_MAX_COPIES "4"; src/llama-context.cpp
# enables it for a split of every layer over more than one device)
PIPELINE_SOURCE = "https://github.com/ggml-org/llama.cpp/blob/master/src/llama-context.cpp"
GGML_SCHED_MAX_COPIES = 4


def layer_cards(layers: int, split: Sequence[float]) -> list[int]:
    """The card of each of llama.cpp's n_layer + 1 slots (the repeating layers, then the output layer) under
    a layer split with every layer on the cards: slot il goes to the first card whose cumulative share of
    the split exceeds il / (n_layer + 1) (LLAMA_SPLIT_SOURCE, llama_model::load_tensors get_layer_buft_list:
    `std::upper_bound(splits, float(il - i_gpu_start) / act_gpu_layers)`, act_gpu_layers = n_layer + 1). So
    two equal cards hold 13 and 11 of a 24-layer model's layers, the output layer with the second."""
    return list(_layer_cards(max(layers, 1), tuple(split)))


# deploy sizes a split for every card set and candidate of a model: the same few (layers, split) each time
@lru_cache(maxsize=1024)
def _layer_cards(layers: int, split: tuple[float, ...]) -> tuple[int, ...]:
    slots = layers + 1
    total = sum(split)
    bounds, acc = [], 0.0
    for share in split:
        acc += share / total
        bounds.append(acc)
    last = len(split) - 1
    return tuple(next((d for d, b in enumerate(bounds) if b > il / slots), last) for il in range(slots))


@lru_cache(maxsize=1024)
def _placed(layers: int, split: tuple[float, ...]) -> tuple[tuple[int, ...], int]:
    """Per card d, the repeating layers on cards 0..d (layer_cards), and the card of the output slot."""
    cards = _layer_cards(layers, split)
    return tuple(sum(1 for c in cards[:layers] if c <= d) for d in range(len(split))), cards[layers]


def layer_split(layered: int, layers: int, split: Sequence[float], output: int = 0) -> list[int]:
    """Weights and cache over the cards as llama.cpp places them (layer_cards): the repeating layers' share
    (`layered` less `output`, even per layer) on each layer's card, and `output` (the output matrix and norm,
    which llama.cpp counts as one more layer) on the card of the last slot."""
    layers = max(layers, 1)
    placed, last = _placed(layers, tuple(split))
    repeating = layered - output
    out, done = [], 0
    for upto in placed:  # each card's layers are consecutive: round the running total, never below 0
        out.append(repeating * upto // layers - repeating * done // layers)
        done = upto
    out[last] += output
    return out


def output_bytes(m: ModelSpec, q: Quant | None, weights_bytes: int) -> int:
    """The output layer's bytes on the card: output.weight and the final norm (a model with tied embeddings
    puts its token_embd there as the output matrix; llama.cpp keeps the input copy in host RAM), at the
    quantization's per-tensor types (core/weights.py tensor_bytes), at most the card's weights."""
    if q is None or not has_shapes(m):  # no tensor table: the output layer is spread with the others
        return 0
    return min(_output_layer_bytes(m, q), weights_bytes)


@lru_cache(maxsize=256)  # deploy sizes a split for every card set of a model: the tensor table once per quant
def _output_layer_bytes(m: ModelSpec, q: Quant) -> int:
    rows = tensor_bytes(m, q)
    tied = not any(k == "output" for k, _, _ in rows)
    kinds = ("token_embd" if tied else "output", "output_norm")
    return sum(b for k, _, b in rows if k in kinds)


@record(slots=True)
class LlamaCppLike(Runtime):
    quantized_kv_needs_flash_attn: ClassVar[bool] = True
    # copies of the graph inputs each card of a layer split holds (1: the scheduler's own, in the compute
    # buffer); llama-server asks for GGML_SCHED_MAX_COPIES (runtimes/llamacpp.py)
    PIPELINE_COPIES: ClassVar[int] = 1

    def ubatch(self, s: MemorySettings) -> int:
        return s.prefill_chunk or self.profile.prefill_chunk or DEFAULT_UBATCH

    def kv_bytes(self, m: ModelSpec, s: MemorySettings) -> int:
        ctx = self.padded_context(s.context)
        cells = 0
        if m.sliding_window:
            cells = llamacpp_swa_cells(m.sliding_window, s.sequences, self.ubatch(s), ctx * s.sequences,
                                       max(self.profile.ctx_pad, 1))
        return kv_cache_bytes(m, ctx, s.sequences, s.kv_dtype, self.profile.window_cache, cells)

    def window_read_cells(self, m: ModelSpec, ubatch: int) -> int:
        """The sliding-window cache is a ring of window + ubatch cells per stream (llamacpp_swa_cells) and the
        attention of a step spans every used cell of it, masked to the window (llama_kv_cache get_n_kv: the
        used cells up to the highest, padded to 256): once wrapped, a step reads the whole ring."""
        if not m.sliding_window or not self.profile.window_cache:
            return 0
        ub = ubatch or self.profile.prefill_chunk or DEFAULT_UBATCH
        return llamacpp_swa_cells(m.sliding_window, 1, ub, 1 << 30, max(self.profile.ctx_pad, 1))

    def activation_bytes(self, m: ModelSpec, s: MemorySettings) -> int:
        cells = self.padded_context(s.context) * s.sequences
        tokens = min(s.prefill_chunk, cells) if s.prefill_chunk else cells
        return llamacpp_compute_bytes(m, tokens, cells, s.flash_attn)

    def pipeline_bytes(self, mem: Memory, flash_attn: bool, prefill_chunk: int = 0) -> int:
        """What pipeline parallelism adds to each card of a layer split over several cards: with every layer
        offloaded, split mode layer and no tensor overrides, llama.cpp asks ggml's scheduler for
        GGML_SCHED_MAX_COPIES copies of the graph inputs so that micro-batches overlap across the cards
        (PIPELINE_SOURCE; the log says "pipeline parallelism enabled (n_copies=4)"). The largest input is
        the KQ mask, the cache's cells x the micro-batch's tokens: an f32 input on the host, cast to f16 there
        for flash attention (src/llama-graph.cpp), so the cards receive it in f16 with flash attention and in
        f32 without. The compute buffer (core/activations.py) holds one copy; the others come on top. In
        memory_stack.toml (flash attention off) each card printed 1,166 MiB: 896 MiB of KQ scores and
        4 x 64 MiB of mask; with flash attention on, llama.cpp issue 11200's two cards printed 233 and 238
        MiB for a 32768-cell, 512-token mask, under the 256 MiB of four f32 copies."""
        if self.PIPELINE_COPIES <= 1:
            return 0
        cells = self.padded_context(mem.context) * max(mem.sequences, 1)
        tokens = min(prefill_chunk or self.profile.prefill_chunk or DEFAULT_UBATCH, cells)
        return (self.PIPELINE_COPIES - 1) * tokens * cells * (2 if flash_attn else 4)

    def split_cards(self, m: ModelSpec, q: Quant | None, mem: Memory, split: Sequence[float], *,
                    flash_attn: bool, prefill_chunk: int = 0) -> list[int]:
        """Each card's bytes of one llama.cpp process whose layers are split over len(split) cards by these
        shares (--tensor-split): its own context and compute buffer, the pipeline's copies of the graph
        inputs when there are several cards, and its layers' weights and cache as llama.cpp places them
        (layer_split, the output layer on the card of the last slot). The one owner of this rule:
        `cardfit plan --gpus N` (core/fit.py check), `cardfit stack` and `cardfit deploy` size a split
        through it."""
        fixed = mem.per_card_fixed_bytes
        if len(split) > 1:
            fixed += self.pipeline_bytes(mem, flash_attn, prefill_chunk)
        out = output_bytes(m, q, mem.weights_bytes)
        return [fixed + b for b in layer_split(mem.weights_bytes + mem.kv_cache_bytes, m.layers, split, out)]


ADAPTER = LlamaCppLike

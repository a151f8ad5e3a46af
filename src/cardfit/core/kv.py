"""KV cache: 2 (K and V) × layers × KV heads × head dim × bytes per element, per token, per sequence —
with the attention variants that change it: MLA caches one compressed latent plus a rope key
per layer; sliding-window layers hold at most the window; linear-attention / state-space layers hold a
fixed-size state; layers that share KV store nothing of their own."""

from __future__ import annotations

from functools import lru_cache

from ..catalog.models import ModelSpec
from ..catalog.records import record
from ..errors import UnknownNameError
from ..names import closest
from .search import largest_true

# Bytes per cached element ×32 (exact for the block formats): llama.cpp q8_0 = 34 bytes per 32 values,
# q4_0 = 18 bytes per 32 values (ggml type_traits); fp8 = 1 byte (vLLM --kv-cache-dtype fp8).
KV_DTYPE_BYTES_X32 = {"f32": 128, "f16": 64, "bf16": 64, "fp8": 32, "q8_0": 34, "q4_0": 18, "q4_1": 20,
                      "q5_0": 22, "q5_1": 24, "iq4_nl": 18}
_KV_ALIASES = {"fp8_e4m3fn": "fp8", "fp16": "f16", "float16": "f16", "half": "f16", "bfloat16": "bf16",
               "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "e4m3": "fp8", "float8": "fp8", "int8": "q8_0",
               "fp32": "f32", "auto": "auto"}
# recurrent state of linear-attention layers is kept in fp32 (vLLM mamba_ssm_cache_dtype default)
STATE_BYTES = 4


def kv_dtype(name: str) -> str:
    """Normalize a KV cache dtype name ('FP16', 'q8_0', 'fp8_e4m3' …); 'auto' is kept for the caller."""
    key = (name or "auto").strip().lower()
    key = _KV_ALIASES.get(key, key)
    if key in KV_DTYPE_BYTES_X32 or key == "auto":
        return key
    known = {n: n for n in [*KV_DTYPE_BYTES_X32, *_KV_ALIASES]}
    raise UnknownNameError("KV cache type", name, closest(name, known), "cardfit quants")


@record(slots=True)
class KvLayout:
    """How many layers cache what, for one model."""

    full_layers: int  # layers whose cache grows with the context
    window_layers: int  # sliding-window layers: at most `window` tokens
    window: int
    state_layers: int  # fixed-size recurrent state
    elems_per_token_layer: int  # K+V elements per token per full-attention layer
    window_elems_per_token_layer: int  # the same for sliding-window layers
    state_bytes_per_layer: int  # per sequence


@lru_cache(maxsize=4096)  # once per model: every estimate (model × quantization × context × card) asks
def layout(m: ModelSpec) -> KvLayout:
    if m.encoder_only:  # one pass over the whole input, nothing kept for a next step
        return KvLayout(0, 0, 0, 0, 0, 0, 0)
    cached = m.layers - m.linear_layers - m.kv_shared_layers
    if m.attention == "mla":
        elems = m.kv_lora_rank + m.qk_rope_head_dim  # one latent + one rope key, shared by all heads
    else:
        elems = 2 * m.kv_heads * m.head_dim
    window_elems = elems
    if m.global_kv_heads:  # Gemma 4: global layers have their own heads and width, and may cache K only
        elems = (1 if m.k_eq_v else 2) * m.global_kv_heads * (m.global_head_dim or m.head_dim)
    window_layers = min(m.sliding_layers, cached) if m.sliding_window else 0
    state = 0
    if m.linear_layers:
        kdim, vdim = (
            m.linear_key_heads * m.linear_key_head_dim,
            m.linear_value_heads * m.linear_value_head_dim,
        )
        recurrent = m.linear_value_heads * m.linear_key_head_dim * m.linear_value_head_dim * STATE_BYTES
        conv = max(m.linear_conv_kernel - 1, 0) * (2 * kdim + vdim) * 2
        state = recurrent + conv
    return KvLayout(cached - window_layers, window_layers, m.sliding_window, m.linear_layers, elems,
                    window_elems, state)


def kv_bytes_per_token(m: ModelSpec, dtype: str = "f16") -> int:
    """Growth of the cache per token of context, below any sliding window (the guides' 'per token' figure)."""
    lay = layout(m)
    elems = lay.full_layers * lay.elems_per_token_layer + lay.window_layers * lay.window_elems_per_token_layer
    return elems * KV_DTYPE_BYTES_X32[dtype] // 32


def kv_cache_bytes(m: ModelSpec, context: int, sequences: int = 1, dtype: str = "f16",
                   window_cache: bool = True, window_cells: int = 0, window_ratio: float = 0.0) -> int:
    """Cache for `sequences` sequences of `context` tokens each. `window_cache=False` models a runtime
    that allocates full-length caches even for sliding-window layers; `window_cells` > 0 gives the
    sliding-window layers' cell count for all sequences together (llama.cpp, see llamacpp_swa_cells);
    `window_ratio` > 0 sizes the sliding-window layers at that share of the context (SGLang's hybrid SWA
    pool: swa_full_tokens_ratio sliding-window tokens for each full-layer token, runtimes/sglang.py)."""
    lay = layout(m)
    per_elem = KV_DTYPE_BYTES_X32[dtype]
    win_tokens = min(context, lay.window) if window_cache else context
    if window_ratio > 0:
        win_tokens = round(context * window_ratio)
    full = lay.elems_per_token_layer * lay.full_layers * context
    window = lay.window_elems_per_token_layer * lay.window_layers
    state = lay.state_layers * lay.state_bytes_per_layer
    if window_cells and window_cache and lay.window_layers:
        return sequences * (full * per_elem // 32 + state) + window * window_cells * per_elem // 32
    return sequences * ((full + window * win_tokens) * per_elem // 32 + state)


def llamacpp_swa_cells(window: int, sequences: int, n_ubatch: int, n_ctx: int, pad: int = 256,
                       unified: bool = False) -> int:
    """llama.cpp llama_kv_cache_iswa: each KV stream of the sliding-window cache holds
    GGML_PAD(n_swa × (unified ? n_seq : 1) + n_ubatch, 256) cells, capped at the stream's n_ctx; there is
    one stream per sequence unless the cache is unified (src/llama-kv-cache-iswa.cpp). Checked: gpt-oss-120b
    in Ollama, 2 × 131072, n_ubatch 1024 → 2 × 1280 cells = 90 MiB (ollama#16480)."""
    sequences = max(sequences, 1)
    if unified:
        return min(n_ctx, -(-(window * sequences + n_ubatch) // pad) * pad)
    return sequences * min(n_ctx // sequences, -(-(window + n_ubatch) // pad) * pad)


def max_tokens_in(m: ModelSpec, budget_bytes: int, sequences: int = 1, dtype: str = "f16",
                  window_cache: bool = True) -> int:
    """Largest per-sequence context whose cache fits in budget_bytes (0 if not even one token fits)."""
    if kv_cache_bytes(m, 1, sequences, dtype, window_cache) > budget_bytes:
        return 0
    return largest_true(lambda c: kv_cache_bytes(m, c, sequences, dtype, window_cache) <= budget_bytes, 1,
                        1 << 40)


def kv_split_ranks(m: ModelSpec) -> int:
    """The most tensor-parallel ranks the KV cache splits over: MLA caches one latent shared by all heads
    (1: every rank keeps and reads the whole cache), other attention its KV heads (a rank keeps at least one
    whole head); 0 = not known (any group splits it) (vLLM: MLA backends replicate the latent;
    `get_num_kv_heads` = max(1, kv_heads // tp))."""
    if m.attention == "mla":
        return 1
    return m.kv_heads or 0


def kv_replication(m: ModelSpec, tp: int) -> float:
    """Copies of the KV cache a tensor-parallel group of `tp` ranks holds, relative to an even split: tp
    copies for MLA, tp / kv_heads with fewer KV heads than ranks (kv_split_ranks)."""
    split = kv_split_ranks(m)
    if tp <= 1 or not split or split >= tp:
        return 1.0
    return tp / split

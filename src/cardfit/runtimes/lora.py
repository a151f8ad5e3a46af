"""LoRA adapters inside a serving runtime (`cardfit stack`'s adapter entries): the set asked for, and the A/B
matrices of one adapter over the projections it targets, per card of a tensor-parallel set. Each serving
adapter (vllm.py, sglang.py, llamacpp.py) turns these into what its engine allocates (`lora_plan`)."""

from __future__ import annotations

from ..catalog.models import ModelSpec
from ..catalog.records import record
from ..core.tensors import tensor_groups

# Hugging Face / PEFT module names (an adapter's target_modules) and cardfit's tensor kinds (core/tensors.py)
MODULES = {"q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v", "o_proj": "attn_output",
           "gate_proj": "ffn_gate", "up_proj": "ffn_up", "down_proj": "ffn_down"}
# the stacked names SGLang also accepts (python/sglang/srt/utils/common.py SUPPORTED_LORA_TARGET_MODULES,
# lora/utils.py get_normalized_target_modules) and its "all" (server_args.py: the supported modules; its
# default csgmv LoRA backend drops embed_tokens and lm_head from them)
STACKED = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj"),
           "all": tuple(MODULES)}
# a column-parallel layer keeps A whole and shards B's output, a row-parallel one shards A's input and keeps
# B whole (vLLM: lora/layers/base_linear.py; SGLang: lora/mem_pool.py get_lora_A_shape / get_lora_B_shape,
# ROW_PARALLELISM_LINEAR_LORA_NAMES = o_proj, down_proj)
COLUMN_PARALLEL = frozenset({"attn_q", "attn_k", "attn_v", "ffn_gate", "ffn_up"})  # qkv_proj, gate_up_proj
ROW_PARALLEL = frozenset({"attn_output", "ffn_down"})  # o_proj, down_proj
# vLLM and SGLang hold adapters in the model's 16-bit dtype: vLLM's lora_dtype "auto" (vllm/config/lora.py
# LoRAConfig.lora_dtype), SGLang's LoRAManager the model runner's dtype (lora/lora_manager.py, mem_pool.py)
LORA_BYTES = 2
# a llama.cpp adapter file's tensor types (convert_lora_to_gguf.py --outtype f32|f16|bf16; its default f32)
# and their bytes per weight (ggml/src/ggml.c type_traits: GGML_TYPE_F32 4, F16 2, BF16 2)
LORA_FILE_TYPES = {"f32": 4, "f16": 2, "bf16": 2}
LORA_FILE_DEFAULT = "f32"


@record(slots=True)
class LoraSet:
    """An adapter entry of a stack: `adapters` LoRA adapters of rank at most `rank` over `targets` (PEFT
    module names), `slots` as given (max_loras; None: the runtime's choice), their files or names, a
    llama.cpp adapter file's tensor type (None: its converter's default) and its scale."""

    adapters: int
    rank: int
    slots: int | None
    targets: tuple[str, ...]
    paths: tuple[str, ...] = ()
    file_type: str | None = None
    scale: float | None = None  # llama.cpp's --lora-scaled SCALE (None: --lora, scale 1)
    targets_given: bool = False  # False: `targets` is the default (every attention and MLP projection)


@record(slots=True)
class LoraPlan:
    """What a runtime holds for a LoraSet: bytes on each card of its tensor-parallel set (or, where
    `by_layer`, the whole, which follows the layers over a layer split), bytes in host RAM, the slots on the
    GPU, its launch flags and a note for the reader."""

    card_bytes: int
    host_bytes: int
    slots: int
    flags: tuple[str, ...]
    note: str
    by_layer: bool = False


def normalized(names: tuple[str, ...]) -> tuple[str, ...]:
    """PEFT/SGLang target module names as the seven projections, in MODULES order (KeyError: unknown)."""
    out: set[str] = set()
    for n in names:
        if n not in STACKED and n not in MODULES:
            raise KeyError(n)
        out.update(STACKED.get(n, (n,)))
    return tuple(n for n in MODULES if n in out)


def lora_params(m: ModelSpec, rank: int, tp: int, targets: tuple[str, ...] = tuple(MODULES)) -> int:
    """Weights of one rank-`rank` adapter on each card of a `tp`-way set: A (rank × input) and B (output ×
    rank) beside every targeted projection of every layer, sharded as column/row parallel. Experts of MoE
    layers are not counted."""
    kinds = {MODULES[t] for t in targets}
    params = 0
    for g in tensor_groups(m):
        if not g.matrix or g.kind not in kinds:
            continue
        inp, out = g.row, g.n_params // g.row
        if g.kind in COLUMN_PARALLEL:
            params += rank * inp + rank * -(-out // tp)
        else:
            params += rank * -(-inp // tp) + rank * out
    return params

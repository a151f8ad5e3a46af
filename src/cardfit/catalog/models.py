"""The model catalog: real architecture numbers from each model's config.json, plus Ollama tags."""

from __future__ import annotations

from dataclasses import field, replace
from functools import cache
from typing import Any

from ..errors import CatalogError
from .loader import builtin, merge_records, read_user_file
from .records import record
from .registry import Registry
from .schema import check_keys, keys_of, row_error

# Hugging Face model_types of encoder-only transformers (transformers' BERT family and relatives used for
# embeddings and reranking): no KV cache, no decoding.
ENCODER_TYPES = frozenset({"bert", "roberta", "xlm-roberta", "nomic_bert", "new", "modernbert", "distilbert",
                           "electra", "mpnet", "deberta-v2", "jina_bert", "camembert"})
# Hugging Face model_types whose decoder MLP is two matrices (up, down; GELU or squared ReLU), not SwiGLU's
# gate/up/down: transformers' modeling_phi.py (fc1/fc2), modeling_starcoder2.py (c_fc/c_proj),
# modeling_gpt_bigcode.py, modeling_gpt2.py, modeling_falcon.py (dense_h_to_4h/dense_4h_to_h),
# modeling_gpt_neox.py, modeling_gptj.py, modeling_opt.py, modeling_bloom.py, modeling_codegen.py,
# modeling_nemotron.py (up_proj/down_proj).
TWO_MATRIX_FFN_TYPES = frozenset({"phi", "starcoder2", "gpt_bigcode", "gpt2", "falcon", "gpt_neox", "gptj",
                                  "opt", "bloom", "codegen", "nemotron"})
TASKS = ("generate", "embed", "rerank")


@record(slots=True)
class OllamaTag:
    tag: str
    quant: str
    download_gb: float | None = None
    q8_download_gb: float | None = None
    q4_k_m_download_gb: float | None = None
    source: str = ""
    note: str = ""


@record(slots=True)
class TensorInfo:
    """One tensor as a file describes it: name, shape (outermost first) and storage type name."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    nbytes: int

    @property
    def n_params(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@record(slots=True)
class ModelSpec:
    """Everything the memory and speed models need to know about a model. Zero means 'not applicable'
    for counts (experts, windows); None means 'not known'."""

    id: str
    name: str
    params: int
    layers: int
    kv_heads: int
    head_dim: int
    hf: str = ""
    aliases: tuple[str, ...] = ()
    family: str = ""
    model_type: str = ""
    active_params: int = 0
    hidden: int = 0
    heads: int = 0
    intermediate: int = 0
    vocab: int = 0
    tied_embeddings: bool = False
    max_context: int = 0
    dtype: str = "bf16"
    attention: str = "gqa"
    experts: int = 0
    experts_active: int = 0
    moe_intermediate: int = 0
    shared_experts: int = 0
    shared_intermediate: int = 0
    dense_layers: int = 0
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    sliding_window: int = 0
    sliding_layers: int = 0
    linear_layers: int = 0
    linear_key_heads: int = 0
    linear_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel: int = 0
    kv_shared_layers: int = 0
    attention_bias: bool = False
    # False: a two-matrix MLP (up, down: GPT-2/Phi-2/StarCoder/Falcon), not SwiGLU's three
    gated_ffn: bool = True
    global_kv_heads: int = 0  # Gemma 4: full-attention layers use their own KV geometry
    global_head_dim: int = 0
    k_eq_v: bool = False  # full-attention layers reuse K as V: only K is cached
    text_params: int = 0  # language model alone, when params includes a vision tower
    native_quant: str = ""  # the checkpoint's own weight format when it is not dtype (fp8, mxfp4)
    task: str = "generate"  # "embed" (embedding model) or "rerank" (cross-encoder): no tokens generated
    estimated: tuple[str, ...] = ()
    source: str = ""
    note: str = ""
    origin: str = "built-in"
    ollama: tuple[OllamaTag, ...] = ()
    # Set by file readers: the exact tensors, the quantization the file holds, and where each field came from.
    tensors: tuple[TensorInfo, ...] | None = field(default=None, compare=False)
    file_quant: str = ""
    provenance: tuple[tuple[str, str], ...] = ()
    warnings: tuple[str, ...] = ()  # what a reader had to guess (unknown model_type, missing keys)

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def encoder_only(self) -> bool:
        """BERT-like: every token attends to every other in one pass; nothing is cached between steps."""
        return self.model_type in ENCODER_TYPES

    @property
    def generates(self) -> bool:
        return self.task == "generate"

    @property
    def active(self) -> int:
        """Parameters read per token (MoE: the active ones)."""
        return self.active_params or self.params

    @property
    def names(self) -> list[str]:
        return [self.id, self.name, *([self.hf] if self.hf else []), *self.aliases,
                *(t.tag for t in self.ollama)]

    def with_(self, **changes: Any) -> ModelSpec:
        return replace(self, **changes)


KEYS = keys_of(ModelSpec)
TAG_KEYS = keys_of(OllamaTag)

# The config.json key (Hugging Face transformers' name) each checked field is read from, for the messages.
CONFIG_KEYS = {
    "heads": "num_attention_heads", "kv_heads": "num_key_value_heads", "layers": "num_hidden_layers",
    "experts": "num_local_experts", "experts_active": "num_experts_per_tok",
    "global_kv_heads": "num_global_key_value_heads", "dense_layers": "first_k_dense_replace",
    "sliding_layers": "layer_types", "linear_layers": "layer_types",
    "kv_shared_layers": "num_kv_shared_layers",
    "linear_key_heads": "linear_num_key_heads", "linear_value_heads": "linear_num_value_heads",
}
_LINEAR_DIMS = ("linear_key_heads", "linear_key_head_dim", "linear_value_heads", "linear_value_head_dim")


def _named(name: str) -> str:
    return f"{name} ({CONFIG_KEYS[name]})" if name in CONFIG_KEYS else name


def _heads_problem(m: ModelSpec) -> str | None:
    # grouped-query attention: each KV head serves heads / kv_heads query heads (Ainslie et al. 2023, "GQA",
    # https://arxiv.org/abs/2305.13245); MLA caches a latent instead of KV heads
    for name in ("kv_heads", "global_kv_heads"):
        kv = getattr(m, name)
        if m.heads and kv and m.attention != "mla" and (kv > m.heads or m.heads % kv):
            return (f"{_named(name)} {kv:,} must divide {_named('heads')} {m.heads:,} "
                    "(each KV head serves a whole group of query heads)")
    return None


def _experts_problem(m: ModelSpec) -> str | None:
    if m.experts_active and not m.experts:
        return f"{_named('experts_active')} {m.experts_active:,} is set on a model without experts"
    if m.experts_active > m.experts:
        return (f"{_named('experts_active')} {m.experts_active:,} is more than the {m.experts:,} experts "
                f"({CONFIG_KEYS['experts']}): a token is routed to at most every expert")
    return None


def _layers_problem(m: ModelSpec) -> str | None:
    for name in ("dense_layers", "sliding_layers"):
        if getattr(m, name) > m.layers:
            return f"{_named(name)} {getattr(m, name):,} is more than the {m.layers:,} layers"
    if m.sliding_layers and not m.sliding_window:
        return f"{m.sliding_layers:,} sliding-window layers need a sliding_window"
    if m.layers - m.linear_layers - m.kv_shared_layers < 1:
        return (f"{m.linear_layers:,} linear-attention and {m.kv_shared_layers:,} KV-sharing layers leave "
                f"none of the {m.layers:,} layers with attention of its own (at least one is needed)")
    if m.linear_layers and (missing := [CONFIG_KEYS.get(k, k) for k in _LINEAR_DIMS if not getattr(m, k)]):
        return (f"{m.linear_layers:,} linear-attention layers need their state's shape: no "
                f"{', '.join(missing)} (ssm.* in a GGUF)")
    return None


def shape_problem(m: ModelSpec) -> str | None:
    """What makes a model's shape impossible, in one line naming the field (and the config.json key it
    comes from) and what is allowed; None when the shape holds together. Every model record goes through it:
    the catalog rows (model_from_row) and what the readers build from a config.json or a header."""
    return _heads_problem(m) or _experts_problem(m) or _layers_problem(m)


def model_from_row(row: dict[str, Any]) -> ModelSpec:
    known = {k: v for k, v in row.items() if k not in ("ollama", "aliases", "estimated", "override")}
    for t in row.get("ollama", ()):
        if not isinstance(t, dict):
            raise CatalogError(f"model '{row.get('id', '?')}': every [[model.ollama]] entry is a table",
                               path=str(row.get("origin", "")))
        check_keys(t, TAG_KEYS - {"override"}, table=f"model '{row.get('id', '?')}' ollama tag",
                   path=str(row.get("origin") or "cardfit/data/models.toml"))
    try:
        tags = tuple(OllamaTag(**t) for t in row.get("ollama", ()))
        spec = ModelSpec(**known, aliases=tuple(row.get("aliases", ())), ollama=tags,
                         estimated=tuple(row.get("estimated", ())))
    except TypeError as e:
        raise row_error("model", row, e) from e
    if spec.task not in TASKS:
        raise CatalogError(f"model '{spec.id}': task must be one of {', '.join(TASKS)}")
    for name in ("params", "layers", "kv_heads", "head_dim"):
        value = getattr(spec, name)
        if not isinstance(value, int) or value <= 0:
            raise CatalogError(f"model '{spec.id}': {name} must be a positive integer")
    if problem := shape_problem(spec):
        raise CatalogError(f"model '{spec.id}': {problem}")
    return spec


# models.toml is edited by hand; models_more.toml is generated by scripts/build_catalog.py from sourced tables
BUILTIN_FILES = ("models.toml", "models_more.toml")


@cache
def _builtin_rows() -> tuple[dict[str, Any], ...]:
    rows = [row for name in BUILTIN_FILES for row in builtin(name)["model"]]
    return tuple(_with_extra_tags(rows, builtin("models_more.toml").get("tags", [])))


def _with_extra_tags(rows: list[dict[str, Any]], extra: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """models_more.toml's [[tags]] tables add Ollama tags (and the bare library names they are the ':latest'
    of, as aliases) to hand-written rows (by model id)."""
    by_id = {r["id"]: i for i, r in enumerate(rows)}
    for t in extra:
        if t.get("model") not in by_id:
            raise CatalogError(f"[[tags]] for unknown model '{t.get('model')}'", path="models_more.toml")
        i = by_id[t["model"]]
        rows[i] = {**rows[i], "ollama": [*rows[i].get("ollama", ()), *t["ollama"]],
                   "aliases": [*rows[i].get("aliases", ()), *t.get("aliases", ())]}
    return rows


def _row_names(row: dict[str, Any]) -> list[str]:
    """ModelSpec.names of the record this row builds, read from the row itself."""
    tags = [t.get("tag", "") for t in row.get("ollama", ()) if isinstance(t, dict)]
    return [row.get("id", ""), row.get("name", ""), *([row["hf"]] if row.get("hf") else []),
            *row.get("aliases", ()), *tags]


def load_models(user_files: tuple[str, ...] = ()) -> Registry[ModelSpec]:
    """The built-in catalog is indexed by name and each record built when first asked for; a user's --catalog
    files are checked whole, every row built at once, so a bad row is reported before anything runs."""
    user_rows = [(str(p), r) for p in user_files for r in read_user_file(p).get("model", [])]
    rows = merge_records(_builtin_rows(), user_rows, table="model", allowed=KEYS, builtin_file="models.toml")
    if not user_files:
        return Registry.lazy("model", "cardfit models", rows, _row_names, model_from_row)
    return Registry("model", "cardfit models", [model_from_row(r) for r in rows], lambda m: m.names)


@cache
def default_models() -> Registry[ModelSpec]:
    return load_models()


def find_tag(model: ModelSpec, name: str) -> OllamaTag | None:
    """The Ollama tag the user typed, if it is one: tags have a colon ('llama3.3:70b'), so the catalog id
    'llama-3.3-70b' (which normalizes to the same letters) is not mistaken for the tag."""
    key = name.strip().lower()
    if ":" not in key:
        return None
    return next((t for t in model.ollama if t.tag.lower() == key), None)

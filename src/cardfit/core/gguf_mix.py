"""Per-tensor types of a llama.cpp file type (Q4_K_M …), following `llama_tensor_get_type` in
llama.cpp src/llama-quant.cpp. The mix rules, the `*_else` types, the fallback table and the MoE bumps are
data (data/gguf_mixes.toml); this module only evaluates them. The few rules that the data file states in
prose for every mix (the 70B attn_v bump, the output-tensor rule) are spelled out here with their source."""

from __future__ import annotations

import re
from functools import cache, lru_cache

from ..catalog.loader import builtin
from ..catalog.quants import GgufMix, QuantCatalog, QuantType
from ..catalog.records import record
from ..errors import CatalogError

# llama-quant.cpp: attn_qkv and attn_kv_b (MLA) are in the attn_v category and share its counter and rules
_ATTN_V_KINDS = ("attn_v", "attn_qkv", "attn_kv_b")
# llama-quant.cpp: the IQ1/IQ2 file types take their own attn_v branch: no 70B bump, no Q8_0 MoE bump
_IQ12_RULE = "gqa4_or_moe4"


@record(slots=True)
class MixModel:
    """The few model facts the mix rules look at (llama-quant.cpp quantize_state / hparams)."""

    n_gqa: int = 1  # n_head / n_head_kv
    n_expert: int = 0
    is_70b: bool = False  # LLM_TYPE_70B: Llama architecture with 80 layers
    imatrix: bool = False  # an importance matrix was given to llama-quantize
    legacy_qkv: bool = False  # llama.cpp before the tensor-category refactor: attn_qkv had its own rule


@cache
def fallback_table() -> tuple[dict[str, str], str]:
    """tensor_type_fallback from data/gguf_mixes.toml [fallback]: type → type, and the last resort (F16)."""
    table = dict(builtin("gguf_mixes.toml").get("fallback", {}))
    second = str(table.pop("second_fallback", "F16"))
    table = {k: v for k, v in table.items() if k not in ("note", "source") and isinstance(v, str)}
    return table, second


def use_more_bits(i: int, n: int) -> bool:
    """llama-quant.cpp use_more_bits: the first and last eighth of the layers, and every third between."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def rule_applies(rule: str, i: int, n: int, mm: MixModel = MixModel(), experts: bool = False) -> bool:
    """One rule of the vocabulary documented at the top of data/gguf_mixes.toml."""
    rule = rule.strip().lower()
    if rule == "all":
        return True
    if rule in ("", "none"):
        return False
    if rule == "more_bits":
        return use_more_bits(i, n)
    if rule in ("first_n8", "first_eighth"):
        return i < n // 8
    if rule in ("first_n16", "first_sixteenth"):
        return i < n // 16
    if rule.startswith("first_") and rule[6:].isdigit():
        return i < int(rule[6:])
    if rule == "gqa4":
        return mm.n_gqa >= 4
    if rule == "gqa4_or_moe4":
        return mm.n_gqa >= 4 or mm.n_expert >= 4
    if rule == "middle":
        return n // 8 <= i < 7 * n // 8
    if rule == "imatrix_first_n8":
        return mm.imatrix and i < n // 8
    if rule == "noimatrix_first_n8":
        return not mm.imatrix and i < n // 8
    if rule == "experts_only":
        return experts
    raise CatalogError(f"unknown GGUF mix rule '{rule}'")


_POSITION_RULES = ("more_bits", "first_", "middle", "imatrix_first_n8", "noimatrix_first_n8")


def position_dependent(mix: GgufMix, kind: str) -> bool:
    """Whether the type of a `kind` tensor depends on its position (i of n) in this mix: only rules like
    more_bits / first_n8 do; everything else gives every tensor of the kind the same type."""
    if kind in ("output", "token_embd"):
        return False
    found = _lookup(mix, _rule_key(kind))
    return found is not None and bool(found[0]) and found[1].strip().lower().startswith(_POSITION_RULES)


@cache  # a handful of kinds, asked for once per tensor group of every model and mix
def _rule_key(kind: str) -> str:
    """The data key whose rules cover this tensor kind ('ffn_down_exps' → 'ffn_down', attn_qkv → attn_v)."""
    if kind in _ATTN_V_KINDS:
        return "attn_v"
    for key in ("ffn_gate", "ffn_up", "ffn_down"):
        if kind == key or kind.startswith(key + "_") and kind != "ffn_gate_inp":
            return key
    return kind


def _lookup(mix: GgufMix, key: str) -> tuple[str, str] | None:
    return _rules_of(mix).get(key)


@lru_cache(maxsize=256)
def _rules_of(mix: GgufMix) -> dict[str, tuple[str, str]]:
    """The mix's rules by data key (the first rule of a key, as a scan of mix.rules finds it)."""
    out: dict[str, tuple[str, str]] = {}
    for k, typ, rule in mix.rules:
        out.setdefault(k, (typ, rule))
    return out


# as text, compiled on first use by re's own cache (read once per mix note, for 8-expert models only)
_MOE_SENTENCE = r"MoE n_expert==8:([^.]*)"
_MOE_PAIR = r"((?:attn|ffn)_\w+(?:(?:/| and )(?:attn|ffn)_\w+)*) -> (\w+)"


@cache
def moe8_bumps(note: str) -> dict[str, str]:
    """Types forced for models with exactly 8 experts, read from the mix's note in data/gguf_mixes.toml
    ('MoE n_expert==8: attn_v -> Q8_0, attn_k -> Q8_0, attn_output -> Q5_K.')."""
    s = re.search(_MOE_SENTENCE, note)
    out: dict[str, str] = {}
    if s:
        for kinds, typ in re.findall(_MOE_PAIR, s.group(1)):
            for k in re.split(r"/| and ", kinds):
                out[k] = typ
    return out


def _output_type(mix: GgufMix, row: int, quants: QuantCatalog) -> str:
    """[output_rule]: the mix's output type, unless ncols does not divide into the default type's blocks
    (then Q8_0). F16/BF16/F32 files are not mixed."""
    default = quants.type(mix.default)
    if default.kind == "float":
        return mix.default
    if row % default.block_weights:
        return "Q8_0"
    found = _lookup(mix, "output")
    return found[0] if found and found[0] else mix.default


def _rule_of(mix: GgufMix, kind: str, mm: MixModel) -> tuple[str, tuple[str, str] | None]:
    """The data key whose rule decides a `kind` tensor, and that rule: (type, where it applies)."""
    key = _rule_key(kind)
    if kind == "attn_qkv" and mm.legacy_qkv:
        key = "attn_qkv"  # data: the `attn_qkv` value is the legacy rule (applies to every fused tensor)
    return key, _lookup(mix, key)


def applies_at(mix: GgufMix, kind: str, positions: tuple[tuple[int, int], ...], mm: MixModel) -> int:
    """How many of the (i, n) positions the rule of `kind` applies at: tensor_type(..., applies=True) is the
    type of those, applies=False of the others (the rest of the rule never looks at the position)."""
    found = _rule_of(mix, kind, mm)[1]
    if not (found and found[0]):
        return 0
    return _count_applies(found[1], positions, mm, kind.endswith("_exps"))


@lru_cache(maxsize=1 << 15)
def _count_applies(rule: str, positions: tuple[tuple[int, int], ...], mm: MixModel, experts: bool) -> int:
    return sum(1 for i, n in positions if rule_applies(rule, i, n, mm, experts))


def _mixed_type(mix: GgufMix, kind: str, i: int, n: int, row: int, quants: QuantCatalog, mm: MixModel,
                applies: bool | None = None) -> str:
    if kind == "output":
        return _output_type(mix, row, quants)
    experts = kind.endswith("_exps")
    if mix.default.upper() == "MXFP4" and not experts and kind != "token_embd":
        return mix.else_type("nonexpert") or "Q8_0"  # MXFP4_MOE: only stacked experts are MXFP4
    key, found = _rule_of(mix, kind, mm)
    name = mix.default
    if found and found[0]:
        typ, rule = found
        if rule_applies(rule, i, n, mm, experts) if applies is None else applies:
            name = typ
        else:
            name = mix.else_type(key) or mix.default
    if key in ("attn_v", "attn_k", "attn_output") and mm.n_expert == 8:
        name = moe8_bumps(mix.note).get(key, name)
    iq12 = found is not None and found[1] == _IQ12_RULE
    if key == "attn_v" and mm.is_70b and not iq12 and name.upper() in ("Q3_K", "Q4_K"):
        name = "Q5_K"  # llama-quant.cpp: 70B models have 8x smaller attn_v than attn_q, worth more bits
    return name


def tensor_type(mix: GgufMix, kind: str, i: int, n: int, row: int, quants: QuantCatalog,
                tied_output: bool = False, mm: MixModel = MixModel(),
                applies: bool | None = None) -> QuantType:
    """Storage type llama-quantize gives one 2-D tensor of `kind` in position i of n (`applies`: whether the
    kind's rule applies there, when the caller already knows; see applies_at)."""
    if kind == "token_embd" and tied_output:
        kind = "output"  # llama.cpp treats a tied embedding as the output tensor
    return stored_type(_mixed_type(mix, kind, i, n, row, quants, mm, applies), row, quants)


def position_free_type(mix: GgufMix, kind: str, mm: MixModel, quants: QuantCatalog) -> str | None:
    """The type name the mix gives every `kind` tensor wherever it stands and whatever its row length
    (before stored_type's fallback), or None where the position or the row decides: the output tensor (and
    the token embedding, which may stand in for it), and rules such as more_bits / first_n8."""
    if kind in ("output", "token_embd"):
        return None
    found = _rule_of(mix, kind, mm)[1]
    if found is not None and found[0] and found[1].strip().lower().startswith(_POSITION_RULES):
        return None
    return _mixed_type(mix, kind, 0, 0, 0, quants, mm)  # neither i, n nor row is read here


def stored_type(name: str, row: int, quants: QuantCatalog) -> QuantType:
    """The type a tensor of `row`-long rows is stored in when the mix asks for `name`: llama-quantize falls
    back to another type where the rows do not divide into the type's blocks."""
    qt = quants.type(name)
    table, second = fallback_table()
    if row % qt.block_weights:
        # llama-quantize refuses a type with no fallback entry; a calculator keeps going with F16
        qt = quants.type(table.get(qt.name.upper(), second))
        if row % qt.block_weights:
            qt = quants.type(second)  # 'must use F16 due to unusual shape'
    return qt

"""Per-tensor types of a llama.cpp file type (Q4_K_M …), following `llama_tensor_get_type` in
llama.cpp src/llama-quant.cpp (the mix rules themselves are data: data/gguf_mixes.toml)."""

from __future__ import annotations

from ..catalog.quants import GgufMix, QuantCatalog, QuantType
from ..errors import CatalogError

# llama-quant.cpp: when a row does not divide into 256-weight super-blocks, k-quants fall back
_FALLBACK = {"Q2_K": "IQ4_NL", "Q3_K": "IQ4_NL", "IQ2_XXS": "IQ4_NL", "IQ2_XS": "IQ4_NL", "IQ2_S": "IQ4_NL",
             "IQ3_XXS": "IQ4_NL", "IQ3_S": "IQ4_NL", "IQ1_S": "IQ4_NL", "IQ1_M": "IQ4_NL", "IQ4_XS": "IQ4_NL",
             "TQ1_0": "IQ4_NL", "TQ2_0": "IQ4_NL", "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}


def use_more_bits(i: int, n: int) -> bool:
    """llama-quant.cpp use_more_bits: the first and last eighth of the layers, and every third between."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def rule_applies(rule: str, i: int, n: int) -> bool:
    rule = rule.strip().lower()
    if rule in ("all", ""):
        return True
    if rule == "more_bits":
        return use_more_bits(i, n)
    if rule.startswith("first_") and rule[6:].isdigit():
        return i < int(rule[6:])
    if rule == "first_eighth":
        return i < n // 8
    if rule == "first_sixteenth":
        return i < n // 16
    if rule == "none":
        return False
    raise CatalogError(f"unknown GGUF mix rule '{rule}'")


def _rule_for(mix: GgufMix, kind: str) -> tuple[str, str] | None:
    """The most specific rule key that names this tensor kind ('ffn_down' covers ffn_down_exps)."""
    best = None
    for key, typ, rule in mix.rules:
        if kind == key or (kind.startswith(key + "_") and key not in ("output",)):
            if best is None or len(key) > len(best[0]):
                best = (key, typ, rule)
    return None if best is None else (best[1], best[2])


def tensor_type(mix: GgufMix, kind: str, i: int, n: int, row: int, quants: QuantCatalog,
                tied_output: bool = False) -> QuantType:
    """Storage type llama-quantize gives one 2-D tensor of `kind` in layer i of n."""
    if kind == "token_embd" and tied_output:
        kind = "output"  # llama.cpp treats a tied embedding as the output tensor
    rule = _rule_for(mix, kind)
    name = rule[0] if rule and rule_applies(rule[1], i, n) else mix.default
    qt = quants.type(name)
    seen = 0
    while row % qt.block_weights and seen < 3:
        qt = quants.type(_FALLBACK.get(qt.name, "F16"))
        seen += 1
    return qt

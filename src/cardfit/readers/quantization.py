"""`quantization_config` of a checkpoint → the cardfit quantization name of its weights."""

from __future__ import annotations

from typing import Any


def _compressed(qc: dict[str, Any]) -> str:
    fmt = str(qc.get("format") or "")
    if "nvfp4" in fmt:
        return "nvfp4"
    if "float" in fmt:
        return "fp8"
    groups = qc.get("config_groups")
    for g in (groups.values() if isinstance(groups, dict) else ()):
        w = g.get("weights") if isinstance(g, dict) else None
        if isinstance(w, dict):
            bits, kind = w.get("num_bits"), str(w.get("type") or "int")
            if bits == 4:
                return "nvfp4" if kind == "float" else "int4"
            if bits == 8:
                return "fp8" if kind == "float" else "int8"
    return "int4" if "pack" in fmt else ""


def quant_from_config(qc: Any, name: str = "") -> str:
    """'' when absent or not recognised."""
    if not isinstance(qc, dict):
        return ""
    method = str(qc.get("quant_method") or "").lower().replace("-", "_")
    bits = qc.get("bits", qc.get("w_bit", qc.get("weight_bits")))
    if method in ("awq", "gptq", "autoround", "auto_round", "marlin", "hqq"):
        return {4: "int4", 8: "int8"}.get(bits if isinstance(bits, int) else 4, "")
    if method == "bitsandbytes":
        if qc.get("load_in_4bit") or qc.get("_load_in_4bit"):
            return "nf4" if qc.get("bnb_4bit_use_double_quant", True) else "nf4_single"
        if qc.get("load_in_8bit") or qc.get("_load_in_8bit"):
            return "int8"
        return ""
    if method in ("fp8", "fbgemm_fp8", "finegrained_fp8"):
        return "fp8"
    if method in ("compressed_tensors",):
        return _compressed(qc)
    if method == "mxfp4":
        return "mxfp4"
    if method in ("modelopt",) and "fp4" in str(qc.get("quant_algo", "")).lower():
        return "nvfp4"
    return ""

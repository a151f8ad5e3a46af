"""Quantization catalog: uniform types stored as exact block geometry (bits per weight is derived), and
llama.cpp file-type mixes (Q4_K_M …) that assign a type per tensor."""

from __future__ import annotations

import re
from dataclasses import field
from functools import cache
from typing import Any

from ..errors import CatalogError, InputError, UnknownNameError
from ..names import closest, norm
from .gpus import Feature
from .loader import builtin, builtin_path
from .records import record
from .schema import check_keys, keys_of, row_error


@record(slots=True)
class QuantType:
    id: str
    name: str
    kind: str  # float | int | gguf
    block_weights: int
    block_bytes: int
    scope: str = "all"  # all | linear | experts
    requires: Feature | None = None  # the format the card must compute in (FP8 kernels need FP8 units)
    ggml_type: int | None = None
    group_size: int = 0
    aliases: tuple[str, ...] = ()
    source: str = ""

    @property
    def bits_per_weight(self) -> float:
        return 8 * self.block_bytes / self.block_weights

    def nbytes(self, n_weights: int) -> int:
        """Exact storage for n weights, whole blocks (ceil)."""
        return -(-n_weights // self.block_weights) * self.block_bytes


@record(slots=True)
class GgufMix:
    """A llama.cpp file type: the type each kind of tensor gets. `rules` maps a tensor kind
    (attn_v, ffn_down, output, token_embd, …) to (type name, rule); see core/gguf_mix.py."""

    name: str
    ftype: int
    default: str
    rules: tuple[tuple[str, str, str], ...] = ()
    note: str = ""
    source: str = ""
    id: str = field(default="")
    otherwise: tuple[tuple[str, str], ...] = ()  # `*_else`: type of a kind where its rule does not apply

    @property
    def kind(self) -> str:
        return "gguf-mix"

    def else_type(self, key: str) -> str:
        return next((t for k, t in self.otherwise if k == key), "")


Quant = QuantType | GgufMix
# as text, compiled on first use by re's own cache (only a name the catalog lacks is tried against it)
_GROUPED = r"^(?P<fmt>int4|int8|awq|gptq|w4a16)[-_ ]?g(?P<g>\d{1,5})$"

# GGUF names for the float types of the main table
_GGUF_FLOAT = {"f32": "fp32", "f16": "fp16", "bf16": "bf16", "mxfp4": "mxfp4", "nvfp4": "nvfp4"}
_RULE_KEYS = ("output", "token_embd", "attn_q", "attn_k", "attn_v", "attn_output", "attn_qkv",
              "ffn_gate", "ffn_up", "ffn_down", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps")


class QuantCatalog:
    def __init__(self, types: list[QuantType], mixes: list[GgufMix], variants: list[GgufMix] | None = None
                 ) -> None:
        self.types = types
        self.mixes = mixes  # llama.cpp's file types
        self.variants = variants or []  # published builds laid out on a file type ([[variant]])
        self._index: dict[str, Quant] = {}
        self._display: dict[str, str] = {}
        self._types = self._index_types()
        for q in types:
            for n in (q.id, q.name, *q.aliases):
                self._add(n, q)
        for gname, tid in _GGUF_FLOAT.items():
            self._index.setdefault(norm(gname), self.type(tid))
        for m in mixes:  # file-type names win over the bare GGUF type of the same name (Q8_0, Q4_0 …)
            existing = self._index.get(norm(m.name))
            keep_float = (
                existing is not None and not isinstance(existing, GgufMix) and existing.kind != "gguf"
            )
            if not keep_float:  # but "bf16"/"f16" stay the plain float formats
                self._add(m.name, m, force=True)
            self._add(f"mostly_{m.name}", m, force=True)
        for v in self.variants:
            self._add(v.name, v)

    def _add(self, name: str, q: Quant, force: bool = False) -> None:
        k = norm(name)
        if k in self._index and not force and self._index[k] is not q:
            raise CatalogError(f"quantization name '{name}' is used twice")
        self._index[k] = q
        self._display[k] = q.name

    def find(self, name: str) -> Quant | None:
        return self._index.get(norm(name))

    def get(self, name: str) -> Quant:
        q = self.find(name) or self._grouped(name)
        if q is None:
            raise UnknownNameError("quantization", name, closest(name, self._display), "cardfit quants")
        return q

    def _grouped(self, name: str) -> QuantType | None:
        """'int4-g64', 'awq-g32', 'gptq-g256', 'int8-g128': a grouped integer format with the group size as a
        parameter, sized like the catalog's g128 entry (one fp16 scale and one packed zero per group)."""
        m = re.match(_GROUPED, name.strip().lower())
        if m is None:
            return None
        bits, group = (8 if m["fmt"] == "int8" else 4), int(m["g"])
        if not 8 <= group <= 4096 or group & (group - 1):
            raise InputError(f"group size {group} in '{name}' must be a power of two from 8 to 4096",
                             field="quant", hint="e.g. int4-g128")
        base = self.type("int4_g128")
        # per group: the weights, a 16-bit scale and a zero point of the weight's width (AutoAWQ/AutoGPTQ)
        # (eight groups make a whole number of bytes: 8 × group weights in `group_bits` bytes)
        group_bits = group * bits + 16 + bits
        return QuantType(id=f"int{bits}_g{group}", name=f"INT{bits} g{group}", kind="int",
                         block_weights=8 * group, block_bytes=group_bits, scope="linear", group_size=group,
                         source=f"{base.source.split(':')[0]} with group size {group}")

    def type(self, name: str) -> QuantType:
        """A uniform storage type by id or GGUF name ('Q6_K', 'gguf_q6_k', 'bf16', 'F16')."""
        found = self._types.get(name)
        if found is None:
            found = self._types.get(norm(name))
        if found is None:
            raise CatalogError(f"no quantization type '{name}'")
        return found

    def _index_types(self) -> dict[str, QuantType]:
        out: dict[str, QuantType] = {}
        for q in self.types:
            keys = [norm(q.id), norm(q.name), q.id, q.name]
            if q.kind == "gguf":
                keys.append(norm(q.id).removeprefix("gguf"))
            for k in keys:
                out.setdefault(k, q)
        for gname, tid in _GGUF_FLOAT.items():
            out.setdefault(gname, out[norm(tid)])
            out.setdefault(gname.upper(), out[norm(tid)])
        return out

    def by_ggml_type(self, ggml_type: int) -> QuantType | None:
        for q in self.types:
            if q.ggml_type == ggml_type:
                return q
        tid = GGML_FLOAT_TYPES.get(ggml_type)
        return self.type(tid) if tid else None


# the float formats a GGUF file can hold, by ggml type number (ggml/include/ggml.h enum ggml_type:
# GGML_TYPE_F32 = 0, F16 = 1, BF16 = 30, MXFP4 = 39, NVFP4 = 40)
GGML_FLOAT_TYPES = {0: "fp32", 1: "fp16", 30: "bf16", 39: "mxfp4", 40: "nvfp4"}


def gguf_holds(q: QuantType | GgufMix) -> bool:
    """Whether a GGUF file (what llama.cpp and Ollama load) can hold weights in this format: a llama.cpp file
    type, a GGUF type, or a float format with a ggml type; FP8, INT8/INT4 (AWQ, GPTQ) and NF4 are
    checkpoint formats the GGUF runtimes do not load."""
    return isinstance(q, GgufMix) or q.kind == "gguf" or q.id in GGML_FLOAT_TYPES.values()


QUANT_KEYS = keys_of(QuantType) - {"override"}
# a [[mix]] row: its name, file type, default type, a note, a source, and per tensor kind a type, the
# rule that says where it applies (`<kind>_rule`) and the type elsewhere (`<kind>_else`)
MIX_KEYS = frozenset({"name", "ftype", "default", "other", "source",
                      *_RULE_KEYS, *(f"{k}_rule" for k in _RULE_KEYS), *(f"{k}_else" for k in _RULE_KEYS)})


def _type_from_row(row: dict[str, Any]) -> QuantType:
    check_keys(row, QUANT_KEYS, table="quant", path=builtin_path("quants.toml"))
    known = {k: (tuple(v) if k == "aliases" else v) for k, v in row.items()}
    if row.get("requires"):
        if row["requires"] not in set(Feature):
            raise CatalogError(f"quant '{row.get('id', '?')}': requires '{row['requires']}' is not one of "
                               f"{', '.join(Feature)}", path=builtin_path("quants.toml"))
        known["requires"] = Feature(row["requires"])
    else:
        known.pop("requires", None)
    try:
        return QuantType(**known)
    except TypeError as e:
        raise row_error("quant", row, e) from e


def _mix_from_row(row: dict[str, Any]) -> GgufMix:
    check_keys(row, MIX_KEYS, table="mix", path=builtin_path("gguf_mixes.toml"))
    rules = []
    for key in _RULE_KEYS:
        t = row.get(key)
        if t:
            rules.append((key, str(t), str(row.get(f"{key}_rule", "all") or "all")))
    otherwise = tuple((key, str(row[f"{key}_else"])) for key in _RULE_KEYS if row.get(f"{key}_else"))
    return GgufMix(name=row["name"], ftype=int(row["ftype"]), default=row["default"], rules=tuple(rules),
                   note=str(row.get("other", "")), source=row.get("source", ""), id=norm(row["name"]),
                   otherwise=otherwise)


# a [[variant]] row: a published build with a layout of its own on a llama.cpp file type (`base`); the tensor
# kinds it names replace the base's rules for those kinds
VARIANT_KEYS = (MIX_KEYS - {"ftype"}) | {"base"}


def _variant_from_row(row: dict[str, Any], mixes: list[GgufMix]) -> GgufMix:
    check_keys(row, VARIANT_KEYS, table="variant", path=builtin_path("gguf_mixes.toml"))
    base = next((m for m in mixes if m.name == row.get("base")), None)
    if base is None or not row.get("source"):
        raise CatalogError(f"variant '{row.get('name', '?')}': needs a `base` file type and a `source`",
                           path=builtin_path("gguf_mixes.toml"))
    given = {k for k in _RULE_KEYS if row.get(k)}
    own = _mix_from_row({"name": row["name"], "ftype": base.ftype, "other": row.get("other", ""),
                         "default": row.get("default", base.default), "source": row["source"],
                         **{k: v for k, v in row.items() if k.split("_rule")[0].split("_else")[0] in given}})
    return GgufMix(name=own.name, ftype=base.ftype, default=own.default,
                   rules=tuple(r for r in base.rules if r[0] not in given) + own.rules, note=own.note,
                   source=own.source, id=own.id,
                   otherwise=tuple(o for o in base.otherwise if o[0] not in given) + own.otherwise)


@cache
def default_quants() -> QuantCatalog:
    types = [_type_from_row(r) for r in builtin("quants.toml")["quant"]]
    try:
        data = builtin("gguf_mixes.toml")
    except FileNotFoundError:
        data = {}
    mixes = [_mix_from_row(r) for r in data.get("mix", ())]
    return QuantCatalog(types, mixes, [_variant_from_row(r, mixes) for r in data.get("variant", ())])

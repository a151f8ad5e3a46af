"""From what the user typed to a ModelSpec: a bare shape, a file or folder (readers), a Hub id (--hub), an
Ollama tag with an optional quant suffix, or a catalog name."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from ..catalog.models import ModelSpec, OllamaTag, default_models, find_tag, load_models
from ..catalog.records import record
from ..catalog.registry import Registry
from ..errors import InputError, UnknownNameError
from .inputs import ModelInput

if TYPE_CHECKING:
    from ..catalog.runtimes import RuntimeProfile

# Ollama tag suffixes name the build: qwen3:8b-q8_0, llama3.1:8b-instruct-fp16 (text, compiled on first use
# by re's own cache: a tag without a dash after its colon, 'llama3.1:8b', never needs it; tag_quant)
_TAG_QUANT_TEXT = r"^(?P<base>[^:]+:[^-]+)(?:-instruct|-it|-chat)?-(?P<q>q\d[_a-z0-9]*|fp16|bf16|f16|mxfp4)$"


def tag_quant(name: str) -> re.Match[str] | None:
    """The match of a tag with a quantization suffix ('qwen3:8b-q8_0': base 'qwen3:8b', q 'q8_0'), else None.
    The pattern needs a '-' after the first ':' ([^:]+ runs up to it, then [^-]+ and a '-'): a name without
    one is answered without compiling it."""
    if "-" not in name.partition(":")[2]:
        return None
    return re.match(_TAG_QUANT_TEXT, name, re.I)


@record(slots=True)
class Resolved:
    model: ModelSpec
    tag: OllamaTag | None = None  # the user named an Ollama tag
    quant_hint: str = ""  # quantization implied by the name or file
    origin: str = "catalog"  # catalog | shape | file | hub | ollama-store | hf-cache
    ollama: bool = False  # the name was an Ollama tag (plan for Ollama, its Q4_K_M build by default)
    # the name is also the model's own catalog id or Hugging Face id ('deepseek-v3': Ollama's library name
    # and the checkpoint's id): the checkpoint as that id names it, for the runtimes that serve checkpoints
    checkpoint: Resolved | None = None

    @property
    def gguf(self) -> bool:
        """Read from a GGUF file (its tensors carry llama.cpp names)."""
        t = self.model.tensors
        return bool(t) and any(x.name.startswith("blk.") or x.name == "token_embd.weight" for x in t[:8])

    def native_file(self, rt: RuntimeProfile) -> str:
        """The GGUF file type `rt`'s users download for the checkpoint this name is, when no --quant is
        given: the runtime's `native_gguf` entry for the model's own format (llama.cpp: gpt-oss's MXFP4
        checkpoint runs as ggml-org's MXFP4_MOE file, data/runtimes.toml). "" where the runtime has none
        (Ollama pulls its own blobs), the name is an Ollama tag or a GGUF file, which name their weights, or
        a checkpoint on disk: its owner converts it (convert_hf_to_gguf.py keeps gpt-oss's non-expert tensors
        16-bit, the checkpoint's own MXFP4). The one owner: plan (build_context) and deploy's search over
        runtimes x quants ask it."""
        native = self.model.native_quant.lower()
        # the name says which weights, or they are the user's own files
        named = self.tag is not None or self.ollama or self.gguf or self.origin not in ("catalog", "hub")
        if not native or named or self.quant_hint.lower() != native:
            return ""
        return dict(rt.native_gguf).get(native, "")


def _shape(inp: ModelInput) -> ModelSpec:
    missing = [f"--{n.replace('_', '-')}"
               for n in ("params", "layers", "kv_heads", "head_dim") if getattr(inp, n) is None]
    if len(missing) == 4:
        raise InputError("give a MODEL (a catalog name such as llama3.1:8b, an Ollama tag, a Hugging Face "
                         "id, a config.json, folder, .gguf or .safetensors path) or a shape (--params, "
                         "--layers, --kv-heads, --head-dim)", field="model",
                         hint="`cardfit models` lists the built-in ones")
    if missing:
        raise InputError(f"a bare shape needs {', '.join(missing)} as well", field="params",
                         hint="or name a catalog model (`cardfit models`)")
    params = int(inp.params)  # type: ignore[arg-type]
    heads = (inp.hidden // inp.head_dim) if inp.hidden else inp.kv_heads  # type: ignore[operator]
    return ModelSpec(id="custom", name=f"custom {params / 1e9:g}B", params=params, layers=inp.layers,  # type: ignore[arg-type]
                     kv_heads=inp.kv_heads, head_dim=inp.head_dim, hidden=inp.hidden or 0, heads=heads or 0,  # type: ignore[arg-type]
                     vocab=inp.vocab or 0, active_params=int(inp.active_params or 0),
                     attention="gqa" if heads and inp.kv_heads and inp.kv_heads < heads else "mha",
                     source="command-line shape", origin="shape")


def _looks_like_path(name: str) -> bool:
    return name.endswith((".json", ".gguf", ".safetensors")) or os.sep in name and os.path.exists(name) \
        or os.path.isdir(name)


def spec_from_config(cfg: dict, name: str = "uploaded model") -> ModelSpec:
    """A config.json's contents (already parsed JSON) → ModelSpec, as `cardfit plan config.json` reads it."""
    from ..readers.config import fields_from_config
    from ..readers.model import build

    return build(fields_from_config(cfg, "config.json"), None, name=name, source="uploaded config.json",
                 origin="upload")


def resolve(inp: ModelInput) -> Resolved:
    if inp.config_json is not None:
        name = inp.config_json.get("_name_or_path")
        label = (
            name.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1][:100]
            if isinstance(name, str) and name.strip()
            else "uploaded model"
        )
        spec = spec_from_config(inp.config_json, label or "uploaded model")
        return Resolved(spec, quant_hint=spec.file_quant, origin="upload")
    if inp.model is None:
        return Resolved(_shape(inp), origin="shape")
    given = [f"--{n.replace('_', '-')}" for n in ("params", "active_params", "layers", "kv_heads", "head_dim",
                                                    "hidden", "vocab") if getattr(inp, n) is not None]
    if given:
        raise InputError(f"{', '.join(given)} describe a bare shape; with a MODEL they would be ignored",
                         field=given[0][2:].replace("-", "_"), hint="give the model or the shape, not both")
    name = inp.model.strip()
    if not name:
        raise InputError("MODEL is empty", field="model", hint="`cardfit models` lists them")
    models = load_models(tuple(inp.catalog)) if inp.catalog else default_models()
    from ..readers.source import local_files_allowed

    if local_files_allowed() and (_looks_like_path(name) or os.path.exists(name)):
        from ..readers import read_model_path  # file formats stay out of the core

        spec = read_model_path(name)
        return Resolved(spec, quant_hint=spec.file_quant, origin="file")
    if inp.hub:
        from ..readers.hub import read_hub_model

        spec = read_hub_model(name)
        return Resolved(spec, quant_hint=spec.file_quant, origin="hub")
    from ..readers.stores import find_local  # pulled into the Ollama store or HF cache: read its own file

    local = find_local(name)
    if local is not None:
        pulled = (
            OllamaTag(name, local.file_quant, source=local.source) if local.origin == "ollama-store" else None
        )
        return Resolved(local, pulled, quant_hint=local.file_quant, origin=local.origin)
    latest = name.lower().endswith(":latest") and ":" not in name[:-7]
    if latest:
        name = name[:-7]  # Ollama pulls NAME:latest for a bare NAME: the same tag
    m = tag_quant(name)
    found = models.find(name)
    if found is None:
        found = models.find(m["base"]) if m else None
        if found is None:
            found = _get_or_hint(models, name)
    return _from_catalog(found, name, m["base"] if m else name, m["q"] if m else "", latest)


_HF_ID = r"^[A-Za-z0-9][\w.-]*/[\w.-]+$"  # org/name, as on huggingface.co (compiled on first use: a miss)


def _get_or_hint(models: Registry[ModelSpec], name: str) -> ModelSpec:
    """The catalog record, or an error with suggestions; an unknown org/name id is pointed at --hub."""
    try:
        return models.get(name)
    except UnknownNameError as e:
        if re.match(_HF_ID, name):
            e.hint = ("add --hub to read it from the Hugging Face Hub; `cardfit models` lists the built-in "
                      "ones")
        raise


def is_ollama_name(model: ModelSpec, name: str) -> bool:
    """Ollama tags have a colon ('qwen3:8b', 'llama3.1:latest'); a bare library name ('qwen3', 'llama3.2') is
    Ollama's ':latest' of the model whose Ollama tags (or tag-shaped aliases, 'llama3.2:3b') carry it."""
    key = name.strip().lower()
    if ":" in key:
        return True
    tags = [t.tag for t in model.ollama] + [a for a in model.aliases if ":" in a]
    return any(t.lower().split(":")[0] == key for t in tags)


def _from_catalog(found: ModelSpec, name: str, base: str, suffix_quant: str,
                  latest: bool = False) -> Resolved:
    ollama = latest or is_ollama_name(found, name)  # NAME:latest is a tag, whatever NAME is
    tag = find_tag(found, base) or find_tag(found, name)
    if tag is None and ollama and found.ollama and ":" not in name:
        # the bare library name: its ':latest', the model's first tag of that family (the catalog puts the
        # latest one first); a model's first tag where the name is an alias of another kind
        key = name.strip().lower()
        tag = next((t for t in found.ollama if t.tag.lower().split(":")[0] == key), found.ollama[0])
    hint = suffix_quant
    if not hint and tag is not None and tag.quant.lower() != "default":
        hint = tag.quant
    if not hint and ollama:
        hint = "Q4_K_M"  # Ollama's plain tags are the Q4_K_M build
    key = name.strip().lower()
    own = ollama and not latest and ":" not in key and key in (found.id.lower(), found.hf.lower())
    checkpoint = Resolved(found, quant_hint=found.native_quant, origin="catalog") if own else None
    return Resolved(found, tag, quant_hint=hint or found.native_quant, origin="catalog", ollama=ollama,
                    checkpoint=checkpoint)

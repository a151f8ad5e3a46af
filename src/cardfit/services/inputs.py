"""Every user input, described once (type, limits, help text). The CLI builds its options from these
models, the web API uses them as request bodies and publishes them in its OpenAPI schema, and a
validation failure becomes one InputError line for all of them. Unknown fields are rejected."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import InputError

MAX_CONTEXT = 1 << 24  # 16.7M tokens: beyond any published model
MAX_PARAMS = 10**14  # 100 T parameters


class Input(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelInput(Input):
    """How to name a model: a catalog name or path, or a bare shape."""

    model: str | None = Field(None, description="catalog name (llama3.1:8b, meta-llama/Llama-3.1-8B), a config.json, "
                              "model folder, .gguf or .safetensors path; or give the shape with --params …",
                              max_length=4096)
    params: float | None = Field(None, gt=0, le=MAX_PARAMS, description="total parameters (e.g. 7e9) for a bare shape")
    active_params: float | None = Field(None, gt=0, le=MAX_PARAMS, description="MoE: parameters active per token")
    layers: int | None = Field(None, ge=1, le=100_000, description="transformer layers (num_hidden_layers)")
    kv_heads: int | None = Field(None, ge=1, le=100_000, description="KV heads (num_key_value_heads)")
    head_dim: int | None = Field(None, ge=1, le=65_536, description="head dimension")
    hidden: int | None = Field(None, ge=1, le=1_000_000, description="hidden size, where known")
    vocab: int | None = Field(None, ge=1, le=100_000_000, description="vocabulary size, where known")
    config_json: dict[str, Any] | None = Field(None, description="the contents of a config.json as a JSON object "
                                               "(web uploads); parsed like a file, never executed")
    hub: bool = Field(False, description="read config.json and file headers from the Hugging Face Hub (network)")
    catalog: tuple[str, ...] = Field((), description="extra catalog file(s) (TOML/JSON) with your own GPUs, models "
                                     "or prices", max_length=16)


class RuntimeInput(Input):
    """Runtime knobs shared by plan, max-context and speed."""

    quant: str | None = Field(None, max_length=64, description="weights: bf16 fp16 fp32 fp8 int8 int4 nf4 mxfp4 or a "
                              "GGUF type (Q4_K_M, Q8_0 …); default: the model's own")
    context: int | None = Field(None, ge=1, le=MAX_CONTEXT, description="tokens of context per sequence; default: "
                                "the runtime's (Ollama: by VRAM; vLLM: the model's maximum)")
    batch: int | None = Field(None, ge=1, le=65_536, description="concurrent sequences, each with its own KV cache")
    kv_dtype: str | None = Field(None, max_length=16, description="KV cache type: f16 bf16 fp8 q8_0 q4_0")
    runtime: str | None = Field(None, max_length=32, description="vllm llama.cpp ollama transformers sglang tgi; "
                                "default: llama.cpp for GGUF types, ollama for Ollama tags, else vllm")
    prefill_chunk: int | None = Field(None, ge=1, le=MAX_CONTEXT, description="tokens prefilled at once (vLLM "
                                      "max_num_batched_tokens, llama.cpp n_ubatch); default from the runtime")
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1, description="vLLM: fraction of the card it may use")
    parallel: int | None = Field(None, ge=1, le=65_536, description="Ollama / llama.cpp slots (multiplies the KV cache)")
    gpus: int | None = Field(None, ge=1, le=4096, description="cards per set")
    tp: int | None = Field(None, ge=1, le=4096, description="tensor-parallel degree")
    flash_attn: bool | None = Field(None, description="flash attention (default from the runtime)")
    overhead_gb: float | None = Field(None, ge=0, le=1000, description="runtime overhead to assume instead of the "
                                      "runtime profile's (GB), e.g. 1 for the llama.cpp rule of thumb")
    ram_gb: float | None = Field(None, gt=0, le=1_000_000, description="system RAM for CPU offload, GB")
    allow_long_context: bool = Field(False, description="allow a context beyond the model's trained maximum")


class PlanInput(ModelInput, RuntimeInput):
    gpu: str | None = Field(None, max_length=128, description="only this card (RTX 4090, H100 SXM, …)")
    priced: bool = Field(False, description="rank only cards with a rental price (the seeds' fleet)")
    headroom: float | None = Field(None, ge=1, le=10, description="also name the smallest card holding this many "
                                   "times the weights (seed 001's rule of thumb: 1.25-1.5)")
    duty: float | None = Field(None, gt=0, le=1, description="cost section: share of the paid hours the card is "
                               "busy (0-1]; default 1")
    api: str | None = Field(None, max_length=128, description="cost section: API to break even against "
                            "(`cardfit apis`); default: seed 003's three tiers")


class MaxContextInput(PlanInput):
    pass


def parse(model: type[Input], values: dict[str, Any]) -> Any:
    """Validate raw values; the first problem becomes one InputError line naming the field."""
    for key, value in values.items():
        if isinstance(value, str) and not value.strip():
            raise InputError(f"--{key.replace('_', '-')} is empty", field=key, hint="give a value or leave it out")
    fields = model.model_fields
    for key, value in list(values.items()):  # a repeatable option given once, as a plain string
        info = fields.get(key)
        if isinstance(value, str) and info is not None and "tuple" in str(info.annotation):
            values = {**values, key: (value,)}
    try:
        return model(**{k: v for k, v in values.items() if v is not None and v != ()})
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "input"
        value = err.get("input")
        shown = f" (got {value!r})" if not isinstance(value, dict) else ""
        msg = err["msg"].replace("Input should be", "must be").replace("Value error, ", "")
        raise InputError(f"--{field.replace('_', '-')} {msg}{shown}", field=field) from None

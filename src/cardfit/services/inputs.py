"""Every user input, described once: type (the annotation), default, limits and help text (`opt`), as frozen
dataclasses. The CLI builds its options from these descriptions (cli/options.py), the web API builds its
request models and OpenAPI schema from them (web/schema.py, pydantic, built lazily), and `parse` validates
raw values for the CLI, the web API and the Python API into one InputError line. Unknown fields are
rejected. Nothing third-party is imported here, so `cardfit plan` starts fast."""

from __future__ import annotations

import dataclasses
import types
import typing
from functools import cache
from typing import Any

from ..catalog.limits import SHAPE_LIMITS
from ..catalog.records import record
from ..errors import InputError

MAX_CONTEXT = 1 << 24  # 16.7M tokens: beyond any published model
MAX_PARAMS = 10**14  # 100 T parameters
MAX_BATCH = 65_536  # concurrent sequences (--batch, --parallel): far beyond any server's slots
# concurrent users of a served load (deploy --users, speed --concurrency): past the engine's slots they queue,
# timed by a closed-loop formula whose work does not grow with them
MAX_USERS = 10_000_000
MAX_TOKENS_PER_S = 1e9  # output tokens/s of one deployment, given (--tokens-per-s) or read from a log
# The least a float that must be above 0 may be: every such option is a count, rate, price, time, size or
# fraction that nobody states finer than a millionth of its unit, and a smaller one (5e-324, a denormal) has a
# reciprocal that overflows to inf (deploy --users 5e-324 printed Infinity; speed --bandwidth 5e-324, NaN).
MIN_POSITIVE = 1e-6


@record
class Limits:
    """What a value may be, beyond its type."""

    help: str = ""
    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None
    max_length: int | None = None  # characters of a string, items of a tuple
    split: bool = False  # a tuple given as "1,8,64" (or repeated): split on commas and spaces
    item_ge: int | None = None  # every item of a split tuple at least this
    item_le: int | None = None  # and at most this
    # what the command uses when the field is not given, where its default is None only to tell "not given"
    # apart (deploy's targets): published as the default of the web API's schema (the page reads it there)
    applied: Any = None


def opt(default: Any = None, help: str = "", **limits: Any) -> Any:  # noqa: A002  (the help text)
    """A described input field: its default, help text and limits (gt, ge, lt, le, max_length, split)."""
    return dataclasses.field(default=default, metadata={"limits": Limits(help=help, **limits)})


@record
class FieldInfo:
    """One input as the CLI, the web schema and `parse` see it."""

    name: str
    annotation: Any  # the resolved type, e.g. int | None
    kind: str  # str int float bool dict tuple choice
    item: str  # a tuple's item kind
    choices: tuple[str, ...]
    default: Any
    limits: Limits

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def help(self) -> str:
        return self.limits.help


@record
class Input:
    """Base of every command's input. `to_json()` gives the values set, for caching and display."""

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def replace(self, **changes: Any) -> Any:
        return dataclasses.replace(self, **changes)


_KINDS = {str: "str", int: "int", float: "float", bool: "bool", dict: "dict"}


def _kind(annotation: Any) -> tuple[str, str, tuple[str, ...]]:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return _kind(args[0])
    if origin is typing.Literal:
        return "choice", "", tuple(typing.get_args(annotation))
    if origin is tuple:
        return "tuple", _KINDS[typing.get_args(annotation)[0]], ()
    if origin is dict:
        return "dict", "", ()
    return _KINDS[annotation], "", ()


@cache
def describe(cls: type) -> tuple[FieldInfo, ...]:
    """The fields of an input class, in declaration order (bases first)."""
    out = []
    for f in dataclasses.fields(cls):
        hint = _hint(cls, f.name)
        kind, item, choices = _kind(hint)
        out.append(FieldInfo(f.name, hint, kind, item, choices, f.default,
                             f.metadata.get("limits", Limits())))
    return tuple(out)


def _hint(cls: type, name: str) -> Any:
    """typing.get_type_hints(cls)[name]: the annotation of the class in the MRO that declares `name` last."""
    owner = next(c for c in cls.__mro__ if name in c.__dict__.get("__annotations__", {}))
    text = owner.__dict__["__annotations__"][name]
    return _evaluated(text, owner.__module__) if isinstance(text, str) else typing.get_type_hints(owner)[name]


@cache
def _evaluated(text: str, module: str) -> Any:
    """An annotation's text evaluated in `module` by typing.get_type_hints, once per distinct text ('int |
    None' is most of them): each evaluation compiles the text (~0.4 ms), so the plain forms the inputs use
    are read without it (`_plain`; tests/test_fast_paths.py holds them equal)."""
    plain = _plain(text)
    if plain is not None:
        return plain
    holder = type("_Annotation", (), {"__annotations__": {"value": text}, "__module__": module})
    return typing.get_type_hints(holder)["value"]


_PLAIN: dict[str, Any] = {"int": int, "str": str, "float": float, "bool": bool,
                          "dict[str, Any]": dict[str, Any]}


def _plain(text: str) -> Any:
    """The type a plain annotation text names (`T`, `tuple[T, ...]`, either `| None`, T a builtin scalar or
    `dict[str, Any]`), or None for any other text."""
    name, bar, rest = text.partition(" | ")
    if bar and rest != "None":
        return None
    kind = _PLAIN.get(name)
    if kind is None and name.startswith("tuple[") and name.endswith(", ...]"):
        item = _PLAIN.get(name[len("tuple["):-len(", ...]")])
        kind = tuple[item, ...] if item is not None else None  # type: ignore[valid-type]
    if kind is None:
        return None
    return kind | None if bar else kind


# ------------------------------------------------------------------------------------ the shared inputs

# The engine settings a server is launched with, one definition for every command that takes them (plan and
# max-context: --max-num-seqs, --gpu-memory-utilization; speed and a pinned deploy: all of them): the option
# name is the field's, its help text and limits are here, so the flag, its limits and its one-line error are
# the same wherever it is given. (help, limits)
ENGINE_OPTIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "max_num_seqs": ("engine: sequences scheduled at once (vLLM --max-num-seqs, TensorRT-LLM max_batch_size; "
                     "its profile run samples that many rows); default: the engine's on the card (vLLM V1: "
                     "1024 on >= 70 GiB cards but A100, else 256)", {"ge": 1, "le": 1_000_000}),
    "max_num_batched_tokens": ("engine: tokens a step may carry (vLLM --max-num-batched-tokens, SGLang "
                               "--chunked-prefill-size, TensorRT-LLM max_num_tokens)",
                               {"ge": 1, "le": MAX_CONTEXT}),
    "gpu_memory_utilization": ("engine: share of the card it may use (vLLM --gpu-memory-utilization, SGLang "
                               "--mem-fraction-static)", {"gt": 0, "le": 1}),
    "max_prefill_tokens": ("engine: prompt tokens a prefill batch may carry (SGLang --max-prefill-tokens)",
                           {"ge": 1, "le": MAX_CONTEXT}),
    "attention_dp": ("engine: data-parallel attention groups of a pinned replica (SGLang --attn-dp-size, "
                     "before 0.5.22 --dp-size with --enable-dp-attention; vLLM --data-parallel-size of a MoE "
                     "model; TensorRT-LLM enable_attention_dp)",
                     {"ge": 1, "le": 1024}),
    "expert_parallel": ("engine: the ranks a pinned MoE replica shards its experts over, beside "
                        "--attention-dp groups (vLLM --enable-expert-parallel, SGLang --ep-size, "
                        "TensorRT-LLM moe_expert_parallel_size)", {"ge": 1, "le": 1024}),
    "max_model_len": ("engine: the context it is started with (vLLM --max-model-len, TGI "
                      "--max-total-tokens); default: the longest request (a pinned vLLM V0: the model's "
                      "trained context, its own default)", {"ge": 1, "le": MAX_CONTEXT}),
    "scheduler_recv_interval": ("engine: decode steps between two reads of new requests while it decodes "
                                "(SGLang --scheduler-recv-interval); default 1, every step",
                                {"ge": 1, "le": 10_000}),
    # TensorRT-LLM llm_args.py AttentionDpConfig (off by default); the --scheduler-recv-interval limit
    "attention_dp_timeout_iters": ("engine: attention-DP balancing, a prompt held until every rank has one "
                                   "or this many steps pass (TensorRT-LLM attention_dp_config "
                                   "enable_balance, timeout_iters N, batching_wait_iters 0); default off",
                                   {"ge": 1, "le": 10_000}),
    # SGLang's own cap is card-sized (runtimes.toml sglang [[runtime.tier]]: 8 to 512); a batch above the cap
    # launches every kernel (core/speed.py per_layer_s); the limit is the --max-num-seqs one
    "cuda_graph_max_bs": ("engine: the largest decode batch replayed as a CUDA graph (SGLang "
                          "--cuda-graph-max-bs, TensorRT-LLM cuda_graph_config.max_batch_size); larger "
                          "batches run eagerly; default: the engine's (SGLang: by card size and TP)",
                          {"ge": 1, "le": 1_000_000}),
}


def engine_opt(name: str) -> Any:
    """The input field of one engine setting (ENGINE_OPTIONS), default None: not given, the engine's own."""
    help_text, limits = ENGINE_OPTIONS[name]
    return opt(None, help_text, **limits)



@record
class RuntimeInput(Input):
    """Runtime knobs shared by plan, max-context and speed."""

    quant: str | None = opt(None, "weights: bf16 fp16 fp32 fp8 int8 int4 nf4 mxfp4 or a GGUF type (Q4_K_M, "
                            "Q8_0 …); default: the model's own", max_length=64)
    context: int | None = opt(None, "tokens of context per sequence; default: the runtime's (Ollama: by "
                              "VRAM; vLLM: the model's maximum)", ge=1, le=MAX_CONTEXT)
    batch: int | None = opt(None, "concurrent sequences, each with its own KV cache", ge=1, le=MAX_BATCH)
    kv_dtype: str | None = opt(None, "KV cache type: f16 bf16 fp8 q8_0 q4_0", max_length=16)
    runtime: str | None = opt(None, "a runtime of the catalog (vllm, llama.cpp, ollama, transformers, …; "
                              "an unknown name lists them), at an engine release after '@' (vllm@0.10.1, "
                              "llama.cpp@b3622, vllm@2024-08; default: the current one); default: llama.cpp "
                              "for GGUF types, ollama for Ollama tags, else vllm", max_length=64)
    prefill_chunk: int | None = opt(None, "tokens prefilled at once (vLLM max_num_batched_tokens, llama.cpp "
                                    "n_ubatch); default from the runtime", ge=1, le=MAX_CONTEXT)
    gpu_memory_utilization: float | None = engine_opt("gpu_memory_utilization")
    max_num_seqs: int | None = engine_opt("max_num_seqs")
    parallel: int | None = opt(None, "Ollama / llama.cpp slots (multiplies the KV cache)", ge=1, le=MAX_BATCH)
    gpus: int | None = opt(None, "cards per set", ge=1, le=4096)
    tp: int | None = opt(None, "tensor-parallel degree", ge=1, le=4096)
    flash_attn: bool | None = opt(None, "flash attention (default from the runtime)")
    overhead_gb: float | None = opt(None,
                                    "fixed overhead per card to assume instead of the runtime profile's "
                                    "(CUDA context, non-torch memory, CUDA graphs), GB; e.g. 1 for the "
                                    "llama.cpp rule of thumb", ge=0, le=1000)
    ram_gb: float | None = opt(None, "system RAM for CPU offload, GB", gt=0, le=1_000_000)
    allow_long_context: bool = opt(False, "allow a context beyond the model's trained maximum")
    input_tokens: int | None = opt(None, "prompt tokens per request: price a served load (the prompts share "
                                   "the decode steps, as in `cardfit deploy`) and, without --context, size "
                                   "the context for one request; default: decode only", ge=1, le=MAX_CONTEXT)
    output_tokens: int | None = opt(None, "answer tokens per request (with --input-tokens; either alone "
                                    "takes deploy's default for the other, 1000 / 300)", ge=1,
                                    le=MAX_CONTEXT)


@record
class ModelInput(Input):
    """How to name a model: a catalog name or path, or a bare shape."""

    POSITIONAL: typing.ClassVar[str] = "model"  # given as the command's MODEL argument, not as --model
    model: str | None = opt(None, "catalog name (llama3.1:8b, meta-llama/Llama-3.1-8B), a config.json, model "
                            "folder, .gguf or .safetensors path; or give the shape with --params …",
                            max_length=4096)
    params: float | None = opt(None, "total parameters (e.g. 7e9) for a bare shape", gt=0, le=MAX_PARAMS)
    active_params: float | None = opt(None, "MoE: parameters active per token", gt=0, le=MAX_PARAMS)
    layers: int | None = opt(None, "transformer layers (num_hidden_layers)", ge=1, le=SHAPE_LIMITS["layers"])
    kv_heads: int | None = opt(None, "KV heads (num_key_value_heads)", ge=1, le=SHAPE_LIMITS["kv_heads"])
    head_dim: int | None = opt(None, "head dimension", ge=1, le=SHAPE_LIMITS["head_dim"])
    hidden: int | None = opt(None, "hidden size, where known", ge=1, le=SHAPE_LIMITS["hidden"])
    vocab: int | None = opt(None, "vocabulary size, where known", ge=1, le=SHAPE_LIMITS["vocab"])
    config_json: dict[str, Any] | None = opt(None, "the contents of a config.json as a JSON object (web "
                                             "uploads); parsed like a file, never executed")
    hub: bool = opt(False, "read config.json and file headers from the Hugging Face Hub (network; needs "
                    "pip install 'cardfit[hub]')")
    catalog: tuple[str, ...] = opt((), "extra catalog file(s) (TOML/JSON) with your own GPUs, models or "
                                   "prices", max_length=16)


@record
class SpeculativeInput(Input):
    """Speculative decoding (plan, speed, max-context, deploy): services/speculative.py reads these."""

    speculative: str | None = opt(None, "speculative decoding: draft:MODEL (a smaller model of the same "
                                  "tokenizer), eagle3 (an EAGLE-3 head), mtp (the model's own multi-token "
                                  "prediction layers) or ngram (prompt lookup); deploy tries it on and off, "
                                  "a deployment pinned with --tp drafts",
                                  max_length=256)
    num_speculative_tokens: int | None = opt(None, "tokens drafted per step (K) with --speculative; default: "
                                             "the K its published acceptance was measured at", ge=1, le=32)
    acceptance: float | None = opt(None, "with --speculative: the share of drafted tokens accepted (0-1], as "
                                   "vLLM, SGLang and llama.cpp log it (accepted / drafted; a step yields 1 + "
                                   "A x K tokens); default: the published figure for the method "
                                   "(data/speculative.toml)", gt=0, le=1)
    speculative_topk: int | None = opt(None, "with --speculative draft:MODEL, eagle3 or mtp: draft a tree, "
                                       "this many branches per draft step (SGLang --speculative-eagle-topk; "
                                       "above 1 on SGLang only); default 1, a chain", ge=1, le=16)
    speculative_draft_tokens: int | None = opt(None, "with --speculative-topk: the tree's tokens verified "
                                               "per sequence each step, 2 to 1 + T + (K - 1) x T^2 (SGLang "
                                               "--speculative-num-draft-tokens); a chain (top-k 1) verifies "
                                               "K + 1, as SGLang resets it", ge=2, le=256)


@record
class PlanInput(ModelInput, RuntimeInput, SpeculativeInput):
    gpu: str | None = opt(None, "only this card (RTX 4090, H100 SXM, M3 Max 64GB, …; 'local': the one in "
                          "this machine, read from nvidia-smi, rocm-smi or macOS)", max_length=128)
    priced: bool = opt(False, "rank only cards with a rental price (the rental guide's fleet)")
    headroom: float | None = opt(None, "also name the smallest card holding this many times the weights "
                                 "(a rule of thumb: 1.25-1.5)", ge=1, le=10)
    duty: float | None = opt(None, "cost section: share of the paid hours the card is busy (0-1]; default 1",
                             gt=0, le=1)
    api: str | None = opt(None, "cost section: API to break even against (`cardfit apis`); default: the "
                          "break-even guide's three tiers", max_length=128)
    kv_offload_gb: float | None = opt(None, "a host-RAM KV tier, GB (vLLM native CPU offload, SGLang "
                                      "HiCache): the RAM it needs (checked against --ram-gb), and whether "
                                      "it helps on the plan's card", gt=0, le=1_000_000)


@record
class MaxContextInput(PlanInput):
    pass


# ------------------------------------------------------------------------------------ validation

_TRUE = {"1", "on", "t", "true", "y", "yes"}
_FALSE = {"0", "off", "f", "false", "n", "no"}


class _Bad(Exception):
    def __init__(self, msg: str, value: Any, loc: str = "") -> None:
        super().__init__(msg)
        self.msg, self.value, self.loc = msg, value, loc


def _num(v: float) -> str:
    return str(v)


def _scalar(kind: str, v: Any) -> Any:
    """Coerce one value the way a JSON API and a Python caller expect (numeric strings count as numbers)."""
    if kind == "str":
        if not isinstance(v, str):
            raise _Bad("must be a valid string", v)
        return v
    if kind == "bool":
        if isinstance(v, bool):
            return v
        if isinstance(v, int) and v in (0, 1):
            return bool(v)
        if isinstance(v, str) and v.strip().lower() in _TRUE | _FALSE:
            return v.strip().lower() in _TRUE
        why = ", unable to interpret input" if isinstance(v, (str, int)) else ""
        raise _Bad("must be a valid boolean" + why, v)
    if kind == "int":
        if isinstance(v, bool) or isinstance(v, int):
            return int(v)
        if isinstance(v, float):
            if v.is_integer():
                return int(v)
            raise _Bad("must be a valid integer, got a number with a fractional part", v)
        if isinstance(v, str):
            try:
                return int(v.strip())
            except ValueError:
                raise _Bad("must be a valid integer, unable to parse string as an integer", v) from None
        raise _Bad("must be a valid integer", v)
    if kind == "float":
        if isinstance(v, (bool, int, float)):
            try:
                return float(v)
            except OverflowError:  # an int beyond any float (10**400): over every bound there is
                raise _Bad("must be a finite number",
                           v if abs(v).bit_length() < 64 else "a huge integer") from None
        if isinstance(v, str):
            try:
                return float(v.strip())
            except ValueError:
                raise _Bad("must be a valid number, unable to parse string as a number", v) from None
        raise _Bad("must be a valid number", v)
    if kind == "dict":
        if not isinstance(v, dict):
            raise _Bad("must be a valid dictionary", v)
        return v
    raise AssertionError(kind)


def _bounds(lim: Limits, v: Any) -> None:
    # NaN fails every comparison, so it fails any bound
    if lim.gt is not None and not v > lim.gt:
        raise _Bad(f"must be greater than {_num(lim.gt)}", v)
    if lim.gt == 0 and isinstance(v, float) and v < MIN_POSITIVE:
        raise _Bad(f"must be at least {MIN_POSITIVE:g}", v)
    if lim.ge is not None and not v >= lim.ge:
        raise _Bad(f"must be greater than or equal to {_num(lim.ge)}", v)
    if lim.lt is not None and not v < lim.lt:
        raise _Bad(f"must be less than {_num(lim.lt)}", v)
    if lim.le is not None and not v <= lim.le:
        raise _Bad(f"must be less than or equal to {_num(lim.le)}", v)


def split_values(v: Any) -> Any:
    """"1,8,64", ("1", "8,64") or [1, 8] → a flat tuple of the values (strings split on commas and spaces)."""
    if isinstance(v, str):
        v = (v,)
    if isinstance(v, (list, tuple)):
        out: list[Any] = []
        for item in v:
            out += [p for p in item.replace(" ", ",").split(",") if p] if isinstance(item, str) else [item]
        return tuple(out)
    return v


def _value(f: FieldInfo, v: Any) -> Any:
    lim = f.limits
    if f.kind == "tuple":
        raw = v
        if lim.split:
            v = split_values(v)
        if not isinstance(v, (list, tuple)):
            raise _Bad("must be a valid tuple", raw)
        out = []
        for item in v:
            try:
                out.append(_scalar(f.item, item))
            except _Bad:
                what = "whole numbers" if f.item == "int" else "numbers" if f.item == "float" else "values"
                sep = ", separated by commas (e.g. 1,8,64)" if lim.split else ""
                raise _Bad(f"takes {what}{sep}", item, f.name) from None
        # the message shows the first value out of bounds, not the whole tuple the user typed
        low = [x for x in out if lim.item_ge is not None and x < lim.item_ge]
        if low:
            raise _Bad(f"every value must be at least {lim.item_ge}", low[0])
        high = [x for x in out if lim.item_le is not None and x > lim.item_le]
        if high:
            raise _Bad(f"every value must be at most {lim.item_le:,}", high[0])
        if lim.max_length is not None and len(out) > lim.max_length:
            raise _Bad(f"takes at most {lim.max_length} values", len(out))
        return tuple(out)
    if f.kind == "choice":
        if v not in f.choices:
            listed = [repr(c) for c in f.choices]
            raise _Bad("must be " + (" or ".join([", ".join(listed[:-1]), listed[-1]]) if len(listed) > 1
                                     else listed[0]), v)
        return v
    v = _scalar(f.kind, v)
    if f.kind == "str" and lim.max_length is not None and len(v) > lim.max_length:
        raise _Bad(f"must be at most {lim.max_length:,} characters", v)
    if f.kind in ("int", "float"):
        _bounds(lim, v)
    return v


def unknown_option(key: str, value: Any, names: Any) -> InputError:
    """An input the command does not take (a JSON body's or a tool call's key, a Python keyword): what it
    is and the nearest option it has, not pydantic's "Extra inputs are not permitted"."""
    import difflib

    flag = f"--{str(key).replace('_', '-')}"
    shown = repr(value)
    shown = f" (got {shown[:60]}…)" if len(shown) > 60 else f" (got {shown})"
    near = difflib.get_close_matches(str(key), sorted(names), n=1)
    hint = (f"did you mean --{near[0].replace('_', '-')}?; " if near else "") + "its --help lists the options"
    return InputError(f"{flag} is not an option of this command{shown}", field=str(key), hint=hint)


def shown_name(model: type, key: str) -> str:
    """How the user gave a field: the positional argument in capitals (MODEL), any other as its --flag."""
    if key == getattr(model, "POSITIONAL", None):
        return key.upper()
    return "--" + key.replace("_", "-")


def parse(model: type, values: dict[str, Any]) -> Any:
    """Validate raw values; the first problem becomes one InputError line naming the field."""
    for key, value in values.items():
        blank = isinstance(value, str) and not value.strip()
        # a repeatable option given a blank value (`--gpu ""`): the same line, not "unknown GPU ''"
        blank = blank or (isinstance(value, (list, tuple)) and any(isinstance(v, str) and not v.strip()
                                                                   for v in value))
        if blank:
            raise InputError(f"{shown_name(model, key)} is empty", field=key,
                             hint="give a value or leave it out")
    given = {k: v for k, v in values.items() if v is not None and v != ()}
    known = describe(model)
    out: dict[str, Any] = {}
    try:
        for f in known:
            if f.name in given:
                v = given[f.name]
                if isinstance(v, str) and f.kind == "tuple":  # a repeatable option given once, as a string
                    v = (v,)
                try:
                    out[f.name] = _value(f, v)
                except _Bad as e:
                    e.loc = e.loc or f.name
                    raise
        names = {f.name for f in known}
        for key, v in given.items():
            if key not in names:
                raise unknown_option(key, v, names)
    except _Bad as e:
        shown = f" (got {e.value!r})" if not isinstance(e.value, dict) else ""
        if len(shown) > 90:  # a pasted file or a runaway value: the start of it and its length
            shown = f" (got {shown[6:66]}… {len(e.value):,} characters)" if isinstance(e.value, str) \
                else f" (got {shown[6:66]}…)"
        raise InputError(f"{shown_name(model, e.loc)} {e.msg}{shown}", field=e.loc) from None
    return model(**out)

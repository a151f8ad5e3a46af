"""`cardfit stack FILE`: several models on one machine (issue 27). Each entry is sized by the single-model
plan (services/plan.py `build_context` and `memory_for`: the same weights, KV cache, overhead and workspace);
what is new here is what a shared machine adds:

- one process per server, each with its own CUDA context: a vLLM-like process reserves a share of the card
  (`--gpu-memory-utilization`, a fraction of the card's total that each process checks is free when it
  starts: vllm/v1/worker/gpu_worker.py, "Free memory on device ... is less than desired GPU memory
  utilization"), and its CUDA context sits outside that share (data/runtimes.toml vllm `non_torch_source`),
  so the shares of the processes on a card sum under 1 (the per-instance meaning of current releases, which
  vLLM's tests hold; older ones read the option as a global limit that counted memory already used by other
  processes: its help text in vllm-project/vllm#10017, Nov 2024);
- roles: chat and vision models, embedders and rerankers (encoders: weights and workspace, no cache kept
  between requests; core/kv.py), a draft model inside its target's server (its weights and its own KV cache
  beside the target's), LoRA adapters inside their base model's server, as its engine allocates them (the
  adapter's `lora_plan`: vLLM's `max_loras` slots and SGLang's LoRA memory pool of rank-`max_lora_rank` A/B
  matrices beside the targeted projections, with host copies; llama.cpp's `--lora` files beside their layers:
  runtimes/vllm.py, sglang.py, llamacpp.py LORA_SOURCE);
- placement: first-fit decreasing over the cards; a server that no card holds alone is split: vLLM/SGLang
  tensor parallel over 2, 4 or 8 cards of one kind, llama.cpp/Ollama layers over every card in proportion
  to its free memory (llama.cpp's `--tensor-split` default), each card sized as `cardfit plan --gpus N`
  sizes it (runtimes/llamacpp_like.py split_cards: llama.cpp's layer placement and pipeline copies);
- Ollama models that need not stay resident share one slot per card (the largest of them): the scheduler
  loads them on demand and unloads the idle one whose keep-alive ends first;
- what to change when the set does not fit, cheapest first, and one launch bundle (a shell script or a
  compose.yaml) whose server lines are the runtimes' own launch lines (runtimes/launch.py via
  services/launch_line.py) with a port each."""

from __future__ import annotations

import json
import math
import re
import tomllib
from dataclasses import replace
from typing import Any, ClassVar, Literal

from ..catalog.gpus import Gpu, GpuRegistry, default_gpus, load_gpus
from ..catalog.records import record
from ..catalog.registry import Registry
from ..catalog.releases import container_image
from ..catalog.rental import default_rental
from ..core import fit as fitting
from ..errors import CardfitError, InputError
from ..runtimes.base import NotModelled
from ..runtimes.llamacpp_like import layer_split
from ..runtimes.lora import LORA_BYTES, LORA_FILE_TYPES, LoraPlan, LoraSet, lora_params, normalized
from ..runtimes.lora import MODULES as LORA_MODULES
from ..runtimes.lora import STACKED as LORA_STACKED
from ..runtimes.ollama import one_slot
from .inputs import MAX_BATCH, MAX_CONTEXT, Input, PlanInput, opt
from .table import Result

MAX_STACK_BYTES = 256 * 1024  # a stack file lists a handful of models: real ones are under 2 KB
MAX_ENTRIES = 32  # models in one stack
MAX_DEVICES = 64  # cards in one machine
# values in a parsed stack file: the largest valid one (32 models × 20 keys, a few list items each, 64 cards)
# has under 2,000; the bound stops a file whose YAML aliases repeat one list into billions of values
MAX_VALUES = 10_000
ROLES = ("chat", "vision", "embed", "rerank", "draft", "adapter")
SERVERS = ("vllm", "sglang", "llama.cpp", "ollama")  # the runtimes whose server processes a stack plans
MACHINE_KEYS = ("gpu", "ram_gb")
ENTRY_KEYS = ("model", "role", "runtime", "quant", "context", "users", "requests_per_s", "resident",
              "kv_dtype", "gpus", "target", "adapters", "lora_rank", "max_loras", "lora_targets",
              "lora_paths", "lora_type", "lora_scale", "port", "flash_attn")
DRAFT_SERVERS = ("vllm",)  # the servers a draft entry goes inside (--speculative-config)
ADAPTER_SERVERS = ("vllm", "sglang", "llama.cpp")  # the servers whose adapter has a lora_plan
SERVER_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "llama.cpp": "llama.cpp"}  # for messages

LORA_RANK_DEFAULT = 16  # vLLM --max-lora-rank default (LoRAConfig.max_lora_rank = 16)
# vLLM's documented draft-model example speculates 5 tokens per step ("num_speculative_tokens": 5,
# https://docs.vllm.ai/en/latest/features/spec_decode.html, "Speculating with a draft model")
DRAFT_TOKENS = 5
TP_SIZES = (2, 4, 8)  # tensor-parallel degrees vLLM/SGLang split a layer's heads over inside one machine
# the cheapest change first: a shorter context loses only long prompts, swapping costs a reload when the
# other model is asked, a smaller quantization costs quality on every answer, a card costs its rent, and
# leaving a model out loses what it does
CHANGE_ORDER = {"context": 0, "swap": 1, "quant": 2, "card": 3, "drop": 4}
GGUF_LADDER = ("F16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q3_K_M", "Q2_K")  # SPEC §2's GGUF types
CHECKPOINT_LADDER = ("bf16", "fp8", "int4")
# vLLM sizes its KV pool from whole-card free-memory deltas, so two instances started at once on one card
# charge each other's loading to themselves (KV pool shrunk or "No available memory for the cache blocks"):
# the bundle starts each server once the one before answers /health (vLLM, SGLang and llama-server serve it)
STARTUP_SOURCE = "https://github.com/vllm-project/vllm/issues/55827"
MIN_CONTEXT = 2048  # the shortest context a change proposes (vLLM's max_model_len fallback, 2,048)


@record
class StackInput(Input):
    """A set of models on one machine, from a TOML file (or its text)."""

    POSITIONAL: ClassVar[str] = "file"
    file: str | None = opt(None, "the stack file (TOML, or YAML with the same keys: .yaml/.yml): [machine] "
                           "gpu = [card, …], ram_gb; one [[model]] table per model (model, role, runtime, "
                           "quant, context, users, requests_per_s, resident)", max_length=4096)
    text: str | None = opt(None, "the stack file's text instead of a path (web and Python API)",
                           max_length=MAX_STACK_BYTES)
    format: Literal["toml", "yaml"] | None = opt(None, "the stack file's format (default: YAML for a "
                                                 ".yaml/.yml file, else TOML; text: TOML)")
    gpu: tuple[str, ...] = opt((), "the machine's cards, repeated (overrides [machine] gpu; '2x RTX 3090' "
                               "counts two; 'local' is every card of this machine, as nvidia-smi or "
                               "rocm-smi lists them)",
                               max_length=MAX_DEVICES)
    bundle: Literal["script", "compose"] = opt("script", "the launch bundle: a shell script, or a "
                                               "compose.yaml (CUDA cards)")
    model: tuple[str, ...] = opt((), "instead of FILE: a model of the set, repeated, as [ROLE=]NAME "
                                 "(chat=llama3.1:8b, embed=bge-m3, draft=llama3.2:1b); the cards from --gpu",
                                 max_length=MAX_ENTRIES)
    runtime: str | None = opt(None, "with --model: the runtime of every model (vllm, sglang, llama.cpp, "
                              "ollama); default: plan's for each", max_length=64)
    context: int | None = opt(None, "with --model: tokens of context per sequence of every model", ge=1,
                              le=MAX_CONTEXT)
    users: int | None = opt(None, "with --model: concurrent sequences of every model", ge=1, le=MAX_BATCH)
    rent: bool = opt(False, "also find the cheapest rented machine that holds the whole set (the catalog's "
                     "priced cards, 1, 2, 4 or 8 of one kind)")
    catalog: tuple[str, ...] = opt((), "extra catalog file(s) (TOML/JSON) with your own GPUs or models",
                                   max_length=16)


# ------------------------------------------------------------------------------------ the file


@record
class Entry:
    """One [[model]] table, checked."""

    index: int
    model: str
    role: str
    runtime: str | None
    quant: str | None
    context: int | None
    users: int
    requests_per_s: float | None
    resident: bool
    kv_dtype: str | None
    gpus: int | None
    target: int | None  # the served entry a draft or adapter set belongs to (−N: [[model]] N, unresolved)
    adapters: int
    lora_rank: int
    max_loras: int | None
    lora_targets: tuple[str, ...] | None  # the seven projections' PEFT names (None: all of them)
    lora_paths: tuple[str, ...]
    lora_type: str | None  # a llama.cpp adapter file's tensor type
    lora_scale: float | None  # llama.cpp's --lora-scaled
    port: int | None
    flash_attn: bool | None = None  # llama.cpp -fa, Ollama OLLAMA_FLASH_ATTENTION (None: runtime's default)
    users_stated: bool = True  # `users` given (Ollama: OLLAMA_NUM_PARALLEL set, not its release's default)


@record
class Spec:
    gpus: tuple[Gpu, ...]
    ram_gb: float | None
    entries: tuple[Entry, ...]


def _where(i: int, model: str = "") -> str:
    return f"[[model]] {i + 1}" + (f" ({model})" if model else "")


def _int(where: str, key: str, v: Any, low: int, high: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
        raise InputError(f"{where}: {key} must be a whole number from {low:,} to {high:,} (got {v!r})",
                         field="file")
    return v


def _text(where: str, key: str, v: Any, limit: int = 256) -> str:
    if not isinstance(v, str) or not v.strip() or len(v) > limit or any(c in v for c in "\n\r\0"):
        raise InputError(f"{where}: {key} must be a one-line name of at most {limit} characters",
                         field="file")
    return v.strip()


def read_spec(inp: StackInput) -> Spec:
    """The stack file parsed (never executed) and checked: one InputError line for the first problem."""
    fmt = inp.format or ("yaml" if (inp.file or "").lower().endswith((".yaml", ".yml")) else "toml")
    if inp.model:
        if inp.file is not None or inp.text is not None:
            raise InputError("give the stack file or --model, not both", field="model")
        if inp.format is not None:
            raise InputError("--format is the stack file's; --model needs none", field="format")
        raw, name, fmt = _from_options(inp).encode(), "--model", "toml"
    elif (inp.file is None) == (inp.text is None):
        raise InputError("give the stack file (cardfit stack FILE) or its text (text=…), one of them",
                         field="file", hint="see examples/stacks/ for the format, or name the models with "
                         "--model ROLE=NAME and the cards with --gpu")
    elif inp.runtime or inp.context or inp.users:
        raise InputError("--runtime, --context and --users go with --model; a stack file sets them per "
                         "[[model]]", field="runtime")
    elif inp.file is not None:
        raw, name = _read_file(inp.file), inp.file
    else:
        raw, name = inp.text.encode(), "the stack text"  # type: ignore[union-attr]
    data = parse_stack(raw, name, fmt)
    extra = sorted(set(data) - {"machine", "model"})
    if extra:
        raise InputError(f"{name}: unknown table '{extra[0]}'", field="file",
                         hint="a stack file has [machine] and [[model]] tables")
    machine = data.get("machine", {})
    if not isinstance(machine, dict):
        raise InputError(f"{name}: [machine] must be a table", field="file")
    bad = sorted(set(machine) - set(MACHINE_KEYS))
    if bad:
        raise InputError(f"{name}: unknown [machine] key '{bad[0]}'", field="file",
                         hint=f"[machine] takes {', '.join(MACHINE_KEYS)}")
    cards = inp.gpu or machine.get("gpu", ())
    if isinstance(cards, str):
        cards = (cards,)
    if not isinstance(cards, list | tuple) or not cards:
        raise InputError(f"{name}: name the machine's cards ([machine] gpu = [\"RTX 4090\"] or --gpu)",
                         field="gpu")
    gpus = _cards(inp, [_text("[machine]", "gpu", c, 128) for c in cards])
    alone = next((g for g in gpus if g.max_count and len(gpus) > g.max_count), None)
    if alone is not None:  # gpus.toml max_count: Apple silicon is one GPU per machine
        raise InputError(f"{name}: {alone.name} is one GPU per machine; this machine lists {len(gpus)} cards",
                         field="gpu", hint="a Mac's stack names its chip alone")
    ram = machine.get("ram_gb")
    if ram is not None and (isinstance(ram, bool) or not isinstance(ram, int | float) or not 0 < ram <= 1e6):
        raise InputError(f"{name}: [machine] ram_gb must be a number of GB above 0", field="file")
    models = data.get("model")
    if not isinstance(models, list) or not models:
        # one message for both forms (the same tables give the same answer or error, TOML or YAML)
        raise InputError(f"{name}: no [[model]] table", field="file",
                         hint="list each model as a [[model]] table (YAML: model: a list of mappings, "
                         "one '- model: NAME' per model)")
    if len(models) > MAX_ENTRIES:
        raise InputError(f"{name}: {len(models)} models; a stack holds at most {MAX_ENTRIES}", field="file")
    entries = [_check_flash(_check_resident(_default_runtime(_entry(i, m), gpus[0], tuple(inp.catalog))))
               for i, m in enumerate(models)]
    entries = _ollama_flash(entries)
    _check_ports(entries)
    _check_ollama_spread(entries, len(gpus))
    return Spec(tuple(gpus), float(ram) if ram is not None else None, tuple(_attach(entries)))


def _check_ollama_spread(entries: list[Entry], cards: int) -> None:
    """Ollama picks a model's cards itself: one card where the model fits one, else every card it sees, or
    every card for every model with OLLAMA_SCHED_SPREAD=1 (server/sched.go pickBestFullFitByLibrary), which
    the bundle sets where the entries ask for it. So an Ollama entry's `gpus` is 1 (one card, as Ollama does
    when it fits) or the machine's cards, and a split of one model means a split of all of them."""
    ollama = [e for e in entries if _is_ollama(e)]
    spread = [e for e in ollama if (e.gpus or 1) > 1]
    if not spread:
        return
    odd = next((e for e in ollama if e.gpus != cards), None)
    if odd is not None:
        raise InputError(f"{_where(odd.index, odd.model)}: Ollama splits a model over every card it sees, "
                         f"and then every model (OLLAMA_SCHED_SPREAD=1): gpus = {cards} on each Ollama "
                         "entry, or gpus on none", field="file",
                         hint="drop gpus from the Ollama entries to let Ollama put each on one card")


def _check_ports(entries: list[Entry]) -> None:
    """A stated port is one server's: two servers on one port cannot both start (the second fails to bind),
    and one `ollama serve` listens on one port for all its models."""
    ollama = {e.port for e in entries if _is_ollama(e) and e.port is not None}
    if len(ollama) > 1:
        two = " and ".join(str(p) for p in sorted(ollama)[:2])
        raise InputError(f"the Ollama entries state ports {two}; one `ollama serve` serves them all on one "
                         "port", field="file", hint="state one port on the Ollama entries, or none")
    owner: dict[int, Entry] = {}
    for e in entries:
        if e.port is None or e.role in ("draft", "adapter"):
            continue
        first = owner.setdefault(e.port, e)
        if first is not e and not (_is_ollama(first) and _is_ollama(e)):
            raise InputError(f"{_where(e.index, e.model)}: port {e.port} is [[model]] {first.index + 1}'s "
                             "already; each server listens on a port of its own", field="file",
                             hint="give it another port, or none (the next free one is picked)")


def parse_stack(raw: bytes, name: str, fmt: str) -> dict[str, Any]:
    """The file's bytes as a table of tables (TOML, or YAML through PyYAML's safe loader: plain data, no
    tags that build objects), its size checked (`_check_size`); the same strict checks follow for both."""
    if fmt == "yaml":
        data = _yaml(raw, name)
    else:
        try:
            data = tomllib.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
            raise InputError(f"{name} is not valid TOML ({str(e).splitlines()[0]})", field="file",
                             hint="see examples/stacks/ for the format") from None
    _check_size(data, name)
    if not isinstance(data, dict):
        got = "nothing" if data is None else f"a {type(data).__name__}"
        raise InputError(f"{name}: a stack file is a mapping of a machine and its models (got {got})",
                         field="file", hint="see examples/stacks/ for the format")
    return data


def _yaml(raw: bytes, name: str) -> Any:
    try:
        import yaml  # a dependency (pyproject.toml), imported only for a YAML stack file
    except ImportError:  # pragma: no cover - an install without its dependencies
        raise InputError(f"{name}: reading a YAML stack file needs PyYAML", field="file",
                         hint="pip install pyyaml, or write the same keys as TOML") from None
    try:
        # the safe loader: the YAML 1.1 core types only (yaml.load could build any Python object)
        return yaml.load(raw.decode("utf-8"), Loader=_strict_loader(yaml))  # noqa: S506 - a SafeLoader
    except UnicodeDecodeError as e:
        raise InputError(f"{name} is not valid YAML ({e.reason} at byte {e.start})", field="file") from None
    except RecursionError:
        raise InputError(f"{name} is not valid YAML (nested too deeply)", field="file") from None
    except yaml.YAMLError as e:
        raise InputError(f"{name} is not valid YAML ({_yaml_problem(e)})", field="file",
                         hint="see examples/stacks/rag-4090.yaml for the format") from None


def _strict_loader(yaml: Any) -> Any:
    """PyYAML's SafeLoader refusing a key given twice in one mapping: it keeps the last silently, so a
    repeated `machine:` or `context:` would drop the first without a word, where TOML refuses it (a typo must
    not vanish). Keys a merge (`<<: *anchor`) brings in may be overridden, as YAML's merge key allows."""

    class Strict(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                if isinstance(key, str) and key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"the key '{key:.40}' is given twice", key_node.start_mark)
                if isinstance(key, str):
                    seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return Strict


def _yaml_problem(e: Any) -> str:
    """PyYAML's error in one line: its problem and where (MarkedYAMLError), else its first line."""
    problem, mark = getattr(e, "problem", None), getattr(e, "problem_mark", None)
    if problem and mark is not None:
        return f"{problem} at line {mark.line + 1}, column {mark.column + 1}"
    return (str(e).splitlines() or [type(e).__name__])[0]


def _check_size(data: Any, name: str) -> None:
    """Every value of the parsed file counted, up to MAX_VALUES: YAML anchors and aliases share one object
    however often it is named, so a small file can stand for a tree of billions of values (the "billion
    laughs"); walking it is refused before any check, message or copy touches it. Mapping keys must be text
    (YAML also allows numbers, lists, null)."""
    todo, seen = [data], 0
    while todo:
        x = todo.pop()
        seen += 1
        if seen > MAX_VALUES:
            raise InputError(f"{name}: more than {MAX_VALUES:,} values (aliases count each time they are "
                             "used); a stack file lists a few models", field="file")
        if isinstance(x, dict):
            for k, v in x.items():
                if not isinstance(k, str):
                    raise InputError(f"{name}: every key must be text (got {k!r:.40})", field="file")
                todo.append(v)
        elif isinstance(x, list | tuple | set | frozenset):
            todo.extend(x)


def _default_runtime(e: Entry, gpu: Gpu, catalog: tuple[str, ...]) -> Entry:
    """An entry without a runtime gets the one `cardfit plan` picks for it on the machine's first card
    (Ollama for an Ollama tag, llama.cpp for a GGUF type, vLLM for a checkpoint; llama.cpp on Apple
    silicon), so that placement and the bundle know which server it is."""
    if e.runtime is not None or e.role in ("draft", "adapter"):
        return e
    from . import plan as planning

    try:
        rt = planning.build_context(PlanInput(model=e.model, quant=e.quant, gpu=gpu.name,
                                              catalog=catalog)).runtime.id
    except CardfitError as err:
        raise InputError(f"{_where(e.index, e.model)}: {err}", field="file") from None
    return replace(e, runtime=rt if rt in SERVERS else "vllm")


def _check_resident(e: Entry) -> Entry:
    if not e.resident and (e.runtime or "").split("@")[0] != "ollama":
        raise InputError(f"{_where(e.index, e.model)}: resident = false is for Ollama models (its scheduler "
                         f"loads and unloads them); a {e.runtime} server holds its model while it runs",
                         field="file", hint="set runtime = \"ollama\" or drop resident = false")
    return e


def _check_flash(e: Entry) -> Entry:
    runtime = (e.runtime or "").split("@")[0].lower()
    if e.flash_attn is not None and runtime not in ("llama.cpp", "ollama"):
        where = _where(e.index, e.model)
        raise InputError(f"{where}: flash_attn is a llama.cpp server's -fa or Ollama's "
                         "OLLAMA_FLASH_ATTENTION (vLLM and SGLang pick their attention backend)",
                         field="file", hint="set runtime = \"llama.cpp\" or \"ollama\", or drop flash_attn")
    return e


def _ollama_flash(entries: list[Entry]) -> list[Entry]:
    """Ollama reads OLLAMA_FLASH_ATTENTION once for every model its server loads (envconfig FlashAttention,
    passed to each runner as --flash-attn): the value an Ollama entry states holds for all of them, and two
    that differ are an error."""
    ollama = [e for e in entries if (e.runtime or "").split("@")[0].lower() == "ollama"]
    stated = {e.flash_attn for e in ollama if e.flash_attn is not None}
    if len(stated) > 1:
        raise InputError("the Ollama entries state flash_attn both true and false; Ollama sets it once for "
                         "every model it loads (OLLAMA_FLASH_ATTENTION)", field="file",
                         hint="state one flash_attn for the Ollama entries")
    if not stated:
        return entries
    flash = stated.pop()
    return [replace(e, flash_attn=flash) if e in ollama else e for e in entries]


def _read_file(path: str) -> bytes:
    from ..readers.source import local_files_allowed, read_regular

    if not local_files_allowed():
        raise InputError("the web API reads no files on the server", field="file",
                         hint="send the stack file's text as `text`")
    return read_regular(path, MAX_STACK_BYTES, "the stack file")


def _from_options(inp: StackInput) -> str:
    """The stack file that --model [ROLE=]NAME …, --runtime, --context and --users describe (its [machine]
    comes from --gpu)."""
    out = []
    for item in inp.model:
        role, sep, name = item.partition("=")
        if sep and role.strip() not in ROLES:  # no model name has '=' in it: a role misspelled
            raise InputError(f"--model {item}: unknown role '{role.strip()}'", field="model",
                             hint=f"write ROLE=NAME with ROLE one of {', '.join(ROLES)}, or NAME alone "
                             "(chat)")
        if not sep:
            role, name = "chat", item
        entry = {"model": name.strip(), "role": role.strip()}
        if inp.runtime and role.strip() not in ("draft", "adapter"):
            entry["runtime"] = inp.runtime
        if inp.context and role.strip() not in ("draft", "adapter"):
            entry["context"] = inp.context
        if inp.users and role.strip() not in ("draft", "adapter"):
            entry["users"] = inp.users
        out.append("[[model]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in entry.items()))
    return "".join(out)


_COUNT = re.compile(r"^\s*(\d{1,3})\s*[x×]\s+(.+)$", re.IGNORECASE)


def _cards(inp: StackInput, names: list[str]) -> list[Gpu]:
    """The machine's cards in order: '2x RTX 3090' is two of them."""
    reg = _registry(inp)
    out: list[Gpu] = []
    seen_local = False
    for n in names:
        found = _COUNT.match(n)
        count, name = (int(found.group(1)), found.group(2)) if found else (1, n)
        if name.strip().lower() == "local":
            if found or seen_local:
                raise InputError("'local' is every card of this machine: give it once, without a count",
                                 field="gpu")
            seen_local = True
            here = reg.local_cards() if isinstance(reg, GpuRegistry) else [reg.get(name)]
            unknown = next((g for g in here if g.id == "local"), None)
            if unknown is not None:
                raise InputError(f"--gpu local: '{unknown.name}' is not in the catalog; a stack needs each "
                                 "card's catalog row", field="gpu",
                                 hint="name it in a --catalog file of your own GPUs (`cardfit gpus` lists "
                                      "the catalog's)")
        else:
            here = [reg.get(name)] * count
        if count < 1 or len(out) + len(here) > MAX_DEVICES:
            raise InputError(f"a stack machine has 1 to {MAX_DEVICES} cards", field="gpu")
        out += here
    return out


def _registry(inp: StackInput) -> Registry[Gpu]:
    return _catalog_gpus(tuple(inp.catalog))


def _entry(i: int, raw: Any) -> Entry:
    where = _where(i)
    if not isinstance(raw, dict):
        raise InputError(f"{where} must be a table", field="file")
    bad = sorted(set(raw) - set(ENTRY_KEYS))
    if bad:
        raise InputError(f"{where}: unknown key '{bad[0]}'", field="file",
                         hint=f"a [[model]] takes {', '.join(ENTRY_KEYS)}")
    if "model" not in raw:
        raise InputError(f"{where}: no model (a catalog name such as llama3.1:8b)", field="file")
    model = _text(where, "model", raw["model"], 4096)
    where = _where(i, model)
    role = raw.get("role", "chat")
    if role not in ROLES:
        raise InputError(f"{where}: role must be one of {', '.join(ROLES)} (got {role!r})", field="file")
    runtime = _text(where, "runtime", raw["runtime"], 64) if "runtime" in raw else None
    if runtime is not None and runtime.split("@")[0].lower() not in SERVERS:
        raise InputError(f"{where}: cardfit stack plans {', '.join(SERVERS)} servers (got {runtime!r})",
                         field="file")
    rps = raw.get("requests_per_s")
    if rps is not None and (isinstance(rps, bool) or not isinstance(rps, int | float) or not 0 < rps <= 1e6):
        raise InputError(f"{where}: requests_per_s must be a number above 0", field="file")
    resident = raw.get("resident", True)
    if not isinstance(resident, bool):
        raise InputError(f"{where}: resident must be true or false", field="file")
    target = raw.get("target")
    flash = raw.get("flash_attn")
    if flash is not None and not isinstance(flash, bool):
        raise InputError(f"{where}: flash_attn must be true or false", field="file")
    return Entry(
        index=i, model=model, role=role, runtime=runtime,
        quant=_text(where, "quant", raw["quant"], 64) if "quant" in raw else None,
        context=_int(where, "context", raw["context"], 1, MAX_CONTEXT) if "context" in raw else None,
        users=_int(where, "users", raw.get("users", 1), 1, MAX_BATCH),
        requests_per_s=float(rps) if rps is not None else None, resident=resident,
        kv_dtype=_text(where, "kv_dtype", raw["kv_dtype"], 16) if "kv_dtype" in raw else None,
        gpus=_int(where, "gpus", raw["gpus"], 1, MAX_DEVICES) if "gpus" in raw else None,
        # kept negative (−N) until _attach resolves it to the target's index
        target=None if target is None else -_int(where, "target", target, 1, MAX_ENTRIES),
        adapters=_adapters(where, raw),
        lora_rank=_int(where, "lora_rank", raw.get("lora_rank", LORA_RANK_DEFAULT), 1, 512),
        max_loras=_int(where, "max_loras", raw["max_loras"], 1, 100_000) if "max_loras" in raw else None,
        lora_targets=_targets(where, raw["lora_targets"]) if "lora_targets" in raw else None,
        lora_paths=_paths(where, raw.get("lora_paths", [])),
        lora_type=_choice(where, "lora_type", raw["lora_type"], tuple(LORA_FILE_TYPES))
        if "lora_type" in raw else None,
        lora_scale=_scale(where, raw["lora_scale"]) if "lora_scale" in raw else None,
        port=_int(where, "port", raw["port"], 1024, 65535) if "port" in raw else None, flash_attn=flash,
        users_stated="users" in raw)


def _adapters(where: str, raw: dict[str, Any]) -> int:
    """`adapters`, else one per `lora_paths` item, else 1; both given, they agree."""
    paths = raw.get("lora_paths")
    n = len(paths) if isinstance(paths, list) and paths else None
    adapters = _int(where, "adapters", raw.get("adapters", n or 1), 1, 100_000)
    if n is not None and adapters != n:
        raise InputError(f"{where}: adapters = {adapters} but lora_paths names {n}", field="file",
                         hint="give one path per adapter, or leave adapters out")
    return adapters


def _targets(where: str, v: Any) -> tuple[str, ...]:
    """lora_targets: PEFT module names (q_proj … down_proj, SGLang's qkv_proj, gate_up_proj, all), as the
    seven projections."""
    names = [v] if isinstance(v, str) else v
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise InputError(f"{where}: lora_targets must be a list of module names", field="file")
    try:
        return normalized(tuple(names))
    except KeyError as e:
        raise InputError(f"{where}: lora_targets: unknown module {str(e.args[0])[:64]!r}", field="file",
                         hint=f"use {', '.join((*LORA_MODULES, *LORA_STACKED))} (embed_tokens and lm_head "
                         "are not modelled)") from None


def _paths(where: str, v: Any) -> tuple[str, ...]:
    if not isinstance(v, list) or len(v) > 100_000:
        raise InputError(f"{where}: lora_paths must be a list of adapter files or names", field="file")
    return tuple(_text(where, "lora_paths", p, 4096) for p in v)


def _scale(where: str, v: Any) -> float:
    """llama.cpp's --lora-scaled SCALE: any finite number (common/arg.cpp std::stof; 0 loads it unapplied,
    a negative one subtracts it)."""
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise InputError(f"{where}: lora_scale must be a finite number (got {str(v)[:64]})", field="file")
    return float(v)


def _choice(where: str, key: str, v: Any, choices: tuple[str, ...]) -> str:
    if v not in choices:
        raise InputError(f"{where}: {key} must be one of {', '.join(choices)} (got {str(v)[:64]!r})",
                         field="file")
    return v


def _attach(entries: list[Entry]) -> list[Entry]:
    """Each draft and adapter set belongs to a served chat or vision entry: `target` (its 1-based [[model]]
    number N, kept as −N until resolved here) or the nearest chat/vision entry above it."""
    out = []
    for e in entries:
        if e.role not in ("draft", "adapter"):
            if e.target is not None:
                raise InputError(f"{_where(e.index, e.model)}: target is for a draft or adapter entry",
                                 field="file")
            out.append(e)
            continue
        if e.target is not None:
            t = -e.target - 1
            if t >= len(entries) or entries[t].role not in ("chat", "vision"):
                raise InputError(f"{_where(e.index, e.model)}: target {t + 1} is not a chat or vision "
                                 "[[model]]", field="file")
        else:
            above = [x.index for x in entries[:e.index] if x.role in ("chat", "vision")]
            if not above:
                raise InputError(f"{_where(e.index, e.model)}: a {e.role} entry needs a chat or vision model "
                                 "above it (or target = its [[model]] number)", field="file")
            t = above[-1]
        host = entries[t]
        runtime = e.runtime or host.runtime
        servers = ADAPTER_SERVERS if e.role == "adapter" else DRAFT_SERVERS
        names = " or ".join((", ".join(SERVER_NAMES[x] for x in servers[:-1]), SERVER_NAMES[servers[-1]])
                            if len(servers) > 1 else (SERVER_NAMES[servers[0]],))
        if (host.runtime or "vllm").split("@")[0] not in servers or \
                (runtime or "vllm").split("@")[0] != (host.runtime or "vllm").split("@")[0]:
            raise InputError(f"{_where(e.index, e.model)}: cardfit plans {e.role} models inside a {names} "
                             f"server (its target {host.model} runs on "
                             f"{host.runtime or 'the default runtime'})",
                             field="file", hint=f"set runtime = \"{servers[0]}\" on [[model]] {t + 1}")
        if host.runtime is None:
            raise InputError(f"{_where(e.index, e.model)}: give its target [[model]] {t + 1} a runtime "
                             f"({names})", field="file")
        out.append(replace(e, target=t, runtime=host.runtime))
    return out


# ------------------------------------------------------------------------------------ one server, sized


@record
class Sized:
    """One entry's plan on a set of `count` cards of one kind: its context, the bytes per card of its own
    process (or, for a draft or adapter set, of what it adds to its target's), its host bytes and its speed
    alone on that set."""

    ctx: Any  # services.plan.Context
    memory: Any  # core.memory.Memory
    count: int
    per_card: int  # bytes on each card of the set (the server's own, without its draft and adapters)
    host_bytes: int
    alone_tokens_per_s: float | None
    margin: int  # error bar of the need per card (core/uncertainty.py)


def _plan_input(e: Entry, gpu: Gpu, count: int, catalog: tuple[str, ...], users: int,
                context: int | None = None, quant: str | None = None) -> PlanInput:
    tp = count if count > 1 else None
    return PlanInput(model=e.model, quant=quant or e.quant, context=context or e.context, batch=users,
                     kv_dtype=e.kv_dtype, runtime=e.runtime, gpu=gpu.name, gpus=count if count > 1 else None,
                     tp=tp if _vllm_like(e.runtime) else None, flash_attn=e.flash_attn, catalog=catalog)


def _vllm_like(runtime: str | None) -> bool:
    return (runtime or "vllm").split("@")[0].lower() in ("vllm", "sglang")


class Sizer:
    """Sizes entries on sets of cards, each (entry, card, count, change) once."""

    def __init__(self, spec: Spec, catalog: tuple[str, ...]) -> None:
        self.spec, self.catalog = spec, catalog
        self.rules = default_rental()
        self._memo: dict[tuple, Sized] = {}
        # Ollama's OLLAMA_NUM_PARALLEL is one setting for every model it loads (envconfig NumParallel)
        ollama = [e for e in spec.entries if _is_ollama(e)]
        self.ollama_parallel = max((e.users for e in ollama), default=1)
        # with it unset, a release that picks each model's slots at its load (data/releases.toml
        # auto_parallel) gives every Ollama model its own: `slots`, chosen as the machine loads them
        self.ollama_release = _ollama_release(ollama) if ollama and not any(e.users_stated for e in ollama) \
            else None
        self.slots: dict[int, int] = {}
        self._one_slot: dict[int, bool] = {}
        self._bare: dict[int, Any] = {}

    def auto(self, e: Entry) -> bool:
        """Whether Ollama picks this entry's slots when it loads it (OLLAMA_NUM_PARALLEL unset)."""
        return self.ollama_release is not None and _is_ollama(e) and e.role not in ("draft", "adapter")

    def users(self, e: Entry) -> int:
        if self.auto(e):
            return self.slots.get(e.index, 1)
        if _is_ollama(e):
            return 1 if self.one_slot(e) else self.ollama_parallel
        return e.users

    def one_slot(self, e: Entry) -> bool:
        """Whether Ollama loads this entry with 1 slot whatever OLLAMA_NUM_PARALLEL says (_loads_one_slot)."""
        hit = self._one_slot.get(e.index)
        if hit is None:
            ctx = self.bare(e)
            hit = self._one_slot[e.index] = _loads_one_slot(ctx.runtime, ctx.model, e.role)
        return hit

    def bare(self, e: Entry) -> Any:
        """The entry's model, quantization and runtime as `cardfit plan` resolves them (no card, no load)."""
        hit = self._bare.get(e.index)
        if hit is None:
            from . import plan as planning

            try:
                hit = self._bare[e.index] = planning.build_context(
                    PlanInput(model=e.model, quant=e.quant, runtime=e.runtime, catalog=self.catalog))
            except CardfitError as err:
                raise InputError(f"{_where(e.index, e.model)}: {err}", field="file") from None
        return hit

    def size(self, e: Entry, gpu: Gpu, count: int) -> Sized:
        key = (e, gpu.id, count, self.users(e))
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = self._size(e, gpu, count)
        return hit

    def _size(self, e: Entry, gpu: Gpu, count: int) -> Sized:
        from . import plan as planning

        try:
            ctx = planning.build_context(_plan_input(e, gpu, count, self.catalog, self.users(e)))
            _check_role(e, ctx)
            context = planning.default_context(ctx, gpu, count)[0]
            planning.check_context(ctx, context)
            mem = planning.memory_for(ctx, context, gpu)
        except CardfitError as err:
            raise InputError(f"{_where(e.index, e.model)}: {err}", field="file") from None
        engine = ctx.engine
        copies = engine.kv_copies(ctx.model, count)
        need = fitting.need_on(mem, count, copies)
        per_card = -(-need // count)
        host = mem.host_weights_bytes
        margin = -(-planning._margin(ctx, mem, count, copies) // count)
        opt_ = planning.option_for(ctx, mem, gpu, count)
        speed = planning._speed(ctx, mem, opt_)
        tps = None
        if speed is not None:
            tps = speed.aggregate_tokens_per_s if ctx.model.generates else speed.prefill_tokens_per_s
        return Sized(ctx, mem, count, per_card, host, tps, margin)

    def extra(self, e: Entry, host: Entry, gpu: Gpu, count: int) -> tuple[int, int, str, bool]:
        """(bytes per card, host bytes, what it is, by layer) a draft or an adapter set adds to its target's
        server; by layer: the bytes are the whole, which follow the layers over a layer split."""
        target = self.size(host, gpu, count)
        if e.role == "adapter":
            _check_base(e, self.bare(e).model, target.ctx.model)
            plan = lora_plan(e, target, host.users)
            return plan.card_bytes, plan.host_bytes, f"{e.adapters} × LoRA r{e.lora_rank}", plan.by_layer
        from . import plan as planning

        try:
            pinp = _plan_input(e, gpu, count, self.catalog, host.users, context=target.memory.context)
            ctx = planning.build_context(pinp)
            if not ctx.model.generates:
                raise InputError(f"{ctx.model.name} generates no tokens: it cannot draft")
            _check_draft(ctx.model, target.ctx.model)
            mem = planning.memory_for(ctx, target.memory.context, gpu)
        except CardfitError as err:
            raise InputError(f"{_where(e.index, e.model)}: {err}", field="file") from None
        # the draft's weights and its own KV cache (its layers' cells for the target's sequences), split like
        # its target's (vLLM runs the draft at the target's tensor-parallel size)
        return -(-(mem.weights_bytes + mem.kv_cache_bytes) // count), 0, ctx.quant.name, False


# what a LoRA adapter's A/B matrices are shaped by (each module's in and out features, per layer): a set
# trained on one model fits another only where these match (PEFT's adapter_config.json names its
# base_model_name_or_path)
BASE_SHAPE = ("layers", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "experts",
              "moe_intermediate")


def _check_base(e: Entry, named: Any, served: Any) -> None:
    """An adapter entry's `model` is the base its adapters were trained on: the served model or one of its
    shape (a base and its instruct tune), never another model."""
    if named.id != served.id and any(getattr(named, k) != getattr(served, k) for k in BASE_SHAPE):
        raise InputError(f"{_where(e.index, e.model)}: adapters trained on {named.name} do not load into "
                         f"{served.name}, the model of its target", field="file",
                         hint="name the served model (its base) as the adapter entry's model")


def _check_draft(d: Any, m: Any) -> None:
    """A draft is smaller than its target and speaks its tokenizer: the rule `plan --speculative draft:M`
    applies (services/speculative.py: a vocabulary within VOCAB_MAX_DIFFERENCE tokens of the target's)."""
    from .speculative import VOCAB_MAX_DIFFERENCE

    if d.params >= m.params:
        raise InputError(f"the draft {d.name} is not smaller than {m.name}", field="file",
                         hint="a draft model is a small model of the same family")
    if d.vocab and m.vocab and abs(d.vocab - m.vocab) > VOCAB_MAX_DIFFERENCE:
        raise InputError(f"the draft {d.name} has a vocabulary of {d.vocab:,} tokens, {m.name} {m.vocab:,}: "
                         "a draft needs the target's tokenizer", field="file",
                         hint="pick a small model of the target's family (llama3.2:1b for Llama 3.1)")


def _is_ollama(e: Entry) -> bool:
    return (e.runtime or "").split("@")[0].strip().lower() == "ollama"


def _loads_one_slot(rt: Any, model: Any, role: str) -> bool:
    """Whether Ollama's scheduler loads a model with 1 slot whatever OLLAMA_NUM_PARALLEL (or its automatic
    pick) says, at the profile's release (runtimes/ollama.py one_slot, the rule plan and deploy share)."""
    return one_slot(rt, model, role) is not None


def _ollama_release(entries: list[Entry]) -> Any:
    """The Ollama release of the stack's Ollama entries (the one they name after '@'; none: the current
    release) where it picks each model's slots when OLLAMA_NUM_PARALLEL is unset: from 0.2.0 until
    its default became 1 in 0.10.0 (data/releases.toml auto_parallel, parallel_default_one); else None."""
    from ..catalog.releases import release

    named = sorted({e.runtime.partition("@")[2].strip() for e in entries if "@" in (e.runtime or "")})
    if len(named) > 1:
        raise InputError(f"the Ollama entries name releases {' and '.join(named[:2])}; one `ollama serve` "
                         "loads them all", field="file", hint="name one release on every Ollama entry")
    stated = named[0] if named else ""
    try:
        rel = release("ollama", stated)
    except InputError as err:
        raise InputError(f"{err}", field="file") from None
    return rel if rel.has("auto_parallel") and not rel.has("parallel_default_one") else None


def lora_set(e: Entry) -> LoraSet:
    return LoraSet(e.adapters, e.lora_rank, e.max_loras, e.lora_targets or tuple(LORA_MODULES), e.lora_paths,
                   e.lora_type, e.lora_scale, e.lora_targets is not None)


def lora_plan(e: Entry, target: Sized, users: int) -> LoraPlan:
    """What the adapter set `e` holds in its target's server (the runtime adapter's `lora_plan`): on each card
    of a tensor-parallel set of `target.count` cards, or the whole where it follows the layers."""
    ctx = target.ctx
    tp = target.count if ctx.runtime.tensor_parallel else 1
    try:
        return ctx.engine.lora_plan(ctx.model, lora_set(e), users, tp)
    except NotModelled as err:
        raise InputError(f"{_where(e.index, e.model)}: {err}", field="file") from None


def _check_role(e: Entry, ctx: Any) -> None:
    m = ctx.model
    if e.role in ("embed", "rerank") and m.task != e.role:
        raise InputError(f"{m.name} is a {'generating' if m.generates else m.task} model, not a {e.role} "
                         "model", field="file", hint="set its role to match the model")
    if e.role in ("chat", "vision") and not m.generates:
        raise InputError(f"{m.name} is a {m.task} model", field="file", hint=f"set role = \"{m.task}\"")
    if e.role == "rerank" and not ctx.runtime.serves_rerank:  # runtimes.toml serves_rerank (Ollama: none)
        raise InputError(f"{ctx.runtime.name} serves no rerankers", field="file",
                         hint="run the reranker on llama.cpp (llama-server --reranking) or vLLM")
    if e.role == "vision" and not m.text_params:
        raise InputError(f"{m.name} has no vision tower in the catalog", field="file",
                         hint="pick a multimodal model (gemma3:12b, qwen2.5-vl-7b, …) or role = \"chat\"")


def lora_slot_bytes(m: Any, rank: int, tp: int) -> int:
    """One vLLM LoRA slot of rank `rank` on each card of a `tp`-way set: A and B beside every attention and
    MLP projection (runtimes/vllm.py LORA_SOURCE), in the LoRA dtype. MoE experts are not counted."""
    return lora_params(m, rank, tp) * LORA_BYTES


# ------------------------------------------------------------------------------------ placement


@record
class Server:
    """One process: a served entry with the drafts and adapter sets inside it."""

    entry: Entry
    riders: tuple[Entry, ...]


@record
class Piece:
    """What one server puts on one card."""

    entry: Entry
    bytes: int
    tokens_per_s: float | None
    host_bytes: int = 0
    resident: bool = True
    what: str = ""  # a rider's quantization or adapter set


@record
class Placed:
    server: Server
    devices: tuple[int, ...]
    sized: Sized
    pieces: tuple[tuple[Piece, ...], ...]  # per device of `devices`: the server's entry, then its riders
    utilization: float | None  # vLLM/SGLang: the share of each card it reserves
    split: tuple[float, ...] = ()  # llama.cpp's --tensor-split over unequal cards


def servers_of(spec: Spec) -> list[Server]:
    riders: dict[int, list[Entry]] = {}
    for e in spec.entries:
        if e.role in ("draft", "adapter"):
            riders.setdefault(e.target, []).append(e)  # type: ignore[arg-type]
    return [Server(e, tuple(riders.get(e.index, ()))) for e in spec.entries
            if e.role not in ("draft", "adapter")]


class Machine:
    """The cards and what is on them, filled server by server."""

    def __init__(self, gpus: tuple[Gpu, ...], sizer: Sizer) -> None:
        self.gpus, self.sizer = gpus, sizer
        self.used = [0] * len(gpus)
        self.swap = [0] * len(gpus)  # the largest non-resident Ollama model on each card
        self.reserved = [0] * len(gpus)  # memory the driver keeps that CUDA does not report (vLLM's reading)
        self.ollama_estimates = [0] * len(gpus)  # Ollama's own estimates of its runners on each card
        self.placed: list[Placed] = []
        self.unplaced: list[tuple[Server, int, str]] = []

    def free(self, d: int) -> int:
        return self.gpus[d].usable_bytes - self.reserved[d] - self.used[d] - self.swap[d]

    def place(self, s: Server) -> None:
        e = s.entry
        if self.sizer.auto(e) and e.index not in self.sizer.slots:
            self.sizer.slots[e.index] = self.ollama_slots(s)
        single = list(range(len(self.gpus)))
        if _is_ollama(e):  # Ollama's scheduler picks the card, not the bundle
            single.sort(key=lambda d: (-self.ollama_free(d), d))
        if e.gpus and e.gpus > len(self.gpus):
            raise InputError(f"{_where(e.index, e.model)}: gpus = {e.gpus}, but the machine has "
                             f"{len(self.gpus)} cards", field="file")
        if not e.gpus or e.gpus == 1:
            for d in single:
                got = self._on(s, (d,))
                if got is not None and self._fits(got):
                    return self._put(got)
            if e.gpus == 1:
                return self._refuse(s, "no card holds it alone")
        if not e.resident:
            return self._refuse(s, "no card has room for it beside the resident models (a model Ollama "
                                "swaps in loads on one card)")
        for devices in self._sets(s):
            got = self._on(s, devices)
            if got is not None and self._fits(got):
                return self._put(got)
        self._refuse(s, self._cannot_run(s) or "no card or set of cards has room for it")

    def _cannot_run(self, s: Server) -> str:
        """Why no card of the machine runs this server at all, whatever its memory (core/fit.py unsupported:
        the runtime lacks the cards' software stack, or the cards lack the quantization's format); "" where
        one card can."""
        from . import plan as planning

        whys = []
        for gpu in {g.id: g for g in self.gpus}.values():
            ctx = self.sizer.size(s.entry, gpu, 1).ctx
            why = fitting.unsupported(gpu, planning.requires(ctx.quant), ctx.runtime, 1)
            if not why:
                return ""
            whys.append(why.split(";")[0])
        return "; ".join(dict.fromkeys(whys))

    def ollama_free(self, d: int) -> int:
        """Card d's free memory as Ollama's scheduler reads it before a load: the driver's, or less, the
        card's total less its own estimates of the runners it loaded (server/sched.go updateFreeSpace). It
        loads a model on the card with the most (pickBestFullFitByLibrary: `sort.Sort(sort.Reverse(
        ByFreeMemory(sgl)))`, then the first card that holds the whole model; v0.1.x pickBestFitGPUs alike),
        so on unequal or partly used cards a model goes where the most is left, not on card 0."""
        return min(self.free(d), self.gpus[d].usable_bytes - self.ollama_estimates[d])

    def ollama_slots(self, s: Server) -> int:
        """The slots Ollama gives a model it loads with OLLAMA_NUM_PARALLEL unset, at a release that picks
        them (server/sched.go v0.2.0-v0.9.6): an embedder 1 (from 0.3.7), a vision model 1 (any before
        0.4.1, mllama after); else the first of (4, 1) (from 0.6.7: (2, 1)) at which its own estimate of the
        whole model fits one card's free memory, then the first at which it fits all the cards together
        (pickBestFullFitByLibrary); none: 1 (a partial load, pickBestPartialFitByLibrary). Its free memory is
        the driver's, or less: the card's total less its estimates of the runners it already loaded
        (updateFreeSpace)."""
        from ..runtimes.ollama import fit_estimate

        rel, e = self.sizer.ollama_release, s.entry
        metal = self.gpus[0].stack == "metal"
        sized = self.sizer.size(e, self.gpus[0], 1)  # at 1 slot: the context each sequence gets
        ctx = sized.ctx
        if _loads_one_slot(ctx.runtime, ctx.model, e.role):
            return 1
        tries = (2 if rel.has("auto_parallel_2") else 4, 1)
        rt = ctx.runtime
        minimum = _ollama_minimum(rt, metal)
        free = [self.ollama_free(d) for d in range(len(self.gpus))]

        def estimate(slots: int, cards: int) -> Any:
            return fit_estimate(ctx.model, ctx.quant, sized.memory.context * slots, rt.prefill_chunk,
                                ctx.kv_dtype, minimum, cards, metal)

        for p in tries:
            if any(estimate(p, 1).fits([f]) for f in free):
                return p
        if len(free) > 1:
            for p in tries:
                if estimate(p, len(free)).fits(free):
                    return p
        return 1

    def _ollama_loaded(self, p: Placed) -> None:
        """Ollama's estimate of a runner it loaded, on each of its cards (what updateFreeSpace subtracts)."""
        from ..runtimes.ollama import fit_estimate

        ctx, n = p.sized.ctx, len(p.devices)
        rt, metal = ctx.runtime, self.gpus[p.devices[0]].stack == "metal"
        est = fit_estimate(ctx.model, ctx.quant, p.sized.memory.context * ctx.sequences, rt.prefill_chunk,
                           ctx.kv_dtype, _ollama_minimum(rt, metal), n, metal)
        for d in p.devices:
            self.ollama_estimates[d] += est.fixed + est.layers // n

    def _refuse(self, s: Server, why: str) -> None:
        d = max(range(len(self.gpus)), key=lambda i: (self.gpus[i].usable_bytes, -i))
        sized = self.sizer.size(s.entry, self.gpus[d], 1)
        self.unplaced.append((s, sized.per_card, why))

    def _sets(self, s: Server) -> list[tuple[int, ...]]:
        n = len(self.gpus)
        if _vllm_like(s.entry.runtime) or s.entry.runtime is None:
            sizes = [s.entry.gpus] if s.entry.gpus else [k for k in TP_SIZES if k <= n]
            out = []
            for k in sizes:
                for kind in dict.fromkeys(g.id for g in self.gpus):
                    same = [d for d in range(n) if self.gpus[d].id == kind]
                    if len(same) >= k:  # the k cards of that kind with the most room
                        out.append(tuple(sorted(sorted(same, key=lambda d: (-self.free(d), d))[:k])))
            return out
        k = s.entry.gpus or n  # llama.cpp and Ollama split over every card they see
        return [tuple(sorted(sorted(range(n), key=lambda d: (-self.free(d), d))[:k]))] if k > 1 else []

    def _on(self, s: Server, devices: tuple[int, ...]) -> Placed | None:
        """The server's bytes on these cards, or None where a card cannot run it (FP8 on a card without)."""
        from . import plan as planning

        e, gpus = s.entry, [self.gpus[d] for d in devices]
        if len({g.id for g in gpus}) > 1 and _vllm_like(e.runtime):
            return None  # tensor parallel needs one kind of card
        count = len(devices)
        sized = self.sizer.size(e, gpus[0], count)
        ctx = sized.ctx
        if fitting.unsupported(gpus[0], planning.requires(ctx.quant), ctx.runtime, count):
            return None
        extras = [self.sizer.extra(r, e, gpus[0], count) for r in s.riders]
        rider_bytes = sum(x[0] for x in extras)
        riders = [[x[0]] * count for x in extras]  # per rider, its bytes on each card of the set
        split: tuple[float, ...] = ()
        util = None
        if ctx.runtime.memory_share in ("total", "static"):  # runtimes.toml memory_share
            total = ctx.engine.cuda_total(gpus[0])
            context = ctx.runtime.context_bytes
            if ctx.runtime.memory_share == "total":
                # vLLM's share covers weights, workspace, non-torch memory, CUDA graphs and the KV cache (and
                # the draft and LoRA slots inside the server); the CUDA context is outside it
                util = math.ceil((sized.per_card + rider_bytes) * 100 / total) / 100
                own = int(total * util) - rider_bytes + context
            else:
                # SGLang's --mem-fraction-static is weights + KV pool only; its workspace and graphs come on
                # top (runtimes/launch.py)
                static = sized.per_card - sized.memory.per_card_fixed_bytes + rider_bytes
                util = math.ceil(static * 100 / total) / 100
                own = int(total * util) - rider_bytes + sized.memory.per_card_fixed_bytes + context
            mains = [own] * count
        elif count > 1:
            # a llama.cpp-like layer split, sized by its one owner (runtimes/llamacpp_like.py split_cards)
            engine, chunk = ctx.engine, ctx.inp.prefill_chunk or 0
            fixed = sized.memory.per_card_fixed_bytes + engine.pipeline_bytes(sized.memory, ctx.flash_attn,
                                                                               chunk)
            frees = [max(self.free(d) - fixed, 0) for d in devices]
            if not sum(frees):
                return None
            split = tuple(round(f / sum(frees), 3) for f in frees)
            # llama.cpp places the layers by the split the bundle passes it (--tensor-split)
            mains = engine.split_cards(ctx.model, ctx.quant, sized.memory, split, flash_attn=ctx.flash_attn,
                                       prefill_chunk=chunk)
            # an adapter file's tensors go with the layers they change (llama.cpp: runtimes/llamacpp.py)
            riders = [layer_split(x[0], ctx.model.layers, split) if x[3] else row
                      for x, row in zip(extras, riders, strict=True)]
        else:
            mains = [sized.per_card]
        tps = sized.alone_tokens_per_s
        if split and tps is not None:
            tps *= _split_speed([self.gpus[d] for d in devices], mains, fixed)
        pieces = []
        for i in range(count):
            row = [Piece(e, mains[i], tps, sized.host_bytes if i == 0 else 0, e.resident)]
            row += [Piece(r, per[i], None, h if i == 0 else 0, True, what)
                    for r, (_, h, what, _), per in zip(s.riders, extras, riders, strict=True)]
            pieces.append(tuple(row))
        return Placed(s, devices, sized, tuple(pieces), util, split)

    def _fits(self, p: Placed) -> bool:
        for d, row in zip(p.devices, p.pieces, strict=True):
            need = sum(x.bytes for x in row)
            reserve = max(self.reserved[d], p.sized.ctx.runtime.cuda_total_shortfall_bytes)
            room = self.gpus[d].usable_bytes - reserve - self.used[d]
            if p.server.entry.resident:
                room -= self.swap[d]
            else:
                need = max(need, self.swap[d])
            if need > room:
                return False
            if not self._margins_hold(p, d, need):
                return False
        return True

    def _margins_hold(self, p: Placed, d: int, need: int) -> bool:
        """Whether every server on card d that sizes its KV cache from the memory it finds free at startup
        (vLLM 0.34: runtimes/vllm_like.py startup_margin) finds its share and its margin free there, with the
        servers the bundle starts before it (_start_order) loaded: else its cache is smaller than its share
        gives (extensible_kv_cache.py: min(requested, free - margin))."""
        on = [(q, sum(x.bytes for x in q.pieces[q.devices.index(d)])) for q in self.placed
              if d in q.devices and q.server.entry.resident] + [(p, need)]
        on.sort(key=lambda qb: (qb[0].sized.ctx.runtime.shared_server, qb[0].server.entry.index))
        shortfall = p.sized.ctx.runtime.cuda_total_shortfall_bytes
        room = self.gpus[d].usable_bytes - max(self.reserved[d], shortfall)
        taken = 0
        for q, b in on:
            taken += b
            if q.utilization is not None and \
                    taken + q.sized.ctx.engine.startup_margin(q.sized.memory, self.gpus[d]) > room:
                return False
        return True

    def _put(self, p: Placed) -> None:
        for d, row in zip(p.devices, p.pieces, strict=True):
            self.reserved[d] = max(self.reserved[d], p.sized.ctx.runtime.cuda_total_shortfall_bytes)
            need = sum(x.bytes for x in row)
            if p.server.entry.resident:
                self.used[d] += need
            else:
                self.swap[d] = max(self.swap[d], need)
        if self.sizer.auto(p.server.entry):
            self._ollama_loaded(p)
        self.placed.append(p)


def _ollama_minimum(rt: Any, metal: bool) -> int:
    """The memory Ollama keeps free on each GPU beside a model: its minimum (CUDA/ROCm 457 MiB, the
    profile's context_bytes; Metal 512 MiB) + OLLAMA_GPU_OVERHEAD."""
    from ..runtimes.ollama import METAL_MINIMUM_BYTES

    return (METAL_MINIMUM_BYTES if metal else rt.context_bytes) + rt.gpu_overhead_bytes


def _split_speed(gpus: list[Gpu], on_card: list[int], fixed: int) -> float:
    """A layer split reads each card's layers at that card's bandwidth, one after the other: the time per
    token against the same bytes on cards like the first one (which the single-model speed assumed)."""
    layered = [max(b - fixed, 0) for b in on_card]
    first = gpus[0].bandwidth_gbps
    if not first or not all(g.bandwidth_gbps for g in gpus) or not sum(layered):
        return 1.0
    mixed = sum(b / g.bandwidth_gbps for b, g in zip(layered, gpus, strict=True))  # type: ignore[operator]
    return sum(layered) / first / mixed


# ------------------------------------------------------------------------------------ the answer


@record
class StackEntry(Result):
    model: str
    role: str
    runtime: str
    bytes: int  # on this card
    tokens_per_s: float | None  # generated (chat, vision) or read (embed, rerank) per second; None: a rider
    quant: str
    context: int
    users: int
    resident: bool
    host_bytes: int  # system RAM it also holds (llama.cpp's token_embd, vLLM's CPU LoRA cache)
    port: int | None
    # the sequences its server holds at once (llama.cpp -np, Ollama's slots: OLLAMA_NUM_PARALLEL, or the
    # ones an Ollama release picks at the model's load when it is unset; vLLM/SGLang: `users`)
    slots: int = 1


@record
class StackDevice(Result):
    gpu: str
    usable_bytes: int
    free_bytes: int
    verdict: str
    entries: tuple[StackEntry, ...]
    reserved_bytes: int  # the driver's own memory that CUDA does not hand out (vLLM reads total without it)


@record
class Unplaced(Result):
    model: str
    role: str
    runtime: str
    bytes: int
    reason: str


@record
class Change(Result):
    kind: str  # context | swap | quant | card | drop
    model: str | None
    change: str
    monthly_usd: float | None  # extra rent per month (0: a setting; None: a card without a rental price)
    fits: bool  # the whole set fits with this change alone (else it only places more of it)


@record
class Bundle(Result):
    format: str
    text: str


@record
class Rental(Result):
    gpu: str
    count: int
    monthly_usd: float  # the set's rent, after the rental rules' volume discount


@record
class Stack(Result):
    verdict: str
    devices: tuple[StackDevice, ...]
    unplaced: tuple[Unplaced, ...]
    changes: tuple[Change, ...]
    bundle: Bundle
    notes: tuple[str, ...]
    cheapest: Rental | None  # with --rent: the cheapest rented machine that holds the set (None: none does)


def solve(spec: Spec, catalog: tuple[str, ...]) -> tuple[Machine, Sizer]:
    sizer = Sizer(spec, catalog)
    machine = Machine(spec.gpus, sizer)
    servers = servers_of(spec)
    _check_ollama_once(servers, sizer)
    # first-fit decreasing: the largest server first (its bytes alone on the first card), ties in file order
    # Ollama's models come after the servers the bundle starts first, in file order (the order the bundle
    # loads them: Ollama places each, and picks its slots where it does, against what is loaded before it)
    weight = {s.entry.index: 0 if _is_ollama(s.entry) else sizer.size(s.entry, spec.gpus[0], 1).per_card
              for s in servers}
    for s in sorted(servers, key=lambda s: (not s.entry.resident, _is_ollama(s.entry), -weight[s.entry.index],
                                            s.entry.index)):
        machine.place(s)
    return machine, sizer


def _check_ollama_once(servers: list[Server], sizer: Sizer) -> None:
    """One `ollama serve` keeps one runner per model file (server/sched.go: `s.loaded[req.model.ModelPath]`;
    a request for a loaded model with another num_ctx reloads that runner, it never starts a second), so a
    model at one quantization listed twice for Ollama would count its memory twice: refused."""
    seen: dict[tuple[str, str], Entry] = {}
    for s in servers:
        e = s.entry
        if not _is_ollama(e):
            continue
        ctx = sizer.bare(e)
        key = (ctx.model.id, ctx.quant.name)
        first = seen.setdefault(key, e)
        if first is not e:
            raise InputError(f"{_where(e.index, e.model)}: Ollama loads {ctx.model.name} {ctx.quant.name} "
                             f"once ([[model]] {first.index + 1} lists it already); one runner serves every "
                             "request to it", field="file",
                             hint="list it once, with users = the sequences it serves at once")


def _verdicts(machine: Machine) -> list[fitting.Verdict]:
    rules = machine.sizer.rules
    out = []
    for d in range(len(machine.gpus)):
        margin = sum(p.sized.margin for p in machine.placed if d in p.devices)
        here = [p for p in machine.placed if d in p.devices]
        out.append(fitting.classify(machine.free(d), 1, rules, margin) if here else fitting.FITS)
    return out


def _overall(machine: Machine) -> str:
    if machine.unplaced:
        return fitting.NO.value
    vs = _verdicts(machine)
    return fitting.TIGHT.value if fitting.TIGHT in vs else fitting.FITS.value


def stack(inp: StackInput) -> Stack:
    spec = read_spec(inp)
    machine, sizer = solve(spec, tuple(inp.catalog))
    ports = assign_ports(machine)
    verdicts = _verdicts(machine)
    devices = []
    for d, gpu in enumerate(machine.gpus):
        rows = []
        for p in sorted(machine.placed, key=lambda p: p.server.entry.index):
            if d not in p.devices:
                continue
            k = p.devices.index(d)
            for piece in p.pieces[k]:
                rows.append(_entry_view(piece, p, ports.get(p.server.entry.index), _share(machine, p)))
        devices.append(StackDevice(gpu.name, gpu.usable_bytes, machine.free(d), verdicts[d].value,
                                   tuple(rows), machine.reserved[d]))
    unplaced = tuple(Unplaced(s.entry.model, s.entry.role, _runtime_id(machine, s.entry), b, why)
                     for s, b, why in machine.unplaced)
    verdict = _overall(machine)
    changes = tuple(find_changes(spec, tuple(inp.catalog))) if verdict == fitting.NO.value else ()
    bundle = make_bundle(machine, ports, inp.bundle)
    cheapest = cheapest_machine(spec, tuple(inp.catalog)) if inp.rent else None
    notes = _notes(machine) + _ram_notes(spec, devices)
    if verdict == fitting.NO.value and not changes:
        tried = ("a shorter context, a smaller quantization, swapping an Ollama model, up to "
                 f"{MORE_CARDS} more cards of a kind, leaving a model out")
        rent = "" if inp.rent else "; --rent looks for a rented machine of 1 to 8 cards that holds it"
        notes.append(f"no single change places more of the set ({tried}){rent}")
    return Stack(verdict, tuple(devices), unplaced, changes, bundle, tuple(notes), cheapest)


def _ram_notes(spec: Spec, devices: list[StackDevice]) -> list[str]:
    """What the set keeps in system RAM (vLLM's and SGLang's CPU LoRA copies, llama.cpp's token
    embeddings), against [machine] ram_gb where given."""
    host = sum(e.host_bytes for d in devices for e in d.entries)
    if not host:
        return []
    from ..units import fmt_bytes

    line = f"system RAM: the servers keep {fmt_bytes(host)} there"
    if spec.ram_gb is None:
        return [line]
    ram = int(spec.ram_gb * 1e9)
    return [line + (f", more than the machine's {fmt_bytes(ram)}: keep fewer adapters there (vLLM's "
                    "--max-cpu-loras, SGLang's --max-loaded-loras) or add RAM"
                    if host > ram else f" of the machine's {fmt_bytes(ram)}")]


RENT_COUNTS = (1, 2, 4, 8)  # the sets of one node the rental seed prices (docs: SPEC §3, 2/4/8 per node)


def cheapest_machine(spec: Spec, catalog: tuple[str, ...]) -> Rental | None:
    """The cheapest set of one priced card kind (1, 2, 4 or 8 cards, with the rental rules' volume discount)
    on which every server of the set is placed."""
    rules = default_rental()
    priced = sorted((g for g in _catalog_gpus(catalog) if g.monthly_usd), key=lambda g: (g.monthly_usd, g.id))
    best: Rental | None = None
    for g in priced:
        for n in RENT_COUNTS:
            price = fitting.set_price(g, n, rules)
            if price is None or (best is not None and price >= best.monthly_usd):
                break
            if _left(replace(spec, gpus=(g,) * n), catalog) == 0:
                best = Rental(g.name, n, round(price, 2))
                break
    return best


def _catalog_gpus(catalog: tuple[str, ...]) -> Registry[Gpu]:
    return load_gpus(catalog) if catalog else default_gpus()


def _runtime_id(machine: Machine, e: Entry) -> str:
    return machine.sizer.size(e, machine.gpus[0], 1).ctx.runtime.id


def _share(machine: Machine, p: Placed) -> float:
    """The share of its cards' time a server keeps when the others on them are busy: CUDA time-slices the
    processes of a card (without MPS), so each keeps what the others leave, at least an equal slice. An
    embedder or reranker with `requests_per_s` is busy for the tokens it reads at its own speed; every other
    server is taken as busy all the time (the worst case)."""
    keep = 1.0
    for d in p.devices:
        others = [q for q in machine.placed if q is not p and d in q.devices]
        if not others:
            continue
        busy = sum(_busy(q) for q in others)
        keep = min(keep, max(1 - busy, 1 / (len(others) + 1)))
    return keep


def _busy(q: Placed) -> float:
    e, s = q.server.entry, q.sized
    if e.requests_per_s is None or s.alone_tokens_per_s is None or s.ctx.model.generates:
        return 1.0
    return min(1.0, e.requests_per_s * s.memory.context / s.alone_tokens_per_s)


def _entry_view(piece: Piece, p: Placed, port: int | None, share: float) -> StackEntry:
    e = piece.entry
    main = e is p.server.entry
    ctx = p.sized.ctx
    tps = None if piece.tokens_per_s is None else round(piece.tokens_per_s * share, 1)
    quant = ctx.quant.name if main else piece.what
    users = e.users if main else p.server.entry.users
    return StackEntry(e.model, e.role, ctx.runtime.id, piece.bytes, tps, quant, p.sized.memory.context,
                      users, piece.resident, piece.host_bytes, port if main else None, ctx.sequences)


def _n_slots(n: int) -> str:
    return f"{n} slot" + ("s" if n != 1 else "")


def _slot_notes(machine: Machine) -> list[str]:
    """The slots an Ollama release picked for each model at its load (Machine.ollama_slots), file order."""
    rel = machine.sizer.ollama_release
    return [(f"{p.server.entry.model}: 1 slot, which Ollama's scheduler gives it whatever the setting "
             f"({_one_slot_why(p)}; server/sched.go)") if machine.sizer.one_slot(p.server.entry) else
            f"{p.server.entry.model}: {_n_slots(p.sized.ctx.sequences)}, which Ollama {rel.name} picks at "
            "its load with OLLAMA_NUM_PARALLEL unset (the models loaded in file order, each against the "
            "memory those before it leave)"
            for p in sorted(machine.placed, key=lambda p: p.server.entry.index)
            if machine.sizer.auto(p.server.entry)] + [
        f"{p.server.entry.model}: 1 slot, which Ollama's scheduler gives it whatever OLLAMA_NUM_PARALLEL "
        f"says ({_one_slot_why(p)}; server/sched.go)"
        for p in sorted(machine.placed, key=lambda p: p.server.entry.index)
        if not machine.sizer.auto(p.server.entry) and _is_ollama(p.server.entry)
        and machine.sizer.ollama_parallel > 1 and machine.sizer.one_slot(p.server.entry)]


def _one_slot_why(p: Placed) -> str:
    why = one_slot(p.sized.ctx.runtime, p.sized.ctx.model, p.server.entry.role)
    if why == "embed":
        return "an embedder"
    if why == "vision":
        return "a model with a projector, before 0.4.1"
    return f"{p.sized.ctx.model.model_type}, an architecture it runs with one"


def _notes(machine: Machine) -> list[str]:
    notes = _slot_notes(machine)
    for p in machine.placed:
        e = p.server.entry
        if p.utilization is not None:
            notes.append(f"{e.model}: --gpu-memory-utilization {p.utilization:g} of each card's CUDA total"
                         if p.sized.ctx.runtime.memory_share == "total" else
                         f"{e.model}: --mem-fraction-static {p.utilization:g}")
        if p.split:
            notes.append(f"{e.model}: layers split {' / '.join(f'{x:.0%}' for x in p.split)} over "
                         f"{', '.join(machine.gpus[d].name for d in p.devices)} (in proportion to free "
                         "memory)")
        for r in p.server.riders:
            if r.role == "adapter":
                plan = lora_plan(r, p.sized, e.users)
                notes.append(f"{e.model}: {plan.note}; its tokens/s leave out the adapters' per-step cost")
            else:
                notes.append(f"{e.model}: its tokens/s leave out the speed-up of drafting with {r.model} "
                             "(not modelled yet)")
    if any(len([q for q in machine.placed if d in q.devices]) > 1 for d in range(len(machine.gpus))):
        notes.append("tokens/s on a shared card: each server keeps the time the others leave (all taken as "
                     "busy, an embedder or reranker by its requests_per_s), at least an equal slice")
    return notes


# ------------------------------------------------------------------------------------ changes


def find_changes(spec: Spec, catalog: tuple[str, ...]) -> list[Change]:
    """Single changes that make the whole set fit (`fits`), or, where none of a kind does, that place more of
    it: each lever at its mildest value that fits (else its strongest that helps), cheapest first
    (`_rank`)."""
    now = _left(spec, catalog)
    found: list[Change] = []

    def tried(kind: str, model: str | None, text: str, changed: Spec, rent: float | None = 0.0) -> bool:
        left = _left(changed, catalog)
        if left is not None and left < now:
            found.append(Change(kind, model, text, rent, left == 0))
        return left == 0

    for e in spec.entries:
        if e.role in ("draft", "adapter"):
            continue
        sized = Sizer(spec, catalog).size(e, spec.gpus[0], 1)
        context = sized.memory.context
        shorter = [c for c in (context // 2**k for k in range(1, 8)) if c >= MIN_CONTEXT]
        _mildest(shorter, lambda c, e=e, context=context: tried(
            "context", e.model, f"context {context:,} → {c:,}", _with(spec, e, context=c)))
        if sized.ctx.runtime.shared_server and e.resident:
            tried("swap", e.model, "resident = false (Ollama loads it when asked)",
                  _with(spec, e, resident=False))
        _mildest(_smaller_quants(sized), lambda q, e=e, sized=sized: tried(
            "quant", e.model, f"quant {sized.ctx.quant.name} → {q}", _with(spec, e, quant=q)))
        riders = {r.index for r in spec.entries if r.target == e.index}
        tried("drop", e.model, "leave it out" + (" (with its draft and adapters)" if riders else ""),
              replace(spec, entries=tuple(x for x in spec.entries if x is not e and x.index not in riders)))
    for g in dict.fromkeys(spec.gpus):
        counts = [n for n in range(1, MORE_CARDS + 1) if len(spec.gpus) + n <= MAX_DEVICES]
        _mildest(counts, lambda n, g=g: tried(
            "card", None, f"{'one' if n == 1 else n} more {g.name}",
            replace(spec, gpus=(*spec.gpus, *[g] * n)), None if g.monthly_usd is None else n * g.monthly_usd))
    return _rank(found)


MORE_CARDS = 4  # the most cards of one kind a change adds


def _mildest(values: list[Any], attempt: Any) -> None:
    """Try each value, mildest first, until one makes the set fit; `attempt` records what helps. Only the
    last helpful one is kept where none fits (the strongest), else the fitting one."""
    for v in values:
        if attempt(v):
            return


def _rank(found: list[Change]) -> list[Change]:
    """What makes the set fit before what only helps; then settings (a shorter context, swapping, a smaller
    quantization: CHANGE_ORDER), then cards by their rent, then leaving a model out; of a lever tried at
    several values, the mildest that fits, else the strongest that helps."""
    kept: dict[tuple[str, str | None, str], Change] = {}
    for c in found:
        key = (c.kind, c.model, c.change.split(" more ")[-1] if c.kind == "card" else "")
        old = kept.get(key)
        if old is None or not old.fits:  # values come mildest first and stop at the first that fits
            kept[key] = c
    return sorted(kept.values(), key=lambda c: (not c.fits, CHANGE_ORDER[c.kind],
                                                 c.monthly_usd if c.monthly_usd is not None else math.inf))


def _with(spec: Spec, e: Entry, **changes: Any) -> Spec:
    return replace(spec, entries=tuple(replace(x, **changes) if x is e else x for x in spec.entries))


def _left(spec: Spec, catalog: tuple[str, ...]) -> int | None:
    """Servers the set leaves unplaced (None: the change is not a valid set)."""
    if not spec.entries:
        return None
    try:
        machine, _ = solve(spec, catalog)
    except CardfitError:
        return None
    return len(machine.unplaced)


def _smaller_quants(sized: Sized) -> list[str]:
    """The quantizations of the entry's format (GGUF types or checkpoint formats) whose weights of this model
    are smaller than its own, largest first."""
    from ..catalog.quants import default_quants
    from ..core.weights import weights

    ctx = sized.ctx
    ladder = GGUF_LADDER if ctx.runtime.weights_format == "gguf" else CHECKPOINT_LADDER
    quants = default_quants()
    now = sized.memory.weights.total_bytes
    sizes = [(weights(ctx.model, quants.get(q)).total_bytes, q) for q in ladder]
    return [q for b, q in sorted(sizes, reverse=True) if b < now]


# ------------------------------------------------------------------------------------ the bundle


def assign_ports(machine: Machine) -> dict[int, int]:
    """A port per server: the file's, else the runtime's default, then the next free one; Ollama's models
    share one `ollama serve`."""
    taken = {p.server.entry.port for p in machine.placed if p.server.entry.port}
    out: dict[int, int] = {}
    # the one port the Ollama entries state (read_spec allows one), whichever entry states it
    ollama: int | None = next((p.server.entry.port for p in machine.placed
                               if p.sized.ctx.runtime.shared_server and p.server.entry.port), None)
    for p in sorted(machine.placed, key=lambda p: p.server.entry.index):
        e, rt = p.server.entry, p.sized.ctx.runtime
        if rt.shared_server and ollama is not None:
            out[e.index] = ollama
            continue
        port = e.port
        if port is None:
            port = rt.port or 8000
            while port in taken:
                port += 1
            taken.add(port)
        out[e.index] = port
        if rt.shared_server:
            ollama = port
    return out


def server_launch(p: Placed, port: int) -> Any:
    """The runtime's own launch line for this server (services/launch_line.py launch_of), with the flags a
    shared machine adds: its port, its memory share, its role, its draft and its adapters."""
    from .launch_line import launch_of

    e, s = p.server.entry, p.sized
    ctx = s.ctx
    if p.utilization is not None:
        ctx = replace(ctx, utilization=p.utilization)
    kv = None if s.memory.kv_dtype in ("f16", "bf16") else ctx.inp.kv_dtype
    rt = ctx.runtime
    slots = 0 if rt.paged_kv or rt.tensor_parallel else ctx.sequences
    tp = len(p.devices) if rt.tensor_parallel else 1
    launch = launch_of(ctx, tp, 1, s.memory.context, max(ctx.sequences, 1), kv, slots,
                       flash_attn=e.flash_attn)
    argv = list(launch.argv)
    env = list(launch.env)
    flags, more = ctx.engine.stack_flags(port, e.role, p.split)  # the adapter's own (runtimes/*.py)
    argv += flags
    env += more
    for r in p.server.riders:
        if r.role == "adapter":
            argv += lora_plan(r, s, e.users).flags  # the runtime adapter's own flags
        else:
            from .resolve import resolve

            draft = resolve(PlanInput(model=r.model, catalog=ctx.inp.catalog)).model
            spec = {"model": draft.hf or r.model, "num_speculative_tokens": DRAFT_TOKENS}
            argv += ["--speculative-config", json.dumps(spec, separators=(",", ":"))]
    return replace(launch, argv=tuple(argv), env=tuple(env))


def make_bundle(machine: Machine, ports: dict[int, int], fmt: str) -> Bundle:
    if fmt == "compose":
        return Bundle("compose", _compose(machine, ports))
    return Bundle("script", _script(machine, ports))


def _pci_order(machine: Machine) -> dict[str, str]:
    """With unequal NVIDIA cards, CUDA numbers them fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, which
    numbers them as nvidia-smi and containers' device_ids do (NVIDIA CUDA C++ Programming Guide, "CUDA
    Environment Variables"; equal cards tie and keep the bus order): the script sets it so
    CUDA_VISIBLE_DEVICES means the cards the plan placed."""
    unequal = len({g.name for g in machine.gpus}) > 1 and all(g.stack == "cuda" for g in machine.gpus)
    return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"} if unequal else {}


def _visible(p: Placed) -> str:
    return ",".join(str(d) for d in p.devices)


def _ollama_env(machine: Machine, env: dict[str, str]) -> dict[str, str]:
    """What the one `ollama serve` needs for its models: how many stay loaded, how long; OLLAMA_NUM_PARALLEL
    left unset where the stack's Ollama release picks each model's slots (Sizer.auto)."""
    ollama = [p for p in machine.placed if p.sized.ctx.runtime.shared_server]
    resident = [p for p in ollama if p.server.entry.resident]
    loaded = len(resident) + (1 if len(resident) < len(ollama) else 0)
    out = {**env, "OLLAMA_MAX_LOADED_MODELS": str(max(loaded, 1))}
    if any((p.server.entry.gpus or 1) > 1 for p in ollama):  # _check_ollama_spread: all of them split
        out["OLLAMA_SCHED_SPREAD"] = "1"
    if machine.sizer.ollama_release is not None:
        out.pop("OLLAMA_NUM_PARALLEL", None)
    elif "OLLAMA_NUM_PARALLEL" in out:  # the stack's setting, not the slots of the model launched first
        out["OLLAMA_NUM_PARALLEL"] = str(machine.sizer.ollama_parallel)
    return out


def _script(machine: Machine, ports: dict[int, int]) -> str:
    import shlex

    lines = ["#!/bin/sh", "# cardfit stack: one server per line, each on its cards and port, started one",
             "# after another (each once the one before answers)", "set -e"]
    ollama_done = False
    unified = any(g.unified_memory for g in machine.gpus)
    order = _pci_order(machine)
    if order:
        lines += ["# cards numbered as nvidia-smi lists them (CUDA_DEVICE_ORDER=PCI_BUS_ID; CUDA's own",
                  "# order is fastest first): [machine] gpu lists them in that order (\"local\" reads it)"]
    for p in _start_order(machine):
        e = p.server.entry
        rt = p.sized.ctx.runtime.id
        port = ports[e.index]
        if rt == "ollama":
            if not ollama_done:
                launch = server_launch(p, port)
                env = _ollama_env(machine, dict(launch.env))
                if not unified:
                    env |= order
                    env["CUDA_VISIBLE_DEVICES"] = ",".join(str(d) for d in _ollama_cards(machine))
                words = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
                lines += ["", f"# Ollama: every model below on port {port}", *_ollama_release_note(machine),
                          f"{words} {shlex.join(launch.argv)} &",
                          f"until curl -s http://127.0.0.1:{port}/ >/dev/null; do sleep 1; done"]
                ollama_done = True
            keep: int | str = -1 if e.resident else "5m"
            body = json.dumps({"model": _ollama_name(p), "keep_alive": keep,
                               "options": {"num_ctx": p.sized.memory.context}}, separators=(",", ":"))
            lines += [f"OLLAMA_HOST=127.0.0.1:{port} ollama pull {shlex.quote(_ollama_name(p))}"]
            if e.resident:
                lines += [f"curl -s http://127.0.0.1:{port}/api/generate -d {shlex.quote(body)} >/dev/null"
                          f"  # load {e.model} and keep it (keep_alive -1)"]
            else:
                lines += [f"# {e.model} loads on demand: requests pass {shlex.quote(body)}"]
            if e.resident:
                lines += [f"# requests to {_ollama_name(p)} pass \"options\": {{\"num_ctx\": "
                          f"{p.sized.memory.context}}} (another num_ctx reloads it)"]
            continue
        launch = server_launch(p, port)
        prefix = "" if unified else "".join(f"{k}={v} " for k, v in order.items()) + \
            f"CUDA_VISIBLE_DEVICES={_visible(p)} "
        lines += ["", f"# {e.model} ({e.role}) on {', '.join(machine.gpus[d].name for d in p.devices)}",
                  *(f"# note: {n}" for n in launch.notes),
                  prefix + launch.shell() + " &",
                  # one server at a time: a vLLM instance profiling while another loads on the same card
                  # counts the other's memory as its own (STARTUP_SOURCE)
                  f"until curl -sf http://127.0.0.1:{port}/health >/dev/null; do sleep 2; done"]
    lines += ["", "wait"]
    return "\n".join(lines) + "\n"


def _start_order(machine: Machine) -> list[Placed]:
    """The servers in the order the bundle starts them: file order, Ollama's models after the others, as
    `solve` placed them (Ollama picks each model's card from the memory left when it loads it)."""
    return sorted(machine.placed, key=lambda p: (p.sized.ctx.runtime.shared_server, p.server.entry.index))


def _ollama_image(machine: Machine, image: str) -> str:
    """The image of the Ollama release whose automatic slots the stack planned (its tag is the release
    number: ollama/ollama:0.3.3); the runtime row's image otherwise, or for a release named by a date."""
    rel = machine.sizer.ollama_release
    if rel is None or not rel.number or not re.fullmatch(r"v?\d+(\.\d+)*", rel.name.strip()):
        return image
    return f"{image.rsplit(':', 1)[0]}:{'.'.join(str(n) for n in rel.number)}"


def _ollama_release_note(machine: Machine) -> list[str]:
    rel = machine.sizer.ollama_release
    if rel is None:
        return []
    return [f"# run Ollama {rel.name}: with OLLAMA_NUM_PARALLEL unset it picks each model's slots as planned "
            "(releases 0.2.0 to 0.9.x)"]


def _ollama_cards(machine: Machine) -> list[int]:
    return sorted({d for q in machine.placed if q.sized.ctx.runtime.shared_server for d in q.devices})


def _ollama_name(p: Placed) -> str:
    from .launch_line import model_ref

    return model_ref(p.sized.ctx)


def _compose(machine: Machine, ports: dict[int, int]) -> str:
    """compose.yaml: one service per server, its cards as device_ids and its port mapped (services/emit.py's
    conventions: every string a JSON string)."""
    from .emit import DEVICES

    if any(g.stack not in DEVICES for g in machine.gpus):
        raise InputError("--bundle compose writes NVIDIA (CUDA) services; this machine has "
                         f"{', '.join(sorted({g.name for g in machine.gpus if g.stack not in DEVICES}))}",
                         field="bundle", hint="use --bundle script")
    q = json.dumps
    out = ["services:"]
    notes: list[str] = []
    names: set[str] = set()
    previous = ""
    done_ollama = False
    for p in _start_order(machine):
        e, rt = p.server.entry, p.sized.ctx.runtime
        if rt.shared_server and done_ollama:
            continue
        port = ports[e.index]
        launch = server_launch(p, rt.port or port)
        argv = [a for a in launch.argv]
        if "--port" in argv:  # the container's own port; the host's is mapped below
            at = argv.index("--port")
            argv[at + 1] = str(rt.port)
        argv += list(rt.image_listen)
        entry = list(rt.image_entrypoint)
        args = argv[len(entry):] if entry and argv[:len(entry)] == entry else argv
        name = re.sub(r"[^a-z0-9]+", "-", f"{e.model}-{rt.id}".lower()).strip("-")[:40] or "server"
        name = name if name not in names else f"{name}-{e.index + 1}"
        names.add(name)
        notes += [f"{name}: {n}" for n in launch.notes if not rt.shared_server]  # Ollama's: the pulls below
        notes += [f"{name}: the line reads {a}: mount it into the container's working directory"
                  for a in argv if a.lower().endswith(".gguf")]
        if rt.shared_server:
            notes += [f"then `docker compose exec {name} ollama pull {_ollama_name(x)}`; requests to it pass "
                      f"\"keep_alive\": {-1 if x.server.entry.resident else q('5m')} and \"options\": "
                      f"{{\"num_ctx\": {x.sized.memory.context}}}"
                      for x in sorted(machine.placed, key=lambda x: x.server.entry.index)
                      if x.sized.ctx.runtime.shared_server]
        devices = _ollama_cards(machine) if rt.shared_server else list(p.devices)
        env = dict(launch.env)
        env.pop("OLLAMA_HOST", None)
        if rt.shared_server:
            env = _ollama_env(machine, env)
            done_ollama = True
        image = _ollama_image(machine, container_image(rt)) if rt.shared_server else container_image(rt)
        out += [f"  {name}:", f"    image: {q(image)}"]
        out += [f"    {'command' if entry else 'entrypoint'}: [{', '.join(q(a) for a in args)}]"]
        if env:
            out += ["    environment:"] + [f"      {k}: {q(v)}" for k, v in env.items()]
        health = p.sized.ctx.engine.health_check(rt.port)  # the adapter's (runtimes/*.py)
        out += ["    healthcheck:", f"      test: [{', '.join(q(a) for a in health)}]",
                '      interval: "10s"', "      retries: 90"]
        if previous:  # one server at a time (STARTUP_SOURCE)
            out += ["    depends_on:", f"      {previous}:", '        condition: "service_healthy"']
        previous = name
        out += ["    ports:", f"      - {q(f'{port}:{rt.port}')}", '    ipc: "host"',
                "    deploy:", "      resources:", "        reservations:", "          devices:",
                '            - driver: "nvidia"',
                f"              device_ids: [{', '.join(q(str(d)) for d in devices)}]",
                '              capabilities: ["gpu"]']
    head = ["# cardfit stack --bundle compose", *(f"# note: {' '.join(n.split())}" for n in notes)]
    return "\n".join(head + out) + "\n"

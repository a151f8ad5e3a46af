"""The command that starts a planned deployment, for each runtime that serves one.

Every flag emitted here exists in the tool's current release: tests/test_launch.py checks each against
the option lists stored in tests/data/runtime_options/ (made from vLLM 0.33.0's and SGLang 0.5.23's
wheels by scripts/runtime_options.py, and from llama-server's, trtllm-serve's and Ollama's documented
option tables at a pinned commit).

What the flags mean where runtimes differ:
- vLLM `--gpu-memory-utilization`: the share of the card's total memory the engine may use (weights,
  activations and KV cache together). SGLang `--mem-fraction-static`: the share for weights plus the KV
  pool. trtllm-serve `--kv_cache_free_gpu_memory_fraction`: the share of the memory left after weights and
  buffers that goes to the KV cache. The caller passes the runtime's own fraction.
- llama-server `-c` is the context of all slots together; with `-np N` each slot gets `-c / N` (the unified
  KV buffer is off when the slot count is given), so `-c` = context per sequence × slots.
- Quantization: vLLM and SGLang quantize a 16-bit checkpoint to FP8 on load (`--quantization fp8`); every
  other format, and FP8 where the checkpoint already is FP8, is read from the checkpoint's own
  quantization_config, so no flag is passed (passing one that differs from the checkpoint is an error in
  both engines).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from ..errors import InputError

# cardfit's KV cache dtype → each engine's name for it (vLLM CacheDType, SGLang --kv-cache-dtype choices,
# llama.cpp -ctk/-ctv types, OLLAMA_KV_CACHE_TYPE values). 16-bit means "auto": the model's own dtype.
_SIXTEEN = {"auto", "f16", "fp16", "float16", "bf16", "bfloat16"}
_KV = {
    "vllm": {"fp8": "fp8", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"},
    "sglang": {"fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"},
    "trtllm": {"fp8": "fp8", "fp8_e4m3": "fp8"},
    "llama.cpp": {"q8_0": "q8_0", "q4_0": "q4_0", "q4_1": "q4_1", "q5_0": "q5_0", "q5_1": "q5_1",
                  "iq4_nl": "iq4_nl", "f32": "f32"},
    "ollama": {"q8_0": "q8_0", "q4_0": "q4_0"},
}
# Formats the engines quantize on load from a 16-bit checkpoint (vLLM QuantizationMethods, SGLang
# QUANTIZATION_CHOICES); anything else must come as a quantized checkpoint.
_ONLINE = {"vllm": {"fp8": "fp8"}, "sglang": {"fp8": "fp8"}}
_FLOAT = {"bf16", "fp16", "fp32", "f16", "f32", "auto"}
# Words of argv that name the program (`vllm serve`, `python -m sglang.launch_server`, …).
_PROGRAM_WORDS = {"vllm": 2, "sglang": 3, "trtllm": 1, "llama.cpp": 1, "ollama": 2}
SERVED = ("vllm", "sglang", "trtllm", "llama.cpp", "ollama")


@dataclass(frozen=True)
class Launch:
    """A command line: the program and its arguments, the environment it needs, files it reads, and what to
    do on the other nodes."""

    runtime: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    files: tuple[tuple[str, str], ...] = ()  # (name, content) written before the command runs
    notes: tuple[str, ...] = field(default=())

    def shell(self) -> str:
        """One shell line (with the files it needs written first, as here-documents)."""
        parts = [f"cat > {name} <<'EOF'\n{body.rstrip()}\nEOF\n" for name, body in self.files]
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env)
        return "".join(parts) + (env + " " if env else "") + shlex.join(self.argv)

    def flags(self) -> list[str]:
        """The options given to the tool (the words that name the program are left out)."""
        return [a.split("=", 1)[0] for a in self.argv[_PROGRAM_WORDS[self.runtime]:] if a.startswith("-")]


def model_ref(runtime: str, *, asked: str | None, model_id: str, hf: str | None, tag: str | None,
              quant: str) -> str:
    """How the runtime's command names the model: Ollama a tag, llama-server a .gguf file, the others a
    Hugging Face repository."""
    if runtime == "ollama":
        return tag or asked or model_id
    if runtime == "llama.cpp":
        name = asked or model_id
        return name if name.endswith(".gguf") else f"{model_id}-{quant}.gguf"
    return hf or asked or model_id


def _kv(runtime: str, kv_dtype: str | None) -> str | None:
    """The engine's KV dtype name, None for the 16-bit default."""
    d = (kv_dtype or "auto").lower()
    if d in _SIXTEEN:
        return None
    name = _KV.get(runtime, {}).get(d)
    if name is None:
        raise InputError(f"{runtime} has no '{kv_dtype}' KV cache", field="kv_dtype",
                         hint="pick a KV cache type that runtime supports")
    return name


def _quant_key(quant: str | None) -> str:
    """A quantization id or display name ("fp8", "FP8 (E4M3)", "INT4 g128 (AWQ/GPTQ)") → its first word."""
    words = (quant or "bf16").lower().replace("_", " ").split()
    return words[0] if words else "bf16"


def _quant_flag(runtime: str, quant: str | None, checkpoint_quantized: bool) -> tuple[list[str], list[str]]:
    q = _quant_key(quant)
    if q in _FLOAT or checkpoint_quantized:
        return [], []
    online = _ONLINE.get(runtime, {}).get(q)
    if online:
        return ["--quantization", online], []
    return [], [f"use a checkpoint quantized as {quant}: {runtime} reads the format from the "
                f"checkpoint's quantization_config"]


def _int(name: str, value: int | None, low: int = 1) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InputError(f"{name} must be a whole number ≥ {low}", field=name)
    return value


def _nodes(nodes: int, flag_nodes: str, flag_rank: str, addr_flag: str,
           addr: str) -> tuple[list[str], list[str]]:
    if nodes <= 1:
        return [], []
    others = "the second node with " + flag_rank + " 1" if nodes == 2 else \
        f"each of the other {nodes - 1} nodes with {flag_rank} 1 to {nodes - 1}"
    return [flag_nodes, str(nodes), flag_rank, "0", addr_flag, addr], [
        f"run the same command on {others}, HEAD_NODE_IP being this node's address"]


def _vllm(model: str, a: dict) -> Launch:
    argv = ["vllm", "serve", model, "--tensor-parallel-size", str(a["tp"])]
    if a["pp"] > 1:
        argv += ["--pipeline-parallel-size", str(a["pp"])]
    argv += ["--max-model-len", str(a["max_model_len"]), "--max-num-seqs", str(a["max_num_seqs"])]
    if a["gpu_memory_utilization"] is not None:
        argv += ["--gpu-memory-utilization", f"{a['gpu_memory_utilization']:g}"]
    if a["kv"]:
        argv += ["--kv-cache-dtype", a["kv"]]
    if a["max_batched_tokens"]:
        argv += ["--max-num-batched-tokens", str(a["max_batched_tokens"])]
    quant, notes = _quant_flag("vllm", a["quant"], a["checkpoint_quantized"])
    nodes, more = _nodes(a["nodes"], "--nnodes", "--node-rank", "--master-addr", "HEAD_NODE_IP")
    return Launch("vllm", tuple(argv + quant + nodes), notes=tuple(notes + more))


def _sglang(model: str, a: dict) -> Launch:
    argv = ["python", "-m", "sglang.launch_server", "--model-path", model, "--tp-size", str(a["tp"])]
    if a["pp"] > 1:
        argv += ["--pp-size", str(a["pp"])]
    argv += ["--context-length", str(a["max_model_len"]), "--max-running-requests", str(a["max_num_seqs"])]
    if a["gpu_memory_utilization"] is not None:
        argv += ["--mem-fraction-static", f"{a['gpu_memory_utilization']:g}"]
    if a["kv"]:
        argv += ["--kv-cache-dtype", a["kv"]]
    if a["max_batched_tokens"]:
        argv += ["--chunked-prefill-size", str(a["max_batched_tokens"])]
    quant, notes = _quant_flag("sglang", a["quant"], a["checkpoint_quantized"])
    nodes, more = _nodes(a["nodes"], "--nnodes", "--node-rank", "--dist-init-addr", "HEAD_NODE_IP:50000")
    return Launch("sglang", tuple(argv + quant + nodes), notes=tuple(notes + more))


def _trtllm(model: str, a: dict) -> Launch:
    argv = ["trtllm-serve", model, "--backend", "pytorch", "--tp_size", str(a["tp"])]
    if a["pp"] > 1:
        argv += ["--pp_size", str(a["pp"])]
    argv += ["--max_batch_size", str(a["max_num_seqs"]), "--max_seq_len", str(a["max_model_len"])]
    if a["max_batched_tokens"]:
        argv += ["--max_num_tokens", str(a["max_batched_tokens"])]
    if a["gpu_memory_utilization"] is not None:
        argv += ["--kv_cache_free_gpu_memory_fraction", f"{a['gpu_memory_utilization']:g}"]
    files: tuple[tuple[str, str], ...] = ()
    if a["kv"]:
        # TensorRT-LLM's LLM API takes the KV cache dtype in KvCacheConfig, set from a YAML file
        # (tensorrt_llm/commands/serve.py: --config / --extra_llm_api_options).
        files = (("cardfit-trtllm.yaml", f"kv_cache_config:\n  dtype: {a['kv']}\n"),)
        argv += ["--config", "cardfit-trtllm.yaml"]
    _, notes = _quant_flag("trtllm", a["quant"], a["checkpoint_quantized"])
    if a["nodes"] > 1:
        notes.append(f"launch on {a['nodes']} nodes through MPI or Slurm (trtllm-llmapi-launch)")
    return Launch("trtllm", tuple(argv), files=files, notes=tuple(notes))


def _llamacpp(model: str, a: dict) -> Launch:
    slots = a["parallel"] or a["max_num_seqs"]
    source = ["-m", model] if model.lower().endswith(".gguf") else ["-hf", model]
    layers = "all" if a["n_gpu_layers"] is None else str(a["n_gpu_layers"])
    argv = ["llama-server", *source, "-ngl", layers, "-c", str(a["max_model_len"] * slots), "-np", str(slots)]
    flash = a["flash_attn"]
    if a["kv"]:
        flash = True  # a quantized V cache needs flash attention in llama.cpp
        argv += ["-ctk", a["kv"], "-ctv", a["kv"]]
    if flash is not None:
        argv += ["-fa", "on" if flash else "off"]
    if a["cpu_moe_layers"]:
        argv += ["--n-cpu-moe", str(a["cpu_moe_layers"])]
    if a["max_batched_tokens"]:
        argv += ["-b", str(a["max_batched_tokens"])]
    notes = []
    if a["tp"] > 1 or a["pp"] > 1:
        notes.append("llama.cpp splits layers over every visible GPU (--split-mode layer): set "
                     "CUDA_VISIBLE_DEVICES to the cards of the set")
    return Launch("llama.cpp", tuple(argv), notes=tuple(notes))


def _ollama(model: str, a: dict) -> Launch:
    slots = a["parallel"] or a["max_num_seqs"]
    env = [("OLLAMA_CONTEXT_LENGTH", str(a["max_model_len"])), ("OLLAMA_NUM_PARALLEL", str(slots))]
    flash = a["flash_attn"]
    if a["kv"]:
        flash = True  # Ollama quantizes the KV cache only with flash attention on
        env.append(("OLLAMA_KV_CACHE_TYPE", a["kv"]))
    if flash is not None:
        env.append(("OLLAMA_FLASH_ATTENTION", "1" if flash else "0"))
    if a["tp"] * a["pp"] > 1:
        env.append(("OLLAMA_SCHED_SPREAD", "1"))
    return Launch("ollama", ("ollama", "serve"), env=tuple(env),
                  notes=(f"then `ollama pull {model}`; the first request to it loads the model",))


_BUILDERS = {"vllm": _vllm, "sglang": _sglang, "trtllm": _trtllm, "llama.cpp": _llamacpp, "ollama": _ollama}


def build(runtime: str, model: str, *, quant: str | None = None, tp: int = 1, pp: int = 1, nodes: int = 1,
          max_model_len: int, max_num_seqs: int = 1, kv_dtype: str | None = None,
          gpu_memory_utilization: float | None = None, n_gpu_layers: int | None = None,
          parallel: int | None = None, flash_attn: bool | None = None, cpu_moe_layers: int | None = None,
          max_batched_tokens: int | None = None, checkpoint_quantized: bool = False) -> Launch:
    """The launch command for `runtime` (vllm, sglang, trtllm, llama.cpp, ollama). `model` is what the
    runtime loads: a Hugging Face id or path (vLLM, SGLang, TensorRT-LLM), a .gguf path or a Hugging Face
    GGUF repo[:quant] (llama.cpp), an Ollama tag (Ollama)."""
    builder = _BUILDERS.get(runtime)
    if builder is None:
        raise InputError(f"cardfit has no launch command for {runtime}", field="runtime",
                         hint=f"launch commands exist for {', '.join(SERVED)}")
    if not model or any(c in model for c in "\n\r\0"):
        raise InputError("the model to launch must be one line", field="model")
    if gpu_memory_utilization is not None and not 0 < gpu_memory_utilization <= 1:
        raise InputError("the memory fraction must be between 0 and 1", field="gpu_memory_utilization")
    args = {"quant": quant, "tp": _int("tp", tp), "pp": _int("pp", pp), "nodes": _int("nodes", nodes),
            "max_model_len": _int("max_model_len", max_model_len),
            "max_num_seqs": _int("max_num_seqs", max_num_seqs), "kv": _kv(runtime, kv_dtype),
            "gpu_memory_utilization": gpu_memory_utilization,
            "n_gpu_layers": _int("n_gpu_layers", n_gpu_layers, 0), "parallel": _int("parallel", parallel),
            "flash_attn": flash_attn, "cpu_moe_layers": _int("cpu_moe_layers", cpu_moe_layers, 0),
            "max_batched_tokens": _int("max_batched_tokens", max_batched_tokens),
            "checkpoint_quantized": checkpoint_quantized}
    return builder(model, args)


def command(runtime: str, model: str, **options: object) -> str:
    """`build(...)` as shell text, its notes (what to serve, what to run on the other nodes) appended as
    shell comments so that a copied command carries them."""
    launch = build(runtime, model, **options)  # type: ignore[arg-type]
    return launch.shell() + "".join(f"  # {n}" for n in launch.notes)

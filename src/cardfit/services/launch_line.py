"""The command line that starts a plan's set or a deployment's replica: the one place cardfit turns a
planned runtime, model, split and context into the runtime's own flags (runtimes/launch.py checks them)."""

from __future__ import annotations

from typing import Any

SERVE_RUNTIMES = ("vllm", "sglang", "trtllm", "llama.cpp", "ollama")  # servers with a launch command


def launch_command(ctx: Any, tp: int, pp: int, length: int, seqs: int, kv: str | None,
                   slots: int = 0) -> str | None:
    """The one place a plan (services/plan.py) or a deployment becomes a launch command line; None for a
    runtime without one (transformers, TGI, the rule of thumb)."""
    from ..runtimes import launch

    rt = ctx.runtime
    if rt.id not in SERVE_RUNTIMES:
        return None
    util = ctx.utilization or (rt.gpu_memory_utilization if rt.gpu_memory_utilization < 1 else None)
    return launch.command(rt.id, model_ref(ctx), quant=ctx.quant.name, tp=tp if rt.tensor_parallel else 1,
                          pp=pp if rt.pipeline_parallel else 1, max_model_len=length, max_num_seqs=seqs,
                          kv_dtype=kv, gpu_memory_utilization=util,
                          n_gpu_layers=None if rt.tensor_parallel else 999, parallel=slots or None,
                          flash_attn=True if kv else None)


def model_ref(ctx: Any) -> str:
    r, m = ctx.resolved, ctx.model
    if ctx.runtime.id == "ollama":
        return r.tag.tag if r.tag is not None else (ctx.inp.model or m.id)
    if ctx.runtime.id == "llama.cpp":
        name = ctx.inp.model or m.id
        return name if name.endswith(".gguf") else f"{m.id}-{ctx.quant.name}.gguf"
    return m.hf or ctx.inp.model or m.id

"""The command line that starts a plan's set or a deployment's replica: the one place cardfit turns a
planned runtime, model, split and context into the runtime's own flags (its adapter's `launch()`,
runtimes/<runtime>.py, through runtimes/launch.py's checks)."""

from __future__ import annotations

from typing import Any


def launch_command(ctx: Any, tp: int, pp: int, length: int, seqs: int, kv: str | None,
                   slots: int = 0, replicas: int = 1, one_node: bool = False) -> str | None:
    """The one place a plan (services/plan.py) or a deployment becomes a launch command line; None for a
    runtime without one (transformers, TGI, the rule of thumb). `replicas`: copies of the model the
    deployment runs (`one_node`: all of them inside one node, which data parallelism serves in one server)."""
    from ..runtimes import launch

    rt = ctx.runtime
    if not rt.serves:
        return None
    util = ctx.utilization or (rt.gpu_memory_utilization if rt.gpu_memory_utilization < 1 else None)
    engine = ctx.engine
    return launch.command(rt.id, model_ref(ctx, engine), quant=ctx.quant.name,
                          tp=tp if rt.tensor_parallel else 1,
                          pp=pp if rt.pipeline_parallel else 1, max_model_len=length, max_num_seqs=seqs,
                          kv_dtype=kv, gpu_memory_utilization=util,
                          n_gpu_layers=None if rt.tensor_parallel else 999, parallel=slots or None,
                          flash_attn=True if kv else None, replicas=replicas, one_node=one_node,
                          engine=engine)


def model_ref(ctx: Any, engine: Any = None) -> str:
    """How the runtime's launch line names the model (its adapter's `model_ref`)."""
    r, m = ctx.resolved, ctx.model
    return (engine or ctx.engine).model_ref(asked=ctx.inp.model, model_id=m.id, hf=m.hf,
                                tag=r.tag.tag if r.tag is not None else None, quant=ctx.quant.name)

"""The command line that starts a plan's set or a deployment's replica: the one place cardfit turns a
planned runtime, model, split and context into the runtime's own flags (its adapter's `launch()`,
runtimes/<runtime>.py, through runtimes/launch.py's checks)."""

from __future__ import annotations

from typing import Any


def launch_command(ctx: Any, tp: int, pp: int, length: int, seqs: int, kv: str | None,
                   slots: int = 0, nodes: int = 1, replicas: int = 1, one_node: bool = False,
                   kv_offload_gb: float = 0.0, dp: int = 1, ep: int = 1,
                   disaggregation: str | None = None, dynamo: bool = False,
                   recv_interval: int = 0, graph_max_bs: int = 0, adp_timeout_iters: int = 0,
                   mixed_chunk: bool = False, fraction: float | None = None) -> str | None:
    """The one place a plan (services/plan.py) or a deployment becomes a launch command line; None for a
    runtime without one (transformers, TGI, the rule of thumb). `nodes`: the nodes one copy spans (its
    pipeline stages across them); `replicas`: copies of the model the deployment runs (`one_node`: all of
    them inside one node, which data parallelism serves in one server); `dp`, `ep`: one copy's attention
    groups and expert-parallel ranks (core/moe_parallel.py); `disaggregation`: "prefill" or "decode" for a
    worker of a disaggregated deployment (core/disagg.py); `dynamo`: that worker as NVIDIA Dynamo starts
    it;
    `recv_interval`: a pinned SGLang deployment's
    --scheduler-recv-interval (0: the engine's default); `graph_max_bs`: its --cuda-graph-max-bs (SGLang's
    flag, TensorRT-LLM's cuda_graph_config; 0: the engine's default); `adp_timeout_iters`: its
    attention-DP balancing (TensorRT-LLM attention_dp_config; 0: off, the engine's default); `mixed_chunk`:
    its --enable-mixed-chunk (SGLang; off, the engine's default); `fraction`: the memory share the budget
    was sized with where the engine works out its own (Runtime.launch_fraction: SGLang's
    --mem-fraction-static; None: the question's, else the profile's default)."""
    from ..runtimes import launch

    if not ctx.runtime.serves:
        return None
    options = _options(ctx, tp, pp, length, seqs, kv, slots, nodes, replicas, one_node, dp, ep, fraction)
    if kv_offload_gb:
        options["kv_offload_gb"] = kv_offload_gb
    if disaggregation:
        options["disaggregation"] = disaggregation
    if dynamo:
        options["dynamo"] = True
    if recv_interval:
        options["scheduler_recv_interval"] = recv_interval
    if graph_max_bs:
        options["cuda_graph_max_bs"] = graph_max_bs
    if mixed_chunk:
        options["mixed_chunk"] = True
    if adp_timeout_iters:
        options["attention_dp_timeout_iters"] = adp_timeout_iters
    return launch.command(ctx.runtime.id, model_ref(ctx, ctx.engine), **options)


def sized_fraction(ctx: Any, engine: Any, gpu: Any, tp: int, pp: int) -> float | None:
    """The memory share a launch line states where the question gives none: the one `engine` sized the set's
    budget with where it works it out itself (Runtime.launch_fraction: SGLang's --mem-fraction-static from
    its reserve, for the card, the split and the launch settings), so the engine starts with the KV pool that
    was planned; None elsewhere (the question's, else the profile's default, as _options takes it). Read by
    plan's and deploy's lines alike."""
    if ctx.utilization is not None:
        return None
    return engine.launch_fraction(gpu, tp, pp, ctx.model)


def launch_of(ctx: Any, tp: int, pp: int, length: int, seqs: int, kv: str | None, slots: int = 0,
              nodes: int = 1, replicas: int = 1, one_node: bool = False, kv_offload_gb: float = 0.0,
              dp: int = 1, ep: int = 1, flash_attn: bool | None = None, fraction: float | None = None) -> Any:
    """The `Launch` (argv, environment, files, notes) behind `launch_command`'s text, for what is written
    from the same line (services/emit.py); None for a runtime without one. flash_attn: an explicit
    flash-attention setting (a stack entry's), else the runtime's default (on where the KV cache is
    quantized); `fraction`: as launch_command's."""
    from ..runtimes import launch

    if not ctx.runtime.serves:
        return None
    options = _options(ctx, tp, pp, length, seqs, kv, slots, nodes, replicas, one_node, dp, ep, fraction)
    if flash_attn is not None and not kv:
        options["flash_attn"] = flash_attn
    if kv_offload_gb:
        options["kv_offload_gb"] = kv_offload_gb
    return launch.build(ctx.runtime.id, model_ref(ctx, ctx.engine), **options)


def _options(ctx: Any, tp: int, pp: int, length: int, seqs: int, kv: str | None, slots: int,
             nodes: int, replicas: int = 1, one_node: bool = False, dp: int = 1,
             ep: int = 1, fraction: float | None = None) -> dict[str, Any]:
    """The runtime's launch options for a planned split, context, batch and KV cache (runtimes/launch.py
    build)."""
    rt = ctx.runtime
    util = ctx.utilization or fraction or (rt.gpu_memory_utilization if rt.gpu_memory_utilization < 1
                                           else None)
    tp, pp = launched_split(rt, tp, pp)
    return dict(quant=ctx.quant.name, tp=tp, pp=pp, nodes=nodes, max_model_len=length, max_num_seqs=seqs,
                kv_dtype=kv, gpu_memory_utilization=util,
                n_gpu_layers=None if rt.tensor_parallel or rt.fit_target_bytes else 999,
                parallel=slots or None, flash_attn=True if kv else None, replicas=replicas,
                one_node=one_node, engine=ctx.engine, speculative=_speculative(ctx), attention_dp=dp,
                expert_parallel=ep, **_batched(ctx))


def launched_split(rt: Any, tp: int, pp: int) -> tuple[int, int]:
    """The (tensor-parallel, pipeline) split a launch line states: 1 for a runtime that does not split so
    (llama.cpp and Ollama split layers by themselves), so a plan's sets of any size share their line."""
    return (tp if rt.tensor_parallel else 1), (pp if rt.pipeline_parallel else 1)


def _batched(ctx: Any) -> dict[str, int]:
    """The step budget where the question sets one (plan --prefill-chunk, a pinned deploy's
    --max-num-batched-tokens) on an engine whose launch line takes it; nothing otherwise (its default)."""
    chunk = getattr(ctx.inp, "prefill_chunk", None)
    return {"max_batched_tokens": int(chunk)} if chunk and ctx.runtime.paged_kv else {}


def _speculative(ctx: Any) -> Any:
    """The plan's --speculative as the launch line states it (None: off): the draft model named as the
    runtime loads a model (its adapter's `model_ref`), an EAGLE-3 head as a placeholder to fill in."""
    c = getattr(ctx, "speculation", None)
    if c is None:
        return None
    from ..runtimes.launch import EAGLE3_HEAD, SpecLaunch

    draft = None
    if c.draft_model is not None:
        d = c.draft_model
        draft = ctx.engine.model_ref(asked=None, model_id=d.id, hf=d.hf, tag=None, quant=ctx.quant.name)
    elif c.method == "eagle3":
        draft = EAGLE3_HEAD
    return SpecLaunch(c.method, c.tokens, draft, c.topk, c.draft_tokens)


def model_ref(ctx: Any, engine: Any = None) -> str:
    """How the runtime's launch line names the model (its adapter's `model_ref`)."""
    r, m = ctx.resolved, ctx.model
    # the Ollama tag the user named, else the library's own tag of this model at this quantization (the
    # catalog's [[model.ollama]] rows): `ollama pull` fetches library tags, not catalog ids or Hub ids
    tag = r.tag.tag if r.tag is not None else next(
        (t.tag for t in m.ollama if t.quant.upper() == ctx.quant.name.upper()), None)
    return (engine or ctx.engine).model_ref(asked=ctx.inp.model, model_id=m.id, hf=m.hf, tag=tag,
                                            quant=ctx.quant.name)

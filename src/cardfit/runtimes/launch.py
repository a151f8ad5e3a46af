"""What every launch command line shares: the `Launch` a serving runtime's adapter builds (its `launch()`,
in runtimes/<runtime>.py), the checked arguments it builds it from, and `build()`/`command()`, which find
the runtime's adapter through the catalog row: nothing here lists runtimes.

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

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

from ..catalog.records import record
from ..errors import CatalogError, InputError

if TYPE_CHECKING:
    from ..catalog.runtimes import RuntimeProfile

# 16-bit means "auto": the model's own dtype, the engines' default (no flag).
_SIXTEEN = {"auto", "f16", "fp16", "float16", "bf16", "bfloat16"}
_FLOAT = {"bf16", "fp16", "fp32", "f16", "f32", "auto"}


@record
class Launch:
    """A command line: the program and its arguments, the environment it needs, files it reads, and what to
    do on the other nodes."""

    runtime: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    files: tuple[tuple[str, str], ...] = ()  # (name, content) written before the command runs
    notes: tuple[str, ...] = ()
    program_words: int = 1  # words of argv that name the program (`vllm serve`: 2)
    # a multi-node line: the index in argv of this node's rank (0: the head); every other node runs the same
    # line with its own rank there (and HEAD_NODE_IP the head's address). -1: a line for one node
    node_rank: int = -1
    replicas: int = 1  # copies of the model this one command serves (vLLM --data-parallel-size)

    def shell(self) -> str:
        """One shell line (with the files it needs written first, as here-documents)."""
        import shlex  # only for a line that is printed (its import compiles a regular expression)

        parts = [f"cat > {name} <<'EOF'\n{body.rstrip()}\nEOF\n" for name, body in self.files]
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env)
        return "".join(parts) + (env + " " if env else "") + shlex.join(self.argv)

    def flags(self) -> list[str]:
        """The options given to the tool (the words that name the program are left out)."""
        return [a.split("=", 1)[0] for a in self.argv[self.program_words:] if a.startswith("-")]


@record(slots=True)
class LaunchArgs:
    """What a launch line states, checked (`build`): the split, the context, the batch, the KV cache in the
    engine's own name (None: 16-bit), the memory fraction, llama.cpp's layers and slots."""

    runtime: str
    quant: str | None
    tp: int
    pp: int
    nodes: int
    max_model_len: int
    max_num_seqs: int
    kv: str | None
    gpu_memory_utilization: float | None
    n_gpu_layers: int | None
    parallel: int | None
    flash_attn: bool | None
    cpu_moe_layers: int | None
    max_batched_tokens: int | None
    checkpoint_quantized: bool
    replicas: int = 1  # copies of the model the deployment runs
    data_parallel: int = 1  # of those, the ones this command starts (all of them where one node holds them)
    kv_offload_gb: float = 0.0  # a host-RAM KV tier per copy, GB (10^9 bytes; 0: none)
    # one replica's attention groups (data-parallel attention) and the ranks its experts are sharded over
    # (core/moe_parallel.py); 1, 1: tensor parallel over all `tp` ranks
    attention_dp: int = 1
    expert_parallel: int = 1
    disaggregation: str | None = None  # "prefill" | "decode": a worker of a disaggregated deployment

    def quant_flag(self, online: Mapping[str, str]) -> tuple[list[str], list[str]]:
        """(flags, notes) for the quantization: `--quantization X` where the engine quantizes a 16-bit
        checkpoint on load (`online`: cardfit's name → the engine's), else a note to use a quantized
        checkpoint."""
        q = _quant_key(self.quant)
        if q in _FLOAT or self.checkpoint_quantized:
            return [], []
        if online.get(q):
            return ["--quantization", online[q]], []
        return [], [f"the model named is its 16-bit checkpoint, which need not fit: serve a checkpoint "
                    f"quantized as {self.quant} in its place ({self.runtime} reads the format from the "
                    f"checkpoint's quantization_config)"]


def kv_name(runtime: str, names: Mapping[str, str], kv_dtype: str | None) -> str | None:
    """The engine's KV dtype name (`names`: cardfit's → the engine's), None for the 16-bit default."""
    d = (kv_dtype or "auto").lower()
    if d in _SIXTEEN:
        return None
    name = names.get(d)
    if name is None:
        raise InputError(f"{runtime} has no '{kv_dtype}' KV cache", field="kv_dtype",
                         hint="pick a KV cache type that runtime supports")
    return name


def _quant_key(quant: str | None) -> str:
    """A quantization id or display name ("fp8", "FP8 (E4M3)", "INT4 g128 (AWQ/GPTQ)") → its first word."""
    words = (quant or "bf16").lower().replace("_", " ").split()
    return words[0] if words else "bf16"


def _int(name: str, value: int | None, low: int = 1) -> int | None:
    return None if value is None else _whole(name, value, low)


def _whole(name: str, value: int, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InputError(f"{name} must be a whole number ≥ {low}", field=name)
    return value


HEAD_NODE_IP = "HEAD_NODE_IP"  # the head node's address in a multi-node line (ServeFlags.nodes), to fill in
# an EAGLE-3 head trained for the model, to fill in: the catalog names no head checkpoints
EAGLE3_HEAD = "EAGLE3_HEAD"


@record(slots=True)
class SpecLaunch:
    """Speculative decoding on a launch line: the method (draft, eagle3, mtp, ngram), the tokens drafted a
    step, and the draft model as the runtime loads it (the draft method; EAGLE3_HEAD for eagle3)."""

    method: str
    tokens: int
    draft: str | None = None
    # a tree of drafts (SGLang --speculative-eagle-topk, --speculative-num-draft-tokens); 1 and 0: a chain
    # of `tokens`, K + 1 verified
    topk: int = 1
    draft_tokens: int = 0


def with_speculative(engine: object, launch: Launch, spec: SpecLaunch) -> Launch:
    """The launch line with the adapter's speculative-decoding flags (its `speculative_flags`, for the
    methods its SPECULATIVE names); InputError where the runtime has no such method."""
    methods = getattr(engine, "SPECULATIVE", ())
    if spec.method not in methods:
        can = f"; it has {', '.join(methods)}" if methods else ""
        raise InputError(f"{launch.runtime} has no '{spec.method}' speculative decoding{can}",
                         field="speculative", hint="pick another --speculative or --runtime")
    flags = engine.speculative_flags(spec)  # type: ignore[attr-defined]
    notes = launch.notes
    if spec.method == "eagle3":
        notes = (*notes, f"{EAGLE3_HEAD}: an EAGLE-3 head trained for this model (e.g. "
                         "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B for Llama 3.1 8B Instruct)")
    return replace(launch, argv=(*launch.argv, *flags), notes=notes)


def nodes_flags(nodes: int, flag_nodes: str, flag_rank: str, addr_flag: str,
                addr: str) -> tuple[list[str], list[str]]:
    """(flags, notes) of a multi-node launch: the node count, this node's rank 0, the head's address."""
    if nodes <= 1:
        return [], []
    others = "the second node with " + flag_rank + " 1" if nodes == 2 else \
        f"each of the other {nodes - 1} nodes with {flag_rank} 1 to {nodes - 1}"
    return [flag_nodes, str(nodes), flag_rank, "0", addr_flag, addr], [
        f"run the same command on {others}, {HEAD_NODE_IP} being this node's address"]


@record
class ServeFlags:
    """The flag names of a vLLM-style server command line (vLLM, SGLang): one flag per planned setting."""

    tp: str
    pp: str
    max_model_len: str
    max_num_seqs: str
    memory_fraction: str
    kv_dtype: str
    batched_tokens: str
    nodes: tuple[str, str, str, str]  # node count, node rank, head address flag, head address
    data_parallel: str = ""  # copies of the model in one server, each on its own cards ("": none)
    # attention data parallel + expert parallel (LaunchArgs.attention_dp, expert_parallel): the switches that
    # make the server's data-parallel ranks one replica's attention groups (SGLang's --enable-dp-attention
    # beside --dp-size N; none on vLLM, whose DP ranks of a MoE model are attention groups by themselves), or
    # one flag that names the groups in their place (`attention_dp`: SGLang's --attn-dp-size N from 0.5.22,
    # runtimes/sglang.py); the switches that turn expert parallelism on (vLLM's --enable-expert-parallel:
    # without it the experts are tensor-parallel over all the DP x TP ranks) and the flag of its size ("": the
    # engine takes it from the others); and whether the tensor-parallel and sequence-cap flags count one
    # data-parallel rank's (vLLM: each rank is an engine of its own) or the whole server's (SGLang)
    dp_switches: tuple[str, ...] = ()
    attention_dp: str = ""
    ep_switches: tuple[str, ...] = ()
    ep_size: str = ""
    per_rank: bool = False
    # a prefill or decode worker of a disaggregated deployment: the flag and its value ("{role}": the role)
    pd_flag: str = ""
    pd_value: str = "{role}"
    pd_note: str = ""  # how requests reach the two pools (a router or proxy the engine ships)
    pd_extra: tuple[str, ...] = ()  # further flags a worker of either role takes (its KV transfer backend)


def serve_line(a: LaunchArgs, program: tuple[str, ...], model: list[str], f: ServeFlags,
               online: Mapping[str, str]) -> Launch:
    """`program model --tp … [--pp …] --max-len … --max-seqs … [fraction] [kv] [batched] [quant] [nodes]`."""
    dp = a.attention_dp  # above 1 with EP 1 only for an engine of ATTENTION_DP_ALONE (build)
    ranks = dp if f.per_rank else 1
    argv = [*program, *model, f.tp, str(a.tp // ranks)]
    if a.pp > 1:
        argv += [f.pp, str(a.pp)]
    argv += [f.max_model_len, str(a.max_model_len), f.max_num_seqs, str(max(a.max_num_seqs // ranks, 1))]
    if a.gpu_memory_utilization is not None:
        argv += [f.memory_fraction, f"{a.gpu_memory_utilization:g}"]
    if a.kv:
        argv += [f.kv_dtype, a.kv]
    if a.max_batched_tokens:
        argv += [f.batched_tokens, str(a.max_batched_tokens)]
    copies = a.data_parallel if f.data_parallel and dp == 1 else 1
    if copies > 1:
        argv += [f.data_parallel, str(copies)]
    if dp > 1:  # the server's data-parallel ranks are one replica's attention groups
        argv += [f.attention_dp, str(dp)] if f.attention_dp else [f.data_parallel, str(dp), *f.dp_switches]
        if a.expert_parallel > 1:
            argv += [*f.ep_switches, *([f.ep_size, str(a.expert_parallel)] if f.ep_size else [])]
    quant, notes = a.quant_flag(online)
    if a.disaggregation:
        argv += [f.pd_flag, f.pd_value.replace("{role}", a.disaggregation), *f.pd_extra]
        notes.append(f.pd_note.replace("{role}", a.disaggregation))
    nodes, more = nodes_flags(a.nodes, *f.nodes)
    rank = len(argv) + len(quant) + nodes.index(f.nodes[1]) + 1 if nodes else -1
    return Launch(a.runtime, tuple(argv + quant + nodes), notes=tuple(notes + more),
                  program_words=len(program), node_rank=rank, replicas=copies)


@runtime_checkable
class Serving(Protocol):
    """A serving runtime's adapter (runtimes/<runtime>.py, a `runtimes.base.Runtime` subclass): the adapter
    that owns a launch line has `launch()`; one without it (transformers, TGI, the rule of thumb) starts
    nothing cardfit plans. Named here, not on the base class, so that the base imports nothing of this
    module."""

    profile: RuntimeProfile
    KV_NAMES: ClassVar[Mapping[str, str]]

    def launch(self, model: str, a: LaunchArgs) -> Launch: ...


def _serving(x: object) -> bool:
    """Whether an adapter is a Serving one: it has launch() and a profile. The attribute test, not
    isinstance() against the runtime-checkable Protocol, which inspects every member on each call (about 9 ms
    of the page's every-card plan: one launch line per card)."""
    return callable(getattr(x, "launch", None)) and hasattr(x, "profile") and hasattr(x, "KV_NAMES")


def _served(runtime: str, engine: object | None = None) -> Serving:
    """The adapter of a catalog runtime that has a launch line (`engine`: the caller's, already built)."""
    if _serving(engine) and engine.profile.id == runtime and engine.profile.serves:  # type: ignore[attr-defined]
        return engine  # type: ignore[return-value]
    from ..catalog.runtimes import default_runtimes
    from . import adapter

    rts = default_runtimes()
    profile = rts.find(runtime)
    if profile is None or not profile.serves:
        served = ", ".join(r.id for r in rts if r.serves)
        raise InputError(f"cardfit has no launch command for {runtime}", field="runtime",
                         hint=f"launch commands exist for {served}")
    found = adapter(profile)
    if not _serving(found):
        raise CatalogError(f"runtime '{profile.id}': serves = true but its adapter "
                           f"(cardfit/runtimes/{profile.family}.py) has no launch()")
    return found  # type: ignore[return-value]


def build(runtime: str, model: str, *, quant: str | None = None, tp: int = 1, pp: int = 1, nodes: int = 1,
          max_model_len: int, max_num_seqs: int = 1, kv_dtype: str | None = None,
          gpu_memory_utilization: float | None = None, n_gpu_layers: int | None = None,
          parallel: int | None = None, flash_attn: bool | None = None, cpu_moe_layers: int | None = None,
          max_batched_tokens: int | None = None, checkpoint_quantized: bool = False,
          replicas: int = 1, one_node: bool = False, engine: object | None = None,
          kv_offload_gb: float = 0.0, speculative: SpecLaunch | None = None, attention_dp: int = 1,
          expert_parallel: int = 1, disaggregation: str | None = None, dynamo: bool = False,
          scheduler_recv_interval: int = 0, cuda_graph_max_bs: int = 0,
          attention_dp_timeout_iters: int = 0, mixed_chunk: bool = False) -> Launch:
    """The launch command for the catalog runtime `runtime` (one with `serves = true`: its adapter's
    `launch()`). `model` is what the runtime loads: a Hugging Face id or path (vLLM, SGLang, TensorRT-LLM),
    a .gguf path or a Hugging Face GGUF repo[:quant] (llama.cpp), an Ollama tag (Ollama). `engine`: the
    runtime's adapter where the caller has it (a plan's), else found through the catalog row. `replicas`:
    copies of the model the deployment runs; where `one_node` holds them all, an engine with data parallelism
    starts them in one server, else a note says to start that many servers behind a load balancer.
    `kv_offload_gb`: a host-RAM KV tier per copy (the adapter's `kv_offload_flags`).
    `attention_dp`, `expert_parallel`: a MoE replica of `tp` ranks as that many attention groups, its experts
    over `expert_parallel` ranks (core/moe_parallel.py), on an engine whose adapter places it.
    `dynamo`: the engine's worker as NVIDIA Dynamo starts it (`python3 -m dynamo.<engine>`, the adapter's
    `dynamo_launch`), behind Dynamo's frontend (DYNAMO_FRONTEND).

    `scheduler_recv_interval`: decode steps between reads of new requests, on an engine whose adapter names
    the flag (RECV_INTERVAL_FLAG: SGLang's --scheduler-recv-interval).

    `cuda_graph_max_bs`: the largest decode batch replayed as a CUDA graph, on an engine whose adapter sets it
    (`cuda_graph_cap`: SGLang's --cuda-graph-max-bs, TensorRT-LLM's cuda_graph_config).

    `attention_dp_timeout_iters`: attention-DP balancing with that timeout, on an engine whose adapter sets
    it (`adp_balance`: TensorRT-LLM's attention_dp_config).

    `mixed_chunk`: the running decodes ride in each prompt step, on an engine whose adapter names the flag
    (MIXED_CHUNK_FLAG: SGLang's --enable-mixed-chunk)."""
    engine = _served(runtime, engine)
    if not 0 <= kv_offload_gb <= 1e6:
        raise InputError("the host KV tier must be between 0 and 1,000,000 GB", field="kv_offload_gb")
    if not model or any(c in model for c in "\n\r\0"):
        raise InputError("the model to launch must be one line", field="model")
    if gpu_memory_utilization is not None and not 0 < gpu_memory_utilization <= 1:
        raise InputError("the memory fraction must be between 0 and 1", field="gpu_memory_utilization")
    args = LaunchArgs(runtime=runtime, quant=quant, tp=_whole("tp", tp), pp=_whole("pp", pp),
                      nodes=_whole("nodes", nodes), max_model_len=_whole("max_model_len", max_model_len),
                      max_num_seqs=_whole("max_num_seqs", max_num_seqs),
                      kv=kv_name(runtime, engine.KV_NAMES, kv_dtype),
                      gpu_memory_utilization=gpu_memory_utilization,
                      n_gpu_layers=_int("n_gpu_layers", n_gpu_layers, 0), parallel=_int("parallel", parallel),
                      flash_attn=flash_attn, cpu_moe_layers=_int("cpu_moe_layers", cpu_moe_layers, 0),
                      max_batched_tokens=_int("max_batched_tokens", max_batched_tokens),
                      checkpoint_quantized=checkpoint_quantized, replicas=_whole("replicas", replicas),
                      data_parallel=replicas if one_node else 1, kv_offload_gb=kv_offload_gb)
    if expert_parallel > 1:
        args = replace(args, **_expert_parallel(engine, runtime, tp, attention_dp, expert_parallel))
    elif attention_groups(engine, attention_dp, expert_parallel) > 1:
        # attention groups with the experts tensor-parallel (SGLang: --enable-dp-attention --dp-size N and
        # no --ep-size), as deploy times a pinned --attention-dp without --expert-parallel
        if tp % _whole("attention_dp", attention_dp):
            raise InputError(f"{attention_dp} attention groups do not divide the {tp} ranks",
                             field="attention_dp")
        check_all_ranks(engine, runtime, tp, attention_dp, "attention_dp")
        args = replace(args, attention_dp=attention_dp)
    if disaggregation is not None:
        if disaggregation not in ("prefill", "decode") or not getattr(engine, "PD_DISAGGREGATION", False):
            raise InputError(f"{runtime} has no '{disaggregation}' worker of a disaggregated deployment",
                             field="runtime", hint="use sglang or vllm, with prefill or decode")
        args = replace(args, disaggregation=disaggregation)
    if dynamo:
        worker = getattr(engine, "dynamo_launch", None)
        if worker is None:
            raise InputError(f"{runtime} has no NVIDIA Dynamo worker cardfit launches", field="runtime",
                             hint="Dynamo workers exist for sglang, vllm and trtllm")
        launch = worker(model, args)
    else:
        launch = engine.launch(model, args)
    if scheduler_recv_interval:
        flag = getattr(engine, "RECV_INTERVAL_FLAG", None)
        if not flag:
            raise InputError(f"{runtime} has no scheduler receive interval cardfit launches",
                             field="scheduler_recv_interval", hint="SGLang has one")
        launch = replace(launch, argv=(*launch.argv, flag, str(_whole("scheduler_recv_interval",
                                                                       scheduler_recv_interval))))
    if mixed_chunk:
        flag = getattr(engine, "MIXED_CHUNK_FLAG", None)
        if not flag:
            raise InputError(f"{runtime} has no mixed-chunk switch cardfit launches",
                             field="enable_mixed_chunk", hint="SGLang has one")
        launch = replace(launch, argv=(*launch.argv, flag))
    if cuda_graph_max_bs:
        cap = getattr(engine, "cuda_graph_cap", None)
        if cap is None:
            raise InputError(f"{runtime} has no CUDA-graph batch cap cardfit launches",
                             field="cuda_graph_max_bs", hint="SGLang and TensorRT-LLM have one")
        launch = cap(launch, _whole("cuda_graph_max_bs", cuda_graph_max_bs))
    if attention_dp_timeout_iters:
        balance = getattr(engine, "adp_balance", None)
        if balance is None or args.attention_dp <= 1:
            raise InputError(f"{runtime} has no attention-DP balancing cardfit launches here",
                             field="attention_dp_timeout_iters",
                             hint="TensorRT-LLM has one, with --attention-dp and --expert-parallel")
        launch = balance(launch, _whole("attention_dp_timeout_iters", attention_dp_timeout_iters))
    if kv_offload_gb:
        flags = getattr(engine, "kv_offload_flags", None)
        if flags is None:
            raise InputError(f"{runtime} has no host KV tier cardfit launches", field="kv_offload_gb",
                             hint="vLLM and SGLang have one")
        launch = replace(launch, argv=(*launch.argv, *flags(args)))
    if speculative is not None:
        launch = with_speculative(engine, launch, speculative)
    if replicas > launch.replicas:
        cards = tp * pp
        launch = replace(launch, notes=(*launch.notes, replicas_note(replicas, cards)))
    return launch


# NVIDIA Dynamo's frontend (OpenAI HTTP server and router, port 8000 by default) in front of its workers
# (ai-dynamo/dynamo examples/backends/vllm/launch/disagg.sh and examples/backends/sglang/launch/disagg.sh
# @8401366d / @8a150cc3: `python -m dynamo.frontend &`, then one worker per role)
DYNAMO_FRONTEND = ("python3", "-m", "dynamo.frontend")
DYNAMO_NOTE = ("a {role} worker under NVIDIA Dynamo: start `python3 -m dynamo.frontend` once in front of "
               "both pools; workers sharing a host take their own CUDA_VISIBLE_DEVICES")


def attention_groups(engine: object, dp: int, ep: int) -> int:
    """The attention data-parallel groups a replica asked for `dp` groups and `ep` expert-parallel ranks
    runs, as build() launches it: `dp` beside expert parallelism, or alone on an engine that runs attention
    DP with its experts (or dense MLP) tensor-parallel (ATTENTION_DP_ALONE: SGLang's --attn-dp-size without
    --ep-size, vLLM's --data-parallel-size of a MoE model without --enable-expert-parallel, TensorRT-LLM's
    enable_attention_dp without --ep_size); else 1 (the line states no attention groups)."""
    if dp <= 1:
        return 1
    return dp if ep > 1 or getattr(engine, "ATTENTION_DP_ALONE", False) else 1


def _expert_parallel(engine: object, runtime: str, tp: int, dp: int, ep: int) -> dict[str, int]:
    """The checked attention-DP + EP layout of a replica of `tp` ranks."""
    if not getattr(engine, "EXPERT_PARALLEL", False):
        raise InputError(f"{runtime}'s launch line has no expert parallelism", field="runtime",
                         hint="use vllm or sglang for an expert-parallel layout")
    if _whole("attention_dp", dp) > tp or tp % dp or _whole("expert_parallel", ep) != tp:
        raise InputError(f"an expert-parallel layout of {tp} ranks takes attention groups that divide them "
                         f"and experts over all of them (got {dp} groups, {ep} expert ranks)",
                         field="expert_parallel")
    check_all_ranks(engine, runtime, tp, dp, "expert_parallel")
    return {"attention_dp": dp, "expert_parallel": ep}


def check_all_ranks(engine: object, runtime: str, tp: int, groups: int, field: str) -> None:
    """An engine whose attention DP spans every rank or none (TensorRT-LLM's enable_attention_dp:
    ATTENTION_DP_ALL_RANKS) refuses another count of attention groups, one message wherever it is asked."""
    if getattr(engine, "ATTENTION_DP_ALL_RANKS", False) and groups != tp:
        raise InputError(f"{runtime} runs attention data-parallel over all {tp} ranks or none (got {groups} "
                         "groups)", field=field)


def replicas_note(replicas: int, cards: int) -> str:
    """How to start the replicas one command does not: that many servers, each on its own cards and port,
    behind a load balancer that spreads the requests."""
    each = "its own card" if cards == 1 else f"its own {cards} cards"
    return (f"{replicas} replicas: run this command {replicas} times, each on {each} (CUDA_VISIBLE_DEVICES) "
            "and its own port, behind a load balancer that spreads the requests over them")


def command(runtime: str, model: str, **options: object) -> str:
    """`build(...)` as shell text, its notes (what to serve, what to run on the other nodes) appended as
    shell comments so that a copied command carries them."""
    launch = build(runtime, model, **options)  # type: ignore[arg-type]
    return launch.shell() + "".join(f"  # {n}" for n in launch.notes)

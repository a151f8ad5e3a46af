"""A published serving measurement (data/validation/serving*.toml) predicted through deploy's own answer:
the record as the deploy question a user would ask (its model, --runtime NAME@RELEASE, quant, card set, load,
engine settings and benchmark run), pinned to its deployment and timed by services/pinned.py, the path
`cardfit deploy --tp N …` prints."""

from __future__ import annotations

from typing import Any

from ..catalog.gpus import Gpu
from ..catalog.runtimes import RuntimeProfile
from ..errors import CardfitError, CatalogError, InputError
from ..services import pinned
from ..services.deploy import DeployInput, Pinned, timed
from ..services.deploy import pinned_answer as answer
from .single import record_runtime, record_runtime_name  # one owner: the record's --runtime NAME@RELEASE

SERVING_METRICS = ("ttft_ms", "tpot_ms", "itl_ms", "output_tokens_per_s", "request_throughput",
                   "e2e_latency_ms", "e2e_per_token_ms")


# the metrics whose figure is read at the mean only: `figure` has no median or p90 of a request's end-to-end
# latency (e2e_s is TTFT plus the mean answer's gaps), so a record stating another statistic for one is
# rejected at load (check_statistic), not scored against the mean
MEAN_ONLY_METRICS = ("e2e_latency_ms", "e2e_per_token_ms")


def check_statistic(record: dict[str, Any], file: str) -> None:
    """A serving record of a metric cardfit reads at its mean only (MEAN_ONLY_METRICS) states the mean (or
    no statistic); CatalogError naming the file, the record and the statistic otherwise."""
    metric, stat = record.get("metric"), str(record.get("statistic") or "mean")
    if metric in MEAN_ONLY_METRICS and stat != "mean":
        raise CatalogError(f"record '{record.get('id', '?')}': metric '{metric}' is predicted at its mean "
                           f"only, not statistic '{stat}' (validation/serving.py MEAN_ONLY_METRICS)",
                           path=f"cardfit/data/validation/{file}")


def e2e_s(ttft_s: float, tpot_s: float, output_tokens: int) -> float:
    """A request's end-to-end latency read off the same answer: its first token, then the answer's other
    O - 1 tokens a TPOT apart. SGLang's bench_serving times it from sending the request to its last streamed
    token (python/sglang/bench_serving.py RequestFuncOutput.latency, "Mean E2E Latency (ms)"), which is
    TTFT plus the answer's inter-token gaps; at the mean answer length (a run of varied lengths is read at
    its means, as its TPOT is)."""
    return ttft_s + max(output_tokens - 1, 0) * tpot_s


def e2e_per_token_s(ttft_s: float, tpot_s: float, output_tokens: int) -> float:
    """A request's end-to-end latency over its answer's tokens (metric `e2e_per_token_ms`): what GuideLLM
    calls a request's time per output token, counted from sending the request, its first token included:
    vllm-project/guidellm src/guidellm/schemas/request_stats.py at v0.5.3 (f9f1e318)
    `time_per_output_token_ms` "Average time per output token in milliseconds including first token.",
    `1000 * (last_token - start) / output_tokens` (its inter-token latency is (last - first) / (O - 1)).
    A benchmark's prompt-heavy requests put most of their time before the first token, which this figure
    spreads over the answer; at the mean answer length (e2e_s)."""
    return e2e_s(ttft_s, tpot_s, output_tokens) / max(output_tokens, 1)


def record_input(r: dict[str, Any]) -> tuple[DeployInput, int, int]:
    """The deploy question a serving record answers, pinned to its deployment: its model, --runtime
    NAME@RELEASE, quant, card set (--tp, --pp), load and, for a finite run, the benchmark (--requests,
    --random-lengths, --length-distribution, --max-output-tokens), with the engine settings the record
    states (--max-num-seqs, --max-num-batched-tokens, --gpu-memory-utilization, --max-prefill-tokens,
    --attention-dp, --max-model-len, --scheduler-recv-interval, --cuda-graph-max-bs) and the drafter it ran
    (--speculative, --num-speculative-tokens, --acceptance); (input, tp, pp)."""
    st = r.get("settings") or {}
    cards = int(r.get("gpus") or 1)
    tp, pp = int(st.get("tp") or cards), int(st.get("pp") or 1)
    rate = r.get("request_rate")
    users = r.get("concurrency")
    if users is None and (rate in (None, "inf", float("inf"))):
        users = r.get("requests") or st.get("num_prompts")  # all prompts sent at once: that many in flight
    kw: dict[str, Any] = {"users": float(users)} if users is not None else {"requests_per_s": float(rate)}
    requests = int(r.get("requests") or 0)
    pools = disaggregated_pools(st)
    if r.get("load") in ("closed", "burst") and requests and users is not None:
        kw.update(requests=requests, random_lengths=not bool(r.get("fixed_lengths", True)),
                  length_distribution=st.get("length_distribution"),
                  max_output_tokens=int(st.get("max_output_tokens") or 0) or None)
    elif r.get("load") == "poisson" and requests and users is None and not pools:
        # a finite stage of arrivals (inference-perf: rate x duration requests, the stage drained), and how
        # its benchmark drew the lengths, which its p90 TTFT takes (services/deploy.py prompt_spread)
        kw.update(requests=requests, warm_requests=int(st.get("warm_requests") or 0) or None,
                  random_lengths=not bool(r.get("fixed_lengths", True)),
                  length_distribution=st.get("length_distribution"),
                  max_output_tokens=int(st.get("max_output_tokens") or 0) or None)
    cap = int(st.get("max_batch_size") or st.get("max_num_seqs") or 0)
    budget = int(st.get("max_num_batched_tokens") or st.get("max_num_tokens")
                 or st.get("chunked_prefill_size") or st.get("max_batch_prefill_tokens") or 0)
    # a TensorRT-LLM run through `trtllm-bench` took the limits that harness chose for its dataset
    if st.get("trtllm_bench_dataset") and not (cap and budget):
        cap, budget = trtllm_bench_limits(r, tp, pp)
    rt = record_runtime(r)
    dp = attention_dp(st, tp, rt)
    ep = expert_parallel(st, tp, rt)
    length = int(st.get("max_model_len") or st.get("max_total_tokens") or 0)
    kw.update(max_num_seqs=cap or None, max_num_batched_tokens=budget or None,
              gpu_memory_utilization=float(st.get("gpu_memory_utilization") or 0.0) or None,
              scheduler_recv_interval=int(st.get("scheduler_recv_interval") or 0) or None,
              cuda_graph_max_bs=int(st.get("cuda_graph_max_bs") or 0) or None,
              attention_dp_timeout_iters=int(st.get("attention_dp_timeout_iters") or 0) or None,
              max_prefill_tokens=int(st.get("max_prefill_tokens") or 0) or None,
              enable_mixed_chunk=bool(st.get("enable_mixed_chunk", False)),
              attention_dp=dp if dp > 1 else None, expert_parallel=ep if ep > 1 else None,
              max_model_len=length or None, **reuse_options(st), **speculative_options(st))
    inp = DeployInput(model=r["model"], runtime=record_runtime_name(r), quant=r.get("quant"), gpu=(r["gpu"],),
                      input_tokens=int(r["input_tokens"]), output_tokens=int(r["output_tokens"]),
                      kv_dtype=st.get("kv_cache_dtype") or checkpoint_kv_dtype(r), tp=tp, pp=pp, **kw,
                      **pools)
    return inp, tp, pp


# a disaggregated run's pools as the record states them, each the deploy option of the same name
POOL_SETTINGS = ("prefill_workers", "decode_workers", "prefill_tp", "decode_tp", "prefill_dp", "decode_dp",
                 "prefill_batch_size", "decode_batch_size")


def disaggregated_pools(settings: dict[str, Any]) -> dict[str, int]:
    """The pinned disaggregated deployment a record ran (deploy --prefill-workers X --decode-workers Y and
    each pool's --prefill-tp / --decode-tp, --prefill-dp / --decode-dp, --prefill-batch-size /
    --decode-batch-size, where it states them); {} for a run of one pool of replicas. A finite closed-loop
    run of two pools asks its benchmark (--requests at --users: core/disagg.py benchmark); open arrivals on
    two pools are timed in their steady state (deploy has no stage of arrivals on pools)."""
    if not (settings.get("prefill_workers") and settings.get("decode_workers")):
        return {}
    return {k: int(settings[k]) for k in POOL_SETTINGS if settings.get(k)}


# The record settings record_input passes on as a pinned deploy's engine options (--max-num-seqs,
# --max-num-batched-tokens, --gpu-memory-utilization, --max-prefill-tokens, --max-model-len,
# --scheduler-recv-interval, --cuda-graph-max-bs, --attention-dp-timeout-iters, --enable-mixed-chunk; a
# harness's dataset, whose limits it passes the same way): a user launching with them asks the same question.
_OPTION_SETTINGS = frozenset({"max_batch_size", "max_num_seqs", "max_num_batched_tokens", "max_num_tokens",
                              "chunked_prefill_size", "max_batch_prefill_tokens", "gpu_memory_utilization",
                              "max_prefill_tokens", "max_model_len", "max_total_tokens",
                              "trtllm_bench_dataset", "scheduler_recv_interval", "cuda_graph_max_bs",
                              "attention_dp_timeout_iters", "enable_mixed_chunk"})


def pinned_settings(settings: dict[str, Any], tp: int, rt: Any = None) -> frozenset[str]:
    """The keys of a record's settings that its pinned deploy question states as a user's option
    (record_input): the engine limits always; the attention-DP switches (`enable_dp_attention`,
    `enable_attention_dp`, `dp_size`) where they give more than one group (--attention-dp), and `moe_ep` where
    the experts run expert-parallel (--expert-parallel); a disaggregated run's pools (disaggregated_pools:
    --prefill-workers, --decode-workers and each pool's shape); SGLang's --enable-dp-attention where the
    record's release `rt` turns it off without --dp-size (a flag with no effect: the user asks plain tensor
    parallelism). A key not here is not a question deploy takes."""
    keys = set(_OPTION_SETTINGS) | (set(POOL_SETTINGS) if disaggregated_pools(settings) else set())
    if attention_dp(settings, tp, rt) > 1:
        keys |= {"enable_dp_attention", "enable_attention_dp", "dp_size"}
        if expert_parallel(settings, tp, rt) > 1:
            keys.add("moe_ep")
    elif settings.get("enable_dp_attention") and not settings.get("dp_size") and _needs_dp_size(rt):
        keys.add("enable_dp_attention")
    return frozenset(keys & set(settings))


def reuse_options(settings: dict[str, Any]) -> dict[str, Any]:
    """The reuse a record's workload states, as deploy's options: --shared-prefix-tokens, --prefix-groups,
    --turns, --sessions and --kv-offload-gb (core/reuse.py); none where the record states none."""
    out: dict[str, Any] = {}
    if settings.get("shared_prefix_tokens"):
        out["shared_prefix_tokens"] = int(settings["shared_prefix_tokens"])
    if settings.get("prefix_groups"):
        out["prefix_groups"] = int(settings["prefix_groups"])
    if settings.get("turns"):
        out["turns"] = int(settings["turns"])
    if settings.get("sessions"):
        out["sessions"] = float(settings["sessions"])
    if settings.get("kv_offload_gb"):
        out["kv_offload_gb"] = float(settings["kv_offload_gb"])
    return out


def speculative_options(settings: dict[str, Any]) -> dict[str, Any]:
    """The drafter a record's run states, as deploy's options: --speculative, --num-speculative-tokens,
    --acceptance and a tree's --speculative-topk and --speculative-draft-tokens (services/speculative.py);
    none where the record states no speculation."""
    if not settings.get("speculative"):
        return {}
    out: dict[str, Any] = {"speculative": str(settings["speculative"])}
    if settings.get("num_speculative_tokens"):
        out["num_speculative_tokens"] = int(settings["num_speculative_tokens"])
    if settings.get("acceptance"):
        out["acceptance"] = float(settings["acceptance"])
    for key in ("speculative_topk", "speculative_draft_tokens"):  # a tree of drafts (SGLang)
        if settings.get(key):
            out[key] = int(settings[key])
    return out


def checkpoint_kv_dtype(r: dict[str, Any]) -> str | None:
    """The KV cache type a record's engine took from its checkpoint where the record states none. NVIDIA NIM's
    TensorRT-LLM FP8 profiles are engines built from NVIDIA Model Optimizer FP8 exports; ModelOpt quantizes
    the KV cache to FP8 unless told otherwise (NVIDIA/TensorRT-Model-Optimizer examples/llm_ptq/hf_ptq.py
    @05ab9484, --kv_cache_qformat default "fp8", 'default to fp8 if not provided'); TensorRT-LLM runs a
    pre-quantized checkpoint with the KV cache type it carries (docs/source/features/quantization.md,
    'Running Pre-quantized Models'). The NIM 1.8.0 tables bear it out: Llama 3.1 8B at 20,000 + 2,000 tokens
    and 250 users keeps 42 sequences decoding on one H100 (1,337.7 tokens/s at 31.6 ms ITL), about 0.9 M
    tokens in flight, which a 16-bit cache (128 KiB a token) could not hold in 80 GB."""
    version = str((r.get("settings") or {}).get("version") or "")
    if tensorrt_engine(r) and version.startswith("NIM") and str(r.get("quant") or "").lower() == "fp8":
        return "fp8"
    return None


def predict_serving(r: dict[str, Any]) -> tuple[float, str]:
    """One serving record (data/validation/serving.toml) predicted by the answer `cardfit deploy` gives to
    the record's question pinned to its deployment (record_input; services/pinned.py): its card set, TP ×
    PP, one replica, for the load the record states: `load = "closed"` (`requests` requests, at most
    `concurrency` in flight, the next sent when one ends: `vllm bench serve --max-concurrency`, SGLang's
    bench_serving) or `load = "burst"` (`requests` prompts sent at once) as a benchmark run (--requests),
    else the steady state. Raises InputError (a CardfitError) for what cardfit cannot set up; the caller
    turns it into a skip. What the record's engine release changes is its profile's (--runtime NAME@RELEASE),
    never the record's."""
    metric = r.get("metric")
    if metric not in SERVING_METRICS:
        raise InputError(f"no serving prediction for metric '{metric}'", field="metric")
    inp, _, _ = record_input(r)
    return figure(answer(inp), inp, metric, str(r.get("statistic") or ""))


def benchmarked(r: dict[str, Any]) -> Pinned | None:
    """The pinned answer to a record's question where it is one replica's benchmark run (the scripts that take
    a run apart read its `bench` and `result`); None for two pools, a steady state, or a question cardfit
    cannot set up."""
    try:
        inp, _, _ = record_input(r)
        p = answer(inp)
    except CardfitError:
        return None
    return None if p.pools is not None or p.bench is None else p


def figure(p: Pinned, inp: DeployInput, metric: str, statistic: str = "") -> tuple[float, str]:
    """The figure a record reports (`metric`, its `statistic`: mean, median or p90) read off a pinned answer:
    the benchmark run's where the question asks for one, the steady state's otherwise."""
    if p.pools is not None and p.bench is None:  # two pools (--prefill-workers X --decode-workers Y) in
        # their steady state; their benchmark run (--requests at --users) is read below as one pool's
        d = p.pools.served
        value = {"ttft_ms": (d.ttft_s if statistic == "p90" else d.ttft_mean_s) * 1e3,
                 "tpot_ms": d.tpot_s * 1e3, "itl_ms": d.tpot_s * 1e3,
                 "output_tokens_per_s": d.output_tokens_per_s,
                 "request_throughput": d.output_tokens_per_s / inp.output_tokens,
                 "e2e_latency_ms": e2e_s(d.ttft_mean_s, d.tpot_s, inp.output_tokens) * 1e3,
                 "e2e_per_token_ms": e2e_per_token_s(d.ttft_mean_s, d.tpot_s, inp.output_tokens) * 1e3,
                 }[metric]
        return value, p.how
    b = p.bench
    if b is not None:
        median = statistic == "median"
        ttft = b.ttft_p90_s if statistic == "p90" and b.ttft_p90_s else \
            b.ttft_median_s if median else b.ttft_mean_s
        value = {"ttft_ms": ttft * 1e3,
                 "tpot_ms": b.tpot_mean_s * 1e3,
                 "itl_ms": (p.itl_median_s if median else b.tpot_mean_s) * 1e3,
                 "output_tokens_per_s": b.output_tokens_per_s, "request_throughput": b.requests_per_s,
                 "e2e_latency_ms": e2e_s(b.ttft_mean_s, b.tpot_mean_s, inp.output_tokens) * 1e3,
                 "e2e_per_token_ms": e2e_per_token_s(b.ttft_mean_s, b.tpot_mean_s, inp.output_tokens) * 1e3,
                 }[metric]
        return value, p.how
    res = p.result
    s = res.served
    value = {"ttft_ms": s.ttft_mean_s * 1e3, "tpot_ms": s.tpot_s * 1e3, "itl_ms": s.tpot_s * 1e3,
             "output_tokens_per_s": res.served_tokens_per_s,
             "request_throughput": res.served_tokens_per_s / inp.output_tokens,
             "e2e_latency_ms": e2e_s(s.ttft_mean_s, s.tpot_s, inp.output_tokens) * 1e3,
             "e2e_per_token_ms": e2e_per_token_s(s.ttft_mean_s, s.tpot_s, inp.output_tokens) * 1e3}[metric]
    if statistic == "p90" and metric == "ttft_ms":
        value = s.ttft_s * 1e3
    return value, p.how


def measured_gemm_share(r: dict[str, Any]) -> float:
    """The record's card's measured GEMM share at its weights' precision (services/pinned.py
    measured_gemm_share)."""
    return pinned.measured_gemm_share(record_gpu(r), str(r.get("quant") or ""))


def record_gpu(r: dict[str, Any]) -> Gpu | None:
    """The catalog card a validation record names (None for a card not in the catalog)."""
    from ..catalog.gpus import default_gpus

    return default_gpus().find(str(r.get("gpu") or ""))


def _stack(r: dict[str, Any]) -> str:
    """The software stack of a record's card (gpus stack: "cuda", "rocm", ...); "" for a card not in the
    catalog."""
    g = record_gpu(r)
    return g.stack if g is not None else ""


def synchronous_loop(r: dict[str, Any]) -> bool:
    """Whether a record's engine ran the scheduler's CPU work between its GPU steps although a release before
    it overlapped them: vLLM V1 before async scheduling became its default (data/releases.toml
    async_scheduling, whose `reads` charge decode_overhead_us_per_sequence_sync), unless the record states
    --async-scheduling."""
    rt = record_runtime(r)  # --async-scheduling stated: the release has it (services/speed.py)
    return rt is not None and rt.has("v1_engine") and not rt.has("async_scheduling")


def rocm_v0_kernels(r: dict[str, Any], rt: RuntimeProfile) -> dict[str, float]:
    """The constants a record's engine release takes from the kernels it ran (services/pinned.py
    older_kernels), for the record's question."""
    from ..catalog.models import default_models

    inp, tp, _ = record_input(r)
    m = default_models().find(str(r.get("model") or ""))
    return pinned.older_kernels(rt, record_gpu(r), m, str(inp.quant or ""),
                                inp.input_tokens + inp.output_tokens // 2, tp, not record_schedule(r, rt)[1],
                                inp.max_model_len or 0)


def tensorrt_engine(r: dict[str, Any]) -> bool:
    """Whether a TensorRT-LLM record ran a TensorRT engine (`trtllm-build`, the C++ runtime) rather than the
    PyTorch backend the catalog row describes (trtllm-serve's default from 1.0): NVIDIA NIM's TensorRT-LLM
    profiles are engines built ahead of time (NIM for LLMs docs, "Model Profiles"). An engine launches the
    whole network from C++ (no per-layer Python dispatch of a prompt step) and has no overlap scheduler."""
    rt = record_runtime(r)
    return rt is not None and not rt.has("pytorch_backend")


def tensorrt_engine_v0(r: dict[str, Any]) -> bool:
    """A TensorRT engine run by TensorRT-LLM's C++ executor (no overlap scheduler): a record of a release
    without data/releases.toml's overlap_executor (TensorRT-LLM before 1.0: the Azure AI-benchmarking-guide
    and NVIDIA's own 0.15.0 tables; NVIDIA NIM before 1.15, whose optimized TensorRT-LLM profiles are
    pre-compiled TensorRT engines). Its profile pays decode_overhead_us_per_sequence_v0 and serial GEMMs."""
    rt = record_runtime(r)
    return tensorrt_engine(r) and rt is not None and not rt.has("overlap_executor")


def trtllm_bench_limits(r: dict[str, Any], tp: int, pp: int) -> tuple[int, int]:
    """(max_batch_size, max_num_tokens) a `trtllm-bench` run chose itself (runtimes/trtllm_bench.py
    bench_engine_settings) for the dataset the record's settings name (`trtllm_bench_dataset`, "ISLxOSL":
    the one `trtllm-bench build --dataset` was given, which a harness may share between runs of other
    lengths), with the bytes a weight and a KV element take in tuning.py's BYTES_PER_ELEM (FP8 1, NVFP4 0.5,
    else 2) for the record's quant and KV cache type. A PyTorch-backend run (`trtllm-bench throughput
    --backend pytorch`, no engine) leaves chunked prefill off unless told (--enable_chunked_prefill, default
    False) and then raises the token budget to hold the longest prompt beside a full batch: max(budget,
    max ISL + max_batch_size) (NVIDIA/TensorRT-LLM tensorrt_llm/bench/benchmark/utils/general.py
    get_settings @0171265e: 'Chunked prefill is disabled ... Forcing max_num_tokens to' max_isl +
    max_batch_size). Only the Azure 0.15 engines state a dataset today; they keep the heuristic's budget."""
    from ..catalog.gpus import default_gpus
    from ..catalog.models import default_models
    from ..runtimes.trtllm_bench import bench_engine_settings

    st = r.get("settings") or {}
    m, gpu = default_models().find(r["model"]), default_gpus().find(r["gpu"])
    if m is None or gpu is None:
        raise InputError(f"no catalog model or card for '{r['model']}' on '{r['gpu']}'", field="settings")
    isl, osl = (float(x) for x in str(st["trtllm_bench_dataset"]).lower().split("x"))
    eight = {"fp8", "fp8_e4m3"}
    quant = str(r.get("quant")).lower()
    weight = 1.0 if quant in eight else 0.5 if quant == "nvfp4" else 2.0
    kv = 1.0 if str(st.get("kv_cache_dtype")).lower() in eight else 2.0
    bs, tokens = bench_engine_settings(m.params, m.layers, m.kv_heads, m.head_dim, gpu.usable_bytes, tp, pp,
                                       isl, osl, weight_bytes=weight, kv_bytes=kv)
    if not tensorrt_engine(r) and not st.get("enable_chunked_prefill"):
        tokens = max(tokens, int(r.get("input_tokens") or isl) + bs)
    return bs, tokens


def record_schedule(r: dict[str, Any], rt: RuntimeProfile) -> tuple[int, bool]:
    """(tokens a step may carry, whether waiting prompts run first) for the record's question
    (services/pinned.py schedule)."""
    from ..catalog.models import default_models

    inp = record_input(r)[0]
    return pinned.schedule(rt, default_models().find(r["model"]), inp.max_num_batched_tokens,
                           inp.max_model_len, inp.enable_mixed_chunk)


def prefill_batch_tokens(r: dict[str, Any], rt: RuntimeProfile, budget: int) -> int:
    """The prompt batch cap of the record's question (services/pinned.py prefill_batch_tokens)."""
    return pinned.prefill_batch_tokens(record_input(r)[0], rt, record_gpu(r), budget)


def attention_dp(settings: dict[str, Any], tp: int, rt: Any = None) -> int:
    """The data-parallel attention groups a record's engine ran (core/speed.py Machine.attention_dp): its
    stated dp_size, else all tp ranks where it states SGLang's --enable-dp-attention (up to 0.4.4 that flag
    set dp_size = tp_size; from 0.5.2 it is off without --dp-size: the record's release `rt`,
    data/releases.toml dp_attention_needs_dp_size) or TensorRT-LLM's enable_attention_dp; 1 otherwise."""
    if not (settings.get("enable_dp_attention") or settings.get("enable_attention_dp")):
        return 1
    if not settings.get("dp_size") and not settings.get("enable_attention_dp") and _needs_dp_size(rt):
        return 1
    return max(1, min(int(settings.get("dp_size") or tp), tp))


def _needs_dp_size(rt: Any) -> bool:
    return rt is not None and rt.has("dp_attention_needs_dp_size")


def expert_parallel(settings: dict[str, Any], tp: int, rt: Any = None) -> int:
    """The ranks a record's engine sharded the experts over where it ran them expert-parallel beside
    data-parallel attention (core/moe_parallel.py: moe_ep over all tp ranks, TensorRT-LLM's
    moe_expert_parallel_size with enable_attention_dp); 1 otherwise, the experts tensor-parallel as before."""
    ep = int(settings.get("moe_ep") or 1)
    return ep if ep == tp > 1 and attention_dp(settings, tp, rt) > 1 else 1


# the pinned deployment's timing, under the name the tests and scripts know
_timed = timed
_bench = pinned.bench_run
BENCH_RUNS = pinned.BENCH_RUNS
bench_key = pinned.bench_key

"""Runtime profiles (vLLM, llama.cpp, Ollama, transformers, SGLang, TGI): what each one allocates
besides weights and KV cache, and how it chunks prefill. Numbers live in data/runtimes.toml; how a family
of runtimes turns them into memory and speed lives in runtimes/ (one adapter per family)."""

from __future__ import annotations

from dataclasses import field, replace
from functools import cache
from typing import Any

from ..errors import CatalogError
from .loader import builtin, builtin_path
from .records import record
from .registry import Registry
from .schema import check_keys, keys_of


@record(slots=True)
class MemoryTier:
    """SGLang's defaults by card size (server_args.py _handle_gpu_memory_settings): up to this much memory
    (MiB, 0 = no bound) the chunked-prefill size and the largest CUDA-graph batch are these."""

    max_gpu_mem_mib: int
    chunked_prefill_size: int
    cuda_graph_max_bs_tp_lt4: int
    cuda_graph_max_bs_tp_ge4: int


@record(slots=True)
class RuntimeProfile:
    """A runtime at its current release (data/runtimes.toml), or at an older one (catalog/releases.py)."""

    id: str
    name: str
    context_bytes: int  # CUDA context + framework + allocator before any tensor
    family: str  # its adapter module in runtimes/: a family (vllm_like …) or a serving runtime's own (vllm …)
    gpu_memory_utilization: float = 0.0  # 0: the runtime does not pre-reserve a fraction of the card
    kv_block_tokens: int = 1  # KV allocation granularity (vLLM: 16-token blocks)
    ctx_pad: int = 1  # context rounded up to a multiple of this (llama.cpp pads n_ctx to 256)
    prefill_chunk: int = 0  # tokens prefilled at once by default (0: the whole prompt)
    max_num_seqs: int = 1  # sequences scheduled at once by default (vLLM 256): sizes sampler buffers
    # the CUDA-graph pool inside the memory budget (vLLM from 0.21; data/releases.toml graphs_in_budget sets
    # 0 for the releases before, which captured their graphs after sizing the KV cache, outside it)
    cuda_graph_bytes: int = 0
    non_torch_bytes: int = 0  # vLLM: non-PyTorch memory counted inside its budget (replaces context_bytes)
    # vLLM from 0.34 (data/releases.toml extensible_kv_cache): the KV cache sized from measured memory keeps
    # free its transient peak and a margin of max(floor, fraction x that peak); 0: sized by the utilization
    # share alone (runtimes/vllm_like.py budget_per_card, activation_bytes)
    kv_margin_fraction: float = 0.0
    kv_margin_floor_bytes: int = 0
    kv_margin_floor_bytes_rocm: int = 0
    # bytes live per (sequence x vocabulary entry) at the peak of the profile run's dummy sampler
    # (core/activations.py vllm_profile_bytes); 8 = fp32 logits + probabilities; _v0: vLLM's V0 engine
    sampler_bytes_per_logit: int = 8
    sampler_bytes_per_logit_v0: int = 0
    cuda_total_shortfall_bytes: int = 0  # nvidia-smi total minus what cudaMemGetInfo reports (vLLM's total)
    # llama.cpp --fit (default on from its release feature `fit`, data/releases.toml): the bytes it keeps free
    # on each device when it places the layers (--fit-target); 0: the runtime fills the card
    fit_target_bytes: int = 0
    tensor_parallel: bool = False  # shards every layer over the cards of a set (vLLM, SGLang, TGI)
    # splits layers over nodes with micro-batches in flight (vLLM, SGLang, TRT-LLM)
    pipeline_parallel: bool = False
    # KV cache in pages handed out as tokens arrive (caps sequences by tokens in flight)
    paged_kv: bool = False
    stacks: tuple[str, ...] = ()  # GPU software stacks it runs on (cuda, rocm, …); empty: any
    serves: bool = False  # a server `cardfit deploy` plans and launches (its adapter's launch())
    serves_rerank: bool = True  # its server scores query-document pairs (a reranking endpoint)
    # what its memory-share flag covers when several servers share a card (services/stack.py): "total" (vLLM
    # --gpu-memory-utilization: weights, workspace, non-torch memory, CUDA graphs and the KV cache), "static"
    # (SGLang --mem-fraction-static: weights and the KV pool only); "": no such flag
    memory_share: str = ""
    # one server process holds every model it is asked for and loads or evicts them on demand (Ollama's
    # scheduler): the models of a stack share it, one port, and may be swapped rather than resident
    shared_server: bool = False
    # the container image `cardfit deploy --emit` runs its launch line in (services/emit.py; "": none), the
    # words of the line the image's ENTRYPOINT already runs (the manifest passes the rest as its arguments;
    # empty: the whole line is the container's command), the arguments that make the server answer beyond
    # the container's loopback (empty: it already does), the port it answers on, and where these are written
    image: str = ""
    image_entrypoint: tuple[str, ...] = ()
    image_listen: tuple[str, ...] = ()
    port: int = 0
    image_source: str = ""
    weights_format: str = "checkpoint"  # what it loads: "gguf" files, or a "checkpoint" (safetensors)
    # the GGUF file its users download for a checkpoint whose own format is one of these, as (the checkpoint's
    # native_quant, the llama.cpp file type): planned when no --quant is given (services/resolve.py
    # Resolved.native_file); empty: the checkpoint's own format (Ollama pulls its own blobs)
    native_gguf: tuple[tuple[str, str], ...] = ()
    kv_cache_8bit: str = ""  # the 8-bit KV cache type deploy also tries ("": none)
    # the models it is planned for when --runtime is not given: "ollama" (a tag or the Ollama store), "gguf"
    # (a GGUF file or type), "checkpoint" (any other model), "training" (fine-tuning)
    default_for: tuple[str, ...] = ()
    error_band: str = ""  # the runtime whose validation error band it shares (same engine code); "": its own
    kv_free_fraction: float = 0.0  # TensorRT-LLM: KV pool = this × memory free after weights and workspace
    # admission reserves the KV blocks of a whole request (prompt + its maximum answer) before it starts
    # (TensorRT-LLM's GUARANTEED_NO_EVICT capacity scheduler); False: the tokens it holds (vLLM, SGLang)
    kv_reserve_whole: bool = False
    # admission keeps free, for each running request, this share of the answer tokens it has still to
    # decode (each request's remainder clipped at `kv_reserve_answer_clip`; SGLang's PrefillAdder at the
    # decayed new_token_ratio, data/runtimes.toml kv_reserve_answer_source), and this factor of the share
    # where attention is data parallel (`kv_reserve_dp_attention_factor`); 0: none (vLLM admits by the blocks
    # of a prompt's first chunk alone)
    kv_reserve_answer_share: float = 0.0
    kv_reserve_answer_clip: int = 0
    kv_reserve_dp_attention_factor: float = 1.0
    # vLLM's MXFP4 MoE kernel, which pads the expert matrices (runtimes/vllm_like.py MXFP4_PAD): "" = the one
    # the current engine picks by card; validation sets an older engine's ("marlin" before triton_kernels)
    mxfp4_backend: str = ""
    # the intermediate-dimension multiple of its SM100 MXFP4 kernels where it differs from MXFP4_PAD's
    # (0: MXFP4_PAD's)
    mxfp4_sm100_inter_pad: int = 0
    embeddings_on_host: bool = False  # llama.cpp keeps token_embd in system RAM (a row lookup)
    default_context: int = 0  # 0: the model's own maximum
    context_tiers: tuple[tuple[float, int], ...] = ()  # Ollama: (min total VRAM GiB, default context)
    default_kv_dtype: str = "f16"
    window_cache: bool = True  # sliding-window layers keep only the window
    # SGLang's hybrid SWA pool: sliding-window tokens held per full-layer token (--swa-full-tokens-ratio);
    # 0: none (runtimes/sglang.py says which models run it from which release)
    swa_full_tokens_ratio: float = 0.0
    flash_attn: bool = True  # flash attention on by default
    # where flash_attn is off, the models (config.json model_type) it is on for by default (Ollama 0.12.4 on)
    flash_attn_models: tuple[str, ...] = ()
    # models (config.json model_type) a shared server loads with one slot whatever its setting (Ollama)
    single_slot_models: tuple[str, ...] = ()
    offload: bool = False  # can place whole layers in system RAM
    # a host-RAM tier behind the GPU's prefix cache that its launch line sets (--kv-offload-gb: vLLM's native
    # CPU offload, SGLang HiCache); runtimes/<runtime>.py launch() names its flags
    host_kv_cache: bool = False
    default_parallel: int = 1
    decode_efficiency: float = 0.0  # realistic fraction of the bandwidth ceiling (calibrated; see validation)
    prefill_efficiency: float = 0.0  # realistic fraction of dense tensor TFLOPS
    # the same for integer-block weights (llama.cpp MMQ); 0: as above
    prefill_efficiency_quantized: float = 0.0
    # the same on Apple GPUs (Metal kernels on the shader ALUs, no tensor cores); 0: as above
    prefill_efficiency_metal: float = 0.0
    # dense TFLOPS the runtime's prefill reaches per watt of board power on cards whose power limit is small
    # for their peak (core/speed.py power_capped); 0: no cap
    prefill_tflops_per_watt: float = 0.0
    fp16_accumulate: bool = False  # GEMMs accumulate in FP16 (llama.cpp): GeForce cards run them at full rate
    decode_overhead_us_per_layer: float = 0.0  # fixed time per layer per decode step (launches, syncs)
    # per sequence per step under concurrency (scheduler, sampler)
    decode_overhead_us_per_sequence: float = 0.0
    # the same for engine generations whose CPU work ran serially with the GPU step (vLLM before 0.6)
    decode_overhead_us_per_sequence_v0: float = 0.0
    # (data/releases.toml overlap_scheduler reads it for the releases before the scheduler's CPU work
    # overlapped the GPU step). Per sequence per step of the vLLM V1 releases before async scheduling (0.8 to
    # 0.14, data/releases.toml async_scheduling): the engine loop's scheduling, input preparation and output
    # handling between two GPU steps (fitted)
    decode_overhead_us_per_sequence_sync: float = 0.0
    # the per-layer time of engine builds before CUDA graphs and the mid-2024 kernel work (llama.cpp < b3000)
    decode_overhead_us_per_layer_v0: float = 0.0
    # bytes per SM per clock cycle the weight kernels of those builds stream on an HBM card: their bytes in
    # flight per SM are fixed, so the rate is SMs x clock x this, not a share of the bus (0, or a card without
    # sm_count/boost_mhz: decode_efficiency)
    decode_bytes_per_sm_cycle_hbm_v0: float = 0.0
    # the per-layer time of those builds on Apple's Metal backend (0: decode_overhead_us_per_layer_v0)
    decode_overhead_us_per_layer_metal_v0: float = 0.0
    # the largest batch a decode step replays as a CUDA graph (0: every batch): larger batches launch every
    # kernel and pay the per-layer time of a build without graphs (decode_overhead_us_per_layer_v0); a
    # runtime with `tier` rows (SGLang) takes its cap by card size and TP from them (graph_max_batch())
    graph_max_batch: int = 0
    # the GPU stacks on which graph_max_batch holds (TGI replays HIP graphs on ROCm as CUDA graphs on CUDA);
    # elsewhere no step is taken for a graph replay or an eager launch by batch size
    graph_stacks: tuple[str, ...] = ("cuda",)
    # A step that carries prompt tokens runs without CUDA graphs past this many tokens (0: always): vLLM V1
    # replays piecewise graphs up to its largest capture size; SGLang and TensorRT-LLM capture decode-only
    # batches. Such a step pays this CPU time per layer for launching its kernels one by one (core/serving.py
    # eager_s); 0 = none
    prefill_graph_tokens: int = 0
    # the same on a datacenter Blackwell card (SM100 family: the HBM Blackwell parts), where vLLM's largest
    # default capture size is larger (0.28+: data/releases.toml graphs_1024_sm100); 0 = prefill_graph_tokens
    prefill_graph_tokens_sm100: int = 0
    prefill_overhead_us_per_layer: float = 0.0
    # (a release whose prompt steps replay no graph at all, vLLM V0, sets prefill_graph_tokens = 0:
    # data/releases.toml v1_engine)
    # share of the card's measured GEMM rate (gpus gemm_*_tflops) the engine's GEMMs reach in the steps of a
    # served load on a ROCm card (fitted: runtimes.toml); 0 = all of it
    rocm_gemm_share: float = 0.0
    # Decode attention on ROCm: the engine's own paged-attention kernel reads each KV head once for the query
    # heads it serves (the GQA group) up to this many tokens of context; past it the engine falls back to the
    # generic paged_attention v1/v2 kernel, one thread block per query head, which reads the cache once per
    # query head (core/speed.py Machine.kv_read_copies). 0 = no such fallback
    rocm_paged_attention_max_context: int = 0
    # (vLLM: V0 only, data/releases.toml v1_engine)
    # A tensor-parallel all-reduce of up to 8 MiB on an MI300-series card (CDNA3/CDNA4, fully connected
    # over Infinity Fabric) runs in the engine's own custom all-reduce kernel, not in RCCL (core/speed.py
    # ROCM_CUSTOM_ALLREDUCE_US); false: RCCL at every size (the card's measured bus bandwidth, or a fixed
    # latency per call). vLLM: from the release of data/releases.toml rocm_custom_allreduce
    rocm_custom_allreduce: bool = False
    # V0 engines replay a decode graph only while the batch's longest sequence is at most this many tokens
    # (vLLM max_seq_len_to_capture); a longer one runs the decode step eagerly (0: no such limit); vLLM V0
    # only (data/releases.toml v1_engine)
    decode_graph_max_context: int = 0
    # the per-layer time of such an eager decode step (fitted: runtimes.toml); 0: decode_overhead_us_per_layer
    decode_overhead_us_per_layer_eager_v0: float = 0.0
    # the per-layer time an eager decode step pays at the profile's release (data/releases.toml reads it from
    # decode_overhead_us_per_layer_eager_v0 for vLLM V0); 0: no such step
    decode_overhead_us_per_layer_eager: float = 0.0
    # the attention rate (TFLOPS per card) of the V0 engine's Triton prefix-prefill kernel on ROCm, which runs
    # the attention of every prompt chunk when chunked prefill is on (fitted: runtimes.toml); 0 = none
    prefix_prefill_tflops_rocm_v0: float = 0.0
    # records dated before this ("YYYY-MM") ran their prompts' attention in the engine's Triton prefill kernel
    # (SGLang: every model on ROCm, at prefix_prefill_tflops_rocm_v0; MLA models on Hopper, at
    # triton_mla_prefill_tflops_hopper): validation/serving.py rocm_v0_kernels; "" = none
    # that kernel's attention rate per card for an MLA model's prompt (128 heads, 192-dim Q·K) on Hopper
    triton_mla_prefill_tflops_hopper: float = 0.0
    # set only while a record of that engine is timed (validation/serving.py predict_serving): the attention
    # rate
    # of its prompt tokens, and the times each decoding sequence's cache is read (0: the card's own, once)
    prompt_attention_tflops: float = 0.0
    kv_read_copies: float = 0.0
    # what the engine changes when it drafts (--speculative; services/plan.py build_context applies them, one
    # place for plan, speed, deploy and validation: catalog/releases.py drafting): the sequences it schedules
    # when --max-num-seqs is not given (0: its usual default) and the release features (data/releases.toml)
    # it runs without (SGLang: 48 and the overlap scheduler, python/sglang/srt/server_args.py)
    speculative_max_num_seqs: int = 0
    speculative_lacks: tuple[str, ...] = ()
    # the host's time per speculative cycle that runs between the cycle's GPU phases, not overlapped with
    # them (µs; SGLang's spec-v1 EAGLE worker: core/speculative.py Speculation.host_s); 0: none modelled
    speculative_cycle_host_us: float = 0.0
    # the --speculative methods whose cycle runs on the engine's overlapped path at top-k 1 (SGLang's spec v2:
    # the overlap scheduler kept, no exposed host time; data/releases.toml spec_overlap empties it before)
    speculative_overlap_methods: tuple[str, ...] = ()
    # steps the scheduler plans ahead of the GPU: a request that arrives while step n runs can join step
    # n + 1 + this at the earliest (an overlap scheduler launches step n + 1 before it looks for new requests)
    schedule_ahead_steps: int = 0
    # steps after the one that computes a token before its response leaves the engine (core/serving.py
    # Replica.response_lag): the first token of a request, and so each later one, reaches the client that
    # many decode steps late, a lone request included
    response_lag_steps: int = 0
    # a burst's first request is prefilled alone (core/serving.py Replica.burst_first_alone)
    burst_first_alone: bool = False
    # ALU operations per weight the decode kernels spend unpacking low-bit types (core/speed.py low_bit)
    dequant_ops_per_weight: float = 0.0
    # share of the bandwidth routed-expert kernels stream (0 = decode_efficiency; fitted: runtimes.toml)
    expert_efficiency: float = 0.0
    # fixed time per MoE layer per decode step on top of decode_overhead_us_per_layer (router GEMM, top-k,
    # token permute / unpermute, the grouped-GEMM launches; fitted: runtimes.toml)
    moe_overhead_us_per_layer: float = 0.0
    # share of the prompt GEMM rate the routed experts' GEMMs reach when they hold MXFP4 weights on a card
    # without FP4 tensor cores (BF16 activations, the weights unpacked inside the MoE kernel:
    # services/served.py machine); 0 = the dense GEMMs' rate (fitted: runtimes.toml)
    mxfp4_expert_prefill_share: float = 0.0
    # share of the bandwidth those MXFP4 experts stream at in a decode step on a ROCm card (CDNA3: no FP4
    # matrix cores, the weights unpacked in the MoE kernel's vector loop: services/served.py machine); 0 =
    # expert_efficiency (fitted: runtimes.toml)
    mxfp4_expert_efficiency_rocm: float = 0.0
    # per-layer time of a decode step of an MLA + MoE model (DeepSeek-V2/V3) on the engines before mid-2025
    # (validation/single.py mla_v0); 0 = decode_overhead_us_per_layer (fitted: runtimes.toml)
    decode_overhead_us_per_layer_mla_v0: float = 0.0
    # share of dense tensor TFLOPS the prefill of an MLA + MoE model reaches on those engines
    # (validation/single.py mla_v0); 0 = prefill_efficiency (fitted: runtimes.toml)
    prefill_efficiency_mla_v0: float = 0.0
    # Scheduling of waiting prompts against running decodes: prefill-first engines run a prompt step before
    # any decode while prompts wait (a burst of prompts stalls every answer until all are prefilled);
    # decode-first engines schedule the running decodes first and fill the rest of the step's token budget
    # with prompt chunks
    prefill_first: bool = False
    # When the paged KV pool runs out: "recompute" (vLLM: prompts are admitted by the blocks of their first
    # chunk, with nothing kept for the answers to come, and a step that finds no free block preempts the
    # newest running request, whose tokens are computed again when it is admitted back; core/serving.py Pool);
    # "" (the sequences in flight are capped by the tokens the pool holds at the mean in flight)
    kv_preemption: str = ""
    # freed KV blocks stay cached by default (vLLM V1: prefix caching), so a preempted request computes again
    # only the blocks handed out meanwhile; data/releases.toml v1_engine turns it off for the releases before
    prefix_caching: bool = False
    # decode-step GEMMs take their bytes' time plus their FLOPs' time (core/speed.py Machine.serial_gemm): a
    # TensorRT engine run by TensorRT-LLM's C++ executor (data/releases.toml trtllm overlap_executor)
    serial_gemm: bool = False
    # A closed-loop benchmark of equal prompt and answer lengths stays in lockstep rounds on this engine (a
    # decode-first one; prefill-first engines always do): the requests whose first tokens came out of one
    # step end in one step, their replacements arrive together and are scheduled together again, so every
    # round queues its prompts as the first did (core/serving.py benchmark). False: the arrivals spread out
    # after the first round and later requests meet the steady state
    lockstep_rounds: bool = False
    lockstep_source: str = ""
    scheduler_source: str = ""
    ram_efficiency: float = 0.0  # fraction of system RAM bandwidth reached by offloaded layers / experts
    kv_dtype_options: tuple[str, ...] = ()  # the cache types the runtime accepts (empty: any)
    unified_memory: bool = False  # set by on_card() for Apple silicon, never read from the data file
    aliases: tuple[str, ...] = ()
    # the engine release the profile is at (catalog/releases.py profile_at; None: the current one, as `has`
    # answers for it) and the fitted constants it reads in place of a field at that release
    # (field, ((stack or "*", constant), ...)): core/constants.py fitted
    release: Any = None
    reads: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    pinned: frozenset[str] = frozenset()  # fields its release sets outright (data/releases.toml `without`)
    # Defaults that depend on the card (vLLM V1 `vllm serve`, EngineArgs.get_batch_defaults): a "big" card has
    # at least big_card_min_gib and a name without big_card_excludes; 0 = not applicable
    big_card_min_gib: float = 0.0
    big_card_excludes: str = ""
    prefill_chunk_big_card_serve: int = 0
    prefill_chunk_other_serve: int = 0
    prefill_chunk_big_card_llm_class: int = 0
    prefill_chunk_other_llm_class: int = 0
    max_num_seqs_big_card: int = 0
    max_num_seqs_other: int = 0
    # a card of at least huge_card_min_gib (no name excluded) takes prefill_chunk_huge_card_serve for
    # `vllm serve` (vLLM 0.28+: data/releases.toml batch_16k_above_160gib); 0 = no such tier
    huge_card_min_gib: float = 0.0
    prefill_chunk_huge_card_serve: int = 0
    v0_chunked_prefill_above: int = 0  # vLLM V0 API server: chunked prefill above this max_model_len
    # NCCL NVLink SHARP (NVLS) buffers on NVSwitch Hopper/Blackwell sets of more than 2 ranks: bytes per rank
    # of the group, per communicator (runtimes/vllm_like.py nvls_bytes), and the NCCL communicators vLLM V0
    # opened over the tensor-parallel group before its memory baseline
    nvls_bytes_per_rank: int = 0
    nccl_communicators_v0: int = 0
    n_batch: int = 0  # llama.cpp logical batch
    n_ubatch: int = 0  # llama.cpp physical batch (the compute buffer's graph)
    gpu_overhead_bytes: int = 0  # Ollama: OLLAMA_GPU_OVERHEAD default
    num_parallel_default: int = 0  # Ollama: OLLAMA_NUM_PARALLEL default
    tgi_wiggle_room: float = 0.0  # TGI: share of free memory its KV blocks take after the warmup
    mem_fraction_static_legacy_tp1: float = 0.0  # SGLang: the fixed TP1 fraction of older releases
    tier: tuple[MemoryTier, ...] = ()
    # Text for the reader of data/runtimes.toml (sources and notes; cardfit does not compute with them)
    source: str = ""
    notes: str = ""
    context_source: str = ""
    gpu_memory_utilization_source: str = ""
    gpu_memory_utilization_note: str = ""
    kv_block_source: str = ""
    prefill_chunk_source: str = ""
    prefill_chunk_note: str = ""
    big_card_rule: str = ""
    non_torch_source: str = ""
    cuda_total_shortfall_source: str = ""
    cuda_graph_source: str = ""
    cuda_graph_note: str = ""
    cuda_graph_examples: tuple[str, ...] = ()
    activation_note: str = ""
    compute_buffer_note: str = ""
    compute_buffer_examples: tuple[dict[str, Any], ...] = field(default=(), compare=False)
    n_ctx_note: str = ""
    default_context_note: str = ""
    default_context_source: str = ""
    num_parallel_note: str = ""
    kv_cache_type_note: str = ""
    processor_rule: str = ""
    kv_free_fraction_source: str = ""
    kv_reserve_source: str = ""
    kv_reserve_answer_source: str = ""
    memory_note: str = ""
    native_gguf_source: str = ""

    @property
    def named(self) -> str:
        """How --runtime names the profile: "vllm@0.6.3" at a release asked for, else its id."""
        return f"{self.id}@{self.release.name}" if self.release is not None and self.release.name else self.id

    def has(self, feature: str) -> bool:
        """Whether the profile's release has a feature of data/releases.toml. A profile that names no release
        (a registry row, `--runtime vllm`) is the current release's: it answers as that release does, so a
        feature the table lists ahead of `current` is one it lacks. The one way to ask."""
        rel = self.release if self.release is not None else _current_release(self.id)
        return rel.has(feature)


@cache
def _current_release(runtime_id: str) -> Any:
    """The current release of a runtime (catalog/releases.py release: its features by `current`'s own
    number), once per runtime: RuntimeProfile.has reads it for a profile that names no release, in hot
    paths."""
    from .releases import release  # (imported on first use: a plan that asks no feature reads no table)

    return release(runtime_id)


KEYS = keys_of(RuntimeProfile)
TIER_KEYS = keys_of(MemoryTier) - {"override"}
_TUPLES = ("aliases", "kv_dtype_options", "stacks", "default_for", "cuda_graph_examples",
           "compute_buffer_examples", "graph_stacks", "image_entrypoint", "image_listen", "flash_attn_models",
           "single_slot_models", "speculative_lacks", "speculative_overlap_methods")


def _from_row(row: dict[str, Any]) -> RuntimeProfile:
    path = builtin_path("runtimes.toml")
    check_keys(row, KEYS - {"override"}, table="runtime", path=path)
    known = {k: (tuple(v) if k in _TUPLES else v) for k, v in row.items()}
    known["context_tiers"] = tuple((float(a), int(b)) for a, b in row.get("context_tiers", ()))
    known["native_gguf"] = tuple((str(a), str(b)) for a, b in row.get("native_gguf", ()))
    try:
        for t in row.get("tier", ()):
            check_keys(t, TIER_KEYS, table=f"runtime '{row.get('id', '?')}' tier", path=path)
        known["tier"] = tuple(MemoryTier(**t) for t in row.get("tier", ()))
        return RuntimeProfile(**known)
    except TypeError as e:
        raise CatalogError(f"runtime '{row.get('id', '?')}': {e}", path=path) from e


def graph_max_batch(rt: RuntimeProfile, memory_gb: float, tp: int) -> int:
    """The largest decode batch the runtime replays as a CUDA graph on a card of `memory_gb` at tensor
    parallel `tp` (0: every batch): SGLang's cuda_graph_max_bs by card size (its `tier` rows:
    server_args.py _handle_gpu_memory_settings, "if self.tp_size < 4 … 256 else 512" on an 80 GB card; a
    larger batch runs eagerly, cuda_graph_runner.py can_run "cuda_graph_bs <= self.max_bs"), else the
    profile's one cap (graph_max_batch: TGI's --cuda-graphs, llama.cpp's single-token graphs)."""
    if not rt.tier or memory_gb <= 0:
        return rt.graph_max_batch
    # the card's nominal size; SGLang reads the device's total memory in MiB
    t = tier_of(rt, memory_gb * 1024)
    if t is None:
        return rt.graph_max_batch
    return t.cuda_graph_max_bs_tp_lt4 if tp < 4 else t.cuda_graph_max_bs_tp_ge4


# SGLang before 0.5.20 (data/releases.toml sglang tier_35gib_4k_48): the card row from 20 to 35 GiB (A10,
# RTX 4090, RTX 5090) took chunked_prefill_size 2048 and decode graphs up to batch 24 below TP 4, 80 from it
# (python/sglang/srt/server_args.py _handle_gpu_memory_settings of the PyPI wheels sglang 0.5.9 and 0.5.19:
# "elif gpu_mem < 35 * 1024: # A10, 4090, 5090 ... chunked_prefill_size = 2048 ... cuda_graph_max_bs = 24 ...
# 80"); from 0.5.20 the runtimes.toml row (4096, 48, 160: arg_groups/memory_hook.py, wheels 0.5.20-0.5.23)
TIER_35GIB_BEFORE_0520 = MemoryTier(35 * 1024, 2048, 24, 80)
TIER_35GIB_FEATURE = "tier_35gib_4k_48"


def tier_of(rt: RuntimeProfile, mib: float) -> MemoryTier | None:
    """The runtime's [[runtime.tier]] row of a card of `mib` MiB at the profile's release (SGLang's defaults
    by card size: the runtimes.toml rows, the 20-35 GiB one TIER_35GIB_BEFORE_0520 at a release of the
    table without TIER_35GIB_FEATURE)."""
    t = next((t for t in rt.tier if not t.max_gpu_mem_mib or mib < t.max_gpu_mem_mib), None)
    if (t is not None and t.max_gpu_mem_mib == TIER_35GIB_BEFORE_0520.max_gpu_mem_mib
            and not rt.has(TIER_35GIB_FEATURE)):
        return TIER_35GIB_BEFORE_0520
    return t


def runs_on(rt: RuntimeProfile, stack: str) -> bool:
    return not rt.stacks or stack in rt.stacks


def on_card(rt: RuntimeProfile, unified_memory: bool) -> RuntimeProfile:
    """The profile as it runs on a card. On Apple's unified memory (Metal) there is no CUDA context or CUDA
    graph pool inside the GPU's wired working set: llama.cpp's Metal backend logs every buffer it allocates
    against recommendedMaxWorkingSetSize ('allocated buffer ... (23984.91 / 21845.34)',
    https://github.com/ollama/ollama/issues/434), and those buffers are the weights, the KV cache and the
    compute buffer. The token embedding is counted too: the CPU's share of that one RAM is not spare room."""
    if not unified_memory:
        return rt
    return replace(rt, context_bytes=0, non_torch_bytes=0, cuda_graph_bytes=0, cuda_total_shortfall_bytes=0,
                   embeddings_on_host=False, unified_memory=True)


class Runtimes(Registry[RuntimeProfile]):
    """The runtimes by name; a name may carry a release, "vllm@0.10.1" (catalog/releases.py runtime_named):
    the profile at that release."""

    def find(self, name: str) -> RuntimeProfile | None:
        if "@" not in str(name):
            return super().find(name)
        from .releases import runtime_named

        return runtime_named(name, super().find)

    def get(self, name: str) -> RuntimeProfile:
        rec = self.find(name)
        return rec if rec is not None else super().get(str(name).partition("@")[0])


@cache
def default_runtimes() -> Runtimes:
    rows = builtin("runtimes.toml")["runtime"]
    listing = "one of " + ", ".join(str(r["id"]) for r in rows)  # an unknown name's hint
    return Runtimes("runtime", listing, [_from_row(r) for r in rows], lambda r: [r.id, r.name, *r.aliases])


def default_runtime(kind: str) -> RuntimeProfile:
    """The runtime a model of this kind is planned for when none is named (the row whose `default_for`
    lists it): "ollama", "gguf", "checkpoint" or "training"."""
    found = next((r for r in default_runtimes() if kind in r.default_for), None)
    if found is None:
        raise CatalogError(f"no runtime in runtimes.toml has '{kind}' in default_for")
    return found


def servers(weights_format: str | None = None) -> list[RuntimeProfile]:
    """The runtimes `cardfit deploy` plans (`serves = true`), in catalog order; only those loading
    `weights_format` when given."""
    return [r for r in default_runtimes() if r.serves and weights_format in (None, r.weights_format)]

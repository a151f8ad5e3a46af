"""vLLM-like engines (vLLM, SGLang, TGI, TensorRT-LLM): a PyTorch process that reserves a share of the
card, sizes its activation workspace with a profile run of `max_num_batched_tokens` tokens, and gives
the rest to a paged KV pool; tensor parallel shards every layer over the cards of a set.

vLLM's budget (vllm/v1/worker/gpu_worker.py determine_available_memory): total_gpu_memory ×
gpu_memory_utilization − weights − activation peak − non-torch memory (− CUDA graphs from v0.21)."""

from __future__ import annotations

from dataclasses import replace

from ..catalog.gpus import Gpu
from ..catalog.models import ModelSpec
from ..catalog.quants import Quant
from ..catalog.records import record
from ..core.activations import vllm_profile_bytes
from ..core.memory import Memory, MemorySettings
from .base import GIB, Runtime

# The largest --gpu-memory-utilization cardfit suggests: rule of thumb, leaving a little of the card for
# what vLLM does not count (other processes, allocator fragmentation); vLLM itself accepts up to 1.0.
MAX_SUGGESTED_UTILIZATION = 0.98

# vLLM's MXFP4 MoE layer (gpt-oss) allocates each expert's gate_up and down matrices at its kernel's tile
# multiples, (intermediate per rank, hidden) rounded up: vllm/model_executor/layers/quantization/mxfp4.py
# Mxfp4MoEMethod.create_weights at commit 007d50058a06dec0f82472d63c819244d460c40d
# (https://github.com/vllm-project/vllm/blob/007d50058a06dec0f82472d63c819244d460c40d/vllm/model_executor/layers/quantization/mxfp4.py).
# gpt-oss (2,880 x 2,880): Marlin 2,944 x 3,072 (+9.0 % of the expert bytes), FlashInfer on B200 3,072 x 3,072
# (+13.8 %), Triton none.
MXFP4_PAD: dict[str, tuple[int, int]] = {
    "marlin": (128, 256),  # "the moe marlin kernel requires that for each linear n % 256 == 0 and k % 128"
    "flashinfer-sm100": (256, 256),  # SM100_FI_MXFP4_BF16 / _MXFP8_TRTLLM
    "rocm": (128, 128),  # get_padding_alignment(): 128 (256 on gfx950)
    "rocm-gfx950": (256, 256),
    "triton": (64, 1),  # OAI triton_kernels (Hopper): intermediate to 64 only
}
# (vLLM 0.27.0 pads the intermediate dimension of the SM100 kernels to 128 instead: data/runtimes.toml
# mxfp4_sm100_inter_pad, data/releases.toml trtllm_mxfp4_pad_128)


def mxfp4_backend(gpu: Gpu | None) -> str:
    """The MXFP4 MoE kernel current vLLM picks on this card (mxfp4.py get_mxfp4_backend at the commit above):
    FlashInfer on SM100 (B200/B300/GB200: the HBM Blackwell parts), OAI Triton kernels on Hopper (SM90; a
    dependency of vLLM since the torch 2.9 builds; v0.11.0 lacked it, vllm-project/vllm#26582, so it ran
    Marlin), Marlin on everything else NVIDIA (Ampere, Ada, the GDDR7 Blackwell SM120 cards), ROCm's padding
    on AMD."""
    if gpu is None:
        return ""
    if gpu.stack == "rocm":
        return "rocm-gfx950" if gpu.arch == "cdna4" else "rocm"
    if gpu.arch == "hopper":
        return "triton"
    if gpu.sm100:
        return "flashinfer-sm100"
    return "marlin"


# V0's step budget without chunked prefill is max(max_model_len, 2048), and its chunk from v0.7 2048 tokens
# (vllm/config.py SchedulerConfig: _DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048)
V0_BATCHED_TOKENS = 2048
# vLLM's max_model_len for a model whose config.json states no length (vllm/config.py _get_and_verify_max_len:
# default_max_len = 2048)
UNKNOWN_MAX_MODEL_LEN = 2048


def v0_batched_tokens(chunks_2048: bool, max_model_len: int, chunked_above: int) -> tuple[int, bool]:
    """vLLM's V0 engine (before 0.8): (max_num_batched_tokens, chunked prefill on). The API server turns
    chunked prefill on for max_model_len above `chunked_above` (32K, EngineArgs v0.5-v0.7), with chunks of
    512 tokens before v0.7 and 2048 from it (`chunks_2048`: data/releases.toml v0_chunks_2048); otherwise a
    step holds max(max_model_len, 2048) tokens."""
    if max_model_len > chunked_above:
        return (V0_BATCHED_TOKENS if chunks_2048 else 512), True
    return max(max_model_len, V0_BATCHED_TOKENS), False


@record(slots=True)
class VllmLike(Runtime):
    def activation_bytes(self, m: ModelSpec, s: MemorySettings) -> int:
        # the profile run's batch is max_num_batched_tokens whatever the context (V1: chunked prefill,
        # vllm/v1/worker/gpu_model_runner.py profile_run -> _dummy_run(self.max_num_tokens))
        tokens = s.prefill_chunk or self.padded_context(s.context) * s.sequences
        peak = vllm_profile_bytes(m, tokens, s.max_num_seqs, s.tp,
                                  sampler_bytes_per_logit=self.profile.sampler_bytes_per_logit)
        rt = self.profile
        if not rt.kv_margin_fraction:
            return peak
        # a KV cache sized from measured memory (vLLM 0.34: data/releases.toml extensible_kv_cache) keeps free
        # the transient peak it was handed, the profiled activations plus the CUDA-graph estimate
        # (gpu_worker.py peak_activation_memory -> reserved_headroom_bytes), beside the graphs themselves
        # (overhead_bytes); its margin, max(floor, fraction x that peak), only where the memory free at
        # startup binds (budget_for)
        return peak + rt.cuda_graph_bytes

    def weights_padding_bytes(self, m: ModelSpec, q: Quant | None, s: MemorySettings, gpu: Gpu | None) -> int:
        """MXFP4 experts padded to the MoE kernel's tiles (MXFP4_PAD), on every rank of a tensor-parallel set
        (each pads its own slice of the intermediate dimension)."""
        if q is None or getattr(q, "id", "") != "mxfp4" or not (m.is_moe and m.moe_intermediate and m.hidden):
            return 0
        backend = self.profile.mxfp4_backend or mxfp4_backend(gpu)
        if backend not in MXFP4_PAD:
            return 0
        inter_mult, hidden_mult = MXFP4_PAD[backend]
        if backend == "flashinfer-sm100" and self.profile.mxfp4_sm100_inter_pad:
            inter_mult = self.profile.mxfp4_sm100_inter_pad
        tp = max(s.tp, 1)
        inter = -(-m.moe_intermediate // tp)
        padded = -(-inter // inter_mult) * inter_mult * (-(-m.hidden // hidden_mult) * hidden_mult)
        extra_params = 3 * m.experts * (padded - inter * m.hidden) * tp * (m.layers - m.dense_layers)
        return round(extra_params * q.bits_per_weight / 8)

    def serving(self, *, role: str = "", attention_dp: int = 1, speculative: str = "",
                max_running: int = 0, draft_tokens: int = 0, server_tp: int = 0) -> Runtime:
        """A disaggregated deployment's worker (`role`) sizes its KV cache from a profile run, not from
        measured memory, where the release would (vLLM 0.34: data/releases.toml extensible_kv_cache): its
        NIXL connector exports the cache with FABRIC handles, which need an IMEX channel that an HGX box has
        not, and on ROCm NIXL and Mooncake cannot register driver-mapped memory (vllm/config/vllm.py
        _resolve_extensible_kv_cache, PyPI wheel vllm 0.34.0 lines 3180-3265: 'Extensible KV cache off:
        without an IMEX channel, KV transfers within a host (e.g. NIXL) would lose NVLink'). A GB200 NVL72's
        IMEX channel would keep it on: not modelled, the smaller pool. Else this adapter."""
        if not role or not self.profile.kv_margin_fraction:
            return self
        from ..catalog.releases import without_features

        return replace(self, profile=without_features(self.profile, frozenset({"extensible_kv_cache"})))

    def budget_for(self, mem: Memory, gpu: Gpu, budget: int, tp: int = 1) -> int:
        """Per card: vLLM 0.34's KV cache (vllm/v1/worker/extensible_kv_cache.py measure_kv_cache_bytes:
        min(requested - non-KV, free at startup - non-KV - margin) - transient peak) as one budget: the
        requested arm is budget_per_card's utilization share, the measured arm the memory free at startup
        (_free_at_startup) less the margin, max(floor, fraction x the transient peak, which is this estimate's
        activation line: activation_bytes). Before that release (kv_margin_fraction 0), `budget`."""
        if not self.profile.kv_margin_fraction:
            return budget
        return min(budget, self._free_at_startup(gpu, tp) - self.startup_margin(mem, gpu))

    def startup_margin(self, mem: Memory, gpu: Gpu) -> int:
        """vLLM 0.34's margin on the memory it measures free at startup (extensible_kv_cache.py 592-618):
        max(1 GiB, 3 GiB on ROCm; 0.75 x the transient peak, this estimate's activation line); 0 before."""
        rt = self.profile
        if not rt.kv_margin_fraction:
            return 0
        floor = rt.kv_margin_floor_bytes_rocm if gpu.stack == "rocm" else rt.kv_margin_floor_bytes
        return max(floor, int(mem.activation_bytes * rt.kv_margin_fraction))

    def _free_at_startup(self, gpu: Gpu, tp: int) -> int:
        """The memory a vLLM 0.34 worker measures free at startup: the total less the CUDA context and, on an
        NVSwitch set of more than 2 ranks, NCCL's NVLink SHARP buffers (V1 starts NCCL before its
        snapshot)."""
        return self.cuda_total(gpu) - self.profile.context_bytes - self.nvls_bytes(
            gpu, tp, self.profile.nccl_communicators_v0)

    def budget_per_card(self, gpu: Gpu, utilization: float | None = None, tp: int = 1, pp: int = 1,
                        model: ModelSpec | None = None) -> int:
        """The utilization share of the total CUDA reports; where the release sizes the KV cache from measured
        memory (vLLM 0.34: data/releases.toml extensible_kv_cache), at most the memory free at startup less
        the margin's floor: the bound before any estimate's workspace is known (budget_for narrows it by the
        estimate's own margin where that arm binds)."""
        rt = self.profile
        if not rt.kv_margin_fraction:
            return Runtime.budget_per_card(self, gpu, utilization, tp, pp, model)
        u = utilization if utilization is not None else rt.gpu_memory_utilization
        floor = rt.kv_margin_floor_bytes_rocm if gpu.stack == "rocm" else rt.kv_margin_floor_bytes
        measured = self._free_at_startup(gpu, tp) - floor
        return min(int(self.cuda_total(gpu) * u), measured) if u else measured

    def overhead_bytes(self, gpu: Gpu | None = None) -> int:
        """Non-torch memory counted inside the budget (its profiler's 'non_torch_memory'); the CUDA context
        itself sits outside it (vLLM measures memory after CUDA init). The CUDA-graph pool where it is
        profiled inside the budget: on a ROCm card only from vLLM 0.26 (data/releases.toml
        rocm_graphs_in_budget)."""
        rt = self.profile
        rocm_outside = gpu is not None and gpu.stack == "rocm" and not rt.has("rocm_graphs_in_budget")
        return (rt.non_torch_bytes or rt.context_bytes) + (0 if rocm_outside else rt.cuda_graph_bytes)

    # ---- the serve defaults that depend on the card (vllm/engine/arg_utils.py get_batch_defaults)

    def big_card(self, gpu: Gpu | None) -> bool:
        rt = self.profile
        return (gpu is not None
                and bool(rt.big_card_min_gib) and gpu.usable_bytes >= rt.big_card_min_gib * GIB
                and rt.big_card_excludes not in gpu.name.lower())

    # vllm/engine/arg_utils.py EngineArgs.get_batch_defaults and _set_default_args at commit 99d7eb5d
    # (https://github.com/vllm-project/vllm/blob/99d7eb5d6a512cfcc5a2b104f24ebf2d6cda772b/vllm/engine/arg_utils.py):
    # with chunked prefill (always in V1) max_num_batched_tokens is the card's default whatever the
    # context, and max_num_seqs = min(the card's default, max_num_batched_tokens).

    def serve_batched_tokens(self, gpu: Gpu | None, max_model_len: int = 0) -> int:
        """max_num_batched_tokens of `vllm serve` on this card: the profile run's token count. V1: the card's
        default (from 0.28 a card of 160 GiB or more takes 16,384, any name: data/releases.toml
        batch_16k_above_160gib); V0 (a release before data/releases.toml v1_engine): max(max_model_len,
        2048), or its chunk where it turns chunked prefill on (v0_batched_tokens)."""
        rt = self.profile
        if not rt.has("v1_engine") and rt.v0_chunked_prefill_above:
            return v0_batched_tokens(rt.has("v0_chunks_2048"), max_model_len or UNKNOWN_MAX_MODEL_LEN,
                                     rt.v0_chunked_prefill_above)[0]
        if rt.prefill_chunk_huge_card_serve and gpu is not None and rt.huge_card_min_gib \
                and gpu.usable_bytes >= rt.huge_card_min_gib * GIB:
            return rt.prefill_chunk_huge_card_serve
        return (rt.prefill_chunk_big_card_serve if self.big_card(gpu) else rt.prefill_chunk_other_serve) \
            or rt.prefill_chunk

    def serve_max_num_seqs(self, gpu: Gpu | None) -> int:
        rt = self.profile
        return (rt.max_num_seqs_big_card if self.big_card(gpu) else rt.max_num_seqs_other) or rt.max_num_seqs

    def nvls_bytes(self, gpu: Gpu | None, tp: int, communicators: int) -> int:
        """NCCL's NVLink SHARP buffers per card: NCCL turns NVLS on for more than 2 ranks on NVSwitch
        Hopper/Blackwell (vllm-project/vllm#9699); each communicator maps nvlsPerRankSize x ranks."""
        if gpu is None or tp <= 2 or gpu.interconnect != "nvlink" or gpu.arch not in ("hopper", "blackwell"):
            return 0
        return communicators * tp * self.profile.nvls_bytes_per_rank

    def cuda_total(self, gpu: Gpu) -> int:
        """The card's memory as the engine sees it (torch.cuda.mem_get_info total)."""
        return gpu.usable_bytes - self.profile.cuda_total_shortfall_bytes


ADAPTER = VllmLike

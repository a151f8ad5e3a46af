"""Speed model. Decode is memory-bandwidth bound: one stream cannot beat bandwidth ÷ bytes read
per token (resident weights for dense models, active weights for MoE, plus the KV cache read so far).
Prefill is compute bound: about 2 × active parameters FLOPs per prompt token, plus attention.

One decode step of `b` concurrent sequences on one card (or one tensor-parallel group) takes

    step = max(weight_bytes / read_rate + cpu_bytes / (ram_bandwidth × ram_eff),  b × flops / TFLOPS,
               low_bit_params × unpack_ops / FP32_TFLOPS) + kv_bytes / read_rate
           + layers × per_layer_overhead + b × per_sequence_overhead + tensor-parallel all-reduces

where the weights are read once for the whole batch (for MoE: the experts the batch touches) and each
sequence reads its KV cache; read_rate = min(bandwidth × eff, the card's measured GPU read rate where it has
one: Machine.read_bytes_per_s). `eff` (bandwidth fraction the weight kernels stream), the ALU operations a
low-bit weight costs to unpack (dequant_seconds) and the per-layer overhead (kernel launches,
synchronisation, sampling: a fixed cost per layer that makes small models on fast cards slower than their
bandwidth share) are per runtime and engine generation, fitted on data/validation/*.toml
(validation/calibrate.py)."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from ..catalog.gpus import Gpu, nvlink_allreduce_cards
from ..catalog.models import ModelSpec
from ..catalog.quants import Quant
from ..catalog.records import record
from ..catalog.runtimes import RuntimeProfile, graph_max_batch
from .kv import kv_cache_bytes, kv_split_ranks, layout
from .memory import Memory
from .moe_parallel import alltoall_seconds, imbalance
from .weights import projector_bytes

# DDR5-4800 in two channels: 4,800 MT/s × 8 bytes × 2 = 76.8 GB/s theoretical (JEDEC JESD79-5 speed bin;
# the DDR5 desktop baseline). A user with DDR4-3200 dual channel has 51.2 GB/s: pass --ram-bandwidth.
DEFAULT_RAM_GBPS = 76.8
# these shard a model over cards with tensor parallelism by default

# Tensor-parallel all-reduce: two per layer (after attention and after the MLP), each paying a fixed
# latency plus 2 (tp-1)/tp × message bytes over the link (ring all-reduce). The latency is an assumption
# of the order NCCL reports for small messages: ~10 µs over NVLink (past 8 MiB on a card without a measured
# NCCL curve; below it the engines' own kernel, CUSTOM_ALLREDUCE_US), ~25 µs over PCIe peer-to-peer.
# Infinity Fabric (8x MI300X, RCCL): measured, 45-51 µs for every message from 1 KB to 32 KB (rccl-tests
# AllReduce bus bandwidth 0.04 GB/s at 1 KB ... 1.13 GB/s at 32 KB, time = bytes × 2 (8-1)/8 ÷ bus
# bandwidth): Azure AI-benchmarking-guide, Azure_Results/ND_MI300X_v5_results.md "RCCL Bandwidth" (RCCL
# 2.22.3, fork samuel-bohman/AI-benchmarking-guide@3de0c294); a decode step's message (hidden × 2 bytes per
# sequence) is in that range.
ALLREDUCE_LATENCY_S = {"nvlink": 10e-6, "nvlink-bridge": 15e-6, "infinity-fabric": 48e-6, "pcie": 25e-6}
ALLREDUCES_PER_LAYER = 2
# Engines all-reduce a small message (a decode step's) with their own NVLink kernels (timed from their
# measured curve: CUSTOM_ALLREDUCE_US below) and hand a message of 8 MiB or more to NCCL: vLLM's
# CustomAllreduce(max_size=8192 * 1024), should_custom_ar "return inp_size < self.max_size"
# (vllm/distributed/device_communicators/custom_all_reduce.py; SGLang runs the same kernels and test). A
# prompt chunk's hidden states are that large (1,024 tokens × 5,120 × 2 bytes = 10 MiB).
CUSTOM_ALLREDUCE_MAX_BYTES = 8192 * 1024
# That kernel's time by message size on H100 SXM (NVLink 4), per call at tensor parallel 2 / 4 / 8, reading
# its input in place (sgl-project/sglang pull request #2904, "unit test performance in H100", the "custom
# allreduce" table, copy-input mode: "adapt vllm register cuda graph buffer to save a data copy from input
# tensor to ipc buffer", which is what vLLM's kernel does inside a CUDA graph, where decode steps run; latency
# in ms converted to us: 512 B 3.7 / 4.8 / 5.9, 4 KiB 3.9 / 3.7 / 5.7, 32 KiB 4.5 / 4.8 / 7.8, 256 KiB
# 7.9 / 13.9 / 16.7, 512 KiB 12.5 / 20.2 / 22.1, 1 MiB 19.9 / 31.1 / 33.8; vLLM's kernel outside a graph, with
# its copy: 9.5 / 9.1 / 10.1 us at 512 B ... 26.6 / 40.2 / 45.0 at 1 MiB,
# https://github.com/sgl-project/sglang/pull/2904). A decode step's message is the batch x hidden x 2 bytes:
# one sequence of a 70B model 16 KiB (the flat part), 64 of them 1 MiB, where the one-shot/two-shot kernel
# takes six times its small-message time, not the ring's bytes at the link rate.
CUSTOM_ALLREDUCE_US: dict[int, tuple[tuple[int, float], ...]] = {
    2: ((512, 3.7), (4096, 3.9), (32768, 4.5), (262144, 7.9), (524288, 12.5), (1048576, 19.9)),
    4: ((512, 4.8), (4096, 3.7), (32768, 4.8), (262144, 13.9), (524288, 20.2), (1048576, 31.1)),
    8: ((512, 5.9), (4096, 5.7), (32768, 7.8), (262144, 16.7), (524288, 22.1), (1048576, 33.8)),
}
CUSTOM_ALLREDUCE_LINK_GBPS = 900.0  # the H100 SXM's NVLink 4 (NVIDIA H100 datasheet), the curve's card
# The engines' own all-reduce kernel on the MI300 series (runtimes.toml rocm_custom_allreduce: vLLM's
# CustomAllreduce, which takes every message up to CUSTOM_ALLREDUCE_MAX_BYTES there too), per call by
# message size, with the link rate (GB/s) of the card it was measured on: tensor parallel 2, fp16, the
# "vllm cr" column of AMD's QuickReduce kernel tests (ROCm/aiter pull request #801,
# https://github.com/ROCm/aiter/pull/801: 4 KiB 7.07 us ... 64 KiB 7.66, 256 KiB 11.45, 1 MiB 28.15,
# 8 MiB 181.43); tensor parallel 4, the "baseline" (custom all-reduce) column of vLLM pull request #19744
# (https://github.com/vllm-project/vllm/pull/19744, "only enabled on AMD, MI300": 2 KiB 7.18 us ... 8 MiB
# 118.31); tensor parallel 8, no MI300X figure is published: vLLM's kernel on 8x MI355X, the "vllm/us"
# column of vLLM pull request #39080 (bf16, hidden 3,072: 24 KiB 6.3 us ... 1.5 MiB 24.2;
# https://github.com/vllm-project/vllm/pull/39080), scaled to another card's link rate as the NVLink curve
# is (custom_allreduce_seconds; rule of thumb for the MI300X and MI325X). A decode step's message (a 70B
# model's 16 KiB a sequence) costs about 7 us, where RCCL's small-message latency (rccl-tests, gpus
# allreduce_busbw: 45 us at 8 ranks) is the wrong figure: decode never calls RCCL there.
ROCM_CUSTOM_ALLREDUCE_US: dict[int, tuple[float, tuple[tuple[int, float], ...]]] = {
    2: (896.0, ((4096, 7.07), (8192, 7.58), (16384, 7.53), (32768, 7.30), (65536, 7.66), (131072, 8.70),
                (262144, 11.45), (524288, 17.13), (1048576, 28.15), (2097152, 49.67), (4194304, 93.79),
                (8388608, 181.43))),
    4: (896.0, ((2048, 7.18), (16384, 7.26), (32768, 7.58), (262144, 14.39), (524288, 14.65),
                (1048576, 22.91), (2097152, 36.64), (4194304, 63.86), (8388608, 118.31))),
    8: (1075.0, ((24576, 6.3), (49152, 6.7), (98304, 7.6), (196608, 10.0), (393216, 13.1), (786432, 16.0),
                 (1572864, 24.2))),
}
# the cards vLLM runs it on: gfx94x (CDNA3: MI300X, MI325X) and gfx950 (CDNA4: MI355X), not MI250 (CDNA2)
# nor RDNA (vllm/platforms/rocm.py use_custom_allreduce: gfx94, gfx95)
ROCM_CUSTOM_ALLREDUCE_ARCHS = ("cdna3", "cdna4")
# NCCL's all-reduce over NVLink was measured by message size on the cards of two link generations (catalog
# gpus allreduce_busbw: H100 SXM, NVLink 4; GB200, NVLink 5); another NVLink card borrows the nearest one's
# curve scaled by its link rate (nvlink_curve). A card whose NVLink rate is not in the catalog is taken at
# NVLink 4's 900 GB/s (NVIDIA H100 Tensor Core GPU datasheet, SXM: NVLink 900 GB/s).
NVLINK_DEFAULT_GBPS = 900.0
# A card whose catalog row gives no link bandwidth talks over PCIe 4.0 x16: 16 GT/s × 16 lanes × 128/130
# encoding ≈ 31.5 GB/s each way (PCI-SIG, PCI Express Base Specification 4.0), rounded to 32.
DEFAULT_LINK_GBPS = 32.0
# TWO: on the every-card plan's path (a decode step timed for each card), max() and min() of two values are
# written as conditionals, `b if b > a else a` for max(a, b) and `b if b < a else a` for min(a, b): the same
# value and type as the builtins (the first of equals), without their call (~1,200 instructions each on
# CPython 3.11, against ~20)
# A model whose width is unknown (only a shape given): 4,096, the hidden size of the Llama 2/3 7-8B models
# (meta-llama/Llama-3.1-8B config.json "hidden_size": 4096); rule of thumb, it sizes the all-reduce message.
HIDDEN_UNKNOWN = 4096


def hidden_size(m: ModelSpec) -> int:
    """The residual stream width the all-reduces carry."""
    return m.hidden or m.heads * m.head_dim or HIDDEN_UNKNOWN


@record(slots=True)
class Speed:
    decode_ceiling_tokens_per_s: float | None
    decode_tokens_per_s: float | None
    prefill_tokens_per_s: float | None
    bytes_per_token: int
    sequences: int = 1  # concurrent sequences the aggregate is for
    aggregate_tokens_per_s: float | None = None  # all sequences together (the decode step at `sequences`)


@record(slots=True)
class Shares:
    """How a model's weight bytes split by what a decode step does with them."""

    dense: float  # read every step (attention, norms, dense MLP, shared experts, output head)
    experts: float  # routed experts, all resident; a token reads `route` of them
    embed: float  # untied input embedding: a lookup of one row, not a read of the matrix
    route: float  # experts_active / experts (1.0 for dense models)
    method: str  # "file" | "shapes" | "params"
    attention: float = 0.0  # the attention projections, a part of `dense` (0: not known)

    def read_fraction(self, sequences: int = 1) -> float:
        """Share of the weight bytes one step reads for `sequences` tokens: with uniform routing a layer's
        expert is touched by at least one of b tokens with probability 1 − (1 − k/E)^b."""
        touched = 1 - (1 - self.route) ** (1 if 1 > sequences else sequences)  # max(sequences, 1): TWO
        return self.dense + self.experts * touched

    def routed(self, route: float) -> Shares:
        """These shares with another `route`: `dataclasses.replace(self, route=route)` built directly, at a
        third of its cost (the serving model asks it for every MoE step it times: core/serving.py _mixed;
        tests/test_plan_memos.py holds the two equal field by field)."""
        return Shares(self.dense, self.experts, self.embed, route, self.method, self.attention)


def _kind(name: str) -> str:
    n = name.lower()
    if "_exps" in n or ".experts." in n or "block_sparse_moe.experts" in n:
        return "experts"
    if n.startswith("token_embd") or "embed_tokens" in n or n.endswith("wte.weight"):
        return "embed"
    return "dense"


@lru_cache(maxsize=256)  # once per model and quantization, not once per card of a ranking
def weight_shares(m: ModelSpec, q: Quant | None = None) -> Shares:
    """Byte shares from the model's real tensors (a file), else from its tensor groups at quantization q
    (each group at its own storage type), else from the parameter counts."""
    route = m.experts_active / m.experts if m.is_moe and m.experts_active else 1.0
    if m.tensors:
        by = {"dense": 0, "experts": 0, "embed": 0, "attention": 0}
        for t in m.tensors:
            by[_kind(t.name)] += t.nbytes
            name = t.name.lower()
            if ("attn_" in name or "self_attn" in name) and "norm" not in name and _kind(t.name) == "dense":
                by["attention"] += t.nbytes
        return _shares(by, route, m.tied_embeddings, "file")
    from .tensors import has_shapes

    if q is not None and has_shapes(m):
        return _shares(_group_bytes(m, q), route, m.tied_embeddings, "shapes")
    if m.is_moe and m.active_params:
        return Shares(m.active_params / m.params, 0.0, 0.0, 1.0, "params")
    return Shares(1.0, 0.0, 0.0, 1.0, "params")


def _group_bytes(m: ModelSpec, q: Quant) -> dict[str, int]:
    return dict(_group_bytes_cached(m, q))


@lru_cache(maxsize=256)
def _group_bytes_cached(m: ModelSpec, q: Quant) -> tuple[tuple[str, int], ...]:
    """Once per model and quantization, not once per card ranked: the walk is per layer."""
    from ..catalog.quants import GgufMix, default_quants
    from .tensors import tensor_groups
    from .weights import _group_type, _indices, _mix_counts, _mix_model, _position

    quants = default_quants()
    groups = tensor_groups(m)
    layers_of, index_of = _indices(groups)
    mixed = isinstance(q, GgufMix)
    # identical tensors (one per layer) typed together: a GGUF mix types them by position, all at once
    same: dict[tuple[str, int, int, bool], tuple[Any, list[tuple[int, int]]]] = {}
    for g in groups:
        pos = _position(g, m, layers_of, index_of) if mixed and g.matrix else (0, 0)
        same.setdefault((g.kind, g.n_params, g.row, g.matrix), (g, []))[1].append(pos)
    by = {"dense": 0, "experts": 0, "embed": 0, "attention": 0}
    for g, positions in same.values():
        attention = g.kind.startswith("attn_") and g.matrix  # counted in dense too
        if mixed and g.matrix:
            for t, count in _mix_counts(q, g, tuple(positions), m.tied_embeddings, _mix_model(m)):
                by[_kind(g.kind)] += t.nbytes(g.n_params) * count
                by["attention"] += t.nbytes(g.n_params) * count if attention else 0
        else:
            t = _group_type(g, m, q, quants, layers_of, index_of)  # the same for every copy
            by[_kind(g.kind)] += t.nbytes(g.n_params) * len(positions)
            by["attention"] += t.nbytes(g.n_params) * len(positions) if attention else 0
    return tuple(by.items())


def _shares(by: dict[str, int], route: float, tied: bool, method: str) -> Shares:
    by = dict(by)
    attention = by.pop("attention", 0)
    if tied:  # the same matrix is the output head, read every step
        by = {**by, "dense": by["dense"] + by["embed"], "embed": 0}
    total = sum(by.values()) or 1
    return Shares(by["dense"] / total, by["experts"] / total, by["embed"] / total,
                  route if by["experts"] else 1.0, method, attention / total)


def active_weight_bytes(m: ModelSpec, mem: Memory, q: Quant | None = None, sequences: int = 1) -> int:
    """Weight bytes read per decode step: all of them for a dense model, the active share for MoE."""
    return round(mem.weights.total_bytes * weight_shares(m, q).read_fraction(sequences))


def kv_read_bytes(m: ModelSpec, mem: Memory, context_filled: int, window_cache: bool = True,
                  window_cells: int = 0) -> int:
    """One sequence's cache at `context_filled` tokens: what attention reads for each new token
    (`window_cells`: what a sliding-window layer reads once its ring has wrapped, when more than the window:
    the runtime adapter's window_read_cells)."""
    if context_filled <= 0:
        return 0
    filled = min(context_filled, mem.context)
    if window_cells and window_cache and m.sliding_window and window_cells > m.sliding_window:
        return kv_cache_bytes(m, filled, 1, mem.kv_dtype, window_cache, min(filled, window_cells))
    return kv_cache_bytes(m, filled, 1, mem.kv_dtype, window_cache)


@record(slots=True)
class Machine:
    """What a step runs on, and the runtime's calibrated constants (data/runtimes.toml)."""

    bandwidth_gbps: float  # per card
    tflops: float | None  # dense, at the compute precision, per card
    tp: int = 1
    link_gbps: float | None = None
    interconnect: str = "pcie"
    decode_efficiency: float = 1.0
    overhead_s_per_layer: float = 0.0
    overhead_s_per_sequence: float = 0.0  # scheduler, sampler and interleaved prefill, per sequence per step
    graph_max_batch: int = 0  # steps of more sequences run without CUDA graphs (0: all steps are graphs)
    overhead_s_per_layer_eager: float = 0.0  # the per-layer time of those steps (kernels launched one by one)
    # a step carrying prompt tokens: CPU time per layer of its eager forward pass past the graph size
    # (core/serving.py eager_s; runtimes.toml prefill_overhead_us_per_layer, prefill_graph_tokens)
    overhead_s_per_layer_prefill: float = 0.0
    prefill_graph_tokens: int = 0
    compute_efficiency: float = 1.0
    ram_bandwidth_gbps: float = 0.0
    ram_efficiency: float = 1.0
    # the read rate the card's own cores were measured to reach where it is below bandwidth × efficiency
    # (a GPU that cannot saturate its memory bus: catalog field gpus stream_gbps); 0 = no such limit
    stream_gbps: float = 0.0
    fp32_tflops: float = 0.0  # non-tensor rate per card (gpus fp32_tflops); 0 = not published
    # the runtime's ALU operations per low-bit weight a decode step unpacks (runtimes.toml, fitted); 0 = none
    dequant_ops_per_weight: float = 0.0
    # share of the bandwidth the routed-expert kernels stream (grouped GEMMs over many small experts);
    # 0 = decode_efficiency, the dense GEMV's
    expert_efficiency: float = 0.0
    # fixed time per MoE layer per step beyond overhead_s_per_layer: the router GEMM, top-k, permuting the
    # tokens to their experts and back, and the grouped-GEMM launches over the experts a step touches
    overhead_s_per_moe_layer: float = 0.0
    # the all-reduce bus bandwidth measured by message size, the ranks and the link rate (GB/s) of the card it
    # was measured on: the card's own (gpus allreduce_busbw, allreduce_ranks) or, over NVLink, the nearest
    # generation's (nvlink_curve); () = a fixed latency per call plus the link bandwidth
    allreduce_busbw: tuple[tuple[int, float], ...] = ()
    allreduce_ranks: int = 0
    allreduce_link_gbps: float = 0.0
    # the engine all-reduces a message of up to CUSTOM_ALLREDUCE_MAX_BYTES over Infinity Fabric in its own
    # kernel (ROCM_CUSTOM_ALLREDUCE_US), not RCCL: an MI300-series card under a runtime that does
    # (runtimes.toml rocm_custom_allreduce)
    rocm_custom_allreduce: bool = False
    # the attention rate a FlashAttention kernel was measured to reach per card (gpus attention_tflops), or
    # the rate attention runs at where the GEMMs run in a format attention does not (FP4: machine_for);
    # 0 = the GEMM rate (tflops × compute_efficiency) holds for attention too
    attention_tflops: float = 0.0
    precision: str = "bf16"  # the tensor-core precision of the GEMMs `tflops` is the peak of (precision_of)
    # attention data parallel over `attention_dp` groups of the tp ranks (SGLang --enable-dp-attention,
    # TensorRT-LLM enable_attention_dp): a request's attention runs in one group, which holds the attention
    # projections whole (tp / attention_dp ranks share them) and only its own requests' cache; the MoE and
    # MLP stay sharded over all tp ranks. 1 = tensor-parallel attention
    attention_dp: int = 1
    # experts sharded expert-parallel over this many ranks (core/moe_parallel.py): with attention_dp groups,
    # every non-expert weight is whole in each group (split over its tp / attention_dp ranks), a MoE layer
    # moves its tokens by all-to-all instead of all-reducing them, and each group's engine schedules only its
    # own sequences. 1 = experts tensor-parallel
    expert_parallel: int = 1
    # a decode step's weight GEMMs take their bytes' time plus their FLOPs' time (Step.roofline_s), not the
    # longer of the two: TensorRT engines on TensorRT-LLM's C++ executor (services/deploy.py
    # tensorrt_engine_v0), whose FP8 GEMMs at decode batch sizes run below both ceilings
    serial_gemm: bool = False
    # times a decoding sequence's cache is read per step on a rank: 1 for kernels that read each KV head once
    # for its whole group of query heads; the query heads per KV head on a rank for a kernel that runs one
    # thread block per query head (the generic paged_attention v1/v2 kernel: vllm csrc/attention, grid
    # (num_heads, num_seqs, partitions)), each reading the group's K and V for itself
    kv_read_copies: float = 1.0
    # share of the prompt GEMM rate (tflops × compute_efficiency) the routed experts' GEMMs reach where their
    # kernel differs from the dense GEMMs' (expert_prefill_flops); 0 = the same rate
    expert_prefill_share: float = 0.0

    @property
    def read_bytes_per_s(self) -> float:
        """Bytes per second a decode step streams from VRAM on one card."""
        rate = self.bandwidth_gbps * self.decode_efficiency
        return min(rate, self.stream_gbps) * 1e9 if self.stream_gbps else rate * 1e9


@record(slots=True)
class Step:
    """One decode step of `sequences` sequences."""

    sequences: int
    weight_bytes: int  # read from VRAM for the whole batch (all cards together)
    kv_bytes: int  # all sequences
    cpu_bytes: int  # read from system RAM (offloaded layers / experts)
    flops: float
    memory_s: float  # every byte read (weights and KV cache)
    compute_s: float
    overhead_s: float
    link_s: float
    kv_s: float = 0.0  # the KV-cache share of memory_s: attention kernels, run after the weight GEMMs
    dequant_s: float = 0.0  # unpacking low-bit weights on the CUDA cores, inside the same weight kernels
    serial: bool = False  # the weight GEMMs' bytes and FLOPs do not overlap (Machine.serial_gemm)

    @property
    def roofline_s(self) -> float:
        """Per kernel class: the weight GEMMs take the longer of their bytes and all the FLOPs, the attention
        kernels then stream the KV cache (a roofline per operator, not one for the whole step: Yuan et al.,
        "LLM Inference Unveiled: Survey and Roofline Model Insights", arXiv:2402.16363, 2024, section 3).
        With one sequence the FLOPs are far below the bytes and this is all bytes ÷ bandwidth. A serial step
        (Machine.serial_gemm) adds the GEMMs' FLOPs to their bytes instead: a skinny GEMM (M = the batch, tens
        to a thousand rows) near the ridge point reaches neither ceiling. TensorRT-LLM's FP8 engines on H100
        ran a batch-16 decode GEMM in cuBLASLt's 128x128x128 FP8 kernel slower than in the FP16 one
        (NVIDIA/TensorRT-LLM issue #2013, https://github.com/NVIDIA/TensorRT-LLM/issues/2013), and per-tensor
        FP8 GEMMs of Llama 70B's shapes reach 466 TFLOP/s at M = 128 and 873 at M = 256 where the unscaled
        ones reach 655 and 1,238 (vllm-project/vllm PR #20071, https://github.com/vllm-project/vllm/pull/20071,
        SM100 table, N = 8,192, K = 2,048): longer than their bytes and FLOPs together, so bytes + FLOPs is
        the nearer of the two bounds. The records of those engines bear it out (validation/serving.py
        tensorrt_engine_v0)."""
        return roofline_s(self.memory_s, self.compute_s, self.kv_s, self.dequant_s, self.serial)

    @property
    def seconds(self) -> float:
        return self.roofline_s + self.overhead_s + self.link_s

    @property
    def per_user_tokens_per_s(self) -> float:
        return 1 / self.seconds

    @property
    def aggregate_tokens_per_s(self) -> float:
        return self.sequences / self.seconds

    @property
    def bound(self) -> str:
        if self.cpu_bytes and self.memory_s >= self.compute_s:
            return "system RAM"
        return "compute" if max(self.compute_s, self.dequant_s) > self.memory_s else "memory"


def roofline_s(memory_s: float, compute_s: float, kv_s: float, dequant_s: float, serial: bool) -> float:
    """Step.roofline_s of those terms (step_seconds times a step without the record)."""
    if serial:
        return memory_s + max(compute_s, dequant_s)
    return max(memory_s - kv_s, compute_s, dequant_s) + kv_s


@record(slots=True)
class Load:
    """Per-token work of one sequence, independent of the machine."""

    weights_bytes: int  # resident weight bytes
    shares: Shares
    kv_bytes: int  # one sequence's cache read per token
    flops_per_token: float
    layers: int
    hidden: int
    cpu_weight_fraction: float = 0.0  # share of the weight bytes in system RAM (whole layers)
    cpu_expert_fraction: float = 0.0  # share of the routed experts in system RAM (-ot exps=CPU, --n-cpu-moe)
    low_bit_params: float = 0.0  # resident parameters stored in a low-bit type (low_bit): unpacked per read
    # the most tensor-parallel ranks the cache splits over (core/kv.py kv_split_ranks: 1 for MLA's shared
    # latent, the KV heads otherwise); 0 = any
    kv_split: int = 0
    experts_active: int = 0  # routed experts per token (top-k; 0: dense)
    moe_layers: int = 0  # layers with routed experts
    # tokens each of the step's sequences sends through the routed experts: 1 for a decode step; a step that
    # also carries prompt tokens (or verifies drafted ones) routes all of them, spread over its sequences
    # (core/serving.py _mixed), and the busiest expert-parallel rank's share is that of all of them (step)
    routed_per_sequence: float = 1.0

    @property
    def moe_layer_count(self) -> int:
        """The layers that pay the MoE layer's fixed time (Machine.overhead_s_per_moe_layer): those with
        routed experts; every layer where the load does not say (moe_layers 0 on a load with expert weights).
        A DeepSeek-V3/R1 step has 58 of its 61 layers MoE: its first three run a dense MLP
        (deepseek-ai/DeepSeek-V3 config.json "first_k_dense_replace": 3, "num_hidden_layers": 61;
        modeling_deepseek.py DeepseekV3DecoderLayer: a layer takes DeepseekV3MoE only where layer_idx >=
        first_k_dense_replace), and those layers have no router, top-k or grouped GEMM to launch."""
        return self.moe_layers or self.layers

    def kv_per_card(self, tp: int) -> float:
        """The share of a sequence's cache read one of `tp` tensor-parallel ranks reads: 1 / tp split evenly,
        the whole latent on every rank for MLA (each rank attends with its tp-th of the heads over every
        cached token's latent), one whole KV head per rank where there are fewer heads than ranks."""
        tp = 1 if 1 > tp else tp  # max(tp, 1), then min(tp, kv_split): TWO
        split = self.kv_split
        return 1 / (split if split < tp else tp) if split else 1 / tp


def prefill_flops(m: ModelSpec, context: int, mc: Machine) -> float:
    """A prompt token's FLOPs (decode_flops_per_token at `context` cached tokens) in GEMM time: the attention
    share weighted by how much slower than the GEMMs the card's measured attention kernel runs (an MI300X
    reaches 708 TFLOPS in BF16 GEMMs and 328.6 in FlashAttention-2, data/gpus.toml), so a step that divides
    its FLOPs by the GEMM rate times them right."""
    slower = expert_prefill_flops(m, mc)
    total = decode_flops_per_token(m, context) + slower
    gemm_rate = (mc.tflops or 0.0) * mc.compute_efficiency
    if not (mc.attention_tflops and gemm_rate > mc.attention_tflops):
        return total
    gemm = 2 * m.active + slower
    return gemm + (total - gemm) * gemm_rate / mc.attention_tflops


def expert_prefill_flops(m: ModelSpec, mc: Machine) -> float:
    """What a prompt token's routed-expert GEMMs cost beyond their FLOPs at the prompt GEMM rate, where they
    reach only Machine.expert_prefill_share of it: 2 × the expert parameters a token goes through ×
    (1 / share − 1), so that a step dividing its FLOPs by the GEMM rate times them at their own rate; 0 where
    the share is not set or the model's shapes are not known."""
    share = mc.expert_prefill_share
    if not 0 < share < 1:
        return 0.0
    from .tensors import expert_active_params, has_shapes

    if not has_shapes(m):
        return 0.0
    return 2 * expert_active_params(m) * (1 / share - 1)


def prefill_attention_flops(m: ModelSpec, context: int, mc: Machine) -> float:
    """The attention share of a prompt token's FLOPs (prefill_flops): its projections (2 × their
    parameters) and the attention over `context` cached tokens; 0 where the model's shapes are not known."""
    from .tensors import attention_params, has_shapes

    if not has_shapes(m):
        return 0.0
    gemm = 2 * m.active + expert_prefill_flops(m, mc)  # what prefill_flops counts at the GEMM rate
    return 2 * attention_params(m) + prefill_flops(m, context, mc) - gemm


def decode_flops_per_token(m: ModelSpec, context_filled: int) -> float:
    """2 × active parameters, plus attention: 2 × 2 × heads × head_dim per cached token per full layer."""
    lay = layout(m)
    heads = m.heads or m.kv_heads
    attn = 4 * heads * m.head_dim * (lay.full_layers * context_filled
                                     + lay.window_layers * min(context_filled, lay.window or context_filled))
    return 2 * m.active + attn


def step(load: Load, mc: Machine, sequences: int = 1) -> Step:
    b, cpu, gpu, kv_card, ep, dp, memory_s = _step_reads(load, mc, sequences)
    flops, compute_s, kv_s, overhead_s = _step_times(load, mc, b, kv_card, ep, dp)
    return Step(b, round(gpu - b * load.kv_bytes), b * load.kv_bytes, round(cpu), flops, memory_s, compute_s,
                overhead_s, link_seconds(load, mc, b), kv_s, dequant_seconds(load, mc, b), mc.serial_gemm)


def step_seconds(load: Load, mc: Machine, sequences: int = 1) -> float:
    """`step(load, mc, sequences).seconds` alone, by the same arithmetic, without the Step record (the
    every-card plan times one decode step per card: decode_rates_on)."""
    b, _, _, kv_card, ep, dp, memory_s = _step_reads(load, mc, sequences)
    _, compute_s, kv_s, overhead_s = _step_times(load, mc, b, kv_card, ep, dp)
    return (roofline_s(memory_s, compute_s, kv_s, dequant_seconds(load, mc, b), mc.serial_gemm) + overhead_s
            + link_seconds(load, mc, b))


def _step_times(load: Load, mc: Machine, b: int, kv_card: float, ep: int,
                dp: int) -> tuple[float, float, float, float]:
    """A step's (FLOPs, compute seconds, cache-read seconds, fixed seconds) from its reads (_step_reads)."""
    tp = 1 if 1 > mc.tp else mc.tp  # max(mc.tp, 1): TWO
    flops = b * load.flops_per_token
    compute_s = flops / tp / (mc.tflops * 1e12 * mc.compute_efficiency) if mc.tflops else 0.0
    if ep > 1:  # the busiest rank's experts take more than the mean share of the step's routed tokens' FLOPs
        routed = b * load.routed_per_sequence
        compute_s *= 1 + _expert_flops_share(load) * (imbalance(routed, load.experts_active, ep) - 1)
    kv_s = kv_card / mc.read_bytes_per_s
    # with expert parallelism each attention group's engine schedules its own b / dp sequences, side by side,
    # and replays a graph for its own batch (SGLang can_run: the largest rank's batch, cuda_graph_runner.py)
    scheduled = math.ceil(b / dp) if ep > 1 else b
    overhead_s = (load.layers * per_layer_s(mc, scheduled) + (scheduled - 1) * mc.overhead_s_per_sequence
                  + (load.moe_layer_count * mc.overhead_s_per_moe_layer if load.shares.experts else 0.0))
    return flops, compute_s, kv_s, overhead_s


def step_memory_s(load: Load, mc: Machine, sequences: int = 1) -> float:
    """`step(load, mc, sequences).memory_s` alone, by the same arithmetic (the decode ceiling reads only
    that: estimate_on, decode_rates_on)."""
    return _step_reads(load, mc, sequences)[-1]


def _step_reads(load: Load, mc: Machine,
                sequences: int) -> tuple[int, float, float, float, int, int, float]:
    """A step's reads: (sequences, bytes from system RAM, bytes from VRAM, one rank's cache bytes, expert-
    parallel ranks, attention data-parallel groups, seconds to read them all)."""
    # (max and min of two as conditionals: TWO)
    b = 1 if 1 > sequences else sequences
    weights = load.weights_bytes * load.shares.read_fraction(b)
    expert_read = load.weights_bytes * load.shares.experts * (1 - (1 - load.shares.route) ** b)
    cpu = weights * load.cpu_weight_fraction + expert_read * load.cpu_expert_fraction * (
        1 - load.cpu_weight_fraction
    )
    gpu = weights - cpu + b * load.kv_bytes
    tp = 1 if 1 > mc.tp else mc.tp
    dp = tp if tp < mc.attention_dp else mc.attention_dp
    dp = 1 if 1 > dp else dp
    # one rank's cache reads: its group's b / dp sequences, split (or not) over the group's tp / dp ranks
    copies = mc.kv_read_copies
    kv_card = b * load.kv_bytes * load.kv_per_card(tp // dp) / dp * (1.0 if 1.0 > copies else copies)
    # data-parallel attention: a rank reads its group's share of the attention projections, not 1 / tp;
    # with expert parallelism, of every weight but the routed experts (core/moe_parallel.py)
    ep = 1 if 1 > mc.expert_parallel else mc.expert_parallel
    attention = load.weights_bytes * load.shares.attention * (1 - load.cpu_weight_fraction) if dp > 1 else 0
    if ep > 1 and dp > 1:
        attention = (weights - cpu) - expert_read * (1 - load.cpu_weight_fraction)
    memory_s = ((weights - cpu - attention) / tp + attention * dp / tp + kv_card) / mc.read_bytes_per_s
    if mc.expert_efficiency and expert_read:  # routed experts stream at their own kernels' share
        on_gpu = expert_read * (1 - load.cpu_weight_fraction) * (1 - load.cpu_expert_fraction)
        memory_s += on_gpu / tp / mc.read_bytes_per_s * (mc.decode_efficiency / mc.expert_efficiency - 1)
    if cpu:
        memory_s += cpu / (mc.ram_bandwidth_gbps * 1e9 * mc.ram_efficiency)
    return b, cpu, gpu, kv_card, ep, dp, memory_s


def dequant_seconds(load: Load, mc: Machine, sequences: int = 1) -> float:
    """Unpacking the low-bit weights a step reads (in VRAM), on the cards' non-tensor ALUs: K-quants below
    4 bits and the IQ types spend tens of integer and float operations per weight on bit unpacking, scales
    and codebook lookups (llama.cpp ggml-cuda vecdotq.cuh vec_dot_q2_K_q8_1 / vec_dot_iq2_xxs_q8_1), once
    per weight per step whatever the batch. Where that takes longer than streaming the bytes, decode is
    bound by it: llama.cpp PR #4766 measured 7B Q2_K at 92.69 tok/s and Q4_0 at 121.82 on one RTX 3090
    though Q2_K reads 26 % fewer bytes."""
    if not (load.low_bit_params and mc.fp32_tflops and mc.dequant_ops_per_weight):
        return 0.0
    params = load.low_bit_params * load.shares.read_fraction(sequences) * (1 - load.cpu_weight_fraction)
    return params * mc.dequant_ops_per_weight / max(mc.tp, 1) / (mc.fp32_tflops * 1e12)


# Quantization types whose decode unpacking is ALU-bound on GPUs: the K-quants below 4 bits and the IQ
# (lattice codebook) types below 4 bits. IQ4_XS / IQ4_NL, Q4_K and up unpack with a few operations a weight.
LOW_BIT_PREFIXES = ("Q2_K", "Q3_K", "IQ1_", "IQ2_", "IQ3_")


def low_bit(quant: Any) -> bool:
    """Whether a quantization's weights are in a low-bit type (LOW_BIT_PREFIXES; a GGUF mix by its name)."""
    return str(getattr(quant, "name", "") or "").upper().startswith(LOW_BIT_PREFIXES)


def low_bit_params(m: ModelSpec, quant: Any) -> float:
    """Parameters a low-bit quantization stores (the whole model; step() takes the share read)."""
    return float(m.params) if low_bit(quant) else 0.0


def per_layer_s(mc: Machine, sequences: int) -> float:
    """The fixed time per layer of a step: the graph-replay value, or the eager one for a batch larger than
    the runtime captures (llama.cpp replays only single-token steps as a CUDA graph:
    ggml/src/ggml-cuda/ggml-cuda.cu check_node_graph_compatibility, 'disabling CUDA graphs due to batch
    size > 1'). A step launched kernel by kernel never takes less per layer than its graph replay: the two
    constants are fitted on different builds' records, and where those cross the replay's is the floor."""
    if mc.graph_max_batch and sequences > mc.graph_max_batch and mc.overhead_s_per_layer_eager:
        return max(mc.overhead_s_per_layer_eager, mc.overhead_s_per_layer)
    return mc.overhead_s_per_layer


def link_seconds(load: Load, mc: Machine, sequences: int) -> float:
    """Tensor parallel pays two all-reduces of the hidden state per layer over the card-to-card link: each
    a fixed latency plus the ring transfer, or, on a card whose all-reduce was measured by message size, the
    measured time of that message (allreduce_seconds)."""
    tp = 1 if 1 > mc.tp else mc.tp  # max(mc.tp, 1): TWO
    if tp == 1:
        return 0.0
    if mc.expert_parallel > 1 and load.moe_layers:
        return expert_parallel_link_seconds(load, mc, sequences)
    message = sequences * load.hidden * 2  # bf16 activations
    return ALLREDUCES_PER_LAYER * load.layers * allreduce_seconds(message, tp, mc)


def expert_parallel_link_seconds(load: Load, mc: Machine, sequences: int) -> float:
    """An expert-parallel step's link time: the MoE layers' dispatch and combine (core/moe_parallel.py
    alltoall_seconds), and, where an attention group spans several cards, its all-reduces of its own
    sequences' hidden states."""
    dp = max(min(mc.attention_dp, mc.tp), 1)
    group = max(mc.tp // dp, 1)
    link = alltoall_seconds(sequences, load.hidden, load.experts_active, load.moe_layers, mc.expert_parallel,
                            mc.link_gbps or DEFAULT_LINK_GBPS,
                            ALLREDUCE_LATENCY_S.get(mc.interconnect, ALLREDUCE_LATENCY_S["pcie"]),
                            mc.interconnect == "nvlink")
    if group > 1:
        message = math.ceil(sequences / dp) * load.hidden * 2  # bf16 activations
        link += ALLREDUCES_PER_LAYER * load.layers * allreduce_seconds(message, group, mc)
    return link


def _expert_flops_share(load: Load) -> float:
    """The routed experts' share of a token's weight FLOPs, from the byte shares (the experts a token goes
    through over every weight it multiplies)."""
    sh = load.shares
    routed = sh.experts * sh.route
    return routed / (sh.dense + routed) if sh.dense + routed > 0 else 0.0


def allreduce_seconds(message: float, tp: int, mc: Machine) -> float:
    """One ring all-reduce of `message` bytes over `tp` cards: 2 (tp − 1) / tp × message over the link, plus
    the per-call latency; over NVLink a message above the engines' own kernels' limit goes through NCCL at
    the bus bandwidth NCCL was measured to reach at that size (which includes its latency: nccl_busbw_gbps);
    on the MI300 series under an engine with its own kernel (rocm_custom_allreduce) a message below the limit
    takes that kernel's measured time, a larger one RCCL's (_card_allreduce_seconds) but never less than the
    kernel's at the limit; another card takes its own measurement by message size where there is one."""
    if mc.interconnect == "nvlink":
        if message >= CUSTOM_ALLREDUCE_MAX_BYTES and mc.allreduce_busbw:
            return 2 * (tp - 1) / tp * message / (nccl_busbw_gbps(message, mc) * 1e9)
        if message < CUSTOM_ALLREDUCE_MAX_BYTES:
            return custom_allreduce_seconds(message, tp, mc.link_gbps or NVLINK_DEFAULT_GBPS)
    elif mc.rocm_custom_allreduce:
        link = mc.link_gbps or DEFAULT_LINK_GBPS
        if message < CUSTOM_ALLREDUCE_MAX_BYTES:
            return custom_allreduce_seconds(message, tp, link, ROCM_CUSTOM_ALLREDUCE_US)
        # (a larger message is not faster: the fallback's aggregate link rate is not what a small ring gets)
        return max(_card_allreduce_seconds(message, tp, mc),
                   custom_allreduce_seconds(CUSTOM_ALLREDUCE_MAX_BYTES, tp, link, ROCM_CUSTOM_ALLREDUCE_US))
    return _card_allreduce_seconds(message, tp, mc)


def _card_allreduce_seconds(message: float, tp: int, mc: Machine) -> float:
    """The card's own all-reduce measured by message size (gpus allreduce_busbw), else the interconnect's
    fixed latency per call plus the ring's bytes at the link rate."""
    if mc.allreduce_busbw:
        return measured_allreduce_seconds(mc, message, tp)
    latency = ALLREDUCE_LATENCY_S.get(mc.interconnect, ALLREDUCE_LATENCY_S["pcie"])
    return latency + 2 * (tp - 1) / tp * message / ((mc.link_gbps or DEFAULT_LINK_GBPS) * 1e9)


def custom_allreduce_seconds(message: float, tp: int, link_gbps: float,
                             curves: dict[int, tuple[float, tuple[tuple[int, float], ...]]] | None = None
                             ) -> float:
    """One call of the engines' own all-reduce kernel on `tp` cards: over NVLink CUSTOM_ALLREDUCE_US (measured
    on H100), or the `curves` given with the link rate each was measured at (ROCM_CUSTOM_ALLREDUCE_US). The
    curve of the nearest measured group size at or above `tp` (the largest beyond), interpolated on the
    logarithm of the message size, flat below the smallest message; past the largest, its time plus the ring
    transfer of the further bytes at the link rate (a `curves` table: at the slope of its last measured
    segment where that is slower: the MI355X curve of tensor parallel 8 ends at 1.5 MiB, and its last segment
    adds 8.2 us per 768 KiB where the link rate would add 1.5); on a card of another link rate the part above
    the small-message time scales with the link rate (the fixed part is the kernel's launch and
    synchronisation, not the link's)."""
    table = curves or {n: (CUSTOM_ALLREDUCE_LINK_GBPS, pts) for n, pts in CUSTOM_ALLREDUCE_US.items()}
    ref_gbps, pts = table[min((n for n in table if n >= tp), default=max(table))]
    largest = pts[-1][0]
    us = _interpolated(pts, min(message, largest))
    floor = min(t for _, t in pts)
    extra = max(message - largest, 0.0)
    beyond = 2 * (tp - 1) / tp * extra / (link_gbps * 1e9)
    if curves is not None and extra and len(pts) > 1:
        (b0, t0), (b1, t1) = pts[-2], pts[-1]
        beyond = max(beyond, (t1 - t0) / (b1 - b0) * extra * ref_gbps / link_gbps * 1e-6)
    return (floor + max(us - floor, 0.0) * ref_gbps / link_gbps) * 1e-6 + beyond


def nvlink_curve(gpu: Gpu) -> tuple[tuple[tuple[int, float], ...], int, float]:
    """The all-reduce curve a card's tensor-parallel all-reduce is timed with, the ranks it was measured on
    and the link rate (GB/s) of the card it was measured on: the card's own (gpus allreduce_busbw); over
    NVLink without one, the curve of the built-in card measured on the NVLink generation nearest in link rate
    (on the logarithm), which nccl_busbw_gbps scales by the link rate (rule of thumb: another generation's
    card); ((), 0, 0.0) where none applies (a fixed latency per call plus the link bandwidth)."""
    if gpu.allreduce_busbw:
        return gpu.allreduce_busbw, gpu.allreduce_ranks, gpu.link_gbps or NVLINK_DEFAULT_GBPS
    refs = nvlink_allreduce_cards() if gpu.interconnect == "nvlink" else ()
    if not refs:
        return (), 0, 0.0
    link = gpu.link_gbps or NVLINK_DEFAULT_GBPS
    ref = min(refs, key=lambda g: abs(math.log((g.link_gbps or NVLINK_DEFAULT_GBPS) / link)))
    return ref.allreduce_busbw, ref.allreduce_ranks, ref.link_gbps or NVLINK_DEFAULT_GBPS


def nccl_busbw_gbps(message: float, mc: Machine) -> float:
    """The NVLink all-reduce curve of machine `mc` (nvlink_curve) at `message` bytes, interpolated on the
    logarithm of the size (held at the ends), scaled by the card's link rate over the measured card's. Over
    NVSwitch every card reaches the switch at its full link rate, so a group of fewer cards than measured
    reaches the same bus bandwidth."""
    link = mc.link_gbps or NVLINK_DEFAULT_GBPS
    return _interpolated(mc.allreduce_busbw, message) * link / mc.allreduce_link_gbps


def _interpolated(pts: tuple[tuple[int, float], ...], message: float, log_bw: bool = False) -> float:
    """A bus-bandwidth curve at `message` bytes, held at its ends, interpolated on the logarithm of the size:
    linearly in the bandwidth, or on its logarithm too (`log_bw`)."""
    if message <= pts[0][0]:
        return pts[0][1]
    if log_bw and message >= pts[-1][0]:
        return pts[-1][1]
    for (s0, b0), (s1, b1) in zip(pts, pts[1:], strict=False):
        if message <= s1:
            if log_bw:
                f = math.log(message / s0) / math.log(s1 / s0)
                return math.exp(math.log(b0) + f * (math.log(b1) - math.log(b0)))
            return b0 + (b1 - b0) * math.log(message / s0) / math.log(s1 / s0)
    return pts[-1][1]


def measured_allreduce_seconds(mc: Machine, message: float, tp: int) -> float:
    """One all-reduce of `message` bytes over `tp` cards from the card's measured bus bandwidth curve
    (rccl-tests/nccl-tests: time = bytes × 2 (n-1)/n ÷ busbw), interpolated log-log in the message size; below
    the smallest message measured, that message's time (the latency floor); above the largest, its busbw.
    On a fully connected node (8x MI300X: one Infinity Fabric link to each peer) a group of tp < n cards
    drives tp - 1 of the n - 1 links each, so its bus bandwidth is the measured one × (tp - 1) / (n - 1)."""
    tp = max(tp, 1)
    points = mc.allreduce_busbw
    ranks = mc.allreduce_ranks or tp
    size = max(message, points[0][0])
    busbw = _interpolated(points, size, log_bw=True)
    busbw *= min(1.0, (tp - 1) / max(ranks - 1, 1))
    return 2 * (tp - 1) / tp * size / (busbw * 1e9)


def ceiling(load: Load, mc: Machine) -> float:
    """Bandwidth ÷ bytes per token, nothing else: VRAM at the spec bandwidth (split over tp cards), the
    offloaded part at the RAM bandwidth."""
    return 1 / step(load, _ideal(mc), 1).memory_s


def _ideal(mc: Machine) -> Machine:
    """The cards of `mc` at their spec bandwidth, with no calibrated constant (ceiling)."""
    return Machine(mc.bandwidth_gbps, None, mc.tp, ram_bandwidth_gbps=mc.ram_bandwidth_gbps or 1.0)


def prefill_tokens_per_s(m: ModelSpec, tflops: float | None, efficiency: float, prompt_tokens: int = 512,
                         tp: int = 1, attention_tflops: float | None = None, depth: int = 0,
                         stream_s_per_token: float = 0.0) -> float | None:
    """Compute bound: 2 × active params per token at `tflops`, plus causal attention over the `depth` tokens
    already cached and on average half the prompt, at `attention_tflops` (default: the same rate); or bound
    by the weights each ubatch streams (`stream_s_per_token`, ubatch_stream_seconds) where that is longer."""
    if not tflops or not efficiency:
        return None
    gemm = 2 * m.active
    attention = decode_flops_per_token(m, depth + prompt_tokens // 2) - gemm
    seconds = (gemm / tflops + attention / (attention_tflops or tflops)) / (1e12 * efficiency * max(tp, 1))
    return 1 / max(seconds, stream_s_per_token)


def ubatch_stream_seconds(load: Load, mc: Machine, ubatch: int) -> float:
    """Per prompt token, the time a prefill ubatch of `ubatch` tokens takes to stream the weights it touches
    once at the decode read rate: all of a dense model, and for an MoE every expert some token of the ubatch
    routes to (nearly all of them at a few hundred tokens). It bounds prefill where the bandwidth is small for
    the model (gpt-oss-120b on a 273 GB/s DGX Spark: 63 GB per 512-token ubatch)."""
    b = max(ubatch, 1)
    on_gpu = load.weights_bytes * load.shares.read_fraction(b) * (1 - load.cpu_weight_fraction)
    return on_gpu / max(mc.tp, 1) / mc.read_bytes_per_s / b


# Without flash attention llama.cpp materialises every layer's attention scores in f32:
# ggml_mul_mat(k, q) writes [n_kv, n_tokens, n_head], ggml_soft_max_ext reads it and writes the
# probabilities, ggml_mul_mat(v, kq) reads them (llama.cpp src/llama-graph.cpp build_attn_mha, the path
# without flash_attn): four f32 passes over heads × batch tokens × cache positions per attention layer, a
# memory cost that grows with the prompt.
SCORE_PASSES = 4
SCORE_BYTES = 4  # f32


def attention_score_bytes(m: ModelSpec, prompt_tokens: int, ubatch: int = 512, depth: int = 0) -> int:
    """Bytes the unfused attention moves for a prompt prefilled in ubatches of `ubatch` tokens after `depth`
    cached ones (each ubatch attends to the cache filled so far plus itself; sliding-window layers to at most
    their window)."""
    lay = layout(m)
    heads = m.heads or m.kv_heads
    total, done, step_ = 0, 0, max(ubatch, 1)
    while done < prompt_tokens:
        n = min(step_, prompt_tokens - done)
        kv = depth + done + n
        total += heads * n * (lay.full_layers * kv + lay.window_layers * min(kv, lay.window or kv))
        done += n
    return total * SCORE_BYTES * SCORE_PASSES


# Before llama.cpp's MMQ kernels became the default for quantized weights (PR #8075, 2024-06-23), a prefill
# GEMM on integer-block weights first converted the whole matrix to FP16 (ggml-cuda.cu
# ggml_cuda_op_mul_mat_cublas: `to_fp16_cuda(src0_dd_i, src0_as_f16, ...)` then cublasGemmEx on the copy):
# one pass that reads the quantized bytes and writes 2 bytes per weight, once per ubatch, at memory speed.
FP16_BYTES = 2


def dequantized_bytes(load: Load, m: ModelSpec, prompt_tokens: int, ubatch: int = 512) -> int:
    """Bytes the FP16 conversion of the weight matrices moves for a prompt prefilled in ubatches of `ubatch`
    tokens: per ubatch the quantized matrices read (the token embedding is a row lookup, not a GEMM) and
    their FP16 copy written."""
    ubatches = -(-max(prompt_tokens, 1) // max(ubatch, 1))
    shares = load.shares
    read = load.weights_bytes * (shares.dense + shares.experts)
    embed = 0 if m.tied_embeddings else m.vocab * (m.hidden or 0)
    written = FP16_BYTES * max((m.text_params or m.params) - embed, 0)
    return round(ubatches * (read + written))


def cold_start_seconds(weights_bytes: int, disk_gbps: float) -> float:
    """Load time: weight bytes ÷ disk read speed (the page cache, when warm, is faster)."""
    return weights_bytes / (disk_gbps * 1e9)


def max_sequences(kv_budget_bytes: int, kv_bytes_per_sequence: int) -> int:
    """Concurrent sequences whose caches fit in the memory left after weights and workspace."""
    if kv_bytes_per_sequence <= 0:
        return 0
    return max(kv_budget_bytes, 0) // kv_bytes_per_sequence


def decoded_weight_bytes(m: ModelSpec, mem: Memory, quant: Quant | None) -> int:
    """The resident weights a text decode can read: not a multimodal model's separate vision projector."""
    return mem.weights.total_bytes - projector_bytes(m, quant)


def estimate(m: ModelSpec, mem: Memory, gpu: Gpu, count: int = 1, *, decode_efficiency: float = 0.0,
             prefill_efficiency: float = 0.0, precision: str = "bf16", tp: int = 1,
             context_filled: int | None = None, quant: Quant | None = None, overhead_s_per_layer: float = 0.0,
             overhead_s_per_sequence: float = 0.0, cpu_weight_fraction: float = 0.0,
             ram_bandwidth_gbps: float = 0.0, ram_efficiency: float = 1.0,
             bandwidth_gbps: float | None = None, window_cache: bool = True, fp16_accumulate: bool = False,
             sequences: int = 1, dequant_ops_per_weight: float = 0.0, prefill_ubatch: int = 512,
             expert_efficiency: float = 0.0, overhead_s_per_moe_layer: float = 0.0,
             window_cells: int = 0, rocm_custom_allreduce: bool = False) -> Speed:
    """Single-stream decode (ceiling and realistic), prefill, and the aggregate decode of `sequences`
    concurrent sequences (the same step `cardfit speed` and `deploy` time) for one plan; `window_cells`: what
    a sliding-window layer reads once wrapped (the runtime adapter's window_read_cells, as services/served.py
    loads it). The card's part (decode_card) and the model's (estimate_on)."""
    card = decode_card(gpu, decode_efficiency=decode_efficiency, prefill_efficiency=prefill_efficiency,
                       precision=precision, tp=tp, quant=quant, overhead_s_per_layer=overhead_s_per_layer,
                       overhead_s_per_sequence=overhead_s_per_sequence, ram_bandwidth_gbps=ram_bandwidth_gbps,
                       ram_efficiency=ram_efficiency, bandwidth_gbps=bandwidth_gbps,
                       fp16_accumulate=fp16_accumulate, dequant_ops_per_weight=dequant_ops_per_weight,
                       expert_efficiency=expert_efficiency, overhead_s_per_moe_layer=overhead_s_per_moe_layer,
                       rocm_custom_allreduce=rocm_custom_allreduce)
    load = decode_load(m, mem, quant, mem.context if context_filled is None else context_filled,
                       cpu_weight_fraction, window_cache, window_cells)
    return estimate_on(card, m, load, sequences=sequences, prefill_ubatch=prefill_ubatch)


@record(slots=True)
class DecodeCard:
    """What `estimate` reads of a card set and the runtime's constants, the same for every model, memory and
    context: the every-card plan keeps one per card (services/plan.py) and asks it again at each context."""

    tflops: float | None  # the prefill GEMMs' peak per card
    attention_tflops: float | None  # prefill attention's (None: the GEMMs')
    machine: Machine | None  # the decode step's machine; None: the card's bandwidth is not known
    ideal: Machine | None  # the same cards at their spec bandwidth and nothing else (the ceiling)
    decode_efficiency: float  # 0: no calibrated decode (no realistic figure)
    prefill_efficiency: float
    tp: int


def decode_card(gpu: Gpu, *, decode_efficiency: float = 0.0, prefill_efficiency: float = 0.0,
                precision: str = "bf16", tp: int = 1, quant: Quant | None = None,
                overhead_s_per_layer: float = 0.0, overhead_s_per_sequence: float = 0.0,
                ram_bandwidth_gbps: float = 0.0, ram_efficiency: float = 1.0,
                bandwidth_gbps: float | None = None, fp16_accumulate: bool = False,
                dequant_ops_per_weight: float = 0.0, expert_efficiency: float = 0.0,
                overhead_s_per_moe_layer: float = 0.0, rocm_custom_allreduce: bool = False) -> DecodeCard:
    """The card's part of `estimate` (its arguments of the same names; `rocm_custom_allreduce`: the
    runtime's, allreduce_fields)."""
    bw = bandwidth_gbps or gpu.bandwidth_gbps
    tflops = (prefill_peak_tflops(gpu, quant, fp16_accumulate) if quant is not None else None) \
        or gpu.tflops(precision) or gpu.tflops("bf16")
    attention = attention_peak_tflops(gpu, quant, fp16_accumulate) if quant is not None else None
    if bw is None:
        return DecodeCard(tflops, attention, None, None, decode_efficiency, prefill_efficiency, tp)
    mc = Machine(bandwidth_gbps=bw, tflops=tflops, tp=max(tp, 1), link_gbps=gpu.link_gbps,
                 interconnect=gpu.interconnect, decode_efficiency=decode_efficiency or 1.0,
                 overhead_s_per_layer=overhead_s_per_layer, overhead_s_per_sequence=overhead_s_per_sequence,
                 compute_efficiency=prefill_efficiency or 1.0,
                 ram_bandwidth_gbps=ram_bandwidth_gbps or bw, ram_efficiency=ram_efficiency or 1.0,
                 stream_gbps=gpu.stream_gbps or 0.0, fp32_tflops=gpu.fp32_tflops or 0.0,
                 dequant_ops_per_weight=dequant_ops_per_weight, expert_efficiency=expert_efficiency,
                 overhead_s_per_moe_layer=overhead_s_per_moe_layer,
                 precision=precision_of(quant, gpu) if quant is not None else precision,
                 **allreduce_fields(gpu, rocm_custom_allreduce))
    return DecodeCard(tflops, attention, mc, _ideal(mc), decode_efficiency, prefill_efficiency, tp)


def decode_load(m: ModelSpec, mem: Memory, quant: Quant | None, filled: int, cpu_weight_fraction: float = 0.0,
                window_cache: bool = True, window_cells: int = 0, experts_first: bool = False) -> Load:
    """The model's part of `estimate`: what one decode token reads and computes at `filled` cached tokens,
    the same on every card (the every-card plan works it out once per memory estimate: services/plan.py).
    experts_first: the runtime moves a MoE model's routed experts to system RAM before whole layers
    (offload_split)."""
    shares = weight_shares(m, quant)
    cpu_weight, cpu_expert = offload_split(cpu_weight_fraction, mem.weights_bytes, mem.kv_cache_bytes,
                                           shares.experts if experts_first else 0.0)
    return Load(decoded_weight_bytes(m, mem, quant), shares,
                kv_read_bytes(m, mem, filled, window_cache, window_cells),
                decode_flops_per_token(m, filled), m.layers, m.hidden or m.heads * m.head_dim,
                cpu_weight, cpu_expert, low_bit_params=low_bit_params(m, quant), kv_split=kv_split_ranks(m),
                moe_layers=max(m.layers - m.dense_layers, 0) if m.is_moe else 0)


def offload_split(layer_fraction: float, weights_bytes: int, kv_bytes: int,
                  expert_share: float) -> tuple[float, float]:
    """(share of the weights in system RAM as whole layers, share of the routed experts in system RAM) for
    an offload that moves `layer_fraction` of the weights and cache (core/fit.py: whole layers) off the card.
    With `expert_share` > 0 (the experts' share of the weight bytes, a MoE model on a runtime that offloads
    them first: llama.cpp --fit, common/fit.cpp "for a MoE model, same as dense model but with all MoE
    tensors in system memory", then "convert the dense-only layers ... to full layers ... until all devices
    are full") the same bytes leave as routed experts, attention and dense weights staying on the card; only
    what the experts cannot cover leaves as whole layers."""
    if layer_fraction <= 0 or expert_share <= 0:
        return layer_fraction, 0.0
    layered = weights_bytes + kv_bytes
    moved = layer_fraction * layered
    experts = expert_share * weights_bytes
    if moved <= experts:
        return 0.0, moved / experts
    rest = layered - experts  # every expert in RAM: whole layers of what is left (attention, dense, cache)
    return (min((moved - experts) / rest, 1.0) if rest > 0 else 1.0), 1.0


def estimate_on(card: DecodeCard, m: ModelSpec, load: Load, *, sequences: int = 1,
                prefill_ubatch: int = 512) -> Speed:
    """`estimate` of the model's load (decode_load) on a card's part (decode_card)."""
    per_token = round(load.weights_bytes * load.shares.read_fraction(1)) + load.kv_bytes
    tflops, attention, tp, mc, ideal = card.tflops, card.attention_tflops, card.tp, card.machine, card.ideal
    decode_efficiency = card.decode_efficiency
    if mc is None or ideal is None or not decode_efficiency:
        prefill = prefill_tokens_per_s(m, tflops, card.prefill_efficiency, tp=tp, attention_tflops=attention)
        if mc is None or ideal is None:
            return Speed(None, None, prefill, per_token)
    else:  # the 512-token prompt in ubatches of at most prefill_ubatch tokens
        stream = ubatch_stream_seconds(load, mc, min(prefill_ubatch, 512))
        prefill = prefill_tokens_per_s(m, tflops, card.prefill_efficiency, tp=tp, attention_tflops=attention,
                                       stream_s_per_token=stream)
    realistic = step(load, mc, 1).per_user_tokens_per_s if decode_efficiency else None
    b = max(sequences, 1)
    aggregate = (
        (realistic if b == 1 else step(load, mc, b).aggregate_tokens_per_s) if decode_efficiency else None
    )
    return Speed(1 / step_memory_s(load, ideal, 1), realistic, prefill, per_token, b, aggregate)


def decode_rates_on(card: DecodeCard, load: Load) -> tuple[float | None, float | None]:
    """`estimate_on`'s one-stream decode figures alone (ceiling, realistic), by the same steps: the
    every-card plan lists them for each card and needs the prefill and the aggregate only on a few
    (services/plan.py CardPlan.decode_rates)."""
    mc, ideal = card.machine, card.ideal
    if mc is None or ideal is None:
        return None, None
    realistic = 1 / step_seconds(load, mc, 1) if card.decode_efficiency else None
    return 1 / step_memory_s(load, ideal, 1), realistic


def default_tp(tensor_parallel: bool, count: int, requested: int | None,
               model: ModelSpec | None = None) -> int:
    """vLLM, SGLang and TGI shard over the cards (tensor parallel) — over as many as the model's heads divide
    into, the rest of a set by pipeline; llama.cpp, Ollama and transformers split by layers, which adds
    capacity but not speed."""
    if requested:
        return requested
    if not tensor_parallel:
        return 1
    return max((d for d in range(1, count + 1) if count % d == 0 and (model is None or tp_divides(model, d))),
               default=1)


def tp_divides(model: ModelSpec, tp: int) -> bool:
    """vLLM's rule: attention heads divide by the degree, and KV heads divide by it or it by them."""
    heads, kv = model.heads or model.kv_heads, model.kv_heads
    return heads % tp == 0 and (kv % tp == 0 or tp % kv == 0)


def precision_of(quant: Quant | None, gpu: Gpu) -> str:
    """The tensor-core precision a step's GEMMs run at, the one owner of that choice (machine_for, the
    measured GEMM share of Gpu.gemm_share_at and the peak of prefill_peak_tflops all take it from here): FP8
    where the weights are FP8 and the card computes in FP8; FP4 where they are a W4A4 format whose
    activations are quantized too (NVFP4: ModelOpt checkpoints carry an activation `input_scale` per layer
    and TensorRT-LLM, vLLM and SGLang run them as FP4 x FP4 block-scaled GEMMs on Blackwell) and the card
    has FP4 tensor cores; else BF16/FP16 (weight-only formats dequantize to it; llama.cpp's quantized GGUF
    types too: see prefill_peak_tflops)."""
    requires = getattr(quant, "requires", "")
    if requires in ("fp8", "fp4") and gpu.tflops(requires):
        return requires
    return "bf16"


def allreduce_fields(gpu: Gpu, rocm_custom_allreduce: bool = False) -> dict[str, Any]:
    """The Machine fields of the card's all-reduce curve (nvlink_curve) and, under a runtime that runs its own
    all-reduce kernel on the MI300 series (`rocm_custom_allreduce`: runtimes.toml), whether this card is one
    (ROCM_CUSTOM_ALLREDUCE_ARCHS, over Infinity Fabric)."""
    busbw, ranks, link = nvlink_curve(gpu)
    custom = (rocm_custom_allreduce and gpu.stack == "rocm" and gpu.interconnect == "infinity-fabric"
              and gpu.arch in ROCM_CUSTOM_ALLREDUCE_ARCHS)
    return {"allreduce_busbw": busbw, "allreduce_ranks": ranks, "allreduce_link_gbps": link,
            "rocm_custom_allreduce": custom}


# The prefill of a DeepSeek-V3-architecture model (MLA + 256 fine-grained routed experts, FP8) reaches at
# most this share of the cards' dense FP8 peak: LMSYS's SGLang deployment with prefill-decode disaggregation,
# EP32 over DeepEP, DeepGEMM grouped GEMMs, EPLB and two-batch overlap prefilled 52.3k input tokens/s per node
# of 8 H100 for 2,000-token inputs ("Deploying DeepSeek with PD Disaggregation and Large-scale Expert
# Parallelism on 96 H100 GPUs", https://lmsys.org/blog/2025-05-05-large-scale-ep/, 2025-05-05): 6.5k tokens/s
# a card × (2 × 37 B active + attention over ~1,000 cached tokens, 80 GFLOP a token) = 523 TFLOPS of 1,979.
# The post reports vanilla tensor parallelism on the same cards up to 5x slower, so no TP deployment (the
# ones cardfit plans) beats it.
MLA_MOE_PREFILL_SHARE_MAX = 0.26
# The same rate as a share of what the card's own FP8 GEMMs were measured to reach (an H100's cuBLASLt 1,382.2
# TFLOPS, data/gpus.toml): 523 / 1,382.2. A card is held to that share of its measured GEMM rate (an MI300X,
# whose GEMMs reach 44 % of its datasheet FP8 peak, to 17 % of the peak, not 26 %)
MLA_MOE_PREFILL_GEMM_SHARE_MAX = 0.378


def mla_moe_prefill_share_max(gpu: Gpu, precision: str) -> float:
    """The most of the dense peak a DeepSeek-V3-architecture prefill reaches on this card: the best published
    rate as a share of the card's measured GEMM rate at `precision` (at FP8 where that precision was not
    measured on its architecture); the share of the peak where the card's GEMMs were never measured."""
    share = measured_gemm_share(gpu, precision)
    return MLA_MOE_PREFILL_GEMM_SHARE_MAX * share if share else MLA_MOE_PREFILL_SHARE_MAX


def measured_gemm_share(gpu: Gpu, precision: str) -> float:
    """The share of its dense peak the card's vendor GEMMs were measured to reach at `precision`, at FP8
    where that precision was not measured on its architecture (Hopper's BF16); 0 where nothing was."""
    return gpu.gemm_share_at(precision) or gpu.gemm_share_at("fp8") or 0.0


def mla_moe(m: ModelSpec) -> bool:
    """A DeepSeek-V3-architecture model: MLA attention and routed experts (MLA_MOE_PREFILL_SHARE_MAX)."""
    return m.attention == "mla" and m.is_moe


def machine_for(rt: RuntimeProfile, gpu: Gpu, tp: int, tflops: float | None, *, precision: str,
                ram_bandwidth_gbps: float = 0.0, bandwidth_gbps: float | None = None,
                quantized: bool = False) -> Machine:
    """One stage of `tp` cards running runtime `rt`, whose GEMMs run at `precision` (precision_of) with a
    dense peak of `tflops` per card, with the runtime's calibrated constants (the compute efficiency of its
    quantized kernels for integer-block weights where it has one), capped at the share of the peak the
    card's vendor GEMMs were measured to reach at that precision (on a ROCm card, the runtime's fitted share
    of that: rocm_gemm_share). The constants are read through
    core/constants.py, so validation's leave-one-source-out refits reach every caller."""
    from .constants import fitted

    def k(field: str) -> float:
        return fitted(rt, field, gpu.stack)

    bw = bandwidth_gbps or gpu.bandwidth_gbps or 0.0
    field, _ = prefill_efficiency_field(rt.prefill_efficiency, rt.prefill_efficiency_quantized,
                                        quantized, rt.prefill_efficiency_metal, gpu)
    efficiency = (k(field) if field != "prefill_efficiency" else 0.0) or k("prefill_efficiency") or 1.0
    cap = gpu.gemm_share_at(precision)
    if gpu.stack == "rocm" and k("rocm_gemm_share"):  # the engine's GEMMs on ROCm: a share of that best
        cap = (cap or efficiency) * k("rocm_gemm_share")
    compute = power_capped(efficiency, tflops, gpu.tdp_w, k("prefill_tflops_per_watt"), cap)
    # a record's engine whose prompt attention ran in a kernel of its own rate (services/deploy.py
    # predict_serving sets it while it times that record; 0 otherwise): the card's measured rate otherwise
    attention = k("prompt_attention_tflops") or gpu.attention_tflops or 0.0
    if not attention and precision == "fp4" and tflops:
        # no runtime runs attention in FP4 (its Q·K and P·V products stay BF16): a prompt's attention FLOPs
        # go at the card's BF16 rate with the same efficiency and measured cap
        bf16 = gpu.tflops("bf16") or 0.0
        attention = bf16 * power_capped(efficiency, bf16, gpu.tdp_w, k("prefill_tflops_per_watt"),
                                        gpu.gemm_share_at("bf16"))
    return Machine(bandwidth_gbps=bw, tflops=tflops, tp=max(tp, 1), link_gbps=gpu.link_gbps,
                   interconnect=gpu.interconnect, decode_efficiency=k("decode_efficiency") or 1.0,
                   overhead_s_per_layer=k("decode_overhead_us_per_layer") * 1e-6,
                   overhead_s_per_sequence=k("decode_overhead_us_per_sequence") * 1e-6,
                   graph_max_batch=(graph_max_batch(rt, gpu.memory_gb, tp) if gpu.stack in rt.graph_stacks
                                    else 0),
                   overhead_s_per_layer_eager=k("decode_overhead_us_per_layer_v0") * 1e-6,
                   overhead_s_per_layer_prefill=k("prefill_overhead_us_per_layer") * 1e-6,
                   prefill_graph_tokens=int((gpu.sm100 and rt.prefill_graph_tokens_sm100)
                                            or k("prefill_graph_tokens")),
                   compute_efficiency=compute,
                   ram_bandwidth_gbps=ram_bandwidth_gbps or bw, ram_efficiency=k("ram_efficiency") or 1.0,
                   stream_gbps=gpu.stream_gbps or 0.0, fp32_tflops=gpu.fp32_tflops or 0.0,
                   dequant_ops_per_weight=k("dequant_ops_per_weight"),
                   expert_efficiency=k("expert_efficiency"),
                   overhead_s_per_moe_layer=k("moe_overhead_us_per_layer") * 1e-6,
                   **allreduce_fields(gpu, rt.rocm_custom_allreduce),
                   attention_tflops=attention, precision=precision,
                   kv_read_copies=k("kv_read_copies") or 1.0)


# NVIDIA GeForce cards publish their FP16/BF16 tensor rate with FP32 accumulation, which runs at half their
# FP16-accumulate rate; professional and datacenter parts run both at full rate (NVIDIA Ada GPU Architecture
# whitepaper, Appendix A table 2: RTX 4090 330.3 dense FP16 TFLOPS with FP16 accumulate, 165.2 with FP32;
# NVIDIA Ampere GA102 whitepaper table 9: RTX 3090 142 vs 71). The catalog holds the FP32-accumulate figure.
GEFORCE_FP16_ACCUMULATE_GAIN = 2.0
# Hopper reaches its dense tensor peak only with the warpgroup wgmma instructions; kernels built on the older
# mma.sync (llama.cpp's MMQ and small-batch GEMMs) reach about 2/3 of it (Shah et al., "FlashAttention-3",
# 2024, section 2.2: "mma.sync ... can only reach 2/3 of the peak throughput of the Hopper Tensor Cores").
HOPPER_MMA_SYNC_SHARE = 2 / 3


def prefill_peak_tflops(gpu: Gpu, quant: Quant | None, fp16_accumulate: bool = False) -> float | None:
    """The dense tensor rate prefill GEMMs can reach: the card's rate at the precision used; for runtimes that
    accumulate in FP16 (llama.cpp: cuBLAS CUBLAS_COMPUTE_16F for F16 weights, int8 MMA for quantized types,
    ggml/src/ggml-cuda/ggml-cuda.cu ggml_cuda_op_mul_mat_cublas) the full FP16-accumulate rate of GeForce
    cards, and on Hopper the mma.sync share."""
    precision = precision_of(quant, gpu)
    top = gpu.tflops(precision) or gpu.tflops("bf16")
    if not top or not fp16_accumulate or precision == "fp4":  # FP16 accumulation is a float GEMM's choice
        return top
    if _geforce(gpu):
        top *= GEFORCE_FP16_ACCUMULATE_GAIN
    if gpu.arch == "hopper":
        top *= HOPPER_MMA_SYNC_SHARE
    return top


def _geforce(gpu: Gpu) -> bool:
    return gpu.vendor == "nvidia" and gpu.tier == "consumer" and gpu.arch in ("turing", "ampere", "ada",
                                                                              "blackwell")


def attention_peak_tflops(gpu: Gpu, quant: Quant | None, fp16_accumulate: bool = False) -> float | None:
    """The tensor rate of prefill attention. llama.cpp's flash-attention kernel accumulates K·Q in FP32 and
    the softmax·V product in FP16 (ggml-cuda fattn-mma-f16.cuh: `tile_C_KQ = tile<16, 8, float>`,
    `tile_C_VKQ = tile<16, 4, half2>`): half its FLOPs run at the FP32-accumulate rate, which GeForce cards
    run at half the FP16 one, so attention goes at 2/3 of the rate the GEMMs reach there."""
    if precision_of(quant, gpu) == "fp4":  # attention does not run in FP4 (machine_for)
        return gpu.tflops("bf16")
    full = prefill_peak_tflops(gpu, quant, fp16_accumulate)
    if not full or not fp16_accumulate or not _geforce(gpu):
        return full
    half = full / GEFORCE_FP16_ACCUMULATE_GAIN
    return 1 / (0.5 / half + 0.5 / full)


def prefill_efficiency(float_eff: float, quantized_eff: float, quant: Any, metal_eff: float = 0.0,
                       gpu: Gpu | None = None) -> float:
    """The runtime's prefill efficiency for these weights on this card: its share on Apple GPUs where it has
    one, else its quantized-kernel share for integer blocks where it has one."""
    return prefill_efficiency_field(float_eff, quantized_eff, is_quantized(quant), metal_eff, gpu)[1]


def power_capped(efficiency: float, peak_tflops: float | None, tdp_w: int | None,
                 tflops_per_watt: float, gemm_share: float = 0.0) -> float:
    """The share of the dense peak a card sustains in prefill: the runtime's efficiency, or less where the
    board power cannot feed it. A datasheet peak is at the boost clock; under a long run of tensor GEMMs a
    card whose power limit is small for its peak holds a lower clock (an RTX 6000 Ada, 300 W for 364 TFLOPS,
    prefills at a third of its peak where the RTX 4090, 450 W for 330, reaches a half). The runtime's
    `prefill_tflops_per_watt` (fitted) is the rate its kernels reach per watt of board power (tdp_w).
    `gemm_share` (the card's Gpu.gemm_share, 0: none) is the share of the peak its vendor's own GEMM library
    was measured to reach: no runtime's GEMMs beat it (an MI300X holds about 1.2 GHz of its 2.1 GHz boost
    under dense BF16 GEMMs: 708 of 1,307 TFLOPS, data/gpus.toml)."""
    if gemm_share and efficiency:
        efficiency = min(efficiency, gemm_share)
    if not (efficiency and tflops_per_watt and tdp_w and peak_tflops):
        return efficiency
    return min(efficiency, tflops_per_watt * tdp_w / peak_tflops)


def prefill_efficiency_field(float_eff: float, quantized_eff: float, quantized: bool, metal_eff: float = 0.0,
                             gpu: Gpu | None = None) -> tuple[str, float]:
    """(runtimes.toml field, value) of the prefill efficiency that applies."""
    if metal_eff and gpu is not None and gpu.stack == "metal":
        return "prefill_efficiency_metal", metal_eff
    if quantized_eff and quantized:
        return "prefill_efficiency_quantized", quantized_eff
    return "prefill_efficiency", float_eff


def is_quantized(quant: Any) -> bool:
    """Weights in integer blocks (GGUF types and mixes, GPTQ/AWQ, NF4, MXFP4, INT8): llama.cpp prefills them
    through its MMQ kernels (int8 tensor-core tiles dequantized on the fly), float files through cuBLAS."""
    if quant is None:
        return False
    if getattr(quant, "kind", None) == "float":
        return False
    name = str(getattr(quant, "name", "")).lower()
    return not name.startswith(("f16", "bf16", "f32", "fp16", "fp32"))

"""vLLM (`vllm serve`): a vLLM-like engine (vllm_like.py) and its launch line. Flags: vllm/engine/arg_utils.py
(EngineArgs.add_cli_args), checked against tests/data/runtime_options/vllm.toml."""

from __future__ import annotations

import json
import math
from dataclasses import replace

from ..catalog.gpus import Gpu
from ..catalog.models import ModelSpec
from ..catalog.quants import Quant
from ..catalog.records import record
from ..core.memory import MemorySettings
from .base import NotModelled
from .launch import DYNAMO_NOTE, Launch, LaunchArgs, ServeFlags, SpecLaunch, serve_line
from .lora import LORA_BYTES, LoraPlan, LoraSet, lora_params
from .vllm_like import MXFP4_PAD, VllmLike, mxfp4_backend

# vLLM allocates, in every LoRA-wrapped linear layer, `max_loras` slots of A (max_lora_rank × input) and B
# (output × max_lora_rank) per packed slice in the LoRA dtype; under tensor parallelism a column-parallel
# layer keeps A whole and B's output sharded, a row-parallel layer A's input sharded and B whole
# (BaseLinearLayerWithLoRA.create_lora_weights, without fully_sharded_loras); up to --max-cpu-loras adapters
# wait in host RAM
LORA_SOURCE = ("https://github.com/vllm-project/vllm/blob/1ace43ed7b3c79daba3b4828fdaf30dcb4094adb/"
               "vllm/lora/layers/base_linear.py")

FLAGS = ServeFlags(tp="--tensor-parallel-size", pp="--pipeline-parallel-size",
                   max_model_len="--max-model-len", max_num_seqs="--max-num-seqs",
                   memory_fraction="--gpu-memory-utilization", kv_dtype="--kv-cache-dtype",
                   batched_tokens="--max-num-batched-tokens",
                   nodes=("--nnodes", "--node-rank", "--master-addr", "HEAD_NODE_IP"),
                   data_parallel="--data-parallel-size",
                   # vllm/engine/arg_utils.py: --enable-expert-parallel shards the experts over DP × TP ranks;
                   # --tensor-parallel-size, --max-num-seqs: one data-parallel rank's (its own engine core)
                   ep_switches=("--enable-expert-parallel",), per_rank=True,
                   # docs "Disaggregated Prefilling": each worker names a KV connector; NIXL's moves the
                   # cache GPU to GPU, both roles taking kv_both
                   pd_flag="--kv-transfer-config",
                   pd_value='{"kv_connector":"NixlConnector","kv_role":"kv_both"}',
                   pd_note="a {role} worker: send requests through a prefill/decode proxy (vLLM's "
                           "examples/online_serving/disaggregated_serving, or llm-d)")


# vLLM's MXFP4 MoE layer (gpt-oss) on Hopper, under the triton_kernels backend (vllm_like.py mxfp4_backend),
# re-lays the expert scales out for its MMA: vllm/model_executor/layers/quantization/utils/mxfp4_utils.py
# _swizzle_mxfp4 -> triton_kernels make_default_matmul_mxfp4_w_scale_layout(mx_axis=1, num_warps=8):
# HopperMXScaleLayout (below SM90 a StridedLayout view, no copy), whose swizzle_data pads each matrix's rows
# (gate_up: 2 x intermediate, down: hidden) to a multiple of 2 x num_warps x 2 x 8 = 256 and its scale columns
# to 2, into a new tensor. vLLM keeps that copy beside the loaded e8m0 scales (Mxfp4MoEMethod.
# process_weights_after_loading deletes layer.w13_weight / w2_weight, never the *_weight_scale params) and
# casts the expert biases to float32 (`layer.w13_bias.to(torch.float32)`). Read in the vLLM wheels 0.12.0
# (the first to vendor triton_kernels: vllm/third_party/triton_kernels), 0.14.1 and 0.22.0 (there in
# fused_moe/oracle/mxfp4.py convert_gpt_oss_weight_to_mxfp4_moe_kernel_format, the same three steps),
# https://pypi.org/project/vllm/0.14.1/. gpt-oss-120b on one H100: 3.54 GiB more than the file's experts
# (vllm-project/vllm#33155, v0.14.1: 'Model loading took 64.38 GiB'). vLLM 0.25.0 frees the loaded scales
# ("drop the now-dead weight/scale Parameters to free their memory": `del layer.w13_weight_scale`, `del
# layer.w2_weight_scale` after _swizzle_mxfp4, vllm/model_executor/layers/fused_moe/oracle/mxfp4.py lines
# 1150-1156 of the wheel 0.25.0, https://pypi.org/project/vllm/0.25.0/; absent in 0.24.0): from it only the
# swizzled copy's padding beyond the loaded scales and the float32 biases remain (data/releases.toml
# mxfp4_scales_freed).
HOPPER_SCALE_ROWS = 256  # 2 * num_warps(8) * 2 * 8 (HopperMXScaleLayout SWIZZLE_ALIGN_M)
HOPPER_SCALE_COLS = 2  # SWIZZLE_ALIGN_K
MXFP4_BLOCK = 32  # weights per e8m0 scale (OCP MX v1.0)


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def triton_hopper_scale_bytes(inter: int, hidden: int, scales_freed: bool = False) -> int:
    """Bytes per expert that vLLM's triton_kernels MXFP4 layer holds on a Hopper card beyond the file's
    (padded) expert weights and scales: the swizzled copy of the scales (HopperMXScaleLayout) and the biases
    cast from bf16 to float32 (2 bytes more an element). `inter`: the intermediate size per rank after its
    64-padding. `scales_freed` (vLLM 0.25+): the loaded e8m0 scales (one byte per 32 weights of the
    gate_up and down matrices) are freed once swizzled, so only the copy's padding beyond them stays."""
    swizzled = (_round_up(2 * inter, HOPPER_SCALE_ROWS) * _round_up(hidden // MXFP4_BLOCK, HOPPER_SCALE_COLS)
                + _round_up(hidden, HOPPER_SCALE_ROWS) * _round_up(inter // MXFP4_BLOCK, HOPPER_SCALE_COLS))
    loaded = 2 * inter * (hidden // MXFP4_BLOCK) + hidden * (inter // MXFP4_BLOCK) if scales_freed else 0
    return swizzled - loaded + 2 * (2 * inter + hidden)


# NVIDIA Dynamo's vLLM worker (`python3 -m dynamo.vllm --model M`, vLLM's engine arguments beside Dynamo's
# own): --disaggregation-mode prefill|decode names its role and Dynamo sets up the NIXL connector itself
# (ai-dynamo/dynamo components/src/dynamo/vllm/backend_args.py @d195d280 DynamoVllmArgGroup;
# examples/backends/vllm/launch/disagg.sh @8401366d passes no --kv-transfer-config)
DYNAMO_FLAGS = replace(FLAGS, pd_flag="--disaggregation-mode", pd_value="{role}", pd_note=DYNAMO_NOTE)


@record(slots=True)
class Vllm(VllmLike):
    KV_NAMES = {"fp8": "fp8", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}  # vLLM CacheDType
    ONLINE_QUANT = {"fp8": "fp8"}  # quantized on load from a 16-bit checkpoint (QuantizationMethods)
    EXPERT_PARALLEL = True  # attention DP + EP layouts (services/deploy.py expert_parallel)
    # attention DP without expert parallelism: for a MoE model `--data-parallel-size N` without
    # --enable-expert-parallel runs N engine cores whose MoE layers "form a tensor parallel group of size DP x
    # TP" (docs "Data Parallel Deployment", https://docs.vllm.ai/en/latest/serving/data_parallel_deployment/),
    # so a pinned --attention-dp without --expert-parallel launches it (runtimes/launch.py attention_groups).
    # Only the MoE layers span the cores: every other weight (attention, embedding, output head, a dense or
    # shared-expert MLP) is each core's own over its --tensor-parallel-size ranks (DP_GROUPS_ALL_BUT_EXPERTS:
    # services/deploy.py attention_dp_memory, core/speed.py Machine.dp_holds_all_but_experts). A dense
    # model's DP ranks are whole replicas, no attention groups (DP_GROUPS_MOE_ONLY: deploy refuses the pin)
    ATTENTION_DP_ALONE = True
    DP_GROUPS_ALL_BUT_EXPERTS = True
    DP_GROUPS_MOE_ONLY = True
    PD_DISAGGREGATION = True  # prefill / decode workers (services/deploy.py disaggregation)

    # --speculative-config's "method" (vllm/config/speculative.py SpeculativeConfig.method: "ngram",
    # "eagle3", "draft_model", "mtp"), by cardfit's name
    SPECULATIVE = {"draft": "draft_model", "eagle3": "eagle3", "mtp": "mtp", "ngram": "ngram"}

    def weights_padding_bytes(self, m: ModelSpec, q: Quant | None, s: MemorySettings, gpu: Gpu | None) -> int:
        """The MXFP4 experts' tile padding (VllmLike), and on a Hopper card under the triton_kernels backend
        the swizzled copy of their scales (from 0.25 less the loaded scales it frees) and their float32 biases
        (triton_hopper_scale_bytes), on every rank of a tensor-parallel set."""
        pad = VllmLike.weights_padding_bytes(self, m, q, s, gpu)  # (a slots record: no zero-argument super())
        backend = self.profile.mxfp4_backend or mxfp4_backend(gpu)
        if backend != "triton" or gpu is None or gpu.arch != "hopper" \
                or getattr(q, "id", "") != "mxfp4" or not (m.is_moe and m.moe_intermediate and m.hidden):
            return pad
        tp = max(s.tp, 1)
        inter = _round_up(-(-m.moe_intermediate // tp), MXFP4_PAD["triton"][0])
        per_expert = triton_hopper_scale_bytes(inter, m.hidden, self.profile.has("mxfp4_scales_freed"))
        return pad + m.experts * per_expert * tp * (m.layers - m.dense_layers)

    def stack_flags(self, port: int, role: str,
                    split: tuple[float, ...]) -> tuple[list[str], list[tuple[str, str]]]:
        # an embedder or reranker runs as a pooling model (vllm serve --runner pooling)
        return ["--port", str(port), *(["--runner", "pooling"] if role in ("embed", "rerank") else [])], []

    def launch(self, model: str, a: LaunchArgs) -> Launch:
        return serve_line(a, ("vllm", "serve"), [model], FLAGS, self.ONLINE_QUANT)

    def lora_plan(self, m: ModelSpec, lora: LoraSet, users: int, tp: int) -> LoraPlan:
        # LORA_SOURCE: max_loras slots (default: one per adapter a batch of `users` can mix) beside every
        # attention and MLP projection on each card, every adapter whole in host RAM
        if lora.targets_given or lora.file_type or lora.paths or lora.scale is not None:
            raise NotModelled("lora_targets, lora_paths, lora_type and lora_scale are SGLang's and "
                              "llama.cpp's: vLLM's slots cover every attention and MLP projection, and its "
                              "adapters are loaded through its API (/v1/load_lora_adapter)")
        slots = lora.slots or min(lora.adapters, users)
        flags = ("--enable-lora", "--max-loras", str(slots), "--max-lora-rank", str(lora.rank),
                 "--max-cpu-loras", str(max(lora.adapters, slots)))
        return LoraPlan(slots * lora_params(m, lora.rank, tp) * LORA_BYTES,
                        lora.adapters * lora_params(m, lora.rank, 1) * LORA_BYTES, slots, flags,
                        f"{slots} LoRA slots of rank {lora.rank} on the GPU (--max-loras), {lora.adapters} "
                        "adapters in host RAM (--max-cpu-loras)")

    def dynamo_launch(self, model: str, a: LaunchArgs) -> Launch:
        return serve_line(a, ("python3", "-m", "dynamo.vllm"), ["--model", model], DYNAMO_FLAGS,
                          self.ONLINE_QUANT)

    def kv_offload_flags(self, a: LaunchArgs) -> list[str]:
        """vLLM's native CPU offload (OffloadingConnector): --kv-offloading-size in GiB, the whole buffer
        summed over the tensor- and pipeline-parallel ranks (vllm/config/cache.py CacheConfig
        kv_offloading_size; tests/v1/kv_connector: 8 GiB at TP 2 x PP 2 is 2 GiB per rank)."""
        gib = math.floor(a.kv_offload_gb * 1e9 / 2**30 * 100) / 100
        return ["--kv-offloading-backend", "native", "--kv-offloading-size", f"{gib:g}"]

    def speculative_flags(self, s: SpecLaunch) -> list[str]:
        config: dict[str, object] = {"method": self.SPECULATIVE[s.method]}
        if s.draft:
            config["model"] = s.draft
        config["num_speculative_tokens"] = s.tokens
        return ["--speculative-config", json.dumps(config)]


ADAPTER = Vllm

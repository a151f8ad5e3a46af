"""vLLM (`vllm serve`): a vLLM-like engine (vllm_like.py) and its launch line. Flags: vllm/engine/arg_utils.py
(EngineArgs.add_cli_args), checked against tests/data/runtime_options/vllm.toml."""

from __future__ import annotations

import json
import math
from dataclasses import replace

from ..catalog.records import record
from .launch import DYNAMO_NOTE, Launch, LaunchArgs, ServeFlags, SpecLaunch, serve_line
from .vllm_like import VllmLike

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
    PD_DISAGGREGATION = True  # prefill / decode workers (services/deploy.py disaggregation)

    # --speculative-config's "method" (vllm/config/speculative.py SpeculativeConfig.method: "ngram",
    # "eagle3", "draft_model", "mtp"), by cardfit's name
    SPECULATIVE = {"draft": "draft_model", "eagle3": "eagle3", "mtp": "mtp", "ngram": "ngram"}

    def stack_flags(self, port: int, role: str,
                    split: tuple[float, ...]) -> tuple[list[str], list[tuple[str, str]]]:
        # an embedder or reranker runs as a pooling model (vllm serve --runner pooling)
        return ["--port", str(port), *(["--runner", "pooling"] if role in ("embed", "rerank") else [])], []

    def launch(self, model: str, a: LaunchArgs) -> Launch:
        return serve_line(a, ("vllm", "serve"), [model], FLAGS, self.ONLINE_QUANT)

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

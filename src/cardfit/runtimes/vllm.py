"""vLLM (`vllm serve`): a vLLM-like engine (vllm_like.py) and its launch line. Flags: vllm/engine/arg_utils.py
(EngineArgs.add_cli_args), checked against tests/data/runtime_options/vllm.toml."""

from __future__ import annotations

from ..catalog.records import record
from .launch import Launch, LaunchArgs, nodes_flags
from .vllm_like import VllmLike


@record(slots=True)
class Vllm(VllmLike):
    KV_NAMES = {"fp8": "fp8", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}  # vLLM CacheDType
    ONLINE_QUANT = {"fp8": "fp8"}  # quantized on load from a 16-bit checkpoint (QuantizationMethods)

    def launch(self, model: str, a: LaunchArgs) -> Launch:
        argv = ["vllm", "serve", model, "--tensor-parallel-size", str(a.tp)]
        if a.pp > 1:
            argv += ["--pipeline-parallel-size", str(a.pp)]
        argv += ["--max-model-len", str(a.max_model_len), "--max-num-seqs", str(a.max_num_seqs)]
        if a.gpu_memory_utilization is not None:
            argv += ["--gpu-memory-utilization", f"{a.gpu_memory_utilization:g}"]
        if a.kv:
            argv += ["--kv-cache-dtype", a.kv]
        if a.max_batched_tokens:
            argv += ["--max-num-batched-tokens", str(a.max_batched_tokens)]
        quant, notes = a.quant_flag(self.ONLINE_QUANT)
        nodes, more = nodes_flags(a.nodes, "--nnodes", "--node-rank", "--master-addr", "HEAD_NODE_IP")
        return Launch(a.runtime, tuple(argv + quant + nodes), notes=tuple(notes + more), program_words=2)


ADAPTER = Vllm

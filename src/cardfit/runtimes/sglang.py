"""SGLang (`python -m sglang.launch_server`): a vLLM-like engine (vllm_like.py) and its launch line. Flags:
python/sglang/srt/server_args.py (ServerArgs.add_cli_args), checked against
tests/data/runtime_options/sglang.toml."""

from __future__ import annotations

from ..catalog.records import record
from .launch import Launch, LaunchArgs, nodes_flags
from .vllm_like import VllmLike


@record(slots=True)
class SGLang(VllmLike):
    KV_NAMES = {"fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}  # --kv-cache-dtype choices
    ONLINE_QUANT = {"fp8": "fp8"}  # quantized on load from a 16-bit checkpoint (QUANTIZATION_CHOICES)

    def launch(self, model: str, a: LaunchArgs) -> Launch:
        argv = ["python", "-m", "sglang.launch_server", "--model-path", model, "--tp-size", str(a.tp)]
        if a.pp > 1:
            argv += ["--pp-size", str(a.pp)]
        argv += ["--context-length", str(a.max_model_len), "--max-running-requests", str(a.max_num_seqs)]
        if a.gpu_memory_utilization is not None:
            argv += ["--mem-fraction-static", f"{a.gpu_memory_utilization:g}"]
        if a.kv:
            argv += ["--kv-cache-dtype", a.kv]
        if a.max_batched_tokens:
            argv += ["--chunked-prefill-size", str(a.max_batched_tokens)]
        quant, notes = a.quant_flag(self.ONLINE_QUANT)
        nodes, more = nodes_flags(a.nodes, "--nnodes", "--node-rank", "--dist-init-addr",
                                  "HEAD_NODE_IP:50000")
        return Launch(a.runtime, tuple(argv + quant + nodes), notes=tuple(notes + more), program_words=3)


ADAPTER = SGLang

"""TensorRT-LLM (`trtllm-serve`, PyTorch backend): allocates like vLLM (a workspace for a batch of
max_num_tokens, then a paged KV pool), so its adapter is the vLLM-like one plus its own launch line
(tensorrt_llm/commands/serve.py options, checked against tests/data/runtime_options/trtllm-serve.toml)."""

from __future__ import annotations

from dataclasses import replace

from ..catalog.records import record
from .launch import Launch, LaunchArgs
from .vllm_like import VllmLike

YAML = "cardfit-trtllm.yaml"  # the LLM API options trtllm-serve reads (--config), as launch() writes them

# NVIDIA Dynamo's TensorRT-LLM worker (`python3 -m dynamo.trtllm`) names the same LLM API arguments with its
# own flags and reads the rest from a YAML file (--extra-engine-args), running the PyTorch backend (it has no
# --backend): ai-dynamo/dynamo components/src/dynamo/trtllm/backend_args.py
# @0a6a115c6cd15ae95647e90c55be2ea06b36e66f DynamoTrtllmArgGroup (--model, its obsolete alias --model-path;
# --tensor-parallel-size, --pipeline-parallel-size, --expert-parallel-size, --max-batch-size, --max-seq-len,
# --max-num-tokens, --free-gpu-memory-fraction, --extra-engine-args), started as
# examples/backends/trtllm/launch/agg.sh @15bb5238 does behind `python3 -m dynamo.frontend`. trtllm-serve's
# flag -> Dynamo's
DYNAMO_FLAGS = {"--tp_size": "--tensor-parallel-size", "--pp_size": "--pipeline-parallel-size",
                "--ep_size": "--expert-parallel-size", "--max_batch_size": "--max-batch-size",
                "--max_seq_len": "--max-seq-len", "--max_num_tokens": "--max-num-tokens",
                "--kv_cache_free_gpu_memory_fraction": "--free-gpu-memory-fraction",
                "--config": "--extra-engine-args"}
DYNAMO_WORKER = ("python3", "-m", "dynamo.trtllm")
DYNAMO_AGG_NOTE = ("a worker under NVIDIA Dynamo: start `python3 -m dynamo.frontend` once in front of it "
                   "(port 8000)")


@record(slots=True)
class TrtLlm(VllmLike):
    KV_NAMES = {"fp8": "fp8", "fp8_e4m3": "fp8"}  # KvCacheConfig dtype
    # attention DP + EP layouts (services/deploy.py expert_parallel): the LLM API's enable_attention_dp runs
    # attention data-parallel over all tp_size ranks (one group per rank), --ep_size shards the experts
    EXPERT_PARALLEL = True
    ATTENTION_DP_ALL_RANKS = True
    # enable_attention_dp without --ep_size: the experts tensor-parallel over all tp_size ranks (Mapping
    # 'if moe_tp_size == -1 and moe_ep_size == -1: moe_tp_size = moe_world_size // moe_cluster_size;
    # moe_ep_size = 1', moe_world_size = tp_size, tensorrt_llm/mapping.py,
    # https://github.com/NVIDIA/TensorRT-LLM/blob/b35ac1b64368513d215c57d2ed01d62d910df8da/tensorrt_llm/mapping.py),
    # the attention GEMM weights on every rank and a dense FFN sharded over all of them (docs "Parallelism in
    # TensorRT LLM", https://nvidia.github.io/TensorRT-LLM/features/parallel-strategy.html: "Data Parallelism
    # (DP)", "FFN Module Parallelism"): the layout a pinned --attention-dp without --expert-parallel is timed
    # with, so the line states it (runtimes/launch.py attention_groups)
    ATTENTION_DP_ALONE = True

    def launch(self, model: str, a: LaunchArgs) -> Launch:
        argv = ["trtllm-serve", model, "--backend", "pytorch", "--tp_size", str(a.tp)]
        if a.pp > 1:
            argv += ["--pp_size", str(a.pp)]
        dp = a.attention_dp  # above 1 with EP or alone (ATTENTION_DP_ALONE: build)
        if a.expert_parallel > 1:
            argv += ["--ep_size", str(a.expert_parallel)]
        # with attention DP, max_batch_size is each rank's (its own requests)
        argv += ["--max_batch_size", str(max(a.max_num_seqs // dp, 1)), "--max_seq_len", str(a.max_model_len)]
        if a.max_batched_tokens:
            argv += ["--max_num_tokens", str(a.max_batched_tokens)]
        if a.gpu_memory_utilization is not None:
            argv += ["--kv_cache_free_gpu_memory_fraction", f"{a.gpu_memory_utilization:g}"]
        files: tuple[tuple[str, str], ...] = ()
        # the LLM API takes the KV cache dtype in KvCacheConfig and attention DP as enable_attention_dp, set
        # from a YAML file (--config)
        yaml = (f"kv_cache_config:\n  dtype: {a.kv}\n" if a.kv else "") + ("enable_attention_dp: true\n"
                                                                            if dp > 1 else "")
        if yaml:
            files = (("cardfit-trtllm.yaml", yaml),)
            argv += ["--config", "cardfit-trtllm.yaml"]
        _, notes = a.quant_flag({})  # no quantization on load: the checkpoint's own format
        if a.nodes > 1:
            notes.append(f"launch on {a.nodes} nodes through MPI or Slurm (trtllm-llmapi-launch)")
        return Launch(a.runtime, tuple(argv), files=files, notes=tuple(notes))

    def dynamo_launch(self, model: str, a: LaunchArgs) -> Launch:
        """The trtllm-serve line's settings as Dynamo's worker takes them (DYNAMO_FLAGS), the same YAML."""
        own = self.launch(model, a)
        words = list(own.argv[2:])  # past `trtllm-serve MODEL`
        i = words.index("--backend")
        del words[i:i + 2]  # Dynamo's worker runs the PyTorch backend
        argv = [*DYNAMO_WORKER, "--model", model, *(DYNAMO_FLAGS.get(w, w) for w in words)]
        return replace(own, argv=tuple(argv), program_words=3, notes=(*own.notes, DYNAMO_AGG_NOTE))

    def cuda_graph_cap(self, launch: Launch, max_bs: int) -> Launch:
        """The line with cuda_graph_config in its YAML: graphs captured up to max_batch_size N, and padding on
        so that every batch up to N replays the next captured size (tensorrt_llm/llmapi/llm_args.py
        CudaGraphConfig, NVIDIA/TensorRT-LLM@fcd3f316, not read at 1.2.0: enable_padding "batches are rounded
        up to the nearest cuda_graph_batch_size"; without it only the generated sizes, 1-31, 32, 64, 128,
        powers of two and N, replay a graph). aiconfigurator's generator sets the same padding for its
        decode workers (aiconfigurator 0.12.0 generator/rule_plugin/trtllm.rule: agg_decode
        cuda_graph_enable_padding = true)."""
        return _with_yaml(launch, f"cuda_graph_config:\n  max_batch_size: {max_bs}\n  enable_padding: true\n")

    def adp_balance(self, launch: Launch, timeout_iters: int) -> Launch:
        """The line with attention-DP balancing in its YAML: a context request waits until every
        attention-DP rank has one, at most `timeout_iters` steps, and runs at once when they all do
        (tensorrt_llm/llmapi/llm_args.py AttentionDpConfig, off by default; core/serving.py adp_hold_steps),
        as TensorRT-LLM's DeepSeek-R1 recipe and InferenceX's scripts write it (batching_wait_iters 0)."""
        return _with_yaml(launch, "attention_dp_config:\n  enable_balance: true\n"
                                  f"  timeout_iters: {timeout_iters}\n  batching_wait_iters: 0\n")


def _with_yaml(launch: Launch, yaml: str) -> Launch:
    """`launch` with `yaml` added to the LLM API options file it passes with --config."""
    files = dict(launch.files)
    flag = DYNAMO_FLAGS["--config"] if launch.argv[:3] == DYNAMO_WORKER else "--config"
    argv = launch.argv if YAML in files else (*launch.argv, flag, YAML)
    files[YAML] = files.get(YAML, "") + yaml
    return replace(launch, argv=argv, files=tuple(files.items()))


ADAPTER = TrtLlm

"""What a validation record may state in its `settings` (data/validation/*.toml): each key is a user option
of a cardfit command, an engine release, or a setting of the engine or harness a user of `deploy`/`speed`
does not pass (validation/validate.py USER_SETTINGS says which are on the user path). A key not listed here
is an error when the records load, naming file, record and key (as catalog rows are: catalog/schema.py)."""

from __future__ import annotations

from typing import Any

from ..errors import CatalogError

# key -> what it is (the option a user passes, or what the engine / harness ran)
SETTINGS: dict[str, str] = {
    # the question a user asks (cardfit options)
    "tp": "--tp: tensor-parallel ranks",
    "pp": "pipeline stages (--gpus / --tp)",
    "kv_cache_dtype": "--kv-dtype",
    "kv_cache": "--kv-dtype (llama.cpp's -ctk/-ctv)",
    "type_k": "--kv-dtype of the keys (llama.cpp -ctk)",
    "type_v": "--kv-dtype of the values (llama.cpp -ctv)",
    "max_model_len": "--context (vLLM --max-model-len)",
    "n_ctx": "--context (llama.cpp -c)",
    "ctx_window": "--context of a llama.cpp run",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "max_num_seqs": "--max-num-seqs",
    "num_prompts": "the requests a benchmark sent (--users with the answer it waits for)",
    "length_distribution": "--length-distribution: how the benchmark drew each request's lengths (sharegpt, "
                           "exponential, uniform:RATIO, sonnet)",
    "max_output_tokens": "--max-output-tokens: the benchmark's max_tokens, every answer's cap",
    "gemm_quant": "--quant of the dense GEMMs",
    "moe_quant": "--quant of the routed experts",
    "gpu_cores": "an Apple GPU's core count (the card's size)",
    "experts_on_cpu": "--cpu-moe (llama.cpp -ot exps=cpu)",
    "split_mode": "llama.cpp -sm (--tp 1: layer split)",
    "tensor_split": "llama.cpp -ts",
    "prompt_tokens": "--prompt (llama-bench -p)",
    "depth": "tokens cached before the measured prompt (llama-bench -d)",
    "speculative": "--speculative (draft:MODEL, eagle3, mtp, ngram)",
    "num_speculative_tokens": "--num-speculative-tokens (llama.cpp --draft-max, SGLang speculative steps)",
    "acceptance": "--acceptance: the draft-token acceptance rate the run reported",
    "speculative_topk": "--speculative-topk (SGLang --speculative-eagle-topk: a tree's branches per step)",
    "speculative_draft_tokens": "--speculative-draft-tokens (SGLang --speculative-num-draft-tokens: tokens "
                                "verified per sequence)",
    "shared_prefix_tokens": "--shared-prefix-tokens: prompt tokens every request shares (vllm bench serve "
                            "--random-prefix-len, a common system prompt)",
    "prefix_groups": "--prefix-groups: different shared prefixes the requests begin with (SGLang "
                     "bench_serving --gsp-num-groups, vllm bench serve --prefix-repetition-num-prefixes)",
    "turns": "--turns: requests per multi-turn session",
    "warm_requests": "--warm-requests: prompts of the same sequence a benchmark sent before this run (an "
                     "earlier stage of inference-perf, which starts every stage from the same prompts)",
    "sessions": "--sessions: conversations open at once",
    "kv_offload_gb": "--kv-offload-gb: the host-RAM KV tier, GB (LMCache max_local_cpu_size, vLLM "
                     "--kv-offloading-size, SGLang --hicache-size)",
    "scheduler_recv_interval": "--scheduler-recv-interval (SGLang: decode steps between reads of requests)",
    "cuda_graph_max_bs": "--cuda-graph-max-bs (SGLang; TensorRT-LLM cuda_graph_config.max_batch_size): the "
                         "largest decode batch replayed as a CUDA graph",
    "attention_dp_timeout_iters": "--attention-dp-timeout-iters (TensorRT-LLM attention_dp_config "
                                  "enable_balance true, timeout_iters N, batching_wait_iters 0)",
    "enable_mixed_chunk": "--enable-mixed-chunk (SGLang): the running decodes ride in each prompt step",
    # the engine release (catalog/releases.py: --runtime NAME@RELEASE)
    "version": "the engine release",
    "vllm_version": "vLLM's release (memory records)",
    "build": "llama.cpp's build",
    "llamacpp_build": "the llama.cpp build an Ollama or fork release carries",
    "ollama_version": "Ollama's release",
    "tool_version": "the benchmark tool's release",
    "backend": "TensorRT-LLM's backend (pytorch / tensorrt: data/releases.toml)",
    # engine settings a deploy user does not pass
    "max_num_batched_tokens": "vLLM's step budget",
    "max_num_tokens": "TensorRT-LLM's step budget",
    "max_batch_size": "TensorRT-LLM's batch limit",
    "max_prefill_tokens": "SGLang --max-prefill-tokens",
    "max_batch_prefill_tokens": "TGI's prefill budget",
    "max_total_tokens": "TGI --max-total-tokens",
    "max_new_tokens": "the answer length a harness asked for",
    "enable_dp_attention": "SGLang --enable-dp-attention",
    "enable_attention_dp": "TensorRT-LLM enable_attention_dp",
    "async_scheduling": "vLLM --async-scheduling before it was the default (data/releases.toml)",
    "enable_chunked_prefill": "TensorRT-LLM / SGLang chunked prefill switch",
    "chunked_prefill_size": "SGLang --chunked-prefill-size",
    "mem_fraction": "SGLang --mem-fraction-static",
    "moe_tp": "tensor-parallel ranks of the experts",
    "moe_ep": "expert-parallel ranks",
    "prefill_workers": "disaggregated serving: prefill workers (SGLang --disaggregation-mode prefill)",
    "decode_workers": "disaggregated serving: decode workers (SGLang --disaggregation-mode decode)",
    "prefill_tp": "disaggregated serving: tensor-parallel ranks of a prefill worker",
    "decode_tp": "disaggregated serving: tensor-parallel ranks of a decode worker",
    "prefill_dp": "disaggregated serving: a prefill worker's attention-DP groups (experts EP over its ranks)",
    "decode_dp": "disaggregated serving: a decode worker's attention-DP groups (experts EP over its ranks)",
    "prefill_batch_size": "disaggregated serving: a prefill worker's batch (aiconfigurator)",
    "decode_batch_size": "disaggregated serving: a decode worker's batch (aiconfigurator)",
    "enforce_eager": "vLLM --enforce-eager",
    "enable_lora": "vLLM --enable-lora",
    "kv_connector": "vLLM --kv-transfer-config",
    "mxfp4_backend": "vLLM's MXFP4 MoE kernel as its log names it",
    "flash_attn": "llama.cpp -fa",
    "n_batch": "llama.cpp -b",
    "n_ubatch": "llama.cpp -ub",
    "n_seq_max": "llama.cpp --parallel",
    "gemm": "llama.cpp built with GGML_CUDA_FORCE_MMQ / FORCE_CUBLAS",
    "swa_compressed": "llama.cpp --swa-full off",
    "mmproj": "a multimodal projector loaded beside the model",
    "rank": "which rank's log a memory record is",
    "trtllm_bench_dataset": "the dataset trtllm-bench sized its engine for",
    # what the harness measured
    "test": "the llama-bench test (pp512, tg128, ...)",
    "measure": "what a memory record measures",
    "log": "the log line a record is read from",
}


def check_settings(record: dict[str, Any], file: str) -> None:
    """Every `settings` key and every `assumed` entry of a record is one this module lists (or, for
    `assumed`, a record key); CatalogError naming the file, the record and the key otherwise."""
    path = f"cardfit/data/validation/{file}"
    rid = record.get("id", "?")
    for key in record.get("settings") or {}:
        if key not in SETTINGS:
            raise CatalogError(f"record '{rid}': unknown settings key '{key}' (validation/records.py "
                               "SETTINGS lists the keys a record may state)", path=path)
    for key in record.get("assumed") or ():
        if key not in SETTINGS and key not in record:
            raise CatalogError(f"record '{rid}': assumed '{key}' is neither a settings key nor a key of the "
                               "record", path=path)

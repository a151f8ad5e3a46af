"""SGLang (`python -m sglang.launch_server`): a vLLM-like engine (vllm_like.py) and its launch line. Flags:
python/sglang/srt/server_args.py (ServerArgs.add_cli_args), checked against
tests/data/runtime_options/sglang.toml."""

from __future__ import annotations

import math

from ..catalog.records import record
from .launch import Launch, LaunchArgs, ServeFlags, SpecLaunch, serve_line
from .vllm_like import VllmLike

FLAGS = ServeFlags(tp="--tp-size", pp="--pp-size", max_model_len="--context-length",
                   max_num_seqs="--max-running-requests", memory_fraction="--mem-fraction-static",
                   kv_dtype="--kv-cache-dtype", batched_tokens="--chunked-prefill-size",
                   nodes=("--nnodes", "--node-rank", "--dist-init-addr", "HEAD_NODE_IP:50000"),
                   data_parallel="--dp-size",
                   # server_args.py: --enable-dp-attention runs attention in --dp-size groups of the --tp-size
                   # ranks; --ep-size shards the experts (docs: DeepSeek usage, "DP attention")
                   ep_switches=("--enable-dp-attention",), ep_size="--ep-size",
                   # docs "PD Disaggregation": --disaggregation-mode prefill|decode, joined by the router
                   pd_flag="--disaggregation-mode",
                   pd_note="a {role} worker: start the router in front of both pools (python -m "
                           "sglang_router.launch_router --pd-disaggregation --prefill URL --decode URL)")


@record(slots=True)
class SGLang(VllmLike):
    KV_NAMES = {"fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}  # --kv-cache-dtype choices
    ONLINE_QUANT = {"fp8": "fp8"}  # quantized on load from a 16-bit checkpoint (QUANTIZATION_CHOICES)
    EXPERT_PARALLEL = True  # attention DP + EP layouts (services/deploy.py expert_parallel)
    PD_DISAGGREGATION = True  # prefill / decode workers (services/deploy.py disaggregation)
    # reads new requests every N decode steps (server_args.py --scheduler-recv-interval, default 1;
    # managers/scheduler_recv_skipper.py; core/serving.py recv_wait_steps)
    RECV_INTERVAL_FLAG = "--scheduler-recv-interval"

    # --speculative-algorithm by cardfit's name (server_args.py choices; an MTP model drafts with its own
    # layers through EAGLE: docs advanced_features/speculative_decoding, "Multi Token Prediction")
    SPECULATIVE = {"draft": "STANDALONE", "eagle3": "EAGLE3", "mtp": "EAGLE", "ngram": "NGRAM"}

    def launch(self, model: str, a: LaunchArgs) -> Launch:
        return serve_line(a, ("python", "-m", "sglang.launch_server"), ["--model-path", model], FLAGS,
                          self.ONLINE_QUANT)

    def kv_offload_flags(self, a: LaunchArgs) -> list[str]:
        """HiCache's host tier (L2): --hicache-size GB for each rank's own host pool
        (python/sglang/srt/mem_cache/memory_pool_host.py HostKVCache: size = host_size * 1e9 //
        size_per_token, the rank's share of a token), so the copy's GB over its tp x pp ranks."""
        per_rank = max(math.floor(a.kv_offload_gb / (a.tp * a.pp)), 1)
        return ["--enable-hierarchical-cache", "--hicache-size", str(per_rank)]

    def speculative_flags(self, s: SpecLaunch) -> list[str]:
        argv = ["--speculative-algorithm", self.SPECULATIVE[s.method]]
        if s.draft:
            argv += ["--speculative-draft-model-path", s.draft]
        if s.method != "ngram":  # a chain of K drafts (top-k 1): K steps, K + 1 tokens verified
            argv += ["--speculative-num-steps", str(s.tokens), "--speculative-eagle-topk", "1"]
        return argv + ["--speculative-num-draft-tokens", str(s.tokens + 1)]


ADAPTER = SGLang

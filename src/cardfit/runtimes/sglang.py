"""SGLang (`python -m sglang.launch_server`): a vLLM-like engine (vllm_like.py) and its launch line. Flags:
python/sglang/srt/server_args.py (ServerArgs.add_cli_args), checked against
tests/data/runtime_options/sglang.toml."""

from __future__ import annotations

import math
from dataclasses import replace

from ..catalog.gpus import Gpu
from ..catalog.models import ModelSpec
from ..catalog.records import record
from ..catalog.runtimes import RuntimeProfile, tier_of
from ..core.kv import kv_cache_bytes
from ..core.memory import MemorySettings
from .base import NotModelled
from .launch import DYNAMO_NOTE, Launch, LaunchArgs, ServeFlags, SpecLaunch, serve_line
from .lora import LORA_BYTES, LoraPlan, LoraSet, lora_params, normalized
from .vllm_like import VllmLike

# SGLang's LoRA memory pool (python/sglang/srt/lora/mem_pool.py LoRAMemoryPool.init_buffers, sglang 0.5.9
# from PyPI, the release cardfit names current): for each targeted module and each of num_hidden_layers
# layers, A (max_loras_per_batch, stacked × max_lora_rank, input) and B (max_loras_per_batch, output,
# max_lora_rank) in the model's dtype; q/k/v share one qkv_proj buffer (stacked 3) and gate/up one
# gate_up_proj buffer (stacked 2: lora/utils.py get_normalized_target_modules, get_stacked_multiply), so one
# of them targeted allocates its whole stack; under tensor parallelism o_proj/down_proj shard A's input, the
# others B's output. --max-loras-per-batch (default 8) counts the base model's slot ("include base-only
# request", server_args.py). Each rank's LoRAManager keeps every loaded adapter in CPU memory
# (lora/lora_manager.py load_lora_weights, lora/lora.py initialize_weights: `.cpu()`).
# The same dense shapes and default in 0.5.23 (mem_pool.py get_lora_A_shape / get_lora_B_shape "Standard:
# [num_loras, output_dim, rank]"; arg_groups/fields/ max_loras_per_batch = 8); 0.5.23 adds expert LoRA
# buffers for MoE models ("MoE: [num_loras, num_experts, output_dim, rank]"), not modelled
LORA_SOURCE = "https://pypi.org/project/sglang/0.5.9/ (sglang/srt/lora/mem_pool.py, srt/server_args.py)"
STACK_OF = {"q_proj": "qkv_proj", "k_proj": "qkv_proj", "v_proj": "qkv_proj", "gate_proj": "gate_up_proj",
            "up_proj": "gate_up_proj"}

FLAGS = ServeFlags(tp="--tp-size", pp="--pp-size", max_model_len="--context-length",
                   max_num_seqs="--max-running-requests", memory_fraction="--mem-fraction-static",
                   kv_dtype="--kv-cache-dtype", batched_tokens="--chunked-prefill-size",
                   nodes=("--nnodes", "--node-rank", "--dist-init-addr", "HEAD_NODE_IP:50000"),
                   data_parallel="--dp-size",
                   # server_args.py: --enable-dp-attention runs attention in --dp-size groups of the --tp-size
                   # ranks; --ep-size shards the experts (docs: DeepSeek usage, "DP attention")
                   dp_switches=("--enable-dp-attention",), ep_size="--ep-size",
                   # docs "PD Disaggregation": --disaggregation-mode prefill|decode, joined by the router
                   pd_flag="--disaggregation-mode",
                   pd_note="a {role} worker: start the router in front of both pools (python -m "
                           "sglang_router.launch_router --pd-disaggregation --prefill URL --decode URL)")


# NVIDIA Dynamo's SGLang worker (`python3 -m dynamo.sglang`) parses SGLang's own server arguments and starts
# the engine in the role --disaggregation-mode names, its cache moved by NIXL (ai-dynamo/dynamo
# examples/backends/sglang/launch/disagg.sh @8a150cc3: --disaggregation-mode prefill|decode
# --disaggregation-transfer-backend nixl); the frontend routes between the pools (no sglang_router)
DYNAMO_FLAGS = replace(FLAGS, pd_extra=("--disaggregation-transfer-backend", "nixl"), pd_note=DYNAMO_NOTE)

# From 0.5.22 (data/releases.toml attn_dp_size_flag) a server names its attention groups with --attn-dp-size N
# (field attn_dp_size, "the number of data-parallel attention groups inside the TP group, one scheduler each,
# while the FFN stays tensor parallel"; --dp-size counts model replicas again), and --enable-dp-attention is
# a deprecated switch that resolves --dp-size N beside it to attn_dp_size N, dp_size 1, with a warning
# (server_args.py DeprecatedStoreTrueAction new_flag="--attn-dp-size <dp-size>"; arg_groups/parallel_hook.py
# handle_deprecated_dp_attention; "TODO: remove the flag and the field after 2026-12-31"; PyPI wheels
# sglang 0.5.22 and 0.5.23, https://pypi.org/project/sglang/0.5.22/). 0.5.21 and before have no
# --attn-dp-size (argparse refuses it), so the line states the spelling its release takes
ATTN_DP_FLAG = "--attn-dp-size"


# Before 0.5.0rc0 (data/releases.toml ep_size_alone) --ep-size alone left the MoE layers tensor parallel: from
# 0.4.0.post2 to 0.4.10 the experts ran expert parallel only with --enable-ep-moe, which sets ep_size to
# tp_size (server_args.py; layers/moe/ep_moe/layer.py get_moe_impl_class), as every cardfit EP layout has it
# (runtimes/launch.py _expert_parallel: ep = tp); from 0.5.0rc0 that switch is deprecated
EP_SWITCH_BEFORE_050 = "--enable-ep-moe"


def flags_at(rt: RuntimeProfile, flags: ServeFlags) -> ServeFlags:
    """The launch flags `flags` as the release `rt` spells attention data parallelism (ATTN_DP_FLAG) and
    expert parallelism (EP_SWITCH_BEFORE_050)."""
    if not rt.has("ep_size_alone"):
        flags = replace(flags, ep_switches=(*flags.ep_switches, EP_SWITCH_BEFORE_050))
    return replace(flags, attention_dp=ATTN_DP_FLAG, dp_switches=()) if rt.has("attn_dp_size_flag") else flags


# The models SGLang sizes a hybrid SWA pool for (the model_type, and the data/releases.toml feature from whose
# release it does; sglang wheels from PyPI). SGLang profiles its pool with every layer at full length
# (model_runner.py profile_max_num_token: cell_size over num_effective_layers); a hybrid model then splits it
# into full-layer tokens T and sliding-window tokens swa_full_tokens_ratio x T (set_num_token_hybrid,
# 0.5.3rc0; model_runner_kv_cache_mixin.py set_num_tokens_hybrid_swa, 0.5.9), and the scheduler admits by the
# fuller of the two (managers/schedule_policy.py PrefillAdder.rem_total_tokens). Other sliding-window models
# run with disable_hybrid_swa_memory, all their layers at the whole context: Gemma 2/3 ("not yet supported",
# server_args.py model_specific_adjustments, 0.5.3rc0 and 0.5.9), and at 0.5.9 any model outside
# configs/model_config.py is_hybrid_swa_model (Llama 4, GptOss, MiMo-V2, Step-3.5). Not modelled: gpt-oss on
# Blackwell (SM100) from 0.5.8 still runs full length (the trtllm_mha backend), so does any model with
# speculative decoding; before 0.5.8 a sliding-window model outside the Gemma list ran the hybrid pool.
HYBRID_SWA = {"gpt_oss": "gpt_oss_hybrid_swa"}

MIB = 2**20
# --mem-fraction-static when not given: (card - reserved) / card, rounded to 3 places, the card's memory as
# torch reports it in MiB (server_args.py _handle_gpu_memory_settings; utils get_device_memory_capacity).
# From 0.5.4 (data/releases.toml reserve_by_chunk) the reserve is 512 MiB + 1.5 MiB per token of the
# chunked-prefill size (at least 2,048) + 2 MiB per CUDA-graph batch size + 1 GiB per 8 ranks, at least
# 10 GiB on a card above 60 GiB (0.5.4-0.5.9 wheels); 0.5.3rc0 reserved by card size (below).
RESERVE_BASE_MIB = 512
RESERVE_MIB_PER_CHUNK_TOKEN = 1.5
RESERVE_MIB_PER_GRAPH_BS = 2
RESERVE_FLOOR_ABOVE_MIB = (60 * 1024, 10 * 1024)
# 0.5.3rc0: (card below MiB, reserve GiB, GiB per rank): 2.8 + ranks / 10 below 35 GiB, 9.5 + ranks / 2 below
# 90, 12 + ranks / 2 below 160, 32 GiB above (the H20 row, 90-100 GiB, is the H200's)
RESERVE_BY_CARD_053 = ((35 * 1024, 2.8, 0.1), (90 * 1024, 9.5, 0.5), (160 * 1024, 12.0, 0.5), (0, 32.0, 0.0))




# --chunked-prefill-size when not given, by release (server_args.py, the PyPI wheels of sglang,
# https://pypi.org/project/sglang/#history). From 0.5.3 (data/releases.toml chunk_4k_below_60gib; wheels
# 0.5.3, 0.5.3.post3, 0.5.6.post2, 0.5.8, 0.5.9 _handle_gpu_memory_settings) the runtimes.toml
# [[runtime.tier]] row of the card. 0.4.8 to 0.5.3rc0 (chunk_by_card_tier; wheels 0.4.8, 0.4.9, 0.4.10,
# 0.5.1, 0.5.2, 0.5.3rc0): the same rows without the 4096 one, "gpu_mem < 35 * 1024: 2048 (A10, L40,
# 4090); < 160 * 1024: 8192 (H100, H200, A100, H20); else 16384 (B200, MI300)". Before 0.4.8 (wheels
# 0.4.6.post5, 0.4.7): "gpu_mem < 25_000: 2048", else 8192, and from 0.4.7 (chunk_16k_above_180gb)
# "gpu_mem > 180_000: 16384". A card whose memory SGLang cannot read takes 4096 (0.4.8 on; cardfit names a
# card or keeps the profile's prefill_chunk).
CHUNK_UNKNOWN_CARD = 4096
CHUNK_TIERS_BEFORE_053 = ((35 * 1024, 2048), (160 * 1024, 8192), (0, 16384))
CHUNK_SMALL_BEFORE_048 = (25_000, 2048)  # (below MiB, tokens)
CHUNK_BIG_047 = (180_000, 16384)  # (above MiB, tokens)
CHUNK_BEFORE_048 = 8192


def default_chunk(rt: RuntimeProfile, mib: float) -> int:
    """SGLang's --chunked-prefill-size when not given, on a card of `mib` MiB as torch reports it, at the
    profile's release (the table above; before any --dp-size division)."""
    if rt.has("chunk_4k_below_60gib"):
        tier = tier_of(rt, mib)
        return tier.chunked_prefill_size if tier else CHUNK_UNKNOWN_CARD
    if rt.has("chunk_by_card_tier"):
        return next(c for top, c in CHUNK_TIERS_BEFORE_053 if not top or mib < top)
    if mib < CHUNK_SMALL_BEFORE_048[0]:
        return CHUNK_SMALL_BEFORE_048[1]
    if rt.has("chunk_16k_above_180gb") and mib > CHUNK_BIG_047[0]:
        return CHUNK_BIG_047[1]
    return CHUNK_BEFORE_048


# From 0.5.10 (data/releases.toml prefill_cuda_graph) prompt steps replay CUDA graphs by default (piecewise,
# torch.compile, to 0.5.14; "breakable" from 0.5.15) and the reserve grows by 8 MiB per captured prompt size
# ("Only calculate the memory overhead for Non-Torch Memory use since the Torch Memory can be reused with
# Cuda Graph Capture"), or by 1.5 GiB for an MLA model ("For MLA backend the memory overhead is much higher
# than expected with fa3"), before the 10 GiB floor: server_args.py _handle_gpu_memory_settings of the PyPI
# wheel sglang 0.5.10 (https://pypi.org/project/sglang/0.5.10/), arg_groups/memory_hook.py
# reserve_for_graph_mb of 0.5.23. The sizes: _generate_piecewise_cuda_graph_tokens (0.5.10),
# cuda_graph_hook.py generate_prefill_cuda_graph_batch_sizes (0.5.23), up to the chunked-prefill size. Off
# on ROCm; where else, release by release: prompt_graphs_captured (a disaggregated worker's role, attention
# DP, speculative decoding, an MLA model, a pipeline: data/releases.toml prefill_graph_*). Not read (so
# reserved, the smaller pool): the other cases that turn it off (a multimodal model, LoRA and HiCache in the
# releases that drop them, an MoE all-to-all backend, the disabled architectures of configs/model_config.py).
PREFILL_GRAPH_MIB_PER_SIZE = 8
PREFILL_GRAPH_MLA_MIB = 1.5 * 1024
PREFILL_GRAPH_STEPS = ((4, 33, 4), (48, 257, 16), (288, 513, 32), (576, 1025, 64), (1280, 4097, 256))
PREFILL_GRAPH_STEP_ABOVE_4K = (4608, 512)


def prefill_graph_sizes(max_tokens: int) -> list[int]:
    """The prompt sizes SGLang captures up to `max_tokens` (the list above)."""
    sizes = [s for a, b, step in PREFILL_GRAPH_STEPS for s in range(a, b, step)]
    sizes += range(PREFILL_GRAPH_STEP_ABOVE_4K[0], max_tokens + 1, PREFILL_GRAPH_STEP_ABOVE_4K[1])
    return [s for s in sizes if s <= max_tokens]


def prompt_graphs_captured(rt: RuntimeProfile, stack: str, pp: int, role: str = "",
                           dp_attention: bool = False, speculative: bool = False, mla: bool = False) -> bool:
    """Whether SGLang at the profile's release captures prompt-step CUDA graphs on a worker: on a CUDA card
    from 0.5.10 (model_executor/cuda_graph_config.py 'Backend.BREAKABLE if is_cuda() else Backend.DISABLED');
    `role` "prefill" | "decode" for a worker of a disaggregated deployment ("" for one of replicas),
    `dp_attention` with --enable-dp-attention, `speculative` beside a drafter, `mla` for an MLA model. Each
    switch is the release's (data/releases.toml): to 0.5.14 torch.compile piecewise graphs, off across a
    pipeline, on any disaggregated worker, with attention DP, and at 0.5.10 with speculative decoding
    (prefill_graph_speculative); from 0.5.15 breakable graphs (prefill_graph_breakable), which keep a
    disaggregated worker and a pipeline, drop an MLA model to 0.5.17 (prefill_graph_mla) and attention DP to
    0.5.16 (prefill_graph_dp_attention); from 0.5.16 never on a decode worker and on a prefill worker, which
    captured no graphs to 0.5.15 (prefill_graph_pd_roles); from 0.5.19 off across a pipeline again
    (prefill_graph_pp_opt_in)."""
    if stack != "cuda" or not rt.has("prefill_cuda_graph"):
        return False
    if speculative and not rt.has("prefill_graph_speculative"):
        return False
    if dp_attention and not rt.has("prefill_graph_dp_attention"):
        return False
    if not rt.has("prefill_graph_breakable"):
        return pp <= 1 and not role
    if mla and not rt.has("prefill_graph_mla"):
        return False
    if pp > 1 and rt.has("prefill_graph_pp_opt_in"):
        return False
    # to 0.5.15 the P/D hook turned every CUDA graph off on a prefill worker (pd_disaggregation_hook.py
    # 'server_args.disable_cuda_graph = True'); from 0.5.16 only the other phase's, by role
    return not role or (role == "prefill") == rt.has("prefill_graph_pd_roles")


def prefill_graph_reserve_mib(rt: RuntimeProfile, chunk: int, stack: str, pp: int, mla: bool,
                              role: str = "", dp_attention: bool = False, speculative: bool = False) -> float:
    """What the prompt steps' CUDA graphs add to the reserve: where they are captured
    (prompt_graphs_captured), never on a decode worker (0.5.15 server_args.py 'self.disaggregation_mode !=
    "decode" and prefill_cuda_graph_config.backend != Backend.DISABLED'; 0.5.23 memory_hook.py
    reserve_for_graph_mb)."""
    if role == "decode" or not prompt_graphs_captured(rt, stack, pp, role, dp_attention, speculative, mla):
        return 0.0
    return PREFILL_GRAPH_MLA_MIB if mla else len(prefill_graph_sizes(chunk)) * PREFILL_GRAPH_MIB_PER_SIZE


# The decode graphs' batch cap where --cuda-graph-max-bs is not given: the card's tier row (the profile's
# [[runtime.tier]], by TP), 160 on a card SGLang cannot read; from 0.5.22 (data/releases.toml
# graph_cap_by_max_running) no larger than a given --max-running-requests (arg_groups/memory_hook.py
# handle_gpu_memory_settings 'if decode_max_bs_is_default and cfg.max_running_requests is not None and
# decode_cuda_graph_config.max_bs > cfg.max_running_requests: decode_cuda_graph_config.max_bs =
# cfg.max_running_requests', lines 182-188 of the PyPI wheel sglang 0.5.22, https://pypi.org/project/sglang/0.5.22/,
# and 0.5.23; absent from 0.5.21). The server's whole setting, before the attention-DP ranks divide it
# (model_runner.py); the hook runs before speculative_hook.py sets its default of 48 (arg_groups/pipeline.py
# order: memory_hook line 216, speculative_hook line 304, 0.5.23), so only a --max-running-requests on the
# line caps it.
GRAPH_BS_UNKNOWN_CARD = 160


def decode_graph_max_bs(rt: RuntimeProfile, mib: float, tp: int, max_running: int = 0) -> int:
    """The largest decode batch SGLang captures as a CUDA graph by default on a card of `mib` MiB at TP `tp`
    (`max_running`: the --max-running-requests given, 0: none)."""
    tier = tier_of(rt, mib)
    bs = (tier.cuda_graph_max_bs_tp_lt4 if tp < 4 else tier.cuda_graph_max_bs_tp_ge4) if tier \
        else GRAPH_BS_UNKNOWN_CARD
    if max_running > 0 and bs > max_running and rt.has("graph_cap_by_max_running"):
        return max_running
    return bs


# With attention data parallelism (--enable-dp-attention --dp-size N) the reserve grows by 3 MiB per decode
# graph batch size per DP rank, and 1.5 MiB more where the cap is above 300, before the 10 GiB floor ("DP
# attention needs more padding for some operations", "DP attention uses much more memory for large cuda graph
# max bs, likely due to some inefficiencies in torch allocator"): server_args.py _handle_gpu_memory_settings
# 'reserved_mem += self.cuda_graph_max_bs * self.dp_size * 3 ... if self.cuda_graph_max_bs > 300:
# reserved_mem += self.cuda_graph_max_bs * self.dp_size * 1.5' in the PyPI wheels sglang 0.5.4 (lines
# 776-783), 0.5.9 (lines 1033-1041), https://pypi.org/project/sglang/0.5.9/; 0.5.23
# arg_groups/memory_hook.py reserve_for_graph_mb lines 370-378 (attn_dp_size, the --dp-size of
# --enable-dp-attention: parallel_hook.py line 56), https://pypi.org/project/sglang/0.5.23/
RESERVE_MIB_PER_GRAPH_BS_DP = 3
RESERVE_MIB_PER_GRAPH_BS_DP_LARGE = (300, 1.5)  # (above this cap, MiB more per batch size per DP rank)

# Speculative decoding added to the reserve after the 10 GiB floor: a draft model (STANDALONE) 6 GiB
# ("standalonedraft model and cuda graphs"), the EAGLE family (EAGLE, EAGLE3; cardfit's mtp runs EAGLE)
# 2 GiB ("eagle draft models and cuda graphs"), n-gram nothing: server_args.py _handle_gpu_memory_settings of
# the PyPI wheels sglang 0.5.4 (lines 789-795) to 0.5.9 (lines 1051-1057, https://pypi.org/project/sglang/0.5.9/);
# the EAGLE family 4 GiB from 0.5.10 (data/releases.toml spec_reserve_eagle_4gib: 0.5.10 lines 1316-1322,
# https://pypi.org/project/sglang/0.5.10/, to 0.5.13); none from 0.5.14 (spec_reserve_dropped: 0.5.14
# server_args.py lines 3276-3313 end at the floor, https://pypi.org/project/sglang/0.5.14/; 0.5.23
# memory_hook.py lines 281-343 read no speculative term but a P/D decode worker's draft tokens)
SPEC_RESERVE_MIB = {"draft": 6 * 1024, "eagle3": 2 * 1024, "mtp": 2 * 1024, "ngram": 0}
SPEC_RESERVE_EAGLE_MIB_0510 = 4 * 1024

# Not modelled: DeepEP's 2 GiB after the floor (memory_hook.py reserve_for_deepep_a2a_mb, 0.5.15 on; 0.5.23
# lines 316-317, 402-414: a non-prefill server with decode graphs and moe_a2a_backend == "deepep") and its
# 1 GiB with breakable prompt graphs (reserve_for_graph_mb lines 391-397, 0.5.17 on) apply to
# --moe-a2a-backend deepep, which cardfit's launch lines never set: its default is "none"
# (arg_groups/fields/exec_.py moe_a2a_backend), and 0.5.23 turns DeepEP on by itself only for
# --enable-waterfill (arg_groups/overrides.py _a2a_backend_overrides lines 1599-1606) and DeepSeek's prompt
# context parallelism, --enable-prefill-cp (model_overrides/deepseek_v2.py lines 117, 201), neither of which a
# cardfit line sets either; --ep-size alone keeps "none" (PyPI wheel sglang 0.5.23).


def speculative_reserve_mib(rt: RuntimeProfile, method: str) -> float:
    """What a --speculative method (cardfit's name) adds to the reserve after the floor, at the release."""
    if not method or rt.has("spec_reserve_dropped"):
        return 0.0
    if method in ("eagle3", "mtp") and rt.has("spec_reserve_eagle_4gib"):
        return SPEC_RESERVE_EAGLE_MIB_0510
    return SPEC_RESERVE_MIB.get(method, 0)


def attention_dp_reserve_mib(graphs: int, attention_dp: int) -> float:
    """What attention data parallelism over `attention_dp` ranks adds before the floor (decode graphs up to
    batch `graphs`)."""
    if attention_dp <= 1:
        return 0.0
    extra = graphs * attention_dp * RESERVE_MIB_PER_GRAPH_BS_DP
    if graphs > RESERVE_MIB_PER_GRAPH_BS_DP_LARGE[0]:
        extra += graphs * attention_dp * RESERVE_MIB_PER_GRAPH_BS_DP_LARGE[1]
    return extra


# From 0.5.15 (data/releases.toml reserve_by_role) a disaggregated worker's reserve follows its role: a
# decode worker sizes its activation term by its decode batch, max(running requests x verified draft tokens,
# 2048) x 1.5 MiB, the running requests a given --max-running-requests (the server's, before any attention-DP
# division: _handle_data_parallelism runs after it) else the decode graphs' cap, the draft tokens a given
# --speculative-num-draft-tokens else 1 (the speculative hook sets its default after the reserve); a prefill
# worker reserves no decode graphs and no attention-DP padding ('self.disaggregation_mode != "prefill"').
# server_args.py _handle_gpu_memory_settings lines 3623-3676 of the PyPI wheel sglang 0.5.15,
# https://pypi.org/project/sglang/0.5.15/ (0.5.14 lines 3276-3309: no role); 0.5.23 arg_groups/memory_hook.py
# lines 297-313 and reserve_for_graph_mb lines 364-378, https://pypi.org/project/sglang/0.5.23/
RESERVE_MIN_ACTIVATION_TOKENS = 2048


def activation_tokens(rt: RuntimeProfile, chunk: int, graphs: int, role: str = "", max_running: int = 0,
                      draft_tokens: int = 0) -> int:
    """The tokens the reserve's activation term (1.5 MiB each) is sized for: the chunk, at least 2,048; a
    decode worker's decode batch from 0.5.15 (reserve_by_role)."""
    if role == "decode" and rt.has("reserve_by_role"):
        running = max_running or graphs or 1
        return max(running * max(draft_tokens, 1), RESERVE_MIN_ACTIVATION_TOKENS)
    return max(chunk, RESERVE_MIN_ACTIVATION_TOKENS)


def reserved_mib(rt: RuntimeProfile, mib: float, tp: int, pp: int, stack: str = "cuda",
                 mla: bool = False, *, role: str = "", attention_dp: int = 1, speculative: str = "",
                 max_running: int = 0, draft_tokens: int = 0) -> float:
    """The memory SGLang leaves outside --mem-fraction-static on a card of `mib` MiB (activations, CUDA
    graphs), with the card's default chunked-prefill size (default_chunk) and graph batch
    (decode_graph_max_bs): the rule from 0.5.4 (releases.toml reserve_by_chunk), else 0.5.3rc0's table;
    from 0.5.10 the prompt steps' graphs on a CUDA card (prefill_graph_reserve_mib; `mla`: the model's
    attention is MLA; `role`: a disaggregated worker's, "" for a replica); `attention_dp` ranks of
    --enable-dp-attention (attention_dp_reserve_mib), a `speculative` method (speculative_reserve_mib) and a
    given --max-running-requests (`max_running`, capping the decode graphs); from 0.5.15 a worker's role sizes
    its activation and graph terms (activation_tokens, reserve_by_role; `draft_tokens`: the verified tokens
    of a drafting decode worker's --speculative-num-draft-tokens)."""
    ranks = max(tp, 1) * max(pp, 1)
    if not rt.has("reserve_by_chunk"):
        row = next(r for r in RESERVE_BY_CARD_053 if not r[0] or mib < r[0])
        return (row[1] + ranks * row[2]) * 1024
    chunk = default_chunk(rt, mib)
    graphs = decode_graph_max_bs(rt, mib, tp, max_running)
    # the decode graphs' and attention DP's terms: none on a prefill worker from 0.5.15
    decode_terms = not (role == "prefill" and rt.has("reserve_by_role"))
    tokens = activation_tokens(rt, chunk, graphs, role, max_running, draft_tokens)
    reserve = (RESERVE_BASE_MIB + tokens * RESERVE_MIB_PER_CHUNK_TOKEN
               + (graphs * RESERVE_MIB_PER_GRAPH_BS + attention_dp_reserve_mib(graphs, attention_dp)
                  if decode_terms else 0.0)
               + ranks / 8 * 1024
               + prefill_graph_reserve_mib(rt, chunk, stack, pp, mla, role, attention_dp > 1,
                                           bool(speculative)))
    if mib > RESERVE_FLOOR_ABOVE_MIB[0]:
        reserve = max(reserve, RESERVE_FLOOR_ABOVE_MIB[1])
    return reserve + speculative_reserve_mib(rt, speculative)


# The decode graphs' cap on the command line: --cuda-graph-max-bs up to 0.5.13; from 0.5.14
# (data/releases.toml graph_flags_by_phase) --cuda-graph-max-bs-decode, the old name a deprecated alias
# of it to 0.5.19 (server_args.py 'DeprecatedAliasStoreAction, new_flag="--cuda-graph-max-bs-decode"',
# PyPI wheels 0.5.14 and 0.5.19) and gone from 0.5.20 (arg_groups/fields/: cuda_graph_max_bs_decode
# only; wheels 0.5.20, 0.5.23)
GRAPH_FLAG = "--cuda-graph-max-bs"
GRAPH_FLAG_BY_PHASE = "--cuda-graph-max-bs-decode"


@record(slots=True)
class SGLang(VllmLike):
    # the worker the engine sizes its memory for (serving()): a disaggregated deployment's role ("prefill" |
    # "decode", "" for a replica); it moves where the release captures prompt-step graphs and so its reserve
    # (prompt_graphs_captured), as attention DP and a drafter do (the launch settings below)
    worker_role: str = ""
    KV_NAMES = {"fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}  # --kv-cache-dtype choices
    ONLINE_QUANT = {"fp8": "fp8"}  # quantized on load from a 16-bit checkpoint (QUANTIZATION_CHOICES)
    EXPERT_PARALLEL = True  # attention DP + EP layouts (services/deploy.py expert_parallel)
    # attention DP without expert parallelism: --enable-dp-attention --dp-size N runs attention in N groups
    # of the --tp-size ranks whatever the MoE layers do (server_args.py; docs "DP attention"), so a pinned
    # --attention-dp without --expert-parallel states it (runtimes/launch.py build)
    ATTENTION_DP_ALONE = True
    PD_DISAGGREGATION = True  # prefill / decode workers (services/deploy.py disaggregation)
    # with --enable-dp-attention each DP rank's scheduler takes a share of the server's limits
    # (data/releases.toml dp_attention_chunk_split, dp_attention_request_split; PyPI wheels 0.4.10, 0.5.8,
    # 0.5.9): server_args.py _handle_data_parallelism 'self.chunked_prefill_size = self.chunked_prefill_size
    # // self.dp_size'; model_runner.py 'server_args.max_running_requests // (server_args.dp_size if
    # server_args.enable_dp_attention else 1)'. --max-prefill-tokens and --cuda-graph-max-bs stay each rank's
    # own (scheduler.py PrefillAdder, cuda_graph_runner.py: the rank's local batch), and so does its KV pool
    DP_DIVIDED = {"max_num_batched_tokens": "dp_attention_chunk_split",
                  "max_num_seqs": "dp_attention_request_split"}
    # a prefill worker's prompt keeps its request slot until its KV transfer is polled done (core/disagg.py
    # held_slots: managers/scheduler.py get_new_batch_prefill, disaggregation/prefill.py at tag v0.5.8)
    PD_SLOT_HELD_THROUGH_TRANSFER = True
    # a decode server's overlap loop streams an arrived request's first token (its prebuilt batch's output)
    # one pass after the pass that merged it (core/disagg.py handoff_s next_pass: disaggregation/decode.py
    # event_loop_overlap_disagg_decode, managers/scheduler_output_processor_mixin.py
    # process_batch_result_prebuilt, PyPI wheel sglang 0.5.8)
    PD_FIRST_TOKEN_NEXT_PASS = True
    # a decode server pre-allocates a request (before its prefill may start) only while its KV pool's free
    # tokens, less this reserve for every request it holds (running, transferring or waiting), hold the
    # prompt plus the reserve (core/disagg.py admitted: server_args.py num_reserved_decode_tokens = 512,
    # "used for decode kv cache offload in PD"; disaggregation/decode.py DecodePreallocQueue
    # _allocatable_tokens, pop_preallocated; PyPI wheel sglang 0.5.8)
    PD_DECODE_RESERVED_TOKENS = 512
    # reads new requests every N decode steps (server_args.py --scheduler-recv-interval, default 1;
    # managers/scheduler_recv_skipper.py; core/serving.py recv_wait_steps)
    RECV_INTERVAL_FLAG = "--scheduler-recv-interval"
    # puts the running decodes into each prompt step instead of pausing them for it (PyPI wheel sglang
    # 0.5.6.post2, sglang/srt/: server_args.py enable_mixed_chunk = False by default; managers/scheduler.py
    # is_mixed_chunk = chunked prefill on and the flag, and "Mixed-style chunked prefill":
    # running_batch.prepare_for_decode(), new_batch.mix_with_running(running_batch); the prompts' budget and
    # chunk less one token per running decode: schedule_policy.py PrefillAdder mixed_with_decode_tokens =
    # running_bs): services/pinned.py schedule
    MIXED_CHUNK_FLAG = "--enable-mixed-chunk"

    # --speculative-algorithm by cardfit's name (server_args.py choices; an MTP model drafts with its own
    # layers through EAGLE: docs advanced_features/speculative_decoding, "Multi Token Prediction")
    SPECULATIVE = {"draft": "STANDALONE", "eagle3": "EAGLE3", "mtp": "EAGLE", "ngram": "NGRAM"}
    # EAGLE's worker (EAGLE3, EAGLE for MTP, STANDALONE) drafts a tree: --speculative-eagle-topk branches per
    # draft step, --speculative-num-draft-tokens verified (python/sglang/srt/speculative/eagle_worker.py
    # draft_forward, verify, sgl-project/sglang@00559eac; services/speculative.py _tree)
    SPECULATIVE_TREE = True
    # its target-verify CUDA graphs are captured per batch size, each sequence carrying num_draft_tokens
    # (python/sglang/srt/model_executor/cuda_graph_runner.py @0021673c CudaGraphRunner.__init__:
    # num_tokens_per_bs = speculative_num_draft_tokens for TARGET_VERIFY; can_run: batch_size <= max_bs): a
    # verification replays a graph wherever the decode step of its sequences would
    # (core/speculative.py verify_overhead_s)
    VERIFY_GRAPH_BY_SEQUENCES = True
    # one pass of its scheduler a cycle: event_loop_normal (the loop a drafting run takes: runtimes.toml
    # speculative_lacks) receives requests, schedules, runs the batch and handles its result once, and the
    # batch's run is the whole cycle (speculative/eagle_worker.py forward_batch_generation: draft(), verify(),
    # forward_draft_extend_after_decode; sglang 0.5.3.post3 wheel, https://pypi.org/project/sglang/0.5.3.post3/):
    # the scheduler's per-sequence time is the cycle's once (core/speculative.py Speculation.draft_in_step)
    DRAFT_IN_STEP = True
    # drafting methods SGLang refuses beside attention data parallelism (server_args.py
    # _handle_speculative_decoding: "Currently standalone speculative decoding does not support dp
    # attention.", "Currently ngram speculative decoding does not support dp attention."): deploy searches no
    # attention-DP layout for them (services/deploy.py expert_parallel)
    DRAFTS_WITHOUT_DP_ATTENTION = ("draft", "ngram")
    # the launch settings the reserve reads (serving(); reserved_mib): --enable-dp-attention --dp-size, the
    # --speculative method, a given --max-running-requests (0: none)
    attention_dp: int = 1
    speculative: str = ""
    max_running: int = 0
    draft_tokens: int = 0  # --speculative-num-draft-tokens on the line (0: none), a decode worker's reserve
    # the server's --tp-size where it is more than the ranks budget_per_card is asked for (0: the same): an
    # attention-DP + EP layout runs --tp-size over all its cards, while each attention group's tensor-parallel
    # ranks (what copies a sequence's cache) are cards / dp; the reserve reads --tp-size (the tier's decode
    # graph cap, 256 below TP 4 else 512, and tp x pp / 8 GiB: server_args.py _handle_gpu_memory_settings,
    # 0.5.9; arg_groups/memory_hook.py 'cfg.tp_size', 0.5.23)
    server_tp: int = 0

    def serving(self, *, role: str = "", attention_dp: int = 1, speculative: str = "",
                max_running: int = 0, draft_tokens: int = 0, server_tp: int = 0) -> SGLang:
        now = (self.worker_role, self.attention_dp, self.speculative, self.max_running, self.draft_tokens,
               self.server_tp)
        if (role, attention_dp, speculative, max_running, draft_tokens, server_tp) == now:
            return self
        return replace(self, worker_role=role, attention_dp=attention_dp, speculative=speculative,
                       max_running=max_running, draft_tokens=draft_tokens, server_tp=server_tp)

    def budget_per_card(self, gpu: Gpu, utilization: float | None = None, tp: int = 1, pp: int = 1,
                        model: ModelSpec | None = None) -> int:
        """--mem-fraction-static x the card: the weights and the KV pool (model_runner.py
        profile_max_num_token: pool = free memory after loading - total x (1 - fraction)); given, the
        user's fraction, else SGLang's own for the card, its split, the model's attention, the release and
        the launch settings serving() gave (reserved_mib)."""
        if utilization is not None:
            return VllmLike.budget_per_card(self, gpu, utilization)
        return int(self.cuda_total(gpu) * self.launch_fraction(gpu, tp, pp, model))

    def launch_fraction(self, gpu: Gpu, tp: int = 1, pp: int = 1, model: ModelSpec | None = None) -> float:
        """SGLang's own --mem-fraction-static for the server (budget_per_card's): (card - reserved) / card to
        3 places (server_args.py 'round((gpu_mem - reserved_mem) / gpu_mem, 3)'), which the launch line
        states so that the engine starts with the pool that was timed."""
        mib = self.cuda_total(gpu) / MIB
        mla = model is not None and model.attention == "mla"
        reserve = reserved_mib(self.profile, mib, self.server_tp or tp, pp, gpu.stack, mla,
                               role=self.worker_role,
                               attention_dp=self.attention_dp, speculative=self.speculative,
                               max_running=self.max_running, draft_tokens=self.draft_tokens)
        return round((mib - reserve) / mib, 3)

    def serve_batched_tokens(self, gpu: Gpu | None, max_model_len: int = 0) -> int:
        """--chunked-prefill-size when not given: SGLang's default for the card's memory as torch reports it
        (default_chunk, the release's rule; the whole server's, divided among attention-DP ranks by
        per_dp_rank); without a card, the profile's prefill_chunk."""
        if gpu is None:
            return self.profile.prefill_chunk
        return default_chunk(self.profile, self.cuda_total(gpu) / MIB)

    def activation_bytes(self, m: ModelSpec, s: MemorySettings) -> int:
        """0 inside the budget: SGLang profiles no prompt batch; its activations and CUDA graphs live in the
        reserve outside --mem-fraction-static (budget_per_card)."""
        return 0

    def kv_bytes(self, m: ModelSpec, s: MemorySettings) -> int:
        """The pool's bytes for `s.sequences` sequences of `s.context` tokens: sliding-window layers at
        swa_full_tokens_ratio of the context where SGLang runs the model's hybrid SWA pool (HYBRID_SWA), else
        at the whole context, like the full layers."""
        if not m.sliding_window:
            return VllmLike.kv_bytes(self, m, s)  # (a slots record: no zero-argument super())
        feature = HYBRID_SWA.get(m.model_type)
        hybrid = bool(feature) and self.profile.has(feature) and self.profile.swa_full_tokens_ratio > 0
        return kv_cache_bytes(m, self.padded_context(s.context), s.sequences, s.kv_dtype,
                              window_ratio=self.profile.swa_full_tokens_ratio if hybrid else 1.0)

    def launch(self, model: str, a: LaunchArgs) -> Launch:
        return serve_line(a, ("python", "-m", "sglang.launch_server"), ["--model-path", model],
                          flags_at(self.profile, FLAGS), self.ONLINE_QUANT)

    def cuda_graph_cap(self, launch: Launch, max_bs: int) -> Launch:
        """The line with --cuda-graph-max-bs N: SGLang captures decode graphs for batch sizes up to N
        (server_args.py _generate_cuda_graph_batch_sizes, each batch padded to the next captured size), and a
        larger batch runs eagerly (model_executor/cuda_graph_runner.py CudaGraphRunner.can_run)."""
        flag = GRAPH_FLAG_BY_PHASE if self.profile.has("graph_flags_by_phase") else GRAPH_FLAG
        return replace(launch, argv=(*launch.argv, flag, str(max_bs)))

    def lora_plan(self, m: ModelSpec, lora: LoraSet, users: int, tp: int) -> LoraPlan:
        # LORA_SOURCE: the pool's slots (default: one per adapter a batch of `users` can mix, plus the base
        # model's) of the stacked buffers the targets touch, on each card; every adapter's own weights (its
        # targets only, taken as 16-bit) in host RAM once per rank
        if lora.file_type or lora.scale is not None:
            raise NotModelled("lora_type and lora_scale are llama.cpp's; SGLang holds adapters in the "
                              "model's dtype, each scaled by its own lora_alpha / r")
        pool = normalized(tuple(STACK_OF.get(t, t) for t in lora.targets))
        slots = lora.slots or min(lora.adapters, users) + 1
        flags = ("--enable-lora", "--max-loras-per-batch", str(slots), "--max-lora-rank", str(lora.rank),
                 "--lora-target-modules", *lora.targets,
                 *(("--lora-paths", *lora.paths) if lora.paths else ()))
        host = lora.adapters * tp * lora_params(m, lora.rank, 1, lora.targets) * LORA_BYTES
        return LoraPlan(slots * lora_params(m, lora.rank, tp, pool) * LORA_BYTES, host, slots, flags,
                        f"{slots} LoRA slots of rank {lora.rank} over {', '.join(pool)} on the GPU "
                        f"(--max-loras-per-batch, the base model's included), {lora.adapters} adapters in "
                        f"host RAM{f' on each of its {tp} ranks' if tp > 1 else ''}")

    def dynamo_launch(self, model: str, a: LaunchArgs) -> Launch:
        return serve_line(a, ("python3", "-m", "dynamo.sglang"), ["--model-path", model],
                          flags_at(self.profile, DYNAMO_FLAGS), self.ONLINE_QUANT)

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
        if s.method != "ngram":  # K draft steps, top-k branches each (1: a chain, K + 1 tokens verified)
            argv += ["--speculative-num-steps", str(s.tokens), "--speculative-eagle-topk", str(s.topk)]
        return argv + ["--speculative-num-draft-tokens", str(s.draft_tokens or s.tokens + 1)]


ADAPTER = SGLang

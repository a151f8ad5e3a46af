"""Runtime adapters (runtimes/): every catalog runtime names a family module, the plan sizes memory through
it, and no code outside runtimes/ branches on a runtime's id for memory accounting."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from cardfit.catalog.models import default_models
from cardfit.catalog.runtimes import default_runtimes
from cardfit.core.memory import MemorySettings, estimate
from cardfit.errors import CatalogError
from cardfit.runtimes import adapter
from cardfit.runtimes.llamacpp import LlamaCpp
from cardfit.runtimes.llamacpp_like import LlamaCppLike
from cardfit.runtimes.ollama import Ollama
from cardfit.runtimes.rule_of_thumb import RuleOfThumb
from cardfit.runtimes.sglang import SGLang
from cardfit.runtimes.torch_like import TorchLike
from cardfit.runtimes.trtllm import TrtLlm
from cardfit.runtimes.vllm import Vllm
from cardfit.runtimes.vllm_like import VllmLike
from cardfit.services.inputs import PlanInput
from cardfit.services.plan import build_context, memory_for

SRC = Path(__file__).resolve().parent.parent / "src" / "cardfit"


@pytest.mark.parametrize(("rid", "family", "own"), [
    ("vllm", VllmLike, Vllm), ("sglang", VllmLike, SGLang), ("tgi", VllmLike, VllmLike),
    ("trtllm", VllmLike, TrtLlm), ("llama.cpp", LlamaCppLike, LlamaCpp), ("ollama", LlamaCppLike, Ollama),
    ("transformers", TorchLike, TorchLike), ("rule-of-thumb", RuleOfThumb, RuleOfThumb),
])
def test_each_runtime_has_its_family(rid, family, own):
    """A runtime's adapter is its family's accounting; a serving runtime's own adapter adds its launch line
    (a subclass of the family: runtimes/vllm.py, sglang.py, trtllm.py, llamacpp.py, ollama.py)."""
    engine = adapter(default_runtimes().get(rid))
    assert isinstance(engine, family) and type(engine) is own


def test_a_runtime_serves_where_its_adapter_has_a_launch_line():
    """`serves = true` in data/runtimes.toml and a `launch()` of the runtime's own adapter go together: deploy
    plans exactly the runtimes it can start."""
    from cardfit.runtimes.launch import Serving

    for rt in default_runtimes():
        assert rt.serves == isinstance(adapter(rt), Serving), rt.id


def test_every_catalog_runtime_has_an_adapter():
    for rt in default_runtimes():
        assert adapter(rt).profile is rt


def test_unknown_family_is_a_catalog_error():
    rt = replace(default_runtimes().get("vllm"), family="no_such_family")
    with pytest.raises(CatalogError, match="no adapter cardfit/runtimes/no_such_family.py"):
        adapter(rt)
    with pytest.raises(CatalogError, match="is not a module"):
        adapter(replace(rt, family="../x"))


def test_plan_memory_is_the_adapters_memory():
    """One path: the plan's memory is estimate() over the runtime's adapter, term by term."""
    for rid, ctx_len in (("vllm", 8192), ("llama.cpp", 4096), ("transformers", 2048),
                         ("rule-of-thumb", 8192)):
        ctx = build_context(PlanInput(model="llama-3.1-8b", runtime=rid, gpu="RTX 4090"))
        mem = memory_for(ctx, ctx_len)
        s = MemorySettings(context=ctx_len, sequences=ctx.sequences, kv_dtype=ctx.kv_dtype,
                           prefill_chunk=ctx.prefill_chunk, flash_attn=ctx.flash_attn,
                           max_num_seqs=ctx.runtime.max_num_seqs)
        assert mem == estimate(ctx.model, ctx.quant, adapter(ctx.runtime), s)


def test_families_differ_where_engines_do():
    m = default_models().get("llama-3.1-8b")
    s = MemorySettings(context=8192, prefill_chunk=512)
    rts = default_runtimes()
    assert adapter(rts.get("rule-of-thumb")).activation_bytes(m, s) == 0
    assert adapter(rts.get("llama.cpp")).host_weights_bytes(m, None) > 0  # token_embd stays on the host
    assert adapter(rts.get("vllm")).host_weights_bytes(m, None) == 0
    assert adapter(rts.get("llama.cpp")).quantized_kv_needs_flash_attn
    assert not adapter(rts.get("vllm")).quantized_kv_needs_flash_attn
    mla = default_models().get("deepseek-v3")
    assert adapter(rts.get("vllm")).kv_copies(mla, 8) == 8.0  # the latent on every rank
    assert adapter(rts.get("llama.cpp")).kv_copies(mla, 8) == 1.0  # layers split, never replicated


_ID_BRANCH = re.compile(r"(runtime|rt)\.(id|family)\s*(==|!=|in|not in)\s*[\"(]|activation_model|TP_RUNTIMES"
                        r"|SERVE_RUNTIMES|GGUF_SERVERS|\.get\(\"(vllm|llama\.cpp|ollama|sglang|tgi|trtllm|transformers)\"\)")


@pytest.mark.parametrize("path", ["core", "services", "cli", "web", "charts", "readers"])
def test_no_runtime_id_branches(path):
    files = sorted((SRC / path).rglob("*.py")) if (SRC / path).is_dir() else [SRC / path]
    for f in files:
        for i, line in enumerate(f.read_text().splitlines(), 1):
            assert not _ID_BRANCH.search(line), f"{f.name}:{i}: {line.strip()}"


@pytest.mark.parametrize("name", ["trtllm", "rule_of_thumb"])
def test_developing_guide_shows_the_real_adapter_file(name):
    """docs/DEVELOPING.md's worked examples (a serving runtime's adapter, a new family) are the files in the
    repository, line for line, and their catalog rows name them."""
    doc = (SRC.parent.parent / "docs" / "DEVELOPING.md").read_text()
    head = f"+++ b/src/cardfit/runtimes/{name}.py\n"
    block = doc[doc.index(head) + len(head):].split("\n---", 1)[0]
    shown = [line[1:] for line in block.splitlines()]
    assert shown == (SRC / "runtimes" / f"{name}.py").read_text().splitlines()
    assert any(rt.family == name for rt in default_runtimes())


@pytest.mark.parametrize("rid", [r.id for r in default_runtimes()])
def test_overhead_gb_is_the_fixed_overhead_per_card_on_every_runtime(rid):
    """--overhead-gb replaces the runtime's fixed overhead per card (CUDA context, non-torch memory, CUDA
    graphs) whatever the family: 1 GB more is 1 GB more per card in the plan's total."""
    def plan_at(gb: float):
        ctx = build_context(PlanInput(model="llama-3.1-8b", quant="bf16", context=4096, runtime=rid,
                                      overhead_gb=gb))
        return memory_for(ctx, 4096)

    one, three = plan_at(1.0), plan_at(3.0)
    assert one.overhead_bytes == 1_000_000_000 and three.overhead_bytes == 3_000_000_000
    assert three.total_bytes - one.total_bytes == 2_000_000_000


def test_tp_sizes_a_vllm_ranks_workspace():
    """--tp N: each rank of a vLLM-like set holds 1/N of the MLP and attention projections in its profile
    run (column/row parallel layers), so the plan's activation per card is the per-rank peak; without --tp
    the workspace is sized for a whole layer (what one card of any set needs at most). The profile peak alone
    is vLLM 0.33.0's activation line (from 0.34.0 it also holds the graph estimate and the margin a KV cache
    sized from measured memory keeps free: data/releases.toml extensible_kv_cache)."""
    from cardfit.core.activations import vllm_profile_bytes

    def act(**kw):
        ctx = build_context(PlanInput(model="qwen2.5-32b", quant="bf16", context=8192, runtime="vllm@0.33.0",
                                      gpu="L40S", **kw))
        return memory_for(ctx, 8192).activation_bytes, ctx

    whole, ctx = act()
    rank, _ = act(gpus=2, tp=2)
    rt = ctx.runtime
    expected = vllm_profile_bytes(ctx.model, min(ctx.prefill_chunk, 8192), rt.max_num_seqs, 2,
                                  sampler_bytes_per_logit=rt.sampler_bytes_per_logit)
    assert rank == expected < whole


def test_validation_sizes_vllm_pools_through_the_plan():
    """validate scores a vLLM record's KV pool, max_context and activation with the plan's own memory
    (services/plan.py memory_for, option_for and core/fit.py kv_room), not a formula of its own."""
    text = (SRC / "validation" / "validate.py").read_text()
    assert "memory_for(ctx" in text and "kv_room(" in text
    assert "vllm_profile_bytes" not in text


def test_transformers_chunked_prefill_pays_sdpa_mask_and_repeat_kv_over_the_cache():
    """A prefill chunk attending to a longer cache passes an explicit mask to SDPA, which makes an additive
    bf16 copy of the boolean mask (PyTorch attention.cpp convert_boolean_attn_mask), and grouped-query
    attention falls back to repeat_kv over the whole cache (transformers integrations/sdpa_attention.py,
    use_gqa_in_sdpa). Qwen2.5 7B (28 query heads, 4 KV heads, head_dim 128), chunk 2048."""
    from cardfit.catalog.models import default_models
    from cardfit.core.activations import torch_prefill_bytes

    m = default_models().get("qwen2.5-7b")
    repeat = 2 * 28 * 131072 * 128 * 2  # K and V copied out to 28 heads, bf16: 1.75 GiB
    mask = 2048 * 131072 * 3  # one boolean and one bf16 additive element per chunk token x cache position
    chunked = torch_prefill_bytes(m, 2048, 131072)
    assert chunked >= repeat + mask
    # past the logits phase, the attention phase grows with the cache the chunk attends to
    grown = torch_prefill_bytes(m, 2048, 262144) - chunked
    assert grown == 2 * 28 * 131072 * 128 * 2 + 2048 * 131072 * 3


def test_transformers_chunked_prefill_holds_a_chunk_of_fp32_logits():
    """A loop of forward calls returns every chunk position's logits (logits_to_keep defaults to 0), upcast to
    fp32 (transformers v4.45 LlamaForCausalLM.forward), and `out = model(chunk, ...)` keeps the previous
    chunk's output alive through the next forward: Qwen2.5 7B, vocabulary 152,064, chunk 2048."""
    from cardfit.catalog.models import default_models
    from cardfit.core.activations import torch_prefill_bytes

    m = default_models().get("qwen2.5-7b")
    held = 2048 * 152064 * 4  # 1.16 GiB
    logits_phase = held + 2048 * 152064 * 2 + 2048 * 3584 * 2  # the new chunk's fp32 and bf16 logits
    assert torch_prefill_bytes(m, 2048, 32768) == held + logits_phase
    # one forward over the whole prompt under generate() keeps the last position's logits only
    assert torch_prefill_bytes(m, 2048) < 2048 * 152064 * 4


# vLLM V1's batch defaults by card (vllm/engine/arg_utils.py get_batch_defaults, `vllm serve`, at commit
# 99d7eb5d6a512cfcc5a2b104f24ebf2d6cda772b of https://github.com/vllm-project/vllm):
# a card with >= 70 GiB whose name has no 'a100' gets 8192 batched tokens and 1024 sequences, the
# others 2048/256; from 0.28.0 a card of >= 160 GiB 16384 and 1024 (the same function, lines 2582-2591 of the
# PyPI wheel vllm 0.28.0: "if device_memory >= 160 * GiB_bytes: # for GPUs like B200/B300")
VLLM_SERVE_DEFAULTS = [
    ("vllm", "H100 SXM", 8192, 1024), ("vllm", "H200 SXM", 8192, 1024), ("vllm", "MI300X", 16384, 1024),
    ("vllm", "B200", 16384, 1024), ("vllm@0.28.0", "MI300X", 16384, 1024),
    ("vllm@0.27.1", "MI300X", 8192, 1024), ("vllm@0.24.0", "B200", 8192, 1024),
    ("vllm", "A100 SXM 80GB", 2048, 256), ("vllm", "L40S", 2048, 256), ("vllm", "RTX 4090", 2048, 256),
]


@pytest.mark.parametrize("runtime,gpu,tokens,seqs", VLLM_SERVE_DEFAULTS)
def test_plan_sizes_vllm_profile_run_with_the_cards_serve_defaults(runtime, gpu, tokens, seqs):
    from cardfit.catalog.gpus import default_gpus
    from cardfit.services.inputs import PlanInput
    from cardfit.services.plan import build_context, engine_defaults

    ctx = build_context(PlanInput(model="llama-3.1-8b", runtime=runtime, context=4096))
    card = default_gpus().get(gpu)
    assert engine_defaults(ctx, card) == (tokens, seqs)
    # given values win; never fewer sequences than the plan runs at once
    ctx = build_context(PlanInput(model="llama-3.1-8b", runtime="vllm", context=4096, prefill_chunk=512,
                                  max_num_seqs=64, batch=100))
    assert engine_defaults(ctx, card) == (512, 100)


def test_plan_and_launch_line_agree_on_max_num_seqs(run_json):
    d = run_json("plan", "llama-3.1-8b", "--gpu", "H100 SXM", "--runtime", "vllm", "--context", "8192",
                 "--max-num-seqs", "64")
    assert "--max-num-seqs 64" in d["gpus"][0]["command"]
    big = run_json("plan", "llama-3.1-8b", "--gpu", "H100 SXM", "--runtime", "vllm", "--context", "8192")
    # 1024 sampled rows x 128,256 logits cost more than 64 rows: less room on the same card
    assert big["gpus"][0]["free_bytes"] < d["gpus"][0]["free_bytes"]


GIB = 2**30


@pytest.mark.parametrize(("runtime", "gpu", "extra_gib", "why"), [
    # Marlin pads gpt-oss's 2,880 x 2,880 experts to 2,944 x 3,072: the 65.97 GiB 'Model loading took' of
    # vllm-project/vllm#23278 (v0.10.1 on H100, Marlin's warning in the log) less the 60.71 GiB checkpoint
    ("vllm", "A100 SXM 80GB", 5.13, "Marlin on Ampere"),
    ("vllm", "RTX 5090", 5.13, "Marlin on the GDDR7 Blackwell cards (SM120: Triton only after Marlin)"),
    ("vllm@0.26.0", "B200", 7.82, "FlashInfer on SM100 pads both dimensions to 256 up to 0.26"),
    # from 0.27.0 the TRT-LLM kernels pad the intermediate dimension to 128 only (mxfp4.py line 657 of the
    # wheel 0.27.0): 2,944 x 3,072, Marlin's layout
    ("vllm", "B200", 5.13, "FlashInfer on SM100 pads to 128 x 256 from 0.27"),
    # vLLM runs OAI's triton_kernels on Hopper: no tile padding, but a swizzled copy of the scales
    # (rows to 256) beside the loaded ones and float32 biases (runtimes/vllm.py triton_hopper_scale_bytes):
    # the 64.38 GiB of vllm-project/vllm#33155 (v0.14.1, one H100) less the 60.71 GiB checkpoint
    ("vllm@0.24.0", "H100 SXM", 3.53, "triton_kernels on Hopper keeps the loaded scales beside its copy"),
    # 0.25.0 frees the loaded scales once swizzled (mxfp4.py lines 1150-1156 of the wheel 0.25.0): the copy's
    # padding (5,888 rows of gate_up scales for 5,760, 3,072 of down for 2,880) and the float32 biases remain
    ("vllm", "H100 SXM", 0.20, "triton_kernels on Hopper frees the loaded scales from 0.25"),
])
def test_vllm_pads_mxfp4_experts_to_the_moe_kernels_tiles(runtime, gpu, extra_gib, why):
    from cardfit.catalog.gpus import default_gpus
    from cardfit.core.weights import weights

    ctx = build_context(PlanInput(model="gpt-oss-120b", runtime=runtime, context=8192))
    card = default_gpus().get(gpu)
    padded = memory_for(ctx, 8192, card).weights_bytes - weights(ctx.model, ctx.quant).total_bytes
    assert padded / GIB == pytest.approx(extra_gib, abs=0.01), why
    unpadded = weights(ctx.model, ctx.quant).total_bytes
    assert memory_for(ctx, 8192).weights_bytes == unpadded  # no card named: the file's layout


def test_llamacpp_lays_out_the_file_as_it_is():
    from cardfit.catalog.gpus import default_gpus

    ctx = build_context(PlanInput(model="gpt-oss-120b", runtime="llama.cpp", context=8192, quant="mxfp4"))
    card = default_gpus().get("A100 SXM 80GB")
    assert memory_for(ctx, 8192, card).weights_bytes == memory_for(ctx, 8192).weights_bytes


@pytest.mark.parametrize(("gpu", "tp", "gib"), [
    ("H200 SXM", 8, 4.5),  # 2 communicators x NCCL's nvlsTotalSize 2,415,919,104 B (vllm-project/vllm#9699)
    ("H100 SXM", 4, 2.25),
    ("H100 SXM", 2, 0.0),  # NCCL uses NVLS only above 2 ranks
    ("A100 SXM 80GB", 8, 0.0),  # NVLink SHARP needs third-generation NVSwitch (Hopper and later)
    ("L40S", 8, 0.0),  # PCIe
])
def test_nccl_nvls_buffers_need_nvswitch_and_more_than_two_ranks(gpu, tp, gib):
    from cardfit.catalog.gpus import default_gpus

    engine = adapter(default_runtimes().get("vllm"))
    assert engine.nvls_bytes(default_gpus().get(gpu), tp, 2) / GIB == pytest.approx(gib)


@pytest.mark.parametrize(("context", "hint"), [
    (115000, None),  # fits at vLLM 0.33.0's own default, 0.92 from 0.20.0 (vllm/config/cache.py)
    (120000, "--gpu-memory-utilization 0.94"),
    # 0.96 would leave 3.2 GiB of each H100 outside vLLM's fraction: less than the CUDA context (0.62 GiB) and
    # NCCL's NVLink SHARP buffers of an 8-rank NVSwitch set (4.5 GiB), which V1 holds outside it
    (131072, None),
])
def test_vllm_utilization_hint_leaves_the_card_room_for_context_and_nccl(run_cli, context, hint):
    code, out, err = run_cli("plan", "llama-3.1-405b", "--quant", "fp8", "--runtime", "vllm@0.33.0",
                             "--gpu", "H100 SXM", "--gpus", "8", "--tp", "8", "--context", str(context),
                             "--batch", "3", env={"COLUMNS": "200"})
    assert code == 0, err
    if hint:
        assert hint in out
    else:
        assert "--gpu-memory-utilization" not in out
    # from 0.34.0 vLLM takes the whole card by default (utilization 1.0, the KV cache sized from measured
    # memory: data/releases.toml extensible_kv_cache): no higher share to suggest
    code, out, err = run_cli("plan", "llama-3.1-405b", "--quant", "fp8", "--runtime", "vllm",
                             "--gpu", "H100 SXM", "--gpus", "8", "--tp", "8", "--context", str(context),
                             "--batch", "3", env={"COLUMNS": "200"})
    assert code == 0 and "--gpu-memory-utilization" not in out, err

"""gpt-oss's MXFP4 experts on a card without FP4 tensor cores: the engines run them as BF16 x FP4 GEMMs that
unpack the weights inside the MoE kernel (vLLM on Hopper: OpenAI's triton_kernels matmul_ogs or Marlin), whose
prompt GEMMs reach runtimes.toml mxfp4_expert_prefill_share of the dense GEMMs' rate (fitted on vLLM's served
TTFT records of gpt-oss on H100: the vLLM blog's FP8 KV-cache post and aiconfigurator 0.12.0's runs)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cardfit.catalog.gpus import default_gpus
from cardfit.catalog.models import default_models
from cardfit.catalog.quants import default_quants
from cardfit.catalog.runtimes import default_runtimes
from cardfit.core import speed as sp
from cardfit.core.tensors import expert_active_params
from cardfit.services import served
from cardfit.services.plan import PlanInput, build_context
from cardfit.services.served import mxfp4_experts_unpacked

GPT_OSS_20B = default_models().get("gpt-oss-20b")
MXFP4 = default_quants().get("mxfp4")


def test_expert_parameters_a_token_goes_through():
    # openai/gpt-oss-20b config.json: 24 layers, 4 of 32 experts, hidden 2,880, expert intermediate 2,880;
    # gate_up (2 x 2,880 x 2,880 + 2 x 2,880 biases) and down (2,880 x 2,880 + 2,880) per expert
    per_expert = 2 * 2880 * 2880 + 2 * 2880 + 2880 * 2880 + 2880
    assert expert_active_params(GPT_OSS_20B) == pytest.approx(24 * 4 * per_expert, rel=0.01)
    assert expert_active_params(default_models().get("llama-3.1-8b")) == 0  # dense: no routed experts


@pytest.mark.parametrize(("gpu", "quant", "unpacked"), [
    ("H100 SXM", "mxfp4", True),   # Hopper: no FP4 tensor cores, BF16 x FP4 in the MoE kernel
    ("H200 SXM", "mxfp4", True),
    ("B200", "mxfp4", False),      # Blackwell: native block-scaled FP4 MoE kernels
    # CDNA3 has no FP4 matrix cores: vLLM on ROCm runs MXFP4 MoE in the same triton_kernels backend
    # (vllm/model_executor/layers/quantization/mxfp4.py get_mxfp4_backend: "elif current_platform.is_rocm()
    # and has_triton_kernels(): ... return Mxfp4Backend.TRITON")
    ("MI300X", "mxfp4", True),
    ("MI325X", "mxfp4", True),
    ("H100 SXM", "bf16", False),   # the BF16 checkpoint: ordinary grouped GEMMs
])
def test_which_setups_unpack_the_experts(gpu, quant, unpacked):
    g, q = default_gpus().get(gpu), default_quants().get(quant)
    assert mxfp4_experts_unpacked(q, GPT_OSS_20B, g) is unpacked


def test_the_experts_prompt_flops_count_at_their_own_rate():
    vllm = default_runtimes().get("vllm")
    gpu = default_gpus().get("H100 SXM")
    mc = sp.machine_for(vllm, gpu, 1, gpu.tflops("bf16"), precision="bf16")
    share = vllm.mxfp4_expert_prefill_share
    assert 0 < share < 1
    slow = replace(mc, expert_prefill_share=share)
    extra = sp.prefill_flops(GPT_OSS_20B, 10_000, slow) - sp.prefill_flops(GPT_OSS_20B, 10_000, mc)
    # the experts' 2 x parameters take 1 / share of their time: (1 / share - 1) of them more
    assert extra == pytest.approx(2 * expert_active_params(GPT_OSS_20B) * (1 / share - 1))
    # the attention share of a prompt token is not the experts' surcharge
    assert sp.prefill_attention_flops(GPT_OSS_20B, 10_000, slow) == pytest.approx(
        sp.prefill_attention_flops(GPT_OSS_20B, 10_000, mc))
    # a share of 0 (not set) or 1 changes nothing
    assert sp.prefill_flops(GPT_OSS_20B, 10_000, replace(mc, expert_prefill_share=1.0)) == \
        sp.prefill_flops(GPT_OSS_20B, 10_000, mc)


@pytest.mark.parametrize(("gpu", "unpacked"), [("MI300X", True), ("H100 SXM", True), ("B200", False)])
def test_the_decode_tokens_experts_pay_the_same_kernel(gpu, unpacked):
    """A served step's decode tokens go through the same MoE kernel as its prompt tokens: where it unpacks
    MXFP4 tiles, a decode token's expert FLOPs carry the same surcharge as a prompt token's."""
    ctx = build_context(PlanInput(model="gpt-oss-20b", quant="mxfp4", runtime="vllm", gpu=gpu, context=4096))
    g = default_gpus().get(gpu)
    w = served.workload(1000, 1000, 4096)
    whole = sp.Load(10**9, sp.weight_shares(GPT_OSS_20B, MXFP4), 0, 4e9, GPT_OSS_20B.layers, 2880)
    mc = served.machine(ctx, g, 1)
    r = served.replica(ctx, whole, mc, w, 1, 64)
    extra = r.load.flops_per_token - whole.flops_per_token
    if unpacked:
        share = mc.expert_prefill_share
        assert 0 < share < 1
        assert extra == pytest.approx(2 * expert_active_params(GPT_OSS_20B) * (1 / share - 1))
    else:
        assert extra == 0.0

"""The kernels a record's engine ran where they differ from the plan's (validation/serving.py
rocm_v0_kernels):
vLLM V0's eager decode past max_seq_len_to_capture, the generic paged-attention fallback on ROCm past
32,768 tokens (vLLM V0 and TGI), and vLLM V0's Triton prefix-prefill kernel on ROCm with chunked prefill on.
Cases are the dstack Llama 3.1 405B on 8x MI300X runs (data/validation/serving.toml)."""

from __future__ import annotations

import tomllib
from dataclasses import replace
from functools import cache
from importlib import resources

import pytest

from cardfit.catalog.runtimes import default_runtimes
from cardfit.core import speed as sp
from cardfit.validation.serving import predict_serving, record_runtime, rocm_v0_kernels


@cache
def _records() -> dict[str, dict]:
    text = resources.files("cardfit.data").joinpath("validation").joinpath("serving.toml").read_text()
    return {r["id"]: r for r in tomllib.loads(text)["record"]}


def _kernels(record_id: str, **changes) -> dict[str, float]:
    r = {**_records()[record_id], **changes}
    return rocm_v0_kernels(r, record_runtime(r))  # the profile at the record's release


VLLM = default_runtimes().get("vllm")


@pytest.mark.parametrize(("record_id", "copies", "eager", "why"), [
    ("dstack-405b-mi300x-vllm-single-128k-tpot", 16.0, True,
     "128,075 tokens in flight: past 32,768 (generic kernel, 128 query heads / 8 KV heads) and past 8,192"),
    ("dstack-405b-mi300x-vllm-single-64k-tpot", 16.0, True, "64,075 tokens: both"),
    ("dstack-405b-mi300x-vllm-single-32k-tpot", None, True, "32,046 tokens: ROCm's own kernel, eager decode"),
    ("dstack-405b-mi300x-vllm-10000in-n1-tpot", None, True, "10,061 tokens: eager decode only"),
    ("dstack-405b-mi300x-vllm-80in-n1-tpot", None, False, "122 tokens: a graph and ROCm's own kernel"),
])
def test_vllm_v0_on_rocm(record_id, copies, eager, why):
    k = _kernels(record_id)
    assert k.get("vllm.kv_read_copies") == copies, why
    assert ("vllm.decode_overhead_us_per_layer" in k) == eager, why
    if eager:
        assert k["vllm.decode_overhead_us_per_layer"] == VLLM.decode_overhead_us_per_layer_eager_v0
    # chunked prefill on (max_model_len 131,072 > 32K): every prompt's attention in the Triton kernel
    assert k["vllm.prompt_attention_tflops"] == VLLM.prefix_prefill_tflops_rocm_v0, why


def test_tgi_graphs_captured_at_its_longest_sequence_read_the_cache_per_query_head():
    # --max-total-tokens 130000: decode graphs captured past 32,768 run the generic kernel at any context
    assert _kernels("dstack-405b-mi300x-tgi-single-16k-tpot") == {"tgi.kv_read_copies": 16.0}
    assert _kernels("dstack-405b-mi300x-tgi-80in-n1-tpot") == {"tgi.kv_read_copies": 16.0}
    # a server whose longest sequence stays under the limit: ROCm's own kernel up to 32,768 tokens
    st = {k: v for k, v in _records()["dstack-405b-mi300x-tgi-single-16k-tpot"]["settings"].items()
          if k != "max_total_tokens"}
    assert _kernels("dstack-405b-mi300x-tgi-single-16k-tpot", settings=st) == {}
    assert _kernels("dstack-405b-mi300x-tgi-single-64k-tpot", settings=st) == {"tgi.kv_read_copies": 16.0}


def test_nothing_changes_off_rocm_or_on_v1():
    base = "dstack-405b-mi300x-vllm-single-128k-tpot"
    st = _records()[base]["settings"]
    on_cuda = _kernels(base, gpu="H100 SXM")  # V0 on CUDA: only the eager decode past 8,192 tokens
    assert set(on_cuda) == {"vllm.decode_overhead_us_per_layer"}
    assert _kernels(base, settings={**st, "version": "0.10.1.1"}) == {}  # V1: graphs at any context


def test_generic_kernel_reads_the_cache_once_per_query_head():
    """core/speed.py step: the cache read time scales with kv_read_copies, nothing else moves."""
    shares = sp.Shares(1.0, 0.0, 0.0, 1.0, "params")
    load = sp.Load(810_000_000_000, shares, 128_000 * 516_096, 2 * 405e9, 126, 16384)  # 405B bf16, 128k
    mc = sp.Machine(5300.0, 1307.0, 8, decode_efficiency=0.873)
    once, sixteen = sp.step(load, mc, 1), sp.step(load, replace(mc, kv_read_copies=16.0), 1)
    assert sixteen.seconds - once.seconds == pytest.approx(15 * once.kv_s, rel=1e-9)
    assert sixteen.kv_s == pytest.approx(16 * once.kv_s, rel=1e-9)


@pytest.mark.parametrize(("record_id", "lo", "hi"), [
    # in sample: decode 98.17 ms measured at 128,000 tokens; TTFT 734 s (chunked prompt, Triton kernel)
    ("dstack-405b-mi300x-vllm-single-128k-tpot", 0.9, 1.15),
    ("dstack-405b-mi300x-vllm-single-128k-ttft", 0.9, 1.3),
    # TGI is not fitted: its decode past 32,768-token graphs, typed from its code alone (70.17 ms measured)
    ("dstack-405b-mi300x-tgi-single-128k-tpot", 0.9, 1.15),
])
def test_dstack_long_context_records(record_id, lo, hi):
    r = _records()[record_id]
    predicted, _ = predict_serving(r)
    assert lo <= predicted / r["measured"] <= hi

"""MoE and MLA models in served loads: the steady-state step mix (core/serving.py tpot_s) and the prefill of
MLA + MoE models on the engines before mid-2025 (runtimes.toml prefill_efficiency_mla_v0)."""

from __future__ import annotations

import statistics

import pytest

from cardfit.core import moe_parallel as mp
from cardfit.core import serving as sv
from cardfit.core import speed as sp
from cardfit.validation.calibrate import FITS, _chosen, _implied, experts_touched, fit, source_key
from cardfit.validation.serving import predict_serving
from cardfit.validation.validate import all_records

RECORDS = {r["id"]: r for r in all_records()}


def _replica(moe: bool, chunk: int = 8192) -> sv.Replica:
    """gpt-oss-120b-like on one H200: 65 GB of weights, 95 % of them in 128 routed experts, 4 a token
    (config.json num_local_experts 128, num_experts_per_tok 4); or the same bytes as a dense model."""
    shares = sp.Shares(0.05, 0.95, 0.0, 4 / 128, "file") if moe else sp.Shares(1.0, 0.0, 0.0, 1.0, "params")
    load = sp.Load(65_000_000_000, shares, 110_000_000, 2 * 5.1e9, 36, 2880)
    machine = sp.Machine(4800.0, 989.0, 1, decode_efficiency=0.873, overhead_s_per_layer=61e-6,
                         compute_efficiency=0.81)
    return sv.Replica(load, machine, 2 * 5.1e9, chunk, 64)


def test_steady_state_is_a_mix_of_prompt_steps_and_decode_steps():
    """4 users, 1,024 in / 1,024 out: one step in 256 carries a 1,024-token prompt, the others decode 4."""
    r, w = _replica(moe=True), sv.Workload(1024, 1024)
    share = 4 / 1024
    mixed = share * sv.step_s(r, 4, 1024) + (1 - share) * sv.step_s(r, 4, 0.0)
    assert sv.tpot_s(r, w, 4) == pytest.approx(mixed, rel=1e-12)


def test_moe_decode_steps_read_the_experts_of_their_own_tokens():
    """Spreading the prompt over every step would charge each the experts of 8 tokens, not 4: 22 % of the
    experts instead of 12 %, about 1.6x the bytes; the mix costs the decode step plus a 256th of a prompt
    step."""
    r, w = _replica(moe=True), sv.Workload(1024, 1024)
    spread = sv.step_s(r, 4, 4.0)  # the mean prompt, a slice in every step
    assert sv.tpot_s(r, w, 4) < 0.8 * spread
    touched = 1 - (1 - 4 / 128) ** 4
    assert touched == pytest.approx(0.119, abs=0.001)


def test_dense_decode_steps_read_the_same_bytes_either_way():
    """A dense step reads all its weights whatever it carries: the mix differs from the spread step only by
    the prompt step's FLOPs beyond its bytes (a few %)."""
    r, w = _replica(moe=False), sv.Workload(1024, 1024)
    assert sv.tpot_s(r, w, 4) == pytest.approx(sv.step_s(r, 4, 4.0), rel=0.05)


def test_every_step_full_of_prompts_is_the_mean_step():
    """When the prompts fill every step's budget there is no decode-only step to mix in."""
    r = _replica(moe=True, chunk=512)
    w = sv.Workload(4000, 100)  # 64 users: 2,560 prompt tokens a step on average, more than the budget
    assert sv.tpot_s(r, w, 64) == pytest.approx(sv.step_s(r, 64, 64 * 4000 / 100), rel=1e-12)


@pytest.mark.parametrize("batch", [1, 2, 4, 8, 16, 32, 64])
def test_tpot_grows_with_the_batch(batch):
    r, w = _replica(moe=True), sv.Workload(1024, 1024)
    assert sv.tpot_s(r, w, batch + 1) >= sv.tpot_s(r, w, batch)


# --- MLA + MoE prefill on the engines before mid-2025 ------------------------------------------------------

def _mla_prefill_fit():
    (f,) = [f for f in FITS if f.field == "prefill_efficiency_mla_v0"]
    return f


def test_mla_v0_prefill_share_is_fitted_on_two_sources_that_agree():
    """dstack's DeepSeek-R1 (8x H200 and 8x MI300X, vLLM 0.7, 3,200-token prompts) and dzhsurf's DeepSeek-V3
    AWQ (8x H100, vLLM 0.7.3, 1,024-token prompts) imply the same tenth or so of the card's measured GEMM
    rate, each within a factor 1.5 of the other: one phenomenon, not a per-source fudge."""
    f = _mla_prefill_fit()
    recs = tuple(RECORDS.values())
    values = fit(recs)
    by: dict[str, list[float]] = {}
    for r, src in _chosen(recs, f):
        v = _implied(f, r, values)
        if v is not None:
            by.setdefault(src, []).append(v)
    assert len(by) >= 2
    medians = [statistics.median(v) for v in by.values()]
    assert max(medians) / min(medians) < 1.5, by
    assert 0.03 < values[f.key] < 0.15


def test_mla_v0_ttft_pays_that_generations_prefill():
    """The dstack vLLM run on 8x H200 at 4 in flight: 975.7 ms mean TTFT for 4 x 3,200-token prompts
    prefilled together (vLLM 0.7 schedules MLA prompts first). The same run on a release with the mid-2025
    kernels (data/releases.toml mla_moe_kernels, vLLM 0.9.1) is timed with the current kernels' share (at most
    the best published DeepSeek prefill, 26 % of the peak: core/speed.py MLA_MOE_PREFILL_SHARE_MAX), over
    twice as fast."""
    r = RECORDS["dstack-r1-h200-vllm-3200x800-c4-ttft"]
    then, _ = predict_serving(dict(r))
    now, _ = predict_serving({**r, "date": "2025-08-01", "settings": {**r["settings"], "version": "0.9.1"}})
    assert then == pytest.approx(float(r["measured"]), rel=0.35)
    assert now < then / 2


def test_dzhsurf_ttft_records_are_one_source_with_its_throughput_records():
    """The TTFT chart sits in the same README as the throughput figures: leaving the source out leaves all
    of them out."""
    keys = {source_key(r) for k, r in RECORDS.items() if k.startswith("dzhsurf-")}
    assert len(keys) == 1


def test_median_gap_between_tokens_is_the_decode_only_step():
    """8 users, 20,000 in / 2,019 out (the vLLM blog's FP8 KV-cache throughput run): 79 prompt tokens a step
    on average, one step in about a hundred carries a chunk, so the median gap is a step that decodes alone,
    shorter than the mean (TPOT), which counts the chunk steps."""
    r, w = _replica(moe=True), sv.Workload(20000, 2019)
    assert sv.itl_median_s(r, w, 8) == pytest.approx(sv.step_s(r, 8, 0.0), rel=1e-12)
    assert sv.itl_median_s(r, w, 8) < sv.tpot_s(r, w, 8)


def test_median_gap_is_a_chunk_step_when_most_steps_carry_one():
    r, w = _replica(moe=True, chunk=2048), sv.Workload(1000, 10)  # 64 users: 6,400 prompt tokens a step
    assert sv.itl_median_s(r, w, 64) == pytest.approx(sv.step_s(r, 64, 6400), rel=1e-12)
    # 16 users, 1,000 in / 20 out: 800 prompt tokens a step, a 1,000-token chunk in 4 steps of 5
    r, w = _replica(moe=True), sv.Workload(1000, 20)
    assert sv.itl_median_s(r, w, 16) == pytest.approx(sv.step_s(r, 16, 1000), rel=1e-12)


def test_median_itl_records_fit_the_expert_share():
    """The vLLM blog's median ITL of gpt-oss-20b on one H100 (vLLM 0.19.1) is a decode step of a current
    engine whose 8 sequences touch 66 % of the 32 experts: it fits vllm.expert_efficiency with
    aiconfigurator's steps of 48-128 sequences. (Tenstorrent's single-stream Qwen3-30B-A3B, 6 % of the
    experts a step, fitted it too until the MoE layer's fixed time was fitted apart: it now fits that.)"""
    (f,) = [f for f in FITS if f.field == "expert_efficiency"]
    chosen = {r["id"] for r, _ in _chosen(tuple(RECORDS.values()), f)}
    assert "vllmblog-fp8kv-gpt-oss-20b-h100-bf16kv-20000x2019-c8-itl" in chosen
    assert "aic-gpt-oss-120b-h100-vllm-mxfp4-tp2-1024x1024-c64-tpot" in chosen
    assert not {i for i in chosen if i.startswith("tt340-")}
    assert len({source_key(RECORDS[i]) for i in chosen}) >= 2


def test_few_expert_steps_fit_the_moe_layers_fixed_time():
    """A step that touches at most half the routed experts (1 - (1 - k/E)^B, EXPERT_BOUND_TOUCHED) fits the
    fixed time of an MoE layer (vllm.moe_overhead_us_per_layer), one that touches more the expert share:
    each record fits one of the two, from at least two sources each."""
    fixed = next(f for f in FITS if f.field == "moe_overhead_us_per_layer")
    stream = next(f for f in FITS if f.field == "expert_efficiency")
    few = {r["id"] for r, _ in _chosen(tuple(RECORDS.values()), fixed)}
    most = {r["id"] for r, _ in _chosen(tuple(RECORDS.values()), stream)}
    assert not few & most
    assert {"tt340-a100-qwen3-30b-a3b-vllm-isl128", "vllmblog-fp8kv-gpt-oss-20b-h100-bf16kv-c1-256in",
            "aic-gpt-oss-120b-h100-vllm-mxfp4-tp2-1024x1024-c4-tpot"} <= few
    assert len({source_key(RECORDS[i]) for i in few}) >= 2
    # gpt-oss-120b (128 experts, 4 a token) at 4 sequences: 11.9 %; gpt-oss-20b (32, 4) at 8: 65.6 %
    assert experts_touched(RECORDS["aic-gpt-oss-120b-h100-vllm-mxfp4-tp2-1024x1024-c4-tpot"]) == \
        pytest.approx(1 - (1 - 4 / 128) ** 4)
    assert experts_touched(RECORDS["vllmblog-fp8kv-gpt-oss-20b-h100-bf16kv-20000x2019-c8-itl"]) == \
        pytest.approx(1 - (7 / 8) ** 8)
    assert experts_touched(RECORDS["vllmblog-fp8kv-llama-3.1-8b-h100-bf16kv-c1-256in"]) == 1.0  # dense


def test_the_moe_step_fits_take_no_served_burst():
    """experts_touched reads a record's concurrency (1 where none is stated), so a served burst or arrival
    rate, whose step batch the engine sets and the record does not state, cannot be placed between the MoE
    layer's fixed time and the expert stream: neither fit takes one. GPUStack's DeepSeek-R1 on 8x H200,
    1,000 ShareGPT prompts sent at once (no --max-concurrency): TPOT 227 ms, which read as one sequence
    would charge the whole step to the MoE layer's fixed time; its 4-user run (--max-concurrency 4, TPOT
    19.4 ms) is taken (docs/VALIDATION.md "The MoE fixed time by kernel path")."""
    burst = RECORDS["gpustack-deepseek-r1-671b-h200-vllm-fp8-tp8-sharegpt-L90-tpot"]
    capped = RECORDS["gpustack-deepseek-r1-671b-h200-vllm-fp8-tp8-sharegpt-batch-size-4-L404-tpot"]
    assert not burst.get("concurrency") and capped["concurrency"] == 4
    recs = tuple(RECORDS.values())
    for field in ("moe_overhead_us_per_layer", "expert_efficiency"):
        f = next(x for x in FITS if x.field == field)
        chosen = [r for r, _ in _chosen(recs, f)]
        assert burst not in chosen
        assert all(r["kind"] != "serving" or (r.get("concurrency") and r.get("load") == "closed")
                   for r in chosen)
    assert capped in [r for r, _ in _chosen(recs, next(x for x in FITS
                                                         if x.field == "moe_overhead_us_per_layer"))]


def test_an_moe_layer_pays_its_fixed_time_every_step_a_dense_one_does_not():
    """Machine.overhead_s_per_moe_layer: once per layer per step of an MoE model, whatever the batch."""
    moe, dense = _replica(moe=True), _replica(moe=False)
    extra = 47e-6
    for r in (moe, dense):
        more = sv.Replica(r.load, sp.Machine(4800.0, 989.0, 1, decode_efficiency=0.873,
                                             overhead_s_per_layer=61e-6, compute_efficiency=0.81,
                                             overhead_s_per_moe_layer=extra), r.prefill_flops_per_token,
                          r.chunk_tokens, r.max_seqs)
        for b in (1, 64):
            gap = sp.step(more.load, more.machine, b).seconds - sp.step(r.load, r.machine, b).seconds
            assert gap == pytest.approx(36 * extra if r is moe else 0.0, abs=1e-12)


def test_the_moe_layers_fixed_time_skips_deepseeks_dense_layers():
    """DeepSeek-V3/R1 run a dense MLP in their first three of 61 layers (config.json first_k_dense_replace 3):
    those layers launch no router, top-k or grouped GEMM, so a step pays the MoE layer's fixed time 58 times,
    on the served path (services/served.py) and on `cardfit speed`'s (decode_load) alike; a load that does
    not say how many of its layers are MoE pays it on every layer."""
    from cardfit.catalog.models import default_models
    from cardfit.catalog.quants import default_quants
    from cardfit.catalog.runtimes import default_runtimes
    from cardfit.core.memory import MemorySettings, estimate
    from cardfit.runtimes import adapter

    m, q = default_models().find("deepseek-r1-671b"), default_quants().get("FP8")
    assert (m.layers, m.dense_layers) == (61, 3)
    mem = estimate(m, q, adapter(default_runtimes().get("sglang")), MemorySettings(context=4096, tp=8))
    load = sp.decode_load(m, mem, q, 2048)
    assert (load.moe_layers, load.moe_layer_count) == (58, 58)
    extra = 82e-6
    base = sp.Machine(4800.0, 989.0, 8, decode_efficiency=0.873, overhead_s_per_layer=40.9e-6)
    more = sp.Machine(4800.0, 989.0, 8, decode_efficiency=0.873, overhead_s_per_layer=40.9e-6,
                      overhead_s_per_moe_layer=extra)
    for b in (1, 64):
        gap = sp.step(load, more, b).seconds - sp.step(load, base, b).seconds
        assert gap == pytest.approx(58 * extra, abs=1e-12)
    unsaid = sp.Load(65_000_000_000, sp.Shares(0.05, 0.95, 0.0, 4 / 128, "file"), 0, 1e10, 36, 2880)
    assert unsaid.moe_layer_count == 36


def test_mla_v0_prefill_is_a_share_of_the_cards_measured_gemm_rate():
    """The MI300X's FP8 GEMMs reach 1,159.5 of its 2,614.9 datasheet TFLOPS (Azure AI-benchmarking-guide,
    hipBLASLt), the H200's 1,366.3 of 1,978.9 (cuBLASLt): the same kernels of that generation prefill
    DeepSeek-R1 at that share of each card's peak. dstack's vLLM runs at 4 in flight measured 1,259 ms on
    8x MI300X and 976 ms on 8x H200 though the MI300X's peak is a third higher."""
    from cardfit.validation.serving import measured_gemm_share

    h200 = RECORDS["dstack-r1-h200-vllm-3200x800-c4-ttft"]
    mi300x = RECORDS["dstack-r1-mi300x-vllm-3200x800-c4-ttft"]
    assert measured_gemm_share(h200) == pytest.approx(1366.3 / 1978.9, rel=1e-3)
    assert measured_gemm_share(mi300x) == pytest.approx(1159.5 / 2614.9, rel=1e-3)
    awq = {"gpu": "H100 SXM", "quant": "awq"}  # Hopper's BF16 GEMMs not measured: its FP8 share
    assert measured_gemm_share(awq) == pytest.approx(1382.2 / 1978.9, rel=1e-3)
    assert predict_serving(dict(mi300x))[0] > predict_serving(dict(h200))[0]


# --- the expert-parallel ranks' imbalance in a step that carries prompt tokens -----------------------------

def _ep_replica() -> sv.Replica:
    """DeepSeek-R1-like on 8 ranks, attention DP 8 and experts EP 8: 8 of 256 routed experts a token
    (config.json num_experts_per_tok 8, n_routed_experts 256), 58 MoE layers of 61."""
    shares = sp.Shares(0.06, 0.94, 0.0, 8 / 256, "file")
    load = sp.Load(690_000_000_000, shares, 70_000, 2 * 37e9, 61, 7168, experts_active=8, moe_layers=58)
    machine = sp.Machine(8000.0, 4500.0, 8, compute_efficiency=0.25, attention_dp=8, expert_parallel=8)
    return sv.Replica(load, machine, 2 * 37e9, 8192, 512)


@pytest.mark.parametrize("decode, prompt", [(0, 8192), (0, 1024), (64, 960), (512, 0)])
def test_an_ep_step_pays_the_imbalance_of_all_the_tokens_it_routes(decode, prompt):
    """The busiest of the ep ranks takes ~ μ + σ√(2 ln ep) of a step's routed tokens (core/moe_parallel.py
    imbalance), and a prompt step routes every prompt token: 8,192 tokens x 8 experts over 8 ranks leave the
    busiest rank 2 % over the mean, not the 191 % of one token's 8 experts (the prompt step's compute was
    charged that, 2x its FLOPs, before: a DP 8 prefill worker at half its rate)."""
    r = _ep_replica()
    load, b = sv._mixed(r.load, decode, prompt, r.prefill_flops_per_token)
    tokens = decode + prompt
    s = sp.step(load, r.machine, b)
    plain = tokens * r.load.flops_per_token / 8 / (4500.0e12 * 0.25)
    share = sp._expert_flops_share(load)
    assert s.compute_s == pytest.approx(plain * (1 + share * (mp.imbalance(tokens, 8, 8) - 1)), rel=1e-12)
    if prompt >= 1024:
        assert s.compute_s < 1.1 * plain

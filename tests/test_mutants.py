"""Hand-derived cases that hold the search, the memory model, the served-load model and the cost arithmetic
(scripts/mutate.py runs each class against its area's mutants): every expected figure is worked out in the
test from the inputs or from a source's own figure, never copied from the code's output."""

from __future__ import annotations

import math
from dataclasses import replace
from types import SimpleNamespace as NS

import pytest

from cardfit.catalog.models import default_models
from cardfit.catalog.quants import default_quants
from cardfit.catalog.runtimes import default_runtimes
from cardfit.core import cost, kv, memory
from cardfit.core import serving as sv
from cardfit.core import speed as sp
from cardfit.core.weights import weights
from cardfit.runtimes import adapter
from cardfit.services import deploy

from .helpers import load_script

# Llama 3.1 8B (config.json of meta-llama/Llama-3.1-8B): hidden 4096, intermediate 14336, 32 layers, 32 query
# heads and 8 KV heads of 128, vocabulary 128256, untied output.
L8_LAYERS, L8_HIDDEN, L8_FFN, L8_KV_HEADS, L8_HEAD, L8_VOCAB = 32, 4096, 14336, 8, 128, 128256
L8_Q = L8_O = L8_HIDDEN * L8_HIDDEN
L8_K = L8_V = L8_HIDDEN * L8_KV_HEADS * L8_HEAD
L8_GATE = L8_UP = L8_DOWN = L8_HIDDEN * L8_FFN
L8_EMBD = L8_VOCAB * L8_HIDDEN  # token_embd and output, each
L8_NORMS = (2 * L8_LAYERS + 1) * L8_HIDDEN  # attn_norm, ffn_norm per layer, output_norm (F32 in a GGUF)
L8_PARAMS = L8_LAYERS * (L8_Q + L8_K + L8_V + L8_O + L8_GATE + L8_UP + L8_DOWN) + 2 * L8_EMBD + L8_NORMS
# ggml block sizes (ggml-common.h): Q4_K 144 bytes and Q6_K 210 bytes per 256 weights
Q4_K, Q6_K = 144 / 256, 210 / 256


def use_more_bits(i: int, n: int) -> bool:
    """llama.cpp llama-quant.cpp: the layers Q4_K_M gives Q6_K attn_v and ffn_down."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def llama8b_q4_k_m() -> dict[str, int]:
    """Bytes by ggml type of Llama 3.1 8B at Q4_K_M, tensor by tensor (llama_tensor_get_type: attn_v and
    ffn_down Q6_K in the use_more_bits layers, output Q6_K, every other matrix Q4_K, norms F32)."""
    more = sum(use_more_bits(i, L8_LAYERS) for i in range(L8_LAYERS))
    q4 = (L8_LAYERS * (L8_Q + L8_K + L8_O + L8_GATE + L8_UP) + (L8_LAYERS - more) * (L8_V + L8_DOWN)
          + L8_EMBD) * Q4_K
    q6 = (more * (L8_V + L8_DOWN) + L8_EMBD) * Q6_K
    return {"Q4_K": round(q4), "Q6_K": round(q6), "FP32": L8_NORMS * 4}


def model(name: str):
    return default_models().get(name)


def result(monthly: float | None, count: int, tpot: float, ttft: float, gpu: str = "A", users=None) -> NS:
    """A deployment as the ranking sees it: its rent, cards, TPOT, TTFT (and what pareto() shows of it)."""
    setting = NS(ctx=NS(runtime=NS(id="vllm"), quant=NS(name="bf16")), mem=NS(kv_dtype="f16"))
    return NS(monthly_usd=monthly, count=count, served=NS(tpot_s=tpot, ttft_s=ttft), served_tokens_per_s=1.0,
              cand=NS(inp=NS(users=users), gpu=NS(id=gpu), setting=setting, tp=1, pp=1, attention_dp=1, ep=1,
                      replica=NS(engine_seqs=0, max_seqs=8, chunk_tokens=2048)))


class TestSearch:
    @pytest.mark.parametrize("lo", [1, 2, 3, 5])
    @pytest.mark.parametrize("most", [1, 6, 7, 40])
    def test_fewest_replicas_is_the_smallest_count_that_meets(self, monkeypatch, lo, most):
        # a candidate that meets the targets from `need` replicas up: the search must return exactly the
        # smallest count ≥ lo that meets within `most`, or None, for every need
        for need in range(1, 45):
            asked = []

            def evaluate(inp, c, n, t, scale=1.0, need=need, asked=asked):
                asked.append(n)
                return NS(meets=n >= need, n=n)

            monkeypatch.setattr(deploy, "evaluate", evaluate)
            got = deploy._fewest_replicas(NS(), NS(), NS(), lo, most)
            want = max(need, lo) if max(need, lo) <= most else None
            assert (got.n if got else None) == want, (need, lo, most, asked)
            assert all(n <= most for n in asked)

    def test_throughput_floor_of_the_replicas(self):
        # B_t, the most sequences decoding within the TPOT target: 25 (the target between TPOT(25) and
        # TPOT(26)); a closed loop puts fewer than B_t + 1 = 26 users on a replica, arrivals at most
        # (B_t + 1) ÷ ((O − 1) × TPOT(B_t)) requests/s (Little's law: services/deploy.py _fewest_of)
        r, w = replica(), sv.Workload(1024, 256)
        target = sv.tpot_s(r, w, 25.5)
        assert sv.tpot_s(r, w, 25) <= target < sv.tpot_s(r, w, 26)
        for users, fewest in [(584.0, 23), (26.0, 1), (27.0, 2), (1.0, 1)]:
            assert deploy._fewest_of(r, 1024, 256, target, 2.0, users, None) == fewest == -(-users // 26)
        rate = 26 / (255 * sv.tpot_s(r, w, 25))
        assert deploy._fewest_of(r, 1024, 256, target, 2.0, None, 30.0) == math.ceil(30.0 / rate)
        # every slot within the target (8 of 8): users past the slots queue, within the 2 s TTFT target, for
        # (n − 8) × service ÷ 8, a service of 255 steps of TPOT(8): 8 × (1 + 2 s ÷ service) users a replica
        small = replica(seqs=8)
        service = 255 * sv.tpot_s(small, w, 8)
        held = 8 * (1 + 2.0 / service)
        assert deploy._fewest_of(small, 1024, 256, 1.0, 2.0, 100.0, None) == math.ceil(100 / held)

    @pytest.mark.parametrize(("users", "max_cards", "budget", "cards", "price", "most"), [
        (None, 0, None, 1, 100.0, deploy.MAX_REPLICAS),
        (10.0, 0, None, 1, 100.0, 10),  # 10 users keep at most 10 replicas busy
        (2.5, 0, None, 1, 100.0, 3),
        (None, 8, None, 2, 100.0, 4),  # 8 cards of 2-card replicas: 4 replicas
        (None, 7, None, 2, 100.0, 3),
        (None, 0, 1000.0, 1, 300.0, 4),  # $1,000 ÷ $300 = 3, and one more the set discount may let in
        (None, 0, 900.0, 1, 300.0, 4),
    ])
    def test_limit(self, users, max_cards, budget, cards, price, most):
        inp = NS(users=users, max_cards=max_cards, budget_usd_month=budget)
        assert deploy._limit(inp, NS(cards=cards, price=price)) == most

    def test_ranking_by_rent_then_cards_then_tpot_then_ttft(self):
        rs = [result(None, 1, 0.01, 0.1), result(None, 20, 0.005, 0.1), result(200.0, 2, 0.02, 0.2),
              result(100.0, 4, 0.03, 0.1), result(100.0, 4, 0.03, 0.05), result(100.0, 1, 0.02, 0.5)]
        order = sorted(range(len(rs)), key=lambda i: deploy._key(rs[i]))
        # priced first, cheapest first; at $100 the lower TPOT (5), then the lower TTFT (4 before 3);
        # unpriced after, the one card before the 20 however fast the 20 are
        assert order == [5, 4, 3, 2, 0, 1]

    def test_pareto_keeps_what_nothing_beats_on_every_axis(self):
        a = result(100.0, 1, 0.05, 1.0, "A")
        b = result(200.0, 2, 0.02, 1.0, "B")  # dearer, faster per user: kept
        c = result(300.0, 3, 0.03, 2.0, "C")  # dearer and slower than b on both: dropped
        d = result(300.0, 3, 0.04, 0.5, "D")  # dearer, but the fastest to the first token: kept
        e = result(100.0, 1, 0.05, 1.0, "A")  # the same deployment as a, shown once
        assert deploy.pareto([c, d, e, b, a]) == [a, b, d]


class TestMemory:
    def test_llama8b_q4_k_m_weights_tensor_by_tensor(self):
        want = llama8b_q4_k_m()
        assert sum(use_more_bits(i, 32) for i in range(32)) == 16  # 0-3, 28-31, 6, 9, …, 27
        w = weights(model("llama3.1:8b"), default_quants().get("Q4_K_M"))
        assert dict(w.by_type) == want
        assert w.total_bytes == sum(want.values()) == 4_912_898_048  # Ollama lists the tag as 4.9 GB

    @pytest.mark.parametrize(("quant", "bytes_"), [
        ("bf16", 2 * L8_PARAMS),
        # Meta's FP8 release: FFN matrices of the 30 inner layers at 1 byte, the rest bf16 (arXiv 2407.21783)
        ("fp8_ffn", 2 * L8_PARAMS - (L8_LAYERS - 2) * (L8_GATE + L8_UP + L8_DOWN)),
    ])
    def test_llama8b_weights_by_quant(self, quant, bytes_):
        assert L8_PARAMS == 8_030_261_248  # the model card's 8.03 B
        assert weights(model("llama3.1:8b"), default_quants().get(quant)).total_bytes == bytes_

    def test_weights_from_the_parameter_count_alone(self):
        m = replace(model("llama3.1:8b"), layers=0, hidden=0)  # no shapes: params × bits ÷ 8
        w = weights(m, default_quants().get("fp8"))
        assert w.total_bytes == L8_PARAMS

    @pytest.mark.parametrize(("dtype", "per_token"), [
        ("f16", 2 * L8_LAYERS * L8_KV_HEADS * L8_HEAD * 2),  # 131,072 B/token, the README's figure
        ("q8_0", 2 * L8_LAYERS * L8_KV_HEADS * L8_HEAD * 34 // 32),  # 34 bytes per block of 32
        ("q4_0", 2 * L8_LAYERS * L8_KV_HEADS * L8_HEAD * 18 // 32),
        ("fp8", 2 * L8_LAYERS * L8_KV_HEADS * L8_HEAD),
    ])
    def test_llama8b_kv_per_token(self, dtype, per_token):
        m = model("llama3.1:8b")
        assert kv.kv_bytes_per_token(m, dtype) == per_token
        assert kv.kv_cache_bytes(m, 32768, 2, dtype) == 2 * 32768 * per_token

    def test_sliding_window_layers_hold_the_window(self):
        # Gemma 3 27B: 62 layers, 52 of them sliding over 1,024 tokens, 16 KV heads of 128 (config.json)
        g = model("gemma3:27b")
        per_layer_token = 2 * 16 * 128 * 2
        assert kv.kv_cache_bytes(g, 32768) == per_layer_token * (10 * 32768 + 52 * 1024) == 3_120_562_176
        assert kv.kv_cache_bytes(g, 512) == per_layer_token * 62 * 512  # below the window: every layer

    def test_layers_sharing_kv_store_none(self):
        m = replace(model("llama3.1:8b"), kv_shared_layers=8)
        assert kv.kv_bytes_per_token(m) == 2 * (32 - 8) * L8_KV_HEADS * L8_HEAD * 2

    def test_linear_attention_layers_hold_a_fixed_state(self):
        # Qwen3-Next-80B-A3B (config.json): 48 layers, 36 of them Gated DeltaNet with 32 value heads of 128
        # over 16 key heads of 128 and a 4-wide causal conv; 12 full-attention layers, 2 KV heads of 256.
        # State per linear layer: 32 × 128 × 128 fp32 (vLLM mamba_ssm_cache_dtype) + 3 conv columns of
        # (2 × 16 × 128 + 32 × 128) bf16
        q = model("qwen3-next")
        state = 32 * 128 * 128 * 4 + 3 * (2 * 16 * 128 + 32 * 128) * 2
        per_token = 2 * 12 * 2 * 256 * 2
        assert kv.kv_bytes_per_token(q) == per_token == 24_576
        assert kv.kv_cache_bytes(q, 1000, 2) == 2 * (1000 * per_token + 36 * state)

    def test_llamacpp_sliding_window_cells(self):
        # ollama#16480: gpt-oss-120b at 2 × 131072 with n_ubatch 1024 → 2 streams of
        # GGML_PAD(128 + 1024, 256) = 1280 cells, 90 MiB over its 18 sliding layers of 8 KV heads × 64
        cells = kv.llamacpp_swa_cells(128, 2, 1024, 2 * 131072)
        assert cells == 2 * 1280
        assert cells * 18 * 2 * 8 * 64 * 2 == 90 * 2**20
        g = model("gpt-oss-120b")
        full = 18 * 2 * 8 * 64 * 2 * 131072  # the other 18 layers: full attention, per sequence
        assert kv.kv_cache_bytes(g, 131072, 2, window_cells=cells) == 2 * full + 90 * 2**20

    @pytest.mark.parametrize(("tp", "copies"), [(1, 1.0), (4, 1.0), (8, 1.0), (16, 2.0), (32, 4.0)])
    def test_kv_copies_past_the_kv_heads(self, tp, copies):
        # 8 KV heads: up to 8 ranks split them; 16 ranks hold each head twice (vLLM get_num_kv_heads)
        assert kv.kv_replication(model("llama3.1:8b"), tp) == copies

    def test_memory_total_is_the_sum_of_its_lines(self):
        w = weights(model("llama3.1:8b"), default_quants().get("Q4_K_M"))
        mem = memory.Memory(1, 20, 300, 4000, w, 8192, 1, "f16")
        assert mem.total_bytes == 4321
        assert mem.per_card_fixed_bytes == 4300

    @pytest.mark.parametrize(("context", "padded"), [(1, 256), (1000, 1024), (1024, 1024), (1025, 1280)])
    def test_llamacpp_pads_context_up_to_256(self, context, padded):
        # llama.cpp pads n_ctx to a multiple of 256 (llama-context.cpp GGML_PAD)
        assert memory.padded_context(context, default_runtimes().get("llama.cpp")) == padded

    def test_ollama_keeps_token_embd_in_system_ram(self):
        # the README plan: weights 4.6 GB on the card, the 0.3 GB token embedding (Q4_K) in system RAM
        m, q = model("llama3.1:8b"), default_quants().get("Q4_K_M")
        rt = adapter(default_runtimes().get("ollama"))
        mem = memory.estimate(m, q, rt, memory.MemorySettings(context=32768))
        embd = round(L8_EMBD * Q4_K)
        assert mem.host_weights_bytes == embd == 295_501_824
        assert mem.weights_bytes == sum(llama8b_q4_k_m().values()) - embd
        assert mem.kv_cache_bytes == 32768 * 131_072


def replica(seqs: int = 256, chunk: int = 2048, pp: int = 1) -> sv.Replica:
    """Qwen2-7B on one A100 80GB, as tests/test_kv_pool.py times it (Dennis Lee's vLLM benchmark)."""
    shares = sp.Shares(1.0, 0.0, 0.0, 1.0, "params")
    load = sp.Load(15_000_000_000, shares, 1536 * 57344, 2 * 7.6e9, 28, 3584)
    mc = sp.Machine(1935.0, 312.0, 1, decode_efficiency=0.873, overhead_s_per_layer=61.1e-6,
                    compute_efficiency=0.8)
    return sv.Replica(load, mc, 2 * 7.6e9, chunk, seqs, pp=pp)


class TestServing:
    """Each case is the model's documented formula worked through by hand on its primitive, one step's time
    (`step_s`, held against measurements elsewhere)."""

    def test_no_prompt_traffic_decodes_alone(self):
        # others = 0: a lone user's own prompt never rides along with its decode steps
        r, w = replica(), sv.Workload(2048, 256)
        assert sv.tpot_s(r, w, 4.0, 0.0) == sv.step_s(r, 4.0, 0.0)
        assert sv.tpot_s(r, w, 4.0) > sv.step_s(r, 4.0, 0.0)

    def test_a_share_of_the_steps_carries_a_whole_chunk(self):
        # 1 decode, 2,048 in / 256 out: 8 prompt tokens a step on average, scheduled as one 2,048-token chunk
        # every 256 steps (2,048 - 1 tokens free beside one decode, so one chunk): share 8 / 2,048
        r, w = replica(chunk=4096), sv.Workload(2048, 256)
        share = 8 / 2048
        want = (1 - share) * sv.step_s(r, 1.0, 0.0) + share * sv.step_s(r, 1.0, 2048)
        assert sv.tpot_s(r, w, 1.0) == pytest.approx(want, rel=1e-12)
        assert want > sv.step_s(r, 1.0, 8)  # a chunk step is compute bound: the mean is above the spread

    def test_prefill_in_chunks_pipelines_over_stages(self):
        # 3,000 prompt tokens in a 1,024-token budget: chunks of 1,024, 1,024 and 952; with 2 stages the
        # first two chunks each cost one stage's time, the last one the whole pipeline's
        for pp in (1, 2):
            r, w = replica(chunk=1024, pp=pp), sv.Workload(3000, 100)
            want = 2 * sv.prompt_step_s(r, 0.0, 1024) / pp + sv.prompt_step_s(r, 0.0, 952)
            assert sv.prefill_s(r, w, 0.0) == pytest.approx(want, rel=1e-12)

    def test_one_user_decodes_alone(self):
        r, w = replica(), sv.Workload(1024, 512)
        s = sv.closed_loop(r, w, 1.0)
        assert s.tpot_s == sv.step_s(r, 1.0, 0.0)

    def test_users_past_the_slots_wait_their_turn(self):
        # 4 slots: 8 users cycle the same 4 slots (same tokens/s); each waits for one in 4 users' service,
        # (8 - 4) x the time in service / 4 = one service, time in service = 4 x O / tokens per s
        r, w = replica(seqs=4), sv.Workload(1024, 256)
        four, eight = sv.closed_loop(r, w, 4.0), sv.closed_loop(r, w, 8.0)
        assert eight.output_tokens_per_s == pytest.approx(four.output_tokens_per_s, rel=1e-12)
        in_service = 4 * 256 / four.output_tokens_per_s
        assert eight.ttft_mean_s == pytest.approx(four.ttft_mean_s + in_service, rel=1e-9)

    def test_rounds_never_send_more_than_the_requests(self):
        r, w = replica(), sv.Workload(512, 64)
        assert sv.rounds(r, w, 8, 2, False) == sv.rounds(r, w, 2, 2, False)

    def test_rounds_decodes_take_room_in_the_budget(self):
        # 1,024-token budget, two 1,024-token prompts sent at once, decode first: step 1 prefills prompt 0;
        # step 2 decodes request 0 and leaves 1,023 tokens to prompt 1; step 3 decodes and ends prompt 1
        r, w = replica(chunk=1024), sv.Workload(1024, 64)
        ttft, _, _ = sv.rounds(r, w, 2, 2, False)
        want = sv.prompt_step_s(r, 0, 1024) + sv.prompt_step_s(r, 1, 1023) + sv.prompt_step_s(r, 1, 1)
        assert ttft[0] == pytest.approx(sv.prompt_step_s(r, 0, 1024), rel=1e-12)
        assert ttft[1] == pytest.approx(want, rel=1e-12)


class TestCost:
    """The break-even guide's formulas (core/cost.py docstring) on round numbers."""

    def test_cost_per_million_counts_idle_hours(self):
        # $0.50/h ÷ (400 tok/s × 3,600 s × 50 %) per 10⁶ tokens = $0.6944…
        assert cost.cost_per_million(0.5, 400, 0.5) == pytest.approx(0.5e6 / (400 * 3600 * 0.5))

    def test_capacity_of_a_month(self):
        assert cost.capacity_millions(400, 730) == pytest.approx(1051.2)  # the guide's 1,051 M
        assert cost.HOURS_PER_MONTH == 720 and cost.monthly_from_hourly(0.5) == 360.0

    @pytest.mark.parametrize(("kw", "tps"), [
        ({"retry_multiplier": 3.0}, 100 / 3),
        ({"input_per_output": 3.0, "prefill_tokens_per_s": 1000.0}, 1 / (0.01 + 0.003)),
    ])
    def test_useful_tokens_per_s(self, kw, tps):
        assert cost.effective_tokens_per_s(100.0, **kw) == pytest.approx(tps)

    def test_api_price_bills_every_prompt_token(self):
        assert cost.api_price_per_output_million(10.0, 2.0, 3.0) == 16.0  # $10 + 3 × $2

    @pytest.mark.parametrize(("used", "days", "billed"), [(10, 7, 168), (200, 7, 200), (5, 0, 5)])
    def test_minimum_term(self, used, days, billed):
        assert cost.billed_hours(used, days) == billed

    def test_bill_table_lists_the_apis_cheaper_than_the_rent(self):
        from cardfit.services.breakeven import BreakevenInput, breakeven_report

        # the break-even guide: $0.50/h × 730 h = $365 of rent; its frontier tier bills $15 per output M
        r = breakeven_report(BreakevenInput(hourly=0.5, tokens_per_s=400, hours_per_month=730,
                                            input_per_output=0))
        price = {a.id: a.price_per_million_usd for a in r.apis}
        assert price["frontier"] == 15.0
        for row in r.by_volume:
            want = tuple(k for k, p in price.items() if row.output_tokens_millions * p < 365)
            assert row.cheaper == want, row
        at = {row.output_tokens_millions: row.cheaper for row in r.by_volume}
        assert "frontier" in at[10] and "frontier" not in at[25]  # $150 and $375 against $365

    def test_set_discount(self):
        assert cost.set_monthly_usd(100.0, 4, 0.08) == pytest.approx(368.0)  # 8 % off from four cards


def _mutate_script():
    return load_script("mutate", register=True)  # dataclasses look their module up


def test_every_mutant_still_applies():
    """scripts/mutate.py's snippets each occur exactly once in the code (a moved line: fix the table), at
    least 5 per area, and each area's test class exists here."""
    mod = _mutate_script()
    assert mod.check_snippets(mod.ROOT) == []
    areas = [mu.area for mu in mod.MUTANTS]
    assert {a: areas.count(a) >= 5 for a in mod.TESTS} == dict.fromkeys(mod.TESTS, True)
    for tests in mod.TESTS.values():
        assert tests[0].split("::")[1] in globals()

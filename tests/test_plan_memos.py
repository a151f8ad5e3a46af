"""The every-card plan's shortcuts (issue 25 item 19) answer what the plan computed before them: each card's
decode estimate from its card part kept across plans (services/plan.py _decode_card) and the model's load
kept once per memory estimate (Context.kept), the served throughput worked out only when read, and one
launch line per split. Each is held, to the bit, against the same figure computed from scratch. Speed itself
is measured by `make bench`, not here."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cardfit.catalog.quants import default_quants
from cardfit.core import fit as fitting
from cardfit.core import placement
from cardfit.core import speed as sp
from cardfit.core.memory import Memory
from cardfit.services import plan as pl
from cardfit.services import served
from cardfit.services.inputs import PlanInput, parse

PLANS = [
    {"model": "llama3.1:8b", "context": 3001},  # Ollama on every card: one memory estimate for most
    {"model": "llama3.1:8b", "batch": 4, "input_tokens": 1000, "output_tokens": 200},  # served at a load
    {"model": "meta-llama/Llama-3.3-70B-Instruct", "quant": "fp8", "runtime": "vllm", "batch": 8},  # sets, tp
    {"model": "llama3.1:70b", "runtime": "llama.cpp", "context": 8192},  # offloads on the small cards
    {"model": "Qwen/Qwen3-30B-A3B", "runtime": "sglang", "batch": 16},  # routed experts
    {"model": "gpt-oss-20b", "runtime": "vllm"},  # MXFP4 experts, sliding-window layers
    {"model": "bge-m3"},  # an embedding model: no decode
]


def _fresh_decode(ctx: pl.Context, mem: Memory, opt: fitting.Option) -> sp.Speed | None:
    """A card's decode estimate as the plan made it before its memos: core/speed.py estimate() in one call."""
    if opt.gpu.bandwidth_gbps is None:
        return None
    rt, k = ctx.runtime, ctx.engine.speed()
    offloaded = 1 - opt.gpu_layer_fraction if opt.verdict == fitting.OFFLOAD else 0.0
    peak = sp.prefill_peak_tflops(opt.gpu, ctx.quant, rt.fp16_accumulate)
    precision = sp.precision_of(ctx.quant, opt.gpu)
    s = sp.estimate(ctx.model, mem, opt.gpu, opt.count, decode_efficiency=k.decode_efficiency,
                    prefill_efficiency=sp.power_capped(sp.prefill_efficiency(
                        k.prefill_efficiency, rt.prefill_efficiency_quantized, ctx.quant,
                        rt.prefill_efficiency_metal, opt.gpu), peak, opt.gpu.tdp_w,
                        rt.prefill_tflops_per_watt, opt.gpu.gemm_share_at(precision)),
                    fp16_accumulate=rt.fp16_accumulate, precision=precision, tp=opt.tp,
                    context_filled=mem.context // 2, quant=ctx.quant,
                    overhead_s_per_layer=k.overhead_s_per_layer,
                    overhead_s_per_sequence=k.overhead_s_per_sequence,
                    cpu_weight_fraction=offloaded, ram_bandwidth_gbps=sp.DEFAULT_RAM_GBPS,
                    ram_efficiency=k.ram_efficiency, window_cache=rt.window_cache,
                    sequences=max(ctx.sequences, 1), dequant_ops_per_weight=rt.dequant_ops_per_weight,
                    prefill_ubatch=ctx.prefill_chunk or 512,
                    expert_efficiency=served.expert_stream_share(rt, ctx.quant, ctx.model, opt.gpu,
                                                                 k.expert_efficiency),
                    overhead_s_per_moe_layer=k.overhead_s_per_moe_layer,
                    window_cells=ctx.engine.window_read_cells(ctx.model, ctx.prefill_chunk),
                    rocm_custom_allreduce=rt.rocm_custom_allreduce)
    if not ctx.model.generates:
        return sp.Speed(None, None, s.prefill_tokens_per_s, 0)
    return s


@pytest.mark.parametrize("body", PLANS, ids=lambda b: b["model"])
def test_every_cards_speed_is_the_one_computed_from_scratch(body):
    """Asked twice (the second plan finds every card's part kept) and at another context in between, each
    card's decode estimate and served speed equal estimate() and the served model run afresh for that card."""
    pl.clear_memos()
    inp = parse(PlanInput, body)
    pl.plan(replace(inp, context=(inp.context or 4096) + 1000))  # fills the memos at another context
    p = pl.plan(inp)
    assert len(p.cards) > 1
    for card in p.cards:
        fresh = _fresh_decode(p.ctx, card.memory, card.option)
        assert card.decode == fresh, card.option.gpu.name
        served = fresh
        if fresh is not None and fresh.aggregate_tokens_per_s is not None:
            served = replace(fresh, aggregate_tokens_per_s=pl.served_tokens_per_s(p.ctx, card.memory,
                                                                                 card.option))
        assert card.speed == served, card.option.gpu.name


SPECULATIVE = {"model": "llama-3.1-8b", "runtime": "vllm", "speculative": "eagle3"}


@pytest.mark.parametrize("body", [*PLANS, SPECULATIVE],
                         ids=lambda b: b["model"] + (" speculative" if "speculative" in b else ""))
def test_each_cards_listed_decode_is_its_full_estimates(body):
    """A card's listed figures (CardPlan.decode_rates: the decode step alone, without the prefill and the
    aggregate) are the (ceiling, decode) of its full estimate computed from scratch, asked before or after
    that estimate is worked out; each card gets its own (no card reads another's), and a plan with
    --speculative or a model that generates nothing takes its figures from the full estimate."""
    pl.clear_memos()
    p = pl.plan(parse(PlanInput, body))
    rates = set()
    for card in p.cards:
        early = pl.CardPlan(card.option, card.memory, card.context_note, p.ctx)
        first = early.decode_rates
        light = "decode" not in early._kept  # the full estimate not worked out (its rates kept alone)
        full = _fresh_decode(p.ctx, card.memory, card.option)
        if p.ctx.speculation is not None and full is not None and full.decode_tokens_per_s is not None:
            full = replace(full, decode_tokens_per_s=pl.speculative_decode_tokens_per_s(p.ctx, card.memory,
                                                                                       card.option))
        want = (full.decode_ceiling_tokens_per_s, full.decode_tokens_per_s) if full else (None, None)
        assert first == want, card.option.gpu.name
        assert light == (full is not None and p.ctx.model.generates and p.ctx.speculation is None)
        assert card.decode_rates == want  # after `decode` was read
        rates.add(first)
    if p.ctx.model.generates:  # the cards' own figures, not one card's for all
        assert len(rates) > len(p.cards) // 2
    else:
        assert rates == {(None, None)}


@pytest.mark.parametrize("body", [*PLANS, SPECULATIVE, {"model": "llama3.1:8b", "runtime": "transformers"}],
                         ids=lambda b: b["model"] + (" speculative" if "speculative" in b else "")
                         + (" " + b["runtime"] if "runtime" in b else ""))
def test_each_cards_priced_throughput_is_its_served_speeds(body):
    """The throughput the cost section prices (CardPlan.tokens_per_s: without the prefill figure where the
    full estimate was not worked out) is, to the bit, _tokens_per_s of the card's served speed computed from
    scratch (its full estimate with the served throughput as the aggregate), asked before or after that
    speed; a card without a calibrated decode (transformers) prices its bandwidth ceiling."""
    pl.clear_memos()
    p = pl.plan(parse(PlanInput, body))
    for card in p.cards:
        early = pl.CardPlan(card.option, card.memory, card.context_note, p.ctx)
        first = early.tokens_per_s
        fresh = _fresh_decode(p.ctx, card.memory, card.option)
        if p.ctx.speculation is not None and fresh is not None and fresh.decode_tokens_per_s is not None:
            fresh = replace(fresh, decode_tokens_per_s=pl.speculative_decode_tokens_per_s(p.ctx, card.memory,
                                                                                        card.option))
        if fresh is not None and fresh.aggregate_tokens_per_s is not None:
            fresh = replace(fresh, aggregate_tokens_per_s=pl.served_tokens_per_s(p.ctx, card.memory,
                                                                                 card.option))
        want = pl._tokens_per_s(fresh)
        assert first == want, card.option.gpu.name
        assert card.tokens_per_s == want and pl._tokens_per_s(card.speed) == want  # after `speed` was read


def test_a_context_copied_with_another_quantization_gets_its_own_load():
    """A context copied with replace() shares its `kept` dict: the decode load is keyed by what it reads of
    the plan (model, quantization, runtime), not by the memory estimate alone, so the copy asked about the
    same memory never reads the original's load (a low-bit GGUF type unpacks its weights: another step)."""
    pl.clear_memos()
    ctx = pl.build_context(parse(PlanInput, {"model": "llama3.1:8b", "runtime": "llama.cpp",
                                             "quant": "Q4_K_M", "context": 8192}))
    gpu = ctx.gpus.get("RTX 4090")
    mem = pl.memory_for(ctx, 8192, gpu)
    opt = pl.option_for(ctx, mem, gpu, 1)
    first = pl._decode_speed(ctx, mem, opt)
    assert first == _fresh_decode(ctx, mem, opt)
    other = replace(ctx, quant=default_quants().get("Q2_K"))
    assert other.kept is ctx.kept
    got = pl._decode_speed(other, mem, opt)
    assert got == _fresh_decode(other, mem, opt)
    assert got != first


@pytest.mark.parametrize("change", [{"runtime": "vllm"}, {"flash_attn": False}, {"quant": "Q8_0"}],
                         ids=lambda c: next(iter(c)))
def test_a_copied_context_gets_its_own_margin_and_split(change):
    """The margin and split a memory estimate's cards share (services/plan.py _fit_parts, found by identity)
    are each context's own: a context copied with another runtime, flash attention or quantization shares
    `kept` and asks about the same memory estimate, and its cards' fit is check() from scratch for it."""
    pl.clear_memos()
    ctx = pl.build_context(parse(PlanInput, {"model": "llama3.1:70b", "runtime": "llama.cpp",
                                             "context": 8192}))
    gpu = ctx.gpus.get("RTX 4090")
    mem = pl.memory_for(ctx, 8192, gpu)
    for c, count in ((ctx, 1), (ctx, 4)):
        assert pl.option_for(c, mem, gpu, count) == _check_from_scratch(c, mem, gpu, count)
    values = dict(change)
    if "runtime" in values:
        values["runtime"] = pl.default_runtimes().get(values["runtime"])
    if "quant" in values:
        values["quant"] = default_quants().get(values["quant"])
    other = replace(ctx, **values)
    assert other.kept is ctx.kept
    for count in (1, 2, 4):
        assert pl.option_for(other, mem, gpu, count) == _check_from_scratch(other, mem, gpu, count)


def _check_from_scratch(ctx: pl.Context, mem: Memory, gpu, count: int) -> fitting.Option:
    """A set's fit as core/fit.py check() gives it with the plan's own margin and split, nothing kept."""
    s = pl.placed(ctx, count)
    return fitting.check(mem, gpu, count, ctx.engine, ctx.rules, requires=pl.requires(ctx.quant),
                         utilization=ctx.utilization, margin_bytes=lambda n, k: pl._margin(ctx, mem, n, k),
                         model=ctx.model, tp=s.tp, pp=s.pp, cards=pl.split_cards(ctx, mem))


@pytest.mark.parametrize("body", PLANS[:4], ids=lambda b: b["model"])
def test_one_launch_line_per_split_is_each_cards_own(body):
    """The launch lines made once per (split, context, batch, KV type, slots) are those each card's own
    gpu_plan makes."""
    p = pl.plan(parse(PlanInput, body))
    launches: dict[tuple, pl.LaunchLine] = {}
    for card in p.cards:
        assert pl.gpu_plan(p.ctx, card, launches) == pl.gpu_plan(p.ctx, card)


def test_shapes_are_a_new_list_each_time():
    """core/placement.py keeps each card's shapes: every call gets what the unkept function computes, as a
    list of its own (a caller that empties the one it got changes no other's)."""
    from cardfit.catalog.gpus import default_gpus
    from cardfit.catalog.rental import default_rental
    from cardfit.core.placement import _shapes, shapes

    body = {"model": "meta-llama/Llama-3.3-70B-Instruct", "runtime": "vllm"}
    ctx = pl.build_context(parse(PlanInput, body))
    rules = default_rental()
    sets = 0
    for gpu in default_gpus():
        args = (ctx.runtime, gpu, ctx.model, rules.set_sizes, rules.node_size, 64)
        first = shapes(*args)
        sets += len(first)
        first.clear()
        assert shapes(*args) == list(_shapes.__wrapped__(*args))
    assert sets > 1000  # the multi-node cards' 64 nodes of shapes among them


_SHARE_FIELDS = {"float": st.floats(0.0, 1.0), "str": st.text(max_size=8)}


@settings(max_examples=100, deadline=None)
@given(st.data(), st.floats(0.0, 1.0))
def test_routed_shares_are_replace(data, route):
    """Shares.routed builds dataclasses.replace(shares, route=...) directly: every field carried over (a field
    added to Shares gets a value here, so a routed() that drops it fails)."""
    values = {f.name: data.draw(_SHARE_FIELDS[f.type]) for f in dataclasses.fields(sp.Shares)}
    shares = sp.Shares(**values)
    routed = shares.routed(route)
    assert routed == replace(shares, route=route)
    assert [getattr(routed, f.name) for f in dataclasses.fields(sp.Shares)] == \
        [getattr(replace(shares, route=route), f.name) for f in dataclasses.fields(sp.Shares)]


def _steps(body: dict, *more: Callable[[sp.Machine], sp.Machine]):
    """(load, machine, sequences, card) for every card of the plan of `body` with a bandwidth: its machine,
    its spec-bandwidth ideal and `more` of its machine, at one, a few and many sequences; and the count of
    those cards."""
    p = pl.plan(parse(PlanInput, body))
    cards = [c for c in p.cards if c.option.gpu.bandwidth_gbps is not None]
    out = []
    for card in cards:
        dc, load = pl._decode_inputs(p.ctx, card.memory, card.option)
        for mc in (dc.machine, dc.ideal, *(f(dc.machine) for f in more)):
            out += [(load, mc, b, card.option.gpu.name) for b in (1, 3, 64)]
    return out, len(cards)


@pytest.mark.parametrize("body", PLANS[:6], ids=lambda b: b["model"])
def test_step_memory_s_is_the_steps_own(body):
    """core/speed.py step_memory_s (the ceiling's reads alone) is step(...).memory_s to the bit, on every
    card's machine and its spec-bandwidth ideal, at one, a few and many sequences (offload, tensor
    parallel and routed experts among the plans)."""
    steps, cards = _steps(body)
    for load, mc, b, name in steps:
        assert sp.step_memory_s(load, mc, b) == sp.step(load, mc, b).memory_s, name
    assert len({sp.step_memory_s(load, mc, b) for load, mc, b, _ in steps}) > cards


@pytest.mark.parametrize("body", PLANS[:6], ids=lambda b: b["model"])
def test_step_seconds_is_the_steps_own(body):
    """core/speed.py step_seconds (a step's time without its record, which the every-card plan's decode
    figures read) is step(...).seconds to the bit, on every card's machine and its ideal, at one, a few and
    many sequences, and for each machine also as a serial-GEMM engine and with expert parallelism."""
    steps, cards = _steps(body, lambda mc: replace(mc, serial_gemm=True),
                          lambda mc: replace(mc, tp=4, expert_parallel=4, attention_dp=2))
    for load, mc, b, name in steps:
        assert sp.step_seconds(load, mc, b) == sp.step(load, mc, b).seconds, name
    assert len({sp.step_seconds(load, mc, b) for load, mc, b, _ in steps}) > cards


@pytest.mark.parametrize("change", [{"quant": "Q2_K"}, {"runtime": "vllm"}, {"prefill_chunk": 256}],
                         ids=lambda c: next(iter(c)))
def test_the_served_load_kept_in_a_plan_is_each_questions_own(change):
    """The served model's load kept per memory estimate (services/plan.py _served_load) is services/served.py
    load() afresh, for the context and for a copy of it that differs in one field and shares its `kept`
    (another quantization, runtime or prefill chunk), and for another request size; never the other's."""
    from cardfit.catalog.runtimes import default_runtimes
    from cardfit.services import served

    pl.clear_memos()
    ctx = pl.build_context(parse(PlanInput, {"model": "llama3.1:8b", "runtime": "llama.cpp",
                                             "quant": "Q4_K_M", "context": 8192}))
    mem = pl.memory_for(ctx, 8192, ctx.gpus.get("RTX 4090"))
    field, value = next(iter(change.items()))
    if field == "quant":
        value = default_quants().get(value)
    elif field == "runtime":
        value = next(r for r in default_runtimes() if r.id == value)
    other = replace(ctx, **{field: value})
    assert other.kept is ctx.kept
    small, large = served.workload(500, 100, 8192), served.workload(4000, 1000, 8192)
    loads = []
    for c in (ctx, other, ctx, other):  # each asked again after the other
        for w in (small, large):
            for offloaded in (0.0, 0.25):
                got = pl._served_load(c, mem, w, offloaded)
                assert got == served.load(c, mem, w, offloaded)
                loads.append(got)
    assert len({loads[0], loads[1], loads[2]}) == 3  # the offload and the request's size reach the load
    if field == "quant":  # Q2_K reads fewer bytes (another runtime or chunk may read the same here)
        assert loads[0] != loads[4]


@pytest.mark.parametrize("body", PLANS[:6], ids=lambda b: b["model"])
def test_decode_rates_kept_by_card_part_and_load_are_each_questions_own(body):
    """services/plan.py _decode_rates keeps decode_rates_on by its two arguments (frozen records, compared by
    value): cards with equal card parts share one answer, and a question differing in one field of either
    argument (the card's bandwidth, the load's cache bytes) gets its own, the figure computed afresh."""
    pl.clear_memos()
    p = pl.plan(parse(PlanInput, body))
    ctx = p.ctx
    seen: dict[tuple, tuple] = {}
    for card in p.cards:
        if card.option.gpu.bandwidth_gbps is None:
            continue
        part, load = pl._decode_inputs(ctx, card.memory, card.option)
        got = pl._decode_rates(ctx, part, load)
        assert got == sp.decode_rates_on(part, load), card.option.gpu.name
        assert seen.setdefault((part, load), got) == got
        if part.machine is None:
            continue
        faster = replace(part, machine=replace(part.machine, bandwidth_gbps=part.machine.bandwidth_gbps * 2),
                         ideal=replace(part.ideal, bandwidth_gbps=part.ideal.bandwidth_gbps * 2))
        longer = replace(load, kv_bytes=load.kv_bytes * 2 + 1)
        for other_part, other_load in ((faster, load), (part, longer)):
            fresh = sp.decode_rates_on(other_part, other_load)
            assert pl._decode_rates(ctx, other_part, other_load) == fresh
            assert fresh[0] != got[0]  # the ceiling reads both the bandwidth and the cache bytes
    assert len(seen) >= 1


def test_cards_of_one_chip_in_two_memory_sizes_share_their_decode_rates():
    """Apple's M-series sizes of one chip hold equal card parts, kept as one object (services/plan.py
    _decode_card interns them): the second finds the first's figures (the same objects) by identity, which
    are what decode_rates_on gives it."""
    pl.clear_memos()
    p = pl.plan(parse(PlanInput, {"model": "llama3.1:8b", "context": 3001}))
    by_name = {c.option.gpu.name: c for c in p.cards}
    small, large = by_name["Apple M2 Max 32GB"], by_name["Apple M2 Max 64GB"]
    a = pl._decode_inputs(p.ctx, small.memory, small.option)
    b = pl._decode_inputs(p.ctx, large.memory, large.option)
    assert a == b and a[0] is b[0] and small.option.gpu is not large.option.gpu
    first = pl._decode_rates(p.ctx, *a)
    assert pl._decode_rates(p.ctx, *b) is first
    assert first == sp.decode_rates_on(*b)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.none(), st.floats(0.0, 1e5), st.integers(0, 10**5)),
       st.sampled_from(["decode_tokens_per_s", "prefill_tokens_per_s", "no_such_figure"]),
       st.sampled_from(["ollama", "vllm", "llama.cpp", "sglang", ""]))
def test_kept_speed_ranges_are_each_questions_own(value, figure, runtime):
    """services/plan.py _speed_range keeps its rounded band by (value, figure, runtime), typed: each question
    (an int and the equal float, another runtime or figure) gets the range value_range gives it afresh, as a
    list of its own."""
    from cardfit.core.uncertainty import value_range

    r = value_range(value, figure, runtime)
    want = None if r is None else [round(r[0], 1), round(r[1], 1)]
    for _ in range(2):  # computed, then found kept
        got = pl._speed_range(value, figure, runtime)
        assert got == want and [type(x) for x in got or ()] == [type(x) for x in want or ()]
        if got is not None:
            got.append(0.0)  # a caller's list changes no other's


@pytest.mark.parametrize("body", PLANS, ids=lambda b: b["model"])
def test_each_cards_fit_is_the_check_computed_from_scratch(body):
    """Each card's verdict (services/plan.py option_for: its set's part kept across plans, card_set) is
    core/fit.py check() with the same arguments, to the field, asked after another context filled the memos:
    the cards each planned alone (a card too small alone is planned as the smallest set that holds it,
    core/fit.py smallest_set, which calls check itself), offloads among them."""
    pl.clear_memos()
    inp = parse(PlanInput, body)
    pl.plan(replace(inp, context=(inp.context or 4096) + 1000))  # fills the memos at another context
    p = pl.plan(inp)
    ctx, verdicts = p.ctx, set()
    for card in p.cards:
        o = card.option
        if o.count != pl.cards_per_set(ctx, o.gpu):
            continue
        s = pl.placed(ctx, o.count)
        fresh = fitting.check(card.memory, o.gpu, o.count, ctx.engine, ctx.rules,
                              requires=pl.requires(ctx.quant), utilization=ctx.utilization,
                              margin_bytes=pl._set_margin(ctx, card.memory), model=ctx.model, tp=s.tp,
                              pp=s.pp, cards=pl.split_cards(ctx, card.memory))
        assert o == fresh, o.gpu.name
        assert pl.option_for(ctx, card.memory, o.gpu, o.count) == fresh
        verdicts.add(o.verdict)
    assert len(verdicts) > 1


def test_a_card_set_is_kept_per_question():
    """The set's part kept by plan.card_set is each question's own: another --gpu-memory-utilization, --tp or
    quantization (FP8 on a card without it) gets the part core/fit.py card_set computes afresh."""
    pl.clear_memos()
    base = {"model": "meta-llama/Llama-3.3-70B-Instruct", "runtime": "vllm", "context": 8192}
    seen = set()
    for extra in ({}, {"gpu_memory_utilization": 0.8}, {"tp": 2}, {"quant": "fp8"}):
        ctx = pl.build_context(parse(PlanInput, {**base, **extra}))
        for name in ("A100 80GB", "H100 SXM"):
            gpu = ctx.gpus.get(name)
            for count in (1, 2, 4):
                s = pl.placed(ctx, count)
                fresh = fitting.card_set(gpu, count, ctx.engine, ctx.rules, requires=pl.requires(ctx.quant),
                                         utilization=ctx.utilization, model=ctx.model, tp=s.tp, pp=s.pp)
                assert pl.card_set(ctx, gpu, count) == fresh
                seen.add(fresh)
    assert len(seen) > 12


def _reads_with_builtins(load: sp.Load, mc: sp.Machine, sequences: int) -> tuple:
    """core/speed.py _step_reads as it was written with max() and min() (before their conditionals)."""
    b = max(sequences, 1)
    touched = 1 - (1 - load.shares.route) ** max(b, 1)
    weights = load.weights_bytes * (load.shares.dense + load.shares.experts * touched)
    expert_read = load.weights_bytes * load.shares.experts * (1 - (1 - load.shares.route) ** b)
    cpu = weights * load.cpu_weight_fraction + expert_read * load.cpu_expert_fraction * (
        1 - load.cpu_weight_fraction
    )
    gpu = weights - cpu + b * load.kv_bytes
    tp = max(mc.tp, 1)
    dp = max(min(mc.attention_dp, tp), 1)
    group = max(tp // dp, 1)
    per_card = 1 / min(group, load.kv_split) if load.kv_split else 1 / group
    kv_card = b * load.kv_bytes * per_card / dp * max(mc.kv_read_copies, 1.0)
    ep = max(mc.expert_parallel, 1)
    attention = load.weights_bytes * load.shares.attention * (1 - load.cpu_weight_fraction) if dp > 1 else 0
    if ep > 1 and dp > 1:
        attention = (weights - cpu) - expert_read * (1 - load.cpu_weight_fraction)
    memory_s = ((weights - cpu - attention) / tp + attention * dp / tp + kv_card) / mc.read_bytes_per_s
    if mc.expert_efficiency and expert_read:
        on_gpu = expert_read * (1 - load.cpu_weight_fraction) * (1 - load.cpu_expert_fraction)
        memory_s += on_gpu / tp / mc.read_bytes_per_s * (mc.decode_efficiency / mc.expert_efficiency - 1)
    if cpu:
        memory_s += cpu / (mc.ram_bandwidth_gbps * 1e9 * mc.ram_efficiency)
    return b, cpu, gpu, kv_card, ep, dp, memory_s


@pytest.mark.parametrize("body", PLANS[:6], ids=lambda b: b["model"])
def test_step_reads_are_the_builtins(body):
    """A step's reads (core/speed.py _step_reads, its max() and min() of two written as conditionals) are,
    to the bit and in type, what the builtins gave, on every card's machine and its ideal one, at several
    batches, tensor-parallel degrees, attention-DP groups, expert-parallel ranks and KV read copies."""
    pl.clear_memos()
    p = pl.plan(parse(PlanInput, body))
    seen = 0
    for card in p.cards:
        part, load = pl._decode_inputs(p.ctx, card.memory, card.option)
        if part.machine is None:
            continue
        for mc in (part.machine, part.ideal):
            for tp, dp, ep, copies in ((mc.tp, mc.attention_dp, mc.expert_parallel, mc.kv_read_copies),
                                       (0, 1, 1, 0.5), (4, 2, 4, 2), (8, 16, 8, 1), (2, 0, 0, 4.0)):
                m = replace(mc, tp=tp, attention_dp=dp, expert_parallel=ep, kv_read_copies=copies)
                for b in (0, 1, 3, 64):
                    got, want = sp._step_reads(load, m, b), _reads_with_builtins(load, m, b)
                    assert got == want and [type(x) for x in got] == [type(x) for x in want]
                    seen += 1
    assert seen > 100


# The every-card plan's rows (services/plan.py _card_rows): each card's context-free parts kept per plan
# settings, filled at one context and read at the next (issue 25 item 19: the page's every-card plan).
ROW_PLANS = [
    {"model": "llama3.1:8b"},  # Ollama on every card, the page's question
    {"model": "meta-llama/Llama-3.3-70B-Instruct", "runtime": "vllm"},  # most cards as a larger set
    {"model": "Qwen/Qwen3-30B-A3B", "runtime": "sglang", "batch": 16},  # routed experts, sets
    {"model": "llama3.1:70b", "runtime": "llama.cpp"},  # offloads, uneven layer splits
    {"model": "llama3.1:8b", "runtime": "vllm", "quant": "fp8", "priced": True, "batch": 8},  # priced only
]


class _NotKept(dict):
    """A memo that keeps nothing: every plan makes its rows afresh."""

    def __setitem__(self, key, value) -> None:
        pass


def _page_json(body: dict, context: int) -> str:
    from cardfit.services.table import json_text

    return json_text(pl.plan(parse(PlanInput, {**body, "context": context})))


@pytest.mark.parametrize("body", ROW_PLANS, ids=lambda b: b["model"] + " " + b.get("runtime", ""))
def test_rows_kept_across_contexts_answer_as_rows_made_afresh(body, monkeypatch):
    """A plan whose rows were made and filled at other contexts (card parts, decode parts, the larger sets
    tried) answers, byte for byte in the page's JSON, as the same plan with every row made afresh and every
    memo cold; and it read the kept rows (the same objects), not new ones."""
    pl.clear_memos()
    for context in (3000, 20000, 3001):
        _page_json(body, context)
    kept = _page_json(body, 6000)
    p = pl.plan(parse(PlanInput, {**body, "context": 6000}))
    rows = pl._card_rows(p.ctx)
    assert rows is pl._card_rows(pl.build_context(parse(PlanInput, {**body, "context": 7000})))
    assert {id(c.row) for c in p.cards if c.row is not None} <= {id(r) for r in rows}
    assert any(c.row is not None for c in p.cards)
    monkeypatch.setattr(pl, "_CARD_ROWS", _NotKept())
    pl.clear_memos()
    assert _page_json(body, 6000) == kept


def test_rows_are_kept_for_at_most_rows_kept_settings(monkeypatch):
    """The rows memo counts its keys: plans of more settings than ROWS_KEPT keep at most that many, and a
    row keeps at most the larger sets its card has (core/fit.py set_shapes), each the set's part made
    afresh."""
    monkeypatch.setattr(pl, "ROWS_KEPT", 3)
    pl.clear_memos()
    for util in (0.5, 0.6, 0.7, 0.8, 0.9):
        p = pl.plan(parse(PlanInput, {"model": "meta-llama/Llama-3.3-70B-Instruct", "runtime": "vllm",
                                      "gpu_memory_utilization": util, "context": 8192}))
        assert 1 <= len(pl._CARD_ROWS) <= 3
    ctx, tried = p.ctx, 0
    for row in pl._card_rows(ctx):
        shapes = fitting.set_shapes(row.gpu, ctx.engine, ctx.rules, ctx.model)
        assert len(row.sets) <= len(shapes)
        for s, shape in zip(row.sets, shapes, strict=False):
            assert s == fitting.card_set(row.gpu, shape.cards, ctx.engine, ctx.rules,
                                         requires=pl.requires(ctx.quant), utilization=ctx.utilization,
                                         model=ctx.model, tp=shape.tp, pp=shape.pp)
            tried += 1
    assert tried > 10


@pytest.mark.parametrize("body", ROW_PLANS[1:4], ids=lambda b: b["model"])
def test_a_larger_set_is_the_smallest_set_checked_from_scratch(body):
    """A card planned as the smallest set that holds the model (its row's kept set parts, _row_sets) is the
    first of its shapes that check() fits, as smallest_set tried them before its parts were kept: each shape
    of two cards or more in order, stopping at one the card cannot run."""
    pl.clear_memos()
    pl.plan(parse(PlanInput, {**body, "context": 3000}))  # fills the rows' sets at another context
    p = pl.plan(parse(PlanInput, {**body, "context": 9000}))
    ctx, larger = p.ctx, 0
    for card in p.cards:
        o = card.option
        if o.count == pl.cards_per_set(ctx, o.gpu) or card.memory.context != 9000:
            continue
        want = None
        if o.gpu.max_count != 1:
            for s in placement.shapes(ctx.runtime, o.gpu, ctx.model, ctx.rules.set_sizes, ctx.rules.node_size,
                                      64):
                if s.cards < 2:
                    continue
                opt = fitting.check(card.memory, o.gpu, s.cards, ctx.engine, ctx.rules,
                                    requires=pl.requires(ctx.quant), utilization=ctx.utilization,
                                    margin_bytes=pl._set_margin(ctx, card.memory), model=ctx.model, tp=s.tp,
                                    pp=s.pp)
                if opt.fits:
                    want = opt
                    break
                if opt.refusal is fitting.Refusal.UNSUPPORTED:
                    break
        assert o == want, o.gpu.name
        larger += 1
    assert larger > 3


def test_the_closed_loop_request_is_replace(monkeypatch):
    """services/served.py closed: the request sent by N users (kept by value, at most CLOSED_KEPT) is
    dataclasses.replace of it, each request and count of users its own."""
    from cardfit.core import serving as sv

    monkeypatch.setattr(served, "CLOSED_KEPT", 4)
    served._CLOSED.clear()
    for i, o in [(0, 2048), (0, 2050), (1000, 200), (0, 2048)]:
        w = sv.Workload(i, o)
        for users in (1.0, 4.0, 16.0):
            got = served.closed(w, users)
            assert got == replace(w, users=users, requests_per_s=None)
            assert len(served._CLOSED) <= 4
    assert served.closed(sv.Workload(5, 7, requests_per_s=3.0), 2.0).requests_per_s is None


@pytest.mark.parametrize("change", [{"overhead_gb": 1.5}, {"gpu_memory_utilization": 0.8}, {"tp": 2},
                                    {"quant": "fp8"}, {"priced": True}, {"batch": 8}, {"max_num_seqs": 64},
                                    {"prefill_chunk": 1024}, {"runtime": "sglang"}],
                         ids=lambda c: next(iter(c)))
def test_a_plan_with_other_settings_gets_its_own_rows(change, monkeypatch):
    """The rows kept for one plan's settings are never another's: a plan asked after its neighbour (the
    same model, one setting changed: the overhead, the memory fraction, the split, the quantization, the
    cards listed, the batch, the engine's caps, the runtime) answers as it does with no row kept."""
    body = {"model": "meta-llama/Llama-3.1-8B-Instruct", "runtime": "vllm", "context": 8192}
    pl.clear_memos()
    _page_json(body, 8192)
    got = _page_json({**body, **change}, 8192)
    monkeypatch.setattr(pl, "_CARD_ROWS", _NotKept())
    pl.clear_memos()
    assert _page_json({**body, **change}, 8192) == got


@pytest.mark.parametrize("question", [{"model": "llama3.1:8b", "context": 3001},
                                      {"model": "Qwen/Qwen3-30B-A3B", "context": 3001},
                                      {"model": "meta-llama/Llama-3.3-70B-Instruct", "runtime": "llama.cpp"},
                                      {"model": "llama3.1:8b", "gpu": "RTX 4090"}])
def test_a_plan_leaves_no_reference_cycle(question):
    """A plan and its answer are freed when dropped, not left for the garbage collector: what the plan keeps
    in its context (the margin and split functions of _fit_parts) holds what they read of the plan, not the
    plan (a cycle through Context.kept left ~200 objects a plan for the collector)."""
    import gc

    from cardfit.services.inputs import PlanInput, parse
    from cardfit.services.plan import plan

    def answer() -> str:
        return plan(parse(PlanInput, question)).json_text()

    for _ in range(6):  # the memos across plans filled, each record class's __init__ compiled (records.HOT)
        answer()
    gc.collect()
    gc.disable()
    try:
        answer()
        gc.set_debug(gc.DEBUG_SAVEALL)
        found = gc.collect()
        left = [type(o).__name__ for o in gc.garbage]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert found == 0, sorted(set(left))


def _answers_by_comprehensions(p: pl.Plan) -> tuple[str | None, str | None, str | None]:
    """The short answers as plan.answers worked them out before its one pass: three lists and min()."""
    singles = [c.option for c in p.cards if c.option.fits and c.option.count == 1]
    priced = [o for o in singles if o.monthly_usd is not None]
    sets = [c.option for c in p.cards if c.option.fits and c.option.count > 1]

    def name(o: fitting.Option | None) -> str | None:
        return None if o is None else (o.gpu.name if o.count == 1 else f"{o.count}× {o.gpu.name}")

    return (name(min(priced, key=lambda o: o.monthly_usd or 0, default=None)),
            name(min(singles, key=lambda o: o.usable_bytes, default=None)),
            None if singles else name(next((o for o in sets if o.monthly_usd is not None), None)))


@pytest.mark.parametrize("body", [*PLANS, {"model": "deepseek-ai/DeepSeek-R1"},  # sets only
                                  {"model": "llama3.1:8b", "priced": True},
                                  {"model": "meta-llama/Llama-3.3-70B-Instruct", "context": 131072}],
                         ids=lambda b: b["model"] + (" priced" if b.get("priced") else ""))
def test_the_short_answers_are_the_ones_the_lists_gave(body):
    """plan.answers' one pass over the ranking names the cards its three lists and min() named (the first of
    equally cheap or equally small cards; the first priced set only where no single card fits)."""
    p = pl.plan(parse(PlanInput, body))
    a = pl.answers(p)
    assert (a.cheapest_card, a.smallest_card, a.cheapest_set) == _answers_by_comprehensions(p)

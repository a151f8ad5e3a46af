"""SGLang's memory budget as the engine sizes it for the server deploy launches (issue 26): the reserve reads
the server's --tp-size (all the cards of an attention-DP + EP layout), deploy's own P/D search sizes each
pool for its role as the pinned path does, and the launch line states the fraction and the attention-DP
flags the timing used. Hand-worked from python/sglang/srt/arg_groups/memory_hook.py of the PyPI wheel
sglang 0.5.23 (https://pypi.org/project/sglang/0.5.23/)."""

from __future__ import annotations

from cardfit.services import deploy as dp

GIB = 2**30


def _r1(**kw: object) -> dp.DeployInput:
    base = dict(model="deepseek-r1-671b", runtime="sglang", gpu=("H200",), input_tokens=1000,
                output_tokens=300, users=64.0, tp=8)
    return dp.DeployInput(**{**base, **kw})  # type: ignore[arg-type]


def test_an_ep_layouts_reserve_reads_the_servers_tp():
    """DeepSeek-R1 on 8 H200, --tp-size 8 --dp-size 8 --enable-dp-attention --ep-size 8: SGLang's reserve
    reads tp_size 8 (decode graphs to 512, 'tp_size * pp_size / 8 * 1024' = 1 GiB): 512 + 8192 x 1.5 +
    512 x 2 + 1024 + 512 x 8 x 4.5 + 1536 (MLA prompt graphs) = 34,816 MiB; each attention group's cache
    is copied over 1 rank (cards / dp), which is not the server's TP: read as TP 1 the reserve was 21,120
    MiB (graphs to 256, 128 MiB, 256 x 8 x 3), 13.4 GiB too little."""
    from cardfit.runtimes.sglang import reserved_mib

    a = dp.pinned_answer(_r1(attention_dp=8, expert_parallel=8))
    c = a.result.cand
    assert (c.tp, c.option.tp, c.attention_dp, c.ep) == (8, 1, 8, 8)
    ctx, gpu = c.setting.ctx, c.gpu
    engine = ctx.engine_at(8, server_tp=8)
    rt = engine.profile  # type: ignore[attr-defined]
    mib = engine.cuda_total(gpu) / 2**20  # type: ignore[attr-defined]
    assert reserved_mib(rt, mib, 8, 1, mla=True, attention_dp=8) == 34816
    assert reserved_mib(rt, mib, 1, 1, mla=True, attention_dp=8) == 21120
    per_card = engine.budget_per_card(gpu, None, 1, 1, ctx.model)
    assert per_card == ctx.engine_at(8).budget_per_card(gpu, None, 8, 1, ctx.model)
    assert c.option.budget_bytes == 8 * per_card
    assert ctx.engine_at(8).budget_per_card(gpu, None, 1, 1, ctx.model) - per_card > 13 * GIB  # the old


def test_the_searched_ep_layout_reads_the_servers_tp_too():
    """deploy's own search (_expert_parallel) sizes an attention-DP + EP layout of 8 cards with the same
    budget as the pinned --tp 8 --attention-dp 8 --expert-parallel 8, each layout's --tp-size its 8 cards
    (DP 2, 4, 8: the reserve grows with the DP padding only)."""
    from dataclasses import replace

    from cardfit.services.plan import memory_for

    pinned = dp.pinned_answer(_r1(attention_dp=8, expert_parallel=8)).result.cand
    inp = _r1(tp=None, cards=8)
    s = dp.settings(inp)[0][0]
    s = replace(s, mem=memory_for(s.ctx, s.mem.context, pinned.gpu))
    found = {c.attention_dp: c for c in dp._expert_parallel(inp, s, pinned.gpu, 8, 8, [(1, 0)])}
    assert found[8].option.budget_bytes == pinned.option.budget_bytes
    assert found[2].option.budget_bytes > found[4].option.budget_bytes > found[8].option.budget_bytes


def _pd_inp(**kw: object) -> dp.DeployInput:
    base = dict(model="llama-3.1-70b", runtime="sglang", gpu=("H100 SXM",), input_tokens=4000,
                output_tokens=500, users=64.0)
    return dp.DeployInput(**{**base, **kw})  # type: ignore[arg-type]


def test_searched_pd_workers_are_sized_as_the_pinned_ones():
    """deploy's own P/D search sizes each pool's worker for its role (as_worker, through Context.engine_at as
    the pinned path's timed does): on 4 H100 at SGLang 0.5.23 a prefill worker's reserve is 512 + 8192 x
    1.5 + 512 (TP 4) + 58 x 8 = 13,776 MiB, a decode worker's the 10 GiB floor (512 + 3,072 + 512 x 2 +
    512 = 5,120), a replica's 14,800 (both terms), so the workers hold more KV than the replica they were
    shaped from, and the same budget as --prefill-workers 1 --decode-workers 1 --tp 4."""
    inp = _pd_inp()
    cands = [c for c in dp.candidates(inp, dp.settings(inp)[0]) if c.tp == 4 and c.pp == 1 and c.nodes == 1]
    pinned = dp.pinned_answer(_pd_inp(tp=4, prefill_workers=1, decode_workers=1)).pools
    assert cands and pinned is not None
    for c in cands:
        workers = dp._workers(c)
        assert workers is not None
        pre, dec = workers
        assert pre.option.budget_bytes == pinned.prefill.cand.option.budget_bytes
        assert dec.option.budget_bytes == pinned.decode.cand.option.budget_bytes
        assert c.option.budget_bytes < pre.option.budget_bytes < dec.option.budget_bytes
        assert c.kv_tokens < pre.kv_tokens < dec.kv_tokens
        # the pools the search times are these workers
        pools = dp._pools(c, 1, 1)
        assert pools.prefill is pre.replica and pools.decode.max_seqs <= dec.replica.max_seqs


def test_the_launch_line_states_the_fraction_and_attention_dp_that_were_timed():
    """`cardfit deploy deepseek-r1-671b --gpu H200 --runtime sglang --tp 8 --attention-dp 8 --users 64`
    times a pool of SGLang's own fraction for attention DP 8 at TP 8 (runtimes/sglang.py launch_fraction:
    the reserve 34,816 MiB of 143,771 MiB less the driver's, 0.758) and attention DP 8: the line states
    both (it printed the profile's 0.88 and no --dp-size)."""
    inp = _r1(attention_dp=8)
    a = dp.pinned_answer(inp)
    c = a.result.cand
    line = dp.command(inp, a.result)
    frac = float(line.split("--mem-fraction-static ")[1].split()[0])
    assert frac == dp.stated_fraction(c) == 0.758
    assert abs(c.option.budget_bytes / 8 - c.gpu.usable_bytes * frac) < 0.01 * c.gpu.usable_bytes
    assert "--attn-dp-size 8" in line and "--ep-size" not in line  # 0.5.23 (releases.toml attn_dp_size_flag)
    # a given fraction is stated as given
    given = _r1(attention_dp=8, gpu_memory_utilization=0.8)
    assert "--mem-fraction-static 0.8 " in dp.command(given, dp.pinned_answer(given).result) + " "


def test_each_pd_worker_line_states_its_roles_fraction():
    """A disaggregated deployment's two lines: the prefill worker's fraction from its reserve (13,776 MiB
    on an H100 at TP 4), the decode worker's from the floor (10,240 MiB)."""
    pinned = dp.pinned_answer(_pd_inp(tp=4, prefill_workers=1, decode_workers=1)).pools
    assert pinned is not None
    pre, dec = pinned.prefill.cand, pinned.decode.cand
    mib = 81559
    assert dp.stated_fraction(pre, "prefill") == round((mib - 13776) / mib, 3)
    assert dp.stated_fraction(dec, "decode") == round((mib - 10240) / mib, 3)
    assert f"--mem-fraction-static {dp.stated_fraction(dec, 'decode'):g}" in dp._pd_command(dec, "decode")

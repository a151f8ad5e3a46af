"""SGLang's releases after 0.5.9, read in their PyPI wheels up to 0.5.23 (data/releases.toml sglang
`current`): prompt-step CUDA graphs' reserve from 0.5.10 (prefill_cuda_graph), the decode-graph flag renamed
in 0.5.14 (graph_flags_by_phase) and the 20-35 GiB card row of 0.5.20 (tier_35gib_4k_48). `--runtime sglang`
and `sglang@0.5.23` agree; `sglang@0.5.9` answers as main did with 0.5.9 current."""

import pytest

from cardfit.catalog.releases import at_release
from cardfit.catalog.runtimes import default_runtimes, graph_max_batch
from cardfit.runtimes import adapter
from cardfit.runtimes.launch import Launch
from cardfit.runtimes.sglang import default_chunk, reserved_mib

RTX_4090_MIB = 24564  # torch's total memory of an RTX 4090 (runtimes.toml gpu_memory_utilization_note)
H100_MIB = 81559


def _at(rel: str):
    return at_release(default_runtimes().get("sglang"), rel)


@pytest.mark.parametrize("rel, chunk, graphs_tp1, graphs_tp4, reserve, source", [
    # python/sglang/srt/server_args.py _handle_gpu_memory_settings, PyPI wheels 0.5.9 and 0.5.19:
    # "elif gpu_mem < 35 * 1024: # A10, 4090, 5090 ... chunked_prefill_size = 2048 ... max_bs 24 / 80";
    # reserve 512 + 2048 * 1.5 + 24 * 2 + 1 / 8 * 1024 = 3760 MiB
    ("", 4096, 48, 160, 7280, "the current release (0.5.23)"),
    ("0.5.9", 2048, 24, 80, 3760, "server_args.py 0.5.9"),
    # + 42 prompt sizes up to 2048 x 8 MiB (prefill_cuda_graph, from 0.5.10) = 4096
    ("0.5.19", 2048, 24, 80, 4096, "server_args.py 0.5.19"),
    # arg_groups/memory_hook.py handle_gpu_memory_settings, PyPI wheels 0.5.20 and 0.5.23:
    # "(chunked_prefill_size 4k, max_bs 48 if tp < 4 else 160)";
    # reserve 512 + 4096 * 1.5 + 48 * 2 + 128 = 6880 MiB, + 8 MiB for each of the 50 prompt sizes up to
    # 4096 of reserve_for_graph_mb (prefill_cuda_graph, from 0.5.10) = 7280
    ("0.5.20", 4096, 48, 160, 7280, "memory_hook.py 0.5.20"),
    ("0.5.23", 4096, 48, 160, 7280, "memory_hook.py 0.5.23"),
])
def test_the_4090_row_follows_the_release(rel, chunk, graphs_tp1, graphs_tp4, reserve, source):
    rt = _at(rel)
    assert default_chunk(rt, RTX_4090_MIB) == chunk, source
    assert graph_max_batch(rt, 24, 1) == graphs_tp1, source
    assert graph_max_batch(rt, 24, 4) == graphs_tp4, source
    assert reserved_mib(rt, RTX_4090_MIB, 1, 1) == reserve, source


@pytest.mark.parametrize("rel, reserve",
                         [("", 13904), ("0.5.9", 13440), ("0.5.20", 13904), ("0.5.23", 13904)])
def test_the_other_rows_are_unchanged(rel, reserve):
    """memory_hook.py 0.5.23: 8192 and max_bs 256 / 512 on an 80 GB card, as server_args.py 0.5.9; the
    reserve 512 + 8192 * 1.5 + 256 * 2 + 128 = 13440 MiB, from 0.5.10 + 58 prompt sizes x 8 MiB."""
    rt = _at(rel)
    assert default_chunk(rt, H100_MIB) == 8192
    assert graph_max_batch(rt, 80, 1) == 256 and graph_max_batch(rt, 80, 4) == 512
    assert reserved_mib(rt, H100_MIB, 1, 1) == reserve


@pytest.mark.parametrize("rel, stack, pp, mla, extra, source", [
    ("0.5.9", "cuda", 1, False, 0, "server_args.py 0.5.9: enable_piecewise_cuda_graph = False"),
    ("0.5.9", "cuda", 1, True, 0, "0.5.9: opt-in"),
    # server_args.py 0.5.10 _generate_piecewise_cuda_graph_tokens up to 8192: 8 + 14 + 8 + 8 + 12 + 8 sizes
    ("0.5.10", "cuda", 1, False, 58 * 8, "0.5.10 len(self.piecewise_cuda_graph_tokens) * 8"),
    ("0.5.10", "cuda", 1, True, 1536, "0.5.10 'For MLA backend ... reserved_mem += 1.5 * 1024'"),
    ("0.5.10", "cuda", 2, False, 0, "0.5.10 _handle_piecewise_cuda_graph: pp_size > 1"),
    ("0.5.10", "rocm", 1, False, 0, "0.5.10 _handle_piecewise_cuda_graph: is_hip()"),
    ("0.5.23", "cuda", 1, False, 58 * 8, "0.5.23 reserve_for_graph_mb len(prefill_cuda_graph_config.bs) * 8"),
    ("0.5.23", "cuda", 1, True, 1536, "0.5.23 reserve_for_graph_mb 'MLA backend' 1.5 * 1024"),
    ("0.5.23", "rocm", 1, False, 0, "0.5.23 cuda_graph_config.py 'BREAKABLE if is_cuda() else DISABLED'"),
])
def test_the_prompt_graphs_reserve_follows_the_release(rel, stack, pp, mla, extra, source):
    rt = _at(rel)
    base = 512 + 8192 * 1.5 + 256 * 2 + pp / 8 * 1024  # the 80 GB row (a ROCm card of that size too)
    assert reserved_mib(rt, H100_MIB, 1, pp, stack, mla) == base + extra, source


def test_the_budget_reads_the_models_attention():
    """An MLA model's budget on an 80 GB card at 0.5.23 is 1.5 GiB less the MiB a dense model's loses to 58
    sizes: (1536 - 464) MiB, to the fraction's 3 places."""
    from cardfit.catalog.gpus import default_gpus
    from cardfit.catalog.models import default_models

    gpu = default_gpus().get("H100")
    engine = adapter(_at("0.5.23"))
    dense = engine.budget_per_card(gpu, None, 1, 1, default_models().get("llama-3.1-8b"))
    mla = engine.budget_per_card(gpu, None, 1, 1, default_models().get("deepseek-coder-v2-lite"))
    assert abs((dense - mla) / 2**20 - (1536 - 464)) < 0.002 * gpu.usable_bytes / 2**20


def test_a_plain_profile_is_the_current_release():
    """A profile named without a release (release None) answers as the current one, 0.5.23."""
    plain = default_runtimes().get("sglang")
    assert plain.release is None
    assert default_chunk(plain, RTX_4090_MIB) == 4096 and graph_max_batch(plain, 24, 1) == 48
    assert reserved_mib(plain, H100_MIB, 1, 1) == reserved_mib(_at("0.5.23"), H100_MIB, 1, 1)


@pytest.mark.parametrize("rel, flag", [
    ("", "--cuda-graph-max-bs-decode"),  # the current release, 0.5.23
    ("0.5.9", "--cuda-graph-max-bs"),  # server_args.py add_argument("--cuda-graph-max-bs")
    ("0.5.13", "--cuda-graph-max-bs"),
    # 0.5.14 and 0.5.19: field cuda_graph_max_bs_decode, "--cuda-graph-max-bs" a DeprecatedAliasStoreAction
    ("0.5.14", "--cuda-graph-max-bs-decode"),
    # 0.5.20, 0.5.23: arg_groups/fields/ cuda_graph_max_bs_decode, no "--cuda-graph-max-bs" at all
    ("0.5.23", "--cuda-graph-max-bs-decode"),
])
def test_the_graph_cap_flag_follows_the_release(rel, flag):
    engine = adapter(_at(rel))
    line = engine.cuda_graph_cap(Launch(runtime="sglang", argv=("python", "-m", "sglang.launch_server")), 64)
    assert line.argv[-2:] == (flag, "64")


@pytest.mark.parametrize("rel, role, dp, spec, mla, pp, captured, source", [
    # server_args.py 0.5.10 _handle_piecewise_cuda_graph: '# 14. PD disaggregation', '# 3. DP attention',
    # '# 2. Speculative decoding'
    ("0.5.10", "prefill", False, False, False, 1, False, "0.5.10 disaggregation_mode != 'null'"),
    ("0.5.10", "", True, False, False, 1, False, "0.5.10 enable_dp_attention"),
    ("0.5.10", "", False, True, False, 1, False, "0.5.10 speculative_algorithm is not None"),
    ("0.5.11", "", False, True, False, 1, True, "0.5.11: the speculative rule gone"),
    ("0.5.14", "decode", False, False, False, 1, False, "0.5.14 tc_piecewise rule 'PD disaggregation'"),
    # 0.5.15 breakable by default: no PD, pipeline rule; MLA and DP attention off
    # (but the P/D hook turns all graphs off on a prefill worker: pd_disaggregation_hook.py line 77
    # 'server_args.disable_cuda_graph = True', 0.5.14 and 0.5.15; gone from 0.5.16)
    ("0.5.15", "prefill", False, False, False, 1, False, "0.5.15 pd hook disable_cuda_graph on prefill"),
    ("0.5.16", "prefill", False, False, False, 1, True, "0.5.16 breakable: no 'PD disaggregation' rule"),
    ("0.5.15", "decode", False, False, False, 1, True, "0.5.15: a decode worker captures them"),
    ("0.5.15", "", False, False, True, 1, False, "0.5.15 breakable rule 'MLA attention'"),
    ("0.5.15", "", False, False, False, 2, True, "0.5.15: no pipeline rule for breakable graphs"),
    ("0.5.16", "decode", False, False, False, 1, False, "0.5.16 _apply_cuda_graph_disaggregation_roles"),
    ("0.5.16", "", True, False, False, 1, False, "0.5.16 breakable rule 'DP attention'"),
    ("0.5.17", "", True, False, False, 1, True, "0.5.17: the DP attention rule gone"),
    ("0.5.17", "", False, False, True, 1, False, "0.5.17 'MLA attention (non-DSA)'"),
    ("0.5.18", "", False, False, True, 1, True, "0.5.18: no MLA rule"),
    ("0.5.19", "", False, False, False, 2, False, "0.5.19 apply_cuda_graph_compatibility pp_size > 1"),
    ("0.5.23", "prefill", True, True, True, 1, True, "0.5.23: a prefill worker keeps them"),
    ("0.5.23", "decode", False, False, False, 1, False, "0.5.23 apply_cuda_graph_disaggregation_roles"),
])
def test_where_prompt_graphs_are_captured(rel, role, dp, spec, mla, pp, captured, source):
    """The PyPI wheels sglang 0.5.10 to 0.5.23 (data/releases.toml prefill_graph_*): where SGLang captures
    prompt-step CUDA graphs by a worker's role and switches."""
    from cardfit.runtimes.sglang import prompt_graphs_captured

    assert prompt_graphs_captured(_at(rel), "cuda", pp, role, dp, spec, mla) is captured, source


def test_a_decode_worker_reserves_no_prompt_graphs():
    """0.5.15 server_args.py and 0.5.23 memory_hook.py reserve_for_graph_mb: 'disaggregation_mode != "decode"
    and prefill backend != DISABLED' (at 0.5.15 a decode worker captured them and reserved none)."""
    from cardfit.runtimes.sglang import prefill_graph_reserve_mib

    for rel in ("0.5.15", "0.5.23"):
        assert prefill_graph_reserve_mib(_at(rel), 8192, "cuda", 1, False, "decode") == 0.0
    assert prefill_graph_reserve_mib(_at("0.5.15"), 8192, "cuda", 1, False, "prefill") == 0.0
    assert prefill_graph_reserve_mib(_at("0.5.23"), 8192, "cuda", 1, False, "prefill") == 58 * 8


@pytest.mark.parametrize("rel, tp, role, dp, running, draft, reserve, worked", [
    # 0.5.14 server_args.py lines 3276-3309: no role term, a worker reserves as a replica (no prompt graphs
    # on a P/D worker: the tc_piecewise 'PD disaggregation' rule)
    ("0.5.14", 1, "decode", 1, 0, 0, 13440, "512 + 8192 x 1.5 + 256 x 2 + 128"),
    ("0.5.14", 1, "prefill", 1, 0, 0, 13440, "512 + 8192 x 1.5 + 256 x 2 + 128"),
    # 0.5.15 lines 3623-3676: the decode worker sized by its batch, the prefill worker without decode graphs
    # (and, at 0.5.15, no prompt graphs: the P/D hook's disable_cuda_graph)
    ("0.5.15", 1, "decode", 1, 0, 0, 10240, "512 + max(256, 2048) x 1.5 + 256 x 2 + 128 = 4224 -> floor"),
    ("0.5.15", 1, "prefill", 1, 0, 0, 12928, "512 + 8192 x 1.5 + 128"),
    # 0.5.23 memory_hook.py lines 297-313, reserve_for_graph_mb 364-378
    ("0.5.23", 1, "decode", 1, 0, 0, 10240, "512 + 3072 + 512 + 128 = 4224 -> the 10 GiB floor"),
    ("0.5.23", 1, "prefill", 1, 0, 0, 13392, "512 + 12288 + 128 + 58 prompt sizes x 8"),
    ("0.5.23", 1, "", 1, 0, 0, 13904, "a replica: 512 + 12288 + 512 + 128 + 464"),
    # TP 8, attention DP 8: the decode worker keeps the DP padding (512 x 8 x (3 + 1.5) = 18432), the
    # prefill worker none: 512 + 12288 + 1024 + 464 = 14288
    ("0.5.23", 8, "decode", 8, 0, 0, 24064, "512 + max(512, 2048) x 1.5 + 1024 + 1024 + 18432"),
    ("0.5.23", 8, "prefill", 8, 0, 0, 14288, "512 + 12288 + 1024 + 464"),
    # a given --max-running-requests 1024 (above the 512 cap: the cap stays) x 4 verified draft tokens:
    # 512 + 4096 x 1.5 + 512 x 2 + 1024 = 8704 -> floor; x 8 draft tokens: 512 + 12288 + 1024 + 1024 = 14848
    ("0.5.23", 8, "decode", 1, 1024, 4, 10240, "512 + 6144 + 1024 + 1024 -> floor"),
    ("0.5.23", 8, "decode", 1, 1024, 8, 14848, "512 + 8192 x 1.5 + 1024 + 1024"),
])
def test_a_workers_reserve_follows_its_role(rel, tp, role, dp, running, draft, reserve, worked):
    """data/releases.toml reserve_by_role: from 0.5.15 a decode worker's activation term is max(running
    requests x draft tokens, 2048) x 1.5 MiB and a prefill worker reserves no decode graphs or attention-DP
    padding (H100 80GB, 81,559 MiB as torch reports it; hand-worked from the wheels' formula)."""
    assert reserved_mib(_at(rel), H100_MIB, tp, 1, role=role, attention_dp=dp, max_running=running,
                        draft_tokens=draft) == reserve, worked


def test_a_record_is_older_where_its_workers_reserve_changes():
    """validate asks prompt_graphs_captured per worker at the record's release and the current one: an
    aggregated run at 0.5.17 with attention DP reserved none for prompt graphs (0.5.16 had the rule, 0.5.17
    not: the same as 0.5.23), one at 0.5.16 with attention DP none where 0.5.23 reserves (older); a P/D run
    at 0.5.9 none where 0.5.23's prefill worker reserves (older)."""
    from cardfit.validation.validate import _prompt_graph_reserve_applies

    def applies(version: str, **st) -> bool:
        settings = {"tp": 8, "pp": 1, "version": version, **st}
        r = {"kind": "serving", "runtime": "sglang", "gpu": "H100 SXM", "model": "llama-3.1-70b",
             "settings": settings}
        return _prompt_graph_reserve_applies(r, settings)

    dp = {"enable_dp_attention": True, "dp_size": 8}
    assert not applies("0.5.17", **dp)
    assert applies("0.5.16", **dp)
    assert not applies("0.5.9", gpu_memory_utilization=0.8)


def test_a_pd_record_whose_figures_the_prefill_reserve_does_not_move_is_on_the_user_path():
    """aiconfigurator's DeepSeek P/D runs on B200 (data/validation/serving_aic_pd.toml, SGLang 0.5.8.post1):
    at 0.5.23 the prefill worker reserves 1.5 GiB for prompt graphs its release did not capture, the decode
    worker none (prompt_graphs_captured); with each pool's batch pinned that moves none of the record's
    figures (predicted the same at 0.5.23), so it is on the path users get (it was "older" before)."""
    from cardfit.validation.validate import _predicted_apart, all_records, path_of

    pd = [r for r in all_records() if r["id"].startswith("aic-pd-row-")]
    assert len(pd) == 48
    for r in pd[::12]:
        assert not _predicted_apart(r)
        assert path_of(r) == "user", r["id"]


def test_a_pinned_pd_decode_worker_keeps_the_prompt_graphs_reserve():
    """deploy --prefill-workers/--decode-workers sizes each pool's memory for its role (Context.engine_at):
    at 0.5.23 a decode worker reserves no prompt-step graphs (apply_cuda_graph_disaggregation_roles,
    reserve_for_graph_mb) and its activations by its decode batch (reserve_by_role: 10,240 MiB, the floor),
    a prefill worker no decode graphs (13,392 MiB), so the decode budget is 3,152 MiB (to the fraction's 3
    places) above the prefill worker's, on one H100 of Llama 3.1 8B."""
    from cardfit.services import deploy as dp

    inp = dp.DeployInput(model="llama-3.1-8b", runtime="sglang", gpu=("H100 SXM",), input_tokens=4000,
                         output_tokens=500, users=16.0, tp=1, prefill_workers=1, decode_workers=1)
    pools = dp.pinned_answer(inp).pools
    assert pools is not None
    pre, dec = pools.prefill.cand.option.budget_bytes, pools.decode.cand.option.budget_bytes
    gib = 2**30
    assert abs((dec - pre) / 2**20 - (13392 - 10240)) < 0.002 * 80 * gib / 2**20

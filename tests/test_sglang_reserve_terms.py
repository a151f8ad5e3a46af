"""The terms of SGLang's default --mem-fraction-static reserve that depend on the launch (runtimes/sglang.py
reserved_mib), read in the PyPI wheels sglang 0.5.4 to 0.5.23 (https://pypi.org/project/sglang/#history):
attention data parallelism's padding of the decode graphs, the speculative reserve by release, and the
decode graphs' cap by a given --max-running-requests from 0.5.22. Each number is worked by hand from the
source's formula; the budgets read them through Runtime.serving (services/plan.py Context.engine)."""

import pytest

from cardfit.catalog.gpus import default_gpus
from cardfit.catalog.releases import at_release
from cardfit.catalog.runtimes import default_runtimes
from cardfit.runtimes import adapter
from cardfit.runtimes.sglang import decode_graph_max_bs, reserved_mib

RTX_4090_MIB = 24564  # torch's total memory (runtimes.toml gpu_memory_utilization_note)
H100_MIB = 81559
H200_MIB = 143771


def _at(rel: str):
    return at_release(default_runtimes().get("sglang"), rel)


@pytest.mark.parametrize("rel, mib, tp, dp, mla, reserve, why", [
    # 0.5.23 memory_hook.py reserve_for_graph_mb lines 370-378: max_bs * attn_dp_size * 3, and * 1.5 more
    # above 300. H200 TP 8: chunk 8192, max_bs 512; 512 + 8192 * 1.5 + 512 * 2 + 8 / 8 * 1024 + MLA prompt
    # graphs 1536 = 16384, + 512 * 8 * 3 + 512 * 8 * 1.5 = 18432 -> 34816
    ("0.5.23", H200_MIB, 8, 8, True, 34816, "DeepSeek-R1 at TP 8, DP 8 on H200"),
    ("0.5.23", H200_MIB, 8, 1, True, 16384, "the same without attention DP"),
    # H100 TP 2, DP 2: max_bs 256 (not above 300); 512 + 12288 + 512 + 256 + 58 prompt sizes x 8 (464)
    # + 256 * 2 * 3 (1536) = 15568
    ("0.5.23", H100_MIB, 2, 2, False, 15568, "a dense model at TP 2, DP 2 on H100"),
    # server_args.py 0.5.9 lines 1033-1041 (self.dp_size), no prompt graphs: 512 + 12288 + 1024 + 1024
    # + 512 * 8 * 4.5 (18432) = 33280
    ("0.5.9", H200_MIB, 8, 8, True, 33280, "0.5.9, dp_size"),
])
def test_attention_dp_pads_the_decode_graphs(rel, mib, tp, dp, mla, reserve, why):
    assert reserved_mib(_at(rel), mib, tp, 1, "cuda", mla, attention_dp=dp) == reserve, why


@pytest.mark.parametrize("rel, method, reserve, why", [
    # H100 TP 1: 512 + 8192 * 1.5 + 256 * 2 + 128 = 13440 (0.5.9), + 58 x 8 prompt sizes = 13904 (0.5.10 on),
    # above the 10 GiB floor; the speculative term after it
    ("0.5.9", "eagle3", 13440 + 2048, "0.5.9 lines 1051-1057 'eagle draft models' 2 * 1024"),
    ("0.5.9", "mtp", 13440 + 2048, "cardfit's mtp runs EAGLE"),
    ("0.5.9", "draft", 13440 + 6144, "STANDALONE 6 * 1024"),
    ("0.5.9", "ngram", 13440, "NGRAM: nothing"),
    ("0.5.10", "eagle3", 13440 + 4096, "0.5.10 lines 1316-1322: 4 * 1024 (a drafter: no prompt graphs)"),
    ("0.5.13", "draft", 13904 + 6144, "0.5.13 lines 1627-1632"),
    ("0.5.14", "eagle3", 13904, "0.5.14: no speculative term"),
    ("0.5.23", "mtp", 13904, "0.5.23 memory_hook.py: none"),
    ("0.5.23", "draft", 13904, "0.5.23 memory_hook.py: none"),
])
def test_the_speculative_reserve_follows_the_release(rel, method, reserve, why):
    assert reserved_mib(_at(rel), H100_MIB, 1, 1, speculative=method) == reserve, why


@pytest.mark.parametrize("rel, running, graphs, reserve, why", [
    # RTX 4090 TP 1 at 0.5.23: chunk 4096, max_bs 48; 512 + 4096 * 1.5 + 48 * 2 + 128 + 50 prompt sizes x 8
    # = 7280; --max-running-requests 16 caps max_bs at 16 (memory_hook.py lines 182-188): 7280 - 32 * 2
    ("0.5.23", 16, 16, 7216, "0.5.23: capped"),
    ("0.5.22", 16, 16, 7216, "0.5.22: capped"),
    ("0.5.21", 16, 48, 7280, "0.5.21: not capped"),
    ("0.5.23", 100, 48, 7280, "a cap above max_bs changes nothing"),
    ("0.5.23", 0, 48, 7280, "none given"),
])
def test_a_given_running_cap_caps_the_decode_graphs(rel, running, graphs, reserve, why):
    rt = _at(rel)
    assert decode_graph_max_bs(rt, RTX_4090_MIB, 1, running) == graphs, why
    assert reserved_mib(rt, RTX_4090_MIB, 1, 1, max_running=running) == reserve, why


def test_the_running_cap_shrinks_the_dp_padding():
    """H200 TP 8, DP 8, --max-running-requests 256 at 0.5.23: max_bs 256, 512 + 12288 + 512 + 1024 + 1536
    + 256 * 8 * 3 (6144) = 22016 (no 1.5 MiB term at 256)."""
    assert reserved_mib(_at("0.5.23"), H200_MIB, 8, 1, "cuda", True, attention_dp=8, max_running=256) == 22016


def test_the_budget_reads_the_launch():
    """Runtime.serving: the SGLang budget on an H100 at 0.5.10 with EAGLE-3 is 4 GiB less less the prompt
    graphs' 464 MiB (a drafter turns them off at 0.5.10: prefill_graph_speculative), to the fraction's 3
    places; a vLLM adapter ignores it."""
    gpu = default_gpus().get("H100")
    engine = adapter(_at("0.5.10"))
    plain = engine.budget_per_card(gpu, None, 1, 1)
    drafting = engine.serving(speculative="eagle3").budget_per_card(gpu, None, 1, 1)
    assert abs((plain - drafting) / 2**20 - (4096 - 464)) < 0.001 * gpu.usable_bytes / 2**20
    assert engine.serving() is engine
    vllm = adapter(default_runtimes().get("vllm"))
    assert vllm.serving(speculative="eagle3", attention_dp=4) is vllm


def test_plan_budget_reads_the_speculative_method(run_json):
    """`cardfit plan --speculative eagle3` at sglang@0.5.10 on an H100: the budget 4 GiB smaller less the
    prompt graphs' 464 MiB a drafter turns off there (main gave the same budget with and without drafting);
    at the current release (0.5.23) the same."""
    def budget(rel: str, *extra: str) -> int:
        r = run_json("plan", "qwen3-30b-a3b", "--gpu", "H100 SXM", "--runtime", f"sglang@{rel}", "--context",
                     "8192", *extra)
        return r["gpus"][0]["budget_bytes"]

    usable = default_gpus().get("H100 SXM").usable_bytes
    drop = budget("0.5.10") - budget("0.5.10", "--speculative", "eagle3")
    assert abs(drop / 2**20 - (4096 - 464)) < 0.001 * usable / 2**20
    assert budget("0.5.23") == budget("0.5.23", "--speculative", "eagle3")


def test_a_dp_layout_budget_reads_its_ranks():
    """services/plan.py Context.engine_at (deploy's attention-DP layouts and pinned replicas): DeepSeek-R1 on
    an H200 at TP 8 with 8 attention-DP ranks loses 512 * 8 * 4.5 = 18432 MiB more to the reserve (34816
    against 16384 MiB, test_attention_dp_pads_the_decode_graphs), to the fraction's 3 places; main gave both
    the same budget."""
    from cardfit.services.inputs import PlanInput
    from cardfit.services.plan import build_context

    ctx = build_context(PlanInput(model="deepseek-r1-671b", runtime="sglang", hub=False))
    gpu = default_gpus().get("H200")
    plain = ctx.engine.budget_per_card(gpu, None, 8, 1, ctx.model)
    dp8 = ctx.engine_at(8).budget_per_card(gpu, None, 8, 1, ctx.model)
    assert abs((plain - dp8) / 2**20 - 18432) < 0.001 * gpu.usable_bytes / 2**20


@pytest.mark.parametrize("version, settings, older", [
    # 0.5.13 reserved 4 GiB for EAGLE-3 (spec_reserve_dropped from 0.5.14): another generation for a drafting
    # record on the default fraction, not for one that states its fraction or does not draft
    ("0.5.13", {"speculative": "eagle3"}, True),
    ("0.5.13", {"speculative": "eagle3", "gpu_memory_utilization": 0.85}, False),
    ("0.5.13", {"speculative": "draft:llama-3.2-1b"}, True),
    ("0.5.13", {}, False),
    # before 0.5.22 a stated --max-running-requests below the card's decode graphs (256 on an H100 at TP 1)
    # did not cap them (graph_cap_by_max_running)
    ("0.5.21", {"max_num_seqs": 64}, True),
    ("0.5.21", {"max_num_seqs": 512}, False),
    # with attention DP too: the cap is the server's whole --max-running-requests, read before any division
    # (memory_hook.py lines 181-188 of 0.5.23; tests/test_sglang_dp_attention.py)
    ("0.5.21", {"max_num_seqs": 64, "attention_dp": 2, "tp": 2}, True),
    ("0.5.23", {"max_num_seqs": 64}, False),
])
def test_a_record_of_a_release_with_other_reserve_terms_is_older(version, settings, older):
    from cardfit.validation.validate import older_generation

    r = {"kind": "serving", "runtime": "sglang", "gpu": "H100 SXM", "model": "llama-3.1-8b",
         "settings": {"version": version, **settings}}
    assert older_generation(r) is older

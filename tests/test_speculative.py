"""Speculative decoding (--speculative): the expected tokens per step, the drafter's memory, the speed it
gives and loses as the batch grows, the errors, and the launch lines (issue 26 item 3)."""

from __future__ import annotations

import json
import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

import cardfit
from cardfit.catalog.models import default_models
from cardfit.catalog.quants import default_quants
from cardfit.catalog.speculative import acceptance_for
from cardfit.core import speculative as spc
from cardfit.core.kv import kv_cache_bytes
from cardfit.core.weights import weights
from cardfit.errors import InputError
from cardfit.runtimes import launch

from .test_launch import options

# (acceptance alpha, K, expected tokens per step, where it comes from / why the case is tricky)
PER_STEP = [
    (0.85, 1, 1.85, "DeepSeek-V3 report 5.4.3: 85 % acceptance of the second token, '1.8 times TPS'"),
    (0.5, 2, 1.75, "1 + 0.5 + 0.25 (Leviathan et al. 2023, eq. 1)"),
    (0.0, 5, 1.0, "nothing accepted: the target's own token only"),
    (1.0, 4, 5.0, "everything accepted: K + 1 (the 1 - alpha denominator is 0)"),
    (0.9, 0, 1.0, "no drafted tokens: a plain step"),
]


@pytest.mark.parametrize("alpha,k,expected,why", PER_STEP)
def test_tokens_per_step(alpha: float, k: int, expected: float, why: str) -> None:
    assert spc.tokens_per_step(alpha, k) == pytest.approx(expected), why


def test_vllm_acceptance_length_is_one_plus_accepted_per_draft() -> None:
    """data/speculative.toml's EAGLE-3 row quotes vLLM issue #26191's counts: 1 + 12,208 accepted / 4,816
    drafts = 3.53, and the rate it implies at K = 7 gives that length back."""
    row = acceptance_for("eagle3", "llama-3.1-8b")
    assert 1 + 12208 / 4816 == pytest.approx(row.acceptance_length, abs=0.005)
    alpha = spc.rate_for_length(row.acceptance_length, row.tokens)
    assert spc.tokens_per_step(alpha, row.tokens) == pytest.approx(row.acceptance_length, rel=1e-9)
    assert 0.7 < alpha < 0.8


# (accepted, drafted, K, tokens the run made, its target steps, source): the engines' acceptance is accepted
# / drafted, and a step yields 1 + acceptance x K tokens
ENGINE_COUNTS = [
    (12208, 33712, 7, None, 4816, "vLLM issue #26191: num_accepted_tokens 12208, num_draft_tokens 33712, "
     "num_drafts 4816, mean acceptance length 3.53"),
    (526, 730, 5, 673, None, "llama.cpp issue #5877: n_predict 673, n_drafted 730, n_accept 526 (72.055 %): "
     "673 tokens in 673 - 526 = 147 target steps"),
]


@pytest.mark.parametrize("accepted,drafted,k,made,steps,source", ENGINE_COUNTS,
                         ids=["vllm-eagle3", "llamacpp-draft"])
def test_a_step_yields_one_plus_acceptance_times_k(accepted: int, drafted: int, k: int, made: int | None,
                                                   steps: int | None, source: str) -> None:
    steps = steps or (made - accepted)
    made = made or steps + accepted
    # within 1 %: the last step of a run may draft fewer than K
    assert spc.length_at(accepted / drafted, k) == pytest.approx(made / steps, rel=0.01), source


# (runtime as a user names it, single-token target steps a speculative cycle runs beside its verification,
# why): llama-server before PR #17808 (data/releases.toml server_draft_in_batch)
CYCLES = [
    ("llama.cpp@b5142", 1, "issue #12968's build: the main batch decodes the sampled token, then the draft "
     "and that token go in a batch of their own"),
    ("llama.cpp@b7370", 0, "the first build the table dates after PR #17808: the draft rides in one step"),
    ("llama.cpp", 0, "the current build"),
    ("vllm", 0, "vLLM verifies in its one step whatever its release (a feature its table does not list)"),
]


@pytest.mark.parametrize("runtime,plain,why", CYCLES, ids=[c[0] for c in CYCLES])
def test_llama_server_before_pr_17808_runs_a_plain_step_a_cycle(runtime: str, plain: int, why: str) -> None:
    from cardfit.catalog.runtimes import default_runtimes
    from cardfit.services.speculative import plain_steps

    assert plain_steps(default_runtimes().find(runtime)) == plain, why


def test_issue_12968_counts_need_the_plain_step() -> None:
    """llama-server b5142, Qwen2.5 72B with a 0.5B draft at --draft-max 3 --draft-min 3: '261 tokens',
    'draft acceptance rate = 0.96855 (154 accepted / 159 generated)': 159 / 3 = 53 cycles of 261 / 53 = 4.92
    tokens, 1 + 0.969 x 3 = 3.91 from the verification and one from the plain step before it."""
    cycles = 159 / 3
    with_plain = spc.Speculation("draft", 3, 154 / 159, None, plain_steps=1)
    without = spc.Speculation("draft", 3, 154 / 159, None)
    assert with_plain.per_step == pytest.approx(261 / cycles, rel=0.01)
    assert without.per_step < 0.8 * 261 / cycles


# issue #12968's run (b5142: 261 tokens in 159 / 3 = 53 cycles, each a plain step and a verification) against
# the same draft at b7370 (the draft rides in the one step: 1 + 0.969 x 3 tokens a step)
TOKENS_PER_STEP = [
    ("llama.cpp@b5142", 261 / (2 * 159 / 3), "two target steps a cycle: 261 tokens over 106 steps"),
    ("llama.cpp@b7370", 1 + 154 / 159 * 3, "one target step a cycle: the verification's tokens"),
]


@pytest.mark.parametrize("runtime,expected,why", TOKENS_PER_STEP, ids=[c[0] for c in TOKENS_PER_STEP])
@pytest.mark.parametrize("command", ["speed", "plan"])
def test_tokens_per_step_counts_a_cycles_target_steps(runtime: str, expected: float, why: str,
                                                      command: str) -> None:
    """--speculative's JSON `tokens_per_step` and the text's line are the tokens per target step the timing
    divides a cycle by (core/speculative.py Speculation.per_step over 1 + plain_steps)."""
    kw: dict = dict(gpu="Radeon PRO W7900", quant="IQ4_XS", context=2048, runtime=runtime,
                    speculative="draft:qwen2.5-0.5b", num_speculative_tokens=3, acceptance=154 / 159)
    if command == "speed":
        out = cardfit.speed("qwen2.5-72b", concurrency=(1,), **kw)
    else:
        out = cardfit.plan("qwen2.5-72b", **kw)
    got = out["speculative"]["tokens_per_step"] if command == "speed" else out["gpus"][0]["speculative"][
        "tokens_per_step"]
    assert got == pytest.approx(expected, rel=0.01), why
    two = "2 target steps a cycle" in " ".join(out["notes"])
    assert two == (runtime.endswith("b5142")), why
    if two:
        assert f"{got:.2f} a target step" in " ".join(out["notes"])


def test_a_plain_step_a_cycle_is_the_mediant_of_the_two_rates() -> None:
    """Radeon PRO W7900, Qwen2.5 72B IQ4_XS with the 0.5B draft (issue #12968's setting): at b5142 a cycle is
    the plain step (1 / plain-decode rate, one token) plus what b7370 spends on its L tokens (L / its rate),
    so the old build's rate is (L + 1) / (L / new + 1 / plain), below b7370's and above plain decode."""
    kw = dict(gpu="Radeon PRO W7900", quant="IQ4_XS", context=2048, concurrency=(1,))
    spec = dict(speculative="draft:qwen2.5-0.5b", num_speculative_tokens=3, acceptance=0.96855)

    def rate(runtime: str, **more: object) -> float:
        return cardfit.speed("qwen2.5-72b", runtime=runtime, **kw, **more)["rows"][0]["per_user_tokens_per_s"]

    plain, old = rate("llama.cpp@b5142"), rate("llama.cpp@b5142", **spec)
    new = rate("llama.cpp@b7370", **spec)
    length = 1 + 0.96855 * 3
    assert old == pytest.approx((length + 1) / (length / new + 1 / plain), rel=0.005)
    assert plain < old < new


@given(st.floats(1e-3, 1.0), st.floats(1e-3, 1.0), st.floats(0.0, 1.0), st.integers(1, 16))
def test_a_plain_step_pulls_the_time_a_token_toward_a_plain_steps(verify_s: float, plain_s: float,
                                                                   alpha: float, k: int) -> None:
    """(V + D + P) / (L + 1) lies between (V + D) / L and P: the plain step's token costs a whole step."""
    length = spc.length_at(alpha, k)
    mixed = (verify_s + plain_s) / (length + 1)
    assert min(verify_s / length, plain_s) - 1e-12 <= mixed <= max(verify_s / length, plain_s) + 1e-12
    assert spc.Speculation("draft", k, alpha, None, 1).per_step == pytest.approx(length + 1)


@given(st.floats(1.01, 7.9), st.integers(1, 7))
def test_a_figure_carried_to_its_own_k_is_itself(length: float, k: int) -> None:
    length = min(length, k + 1 - 1e-6)
    assert spc.length_at(spc.acceptance_at(length, k, k), k) == pytest.approx(length, rel=1e-6)


@given(st.floats(0.0, 0.99), st.floats(0.0, 0.99), st.integers(0, 16))
def test_more_acceptance_never_fewer_tokens(a: float, b: float, k: int) -> None:
    lo, hi = sorted((a, b))
    assert 1.0 <= spc.tokens_per_step(lo, k) <= spc.tokens_per_step(hi, k) <= k + 1 + 1e-9


@given(st.floats(0.01, 0.99), st.integers(1, 16))
def test_more_drafts_never_fewer_tokens_and_the_rate_inverts(alpha: float, k: int) -> None:
    assert spc.tokens_per_step(alpha, k) <= spc.tokens_per_step(alpha, k + 1)
    length = spc.tokens_per_step(alpha, k)
    assert spc.rate_for_length(length, k) == pytest.approx(alpha, abs=1e-6)


def test_eagle3_head_of_llama_31_8b_by_hand() -> None:
    """One decoder layer (8,030,261,248 less the untied embedding and head, 2 x 128,256 x 4,096, over 32
    layers = 218,112,128), its q/k/v taking 2 x hidden (4,096 x (32 + 2 x 8) x 128 = 25,165,824 more), the
    fusion fc 3 x 4,096 x 4,096 = 50,331,648 and the head over 32,000 draft tokens x 4,096 = 131,072,000."""
    m = default_models().get("llama-3.1-8b")
    assert spc.eagle3_params(m) == pytest.approx(218_112_128 + 25_165_824 + 50_331_648 + 131_072_000)


def test_deepseek_v3_mtp_module_is_about_the_published_14b() -> None:
    """deepseek-ai/DeepSeek-V3's model card: '685B, which includes 671B of the Main Model weights and 14B of
    the Multi-Token Prediction (MTP) Module weights'. cardfit's MTP layer is the model's mean layer (the
    first three are dense, so a MoE layer is larger), hence within 10 %, below."""
    m = default_models().get("deepseek-v3")
    assert 0.9 * 14e9 < spc.mtp_params(m, 1) < 14e9


def _plan(**kw: object) -> dict:
    return cardfit.plan("llama-3.1-8b", gpu="H100 SXM", runtime="vllm", context=8192, **kw)


def test_draft_model_memory_is_its_weights_and_its_cache() -> None:
    """Llama 3.2 1B drafting for Llama 3.1 8B in BF16: its weights at BF16, and its KV cache of 16 layers x
    8 KV heads x 64 x 2 (K and V) x 2 bytes = 32,768 bytes a token for the plan's context."""
    off, on = _plan(), _plan(speculative="draft:llama-3.2-1b")
    draft = default_models().get("llama-3.2-1b")
    assert off["memory"]["draft_bytes"] == 0
    w = weights(draft, default_quants().get(on["inputs"]["quant"])).total_bytes
    assert kv_cache_bytes(draft, 1024, 1, "bf16") // 1024 == 32_768
    assert on["memory"]["draft_bytes"] == w + 32_768 * on["memory"]["context"]
    assert on["memory"]["total_bytes"] == off["memory"]["total_bytes"] + on["memory"]["draft_bytes"]
    assert on["gpus"][0]["need_bytes"] - off["gpus"][0]["need_bytes"] == on["memory"]["draft_bytes"]


@pytest.mark.parametrize("method,drafts", [("eagle3", True), ("ngram", False), ("draft:llama-3.2-1b", True)])
def test_memory_and_single_stream_speed_by_method(method: str, drafts: bool) -> None:
    off, on = _plan(), _plan(speculative=method)
    assert (on["memory"]["draft_bytes"] > 0) == drafts
    assert on["gpus"][0]["speculative"]["method"] == method.split(":")[0]
    assert off["gpus"][0]["speculative"] is None
    # one stream is bandwidth-bound: verifying K + 1 tokens costs about a step, so more tokens a step win
    assert on["gpus"][0]["decode_tokens_per_s"] > 1.3 * off["gpus"][0]["decode_tokens_per_s"]


def _aggregate(**kw: object) -> list[float]:
    r = cardfit.speed("llama-3.1-8b", gpu="H100 SXM", runtime="vllm", input_tokens=100, output_tokens=300,
                      concurrency=(1, 64, 256), **kw)
    return [row["aggregate_tokens_per_s"] for row in r["rows"]]


def test_gain_falls_as_the_batch_turns_compute_bound() -> None:
    """Nothing sets it: verifying 8 tokens a sequence costs 8 times the FLOPs, which a batch of 256 short
    sequences on one H100 cannot hide under its weight reads. At 30 % acceptance the speculative server is
    ahead with one stream and far behind at 256."""
    off = _aggregate()
    on = _aggregate(speculative="eagle3", num_speculative_tokens=7, acceptance=0.3)
    gains = [a / b for a, b in zip(on, off, strict=True)]
    assert gains[0] > 1 > gains[2]
    assert gains[0] > gains[1] > gains[2]


ERRORS = [
    (["--speculative", "medusa"], "unknown --speculative 'medusa'"),
    (["--speculative", "draft:llama-3.3-70b"], "is not smaller than"),
    (["--speculative", "draft:qwen3-1.7b"], "needs the target's tokenizer"),
    (["--speculative", "draft"], "needs the draft model"),
    (["--speculative", "mtp"], "no multi-token-prediction layers"),
    (["--acceptance", "0.5"], "go with --speculative"),
    (["--speculative", "eagle3", "--runtime", "llama.cpp", "--quant", "Q4_K_M"], "has no 'eagle3'"),
    (["--speculative", "eagle3", "--acceptance", "1.5"], "acceptance"),
    (["--speculative-topk", "4"], "go with --speculative"),
    (["--speculative", "eagle3", "--runtime", "vllm", "--speculative-topk", "4", "--speculative-draft-tokens",
      "16"], "drafts a chain of K tokens, not a tree"),
    (["--speculative", "ngram", "--runtime", "sglang", "--speculative-topk", "4",
      "--speculative-draft-tokens", "8"], "drafts no tree"),
    (["--speculative", "eagle3", "--runtime", "sglang", "--speculative-topk", "4"],
     "needs --speculative-draft-tokens"),
    (["--speculative", "ngram", "--runtime", "sglang", "--num-speculative-tokens", "2",
      "--speculative-draft-tokens", "5"], "verifies its K + 1 drafted tokens a step"),
    # the tree's own rules before the runtime's: an impossible tree is refused as such on vLLM too
    (["--speculative", "eagle3", "--runtime", "vllm", "--num-speculative-tokens", "1", "--speculative-topk",
      "4", "--speculative-draft-tokens", "200"], "has 5 nodes to verify"),
    (["--speculative", "ngram", "--runtime", "vllm", "--speculative-topk", "2", "--speculative-draft-tokens",
      "3"], "drafts no tree"),
    (["--speculative", "eagle3", "--runtime", "sglang", "--num-speculative-tokens", "2", "--speculative-topk",
      "2", "--speculative-draft-tokens", "9"], "has 7 nodes to verify"),
]


@pytest.mark.parametrize("args,message", ERRORS, ids=[" ".join(e[0]) for e in ERRORS])
def test_bad_input_is_one_line(run_cli, args: list[str], message: str) -> None:
    code, out, err = run_cli("plan", "llama-3.1-8b", "--gpu", "H100", *args)
    assert code == 2 and not out
    assert err.startswith("Error: ") and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


# (runtime, model, speculative launch, the flags and values it must carry)
LAUNCHES = [
    ("vllm", "meta-llama/Llama-3.1-8B-Instruct", launch.SpecLaunch("eagle3", 3, launch.EAGLE3_HEAD),
     {"--speculative-config": {"method": "eagle3", "model": "EAGLE3_HEAD", "num_speculative_tokens": 3}}),
    ("vllm", "meta-llama/Llama-3.1-8B-Instruct",
     launch.SpecLaunch("draft", 5, "meta-llama/Llama-3.2-1B-Instruct"),
     {"--speculative-config": {"method": "draft_model", "model": "meta-llama/Llama-3.2-1B-Instruct",
                               "num_speculative_tokens": 5}}),
    ("vllm", "deepseek-ai/DeepSeek-V3", launch.SpecLaunch("mtp", 1),
     {"--speculative-config": {"method": "mtp", "num_speculative_tokens": 1}}),
    ("sglang", "deepseek-ai/DeepSeek-V3", launch.SpecLaunch("mtp", 1),
     {"--speculative-algorithm": "EAGLE", "--speculative-num-steps": "1", "--speculative-eagle-topk": "1",
      "--speculative-num-draft-tokens": "2"}),
    ("sglang", "meta-llama/Llama-3.1-8B-Instruct", launch.SpecLaunch("eagle3", 5, launch.EAGLE3_HEAD),
     {"--speculative-algorithm": "EAGLE3", "--speculative-draft-model-path": "EAGLE3_HEAD",
      "--speculative-num-draft-tokens": "6"}),
    ("sglang", "Qwen/Qwen3-8B-FP8", launch.SpecLaunch("eagle3", 4, launch.EAGLE3_HEAD, 4, 16),
     {"--speculative-algorithm": "EAGLE3", "--speculative-num-steps": "4", "--speculative-eagle-topk": "4",
      "--speculative-num-draft-tokens": "16"}),
    ("sglang", "meta-llama/Llama-3.1-8B-Instruct", launch.SpecLaunch("ngram", 4),
     {"--speculative-algorithm": "NGRAM", "--speculative-num-draft-tokens": "5"}),
    ("llama.cpp", "models/Llama-3.1-8B-Instruct-Q4_K_M.gguf",
     launch.SpecLaunch("draft", 8, "models/Llama-3.2-1B-Instruct-Q4_K_M.gguf"),
     {"-md": "models/Llama-3.2-1B-Instruct-Q4_K_M.gguf", "--draft-max": "8", "-ngld": "999"}),
]


@pytest.mark.parametrize("runtime,model,spec,expected", LAUNCHES,
                         ids=[f"{c[0]}-{c[2].method}-{c[2].topk}" for c in LAUNCHES])
def test_launch_flags_exist_and_say_what_the_plan_says(runtime: str, model: str, spec: launch.SpecLaunch,
                                                       expected: dict) -> None:
    known = options(runtime)
    line = launch.build(runtime, model, quant="bf16", max_model_len=8192, max_num_seqs=8, speculative=spec)
    for flag in line.flags():
        assert flag in known["flags"], f"{flag} is not an option of {known['tool']} {known['version']}"
    argv = shlex.split(line.shell())
    for flag, value in expected.items():
        got = argv[argv.index(flag) + 1]
        assert (json.loads(got) if isinstance(value, dict) else got) == value


def test_a_method_the_runtime_lacks_is_refused_on_the_launch_line() -> None:
    with pytest.raises(InputError, match="has no 'mtp'"):
        launch.build("llama.cpp", "m.gguf", max_model_len=4096, speculative=launch.SpecLaunch("mtp", 1))


def test_deploy_searches_it_on_and_off(run_json) -> None:
    """A tight TPOT target for 4 users: one stream's steps are bandwidth-bound, so drafting wins, the answer
    says so, and its command starts it; without --speculative every deployment says null."""
    args = ("deploy", "meta-llama/Llama-3.1-8B-Instruct", "--users", "4", "--tpot-ms", "8", "--runtime",
            "vllm", "--gpu", "H100")
    plain = run_json(*args)
    assert all(d["speculative"] is None for d in [plain["best"], *plain["pareto"]] if d)
    on = run_json(*args, "--speculative", "eagle3")
    best = on["best"]
    assert best["speculative"]["method"] == "eagle3" and best["speculative"]["tokens"] == 7
    assert "--speculative-config" in best["command"]
    assert best["tpot_ms"] < (plain["best"]["tpot_ms"] if plain["best"] else float("inf"))
    assert any("speculative decoding (eagle3" in n for n in on["notes"])


def test_the_web_api_takes_it_as_the_cli_does(run_json) -> None:
    """POST /api/plan and /api/deploy take `speculative` (the page's field) and answer what the CLI does;
    a bad method is a 4xx with the CLI's line, never a 500."""
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from cardfit.web import create_app

    client = TestClient(create_app())
    body = {"model": "llama-3.1-8b", "gpu": "H100", "runtime": "vllm", "speculative": "eagle3"}
    got = client.post("/api/plan", json=body)
    assert got.status_code == 200
    cli = run_json("plan", "llama-3.1-8b", "--gpu", "H100", "--runtime", "vllm", "--speculative", "eagle3")
    assert got.json()["memory"]["draft_bytes"] == cli["memory"]["draft_bytes"] > 0
    assert got.json()["gpus"][0]["speculative"] == cli["gpus"][0]["speculative"]
    bad = client.post("/api/plan", json={**body, "speculative": "medusa"})
    assert 400 <= bad.status_code < 500 and "unknown --speculative" in bad.json()["error"]


def test_a_pinned_deploy_drafts_as_the_question_says(run_json) -> None:
    """`deploy --tp 1 --speculative eagle3` pins one deployment that drafts (issue 26): before, the pinned
    path timed the plain setting and printed speculative null. The deployment of GPUStack's qwen3-8b/
    h100-latency.md line 785 (SGLang 0.5.3.post3, Qwen3-8B FP8, one H100, 4 users, EAGLE-3 with 4 draft
    steps): its step verifies 5 tokens a sequence, so a token takes less than the plain step's time and more
    than that time over the tokens a step yields; its command starts the drafter."""
    args = ("deploy", "qwen3-8b", "--quant", "fp8", "--gpu", "H100 SXM", "--runtime", "sglang@0.5.3.post3",
            "--tp", "1", "--users", "4", "--input-tokens", "233", "--output-tokens", "221")
    plain = run_json(*args)["best"]
    on = run_json(*args, "--speculative", "eagle3", "--num-speculative-tokens", "4")["best"]
    assert plain["speculative"] is None
    sp = on["speculative"]
    assert sp["method"] == "eagle3" and sp["tokens"] == 4
    assert plain["tpot_ms"] / sp["tokens_per_step"] < on["tpot_ms"] < plain["tpot_ms"]
    assert "--speculative-algorithm EAGLE3" in on["command"]


def test_a_serving_record_asks_with_its_drafter() -> None:
    """A serving record's `speculative`, `num_speculative_tokens` and `acceptance` are deploy's options of
    the same names in the question validate scores (validation/serving.py record_input), and they keep the
    record on the user path (validate.py USER_SETTINGS)."""
    from cardfit.validation import validate as vd
    from cardfit.validation.serving import record_input

    r = {"id": "r", "kind": "serving", "model": "qwen3-8b", "quant": "fp8", "runtime": "sglang",
         "gpu": "H100 SXM", "gpus": 1, "input_tokens": 233, "output_tokens": 221, "concurrency": 4,
         "load": "closed", "requests": 100, "fixed_lengths": False, "metric": "tpot_ms", "statistic": "mean",
         "settings": {"tp": 1, "version": "0.5.3.post3", "speculative": "eagle3",
                      "num_speculative_tokens": 4, "acceptance": 0.6}}
    inp, _, _ = record_input(r)
    assert (inp.speculative, inp.num_speculative_tokens, inp.acceptance) == ("eagle3", 4, 0.6)
    assert {"speculative", "num_speculative_tokens", "acceptance"} <= vd.USER_SETTINGS


# GPUStack qwen3-8b/h100-latency.md (data/validation/serving_speculative_gpustack.toml): SGLang 0.5.3.post3,
# Qwen3-8B FP8, one H100 SXM, EAGLE-3, 4 in flight: (line, --speculative-num-steps, --speculative-eagle-topk,
# --speculative-num-draft-tokens, measured mean TPOT ms)
TREES = [(477, 4, 4, 8, 3.71), (322, 4, 4, 16, 3.75), (450, 4, 4, 32, 3.54), (424, 4, 8, 16, 3.62)]
PINNED = ("deploy", "qwen3-8b", "--quant", "fp8", "--gpu", "H100 SXM", "--runtime", "sglang@0.5.3.post3",
          "--tp", "1", "--input-tokens", "233", "--output-tokens", "221")


def _tree(steps: int, topk: int, verified: int, users: int = 4) -> list[str]:
    return [*PINNED, "--users", str(users), "--speculative", "eagle3", "--num-speculative-tokens", str(steps),
            "--speculative-topk", str(topk), "--speculative-draft-tokens", str(verified)]


def test_a_tree_is_a_pinned_deploys_setting_and_its_launch_line(run_json) -> None:
    """`--speculative-topk 4 --speculative-draft-tokens 16` (GPUStack line 322's SGLang flags) reach the
    pinned deployment: its JSON names the tree and its command starts SGLang with those flags."""
    best = run_json(*_tree(4, 4, 16))["best"]
    sp = best["speculative"]
    assert (sp["method"], sp["tokens"], sp["topk"], sp["draft_tokens"]) == ("eagle3", 4, 4, 16)
    for flag in ("--speculative-num-steps 4", "--speculative-eagle-topk 4",
                 "--speculative-num-draft-tokens 16"):
        assert flag in best["command"]


def test_verified_tokens_cost_little_at_a_few_users_as_the_page_measured(run_json) -> None:
    """GPUStack's sweep of the tree at 4 users: 8, 16 or 32 verified tokens a sequence and top-k 4 or 8 gave
    mean TPOTs within 6 % of each other (3.54-3.75 ms): a verification of 4 x 32 tokens still reads the
    weights once and is bound by those reads. The model times them so too (within 6 %), and every tree at
    least as slow as the chain of the same depth (the chain's tokens a step, more work)."""
    measured = [m for *_, m in TREES]
    assert max(measured) / min(measured) < 1.06
    got = [run_json(*_tree(k, t, n))["best"]["tpot_ms"] for _, k, t, n, _ in TREES]
    assert max(got) / min(got) < 1.06
    chain = run_json(*PINNED, "--users", "4", "--speculative", "eagle3", "--num-speculative-tokens", "4")
    assert min(got) >= chain["best"]["tpot_ms"]


def test_a_wide_tree_loses_its_gain_first_as_the_batch_grows() -> None:
    """A verification of 32 tokens a sequence costs 32 tokens' FLOPs: at a batch where the step is bound by
    its FLOPs the tree of 32 takes longer a token than the chain of K + 1 = 5 at the same acceptance and
    depth, and at one sequence (bound by the weight reads) about the same."""
    common = dict(gpu="H100 SXM", runtime="sglang", quant="fp8", input_tokens=233, output_tokens=221,
                  concurrency=(1, 128), speculative="eagle3", num_speculative_tokens=4)
    chain = cardfit.speed("qwen3-8b", **common)["rows"]
    tree = cardfit.speed("qwen3-8b", speculative_topk=4, speculative_draft_tokens=32, **common)["rows"]
    one, many = (t["per_user_tokens_per_s"] / c["per_user_tokens_per_s"] for t, c in zip(tree, chain,
                                                                                          strict=True))
    assert one == pytest.approx(1.0, abs=0.05)
    assert many < 0.8


def test_a_tree_yields_the_tokens_of_its_deepest_path() -> None:
    """Acceptance over a tree is counted as a chain as deep as the tree can accept: K, or its verified
    tokens less one where fewer (4 draft steps but 3 tokens verified: 2 drafts deep at most)."""
    deep = spc.Speculation("eagle3", 4, 0.5, None, topk=4, verify_tokens=16)
    shallow = spc.Speculation("eagle3", 4, 0.5, None, topk=4, verify_tokens=3)
    assert (deep.verified, deep.depth) == (16, 4)
    assert (shallow.verified, shallow.depth) == (3, 2)
    assert deep.per_step == pytest.approx(spc.length_at(0.5, 4))
    assert shallow.per_step == pytest.approx(spc.length_at(0.5, 2))
    chain = spc.Speculation("eagle3", 4, 0.5, None)
    assert (chain.verified, chain.depth, chain.per_step) == (5, 4, deep.per_step)


def test_sglang_verifies_in_the_graph_of_its_sequences() -> None:
    """SGLang captures its target-verify CUDA graphs per batch size, each sequence carrying the verified
    tokens (cuda_graph_runner.py num_tokens_per_bs = speculative_num_draft_tokens; can_run: batch_size <=
    max_bs): 32 sequences x 16 tokens = 512 tokens stays a graph replay under a 256-sequence capture, where a
    runtime that counts tokens (llama.cpp, vLLM) launches past its limit eagerly."""
    from cardfit.core.speed import Load, Machine, Shares

    load = Load(8_000_000_000, Shares(1.0, 0.0, 0.0, 1.0, "params"), 1_000_000, 16e9, 36, 4096)
    mc = Machine(3350, 989, graph_max_batch=256, overhead_s_per_layer=40.9e-6,
                 overhead_s_per_layer_eager=800e-6)
    assert spc.verify_overhead_s(load, mc, 32, 15, by_sequences=True) == 0.0
    assert spc.verify_overhead_s(load, mc, 32, 15) == pytest.approx(36 * (800e-6 - 40.9e-6))
    from cardfit.catalog.runtimes import default_runtimes
    from cardfit.services.inputs import PlanInput
    from cardfit.services.speculative import choose

    inp = PlanInput(model="qwen3-8b", speculative="eagle3", speculative_topk=4, speculative_draft_tokens=16)
    c = choose(inp, default_models().get("qwen3-8b"), default_runtimes().find("sglang"))
    assert c.verify_graph_by_sequences and (c.topk, c.verified) == (4, 16)


def test_a_serving_record_states_its_tree() -> None:
    """GPUStack line 322's launch flags (--speculative-num-steps 4 --speculative-eagle-topk 4
    --speculative-num-draft-tokens 16) are the record's settings and reach the question validate scores;
    line 503's top-k 1 is SGLang's chain (it verifies num_steps + 1 = 3, not the stated 4)."""
    from cardfit.validation import validate as vd
    from cardfit.validation.serving import record_input

    records = {r["id"]: r for r in vd.all_records()}
    inp, _, _ = record_input(records["gpustack-qwen3-8b-h100-sglang-fp8-eagle3-sharegpt-L322-tpot"])
    assert (inp.num_speculative_tokens, inp.speculative_topk, inp.speculative_draft_tokens) == (4, 4, 16)
    inp, _, _ = record_input(records["gpustack-qwen3-8b-h100-sglang-fp8-eagle3-sharegpt-L503-tpot"])
    assert (inp.num_speculative_tokens, inp.speculative_topk, inp.speculative_draft_tokens) == (2, 1, None)
    assert {"speculative_topk", "speculative_draft_tokens"} <= vd.USER_SETTINGS


def test_a_runtime_without_trees_is_searched_plain_not_left_out(run_json) -> None:
    """A tree asked of a deploy that also weighs vLLM: vLLM's plain deployments stay in the search (before,
    its drafting setting's error left the whole runtime out), and one pinned on vLLM runs plain and says
    why, as for a method the runtime lacks."""
    args = ("deploy", "qwen3-8b", "--users", "4", "--gpu", "H100 SXM", "--speculative", "eagle3",
            "--speculative-topk", "4", "--speculative-draft-tokens", "16")
    searched = run_json(*args)
    assert not any("left out" in n and "vLLM drafts a chain" in n for n in searched["notes"])
    pinned = run_json(*args, "--runtime", "vllm", "--tp", "1")
    d = pinned["best"] or pinned["closest"]
    assert d["speculative"] is None
    assert any("as a tree (top-4, 16 tokens verified a step): vllm does not draft that way" in n
               for n in pinned["notes"])


# Chain answers pinned (vLLM and SGLang; speed and a pinned deploy), as the code before SGLang's tree of
# drafts (92bf484 and earlier) gave them: a change to the tree must not move them. Each is also asked with
# --speculative-topk 1, and with --speculative-topk 1 --speculative-draft-tokens K + 1: the same chain.
# (name, command, K, pinned: the speculative JSON, then speed's decode tok/s and per-user tok/s by
# concurrency, or deploy's TPOT ms, TTFT p90 ms, aggregate and per-user tok/s). The deploy figures moved once
# since, with a prompt's queue at the step budget timed at its chunk steps (core/serving.py prompt_share_s):
# vLLM TTFT p90 62.2 -> 83.0 ms, 4,201.1 -> 4,184.8 tok/s; SGLang 1,494.1 -> 1,493.2 tok/s. The SGLang
# figures moved again with the spec-v1 cycle's host time (runtimes.toml speculative_cycle_host_us, 1.107 ms
# a cycle, sgl-project/sglang PR #11398): speed 383.1 -> 323.3 tok/s; deploy TPOT 2.5 -> 3.0 ms, TTFT p90
# 48.0 -> 49.9 ms, 1,493.2 -> 1,263.3 tok/s
CHAINS = [
    ("speed vllm", ("speed", "llama-3.1-8b", "--gpu", "H100 SXM", "--runtime", "vllm", "--speculative",
                    "eagle3"), 7,
     ({"method": "eagle3", "tokens": 7, "acceptance": 0.3614, "tokens_per_step": 3.53}, 286.1,
      [286.06, 221.74, 181.03])),
    # SGLang 0.5.9 (spec v1; the current 0.5.23 drafts on spec v2: tests/test_speculative_sglang.py)
    ("speed sglang", ("speed", "qwen3-8b", "--quant", "fp8", "--gpu", "H100 SXM", "--runtime", "sglang@0.5.9",
                      "--speculative", "eagle3", "--num-speculative-tokens", "2"), 2,
     ({"method": "eagle3", "tokens": 2, "acceptance": 0.6476, "tokens_per_step": 2.295}, 323.3,
      [323.33, 275.35, 212.32, 145.65, 135.05])),
    ("deploy vllm", ("deploy", "llama-3.1-8b", "--users", "16", "--gpu", "H100 SXM", "--runtime", "vllm",
                     "--tp", "1", "--speculative", "eagle3"), 7,
     ({"method": "eagle3", "tokens": 7, "acceptance": 0.3614, "tokens_per_step": 3.53}, 3.6, 83.0, 4184.8,
      277.09)),
    ("deploy sglang", ("deploy", "qwen3-8b", "--quant", "fp8", "--users", "4", "--gpu", "H100 SXM",
                       "--runtime", "sglang@0.5.9", "--tp", "1", "--speculative", "eagle3",
                       "--num-speculative-tokens", "2"), 2,
     ({"method": "eagle3", "tokens": 2, "acceptance": 0.6476, "tokens_per_step": 2.295}, 3.0, 49.9, 1263.3,
      332.39)),
]


def _chain_figures(out: dict) -> tuple:
    if "rows" in out:
        return (out["speculative"], out["decode_tokens_per_s"],
                [r["per_user_tokens_per_s"] for r in out["rows"]])
    b = out["best"] or out["closest"]
    return (b["speculative"], b["tpot_ms"], b["ttft_ms"], b["aggregate_tokens_per_s"],
            b["per_user_tokens_per_s"])


@pytest.mark.parametrize("name,args,k,pinned", CHAINS, ids=[c[0] for c in CHAINS])
def test_chain_answers_are_pinned_and_top_k_1_is_the_chain(run_json, name: str, args: tuple, k: int,
                                                           pinned: tuple) -> None:
    """Before, --speculative-topk 1 (the chain) counted as a tree: speed on vLLM refused it ("vLLM drafts a
    chain of K tokens, not a tree") and a pinned vLLM deploy dropped the drafter; --speculative-draft-tokens
    K + 1 alone did the same. Top-k 1 with K + 1 verified is settled as the chain first, on every runtime."""
    plain = run_json(*args)
    assert _chain_figures(plain) == pinned
    for extra in (("--speculative-topk", "1"),
                  ("--speculative-topk", "1", "--speculative-draft-tokens", str(k + 1)),
                  ("--speculative-draft-tokens", str(k + 1))):
        out = run_json(*args, *extra)
        assert _chain_figures(out) == pinned, extra
        if "best" in out:
            shown, asked = out["best"] or out["closest"], plain["best"] or plain["closest"]
            assert shown["command"] == asked["command"]


# a tree no runtime can draft: refused before any runtime is weighed, by the search and by each pin
BAD_TREES = [
    (("--speculative", "ngram", "--speculative-topk", "2", "--speculative-draft-tokens", "3"),
     "drafts no tree"),
    (("--speculative", "eagle3", "--num-speculative-tokens", "1", "--speculative-topk", "4",
      "--speculative-draft-tokens", "200"), "has 5 nodes to verify"),
    (("--speculative", "eagle3", "--speculative-topk", "4"), "needs --speculative-draft-tokens"),
    (("--speculative", "medusa"), "unknown --speculative 'medusa'"),
    (("--speculative-topk", "2"), "go with --speculative"),
]


@pytest.mark.parametrize("pin", [(), ("--runtime", "vllm"), ("--runtime", "vllm", "--tp", "1"),
                                 ("--runtime", "sglang", "--tp", "1")], ids=["search", "vllm", "vllm pinned",
                                                                             "sglang pinned"])
@pytest.mark.parametrize("flags,message", BAD_TREES, ids=[" ".join(b[0]) for b in BAD_TREES])
def test_a_bad_tree_is_one_line_in_deploy(run_cli, flags: tuple, message: str, pin: tuple) -> None:
    """Before, an unpinned deploy answered with vLLM without drafting and a note "left out: sglang bf16: ..."
    (n-gram at top-k 2, or a tree of 200 verified tokens where 5 is the most), and --runtime vllm took the
    impossible tree silently: the rules of a tree hold whatever the runtime (services/speculative.py
    check)."""
    code, out, err = run_cli("deploy", "llama-3.1-8b", "--users", "16", "--gpu", "H100 SXM", *pin, *flags)
    assert code == 2 and not out
    assert err.startswith("Error: ") and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_top_k_1_with_other_verified_tokens_is_the_chain_sglang_runs(run_cli, run_json) -> None:
    """SGLang resets --speculative-num-draft-tokens to --speculative-num-steps + 1 where top-k is 1, with a
    warning (server_args.py _handle_speculative_decoding, sglang 0.5.3.post3 line 1259): GPUStack's line 503
    ran --speculative-num-steps 2 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4, a chain of 3
    verified. cardfit answers that chain with a note, where it refused before."""
    args = CHAINS[1][1]
    got = run_json(*args, "--speculative-topk", "1", "--speculative-draft-tokens", "4")
    assert _chain_figures(got) == CHAINS[1][3]
    assert any("SGLang resets --speculative-num-draft-tokens" in n and "K + 1 = 3" in n for n in got["notes"])
    deploy = run_json(*CHAINS[3][1], "--speculative-topk", "1", "--speculative-draft-tokens", "4")
    assert _chain_figures(deploy) == CHAINS[3][3]
    assert "--speculative-eagle-topk 1 --speculative-num-draft-tokens 3" in deploy["best"]["command"]
    assert any("SGLang resets" in n for n in deploy["notes"])
    code, out, _ = run_cli("speed", *args[1:], "--speculative-topk", "1", "--speculative-draft-tokens", "4")
    assert code == 0 and "SGLang resets" in " ".join(out.split())


def test_the_tree_is_named_in_the_text(run_cli) -> None:
    """The deploy summary line and its note named K alone, a tree's top-k and verified tokens left out: a
    tree now reads as its shape (a chain as before, pinned above)."""
    code, out, err = run_cli(*PINNED, "--users", "4", "--speculative", "eagle3", "--num-speculative-tokens",
                             "4", "--speculative-topk", "4", "--speculative-draft-tokens", "16")
    assert code == 0, err
    text = " ".join(out.split())
    assert "speculative decoding: eagle3, a tree of 4 draft steps at top-4, 16 tokens verified a step, at " \
           "acceptance" in text
    assert "speculative decoding (eagle3, a tree of 4 draft steps at top-4, 16 tokens verified a step, at " \
           "acceptance" in " ".join(err.split()) + text

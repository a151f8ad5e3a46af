"""Small things the text output got wrong (issue 25, item 9): ranges that say nothing, singular counts, a
validate table cut when redirected, an unknown runtime filter answered with an empty table, a --kv-dtype that
one searched runtime lacks, and money rounded one way on the CLI and another on the page."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cardfit.cli.plan_cmd import _likely
from cardfit.units import fmt_num


@pytest.mark.parametrize(("rng", "fmt", "text"), [
    ((33.2, 45.4), "{:,.0f}", " (likely 33–45)"),
    ((1.6, 2.4), "{:,.0f}", ""),  # 'likely 2–2' says nothing
    ((2.0, 2.0), "{:,.0f}", ""),
    ((3.361, 4.6), "${:,.2f}", " (likely $3.36–4.60)"),
    ((3.361, 3.364), "${:,.2f}", ""),
    (None, "{:,.0f}", ""),
])
def test_a_likely_range_is_shown_only_when_its_ends_differ(rng, fmt, text):
    assert _likely(rng, fmt) == text


@pytest.mark.parametrize(("x", "digits", "text"), [
    (190.5, 0, "191"),  # Python's format gives '190' (half to even); the page's Intl.NumberFormat '191'
    (2462.5, 0, "2,463"),
    (0.125, 2, "0.13"),  # exactly representable: half away from zero
    (2.675, 2, "2.67"),  # the double is 2.67499999…: both round down
    (38.25, 1, "38.3"),
    (1234.4, 0, "1,234"),
])
def test_money_rounds_as_the_page_does(x, digits, text):
    assert fmt_num(x, digits) == text


@given(x=st.floats(0, 1e9, allow_nan=False), digits=st.integers(0, 3))
def test_fmt_num_is_the_exact_value_rounded_half_away_from_zero(x, digits):
    got = Decimal(fmt_num(x, digits).replace(",", ""))
    exact = Decimal(x)
    assert abs(got - exact) <= Decimal(1).scaleb(-digits) / 2
    assert got == exact.quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    # never further from Python's own rounding than one unit of the last digit
    assert abs(got - Decimal(f"{x:.{digits}f}")) <= Decimal(1).scaleb(-digits)


def test_one_sequence_is_singular(run_cli):
    args = ("meta-llama/Llama-3.3-70B-Instruct", "--gpu", "H100 SXM", "--quant", "fp8")
    code, out, err = run_cli("max-sequences", *args, "--gpus", "2", "--context", "131072")
    assert code == 0, err
    assert "up to 1 concurrent sequence of 131,072 tokens" in out
    code, out, err = run_cli("speed", *args)
    assert code == 0, err
    assert "KV cache room: 1 sequence of 131,072 tokens" in out


def test_redirected_validate_keeps_every_column_whole(run_cli):
    code, out, err = run_cli("validate", "--kind", "aggregate_decode", env={"COLUMNS": "80"})
    assert code == 0, err
    assert "…" not in out  # record ids run past 60 characters: not cut to fit 80 columns
    assert "llamacpp-spark-qwen25-7b-q80-pp512-b4" in out and "aggregate_decode" in out


@pytest.mark.parametrize(("runtime", "message"), [
    ("vlm", "no records measured on runtime 'vlm'; did you mean vllm?"),
    ("nonsense-engine", "no records measured on runtime 'nonsense-engine'"),
])
def test_validate_rejects_an_unknown_runtime(run_cli, runtime, message):
    code, out, err = run_cli("validate", "--runtime", runtime)
    assert (code, out) == (2, "")
    assert err.startswith(f"Error: {message}") and "runtimes with records:" in err and err.count("\n") == 1


def test_validate_runtime_names_match_loosely(run_json):
    assert run_json("validate", "--runtime", "llama.cpp", "--kind", "decode")["kinds"]["decode"]["n"] > 0


@pytest.mark.parametrize("model", ["llama3.1:8b", "meta-llama/Llama-3.1-8B-Instruct"])
def test_deploy_kv_dtype_leaves_out_the_runtimes_without_it(run_json, run_cli, model):
    """Ollama has no bf16 KV cache: a deploy search that includes it still answers, on the others."""
    r = run_json("deploy", model, "--users", "4", "--kv-dtype", "bf16")
    assert r["best"]["kv_dtype"] == "bf16" and r["best"]["runtime"] != "ollama"
    code, _, err = run_cli("deploy", model, "--users", "4", "--kv-dtype", "bf16", "--runtime", "ollama")
    assert code == 2 and "Ollama has no 'bf16' KV cache" in err  # asked for by name: still an error


@pytest.mark.parametrize("model", ["gemma3:27b", "gpt-oss:20b", "llama3.1:8b"])
def test_one_stream_has_one_speed_in_plan_speed_and_cost(run_json, model):
    """Gemma 3 and gpt-oss on Ollama read llama.cpp's sliding-window ring (window + ubatch cells): plan's
    decode line read the window alone, 39.8 tok/s against the 39.4 of its cost line and `cardfit speed`."""
    plan = run_json("plan", model, "--gpu", "RTX 4090")
    speed = run_json("speed", model, "--gpu", "RTX 4090", "--concurrency", "1")
    decode = plan["speed"]["decode_tokens_per_s"]
    assert decode == plan["cost"]["cards"][0]["tokens_per_s"] == speed["decode_tokens_per_s"]
    assert decode == pytest.approx(speed["rows"][0]["aggregate_tokens_per_s"], abs=0.05)


def test_tables_and_deploy_print_dollars_as_the_page(run_json, run_cli):
    """fmt_usd (the plan and gpus tables) and deploy's headline round as the page's usd()/num() do."""
    from cardfit.units import fmt_usd

    assert (fmt_usd(190.5), fmt_usd(None), fmt_usd(0.125, 2)) == ("$191", "—", "$0.13")
    args = ("deploy", "meta-llama/Llama-3.1-8B-Instruct", "--users", "8")
    r = run_json(*args)
    code, out, _ = run_cli(*args, env={"COLUMNS": "400"})
    b = r["best"]
    assert code == 0 and f"${fmt_num(b['monthly_usd'])}/month" in out
    assert f"${fmt_num(b['cost_per_million_usd'], 3)} per M output tokens" in out

"""The whole bill (issue 28): API prices with input, output and cached-input rates; buying a card beside
renting it and paying an API; a day of traffic priced hour by hour. Each figure is recomputed here by hand
from the inputs the command prints."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cardfit.catalog.apis import apis
from cardfit.core import cost
from cardfit.errors import CardfitError
from cardfit.services.breakeven import BreakevenInput, breakeven_report

# --- API prices: input, output, cached input -------------------------------------------------------------


def test_apis_json_rows_carry_the_three_rates_a_date_and_a_source(run_json):
    rows = run_json("apis")["apis"]
    for r in rows:
        assert {"input_usd_per_m", "output_usd_per_m", "cached_input_usd_per_m", "date", "source"} <= r.keys()
        assert r["date"] and r["source"], r["id"]  # every row dated and sourced
    by_id = {r["id"]: r for r in rows}
    # Anthropic's page: Haiku 4.5 $1 input, $0.10 cache hits, $5 output per MTok
    assert (by_id["claude-haiku-4-5"]["input_usd_per_m"], by_id["claude-haiku-4-5"]["cached_input_usd_per_m"],
            by_id["claude-haiku-4-5"]["output_usd_per_m"]) == (1.0, 0.1, 5.0)
    assert by_id["frontier"]["cached_input_usd_per_m"] is None  # the guide's tiers list no cached rate


@pytest.mark.parametrize(("api", "cached_fraction", "expected"), [
    # GPT-5.4: $2.50 in, $0.25 cached, $15 out; 3 prompt tokens per output token
    ("gpt-5.4", 0.0, 15 + 3 * 2.50),
    ("gpt-5.4", 0.5, 15 + 3 * (0.5 * 2.50 + 0.5 * 0.25)),
    ("gpt-5.4", 1.0, 15 + 3 * 0.25),
    # the frontier tier lists no cached rate: its prompt tokens stay at the input price however cached
    ("frontier", 0.8, 15 + 3 * 3.00),
    # DeepSeek V4 Flash: $0.14 in, $0.0028 cached, $0.28 out
    ("deepseek-v4-flash", 0.9, 0.28 + 3 * (0.1 * 0.14 + 0.9 * 0.0028)),
])
def test_breakeven_blends_the_cached_share_of_the_prompt(api, cached_fraction, expected):
    r = breakeven_report(BreakevenInput(hourly=0.5, tokens_per_s=400, api=(api,), input_per_output=3,
                                        cached_fraction=cached_fraction))
    row = r.apis[0]
    assert row.price_per_million_usd == pytest.approx(expected, abs=1e-4)
    assert row.breakeven_millions_per_month == pytest.approx(r.monthly_usd / expected, abs=1e-3)


@given(out=st.floats(0.01, 100), inp=st.floats(0, 50), share=st.floats(0, 1), f1=st.floats(0, 1),
       f2=st.floats(0, 1), ratio=st.floats(0, 20))
def test_more_cache_hits_never_raise_the_blended_price(out, inp, share, f1, f2, ratio):
    cached = inp * share  # a cached rate is at most the input rate
    lo, hi = sorted((f1, f2))
    assert (cost.api_price_per_output_million(out, inp, ratio, hi, cached)
            <= cost.api_price_per_output_million(out, inp, ratio, lo, cached) + 1e-9)


def test_cached_fraction_outside_0_1_is_a_one_line_error(run_cli):
    code, out, err = run_cli("breakeven", "--hourly", "0.5", "--tokens-per-s", "400",
                             "--cached-fraction", "1.5")
    assert code == 2 and out == "" and err.startswith("Error:") and len(err.strip().splitlines()) == 1


def test_a_user_row_with_a_negative_cached_rate_is_refused(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text('[[api]]\nid = "x"\nname = "X"\noutput_usd_per_m = 1.0\ncached_input_usd_per_m = -1\n')
    with pytest.raises(CardfitError, match="cached_input_usd_per_m"):
        apis((str(f),))

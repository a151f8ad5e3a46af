"""Break-even arithmetic. The break-even guide's worked example must come out exactly, to the
guide's rounding."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cardfit.catalog.loader import builtin
from cardfit.core import cost
from cardfit.errors import CatalogError, InputError, UnknownNameError
from cardfit.services.breakeven import BreakevenInput
from cardfit.services.breakeven import breakeven_report as _typed

# the break-even guide's inputs and its printed results, kept as data
GUIDE = builtin("apis.toml")["breakeven_example"]


def breakeven_report(inp: BreakevenInput) -> dict:
    """The --json data of `cardfit breakeven` (the typed result's to_json)."""
    return _typed(inp).to_json()


@pytest.fixture(scope="module")
def guide_report() -> dict:
    # the guide prices output tokens only: --input-per-output 0
    return breakeven_report(BreakevenInput(hourly=GUIDE["hourly_usd"],
                                           tokens_per_s=GUIDE["tokens_per_second"],
                                           hours_per_month=GUIDE["hours_per_month"], input_per_output=0))


def test_breakeven_guide_rent_and_capacity(guide_report):
    # $0.50/h × 730 h = $365; 400 tok/s × 3600 × 730 = 1,051.2 M (the guide prints 1,051)
    assert guide_report["monthly_usd"] == GUIDE["monthly_usd"] == 365
    assert round(guide_report["capacity_millions_per_month"]) == GUIDE["capacity_millions_per_month"] == 1051
    assert guide_report["capacity_millions_per_month"] == pytest.approx(1051.2)


@pytest.mark.parametrize("row", GUIDE["breakeven"], ids=lambda r: r["tier"])
def test_breakeven_guide_breakeven_per_tier(guide_report, row):
    api = next(a for a in guide_report["apis"] if a["id"] == row["tier"])
    be = api["breakeven_millions_per_month"]
    # the guide prints whole millions above 100 and one decimal below: 1,825 / 73 / 24.3
    assert (round(be) if be >= 100 else round(be, 1)) == row["breakeven_millions"]
    duty_pct = api["required_duty"] * 100
    assert (round(duty_pct) if duty_pct >= 100 else round(duty_pct, 1)) == row["required_duty_pct"]
    assert api["breaks_even"] is not row["never"]
    assert api["crossing"] == {"millions_per_month": be, "usd": 365.0}


@pytest.mark.parametrize("row", GUIDE["cost_per_million_by_duty"], ids=lambda r: f"{r['duty_pct']}%")
def test_breakeven_guide_cost_per_million_by_duty(guide_report, row):
    by = {r["duty"]: r["self_host_usd_per_million"] for r in guide_report["by_duty"]}
    assert round(by[row["duty_pct"] / 100], 2) == row["self_host_usd"]
    assert round(cost.cost_per_million(0.5, 400, row["duty_pct"] / 100), 2) == row["self_host_usd"]


@pytest.mark.parametrize("row", GUIDE["monthly_bill"], ids=lambda r: f"{r['output_tokens_millions']}M")
def test_breakeven_guide_monthly_bill_table(guide_report, row):
    got = next(
        r for r in guide_report["by_volume"] if r["output_tokens_millions"] == row["output_tokens_millions"]
    )
    assert got["rent_usd"] == row["gpu_vps_usd"]
    assert got["api_usd"] == {"open-8b": row["open_api_usd"], "small-commercial": row["small_api_usd"],
                              "frontier": row["frontier_api_usd"]}


def test_breakeven_guide_text_claims(guide_report):
    # "1000 M output tokens needs the card busy 95% of the month"
    row = next(r for r in guide_report["by_volume"] if r["output_tokens_millions"] == 1000)
    assert round(row["required_duty"], 2) == 0.95 and row["within_capacity"]
    # "at 25 M the frontier bill is $375, less than ten dollars from the rent": the arithmetic says exactly
    # $10 ($375 - $365), so the break-even guide's "less than" is loose; cardfit computes, it does not copy
    row25 = next(r for r in guide_report["by_volume"] if r["output_tokens_millions"] == 25)
    assert row25["api_usd"]["frontier"] - row25["rent_usd"] == 10
    # "2 hours a day is 8.3% duty"
    assert round(2 / 24 * 100, 1) == GUIDE["duty_examples"][0]["duty_pct"]


def test_monthly_input_is_hourly_times_month():
    a = breakeven_report(BreakevenInput(monthly=365, hours_per_month=730, tokens_per_s=400))
    assert a["hourly_usd"] == 0.5 and a["cost_per_million_usd"] == pytest.approx(0.3472, abs=1e-4)
    b = breakeven_report(BreakevenInput(monthly=360, tokens_per_s=400))  # the default month: 30 days, 720 h
    assert b["hours_per_month"] == 720
    assert b["hourly_usd"] == 0.5 and b["capacity_millions_per_month"] == pytest.approx(1036.8)


def test_one_month_length_everywhere(run_json):
    """plan's cost line, breakeven with a given monthly rent, breakeven priced from the catalog and the GPU
    catalog's $/h all divide by the same month (a 30-day month; the break-even page's 730 h is a flag)."""
    from cardfit.catalog.gpus import default_gpus

    plan = run_json("plan", "llama3.1:8b", "--gpu", "RTX 4090")
    card = plan["cost"]["cards"][0]
    given = breakeven_report(BreakevenInput(monthly=card["monthly_usd"], tokens_per_s=card["tokens_per_s"]))
    catalog = breakeven_report(BreakevenInput(gpu="RTX 4090", tokens_per_s=card["tokens_per_s"]))
    assert plan["cost"]["hours_per_month"] == given["hours_per_month"] == catalog["hours_per_month"] \
        == cost.HOURS_PER_MONTH == 720
    assert given["hourly_usd"] == catalog["hourly_usd"] == card["hourly_usd"] \
        == round(default_gpus().get("RTX 4090").monthly_usd / cost.HOURS_PER_MONTH, 4)
    assert given["capacity_millions_per_month"] == catalog["capacity_millions_per_month"]


def test_duty_sets_cost_and_volume():
    r = breakeven_report(BreakevenInput(hourly=0.5, tokens_per_s=400, duty=0.1, hours_per_month=730))
    assert round(r["cost_per_million_usd"], 2) == 3.47
    assert r["volume_at_duty_millions_per_month"] == pytest.approx(105.12)
    assert r["hidden_costs"]["idle_hours"] == pytest.approx(657.0)  # 90 % of 730 h paid for nothing
    assert [a["cheaper_at_duty"] for a in r["apis"]] == ["api", "rent", "rent"]


def test_api_input_tokens_raise_the_api_side():
    # 3 prompt tokens per output token at $1/M input: a $5 output price becomes $8 per output million
    r = breakeven_report(BreakevenInput(hourly=0.5, tokens_per_s=400, api_price=(5.0,), api_input_price=1.0,
                                        input_per_output=3, hours_per_month=730))
    assert r["apis"][0]["price_per_million_usd"] == 8.0
    assert r["apis"][0]["breakeven_millions_per_month"] == pytest.approx(365 / 8, abs=1e-3)
    # without a prefill rate the card side is unchanged (the measured tokens/s already includes prefill)
    assert r["throughput"]["tokens_per_s"] == 400


def test_prefill_time_lowers_card_throughput():
    # 1/400 s per output token + 3 prompt tokens at 4,000 tok/s = 0.0025 + 0.00075 s → 307.7 tok/s
    assert cost.effective_tokens_per_s(400, input_per_output=3, prefill_tokens_per_s=4000) == pytest.approx(
        1 / 0.00325)


def test_retry_multiplier_triples_cost_per_useful_token():
    r = breakeven_report(BreakevenInput(hourly=0.5, tokens_per_s=400, retry_multiplier=3,
                                        hours_per_month=730))
    assert r["cost_per_million_usd"] == pytest.approx(3 * 0.34722, abs=1e-3)
    assert r["capacity_millions_per_month"] == pytest.approx(1051.2 / 3, abs=1e-2)


def test_hidden_costs_add_to_the_month():
    r = breakeven_report(BreakevenInput(hourly=0.5, tokens_per_s=400, storage_gb=100,
                                        storage_usd_per_gb_month=0.1, cold_starts_per_month=60,
                                        cold_start_s=30, extra_monthly_usd=3.6, hours_per_month=730))
    h = r["hidden_costs"]
    assert h["storage_usd"] == 10.0 and h["cold_start_hours"] == 0.5 and h["cold_start_usd"] == 0.25
    assert r["monthly_usd"] == pytest.approx(365 + 10 + 0.25 + 3.6)
    frontier = r["apis"][-1]  # $15 output + 3 prompt tokens at $3 (the default 3:1) = $24 per output M
    assert frontier["price_per_million_usd"] == 24.0
    assert frontier["breakeven_millions_per_month"] == pytest.approx(378.85 / 24, abs=1e-3)


def test_catalog_rent_uses_720_hours_discounts_and_pairs():
    from cardfit.catalog.gpus import default_gpus

    b200 = default_gpus().get("B200")
    assert b200.min_count == 2
    r = breakeven_report(BreakevenInput(gpu="B200", tokens_per_s=5000))
    # the GPU Rent Hub guide: 5 % from two cards
    assert r["rent"]["count"] == 2 and r["rent"]["discount_fraction"] == 0.05
    assert r["monthly_usd"] == pytest.approx(2 * b200.monthly_usd * 0.95)
    assert r["hours_per_month"] == 720
    with pytest.raises(InputError, match="sets of at least 2"):
        breakeven_report(BreakevenInput(gpu="B200", gpus=1, tokens_per_s=5000))


def test_minimum_term_is_billed():
    # two days of use on a catalog card still pays the seven-day minimum (the GPU Rent Hub guide section 08)
    r = breakeven_report(BreakevenInput(gpu="RTX 4090", tokens_per_s=100, hours_per_month=48))
    assert r["rent"]["billed_hours"] == 168
    assert r["monthly_usd"] == pytest.approx(r["hourly_usd"] * 168, rel=1e-3)


def test_named_api_from_catalog():
    r = breakeven_report(BreakevenInput(hourly=0.5, tokens_per_s=400,
                                        api=("claude-sonnet-5", "Frontier model")))
    assert [a["id"] for a in r["apis"]] == ["claude-sonnet-5", "frontier"]
    assert r["apis"][0]["date"]


@pytest.mark.parametrize("kwargs, message", [
    ({"tokens_per_s": 400}, "give the rent"),
    ({"hourly": 0.5}, "give the throughput"),
    ({"hourly": 0.5, "monthly": 365, "tokens_per_s": 400}, "not both"),
    ({"hourly": 0.5, "tokens_per_s": 400, "from_log": "x.log"}, "one source of tokens/s"),
    ({"hourly": 0.5, "tokens_per_s": 400, "api_price": (0.0,)}, "above 0"),
])
def test_input_errors(kwargs, message):
    with pytest.raises(InputError, match=message):
        breakeven_report(BreakevenInput(**kwargs))


def test_unknown_api_suggests():
    with pytest.raises(UnknownNameError, match="cardfit apis"):
        breakeven_report(BreakevenInput(hourly=0.5, tokens_per_s=400, api=("frontierr",)))


def test_user_catalog_adds_and_overrides(tmp_path):
    from cardfit.catalog.apis import load_apis

    f = tmp_path / "mine.toml"
    f.write_text('[[api]]\nid = "my-api"\nname = "My API"\noutput_usd_per_m = 2.5\ndate = "2026-11-01"\n'
                 '[[tier]]\nid = "frontier"\noverride = true\noutput_usd_per_m = 12.0\n')
    reg = load_apis((str(f),))
    assert reg.get("my api").output_usd_per_m == 2.5
    assert reg.get("frontier").output_usd_per_m == 12.0 and reg.get("frontier").name == "Frontier model"
    dup = tmp_path / "dup.toml"
    dup.write_text('[[api]]\nid = "frontier"\nname = "x"\noutput_usd_per_m = 1\n')
    with pytest.raises(CatalogError):
        load_apis((str(dup),))


def test_every_catalog_price_is_dated_and_sourced():
    from cardfit.catalog.apis import default_apis

    for a in default_apis():
        assert a.date and a.source and a.output_usd_per_m > 0, a.id


@given(hourly=st.floats(0.01, 100), tps=st.floats(1, 1e5), d1=st.floats(0.01, 1), d2=st.floats(0.01, 1))
def test_cost_falls_as_duty_rises(hourly, tps, d1, d2):
    lo, hi = sorted((d1, d2))
    assert cost.cost_per_million(hourly, tps, hi) <= cost.cost_per_million(hourly, tps, lo)


@given(hourly=st.floats(0.01, 100), tps=st.floats(1, 1e5), price=st.floats(0.01, 500),
       hours=st.floats(24, 744))
def test_required_duty_is_where_costs_meet(hourly, tps, price, hours):
    be = cost.breakeven_millions(cost.monthly_from_hourly(hourly, hours), price)
    need = cost.required_duty(be, cost.capacity_millions(tps, hours))
    # at exactly the required duty the card's cost per million equals the API price
    assert cost.cost_per_million(hourly, tps, need) == pytest.approx(price, rel=1e-9)


def test_zero_throughput_is_infinite_cost():
    assert math.isinf(cost.cost_per_million(1.0, 0, 1.0))


# (card, model, quant, --gpus): the set the speed estimate times is the set the rent pays for
@pytest.mark.parametrize("gpu, model, quant, gpus, cards", [
    # 70 GB of FP8 weights: one card at vLLM 0.33's --gpu-memory-utilization 0.92 (0.20.0 on), its KV cache
    # holding 2 typical requests (a pair at 0.9, before)
    ("H100 SXM", "meta-llama/Llama-3.3-70B-Instruct", "fp8", None, 1),
    ("H100 SXM", "meta-llama/Llama-3.3-70B-Instruct", "fp8", 2, 2),
    ("H100 SXM", "meta-llama/Llama-3.3-70B-Instruct", "fp8", 4, 4),
    ("RTX 4090", "llama3.1:8b", None, None, 1),
    ("B200", "llama3.1:8b", None, None, 2),  # B200 rents in pairs
])
def test_model_estimate_pays_for_every_card_it_times(gpu, model, quant, gpus, cards):
    from cardfit.catalog.gpus import default_gpus
    from cardfit.catalog.rental import default_rental

    r = breakeven_report(BreakevenInput(gpu=gpu, model=model, quant=quant, gpus=gpus))
    card = default_gpus().get(gpu)
    assert r["rent"]["count"] == cards
    assert f"{cards}× {card.name}" in r["notes"][0]  # the speed note names the same set
    discount = default_rental().discount(cards)
    assert r["rent"]["discount_fraction"] == discount
    assert r["monthly_usd"] == pytest.approx(card.monthly_usd * cards * (1 - discount), abs=0.01)
    # $/M at full duty = the rent of all `cards` over the tokens that set makes
    per_card_hourly = card.monthly_usd * (1 - discount) / cost.HOURS_PER_MONTH
    tps = r["throughput"]["tokens_per_s"]
    assert r["cost_per_million_full_duty_usd"] == pytest.approx(
        cards * per_card_hourly * 1e6 / (tps * 3600), rel=1e-3)


@given(cards=st.integers(1, 64), monthly=st.floats(10, 50_000), tps=st.floats(1, 1e5))
def test_cost_per_million_scales_with_the_card_count(cards, monthly, tps):
    one = cost.cost_per_million(cost.hourly_from_monthly(monthly), tps, 1.0)
    set_hourly = cost.hourly_from_monthly(cost.set_monthly_usd(monthly, cards, 0.0))
    many = cost.cost_per_million(set_hourly, tps, 1.0)
    assert many == pytest.approx(cards * one, rel=1e-9)


# (tier, output $/M, input $/M): each tier's input price is a catalogued product's with its output price
@pytest.mark.parametrize("tier, output, input_", [("open-8b", 0.20, 0.20), ("small-commercial", 5.0, 1.0),
                                                  ("frontier", 15.0, 3.0)])
def test_tiers_price_input_tokens_with_a_source(tier, output, input_):
    from cardfit.catalog.apis import default_apis

    reg = default_apis()
    a = reg.get(tier)
    assert (a.output_usd_per_m, a.input_usd_per_m) == (output, input_)
    assert "https://" in a.input_source
    # the product the input price is taken from is a catalogue row with the same prices
    named = [b for b in reg if b.kind == "api" and b.id in a.input_source]
    assert named and all((b.output_usd_per_m, b.input_usd_per_m) == (output, input_) for b in named)


@pytest.mark.parametrize("kwargs, ratio, source", [
    ({}, 3.0, "Artificial Analysis"),  # no request known: the 3:1 blend
    ({"input_per_output": 0.0}, 0.0, "--input-per-output"),
    ({"input_per_output": 10.0}, 10.0, "--input-per-output"),
])
def test_input_tokens_are_priced_by_default(kwargs, ratio, source):
    r = breakeven_report(BreakevenInput(hourly=0.5, tokens_per_s=400, **kwargs))
    t = r["throughput"]
    assert t["input_per_output"] == ratio and source in t["input_per_output_source"]
    for a in r["apis"]:
        want = a["output_usd_per_m"] + ratio * a["input_usd_per_m"]
        assert a["price_per_million_usd"] == pytest.approx(want)
    assert any(f"{ratio:g} prompt tokens billed per output token" in n for n in r["notes"]) is (ratio > 0)


@given(ratio=st.floats(0, 1000), out=st.floats(0.01, 500), inp=st.floats(0, 500))
def test_api_price_grows_with_the_input_ratio(ratio, out, inp):
    got = cost.api_price_per_output_million(out, inp, ratio)
    assert got >= out and got == pytest.approx(out + inp * ratio)


def test_model_estimate_times_a_typical_request_not_the_whole_window():
    # Llama 3.3 70B's window is 128K tokens: one such sequence per card set, "card too slow"; a typical
    # request (deploy's 1,000 + 300 tokens) leaves room on a pair for the 16 concurrent requests asked
    from cardfit.services.served import DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS

    llama = {"gpu": "H100 SXM", "model": "meta-llama/Llama-3.3-70B-Instruct", "quant": "fp8", "gpus": 2}
    r = breakeven_report(BreakevenInput(**llama))
    assert "at 16 concurrent sequences" in r["notes"][0]
    request = f"{DEFAULT_INPUT_TOKENS:,}-token prompts and {DEFAULT_OUTPUT_TOKENS:,}-token answers"
    assert request in r["notes"][1]
    assert r["throughput"]["input_per_output"] == round(DEFAULT_INPUT_TOKENS / DEFAULT_OUTPUT_TOKENS, 4)
    assert "the request timed" in r["throughput"]["input_per_output_source"]
    # --context alone asks for decoding at that context: no request, the default ratio
    d = breakeven_report(BreakevenInput(**llama, context=131072))
    assert "1 concurrent sequence " in d["notes"][0] and d["throughput"]["input_per_output"] == 3.0
    assert d["throughput"]["tokens_per_s"] < r["throughput"]["tokens_per_s"]
    # the request given is the one timed and priced
    g = breakeven_report(BreakevenInput(**llama, input_tokens=4000, output_tokens=500))
    assert "4,000-token prompts and 500-token answers (given)" in g["notes"][1]
    assert g["throughput"]["input_per_output"] == 8.0

"""`cardfit breakeven` and `cardfit apis` the way users run them: JSON keys (the stable --json interface),
errors, charts."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

LOGS = Path(__file__).parent / "fixtures" / "logs"


def test_breakeven_json_of_the_breakeven_guide(run_json):
    # the guide prices output tokens only (--input-per-output 0)
    r = run_json("breakeven", "--hourly", "0.50", "--hours-per-month", "730", "--tokens-per-s", "400",
                 "--input-per-output", "0")
    assert {"monthly_usd", "capacity_millions_per_month", "cost_per_million_usd", "apis"} <= r.keys()
    assert r["monthly_usd"] == 365 and round(r["capacity_millions_per_month"]) == 1051
    for a in r["apis"]:
        assert {"name", "price_per_million_usd", "breakeven_millions_per_month", "required_duty",
                "breaks_even"} <= a.keys()
    assert [round(a["breakeven_millions_per_month"], 1) for a in r["apis"]] == [1825.0, 73.0, 24.3]
    assert [a["breaks_even"] for a in r["apis"]] == [False, True, True]
    assert 0 <= r["apis"][1]["required_duty"] <= 1  # fractions are 0-1 floats


def test_breakeven_api_prices_and_duty(run_json):
    r = run_json("breakeven", "--monthly", "365", "--hours-per-month", "730",
                 "--tokens-per-s", "400", "--duty", "0.02",
                 "--api-price", "0.20", "--api-price", "15")
    assert round(r["cost_per_million_usd"], 2) == 17.36
    assert [a["price_per_million_usd"] for a in r["apis"]] == [0.2, 15.0]


def test_breakeven_from_log(run_json):
    r = run_json("breakeven", "--hourly", "0.50", "--hours-per-month", "730",
                 "--from-log", str(LOGS / "vllm-server/breakeven_guide_line.txt"))
    assert r["throughput"]["source"] == "log (vllm-server)" and r["throughput"]["tokens_per_s"] == 396.1
    assert r["throughput"]["log"]["concurrency"] == 16


def test_breakeven_from_speed_estimate(run_json):
    r = run_json("breakeven", "--gpu", "RTX 4090", "--model", "llama3.1:8b", "--api", "frontier")
    assert r["throughput"]["source"] == "estimate" and r["throughput"]["tokens_per_s"] > 10
    assert r["rent"]["source"].startswith("catalog: 1× RTX 4090")
    assert any(n.startswith("speed estimate for") for n in r["notes"])


def test_breakeven_text_output(run_cli):
    code, out, err = run_cli("breakeven", "--hourly", "0.50", "--hours-per-month", "730",
                             "--tokens-per-s", "400", "--input-per-output", "0")
    assert code == 0, err
    assert "prices output tokens only" in out
    assert "$365.00/month" in out and "1,051.2 M" in out
    assert "174%" in out and "6.9%" in out and "2.3%" in out and "17.36" in out


@pytest.mark.parametrize("args, message", [
    (("--tokens-per-s", "400"), "give the rent"),
    (("--hourly", "0.5"), "give the throughput"),
    (("--hourly", "-1", "--tokens-per-s", "400"), "--hourly"),
    (("--hourly", "0.5", "--tokens-per-s", "400", "--duty", "1.5"), "--duty"),
    (("--hourly", "0.5", "--tokens-per-s", "400", "--api", "frontierr"), "did you mean"),
    (("--hourly", "0.5", "--from-log", str(LOGS / "vllm-server/v0.5_2024-08_issue6689_idle.txt")), "idle"),
    (("--hourly", "0.5", "--tokens-per-s", "400", "--plot", "chart.pdf"), ".png or .svg"),
])
def test_breakeven_errors_are_one_line(run_cli, args, message):
    code, out, err = run_cli("breakeven", *args)
    assert code != 0 and out == ""
    assert err.startswith("Error: ") and message in err and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_svg_chart_has_the_crossings(run_json, tmp_path):
    svg = tmp_path / "be.svg"
    r = run_json("breakeven", "--hourly", "0.50", "--hours-per-month", "730",
                 "--tokens-per-s", "400", "--duty", "0.1", "--input-per-output", "0", "--plot", str(svg))
    assert svg.exists() and svg.stat().st_size > 10_000
    crossings = {c["api"]: c for c in r["plot"]["crossings"]}
    assert crossings["Frontier model"]["millions_per_month"] == pytest.approx(24.333, abs=1e-3)
    assert crossings["Small commercial model"]["usd"] == 365
    assert crossings["Hosted open 8B"]["breaks_even"] is False
    text = " ".join(re.findall(r"<text[^>]*>([^<]*)</text>", svg.read_text()))
    for label in ("24.3 M (2.3% duty)", "73.0 M (6.9% duty)", "1,825 M: cannot break even even at full use",
                  "rent $365/month",
                  "your duty 10%: $3.47/M"):
        assert label in text, label
    assert [round(c["duty"], 3) for c in r["plot"]["duty_crossings"]] == [0.069, 0.023]


def test_png_chart(run_json, tmp_path):
    png = tmp_path / "be.png"
    r = run_json("breakeven", "--hourly", "0.50", "--hours-per-month", "730",
                 "--tokens-per-s", "400", "--plot", str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and r["plot"]["format"] == "png"


def test_apis_listing(run_json, run_cli, tmp_path):
    rows = run_json("apis")["apis"]
    ids = [a["id"] for a in rows]
    assert ids[:3] == ["open-8b", "small-commercial", "frontier"] and len(ids) > 20
    mine = tmp_path / "prices.json"
    mine.write_text(json.dumps({"api": [{"id": "my-api", "name": "My API", "output_usd_per_m": 1.5,
                                         "date": "2026-11-01", "source": "my invoice"}]}))
    r = run_json("breakeven", "--hourly", "0.5", "--hours-per-month", "730",
                 "--tokens-per-s", "400", "--catalog", str(mine), "--api", "my-api")
    assert r["apis"][0]["breakeven_millions_per_month"] == pytest.approx(243.333, abs=1e-3)
    code, out, _ = run_cli("apis")
    assert code == 0 and "frontier" in out


def test_plan_cost_section(run_json):
    r = run_json("plan", "llama3.1:8b", "--gpu", "RTX 4090", "--duty", "0.1", "--api", "frontier")
    c = r["cost"]
    assert {"monthly_usd", "hours_per_month", "hourly_usd"} <= c.keys()  # the keys that were there stay
    assert c["duty"] == 0.1 and [a["id"] for a in c["apis"]] == ["frontier"]
    card = c["cards"][0]
    assert card["gpu"] == "RTX 4090" and card["monthly_usd"] == r["gpus"][0]["monthly_usd"]
    # $/M at 10 % duty is ten times $/M at 100 %; break-even = monthly ÷ ($15 output + 3 × $3 input)
    assert card["cost_per_million_usd"] == pytest.approx(10 * card["cost_per_million_full_duty_usd"],
                                                         rel=1e-3)
    assert c["input_per_output"] == 3.0 and "Artificial Analysis" in c["input_per_output_source"]
    assert c["apis"][0]["price_per_million_usd"] == 24.0
    assert card["breakeven"][0]["breakeven_millions_per_month"] == pytest.approx(card["monthly_usd"] / 24,
                                                                                 abs=1e-3)
    assert card["tokens_per_s"] == pytest.approx(r["gpus"][0]["decode_tokens_per_s"], abs=0.1)


def test_plan_cost_defaults_to_breakeven_guide_tiers_and_fitting_cards(run_json):
    r = run_json("plan", "llama3.1:8b")
    c = r["cost"]
    assert c["duty"] == 1.0 and [a["id"] for a in c["apis"]] == ["open-8b", "small-commercial", "frontier"]
    fitting = {g["gpu"] for g in r["gpus"] if g["verdict"] in ("fits", "tight") and g["monthly_usd"]}
    assert {x["gpu"] for x in c["cards"]} <= fitting and c["cards"]


def test_plan_and_breakeven_price_an_api_alike(run_json):
    """The same card, tokens/s and API get the same API price and break-even in plan's cost section and in
    `cardfit breakeven` (both bill the prompt tokens: the default 3:1, or the request given)."""
    for extra in ((), ("--input-tokens", "4000", "--output-tokens", "500")):
        plan = run_json("plan", "llama3.1:8b", "--gpu", "RTX 4090", "--api", "frontier", *extra)["cost"]
        card = plan["cards"][0]
        be = run_json("breakeven", "--gpu", "RTX 4090", "--tokens-per-s", str(card["tokens_per_s"]),
                      "--api", "frontier", "--input-per-output", str(plan["input_per_output"]))
        assert plan["apis"][0]["price_per_million_usd"] == be["apis"][0]["price_per_million_usd"]
        assert card["breakeven"][0]["breakeven_millions_per_month"] == pytest.approx(
            be["apis"][0]["breakeven_millions_per_month"], rel=1e-3)
    assert plan["input_per_output"] == 8.0 and "4,000 prompt / 500 answer" in plan["input_per_output_source"]

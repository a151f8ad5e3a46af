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


# --- buying the cards ------------------------------------------------------------------------------------

README_BUY = ('cardfit breakeven --gpu "RTX 4090" --tokens-per-s 400 --duty 0.5 --buy --power-usd-kwh 0.15 '
              '--pue 1 --colo-usd-kw-month 0 --api gpt-5.4-mini')


def _num(pattern: str, text: str) -> float:
    import re

    m = re.search(pattern, text)
    assert m, pattern
    return float(m.group(1).replace(",", ""))


def test_readme_buy_example_is_real_output_and_its_arithmetic_holds(run_cli):
    """The README's worked example: the block is what the CLI prints, and every figure of its buy lines is
    recomputed here from the inputs printed beside it."""
    import re
    import shlex

    from .conftest import ROOT

    text = (ROOT / "README.md").read_text()
    block = re.search(r"```text\n\$ " + re.escape(README_BUY) + r"\n(.*?)```", text, re.S)
    assert block, "README lost its buy example"
    code, out, err = run_cli(*shlex.split(README_BUY)[1:], env={"COLUMNS": "100"})
    assert code == 0, err
    assert [x.rstrip() for x in block.group(1).rstrip("\n").split("\n")] == \
        [x.rstrip() for x in out.rstrip("\n").split("\n")]
    rent = _num(r"Rent \$([\d,.]+)/month", out)
    capacity = _num(r"capacity ([\d,.]+) M", out)
    price = _num(r"price \$([\d,.]+) ÷", out)
    months = _num(r"÷ ([\d.]+) months", out)
    card_w, host_w = _num(r"\(([\d.]+) W card", out), _num(r"\+ ([\d.]+) W host", out)
    cards, busy = _num(r"host\) × (\d+) ×", out), _num(r"× (\d+)% busy", out) / 100
    pue, hours = _num(r"× PUE ([\d.]+)", out), _num(r"PUE [\d.]+ × ([\d.]+) h", out)
    kwh_price = _num(r"kWh × \$([\d.]+)/kWh", out)
    api_price = _num(r"OpenAI GPT-5.4 mini\s+([\d.]+)", out)
    # the hand computation, in the order the README explains it
    amortized = price / months
    watts = (card_w + host_w) * cards * busy
    kwh = watts * pue * hours / 1000
    power_usd = kwh * kwh_price
    monthly = amortized + power_usd
    assert (round(amortized, 2), watts, kwh, round(power_usd, 2)) == (26.65, 425.0, 306.0, 45.90)
    assert _num(r"= \$([\d.]+)/month\n  power", out) == round(amortized, 2)
    assert _num(r"busy = ([\d.]+) W", out) == watts
    assert _num(r"= ([\d.]+) kWh", out) == kwh
    assert _num(r"→ \$([\d.]+)/month", out) == pytest.approx(monthly, abs=0.005)
    assert _num(r"/month, \$([\d.]+)/M", out) == pytest.approx(monthly / (capacity * busy), abs=5e-5)
    assert _num(r"rent after ([\d.]+) months", out) == round(price / (rent - power_usd), 1)
    assert _num(r"gpt-5.4-mini after ([\d.]+) months", out) == round(
        price / (api_price * capacity * busy - power_usd), 1)


def _buy(**kw):
    return breakeven_report(BreakevenInput(buy=True, **kw))


def test_buy_json_keys_are_exactly_the_stable_ones(run_json):
    r = run_json("breakeven", "--gpu", "H100 SXM", "--tokens-per-s", "3000", "--buy")
    assert set(r["buy"]) == {"capex_usd", "monthly_usd", "power_w", "cost_per_million_usd",
                             "beats_rent_after_months", "beats_api_after_months"}
    assert "buy" not in run_json("breakeven", "--gpu", "H100 SXM", "--tokens-per-s", "3000")


@pytest.mark.parametrize(("kw", "capex", "power_w", "monthly"), [
    # H100 SXM at the snapshot's defaults: $27,500 card + $6,250 host share; (700 + 575) W at full duty;
    # 1,275 W × 1.58 × 720 h = 1,450.44 kWh × $0.1107 = $160.56; colocation 1.275 kW × $163.44 = $208.39;
    # $33,750 ÷ 60 = $562.50
    ({"gpu": "H100 SXM", "tokens_per_s": 3000}, 33_750, 1275.0,
     33_750 / 60 + 1275 * 1.58 * 720 / 1000 * 0.1107 + 1.275 * 163.44),
    # two RTX 5090s busy a quarter of the time at home, $0.30/kWh, a 36-month write-off, $20 of ops
    ({"gpu": "RTX 5090", "gpus": 2, "tokens_per_s": 900, "duty": 0.25, "power_usd_kwh": 0.30, "pue": 1.0,
      "colo_usd_kw_month": 0.0, "amortize_months": 36, "ops_usd_month": 20.0}, 3998, 500.0,
     3998 / 36 + 500 * 720 / 1000 * 0.30 + 20),
    # a card the snapshot lacks, priced by hand; its 72 W from the GPU catalog; no host watts given
    ({"gpu": "L4", "tokens_per_s": 300, "purchase_usd": 2500, "pue": 1.2,
      "colo_usd_kw_month": 100.0}, 2500, 72.0, 2500 / 60 + 72 * 1.2 * 720 / 1000 * 0.1107 + 0.072 * 100),
])
def test_buy_month_by_hand(kw, capex, power_w, monthly):
    r = _buy(**kw)
    b = r.buy
    assert b.capex_usd == capex and b.power_w == power_w
    assert b.monthly_usd == pytest.approx(monthly, abs=0.01)
    assert b.cost_per_million_usd == pytest.approx(monthly / r.volume_at_duty_millions_per_month, rel=1e-3)
    running = monthly - capex / r.buy_terms.amortize_months
    assert b.beats_rent_after_months == pytest.approx(capex / (r.monthly_usd - running), abs=0.05)


def test_buy_never_beats_a_rent_below_its_running_costs():
    r = _buy(hourly=0.01, tokens_per_s=400, purchase_usd=1000, card_w=450, power_usd_kwh=1.0, pue=1.0,
             colo_usd_kw_month=0.0)
    assert r.buy.beats_rent_after_months is None  # $7.20 of rent against $324 of power


def test_beats_api_counts_against_the_cheapest_api_compared():
    r = _buy(gpu="RTX 4090", tokens_per_s=400, api=("gpt-5.4-mini", "open-8b"), colo_usd_kw_month=0.0)
    assert r.buy_terms.api == "open-8b"
    bill = r.volume_at_duty_millions_per_month * 0.80  # $0.20 out + 3 × $0.20 in
    running = r.buy.monthly_usd - 1599 / 60
    assert r.buy.beats_api_after_months == pytest.approx(1599 / (bill - running), abs=0.05)


@given(capex=st.floats(1, 1e6), running=st.floats(0, 1e4), gain=st.floats(-1e4, 1e5))
def test_after_the_crossing_month_owning_is_cheaper(capex, running, gain):
    other = max(running + gain, 0.0)
    m = cost.months_to_overtake(capex, running, other)
    if other <= running:
        assert m == float("inf")
    elif gain >= 0.01:
        assert capex + m * running == pytest.approx(m * other, rel=1e-9)
        assert capex + (m + 1) * running < (m + 1) * other  # a month later the other option costs more


@given(rated=st.floats(1, 5000), u1=st.floats(0, 1), u2=st.floats(0, 1))
def test_board_power_grows_with_the_load(rated, u1, u2):
    lo, hi = sorted((u1, u2))
    assert cost.board_power_w(rated, lo) <= cost.board_power_w(rated, hi) <= rated


@pytest.mark.parametrize(("args", "message"), [
    (("--hourly", "1", "--tokens-per-s", "400", "--buy"), "--buy needs the card"),
    (("--gpu", "L4", "--tokens-per-s", "400", "--buy"), "no price for L4"),
    (("--gpu", "Apple M1 16GB", "--hourly", "1", "--tokens-per-s", "40", "--buy", "--purchase-usd", "900"),
     "no board power"),
    (("--gpu", "RTX 4090", "--tokens-per-s", "400", "--pue", "1.2"), "--pue prices buying"),
    (("--gpu", "RTX 4090", "--tokens-per-s", "400", "--buy", "--pue", "0.9"), "--pue"),
    (("--gpu", "RTX 4090", "--tokens-per-s", "400", "--buy", "--amortize-months", "0"), "--amortize-months"),
])
def test_buy_input_errors_are_one_line(run_cli, args, message):
    code, out, err = run_cli("breakeven", *args)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith("Error:") and message in err


def test_purchase_snapshot_rows_are_dated_sourced_and_known_cards():
    from cardfit.catalog.gpus import default_gpus
    from cardfit.catalog.purchase import default_purchases

    cat = default_purchases()
    d = cat.defaults
    assert d.date and all((d.pue_source, d.colo_source, d.power_usd_kwh_source, d.amortize_source))
    for p in cat.rows:
        assert p.date and "http" in p.source and p.card_usd > 0
        assert default_gpus().get(p.gpu).tdp_w  # a card the GPU catalog knows, with its board power
        assert p.host_source or (p.host_usd == 0 and p.host_w == 0)


# --- a day of traffic -------------------------------------------------------------------------------------

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def _curve_file(tmp_path, rates):
    f = tmp_path / "traffic.csv"
    f.write_text("hour,requests_per_s\n" + "".join(f"{h},{r}\n" for h, r in enumerate(rates)))
    return str(f)


def _traffic(tmp_path, rates, **kw):
    return breakeven_report(BreakevenInput(model=LLAMA, gpu="RTX 4090", runtime="vllm",
                                           traffic=_curve_file(tmp_path, rates), **kw)).traffic


def test_step_curve_replicas_are_deploys_answer_at_each_level(tmp_path):
    """Three steps of eight hours: at each level the replicas are those `cardfit deploy --requests-per-s
    LEVEL` picks for the same card and runtime (one replica's shape is the same at every level)."""
    from cardfit.services.deploy import DeployInput, deploy_report

    levels = [0.5, 12.0, 30.0]
    t = _traffic(tmp_path, [levels[h // 8] for h in range(24)], min_replicas=0)
    assert [h.requests_per_s for h in t.hours] == [levels[h // 8] for h in range(24)]
    for level in levels:
        best = deploy_report(DeployInput(model=LLAMA, gpu=("RTX 4090",), runtime="vllm",
                                         requests_per_s=level)).best
        assert (best.count // best.replicas, best.tp, best.quant) == (t.cards_per_replica, t.tp, t.quant)
        assert {h.replicas for h in t.hours if h.requests_per_s == level} == {best.replicas}, level
    assert len({h.replicas for h in t.hours}) == 3  # the three steps need three different fleets


def test_traffic_month_by_hand(tmp_path):
    """An RTX 4090 rents at $390 a month (720 h); the curve's hours priced one by one, the replicas started
    for the next hour paid `lag` minutes early, the day repeated 30 times."""
    rates = [0.0] * 6 + [30.0] * 12 + [12.0] * 6
    t = _traffic(tmp_path, rates, min_replicas=1, scale_up_lag_min=6.0, api=("gpt-5.4-mini",))
    need = [h.replicas for h in t.hours]
    assert need[0] == 1 and max(need) == t.peak_replicas  # the floor holds in the empty hours
    def fleet(k):  # $390 a card, less the volume discount from 2 cards (5 %), 4 (8 %), 8 (10 %)
        return 390.0 * k * (1 - (0.10 if k >= 8 else 0.08 if k >= 4 else 0.05 if k >= 2 else 0.0))

    for h in range(24):
        up = need[(h + 1) % 24]
        early = max(up - need[h], 0) * 0.1 * fleet(up) / up
        assert t.hours[h].usd == pytest.approx((fleet(need[h]) + early) / 720, abs=1e-4)
    assert t.monthly_usd.autoscaled == pytest.approx(30 * sum(h.usd for h in t.hours), abs=0.05)
    assert t.monthly_usd.always_on == pytest.approx(fleet(t.peak_replicas), abs=0.01)
    assert t.monthly_usd.autoscaled < t.monthly_usd.always_on
    # the API bills every request: 1,000 prompt tokens ($0.75/M) + 300 answer tokens ($4.50/M)
    per_request = (1000 * 0.75 + 300 * 4.50) / 1e6
    assert t.monthly_usd.api == pytest.approx(sum(rates) * 3600 * 30 * per_request, abs=0.05)
    assert t.gpu_hours_per_day == sum(need)


@pytest.mark.parametrize(("shape", "busy"), [
    ("business-hours", set(range(9, 17))),
    ("batch-night", set(range(0, 6))),
    ("global", set(range(1, 22))),
])
def test_named_shapes_put_the_peak_where_their_names_say(shape, busy):
    from cardfit.services.traffic import curve

    rates = curve(shape, 10.0)
    assert len(rates) == 24 and max(rates) == 10.0
    assert {h for h, r in enumerate(rates) if r > 0} == busy


@pytest.mark.parametrize(("text", "message"), [
    ("", "has no rows"),
    ("hour,requests_per_s\n0,1\n0,2\n", "hour 0 is given twice"),
    ("0,1\n2,1\n", "hour 1 is missing"),
    ("0,1,2\n", "expected 2 fields"),
    ("0,lots\n", "is not an hour and a rate"),
    ("0,nan\n", "outside 0..1,000,000"),
    ("0,-1\n", "outside 0..1,000,000"),
    ("168,1\n", "outside 0..167"),
    ("\xff\xfe", "is not UTF-8"),
])
def test_bad_traffic_files_are_one_line_errors(tmp_path, run_cli, text, message):
    f = tmp_path / "t.csv"
    f.write_bytes(text.encode("latin-1"))
    code, out, err = run_cli("breakeven", "--model", LLAMA, "--gpu", "RTX 4090", "--traffic", str(f))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith("Error:") and message in err


def test_traffic_file_size_is_bounded(tmp_path):
    from cardfit.services.traffic import MAX_TRAFFIC_BYTES, curve

    f = tmp_path / "big.csv"
    f.write_text("0,1\n" + "#" * MAX_TRAFFIC_BYTES)
    with pytest.raises(CardfitError, match="limit"):
        curve(str(f), None)


@pytest.mark.parametrize(("args", "message"), [
    (("--hourly", "1", "--tokens-per-s", "400", "--traffic", "global"), "--traffic needs --model"),
    (("--model", LLAMA, "--gpu", "RTX 4090", "--traffic", "global"), "needs its peak"),
    (("--model", LLAMA, "--gpu", "RTX 4090", "--traffic", "lunchtime"), "a CSV file or one of"),
    (("--hourly", "1", "--tokens-per-s", "400", "--min-replicas", "2"), "go with --traffic"),
])
def test_traffic_input_errors(run_cli, args, message):
    code, out, err = run_cli("breakeven", *args)
    assert code == 2 and out == "" and err.startswith("Error:") and message in err


def test_traffic_json_keys(run_json):
    r = run_json("breakeven", "--model", LLAMA, "--gpu", "RTX 4090", "--runtime", "vllm", "--traffic",
                 "batch-night", "--peak-requests-per-s", "20")
    t = r["traffic"]
    assert set(t["monthly_usd"]) == {"autoscaled", "always_on", "buy", "api"}
    assert len(t["hours"]) == 24 and set(t["hours"][0]) == {"hour", "requests_per_s", "replicas", "usd"}


def test_readme_traffic_example_is_real_output(run_cli):
    import re
    import shlex

    from .conftest import ROOT

    cmd = (f'cardfit breakeven --model {LLAMA} --gpu "RTX 4090" --runtime vllm --traffic business-hours '
           '--peak-requests-per-s 30 --api gpt-5.4-mini')
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```text\n\$ " + re.escape(cmd) + r"\n(.*?)```", text, re.S)
    assert block, "README lost its traffic example"
    code, out, err = run_cli(*shlex.split(cmd)[1:], env={"COLUMNS": "100"})
    assert code == 0, err
    assert [x.rstrip() for x in block.group(1).rstrip("\n").split("\n")] == \
        [x.rstrip() for x in out.rstrip("\n").split("\n")]


# --- price snapshots ---------------------------------------------------------------------------------------

SNAPSHOT = """[[api]]
id = "gpt-5.4-mini"
override = true
output_usd_per_m = 4.00
date = "2026-12-01"
source = "https://developers.openai.com/api/docs/pricing (read 2026-12-01)"

[[api]]
id = "my-contract"
name = "Our contract"
output_usd_per_m = 1.10
input_usd_per_m = 0.30
cached_input_usd_per_m = 0.03
date = "2026-11-20"
source = "invoice 2026-11"
"""


def test_prices_update_installs_a_snapshot_every_command_reads(run_cli, run_json, tmp_path):
    f = tmp_path / "newer.toml"
    f.write_text(SNAPSHOT)
    try:
        r = run_json("prices", "--update", str(f))
        assert r["installed"]["date"] == "2026-12-01" and r["installed"]["rows"] == 2
        names = {s["name"]: s for s in r["snapshots"]}
        assert names["API prices installed"]["date"] == "2026-12-01"
        rows = {a["id"]: a for a in run_json("apis")["apis"]}
        assert rows["gpt-5.4-mini"]["output_usd_per_m"] == 4.0  # the override, the rest kept
        assert rows["gpt-5.4-mini"]["input_usd_per_m"] == 0.75 and rows["my-contract"]["date"] == "2026-11-20"
        be = run_json("breakeven", "--hourly", "0.5", "--tokens-per-s", "400", "--api", "my-contract",
                      "--input-per-output", "0")
        assert be["apis"][0]["price_per_million_usd"] == 1.1
        assert any("2026-11-20" in n and "prices --update" in n for n in be["notes"])  # names its date
        code, out, _ = run_cli("prices")
        assert code == 0 and "API prices installed: 2 rows dated 2026-11-20 to 2026-12-01" in out
    finally:
        run_json("prices", "--remove")
    assert "my-contract" not in {a["id"] for a in run_json("apis")["apis"]}


@pytest.mark.parametrize(("text", "message"), [
    ('[[api]]\nid = "x"\nname = "X"\noutput_usd_per_m = 1.0\nsource = "s"\n',
     "needs its `date` and `source`"),
    ('[[gpu]]\nid = "x"\n', "[[api]] and [[tier]] rows only"),
    ('[[api]]\nid = "gpt-5.4"\nname = "dup"\noutput_usd_per_m = 1\ndate = "2026"\nsource = "s"\n',
     "gpt-5.4"),  # an id the catalog has, without override = true
    ('[[api]]\nid = "x"\nname = "X"\noutput_usd_per_m = 0\ndate = "2026"\nsource = "s"\n', "above 0"),
    ("not toml [", "not valid TOML"),
])
def test_prices_update_refuses_a_bad_snapshot_in_one_line(run_cli, tmp_path, text, message):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    code, out, err = run_cli("prices", "--update", str(f))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith("Error:") and message in err
    code, out, _ = run_cli("prices")
    assert code == 0 and "installed" not in out  # nothing was installed


def test_prices_names_every_snapshot_date(run_json):
    snaps = {s["name"]: s for s in run_json("prices")["snapshots"]}
    assert set(snaps) == {"API prices", "rental prices", "purchase prices"}
    assert all(s["date"] and s["rows"] > 0 for s in snaps.values())


# --- charts ---------------------------------------------------------------------------------------------


def test_plot_adds_the_36_month_and_the_day_charts(run_json, tmp_path):
    svg = tmp_path / "bill.svg"
    r = run_json("breakeven", "--model", LLAMA, "--gpu", "RTX 4090", "--runtime", "vllm", "--traffic",
                 "business-hours", "--peak-requests-per-s", "30", "--buy", "--plot", str(svg))
    text = svg.read_text()
    assert r["plot"]["format"] == "svg"
    for label in ("Rent, buy or API over 36 months", "A day of traffic: replicas and rent per hour",
                  f"buy ${r['buy']['capex_usd']:,.0f}", "Monthly cost vs volume"):
        assert label in text, label
    plain = tmp_path / "plain.svg"
    run_json("breakeven", "--hourly", "0.5", "--tokens-per-s", "400", "--plot", str(plain))
    assert "over 36 months" not in plain.read_text()  # the second row only with --buy / --traffic


def test_the_web_api_takes_traffic_shapes_never_files(tmp_path):
    from fastapi.testclient import TestClient

    from cardfit.web.app import create_app

    client = TestClient(create_app())
    body = {"model": LLAMA, "gpu": "RTX 4090", "runtime": "vllm"}
    f = _curve_file(tmp_path, [1.0] * 24)
    r = client.post("/api/breakeven", json={**body, "traffic": f})
    assert r.status_code == 400 and "does not read traffic files" in r.json()["error"]
    r = client.post("/api/breakeven", json={**body, "traffic": "batch-night", "peak_requests_per_s": 10,
                                            "buy": True})
    assert r.status_code == 200 and set(r.json()["traffic"]["monthly_usd"]) == {"autoscaled", "always_on",
                                                                                "buy", "api"}


def test_traffic_on_a_card_without_a_purchase_price_leaves_buy_empty():
    r = breakeven_report(BreakevenInput(model=LLAMA, gpu="L40S", runtime="vllm", traffic="business-hours",
                                        peak_requests_per_s=5))
    assert r.traffic.monthly_usd.buy is None and r.traffic.monthly_usd.always_on > 0


def test_cheapest_mix_is_no_dearer_than_all_rented_or_all_bought(tmp_path):
    """Base 0 is the autoscaled rent and base = peak is the bought fleet: the cheapest base is at most
    either, and its owned and rented parts add up."""
    rates = [0.0] * 4 + [12.0] * 6 + [30.0] * 4 + [12.0] * 6 + [0.0] * 4
    t = _traffic(tmp_path, rates, min_replicas=1)
    m, x = t.monthly_usd, t.cheapest_mix
    assert x is not None and 0 <= x.owned_replicas <= t.peak_replicas
    assert x.monthly_usd <= min(m.autoscaled, m.buy) + 0.01
    assert x.monthly_usd == pytest.approx(x.owned_usd + x.rented_usd, abs=0.01)
    if x.owned_replicas == 0:
        assert x.rented_usd == pytest.approx(m.autoscaled, abs=0.01)


@given(need=st.lists(st.integers(0, 6), min_size=1, max_size=48), lag=st.floats(0, 60),
       price=st.floats(10, 5000), own_base=st.floats(0, 5000))
def test_mix_search_finds_the_minimum(need, lag, price, own_base):
    from cardfit.services.traffic import Fleet, _rented, cheapest_mix

    fleet = Fleet(lambda r: 1, lambda k: price * k, "X", 1, 1, "vllm", "bf16", 0.0)

    def own(cards, busy):
        return own_base * cards * (0.5 + busy)

    mix = cheapest_mix(need, fleet, lag, own, 30.0)
    costs = [(own(b, sum(min(k, b) for k in need) / (b * len(need))) if b else 0.0)
             + 30 * sum(_rented([max(k - b, 0) for k in need], fleet, lag)) for b in range(max(need) + 1)]
    assert mix.monthly_usd == pytest.approx(min(costs), abs=0.01)

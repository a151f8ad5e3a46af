"""`cardfit breakeven` (rent vs API), `cardfit apis` (the API price catalog) and `cardfit prices` (the price
snapshots in use, and `--update FILE` to install a newer one)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from . import cli, command, emit_json
from .console import escape
from .options import json_option

if TYPE_CHECKING:
    from ..services.breakeven import Breakeven

BREAKEVEN_EPILOG = """\b
Examples:
  cardfit breakeven --hourly 0.50 --tokens-per-s 400 --hours-per-month 730 --input-per-output 0
      # the break-even page's example (it prices output tokens only)
  cardfit breakeven --monthly 365 --tokens-per-s 400 --duty 0.1 --api claude-sonnet-5 --api gpt-5.4-mini
  cardfit breakeven --hourly 0.50 --from-log vllm.log --api-price 2.00 --plot breakeven.svg
  cardfit breakeven --gpu "RTX 4090" --model llama3.1:8b --api frontier
  cardfit breakeven --hourly 0.50 --tokens-per-s 400 --retry-multiplier 3 --storage-gb 50 \\
      --storage-usd-per-gb-month 0.10 --cold-starts-per-month 60 --cold-start-s 40
  cardfit breakeven --gpu "RTX 4090" --tokens-per-s 400 --duty 0.5 --buy --power-usd-kwh 0.15 \\
      --pue 1 --colo-usd-kw-month 0      # buy vs rent vs API, with power
  cardfit breakeven --model meta-llama/Llama-3.1-8B-Instruct --gpu "RTX 4090" --runtime vllm \\
      --traffic business-hours --peak-requests-per-s 30 --buy --plot bill.svg
  cardfit breakeven --hourly 0.50 --tokens-per-s 400 --api gpt-5.4 --cached-fraction 0.6
"""


@command("breakeven", epilog=BREAKEVEN_EPILOG)
def breakeven(result: Breakeven, inp: Any) -> None:
    """When does renting a card beat paying an API per token?

    Give the rent (--hourly or --monthly, or --gpu to use the catalog price), the throughput
    (--tokens-per-s, --from-log, or --model with --gpu) and what to compare with (--api-price, --api).
    --buy adds owning the cards (price, power, colocation); --traffic prices a day of traffic hour by hour.
    """
    _print(result)


def _pct(x: float | None) -> str:
    if x is None:
        return "—"
    # the break-even guide writes 174%, 6.9%, 50%
    return f"{x:.0%}" if x >= 1 else f"{x:.1%}".replace(".0%", "%")


def _print(r: Breakeven) -> None:
    from rich.table import Table

    from .render import console

    c = console()
    t = r.throughput
    c.print(f"Rent [bold]${r.monthly_usd:,.2f}/month[/] (${r.hourly_usd:,.4g}/h × {r.hours_per_month:g} h"
            f"{'' if not r.hidden_costs.total_extra_usd else ' + hidden costs'}) · "
            f"{t.tokens_per_s:,.1f} tok/s ({t.source}) → capacity "
            f"[bold]{r.capacity_millions_per_month:,.1f} M[/] output tokens/month")
    h = r.hidden_costs
    if h.total_extra_usd:
        c.print(f"Hidden costs in the month: storage ${h.storage_usd:,.2f}, cold starts "
                f"${h.cold_start_usd:,.2f} ({h.cold_start_hours:,.2f} h), other ${h.extra_monthly_usd:,.2f}")
    if r.duty < 1:
        c.print(f"Idle: {h.idle_hours:,.0f} paid hours a month make nothing (${h.idle_usd:,.2f})")
    at_full = "" if r.duty >= 1 else f" (${r.cost_per_million_full_duty_usd:,.2f} at 100%)"
    c.print(f"Cost per million at {_pct(r.duty)} duty: [bold]${r.cost_per_million_usd:,.2f}[/]{at_full}\n")
    if r.buy is not None and r.buy_terms is not None:
        _print_buy(r)
    if r.traffic is not None:
        _print_traffic(r)
    tab = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for col, just in (("API", "left"), ("$/M out+in", "right"), ("break-even M/month", "right"),
                      ("needs duty", "right"), ("verdict", "left")):
        tab.add_column(col, justify=just)  # type: ignore[arg-type]
    for a in r.apis:
        verdict = "[green]rent wins above it[/]" if a.breaks_even else "[red]never: card too slow[/]"
        tab.add_row(escape(a.name), f"{a.price_per_million_usd:,.2f}",
                    f"{a.breakeven_millions_per_month:,.1f}", _pct(a.required_duty), verdict)
    c.print(tab)
    c.print()
    c.print(_duty_table(r))
    if r.plot:
        c.print(f"\nCharts written to {r.plot.path}")
    for note in r.notes:
        c.print(f"[dim]note: {escape(note)}[/]")


def _months(m: float | None) -> str:
    return "never" if m is None else f"after {m:,.1f} months"


def _print_buy(r: Breakeven) -> None:
    """The bought set, each figure from the inputs printed beside it (README's worked example)."""
    from .render import console

    b, t = r.buy, r.buy_terms
    assert b is not None and t is not None
    c = console()
    what = f"{t.count}× {escape(t.gpu)}" if t.gpu else f"{t.count} card{'s' if t.count > 1 else ''}"
    when = f"price of {t.date}" if t.date else "price given"
    c.print(f"Buy {what} at ${t.card_usd:,.2f} each with its host ({when})")
    c.print(f"  price ${b.capex_usd:,.2f} ÷ {t.amortize_months:g} months = "
            f"${t.amortized_usd_month:,.2f}/month")
    c.print(f"  power ({t.card_w:g} W card + {t.host_w:g} W host) × {t.count} × {_pct(t.utilization)} busy = "
            f"{b.power_w:,.1f} W")
    c.print(f"  × PUE {t.pue:g} × {r.hours_per_month:g} h = {t.energy_kwh_month:,.1f} kWh × "
            f"${t.power_usd_kwh:g}/kWh = ${t.power_usd_month:,.2f}/month")
    c.print(f"  colocation {t.provisioned_w:,.0f} W × ${t.colo_usd_kw_month:g}/kW-month = "
            f"${t.colo_usd_month:,.2f}/month; ops ${t.ops_usd_month:,.2f}/month")
    c.print(f"  → [bold]${b.monthly_usd:,.2f}/month[/], ${b.cost_per_million_usd:,.4g}/M at "
            f"{_pct(r.duty)} duty")
    api = f"; {t.api} {_months(b.beats_api_after_months)}" if t.api else ""
    c.print(f"  beats the rent {_months(b.beats_rent_after_months)}{api}\n")


def _print_traffic(r: Breakeven) -> None:
    """The day of traffic: replicas and rent per hour (runs of hours that print the same on one line), then
    the month."""
    from .render import console

    t = r.traffic
    assert t is not None
    c = console()
    c.print(f"Traffic: replicas of {t.cards_per_replica}× {escape(t.gpu)} (tp {t.tp}, {t.runtime}, "
            f"{t.quant}) sized by deploy each hour")
    c.print(f"  at least {t.min_replicas}; a new one paid {t.scale_up_lag_min:g} min before its hour")
    rows = [(h.hour, f"{h.requests_per_s:>9,.2f} req/s  {h.replicas:>4} "
                     f"replica{' ' if h.replicas == 1 else 's'}  ${h.usd:,.2f}/h") for h in t.hours]
    start = 0
    for i, (hour, line) in enumerate(rows):
        if i + 1 < len(rows) and rows[i + 1][1] == line:
            continue
        span = f"{start:02d}-{hour:02d}" if hour > start else f"{hour:02d}   "
        c.print(f"  hour {span}  {line}")
        start = hour + 1
    m = t.monthly_usd
    buy = "—" if m.buy is None else f"${m.buy:,.2f}"
    api = "—" if m.api is None else f"${m.api:,.2f} ({t.api})"
    c.print(f"  a month ({t.days_per_month:g} days): autoscaled [bold]${m.autoscaled:,.2f}[/]; always on "
            f"(peak {t.peak_replicas}) ${m.always_on:,.2f}")
    c.print(f"  bought {buy}; API {api}")
    if t.cheapest_mix is not None:
        x = t.cheapest_mix
        c.print(f"  cheapest mix: {x.owned_replicas} bought replica{'' if x.owned_replicas == 1 else 's'} "
                f"${x.owned_usd:,.2f} + the rest rented ${x.rented_usd:,.2f} = "
                f"[bold]${x.monthly_usd:,.2f}[/]")
    c.print()


def _duty_table(r: Breakeven) -> Any:
    from rich.table import Table

    tab = Table(show_header=True, header_style="bold", box=None, pad_edge=False, title_justify="left")
    tab.add_column("duty", justify="right")
    tab.add_column("rented $/M", justify="right")
    tab.add_column("M/month", justify="right")
    for row in r.by_duty:
        tab.add_row(_pct(row.duty), f"{row.self_host_usd_per_million:,.2f}",
                    f"{r.capacity_millions_per_month * row.duty:,.1f}")
    return tab


@cli.command("apis")
@click.option("--catalog", "catalog", multiple=True, type=click.Path(), help="extra catalog file(s)")
@json_option
def apis_cmd(as_json: bool, catalog: tuple[str, ...]) -> None:
    """The API price catalog: the break-even guide's three tiers and named APIs, per million tokens, with
    dates and sources."""
    if as_json:
        from ..services.catalogs import listing

        emit_json(listing("apis", catalog))
        return
    from ..catalog.apis import apis
    from ..services.catalogs import api_rows

    rows = api_rows(apis(tuple(catalog)))
    from rich.table import Table

    from .render import console

    tab = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for col, just in (("id", "left"), ("name", "left"), ("$/M in", "right"), ("$/M cached", "right"),
                      ("$/M out", "right"), ("date", "left"), ("evidence", "left")):
        tab.add_column(col, justify=just)  # type: ignore[arg-type]
    for a in rows:
        cached = "—" if a.cached_input_usd_per_m is None else f"{a.cached_input_usd_per_m:,.4g}"
        tab.add_row(escape(a.id), escape(a.name), f"{a.input_usd_per_m:,.2f}", cached,
                    f"{a.output_usd_per_m:,.2f}", a.date or "—", a.evidence or "—")
    console().print(tab)


PRICES_EPILOG = """\b
Examples:
  cardfit prices
  cardfit prices --update my-prices.toml     # [[api]] / [[tier]] rows, each with date and source
  cardfit prices --remove
"""


@cli.command("prices", epilog=PRICES_EPILOG)
@click.option("--update", "update", type=click.Path(), default=None,
              help="install FILE (TOML/JSON [[api]]/[[tier]] rows, each dated and sourced) as the API price "
                   "snapshot every command reads, replacing the one installed")
@click.option("--remove", is_flag=True, help="remove the installed snapshot: back to the built-in prices")
@json_option
def prices_cmd(as_json: bool, update: str | None, remove: bool) -> None:
    """The price snapshots cardfit answers with (API, rental and purchase prices) and their dates."""
    from ..errors import InputError

    if update and remove:
        raise InputError("give --update FILE or --remove, not both", field="update")
    from ..services.catalogs import install_prices, price_snapshots, remove_prices

    out = install_prices(update) if update else remove_prices() if remove else {}
    out = {**out, "snapshots": price_snapshots()}
    if as_json:
        emit_json(out)
        return
    from .render import console

    c = console()
    if "installed" in out:
        i = out["installed"]
        c.print(f"Installed the price snapshot of {i['date']} ({i['rows']} rows) from {i['from']} as "
                f"{i['path']}")
    if out.get("removed"):
        c.print(f"Removed {out['removed']}: back to the built-in prices")
    for snap in out["snapshots"]:
        span = (snap["date"] if snap["oldest_date"] == snap["date"]
                else f"{snap['oldest_date']} to {snap['date']}")
        c.print(f"{snap['name']}: {snap['rows']} rows dated {span} ({snap['source']})")

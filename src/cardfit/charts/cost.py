"""Break-even charts from a `Breakeven` result: monthly cost against volume (flat rent, API lines
through zero, the crossings marked and labelled) and cost per million against duty cycle. PNG or SVG by
the file's suffix; SVG keeps its text as text, so the labels can be searched. matplotlib is imported here
only, and only when a chart is asked for."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from ..errors import InputError, need_extra
from ..units import fmt_millions

# What the charts read of a `cardfit breakeven` result (services/breakeven.py Breakeven and its crossings;
# that module imports this one when asked to plot): the charts know the fields they draw, not the service.


class ApiLine(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def price_per_million_usd(self) -> float: ...
    @property
    def breakeven_millions_per_month(self) -> float | None: ...


class Rate(Protocol):
    @property
    def tokens_per_s(self) -> float: ...


class Breakeven(Protocol):
    @property
    def monthly_usd(self) -> float: ...
    @property
    def capacity_millions_per_month(self) -> float: ...
    @property
    def cost_per_million_usd(self) -> float: ...
    @property
    def cost_per_million_full_duty_usd(self) -> float: ...
    @property
    def duty(self) -> float: ...
    @property
    def throughput(self) -> Rate: ...
    @property
    def apis(self) -> Sequence[ApiLine]: ...


class VolumeCrossing(Protocol):
    @property
    def api(self) -> str: ...
    @property
    def millions_per_month(self) -> float: ...
    @property
    def breaks_even(self) -> bool: ...
    @property
    def label(self) -> str: ...


class DutyCrossing(Protocol):
    @property
    def api(self) -> str: ...
    @property
    def duty(self) -> float: ...

class Buy(Protocol):
    @property
    def capex_usd(self) -> float: ...
    @property
    def monthly_usd(self) -> float: ...


class BuyTerms(Protocol):
    @property
    def amortized_usd_month(self) -> float: ...
    @property
    def api(self) -> str | None: ...
    @property
    def api_monthly_usd(self) -> float | None: ...


class Hour(Protocol):
    @property
    def hour(self) -> int: ...
    @property
    def replicas(self) -> int: ...
    @property
    def usd(self) -> float: ...


class Traffic(Protocol):
    @property
    def hours(self) -> Sequence[Hour]: ...
    @property
    def gpu(self) -> str: ...


class Bill(Protocol):
    """The optional parts of a `cardfit breakeven` result the second row of charts draws."""

    @property
    def monthly_usd(self) -> float: ...
    @property
    def buy(self) -> Buy | None: ...
    @property
    def buy_terms(self) -> BuyTerms | None: ...
    @property
    def traffic(self) -> Traffic | None: ...


FORMATS = (".png", ".svg")
MONTHS_DRAWN = 36  # the horizon: three years of rent, ownership and API bills
COLORS = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def plot_breakeven(report: Breakeven, path: str, crossings: tuple[VolumeCrossing, ...],
                   duty_crossings: tuple[DutyCrossing, ...]) -> str:
    """Write the two charts side by side to `path`, the crossings marked; return the format written."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise InputError(f"--plot needs a .png or .svg file name (got '{path}')", field="plot")
    need_extra("matplotlib", extra="plot", what="--plot")
    import matplotlib

    matplotlib.rcParams["svg.fonttype"] = "none"  # keep labels as <text> in SVG
    matplotlib.rcParams["text.parse_math"] = False  # "$2.00/M" is money, not mathtext
    from matplotlib.figure import Figure

    bill: Any = report
    extra = [f for f in (_months_chart if bill.buy is not None else None,
                         _traffic_chart if bill.traffic is not None else None) if f is not None]
    fig = Figure(figsize=(13, 5.2 * (2 if extra else 1)), layout="constrained")
    axes = fig.subplots(2 if extra else 1, 2, squeeze=False)
    _volume_chart(axes[0][0], report, {c.api: c for c in crossings})
    _duty_chart(axes[0][1], report, {c.api: c for c in duty_crossings})
    for ax, draw in zip(axes[1] if extra else (), extra, strict=False):
        draw(ax, bill)
    if len(extra) == 1:
        axes[1][1].set_visible(False)
    fig.suptitle(f"Rent ${report.monthly_usd:,.0f}/month at {report.throughput.tokens_per_s:,.0f} tok/s "
                 f"vs per-token APIs", fontsize=13)
    try:
        fig.savefig(path, format=suffix[1:], dpi=130)
    except OSError as e:
        raise InputError(f"cannot write the chart '{path}': {e.strerror or e}", field="plot") from e
    return suffix[1:]


def _volume_chart(ax: Any, r: Breakeven, crossing: dict[str, VolumeCrossing]) -> None:
    monthly, capacity = r.monthly_usd, r.capacity_millions_per_month
    finite = [a.breakeven_millions_per_month for a in r.apis if a.breakeven_millions_per_month is not None]
    x_max = max([capacity * 1.05] + [b * 1.1 for b in finite if b <= capacity * 2])
    ax.axhline(monthly, color="black", lw=2.2, label=f"rent ${monthly:,.0f}/month")
    ax.axvline(capacity, color="grey", ls="--", lw=1)
    ax.text(capacity, monthly * 0.08, f" card capacity\n {fmt_millions(capacity)}/month", color="grey",
            fontsize=8, ha="right" if capacity > x_max * 0.8 else "left")
    for i, a in enumerate(r.apis):
        color, price = COLORS[i % len(COLORS)], a.price_per_million_usd
        ax.plot([0, x_max], [0, price * x_max], color=color, lw=1.6, label=f"{a.name} ${price:,.2f}/M")
        c = crossing.get(a.name)
        if c is None:
            continue
        be, reachable, label = c.millions_per_month, c.breaks_even, c.label
        if be <= x_max:
            ax.plot([be], [monthly], "o", ms=8, color=color, mfc=color if reachable else "white", mew=2,
                    zorder=5)
            right = be > x_max * 0.6
            ax.annotate(label, (be, monthly), xytext=(-10 if right else 24, 30 + 26 * (i % 3)),
                        textcoords="offset points", ha="right" if right else "left", fontsize=9, color=color,
                        arrowprops={"arrowstyle": "-", "color": color, "lw": 0.8})
        else:
            ax.annotate(f"{a.name} crosses at {label}", (x_max, monthly), xytext=(-8, -24 - 14 * i),
                        textcoords="offset points", ha="right", fontsize=9, color=color)
    ax.set_xlim(0, x_max)
    ax.set_ylim(0, monthly * 3)
    ax.set_xlabel("output tokens per month (millions)")
    ax.set_ylabel("USD per month")
    ax.set_title("Monthly cost vs volume: renting wins right of each dot")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")


def _usd_formatter() -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda y, _pos: f"${y:,.2f}" if y < 1 else f"${y:,.0f}")


def _duty_chart(ax: Any, r: Breakeven, crossing: dict[str, DutyCrossing]) -> None:
    full = r.cost_per_million_full_duty_usd
    duties = [d / 1000 for d in range(5, 1001)]
    ax.plot([d * 100 for d in duties], [full / d for d in duties], color="black", lw=2.2, label="rented card")
    for i, a in enumerate(r.apis):
        color, price = COLORS[i % len(COLORS)], a.price_per_million_usd
        ax.axhline(price, color=color, lw=1.4, ls="-", label=f"{a.name} ${price:,.2f}/M")
        c = crossing.get(a.name)
        if c is not None:
            need = c.duty
            ax.plot([need * 100], [price], "o", ms=8, color=color, zorder=5)
            ax.annotate(f"{need:.1%}", (need * 100, price), xytext=(6, 6), textcoords="offset points",
                        fontsize=9, color=color)
    d = r.duty
    ax.axvline(d * 100, color="grey", ls=":", lw=1)
    ax.plot([d * 100], [r.cost_per_million_usd], "s", ms=7, color="black", zorder=6)
    ax.annotate(f"your duty {d:.0%}: ${r.cost_per_million_usd:,.2f}/M", (d * 100, r.cost_per_million_usd),
                xytext=(-10, -18), textcoords="offset points", ha="right", fontsize=9)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(0.5, 100)
    ax.set_xticks([1, 2, 5, 10, 25, 50, 100], ["1%", "2%", "5%", "10%", "25%", "50%", "100%"])
    ax.yaxis.set_major_formatter(_usd_formatter())
    ax.set_xlabel("duty cycle (% of paid hours generating)")
    ax.set_ylabel("USD per million output tokens")
    ax.set_title("Cost per million vs duty cycle: renting wins right of each dot")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="upper right")


def _months_chart(ax: Any, r: Bill) -> None:
    """What has been paid after each month: rent and the API grow from zero, buying starts at its price and
    grows by its running costs (power, colocation, ops); buying wins after the month its line crosses."""
    b, t = r.buy, r.buy_terms
    assert b is not None and t is not None
    months = list(range(MONTHS_DRAWN + 1))
    running = b.monthly_usd - t.amortized_usd_month
    ax.plot(months, [m * r.monthly_usd for m in months], color="black", lw=2.2,
            label=f"rent ${r.monthly_usd:,.0f}/month")
    ax.plot(months, [b.capex_usd + m * running for m in months], color=COLORS[1], lw=2.2,
            label=f"buy ${b.capex_usd:,.0f} + ${running:,.0f}/month")
    if t.api is not None and t.api_monthly_usd is not None:
        ax.plot(months, [m * t.api_monthly_usd for m in months], color=COLORS[0], lw=1.6,
                label=f"API {t.api} ${t.api_monthly_usd:,.0f}/month")
    ax.set_xlim(0, MONTHS_DRAWN)
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_formatter(_usd_formatter())
    ax.set_xlabel("months")
    ax.set_ylabel("USD paid so far")
    ax.set_title(f"Rent, buy or API over {MONTHS_DRAWN} months: buying wins after its line crosses")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")


def _traffic_chart(ax: Any, r: Bill) -> None:
    """Replicas up each hour (bars) and their rent per hour (line, right axis)."""
    t = r.traffic
    assert t is not None
    hours = [h.hour for h in t.hours]
    ax.bar(hours, [h.replicas for h in t.hours], color=COLORS[1], alpha=0.6, label="replicas")
    ax.set_xlabel("hour")
    ax.set_ylabel(f"replicas ({t.gpu})")
    usd = ax.twinx()
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    usd.plot(hours, [h.usd for h in t.hours], color="black", lw=1.8, drawstyle="steps-mid",
             label="rent per hour")
    usd.set_ylim(bottom=0)
    usd.yaxis.set_major_formatter(FuncFormatter(lambda y, _pos: f"${y:,.2f}"))
    usd.set_ylabel("USD per hour")
    ax.set_title("A day of traffic: replicas and rent per hour")
    ax.grid(alpha=0.3)

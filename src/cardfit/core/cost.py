"""Rent versus per-token API prices. Pure arithmetic on plain numbers: no catalogs, no I/O.

The four formulas are those of the break-even guide ('GPU VPS vs API tokens: the break-even point',
Hindi), verbatim:
    cost_per_million             = hourly × 10⁶ ÷ (tokens_per_s × 3600 × duty)
    breakeven_millions_per_month = hourly × hours_per_month ÷ api_price_per_million
    capacity_millions_per_month  = tokens_per_s × 3600 × hours_per_month ÷ 10⁶
    required_duty                = breakeven ÷ capacity   (above 1: never breaks even)
Everything else here (input tokens, retries, hidden costs, rental terms) adjusts the inputs of those four.
"""

from __future__ import annotations

import math

from ..catalog.records import record

SECONDS_PER_HOUR = 3600
MILLION = 1_000_000
# The one month length behind every monthly figure (plan, breakeven, the web page, the GPU catalog's $/h):
# a 30-day month of 720 h, the term the catalog's monthly prices are quoted for (GPU Rent Hub VRAM guide,
# section 06: "monthly price divided by the 720 hours of a term"). The break-even page's calendar-average
# 730 h (8,760 h / 12) is `--hours-per-month 730`; 720 never overstates what a month of rent produces.
HOURS_PER_MONTH = 720

# The break-even guide's two tables: the monthly volumes of its bill table and the duty cycles of its $/M
# table.
BREAKEVEN_GUIDE_VOLUMES_MILLIONS = (5, 10, 25, 50, 100, 250, 500, 1000)
BREAKEVEN_GUIDE_DUTIES = (1.0, 0.5, 0.25, 0.10, 0.05, 0.02)

# Prompt tokens an API bills per output token when no request says otherwise: 3, the weighting of
# Artificial Analysis's blended API price ("3:1 input to output"; https://artificialanalysis.ai/methodology,
# the ratio Epoch AI's LLM price data insight also uses).
DEFAULT_INPUT_PER_OUTPUT = 3.0
DEFAULT_INPUT_PER_OUTPUT_SOURCE = "Artificial Analysis's blended-price ratio, 3 input : 1 output"


# ---- the four formulas -------------------------------------------------------------------------------

def monthly_from_hourly(hourly_usd: float, hours_per_month: float = HOURS_PER_MONTH) -> float:
    """$0.50/h × 730 h = $365 (the break-even page's worked example)."""
    return hourly_usd * hours_per_month


def hourly_from_monthly(monthly_usd: float, hours_per_month: float = HOURS_PER_MONTH) -> float:
    return monthly_usd / hours_per_month


def capacity_millions(tokens_per_s: float, hours_per_month: float = HOURS_PER_MONTH) -> float:
    """Output tokens the card makes in a month of non-stop work: 400 tok/s × 730 h = 1,051.2 M (the break-even
    guide)."""
    return tokens_per_s * SECONDS_PER_HOUR * hours_per_month / MILLION


def cost_per_million(hourly_usd: float, tokens_per_s: float, duty: float = 1.0) -> float:
    """Rent per million output tokens when the card is busy `duty` of the hours paid for."""
    if tokens_per_s <= 0 or duty <= 0:
        return math.inf
    return hourly_usd * MILLION / (tokens_per_s * SECONDS_PER_HOUR * duty)


def breakeven_millions(monthly_usd: float, api_usd_per_million: float) -> float:
    """The monthly volume at which the API bill equals the rent: $365 ÷ $15/M = 24.3 M (the break-even
    guide)."""
    if api_usd_per_million <= 0:
        return math.inf
    return monthly_usd / api_usd_per_million


def required_duty(breakeven: float, capacity: float) -> float:
    """Share of the month the card must be busy to reach the break-even volume; > 1 means never."""
    return math.inf if capacity <= 0 else breakeven / capacity


# ---- adjustments to the inputs -----------------------------------------------------------------------

def api_price_per_output_million(output_usd_per_m: float, input_usd_per_m: float = 0.0,
                                 input_per_output: float = 0.0, cached_fraction: float = 0.0,
                                 cached_input_usd_per_m: float | None = None) -> float:
    """What the API charges per million OUTPUT tokens once the prompt tokens sent with them are billed
    too (the break-even guide: "on the API side, input is a separate line on the invoice"): the blended
    $/M of a workload whose prompts repeat a cached prefix for `cached_fraction` of their tokens, billed at
    the provider's cached-input rate (a provider without one bills them as plain input)."""
    cached = input_usd_per_m if cached_input_usd_per_m is None else cached_input_usd_per_m
    per_input = (1 - cached_fraction) * input_usd_per_m + cached_fraction * cached
    return output_usd_per_m + per_input * input_per_output


def effective_tokens_per_s(decode_tokens_per_s: float, *, input_per_output: float = 0.0,
                           prefill_tokens_per_s: float | None = None, retry_multiplier: float = 1.0) -> float:
    """Useful output tokens/s of the card.

    Prefill: each output token brings `input_per_output` prompt tokens whose prefill takes GPU time
    (the break-even guide: "on your own card, prefill uses GPU time");
    time per output token = 1/decode + ratio/prefill.
    Skip it (no prefill rate) when the tokens/s was measured with real prompts: it already includes it.
    Quality gap: a model that needs `retry_multiplier` attempts per useful answer delivers that many
    times fewer useful tokens (the break-even guide: three attempts → three times the chart price).
    """
    if decode_tokens_per_s <= 0:
        return 0.0
    seconds = 1.0 / decode_tokens_per_s
    if input_per_output and prefill_tokens_per_s:
        seconds += input_per_output / prefill_tokens_per_s
    return 1.0 / seconds / max(retry_multiplier, 1.0)


@record(slots=True)
class HiddenCosts:
    """Monthly extras the break-even guide lists beside the rent (all optional, default none)."""

    storage_gb: float = 0.0
    storage_usd_per_gb_month: float = 0.0
    cold_starts_per_month: float = 0.0
    cold_start_s: float = 0.0
    extra_monthly_usd: float = 0.0  # reserved IP, attached storage of a stopped box, … (forgotten billing)

    def storage_usd(self) -> float:
        return self.storage_gb * self.storage_usd_per_gb_month

    def cold_start_hours(self) -> float:
        """Paid hours spent loading weights after each start, producing nothing."""
        return self.cold_starts_per_month * self.cold_start_s / SECONDS_PER_HOUR

    def cold_start_usd(self, hourly_usd: float) -> float:
        return self.cold_start_hours() * hourly_usd

    def total_usd(self, hourly_usd: float) -> float:
        return self.storage_usd() + self.cold_start_usd(hourly_usd) + self.extra_monthly_usd


def billed_hours(hours_used: float, min_term_days: float = 0) -> float:
    """Hours paid for: at least the minimum term (GPU Rent Hub VRAM guide, section 08: "our shortest term is
    seven days")."""
    return max(hours_used, min_term_days * 24)


def set_monthly_usd(unit_monthly_usd: float, count: int, discount_fraction: float = 0.0) -> float:
    """A set of `count` cards after the volume discount (GPU Rent Hub VRAM guide, section 05: 5 % from two,
    8 % from four …)."""
    return unit_monthly_usd * count * (1 - discount_fraction)


# ---- buying instead of renting -----------------------------------------------------------------------

def board_power_w(rated_w: float, utilization: float) -> float:
    """Average power of a card (or its host) busy `utilization` of the time: the load-scaled TDP, rated power
    × utilization (the physically grounded baseline of WattGPU, 'Predicting Inference Power and Latency on
    Unseen GPUs and LLMs', arXiv 2607.02391). It leaves out the idle draw, so a card busy a small share of
    the hours costs a little more than this."""
    return rated_w * min(max(utilization, 0.0), 1.0)


@record(slots=True)
class Ownership:
    """A bought set of cards run for a month: the price spread over the amortization period, electricity
    for the power drawn at the load (× the site's PUE), colocation for the power provisioned, and ops."""

    capex_usd: float
    amortize_months: float
    power_w: float  # cards and hosts at the load (IT power, before the PUE)
    provisioned_w: float  # cards and hosts at their rated power: what a colocation contract bills per kW
    pue: float
    power_usd_kwh: float
    colo_usd_kw_month: float
    hours_per_month: float = HOURS_PER_MONTH
    ops_usd_month: float = 0.0

    def amortized_usd(self) -> float:
        return self.capex_usd / self.amortize_months

    def energy_kwh(self) -> float:
        """kWh the site draws in a month: IT power × PUE × hours."""
        return self.power_w * self.pue * self.hours_per_month / 1000

    def power_usd(self) -> float:
        return self.energy_kwh() * self.power_usd_kwh

    def colo_usd(self) -> float:
        return self.provisioned_w / 1000 * self.colo_usd_kw_month

    def running_usd(self) -> float:
        """What the month costs beside the price paid: electricity, colocation and ops."""
        return self.power_usd() + self.colo_usd() + self.ops_usd_month

    def monthly_usd(self) -> float:
        return self.amortized_usd() + self.running_usd()


def months_to_overtake(capex_usd: float, running_usd_month: float, other_usd_month: float) -> float:
    """Months after which the price paid plus the running costs falls below another option's monthly bill
    (capex + m × running = m × other); inf when the other option costs no more than running the card."""
    gain = other_usd_month - running_usd_month
    return math.inf if gain <= 0 else capex_usd / gain

"""`cardfit breakeven`: is renting a card cheaper than paying an API per token, and from what volume?

Wiring only: the inputs are described once in `BreakevenInput`; rent, tokens/s and API prices are
resolved from the flags, a log, the GPU catalog or cardfit's own speed estimate; the arithmetic is
core/cost.py; `breakeven_report` returns the typed `Breakeven` (its `to_json()` is the JSON view).
"""

from __future__ import annotations

import math
from dataclasses import field
from typing import Any

from ..catalog.apis import ApiPrice, apis, breakeven_guide_tiers
from ..catalog.records import record
from ..core import cost
from ..errors import InputError
from ..units import fmt_millions, rounded
from .inputs import MAX_BATCH, MAX_TOKENS_PER_S, RuntimeInput, opt
from .table import Result
from .traffic import Traffic

MAX_USD = 10_000_000.0
# the break-even guide: "400 output tokens per second with 16 concurrent requests"
BREAKEVEN_GUIDE_CONCURRENCY = 16
# prompt tokens billed per output token when neither --input-per-output nor a timed request says
# (core/cost.py)
DEFAULT_INPUT_PER_OUTPUT = cost.DEFAULT_INPUT_PER_OUTPUT
INPUT_PER_OUTPUT_SOURCE = cost.DEFAULT_INPUT_PER_OUTPUT_SOURCE


@record
class BreakevenInput(RuntimeInput):
    """Rent, throughput, duty cycle and the APIs to compare against; with --model, the same model and
    runtime options as `cardfit plan` for the speed estimate."""

    hourly: float | None = opt(None, "rent per hour in USD, idle hours included", gt=0, le=MAX_USD)
    monthly: float | None = opt(None, "rent per month in USD (÷ --hours-per-month gives the hourly rate)",
                                gt=0, le=MAX_USD)
    tokens_per_s: float | None = opt(None, "aggregate output tokens/s the server sustains under your real "
                                     "concurrency (not a single stream)", gt=0, le=MAX_TOKENS_PER_S)
    from_log: str | None = opt(None, "read tokens/s from a log: `ollama run --verbose` output, a vLLM server "
                               "log or a `vllm bench serve` summary", max_length=4096)
    model: str | None = opt(None, "with --gpu: estimate the aggregate tokens/s with cardfit's speed model",
                            max_length=4096)
    gpu: str | None = opt(None, "price the rent from the GPU catalog (and the speed estimate with --model)",
                          max_length=128)
    gpus: int | None = opt(None, "cards in the rented set (volume discount applies)", ge=1, le=4096)
    quant: str | None = opt(None, "with --model: weights quantization", max_length=64)
    runtime: str | None = opt(None, "with --model: vllm llama.cpp ollama … (NAME@RELEASE: an engine release)",
                              max_length=64)
    concurrency: int | None = opt(None, "with --model: concurrent requests the server runs (default 16, the "
                                  "break-even guide's example; capped by the KV cache), each a request of "
                                  "--input-tokens + --output-tokens (default 1000 + 300)", ge=1, le=65_536)
    api_price: tuple[float, ...] = opt((), "API price per million OUTPUT tokens, USD (repeatable)",
                                       max_length=64)
    api: tuple[str, ...] = opt((), "API by catalog name (repeatable; `cardfit apis` lists them); default: "
                               "the break-even guide's three tiers", max_length=64)
    api_input_price: float | None = opt(None, "API price per million INPUT tokens for --api-price entries "
                                        "(catalog APIs carry their own)", ge=0, le=MAX_USD)
    input_per_output: float | None = opt(None, "prompt tokens sent per output token (adds the API's input "
                                         "price; with --prefill-tokens-per-s, prefill time on the card); "
                                         "default: the request --model timed, else 3 (Artificial "
                                         "Analysis's 3:1 blend); 0 prices output only", ge=0, le=100_000)
    cached_fraction: float = opt(0.0, "share of the prompt tokens an API serves from its prompt cache (a "
                                 "repeated system prompt or context), billed at its cached-input rate "
                                 "(0-1; an API without one bills them as input)", ge=0, le=1)
    prefill_tokens_per_s: float | None = opt(None, "the card's prefill rate; only if your tokens/s was "
                                             "measured without real prompts", gt=0, le=10 * MAX_TOKENS_PER_S)
    duty: float = opt(1.0, "share of the paid hours the card is busy generating (0-1]", gt=0, le=1)
    hours_per_month: float | None = opt(None,
                                        f"paid hours per month (default {cost.HOURS_PER_MONTH:g}, a 30-day "
                                        "month; 730 is the calendar average)", gt=0, le=744)
    retry_multiplier: float = opt(1.0, "quality gap: attempts the self-hosted model needs per useful answer "
                                  "(3 = three times the cost per useful token)", ge=1, le=1000)
    storage_gb: float = opt(0.0, "disk kept for weights and caches, GB", ge=0, le=1e7)
    storage_usd_per_gb_month: float = opt(0.0, "disk price, USD per GB-month", ge=0, le=1000)
    cold_starts_per_month: float = opt(0.0, "times the box is started per month", ge=0, le=1e6)
    cold_start_s: float = opt(0.0, "seconds to load the weights after each start", ge=0, le=86_400)
    extra_monthly_usd: float = opt(0.0, "other monthly charges (reserved IP, stopped-instance storage …)",
                                   ge=0, le=MAX_USD)
    buy: bool = opt(False, "also price buying the cards (data/purchase.toml's dated price snapshot, or "
                    "--purchase-usd): amortized price, electricity at the load, colocation, ops")
    purchase_usd: float | None = opt(None, "with --buy: price of one card with its share of the host, USD "
                                     "(default: the purchase snapshot's card + host)", gt=0, le=MAX_USD)
    card_w: float | None = opt(None, "with --buy: the card's rated board power, W (default: the GPU "
                               "catalog's TDP)", gt=0, le=10_000)
    host_w: float | None = opt(None, "with --buy: the rest of the machine's power per card at full load, W "
                               "(default: the snapshot's)", ge=0, le=100_000)
    power_usd_kwh: float | None = opt(None, "with --buy: electricity price, USD per kWh (default: the EIA "
                                      "US commercial average in data/purchase.toml)", ge=0, le=100)
    pue: float | None = opt(None, "with --buy: the site's power usage effectiveness (default: Uptime "
                            "Institute's 2023 industry average 1.58; 1 at home)", ge=1, le=5)
    colo_usd_kw_month: float | None = opt(None, "with --buy: colocation price per provisioned kW-month, USD "
                                          "(default: CBRE's 2023 North America average; 0 at home)",
                                          ge=0, le=100_000)
    amortize_months: float | None = opt(None, "with --buy: months the price is spread over (default 60: "
                                        "IRS 5-year property)", gt=0, le=600)
    ops_usd_month: float = opt(0.0, "with --buy: other monthly costs of owning (support, spares, staff)",
                               ge=0, le=MAX_USD)
    traffic: str | None = opt(None, "with --model and --gpu: a day (or week) of traffic priced hour by hour: "
                              "a CSV FILE of `hour,requests_per_s` rows or a shape (business-hours, global, "
                              "batch-night) with --peak-requests-per-s; replicas per hour from deploy's "
                              "search", max_length=4096)
    peak_requests_per_s: float | None = opt(None, "with a --traffic shape: the requests/s at its busiest "
                                            "hour", gt=0, le=1_000_000)
    min_replicas: int = opt(1, "with --traffic: replicas kept up at every hour (Kubernetes HPA's default 1)",
                            ge=0, le=512)
    scale_up_lag_min: float | None = opt(None, "with --traffic: minutes a new replica is paid before it "
                                         "serves (default: its weights read from disk at 3.5 GB/s)",
                                         ge=0, le=60)
    catalog: tuple[str, ...] = opt((), "extra catalog file(s) with your own GPUs or API prices ([[gpu]], "
                                   "[[api]], [[tier]])", max_length=16)
    plot: str | None = opt(None, "also draw the charts to FILE (.png or .svg)", max_length=4096)


@record
class Rent:
    hourly_usd: float
    hours_per_month: float
    billed_hours: float
    source: str
    count: int = 1
    discount_fraction: float = 0.0

    @property
    def monthly_usd(self) -> float:
        return cost.monthly_from_hourly(self.hourly_usd, self.billed_hours)


@record
class LogReading(Result):
    """What `--from-log` read: the rate and how it was measured."""

    path: str
    kind: str  # the log's format (ollama, vllm-server, vllm-bench)
    tokens_per_s: float
    samples: int
    idle_samples: int
    busy_fraction: float | None
    concurrency: float | None
    prompt_tokens_per_s: float | None
    single_stream: bool


@record
class Throughput:
    tokens_per_s: float  # useful output tokens/s after prefill and retries
    raw_tokens_per_s: float
    source: str
    log: LogReading | None = None
    notes: list[str] = field(default_factory=list)
    cards: int | None = None  # the cards in the set the speed estimate timed (--model); None: not known
    input_per_output: float = DEFAULT_INPUT_PER_OUTPUT  # prompt tokens priced per output token
    input_per_output_source: str = INPUT_PER_OUTPUT_SOURCE


@record
class Comparison:
    api: ApiPrice
    price_per_million_usd: float  # output + input per output token


def _rent(inp: BreakevenInput, timed_cards: int | None = None) -> Rent:
    """The rent: given, or the catalog price of the set the throughput was timed on (`timed_cards`, the
    cards the --model speed estimate placed the model on) so that the rent and the tokens/s describe the
    same cards."""
    if inp.hourly is not None and inp.monthly is not None:
        raise InputError("give --hourly or --monthly, not both", field="hourly")
    if inp.hourly is not None or inp.monthly is not None:
        hours = inp.hours_per_month or cost.HOURS_PER_MONTH
        hourly = inp.hourly if inp.hourly is not None else cost.hourly_from_monthly(inp.monthly or 0, hours)
        return Rent(hourly, hours, hours, "given", timed_cards or 1)
    if inp.gpu:
        return _catalog_rent(inp, timed_cards)
    raise InputError("give the rent: --hourly USD, --monthly USD, or --gpu NAME to price it from the catalog",
                     field="hourly")


def _catalog_rent(inp: BreakevenInput, timed_cards: int | None = None) -> Rent:
    from ..catalog.gpus import default_gpus, load_gpus
    from ..catalog.rental import default_rental

    gpu = (load_gpus(tuple(inp.catalog)) if inp.catalog else default_gpus()).get(inp.gpu or "")
    rules = default_rental()
    if gpu.monthly_usd is None:
        raise InputError(f"the catalog has no rental price for {gpu.name}", field="gpu",
                         hint="give --hourly or --monthly")
    count = inp.gpus or timed_cards or max(gpu.min_count, 1)
    if count < gpu.min_count:
        raise InputError(f"{gpu.name} is rented in sets of at least {gpu.min_count}", field="gpus",
                         hint=f"use --gpus {gpu.min_count}")
    discount = rules.discount(count)
    monthly = cost.set_monthly_usd(gpu.monthly_usd, count, discount)
    hourly = cost.hourly_from_monthly(monthly)
    hours = inp.hours_per_month or cost.HOURS_PER_MONTH
    billed = cost.billed_hours(hours, rules.min_term_days)
    src = (f"catalog: {count}× {gpu.name} at ${gpu.monthly_usd:,.0f}/month each ({gpu.price_source}, "
           f"{gpu.price_date})")
    return Rent(hourly, hours, billed, src, count, discount)


# rate, source, log, notes, the cards timed and the request (prompt, answer tokens) timed (--model)
Raw = tuple[float, str, LogReading | None, list[str], int | None, tuple[int, int] | None]


def _raw_tokens(inp: BreakevenInput) -> Raw:
    given = [n for n, v in (("--tokens-per-s", inp.tokens_per_s), ("--from-log", inp.from_log),
                            ("--model", inp.model)) if v]
    if len(given) > 1:
        raise InputError(f"give one source of tokens/s, not {' and '.join(given)}", field="tokens_per_s")
    if not inp.model and (stray := _runtime_options(inp)):
        flag = "--" + next(iter(stray)).replace("_", "-")
        raise InputError(f"{flag} describes the model's runtime: it goes with --model M --gpu G",
                         field=flag[2:])
    if inp.tokens_per_s:
        return inp.tokens_per_s, "given", None, [], None, None
    if inp.from_log:
        return _from_log(inp.from_log)
    if inp.model:
        return _estimate(inp)
    raise InputError("give the throughput: --tokens-per-s N, --from-log FILE, or --model M --gpu G",
                     field="tokens_per_s")


def _from_log(path: str) -> Raw:
    from ..readers.logs import read_log

    m = bounded_measurement(read_log(path), path)
    log = log_reading(m, path)
    notes = list(m.notes)
    if m.busy_fraction is not None and m.busy_fraction < 1:
        notes.append(f"the server was busy in {m.busy_fraction:.0%} of the logged intervals; if that log "
                     f"is a typical stretch, --duty {m.busy_fraction:.2f} prices it")
    return m.tokens_per_s, f"log ({m.kind})", log, notes, None, None


# plan's model and runtime options (RuntimeInput) that only mean something with --model
_WITH_MODEL = ("context", "batch", "kv_dtype", "prefill_chunk", "gpu_memory_utilization", "parallel", "tp",
               "flash_attn", "overhead_gb", "ram_gb", "allow_long_context", "input_tokens", "output_tokens")


def log_reading(m: Any, path: str) -> LogReading:
    """A rate read from a log (readers/logs.py), as `--from-log` and the web page's pasted log show it."""
    return LogReading(path, m.kind, round(m.tokens_per_s, 2), m.samples, m.idle_samples,
                      rounded(m.busy_fraction, 4), rounded(m.concurrency, 2),
                      rounded(m.prompt_tokens_per_s, 1), m.single_stream)


def _runtime_options(inp: BreakevenInput) -> dict[str, Any]:
    return {k: getattr(inp, k) for k in _WITH_MODEL if getattr(inp, k) not in (None, False)}


def _estimate(inp: BreakevenInput) -> Raw:
    if not inp.gpu:
        raise InputError("--model needs --gpu to estimate tokens/s", field="gpu")
    values = {"model": inp.model, "gpu": inp.gpu, "gpus": inp.gpus, "quant": inp.quant,
              "runtime": inp.runtime, "catalog": inp.catalog, **_runtime_options(inp)}
    values = {k: v for k, v in values.items() if v}
    from .speed import SpeedInput, speed_report

    if inp.batch and inp.concurrency and inp.batch != inp.concurrency:
        raise InputError("--batch and --concurrency both set the concurrent sequences; give one",
                         field="concurrency")
    values.pop("batch", None)
    request = _request(inp)
    if request is not None:
        values.update(input_tokens=request[0], output_tokens=request[1])
    want = inp.concurrency or inp.batch or BREAKEVEN_GUIDE_CONCURRENCY
    report = speed_report(SpeedInput(**values, concurrency=(want,)))
    n = min(want, report.max_concurrency or 1)
    if n != want:
        report = speed_report(SpeedInput(**values, concurrency=(n,)))
    row = report.rows[0]
    note = (f"speed estimate for {report.count}× {report.gpu} at {n} concurrent "
            f"sequence{'' if n == 1 else 's'}"
            f"{'' if n == want else f' (the most the KV cache holds; {want} asked)'}: "
            f"{row.aggregate_tokens_per_s:,.0f} tok/s in all, {row.per_user_tokens_per_s:,.1f} per user")
    notes = [note, _request_note(inp, request, report.context)]
    if report.count > 1 and (inp.hourly is not None or inp.monthly is not None):
        notes.append(f"the rent given is taken as the rent of all {report.count} cards the estimate timed")
    return row.aggregate_tokens_per_s, "estimate", None, notes, report.count, request


def _request(inp: BreakevenInput) -> tuple[int, int] | None:
    """The request each sequence of the --model estimate serves: the one given, else a typical chat turn
    (deploy's default, services/served.py: 1,000 prompt + 300 answer tokens), so that the context is one
    request's and not the model's whole window; None when --context asks for decoding alone."""
    from .served import DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS

    if inp.input_tokens or inp.output_tokens or not inp.context:
        return inp.input_tokens or DEFAULT_INPUT_TOKENS, inp.output_tokens or DEFAULT_OUTPUT_TOKENS
    return None


def _request_note(inp: BreakevenInput, request: tuple[int, int] | None, context: int) -> str:
    if request is None:
        return (f"each sequence decodes with half its {context:,}-token context filled (--context given, no "
                "--input-tokens): no prompts are timed")
    given = "given" if inp.input_tokens or inp.output_tokens else ("a typical request, deploy's default; "
                                                                  "--input-tokens/--output-tokens change it")
    return (f"each sequence serves {request[0]:,}-token prompts and {request[1]:,}-token answers ({given}); "
            f"context {context:,} tokens")


def _throughput(inp: BreakevenInput) -> Throughput:
    raw, source, log, notes, cards, request = _raw_tokens(inp)
    ratio, why = _input_per_output(inp, request)
    tps = cost.effective_tokens_per_s(raw, input_per_output=ratio,
                                      prefill_tokens_per_s=inp.prefill_tokens_per_s,
                                      retry_multiplier=inp.retry_multiplier)
    if inp.retry_multiplier > 1:
        notes.append(f"quality gap: {inp.retry_multiplier:g} attempts per useful answer → {tps:,.1f} "
                     "useful tok/s")
    return Throughput(tps, raw, source, log, notes, cards, ratio, why)


def _input_per_output(inp: BreakevenInput, request: tuple[int, int] | None) -> tuple[float, str]:
    """Prompt tokens the API bills with each output token, and where the figure comes from."""
    if inp.input_per_output is not None:
        return inp.input_per_output, "--input-per-output"
    if request is not None:
        return request[0] / request[1], (f"the request timed: {request[0]:,} prompt / {request[1]:,} answer "
                                         "tokens")
    return DEFAULT_INPUT_PER_OUTPUT, INPUT_PER_OUTPUT_SOURCE


def _comparisons(inp: BreakevenInput, input_per_output: float) -> list[Comparison]:
    reg = apis(inp.catalog)
    chosen: list[ApiPrice] = [reg.get(n) for n in inp.api]
    input_price = inp.api_input_price or 0.0
    for i, p in enumerate(inp.api_price, 1):
        if p <= 0:
            raise InputError(f"--api-price must be above 0 (got {p:g})", field="api_price")
        chosen.append(ApiPrice(id=f"api-{i}", name=f"API at ${p:g}/M", output_usd_per_m=p,
                               input_usd_per_m=input_price, kind="given", source="--api-price"))
    if not chosen:
        chosen = breakeven_guide_tiers(reg)
    return [Comparison(a, cost.api_price_per_output_million(
        a.output_usd_per_m, a.input_usd_per_m, input_per_output, inp.cached_fraction,
        a.cached_input_usd_per_m)) for a in chosen]


@record
class Crossing(Result):
    """Where the API's bill line crosses the flat rent."""

    millions_per_month: float | None
    usd: float


@record
class ApiBreakeven(Result):
    """One API against the rented card."""

    name: str
    id: str
    kind: str
    price_per_million_usd: float  # output + input per output token (cached share at the cached rate)
    output_usd_per_m: float
    input_usd_per_m: float
    cached_input_usd_per_m: float | None
    breakeven_millions_per_month: float | None
    required_duty: float | None
    breaks_even: bool
    crossing: Crossing
    cheaper_at_duty: str  # "rent" or "api"
    date: str | None
    source: str | None


@record
class RentTerms(Result):
    hourly_usd: float
    hours_per_month: float
    billed_hours: float
    monthly_usd: float
    count: int
    discount_fraction: float
    source: str


@record
class ThroughputUsed(Result):
    tokens_per_s: float  # useful output tokens/s after prefill and retries
    measured_tokens_per_s: float
    source: str  # "given", "estimate" or "log (KIND)"
    input_per_output: float  # prompt tokens priced per output token
    prefill_tokens_per_s: float | None
    retry_multiplier: float
    log: LogReading | None
    input_per_output_source: str  # "--input-per-output", the request timed, or the default's source


@record
class HiddenCostsMonth(Result):
    idle_hours: float
    idle_usd: float
    storage_usd: float
    cold_start_hours: float
    cold_start_usd: float
    extra_monthly_usd: float
    total_extra_usd: float


@record
class VolumeRow(Result):
    """The break-even guide's bill table, one volume: rent is flat, each API bill grows with the volume."""

    output_tokens_millions: float
    rent_usd: float
    api_usd: dict[str, float]  # API id → bill
    required_duty: float | None
    within_capacity: bool
    cheaper: tuple[str, ...]  # the APIs whose bill is below the rent


@record
class DutyRow(Result):
    """The break-even guide's cost-per-million table, one duty cycle."""

    duty: float
    self_host_usd_per_million: float
    api_usd_per_million: dict[str, float]  # API id → price


@record
class VolumeCrossing(Result):
    """Where an API's bill line meets the flat rent on the volume chart."""

    api: str
    millions_per_month: float
    usd: float
    label: str
    breaks_even: bool  # the card can serve that volume (else the dot is hollow)


@record
class DutyCrossing(Result):
    """The duty cycle at which the card's cost per million meets an API's price (duty chart)."""

    api: str
    duty: float
    usd_per_million: float


@record
class BreakevenCharts(Result):
    """What `--plot` drew."""

    path: str
    format: str
    crossings: tuple[VolumeCrossing, ...]
    duty_crossings: tuple[DutyCrossing, ...]


def crossings(r: Breakeven) -> tuple[tuple[VolumeCrossing, ...], tuple[DutyCrossing, ...]]:
    """The points the charts mark: each API's break-even volume against the rent (all of them, reachable
    or not) and the duty cycle where it meets the card's cost per million (those reachable at full use)."""
    volume = tuple(
        VolumeCrossing(a.name, be, r.monthly_usd,
                       (f"{fmt_millions(be)} ({a.required_duty:.1%} duty)" if a.breaks_even
                        else f"{fmt_millions(be)}: cannot break even even at full use"), a.breaks_even)
        for a in r.apis if (be := a.breakeven_millions_per_month) is not None)
    duty = tuple(DutyCrossing(a.name, need, a.price_per_million_usd) for a in r.apis
                 if (need := a.required_duty) is not None and need <= 1)
    return volume, duty


@record
class Buy(Result):
    """`breakeven --buy`: the bought set beside the rent and the APIs (the stable keys)."""

    capex_usd: float
    monthly_usd: float  # amortized price + electricity + colocation + ops
    power_w: float  # cards and hosts at the load, before the PUE
    cost_per_million_usd: float  # at the duty
    beats_rent_after_months: float | None  # None: never (the rent is below the running costs)
    beats_api_after_months: float | None  # against the cheapest API compared (buy_terms.api)


@record
class BuyTerms(Result):
    """Where each figure of `buy` comes from."""

    gpu: str | None
    count: int
    card_usd: float  # per card, with its share of the host
    card_w: float
    host_w: float
    utilization: float  # the duty: the share of hours the cards are busy (load-scaled TDP)
    provisioned_w: float
    pue: float
    power_usd_kwh: float
    colo_usd_kw_month: float
    amortize_months: float
    ops_usd_month: float
    amortized_usd_month: float
    energy_kwh_month: float
    power_usd_month: float
    colo_usd_month: float
    api: str | None  # the API beats_api_after_months is counted against (the cheapest compared)
    api_monthly_usd: float | None  # that API's bill for the volume the cards serve at the duty
    date: str | None  # the purchase snapshot's date (None: --purchase-usd given)
    source: str
    power_model: str


@record
class Breakeven(Result):
    """`cardfit breakeven`: the stable keys first, then the break-even guide's tables and the hidden costs."""

    monthly_usd: float
    capacity_millions_per_month: float
    cost_per_million_usd: float  # at the duty
    apis: tuple[ApiBreakeven, ...]
    duty: float
    cost_per_million_full_duty_usd: float
    volume_at_duty_millions_per_month: float
    hourly_usd: float
    hours_per_month: float
    rent: RentTerms
    throughput: ThroughputUsed
    hidden_costs: HiddenCostsMonth
    by_volume: tuple[VolumeRow, ...]
    by_duty: tuple[DutyRow, ...]
    notes: tuple[str, ...]
    plot: BreakevenCharts | None = None  # absent from the JSON when no chart was asked for
    buy: Buy | None = None  # with --buy
    buy_terms: BuyTerms | None = None
    traffic: Traffic | None = None  # with --traffic

    omit_none = ("plot", "buy", "buy_terms", "traffic")


def breakeven_report(inp: BreakevenInput) -> Breakeven:
    """`cardfit breakeven` for one input (and its charts when --plot asks for them)."""
    tp = _throughput(inp)
    rent, comps = _rent(inp, tp.cards), _comparisons(inp, tp.input_per_output)
    hidden = cost.HiddenCosts(inp.storage_gb, inp.storage_usd_per_gb_month, inp.cold_starts_per_month,
                              inp.cold_start_s, inp.extra_monthly_usd)
    hours = rent.hours_per_month
    monthly = rent.monthly_usd + hidden.total_usd(rent.hourly_usd)
    hourly_all_in = monthly / hours
    capacity = cost.capacity_millions(tp.tokens_per_s, hours)
    out = Breakeven(
        monthly_usd=rounded(monthly, 2),
        capacity_millions_per_month=rounded(capacity, 3),
        cost_per_million_usd=rounded(cost.cost_per_million(hourly_all_in, tp.tokens_per_s, inp.duty), 4),
        apis=tuple(_api_row(c, monthly, capacity, inp.duty, hourly_all_in, tp.tokens_per_s) for c in comps),
        duty=inp.duty,
        cost_per_million_full_duty_usd=rounded(cost.cost_per_million(hourly_all_in, tp.tokens_per_s, 1.0), 4),
        volume_at_duty_millions_per_month=rounded(capacity * inp.duty, 3),
        hourly_usd=rounded(rent.hourly_usd, 4),
        hours_per_month=hours,
        rent=RentTerms(rounded(rent.hourly_usd, 4), rent.hours_per_month, rent.billed_hours,
                       rounded(rent.monthly_usd, 2), rent.count, rent.discount_fraction, rent.source),
        throughput=ThroughputUsed(rounded(tp.tokens_per_s, 2), rounded(tp.raw_tokens_per_s, 2), tp.source,
                                  rounded(tp.input_per_output, 4), inp.prefill_tokens_per_s,
                                  inp.retry_multiplier, tp.log, tp.input_per_output_source),
        hidden_costs=_hidden(hidden, rent, inp.duty),
        by_volume=by_volume(monthly, capacity, comps),
        by_duty=by_duty(hourly_all_in, tp.tokens_per_s, comps, inp.duty),
        notes=tuple(tp.notes + _notes(comps, capacity, tp, inp.cached_fraction)),
    )
    if inp.buy:
        from dataclasses import replace

        out = replace(out, **_buy(inp, rent, monthly, capacity, comps))
    elif _buy_options(inp):
        flag = "--" + _buy_options(inp)[0].replace("_", "-")
        raise InputError(f"{flag} prices buying the cards: it goes with --buy", field=flag[2:])
    if inp.traffic:
        from dataclasses import replace

        out = replace(out, traffic=_traffic(inp, rent, comps))
    elif inp.peak_requests_per_s or inp.scale_up_lag_min is not None or inp.min_replicas != 1:
        raise InputError("--peak-requests-per-s, --min-replicas and --scale-up-lag-min go with --traffic",
                         field="traffic")
    if inp.plot:
        from dataclasses import replace

        from ..charts.cost import plot_breakeven

        volume, duty = crossings(out)
        fmt = plot_breakeven(out, inp.plot, volume, duty)
        out = replace(out, plot=BreakevenCharts(inp.plot, fmt, volume, duty))
    return out


_BUY_OPTIONS = ("purchase_usd", "card_w", "host_w", "power_usd_kwh", "pue", "colo_usd_kw_month",
                "amortize_months", "ops_usd_month")


def _buy_options(inp: BreakevenInput) -> list[str]:
    return [k for k in _BUY_OPTIONS if getattr(inp, k)]


def _purchase_row(inp: BreakevenInput, required: bool = True) -> tuple[Any, float | None]:
    """The snapshot's row of the --gpu card (None when --purchase-usd prices it, or, `required` False, when
    the snapshot has none) and the card's rated power from the GPU catalog (its `tdp_w`)."""
    from ..catalog.purchase import default_purchases

    if not inp.gpu:
        if (inp.purchase_usd is not None and inp.card_w is not None) or not required:
            return None, None
        raise InputError("--buy needs the card: --gpu NAME (priced from the purchase snapshot), or "
                         "--purchase-usd USD and --card-w W", field="gpu")
    from ..catalog.gpus import default_gpus, load_gpus

    gpus = load_gpus(tuple(inp.catalog)) if inp.catalog else default_gpus()
    gpu = gpus.get(inp.gpu)
    row = default_purchases().find(gpu.id, gpus.get)
    if required and row is None and inp.purchase_usd is None:
        known = ", ".join(p.gpu for p in default_purchases().rows)
        raise InputError(f"the purchase snapshot has no price for {gpu.name}", field="purchase_usd",
                         hint=f"give --purchase-usd USD (it has {known})")
    if required and inp.card_w is None and not gpu.tdp_w:
        raise InputError(f"the GPU catalog has no board power for {gpu.name}", field="card_w",
                         hint="give --card-w W")
    return row, gpu.tdp_w


@record
class Rated:
    """One bought card: its price with its share of the host, and the rated power of the card and host."""

    usd: float
    card_w: float
    host_w: float


def _rated(inp: BreakevenInput, row: Any, tdp_w: float | None) -> Rated | None:
    """The options given, else the snapshot's row and the GPU catalog's TDP; None when they do not price
    the card."""
    usd = inp.purchase_usd if inp.purchase_usd is not None else (
        row.card_usd + row.host_usd if row is not None else None)
    card_w = inp.card_w if inp.card_w is not None else tdp_w
    if usd is None or not card_w:
        return None
    host_w = inp.host_w if inp.host_w is not None else (row.host_w if row is not None else 0.0)
    return Rated(usd, card_w, host_w)


def _ownership(inp: BreakevenInput, count: int, utilization: float, hours: float,
               rated: Rated) -> cost.Ownership:
    """`count` cards bought, busy `utilization` of the time; the defaults from data/purchase.toml."""
    from ..catalog.purchase import default_purchases

    d = default_purchases().defaults
    watts = (rated.card_w + rated.host_w) * count
    return cost.Ownership(
        capex_usd=rated.usd * count, amortize_months=inp.amortize_months or d.amortize_months,
        power_w=cost.board_power_w(watts, utilization), provisioned_w=watts,
        pue=inp.pue if inp.pue is not None else d.pue,
        power_usd_kwh=inp.power_usd_kwh if inp.power_usd_kwh is not None else d.power_usd_kwh,
        colo_usd_kw_month=inp.colo_usd_kw_month if inp.colo_usd_kw_month is not None else d.colo_usd_kw_month,
        hours_per_month=hours, ops_usd_month=inp.ops_usd_month)


def _buy(inp: BreakevenInput, rent: Rent, monthly: float, capacity: float,
         comps: list[Comparison]) -> dict[str, Any]:
    """`buy` and `buy_terms`: the rented set bought instead, run at the same duty."""
    row, tdp_w = _purchase_row(inp)
    rated = _rated(inp, row, tdp_w)
    assert rated is not None  # _purchase_row refused a card that neither the snapshot nor the options price
    n = rent.count
    own = _ownership(inp, n, inp.duty, rent.hours_per_month, rated)
    volume = capacity * inp.duty
    cheapest = min(comps, key=lambda c: c.price_per_million_usd) if comps else None
    api_bill = volume * cheapest.price_per_million_usd if cheapest else None
    buy = Buy(rounded(own.capex_usd, 2), rounded(own.monthly_usd(), 2), rounded(own.power_w, 1),
              rounded(own.monthly_usd() / volume if volume else math.inf, 4),
              _months(own, monthly), _months(own, api_bill) if api_bill is not None else None)
    from_row = row is not None and inp.purchase_usd is None
    terms = BuyTerms(
        row.gpu if row is not None else inp.gpu, n, rated.usd, rated.card_w, rated.host_w, inp.duty,
        own.provisioned_w, own.pue, own.power_usd_kwh, own.colo_usd_kw_month, own.amortize_months,
        own.ops_usd_month, rounded(own.amortized_usd(), 2), rounded(own.energy_kwh(), 1),
        rounded(own.power_usd(), 2), rounded(own.colo_usd(), 2), cheapest.api.id if cheapest else None,
        rounded(api_bill, 2), row.date if from_row else None, row.source if from_row else "--purchase-usd",
        "load-scaled TDP: (card + host rated W) × cards × duty (WattGPU, arXiv 2607.02391's baseline)")
    return {"buy": buy, "buy_terms": terms}


def _traffic(inp: BreakevenInput, rent: Rent, comps: list[Comparison]) -> Traffic:
    """`--traffic`: deploy's best shape for the model on the card at the curve's peak, scaled hour by hour."""
    from . import deploy as dp
    from . import traffic as tr
    from .speed import DEFAULT_DISK_GBPS

    if not (inp.model and inp.gpu):
        raise InputError("--traffic needs --model M and --gpu G: deploy's search sizes the replicas each "
                         "hour", field="traffic")
    rates = tr.curve(inp.traffic or "", inp.peak_requests_per_s)
    peak = max(rates)
    if peak <= 0:
        raise InputError("the traffic curve has no requests", field="traffic")
    request = _request(inp) or (0, 0)
    dinp = dp.DeployInput(model=inp.model, gpu=(inp.gpu,), runtime=inp.runtime, quant=inp.quant,
                          requests_per_s=peak, catalog=inp.catalog,
                          **({"input_tokens": request[0], "output_tokens": request[1]} if request[0] else {}))
    dp.check(dinp)
    t = dp.targets(dinp)
    found = dp.search(dinp, dp.candidates(dinp, dp.settings(dinp)[0]), t)
    if not found or found[0].monthly_usd is None:
        raise InputError(f"no rented deployment of {inp.model} on {inp.gpu} meets deploy's targets at the "
                         f"curve's peak of {peak:g} requests/s", field="traffic",
                         hint="`cardfit deploy` shows what fails")
    c = found[0].cand

    def replicas(rate: float) -> int:
        res = dp.replicas_at(dinp, c, t, rate)
        if res is None:
            raise InputError(f"no number of replicas meets deploy's targets at {rate:g} requests/s",
                             field="traffic")
        return res.replicas

    def month(k: int) -> float:
        return dp.fitting.set_price(c.gpu, c.cards * k, c.setting.ctx.rules) or 0.0

    rated = _rated(inp, *_purchase_row(inp, required=False))

    def own(cards: int, utilization: float) -> float | None:
        return (None if rated is None
                else _ownership(inp, cards, utilization, rent.hours_per_month, rated).monthly_usd())

    load_min = c.setting.mem.weights.total_bytes / (DEFAULT_DISK_GBPS * 1e9) / 60
    fleet = tr.Fleet(replicas, month, c.gpu.name, c.cards, c.tp, c.setting.ctx.runtime.named,
                     c.setting.ctx.quant.name, load_min)
    cheapest = min(comps, key=lambda x: x.price_per_million_usd) if comps else None
    per_request = (dinp.output_tokens * cheapest.price_per_million_usd / cost.MILLION) if cheapest else None
    return tr.bill(rates, fleet, inp.min_replicas, inp.scale_up_lag_min, own, per_request,
                   cheapest.api.id if cheapest else None)


def _months(own: cost.Ownership, other_usd_month: float) -> float | None:
    m = cost.months_to_overtake(own.capex_usd, own.running_usd(), other_usd_month)
    return None if math.isinf(m) else round(m, 1)


def _api_row(c: Comparison, monthly: float, capacity: float, duty: float, hourly: float,
             tps: float) -> ApiBreakeven:
    be = cost.breakeven_millions(monthly, c.price_per_million_usd)
    need = cost.required_duty(be, capacity)
    own = cost.cost_per_million(hourly, tps, duty)
    a = c.api
    return ApiBreakeven(a.name, a.id, a.kind, rounded(c.price_per_million_usd, 4), a.output_usd_per_m,
                        a.input_usd_per_m, a.cached_input_usd_per_m, rounded(be, 3), rounded(need, 4),
                        need <= 1,
                        Crossing(rounded(be, 3), rounded(monthly, 2)),
                        "rent" if own < c.price_per_million_usd else "api", a.date or None, a.source or None)


def _hidden(h: cost.HiddenCosts, rent: Rent, duty: float) -> HiddenCostsMonth:
    idle_hours = rent.billed_hours * (1 - duty)
    return HiddenCostsMonth(rounded(idle_hours, 1), rounded(idle_hours * rent.hourly_usd, 2),
                            rounded(h.storage_usd(), 2), rounded(h.cold_start_hours(), 2),
                            rounded(h.cold_start_usd(rent.hourly_usd), 2), h.extra_monthly_usd,
                            rounded(h.total_usd(rent.hourly_usd), 2))


def by_volume(monthly: float, capacity: float, comps: list[Comparison],
              volumes: tuple[float, ...] = cost.BREAKEVEN_GUIDE_VOLUMES_MILLIONS) -> tuple[VolumeRow, ...]:
    """The break-even guide's bill table: rent is flat, each API bill grows with the volume."""
    rows = []
    for v in volumes:
        bills = {c.api.id: rounded(v * c.price_per_million_usd, 2) for c in comps}
        rows.append(VolumeRow(v, rounded(monthly, 2), bills, rounded(v / capacity, 4) if capacity else None,
                              v <= capacity,
                              tuple(k for k, b in bills.items() if b is not None and b < monthly)))
    return tuple(rows)


def by_duty(hourly: float, tps: float, comps: list[Comparison], duty: float,
            duties: tuple[float, ...] = cost.BREAKEVEN_GUIDE_DUTIES) -> tuple[DutyRow, ...]:
    """The break-even guide's cost-per-million table: idle hours cost the same and make nothing."""
    all_duties = sorted({*duties, duty}, reverse=True)
    return tuple(DutyRow(d, rounded(cost.cost_per_million(hourly, tps, d), 4),
                         {c.api.id: rounded(c.price_per_million_usd, 4) for c in comps}) for d in all_duties)


def _notes(comps: list[Comparison], capacity: float, tp: Throughput,
           cached_fraction: float = 0.0) -> list[str]:
    dated = sorted({c.api.date for c in comps if c.api.date})
    out = []
    if not tp.input_per_output:
        out.append("API $/M prices output tokens only (--input-per-output 0)")
    elif any(c.api.input_usd_per_m for c in comps):
        out.append(f"API $/M = output price + {tp.input_per_output:g} × input price: "
                   f"{tp.input_per_output:g} prompt tokens billed per output token "
                   f"({tp.input_per_output_source}; --input-per-output 0 prices output only)")
        if cached_fraction:
            out.append(f"{cached_fraction:.0%} of those prompt tokens are billed at each API's cached-input "
                       "rate (--cached-fraction; plain input where an API has none)")
    if dated:
        out.append(f"API prices as of {', '.join(dated)}; check today's price page (`cardfit apis` shows "
                   "sources)")
    from ..catalog.apis import installed_files

    installed = set(installed_files())
    if any(c.api.origin in installed for c in comps):
        snap = max(c.api.date for c in comps if c.api.origin in installed)
        out.append(f"prices from the snapshot installed with `cardfit prices --update` ({snap}; "
                   "`cardfit prices --remove` goes back to the built-in ones)")
    return out


def bounded_measurement(m: Any, path: str) -> Any:
    """A rate read from a log obeys the limits of the same figure given as an option (--tokens-per-s,
    --prefill-tokens-per-s, --concurrency): a 400-digit number is a damaged log, not a measurement."""
    from ..errors import FileFormatError
    from ..readers.logs import HINT

    for what, value, most in (("output tokens/s", m.tokens_per_s, MAX_TOKENS_PER_S),
                              ("prompt tokens/s", m.prompt_tokens_per_s, 10 * MAX_TOKENS_PER_S),
                              ("concurrency", m.concurrency, MAX_BATCH)):
        if value is not None and not 0 <= value <= most:  # NaN fails too
            raise FileFormatError(path,
                                  f"the {m.kind} {what} in this log ({value:.4g}) is outside 0..{most:,.0f}",
                                  hint=HINT)
    return m

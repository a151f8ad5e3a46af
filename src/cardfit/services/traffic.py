"""`breakeven --traffic`: a day (or week) of traffic priced hour by hour. The curve is requests per second per
hour, from a CSV file or a named shape; the replicas each hour need come from deploy's own search
(services/deploy.py `replicas_at`: one deployment shape, the fewest replicas meeting the TTFT/TPOT targets
at that hour's arrivals), never from a second serving model. Priced four ways a month: rented replicas
scaled hour by hour, the peak's replicas rented all month, the peak's cards bought, and the API."""

from __future__ import annotations

from collections.abc import Callable

from ..catalog.records import record
from ..core import cost
from ..errors import FileFormatError, InputError
from .table import Result

MAX_TRAFFIC_BYTES = 64 * 1024  # a week of hourly rows is about 3 KB
MAX_HOURS = 168  # a week
MAX_RATE = 1_000_000.0  # deploy's own --requests-per-s limit
DAYS_PER_MONTH = cost.HOURS_PER_MONTH / 24  # the 720-hour month of every monthly figure
# A replica kept up at every hour, so the first request of a quiet hour finds a server: Kubernetes'
# HorizontalPodAutoscaler minReplicas default ("minReplicas ... It defaults to 1 pod",
# autoscaling/v2 HorizontalPodAutoscalerSpec).
DEFAULT_MIN_REPLICAS = 1

# The named shapes: the share of the peak each hour of a day (UTC).
#  business-hours: a working day, 09:00-17:00 (hours 9..16), nothing outside it;
#  batch-night: the break-even guide's "nightly batch classification job, 6 hours every night" (0..5);
#  global: three business days, Asia (UTC+8: hours 1..8), Europe (UTC+1: 8..15) and the Americas (UTC-5:
#  14..21), each region's share equal, normalized to the busiest hour (two regions overlap).
_REGIONS = ((1, 8), (8, 15), (14, 21))


def _global_shape() -> tuple[float, ...]:
    count = [sum(lo <= h <= hi for lo, hi in _REGIONS) for h in range(24)]
    return tuple(c / max(count) for c in count)


SHAPES: dict[str, tuple[float, ...]] = {
    "business-hours": tuple(1.0 if 9 <= h <= 16 else 0.0 for h in range(24)),
    "batch-night": tuple(1.0 if h <= 5 else 0.0 for h in range(24)),
    "global": _global_shape(),
}


def curve(spec: str, peak_requests_per_s: float | None) -> tuple[float, ...]:
    """Requests per second at each hour: a named shape × the peak, or the rows of a CSV file."""
    if spec in SHAPES:
        if not peak_requests_per_s:
            raise InputError(f"the '{spec}' shape needs its peak: --peak-requests-per-s R",
                             field="peak_requests_per_s")
        return tuple(round(f * peak_requests_per_s, 6) for f in SHAPES[spec])
    if peak_requests_per_s:
        raise InputError("--peak-requests-per-s scales a named shape; a CSV file gives its own rates",
                         field="peak_requests_per_s")
    from ..readers.source import read_regular

    if not spec.lower().endswith((".csv", ".txt")):
        raise InputError(f"--traffic takes a CSV file or one of {', '.join(SHAPES)} (got '{spec[:80]}')",
                         field="traffic")
    return parse_curve(read_regular(spec, MAX_TRAFFIC_BYTES, "traffic file"), spec)


HINT = "one `hour,requests_per_s` row per hour, hours 0, 1, 2 … (24 for a day, 168 for a week)"


def parse_curve(data: bytes, path: str) -> tuple[float, ...]:
    """`hour,requests_per_s` rows (a header line and `#` comments allowed), hours 0..n-1 each once."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise FileFormatError(path, "is not UTF-8 text", hint=HINT) from None
    rates: dict[int, float] = {}
    for number, line in enumerate(text.splitlines(), 1):
        row = line.split("#", 1)[0].strip()
        if not row:
            continue
        fields = [f.strip() for f in row.split(",")]
        if number == 1 and fields[0].lower() == "hour":
            continue
        hour, rate = _row(fields, number, path)
        if hour in rates:
            raise FileFormatError(path, f"line {number}: hour {hour} is given twice", hint=HINT)
        rates[hour] = rate
    if not rates:
        raise FileFormatError(path, "has no rows", hint=HINT)
    missing = [h for h in range(len(rates)) if h not in rates]
    if missing:
        raise FileFormatError(path, f"hour {missing[0]} is missing (hours run 0 to {len(rates) - 1})",
                              hint=HINT)
    return tuple(rates[h] for h in range(len(rates)))


def _row(fields: list[str], number: int, path: str) -> tuple[int, float]:
    if len(fields) != 2:
        raise FileFormatError(path, f"line {number}: expected 2 fields, found {len(fields)}", hint=HINT)
    try:
        hour, rate = int(fields[0]), float(fields[1])
    except ValueError:
        raise FileFormatError(path, f"line {number}: '{fields[0][:20]}' / '{fields[1][:20]}' is not an hour "
                              "and a rate", hint=HINT) from None
    if not 0 <= hour < MAX_HOURS:
        raise FileFormatError(path, f"line {number}: hour {hour} is outside 0..{MAX_HOURS - 1}", hint=HINT)
    if not 0 <= rate <= MAX_RATE:  # NaN fails too
        raise FileFormatError(path, f"line {number}: {rate:g} requests/s is outside 0..{MAX_RATE:,.0f}",
                              hint=HINT)
    return hour, rate


@record
class TrafficHour(Result):
    hour: int
    requests_per_s: float
    replicas: int
    usd: float  # rent of the replicas up this hour, with the early start of those added for the next


@record
class TrafficMonthly(Result):
    autoscaled: float
    always_on: float  # the peak's replicas rented all month
    buy: float | None  # the peak's cards bought (None: no purchase price for the card)
    api: float | None  # the cheapest API compared, for every request of the month


@record
class Traffic(Result):
    hours: tuple[TrafficHour, ...]
    monthly_usd: TrafficMonthly
    gpu: str
    cards_per_replica: int
    tp: int
    runtime: str
    quant: str
    peak_replicas: int
    min_replicas: int
    scale_up_lag_min: float
    scale_up_lag_source: str
    gpu_hours_per_day: float
    days_per_month: float
    api: str | None
    replicas_source: str
    cheapest_mix: Mix | None  # None: no purchase price for the card


@record
class Fleet:
    """What the traffic bill needs of the deployment: its shape and how to price it."""

    replicas: Callable[[float], int]  # requests/s → the fewest replicas meeting the targets
    monthly_usd: Callable[[int], float]  # replicas → the rent of their cards for a month (fleet discount)
    gpu: str
    cards_per_replica: int
    tp: int
    runtime: str
    quant: str
    load_minutes: float  # the replica's weights read from disk (the scale-up lag's default)


def _rented(need: list[int], fleet: Fleet, lag: float) -> list[float]:
    """Rent per hour of `need` replicas: a replica started `lag` minutes before the hour it is needed is
    paid from then on, at that fleet's rate (the curve repeats: the last hour leads into the first)."""
    n = len(need)
    out = []
    for h, k in enumerate(need):
        up = need[(h + 1) % n]
        early = max(up - k, 0) * lag / 60 * fleet.monthly_usd(up) / max(up, 1)
        out.append((fleet.monthly_usd(k) + early) / cost.HOURS_PER_MONTH)
    return out


@record
class Mix(Result):
    """The cheapest split of the day between a base of bought replicas and rented ones above it."""

    owned_replicas: int
    owned_usd: float  # a month of the bought base (price spread over the amortization, power, colocation)
    rented_usd: float  # a month of the replicas rented above the base, hour by hour
    monthly_usd: float


def cheapest_mix(need: list[int], fleet: Fleet, lag: float, own: Callable[[int, float], float | None],
                 repeats: float) -> Mix | None:
    """Every base of 0 … peak bought replicas, each busy the hours it is needed, the rest rented."""
    best: Mix | None = None
    for base in range(max(need) + 1):
        busy = sum(min(k, base) for k in need) / (base * len(need)) if base else 0.0
        owned = own(base * fleet.cards_per_replica, busy) if base else 0.0
        if owned is None:
            return None
        rented = sum(_rented([max(k - base, 0) for k in need], fleet, lag)) * repeats
        if best is None or owned + rented < best.monthly_usd:
            best = Mix(base, round(owned, 2), round(rented, 2), round(owned + rented, 2))
    return best


def bill(rates: tuple[float, ...], fleet: Fleet, min_replicas: int, lag_min: float | None,
         own: Callable[[int, float], float | None], api_usd_per_request: float | None,
         api: str | None) -> Traffic:
    """Replicas each hour, their rent, and the month four ways (`own(cards, utilization)`: the bought
    cards' month), with the cheapest mix of bought and rented replicas."""
    per_level: dict[float, int] = {}
    need = []
    for r in rates:
        if r not in per_level:
            per_level[r] = fleet.replicas(r) if r > 0 else 0
        need.append(max(per_level[r], min_replicas))
    lag = fleet.load_minutes if lag_min is None else lag_min
    n = len(rates)
    usd = _rented(need, fleet, lag)
    hours = tuple(TrafficHour(h, r, k, round(u, 4)) for h, (r, k, u) in enumerate(zip(rates, need, usd,
                                                                                          strict=True)))
    repeats = cost.HOURS_PER_MONTH / n
    peak = max(need)
    utilization = sum(need) / (peak * n) if peak else 0.0
    owned = own(peak * fleet.cards_per_replica, utilization) if peak else 0.0
    api_month = (sum(rates) * 3600 * api_usd_per_request * repeats if api_usd_per_request is not None
                 else None)
    monthly = TrafficMonthly(round(sum(usd) * repeats, 2),
                             round(fleet.monthly_usd(peak), 2) if peak else 0.0,
                             None if owned is None else round(owned, 2),
                             None if api_month is None else round(api_month, 2))
    lag_source = ("--scale-up-lag-min" if lag_min is not None else
                  "the replica's weights read from disk at 3.5 GB/s (speed's cold start)")
    return Traffic(hours, monthly, fleet.gpu, fleet.cards_per_replica, fleet.tp, fleet.runtime,
                   fleet.quant, peak, min_replicas, round(lag, 2), lag_source,
                   round(sum(need) * fleet.cards_per_replica * 24 / n, 2), DAYS_PER_MONTH, api,
                   "deploy's search at each hour's requests/s (the TTFT/TPOT targets of `cardfit deploy`)",
                   cheapest_mix(need, fleet, lag, own, repeats))

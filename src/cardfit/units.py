"""Display units. Bytes are integers everywhere inside cardfit; this is the one place they become text.
The label always matches the divisor: GB = 10**9 bytes, GiB = 2**30 bytes."""

from __future__ import annotations

import math

GB = 10**9
GIB = 2**30
MIB = 2**20
UNITS = {"GB": GB, "GiB": GIB}


def fmt_bytes(n: int | float, unit: str = "GB", digits: int = 1) -> str:
    """`fmt_bytes(150_754_820_096)` → '150.8 GB'."""
    text = f"{n / UNITS[unit]:,.{digits}f}"
    if text.startswith("-") and not text.strip("-0.,"):  # -0.0: a rounding of almost nothing, not a shortfall
        text = text[1:]
    return f"{text} {unit}"


def fmt_shortfall(n: int | float) -> str:
    """A positive shortfall: `fmt_bytes` in GB, or in MB under 0.05 GB (so never "needs 0.0 GB more").
    `fmt_shortfall(31_000_000)` → '31 MB'."""
    if 0 < n < 0.05 * GB:
        return f"{max(1, round(n / 10**6)):,} MB"
    return fmt_bytes(n)


def fmt_rate(tokens_per_s: float | None) -> str:
    if tokens_per_s is None:
        return "—"
    return f"{tokens_per_s:,.0f}" if tokens_per_s >= 100 else f"{tokens_per_s:,.1f}"


def fmt_usd(usd: float | None, digits: int = 0) -> str:
    """Dollars as the web page prints them (fmt_num: halves away from zero)."""
    return "—" if usd is None else "$" + fmt_num(usd, digits)


def fmt_num(x: float, digits: int = 0) -> str:
    """`x` with thousands separators, rounded as the web page's `num()` rounds it (Intl.NumberFormat: the
    float's exact value, halves away from zero), not as Python's format does (halves to even): $190.50 is
    '191' on both, not '190' here and '191' there. Exact, in integers: the float is a fraction n / 2^k
    (float.as_integer_ratio), so |x| × 10^digits is split into a whole part and a remainder, and a remainder
    of half or more rounds up (what decimal's ROUND_HALF_UP does, without importing decimal on every command
    that prints a price; tests/test_units.py holds the two equal)."""
    if not math.isfinite(x):
        return f"{x:,.{digits}f}"
    scale = 10**digits
    n, d = abs(x).as_integer_ratio()
    whole, rest = divmod(n * scale, d)
    if 2 * rest >= d:
        whole += 1
    sign = "-" if math.copysign(1.0, x) < 0 else ""  # -0.2 is '-0', as decimal's quantize kept it
    return sign + f"{whole // scale:,}" + (f".{whole % scale:0{digits}d}" if digits else "")


def fmt_tokens(n: int) -> str:
    """8192 → '8K', 131072 → '128K', 1000 → '1,000'."""
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024:,}K"
    return f"{n:,}"


def rounded(x: float | None, digits: int = 2) -> float | None:
    """A figure for JSON: rounded to `digits`, or None where there is none (None, NaN, infinite). round()
    converts to decimal and back (~3,400 instructions a call on CPython 3.11), and the every-card plan rounds
    ~600 figures an answer, most of them the same from one answer to the next (a card's price, its hourly
    rent, a break-even volume): a whole float is its own rounding to any digits >= 0 (round() gives it back,
    -0.0 and all), and a float's rounding is kept by value, one table per number of digits (_ROUNDED: exact,
    as round() is a function of the value and the digits; a float key, so that a lookup makes no tuple and
    a kept rounding no object the garbage collector tracks; zeros are never kept, as 0.0 and -0.0 are one
    key)."""
    if type(x) is float and 0 <= digits < ROUNDED_DIGITS:
        kept = _ROUNDED[digits]
        found = kept.get(x)
        if found is not None:
            return found
        if not math.isfinite(x):  # (NaN or infinite)
            return None
        found = x if x == x // 1 else round(x, digits)
        if x:
            if len(kept) >= ROUNDED_KEPT:
                kept.clear()  # one atomic step (the web app's worker threads share it and take no lock)
            kept[x] = found
        return found
    if x is None or not math.isfinite(x):  # (NaN or infinite)
        return None
    return round(x, digits)


ROUNDED_KEPT = 8192  # roundings kept for each number of digits (~100 bytes each)
ROUNDED_DIGITS = 8  # digits 0-7 kept (the figures round to 0-4)
_ROUNDED: tuple[dict[float, float], ...] = tuple({} for _ in range(ROUNDED_DIGITS))


def fmt_millions(x: float) -> str:
    """Millions of tokens: '24.3 M', '1,250 M'."""
    return f"{x:,.0f} M" if x >= 100 else f"{x:,.1f} M"

"""units.fmt_num rounds in integers (no decimal import on the plan path): held equal to decimal's
ROUND_HALF_UP of the float's exact value, which is how the web page's Intl.NumberFormat rounds."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cardfit.units import fmt_num, fmt_shortfall, fmt_usd


def by_decimal(x: float, digits: int) -> str:
    """The rounding fmt_num had before it stopped importing decimal (units.py at 340a856)."""
    return f"{Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP):,.{digits}f}"


# (value, digits, printed): each a case where half-to-even, float formatting or the sign goes wrong
CASES = [
    (190.5, 0, "191"),  # an exact half: Python's format gives 190 (half to even)
    (2.5, 0, "3"),
    (0.125, 2, "0.13"),  # exact in binary: a true half at the third digit
    (1.005, 2, "1.00"),  # 1.00499999999999989…: below the half, though it reads as one
    (0.5, 0, "1"),
    (1234567.891, 2, "1,234,567.89"),  # thousands separators
    (-190.5, 0, "-191"),  # halves away from zero on both sides
    (-0.2, 0, "-0"),  # a negative that rounds to nothing keeps its sign, as decimal printed it
    (-0.0, 1, "-0.0"),
    (0.0, 3, "0.000"),
    (7, 0, "7"),  # an int
    (1e20, 0, "100,000,000,000,000,000,000"),
    (5e-324, 2, "0.00"),  # the smallest float
]


@pytest.mark.parametrize(("x", "digits", "printed"), CASES)
def test_fmt_num_cases(x, digits, printed):
    assert fmt_num(x, digits) == printed
    assert by_decimal(x, digits) == printed


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e15, max_value=1e15),
       st.integers(min_value=0, max_value=6))
def test_fmt_num_equals_decimal_half_up(x, digits):
    assert fmt_num(x, digits) == by_decimal(x, digits)


@given(st.integers(min_value=-10**12, max_value=10**12).map(lambda k: k / 8), st.integers(0, 2))
def test_fmt_num_on_exact_halves(x, digits):
    """Eighths are exact in binary: every tie (…5 at the digit after the last) is met, not approximated."""
    assert fmt_num(x, digits) == by_decimal(x, digits)


def test_fmt_num_past_decimals_precision():
    """decimal's default 28 digits made quantize fail on a figure this large; the integer rounding prints the
    float's exact value (1e30 is 1,000,000,000,000,000,019,884,624,838,656 as a double)."""
    with pytest.raises(InvalidOperation):
        by_decimal(1e30, 0)
    assert fmt_num(1e30, 0) == "1,000,000,000,000,000,019,884,624,838,656" == f"{int(1e30):,}"


@pytest.mark.parametrize(("x", "printed"),
                         [(float("inf"), "inf"), (float("-inf"), "-inf"), (float("nan"), "nan")])
def test_fmt_num_not_finite(x, printed):
    assert fmt_num(x) == printed


def test_fmt_usd():
    assert fmt_usd(None) == "—"
    assert fmt_usd(1899.5) == "$1,900"
    assert fmt_usd(0.125, 2) == "$0.13"


# a shortfall printed in a fit's reason ("needs X more"): never "0.0 GB" for a card a few MB short
@pytest.mark.parametrize(("n", "printed"), [
    (36_000_000, "36 MB"),  # Llama 3.1 8B BF16, 32 × 1,300 tokens on one RTX 4090 under vLLM 0.10.1
    (400_000, "1 MB"),  # under half a MB: still a shortfall
    (49_999_999, "50 MB"),
    (50_000_000, "0.1 GB"),  # from 0.05 GB the GB figure reads
    (28_900_000_000, "28.9 GB"),
])
def test_fmt_shortfall(n, printed):
    assert fmt_shortfall(n) == printed

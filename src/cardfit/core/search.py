"""Bisection over whole numbers, for every "largest n that still fits" / "smallest n that meets" question
(context, sequences, concurrency, replicas): `ok` must be monotone over the range."""

from __future__ import annotations

from collections.abc import Callable


def largest_true(ok: Callable[[int], bool], lo: int, hi: int) -> int:
    """Largest n in [lo, hi] with ok(n), given ok(lo) holds and ok is true then false."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def smallest_true(ok: Callable[[int], bool], lo: int, hi: int) -> int:
    """Smallest n in [lo, hi] with ok(n), given ok(hi) holds and ok is false then true."""
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo

"""Bisection over whole numbers, for every "largest n that still fits" / "smallest n that meets" question
(context, sequences, concurrency, replicas): `ok` must be monotone over the range."""

from __future__ import annotations

from collections.abc import Callable


def largest_true(ok: Callable[[int], bool], lo: int, hi: int,
                 enough: Callable[[int, int], bool] | None = None) -> int:
    """Largest n in [lo, hi] with ok(n), given ok(lo) holds and ok is true then false. `enough(lo, hi)`: the
    caller's answer is the same for every n the search may still return (those in [lo, hi]); the search then
    returns lo."""
    while lo < hi:
        if enough is not None and enough(lo, hi):
            return lo
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


def largest_true_ratio(ok: Callable[[float], bool], lo: float, hi: float, steps: int) -> float:
    """Largest x in [lo, hi] with ok(x) to within a factor (hi / lo) ** (1 / 2**steps), bisecting in log
    space (a multiplier of the load, of the traffic); ok(lo) holds and ok is true then false."""
    import math

    for _ in range(steps):
        mid = math.sqrt(lo * hi)
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo

"""Small shared helpers for tests: run a plan from keyword arguments; fail a block that would hang."""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Iterator

from cardfit.services.inputs import PlanInput
from cardfit.services.plan import plan


def plan_of(**kw):
    return plan(PlanInput(**kw))


def option_for(p, gpu_name: str):
    return next(c.option for c in p.cards if c.option.gpu.name == gpu_name)


class Hung(BaseException):
    """Not an OSError (which readers catch): nothing in cardfit may swallow it."""


@contextlib.contextmanager
def within(seconds: float) -> Iterator[None]:
    """Fail (instead of hanging the suite) when the block takes longer than `seconds` of wall time: a blocked
    open() of a FIFO is interrupted by the alarm (PEP 475: the handler's exception ends the retry)."""

    def expired(signum, frame):  # noqa: ARG001
        raise Hung(f"took longer than {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    start = time.perf_counter()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert time.perf_counter() - start < seconds

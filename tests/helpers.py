"""Small shared helpers for tests: run a plan from keyword arguments; fail a block that would hang; a
record's stored first-contact row and today's error against the figures a test file holds."""

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


def first_contact_rows() -> dict:
    """data/first_contact.toml's rows by record id (scripts/first_contact.py writes them, never edits)."""
    import tomllib
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "src" / "cardfit" / "data" / "first_contact.toml"
    return {s["id"]: s for s in tomllib.loads(path.read_text(encoding="utf-8"))["score"]}


def check_first_contact(r: dict, first: dict, file: str, code_at: str, held: dict,
                        kind: str = "decode") -> None:
    """The row scripts/first_contact.py wrote for record `r`: its measured value, scored by `code_at`'s code
    (the commit before `file` was added), at the error `held` keeps for it."""
    import pytest

    s = first.get(r["id"])
    assert s is not None, f"{r['id']}: no first-contact row (scripts/first_contact.py --new)"
    assert s["file"] == file and s["kind"] == kind and s["code_at"] == code_at
    assert s["measured"] == pytest.approx(float(r["measured"]))
    assert s["predicted"] / s["measured"] - 1 == pytest.approx(held[r["id"]], abs=0.0015)


def check_today(r: dict, today: dict) -> None:
    """Record `r` scores today at the error `today` holds for it (a change of its model shows here)."""
    import pytest

    from cardfit.validation.validate import predict

    o = predict(r)
    assert o.predicted is not None, o.skipped
    assert o.predicted / float(r["measured"]) - 1 == pytest.approx(today[r["id"]], abs=0.0015)


def readme_deploy_question() -> tuple:
    """The README's deploy question (Llama 3.1 8B, vLLM, 32 users, TTFT p90 1.5 s, TPOT 50 ms) as deploy's
    search sees it: (input, targets, candidates, the aggregated answer, the one-node candidates of its card
    and setting), for the tests that take its P/D splits apart."""
    from cardfit.services import deploy as dp

    inp = dp.DeployInput(model="meta-llama/Llama-3.1-8B-Instruct", users=32.0, ttft_ms=1500.0, tpot_ms=50.0,
                         runtime="vllm")
    t = dp.targets(inp)
    cands = dp.candidates(inp, dp.settings(inp)[0])
    agg = dp.search(inp, cands, t)[0]
    same = [c for c in cands if c.setting is agg.cand.setting and c.gpu == agg.cand.gpu and c.nodes == 1]
    return inp, t, cands, agg, same


def load_script(name: str, register: bool = False):
    """scripts/NAME.py as a module (the scripts are not a package); `register` puts it in sys.modules first,
    for a script whose dataclasses look their module up."""
    import importlib.util
    import sys
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parent.parent / "scripts"
                                                  / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod

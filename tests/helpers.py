"""Small shared helpers for tests: run a plan from keyword arguments."""

from __future__ import annotations

from cardfit.services.inputs import PlanInput
from cardfit.services.plan import plan


def plan_of(**kw):
    return plan(PlanInput(**kw))


def option_for(p, gpu_name: str):
    return next(c.option for c in p.cards if c.option.gpu.name == gpu_name)

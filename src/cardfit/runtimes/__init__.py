"""Runtime adapters, one per family of engines (memory accounting, speed constants) and one per serving
runtime (a subclass of its family with its launch line; launch.py holds what every line shares).

A catalog profile (data/runtimes.toml) names its adapter module in `family`; `adapter(profile)` imports
runtimes/<family>.py and wraps the profile in its `ADAPTER` class. Adding a runtime is a catalog row (a known
family) or a catalog row plus one new adapter module: nothing else lists runtimes (docs/DEVELOPING.md)."""

from __future__ import annotations

import importlib
import re

from ..catalog.runtimes import RuntimeProfile
from ..errors import CatalogError
from .base import Runtime, SpeedConstants

__all__ = ["Runtime", "SpeedConstants", "adapter", "fork"]

_FAMILY = re.compile(r"^[a-z][a-z0-9_]*$")


def adapter(profile: RuntimeProfile) -> Runtime:
    """The memory and speed model of the profile's family."""
    global _LAST
    last = _LAST  # the profile asked last and its adapter: one identity test (a plan asks a few per card)
    if last[0] is profile:
        return last[1]
    hit = _ADAPTERS.get(profile)
    if hit is None:
        hit = _ADAPTERS[profile] = _adapter(profile)
        if len(_ADAPTERS) > 512:  # validation builds a profile per record; keep the newest
            del _ADAPTERS[next(iter(_ADAPTERS))]
    _LAST = (profile, hit)  # one atomic step: threads share it
    return hit


_ADAPTERS: dict[RuntimeProfile, Runtime] = {}
_LAST: tuple[RuntimeProfile | None, Runtime | None] = (None, None)


def _adapter(profile: RuntimeProfile) -> Runtime:
    family = profile.family
    if not _FAMILY.match(family) or family in ("base", "launch"):
        raise CatalogError(f"runtime '{profile.id}': family '{family}' is not a module of cardfit/runtimes/")
    try:
        module = importlib.import_module(f"{__name__}.{family}")
    except ModuleNotFoundError as e:
        raise CatalogError(f"runtime '{profile.id}': no adapter cardfit/runtimes/{family}.py") from e
    cls: type[Runtime] = module.ADAPTER
    return cls(profile)


def fork(name: str) -> RuntimeProfile | None:
    """The profile of a fork an adapter lists (llamacpp_like.FORKS: ik_llama.cpp), else None."""
    from dataclasses import replace

    from ..catalog.runtimes import default_runtimes
    from .llamacpp_like import FORKS

    key = name.strip().lower().replace("_", "-").replace(".", "")
    if key not in FORKS:
        return None
    base, fields = FORKS[key]
    return replace(default_runtimes().get(base), **fields)

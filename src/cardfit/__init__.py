"""cardfit: does this LLM fit on that GPU, at which precision and context, how fast, and at what cost?

The Python API mirrors the CLI: each function takes the same keyword arguments as the command's options
and returns the same plain data as its `--json` output. The functions come from the command table
(cardfit/services/table.py): `plan`, `max_context`, `max_sequences`, `largest_model`, `speed`, `finetune`,
`breakeven`, `validate`, … Bad input raises CardfitError (also a ValueError) with one line that says why.

    >>> import cardfit
    >>> p = cardfit.plan(model="llama3.1:8b", gpu="RTX 4090")
    >>> p["gpus"][0]["verdict"], p["memory"]["total_bytes"] > 0
    ('fits', True)
"""

from __future__ import annotations

from .errors import CardfitError as CardfitError

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing before the command line sets its GC
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from .services.table import Command

__version__ = "0.5.0"  # the one place the version is written (pyproject.toml reads it from here)

# The package's own modules: never a function of the command table (an attribute lookup for one of them, as
# `from . import x` makes before x is imported, is answered without importing the table; a module missing
# here only makes that lookup import the table first).
_MODULES = frozenset({"catalog", "charts", "cli", "core", "errors", "names", "readers", "runtimes",
                      "services", "units", "validation", "web"})


def _function(command: Command) -> Callable[..., Any]:
    from .services.table import to_json

    def run(*args: Any, **options: Any) -> Any:
        if args:
            if command.argument is None or len(args) > 1:
                raise TypeError(f"{command.function}() takes keyword arguments only"
                                + (f" after {command.argument}" if command.argument else ""))
            options = {command.argument: args[0], **options}
        return to_json(command.call(options))

    run.__name__ = run.__qualname__ = command.function
    run.__doc__ = (f"`cardfit {command.name}`: {command.summary}. Takes the command's options as keywords"
                   f"{f' ({command.argument} may come first)' if command.argument else ''}; returns its "
                   "--json data.")
    return run


def __getattr__(name: str) -> Any:
    """The functions of the command table (and `__all__`), made on first use (PEP 562): importing cardfit
    reads no table, so the command line's `python -m cardfit` imports typing and dataclasses only once it has
    set its garbage-collection threshold (cli/__init__.py GC_THRESHOLD; ~6 collections, ~1 ms, before)."""
    if name in _MODULES or (name.startswith("_") and name != "__all__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .services.table import COMMANDS

    if name == "__all__":
        value: Any = [*(c.function for c in COMMANDS), "CardfitError"]
    else:
        command = next((c for c in COMMANDS if c.function == name), None)
        if command is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = _function(command)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    from .services.table import COMMANDS

    return sorted({*globals(), *(c.function for c in COMMANDS), "__all__"})

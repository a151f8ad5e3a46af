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

from collections.abc import Callable
from typing import Any

from .errors import CardfitError
from .services.table import COMMANDS, Command, to_json

__version__ = "0.5.0"  # the one place the version is written (pyproject.toml reads it from here)


def _function(command: Command) -> Callable[..., Any]:
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


for _command in COMMANDS:
    globals()[_command.function] = _function(_command)
del _command

__all__ = [*(c.function for c in COMMANDS), "CardfitError"]

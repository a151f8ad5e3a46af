"""One error tree for cardfit. Each error also subclasses the matching built-in, carries its details as
fields, and reads as one line that says what to do next. The CLI prints `Error: <message>`; the web API
returns it as a 4xx JSON body."""

from __future__ import annotations


class CardfitError(Exception):
    """Base of every error cardfit raises on purpose."""

    hint: str = ""

    def __init__(self, message: str, *, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint or self.hint

    def __str__(self) -> str:
        return f"{self.message}; {self.hint}" if self.hint else self.message


class InputError(CardfitError, ValueError):
    """A value the user gave is out of range or inconsistent."""

    def __init__(self, message: str, *, field: str = "", hint: str = "") -> None:
        super().__init__(message, hint=hint)
        self.field = field


class UnknownNameError(CardfitError, LookupError):
    """A model, GPU, quantization, runtime or API name that no catalog knows."""

    def __init__(self, kind: str, name: str, suggestions: list[str], listing: str) -> None:
        self.kind, self.name, self.suggestions = kind, name, suggestions
        shown = name if len(name) <= 80 else name[:77] + "..."
        did_you_mean = f"; did you mean {' or '.join(suggestions)}?" if suggestions else ""
        hint = listing if listing.startswith("one of ") else f"`{listing}` lists them"
        super().__init__(f"unknown {kind} '{shown}'{did_you_mean}", hint=hint)


class CatalogError(CardfitError, ValueError):
    """A catalog file (built-in or the user's) is malformed or repeats an id."""

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path


class FileFormatError(CardfitError, ValueError):
    """A model file (config.json, safetensors, GGUF, log) could not be parsed."""

    def __init__(self, path: str, problem: str, *, hint: str = "") -> None:
        super().__init__(f"{path}: {problem}", hint=hint)
        self.path, self.problem = path, problem


class MissingFigureError(CardfitError, ValueError):
    """A calculation needs a figure the catalog does not have (bandwidth, TFLOPS, price)."""

    def __init__(self, what: str, subject: str, how: str) -> None:
        super().__init__(f"{subject} has no published {what}", hint=how)
        self.what, self.subject = what, subject


class NetworkError(CardfitError, OSError):
    """Reading from the Hugging Face Hub failed."""


class NoAnswerError(CardfitError, LookupError):
    """The input was sound but has no answer (`cardfit deploy`: nothing meets the targets within the limits).
    The CLI prints the result first (text or JSON), then `Error: …` on stderr, and exits 3 (bad input: 2)."""

    exit_status = 3


def need_extra(*modules: str, extra: str, what: str) -> None:
    """One line naming the extra to install when a feature's optional packages are missing (`pip install
    cardfit` is the CLI and library; the web server, charts, GGUF files and the Hub are extras)."""
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise InputError(f"{what} needs {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} "
                         f"not installed", field=extra, hint=f"pip install 'cardfit[{extra}]'")

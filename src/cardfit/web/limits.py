"""What the web API refuses before any arithmetic runs: oversized bodies, model files, catalog files and the
network. The CLI may read a path the user typed; a request may not make the server open anything."""

from __future__ import annotations

from typing import Any

from ..catalog.models import default_models
from ..errors import CardfitError, InputError

MAX_BODY_BYTES = 64 * 1024  # a JSON request: the largest input model is well under 2 KB
MAX_UPLOAD_BYTES = 1024 * 1024  # a config.json or a pasted log
UPLOAD_PATHS = ("/api/read/config", "/api/read/log")
_FILE_SUFFIXES = (".json", ".gguf", ".safetensors", ".bin", ".pt", ".toml")


class TooLargeError(CardfitError, ValueError):
    """The request body is over the cap for its endpoint."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"request body is larger than {limit:,} bytes", hint="send less")
        self.limit = limit


def body_limit(path: str) -> int:
    return MAX_UPLOAD_BYTES if path in UPLOAD_PATHS else MAX_BODY_BYTES


def catalog_model(name: str) -> str:
    """The name to hand to the planner for a web request: only catalog names, never a path.

    Returns a name that `resolve` finds in the catalog and that is no path (an HF id's slash becomes a space,
    which catalog lookup ignores); raises UnknownNameError with suggestions for names no catalog knows."""
    from ..services.resolve import tag_quant

    n = name.strip()
    if n.lower().endswith(_FILE_SUFFIXES) or n.startswith(("/", "~", ".", "\\")):
        raise InputError(f"model '{n}' looks like a file path; the web API takes catalog names only",
                         field="model",
                         hint="upload a config.json to /api/read/config, or `cardfit models` lists the names")
    models = default_models()
    found = models.find(n)
    if found is None:
        m = tag_quant(n)
        if not (m and models.find(m["base"]) is not None):
            models.get(n)  # raises UnknownNameError with suggestions
    else:
        n = n.replace("/", " ")  # an HF id: catalog lookup ignores separators, the file system does not
    if "/" in n or "\\" in n:
        raise InputError(f"model '{n}' names a file on the server; the web API takes catalog names only",
                         field="model", hint="`cardfit models` lists them")
    return n


# Inputs the CLI takes as file paths: a web request may not name files on the server.
SERVER_FILES = {"catalog": "catalog files", "from_log": "log files (paste the log instead)",
                "plot": "chart files"}


def web_input(inp: Any) -> Any:
    """Refuse what a web request may not ask for (server files, the network); map the model name to a
    catalog name."""
    for name, what in SERVER_FILES.items():
        if getattr(inp, name, None):
            raise InputError(f"--{name.replace('_', '-')}: the web API does not read or write {what}",
                             field=name, hint="use the CLI for files on this machine")
    traffic = getattr(inp, "traffic", None)
    if traffic:
        from ..services.traffic import SHAPES

        if traffic not in SHAPES:
            raise InputError("--traffic: the web API does not read traffic files; name a shape "
                             f"({', '.join(SHAPES)})", field="traffic", hint="use the CLI for a CSV file")
    if getattr(inp, "hub", False):
        raise InputError("the web API does not read from the Hugging Face Hub", field="hub",
                         hint="upload the model's config.json instead")
    model = getattr(inp, "model", None)
    if not isinstance(model, str):
        return inp
    return inp.replace(model=catalog_model(model))

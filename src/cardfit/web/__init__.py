"""`cardfit serve`: a local web page and a JSON API over the same library the CLI calls.

FastAPI and uvicorn are imported only when the app is built, so `import cardfit` and `cardfit --help`
stay fast."""

from __future__ import annotations

from typing import Any


def create_app(**kwargs: Any) -> Any:
    """The FastAPI application (see `cardfit.web.app.create_app`)."""
    from ..errors import need_extra

    need_extra("fastapi", "pydantic", extra="web", what="the web app")
    from .app import create_app as _create

    return _create(**kwargs)

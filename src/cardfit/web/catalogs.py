"""The catalogs for GET /api/gpus, /api/models, /api/quants, /api/runtimes and /api/apis: the same rows as
`cardfit gpus|models|quants|apis --json` (both come from cardfit.services.catalogs)."""

from __future__ import annotations

from typing import Any

from ..services import catalogs as views


def gpus() -> dict[str, Any]:
    from ..catalog.gpus import default_gpus

    return {"gpus": views.plain(views.gpu_rows(default_gpus()))}


def models() -> dict[str, Any]:
    from ..catalog.models import default_models

    return {"models": views.plain(views.model_rows(default_models()))}


def quants() -> dict[str, Any]:
    from ..catalog.quants import default_quants

    return views.quant_view(default_quants()).to_json()


def runtimes() -> dict[str, Any]:
    from ..catalog.runtimes import default_runtimes

    return {"runtimes": views.plain(views.runtime_rows(default_runtimes()))}


def apis() -> dict[str, Any]:
    from ..catalog.apis import default_apis

    return {"apis": views.plain(views.api_rows(default_apis()))}

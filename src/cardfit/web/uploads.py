"""Bytes a user uploads or pastes (a config.json, a runtime log), parsed in memory by the same readers the CLI
uses for files. Nothing here touches the file system."""

from __future__ import annotations

from typing import Any

from ..errors import InputError


def config_summary(raw: bytes) -> dict[str, Any]:
    """config.json bytes → the model as the readers see it, and the bare shape to plan with."""
    from ..readers.source import parse_json
    from ..services.resolve import spec_from_config

    if not raw.strip():
        raise InputError("the upload is empty; send the contents of a config.json", field="config")
    cfg = parse_json(raw, "config.json", "config.json")
    name = _name(cfg)
    spec = spec_from_config(cfg, name)
    shape = {"params": spec.params, "active_params": spec.active_params or None, "layers": spec.layers,
             "kv_heads": spec.kv_heads, "head_dim": spec.head_dim, "hidden": spec.hidden or None,
             "vocab": spec.vocab or None}
    lossy = [what for what, on in (("sliding-window layers", spec.sliding_window), ("MLA", spec.kv_lora_rank),
                                   ("linear-attention layers", spec.linear_layers),
                                   ("shared KV layers", spec.kv_shared_layers)) if on]
    notes = list(getattr(spec, "warnings", ()) or ())
    if lossy:
        notes.append(f"{', '.join(lossy)} counted from the config")
    return {"model": {"name": spec.name, "model_type": spec.model_type or None, "params": spec.params,
                      "active_params": spec.active, "layers": spec.layers, "attention": spec.attention,
                      "max_context": spec.max_context or None, "dtype": spec.dtype,
                      "file_quant": spec.file_quant or None, "provenance": dict(spec.provenance) or None},
            "shape": shape, "config": cfg, "notes": notes}


def _name(cfg: Any) -> str:
    name = cfg.get("_name_or_path") if isinstance(cfg, dict) else None
    if isinstance(name, str) and name.strip():
        return name.strip().replace("\\", "/").rstrip("/").rsplit("/", 1)[-1][:100] or "uploaded model"
    return "uploaded model"


def log_summary(raw: bytes) -> dict[str, Any]:
    """A pasted log → output tokens/s and how it was read (as in `cardfit breakeven --from-log … --json`)."""
    from ..readers.logs import parse_log
    from ..services.breakeven import bounded_measurement, log_reading

    if not raw.strip():
        raise InputError("the log is empty; paste the lines with `eval rate` or `Avg generation throughput`",
                         field="log")
    m = bounded_measurement(parse_log(raw.decode("utf-8", "replace"), "pasted log"), "pasted log")
    out = log_reading(m, "pasted log").to_json()
    del out["path"]  # the page's summary: the reading as `--from-log` shows it, and the reader's notes
    return {**out, "notes": list(m.notes)}

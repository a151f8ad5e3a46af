"""Strict catalog loading: every key of a catalog row is a field of its typed record (catalog/schema.py);
an unknown key, in a built-in file or a user's --catalog file, is an error naming file, record and key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cardfit.catalog import gpus as gpus_mod
from cardfit.catalog import loader
from cardfit.catalog.apis import load_apis
from cardfit.catalog.gpus import load_gpus
from cardfit.catalog.models import load_models
from cardfit.catalog.runtimes import _from_row
from cardfit.errors import CatalogError

SRC = Path(__file__).resolve().parent.parent / "src" / "cardfit"

CARD = {"id": "my-card", "name": "My Card", "vendor": "nvidia", "usable_bytes": 24 * 10**9,
        "bandwidth_gbps": 1000.0, "monthly_usd": 300.0}


def _write(tmp_path: Path, name: str, data: dict) -> str:
    p = tmp_path / name
    p.write_text(json.dumps(data))
    return str(p)


@pytest.mark.parametrize(("table", "row", "key", "loader_fn"), [
    ("gpu", {**CARD, "bandwith_gbps": 900.0}, "bandwith_gbps", load_gpus),
    ("model", {"id": "my-model", "name": "My Model", "params": 10**9, "layers": 16, "kv_heads": 8,
               "head_dim": 64, "kv_head": 4}, "kv_head", load_models),
    ("api", {"id": "my-api", "name": "My API", "output_usd_per_m": 1.0, "ouput_usd_per_m": 2.0},
     "ouput_usd_per_m", load_apis),
])
def test_typo_in_user_file_is_an_error(tmp_path, table, row, key, loader_fn):
    path = _write(tmp_path, "mine.json", {table: [row]})
    with pytest.raises(CatalogError) as e:
        loader_fn((path,))
    msg = str(e.value)
    assert msg.startswith(path) and f"'{row['id']}'" in msg and f"unknown key '{key}'" in msg


def test_typo_suggests_the_field(tmp_path):
    path = _write(tmp_path, "mine.json", {"gpu": [{**CARD, "bandwith_gbps": 900.0}]})
    with pytest.raises(CatalogError, match=r"did you mean 'bandwidth_gbps'"):
        load_gpus((path,))


def test_ollama_tag_typo(tmp_path):
    row = {"id": "my-model", "name": "My Model", "params": 10**9, "layers": 16, "kv_heads": 8, "head_dim": 64,
           "ollama": [{"tag": "mine:1b", "quant": "Q4_K_M", "downlaod_gb": 0.7}]}
    path = _write(tmp_path, "mine.json", {"model": [row]})
    with pytest.raises(CatalogError, match=r"ollama tag 'mine:1b': unknown key 'downlaod_gb'"):
        load_models((path,))


def test_unknown_table_is_an_error(tmp_path):
    path = _write(tmp_path, "mine.json", {"gpus": [CARD]})
    with pytest.raises(CatalogError, match=r"unknown table 'gpus' \(did you mean 'gpu'\?\)"):
        load_gpus((path,))


def test_good_user_file_loads(tmp_path):
    path = _write(tmp_path, "mine.json", {"schema": 1, "gpu": [CARD]})
    assert load_gpus((path,)).get("My Card").bandwidth_gbps == 1000.0


def test_typo_in_builtin_file_names_the_data_file(monkeypatch):
    rows = list(gpus_mod._builtin_rows())
    bad = {**rows[0], "fp8_tflop": 1.0}
    monkeypatch.setattr(gpus_mod, "_builtin_rows", lambda: (bad, *rows[1:]))
    with pytest.raises(CatalogError) as e:
        load_gpus()
    assert str(e.value).startswith("cardfit/data/gpus.toml: gpu") and "unknown key 'fp8_tflop'" in str(
        e.value
    )


def test_runtime_row_typo():
    row = {"id": "x", "name": "X", "context_bytes": 1, "family": "vllm_like", "prefil_chunk": 8}
    with pytest.raises(CatalogError, match=r"runtimes.toml: runtime 'x': unknown key 'prefil_chunk'"):
        _from_row(row)
    row = {"id": "x", "name": "X", "context_bytes": 1, "family": "vllm_like",
           "tier": [{"max_gpu_mem_mib": 1, "chunked_prefill_size": 2, "cuda_graph_max_bs_tp_lt4": 3,
                     "cuda_graph_max_bs_tp_ge4": 4, "cuda_graph_max": 5}]}
    with pytest.raises(CatalogError, match=r"runtime 'x' tier .*unknown key 'cuda_graph_max'"):
        _from_row(row)


def test_cli_reports_the_typo(run_cli, tmp_path):
    path = _write(tmp_path, "cards.json", {"gpu": [{**CARD, "memmory_gb": 24}]})
    code, out, err = run_cli("plan", "llama3.1:8b", "--catalog", path, "--gpu", "My Card")
    assert code == 2 and "Traceback" not in err
    assert f"{path}: gpu 'my-card': unknown key 'memmory_gb' (did you mean 'memory_gb'?)" in err


def test_no_raw_runtime_reads():
    """Runtime numbers are read through the typed record, never from the parsed TOML dict."""
    for path in SRC.rglob("*.py"):
        if path.parent.name != "catalog":
            assert 'builtin("runtimes.toml")' not in path.read_text(), path


def test_every_builtin_catalog_is_strict():
    """Loading the built-ins checks every row (a failure here names the file, record and key)."""
    assert len(load_gpus()) and len(load_models()) and len(load_apis())
    assert loader.USER_TABLES == ("schema", "gpu", "model", "tier", "api")

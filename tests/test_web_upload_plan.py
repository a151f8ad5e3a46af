"""An uploaded config.json is planned exactly (sliding windows, GQA, vocabulary), the same as the CLI on
the same file, and never by writing it anywhere."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient  # noqa: E402

from cardfit.web.app import create_app  # noqa: E402

from .test_readers import GEMMA_3_4B  # noqa: E402


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app())


def test_upload_returns_config_and_plan_uses_it(client, run_json, tmp_path):
    r = client.post("/api/read/config", content=json.dumps(GEMMA_3_4B))
    assert r.status_code == 200
    body = r.json()
    assert body["config"] == GEMMA_3_4B
    req = {"config_json": body["config"], "quant": "Q4_K_M", "context": 32768, "gpu": "RTX 4090",
           "runtime": "llama.cpp"}
    web = client.post("/api/plan", json=req).json()
    path = tmp_path / "config.json"
    path.write_text(json.dumps(GEMMA_3_4B))
    cli = run_json("plan", str(path), "--quant", "Q4_K_M", "--context", "32768", "--gpu", "RTX 4090",
                   "--runtime", "llama.cpp")
    assert web["memory"] == cli["memory"]
    # sliding-window layers hold the window only: far less cache than the bare shape would say
    bare = client.post("/api/plan", json={**{k: v for k, v in body["shape"].items() if v},
                                           "quant": "Q4_K_M", "context": 32768, "gpu": "RTX 4090",
                                           "runtime": "llama.cpp"}).json()
    assert web["memory"]["kv_cache_bytes"] < bare["memory"]["kv_cache_bytes"] / 2


def test_bad_uploaded_config_is_one_line(client):
    r = client.post("/api/plan", json={"config_json": {"model_type": "llama"}, "gpu": "RTX 4090"})
    assert r.status_code == 400 and "num_hidden_layers" in r.json()["error"]

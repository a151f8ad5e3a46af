"""The JSON API, called in-process: same answers and same error lines as the CLI, and the limits."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from cardfit.web import create_app  # noqa: E402
from cardfit.web.limits import MAX_BODY_BYTES  # noqa: E402


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app())


# (request body, CLI arguments): the same plan asked both ways; each is tricky in its own way.
SAME_AS_CLI = [
    ({"model": "llama3.1:8b", "gpu": "RTX 4090"}, ["llama3.1:8b", "--gpu", "RTX 4090"]),  # Ollama context by VRAM
    ({"model": "meta-llama/Llama-3.3-70B-Instruct", "quant": "fp8", "context": 32768, "runtime": "vllm"},
     ["meta-llama/Llama-3.3-70B-Instruct", "--quant", "fp8", "--context", "32768", "--runtime", "vllm"]),  # HF id
    ({"params": 7e9, "layers": 32, "kv_heads": 8, "head_dim": 128, "quant": "bf16", "context": 8192, "batch": 4},
     ["--params", "7e9", "--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--quant", "bf16",
      "--context", "8192", "--batch", "4"]),  # a bare shape, no model name
]


@pytest.mark.parametrize(("body", "args"), SAME_AS_CLI)
def test_plan_equals_cli(client, run_json, body, args):
    r = client.post("/api/plan", json=body)
    assert r.status_code == 200, r.text
    assert r.json() == run_json("plan", *args)


def test_max_context_equals_cli(client, run_json):
    r = client.post("/api/max-context", json={"model": "qwen2.5:14b", "gpu": "RTX 4060 Ti", "kv_dtype": "q8_0"})
    assert r.status_code == 200, r.text
    assert r.json() == run_json("max-context", "qwen2.5:14b", "--gpu", "RTX 4060 Ti", "--kv-dtype", "q8_0")


@pytest.mark.parametrize("name", ["gpus", "models", "quants"])
def test_catalogs_equal_cli(client, run_json, name):
    r = client.get(f"/api/{name}")
    assert r.status_code == 200
    assert r.json() == run_json(name)


def test_runtimes_catalog(client):
    ids = {r["id"] for r in client.get("/api/runtimes").json()["runtimes"]}
    assert {"vllm", "llama.cpp", "ollama", "transformers", "sglang", "tgi"} <= ids


@pytest.mark.parametrize(("body", "args", "status"), [
    ({"model": "llama3.1:8b", "batch": 0}, ["llama3.1:8b", "--batch", "0"], 400),  # range from inputs.py
    ({"model": "llama3.1:8b", "context": 10**9}, ["llama3.1:8b", "--context", str(10**9)], 400),
    ({"model": "llama3.1:8b", "quant": "q9_k"}, ["llama3.1:8b", "--quant", "q9_k"], 404),  # unknown name
    ({"model": "llama3.1:8b", "gpu": "RTX 4900"}, ["llama3.1:8b", "--gpu", "RTX 4900"], 404),
    ({"model": "llama3.1:9b"}, ["llama3.1:9b"], 404),
    ({"model": "llama3.1:8b", "context": 10**6}, ["llama3.1:8b", "--context", str(10**6)], 400),  # beyond trained
])
def test_errors_are_the_cli_line(client, run_cli, body, args, status):
    r = client.post("/api/plan", json=body)
    code, out, err = run_cli("plan", *args)
    assert code == 2 and out == ""
    assert r.status_code == status
    assert r.json() == {"error": err.strip().removeprefix("Error: ")}


def test_unknown_field_rejected(client):
    r = client.post("/api/plan", json={"model": "llama3.1:8b", "temperature": 1})
    assert r.status_code == 400
    assert r.json()["error"].startswith("--temperature Extra inputs are not permitted")


@pytest.mark.parametrize("body", [b"[1, 2]", b"{not json", b"\"llama3.1:8b\""])
def test_body_must_be_a_json_object(client, body):
    r = client.post("/api/plan", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert r.json() == {"error": "the request body must be a JSON object"}


@pytest.mark.parametrize("model", ["/etc/passwd", "../config.json", "model.gguf", "~/x.safetensors", "C:\\m.json",
                                   "./llama3.1:8b", "some/dir"])
def test_model_paths_are_never_opened(client, model, monkeypatch):
    import builtins

    opened = []
    real_open = builtins.open
    monkeypatch.setattr(builtins, "open", lambda f, *a, **k: opened.append(f) or real_open(f, *a, **k))
    r = client.post("/api/plan", json={"model": model})
    assert r.status_code in (400, 404)
    assert "error" in r.json()
    assert not [f for f in opened if "passwd" in str(f) or str(f).endswith((".json", ".gguf", ".safetensors"))]


def test_model_that_exists_as_a_local_file_is_refused(client, tmp_path, monkeypatch):
    (tmp_path / "llama3.1:8b").write_text("{}")
    monkeypatch.chdir(tmp_path)
    r = client.post("/api/plan", json={"model": "llama3.1:8b"})
    assert r.status_code == 400
    assert "names a file on the server" in r.json()["error"]


@pytest.mark.parametrize(("body", "word"), [
    ({"model": "llama3.1:8b", "catalog": ["/etc/cards.toml"]}, "catalog files"),
    ({"model": "llama3.1:8b", "hub": True}, "Hugging Face Hub"),
])
def test_no_files_no_network(client, body, word):
    r = client.post("/api/plan", json=body)
    assert r.status_code == 400 and word in r.json()["error"]


def test_body_size_cap(client):
    big = json.dumps({"model": "llama3.1:8b", "quant": "x" * MAX_BODY_BYTES})
    r = client.post("/api/plan", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert r.json()["error"].startswith("request body is larger than")


def test_body_size_cap_without_content_length(client):
    def chunks():
        for _ in range(20):
            yield b" " * 8192

    r = client.post("/api/plan", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413


def test_openapi_uses_the_cli_input_models(client):
    spec = client.get("/openapi.json").json()
    for path in ("/api/plan", "/api/max-context"):
        assert path in spec["paths"]
    plan = spec["components"]["schemas"]["PlanInput"]
    assert plan["additionalProperties"] is False
    assert plan["properties"]["batch"]["anyOf"][0]["minimum"] == 1
    assert "Ollama / llama.cpp slots" in plan["properties"]["parallel"]["description"]


def test_page_and_static(client):
    r = client.get("/")
    assert r.status_code == 200 and "<title>cardfit" in r.text
    assert "default-src 'self'" in r.headers["content-security-policy"]
    for name in ("app.js", "style.css"):
        assert client.get(f"/static/{name}").status_code == 200
    assert client.get("/static/../app.py").status_code == 404


def test_serve_warns_off_loopback():
    from cardfit.cli.serve_cmd import is_loopback

    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")


def test_help_does_not_import_fastapi():
    import subprocess
    import sys

    code = "import sys; from cardfit.cli import main; main(['--help']); print('fastapi' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().endswith("False")

"""The JSON API, called in-process: same answers and same error lines as the CLI, and the limits."""

from __future__ import annotations

import json
import os

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
    # Ollama context by VRAM
    ({"model": "llama3.1:8b", "gpu": "RTX 4090"}, ["llama3.1:8b", "--gpu", "RTX 4090"]),
    # HF id
    ({"model": "meta-llama/Llama-3.3-70B-Instruct", "quant": "fp8", "context": 32768, "runtime": "vllm"},
     ["meta-llama/Llama-3.3-70B-Instruct", "--quant", "fp8", "--context", "32768", "--runtime", "vllm"]),
    ({"params": 7e9, "layers": 32, "kv_heads": 8, "head_dim": 128, "quant": "bf16", "context": 8192,
      "batch": 4},
     ["--params", "7e9", "--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--quant", "bf16",
      "--context", "8192", "--batch", "4"]),  # a bare shape, no model name
    # a host KV tier larger than the two cards' pool: its note, and the launch line carries it (issue 26)
    ({"model": "meta-llama/Llama-3.1-70B-Instruct", "gpu": "H100 SXM", "gpus": 2, "quant": "fp8",
      "context": 32768, "runtime": "vllm", "kv_offload_gb": 400},
     ["meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100 SXM", "--gpus", "2", "--quant", "fp8", "--context",
      "32768", "--runtime", "vllm", "--kv-offload-gb", "400"]),
]


@pytest.mark.parametrize(("body", "args"), SAME_AS_CLI)
def test_plan_equals_cli(client, run_json, body, args):
    r = client.post("/api/plan", json=body)
    assert r.status_code == 200, r.text
    assert r.json() == run_json("plan", *args)


def test_max_context_equals_cli(client, run_json):
    r = client.post("/api/max-context",
                    json={"model": "qwen2.5:14b", "gpu": "RTX 4060 Ti", "kv_dtype": "q8_0"})
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
    # beyond trained
    ({"model": "llama3.1:8b", "context": 10**6}, ["llama3.1:8b", "--context", str(10**6)], 400),
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
    # what it is and what to do, not pydantic's "Extra inputs are not permitted"
    assert r.json()["error"] == ("--temperature is not an option of this command (got 1); its --help lists "
                                 "the options")
    r = client.post("/api/plan", json={"model": "llama3.1:8b", "contxt": 8192})  # a typo: the nearest option
    assert r.json()["error"] == ("--contxt is not an option of this command (got 8192); did you mean "
                                 "--context?; its --help lists the options")


@pytest.mark.parametrize("body", [b"[1, 2]", b"{not json", b"\"llama3.1:8b\""])
def test_body_must_be_a_json_object(client, body):
    r = client.post("/api/plan", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert r.json() == {"error": "the request body must be a JSON object"}


@pytest.mark.parametrize("model",
                         ["/etc/passwd", "../config.json", "model.gguf", "~/x.safetensors", "C:\\m.json",
                          "./llama3.1:8b", "some/dir"])
def test_model_paths_are_never_opened(client, model, monkeypatch):
    import builtins

    opened = []
    real_open, real_os_open = builtins.open, os.open
    monkeypatch.setattr(builtins, "open", lambda f, *a, **k: opened.append(f) or real_open(f, *a, **k))
    monkeypatch.setattr(os, "open", lambda f, *a, **k: opened.append(f) or real_os_open(f, *a, **k))
    r = client.post("/api/plan", json={"model": model})
    assert r.status_code in (400, 404)
    assert "error" in r.json()
    assert not [f for f in opened
                if "passwd" in str(f) or str(f).endswith((".json", ".gguf", ".safetensors"))]


def test_model_that_exists_as_a_local_file_is_not_read(client, tmp_path, monkeypatch):
    """The name is looked up in the catalog; the file beside the server is neither read nor reported (the
    answer does not depend on, or reveal, what files the server has)."""
    (tmp_path / "llama3.1:8b").write_text("{}")
    monkeypatch.chdir(tmp_path)
    r = client.post("/api/plan", json={"model": "llama3.1:8b"})
    assert r.status_code == 200
    assert r.json()["model"]["origin"] == "catalog"


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


def test_openapi_gives_the_defaults_deploy_applies(client):
    """The page shows deploy's defaults from the schema (it said TPOT 50 ms where the CLI used 100): every
    default published for a field is the value `deploy` reports in its workload when the field is left out,
    the targets included (their input default is None only to tell "not given" apart)."""
    spec = client.get("/openapi.json").json()
    props = spec["components"]["schemas"]["DeployInput"]["properties"]
    body = {"model": "meta-llama/Llama-3.1-8B-Instruct", "users": 4, "gpu": ["L40S"], "runtime": "vllm"}
    r = client.post("/api/deploy", json=body)
    assert r.status_code == 200, r.text
    w = r.json()["workload"]
    assert w["targets_given"] == {"ttft_ms": False, "tpot_ms": False}
    for key in ("input_tokens", "output_tokens", "ttft_ms", "tpot_ms"):
        assert props[key]["default"] == w[key], key
    assert (props["ttft_ms"]["default"], props["tpot_ms"]["default"]) == (2000, 100)  # deploy --help's words
    given = client.post("/api/deploy", json={**body, "tpot_ms": 60}).json()
    assert given["workload"]["tpot_ms"] == 60 and given["workload"]["targets_given"]["tpot_ms"] is True


def test_a_repeatable_field_given_once_as_a_string(client):
    """deploy's `gpu` is a list (the CLI's repeatable --gpu), plan's a string: `"gpu": "RTX 4090"` on deploy
    is the one card, as `cardfit.deploy(gpu="RTX 4090")` and the CLI take it (it was a 400 "--gpu Input
    should be a valid tuple"), and a blank one is the CLI's "is empty" line, not "unknown GPU ''"."""
    body = {"model": "meta-llama/Llama-3.1-8B-Instruct", "users": 32, "runtime": "vllm@0.10.1", "tp": 1}
    one = client.post("/api/deploy", json={**body, "gpu": "RTX 4090"})
    assert one.status_code == 200, one.text
    assert one.json() == client.post("/api/deploy", json={**body, "gpu": ["RTX 4090"]}).json()
    for blank in ("", " ", ["H100 SXM", ""]):
        r = client.post("/api/deploy", json={**body, "gpu": blank})
        assert (r.status_code, r.json()) == (400, {"error": "--gpu is empty; give a value or leave it out"})
    r = client.post("/api/deploy", json={**body, "gpu": 5})
    assert (r.status_code, r.json()) == (400, {"error": "--gpu must be a valid tuple (got 5)"})


def test_page_and_static(client):
    r = client.get("/")
    assert r.status_code == 200 and "<title>cardfit" in r.text
    assert "default-src 'self'" in r.headers["content-security-policy"]
    for name in ("app.js", "style.css"):
        assert client.get(f"/static/{name}").status_code == 200
    assert client.get("/static/../app.py").status_code == 404


def test_unknown_routes_answer_json(client):
    assert client.get("/api/nothing").json() == {"error": "Not Found"}
    r = client.get("/api/plan")
    assert r.status_code == 405 and r.json() == {"error": "Method Not Allowed"}


def test_serve_warns_off_loopback():
    from cardfit.cli.serve_cmd import is_loopback

    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")


def test_serve_busy_port_is_one_error_line(run_cli):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        code, out, err = run_cli("serve", "--port", str(s.getsockname()[1]))
    assert code == 2 and out == ""
    assert err.strip().startswith("Error: cannot listen on 127.0.0.1:") and len(err.strip().splitlines()) == 1


def test_serve_port_0_says_where(tmp_path):
    import subprocess
    import sys
    import time
    import urllib.request

    proc = subprocess.Popen([sys.executable, "-m", "cardfit", "serve", "--port", "0"], stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path)
    try:
        line = proc.stderr.readline()
        assert line.startswith("cardfit: serving on http://127.0.0.1:")
        url = line.split()[3]
        for _ in range(100):
            try:
                assert urllib.request.urlopen(url + "api/health", timeout=1).read() == b'{"status":"ok"}'
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("no answer from " + url)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_help_does_not_import_fastapi():
    import subprocess
    import sys

    code = "import sys; from cardfit.cli import main; main(['--help']); print('fastapi' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().endswith("False")


# ---- the endpoints over the speed, break-even, fine-tuning, validation, log and config.json modules ----

def _module(name: str) -> None:
    pytest.importorskip(name, reason=f"{name} is not in this tree yet")


@pytest.mark.parametrize(("path", "module", "body", "args"), [
    ("/api/speed", "cardfit.services.speed",
     {"model": "llama3.1:8b", "gpu": "RTX 4090", "concurrency": [1, 2, 4]},
     ["speed", "llama3.1:8b", "--gpu", "RTX 4090", "--concurrency", "1,2,4"]),
    ("/api/breakeven", "cardfit.services.breakeven",
     {"hourly": 0.5, "tokens_per_s": 400, "hours_per_month": 730},
     # the break-even guide's worked example
     ["breakeven", "--hourly", "0.5", "--tokens-per-s", "400", "--hours-per-month", "730"]),
    ("/api/breakeven", "cardfit.services.breakeven",
     {"gpu": "RTX 4090", "tokens_per_s": 90.6, "api": ["frontier"]},
     ["breakeven", "--gpu", "RTX 4090", "--tokens-per-s", "90.6", "--api", "frontier"]),
    ("/api/finetune", "cardfit.services.finetune", {"model": "llama3.1:8b", "method": "qlora"},
     ["finetune", "llama3.1:8b", "--method", "qlora"]),
    # a host KV tier on the speed levels of 10-turn sessions the two cards cannot keep (issue 26)
    ("/api/speed", "cardfit.services.speed",
     {"model": "llama-3.1-70b", "quant": "fp8", "gpu": "H100 SXM", "gpus": 2, "runtime": "vllm",
      "input_tokens": 2000, "output_tokens": 500, "turns": 10, "sessions": 100, "concurrency": [8],
      "kv_offload_gb": 400},
     ["speed", "llama-3.1-70b", "--quant", "fp8", "--gpu", "H100 SXM", "--gpus", "2", "--runtime", "vllm",
      "--input-tokens", "2000", "--output-tokens", "500", "--turns", "10", "--sessions", "100",
      "--concurrency", "8", "--kv-offload-gb", "400"]),
    # prefill and decode pools win, with an attention-DP x EP row on the Pareto front (issue 26)
    ("/api/deploy", "cardfit.services.deploy",
     {"model": "deepseek-v3", "users": 256, "input_tokens": 8000, "output_tokens": 1000, "ttft_ms": 10000,
      "tpot_ms": 40, "gpu": ["H200"], "runtime": "sglang"},
     ["deploy", "deepseek-v3", "--users", "256", "--input-tokens", "8000", "--output-tokens", "1000",
      "--ttft-ms", "10000", "--tpot-ms", "40", "--gpu", "H200", "--runtime", "sglang"]),
])
def test_other_reports_equal_cli(client, run_json, path, module, body, args):
    _module(module)
    r = client.post(path, json=body)
    assert r.status_code == 200, r.text
    assert r.json() == run_json(*args)


def test_seed_003_breakeven_through_the_api(client):
    _module("cardfit.services.breakeven")
    r = client.post("/api/breakeven",
                    json={"hourly": 0.5, "tokens_per_s": 400, "hours_per_month": 730,
                          "input_per_output": 0}).json()  # the guide prices output only
    assert r["monthly_usd"] == 365
    assert [round(a["breakeven_millions_per_month"], 1) for a in r["apis"]] == [1825.0, 73.0, 24.3]


@pytest.mark.parametrize(("path", "module", "body", "field"), [
    ("/api/speed", "cardfit.services.speed",
     {"model": "llama3.1:8b", "gpu": "RTX 4090", "plot": "/tmp/x.svg"}, "--plot"),
    ("/api/breakeven", "cardfit.services.breakeven", {"hourly": 1, "from_log": "/var/log/vllm.log"},
     "--from-log"),
    ("/api/breakeven", "cardfit.services.breakeven", {"gpu": "RTX 4090", "model": "/models/x.gguf"},
     "file path"),
    ("/api/finetune", "cardfit.services.finetune", {"model": "./config.json"}, "file path"),
])
def test_other_reports_refuse_server_files(client, path, module, body, field, tmp_path):
    _module(module)
    r = client.post(path, json=body)
    assert r.status_code == 400 and field in r.json()["error"]
    assert not (tmp_path / "x.svg").exists()


def test_apis_catalog_equals_cli(client, run_json):
    _module("cardfit.catalog.apis")
    assert client.get("/api/apis").json() == run_json("apis")


def test_validate_equals_cli(client, run_json):
    _module("cardfit.validation.validate")
    r = client.get("/api/validate", params={"kind": "kv_cache"})
    assert r.status_code == 200
    assert r.json() == run_json("validate", "--kind", "kv_cache")


LLAMA_31_8B_CONFIG = {  # meta-llama/Llama-3.1-8B config.json (the keys cardfit reads)
    "_name_or_path": "meta-llama/Llama-3.1-8B", "model_type": "llama", "num_hidden_layers": 32,
    "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
    "vocab_size": 128256, "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
    "tie_word_embeddings": False}


def test_config_upload_gives_the_catalog_shape(client):
    _module("cardfit.readers.config")
    r = client.post("/api/read/config", content=json.dumps(LLAMA_31_8B_CONFIG))
    assert r.status_code == 200, r.text
    shape = r.json()["shape"]
    # the same parameter count as the catalog's Llama 3.1 8B (8,030,261,248: the safetensors total)
    assert shape["params"] == 8_030_261_248
    assert (shape["layers"], shape["kv_heads"], shape["head_dim"]) == (32, 8, 128)
    plan = client.post("/api/plan",
                       json={k: v for k, v in shape.items() if v is not None} | {"context": 8192})
    assert plan.status_code == 200
    # 2 × 32 layers × 8 KV heads × 128 × 2 B: Llama 3.1 8B at FP16
    assert plan.json()["memory"]["kv_bytes_per_token"] == 131_072


@pytest.mark.parametrize(("body", "status", "words"), [
    (b"", 400, "empty"),
    (b"{not json", 400, "not valid JSON"),
    (b'{"model_type": "llama"}', 400, "num_hidden_layers"),
    (b"[1]", 400, "not a JSON object"),
    (b"{" + b" " * (2 * 1024 * 1024) + b"}", 413, "larger than"),
])
def test_config_upload_errors(client, body, status, words):
    _module("cardfit.readers.config")
    r = client.post("/api/read/config", content=body)
    assert r.status_code == status and words in r.json()["error"]


OLLAMA_VERBOSE = b"""total duration:       5.912345678s
load duration:        20.1ms
prompt eval count:    26 token(s)
prompt eval duration: 120ms
prompt eval rate:     216.67 tokens/s
eval count:           232 token(s)
eval duration:        5.57s
eval rate:            41.65 tokens/s
"""


def test_pasted_log(client):
    _module("cardfit.readers.logs")
    r = client.post("/api/read/log", content=OLLAMA_VERBOSE, headers={"content-type": "text/plain"})
    assert r.status_code == 200, r.text
    assert r.json()["kind"] == "ollama" and r.json()["tokens_per_s"] == 41.65
    bad = client.post("/api/read/log", content=b"nothing here")
    assert bad.status_code == 400 and "eval rate" in bad.json()["error"]


def test_answers_are_remembered_but_errors_are_not():
    from cardfit.services.inputs import PlanInput
    from cardfit.web.app import Answers

    calls = []

    def fn(inp):
        calls.append(inp)
        if inp.context == 13:
            raise ValueError("bad")
        return {"context": inp.context}

    answers = Answers(fn, size=2)
    assert answers(PlanInput(model="a", context=1)) == b'{"context":1}'
    assert answers(PlanInput(model="a", context=1)) == b'{"context":1}' and len(calls) == 1
    for _ in range(2):
        with pytest.raises(ValueError):
            answers(PlanInput(model="a", context=13))
    assert len(calls) == 3
    answers(PlanInput(model="a", context=2))
    answers(PlanInput(model="a", context=3))  # evicts context=1
    answers(PlanInput(model="a", context=1))
    assert len(calls) == 6
    # each input its own answer, found by its key alone (made once per call)
    assert answers.cached(PlanInput(model="a", context=3)) == b'{"context":3}'
    assert answers.cached(PlanInput(model="b", context=3)) is None
    assert answers.cached(PlanInput(model="a", context=2)) is None  # evicted by context=1

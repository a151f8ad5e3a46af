"""One answer everywhere: every CLI example in the README and every request the web page makes (read from
app.js) give the same numbers through the CLI (`--json`), the JSON API and, for the page's own lines, the
page's words. The browser half (what the page draws from these answers) is tests/test_web_e2e.py."""

from __future__ import annotations

import ast
import re
import shlex
from typing import Any

import pytest

from .conftest import ROOT

README = (ROOT / "README.md").read_text()
APP_JS = (ROOT / "src" / "cardfit" / "web" / "static" / "app.js").read_text()
VERDICTS = ("fits", "tight", "no", "offload")
CATALOGS = ("gpus", "models", "quants", "apis")


def _fenced_blocks(text: str, skip: tuple[str, ...]) -> list[list[str]]:
    """The lines of each fenced block (fences may be indented, as in a list item), minus the languages in
    `skip`."""
    blocks: list[list[str]] = []
    lang: str | None = None
    for line in text.splitlines():
        fence = line.strip()
        if fence.startswith("```"):
            if lang is None:
                lang = fence[3:].strip()
                blocks.append([])
            else:
                if lang in skip:
                    blocks.pop()
                lang = None
        elif lang is not None:
            blocks[-1].append(line)
    return blocks


def readme_commands() -> list[tuple[list[str], str]]:
    """(argv after `cardfit`, the verdict its `# comment` claims or "") for every command line in the
    README's fenced blocks (any language but Python and TOML: sh, text, console, bash or none)."""
    out = []
    for block in _fenced_blocks(README, skip=("python", "toml")):
        for line in block:
            line = line.strip().removeprefix("$ ")
            if not line.startswith("cardfit "):
                continue
            cmd, _, comment = line.partition("#")
            claim = comment.strip() if comment.strip() in VERDICTS else ""
            out.append((shlex.split(cmd)[1:], claim))
    from cardfit.services.table import BY_NAME

    for span in re.findall(r"`(cardfit [^`]+)`", README):  # inline examples, but not the usage templates
        argv = shlex.split(span)[1:]
        if len(argv) == 1 and argv[0] in BY_NAME and BY_NAME[argv[0]].argument == "model":
            continue  # "the `cardfit plan` question": the command's name, not a command line
        servers = ("serve", "mcp")  # they answer no question: nothing to compare
        if argv[0] not in servers and not re.search(r"\b[A-Z]{1,5}\b|\||…", span) and (argv, "") not in out:
            out.append((argv, ""))
    return out


def _body(argv: list[str]) -> tuple[str, dict[str, Any]]:
    """A CLI command line as the JSON body of the matching POST /api/NAME."""
    from cardfit.services.inputs import describe
    from cardfit.services.table import BY_NAME

    cmd = BY_NAME[argv[0]]
    kinds = {f.name: f.kind for f in describe(cmd.input_type())}
    body: dict[str, Any] = {}
    rest = argv[1:]
    if rest and not rest[0].startswith("--") and cmd.argument:
        body[cmd.argument] = rest.pop(0)
    if cmd.name == "stack":  # the web API reads no files: the page sends the stack file's text
        body["text"] = (ROOT / body.pop("file")).read_text()
    while rest:
        key = rest.pop(0)[2:].replace("-", "_")
        if kinds[key] == "bool":
            body[key] = True
            continue
        value = rest.pop(0)
        body[key] = [*body.get(key, []), value] if kinds[key] == "tuple" else value
    return cmd.path, body


@pytest.fixture(scope="module")
def client():
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from cardfit.web.app import create_app

    return TestClient(create_app())


COMMANDS = readme_commands()


def test_the_readme_has_examples():
    assert len(COMMANDS) >= 6
    assert any(claim for _, claim in COMMANDS), "the README's runtime-dependent claims are runnable"


@pytest.mark.parametrize(("argv", "claim"), COMMANDS, ids=[" ".join(a) for a, _ in COMMANDS])
def test_readme_example_runs_and_the_api_agrees(run_json, client, argv, claim):
    cli = run_json(*argv)
    if argv[0] in CATALOGS:
        assert client.get(f"/api/{argv[0]}").json() == cli
    elif argv[0] == "validate" and "--source" in argv:
        # a whole sample (thousands of records, tens of seconds): the CLI's mode only, no web route
        assert cli["kinds"] and cli["total"] >= 1000
    elif argv[0] == "validate":
        params = dict(zip((a[2:] for a in argv[1::2]), argv[2::2], strict=True))
        assert client.get("/api/validate", params=params).json() == cli
    else:
        path, body = _body(argv)
        r = client.post(path, json=body)
        assert r.status_code == 200, r.text
        assert r.json() == cli
    # "fits one H200 with llama.cpp": the runtime is on the command line, the verdict in the comment
    if claim:
        assert cli["gpus"][0]["verdict"] == claim


def test_readme_python_example_prints_what_it_says():
    import cardfit

    block = re.search(r"```python\n(.*?)```", README, re.S).group(1)
    scope: dict[str, Any] = {"cardfit": cardfit}
    checked = 0
    for line in block.splitlines():
        code, _, comment = line.partition("  # ")
        if not code.strip() or code.startswith("import"):
            continue
        if not comment:
            exec(code, scope)  # noqa: S102  (the README's own example, not user input)
            continue
        claimed = ast.literal_eval(comment.split(": ")[0].replace(",", "") if "(" not in comment
                                   else comment.split(": ")[0])
        assert eval(code, scope) == claimed, code  # noqa: S307
        checked += 1
    assert checked >= 3


# ---- the page's requests -------------------------------------------------------------------------------

PAGE_REQUESTS = {
    # path the page requests → (JSON body the page sends for the FORM below, the same as a CLI command line)
    "/api/plan": ({"model": "qwen2.5:14b", "quant": "Q5_K_M", "context": 16384, "batch": 2,
                   "runtime": "llama.cpp", "kv_dtype": "q8_0", "api": "frontier"},
                  ["plan", "qwen2.5:14b", "--quant", "Q5_K_M", "--context", "16384", "--batch", "2",
                   "--runtime", "llama.cpp", "--kv-dtype", "q8_0", "--api", "frontier"]),
    "/api/speed": ({"model": "qwen2.5:14b", "quant": "Q5_K_M", "context": 16384, "batch": 2,
                    "runtime": "llama.cpp", "kv_dtype": "q8_0", "gpu": "rtx-4090", "gpus": 1},
                   ["speed", "qwen2.5:14b", "--quant", "Q5_K_M", "--context", "16384", "--batch", "2",
                    "--runtime", "llama.cpp", "--kv-dtype", "q8_0", "--gpu", "rtx-4090", "--gpus", "1"]),
    "/api/breakeven": ({"gpu": "rtx-4090", "gpus": 1, "tokens_per_s": 41.65, "api": ["frontier"]},
                       ["breakeven", "--gpu", "rtx-4090", "--gpus", "1", "--tokens-per-s", "41.65", "--api",
                        "frontier"]),
    "/api/deploy": ({"model": "meta-llama/Llama-3.1-8B-Instruct", "users": 16, "input_tokens": 1000,
                     "output_tokens": 300, "ttft_ms": 2000, "tpot_ms": 50, "runtime": "vllm",
                     "gpu": ["L40S"]},
                    ["deploy", "meta-llama/Llama-3.1-8B-Instruct", "--users", "16", "--input-tokens", "1000",
                     "--output-tokens", "300", "--ttft-ms", "2000", "--tpot-ms", "50", "--runtime", "vllm",
                     "--gpu", "L40S"]),
    "/api/stack": ({"text": (ROOT / "examples" / "stacks" / "rag-4090.toml").read_text(), "bundle": "script"},
                   ["stack", "examples/stacks/rag-4090.toml", "--bundle", "script"]),
    **{f"/api/{name}": (None, [name]) for name in (*CATALOGS, "runtimes")},
}
PAGE_ONLY = {"/openapi.json": "the endpoint list", "/api/read/config": "parses an upload (test_web_e2e)",
             "/api/read/log": "parses a pasted log (test_web_e2e)"}


def test_every_request_the_page_makes_is_checked_here():
    made = set(re.findall(r'"(/(?:api/[a-z/-]+|openapi\.json))"', APP_JS))
    assert made, "app.js requests nothing?"
    assert made <= set(PAGE_REQUESTS) | set(PAGE_ONLY), made - set(PAGE_REQUESTS) - set(PAGE_ONLY)


@pytest.mark.parametrize("path", [p for p, (_, argv) in PAGE_REQUESTS.items() if argv[0] != "runtimes"])
def test_page_request_equals_the_cli(run_json, client, path):
    body, argv = PAGE_REQUESTS[path]
    r = client.get(path) if body is None else client.post(path, json=body)
    assert r.status_code == 200, r.text
    assert r.json() == run_json(*argv)


def test_the_runtimes_list_is_the_catalog(client):
    from cardfit.catalog.runtimes import default_runtimes

    ids = [r["id"] for r in client.get("/api/runtimes").json()["runtimes"]]
    assert set(ids) == {r.id for r in default_runtimes()}


def test_the_page_cost_line_is_the_plans(run_cli, run_json, client):
    """The page draws its cost line from the plan's cost block (app.js costFromPlan/costLine); the CLI prints
    the same block; both say the month length."""
    body, argv = PAGE_REQUESTS["/api/plan"]
    web = client.post("/api/plan", json={**body, "gpu": "RTX 4090"}).json()["cost"]
    cli = run_json(*argv, "--gpu", "RTX 4090")["cost"]
    assert web == cli and web["hours_per_month"] == 720
    code, text, _ = run_cli(*argv, "--gpu", "RTX 4090")
    k = cli["cards"][0]
    assert (f"Cost on {k['count']}× {k['gpu']}: ${k['monthly_usd']:,.0f}/month (${k['hourly_usd']:.2f}/h "
            f"over 720 h); at {k['tokens_per_s']:,.1f} tokens/s") in " ".join(text.split())
    assert "costLine" in APP_JS and "over ` +\n    `${num(b.hours_per_month)} h)" in APP_JS


# ---- one served throughput -----------------------------------------------------------------------------

# The same question asked of every command: a model on a card set, B concurrent streams of one request shape
# (prompt / answer tokens). deploy chooses the set (lax targets: its cheapest, one replica); plan --batch B,
# speed at concurrency B and breakeven --model are then asked about that set, through the CLI and the web API.
SERVED = [
    # (model, runtime, quant, KV type, card, streams, prompt, answer, why)
    ("meta-llama/Llama-3.1-8B-Instruct", "vllm", "bf16", "bf16", "L40S", 16, 1000, 300,
     "the issue's serving example shape on one card"),
    ("meta-llama/Llama-3.1-70B-Instruct", "vllm", "fp8", "fp8", "L40S", 32, 2000, 500,
     "a tensor-parallel set (deploy picks how many cards; on an H100 vLLM 0.34 holds it on one)"),
    ("qwen2.5:7b", "llama.cpp", "Q4_K_M", "f16", "RTX 4090", 4, 1000, 300,
     "llama.cpp slots (-np), whose per-slot step cost deploy and speed share"),
]


@pytest.mark.parametrize(("model", "runtime", "quant", "kv", "gpu", "streams", "prompt", "answer", "why"),
                         SERVED, ids=[s[0] for s in SERVED])
def test_every_command_reports_the_same_served_throughput(run_json, client, model, runtime, quant, kv, gpu,
                                                          streams, prompt, answer, why):
    common = ["--runtime", runtime, "--quant", quant, "--kv-dtype", kv, "--input-tokens", str(prompt),
              "--output-tokens", str(answer)]
    dep = run_json("deploy", model, "--users", str(streams), "--gpu", gpu, "--ttft-ms", "600000",
                   "--tpot-ms", "100000", *common)["best"]
    assert dep is not None and dep["replicas"] == 1, why
    cards = ["--gpu", gpu, "--gpus", str(dep["count"])]
    answers = {"deploy": dep["aggregate_tokens_per_s"]}
    argv = {"plan": ["plan", model, "--batch", str(streams), *cards, *common],
            "speed": ["speed", model, "--concurrency", str(streams), *cards, *common],
            "breakeven": ["breakeven", "--model", model, "--concurrency", str(streams), *cards, *common]}
    for name, args in argv.items():
        cli = run_json(*args)
        path, body = _body(args)
        web = client.post(path, json=body)
        assert web.status_code == 200, web.text
        assert web.json() == cli, f"{name}: the web API and the CLI differ"
        answers[name] = {"plan": lambda d: d["cost"]["cards"][0]["tokens_per_s"],
                         "speed": lambda d: d["rows"][0]["aggregate_tokens_per_s"],
                         "breakeven": lambda d: d["throughput"]["tokens_per_s"]}[name](cli)
    first = answers["deploy"]
    assert first > 0
    assert all(abs(v - first) <= 0.051 for v in answers.values()), (why, answers)


def test_the_deploy_page_request_agrees_with_the_cli(run_json, client):
    """The page's deploy panel asks /api/deploy; the served figure it draws is the CLI's."""
    body, argv = PAGE_REQUESTS["/api/deploy"]
    web = client.post("/api/deploy", json=body).json()["best"]
    assert web["aggregate_tokens_per_s"] == run_json(*argv)["best"]["aggregate_tokens_per_s"]


# The single-stream decode `plan` prints (its Decode line and tok/s column) is the one `speed` prints for the
# same card, context and runtime: dense and MoE models (a routed expert's share and per-MoE-layer step time
# enter both, not only the served path).
SINGLE = [("qwen3-30b-a3b", "vllm", "fp8", "H100 SXM", "MoE: expert share and per-MoE-layer time"),
          ("gpt-oss-120b", "vllm", "mxfp4", "H100 SXM", "MoE, MXFP4 experts"),
          ("meta-llama/Llama-3.1-8B-Instruct", "vllm", "bf16", "L40S", "dense")]


@pytest.mark.parametrize(("model", "runtime", "quant", "gpu", "why"), SINGLE, ids=[s[0] for s in SINGLE])
def test_plan_and_speed_report_the_same_single_stream_decode(run_json, model, runtime, quant, gpu, why):
    args = [model, "--runtime", runtime, "--quant", quant, "--gpu", gpu]
    plan = run_json("plan", *args)["speed"]
    speed = run_json("speed", *args)
    assert plan["decode_tokens_per_s"] == speed["decode_tokens_per_s"], why
    assert plan["decode_ceiling_tokens_per_s"] == speed["decode_ceiling_tokens_per_s"], why

"""`cardfit mcp`: the command table as MCP tools. A real MCP client session (the official SDK's stdio client)
starts `python -m cardfit mcp`, lists the tools and calls them; the schemas are checked in-process against
the input descriptions they are built from."""

from __future__ import annotations

import json
import sys

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from cardfit.cli.mcp_server import call, field_schema, listing_schema, tool_schema, tools
from cardfit.services.catalogs import LISTINGS
from cardfit.services.inputs import describe
from cardfit.services.table import BY_NAME, COMMANDS

PLAN = {"model": "llama3.1:8b", "gpu": "RTX 4090"}
DEPLOY = {"model": "meta-llama/Llama-3.1-8B-Instruct", "users": 8, "gpu": ["H100"], "runtime": "vllm"}
# (tool, arguments, the CLI's one line): each a mistake an agent makes
BAD_CALLS = [
    ("plan", {"model": "llama3.1:8b", "gpu": "RTX 4900"},  # a typo: the catalog's suggestions come back
     "Error: unknown GPU 'RTX 4900'; did you mean RTX 4090"),
    ("plan", {"model": "llama3.1:8b", "context": -1},  # out of the described bounds
     "Error: --context must be greater than or equal to 1 (got -1)"),
    ("plan", {"model": "llama3.1:8b", "context": "long"},  # a string where a number goes
     "Error: --context must be a valid integer, unable to parse string as an integer (got 'long')"),
    ("deploy", {"model": "llama3.1:8b", "users": 8, "gpus": 2},  # plan's option given to deploy
     "Error: --gpus is not an option of this command (got 2); did you mean --gpu?; its --help lists the "
     "options"),
    ("deploy", {"model": "llama3.1:8b"},  # no load: the service's own check
     "Error: give the load: --users N (concurrent) or --requests-per-s R, one of the two"),
    ("fit", {"model": "llama3.1:8b"},  # no such tool
     "Error: unknown tool 'fit'; the tools are plan, max-context"),
    ("quants", {"catalog": ["mine.toml"]},  # the quantization catalog takes no extra files
     "Error: --catalog is not an option of this command (got ['mine.toml']); its --help lists the options"),
    ("gpus", {"catalog": ["/no/such/cards.toml"]},  # a file that is not there: the loader's line
     "Error: /no/such/cards.toml: cannot read catalog file"),
]


async def _session(cli_home) -> dict:
    """One client session against the real server: the tool list, the answers, the errors, and a last call
    after the errors (the server is still up)."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "cardfit", "mcp"],
                                   env={"HOME": str(cli_home)})
    out: dict = {}
    with anyio.fail_after(120):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            init = await session.initialize()
            out["server"] = init.server_info.name
            out["tools"] = (await session.list_tools()).tools
            out["plan"] = await session.call_tool("plan", PLAN)
            out["deploy"] = await session.call_tool("deploy", DEPLOY)
            out["gpus"] = await session.call_tool("gpus", {})
            out["bad"] = [await session.call_tool(name, args) for name, args, _ in BAD_CALLS]
            out["after"] = await session.call_tool("breakeven", {"hourly": 2, "tokens_per_s": 1000})
    return out


@pytest.fixture(scope="module")
def session(cli_home) -> dict:
    return anyio.run(_session, cli_home)


def test_lists_one_tool_per_command_with_the_schema_of_its_options(session):
    assert session["server"] == "cardfit"
    listed = {t.name: t for t in session["tools"]}
    assert list(listed) == [c.name for c in COMMANDS] + list(LISTINGS)
    for c in COMMANDS:
        assert listed[c.name].description == c.summary
        assert listed[c.name].input_schema == tool_schema(c.input_type())
    for name, (summary, takes_files) in LISTINGS.items():
        assert listed[name].description == summary
        assert listed[name].input_schema == listing_schema(name)
        assert ("catalog" in listed[name].input_schema["properties"]) == takes_files


def test_plan_answers_with_the_cli_json(session, run_json):
    r = session["plan"]
    assert not r.is_error
    assert r.structured_content == run_json("plan", "llama3.1:8b", "--gpu", "RTX 4090")
    assert json.loads(r.content[0].text) == r.structured_content


def test_a_catalog_listing_answers_with_the_cli_json(session, run_json):
    r = session["gpus"]
    assert not r.is_error
    assert r.structured_content == run_json("gpus")


def test_deploy_answers_with_a_deployment_and_its_command(session):
    r = session["deploy"]
    assert not r.is_error
    best = r.structured_content["best"]
    assert best["gpu"] == "H100 SXM" and best["runtime"] == "vllm"
    assert best["command"].startswith("vllm serve meta-llama/Llama-3.1-8B-Instruct")
    assert r.structured_content == call("deploy", DEPLOY)[0]  # the service's own answer, in-process


@pytest.mark.parametrize(("index", "expected"), [(i, c[2]) for i, c in enumerate(BAD_CALLS)],
                         ids=[f"{c[0]}-{'-'.join(c[1])}" for c in BAD_CALLS])
def test_a_bad_call_is_a_tool_error_with_the_cli_line(session, index, expected):
    r = session["bad"][index]
    assert r.is_error and r.structured_content is None
    text = r.content[0].text
    assert text.startswith(expected) and len(text.splitlines()) == 1, text


def test_the_server_answers_after_the_errors(session):
    r = session["after"]
    assert not r.is_error and r.structured_content["monthly_usd"] > 0


# ------------------------------------------------------------------------------- schemas, in-process

@pytest.mark.parametrize(("command", "name", "expected"), [
    # bounds come from opt(..., ge=1, le=MAX_CONTEXT): minimum/maximum
    ("plan", "context", {"type": "integer", "minimum": 1, "maximum": 1 << 24}),
    # gt=0 is an exclusive minimum (0 is refused, 1 accepted)
    ("plan", "gpu_memory_utilization", {"type": "number", "exclusiveMinimum": 0, "maximum": 1}),
    ("plan", "kv_dtype", {"type": "string", "maxLength": 16}),
    ("plan", "allow_long_context", {"type": "boolean", "default": False}),
    ("plan", "config_json", {"type": "object"}),  # a config.json's contents, as the web API takes it
    # deploy's repeatable --gpu is a list of card names, at most 64
    ("deploy", "gpu", {"type": "array", "items": {"type": "string"}, "maxItems": 64}),
    ("deploy", "max_nodes", {"type": "integer", "minimum": 1, "maximum": 64, "default": 4}),
])
def test_field_schema(command, name, expected):
    f = next(f for f in describe(BY_NAME[command].input_type()) if f.name == name)
    got = field_schema(f)
    assert got.pop("description") == f.help
    assert got == expected


def test_every_input_is_a_property_and_nothing_else():
    for t in tools()[:len(COMMANDS)]:
        fields = describe(BY_NAME[t["name"]].input_type())
        schema = t["input_schema"]
        assert list(schema["properties"]) == [f.name for f in fields]
        assert schema["additionalProperties"] is False


def test_a_split_list_is_an_array_of_bounded_numbers():
    """speed's concurrency levels (`--concurrency 1,8,64` on the CLI) are a JSON array of whole numbers."""
    f = next(f for f in describe(BY_NAME["speed"].input_type()) if f.name == "concurrency")
    assert f.limits.split
    s = field_schema(f)
    assert (s["type"], s["items"], s["maxItems"]) == (
        "array", {"type": "integer", "minimum": f.limits.item_ge, "maximum": f.limits.item_le}, 64)
    rows = call("speed", {"model": "llama3.1:8b", "gpu": "RTX 4090", "concurrency": [1, 8]})[0]["rows"]
    assert [r["concurrency"] for r in rows] == [1, 8]


def test_the_readme_example_is_real_output(cli_home):
    """The README's MCP snippet, run as written (`cardfit` found on PATH beside this interpreter), prints the
    text shown under it."""
    import os
    import subprocess
    from pathlib import Path

    readme = (Path(__file__).parent.parent / "README.md").read_text().split("## From an agent (MCP)", 1)[1]
    code = readme.split("```python\n", 1)[1].split("```", 1)[0]
    shown = readme.split("```text\n", 1)[1].split("```", 1)[0]
    env = {**os.environ, "HOME": str(cli_home),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout == shown

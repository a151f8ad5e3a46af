"""`cardfit mcp`: the command table (services/table.py) as Model Context Protocol tools over stdio, one tool
per row, and the catalog listings (`gpus`, `models`, `quants`, `apis`: services/catalogs.py `listing`). A
tool's input schema is built from the row's input descriptions (services/inputs.py `describe`: the same
names, types, limits and help as the CLI options and the web API); its arguments go through the same `parse`
as the CLI's, and its result is the command's `--json` object. A bad argument is a tool error carrying the
CLI's one line (`Error: …`), never a crash of the server.

The official MCP Python SDK (`pip install 'cardfit[mcp]'`) is imported only by `serve`; the schemas and the
calls need nothing third-party (tests/test_mcp.py checks them in-process and through a real client)."""

from __future__ import annotations

import json
import os
from typing import Any

from .. import __version__
from ..errors import CardfitError
from ..services.catalogs import LISTINGS, listing
from ..services.inputs import FieldInfo, ModelInput, describe, parse, unknown_option
from ..services.table import BY_NAME, COMMANDS, to_json

INSTRUCTIONS = ("cardfit plans whether an LLM fits on a GPU, how fast it runs and what it costs. Each tool "
                "is a `cardfit` command; its arguments are the command's options (snake_case) and its "
                "result is the command's --json object.")

_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "dict": "object"}
_BOUNDS = (("gt", "exclusiveMinimum"), ("ge", "minimum"), ("lt", "exclusiveMaximum"), ("le", "maximum"))


def _scalar_schema(kind: str, f: FieldInfo) -> dict[str, Any]:
    out: dict[str, Any] = {"type": _TYPES[kind]}
    lim = f.limits
    if kind in ("int", "float"):
        out.update({key: getattr(lim, name) for name, key in _BOUNDS if getattr(lim, name) is not None})
    elif kind == "str" and lim.max_length is not None:
        out["maxLength"] = lim.max_length
    return out


def field_schema(f: FieldInfo) -> dict[str, Any]:
    """The JSON Schema of one described input (what `parse` accepts, in JSON's terms)."""
    lim = f.limits
    if f.kind == "choice":
        out: dict[str, Any] = {"enum": list(f.choices)}
    elif f.kind == "tuple":
        item = {"type": _TYPES[f.item]}
        item.update({k: v for k, v in (("minimum", lim.item_ge), ("maximum", lim.item_le)) if v is not None})
        out = {"type": "array", "items": item}
        if lim.max_length is not None:
            out["maxItems"] = lim.max_length
    else:
        out = _scalar_schema(f.kind, f)
    if f.help:
        out["description"] = f.help
    if f.default is not None and f.default != ():
        out["default"] = f.default
    return out


def tool_schema(cls: type) -> dict[str, Any]:
    """The input schema of a command's tool: one property per described input, nothing else allowed (as
    `parse`, which also says which inputs a command needs together)."""
    return {"type": "object", "properties": {f.name: field_schema(f) for f in describe(cls)},
            "additionalProperties": False}


def _catalog_field() -> FieldInfo:
    """The --catalog input (extra catalog files), as every command that reads them describes it."""
    return next(f for f in describe(ModelInput) if f.name == "catalog")


def listing_schema(name: str) -> dict[str, Any]:
    """A catalog listing's input schema: its extra catalog files, where it reads them."""
    takes_files = LISTINGS[name][1]
    props = {"catalog": field_schema(_catalog_field())} if takes_files else {}
    return {"type": "object", "properties": props, "additionalProperties": False}


def tools() -> list[dict[str, Any]]:
    """Every command of the table, then the catalog listings, as {name, description, input_schema}."""
    return [*({"name": c.name, "description": c.summary, "input_schema": tool_schema(c.input_type())}
              for c in COMMANDS),
            *({"name": n, "description": summary, "input_schema": listing_schema(n)}
              for n, (summary, _) in LISTINGS.items())]


def _listing(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    extra = [k for k in arguments if k not in listing_schema(name)["properties"]]
    if extra:
        # the line `parse` gives for an input a command does not take
        raise unknown_option(extra[0], arguments[extra[0]], listing_schema(name)["properties"])
    files = parse(ModelInput, {"catalog": arguments["catalog"]}).catalog if "catalog" in arguments else ()
    return listing(name, files)


def call(name: str, arguments: dict[str, Any] | None) -> tuple[dict[str, Any] | None, str | None]:
    """(the command's --json object, None), or (None, the one error line the CLI would print)."""
    row = BY_NAME.get(name)
    if row is None and name not in LISTINGS:
        return None, f"Error: unknown tool '{name}'; the tools are {', '.join([*BY_NAME, *LISTINGS])}"
    try:
        if row is None:
            return _listing(name, dict(arguments or {})), None
        return to_json(row.call(dict(arguments or {}))), None
    except CardfitError as e:
        return None, f"Error: {e}"
    except Exception as e:  # a bug, not a user mistake: one line, as the CLI says it; the server stays up
        if os.environ.get("CARDFIT_DEBUG"):
            raise
        return None, (f"Error: internal error ({type(e).__name__}: {e}); please report it, and set "
                      "CARDFIT_DEBUG=1 to see the traceback")


def serve() -> None:
    """Answer one MCP client on stdin/stdout until it closes the connection."""
    import anyio
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    listed = [types.Tool(name=t["name"], description=t["description"], input_schema=t["input_schema"])
              for t in tools()]
    one_at_a_time = anyio.CapacityLimiter(1)  # the services' caches are filled by one call at a time

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        # the arithmetic runs in a worker thread, so the server still answers pings during a long search
        data, error = await anyio.to_thread.run_sync(call, params.name, params.arguments,
                                                     limiter=one_at_a_time)
        if error is not None:
            return types.CallToolResult(content=[types.TextContent(text=error)], is_error=True)
        text = json.dumps(data, indent=2, ensure_ascii=False)
        return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=data)

    server: Server[Any] = Server("cardfit", version=__version__, instructions=INSTRUCTIONS,
                                 on_list_tools=list_tools, on_call_tool=call_tool)

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)

"""`cardfit mcp`: the commands as MCP tools over stdio, for agents (the server: cli/mcp_server.py)."""

from __future__ import annotations

from . import cli

MCP_EPILOG = """\b
Examples:
  cardfit mcp                        # an MCP client starts it and talks on stdin/stdout
  {"mcpServers": {"cardfit": {"command": "cardfit", "args": ["mcp"]}}}   # a client's JSON config
"""


@cli.command(epilog=MCP_EPILOG)
def mcp() -> None:
    """Answer MCP clients (agents) over stdio: one tool per command (plan, max-context, speed, deploy,
    breakeven, …, and the catalogs gpus, models, quants, apis), its arguments the command's options and its
    result the command's --json object. Needs pip install 'cardfit[mcp]'."""
    from ..errors import need_extra

    need_extra("mcp", extra="mcp", what="cardfit mcp")
    from .mcp_server import serve

    serve()

"""Read-only JSON routes the wiki's browser pages use (under ``/mcp/…``, not MCP tools)."""

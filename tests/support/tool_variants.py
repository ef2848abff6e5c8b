"""Tool handler variants for transport tests, which check the MCP layer without a repository."""
from __future__ import annotations

from typing import Any

from gateway.core.errors import ToolError
from gateway.tools.contract import Handler, ToolContext


def refusing_handler(tool_name: str) -> Handler:
    """A handler that always answers the tool error ``not_implemented`` (a tool result with ``isError``).

    Transport tests serve every tool through it, so a call exercises validation,
    admission and framing and ends in a known, bounded tool error.
    """

    def handler(arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        raise ToolError("not_implemented", f"{tool_name} is served by a transport-test stand-in here.",
                        retryable=False)

    handler.__name__ = f"{tool_name}_refusing"
    return handler

"""MCP method handling for the stateless endpoint: initialize, ping, tools/list, tools/call.

There are no sessions: every POST is answered on its own, so tools/list and
tools/call work without a prior initialize on the same connection (the
Streamable HTTP spec lets a server omit ``MCP-Session-Id``). Results are
built with ``mcp.types`` models and dumped with
``model_dump(by_alias=True, exclude_none=True, mode="json")``.

Version negotiation (MCP lifecycle): the client's ``protocolVersion`` is echoed
when it is one of :data:`SUPPORTED_PROTOCOL_VERSIONS`, otherwise the server
answers with the latest revision it speaks (2025-11-25).
"""
from __future__ import annotations

from importlib import metadata
from typing import Any

from mcp.types import (
    Implementation,
    InitializeResult,
    ListToolsResult,
    ServerCapabilities,
    ToolsCapability,
)

from gateway.core.errors import INVALID_PARAMS, JsonRpcError, METHOD_NOT_FOUND
from gateway.tools.dispatcher import Dispatcher
from gateway.tools.policy import CONTENT_POLICY
from gateway.transport.auth import Credentials
from gateway.transport.headers import LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS
from gateway.transport.jsonrpc import Message

__all__ = ["McpProtocol", "SERVER_NAME", "negotiate_version"]

SERVER_NAME = "s3-research-memory"
_INSTRUCTIONS = (
    "S3 Research Memory: the lab's shared, citable research Lessons (what was tried, what was seen, why, "
    "when it applies). Read tools are public; the five write tools need the shared write token when the "
    "server runs in token mode. " + CONTENT_POLICY
)


def _server_version() -> str:
    try:
        return metadata.version("s3-research-memory")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a plain checkout
        return "0.0.0"


def negotiate_version(requested: Any) -> str:
    """Echo ``requested`` when supported, else answer :data:`LATEST_PROTOCOL_VERSION`."""
    return requested if requested in SUPPORTED_PROTOCOL_VERSIONS else LATEST_PROTOCOL_VERSION


def _dump(model) -> dict[str, Any]:
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


class McpProtocol:
    """Answers one classified JSON-RPC request with a result object (or raises ``JsonRpcError``)."""

    def __init__(self, dispatcher: Dispatcher):
        self.dispatcher = dispatcher
        self._server_info = Implementation(name=SERVER_NAME, title="S3 Research Memory", version=_server_version())
        self._tools_result = _dump(ListToolsResult(tools=dispatcher.registry.list_tools()))

    def handle(self, message: Message, credentials: Credentials) -> dict[str, Any]:
        """Return the ``result`` member for ``message`` (a request).

        Raises :class:`JsonRpcError` -32601 for unknown methods, -32602 for bad
        params; tools/call may also raise :class:`~gateway.transport.auth.AuthError`.
        """
        method = message.method
        if method == "initialize":
            return self._initialize(message)
        if method == "ping":
            return {}
        if method == "tools/list":
            return self._tools_result
        if method == "tools/call":
            result = self.dispatcher.call(message.params, request_id=message.id, credentials=credentials)
            return _dump(result)
        raise JsonRpcError(
            METHOD_NOT_FOUND,
            f"Method not found: {str(method)[:80]!r} (this server offers initialize, ping, tools/list, tools/call)",
            request_id=message.id,
        )

    def _initialize(self, message: Message) -> dict[str, Any]:
        requested = message.params.get("protocolVersion")
        if not isinstance(requested, str) or not requested:
            raise JsonRpcError(
                INVALID_PARAMS, 'initialize needs "protocolVersion" (a string)', request_id=message.id
            )
        result = InitializeResult(
            protocolVersion=negotiate_version(requested),
            capabilities=ServerCapabilities(tools=ToolsCapability(listChanged=False)),
            serverInfo=self._server_info,
            instructions=_INSTRUCTIONS,
        )
        return _dump(result)

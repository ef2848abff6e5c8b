"""MCP method handling for the stateless endpoint, both eras (docs/transport.md#protocol-versions).

2025 era (``initialize`` handshake): initialize, ping, tools/list, tools/call, and
in both eras the resources (:mod:`gateway.transport.resources`), prompts
(:mod:`gateway.transport.prompts`) and completions (:mod:`gateway.transport.completions`).
There are no sessions: every POST is answered on its own, so tools/list and
tools/call work without a prior initialize on the same connection (the
Streamable HTTP spec lets a server omit ``MCP-Session-Id``). The client's
``protocolVersion`` is echoed when it is one of
:data:`SUPPORTED_PROTOCOL_VERSIONS`, otherwise the server answers 2025-11-25.

2026-07-28 era (version in every request's ``_meta``, checked by
:mod:`gateway.transport.request_rules`): server/discover, tools/list, tools/call; every
result carries ``resultType: "complete"`` and ``_meta`` with the server's
identity, and the cacheable ones (discover, tools/list) ``ttlMs`` and
``cacheScope``. ``initialize`` (sent at 2026-07-28), ``ping`` and any other method
are unknown there (-32601, HTTP 404).

Results are built with ``mcp_types`` models (the python-sdk 2.x wire types) and
dumped with :func:`gateway.core.jsonio.dump_model`.
"""
from __future__ import annotations

from importlib import metadata
from typing import Any

from mcp_types import (
    CompletionsCapability,
    DiscoverResult,
    Implementation,
    InitializeResult,
    ListToolsResult,
    PromptsCapability,
    ResourcesCapability,
    ServerCapabilities,
    ToolsCapability,
)

from gateway.core.errors import INVALID_PARAMS, JsonRpcError, METHOD_NOT_FOUND
from gateway.core.jsonio import dump_model, encode_json
from gateway.tools.dispatcher import Dispatcher
from gateway.tools.policy import CONTENT_POLICY
from gateway.ops.access import Credentials
from gateway.transport.headers import ALL_PROTOCOL_VERSIONS, LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS
from gateway.transport.jsonrpc import Message
from gateway.transport.completions import Completions
from gateway.transport.request_rules import SERVER_INFO_META_KEY, ModernEnvelope
from gateway.transport.prompts import PromptCatalog
from gateway.transport.resources import READ_TTL_MS, LessonResources

__all__ = ["McpProtocol", "SERVER_NAME", "LIST_TTL_MS", "negotiate_version"]

SERVER_NAME = "s3-research-memory"
#: ``ttlMs`` of tools/list and server/discover (2026-07-28 caching hints): the tool set changes only
#: when the server is redeployed, so clients may reuse a listing for five minutes.
LIST_TTL_MS = 300_000
_INSTRUCTIONS = (
    "S3 Research Memory: the lab's shared, citable research Lessons (what was tried, what was seen, why, "
    "when it applies). Read tools are public; the five write tools need the shared write token when the "
    "server runs in token mode. " + CONTENT_POLICY
)


#: What both eras advertise (initialize and server/discover): tools, resources, prompts, completions.
CAPABILITIES = ServerCapabilities(
    tools=ToolsCapability(listChanged=False),
    resources=ResourcesCapability(listChanged=False),
    prompts=PromptsCapability(listChanged=False),
    completions=CompletionsCapability(),
)
_METHODS = ("tools/list, tools/call, resources/list, resources/templates/list, resources/read, prompts/list, "
            "prompts/get, completion/complete")


def _server_version() -> str:
    try:
        return metadata.version("s3-research-memory")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a plain checkout
        return "0.0.0"


def negotiate_version(requested: Any) -> str:
    """Echo ``requested`` when supported, else answer :data:`LATEST_PROTOCOL_VERSION`."""
    return requested if requested in SUPPORTED_PROTOCOL_VERSIONS else LATEST_PROTOCOL_VERSION


_dump = dump_model


def _dump_modern(model) -> dict[str, Any]:
    """A 2026-07-28 result: every member ``mcp_types`` serialises, ``resultType`` and caching hints included."""
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


class McpProtocol:
    """Answers one classified JSON-RPC request with a result object (or raises ``JsonRpcError``)."""

    def __init__(self, dispatcher: Dispatcher):
        self.dispatcher = dispatcher
        self._server_info = Implementation(name=SERVER_NAME, title="S3 Research Memory", version=_server_version())
        self._tools_result = _dump(ListToolsResult(tools=dispatcher.registry.list_tools()))
        #: members every 2026-07-28 result carries (``_meta`` identity, ``resultType``)
        self._modern_members = {
            "_meta": {SERVER_INFO_META_KEY: _dump(self._server_info)},
            "resultType": "complete",
        }
        #: bytes the modern members add to a non-empty result object: ``,"_meta":{...},"resultType":"complete"``
        self._modern_overhead = len(encode_json(self._modern_members)) - 1
        server_meta = {SERVER_INFO_META_KEY: _dump(self._server_info)}
        self._modern_tools_result = _dump_modern(ListToolsResult(
            tools=dispatcher.registry.list_tools(), ttl_ms=LIST_TTL_MS, cache_scope="public", meta=server_meta))
        self.resources = LessonResources(dispatcher)
        self.prompts = PromptCatalog(dispatcher.config.schema)
        self.completions = Completions(dispatcher, self.prompts)
        self._discover_result = _dump_modern(DiscoverResult(
            supported_versions=list(ALL_PROTOCOL_VERSIONS),
            capabilities=CAPABILITIES,
            instructions=_INSTRUCTIONS, ttl_ms=LIST_TTL_MS, cache_scope="public", meta=server_meta))

    def handle(
        self, message: Message, credentials: Credentials, modern: ModernEnvelope | None = None
    ) -> dict[str, Any]:
        """Return the ``result`` member for ``message`` (a request).

        ``modern`` is the checked 2026-07-28 envelope, or ``None`` for the
        2025 era. Raises :class:`JsonRpcError` -32601 for unknown methods
        (HTTP 404 in the 2026-07-28 era), -32602 for bad params; tools/call
        may also raise :class:`~gateway.ops.access.AuthError`.
        """
        if modern is not None:
            return self._handle_modern(message, credentials)
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
        answer = self._surface(message, credentials, modern=False)
        if answer is not None:
            return answer[0]
        raise JsonRpcError(
            METHOD_NOT_FOUND,
            f"Method not found: {str(method)[:80]!r} (this server offers initialize, ping, {_METHODS})",
            request_id=message.id,
        )

    def _surface(self, message: Message, credentials: Credentials, *, modern: bool):
        """``(result, ttlMs or None)`` of a resources/prompts/completion method, else ``None``.

        ``ttlMs`` is set for the results 2026-07-28 marks cacheable (lists and reads).
        """
        method, params, rid = message.method, message.params, message.id
        overhead = self._modern_overhead + 40 if modern else 0  # + ,"ttlMs":30000,"cacheScope":"public"
        if method == "resources/list":
            return self.resources.list(params, rid, credentials, overhead), READ_TTL_MS
        if method == "resources/templates/list":
            return self.resources.templates(), LIST_TTL_MS
        if method == "resources/read":
            return self.resources.read(params, rid, credentials, modern=modern, overhead=overhead), READ_TTL_MS
        if method == "prompts/list":
            return self.prompts.listing, LIST_TTL_MS
        if method == "prompts/get":
            return self.prompts.get(params, rid), None
        if method == "completion/complete":
            return self.completions.complete(params, rid, credentials), None
        return None

    def _handle_modern(self, message: Message, credentials: Credentials) -> dict[str, Any]:
        method = message.method
        if method == "server/discover":
            return self._discover_result
        if method == "tools/list":
            return self._modern_tools_result
        if method == "tools/call":
            result = self.dispatcher.call(
                message.params,
                request_id=message.id,
                credentials=credentials,
                overhead_bytes=self._modern_overhead,
            )
            return {**_dump(result), **self._modern_members}
        answer = self._surface(message, credentials, modern=True)
        if answer is not None:
            result, ttl_ms = answer
            hints = {"ttlMs": ttl_ms, "cacheScope": "public"} if ttl_ms is not None else {}
            return {**result, **hints, **self._modern_members}
        raise JsonRpcError(
            METHOD_NOT_FOUND,
            f"Method not found: {str(method)[:80]!r} (with MCP 2026-07-28 this server offers server/discover, "
            f"{_METHODS})",
            http_status=404,
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
            capabilities=CAPABILITIES,
            serverInfo=self._server_info,
            instructions=_INSTRUCTIONS,
        )
        return _dump(result)

"""The ``search_lessons`` MCP client shared by ``s3rm evaluate`` and ``s3rm research-query``.

Contract: docs/research-tools.md#research-query (transport and privacy), docs/retrieval.md#evaluation.
One :class:`McpSearch` is one official-SDK ``ClientSession`` over Streamable
HTTP; 429/503 answers are retried (read-only calls). Errors are printable
without leaking query text or server messages (:class:`SearchError`,
:func:`describe_failure`).
"""
from __future__ import annotations

import json
import re
from typing import Any

from s3rm.settings import SETTINGS, CliSettings
from s3rm.errors import S3rmError

__all__ = ["DEFAULT_MCP_URL", "McpSearch", "SearchError", "describe_failure", "resolve_mcp_url"]

DEFAULT_MCP_URL = SETTINGS["S3RM_MCP_URL"].default


def resolve_mcp_url(explicit: str | None = None) -> str:
    """The MCP endpoint: ``explicit``, else ``$S3RM_MCP_URL``, else the running dev stack's
    (``.dev/stack.env``), else :data:`DEFAULT_MCP_URL`."""
    return explicit or CliSettings().mcp_url


class SearchError(S3rmError):
    """The gateway could not be used (transport failure, refused call, malformed result).

    ``str(exc)`` is safe to print: it names the URL, an HTTP status, an error
    code or an exception type — never query text or a server message. ``code``
    is the tool's error code when the tool answered ``isError`` (else ``None``).
    """

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        self.code = code


_RETRY_STATUSES = (429, 503)


def _retry_transport():
    """An httpx transport that retries 429/503 (``Retry-After`` ≤ 10 s, 3 attempts; tenacity): search is read-only.

    httpx, not requests: the MCP SDK's Streamable HTTP client takes an ``httpx.AsyncClient``; the CLI's
    other HTTP calls use requests (s3rm/index, s3rm/devstack, gateway/wiki/client.py).
    """
    import anyio
    import httpx
    from tenacity import AsyncRetrying, RetryCallState, retry_if_result, stop_after_attempt

    def server_wait(state: RetryCallState) -> float:
        try:
            wait = float(state.outcome.result().headers.get("retry-after", "1"))
        except ValueError:
            wait = 1.0
        return min(max(wait, 0.1), 10.0)

    async def close_refused(state: RetryCallState) -> None:
        await state.outcome.result().aclose()

    class RetryTransport(httpx.AsyncHTTPTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            retrying = AsyncRetrying(
                retry=retry_if_result(lambda response: response.status_code in _RETRY_STATUSES),
                stop=stop_after_attempt(3), wait=server_wait, sleep=anyio.sleep, before_sleep=close_refused,
                retry_error_callback=lambda state: state.outcome.result())  # the third refusal is the answer
            return await retrying(super().handle_async_request, request)

    return RetryTransport()


def _tool_error_code(result: Any) -> str:
    try:
        payload = json.loads(result.content[0].text)
        code = payload["error"]["code"]
        return code if isinstance(code, str) and re.fullmatch(r"[a-z0-9_]{1,64}", code) else "tool_error"
    except Exception:  # noqa: BLE001 - any malformed error body is just "tool_error"
        return "tool_error"


class McpSearch:
    """``search_lessons`` over one MCP ClientSession; use as ``async with McpSearch(url) as s: ...``."""

    def __init__(self, url: str, *, timeout: float = 60.0):
        self.url = url
        self.timeout = timeout
        self._stack = None
        self.session = None

    async def __aenter__(self) -> "McpSearch":
        import contextlib

        import httpx
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        self._stack = contextlib.AsyncExitStack()
        try:
            http = await self._stack.enter_async_context(
                httpx.AsyncClient(transport=_retry_transport(), timeout=self.timeout, follow_redirects=False))
            read, write, _ = await self._stack.enter_async_context(streamable_http_client(self.url, http_client=http))
            self.session = await self._stack.enter_async_context(ClientSession(read, write))
            await self.session.initialize()
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._stack.aclose()

    async def call(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """One ``tools/call search_lessons``; returns ``structuredContent``.

        Raises :class:`SearchError` (``code`` attribute set) when the tool answers ``isError``.
        """
        result = await self.session.call_tool("search_lessons", arguments)
        if result.isError or not isinstance(result.structuredContent, dict):
            code = _tool_error_code(result) if result.isError else "no_structured_content"
            raise SearchError(f"search_lessons returned an error ({code})", code)
        return result.structuredContent


def describe_failure(exc: BaseException, url: str) -> str:
    """A printable reason for a transport failure: URL, HTTP status or exception type — no message bodies."""
    import httpx

    leaves: list[BaseException] = []

    def walk(e: BaseException) -> None:
        if isinstance(e, BaseExceptionGroup):
            for sub in e.exceptions:
                walk(sub)
        else:
            leaves.append(e)

    walk(exc)
    for leaf in leaves:
        if isinstance(leaf, SearchError):
            return str(leaf)
        if isinstance(leaf, httpx.HTTPStatusError):
            return f"{url} answered HTTP {leaf.response.status_code}"
        if isinstance(leaf, httpx.ConnectError):
            return f"cannot connect to {url}"
        if isinstance(leaf, httpx.TimeoutException):
            return f"{url} timed out"
    return f"MCP call to {url} failed ({type(leaves[0]).__name__ if leaves else type(exc).__name__})"

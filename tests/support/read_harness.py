"""Calling the read tools the way the server does, for tests and the benchmark.

``Harness(repo, cap=…)`` runs tools through the real :class:`Dispatcher`
(input validation, handler, output-schema validation, byte cap) over the
tool schemas the registry builds; ``call`` returns ``structuredContent`` or
``{"error": {...}}`` plus the response size in bytes.
"""
from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any

from gateway.config import DEFAULT_SCHEMA_DIR, GatewayConfig
from gateway.core.jsonio import encode_json
from gateway.tools.contract import result_message
from gateway.tools.dispatcher import Dispatcher
from gateway.tools.registry import ToolRegistry
from gateway.ops.access import Credentials

SECRET = b"read-tests-cursor-secret-0123456789"


class Harness:
    """A dispatcher over ``repo`` with the given byte cap and search scopes."""

    def __init__(self, repo, cap: int = 32768, scopes: dict | None = None):
        self.config = GatewayConfig(output_max_bytes=cap, cursor_secret=SECRET, cursor_secret_ephemeral=False,
                                    search_scopes=MappingProxyType(scopes or {}), schema_dir=DEFAULT_SCHEMA_DIR)
        self.dispatcher = Dispatcher(ToolRegistry.load(self.config.schema), config=self.config, repository=repo)
        self.last_size = 0

    def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """``structuredContent`` of a successful call, else ``{"error": {...}}``; sets ``last_size``."""
        result = self.dispatcher.call({"name": tool, "arguments": arguments}, request_id=1,
                                      credentials=Credentials())
        self.last_size = len(encode_json(result_message(1, result)))
        assert self.last_size <= self.config.output_max_bytes, (tool, self.last_size)
        if result.is_error:
            payload = json.loads(result.content[0].text)
            assert payload["error"]["code"] != "internal_error", payload
            return payload
        assert json.loads(result.content[0].text) == result.structured_content
        return result.structured_content

    def error(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """The error object of a call that must fail."""
        out = self.call(tool, **arguments)
        assert "error" in out, out
        return out["error"]

    def walk(self, tool: str, key: str = "results", **arguments: Any) -> list[dict[str, Any]]:
        """Follow ``next_cursor`` to the end; returns every item of ``key`` in order."""
        items, cursor = [], None
        for _ in range(1000):
            page = self.call(tool, **arguments, **({"cursor": cursor} if cursor else {}))
            assert "error" not in page, page
            items.extend(page[key])
            cursor = page["next_cursor"]
            if cursor is None:
                return items
        raise AssertionError("pagination did not end")

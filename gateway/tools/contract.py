"""The tool contract: what a tool is, what it may use, how it fails, how big it may answer.

* :class:`ToolSpec` — one MCP tool as a value (name, title, description, kind,
  annotations, handler, and the builders of its JSON Schemas, which
  :mod:`gateway.tools.registry` runs at start-up).
* :class:`ToolContext` — everything a handler may use (configuration, the
  Lesson repository, the caller's principal, a clock, the output budget,
  metrics). Handlers never build clients or read the environment.
* :class:`OutputBudget` — measures the exact UTF-8 size of the JSON-RPC response
  that would carry a result, so tools can shrink pages before the dispatcher's
  final byte-cap check (docs/tools.md#output-limits).

A handler reports an expected failure by raising
:class:`gateway.core.errors.ToolError`; the dispatcher turns it into an
``isError`` result (docs/tools.md#results).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Literal, Sequence, TypeVar

from mcp_types import CallToolResult, TextContent, ToolAnnotations

from gateway.config import GatewayConfig
from gateway.config.schema import Schema
from gateway.core.errors import ToolError
from gateway.core.jsonio import compact_json, dump_model, encode_json
from gateway.core.principal import Principal
from gateway.domain.repository import LessonRepository
from gateway.ops.metrics import Metrics
from gateway.retrieval.hybrid.service import RetrievalService
from gateway.tools.cursors import CursorKeyRing
from gateway.tools.schema_builders import Fields
from gateway.tools.shaping import OutputShapes

__all__ = [
    "Handler",
    "OutputBudget",
    "SchemaBuilder",
    "ToolContext",
    "ToolSpec",
    "WholeRead",
    "failure_result",
    "success_result",
    "result_message",
    "utc_now",
]

T = TypeVar("T")


def result_message(request_id: str | int | None, result: CallToolResult) -> dict[str, Any]:
    """Return the JSON-RPC response object (a dict) that carries ``result`` for ``request_id``."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "result": dump_model(result),
    }


def success_result(obj: dict[str, Any]) -> CallToolResult:
    """The CallToolResult for a successful call: ``structuredContent`` plus the same object as compact JSON text."""
    return CallToolResult(content=[TextContent(type="text", text=compact_json(obj))], structuredContent=obj, isError=False)


def failure_result(payload: dict[str, Any]) -> CallToolResult:
    """The CallToolResult for a failed call: ``isError`` with the JSON error text and no ``structuredContent``."""
    return CallToolResult(content=[TextContent(type="text", text=compact_json(payload))], isError=True)


def utc_now() -> datetime:
    """The default tool clock: the current time as an aware UTC datetime."""
    return datetime.now(timezone.utc)


# -------------------------------------------------------------------- budget
@dataclass(frozen=True)
class OutputBudget:
    """The UTF-8 byte cap on one tools/call response (``S3RM_OUTPUT_MAX_BYTES``).

    Sizes are measured on the exact bytes the transport will send: the whole
    JSON-RPC response (envelope with this request's id, ``structuredContent``
    and the compact JSON text copy). Use it to shrink pages::

        page, n = ctx.budget.fit_prefix(items, lambda part: {"results": part, ...})

    ``cap_bytes``: the cap; ``request_id``: the JSON-RPC id the response echoes;
    ``overhead_bytes``: bytes the transport adds to every result of this request
    (the 2026-07-28 ``resultType`` and ``_meta`` members, docs/transport.md#tool-results);
    ``ceiling_bytes``: the read ceiling, the most a :class:`WholeRead` result
    may take (at least the cap; 0 means the cap; docs/read-path.md#read-back).
    """

    cap_bytes: int
    request_id: str | int | None = None
    overhead_bytes: int = 0
    ceiling_bytes: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "ceiling_bytes", max(self.cap_bytes, self.ceiling_bytes))

    def measure(self, obj: dict[str, Any]) -> int:
        """Bytes of the full response that would carry ``obj`` as a successful result."""
        return len(encode_json(result_message(self.request_id, success_result(obj)))) + self.overhead_bytes

    def measure_error(self, payload: dict[str, Any]) -> int:
        """Bytes of the full response that would carry the error ``payload`` as an ``isError`` result."""
        return len(encode_json(result_message(self.request_id, failure_result(payload)))) + self.overhead_bytes

    def fits(self, obj: dict[str, Any]) -> bool:
        """True when ``obj`` as a successful result stays within the cap."""
        return self.measure(obj) <= self.cap_bytes

    def remaining_bytes(self, obj: dict[str, Any]) -> int:
        """Cap minus the size ``obj`` would take (negative when over the cap)."""
        return self.cap_bytes - self.measure(obj)

    def fit_prefix(
        self, items: Sequence[T], build: Callable[[Sequence[T]], dict[str, Any]]
    ) -> tuple[dict[str, Any], int]:
        """Return ``(build(items[:n]), n)`` for the largest ``n`` whose result fits.

        ``build`` must produce a result object for any prefix (including the
        empty one, e.g. with ``next_cursor`` pointing at item ``n``). Raises
        :class:`ToolError` ``output_too_large`` when even the empty prefix does
        not fit. Runs a binary search: O(log n) serializations.
        """
        best = build(items[:0])
        if not self.fits(best):
            raise ToolError(
                "output_too_large",
                f"even an empty page exceeds the {self.cap_bytes}-byte response cap; select fewer fields",
            )
        lo, hi = 0, len(items)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            candidate = build(items[:mid])
            if self.fits(candidate):
                lo, best = mid, candidate
            else:
                hi = mid - 1
        return best, lo


class WholeRead(dict):
    """A result holding one value, or one item per sub-list, that is sent whole above the cap.

    A handler returns it for a minimal read that does not fit
    ``S3RM_OUTPUT_MAX_BYTES``; the dispatcher then allows up to
    :attr:`OutputBudget.ceiling_bytes` (docs/read-path.md#read-back).
    """


# ------------------------------------------------------------------ context
@dataclass(frozen=True)
class ToolContext:
    """What a handler may use during one call (built by the dispatcher per call).

    * ``config`` — the :class:`~gateway.config.GatewayConfig`.
    * ``repository`` — the Lesson repository built once per process by the app
      factory's ``repository_factory`` (``None`` when the server runs without one).
    * ``principal`` — the caller (:class:`~gateway.core.principal.Principal`).
    * ``clock`` — ``() -> datetime`` (aware UTC); use it instead of ``datetime.now``.
    * ``budget`` — the :class:`OutputBudget` for this response.
    * ``metrics`` — the process :class:`~gateway.ops.metrics.Metrics` (counts and
      latencies only; never query text or Lesson content).
    * ``schema`` — the schema source (:class:`~gateway.config.schema.Schema`,
      ``config.schema``): field definitions, enums, limits and patterns.
    * ``shapes`` — the served output schemas (:class:`~gateway.tools.shaping.OutputShapes`)
      a read conforms its records to.
    * ``tool_name`` — the tool being called.
    * ``retrieval`` — the process :class:`~gateway.retrieval.hybrid.service.RetrievalService`
      (hybrid search, dirty hints, duplicate candidates) or ``None``.
    * ``cursor_ring`` — the shared cursor key ring
      (:class:`~gateway.tools.cursors.CursorKeyRing`, reloaded after a key
      rotation) or ``None`` (``config.cursor_keys`` / ``cursor_secret`` sign).
    """

    config: GatewayConfig
    repository: LessonRepository | None
    principal: Principal
    clock: Callable[[], datetime]
    budget: OutputBudget
    metrics: Metrics
    schema: Schema
    shapes: OutputShapes
    tool_name: str = ""
    retrieval: RetrievalService | None = None
    cursor_ring: CursorKeyRing | None = None


#: A tool handler: validated arguments + context → result object (validated against the output schema).
Handler = Callable[[dict[str, Any], ToolContext], dict[str, Any]]
#: Builds one of a tool's JSON Schemas from the schema source's field definitions.
SchemaBuilder = Callable[[Fields], dict[str, Any]]


# --------------------------------------------------------------------- spec
@dataclass(frozen=True)
class ToolSpec:
    """One MCP tool as a value (docs/tools.md#tool-list).

    ``name`` (snake_case, also the schema file stem), ``title`` (human label),
    ``description`` (what it does plus the content policy, docs/tools.md#content-policy),
    ``kind`` (``"read"`` or ``"write"``; writes need the write token in token
    mode), ``annotations`` (truthful MCP hints), ``handler``, and the builders
    ``input_schema(schema_fields)`` / ``output_schema(schema_fields)`` of its JSON Schemas
    (:class:`~gateway.tools.schema_builders.Fields` → schema dict), which
    ``s3rm schema generate`` writes to ``schema/tools/``.
    """

    name: str
    title: str
    description: str
    kind: Literal["read", "write"]
    annotations: ToolAnnotations
    handler: Handler = field(compare=False)
    input_schema: SchemaBuilder = field(compare=False)
    output_schema: SchemaBuilder = field(compare=False)

    def __post_init__(self) -> None:
        if self.kind not in ("read", "write"):
            raise ValueError(f"tool {self.name}: kind must be 'read' or 'write'")


def tool_spec(name: str, title: str, description: str, kind: Literal["read", "write"], handler: Handler,
              input_schema: SchemaBuilder, output_schema: SchemaBuilder, *, destructive: bool = False) -> ToolSpec:
    """One tool's :class:`ToolSpec` with its MCP annotations derived from what it is (docs/tools.md#tool-list).

    Every tool is closed-world (``openWorldHint`` false: it touches only this
    wiki) and idempotent (reads trivially; writes because ``operation_id``
    replays a repeated call); a read is ``readOnlyHint`` true; ``destructive``
    marks a write that may overwrite stored values (``revise_lesson``).
    The annotation title is the tool title. Raises ValueError for another ``kind``.
    """
    annotations = ToolAnnotations(title=title, readOnlyHint=kind == "read", destructiveHint=destructive,
                                  idempotentHint=True, openWorldHint=False)
    return ToolSpec(name=name, title=title, description=description, kind=kind, annotations=annotations,
                    input_schema=input_schema, output_schema=output_schema, handler=handler)

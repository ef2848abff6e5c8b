"""The one place every tools/call goes through (docs/tools.md#results, docs/tools.md#output-limits).

For each call, in order:

1. look the tool up — unknown → JSON-RPC ``-32602`` (:class:`JsonRpcError`);
2. authorise it — an unauthorised write → :class:`~gateway.ops.access.AuthError` (HTTP 401/403);
   then take a slot of its admission class (``read``/``write``,
   :mod:`gateway.ops.admission`) — over capacity →
   :class:`~gateway.ops.admission.AdmissionRejected` (HTTP 429/503, ``Retry-After``);
3. validate the arguments against the tool's closed input schema — failure →
   ``isError`` result ``invalid_argument`` naming ``field`` and ``rule``
   (MCP 2025-11-25: input validation errors are tool execution errors);
4. run the handler with a fresh :class:`~gateway.tools.contract.ToolContext` —
   :class:`~gateway.core.errors.ToolError` → ``isError`` with its code; any other
   exception → ``internal_error`` (logged by exception type only);
5. validate the result against the output schema — failure is a server bug →
   ``internal_error`` without details (logged by schema rule and path only);
6. enforce the UTF-8 byte cap on the whole response — over → ``output_too_large``.

Success: ``structuredContent`` = the object and one text content holding the
same object as compact JSON. Errors: ``isError: true``, the JSON error object
as text, no ``structuredContent``. Logs and metrics carry the tool name,
outcome code, latency and size — never arguments, query text or Lesson content.
"""
from __future__ import annotations

import json
import logging
import re
import time
from datetime import datetime
from typing import Any, Callable

from jsonschema.exceptions import ValidationError, best_match
from mcp_types import CallToolResult

from gateway.config import GatewayConfig
from gateway.core.errors import INVALID_PARAMS, JsonRpcError, ToolError, error_payload
from gateway.core.jsonio import encode_json
from gateway.domain.ids import lesson_id_problem
from gateway.ops.metrics import Metrics
from gateway.tools.contract import (
    OutputBudget,
    ToolContext,
    failure_result,
    result_message,
    success_result,
    utc_now,
    WholeRead,
)
from gateway.tools.readability import whole_read_bytes
from gateway.tools.shaping import OutputShapes
from gateway.tools.registry import ToolEntry, ToolRegistry
from gateway.ops.access import AuthError, Credentials, authorize

__all__ = ["Dispatcher", "describe_validation_error"]

log = logging.getLogger("s3rm.tools")

_MAX_ENUM_SHOWN = 20


class Dispatcher:
    """Runs tools/call requests against a :class:`ToolRegistry`.

    ``repository`` is handed to every :class:`ToolContext` unchanged (the app
    factory passes a lazily built, process-wide repository or ``None``).
    """

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        config: GatewayConfig,
        repository: Any = None,
        metrics: Metrics | None = None,
        clock: Callable[[], datetime] = utc_now,
        admission: Any = None,
        retrieval: Any = None,
        cursor_ring: Any = None,
        write_listeners: tuple[Callable[[str], None], ...] = (),
    ):
        self.registry = registry
        self.config = config
        self.repository = repository
        self.metrics = metrics or Metrics()
        self.clock = clock
        #: :class:`gateway.ops.admission.Admission` or ``None`` (no admission control, unit tests)
        self.admission = admission
        #: :class:`gateway.retrieval.hybrid.service.RetrievalService` or ``None`` (handed to every ToolContext)
        self.retrieval = retrieval
        #: :class:`gateway.tools.cursors.CursorKeyRing` of the shared store, or ``None`` (handed to every ToolContext)
        self.cursor_ring = cursor_ring
        #: ``(tool name) -> None`` callables run after every successful write (e.g. the
        #: graph cache's invalidation); a failing listener never fails the write
        self.write_listeners = tuple(write_listeners)
        #: bytes of the largest minimal read the schemas allow (docs/read-path.md#read-back)
        self.whole_read_bytes = whole_read_bytes(config.schema)
        #: the registry's output schemas, which reads conform their records to
        self.shapes = OutputShapes({entry.spec.name: entry.output_schema for entry in registry})

    def call(
        self,
        params: dict[str, Any],
        *,
        request_id: str | int | None,
        credentials: Credentials,
        overhead_bytes: int = 0,
    ) -> CallToolResult:
        """Handle the ``params`` of one tools/call request and return its ``CallToolResult``.

        ``overhead_bytes``: what the transport adds to the result afterwards
        (counted against ``S3RM_OUTPUT_MAX_BYTES``, see :class:`OutputBudget`).

        Raises :class:`JsonRpcError` (-32602) for an unknown tool or malformed
        params and :class:`~gateway.ops.access.AuthError` for an
        unauthorised write; every other failure is an ``isError`` result.
        """
        entry, arguments = self._lookup(params, request_id)
        name = entry.spec.name
        principal = authorize(entry.spec.kind, credentials, self.config)
        cap = self.config.output_max_bytes
        budget = OutputBudget(cap, request_id, overhead_bytes,
                              ceiling_bytes=max(cap, self.whole_read_bytes + overhead_bytes))
        started = time.perf_counter()
        if self.admission is None:
            outcome, result = self._run(entry, arguments, principal, budget)
        else:
            with self.admission.slot(entry.spec.kind):
                outcome, result = self._run(entry, arguments, principal, budget)
        elapsed = time.perf_counter() - started
        if outcome == "ok" and entry.spec.kind == "write":
            self._notify_write(name)
        size = len(encode_json(result_message(request_id, result))) + overhead_bytes
        self.metrics.incr("tool_calls", tool=name, outcome=outcome)
        self.metrics.observe("tool_call_seconds", elapsed, tool=name)
        log.info("tool call tool=%s outcome=%s ms=%.1f bytes=%d", name, outcome, elapsed * 1000, size)
        return result

    def admission_kind(self, params: dict[str, Any], credentials: Credentials) -> str | None:
        """The admission class (``read`` | ``write``) :meth:`call` would take a slot of for ``params``, or
        ``None`` when it would answer before admission (unknown tool, bad params, unauthorised write) or
        runs without admission control. Pure: nothing counted, nothing logged (the worker's early refusal,
        docs/operations.md#early-refusal)."""
        if self.admission is None:
            return None
        try:
            entry, _arguments = self._lookup(params, None)
            authorize(entry.spec.kind, credentials, self.config)
        except (JsonRpcError, AuthError):
            return None
        return entry.spec.kind

    def _lookup(self, params: dict[str, Any], request_id: str | int | None) -> tuple[ToolEntry, dict[str, Any]]:
        """The tool entry and the arguments object of a tools/call; JSON-RPC -32602 when either is bad."""
        name = params.get("name")
        if not isinstance(name, str) or not name:
            raise JsonRpcError(INVALID_PARAMS, 'tools/call needs "name": the tool to call', request_id=request_id)
        entry = self.registry.get(name)
        if entry is None:
            raise JsonRpcError(
                INVALID_PARAMS,
                f"Unknown tool: {name[:80]!r}. Call tools/list for the available tools.",
                request_id=request_id,
            )
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise JsonRpcError(INVALID_PARAMS, '"arguments" must be a JSON object', request_id=request_id)
        return entry, arguments

    def _notify_write(self, name: str) -> None:
        for listener in self.write_listeners:
            try:
                listener(name)
            except Exception as exc:  # the write already succeeded; never undo or fail it
                log.warning("write listener failed tool=%s exception=%s", name, type(exc).__name__)

    # ------------------------------------------------------------------ steps
    def _run(self, entry: ToolEntry, arguments: dict[str, Any], principal, budget: OutputBudget):
        spec = entry.spec
        error = best_match(entry.input_validator.iter_errors(arguments))
        if error is not None:
            field, rule, message = describe_validation_error(error, meta=self.config.schema.meta)
            return "invalid_argument", self._failure(
                budget, error_payload("invalid_argument", message, field=field, rule=rule)
            )
        bad_text = _lone_surrogate_path(arguments)
        if bad_text is not None:
            return "invalid_argument", self._failure(budget, error_payload(
                "invalid_argument", f"{bad_text or 'arguments'}: contains a lone surrogate code point, "
                "which is not text (it cannot be encoded as UTF-8)", field=bad_text, rule="unicode"))

        ctx = ToolContext(
            config=self.config,
            repository=self.repository,
            principal=principal,
            clock=self.clock,
            budget=budget,
            metrics=self.metrics,
            schema=self.config.schema,
            shapes=self.shapes,
            tool_name=spec.name,
            retrieval=self.retrieval,
            cursor_ring=self.cursor_ring,
        )
        try:
            obj = spec.handler(arguments, ctx)
        except ToolError as exc:
            return exc.code, self._failure(budget, exc.payload())
        except Exception as exc:  # a bug: never leak its text or stack to the client
            log.error("tool handler failed tool=%s exception=%s", spec.name, type(exc).__name__)
            return "internal_error", self._internal(budget)

        if not isinstance(obj, dict):
            log.error("tool handler returned %s, not an object tool=%s", type(obj).__name__, spec.name)
            return "internal_error", self._internal(budget)
        out_error = best_match(entry.output_validator.iter_errors(obj))
        if out_error is not None:
            log.error(
                "tool result violates its output schema tool=%s rule=%s path=%s",
                spec.name,
                out_error.validator,
                _field_path(list(out_error.absolute_path)) or "(root)",
            )
            return "internal_error", self._internal(budget)

        try:
            size = budget.measure(obj)
        except (TypeError, ValueError) as exc:
            log.error("tool result is not JSON-serialisable tool=%s exception=%s", spec.name, type(exc).__name__)
            return "internal_error", self._internal(budget)
        if size > (budget.ceiling_bytes if isinstance(obj, WholeRead) else budget.cap_bytes):
            self.metrics.incr("output_cap_hits", tool=spec.name)
            return "output_too_large", self._failure(
                budget,
                error_payload(
                    "output_too_large",
                    f"The result would be {size} bytes, over this server's {budget.cap_bytes}-byte response cap. "
                    "Ask for less: a smaller limit, fewer fields or compact detail.",
                    details={"limit_bytes": budget.cap_bytes},
                ),
            )
        return "ok", success_result(obj)

    def _failure(self, budget: OutputBudget, payload: dict[str, Any]) -> CallToolResult:
        if budget.measure_error(payload) > budget.cap_bytes:
            payload = {"error": {k: v for k, v in payload["error"].items() if k != "details"}}
        if budget.measure_error(payload) > budget.cap_bytes:
            code = payload["error"].get("code", "internal_error")
            payload = error_payload(code, "The error description exceeds the response cap.")
        return failure_result(payload)

    def _internal(self, budget: OutputBudget) -> CallToolResult:
        return self._failure(
            budget,
            error_payload(
                "internal_error",
                "The server failed while handling this call; this is a server bug, not a problem with your input.",
                retryable=False,
            ),
        )


def _lone_surrogate_path(value: Any, path: str = "") -> str | None:
    """Path of the first string (key or value) in ``value`` holding a lone surrogate, else None.

    JSON's ``\\udXXX`` escapes can carry unpaired surrogates that no tool can store,
    search or log; every tool gets the same clear ``invalid_argument`` for them.
    """
    if isinstance(value, str):
        return path if any(0xD800 <= ord(ch) <= 0xDFFF for ch in value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            sub = f"{path}.{key}" if path else str(key)
            if _lone_surrogate_path(key) is not None:
                return path or "arguments"
            found = _lone_surrogate_path(item, sub)
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _lone_surrogate_path(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


#: Message for a failed JSON Schema keyword, ``{value}`` = the keyword's value in the schema.
_RULE_TEXT = {
    "minLength": "must be at least {value} {characters} long",
    "maxLength": "must be at most {value} {characters} long",
    "minItems": "must have at least {value} {items}",
    "maxItems": "must have at most {value} {items}",
    "minProperties": "must have at least {value} {fields}",
    "maxProperties": "must have at most {value} {fields}",
    "minimum": "must be ≥ {value}",
    "maximum": "must be ≤ {value}",
    "exclusiveMinimum": "must be > {value}",
    "exclusiveMaximum": "must be < {value}",
    "multipleOf": "must be a multiple of {value}",
    "pattern": "must match the pattern {value}",
    "format": "must be a valid {value}",
    "uniqueItems": "items must be unique",
    "oneOf": "does not match any of the accepted forms",
    "anyOf": "does not match any of the accepted forms",
    "not": "has a value that is not allowed here",
    "dependentRequired": "needs its companion fields",
}


def _field_path(parts: list[Any]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _closed_extras(error: ValidationError) -> list[str]:
    instance = error.instance if isinstance(error.instance, dict) else {}
    schema = error.schema if isinstance(error.schema, dict) else {}
    known = set(schema.get("properties", {}))
    patterns = list(schema.get("patternProperties", {}))
    extras = [k for k in instance if k not in known and not any(re.search(p, k) for p in patterns)]
    return sorted(extras)


def describe_validation_error(error: ValidationError, *, meta=None) -> tuple[str, str, str]:
    """Return ``(field, rule, message)`` for one jsonschema error, without echoing the offending value.

    ``field`` is the dotted path of the failing argument (``filters.confidence``,
    ``initial_evidence[0].url``; ``""`` for the arguments object itself),
    ``rule`` the JSON Schema keyword that failed (``enum``, ``required``,
    ``additionalProperties``, ``type``, ``maxLength``, ...). With ``meta`` (the schema
    source's ``[meta]``), a Lesson id that fails ``meta.id_pattern`` is explained by
    :func:`gateway.domain.ids.lesson_id_problem` (e.g. a trailing ``_`` MediaWiki would drop).
    """
    rule = str(error.validator)
    value = error.validator_value
    path = list(error.absolute_path)
    if rule == "required":
        instance = error.instance if isinstance(error.instance, dict) else {}
        missing = [p for p in value if p not in instance] or list(value)
        field = _field_path(path + [missing[0]])
        return field, rule, f"{field}: this field is required"
    if rule in ("additionalProperties", "unevaluatedProperties"):
        extras = _closed_extras(error)
        field = _field_path(path + extras[:1]) if extras else _field_path(path)
        allowed = sorted(error.schema.get("properties", {})) if isinstance(error.schema, dict) else []
        hint = f" Accepted fields here: {', '.join(allowed)}." if allowed else ""
        return field, rule, f"{field or 'arguments'}: unknown field (not accepted by this tool).{hint}"
    field = _field_path(path)
    where = field or "arguments"
    if rule == "type":
        kinds = value if isinstance(value, list) else [value]
        text = f"must be of type {' or '.join(map(str, kinds))}"
    elif rule == "enum":
        shown = ", ".join(json.dumps(v, ensure_ascii=False) for v in list(value)[:_MAX_ENUM_SHOWN])
        text = f"must be one of: {shown}"
    elif rule == "const":
        text = f"must equal {json.dumps(value, ensure_ascii=False)}"
    elif rule == "pattern" and meta and value == meta.get("id_pattern") and isinstance(error.instance, str):
        text = lesson_id_problem(error.instance, meta) or _RULE_TEXT[rule].format(value=value)
    elif rule in _RULE_TEXT:
        one = value == 1  # "at least 1 field", "at least 2 fields"
        text = _RULE_TEXT[rule].format(value=value, characters="character" if one else "characters",
                                       items="item" if one else "items", fields="field" if one else "fields")
    else:
        text = f"violates the '{rule}' rule"
    return field, rule, f"{where}: {text}"

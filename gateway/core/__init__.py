"""The bottom layer of the gateway: error types and codes, JSON encoding and responses, the caller type.

* :mod:`gateway.core.errors` — :class:`~gateway.core.errors.ToolError` and the
  tool error payload, :class:`~gateway.core.errors.JsonRpcError`, the JSON-RPC
  error codes and error body (docs/tools.md#error-codes, docs/transport.md#http-rules).
* :mod:`gateway.core.jsonio` — compact JSON text and bytes, and the one JSON
  HTTP response helper every JSON answer of the gateway goes through.
* :mod:`gateway.core.principal` — :class:`~gateway.core.principal.Principal`.

Nothing here imports another ``gateway`` package or ``sync``; every other layer may import it.
"""

"""HTTP routes outside the MCP endpoint: the read-only JSON the wiki's browser pages use
(under ``/mcp/…``, not MCP tools: :mod:`gateway.web.graph`), the health probes
(:mod:`gateway.web.health`) and the operators' ``/metrics`` (:mod:`gateway.web.metrics_endpoint`)."""

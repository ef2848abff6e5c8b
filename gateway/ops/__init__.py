"""Operational controls of the running process: metrics (:mod:`gateway.ops.metrics`),
the bounded-queue gate (:mod:`gateway.ops.gate`), admission classes
(:mod:`gateway.ops.admission`), per-principal rate limits (:mod:`gateway.ops.ratelimit`)
and write/scope authorisation (:mod:`gateway.ops.access`).

Layer: above ``gateway/core``, ``gateway/config``, ``gateway/domain`` and ``hooks_spec``;
below the wiki client, retrieval and tools, which use them (.importlinter)."""

"""Operational controls of the running process: metrics (:mod:`gateway.ops.metrics`),
admission classes (:mod:`gateway.ops.admission`) and per-principal rate limits
(:mod:`gateway.ops.ratelimit`). Layer: above ``gateway/core``, ``gateway/config`` and
``gateway/domain``; below the wiki client, retrieval and tools, which use them."""

"""The gateway's ``hybrid_stage_seconds`` from ``/metrics``, whole-run or between two readings.

Used by ``bench/bench_read.py`` and ``bench/load.py``; which stages run side by side is in
docs/hybrid-search.md#read-ahead. Not a test.
"""
from __future__ import annotations

from typing import Any

import httpx

STAGE_METRIC = "hybrid_stage_seconds"


def read_stages(mcp_url: str) -> list[dict[str, Any]] | str:
    """The ``hybrid_stage_seconds`` timing rows of the gateway serving ``mcp_url`` (its ``/metrics``
    JSON: ``labels.stage``, ``count``, ``sum_seconds``, ``p95_seconds``), or the error as a string."""
    try:
        timings = httpx.get(mcp_url.replace("/mcp", "/metrics"), timeout=10).json().get("timings", [])
    except (httpx.HTTPError, ValueError) as exc:
        return f"(no /metrics from the gateway: {exc})"
    return [t for t in timings if t.get("name") == STAGE_METRIC]


def stage_means(before: list[dict[str, Any]] | str, after: list[dict[str, Any]] | str) -> list[str]:
    """Mean milliseconds per stage over the calls between two :func:`read_stages` readings,
    one ``"stage 12.3 ms"`` string each (``before`` may be ``[]`` for the whole run)."""
    if isinstance(after, str) or isinstance(before, str):
        return [after if isinstance(after, str) else before]
    old = {t["labels"].get("stage"): (t["sum_seconds"], t["count"]) for t in before}
    out = []
    for t in after:
        stage = t["labels"].get("stage")
        s0, c0 = old.get(stage, (0.0, 0))
        count = t["count"] - c0
        if count > 0:
            out.append(f"{stage} {(t['sum_seconds'] - s0) / count * 1000:.1f} ms")
    return out

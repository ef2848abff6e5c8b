"""``GET /metrics``: the process metrics as JSON, for operators only.

``GET /metrics`` (not under ``/mcp``, so the ``domain`` profile's Caddy never
forwards it) answers only

* a **loopback peer** (the socket address, never a forwarded header), e.g.
  ``curl http://127.0.0.1:8080/metrics`` on the host or inside the container, or
* a caller sending ``Authorization: Bearer <token>`` whose SHA-256 equals
  ``S3RM_METRICS_TOKEN_SHA256`` (constant-time compare) — for a scraper on
  another host.

Anyone else gets a JSON 404 (the endpoint's existence is not advertised).
Body shape (every value a number, a bounded word, ``null`` when absent)::

    {"process": {...}, "admission": {"read": {...}, "write": {...}, "semantic": {...}},
     "rate_limit": {...} | null, "observability": {<observability item>: value | null, ...},
     "semantic": {...} | null, "counters": [...], "timings": [...]}
"""
from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import resource
import threading
import time
from typing import Any, Callable, Mapping

from flask import Blueprint, current_app, request

from gateway.core.jsonio import json_response
from gateway.ops.metrics import Metrics, bounded, observability

__all__ = ["bp", "metrics_allowed", "operator_refusal"]

_STARTED = time.monotonic()

bp = Blueprint("metrics", __name__)


def _is_loopback(addr: str | None) -> bool:
    try:
        return ipaddress.ip_address((addr or "").strip("[]")).is_loopback
    except ValueError:
        return False


def metrics_allowed(remote_addr: str | None, authorization: str | None, token_sha256: str) -> bool:
    """True for a loopback socket peer, or a Bearer token matching ``S3RM_METRICS_TOKEN_SHA256``."""
    if _is_loopback(remote_addr):
        return True
    if not token_sha256 or not authorization:
        return False
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return False
    digest = hashlib.sha256(token.strip().encode("utf-8", "surrogatepass")).hexdigest()
    return hmac.compare_digest(digest, token_sha256)


def operator_refusal(state):
    """The JSON 404 for a caller :func:`metrics_allowed` refuses on this request, None when allowed
    (the guard of every operator route: ``/metrics``, :mod:`gateway.web.admin`)."""
    if metrics_allowed(request.remote_addr, request.headers.get("Authorization"), state.config.metrics_token_sha256):
        return None
    return json_response({"error": {"code": "not_found", "message": "Not Found: no such endpoint on this server"}},
                         404)


def _rss_bytes() -> int | None:
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _safe_call(fn: Callable[[], Any] | None) -> Any:
    if fn is None:
        return None
    try:
        return fn()
    except Exception:  # a failing status hook must not fail the metrics endpoint
        return None


@bp.route("/metrics", methods=["GET"])
def metrics_endpoint():
    """JSON metrics for operators (loopback or metrics token only; see the module docstring)."""
    state = current_app.extensions["s3rm"]
    refused = operator_refusal(state)
    if refused is not None:
        return refused
    metrics: Metrics = state.metrics
    semantic = _safe_call(getattr(state, "semantic_stats", None))
    semantic = semantic if isinstance(semantic, Mapping) else None
    admission = getattr(state, "admission", None)
    limiter = getattr(state, "rate_limiter", None)
    snap = metrics.snapshot()
    body = {
        "process": {
            "uptime_seconds": round(time.monotonic() - _STARTED, 1),
            "rss_bytes": _rss_bytes(),
            "threads": threading.active_count(),
        },
        "admission": admission.snapshot() if admission is not None else None,
        "rate_limit": {"principals": len(limiter), "rejected": limiter.rejected} if limiter is not None else None,
        "observability": observability(metrics, semantic),
        "semantic": bounded(semantic) if semantic is not None else None,
        "counters": snap["counters"],
        "timings": snap["timings"],
    }
    return json_response(body, 200)

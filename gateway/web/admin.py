"""``POST /admin/index/retry-quarantined``: embed the quarantined Lessons once more, for operators only.

Guarded exactly like ``/metrics`` (:func:`gateway.web.metrics_endpoint.metrics_allowed`):
a loopback socket peer, or ``Authorization: Bearer <token>`` whose SHA-256 equals
``S3RM_METRICS_TOKEN_SHA256``; anyone else gets the same JSON 404. It is not under
``/mcp``, so the domain profile's Caddy never forwards it. ``s3rm index
retry-quarantined`` calls it (docs/hybrid-search.md#quarantine).

Body: ``{"queued": <count>, "semantic": <semantic_status>}`` — counts and a status
word, never Lesson ids or text. ``queued`` is 0 without a retrieval service.
"""
from __future__ import annotations

from flask import Blueprint, current_app

from gateway.core.jsonio import json_response
from gateway.web.metrics_endpoint import operator_refusal

__all__ = ["bp", "RETRY_QUARANTINED"]

#: The route ``s3rm index retry-quarantined`` posts to.
RETRY_QUARANTINED = "/admin/index/retry-quarantined"

bp = Blueprint("admin", __name__)


@bp.route(RETRY_QUARANTINED, methods=["POST"])
def retry_quarantined():
    """Queue every quarantined Lesson for one more embedding attempt (module docstring)."""
    state = current_app.extensions["s3rm"]
    refused = operator_refusal(state)
    if refused is not None:
        return refused
    retrieval = getattr(state, "retrieval", None)
    queued = retrieval.retry_quarantined() if retrieval is not None and retrieval.enabled else 0
    return json_response({"queued": queued, "semantic": state.semantic_status()}, 200)

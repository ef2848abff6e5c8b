"""operation_id replay detection from the Lesson's revision history (rule GW01).

Every gateway write leaves a marker in its revision summary
(:mod:`gateway.domain.markers`). Before writing, the gateway looks for the
request's ``operation_id`` on the target Lesson:

* same operation_id, same marker tag/kind and same request digest → the
  request was already applied: ``replayed`` (nothing is written again);
* same operation_id with another tag, kind or digest → ``idempotency_conflict``;
* not found → a new write.

The scope is ONE Lesson (another Lesson may reuse the id) and is shared by
S3W (create/link/evidence), S3V (verification) and S3R (revise) markers.
Because markers live in MediaWiki's history, detection survives restarts and
works across gateway processes.

A marker counts only when it is trustworthy:

* the revision was saved by the gateway account (markers are not secret:
  anyone could type one into a browser summary);
* MediaWiki's ``parentid`` equals the marker's declared base ``p`` (a revision
  MediaWiki produced by auto-merging a write is not that write, see
  ``gateway/wiki/edit.py``);
* for S3R, the HMAC seal verifies — signature, author, parent and the body
  digest of that revision's content (:func:`gateway.domain.seals.verify_seal`).

At most :data:`MAX_SCAN` revisions are examined, newest first, in pages of 500.

Request digest: ``sha256`` hex of the canonical JSON
(:func:`gateway.domain.digests.canonical_json`) of ``{"tool": <tool name>,
"request": <normalised request>}`` where the normalised request holds every
argument except ``operation_id``, absent optional strings as ``""`` and
unordered lists in a canonical order (see ``gateway/domain/writes.py``).

Contract: ``docs/tools.md#idempotency-scopes``, ``docs/tools.md#replay-detection``,
``docs/tools.md#operation-id``.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Mapping

from gateway.config.schema import Schema
from gateway.domain.codec import PageFormatError, parse_page
from gateway.domain.digests import canonical_json
from gateway.domain.markers import Marker, MarkerError, parse_summary
from gateway.domain.seals import verify_seal

__all__ = ["MAX_SCAN", "PriorWrite", "ScanResult", "request_digest", "find_prior_write"]

#: Revisions examined per replay lookup (docs/tools.md#replay-detection).
MAX_SCAN = 10_000
_PAGE = 500


def request_digest(tool: str, request: dict) -> str:
    """64-hex sha256 of the canonical JSON of ``{"tool", "request"}`` (see module doc)."""
    return hashlib.sha256(canonical_json({"tool": tool, "request": request})).hexdigest()


@dataclass(frozen=True)
class PriorWrite:
    """A trustworthy earlier write with the same operation_id on the Lesson."""

    revision_id: int
    marker: Marker

    def matches(self, tag: str, kind: str, digest: str) -> bool:
        """True when it recorded exactly this request (→ replay); False → idempotency conflict."""
        return self.marker.same_request(tag, kind, digest)


@dataclass(frozen=True)
class ScanResult:
    """Outcome of a history scan: ``prior`` (None when not found), ``scanned``, ``partial``."""

    prior: PriorWrite | None
    scanned: int
    partial: bool


def find_prior_write(repository, lesson_id: str, operation_id: str, *, account: str,
                     keys: Mapping[str, str], schema: Schema, limit: int = MAX_SCAN) -> ScanResult:
    """Scan ``Lesson:<lesson_id>``'s history (newest first) for a trustworthy marker of ``operation_id``.

    ``repository`` provides ``list_revisions`` and ``get_revision_text``;
    ``account`` is the gateway's MediaWiki user name; ``keys`` the seal keys; ``schema`` reads
    markers and pages.
    Raises what the repository raises (WikiUnavailable, …).
    """
    cursor = None
    scanned = 0
    while scanned < limit:
        page = repository.list_revisions(lesson_id, cursor, min(_PAGE, limit - scanned))
        for rev in page.revisions:
            scanned += 1
            if operation_id not in (rev.comment or ""):
                continue
            try:
                marker = parse_summary(rev.comment, schema)
            except MarkerError:
                continue
            if marker is None or marker.op != operation_id or rev.user != account:
                continue
            if marker.parent != rev.parent_id:
                continue
            if marker.tag == "S3R" and not _seal_ok(repository, lesson_id, rev, marker, keys, schema):
                continue
            return ScanResult(PriorWrite(rev.revision_id, marker), scanned, False)
        cursor = page.next_cursor
        if not cursor or not page.revisions:
            return ScanResult(None, scanned, False)
    return ScanResult(None, scanned, True)


def _seal_ok(repository, lesson_id: str, rev, marker: Marker, keys: Mapping[str, str], schema: Schema) -> bool:
    text = repository.get_revision_text(rev.revision_id)
    if text is None:
        return False
    try:
        page = parse_page(text, schema)
    except (PageFormatError, ValueError):
        return False
    return verify_seal(marker, keys=keys, lesson_id=lesson_id, account=rev.user,
                       parent_revision_id=rev.parent_id, page=page, schema=schema).ok

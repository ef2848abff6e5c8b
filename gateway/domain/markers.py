"""Machine markers in MediaWiki edit summaries (idempotency and seals).

Every gateway write ends its edit summary with ONE compact ASCII marker after
a short human-readable prefix::

    MCP link_lessons: supports -> b [S3W v1 op=<op> k=link d=<d32> p=<parent>]
    MCP record_evidence_verification ev-1: supports [S3V v1 op=<op> d=<d32> p=<parent>]
    MCP revise_lesson: fix unit [S3R v1 kid=<kid> op=<op> d=<d32> b=<b16> f=<fields> p=<parent> h=<h32> s=<sig43>]
    MCP undo of merged revision 41 [S3U v1 r=<restored> p=<merged>]

Fields:

* ``op`` — the client's ``operation_id`` (pattern of the tool schemas).
* ``k`` — S3W kind: ``create`` | ``link`` | ``evidence``.
* ``d`` — first 32 hex digits of the request digest
  (:func:`gateway.domain.idempotency.request_digest`).
* ``p`` — the revision the write was based on (0 for a page creation).
  MediaWiki's own ``parentid`` of the revision must equal it; when it does not,
  MediaWiki merged the write into a concurrent change (see
  ``gateway/wiki/edit.py``) and the marker does not count.
* S3R only (:mod:`gateway.domain.seals`): ``kid`` key id, ``b`` first 16 hex of
  the basis-ids digest, ``f`` changed fields (comma-separated, schema order),
  ``h`` first 32 hex of the body digest, ``s`` HMAC-SHA256 signature
  (base64url, no padding).
* S3U (compensation after a detected merge): ``r`` the revision whose content
  was restored, ``p`` the merged revision it replaces.
* ``gh`` (optional, S3W/S3V/S3R): the verified GitHub login of the
  person whose github-mode access token made the write
  (docs/tools.md#attribution), followed by ``ghid`` (optional, last): their
  numeric GitHub id, which a rename does not change (markers written before
  ``ghid`` existed have ``gh`` alone and still parse). Not part of any
  digest or seal; only the gateway account may save markers (HS41), so it is
  as trustworthy as the marker itself.

Length: MediaWiki 1.39 truncates summaries to
``CommentStore::COMMENT_CHARACTER_LIMIT`` = 500 *characters* (Unicode code
points, ``Language::truncateForVisual``) and appends an ellipsis, silently.
:func:`build_summary` shortens only the human prefix so the whole summary
stays within :data:`SUMMARY_LIMIT`; the marker is never cut.

Reserved syntax: a summary that contains ``[S3W``, ``[S3V``, ``[S3R`` or
``[S3U`` anywhere must end with exactly one well-formed marker (hooks_spec
HS40); the human prefix is sanitised so it can never contain one.

Contract: ``docs/tools.md#markers``, ``docs/tools.md#seals``.
"""
from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass, replace

from gateway.core.errors import GatewayError
from gateway.config.schema import Schema

__all__ = ["SUMMARY_LIMIT", "TAGS", "S3W_KINDS", "Marker", "MarkerError", "parse_summary", "format_marker",
           "build_summary", "undo_summary", "sanitize_human", "KID_PATTERN", "GITHUB_LOGIN", "GITHUB_ID",
           "attribute_summary"]

#: MediaWiki 1.39 CommentStore::COMMENT_CHARACTER_LIMIT (code points).
SUMMARY_LIMIT = 500
TAGS = ("S3W", "S3V", "S3R", "S3U")
S3W_KINDS = ("create", "link", "evidence")
#: Key ids usable in a seal (summary-safe subset of S3RM_REVISION_HMAC_KEYS ids).
KID_PATTERN = r"[A-Za-z0-9._-]{1,32}"
#: A GitHub login as a marker's ``gh`` field holds it (1–39 letters, digits and hyphens, not leading).
GITHUB_LOGIN = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})"
#: A GitHub numeric user id as a marker's ``ghid`` field holds it.
GITHUB_ID = r"[1-9][0-9]{0,19}"

_VALUE = {
    "k": "|".join(S3W_KINDS),
    "d": r"[0-9a-f]{32}",
    "p": r"0|[1-9][0-9]{0,11}",
    "r": r"[1-9][0-9]{0,11}",
    "kid": KID_PATTERN,
    "b": r"[0-9a-f]{16}",
    "f": r"[a-z_]+(?:,[a-z_]+)*",
    "h": r"[0-9a-f]{32}",
    "s": r"[A-Za-z0-9_-]{43}",
    "gh": GITHUB_LOGIN,
    "ghid": GITHUB_ID,
}
_KEYS = {
    "S3W": ("op", "k", "d", "p"),
    "S3V": ("op", "d", "p"),
    "S3R": ("kid", "op", "d", "b", "f", "p", "h", "s"),
    "S3U": ("r", "p"),
}
_ATTRIBUTED = ("S3W", "S3V", "S3R")


@functools.lru_cache(maxsize=4)
def _grammar(op_pattern: str) -> tuple[dict[str, str], dict[str, re.Pattern]]:
    """Each marker value's pattern and each tag's body pattern, with ``op`` as the schema's
    ``[patterns] operation_id`` (without its anchors)."""
    values = {"op": op_pattern.strip("^$"), **_VALUE}
    bodies = {tag: re.compile(" ".join(f"{k}=(?P<{k}>{values[k]})" for k in keys)
                              + (f"(?: gh=(?P<gh>{values['gh']})(?: ghid=(?P<ghid>{values['ghid']}))?)?"
                                 if tag in _ATTRIBUTED else "") + r"\Z")
              for tag, keys in _KEYS.items()}
    return values, bodies
_TOKEN = re.compile(r"\[S3[WVRU]")
_TAIL = re.compile(r"\[(?P<tag>S3[WVRU]) v1 (?P<body>[^\[\]]*)\]\Z")


class MarkerError(GatewayError, ValueError):
    """The summary uses the reserved marker syntax but carries no single well-formed marker."""


@dataclass(frozen=True)
class Marker:
    """A parsed summary marker (fields not used by a tag are None/empty).

    Attributes:
        tag: ``S3W`` | ``S3V`` | ``S3R`` | ``S3U``.
        parent: the base revision id the write declared (``p``).
        op: operation_id (not for S3U).
        kind: ``create``/``link``/``evidence`` (S3W), ``verify`` (S3V), ``revise`` (S3R), ``undo`` (S3U).
        digest: 32-hex request digest prefix (``d``).
        kid, basis, fields, body, signature: S3R seal parts.
        restored: S3U restored revision id.
        actor: the verified GitHub login (``gh``) of a github-mode write, else None.
        actor_id: that person's numeric GitHub id (``ghid``), None in markers written before it existed.
    """

    tag: str
    parent: int
    op: str | None = None
    kind: str | None = None
    digest: str | None = None
    kid: str | None = None
    basis: str | None = None
    fields: tuple[str, ...] = ()
    body: str | None = None
    signature: str | None = None
    restored: int | None = None
    actor: str | None = None
    actor_id: str | None = None

    def same_request(self, tag: str, kind: str, digest: str) -> bool:
        """True when this marker records the request (tag, kind, digest prefix)."""
        return self.tag == tag and self.kind == kind and self.digest == digest[:32]


_KIND_OF_TAG = {"S3V": "verify", "S3R": "revise", "S3U": "undo"}


def parse_summary(summary: str, schema: Schema) -> Marker | None:
    """The marker at the end of ``summary``; None when the summary uses no marker syntax.

    ``schema``'s ``[patterns] operation_id`` is the grammar of the ``op`` value.

    Raises:
        MarkerError: the summary contains a marker token but not exactly one
            well-formed marker at its end.
    """
    text = (summary or "").rstrip()
    tokens = _TOKEN.findall(text)
    if not tokens:
        return None
    match = _TAIL.search(text)
    if match is None or len(tokens) != 1:
        raise MarkerError("the summary uses the reserved [S3x marker syntax without one well-formed marker at its end")
    tag = match.group("tag")
    body = _grammar(schema.patterns["operation_id"])[1][tag].match(match.group("body"))
    if body is None:
        raise MarkerError(f"malformed {tag} marker")
    g = body.groupdict()
    return Marker(
        tag=tag,
        parent=int(g["p"]),
        op=g.get("op"),
        kind=g.get("k") or _KIND_OF_TAG.get(tag),
        digest=g.get("d"),
        kid=g.get("kid"),
        basis=g.get("b"),
        fields=tuple(g["f"].split(",")) if g.get("f") else (),
        body=g.get("h"),
        signature=g.get("s"),
        restored=int(g["r"]) if g.get("r") else None,
        actor=g.get("gh"),
        actor_id=g.get("ghid"),
    )


def format_marker(marker: Marker, schema: Schema) -> str:
    """The marker text for ``marker``; raises ValueError when a value breaks its pattern
    (``op``: ``schema``'s ``[patterns] operation_id``)."""
    return _format(marker, _grammar(schema.patterns["operation_id"])[0])


def _format(marker: Marker, patterns: dict[str, str]) -> str:
    values = {
        "op": marker.op, "k": marker.kind, "d": marker.digest, "p": str(marker.parent),
        "r": str(marker.restored) if marker.restored is not None else None,
        "kid": marker.kid, "b": marker.basis, "f": ",".join(marker.fields), "h": marker.body,
        "s": marker.signature,
    }
    parts = []
    for key in _KEYS[marker.tag]:
        value = values[key]
        if value is None or not re.fullmatch(patterns[key], value):
            raise ValueError(f"{marker.tag} marker value {key} is missing or malformed")
        parts.append(f"{key}={value}")
    if marker.actor is not None:
        if marker.tag not in _ATTRIBUTED or not re.fullmatch(_VALUE["gh"], marker.actor):
            raise ValueError(f"{marker.tag} marker value gh is malformed")
        parts.append(f"gh={marker.actor}")
    if marker.actor_id is not None:
        if marker.actor is None or not re.fullmatch(_VALUE["ghid"], marker.actor_id):
            raise ValueError(f"{marker.tag} marker value ghid is malformed or without gh")
        parts.append(f"ghid={marker.actor_id}")
    return f"[{marker.tag} v1 {' '.join(parts)}]"


def sanitize_human(text: str) -> str:
    """Make free text safe for the human summary prefix.

    NFC (MediaWiki normalises input), control characters and line breaks become
    spaces, square brackets become parentheses (no wiki links, no marker
    syntax), ``/*`` ``*/`` lose their section-link meaning, runs of whitespace
    collapse.
    """
    text = unicodedata.normalize("NFC", text or "")
    out = []
    for ch in text:
        if ch == "[":
            out.append("(")
        elif ch == "]":
            out.append(")")
        elif unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"):
            out.append(" ")
        else:
            out.append(ch)
    clean = " ".join("".join(out).split())
    return clean.replace("/*", "/ *").replace("*/", "* /")


def build_summary(human: str, marker: Marker, schema: Schema) -> str:
    """``<human prefix> <marker>`` within :data:`SUMMARY_LIMIT` code points.

    The human prefix is sanitised and, when needed, shortened with ``…``.
    Raises ValueError when the marker alone does not fit (cannot happen for
    values matching the patterns: the longest S3R marker is under 450).
    """
    return _summary(human, format_marker(marker, schema))


def undo_summary(human: str, merged: int, restored: int) -> str:
    """:func:`build_summary` of the S3U marker undoing revision ``merged`` back to ``restored`` (an S3U
    marker holds no operation id, so it needs no schema pattern)."""
    return _summary(human, _format(Marker(tag="S3U", parent=merged, restored=restored), _VALUE))


def _summary(human: str, tail: str) -> str:
    room = SUMMARY_LIMIT - len(tail) - 1
    if room < 0:
        raise ValueError("marker longer than the MediaWiki summary limit")
    prefix = sanitize_human(human)
    if len(prefix) > room:
        prefix = prefix[: max(0, room - 1)].rstrip() + "…" if room > 0 else ""
    return f"{prefix} {tail}" if prefix else tail


def attribute_summary(summary: str, actor: str, schema: Schema, actor_id: str | None = None) -> str:
    """``summary`` (``<human> <marker>``) with its marker carrying ``gh=<actor>`` and, when given,
    ``ghid=<actor_id>``; raises ValueError for a summary without an attributable marker or a malformed
    login or id."""
    marker = parse_summary(summary, schema)
    if marker is None:
        raise ValueError("the summary has no marker")
    human = summary.rstrip()[: -len(format_marker(marker, schema))].rstrip()
    return build_summary(human, replace(marker, actor=actor, actor_id=actor_id or None), schema)

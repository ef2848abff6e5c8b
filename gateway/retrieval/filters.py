"""Structured search filters and named scopes (docs/retrieval.md#filters-and-scopes).

``SearchFilters`` holds the ``filters`` input of ``search_lessons``:
``confidence``, ``record_origin``, ``review_state`` (sets of allowed values)
and ``updated_after`` (inclusive) / ``updated_before`` (exclusive) UTC
timestamps. Filters are applied to FRESH snapshots only; they decide
membership, never order. ``review_state`` (and the legacy ``reviewer``) is a
filter only — it never affects ranking or visibility (docs/data-contract.md#legacy-fields).

Scopes: ``S3RM_SEARCH_SCOPES_JSON`` names at most 16 filter sets (same keys
as ``filters``). A request's scope is intersected with the caller's filters:
sets intersect (an empty intersection matches nothing), time bounds take the
tighter value. Scopes narrow relevance only; they are not access control.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from gateway.core.errors import ToolError
from gateway.domain.model import LessonPage
from gateway.domain.timestamps import parse_ts
from gateway.retrieval.index.records import FilterMask, epoch_seconds

__all__ = ["SearchFilters", "resolve_scope"]

SET_KEYS = ("confidence", "record_origin", "review_state")
TIME_KEYS = ("updated_after", "updated_before")
_TS = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$")


@dataclass(frozen=True)
class SearchFilters:
    """Membership filters; ``None`` means "no constraint" for that key."""

    confidence: frozenset[str] | None = None
    record_origin: frozenset[str] | None = None
    review_state: frozenset[str] | None = None
    updated_after: str | None = None
    updated_before: str | None = None

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None, *, where: str = "filters") -> "SearchFilters":
        """Build from the JSON ``filters`` object (already schema-validated for client input).

        Raises ToolError ``invalid_argument`` for unknown keys or malformed values
        (possible only in server-side scope definitions).
        """
        raw = raw or {}
        unknown = set(raw) - set(SET_KEYS) - set(TIME_KEYS)
        if unknown:
            raise ToolError("invalid_argument", f"{where} has unknown keys {sorted(unknown)}")
        values: dict[str, Any] = {}
        for key in SET_KEYS:
            if key in raw:
                items = raw[key]
                if not isinstance(items, (list, tuple)) or not all(isinstance(i, str) for i in items):
                    raise ToolError("invalid_argument", f"{where}.{key} must be a list of strings")
                values[key] = frozenset(items)
        for key in TIME_KEYS:
            if key in raw:
                if not isinstance(raw[key], str) or not _TS.match(raw[key]) or parse_ts(raw[key]) is None:
                    raise ToolError("invalid_argument", f"{where}.{key} must be a real UTC time like "
                                    "2025-01-31T00:00:00Z", details={"field": f"{where}.{key}", "rule": "date-time"})
                values[key] = raw[key]
        return cls(**values)

    def intersect(self, other: "SearchFilters") -> "SearchFilters":
        """Both filters at once (sets intersect, time bounds tighten)."""
        def both(a, b):
            return b if a is None else a if b is None else a & b

        def later(a, b):
            return b if a is None else a if b is None else max(a, b)

        def earlier(a, b):
            return b if a is None else a if b is None else min(a, b)

        return SearchFilters(
            confidence=both(self.confidence, other.confidence),
            record_origin=both(self.record_origin, other.record_origin),
            review_state=both(self.review_state, other.review_state),
            updated_after=later(self.updated_after, other.updated_after),
            updated_before=earlier(self.updated_before, other.updated_before),
        )

    def matches(self, page: LessonPage) -> bool:
        """True when the page's CURRENT field values satisfy every constraint."""
        fields = page.fields
        for key in SET_KEYS:
            allowed = getattr(self, key)
            if allowed is not None and fields.get(key, "") not in allowed:
                return False
        updated = fields.get("updated_at", "")
        if self.updated_after is not None and not updated >= self.updated_after:
            return False
        if self.updated_before is not None and not updated < self.updated_before:
            return False
        return True

    def canonical(self) -> dict[str, Any]:
        """JSON-ready form with sorted sets (bound into cursor fingerprints)."""
        out: dict[str, Any] = {}
        for key in SET_KEYS:
            value = getattr(self, key)
            if value is not None:
                out[key] = sorted(value)
        for key in TIME_KEYS:
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


def resolve_scope(name: str | None, scopes: Mapping[str, Mapping[str, Any]]) -> SearchFilters:
    """Filters of scope ``name`` (no constraint when None).

    Raises ToolError ``unknown_scope`` (listing the configured names) for a name
    the server does not define, ``invalid_argument`` for a malformed definition.
    """
    if name is None:
        return SearchFilters()
    if name not in scopes:
        names = ", ".join(sorted(scopes)) or "none are configured"
        raise ToolError("unknown_scope", f"Scope {name!r} is not defined on this server (available: {names}).")
    return SearchFilters.from_mapping(dict(scopes[name]), where=f"scope {name}")


def index_mask(filters: SearchFilters) -> FilterMask | None:
    """Index pre-filter from search filters (indexed scalars may lag; final filters use fresh data).

    None (no pre-filter) when a set filter is empty: nothing can match and the
    fresh-data filter drops every candidate anyway.
    """
    if any(getattr(filters, key) is not None and not getattr(filters, key)
           for key in ("confidence", "record_origin", "review_state")):
        return None
    return FilterMask(
        confidence=tuple(sorted(filters.confidence or ())),
        record_origin=tuple(sorted(filters.record_origin or ())),
        review_state=tuple(sorted(filters.review_state or ())),
        updated_after=epoch_seconds(filters.updated_after) if filters.updated_after else None,
        updated_before=epoch_seconds(filters.updated_before) if filters.updated_before else None,
    )

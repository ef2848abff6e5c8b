"""One read request as a value: the tool parses its arguments once and hands the value down.

:class:`SearchRequest` (``search_lessons``) and :class:`AnalogyRequest`
(``find_analogies``) hold everything ranking needs — the query or the source
Lesson, the caller's filters already intersected with the named scope's
(docs/retrieval.md#filters-and-scopes), the requested retrieval mode with the
server default applied (docs/retrieval.md#fallback), ``min_score``, ``facet``
and the page window (``limit`` and ``cursor``). Both are frozen: legacy search
(:mod:`gateway.retrieval.legacy.search`) and the hybrid pipelines
(:mod:`gateway.retrieval.hybrid.service`) read them and never ask the tool
layer for scope, mode or paging again.

Building one raises the argument's :class:`~gateway.core.errors.ToolError`
at once: ``invalid_argument`` (filters), ``scope_requires_authentication`` /
``scope_forbidden`` / ``unknown_scope`` (scope), ``not_found`` (analogies'
source Lesson).
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from gateway.config import GatewayConfig
from gateway.core.errors import ToolError
from gateway.core.principal import Principal
from gateway.domain.model import LessonSnapshot
from gateway.domain.repository import EdgesResult, LessonRepository, snapshot_edges
from gateway.ops.access import check_scope_access
from gateway.retrieval.filters import SearchFilters, resolve_scope

__all__ = ["AnalogyRequest", "DEFAULT_LIMIT", "HYBRID_MODE", "LEGACY_MODE", "SearchRequest"]

HYBRID_MODE = "hybrid_v1"
LEGACY_MODE = "legacy"
#: Results per page of a read tool when the call sends no ``limit``.
DEFAULT_LIMIT = 5
#: Incoming relation edges read to find a source's stored analogy partners.
PARTNER_EDGES_LIMIT = 500


@dataclass(frozen=True)
class SearchRequest:
    """One ``search_lessons`` call, parsed (docs/tools.md#search-lessons).

    ``query`` (empty: the newest-first listing, docs/retrieval.md#listing),
    ``phrasings`` (``also_phrased_as``: other phrasings of the same question, ranked
    with it, the query first; docs/retrieval.md#phrasings), ``filters`` (caller's ∩ scope's), ``min_score``, ``facet`` (hybrid_v1 only,
    docs/retrieval.md#facet-selector), ``mode`` (requested retrieval mode),
    ``scope`` (its name, echoed in the answer), ``limit`` and ``cursor``.
    """

    query: str = ""
    filters: SearchFilters = SearchFilters()
    min_score: float = 0.0
    facet: str | None = None
    mode: str = LEGACY_MODE
    scope: str | None = None
    limit: int = DEFAULT_LIMIT
    cursor: str | None = None
    phrasings: tuple[str, ...] = ()

    @property
    def listing(self) -> bool:
        """True for an empty query: the newest-first listing instead of a search."""
        return not self.query.strip()

    @property
    def queries(self) -> tuple[str, ...]:
        """The query, then each other phrasing (what the rankings fuse, docs/retrieval.md#phrasings)."""
        return (self.query, *self.phrasings)

    def phrased(self, query: str) -> "SearchRequest":
        """This request for ``query`` alone (no other phrasing): what one ranking of a fused search runs."""
        return SearchRequest(query=query, filters=self.filters, min_score=self.min_score, facet=self.facet,
                             mode=self.mode, scope=self.scope, limit=self.limit, cursor=self.cursor)

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any], config: GatewayConfig,
                       principal: Principal) -> "SearchRequest":
        """The request of schema-validated ``search_lessons`` ``arguments`` for ``principal``.

        Raises ToolError ``invalid_argument`` / ``scope_*`` / ``unknown_scope`` (module doc).
        """
        query = arguments.get("query", "") or ""
        phrasings = _phrasings(query, arguments.get("also_phrased_as") or ())
        filters = SearchFilters.from_mapping(arguments.get("filters")).intersect(_scope(arguments, config, principal))
        return cls(query=query, filters=filters,
                   min_score=float(arguments.get("min_score", 0.0)), facet=arguments.get("facet"),
                   mode=_mode(arguments, config), scope=arguments.get("scope"),
                   limit=int(arguments.get("limit", DEFAULT_LIMIT)), cursor=arguments.get("cursor"),
                   phrasings=phrasings)


@dataclass(frozen=True)
class AnalogyRequest:
    """One ``find_analogies`` call, parsed (docs/tools.md#find-analogies).

    ``source`` is the Lesson's fresh snapshot, ``stored_ids`` its stored
    ``analogous_to`` partners in either direction (outgoing first) and
    ``partners`` the incoming-edge read they came from (its scan counts join the
    answer's; None when none was read). ``filters`` is the scope's; the rest as
    in :class:`SearchRequest`.
    """

    source: LessonSnapshot
    stored_ids: tuple[str, ...] = ()
    partners: EdgesResult | None = None
    filters: SearchFilters = SearchFilters()
    min_score: float = 0.0
    mode: str = LEGACY_MODE
    scope: str | None = None
    limit: int = DEFAULT_LIMIT
    cursor: str | None = None

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any], config: GatewayConfig, principal: Principal,
                       repository: LessonRepository) -> "AnalogyRequest":
        """The request of schema-validated ``find_analogies`` ``arguments``: checks the scope, then reads
        the source Lesson (``not_found`` when absent) and the edges naming its stored partners.

        Raises ToolError ``scope_*`` / ``unknown_scope`` / ``not_found``, and the repository's errors.
        """
        filters = _scope(arguments, config, principal)
        mode = _mode(arguments, config)
        source_id = arguments["id"]
        source = repository.get_snapshot(source_id)
        if source is None:
            raise ToolError("not_found", f"No Lesson with id {source_id!r}; use search_lessons to find ids.")
        partners = repository.find_relation_edges(source_id, outgoing=False, incoming=True,
                                                  limit=PARTNER_EDGES_LIMIT)
        stored = [e.target for e in snapshot_edges(source) if e.relation == "analogous_to"]
        stored += [e.source for e in partners.incoming if e.relation == "analogous_to"]
        return cls(source=source, stored_ids=tuple(stored), partners=partners, filters=filters,
                   min_score=float(arguments.get("min_score", 0.0)), mode=mode, scope=arguments.get("scope"),
                   limit=int(arguments.get("limit", DEFAULT_LIMIT)), cursor=arguments.get("cursor"))


def _same_text(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _phrasings(query: str, phrasings: Sequence[str]) -> tuple[str, ...]:
    """The other phrasings of ``query`` worth ranking (docs/retrieval.md#phrasings): in the caller's
    order, a phrasing equal to the query or to an earlier one (NFKC, case and spacing aside) dropped.

    Raises ToolError ``invalid_argument`` for phrasings beside an empty query (a listing has nothing
    to rephrase) and for a phrasing of whitespace only.
    """
    if not phrasings:
        return ()
    if not query.strip():
        raise ToolError("invalid_argument", "also_phrased_as needs a query: other phrasings of an empty query "
                        "(the newest-first listing) mean nothing; put the question in query.",
                        details={"field": "also_phrased_as", "rule": "requires-query"})
    seen = {_same_text(query)}
    kept = []
    for n, text in enumerate(phrasings):
        if not text.strip():
            raise ToolError("invalid_argument", f"also_phrased_as[{n}] is blank; give the question in other words "
                            "or leave it out.", details={"field": f"also_phrased_as[{n}]", "rule": "not-blank"})
        key = _same_text(text)
        if key not in seen:
            seen.add(key)
            kept.append(text)
    return tuple(kept)


def _scope(arguments: Mapping[str, Any], config: GatewayConfig, principal: Principal) -> SearchFilters:
    """Filters of the requested ``scope`` after its ACL check; no constraint without a scope."""
    scope = arguments.get("scope")
    check_scope_access(scope, principal, config)
    return resolve_scope(scope, config.search_scopes)


def _mode(arguments: Mapping[str, Any], config: GatewayConfig) -> str:
    """The requested retrieval mode, the server default when the call names none."""
    return arguments.get("retrieval_mode") or config.retrieval_default_mode

"""What a hybrid pipeline answers: the fused list of one request, or why it cannot answer.

:class:`HybridList` (every page slices it, docs/retrieval.md#fusion), its
:class:`HybridResult` items, :class:`SemanticFallback` (a first page the
caller serves in legacy instead) and :func:`semantic_continuation_error`
(a hybrid cursor page that cannot be served; docs/retrieval.md#fallback).
"""
from __future__ import annotations

from dataclasses import dataclass

from gateway.core.errors import GatewayError, ToolError
from gateway.domain.model import LessonSnapshot
from gateway.retrieval.hybrid.fusion import RankContribution

__all__ = ["HybridList", "HybridResult", "SemanticFallback", "semantic_continuation_error"]


class SemanticFallback(GatewayError):
    """Hybrid cannot answer this first page; the caller serves legacy instead.

    Attributes:
        cause: short code (``empty_query``, ``disabled``, ``building``,
            ``unavailable``, ``saturated``, ``timeout``, ``circuit_open``,
            ``profile_mismatch``, ``error``…), counted in metrics.
        semantic_status: the value the legacy response reports.
    """

    def __init__(self, cause: str, semantic_status: str):
        super().__init__(cause)
        self.cause = cause
        self.semantic_status = semantic_status


def semantic_continuation_error() -> ToolError:
    """The retryable error a hybrid cursor page gets when semantic search cannot serve it.

    Contract: docs/retrieval.md#fallback.
    """
    return ToolError(
        "semantic_unavailable",
        "Semantic search cannot serve this hybrid_v1 cursor right now, and a cursor never switches to another "
        "ordering. Retry shortly, or restart from the first page without a cursor.",
        retryable=True,
    )


@dataclass(frozen=True)
class HybridResult:
    """One ranked Lesson, read fresh from MediaWiki.

    ``score``: 0–1 service score; ``basis``: full_text | semantic_similarity |
    hybrid | stored_relation | lexical; ``channels``: channels that voted;
    ``shared_terms``: lexical evidence (find_analogies); ``votes``: the valid
    votes fusion used (each channel's best rank and its own score) and ``tier``
    the fusion tier (relation 2, exact 1, rest 0) and ``slot_from`` the 1-based fusion rank of a
    result the language slots moved (docs/hybrid-search.md#language-slots; None: not moved) — what
    ``explain`` shows.
    """

    snapshot: LessonSnapshot
    score: float
    basis: str
    channels: tuple[str, ...]
    shared_terms: tuple[str, ...] = ()
    votes: tuple[RankContribution, ...] = ()
    tier: int = 0
    slot_from: int | None = None


@dataclass(frozen=True)
class HybridList:
    """The bounded, revalidated, fused result list of one hybrid request (every page slices it).

    ``partial``/``scanned``/``scan_limit`` follow docs/retrieval.md#fusion;
    ``source_revision_id``/``source_projection_hash`` are set for find_analogies
    (cursor fingerprints bind them, docs/tools.md#cursors).
    """

    results: tuple[HybridResult, ...]
    effective_mode: str
    ranking_version: str
    semantic_status: str
    generation: str
    partial: bool
    scanned: int
    scan_limit: int
    source_revision_id: int | None = None
    source_projection_hash: str | None = None

    @property
    def items(self) -> tuple[HybridResult, ...]:
        """Alias of ``results`` (same shape as ``gateway.retrieval.legacy.search.RankedList.items``)."""
        return self.results


"""Which mode serves one page of a read tool asked for ``hybrid_v1``: hybrid, or a legacy fallback.

:func:`choose_mode` applies the fallback and cursor-continuation rules
(docs/retrieval.md#fallback) and the semantic admission class
(docs/retrieval.md#resource-isolation) around a hybrid run of
:class:`~gateway.retrieval.hybrid.service.RetrievalService`; the read tools call it
through :mod:`gateway.tools.read_path`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from gateway.core.errors import ToolError
from gateway.ops.admission import semantic_permit
from gateway.retrieval.hybrid.results import HybridList, SemanticFallback
from gateway.retrieval.request import HYBRID_MODE, LEGACY_MODE

if TYPE_CHECKING:
    from gateway.retrieval.hybrid.service import RetrievalService

__all__ = ["ModeChoice", "PagerFor", "choose_mode"]


@dataclass(frozen=True)
class ModeChoice:
    """What a read tool serves for one page.

    ``mode``: effective mode; ``semantic_status``: value to report; ``pager``:
    the cursor pager whose fingerprint binds that mode, its ranking version and
    generation; ``offset``: position decoded from the cursor; ``hybrid``: the
    hybrid list (None: serve legacy with ``pager``).
    """

    mode: str
    semantic_status: str
    pager: Any
    offset: int
    hybrid: HybridList | None


PagerFor = Callable[[str, str, str], Any]


def choose_mode(service: "RetrievalService", cursor: str | None, pager_for: PagerFor,
                legacy_ranking_version: str, run: Callable[[bool], HybridList]) -> ModeChoice:
    """Decide hybrid vs legacy for one page of a tool that was asked for ``hybrid_v1``.

    ``pager_for(mode, ranking_version, generation)`` builds the tool's pager;
    ``run(continuation)`` produces the hybrid list. Rules (docs/retrieval.md#fallback,
    docs/retrieval.md#resource-isolation):

    * no cursor: try hybrid; on :class:`SemanticFallback` serve legacy (first
      page only) and report the fallback's semantic status;
    * a cursor issued by a hybrid page (same generation and ranking version):
      hybrid again — a semantic failure is a retryable ``semantic_unavailable``
      error, never a silent switch to legacy order;
    * a cursor issued by a legacy fallback page: legacy continues;
    * any other cursor (e.g. another generation): ``invalid_cursor`` (restart).
    """
    hybrid_pager = pager_for(HYBRID_MODE, service.ranking.version, service.generation)
    legacy_pager = pager_for(LEGACY_MODE, legacy_ranking_version, "legacy")
    offset = 0
    if cursor is not None:
        try:
            offset = hybrid_pager.offset(cursor)
        except ToolError:
            offset = legacy_pager.offset(cursor)  # raises invalid_cursor when neither fingerprint fits
            return ModeChoice(LEGACY_MODE, service.semantic_status(), legacy_pager, offset, None)
    continuing = cursor is not None
    # semantic admission class: docs/retrieval.md#resource-isolation
    with semantic_permit(continuing=continuing) as admitted:
        if not admitted:
            return ModeChoice(LEGACY_MODE, service.semantic_status(), legacy_pager, 0, None)
        try:
            result = run(continuing)
        except SemanticFallback as fallback:
            return ModeChoice(LEGACY_MODE, fallback.semantic_status, legacy_pager, 0, None)
    return ModeChoice(HYBRID_MODE, result.semantic_status, hybrid_pager, offset, result)

"""Facet searches over MCP in parallel, fused with the gateway's own ``rrf_v10`` code.

Contract: docs/research-tools.md#research-query, docs/retrieval.md#facet-selector,
docs/retrieval.md#fusion.

:func:`search_facets` opens ONE MCP session (official SDK,
:class:`s3rm.mcpsearch.McpSearch`) and sends one ``search_lessons`` call
per facet (``situation``, ``approach``, ``mechanism``) concurrently, each with
``retrieval_mode=hybrid_v1``, ``facet=<facet>`` and :data:`DEPTH` results.

:func:`fuse_facets` turns the three ranked lists into one with
:func:`gateway.retrieval.hybrid.fusion.fuse` — the same function and the same
:data:`~gateway.retrieval.hybrid.fusion.DEFAULT_RANKING` constants the gateway ranks with: a
Lesson's vote in a facet is its rank there (channel ``semantic:<facet>``),
``score = Σ w / (k + rank)`` normalised to 0–1 over the three channels, then
bands and the ``record_origin`` diversity pass. The client has no vectors, no
verdicts and no full text, so the facet-redundancy penalty, the evidence
prior and the exact-match tier do not apply here. The run refuses to fuse
when the gateway reports another ``ranking_version`` than this code's.

The gateway admits only a few semantic requests at once and never queues
them (docs/retrieval.md#resource-isolation): a facet it turned away comes
back as a legacy page while ``semantic_status`` is still ``ready``/``stale``;
such a facet is asked again, one at a time, up to :data:`RETRIES` times. A
facet still answered by legacy (semantic search unavailable) votes with its
full-text ranks, and :class:`FacetRun` says so.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from gateway.retrieval.hybrid.fusion import (
    RANKING_VERSION, DEFAULT_RANKING, SEARCH, Calibration, FusionCandidate, RankContribution, fuse,
)
from s3rm.errors import S3rmError
from s3rm.mcpsearch import McpSearch

__all__ = ["FACETS", "DEPTH", "RESULT_FIELDS", "FacetRun", "ResearchHit", "search_facets", "fuse_facets",
           "VersionMismatch"]

FACETS = ("situation", "approach", "mechanism")
#: Results asked from each facet (search_lessons' page maximum).
DEPTH = 20
#: Sequential retries of a facet the gateway answered with legacy although its index was usable.
RETRIES = 2
USABLE = ("ready", "stale")
RESULT_FIELDS = ["id", "title", "reusable_lesson", "applicability", "record_origin", "confidence", "citations"]
#: No vectors on the client: the facet-redundancy penalty never fires (origin diversity still does).
_NO_VECTORS = Calibration(semantic_floor=0.0, redundancy_floor=1.0, near_identical=1.0, same_topic=1.0)


class VersionMismatch(S3rmError):
    """The gateway ranked with another ranking version than the fusion code here."""


@dataclass
class FacetRun:
    """One facet's answer: its ordered ``results`` and the modes/status the gateway reported."""

    facet: str
    results: list[dict[str, Any]] = field(default_factory=list)
    effective_mode: str = ""
    semantic_status: str = ""
    ranking_version: str = ""
    partial: bool = False


@dataclass(frozen=True)
class ResearchHit:
    """One fused result: the Lesson's fields, fused ``score`` (0–1), ``facets`` that found it with
    their ranks (``{"situation": 1, ...}``), and ``rerank_score`` when reranked."""

    id: str
    score: float
    facets: dict[str, int]
    fields: dict[str, Any]
    rerank_score: float | None = None


async def search_facets(url: str, query: str, *, scope: str | None = None, timeout: float = 60.0,
                        facets: Sequence[str] = FACETS) -> list[FacetRun]:
    """Run one ``search_lessons`` per facet concurrently over one MCP session.

    Raises :class:`s3rm.mcpsearch.SearchError` (tool error) or the transport's exceptions
    (see :func:`s3rm.mcpsearch.describe_failure`).
    """
    import anyio

    runs = [FacetRun(f) for f in facets]

    async with McpSearch(url, timeout=timeout) as search:
        async def one(run: FacetRun) -> None:
            args: dict[str, Any] = {"query": query, "limit": DEPTH, "retrieval_mode": "hybrid_v1",
                                    "facet": run.facet, "fields": RESULT_FIELDS}
            if scope:
                args["scope"] = scope
            page = await search.call(args)
            run.results = [r for r in page.get("results", []) if isinstance(r, dict) and isinstance(r.get("id"), str)]
            run.effective_mode = str(page.get("effective_mode", ""))
            run.semantic_status = str(page.get("semantic_status", ""))
            run.ranking_version = str(page.get("ranking_version", ""))
            run.partial = bool(page.get("partial"))

        async with anyio.create_task_group() as tg:
            for run in runs:
                tg.start_soon(one, run)
        # the gateway's semantic admission class is small (2 slots by default) and never queues: a
        # facet it turned away comes back as a legacy page while the index is usable; ask again, in turn
        # (not tenacity: each round re-asks only the facets still refused, and none of them raised)
        for attempt in range(RETRIES):
            refused = [r for r in runs if r.effective_mode != "hybrid_v1" and r.semantic_status in USABLE]
            if not refused:
                break
            await anyio.sleep(0.2 * (attempt + 1))
            for run in refused:
                await one(run)
    return runs


def fuse_facets(runs: Sequence[FacetRun], limit: int) -> list[ResearchHit]:
    """Fuse the facet lists (module docstring) and return the best ``limit`` hits.

    Raises :class:`VersionMismatch` when a hybrid answer was ranked with another version.
    """
    for run in runs:
        if run.effective_mode == "hybrid_v1" and run.ranking_version != RANKING_VERSION:
            raise VersionMismatch(f"the gateway ranks with {run.ranking_version!r}, this client fuses with "
                                  f"{RANKING_VERSION!r}; update one of them")
    votes: dict[str, list[RankContribution]] = {}
    ranks: dict[str, dict[str, int]] = {}
    fields: dict[str, dict[str, Any]] = {}
    for run in runs:
        for rank, result in enumerate(run.results, start=1):
            lesson_id = result["id"]
            votes.setdefault(lesson_id, []).append(RankContribution(f"semantic:{run.facet}", rank))
            ranks.setdefault(lesson_id, {})[run.facet] = rank
            fields.setdefault(lesson_id, result)
    candidates = [FusionCandidate(lesson_id=i, contributions=tuple(v),
                                  record_origin=str(fields[i].get("record_origin", ""))) for i, v in votes.items()]
    fused = fuse(candidates, operation=SEARCH, channels=[f"semantic:{r.facet}" for r in runs],
                 calibration=_NO_VECTORS, config=DEFAULT_RANKING)
    order = {f: n for n, f in enumerate(FACETS)}
    return [ResearchHit(id=r.lesson_id, score=r.score,
                        facets=dict(sorted(ranks[r.lesson_id].items(), key=lambda kv: order.get(kv[0], 9))),
                        fields={k: v for k, v in fields[r.lesson_id].items() if k not in ("score", "basis")})
            for r in fused[:limit]]


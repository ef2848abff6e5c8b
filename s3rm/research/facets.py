"""Research-query's searches over MCP in parallel and their order.

Contract: docs/research-tools.md#research-query, docs/retrieval.md#facet-selector,
docs/retrieval.md#fusion.

:func:`search_facets` opens ONE MCP session (official SDK,
:class:`s3rm.mcpsearch.McpSearch`) and sends, concurrently, one unrestricted
``search_lessons`` call (:data:`SEARCH_RUN`: the gateway's main ranking) and one per
facet (``situation``, ``approach``, ``mechanism``), each with
``retrieval_mode=hybrid_v1`` and :data:`DEPTH` results (the facet calls with ``facet=<facet>``).

:func:`fuse_facets` orders them: the main list decides the order, and the facet lists
say which facets found each hit (their ranks) and add the Lessons the main list lacks
after it, fused with :func:`gateway.retrieval.hybrid.fusion.fuse` and the same
:data:`~gateway.retrieval.hybrid.fusion.DEFAULT_RANKING` constants the gateway ranks with
(channel ``semantic:<facet>``, ``score = Σ w / (k + rank)`` normalised to 0–1, bands and the
``record_origin`` diversity pass). The main ranking holds what a client cannot rebuild from
ranked lists — full text and BM25, the exact-match tier, the per-query language decision
and the language slots — and on the bench every facet vote mixed into it cost some group
(bench/bench_research.py, docs/research-tools.md#research-query). The run refuses to fuse
when the gateway reports another ``ranking_version`` than this code's.

The gateway admits only a few semantic requests at once and never queues
them (docs/retrieval.md#resource-isolation): a search it turned away comes
back as a legacy page while ``semantic_status`` is still ``ready``/``stale``;
such a search is asked again, one at a time, up to :data:`RETRIES` times. A
search still answered by legacy (semantic search unavailable) votes with its
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

__all__ = ["FACETS", "SEARCH_RUN", "RUNS", "DEPTH", "RESULT_FIELDS", "FacetRun", "ResearchHit", "search_facets",
           "fuse_facets", "VersionMismatch"]

FACETS = ("situation", "approach", "mechanism")
#: The run of the unrestricted ``search_lessons`` call (no ``facet``): the gateway's main ranking as one voter.
SEARCH_RUN = "search"
#: The runs research-query asks for, in order: :data:`SEARCH_RUN` (no facet), then :data:`FACETS`.
RUNS = (SEARCH_RUN, *FACETS)
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
                        facets: Sequence[str] | None = None) -> list[FacetRun]:
    """Run one ``search_lessons`` per run of ``facets`` (default :data:`RUNS`: the unrestricted
    :data:`SEARCH_RUN`, then one per facet) concurrently over one MCP session.

    Raises :class:`s3rm.mcpsearch.SearchError` (tool error) or the transport's exceptions
    (see :func:`s3rm.mcpsearch.describe_failure`).
    """
    import anyio

    runs = [FacetRun(f) for f in (RUNS if facets is None else facets)]

    async with McpSearch(url, timeout=timeout) as search:
        async def one(run: FacetRun) -> None:
            args: dict[str, Any] = {"query": query, "limit": DEPTH, "retrieval_mode": "hybrid_v1",
                                    "fields": RESULT_FIELDS}
            if run.facet != SEARCH_RUN:
                args["facet"] = run.facet
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
    """The research order of ``runs`` (module docstring) and its best ``limit`` hits.

    The :data:`SEARCH_RUN` list comes first in its own order with the gateway's scores; the Lessons only
    facet lists found follow in their ``rrf_v10`` fusion order (channel ``semantic:<facet>``, the
    gateway's weights), each score that fusion's times the lowest main-list score, so they score below
    every main-list hit (without a main list: the facet fusion alone, its own scores). Every hit names the runs that found it with its rank there.
    Raises :class:`VersionMismatch` when a hybrid answer was ranked with another version.
    """
    for run in runs:
        if run.effective_mode == "hybrid_v1" and run.ranking_version != RANKING_VERSION:
            raise VersionMismatch(f"the gateway ranks with {run.ranking_version!r}, this client fuses with "
                                  f"{RANKING_VERSION!r}; update one of them")
    votes: dict[str, list[RankContribution]] = {}
    ranks: dict[str, dict[str, int]] = {}
    fields: dict[str, dict[str, Any]] = {}
    main: dict[str, float] = {}
    for run in runs:
        for rank, result in enumerate(run.results, start=1):
            lesson_id = result["id"]
            ranks.setdefault(lesson_id, {})[run.facet] = rank
            fields.setdefault(lesson_id, result)
            if run.facet == SEARCH_RUN:
                main.setdefault(lesson_id, _score(result))
            else:
                votes.setdefault(lesson_id, []).append(RankContribution(f"semantic:{run.facet}", rank))
    facet_runs = [r for r in runs if r.facet != SEARCH_RUN]
    candidates = [FusionCandidate(lesson_id=i, contributions=tuple(v),
                                  record_origin=str(fields[i].get("record_origin", "")))
                  for i, v in votes.items() if i not in main]
    fused = fuse(candidates, operation=SEARCH, channels=[f"semantic:{r.facet}" for r in facet_runs],
                 calibration=_NO_VECTORS, config=DEFAULT_RANKING) if candidates else []
    floor = min(main.values(), default=1.0)
    order = [*main.items(), *((r.lesson_id, round(r.score * floor, 6)) for r in fused)]
    position = {f: n for n, f in enumerate(RUNS)}
    return [ResearchHit(id=lesson_id, score=score,
                        facets=dict(sorted(ranks[lesson_id].items(), key=lambda kv: position.get(kv[0], 9))),
                        fields={k: v for k, v in fields[lesson_id].items() if k not in ("score", "basis")})
            for lesson_id, score in order[:limit]]


def _score(result: dict[str, Any]) -> float:
    """A result's service score (0–1; 0 when the answer carries none, as a legacy page's may not)."""
    value = result.get("score")
    return min(1.0, max(0.0, float(value))) if isinstance(value, (int, float)) else 0.0

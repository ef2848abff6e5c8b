"""The index channels of ``search_lessons``: BM25 (complete / partial) and one semantic channel per facet.

Contract: docs/hybrid-search.md#lexical-channel, docs/hybrid-search.md#ranking, docs/retrieval.md#fusion.

Both hybrid search (:mod:`gateway.retrieval.hybrid.service`) and the shadow
comparison of a candidate generation (:mod:`gateway.retrieval.hybrid.shadow`) rank
with these functions, so a shadow generation is measured with exactly the
channels live traffic uses. Every function reads one
:class:`~gateway.retrieval.index.backend.SemanticIndex` view and returns votes
``[(lesson_id, RankContribution)]`` in rank order, each vote carrying the
indexed revision and retrieval hash (what revalidation compares).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping, Sequence

import numpy as np

from gateway.config.profiles import RANKED_FACETS
from gateway.retrieval.index.backend import SemanticIndex
from gateway.retrieval.index.hubs import centroid, neighbourhood
from gateway.retrieval.hybrid.fusion import RankContribution, RankingConfig, partial_share
from gateway.retrieval.hybrid.cross_language import (
    RAW,
    LanguagePlan,
    language_evidence,
    same_language_first,
    search_by_language,
)
from gateway.retrieval.language import query_language

__all__ = ["Votes", "decide_language", "indexed_votes", "lexical_votes", "prepare_snapshot", "quality_allowed",
           "semantic_votes", "split_by_coverage"]

#: One channel's votes, best first.
Votes = list[tuple[str, RankContribution]]


def indexed_votes(snap: SemanticIndex, channel: str, hits) -> Votes:
    """Votes of an index channel (vectors or BM25), each carrying the indexed revision and retrieval hash."""
    votes = []
    for hit in hits:
        record = snap.record(hit.lesson_id)
        votes.append((hit.lesson_id, RankContribution(channel, hit.rank, hit.score,
                                                      record.revision_id if record else None,
                                                      record.retrieval_hash if record else None)))
    return votes


def split_by_coverage(snap: SemanticIndex, hits, query_terms, below: float):
    """BM25 hits split into (complete, incomplete): a Lesson holding fewer than ``below`` of the
    distinct analysed query terms is incomplete (``bm25_partial``); ranks restart at 1 in each part.
    Incomplete hits get ``share`` = :func:`~gateway.retrieval.hybrid.fusion.partial_share` of their
    matched terms (``docs/hybrid-search.md#partial-share``); the caller copies it onto the vote.

    One shared generic word (``문제``, ``outage``) makes a BM25 hit as surely as the decisive
    ones do; like partial full-text matches, such partial matches vote with less
    weight (``docs/hybrid-search.md#lexical-channel``).
    """
    wanted = set(query_terms)
    if not wanted or below <= 0:
        return list(hits), []
    complete, incomplete = [], []
    for hit in hits:
        have = len(wanted.intersection(snap.terms(hit.lesson_id)))
        if have >= below * len(wanted):
            complete.append(hit)
        else:
            incomplete.append((hit, partial_share(have, len(wanted), below)))
    complete = [replace(h, rank=n) for n, h in enumerate(complete, 1)]
    incomplete = [(replace(h, rank=n), share) for n, (h, share) in enumerate(incomplete, 1)]
    return complete, incomplete


def lexical_votes(snap: SemanticIndex, query_terms: Sequence[str], cap: int, allowed: np.ndarray | None,
                  below: float) -> tuple[Votes, Votes, bool]:
    """The ``bm25`` and ``bm25_partial`` votes of analysed ``query_terms`` (at most ``cap`` hits), and
    whether the cap was hit (the list is ``partial``)."""
    hits = snap.lexical_search(query_terms, cap, allowed=allowed)
    complete, incomplete = split_by_coverage(snap, hits, query_terms, below)
    shares = [share for _, share in incomplete]
    partial = [(lesson_id, replace(vote, share=share)) for (lesson_id, vote), share
               in zip(indexed_votes(snap, "bm25_partial", [h for h, _ in incomplete]), shares)]
    return indexed_votes(snap, "bm25", complete), partial, len(hits) >= cap


def quality_allowed(snap: SemanticIndex, allowed: np.ndarray | None, quality_floor: float) -> np.ndarray | None:
    """``allowed`` narrowed to rows whose content quality is at least ``quality_floor`` (a semantic
    channel's rows, docs/hybrid-search.md#content-quality); ``allowed`` itself when the floor is 0."""
    if quality_floor <= 0 or len(snap) == 0:
        return allowed
    good = np.asarray(snap.quality_rows()) >= quality_floor
    return good if allowed is None else (np.asarray(allowed, dtype=bool) & good)


def semantic_votes(snap: SemanticIndex, facet: str, vector: np.ndarray, cap: int, allowed: np.ndarray | None,
                   floor: float | None, plan: LanguagePlan, quality_floor: float = 0.0) -> tuple[Votes, bool]:
    """The ``semantic:<facet>`` votes of a ``(dims,)`` query vector (cosine ≥ ``floor``, at most ``cap``,
    content quality ≥ ``quality_floor``; z-scored per Lesson language when ``plan.standardized``, the
    partition statistics over rows above the quality floor, the other language demoted by
    ``plan.other_demotion``), and whether the cap was hit."""
    rows = quality_allowed(snap, allowed, quality_floor)
    if plan.standardized:
        eligible = quality_allowed(snap, None, quality_floor)
        hits = search_by_language(snap, facet, vector, cap, allowed=rows, min_score=floor, eligible=eligible,
                                  plan=plan)
    else:
        hits = snap.search(facet, vector, cap, allowed=rows, min_score=floor)
    return indexed_votes(snap, f"semantic:{facet}", hits), len(hits) >= cap


def decide_language(snap: SemanticIndex, query: str, vectors: Mapping[str, np.ndarray], lexical_ids: Sequence[str],
                    allowed: np.ndarray | None, ranking: RankingConfig) -> tuple[RankingConfig, LanguagePlan]:
    """The ranking configuration and semantic :class:`LanguagePlan` of one (normalised) ``query``
    (docs/hybrid-search.md#language-decision).

    Latin queries (and languages outside :attr:`RankingConfig.standardized_languages`) rank raw cosine
    with their language's weights. Standardised languages rank z-scores per Lesson language; for those
    in :attr:`RankingConfig.adaptive_languages` the evidence of the query's scores (the ``whole`` vector,
    else the one facet of ``vectors``; ``lexical_ids``: the ``bm25`` channel's list) decides whether
    the query's own language leads (other language demoted, :attr:`RankingConfig.same_language_weights`)
    or both languages share one scale (:attr:`RankingConfig.language_weights`).
    """
    language = query_language(query)
    if language not in ranking.standardized_languages:
        return ranking.for_query(query), RAW
    plan = LanguagePlan(standardized=True, korean_query=True, centering=ranking.hub_centering,
                        hub_k=ranking.hub_k, hub_demotion=ranking.hub_demotion, hub_form=ranking.hub_form)
    if language in ranking.adaptive_languages and vectors:
        facet = "whole" if "whole" in vectors else next(iter(vectors))
        evidence = language_evidence(snap, facet, vectors[facet], korean_query=True, lexical_ids=lexical_ids,
                                     depth=ranking.agreement_depth,
                                     eligible=quality_allowed(snap, None, ranking.semantic_quality_floor),
                                     allowed=allowed, centering=ranking.hub_centering)
        if same_language_first(evidence, stand_out=ranking.stand_out_z, margin=ranking.stand_out_margin):
            return (ranking.for_query(query, same_language_first=True),
                    replace(plan, other_demotion=ranking.other_demotion))
    return ranking.for_query(query), plan


def prepare_snapshot(ranking: RankingConfig) -> Callable[[SemanticIndex], None]:
    """The refresher's ``prepare`` hook for ``ranking``: computes, into a new snapshot's own cache and before
    it serves, what the standardised channels of a Hangul or mixed query read from it — per ranked facet
    the centroid of the eligible Korean rows (``hub_centering``) and the k-occurrence ``N_k``
    (``hub_demotion``), with the parameters :func:`decide_language` and :func:`semantic_votes` use — so
    no request computes them after a write (docs/hybrid-search.md#k-occurrence). On the pgvector backend
    this also reads each ranked facet's vectors into the view (``PgSnapshot.columns``), also when the view
    holds no eligible Korean Lesson (then by scoring every row once: an O(n · dims) product, nothing kept
    on the in-process index)."""

    def prepare(snap: SemanticIndex) -> None:
        if not ranking.standardized_languages or len(snap) == 0:
            return
        eligible = quality_allowed(snap, None, ranking.semantic_quality_floor)
        korean = np.asarray(snap.hangul_rows(), dtype=bool)
        own = korean if eligible is None else korean & np.asarray(eligible, dtype=bool)
        reads_vectors = bool(own.any()) and bool(ranking.hub_centering or ranking.hub_demotion)
        for facet in RANKED_FACETS:
            if ranking.hub_centering and own.any():
                centroid(snap, facet, own, pin=True)
            if ranking.hub_demotion:
                neighbourhood(snap, facet, ranking.hub_k, eligible, True, ranking.hub_centering,
                              with_density=ranking.hub_form == "ls", pin=True)
            if not reads_vectors:  # nothing above read the facet; the channels still score every row
                snap.scores(facet, np.zeros(snap.dims, np.float32))

    return prepare

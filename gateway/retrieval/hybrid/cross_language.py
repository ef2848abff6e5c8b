"""Language-standardised semantic ranking and the per-query language decision (``docs/hybrid-search.md#ranking``).

Multilingual models put any text in the query's language above a text in
another language on the same topic — a constant offset per language pair —
so in raw cosine a Korean question about an English post-mortem only ever
sees Korean Lessons. :func:`search_by_language` turns every row's cosine into
a z-score against its own language partition (Korean Lessons per
``SemanticIndex.hangul_rows()`` and the others), which removes the offset and
puts both languages on one scale, each Lesson with one rank.

One scale for both languages is right when the question is about a Lesson in
the other language, and wrong when it is about one in its own: then every
language partition contributes its own best few, and the other language's
best (which answer nothing) crowd the first page beside the right Lesson.
:func:`language_evidence` reads, per query, what the scores say about which
case this is (``docs/hybrid-search.md#language-decision``), and
:func:`same_language_first` turns it into the decision: when a Lesson of the
query's language stands out from its language's distribution clearly more
than the other language's best does, or the lexical list's first hit is one
of the first semantic hits of the query's language (two independent lists
agree), the other language's z-scores are lowered by
:attr:`LanguagePlan.other_demotion` and the lexical channels keep their full
weight.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from gateway.retrieval.index.backend import SemanticIndex
from gateway.retrieval.index.hubs import centroid, neighbourhood, partition_z
from gateway.retrieval.index.records import SemanticHit

__all__ = ["hubness", "k_occurrence", "LanguageEvidence", "LanguagePlan", "RAW", "centered", "language_evidence",
           "same_language_first", "search_by_language", "standardized_scores"]


@dataclass(frozen=True)
class LanguagePlan:
    """How the semantic channels of one query rank.

    ``standardized``: cosine z-scored per Lesson language (False: raw cosine).
    ``korean_query``: the query's own language partition is the Korean one.
    ``other_demotion``: z subtracted from every row of the other language partition (0: one scale).
    ``centering``: share of the query language's centroid subtracted from the query vector before
    scoring (hub reduction, docs/hybrid-search.md#hubs; 0: off).
    ``hub_demotion``, ``hub_k``, ``hub_form``: k-occurrence correction (:func:`hubness`; 0: off).
    """

    standardized: bool
    korean_query: bool = True
    other_demotion: float = 0.0
    centering: float = 0.0
    hub_k: int = 10
    hub_demotion: float = 0.0
    hub_form: str = "log"


#: Raw cosine (Latin queries, and any query when standardisation is off).
RAW = LanguagePlan(standardized=False)


@dataclass(frozen=True)
class LanguageEvidence:
    """What one query's scores say about the language of its answer (all in z units of the ``whole`` facet).

    ``same_best``: the highest z among Lessons of the query's language (how far the best one stands
    out from its language's distribution); ``other_best``: the same for the other language;
    ``agreement``: the lexical channel's first hit is a Lesson of the query's language among the first
    few semantic hits of that language.
    """

    same_best: float
    other_best: float
    agreement: bool

    @property
    def margin(self) -> float:
        """``same_best - other_best``: how much more the query's own language stands out."""
        return self.same_best - self.other_best


def centered(index: SemanticIndex, facet: str, query: np.ndarray, rows: np.ndarray, share: float) -> np.ndarray:
    """``query - share · centroid`` where the centroid is the mean ``facet`` vector of ``rows`` (boolean
    ``(n,)``); ``query`` itself when ``share`` is 0 or no row is selected.

    Scoring with it gives ``cos(q, d) - share · cos(centroid, d)``: a Lesson close to everything in the
    query's language (a hub: text between the languages, generic wording) loses that closeness, a Lesson
    close to this query alone keeps it (docs/hybrid-search.md#hubs).
    """
    if not share or not rows.any():
        return query
    return np.asarray(query, dtype=np.float64) - share * centroid(index, facet, rows)


def k_occurrence(index: SemanticIndex, facet: str, k: int, eligible: np.ndarray | None,
                 korean_query: bool = True, centering: float = 0.0) -> np.ndarray:
    """``N_k`` ``(n,)``: for every row, how many pseudo-queries hold it among their ``k`` best, where the
    pseudo-queries are the ``eligible`` Lessons of the query's language (their own ``facet`` vector,
    centred like a query by ``centering``) scored exactly as a query of that language is (z-scored
    within each Lesson-language partition over the eligible rows), the pseudo-query itself left out.
    Ineligible rows get 0. Query-independent: kept in the snapshot's own cache, where the refresher puts the
    shipped ranking's values before the snapshot serves (:mod:`gateway.retrieval.index.hubs`,
    docs/hybrid-search.md#k-occurrence)."""
    return neighbourhood(index, facet, k, eligible, korean_query, centering, with_density=False)[0]


def hubness(index: SemanticIndex, facet: str, eligible: np.ndarray | None, plan: LanguagePlan) -> np.ndarray:
    """Per-row hub score ``(n,)`` from :func:`gateway.retrieval.index.hubs.neighbourhood`: ``nk``: ``max(0, (N_k - k) / sd)`` (how many
    standard deviations a row is found more often than the k it would be on average); ``log``:
    ``log((1 + N_k) / (1 + k))`` clipped at 0; ``ls`` (local scaling): the row's neighbourhood density
    minus the median density of the eligible rows (negative for rows that no pseudo-query comes near)."""
    counts, density = neighbourhood(index, facet, plan.hub_k, eligible, plan.korean_query, plan.centering,
                                    with_density=plan.hub_form == "ls")
    counted = np.ones(len(counts), dtype=bool) if eligible is None else np.asarray(eligible, dtype=bool)
    if plan.hub_form == "log":
        return np.maximum(0.0, np.log((1.0 + counts) / (1.0 + plan.hub_k)))
    if plan.hub_form == "ls":
        return np.where(counted, density - (float(np.median(density[counted])) if counted.any() else 0.0), 0.0)
    sd = float(counts[counted].std()) if counted.any() else 0.0
    return np.maximum(0.0, (counts - plan.hub_k) / max(sd, 1e-6))


def standardized_scores(index: SemanticIndex, facet: str, query: np.ndarray,
                        eligible: np.ndarray | None = None,
                        plan: LanguagePlan | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(cosine, z, korean)`` over every row of ``facet``: the raw cosine, the cosine z-scored within each
    Lesson-language partition (mean and standard deviation over the ``eligible`` rows of the partition;
    None: every row), and the Korean-row mask. All ``(n,)``. With ``plan.centering`` the z-scores are
    those of the :func:`centered` query (the query language's eligible rows)."""
    cosine = np.asarray(index.scores(facet, query), dtype=np.float64)
    korean = np.asarray(index.hangul_rows(), dtype=bool)
    counted = np.ones(len(cosine), dtype=bool) if eligible is None else np.asarray(eligible, dtype=bool)
    scored = cosine
    if plan is not None and plan.centering:
        own = (korean if plan.korean_query else ~korean) & counted
        scored = np.asarray(index.scores(facet, centered(index, facet, query, own, plan.centering)),
                            dtype=np.float64)
    z = partition_z(scored, korean, counted)
    if plan is not None and plan.hub_demotion:
        z = z - plan.hub_demotion * hubness(index, facet, eligible, plan)
    return cosine, z, korean


def search_by_language(index: SemanticIndex, facet: str, query: np.ndarray, k: int, *,
                       allowed: np.ndarray | None = None, exclude: Iterable[str] = (),
                       min_score: float | None = None, eligible: np.ndarray | None = None,
                       plan: LanguagePlan = LanguagePlan(standardized=True)) -> list[SemanticHit]:
    """Top-``k`` rows of ``facet`` by cosine standardised within each Lesson language.

    ``query`` is ``(dims,)``; ``allowed``/``exclude`` as in ``SemanticIndex.search``. Every
    ``eligible`` row (boolean ``(n,)``; None: every row) of a partition counts for its mean and
    standard deviation (request filters do not change them). ``plan.other_demotion`` is subtracted
    from the z of rows outside the query's language partition (``plan.korean_query``).
    ``min_score`` still applies to the raw cosine; a hit's ``score`` is its (demoted) z-score. Ranks
    1..k, order (z desc, id asc).
    """
    if len(index) == 0 or k <= 0:
        return []
    cosine, z, korean = standardized_scores(index, facet, query, eligible, plan)
    if plan.other_demotion:
        other = ~korean if plan.korean_query else korean
        z = np.where(other, z - plan.other_demotion, z)
    if min_score is not None:
        z = np.where(cosine >= min_score, z, -np.inf)
    return index.top(z, k, allowed=allowed, exclude=exclude)


def language_evidence(index: SemanticIndex, facet: str, query: np.ndarray, *, korean_query: bool,
                      lexical_ids: Sequence[str], depth: int, eligible: np.ndarray | None = None,
                      allowed: np.ndarray | None = None, centering: float = 0.0) -> LanguageEvidence:
    """The :class:`LanguageEvidence` of one query: its ``(dims,)`` vector against ``facet``, over rows that are
    ``eligible`` (content quality) and ``allowed`` (request filters); ``lexical_ids`` is the lexical
    channel's list (best first); agreement looks at the first ``depth`` semantic hits of the query's
    language; ``centering`` as in :class:`LanguagePlan`. A partition with no row gives ``-inf``."""
    if len(index) == 0:
        return LanguageEvidence(float("-inf"), float("-inf"), False)
    plan = LanguagePlan(standardized=True, korean_query=korean_query, centering=centering)
    _, z, korean = standardized_scores(index, facet, query, eligible, plan)
    usable = np.ones(len(z), dtype=bool)
    for mask in (eligible, allowed):
        if mask is not None:
            usable &= np.asarray(mask, dtype=bool)
    same_rows = (korean if korean_query else ~korean) & usable
    other_rows = (~korean if korean_query else korean) & usable
    same_best = float(z[same_rows].max()) if same_rows.any() else float("-inf")
    other_best = float(z[other_rows].max()) if other_rows.any() else float("-inf")
    agreement = False
    if lexical_ids and same_rows.any() and depth > 0:
        first = [h.lesson_id for h in index.top(np.where(same_rows, z, -np.inf), depth)]
        agreement = lexical_ids[0] in first
    return LanguageEvidence(same_best, other_best, agreement)


def same_language_first(evidence: LanguageEvidence, *, stand_out: float, margin: float) -> bool:
    """True when the evidence says the answer is in the query's own language: the lexical and semantic
    lists agree on a Lesson of that language, or its best Lesson stands out by at least ``stand_out`` z
    and by at least ``margin`` z more than the other language's best (docs/hybrid-search.md#language-decision)."""
    if evidence.agreement:
        return True
    return evidence.same_best >= stand_out and evidence.margin >= margin

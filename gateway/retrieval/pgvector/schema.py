"""The shared store's schema: tables, generation states and layouts, registry rows, error types.

The operations on it are :class:`~gateway.retrieval.pgvector.store.PgStore`.

Contract: docs/hybrid-search.md#pgvector-backend, docs/operations.md#pgvector-backend,
docs/operations.md#indexer-leader, docs/operations.md#generations.

Tables (created idempotently under one advisory lock, so N gateways may start at once):

* ``s3rm_generation`` — the generation registry: name, per-generation table,
  dims, vector storage (``halfvec`` up to 4,000 dims, else ``vector``),
  state (``building`` → ``ready`` → ``active`` / ``previous`` → ``retired``),
  whether it has HNSW indexes, and when its leader last finished a full reconcile;
* ``s3rm_alias`` — the alias ``active``: its generation, the ``previous`` one
  (the rollback target) and a version bumped by every flip;
* ``s3rm_lease`` — one row per generation: holder, fencing token, expiry;
* ``s3rm_dirty`` — Lesson ids a serving-only gateway asks the leader to refresh;
* ``s3rm_cursor_key`` — the cursor signing keys every gateway shares;
* ``s3rm_event`` — one row per lifecycle step (build started/ready, shadow
  started/stopped, cutover, rollback, retired); ``s3rm_shadow`` /
  ``s3rm_shadow_sample`` — the shadow comparison and its per-query figures
  (overlap, latency; never query text), see :mod:`.lifecycle`;
* one table per generation (``s3rm_g_<16 hex>``): per Lesson the record
  (revision, raw hashes, epoch times, filter scalars, truncation mask), its
  analysed lexical terms, a tombstone flag, the change sequence number ``seq``
  (global sequence ``s3rm_change_seq``) and the fencing token of the write. No
  Lesson text is stored;
* the facet vectors, by the generation's ``layout`` (docs/hybrid-search.md#pgvector-layout):
  layout 2 (every new generation) keeps one table per facet
  (``s3rm_g_<16 hex>_<facet>``: ``lesson_id``, the vector, stored ``PLAIN``
  so it stays inside the heap row and an exact scan reads no TOAST); live rows
  only, a delete removes them. Layout 1 (generations registered before) has
  the four vectors as columns of the generation table (NULL on tombstones);
  it keeps working but a 1024-dim row exceeds the TOAST threshold, so every
  exact scan there detoasts each vector.

Every write runs in one transaction that first locks the generation's lease
row and checks holder and token (:class:`FencingError` otherwise), so a
leader whose lease expired can never write after another took over.
"""
from __future__ import annotations

import hashlib
import os
import secrets
import socket
from dataclasses import dataclass

from gateway.config.profiles import INDEX_FACETS
from gateway.core.errors import GatewayError

__all__ = ["CHANGE_DELETED", "CHANGE_HEAD_SQL", "DDL", "EVENT_KINDS", "FencingError", "GenerationInfo", "HALFVEC_MAX_DIMS", "LAYOUT",
           "PLAIN_MAX_BYTES", "RECORD_COLUMNS", "RECORD_TYPES", "SCHEMA_LOCK", "STATES", "StoreError",
           "facet_name", "holder_id", "log_event", "table_for"]

#: Generation states (docs/operations.md#generations).
STATES = ("building", "ready", "active", "previous", "retired")
#: pgvector indexes halfvec up to 4,000 dimensions.
HALFVEC_MAX_DIMS = 4000
#: The vector layout of newly registered generations (docs/hybrid-search.md#pgvector-layout).
LAYOUT = 2
#: Vectors up to this many bytes (the value, 8-byte header included) are stored PLAIN, inside the heap row;
#: larger ones keep pgvector's default (EXTERNAL) because a heap row must fit one 8 KiB page.
PLAIN_MAX_BYTES = 6000
SCHEMA_LOCK = 0x53334D52  # "S3MR": serialises DDL between gateways
ACTIVE_ALIAS = "active"

DDL = """
CREATE EXTENSION IF NOT EXISTS vector;
CREATE SEQUENCE IF NOT EXISTS s3rm_change_seq;
CREATE TABLE IF NOT EXISTS s3rm_generation (
  name text PRIMARY KEY, table_name text UNIQUE NOT NULL, dims int NOT NULL, storage text NOT NULL,
  state text NOT NULL, hnsw boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(), state_at timestamptz NOT NULL DEFAULT now(),
  reconciled_at double precision);
CREATE TABLE IF NOT EXISTS s3rm_alias (
  name text PRIMARY KEY, generation text NOT NULL REFERENCES s3rm_generation(name),
  previous text REFERENCES s3rm_generation(name), version bigint NOT NULL DEFAULT 1,
  flipped_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS s3rm_lease (
  name text PRIMARY KEY, holder text, token bigint NOT NULL DEFAULT 0,
  expires_at timestamptz NOT NULL DEFAULT '-infinity');
CREATE TABLE IF NOT EXISTS s3rm_dirty (
  generation text NOT NULL, lesson_id text NOT NULL, queued_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (generation, lesson_id));
CREATE TABLE IF NOT EXISTS s3rm_cursor_key (
  kid int PRIMARY KEY, secret bytea NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
ALTER TABLE s3rm_generation ADD COLUMN IF NOT EXISTS layout smallint NOT NULL DEFAULT 1;
ALTER TABLE s3rm_generation ADD COLUMN IF NOT EXISTS synced_seq bigint;
CREATE TABLE IF NOT EXISTS s3rm_event (
  id bigserial PRIMARY KEY, at timestamptz NOT NULL DEFAULT now(), kind text NOT NULL, generation text NOT NULL);
CREATE TABLE IF NOT EXISTS s3rm_shadow (
  generation text PRIMARY KEY REFERENCES s3rm_generation(name), sample double precision NOT NULL,
  started_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS s3rm_shadow_sample (
  id bigserial PRIMARY KEY, generation text NOT NULL, active text NOT NULL, at timestamptz NOT NULL DEFAULT now(),
  k int NOT NULL, active_hits int NOT NULL, shadow_hits int NOT NULL, overlap double precision NOT NULL,
  active_ms double precision NOT NULL, shadow_ms double precision NOT NULL);
"""

RECORD_COLUMNS = ("lesson_id", "revision_id", "retrieval_hash", "metadata_hash", "created_at", "updated_at",
                   "confidence", "record_origin", "review_state", "truncated", "terms", "quality")

#: Index of the ``deleted`` flag in a ``PgStore.changes`` row (the record columns, then ``deleted``, then ``seq``).
CHANGE_DELETED = len(RECORD_COLUMNS)

#: PostgreSQL types of :data:`RECORD_COLUMNS` (binary COPY).
RECORD_TYPES = ("text", "int8", "bytea", "bytea", "int8", "int8", "text", "text", "text", "int2", "text[]", "float4")


class StoreError(GatewayError):
    """The store refused an operation (unknown generation, bad state); ``str`` says why."""


class FencingError(StoreError):
    """A write carried a lease token that is no longer current: another indexer leads now."""


def table_for(generation: str) -> str:
    """The per-generation table name: ``s3rm_g_`` + 16 hex chars of SHA-256 of the name."""
    return "s3rm_g_" + hashlib.sha256(generation.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class GenerationInfo:
    """One registry row: ``name``, ``table``, ``dims``, ``storage`` (halfvec|vector), ``state``, ``hnsw``,
    ``reconciled_at`` (epoch seconds of the leader's last full reconcile, None before), ``layout``
    (1: vectors are columns of ``table``; 2: one table per facet, docs/hybrid-search.md#pgvector-layout)."""

    name: str
    table: str
    dims: int
    storage: str
    state: str
    hnsw: bool
    reconciled_at: float | None
    layout: int = 1

    def vector_table(self, facet: str) -> str:
        """The table holding ``facet``'s vectors (column named like the facet). Raises ValueError for another facet."""
        name = facet_name(facet)
        return self.table if self.layout == 1 else f"{self.table}_{name}"

    def relations(self) -> tuple[str, ...]:
        """Every table of this generation: the generation table, then (layout 2) the facet tables."""
        if self.layout == 1:
            return (self.table,)
        return (self.table, *(self.vector_table(f) for f in INDEX_FACETS))

    def vector_type(self) -> str:
        """The SQL type of one facet vector, e.g. ``halfvec(1024)``."""
        return f"{self.storage}({int(self.dims)})"


#: The last value the global change sequence handed out (0 before the first write).
CHANGE_HEAD_SQL = "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM s3rm_change_seq"
#: Lifecycle step kinds recorded in ``s3rm_event`` (docs/operations.md#generation-lifecycle).
EVENT_KINDS = ("build_started", "build_ready", "shadow_started", "shadow_stopped", "cutover", "rollback", "retired")


def log_event(conn, kind: str, generation: str) -> None:
    """Record one lifecycle step (``kind`` of :data:`EVENT_KINDS`) in ``s3rm_event`` on ``conn``."""
    if kind not in EVENT_KINDS:
        raise ValueError(f"unknown lifecycle event {kind!r}")
    conn.execute("INSERT INTO s3rm_event (kind, generation) VALUES (%s, %s)", (kind, generation))


def holder_id() -> str:
    """This process's lease holder name: host, pid and a random suffix (never reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def facet_name(name: str) -> str:
    if name not in INDEX_FACETS:
        raise ValueError(f"unknown facet {name!r}")
    return name

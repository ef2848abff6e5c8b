"""The shared semantic store in PostgreSQL + pgvector: registry, lease, rows, dirty queue, cursor keys.

Contract: docs/hybrid-search.md#pgvector-backend, docs/operations.md#pgvector-backend,
docs/operations.md#indexer-leader, docs/operations.md#generations.

The tables, generation states, vector layouts and registry rows are described
in :mod:`gateway.retrieval.pgvector.schema`; :class:`PgStore`
is every operation on them.

Every write runs in one transaction that first locks the generation's lease
row and checks holder and token (:class:`FencingError` otherwise), so a
leader whose lease expired can never write after another took over.
"""
from __future__ import annotations

import logging
import secrets
from typing import Any, Iterable, Sequence

import numpy as np

from gateway.config.profiles import INDEX_FACETS
from gateway.retrieval.index.records import IndexEntry, IndexRecord
from gateway.retrieval.pgvector.schema import (
    ACTIVE_ALIAS,
    CHANGE_HEAD_SQL,
    DDL,
    HALFVEC_MAX_DIMS,
    LAYOUT,
    PLAIN_MAX_BYTES,
    RECORD_COLUMNS,
    RECORD_TYPES,
    SCHEMA_LOCK,
    FencingError,
    GenerationInfo,
    StoreError,
    facet_name,
    log_event,
    table_for,
)

__all__ = ["PgStore"]

log = logging.getLogger("s3rm.pgvector")


def _digest(text: str) -> bytes:
    return bytes.fromhex(text.split(":", 1)[-1])


class PgStore:
    """Access to the shared store through one psycopg connection pool.

    Args:
        dsn: libpq URL (``S3RM_PG_DSN``).
        min_size/max_size: pool bounds (connections).
        timeout: seconds to wait for a pooled connection before ``psycopg_pool.PoolTimeout``.

    Connection and SQL errors surface as ``psycopg.Error`` (callers degrade; docs/operations.md#pgvector-backend).
    """

    def __init__(self, dsn: str, *, min_size: int = 1, max_size: int = 4, timeout: float = 5.0):
        from pgvector.psycopg import register_vector
        from psycopg_pool import ConnectionPool

        self._register = register_vector
        self._schema_ready = False
        self.pool = ConnectionPool(dsn, min_size=min_size, max_size=max_size, timeout=timeout, open=False,
                                   configure=self._configure, kwargs={"connect_timeout": max(1, int(timeout))},
                                   name="s3rm-pgvector")
        self.pool.open(wait=False)

    def _configure(self, conn) -> None:
        conn.autocommit = True
        try:
            self._register(conn)
        except Exception:  # the extension is created by ensure_schema on the first connection
            self._ensure_schema_on(conn)
            self._register(conn)

    def close(self) -> None:
        """Close every pooled connection."""
        self.pool.close()

    # ---------------------------------------------------------------- schema
    def _ensure_schema_on(self, conn) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            conn.execute(DDL)
            # generation tables created before the content-quality column (docs/hybrid-search.md#content-quality)
            for (table,) in conn.execute("SELECT table_name FROM s3rm_generation").fetchall():
                conn.execute(f"ALTER TABLE IF EXISTS {table} ADD COLUMN IF NOT EXISTS quality real NOT NULL DEFAULT 1")

    def ensure_schema(self) -> None:
        """Create the shared tables once per process (idempotent, safe under concurrent starts)."""
        if self._schema_ready:
            return
        with self.pool.connection() as conn:
            self._ensure_schema_on(conn)
        self._schema_ready = True

    # -------------------------------------------------------------- registry
    def register(self, generation: str, dims: int, *, hnsw: bool = False, layout: int = LAYOUT) -> GenerationInfo:
        """Register ``generation`` (state ``building``) and create its tables; returns the row (existing or new).

        ``layout`` (default :data:`LAYOUT`) applies to a new generation only; an existing one keeps
        its own. Raises ValueError for a layout other than 1 or 2.
        """
        if layout not in (1, 2):
            raise ValueError(f"unknown vector layout {layout!r}")
        self.ensure_schema()
        table = table_for(generation)
        storage = "halfvec" if dims <= HALFVEC_MAX_DIMS else "vector"
        new = GenerationInfo(generation, table, dims, storage, "building", False, None, layout)
        vtype = new.vector_type()
        vec_cols = "".join(f"{f} {vtype}, " for f in INDEX_FACETS) if layout == 1 else ""
        with self.pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            known = conn.execute("SELECT layout FROM s3rm_generation WHERE name = %s", (generation,)).fetchone()
            if known is None:
                conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {table} (lesson_id text PRIMARY KEY, revision_id bigint NOT NULL, "
                    "retrieval_hash bytea NOT NULL, metadata_hash bytea NOT NULL, created_at bigint NOT NULL, "
                    "updated_at bigint NOT NULL, confidence text NOT NULL, record_origin text NOT NULL, "
                    "review_state text NOT NULL, truncated smallint NOT NULL DEFAULT 0, terms text[], "
                    "quality real NOT NULL DEFAULT 1, "
                    f"{vec_cols}deleted boolean NOT NULL DEFAULT false, seq bigint NOT NULL, fence bigint NOT NULL)")
                conn.execute(f"CREATE INDEX IF NOT EXISTS {table}_seq ON {table} (seq)")
                if layout == 2:
                    plain = (2 if storage == "halfvec" else 4) * dims + 8 <= PLAIN_MAX_BYTES
                    for f in INDEX_FACETS:
                        vt = new.vector_table(f)
                        conn.execute(f"CREATE TABLE IF NOT EXISTS {vt} (lesson_id text PRIMARY KEY, "
                                     f"{f} {vtype} NOT NULL)")
                        if plain:
                            conn.execute(f"ALTER TABLE {vt} ALTER COLUMN {f} SET STORAGE PLAIN")
                conn.execute("INSERT INTO s3rm_generation (name, table_name, dims, storage, state, layout) "
                             "VALUES (%s, %s, %s, %s, 'building', %s)", (generation, table, dims, storage, layout))
            conn.execute("INSERT INTO s3rm_lease (name) VALUES (%s) ON CONFLICT DO NOTHING", (generation,))
        if hnsw:
            self.build_hnsw(generation)
        info = self.generation(generation)
        assert info is not None
        return info

    def build_hnsw(self, generation: str, *, m: int = 16, ef_construction: int = 64,
                   facets: Sequence[str] = INDEX_FACETS, maintenance_work_mem: str | None = None,
                   parallel_workers: int | None = None) -> None:
        """Create one HNSW (inner product) index per facet of ``generation`` (idempotent).

        ``facets``: which facets (default all four; a facet without one is searched exactly).
        ``maintenance_work_mem`` (e.g. ``'2GB'``) and ``parallel_workers``
        (``max_parallel_maintenance_workers``) apply to this session's builds only; the
        build is fastest while the graph fits ``maintenance_work_mem``. Raises
        ValueError for an unknown facet, StoreError for an unknown generation.
        """
        info = self._require(generation)
        ops = f"{info.storage}_ip_ops"
        with self.pool.connection() as conn:
            if maintenance_work_mem is not None:
                conn.execute("SELECT set_config('maintenance_work_mem', %s, false)", (maintenance_work_mem,))
            if parallel_workers is not None:
                conn.execute("SELECT set_config('max_parallel_maintenance_workers', %s, false)",
                             (str(int(parallel_workers)),))
            try:
                for facet in facets:
                    conn.execute(f"CREATE INDEX IF NOT EXISTS {info.table}_{facet}_hnsw ON {info.vector_table(facet)} "
                                 f"USING hnsw ({facet} {ops}) WITH (m = {int(m)}, "
                                 f"ef_construction = {int(ef_construction)})")
            finally:
                conn.execute("RESET maintenance_work_mem")
                conn.execute("RESET max_parallel_maintenance_workers")
            conn.execute("UPDATE s3rm_generation SET hnsw = true WHERE name = %s", (generation,))

    def generation(self, name: str) -> GenerationInfo | None:
        """The registry row of ``name`` (None when unknown)."""
        self.ensure_schema()
        with self.pool.connection() as conn:
            row = conn.execute("SELECT name, table_name, dims, storage, state, hnsw, reconciled_at, layout "
                               "FROM s3rm_generation WHERE name = %s", (name,)).fetchone()
        return GenerationInfo(*row) if row else None

    def generations(self) -> list[GenerationInfo]:
        """Every registry row, oldest first."""
        self.ensure_schema()
        with self.pool.connection() as conn:
            rows = conn.execute("SELECT name, table_name, dims, storage, state, hnsw, reconciled_at, layout "
                                "FROM s3rm_generation ORDER BY created_at, name").fetchall()
        return [GenerationInfo(*r) for r in rows]

    def require(self, name: str) -> GenerationInfo:
        """The registry row of ``name``; StoreError when unknown."""
        return self._require(name)

    def _require(self, name: str) -> GenerationInfo:
        info = self.generation(name)
        if info is None:
            raise StoreError(f"unknown generation {name!r}")
        return info

    def alias(self) -> tuple[str | None, str | None, int]:
        """``(active, previous, version)`` of the alias; ``(None, None, 0)`` before the first activation."""
        self.ensure_schema()
        with self.pool.connection() as conn:
            row = conn.execute("SELECT generation, previous, version FROM s3rm_alias WHERE name = %s",
                               (ACTIVE_ALIAS,)).fetchone()
        return (row[0], row[1], int(row[2])) if row else (None, None, 0)

    def mark_ready(self, generation: str) -> None:
        """A finished build: ``building`` → ``ready`` (other states unchanged; a ``build_ready`` event)."""
        with self.pool.connection() as conn, conn.transaction():
            done = conn.execute("UPDATE s3rm_generation SET state = 'ready', state_at = now() "
                                "WHERE name = %s AND state = 'building' RETURNING name", (generation,)).fetchone()
            if done:
                log_event(conn, "build_ready", generation)

    def mark_reconciled(self, generation: str, at: float) -> None:
        """Record the leader's last finished full reconcile (epoch seconds) for the other gateways' status."""
        with self.pool.connection() as conn:
            conn.execute("UPDATE s3rm_generation SET reconciled_at = %s WHERE name = %s", (at, generation))

    def activate_if_unset(self, generation: str) -> bool:
        """Point the alias at ``generation`` when no alias exists yet (first deployment); True when it did."""
        with self.pool.connection() as conn, conn.transaction():
            done = conn.execute("INSERT INTO s3rm_alias (name, generation) VALUES (%s, %s) "
                                "ON CONFLICT (name) DO NOTHING RETURNING version", (ACTIVE_ALIAS, generation)).fetchone()
            if done:
                conn.execute("UPDATE s3rm_generation SET state = 'active', state_at = now() WHERE name = %s",
                             (generation,))
                log_event(conn, "cutover", generation)
        return done is not None

    def cutover(self, generation: str, *, kind: str = "cutover") -> tuple[str | None, str]:
        """Flip the alias to a ``ready`` (or ``previous``) generation in one transaction.

        The old active becomes ``previous`` (the rollback target); its change
        watermark is set to the current change sequence, so the new active's
        leader keeps it fresh from the flip on (docs/operations.md#generation-lifecycle).
        One ``s3rm_event`` row of ``kind`` (``cutover`` or ``rollback``). Returns ``(old, new)``.
        Raises StoreError for an unknown, building or retired generation, or one of other dims.
        """
        with self.pool.connection() as conn, conn.transaction():
            row = conn.execute("SELECT state, dims FROM s3rm_generation WHERE name = %s FOR UPDATE",
                               (generation,)).fetchone()
            if row is None:
                raise StoreError(f"unknown generation {generation!r}")
            if row[0] not in ("ready", "previous"):
                raise StoreError(f"generation {generation!r} is {row[0]}; only a ready or previous one can serve")
            cur = conn.execute("SELECT generation FROM s3rm_alias WHERE name = %s FOR UPDATE", (ACTIVE_ALIAS,)).fetchone()
            old = cur[0] if cur else None
            if old == generation:
                raise StoreError(f"generation {generation!r} is already active")
            if old is None:
                conn.execute("INSERT INTO s3rm_alias (name, generation) VALUES (%s, %s)", (ACTIVE_ALIAS, generation))
            else:
                conn.execute("UPDATE s3rm_alias SET generation = %s, previous = %s, version = version + 1, "
                             "flipped_at = now() WHERE name = %s", (generation, old, ACTIVE_ALIAS))
                conn.execute("UPDATE s3rm_generation SET state = 'ready', state_at = now() "
                             "WHERE state = 'previous' AND name <> %s", (generation,))
                conn.execute("UPDATE s3rm_generation SET state = 'previous', state_at = now(), synced_seq = "
                             f"({CHANGE_HEAD_SQL}) WHERE name = %s", (old,))
            conn.execute("UPDATE s3rm_generation SET state = 'active', state_at = now(), synced_seq = NULL "
                         "WHERE name = %s", (generation,))
            log_event(conn, kind, generation)
        return old, generation

    def rollback(self) -> tuple[str, str]:
        """Flip the alias back to its ``previous`` generation; returns ``(old, new)``.

        Raises StoreError when there is no previous generation.
        """
        active, previous, _ = self.alias()
        if previous is None or active is None:
            raise StoreError("there is no previous generation to roll back to")
        return self.cutover(previous, kind="rollback")  # type: ignore[return-value]

    def retire(self, generation: str, *, rollback_target: bool = False) -> None:
        """Retire a generation that is not active: drop its tables (and its shadow comparison).

        The rollback target (``previous``) is refused unless ``rollback_target``
        (its rollback window is over, or the operator ends it); it then leaves
        the alias, so ``rollback`` has nothing to flip to.
        Raises StoreError for the active generation, or the previous one without ``rollback_target``.
        """
        active, previous, _ = self.alias()
        if generation == active or (generation == previous and not rollback_target):
            raise StoreError(f"generation {generation!r} is {'active' if generation == active else 'the rollback target'}"
                             "; cut over or roll back first")
        info = self._require(generation)
        with self.pool.connection() as conn, conn.transaction():
            conn.execute("SELECT 1 FROM s3rm_alias WHERE name = %s FOR UPDATE", (ACTIVE_ALIAS,))
            conn.execute(f"DROP TABLE IF EXISTS {', '.join(info.relations())}")
            conn.execute("UPDATE s3rm_alias SET previous = NULL WHERE name = %s AND previous = %s",
                         (ACTIVE_ALIAS, generation))
            conn.execute("UPDATE s3rm_generation SET state = 'retired', state_at = now(), synced_seq = NULL "
                         "WHERE name = %s", (generation,))
            conn.execute("DELETE FROM s3rm_dirty WHERE generation = %s", (generation,))
            conn.execute("DELETE FROM s3rm_shadow WHERE generation = %s", (generation,))
            log_event(conn, "retired", generation)

    # ----------------------------------------------------------------- lease
    def acquire(self, generation: str, holder: str, ttl_seconds: float) -> int | None:
        """Take or renew the indexer lease of ``generation``; the fencing token, or None when another holds it.

        A renewal keeps the token; taking over an expired lease (or re-taking one's own
        expired lease) increments it, which fences every write carrying the old token.
        """
        with self.pool.connection() as conn:
            conn.execute("INSERT INTO s3rm_lease (name) VALUES (%s) ON CONFLICT DO NOTHING", (generation,))
            row = conn.execute(
                "UPDATE s3rm_lease SET token = CASE WHEN holder = %(h)s AND expires_at > now() THEN token "
                "ELSE token + 1 END, holder = %(h)s, expires_at = now() + make_interval(secs => %(ttl)s) "
                "WHERE name = %(n)s AND (holder = %(h)s OR expires_at <= now()) RETURNING token",
                {"h": holder, "n": generation, "ttl": float(ttl_seconds)}).fetchone()
        return int(row[0]) if row else None

    def release(self, generation: str, holder: str) -> None:
        """Give the lease up at once (clean shutdown: the next gateway takes over without waiting)."""
        with self.pool.connection() as conn:
            conn.execute("UPDATE s3rm_lease SET expires_at = now() WHERE name = %s AND holder = %s",
                         (generation, holder))

    def lease(self, generation: str) -> tuple[str | None, int, bool]:
        """``(holder, token, live)`` of a generation's lease."""
        with self.pool.connection() as conn:
            row = conn.execute("SELECT holder, token, expires_at > now() FROM s3rm_lease WHERE name = %s",
                               (generation,)).fetchone()
        return (row[0], int(row[1]), bool(row[2])) if row else (None, 0, False)

    @staticmethod
    def fence(conn, generation: str, holder: str, token: int) -> None:
        """Inside ``conn``'s transaction: lock ``generation``'s lease row; FencingError unless ``(holder,
        token)`` holds it live (every leader write starts with this)."""
        PgStore._fence(conn, generation, holder, token)

    @staticmethod
    def _fence(conn, generation: str, holder: str, token: int) -> None:
        row = conn.execute("SELECT holder, token, expires_at > now() FROM s3rm_lease WHERE name = %s FOR UPDATE",
                           (generation,)).fetchone()
        if row is None or row[0] != holder or int(row[1]) != token or not row[2]:
            raise FencingError(f"lease of {generation} is no longer held with token {token}")

    # ---------------------------------------------------------------- writes
    def write(self, generation: str, holder: str, token: int, upserts: Sequence[IndexEntry] = (),
              deletes: Iterable[str] = (), metadata_updates: Sequence[IndexRecord] = ()) -> int:
        """Apply one refresh to ``generation`` in one fenced transaction; returns the last change ``seq``.

        ``upserts`` replace rows (record, terms, vectors); ``deletes`` leave tombstones (vectors
        and terms cleared, ``deleted``); ``metadata_updates`` replace records of live rows only.
        Raises FencingError (nothing written) when ``(holder, token)`` no longer holds the lease.
        """
        from pgvector import HalfVector, Vector

        info = self._require(generation)
        wrap = HalfVector if info.storage == "halfvec" else Vector
        deletes = sorted(set(deletes))
        with self.pool.connection() as conn, conn.transaction():
            self._fence(conn, generation, holder, token)
            t = info.table
            if upserts:
                cols = (*RECORD_COLUMNS, *INDEX_FACETS)
                stage = f"stage_{t}"
                vtype = info.vector_type()
                conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {stage} AS SELECT {', '.join(RECORD_COLUMNS)}, "
                             f"{', '.join(f'NULL::{vtype} AS {f}' for f in INDEX_FACETS)} FROM {t} WITH NO DATA")
                conn.execute(f"TRUNCATE {stage}")
                with conn.cursor().copy(f"COPY {stage} ({', '.join(cols)}) FROM STDIN (FORMAT BINARY)") as copy:
                    copy.set_types([*RECORD_TYPES, *([info.storage] * len(INDEX_FACETS))])
                    for e in upserts:
                        r = e.record
                        copy.write_row((r.lesson_id, r.revision_id, _digest(r.retrieval_hash),
                                        _digest(r.metadata_hash), r.created_at, r.updated_at, r.confidence,
                                        r.record_origin, r.review_state, r.truncated_mask, list(e.terms),
                                        float(e.quality),
                                        *(wrap(np.asarray(e.vectors[f], dtype=np.float32)) for f in INDEX_FACETS)))
                inline = cols if info.layout == 1 else RECORD_COLUMNS
                assign = ", ".join(f"{c} = EXCLUDED.{c}" for c in inline[1:])
                conn.execute(f"INSERT INTO {t} ({', '.join(inline)}, deleted, seq, fence) "
                             f"SELECT {', '.join(inline)}, false, nextval('s3rm_change_seq'), %s FROM {stage} "
                             f"ON CONFLICT (lesson_id) DO UPDATE SET {assign}, deleted = false, "
                             "seq = EXCLUDED.seq, fence = EXCLUDED.fence", (token,))
                if info.layout == 2:
                    for f in INDEX_FACETS:
                        vt = info.vector_table(f)
                        conn.execute(f"INSERT INTO {vt} (lesson_id, {f}) SELECT lesson_id, {f} FROM {stage} "
                                     f"ON CONFLICT (lesson_id) DO UPDATE SET {f} = EXCLUDED.{f}")
            for r in metadata_updates:
                conn.execute(f"UPDATE {t} SET revision_id = %s, metadata_hash = %s, created_at = %s, "
                             "updated_at = %s, confidence = %s, record_origin = %s, review_state = %s, "
                             "seq = nextval('s3rm_change_seq'), fence = %s WHERE lesson_id = %s AND NOT deleted",
                             (r.revision_id, _digest(r.metadata_hash), r.created_at, r.updated_at, r.confidence,
                              r.record_origin, r.review_state, token, r.lesson_id))
            if deletes:
                nulls = "".join(f", {f} = NULL" for f in INDEX_FACETS) if info.layout == 1 else ""
                conn.execute(f"UPDATE {t} SET deleted = true, terms = NULL{nulls}, "
                             "seq = nextval('s3rm_change_seq'), fence = %s WHERE lesson_id = ANY(%s) AND NOT deleted",
                             (token, deletes))
                if info.layout == 2:
                    for f in INDEX_FACETS:
                        conn.execute(f"DELETE FROM {info.vector_table(f)} WHERE lesson_id = ANY(%s)", (deletes,))
            seq = conn.execute(f"SELECT coalesce(max(seq), 0) FROM {t}").fetchone()[0]
        return int(seq)

    # ----------------------------------------------------------------- reads
    def changes(self, generation: str, after_seq: int) -> tuple[list[tuple[Any, ...]], int]:
        """Rows changed after ``after_seq`` (records, terms, ``deleted``), and the new high-water ``seq``.

        Row tuple: the :data:`RECORD_COLUMNS` values, then ``deleted``, then ``seq``.
        """
        info = self._require(generation)
        with self.pool.connection() as conn:
            rows = conn.execute(f"SELECT {', '.join(RECORD_COLUMNS)}, deleted, seq FROM {info.table} "
                                "WHERE seq > %s ORDER BY seq", (after_seq,)).fetchall()
        return rows, (int(rows[-1][-1]) if rows else after_seq)

    def vectors(self, generation: str, facets: Sequence[str], ids: Sequence[str]) -> dict[str, dict[str, np.ndarray]]:
        """``{lesson_id: {facet: float32 (dims,)}}`` of live rows among ``ids``."""
        if not ids:
            return {}
        info = self._require(generation)
        t = info.table
        cols = ", ".join(f"{info.vector_table(f)}.{f}" for f in facets)
        joins = "".join(f" LEFT JOIN {vt} ON {vt}.lesson_id = {t}.lesson_id"
                        for vt in dict.fromkeys(info.vector_table(f) for f in facets) if vt != t)
        with self.pool.connection() as conn:
            rows = conn.execute(f"SELECT {t}.lesson_id, {cols} FROM {t}{joins} WHERE {t}.lesson_id = ANY(%s) "
                                f"AND NOT {t}.deleted", (list(ids),)).fetchall()
        return {r[0]: {f: _array(v) for f, v in zip(facets, r[1:])} for r in rows}

    def search(self, generation: str, facet: str, query: np.ndarray, k: int, *, approximate: bool = False,
               ef_search: int = 100, only: Sequence[str] | None = None, exclude: Sequence[str] = ()
               ) -> list[tuple[str, float]]:
        """Top-``k`` live rows of ``facet`` by inner product with ``query``: ``[(lesson_id, score)]``, best first.

        Exact (a sequential scan, index scans disabled for the statement) unless
        ``approximate`` and the generation has HNSW indexes (then ``hnsw.ef_search``
        candidates, iterative scan when filtered). ``only`` restricts to these ids.
        Layout 2 scans only the facet's own table (live rows only, vectors inline).
        """
        from pgvector import HalfVector, Vector

        info = self._require(generation)
        col = facet_name(facet)
        table = info.vector_table(col)
        vec = (HalfVector if info.storage == "halfvec" else Vector)(np.asarray(query, dtype=np.float32))
        where = ["NOT deleted"] if info.layout == 1 else []
        params: list[Any] = [vec]
        if only is not None:
            where.append("lesson_id = ANY(%s)")
            params.append(list(only))
        if exclude:
            where.append("lesson_id <> ALL(%s)")
            params.append(list(exclude))
        params += [vec, int(k)]
        use_index = approximate and info.hnsw
        order = f"{col} <#> %s" if use_index else f"{col} <#> %s, lesson_id"
        sql = (f"SELECT lesson_id, -({col} <#> %s) FROM {table}{' WHERE ' if where else ''}{' AND '.join(where)} "
               f"ORDER BY {order} LIMIT %s")
        with self.pool.connection() as conn, conn.transaction():
            if use_index:
                conn.execute(f"SET LOCAL hnsw.ef_search = {int(ef_search)}")
                if only is not None or exclude:
                    conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            else:
                conn.execute("SET LOCAL enable_indexscan = off")
                conn.execute("SET LOCAL enable_bitmapscan = off")
            rows = conn.execute(sql, params).fetchall()
        return [(r[0], float(r[1])) for r in rows]

    def table_bytes(self, generation: str) -> int:
        """Disk bytes of the generation's tables (:meth:`GenerationInfo.relations`) with their indexes and TOAST;
        a table the generation does not have (a layout-2 generation built before ``whole_passage``) counts 0."""
        info = self._require(generation)
        with self.pool.connection() as conn:
            return int(conn.execute("SELECT coalesce(sum(pg_total_relation_size(to_regclass(n))), 0) "
                                    "FROM unnest(%s::text[]) AS n WHERE to_regclass(n) IS NOT NULL",
                                    (list(info.relations()),)).fetchone()[0])

    # ----------------------------------------------------------- dirty queue
    def queue_dirty(self, generation: str, ids: Iterable[str]) -> None:
        """Ask the leader of ``generation`` to refresh these Lessons (a serving-only gateway's hints)."""
        ids = sorted(set(ids))
        if not ids:
            return
        with self.pool.connection() as conn:
            conn.execute("INSERT INTO s3rm_dirty (generation, lesson_id) SELECT %s, unnest(%s::text[]) "
                         "ON CONFLICT DO NOTHING", (generation, ids))

    def take_dirty(self, generation: str, limit: int = 1000) -> list[str]:
        """Remove and return up to ``limit`` queued ids of ``generation`` (the leader)."""
        with self.pool.connection() as conn:
            rows = conn.execute("DELETE FROM s3rm_dirty WHERE (generation, lesson_id) IN (SELECT generation, "
                                "lesson_id FROM s3rm_dirty WHERE generation = %s LIMIT %s FOR UPDATE SKIP LOCKED) "
                                "RETURNING lesson_id", (generation, limit)).fetchall()
        return [r[0] for r in rows]

    # ----------------------------------------------------------- cursor keys
    def cursor_keys(self) -> dict[int, bytes]:
        """The shared cursor signing keys ``{kid: secret}``; creates key 1 (32 random bytes) when none exists."""
        self.ensure_schema()
        with self.pool.connection() as conn:
            conn.execute("INSERT INTO s3rm_cursor_key (kid, secret) VALUES (1, %s) ON CONFLICT DO NOTHING",
                         (secrets.token_bytes(32),))
            rows = conn.execute("SELECT kid, secret FROM s3rm_cursor_key ORDER BY kid").fetchall()
        return {int(k): bytes(s) for k, s in rows}

    def rotate_cursor_key(self) -> int:
        """Add a new signing key (the newest signs; older ones still verify until deleted); returns its kid."""
        self.ensure_schema()
        with self.pool.connection() as conn:
            row = conn.execute("INSERT INTO s3rm_cursor_key (kid, secret) SELECT coalesce(max(kid), 0) + 1, %s "
                               "FROM s3rm_cursor_key RETURNING kid", (secrets.token_bytes(32),)).fetchone()
        return int(row[0])


def _array(value: Any) -> np.ndarray:
    if value is None:
        return np.zeros(0, np.float32)
    return np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value, dtype=np.float32)

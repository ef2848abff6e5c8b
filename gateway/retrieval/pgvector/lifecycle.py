"""Generation lifecycle on the shared store: change watermarks, propagation, retirement, events, shadow figures.

Contract: docs/operations.md#generation-lifecycle, docs/operations.md#shadow-queries.

Generations built from the same inputs (profile, projection, ranking — names
that differ only by their ``.label`` suffix) hold interchangeable rows: the
same record, terms and vectors for the same Lesson revision. So the leader of
the served generation keeps every such *companion* fresh by copying its own
changed rows into it, in PostgreSQL, without embedding anything
(:func:`propagate`). Each companion carries a watermark ``synced_seq`` (the
change sequence up to which it has everything the source wrote):

* ``s3rm index build`` sets it to the sequence head *before* its scan
  (:func:`track_changes`), replays the wiki's recent-changes tail itself while
  it runs, and once ``ready`` the leader copies every source row written
  since the build began (the tail between the build's last poll and now);
* a cutover sets it on the new ``previous`` generation, and the new active's
  leader keeps it fresh for ``S3RM_INDEX_ROLLBACK_WINDOW_SECONDS`` after the
  flip (:func:`companions`); then the leader retires it (:func:`retire_expired`).

A copy never runs into a generation whose lease another process holds live
(a build in progress) and never replaces a row with an older revision. Every
copy is fenced by the source's lease like any leader write.
"""
from __future__ import annotations

import logging
from typing import Any

from gateway.config.profiles import INDEX_FACETS
from gateway.retrieval.pgvector.schema import CHANGE_HEAD_SQL, RECORD_COLUMNS, StoreError, log_event
from gateway.retrieval.pgvector.store import PgStore

__all__ = ["change_head", "companions", "event_counts", "overview", "propagate", "record_shadow", "retire_expired",
           "shadow_config", "shadow_report", "start_shadow", "stop_shadow", "track_changes"]

log = logging.getLogger("s3rm.pgvector")


def inputs_of(generation: str) -> str:
    """The generation id a name was built from (the name without its ``.label`` suffix)."""
    return generation.split(".", 1)[0]


def change_head(store: PgStore) -> int:
    """The last change sequence number handed out (0 before the first write)."""
    store.ensure_schema()
    with store.pool.connection() as conn:
        return int(conn.execute(CHANGE_HEAD_SQL).fetchone()[0])


def track_changes(store: PgStore, generation: str, since_seq: int) -> None:
    """Record that ``generation`` holds every change up to ``since_seq`` (a build's start; a ``build_started``
    event). Raises StoreError for an unknown generation."""
    with store.pool.connection() as conn, conn.transaction():
        row = conn.execute("UPDATE s3rm_generation SET synced_seq = %s WHERE name = %s RETURNING name",
                           (since_seq, generation)).fetchone()
        if row is None:
            raise StoreError(f"unknown generation {generation!r}")
        log_event(conn, "build_started", generation)


def companions(store: PgStore, served: str, window_seconds: float) -> list[str]:
    """Generations the leader of ``served`` keeps fresh: same inputs, a watermark, and state ``ready``, or
    ``previous`` while the last flip is younger than ``window_seconds``."""
    with store.pool.connection() as conn:
        rows = conn.execute(
            "SELECT g.name FROM s3rm_generation g LEFT JOIN s3rm_alias a ON a.name = 'active' "
            "WHERE g.name <> %s AND g.synced_seq IS NOT NULL AND (g.state = 'ready' OR (g.state = 'previous' "
            "AND a.previous = g.name AND a.flipped_at > now() - make_interval(secs => %s))) ORDER BY g.name",
            (served, float(window_seconds))).fetchall()
    return [r[0] for r in rows if inputs_of(r[0]) == inputs_of(served)]


def propagate(store: PgStore, source: str, target: str, holder: str, token: int) -> int:
    """Copy the rows of ``source`` changed after ``target``'s watermark into ``target``; returns rows copied.

    One transaction fenced by ``source``'s lease (FencingError when ``(holder, token)`` lost it). Copies
    nothing (0) when another process holds ``target``'s lease live, or ``target`` has no watermark.
    A copied row gets a new change ``seq`` (gateways serving ``target`` later see it), keeps ``deleted``
    (tombstones travel too) and never replaces a row of a newer revision. Either generation may use
    either vector layout (docs/hybrid-search.md#pgvector-layout).
    """
    src, tgt = store.require(source), store.require(target)
    joins = "".join(f" LEFT JOIN {src.vector_table(f)} v_{f} ON v_{f}.lesson_id = s.lesson_id"
                    for f in INDEX_FACETS) if src.layout == 2 else ""
    vec = {f: (f"v_{f}.{f}" if src.layout == 2 else f"s.{f}") for f in INDEX_FACETS}
    cols = [*RECORD_COLUMNS, "deleted", *(INDEX_FACETS if tgt.layout == 1 else ())]
    values = [f"s.{c}" for c in (*RECORD_COLUMNS, "deleted")] + \
        ([vec[f] for f in INDEX_FACETS] if tgt.layout == 1 else [])
    assign = ", ".join(f"{c} = EXCLUDED.{c}" for c in cols[1:])
    with store.pool.connection() as conn, conn.transaction():
        store.fence(conn, source, holder, token)
        lease = conn.execute("SELECT holder, expires_at > now() FROM s3rm_lease WHERE name = %s FOR UPDATE",
                             (target,)).fetchone()
        if lease is not None and lease[1] and lease[0] not in (None, holder):
            return 0
        mark = conn.execute("SELECT synced_seq FROM s3rm_generation WHERE name = %s FOR UPDATE",
                            (target,)).fetchone()
        if mark is None or mark[0] is None:
            return 0
        since = int(mark[0])
        applied = conn.execute(
            f"INSERT INTO {tgt.table} AS t ({', '.join(cols)}, seq, fence) SELECT {', '.join(values)}, "
            f"nextval('s3rm_change_seq'), %s FROM {src.table} s{joins} WHERE s.seq > %s ORDER BY s.seq "
            f"ON CONFLICT (lesson_id) DO UPDATE SET {assign}, seq = EXCLUDED.seq, fence = EXCLUDED.fence "
            "WHERE t.revision_id <= EXCLUDED.revision_id RETURNING lesson_id, deleted", (token, since)).fetchall()
        if tgt.layout == 2 and applied:
            every = [r[0] for r in applied]
            live = [r[0] for r in applied if not r[1]]
            for f in INDEX_FACETS:
                conn.execute(f"DELETE FROM {tgt.vector_table(f)} WHERE lesson_id = ANY(%s)", (every,))
                if live:
                    conn.execute(f"INSERT INTO {tgt.vector_table(f)} (lesson_id, {f}) SELECT s.lesson_id, {vec[f]} "
                                 f"FROM {src.table} s{joins} WHERE s.lesson_id = ANY(%s) AND {vec[f]} IS NOT NULL",
                                 (live,))
        head = conn.execute(f"SELECT coalesce(max(seq), 0) FROM {src.table}").fetchone()[0]
        conn.execute("UPDATE s3rm_generation SET synced_seq = %s WHERE name = %s", (max(since, int(head)), target))
    return len(applied)


def retire_expired(store: PgStore, window_seconds: float) -> str | None:
    """Retire the rollback target once the last flip is older than ``window_seconds``; its name, or None."""
    with store.pool.connection() as conn:
        row = conn.execute("SELECT previous FROM s3rm_alias WHERE name = 'active' AND previous IS NOT NULL "
                           "AND flipped_at <= now() - make_interval(secs => %s)", (float(window_seconds),)).fetchone()
    if row is None:
        return None
    try:
        store.retire(row[0], rollback_target=True)
    except StoreError:  # flipped meanwhile
        return None
    log.info("rollback window over: generation %s retired", row[0])
    return row[0]


def event_counts(store: PgStore) -> dict[str, int]:
    """Lifecycle steps recorded so far: ``{kind: count}`` (docs/operations.md#generation-lifecycle)."""
    with store.pool.connection() as conn:
        rows = conn.execute("SELECT kind, count(*) FROM s3rm_event GROUP BY kind ORDER BY kind").fetchall()
    return {k: int(n) for k, n in rows}


def overview(store: PgStore) -> dict[str, Any]:
    """Per generation ``{state, lessons, synced_seq}`` (lessons: live rows, see :func:`_live_rows`; retired
    ones only named) plus ``build_progress`` per building generation (its live rows / the active one's, 0–1)."""
    gens: dict[str, Any] = {}
    with store.pool.connection() as conn:
        rows = conn.execute("SELECT name, table_name, state, synced_seq FROM s3rm_generation "
                            "ORDER BY created_at, name").fetchall()
        active = conn.execute("SELECT generation FROM s3rm_alias WHERE name = 'active'").fetchone()
        for name, table, state, synced in rows:
            lessons = None
            if state != "retired":
                lessons = _live_rows(conn, table)
            gens[name] = {"state": state, "lessons": lessons, "synced_seq": synced}
    base = gens.get(active[0], {}).get("lessons") if active else None
    progress = {n: (round(min(1.0, g["lessons"] / base), 3) if base else None)
                for n, g in gens.items() if g["state"] == "building"}
    return {"generations": gens, "build_progress": progress}


#: Above this many rows (planner estimate) a generation's Lesson count is the estimate, not a scan.
EXACT_COUNT_ROWS = 200_000


def _live_rows(conn, table: str) -> int:
    """Live rows of ``table``: exact up to :data:`EXACT_COUNT_ROWS`, else PostgreSQL's estimate (a full
    scan of a million-row vector table every few seconds would cost more than the figure is worth)."""
    est = conn.execute("SELECT reltuples FROM pg_class WHERE relname = %s", (table,)).fetchone()
    if est is not None and est[0] is not None and float(est[0]) > EXACT_COUNT_ROWS:
        return int(est[0])
    return int(conn.execute(f"SELECT count(*) FROM {table} WHERE NOT deleted").fetchone()[0])


# ------------------------------------------------------------------ shadow
def start_shadow(store: PgStore, generation: str, sample: float) -> None:
    """Compare ``generation`` on a ``sample`` share (0–1] of live hybrid searches (replaces any running one).

    Raises StoreError unless it is ``ready`` or ``previous``, and ValueError for a share outside (0, 1].
    """
    if not 0 < sample <= 1:
        raise ValueError("sample must be in (0, 1]")
    info = store.require(generation)
    if info.state not in ("ready", "previous"):
        raise StoreError(f"generation {generation!r} is {info.state}; only a ready or previous one can shadow")
    with store.pool.connection() as conn, conn.transaction():
        conn.execute("DELETE FROM s3rm_shadow")
        conn.execute("INSERT INTO s3rm_shadow (generation, sample) VALUES (%s, %s)", (generation, float(sample)))
        log_event(conn, "shadow_started", generation)


def stop_shadow(store: PgStore) -> list[str]:
    """Stop every running comparison (samples stay for ``--report``); the generations stopped."""
    store.ensure_schema()
    with store.pool.connection() as conn, conn.transaction():
        names = [r[0] for r in conn.execute("DELETE FROM s3rm_shadow RETURNING generation").fetchall()]
        for name in names:
            log_event(conn, "shadow_stopped", name)
    return names


def shadow_config(store: PgStore) -> tuple[str, float] | None:
    """``(generation, sample)`` of the running comparison, None when none runs."""
    with store.pool.connection() as conn:
        row = conn.execute("SELECT generation, sample FROM s3rm_shadow ORDER BY started_at DESC LIMIT 1").fetchone()
    return (row[0], float(row[1])) if row else None


def record_shadow(store: PgStore, sample: Any) -> None:
    """Store one :class:`~gateway.retrieval.hybrid.shadow.ShadowSample` (names, counts, milliseconds; no query)."""
    with store.pool.connection() as conn:
        conn.execute("INSERT INTO s3rm_shadow_sample (generation, active, k, active_hits, shadow_hits, overlap, "
                     "active_ms, shadow_ms) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                     (sample.generation, sample.active, sample.k, sample.active_hits, sample.shadow_hits,
                      sample.overlap, sample.active_ms, sample.shadow_ms))


def shadow_report(store: PgStore, generation: str) -> dict[str, Any]:
    """Aggregate of every sample of ``generation``: ``samples``, ``k``, overlap ``mean`` / ``median`` / ``min``,
    and ``active_ms`` / ``shadow_ms`` ``{p50, p95}`` (None values before the first sample)."""
    store.ensure_schema()
    pct = "percentile_cont({q}) WITHIN GROUP (ORDER BY {c})"
    with store.pool.connection() as conn:
        row = conn.execute(
            "SELECT count(*), max(k), avg(overlap), " + pct.format(q=0.5, c="overlap") + ", min(overlap), "
            + ", ".join(pct.format(q=q, c=c) for c in ("active_ms", "shadow_ms") for q in (0.5, 0.95))
            + " FROM s3rm_shadow_sample WHERE generation = %s", (generation,)).fetchone()
    n, k, mean, median, low, a50, a95, s50, s95 = row
    num = lambda v: None if v is None else float(v)  # noqa: E731
    return {"generation": generation, "samples": int(n), "k": k, "overlap_mean": num(mean),
            "overlap_median": num(median), "overlap_min": num(low),
            "active_ms": {"p50": num(a50), "p95": num(a95)}, "shadow_ms": {"p50": num(s50), "p95": num(s95)}}

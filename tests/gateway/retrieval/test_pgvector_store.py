"""The pgvector backend against a real PostgreSQL + pgvector (the session ``pg_cluster``), no wiki.

Fencing refuses a stale leader's write; deletes leave tombstones that no search
returns and that followers apply; the exact search in PostgreSQL ranks like the
in-process exact index under masks; the alias flips atomically and refuses bad
transitions; every store user sees the same cursor keys.
"""
from __future__ import annotations

import secrets

import numpy as np
import psycopg
import pytest

from support.services import wait_until

from gateway.config.profiles import INDEX_FACETS
from gateway.core.errors import ToolError
from gateway.tools.cursors import CursorCodec, CursorKeyRing
from gateway.retrieval.index.records import FilterMask, IndexEntry
from gateway.retrieval.index.snapshot import IndexSnapshot
from gateway.retrieval.pgvector.snapshot import LeaseHandle, PgSnapshot, SearchOptions
from gateway.retrieval.pgvector.schema import FencingError, StoreError
from gateway.retrieval.pgvector.store import PgStore
from support.pgvector import random_entries

DIMS = 16


@pytest.fixture(scope="module")
def store(pg_cluster):
    s = PgStore(pg_cluster.dsn())
    yield s
    s.close()


def _gen(prefix: str = "gen-test") -> str:
    return f"{prefix}{secrets.token_hex(4)}"


def _entries(n: int, seed: int = 7) -> list[IndexEntry]:
    return random_entries(n, seed=seed, dims=DIMS)


def _leader(store: PgStore, generation: str, ttl: float = 30.0) -> LeaseHandle:
    lease = LeaseHandle(f"test:{secrets.token_hex(3)}")
    lease.token = store.acquire(generation, lease.holder, ttl)
    assert lease.token is not None
    return lease


def test_a_stale_leader_is_fenced_and_writes_nothing(store):
    gen = _gen()
    store.register(gen, DIMS)
    a = _leader(store, gen, ttl=5.0)  # long enough that the next two steps run inside it on a busy machine
    entries = _entries(4)
    store.write(gen, a.holder, a.token, entries[:2])
    assert store.acquire(gen, "other", 5.0) is None  # a live lease is not taken over
    b_token = wait_until(lambda: store.acquire(gen, "other", 5.0), 60, "the stale lease expiring")
    assert b_token == a.token + 1
    with pytest.raises(FencingError):
        store.write(gen, a.holder, a.token, entries[2:3])
    with pytest.raises(FencingError):
        store.write(gen, a.holder, a.token, (), ["L-0000"])
    store.write(gen, "other", b_token, entries[3:4])
    rows, _ = store.changes(gen, 0)
    assert sorted(r[0] for r in rows) == ["L-0000", "L-0001", "L-0003"]
    with psycopg.connect(store.pool.conninfo) as conn:
        fences = dict(conn.execute(f"SELECT lesson_id, fence FROM {store.generation(gen).table}").fetchall())
    assert fences == {"L-0000": a.token, "L-0001": a.token, "L-0003": b_token}
    assert store.lease(gen)[:2] == ("other", b_token)


def test_deletes_leave_tombstones_followers_apply_and_search_never_returns(store):
    gen = _gen()
    store.register(gen, DIMS)
    lease = _leader(store, gen)
    entries = _entries(6)
    leader = PgSnapshot.load(store, gen, DIMS, lease).apply(entries)
    follower = PgSnapshot.load(store, gen, DIMS, LeaseHandle("follower"))
    assert len(follower) == 6
    gone = entries[2].record.lesson_id
    leader = leader.apply((), [gone])
    query = entries[2].vectors["whole"]
    assert gone not in [h.lesson_id for h in leader.search("whole", query, 10)]
    follower = follower.synced()
    assert gone not in follower and len(follower) == 5
    assert gone not in [h.lesson_id for h in follower.search("whole", query, 10)]
    assert follower.vector("whole", gone) is None
    with pytest.raises(FencingError):
        follower.apply(entries[:1])  # a follower never writes
    again = follower.synced()
    assert again is follower  # nothing new


def test_exact_search_in_postgres_ranks_like_the_in_process_index(store):
    gen = _gen()
    store.register(gen, DIMS)
    entries = _entries(300, seed=3)
    view = PgSnapshot.load(store, gen, DIMS, _leader(store, gen)).apply(entries)
    local = IndexSnapshot.from_entries(gen, DIMS, entries)
    rng = np.random.default_rng(11)
    for _ in range(5):
        q = rng.standard_normal(DIMS).astype(np.float32)
        q /= np.linalg.norm(q)
        for mask in (None, FilterMask(confidence=("high",)), FilterMask(updated_after=1_700_002_000)):
            got = view.search("situation", q, 10, allowed=view.allowed_rows(mask), exclude=("L-0005",))
            want = local.search("situation", q, 10, allowed=local.allowed_rows(mask), exclude=("L-0005",))
            assert len(got) == len(want) == 10
            assert got[0].lesson_id == want[0].lesson_id
            assert len({h.lesson_id for h in got} & {h.lesson_id for h in want}) >= 9  # halfvec rounding
            assert max(abs(g.score - w.score) for g, w in zip(got, want)) < 0.01
            assert [h.rank for h in got] == list(range(1, 11))
    hangul = view.hangul_rows()
    assert hangul.sum() == 75 and np.array_equal(hangul, local.hangul_rows())
    assert [h.lesson_id for h in view.lexical_search(["복구"], 5)] == \
        [h.lesson_id for h in local.lexical_search(["복구"], 5)]
    store.build_hnsw(gen)
    approx = PgSnapshot.load(store, gen, DIMS, LeaseHandle("x"), SearchOptions(approximate=True, ef_search=200))
    q = entries[42].vectors["approach"]
    assert approx.search("approach", q, 5)[0].lesson_id == "L-0042"
    cols = view.columns("mechanism")
    assert cols.shape == (DIMS, 300)
    assert np.allclose(cols[:, view.ids.index("L-0007")], entries[7].vectors["mechanism"], atol=1e-3)


def test_alias_cutover_rollback_and_retire(store):
    g1, g2, g3 = _gen("gen-a"), _gen("gen-b"), _gen("gen-c")
    for g in (g1, g2, g3):
        store.register(g, DIMS)
    active, _, version = store.alias()
    if active is None:
        assert store.activate_if_unset(g1)
    else:  # another test already activated one: cut over to ours
        store.mark_ready(g1)
        store.cutover(g1)
    assert not store.activate_if_unset(g2)
    with pytest.raises(StoreError, match="building"):
        store.cutover(g2)
    store.mark_ready(g2)
    v0 = store.alias()[2]
    assert store.cutover(g2) == (g1, g2)
    assert store.alias() == (g2, g1, v0 + 1)
    states = {i.name: i.state for i in store.generations()}
    assert (states[g1], states[g2], states[g3]) == ("previous", "active", "building")
    with pytest.raises(StoreError, match="rollback target"):
        store.retire(g1)
    assert store.rollback() == (g2, g1)
    assert store.alias()[:2] == (g1, g2)
    store.mark_ready(g3)
    store.cutover(g3)
    states = {i.name: i.state for i in store.generations()}
    assert (states[g1], states[g2], states[g3]) == ("previous", "ready", "active")
    store.retire(g2)
    assert store.generation(g2).state == "retired"
    with pytest.raises(StoreError, match="retired"):
        store.cutover(g2)
    with pytest.raises(StoreError, match="unknown"):
        store.cutover("gen-nope")


def test_cursor_keys_are_shared_by_every_store_user(pg_cluster, store):
    other = PgStore(pg_cluster.dsn())
    try:
        assert other.cursor_keys() == store.cursor_keys()
        kid = store.rotate_cursor_key()
        assert kid in other.cursor_keys()
    finally:
        other.close()


def test_a_rotated_cursor_key_is_picked_up_without_a_restart(pg_cluster, store):
    """A running gateway's ring (docs/operations.md#pgvector-backend): a cursor signed with a key rotated in
    after its start verifies after one reload; unknown key ids reload at most once per interval."""
    other = PgStore(pg_cluster.dsn())  # the running gateway's own connection to the store
    clock, loads = [0.0], []
    try:
        ring = CursorKeyRing(lambda: loads.append(1) or other.cursor_keys(), other.cursor_keys(),
                             min_reload_seconds=5.0, max_age_seconds=300.0, clock=lambda: clock[0])
        started_with = ring.keys()
        kid = store.rotate_cursor_key()  # what `s3rm index rotate-cursor-key` does, from another process
        token = CursorCodec(b"", keys=store.cursor_keys()).encode("search_lessons", "fp", {"o": 5})  # a newer gateway
        with pytest.raises(ToolError):  # a ring loaded once at start refuses it
            CursorCodec(b"", keys=started_with).decode(token, "search_lessons", "fp")
        clock[0] += 5.0
        assert CursorCodec(b"", keys=ring).decode(token, "search_lessons", "fp") == {"o": 5}
        assert len(loads) == 1 and max(ring.keys()) == kid  # the ring now signs with the newest key
        forged = CursorCodec(b"", keys={kid + 100: b"f" * 32}).encode("search_lessons", "fp", {"o": 0})
        for _ in range(3):
            with pytest.raises(ToolError):
                CursorCodec(b"", keys=ring).decode(forged, "search_lessons", "fp")
        assert len(loads) == 1  # the reload a moment ago covers these
        clock[0] += 5.0
        for _ in range(3):
            with pytest.raises(ToolError):
                CursorCodec(b"", keys=ring).decode(forged, "search_lessons", "fp")
        assert len(loads) == 2  # one store read per interval, however many forged ids arrive
        clock[0] += 300.0
        ring.keys()
        assert len(loads) == 3  # and a reload on age, so rotated keys start signing everywhere
    finally:
        other.close()


def test_dirty_queue_hands_ids_to_the_leader_once(store):
    gen = _gen()
    store.register(gen, DIMS)
    store.queue_dirty(gen, ["L-1", "L-2", "L-1"])
    store.queue_dirty(gen, ["L-2", "L-3"])
    assert sorted(store.take_dirty(gen)) == ["L-1", "L-2", "L-3"]
    assert store.take_dirty(gen) == []


def test_both_backends_implement_the_one_index_interface(store):
    from gateway.retrieval.index.backend import SemanticIndex

    gen = _gen()
    store.register(gen, DIMS)
    assert isinstance(IndexSnapshot.empty(gen, DIMS), SemanticIndex)
    assert isinstance(PgSnapshot.load(store, gen, DIMS, LeaseHandle("x")), SemanticIndex)


def test_scores_top_and_compaction_match_the_in_process_index(store):
    gen = _gen()
    store.register(gen, DIMS)
    entries = _entries(50, seed=5)
    view = PgSnapshot.load(store, gen, DIMS, _leader(store, gen)).apply(entries[:30])
    view = view.apply(entries[30:], ["L-0001"])
    local = IndexSnapshot.from_entries(gen, DIMS, entries).apply((), ["L-0001"])
    q = entries[9].vectors["mechanism"]
    got = view.top(view.scores("mechanism", q), 5, exclude=("L-0009",))
    want = local.top(local.scores("mechanism", q), 5, exclude=("L-0009",))
    assert [h.lesson_id for h in got][:3] == [h.lesson_id for h in want][:3]
    merged = view.compacted()
    assert merged.ids == view.ids or sorted(merged.ids) == sorted(view.ids)
    assert merged.seq == view.seq and merged.search("mechanism", q, 5) == view.search("mechanism", q, 5)


def test_both_vector_layouts_serve_alike_and_layout_2_keeps_1024_dim_vectors_out_of_toast(pg_cluster):
    """A layout-1 generation (vectors as columns) registered before the layout column existed still
    writes, deletes, searches and retires after an upgrade; a new layout-2 generation (one table per
    facet, PLAIN storage) answers the same and stores no vector in TOAST."""
    dsn = pg_cluster.create_database(f"layouts_{secrets.token_hex(3)}")
    dims = 1024
    entries = random_entries(12, seed=9, dims=dims)
    old = PgStore(dsn)
    try:
        old.register("gen-old", dims, layout=1)
        lease = _leader(old, "gen-old")
        old.write("gen-old", lease.holder, lease.token, entries)
        with psycopg.connect(dsn, autocommit=True) as conn:  # the registry as the first layout wrote it
            conn.execute("ALTER TABLE s3rm_generation DROP COLUMN layout")
    finally:
        old.close()
    store = PgStore(dsn)
    try:
        assert store.generation("gen-old").layout == 1
        store.register("gen-new", dims)
        new = store.generation("gen-new")
        assert new.layout == 2 and len(new.relations()) == 1 + len(INDEX_FACETS)  # the table + one per vector
        leases = {"gen-old": lease, "gen-new": _leader(store, "gen-new")}
        for gen, lease in leases.items():
            store.write(gen, lease.holder, lease.token, entries)
            store.write(gen, lease.holder, lease.token, entries[:2], ["L-0003"])
        q = entries[3].vectors["approach"]
        hits = {g: store.search(g, "approach", q, 5) for g in ("gen-old", "gen-new")}
        assert [i for i, _ in hits["gen-old"]] == [i for i, _ in hits["gen-new"]]
        assert "L-0003" not in [i for i, _ in hits["gen-new"]]
        assert store.search("gen-new", "approach", entries[4].vectors["approach"], 1)[0][0] == "L-0004"
        got = store.vectors("gen-new", ("whole", "mechanism"), ["L-0004", "L-0003"])
        assert set(got) == {"L-0004"}
        assert np.allclose(got["L-0004"]["mechanism"], entries[4].vectors["mechanism"], atol=1e-3)
        assert store.vectors("gen-old", ("whole",), ["L-0004"]).keys() == {"L-0004"}
        with psycopg.connect(dsn) as conn:
            def toast_bytes(rel: str) -> int:
                return conn.execute("SELECT coalesce(pg_relation_size(reltoastrelid), 0) FROM pg_class "
                                    "WHERE oid = %s::regclass", (rel,)).fetchone()[0]
            assert toast_bytes(store.generation("gen-old").table) > 0  # 4 × 2 KiB rows are detoasted
            assert all(toast_bytes(new.vector_table(f)) == 0 for f in ("situation", "whole"))
            storage = conn.execute("SELECT attstorage FROM pg_attribute WHERE attrelid = %s::regclass "
                                   "AND attname = 'whole'", (new.vector_table("whole"),)).fetchone()[0]
            assert storage == "p"
        store.build_hnsw("gen-new", facets=("whole",), maintenance_work_mem="64MB", parallel_workers=0)
        assert store.search("gen-new", "whole", entries[5].vectors["whole"], 1, approximate=True)[0][0] == "L-0005"
        assert store.table_bytes("gen-new") > 12 * 4 * 2 * dims
        for gen in ("gen-old", "gen-new"):
            store.retire(gen)
        with psycopg.connect(dsn) as conn:
            left = conn.execute(r"SELECT count(*) FROM pg_tables WHERE tablename LIKE 's3rm\_g\_%'").fetchone()[0]
        assert left == 0
    finally:
        store.close()


def test_a_layout_2_generation_built_before_the_fifth_vector_is_measured_and_retired(store):
    """A generation registered by rrf_v9 code has four vector tables (no ``whole_passage``, which the
    fifth facet of INDEX_FACETS names): its disk size is still measured and it still retires."""
    gen = _gen("gen-v9-")
    info = store.register(gen, DIMS, layout=2)
    with store.pool.connection() as conn:
        conn.execute(f"DROP TABLE {info.vector_table('whole_passage')}")  # what an rrf_v9 build left
    assert store.table_bytes(gen) > 0
    store.retire(gen)
    assert store.generation(gen).state == "retired"


def test_a_prepared_view_without_korean_lessons_serves_a_korean_query_without_reading_the_store(store, monkeypatch):
    """docs/hybrid-search.md#pgvector-backend: the refresher's ``prepare`` hook reads each ranked facet's vectors
    into a new view before it serves, so no Korean query reads the store's whole facet — also when the view
    holds no (eligible) Korean Lesson, where there is no ``N_k`` or centroid to compute but the standardised
    channels still score every row (``PgSnapshot.scores``)."""
    from gateway.config.profiles import RANKED_FACETS
    from gateway.retrieval.hybrid.channels import decide_language, prepare_snapshot, semantic_votes
    from gateway.retrieval.hybrid.fusion import RankingConfig

    gen = _gen()
    store.register(gen, DIMS)
    english = [e for e in _entries(24, seed=13) if "dns" in e.terms]
    view = PgSnapshot.load(store, gen, DIMS, _leader(store, gen)).apply(english)
    assert not view.hangul_rows().any()
    ranking = RankingConfig()
    prepare_snapshot(ranking)(view)                          # what the refresher does before the view serves
    reads: list[tuple] = []
    real = PgStore.vectors
    monkeypatch.setattr(PgStore, "vectors", lambda self, *a, **kw: reads.append(a[1]) or real(self, *a, **kw))
    query = english[3].vectors
    cfg, plan = decide_language(view, "디엔에스 장애 복구", query, [], None, ranking)
    assert plan.korean_query
    for facet in RANKED_FACETS:
        semantic_votes(view, facet, query[facet], 10, None, None, plan, cfg.semantic_quality_floor)
    assert reads == []

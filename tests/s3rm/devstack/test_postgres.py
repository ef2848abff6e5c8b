"""The project's own PostgreSQL + pgvector cluster (s3rm/devstack/postgres.py) really runs pgvector."""
from __future__ import annotations

import psycopg


def test_session_cluster_has_pgvector_with_halfvec_and_hnsw(pg_cluster):
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as conn:
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
        assert tuple(int(p) for p in version.split(".")[:2]) >= (0, 7)  # halfvec needs 0.7
        conn.execute("CREATE TEMP TABLE probe (id int, v halfvec(3))")
        conn.execute("INSERT INTO probe VALUES (1, '[1,0,0]'), (2, '[0,1,0]'), (3, '[0.6,0.8,0]')")
        conn.execute("CREATE INDEX ON probe USING hnsw (v halfvec_ip_ops)")
        rows = conn.execute("SELECT id FROM probe ORDER BY v <#> '[0,1,0]' LIMIT 2").fetchall()
    assert [r[0] for r in rows] == [2, 3]
    assert pg_cluster.running()
    assert not pg_cluster.init()  # already initialised: a second init is a no-op

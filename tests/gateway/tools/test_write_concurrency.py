"""Writes to different Lessons run side by side, on the REAL dev wiki through gunicorn (docs/operations.md#admission).

16 agents create 16 different Lessons at the same moment through one
gateway started exactly as ``s3rm serve`` runs it, with the default thread
count and admission limits: every create succeeds (``created``), none is
answered 429 or 503, and each Lesson holds exactly one revision. A burst
waits in the bounded write queue instead of being refused; the SQLite dev
wiki's single writer is absorbed by the wiki client's retries of its lock
errors (``gateway/wiki/client.py``), not by a global gate.
"""
from __future__ import annotations

import hashlib
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from support.lessons import agent_client
from support.services import Gateway, call_tool, tool_payload

from gateway.config import GatewayConfig

pytestmark = [pytest.mark.wiki, pytest.mark.timeout(300)]

TOKEN = "concurrency-test-write-token-0123456789"
AGENTS = 16


def create_args(lesson_id: str, operation_id: str) -> dict:
    """A valid create_lesson_draft call for ``lesson_id``."""
    return {
        "operation_id": operation_id, "lesson_id": lesson_id, "title": f"Concurrent create {lesson_id}",
        "question": "Do creates of different Lessons wait for each other?", "attempt": "16 agents at once.",
        "context": "Write concurrency test.", "observation": "Each agent sent one create.",
        "interpretation": "Admission queues a burst.", "reusable_lesson": "Queue, do not refuse, a burst.",
        "applicability": "Any write burst.", "confidence": "low", "evidence": "This test.",
        "initial_evidence": {"citation": "tests/gateway/tools/test_write_concurrency.py", "kind": "code",
                             "verification_basis": "full_text"},
    }


def gateway_env(wiki) -> dict[str, str]:
    """The wiki's agent credentials, a write token and revision keys (defaults for everything else)."""
    env = dict(wiki.env())
    env.update({"S3RM_CURSOR_SECRET": "concurrency-tests-cursor-secret-0123",
                "S3RM_MCP_WRITE_TOKEN_SHA256": hashlib.sha256(TOKEN.encode()).hexdigest(),
                "S3RM_REVISION_HMAC_KEYS": '{"k1": "concurrency-tests-hmac-key-0123456789"}',
                "S3RM_REVISION_HMAC_ACTIVE_KEY_ID": "k1"})
    return env


def test_sixteen_concurrent_creates_all_succeed(dev_wiki):
    suffix = uuid.uuid4().hex[:8]
    ids = [f"conc-{suffix}-{i:02d}" for i in range(AGENTS)]
    headers = {"Authorization": f"Bearer {TOKEN}"}
    start = threading.Barrier(AGENTS)

    def one(lesson_id: str):
        start.wait(30)
        return call_tool(gw.url, "create_lesson_draft", create_args(lesson_id, f"op-{lesson_id}"),
                         headers=headers, timeout=120)

    with Gateway(gateway_env(dev_wiki), threads=GatewayConfig.gunicorn_threads) as gw:
        assert call_tool(gw.url, "get_lesson", {"id": "no-such-lesson"}).status_code == 200  # warm: logged in
        with ThreadPoolExecutor(AGENTS) as pool:
            responses = list(pool.map(one, ids))
    statuses = [r.status_code for r in responses]
    assert statuses == [200] * AGENTS, statuses
    payloads = [tool_payload(r) for r in responses]
    assert [p.get("status") for p in payloads] == ["created"] * AGENTS, payloads
    client = agent_client(dev_wiki)
    for lesson_id in ids:
        data = client.get({"action": "query", "prop": "revisions", "titles": f"Lesson:{lesson_id}",
                           "rvprop": "ids", "rvlimit": 5})
        assert len(data["query"]["pages"][0].get("revisions", [])) == 1, lesson_id

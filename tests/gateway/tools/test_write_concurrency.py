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

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from support.lessons import agent_client
from support.services import Gateway, call_tool, tool_payload
from support.write_harness import BURST_TOKEN, burst_create_args, token_gateway_env

from gateway.config import GatewayConfig

pytestmark = [pytest.mark.wiki, pytest.mark.timeout(300)]

AGENTS = 16


def test_sixteen_concurrent_creates_all_succeed(dev_wiki):
    suffix = uuid.uuid4().hex[:8]
    ids = [f"conc-{suffix}-{i:02d}" for i in range(AGENTS)]
    headers = {"Authorization": f"Bearer {BURST_TOKEN}"}
    start = threading.Barrier(AGENTS)

    def one(lesson_id: str):
        start.wait(30)
        return call_tool(gw.url, "create_lesson_draft", burst_create_args(lesson_id, f"op-{lesson_id}"),
                         headers=headers, timeout=120)

    with Gateway(token_gateway_env(dev_wiki), threads=GatewayConfig.gunicorn_threads) as gw:
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

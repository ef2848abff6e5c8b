"""Calling the write tools the way the server does, against the REAL dev wiki.

``WriteHarness(dev_wiki)`` builds a fresh gateway configuration, a
``MediaWikiRepository`` logged in as the wiki's ``agent`` bot password and a
real :class:`Dispatcher` over the generated ``schema/tools`` (input
validation, handler, output-schema validation, byte cap). A second harness is
a restarted gateway: new client, new session, no shared state except the
process-wide page locks of ``gateway/wiki/edit.py``.

``call`` returns ``structuredContent`` or ``{"error": {...}}`` (and asserts the
call was never an internal error). Helpers create Lessons with unique ids and
read pages back (wikitext, revision history).
"""
from __future__ import annotations

from support.schema_dirs import SCHEMA

import hashlib
import itertools
import json
import secrets
from types import MappingProxyType
from typing import Any

from gateway.config import DEFAULT_SCHEMA_DIR, GatewayConfig
from gateway.tools.dispatcher import Dispatcher
from gateway.tools.registry import ToolRegistry
from gateway.ops.access import Credentials
from gateway.wiki.client import WikiClient
from gateway.wiki.repository import MediaWikiRepository

KEYS = {"k1": "write-tests-key-one-0123456789", "k0": "write-tests-old-key-0123456789"}
_counter = itertools.count()


def unique(prefix: str = "t") -> str:
    """A fresh id fragment (safe for Lesson ids and operation_ids)."""
    return f"{prefix}-{secrets.token_hex(4)}-{next(_counter)}"


def lesson_fields(**overrides: Any) -> dict[str, Any]:
    """Valid core fields of a create_lesson_draft call."""
    base = {
        "title": "GPU allocator fragmentation under long runs",
        "question": "Why did long training runs run out of GPU memory?",
        "attempt": "Compared the caching allocator with expandable segments.",
        "context": "A100 80GB, PyTorch 2.3, 7B model, batch 16",
        "observation": "Peak reserved memory grew 30% over 10k steps.",
        "interpretation": "Fragmentation of cached blocks, not a leak.",
        "reusable_lesson": "Enable expandable segments before hunting leaks.",
        "applicability": "Long runs with variable sequence lengths.",
        "confidence": "medium",
        "evidence": "Allocator traces of run 31.",
    }
    base.update(overrides)
    return base


def evidence_args(**overrides: Any) -> dict[str, Any]:
    """A valid new evidence (initial_evidence or attach_evidence fields); an override of None drops the key."""
    base = {"citation": "git lab/probes@4f19a2e results/run-031/summary.json", "url": "https://example.org/run-031",
            "kind": "log", "verification_basis": "full_text", "note": "lines 1-40"}
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}


def claim_args(**overrides: Any) -> dict[str, Any]:
    """A valid verification body (without ids, digests and expected revision)."""
    base = {"verification_basis": "full_text", "source_identity": "run-031 summary.json@4f19a2e",
            "source_sha256": "a" * 64, "source_locator": "lines 1-40", "coverage": "whole file",
            "outcome": "supports", "claim_fields": ["observation", "interpretation", "reusable_lesson"]}
    base.update(overrides)
    return base


class WriteHarness:
    """A gateway dispatcher with a fresh MediaWikiRepository on ``wiki`` (see module doc)."""

    def __init__(self, wiki, *, keys: dict[str, str] | None = KEYS, active: str = "k1", retrieval: Any = None,
                 clock=None):
        keys = dict(keys or {})
        self.wiki = wiki
        self.config = GatewayConfig(
            write_auth_mode="open", wiki_api_url=wiki.api_url, wiki_username=wiki.agent.username,
            wiki_password=wiki.agent.password, revision_hmac_keys=MappingProxyType(keys),
            revision_hmac_active_key_id=active if keys else "", schema_dir=DEFAULT_SCHEMA_DIR,
            cursor_secret=b"write-tests-cursor-secret-0123456789", cursor_secret_ephemeral=False)
        self.repo = MediaWikiRepository.from_config(self.config)
        extra = {"clock": clock} if clock is not None else {}
        self.dispatcher = Dispatcher(ToolRegistry.load(self.config.schema), config=self.config, repository=self.repo,
                                     retrieval=retrieval, **extra)

    # ---------------------------------------------------------------- calls
    def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """``structuredContent`` of a successful call, else ``{"error": {...}}``."""
        result = self.dispatcher.call({"name": tool, "arguments": arguments}, request_id=1, credentials=Credentials())
        payload = json.loads(result.content[0].text)
        if result.is_error:
            assert payload["error"]["code"] != "internal_error", payload
            return payload
        assert payload == result.structured_content
        return payload

    def ok(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """A call that must succeed."""
        out = self.call(tool, **arguments)
        assert "error" not in out, out
        return out

    def error(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """The error object of a call that must fail."""
        out = self.call(tool, **arguments)
        assert "error" in out, out
        return out["error"]

    # ---------------------------------------------------------------- fixtures
    def create(self, *, confidence: str = "medium", verification: bool = False, **overrides: Any) -> dict[str, Any]:
        """Create a fresh Lesson; returns the create response."""
        args = lesson_fields(confidence=confidence, **overrides.pop("fields", {}))
        args.update(operation_id=unique("op-create"), lesson_id=overrides.pop("lesson_id", unique("lesson")),
                    initial_evidence=evidence_args())
        if verification:
            args["initial_verification"] = claim_args()
        args.update(overrides)
        return self.ok("create_lesson_draft", **args)

    def attach(self, lesson_id: str, **overrides: Any) -> dict[str, Any]:
        """Attach a fresh evidence; returns the response."""
        return self.ok("attach_evidence", operation_id=unique("op-ev"), lesson_id=lesson_id,
                       **evidence_args(**overrides))

    def verify(self, lesson_id: str, evidence_id: str, **overrides: Any) -> dict[str, Any]:
        """Record a supporting full_text verification of ``evidence_id`` at the current revision."""
        snap = self.repo.get_snapshot(lesson_id)
        from gateway.domain.digests import evidence_digest
        digest = evidence_digest(snap.page.evidence_by_id(evidence_id), SCHEMA)
        return self.ok("record_evidence_verification", operation_id=unique("op-vr"), lesson_id=lesson_id,
                       evidence_id=evidence_id, expected_revision_id=snap.revision_id,
                       expected_evidence_digest=digest, **claim_args(**overrides))

    # ---------------------------------------------------------------- reads
    def wikitext(self, lesson_id: str) -> str | None:
        """Latest raw wikitext of the Lesson (None when absent)."""
        snap = self.repo.get_snapshot(lesson_id)
        return snap.wikitext if snap is not None else None

    def latest(self, lesson_id: str) -> int | None:
        """Latest revision id (None when absent)."""
        snap = self.repo.get_snapshot(lesson_id)
        return snap.revision_id if snap is not None else None

    def history(self, lesson_id: str):
        """All RevisionInfo of the Lesson, newest first."""
        return self.repo.list_revisions(lesson_id, None, 500).revisions

    def raw_client(self, account: str = "agent") -> WikiClient:
        """A WikiClient logged in as one of the wiki's bot passwords (``agent``, ``importer``, ``sync``)."""
        cred = getattr(self.wiki, account)
        return WikiClient(self.wiki.api_url, cred.username, cred.password)

    def raw_edit(self, lesson_id: str, text: str, summary: str, *, base: int | None, account: str = "agent",
                 client: WikiClient | None = None) -> dict[str, Any]:
        """A direct ``action=edit`` (like a browser save), bypassing the gateway."""
        client = client or self.raw_client(account)
        params = {"action": "edit", "title": f"Lesson:{lesson_id}", "text": text, "summary": summary}
        if base is None:
            params["createonly"] = True
        else:
            params.update(baserevid=base, nocreate=True)
        return client.post(params, token="csrf")["edit"]


# ------------------------------------------------------------- bursts over HTTP
#: The write token of :func:`token_gateway_env` (tests and bench/ bursts through gunicorn).
BURST_TOKEN = "concurrency-test-write-token-0123456789"


def burst_create_args(lesson_id: str, operation_id: str) -> dict[str, Any]:
    """A valid create_lesson_draft call for ``lesson_id`` (the same text for every burst member)."""
    return {
        "operation_id": operation_id, "lesson_id": lesson_id, "title": f"Concurrent create {lesson_id}",
        "question": "Do creates of different Lessons wait for each other?", "attempt": "16 agents at once.",
        "context": "Write concurrency test.", "observation": "Each agent sent one create.",
        "interpretation": "Admission queues a burst.", "reusable_lesson": "Queue, do not refuse, a burst.",
        "applicability": "Any write burst.", "confidence": "low", "evidence": "This test.",
        "initial_evidence": {"citation": "tests/gateway/tools/test_write_concurrency.py", "kind": "code",
                             "verification_basis": "full_text"},
    }


def token_gateway_env(wiki) -> dict[str, str]:
    """Gateway environment for ``wiki``: its agent credentials, :data:`BURST_TOKEN` and revision keys."""
    env = dict(wiki.env())
    env.update({"S3RM_CURSOR_SECRET": "concurrency-tests-cursor-secret-0123",
                "S3RM_MCP_WRITE_TOKEN_SHA256": hashlib.sha256(BURST_TOKEN.encode()).hexdigest(),
                "S3RM_REVISION_HMAC_KEYS": '{"k1": "concurrency-tests-hmac-key-0123456789"}',
                "S3RM_REVISION_HMAC_ACTIVE_KEY_ID": "k1"})
    return env

"""Sample Lesson pages for the read-path tests (repository, tools, cursors).

``lesson(id, **fields)`` builds a complete :class:`LessonPage` (every schema
field filled); ``evidence(...)``, ``verification(...)`` and ``relation(...)``
build records. ``write_pages(wiki, pages)`` saves pages on the real dev wiki
with the fixture's ``agent`` account through :class:`WikiClient` and
``serialize_page`` — the same bytes the gateway would write.
"""
from __future__ import annotations

from support.schema_dirs import SCHEMA

from typing import Iterable

from gateway.domain.codec import serialize_page
from gateway.domain.model import LessonPage
from gateway.wiki.client import WikiClient

TS = "2026-01-02T03:04:05Z"

#: Minimal ``Template:Lesson relation`` with the ``[[Lesson:<to>]]`` link the real
#: generated template also renders (used only when the wiki has no template yet).
RELATION_TEMPLATE = "<includeonly>{{{from|}}} → {{{relation|}}} → [[Lesson:{{{to|}}}|{{{to|}}}]]</includeonly>"


def lesson(lesson_id: str, *, evidence_items: Iterable[dict] = (), verifications: Iterable[dict] = (),
           relations: Iterable[dict] = (), **fields: str) -> LessonPage:
    """A complete Lesson page; ``fields`` override the defaults."""
    values = {
        "title": f"Lesson {lesson_id}",
        "question": "What happened?",
        "attempt": "We tried something.",
        "context": "Test context.",
        "observation": "Something was observed.",
        "interpretation": "Because of a reason.",
        "reusable_lesson": "Remember the reason.",
        "applicability": "When it applies.",
        "confidence": "medium",
        "evidence": "See the evidence.",
        "record_origin": "lab",
        "author": "S3Agent",
        "reviewer": "",
        "review_state": "Draft",
        "created_at": TS,
        "updated_at": TS,
    }
    values.update(fields)
    return LessonPage(fields=values, evidence=tuple(evidence_items), verifications=tuple(verifications),
                      relations=tuple(relations))


def evidence(evidence_id: str, citation: str = "Paper 2024, section 3", **fields: str) -> dict:
    """One evidence record."""
    values = {"id": evidence_id, "citation": citation, "url": "", "kind": "paper",
              "verification_basis": "full_text", "note": "", "added_by": "S3Agent", "added_at": TS}
    values.update(fields)
    return values


def verification(verification_id: str, evidence_id: str, outcome: str = "supports", verified_at: str = TS,
                 **fields: str) -> dict:
    """One verification record (digest left as a placeholder unless given)."""
    values = {"id": verification_id, "evidence_id": evidence_id, "evidence_digest": "sha256:" + "0" * 64,
              "verification_basis": "full_text", "source_identity": "doi:10/x", "source_sha256": "a" * 64,
              "source_locator": "p. 3", "coverage": "all", "outcome": outcome,
              "claim_fields": "observation", "verified_by": "S3Agent", "verified_at": verified_at}
    values.update(fields)
    return values


def relation(source: str, kind: str, target: str, note: str = "") -> dict:
    """One relation record stored on ``source``."""
    return {"from": source, "relation": kind, "to": target, "note": note, "created_by": "S3Agent",
            "created_at": TS}


def agent_client(wiki) -> WikiClient:
    """A WikiClient logged in as the fixture's agent bot password."""
    return WikiClient(wiki.api_url, wiki.agent.username, wiki.agent.password)


def ensure_relation_template(client: WikiClient) -> None:
    """Create ``Template:Lesson relation`` when the wiki has none (real template pushed by sync wins)."""
    data = client.get({"action": "query", "prop": "info", "titles": "Template:Lesson relation"})
    if data["query"]["pages"][0].get("missing"):
        client.post({"action": "edit", "title": "Template:Lesson relation", "text": RELATION_TEMPLATE,
                     "summary": "test template", "createonly": True})


def write_pages(client: WikiClient, pages: dict[str, LessonPage]) -> dict[str, int]:
    """Save each ``Lesson:<id>`` (create or overwrite); returns id → new revision id."""
    out = {}
    for lesson_id, page in pages.items():
        data = client.post({"action": "edit", "title": f"Lesson:{lesson_id}", "text": serialize_page(page, SCHEMA),
                            "summary": "read-path test data"})
        edit = data["edit"]
        out[lesson_id] = int(edit.get("newrevid") or edit.get("oldrevid") or 0)
    return out

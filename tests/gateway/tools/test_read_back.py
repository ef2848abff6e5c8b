"""What a write tool accepts, get_lesson returns whole (docs/read-path.md#read-back), on the REAL dev wiki.

Property: for every write tool and every free-text string its published
input schema accepts (walked from ``schema/tools/*.input.schema.json``, so a new
field is covered without editing this file), a value at the schema's
``maxLength`` in ASCII, in Hangul (3 UTF-8 bytes a character), in 4-byte emoji
and in the character that costs most on the wire (a control character,
13 bytes in the doubled JSON) is saved, and ``get_lesson`` (``fields: [<field>]``
for a Lesson field, ``citation_detail: full`` and limit-1 sub-list pages for
records) returns it byte-identical with nothing listed in ``truncated``; and
the Lesson still reads with the default arguments.

The full grid (tool × field × alphabet) runs as parametrised cases; a
hypothesis test adds mixed-alphabet values at random lengths up to the limit.
``value_too_large_to_read`` stays for pages already holding values beyond the
schema (a browser edit): checked on its own.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.config import DEFAULT_SCHEMA_DIR
from gateway.domain.digests import evidence_digest
from gateway.tools.readability import whole_read_bytes
from support.schema_dirs import SCHEMA
from support.write_harness import WriteHarness, claim_args, evidence_args, lesson_fields, unique

pytestmark = pytest.mark.wiki

ALPHABETS = {"ascii": "a", "hangul": "한", "emoji": "😀", "control": "\x01"}
WRITE_TOOLS = ("create_lesson_draft", "attach_evidence", "record_evidence_verification", "link_lessons",
               "revise_lesson")


def _resolved(doc: dict, node: dict) -> dict:
    """``node`` with a ``#/$defs/…`` reference of ``doc`` followed (shared blocks, docs/tools.md#tool-list)."""
    while "$ref" in node:
        node = {**doc["$defs"][node["$ref"].removeprefix("#/$defs/")], **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _string_fields(tool: str) -> list[tuple[str, int]]:
    """(dotted path, maxLength) of every stored free-text string of ``tool``'s input schema."""
    schema = json.loads((DEFAULT_SCHEMA_DIR / "tools" / f"{tool}.input.schema.json").read_text())
    out: list[tuple[str, int]] = []

    def walk(node: dict, path: list[str]) -> None:
        node = _resolved(schema, node)
        free_text = "pattern" not in node or node.get("format") == "uri"  # a URL is free text after its scheme
        if (node.get("type") == "string" and "maxLength" in node and "enum" not in node and free_text
                and path[-1:] != ["reason"]):  # reason only shapes the edit summary
            out.append((".".join(path), node["maxLength"]))
        for key, child in (node.get("properties") or {}).items():
            walk(child, path + [key])

    walk(schema, [])
    return out


CASES = [(tool, path, limit) for tool in WRITE_TOOLS for path, limit in _string_fields(tool)]


def test_the_documented_read_ceiling_is_the_computed_one():
    """docs/read-path.md#read-back states the ceiling in bytes: it must be what the gateway computes."""
    doc = (Path(__file__).parents[3] / "docs" / "read-path.md").read_text()
    assert f"{whole_read_bytes(SCHEMA):,} bytes for the shipped schema" in doc


def test_every_write_tool_has_cases():
    assert {tool for tool, _, _ in CASES} == set(WRITE_TOOLS)


@pytest.fixture(scope="module")
def h(dev_wiki):
    return WriteHarness(dev_wiki)


@pytest.fixture(scope="module")
def base(h):
    """A Lesson with one evidence that appends and revisions go to, and a link target."""
    created = h.create()
    target = h.create()
    return {"id": created["id"], "target": target["id"]}


def _fresh(h, confidence: str = "medium") -> str:
    return h.create(confidence=confidence)["id"]


def _write(h, tool: str, path: str, value: str) -> tuple[str, dict, int | None]:
    """Send ``tool`` with ``value`` at ``path``; returns (lesson id, response, revision before)."""
    if tool == "create_lesson_draft":
        lesson_id = unique("rb")
        args = lesson_fields()
        args.update(operation_id=unique("op"), lesson_id=lesson_id, initial_evidence=evidence_args(),
                    initial_verification=claim_args())
        head, _, leaf = path.partition(".")
        if leaf:
            args[head] = dict(args[head], **{leaf: value})
        else:
            args[head] = value
        return lesson_id, h.call(tool, **args), None
    # a low-confidence Lesson: a revision of any claim field needs no fresh verification
    lesson_id = _fresh(h, "low" if tool == "revise_lesson" else "medium")
    before = h.latest(lesson_id)
    if tool == "attach_evidence":
        out = h.call(tool, operation_id=unique("op"), lesson_id=lesson_id, **evidence_args(**{path: value}))
    elif tool == "record_evidence_verification":
        snap = h.repo.get_snapshot(lesson_id)
        ev = snap.page.evidence[0]
        out = h.call(tool, operation_id=unique("op"), lesson_id=lesson_id, evidence_id=ev["id"],
                     expected_revision_id=snap.revision_id, expected_evidence_digest=evidence_digest(ev, SCHEMA),
                     **claim_args(**{path: value}))
    elif tool == "link_lessons":
        target = _fresh(h)
        out = h.call(tool, operation_id=unique("op"), **{"from": lesson_id, "to": target, "relation": "supports",
                                                         "note": value})
    else:  # revise_lesson
        snap = h.repo.get_snapshot(lesson_id)
        field = path.split(".", 1)[1]
        out = h.call(tool, operation_id=unique("op"), lesson_id=lesson_id, expected_revision_id=snap.revision_id,
                     basis_evidence_ids=[snap.page.evidence[0]["id"]], changes={field: value},
                     reason="read-back property test")
    return lesson_id, out, before


def _read_back(h, tool: str, path: str, lesson_id: str) -> list[str]:
    """The stored values at ``path`` as get_lesson returns them (asserting nothing was shortened):
    the Lesson field, or that key of every record of the list the write appended to."""
    leaf = path.split(".")[-1]
    if tool in ("create_lesson_draft", "revise_lesson") and (tool == "revise_lesson" or "." not in path):
        got = h.ok("get_lesson", id=lesson_id, fields=[leaf], citations_limit=1, verifications_limit=1,
                   relations_limit=1)
        assert "truncated" not in got, got.get("truncated")
        return [got["lesson"][leaf]]
    if path.startswith("initial_evidence") or tool == "attach_evidence":
        name, key = "citations", leaf
    elif path.startswith("initial_verification") or tool == "record_evidence_verification":
        name, key = "verifications", leaf
    else:
        name, key = "relations", "note"
    cursor, seen = None, []
    for _ in range(20):
        args = {"id": lesson_id, "fields": ["title"], "citation_detail": "full", f"{name}_limit": 1}
        if cursor:
            args[f"{name}_cursor"] = cursor
        page = h.ok("get_lesson", **args)
        assert "truncated" not in page
        seen += page[name]["items"]
        cursor = page[name]["next_cursor"]
        if not cursor:
            break
    return [item.get(key, "") for item in seen if item.get("direction", "outgoing") == "outgoing"]


def _check(h, tool: str, path: str, value: str) -> None:
    lesson_id, out, _ = _write(h, tool, path, value)
    assert "error" not in out, out["error"]
    assert value in _read_back(h, tool, path, lesson_id), "not read back byte-identical"
    # and the whole Lesson still reads (default fields, default limits): nothing became unreadable
    assert "error" not in h.call("get_lesson", id=lesson_id)


URL_PREFIX = "https://example.org/"


def _max_value(path: str, limit: int, char: str) -> str:
    """A value of exactly ``limit`` characters: ``char`` repeated (after the scheme and host for a URL)."""
    if path.split(".")[-1] == "url":
        return URL_PREFIX + char * (limit - len(URL_PREFIX))
    return char * limit


#: every case × alphabet; a URL takes no control character (docs/data-contract.md: no whitespace or controls)
GRID = [(tool, path, limit, name) for tool, path, limit in CASES for name in sorted(ALPHABETS)
        if not (path.split(".")[-1] == "url" and name == "control")]


@pytest.mark.parametrize("tool, path, limit, alphabet", GRID, ids=[f"{t}:{p}-{a}" for t, p, _, a in GRID])
def test_value_at_max_length_reads_back(h, tool, path, limit, alphabet):
    _check(h, tool, path, _max_value(path, limit, ALPHABETS[alphabet]))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(case=st.sampled_from(CASES), data=st.data())
def test_mixed_values_read_back(h, case, data):
    tool, path, limit = case
    length = data.draw(st.integers(min_value=1, max_value=limit), label="length")
    chars = data.draw(st.lists(st.sampled_from(sorted(ALPHABETS.values()) + ["z", "ä", "é", '"', "\\"]),
                               min_size=1, max_size=8), label="chars")
    prefix = ""
    if path.split(".")[-1] == "url":  # printable, no whitespace, after the scheme and host
        chars, prefix = [c for c in chars if c.isprintable()] or ["a"], URL_PREFIX
    body = max(1, length - len(prefix))
    _check(h, tool, path, prefix + "".join(chars[i % len(chars)] for i in range(body)))


def test_every_long_field_at_once_reads_back(h):
    """Every Lesson field at its maxLength in emoji, and a verification of 4,000 emoji: all read back whole."""
    schema = json.loads((DEFAULT_SCHEMA_DIR / "tools" / "create_lesson_draft.input.schema.json").read_text())
    props = {name: _resolved(schema, node) for name, node in schema["properties"].items()}
    longest = {name: "😀" * node["maxLength"] for name, node in props.items()
               if node.get("type") == "string" and "maxLength" in node and "enum" not in node
               and "pattern" not in node}
    lesson_id = unique("rb-all")
    claim = claim_args(source_identity="😀" * 1000, source_locator="😀" * 1000, coverage="😀" * 2000)
    h.ok("create_lesson_draft", operation_id=unique("op"), lesson_id=lesson_id, initial_evidence=evidence_args(),
         initial_verification=claim, **lesson_fields(**longest))
    for name, value in longest.items():
        got = h.ok("get_lesson", id=lesson_id, fields=[name])
        assert got["lesson"][name] == value and "truncated" not in got
    page = h.ok("get_lesson", id=lesson_id)  # all fields: shortened with markers, named in truncated
    assert page["truncated"] and set(page["truncated"]) <= set(longest)
    assert page["verifications"]["items"][0]["coverage"] == "😀" * 2000


def test_a_page_beyond_the_schema_refuses_the_next_write(h):
    """A browser save with a field far beyond maxLength: a later MCP append is refused, nothing saved."""
    created = h.create()
    lesson_id = created["id"]
    text = h.wikitext(lesson_id)
    huge = "x" * 500_000
    head, sep, tail = text.partition("|observation=")
    assert sep, text[:300]
    rest = tail.split("\n", 1)[1] if "\n" in tail else ""
    h.raw_edit(lesson_id, head + sep + huge + "\n" + rest, "browser edit beyond the schema",
               base=h.latest(lesson_id))
    before = h.latest(lesson_id)
    err = h.error("attach_evidence", operation_id=unique("op"), lesson_id=lesson_id, **evidence_args())
    assert err["code"] == "value_too_large_to_read" and err["details"]["largest"] == "field observation", err
    assert "nothing saved" in err["message"]
    assert h.latest(lesson_id) == before

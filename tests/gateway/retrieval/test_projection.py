"""ProjectionBuilder v2 (docs/retrieval.md#facets): three facets plus the whole-Lesson text."""
from __future__ import annotations

import dataclasses

import pytest
from gateway.config.profiles import INDEX_FACETS
from gateway.retrieval.indexing.projection import (
    ELISION,
    PROJECTION_VERSION,
    ProjectionBuilder,
    ProjectionError,
    normalize_query,
    normalize_text,
    sanitize_markup,
)
from support.schema_dirs import SCHEMA
from support.lessons import evidence, lesson

B = ProjectionBuilder(SCHEMA)


def test_facets_hold_fixed_fields_in_fixed_order_with_names():
    doc = B.build("x", lesson("x", question="Q?", context="C.", observation="O.", attempt="A.",
                               interpretation="I.", reusable_lesson="R.", applicability="P."))
    assert [f for f, _ in doc.facets] == list(INDEX_FACETS)
    assert doc.text("situation") == "question: Q?\ncontext: C.\nobservation: O."
    assert doc.text("approach") == "attempt: A."
    assert doc.text("mechanism") == "interpretation: I.\nreusable_lesson: R.\napplicability: P."
    title = doc.text("whole").split("\n", 1)[0]
    assert title.startswith("title: ")
    assert doc.text("whole") == "\n".join([title, doc.text("situation"), doc.text("approach"), doc.text("mechanism")])
    assert doc.projection_version == PROJECTION_VERSION == "s3rm-projection-v2"


def test_evidence_relations_and_people_are_never_embedded_and_the_title_only_in_whole():
    base = lesson("x")
    doc = B.build("x", base)
    changed = base.evolve(fields={**base.fields, "author": "Someone", "evidence": "E", "reviewer": "R"},
                          evidence=(evidence("e1"),), relations=({"from": "x", "relation": "supports", "to": "y"},))
    other = B.build("x", changed)
    assert other.retrieval_hash == doc.retrieval_hash
    assert other.metadata.metadata_hash != doc.metadata.metadata_hash  # author, evidence presence
    for _, text in other.facets:
        assert "Someone" not in text
    retitled = B.build("x", base.evolve(fields={**base.fields, "title": "Other title"}))
    assert retitled.retrieval_hash != doc.retrieval_hash
    assert [f for f, t in retitled.facets if "Other title" in t] == ["whole", "whole_passage"]
    assert retitled.text("whole_passage") == retitled.text("whole")


@pytest.mark.parametrize("field,value", [("confidence", "high"), ("record_origin", "imported"),
                                         ("review_state", "Reviewed"), ("updated_at", "2027-01-01T00:00:00Z")])
def test_metadata_only_changes_keep_the_retrieval_hash(field, value):
    page = lesson("x")
    doc = B.build("x", page)
    other = B.build("x", page.evolve(fields={**page.fields, field: value}))
    assert other.retrieval_hash == doc.retrieval_hash
    assert other.metadata.metadata_hash != doc.metadata.metadata_hash


def test_facet_text_change_changes_the_retrieval_hash_and_nothing_else_does():
    page = lesson("x")
    doc = B.build("x", page)
    assert B.build("x", page.evolve(fields={**page.fields, "attempt": "Something else"})).retrieval_hash \
        != doc.retrieval_hash
    assert B.build("x", page).retrieval_hash == doc.retrieval_hash  # deterministic
    assert doc.retrieval_hash.startswith("sha256:") and len(doc.retrieval_hash) == 71


def test_nfkc_whitespace_and_markup_rules():
    assert normalize_text("Ｆｕｌｌ\u3000width\n\n text") == "Full width text"
    assert sanitize_markup("see [[Lesson:abc|the other note]] and [[plain]]") == "see the other note and plain"
    assert sanitize_markup("[https://example.org/x label] [https://example.org/y]").split() == ["label"]
    assert normalize_text("'''bold''' ''it'' <b>tag</b> <!-- hidden -->") == "bold it tag"
    assert normalize_text("== Heading ==\n* item\n# step") == "Heading item step"
    assert normalize_text("{{#set:foo=bar}} ~~~~ __NOTOC__") == "#set:foo=bar"
    assert normalize_text("a &lt; b &amp; c") == "a < b & c"
    assert normalize_text("x < y > z") == "x < y > z"  # not a tag
    assert normalize_query("  ＥＲＲ_X\n  y ") == "ERR_X y"


def test_empty_fields_are_left_out():
    doc = B.build("x", lesson("x", context="", observation="  "))
    assert doc.text("situation") == "question: What happened?"
    empty = B.build("x", lesson("x", attempt=""))
    assert empty.text("approach") == ""


def test_long_facet_keeps_head_and_tail_and_records_the_cut():
    long = "head-marker " + "x" * 9000 + " tail-marker"
    doc = B.build("x", lesson("x", attempt=long))
    text = doc.text("approach")
    assert len(text) == B.facet_char_cap == 4000
    assert text.startswith("attempt: head-marker") and text.endswith("tail-marker")
    assert ELISION in text
    cut, whole = doc.truncation  # the whole-Lesson text holds the same field, so it is cut as well
    assert cut.facet == "approach" and cut.chars == len("attempt: " + long) and cut.kept_chars == 4000
    assert cut.dropped_chars == cut.chars - (4000 - len(ELISION))
    assert whole.facet == "whole" and len(doc.text("whole")) == 4000 and doc.text("whole").startswith("title: ")
    assert doc.truncated_mask == 0b1010
    assert B.build("x", lesson("x")).truncation == ()


def test_a_schema_with_another_facet_layout_needs_a_new_projection_version():
    schema = SCHEMA
    fields = tuple(dataclasses.replace(f, facet="approach") if f.name == "question" else f
                   for f in schema.lesson.fields)
    drifted = dataclasses.replace(schema, lesson=dataclasses.replace(schema.lesson, fields=fields))
    with pytest.raises(ProjectionError):
        ProjectionBuilder(drifted)


def test_identity_changes_with_the_cap():
    assert ProjectionBuilder(SCHEMA, facet_char_cap=2000).identity() != B.identity()

"""The Lesson id rule against MediaWiki's own title normalisation.

A Lesson id is a page title, ``Lesson:<id>``. MediaWiki turns ``_`` into a
space, trims and merges them (``MediaWikiTitleCodec::splitTitleString``), so an
id such as ``trailing_id_`` used to be accepted, stored as ``Lesson:trailing_id``
and then never found. The gateway's rule (``meta.id_pattern``,
``gateway/domain/ids.py::lesson_id_problem``) must accept exactly the ids
MediaWiki keeps as they are:

* ``test_the_id_rule_is_mediawikis`` — every id over ``a 0 _ -`` up to five
  characters (1,364 ids) plus generated longer ones over ``[a-z0-9_-]``: the
  rule accepts an id iff the real wiki's ``action=query&titles=Lesson:<id>``
  neither normalises it to another title nor calls it invalid;
* ``test_every_shipped_id_passes`` — the ids of ``data/`` all pass;
* ``test_tools_refuse_an_id_mediawiki_would_change`` — ``create_lesson_draft``
  and ``get_lesson`` refuse ``trailing_id_`` (and the others) with
  ``invalid_argument`` naming the underscore rule, and write nothing;
* ``test_the_site_script_uses_the_schema_pattern`` — the new-Lesson launcher
  checks the same pattern.
"""
from __future__ import annotations

import itertools
import json
import random
import re
from pathlib import Path

import pytest
from support.codec_cases import SCHEMA
from support.write_harness import WriteHarness, evidence_args, lesson_fields, unique

from gateway.domain.ids import lesson_id_problem
from s3rm.importing import synthetic_lessons
from s3rm.importing.cloud_incidents import read_records

REPO = Path(__file__).resolve().parents[3]
NS = SCHEMA.namespace
META = SCHEMA.meta
UNDERSCORE_IDS = ("trailing_id_", "_leading", "two__underscores", "trailing_id__", "_", "__")


def generated_ids() -> list[str]:
    short = ["".join(p) for n in range(1, 6) for p in itertools.product("a0_-", repeat=n)]
    rng = random.Random(42)
    alphabet = "abcxyz0189_-"
    longer = ["".join(rng.choice(alphabet) for _ in range(rng.randint(6, 40))) for _ in range(400)]
    return short + longer + ["a" * 120, "a_" * 60, "a" * 119 + "_"] + list(UNDERSCORE_IDS)


def mediawiki_keeps(site, ids: list[str]) -> dict[str, bool]:
    """id → True when MediaWiki stores ``Lesson:<id>`` under exactly that title (50 titles per request)."""
    out: dict[str, bool] = {}
    for start in range(0, len(ids), 50):
        batch = ids[start:start + 50]
        data = site.get("query", titles="|".join(f"{NS}:{i}" for i in batch), formatversion=2)["query"]
        renamed = {n["from"]: n["to"] for n in data.get("normalized", [])}
        invalid = {p["title"] for p in data.get("pages", []) if p.get("invalid")}
        for lesson_id in batch:
            given = f"{NS}:{lesson_id}"
            title = renamed.get(given, given)
            out[lesson_id] = given not in invalid and title.replace(" ", "_") == given
    return out


def test_the_id_rule_is_mediawikis(dev_wiki) -> None:
    ids = list(dict.fromkeys(generated_ids()))
    keeps = mediawiki_keeps(dev_wiki.site("agent", login=False), ids)
    assert sum(keeps.values()) > 300 and sum(not k for k in keeps.values()) > 300  # both kinds are exercised
    disagree = [i for i in ids if (lesson_id_problem(i, META) is None) != keeps[i]]
    assert disagree == [], disagree[:20]
    for lesson_id in UNDERSCORE_IDS:
        assert "'_'" in lesson_id_problem(lesson_id, META)


def test_every_shipped_id_passes() -> None:
    incidents, failures = read_records(REPO / "data" / "cloud-incidents" / "cloud_incidents.csv")
    assert not failures
    synthetic = []
    for path in sorted((REPO / "data").rglob("*.jsonl")):  # synthetic-ko and the noise corpus
        records, bad = synthetic_lessons.read_records(path)
        assert not bad, (path, bad[:3])
        synthetic.extend(records)
    ids = [r.lesson_id for r in (*incidents, *synthetic)]
    assert len(ids) >= 356
    assert [i for i in ids if lesson_id_problem(i, META)] == []


@pytest.mark.parametrize("lesson_id", UNDERSCORE_IDS[:4])
def test_tools_refuse_an_id_mediawiki_would_change(lesson_id: str, dev_wiki) -> None:
    harness = WriteHarness(dev_wiki)
    created = harness.error("create_lesson_draft", operation_id=unique("op-create"), lesson_id=lesson_id,
                            initial_evidence=evidence_args(), **lesson_fields())
    assert created["code"] == "invalid_argument" and created["field"] == "lesson_id", created
    assert "'_'" in created["message"] and "MediaWiki" in created["message"]
    read = harness.error("get_lesson", id=lesson_id)
    assert read["code"] == "invalid_argument" and "'_'" in read["message"], read
    assert harness.wikitext(lesson_id.strip("_").replace("__", "_") or "x") is None  # nothing was written


def test_the_site_script_uses_the_schema_pattern() -> None:
    text = (REPO / "schema" / "site" / "Common.js").read_text(encoding="utf-8")
    js = re.search(r"var ID_PATTERN = /(.*)/;", text).group(1)
    assert js == META["id_pattern"]
    published = json.loads((REPO / "schema" / "tools" / "get_lesson.input.schema.json").read_text(encoding="utf-8"))
    assert META["id_pattern"] in json.dumps(published)  # the tools' JSON Schemas publish the same pattern

"""The example searches the help pages and the home page's search box show are measured queries.

Each example (a quoted sentence after "예:" in the getting-started page, the ``<code>`` terms of the
usage page's search tip, the home search box's placeholder) is a line of ``eval/help_examples.jsonl``
with the Lesson it should find; ``bench/bench_quality.py`` runs that file over the shipped corpus in
both modes (figures: docs/hybrid-search.md), so an example that stops finding its Lesson shows there.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
HELP = REPO / "schema" / "pages" / "help"


def _shown_examples() -> set[str]:
    started = (HELP / "getting-started.wiki").read_text(encoding="utf-8")
    usage = (HELP / "usage.wiki").read_text(encoding="utf-8")
    script = (REPO / "schema" / "site" / "Common.js").read_text(encoding="utf-8")
    shown = set(re.findall(r'예: "([^"]+)"', started))
    tip = re.search(r"도구 이름으로 찾는 편이 잘 맞습니다\(예: (.*?)\)\.", usage)
    assert tip, "the usage page's search tip moved"
    shown |= set(re.findall(r"<code>([^<]+)</code>", tip.group(1)))
    shown |= set(re.findall(r"placeholder: '예: ([^']+)'", script))
    return shown


def test_every_example_search_shown_is_a_measured_query_with_its_lesson():
    shown = _shown_examples()
    assert len(shown) >= 5
    lines = [json.loads(line) for line in (REPO / "eval" / "help_examples.jsonl").read_text().splitlines() if line]
    measured = {q["query"]: q["expected_ids"] for q in lines}
    assert shown == set(measured), shown ^ set(measured)
    corpus_ids = {json.loads(line)["id"] for line in (REPO / "data" / "synthetic-ko" / "lessons.jsonl").open()}
    corpus_ids |= set(re.findall(r"^([a-z0-9-]+),", (REPO / "data" / "cloud-incidents" / "cloud_incidents.csv")
                                 .read_text(encoding="utf-8"), re.M))
    for query, expected in measured.items():
        assert expected and all(i in corpus_ids for i in expected), (query, expected)

#!/usr/bin/env python3
"""Benchmark: legacy search alone (``retrieval_mode=legacy``) over the bench wiki — no embeddings needed.

Not a test. Uses the wiki of ``bench/bench_quality.py`` (``.dev/bench-wiki``: the 356 incidents, both
Korean sets and the noise Lessons, imported by the importer on first use) and, in ONE process and run:

* per query file and group, legacy's headline figure (recall@5; ``*_multi``: share of the expected
  Lessons in the top 10), noise Lessons' top-5 slots and queries with a noise Lesson above an expected one;
* the hubs: per Lesson the share of the queries not expecting it whose top 5 hold it (worst ten), over
  every query file of the run — with ``--explain-hubs N`` the worst N hubs' appearances, each with the
  query's terms, the terms the Lesson holds (title / body), its score and place (no query text);
* with ``--phrasings FILE``: per group the query alone, its phrasing alone and both (``also_phrased_as``,
  :func:`gateway.retrieval.legacy.search.merge_phrasings`), beside ``v2`` — the legacy-v2 merge (each
  Lesson's best score over the phrasings) recomputed from the same two lists.

    python bench/bench_legacy.py --outside <outside file> \\
        --phrasings eval/phrasings/dev_mixed.jsonl --phrasings eval/phrasings/external_cloud_incidents.jsonl

Query sets: both halves of every query file of the ``all`` corpus (``eval/*.{tuning,heldout}.jsonl``) and
each ``--outside`` file. Lesson content is never printed; query terms only with ``--explain-hubs``.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench"), str(REPO / "tests")]

import bench_quality as bq
import phrasings
from support.noise import is_noise

from gateway.retrieval.legacy import lexical
from gateway.retrieval.legacy import search as legacy
from gateway.retrieval.request import SearchRequest
from gateway.wiki.client import WikiClient
from gateway.wiki.repository import MediaWikiRepository
from s3rm.evaluate.metrics import outranked_by, query_score
from s3rm.evaluate.queryset import load_queries


def best_score_merge(lists: list[legacy.RankedList]) -> list[str]:
    """legacy-v2's merge: each Lesson once with its best score, then the earlier phrasing, then its place."""
    best: dict[str, tuple] = {}
    for number, ranked in enumerate(lists):
        for position, item in enumerate(ranked.items):
            key = (-item.score, number, position, item.snapshot.id)
            best[item.snapshot.id] = min(best.get(item.snapshot.id, key), key)
    return [key[3] for key in sorted(best.values())]


def explain_hub(lesson_id: str, runs, reads) -> None:
    """Every appearance of ``lesson_id`` in the top 5 of a query not expecting it: terms held, score, place."""
    snap = reads.get_snapshot(lesson_id)
    title, body = legacy._field_words(snap.page, ("title",)), legacy._body_words(snap.page)
    held: dict[str, int] = defaultdict(int)
    print(f"\n-- {lesson_id}: query terms it holds (title / body), its score and place, the query's terms --")
    for label, case, ids, scores in runs:
        if lesson_id not in ids[:5] or lesson_id in case.expected_ids:
            continue
        terms = lexical.query_terms(case.query)
        in_title = [t.syntax() for t in terms if lexical.term_matches(t, title)]
        in_body = [t.syntax() for t in terms if lexical.term_matches(t, body)]
        for term in set(in_title) | set(in_body):
            held[term] += 1
        place = ids.index(lesson_id)
        found = [ids.index(e) + 1 for e in case.expected_ids if e in ids]
        print(f"  {label[:24]:<24} {case.group:<13} #{place + 1} score {scores[place]:.3f} (top {scores[0]:.3f}) "
              f"expected at {found or '-'}; title {in_title} body {in_body} of {len(terms)}: "
              + " ".join(t.syntax() for t in terms))
    print("  terms by appearances: " + ", ".join(f"{t} {n}" for t, n in sorted(held.items(), key=lambda x: -x[1])))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--outside", action="append", default=[], help="an outside evaluation file (never tuned on)")
    parser.add_argument("--phrasings", action="append", default=[], help="eval/phrasings/*.jsonl")
    parser.add_argument("--explain-hubs", type=int, default=0, help="print the worst N hubs' appearances")
    args = parser.parse_args(argv)

    corpus = bq.CORPORA["all"]
    wiki = bq.ensure_wiki(corpus.wiki_dir)
    bq.import_corpora(wiki, corpus.sources)
    reads = bq.MemoRepository(MediaWikiRepository(WikiClient(wiki.api_url, wiki.agent.username,
                                                             wiki.agent.password), bq.SCHEMA))
    files = [path for half in ("tuning", "heldout") for path in bq.half_files(half, corpus.query_sets)]
    files += [Path(path).resolve() for path in args.outside]
    runs = []
    for path in files:
        for case in load_queries(path):
            items = legacy.search(reads, SearchRequest(query=case.query)).items
            runs.append((f"{bq.section_label(path)}.{path.name.split('.')[1] if path.parent == REPO / 'eval' else ''}"
                         .rstrip("."), case, [r.snapshot.id for r in items], [r.score for r in items]))
    print(f"\n== legacy {legacy.RANKING_VERSION}: headline per group (recall@5; *_multi: share in the top 10), "
          "noise top-5 slots, queries with noise above an expected Lesson ==")
    groups: dict[tuple[str, str], list] = defaultdict(list)
    for label, case, ids, _ in runs:
        for key in ((label, case.group), (label, "overall")):
            groups[key].append((query_score(ids, case, 10), sum(map(is_noise, ids[:5])),
                                outranked_by(ids, case.expected_ids, [i for i in ids if is_noise(i)], 10)))
    for (label, group), values in groups.items():
        print(f"{label:<40}{group:<14}{len(values):>4}{statistics.fmean(v[0] for v in values):>8.3f}"
              f"{sum(v[1] for v in values):>6}/{5 * len(values):<5}{sum(bool(v[2]) for v in values):>4}")
    tops = [(case.expected_ids, {"legacy": ids[:5]}) for _, case, ids, _ in runs]
    bq.print_hubs(f"{len(files)} files", tops, systems=("legacy",))
    for lesson_id, *_ in bq.hub_shares(tops, "legacy")[:args.explain_hubs]:
        explain_hub(lesson_id, runs, reads)
    table = phrasings.load(args.phrasings)
    if table:
        print("\n== also_phrased_as in legacy: headline per group, query alone / phrasing alone / both "
              "(this version) / both by legacy-v2's best-score merge ==")
        per: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for label, case, ids, _ in runs:
            if case.query not in table:
                continue
            alone = legacy.search(reads, SearchRequest(query=case.query))
            other = legacy.search(reads, SearchRequest(query=table[case.query][0]))
            both = legacy.search(reads, SearchRequest(query=case.query, phrasings=table[case.query][:1]))
            for column, ranked in (("query", [r.snapshot.id for r in alone.items]),
                                   ("phrasing", [r.snapshot.id for r in other.items]),
                                   ("both", [r.snapshot.id for r in both.items]),
                                   ("v2", best_score_merge([alone, other]))):
                per[(label, case.group)][column].append(query_score(ranked, case, 10))
        print(f"{'set':<40}{'group':<14}{'n':>4}{'query':>8}{'phrasing':>9}{'both':>8}{'v2':>8}")
        for (label, group), columns in per.items():
            v = {c: statistics.fmean(x) for c, x in columns.items()}
            mark = "<" if v["both"] < max(v["query"], v["phrasing"]) - 1e-9 else " "
            print(f"{label:<40}{group:<14}{len(columns['query']):>4}{v['query']:>8.3f}{v['phrasing']:>9.3f}"
                  f"{v['both']:>8.3f}{mark}{v['v2']:>7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

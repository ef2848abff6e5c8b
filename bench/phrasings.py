"""The ``--phrasings FILE`` part of bench/bench_quality.py: queries with the agent's own other phrasing.

``search_lessons`` accepts other phrasings of its query (``also_phrased_as``,
docs/retrieval.md#phrasings). A phrasings file (``eval/phrasings/*.jsonl``,
eval/phrasings/README.md) gives, keyed by the exact query text, the phrasing an
agent would send beside it (a plain translation into the other language). For
every query of a half (or an outside file) that has one, this measures, in the
same run and over the same wiki and index, six lists:

``legacy`` / ``hybrid``        the query alone (what the main table measures);
``legacy_p`` / ``hybrid_p``    the phrasing alone (the better phrasing is the max of these two columns);
``legacy_2`` / ``hybrid_2``    the query with the phrasing in ``also_phrased_as`` (fused);
``hy_max``                     the merge rule recomputed here from ``hybrid`` and ``hybrid_p`` alone (each
                               Lesson at its best rank over the two lists, :func:`interleave`): a check
                               of ``hybrid_2``, and how the rule was chosen over RRF on the tuning half.

The table gives per group recall@5 (any-of) over every query, recall@5 over the
single-answer ones, share of expected Lessons in the top 10 over the multi-answer
ones, the noise Lessons' top-5 slots, and below it the Lessons most often in the
top 5 of queries that do not expect them (``hub``: share of those queries).
Query text is never printed.
"""
from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Sequence

from gateway.retrieval.hybrid.results import SemanticFallback
from gateway.retrieval.legacy import search as legacy
from gateway.retrieval.request import SearchRequest
from s3rm.evaluate.metrics import id_recall_at_k, recall_at_k
from s3rm.evaluate.queryset import GROUPS, QueryCase, load_queries
from support.noise import is_noise

__all__ = ["SYSTEMS", "load", "report"]

SYSTEMS = ("legacy", "legacy_p", "legacy_2", "hybrid", "hybrid_p", "hybrid_2", "hy_max")
#: Hubs printed per table.
HUBS = 5


def load(paths: Sequence[str | Path]) -> dict[str, tuple[str, ...]]:
    """Query text → its other phrasings, from every file of ``paths`` (a later file's line wins)."""
    table: dict[str, tuple[str, ...]] = {}
    for path in paths:
        for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            row = json.loads(line)
            phrasings = row.get("also_phrased_as")
            if not isinstance(row.get("query"), str) or not isinstance(phrasings, list) or not phrasings:
                raise SystemExit(f"{path}:{number}: needs query and a non-empty also_phrased_as list")
            table[row["query"]] = tuple(phrasings)
    return table


def _ranked(repo, service, request: SearchRequest) -> dict[str, list[str]]:
    """Legacy's and hybrid's ids for ``request`` (a hybrid fallback is scored as legacy's list)."""
    lists = {"legacy": [r.snapshot.id for r in legacy.search(repo, request).items]}
    try:
        lists["hybrid"] = [r.snapshot.id for r in service.search_lessons(repo, request).results]
    except SemanticFallback:
        lists["hybrid"] = lists["legacy"]
    return lists


def collect(cases: Sequence[QueryCase], repo, service, table: dict[str, tuple[str, ...]]
            ) -> list[tuple[QueryCase, dict[str, list[str]]]]:
    """Every system's list for each case of ``cases`` that ``table`` has a phrasing for."""
    runs = []
    for case in cases:
        phrasings = table.get(case.query)
        if not phrasings:
            continue
        alone = _ranked(repo, service, SearchRequest(query=case.query))
        other = _ranked(repo, service, SearchRequest(query=phrasings[0]))
        fused = _ranked(repo, service, SearchRequest(query=case.query, phrasings=phrasings))
        runs.append((case, {**alone, **{f"{k}_p": v for k, v in other.items()},
                            **{f"{k}_2": v for k, v in fused.items()},
                            "hy_max": interleave(alone["hybrid"], other["hybrid"])}))
    return runs


def interleave(*lists: Sequence[str]) -> list[str]:
    """Each Lesson at its best rank over the id lists (no bonus for agreement), ties to the earlier list
    (gateway/retrieval/hybrid/phrasings.py's rule without tiers and scores)."""
    best: dict[str, tuple[int, int]] = {}
    for number, ranked in enumerate(lists):
        for rank, lesson_id in enumerate(ranked):
            best[lesson_id] = min(best.get(lesson_id, (rank, number)), (rank, number))
    return sorted(best, key=lambda i: (best[i], i))


def _mean(values: list[float]) -> str:
    return f"{statistics.fmean(values):8.3f}" if values else f"{'-':>8}"


def report(title: str, files: Sequence[Path], repo, service, table: dict[str, tuple[str, ...]]) -> None:
    """Print the phrasings table (module doc) for the queries of ``files`` that ``table`` covers."""
    cases: list[QueryCase] = []
    for path in files:
        cases += load_queries(path)
    runs = collect(cases, repo, service, table)
    print(f"\n== {title}: {len(runs)} of {len(cases)} queries with another phrasing "
          f"(query alone / phrasing alone / both in also_phrased_as) ==")
    if not runs:
        return
    header = f"{'group':<14}{'n':>4}  {'metric':<10}" + "".join(f"{s:>10}" for s in SYSTEMS)
    print(header)
    by_group: dict[str, list] = defaultdict(list)
    for case, lists in runs:
        by_group[case.group].append((case, lists))
        by_group["overall"].append((case, lists))
    for group in ["overall"] + [g for g in GROUPS if g in by_group] + sorted(set(by_group) - set(GROUPS) - {"overall"}):
        rows = by_group[group]
        single = [(c, ls) for c, ls in rows if len(c.expected_ids) == 1]
        multi = [(c, ls) for c, ls in rows if len(c.expected_ids) > 1]
        lines = [("r@5", rows, lambda ls, c: recall_at_k(ls, c.expected_ids, 5)),
                 ("1:r@5", single, lambda ls, c: recall_at_k(ls, c.expected_ids, 5)),
                 ("M:idr@10", multi, lambda ls, c: id_recall_at_k(ls, c.expected_ids, 10)),
                 ("noise@5", rows, lambda ls, c: float(sum(1 for i in ls[:5] if is_noise(i))))]
        for label, subset, metric in lines:
            if not subset or (label == "1:r@5" and not multi) or (label == "M:idr@10" and not multi):
                continue
            cells = "".join(f"{_mean([metric(ls[s], c) for c, ls in subset]):>10}" for s in SYSTEMS)
            print(f"{group:<14}{len(subset):>4}  {label:<10}{cells}")
    print(f"hubs (share of the {len(runs)} queries not expecting a Lesson whose top 5 hold it; worst {HUBS}):")
    for system in SYSTEMS:
        counts: dict[str, int] = defaultdict(int)
        for case, lists in runs:
            for lesson_id in lists[system][:5]:
                if lesson_id not in case.expected_ids:
                    counts[lesson_id] += 1
        shares = {i: counts[i] / sum(1 for c, _ in runs if i not in c.expected_ids) for i in counts}
        worst = sorted(shares, key=lambda i: (-shares[i], i))[:HUBS]
        print(f"  {system:<10}" + "  ".join(f"{i} {shares[i]:.3f}" for i in worst))

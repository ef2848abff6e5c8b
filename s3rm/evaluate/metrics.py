"""The ``s3rm evaluate`` metrics and report: recall, MRR, nDCG, latency percentiles and the quality shares.

Definitions: the ``s3rm/evaluate/__init__.py`` module documentation (metrics).
Pure functions over :class:`QueryOutcome` values; no network.
"""
from __future__ import annotations

import json
import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from s3rm.evaluate.queryset import GROUPS, QueryCase, multi_answer

#: The one tool this command calls.
TOOL = "search_lessons"
#: Bounded lists in the report.
MAX_LISTED = 50
#: What the cloud-incident importer writes when the source is silent (s3rm/importing/cloud_incidents.py).
NOT_RECORDED = "not recorded in the source data"


# ------------------------------------------------------------------ metrics
def recall_at_k(ranked: Sequence[str], relevant: Iterable[str], k: int) -> float:
    """Any-of recall: 1.0 when at least one relevant id is among ``ranked[:k]``, else 0.0.

    >>> recall_at_k(["a", "b", "c"], {"c", "z"}, 2), recall_at_k(["a", "b", "c"], {"c", "z"}, 3)
    (0.0, 1.0)
    """
    rel = set(relevant)
    return 1.0 if any(i in rel for i in ranked[:k]) else 0.0


def id_recall_at_k(ranked: Sequence[str], relevant: Iterable[str], k: int) -> float:
    """Classic recall: share of the relevant ids found among ``ranked[:k]`` (0.0 for an empty relevant set).

    >>> id_recall_at_k(["a", "b", "c"], {"a", "c", "z", "y"}, 3)
    0.5
    """
    rel = set(relevant)
    if not rel:
        return 0.0
    return len(rel & set(ranked[:k])) / len(rel)


def outranked_by(ranked: Sequence[str], relevant: Iterable[str], intruders: Iterable[str], k: int) -> bool:
    """True when an ``intruders`` id is among ``ranked[:k]`` above every relevant id there (or when no
    relevant id is in the top k and an intruder is).

    >>> outranked_by(["n", "a"], {"a"}, {"n"}, 10), outranked_by(["a", "n"], {"a"}, {"n"}, 10)
    (True, False)
    """
    rel, bad = set(relevant), set(intruders)
    for item in ranked[:k]:
        if item in rel:
            return False
        if item in bad:
            return True
    return False


def mrr_at_k(ranked: Sequence[str], relevant: Iterable[str], k: int) -> float:
    """Reciprocal rank of the first relevant id within ``ranked[:k]``; 0.0 when none.

    >>> mrr_at_k(["a", "b", "c"], {"c"}, 10)
    0.3333333333333333
    """
    rel = set(relevant)
    for rank, item in enumerate(ranked[:k], start=1):
        if item in rel:
            return 1.0 / rank
    return 0.0


def ndcg_at_k(ranked: Sequence[str], relevant: Iterable[str], k: int) -> float:
    """nDCG@k with binary relevance: DCG = Σ rel_i / log2(i + 1) over ``ranked[:k]``, divided by the
    ideal DCG of min(|relevant|, k) relevant results at the top. Repeated ids count once. 0.0 when
    ``relevant`` is empty.

    >>> round(ndcg_at_k(["x", "a"], {"a"}, 10), 4)  # 1/log2(3)
    0.6309
    """
    rel = set(relevant)
    if not rel or k <= 0:
        return 0.0
    seen: set[str] = set()
    dcg = 0.0
    for i, item in enumerate(ranked[:k], start=1):
        if item in rel and item not in seen:
            dcg += 1.0 / math.log2(i + 1)
        seen.add(item)
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(rel), k) + 1))
    return dcg / ideal


def query_score(ranked: Sequence[str], case: QueryCase, k: int) -> float:
    """One query's headline figure: recall@5 (any-of), or for a multi-answer group
    (:func:`s3rm.evaluate.queryset.multi_answer`) the share of its expected ids in the top ``k``."""
    if multi_answer(case.group):
        return id_recall_at_k(ranked, case.expected_ids, k)
    return recall_at_k(ranked, case.expected_ids, 5)


def percentile(values: Sequence[float], p: float) -> float | None:
    """Nearest-rank percentile (``p`` in 0-100) of ``values``; ``None`` when empty.

    >>> percentile([10, 20, 30, 40], 50), percentile([10, 20, 30, 40], 95)
    (20, 40)
    """
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


_PUNCT_DIGITS = re.compile(r"[\W\d_]+", re.UNICODE)


def normalise_solution(text: str | None) -> str:
    """Comparison key of a ``reusable_lesson``: NFKC, case-folded, digits and punctuation removed,
    whitespace collapsed. ``""`` for missing or blank text.

    >>> normalise_solution("Roll back the change (AWS on 2019-01-02).")
    'roll back the change aws on'
    """
    if not text:
        return ""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(_PUNCT_DIGITS.sub(" ", folded).split())


def solution_repeats(results: Sequence[dict[str, Any]], n: int = 5) -> bool | None:
    """True when two of the first ``n`` results share a non-empty normalised ``reusable_lesson``;
    ``None`` when fewer than two of them carry one (the query does not count)."""
    keys = [normalise_solution(r.get("reusable_lesson")) for r in results[:n]]
    keys = [k for k in keys if k]
    if len(keys) < 2:
        return None
    return len(set(keys)) < len(keys)


def lacks_evidence(result: dict[str, Any]) -> bool:
    """True when the result's ``citations`` list is missing or empty."""
    return not result.get("citations")


def lacks_applicability(result: dict[str, Any]) -> bool:
    """True when ``applicability`` is missing, blank, or only says the source did not record it."""
    text = (result.get("applicability") or "").strip().rstrip(".").casefold()
    return not text or text == NOT_RECORDED


# ----------------------------------------------------------------- outcomes
@dataclass
class QueryOutcome:
    """What one query returned in one mode (no query text)."""

    line: int
    group: str
    mode: str
    ranked_ids: list[str] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    latency_ms: float | None = None
    effective_mode: str | None = None
    semantic_status: str | None = None
    partial: bool = False
    error_code: str | None = None


def _round(x: float | None, digits: int = 4) -> float | None:
    return None if x is None else round(x, digits)


def _block(cases: dict[int, QueryCase], outcomes: list[QueryOutcome], k: int) -> dict[str, Any]:
    ok = [o for o in outcomes if o.error_code is None]
    cuts = sorted({1, 5, k})
    block: dict[str, Any] = {"queries": len(outcomes), "evaluated": len(ok), "errors": len(outcomes) - len(ok)}

    def mean(values: list[float]) -> float | None:
        return _round(sum(values) / len(values)) if values else None

    for cut in cuts:
        block[f"recall@{cut}"] = mean([recall_at_k(o.ranked_ids, cases[o.line].expected_ids, cut) for o in ok])
    block[f"id_recall@{k}"] = mean([id_recall_at_k(o.ranked_ids, cases[o.line].expected_ids, k) for o in ok])
    block["mrr"] = mean([mrr_at_k(o.ranked_ids, cases[o.line].expected_ids, k) for o in ok])
    block["score"] = mean([query_score(o.ranked_ids, cases[o.line], k) for o in ok])
    block[f"ndcg@{k}"] = mean([ndcg_at_k(o.ranked_ids, cases[o.line].expected_ids, k) for o in ok])
    latencies = [o.latency_ms for o in ok if o.latency_ms is not None]
    block["latency_ms"] = {"p50": _round(percentile(latencies, 50), 1), "p95": _round(percentile(latencies, 95), 1)}
    block["fallback"] = sum(1 for o in ok if o.mode == "hybrid_v1" and o.effective_mode == "legacy")
    block["partial"] = sum(1 for o in ok if o.partial)
    with_analogues = [o for o in ok if cases[o.line].analogous_ids]
    block[f"analogous_recall@{k}"] = mean(
        [id_recall_at_k(o.ranked_ids, cases[o.line].analogous_ids, k) for o in with_analogues])
    block["analogous_queries"] = len(with_analogues)
    repeats = [r for r in (solution_repeats(o.results, 5) for o in ok) if r is not None]
    block["solution_repeat@5"] = mean([1.0 if r else 0.0 for r in repeats])
    block["solution_repeat_queries"] = len(repeats)
    returned = [r for o in ok for r in o.results[:k]]
    block["results_returned"] = len(returned)
    block["lacking_evidence"] = mean([1.0 if lacks_evidence(r) else 0.0 for r in returned])
    block["lacking_applicability"] = mean([1.0 if lacks_applicability(r) else 0.0 for r in returned])
    block["lacking_either"] = mean(
        [1.0 if lacks_evidence(r) or lacks_applicability(r) else 0.0 for r in returned])
    return block


def summarize(cases: Sequence[QueryCase], outcomes: Sequence[QueryOutcome], *, k: int, modes: Sequence[str],
              corpus_size: int | None = None) -> dict[str, Any]:
    """The bounded report (a JSON-able dict) for ``outcomes``.

    Shape::

        {"tool": "search_lessons", "k": k, "queries": n, "corpus_size": int | null,
         "modes": {mode: {"overall": BLOCK, "groups": {group: BLOCK, ...},
                          "semantic_status": {status: count}, "effective_mode": {mode: count},
                          "skipped": int, "missed_lines": [line, ...] (≤ 50), "missed_lines_total": int,
                          "errors": [{"line", "code"}] (≤ 50)}}}

    BLOCK holds the metrics named in the module docstring. The report never
    contains query text; its size depends only on the number of modes and
    groups (lists are capped at :data:`MAX_LISTED`).
    """
    by_line = {c.line: c for c in cases}
    report: dict[str, Any] = {"tool": TOOL, "k": k, "queries": len(cases), "corpus_size": corpus_size, "modes": {}}
    for mode in modes:
        mine = [o for o in outcomes if o.mode == mode]
        groups = {g: _block(by_line, [o for o in mine if o.group == g], k) for g in GROUPS
                  if any(c.group == g for c in cases)}
        missed = sorted(o.line for o in mine
                        if o.error_code is None and not recall_at_k(o.ranked_ids, by_line[o.line].expected_ids, k))
        errors = [{"line": o.line, "code": o.error_code} for o in mine if o.error_code is not None]
        report["modes"][mode] = {
            "overall": _block(by_line, mine, k),
            "groups": groups,
            "semantic_status": dict(Counter(o.semantic_status for o in mine if o.semantic_status)),
            "effective_mode": dict(Counter(o.effective_mode for o in mine if o.effective_mode)),
            "skipped": sum(1 for c in cases if not c.runs_in(mode)),
            "missed_lines": missed[:MAX_LISTED],
            "missed_lines_total": len(missed),
            "errors": errors[:MAX_LISTED],
        }
    return report


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}" if value <= 1.0 else f"{value:.0f}"
    return str(value)


def format_report(report: dict[str, Any], output: str = "json") -> str:
    """Render ``report`` (from :func:`summarize`) as compact-indented JSON or a plain-text table.

    Raises ``ValueError`` for an unknown ``output``.
    """
    if output == "json":
        return json.dumps(report, ensure_ascii=False, indent=2)
    if output != "text":
        raise ValueError(f"unknown output format {output!r}")
    k = report["k"]
    cols = ["score", "recall@1", "recall@5", f"recall@{k}", f"id_recall@{k}", "mrr", f"ndcg@{k}"]
    lines = [f"search_lessons evaluation: {report['queries']} queries, k={k}, corpus={_fmt(report['corpus_size'])}"]
    for mode, data in report["modes"].items():
        lines.append(f"\n[{mode}] effective={data['effective_mode']} semantic={data['semantic_status']} "
                     f"skipped={data['skipped']} errors={len(data['errors'])}")
        lines.append(f"{'group':<14}{'n':>4}" + "".join(f"{c:>11}" for c in cols)
                     + f"{'p50ms':>8}{'p95ms':>8}{'fallbk':>7}{'partl':>6}")
        rows = [("overall", data["overall"])] + list(data["groups"].items())
        for name, b in rows:
            lat = b["latency_ms"]
            lines.append(f"{name:<14}{b['evaluated']:>4}" + "".join(f"{_fmt(b.get(c)):>11}" for c in cols)
                         + f"{_fmt(lat['p50']):>8}{_fmt(lat['p95']):>8}{b['fallback']:>7}{b['partial']:>6}")
        o = data["overall"]
        lines.append(f"analogous_recall@{k}={_fmt(o[f'analogous_recall@{k}'])} (n={o['analogous_queries']})  "
                     f"solution_repeat@5={_fmt(o['solution_repeat@5'])}  "
                     f"lacking_evidence={_fmt(o['lacking_evidence'])}  "
                     f"lacking_applicability={_fmt(o['lacking_applicability'])}")
        if data["missed_lines"]:
            lines.append(f"missed at {k} (lines): {', '.join(map(str, data['missed_lines']))}"
                         + (" …" if data["missed_lines_total"] > len(data["missed_lines"]) else ""))
    return "\n".join(lines)

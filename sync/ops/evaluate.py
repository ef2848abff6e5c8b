"""``s3rm evaluate``: retrieval quality over a fixed query file, through the MCP endpoint.

Seeds: design-hybrid-search.ko.wiki "품질 평가" (evaluate-retrieval), DESIGN.md §4,
CHECKLIST E2, issue 6. The evaluator is an ordinary MCP client (the official
``mcp`` SDK over Streamable HTTP) and calls ONE tool, the read-only
``search_lessons``:

1. **Validate** the query file (JSON Lines, one query object per line) — shape
   of every line, and heuristics that reject anything that looks like a
   secret or personal data (tokens, keys, e-mail addresses, phone numbers, IP
   addresses). A bad file is a usage error (exit 2).
2. **Check the gold.** List the whole corpus with ``search_lessons`` (empty
   query, ``fields=["id"]``, limit 20, following ``next_cursor``; at most
   :data:`MAX_LISTING_PAGES` pages) and fail the run (exit 1) when an
   ``expected_ids`` or ``analogous_ids`` entry is not in it: a vanished gold
   answer is a broken instrument, not a quality result (seeds/TIL
   "사라진 gold").
3. **Search** every query in every requested mode (sequentially, so latencies
   are comparable) and print bounded metrics (:func:`summarize`).

Query file line (closed object)::

    {"query": str (1-500 chars), "expected_ids": [id, ...] (1-50, unique),
     "group": "en_paraphrase" | "ko" | "mixed" | "exact",
     "retrieval_mode": "legacy" | "hybrid_v1"   (optional: run only in that mode),
     "scope": str (optional, passed to search_lessons),
     "analogous_ids": [id, ...]                   (optional, disjoint from expected_ids)}

Metrics (per mode; overall and per group; k = ``--k``, default 10):

* ``recall@1``, ``recall@5``, ``recall@k`` — any-of: a query counts when at
  least one expected id is in its top n (several expected ids mean "any of
  these answers the question"; seeds/TIL "복수 gold(any-of)").
* ``id_recall@k`` — classic recall: mean share of a query's expected ids in its top k.
* ``mrr`` — mean reciprocal rank of the first expected id within the top k (0 when none).
* ``ndcg@k`` — binary relevance (expected id = gain 1, anything else 0),
  DCG = Σ rel_i / log2(i+1), normalised by the ideal ordering of
  min(|expected|, k) relevant results.
* ``latency_ms`` ``p50``/``p95`` — nearest-rank percentiles of the wall time
  of one query's retrieval (one ``tools/call``; more only when the byte cap
  shortened the first page below k results).
* ``fallback`` — queries that asked for ``hybrid_v1`` but were answered with
  ``effective_mode`` ``legacy``; ``partial`` — responses with ``partial: true``.
* ``analogous_recall@k`` (CHECKLIST E2) — over queries that carry
  ``analogous_ids`` only: mean share of those ids in the top k. Only
  ``search_lessons`` is called, so this measures whether search surfaces the
  cross-domain neighbours a person marked, not ``find_analogies``.
* ``solution_repeat@5`` (E2) — share of queries (with at least two results)
  whose top 5 holds two results with the same normalised ``reusable_lesson``
  (NFKC, case-folded, digits and punctuation dropped, whitespace collapsed —
  so two Lessons that teach the same thing about the same services differ
  only by date and still count as a repeat).
* ``lacking_evidence``, ``lacking_applicability``, ``lacking_either`` (E2) —
  share of all returned top-k results whose ``citations`` list is empty or
  whose ``applicability`` is blank or only says the source did not record it.

Privacy: the query text is never printed, logged or put into an exception
message — queries are named by their 1-based line number. Only error *codes*
from the gateway are reported, never its messages.

Exit codes: 0 success; 1 an expected/analogous id is not in the corpus, or the
gateway failed (transport error, tool error on any query); 2 usage (bad
arguments, unreadable or invalid query file).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from sync.devstack.envfiles import DEV_STACK_ENV_FILE, read_env_file

__all__ = [
    "GROUPS",
    "MODES",
    "QueryCase",
    "QueryFileError",
    "QueryOutcome",
    "SearchError",
    "dangling_ids",
    "format_report",
    "load_queries",
    "mrr_at_k",
    "ndcg_at_k",
    "normalise_solution",
    "percentile",
    "privacy_findings",
    "recall_at_k",
    "id_recall_at_k",
    "register",
    "solution_repeats",
    "summarize",
]

#: Query groups, in report order.
GROUPS = ("en_paraphrase", "ko", "mixed", "exact")
#: Retrieval modes search_lessons accepts.
MODES = ("legacy", "hybrid_v1")
#: The one tool this command calls.
TOOL = "search_lessons"
#: Fields requested per result for the E2 metrics.
RESULT_FIELDS = ["id", "reusable_lesson", "applicability", "citations"]
#: search_lessons' maximum page size.
MAX_LIMIT = 20
#: Upper bound on corpus-listing pages (20 ids each): 20,000 Lessons.
MAX_LISTING_PAGES = 1000
#: Upper bound on extra pages fetched when the byte cap shortened a page below k results.
MAX_TOPUP_PAGES = 3
#: Upper bound on query lines in one file.
MAX_QUERIES = 2000
#: Bounded lists in the report.
MAX_LISTED = 50
DEFAULT_MCP_URL = "http://127.0.0.1:8080/mcp"
#: What the cloud-incident importer writes when the source is silent (sync/ops/importers/cloud_incidents.py).
NOT_RECORDED = "not recorded in the source data"

_ID = re.compile(r"^[a-z0-9_-]{1,120}$")
_KEYS = {"query", "expected_ids", "group", "retrieval_mode", "scope", "analogous_ids"}


# --------------------------------------------------------------- query file
@dataclass(frozen=True)
class QueryCase:
    """One validated line of the query file (``line`` is 1-based)."""

    line: int
    query: str = field(repr=False)  # never shown, not even in reprs
    expected_ids: tuple[str, ...]
    group: str
    retrieval_mode: str | None = None
    scope: str | None = None
    analogous_ids: tuple[str, ...] = ()

    def runs_in(self, mode: str) -> bool:
        """True unless the line pins another ``retrieval_mode``."""
        return self.retrieval_mode in (None, mode)


class QueryFileError(Exception):
    """The query file is invalid. ``problems`` is a list of ``(line, message)``; messages never quote the query."""

    def __init__(self, problems: list[tuple[int, str]]):
        self.problems = problems
        shown = "; ".join(f"line {n}: {msg}" for n, msg in problems[:20])
        more = f" (and {len(problems) - 20} more)" if len(problems) > 20 else ""
        super().__init__(f"{len(problems)} problem(s): {shown}{more}")


#: (name, pattern) heuristics for secrets and personal data; any match rejects the line.
_PRIVACY_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("e-mail address", re.compile(r"[\w.+-]+@[\w-]+(\.[\w-]+)+")),
    ("URL with credentials", re.compile(r"[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@", re.I)),
    ("bearer/basic credential", re.compile(r"\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}", re.I)),
    ("secret assignment", re.compile(r"\b(pass(word|wd)?|secret|token|api[_-]?key|access[_-]?key)\s*[:=]\s*\S+", re.I)),
    ("private key block", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY")),
    ("JSON web token", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("provider API key", re.compile(r"\b(sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}"
                                    r"|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,})")),
    ("long random string", re.compile(r"(?=[A-Za-z0-9+/_=-]{32,})(?=\S*[0-9])(?=\S*[A-Za-z])[A-Za-z0-9+/_=-]{32,}")),
    ("phone number", re.compile(r"(\+\d{1,3}[\s-]?)?\b0\d{1,2}[\s-]\d{3,4}[\s-]\d{4}\b"
                                r"|\+\d{1,3}[\s-]\d{2,4}[\s-]\d{3,4}[\s-]\d{3,4}")),
    ("resident registration number", re.compile(r"\b\d{6}-[1-8]\d{6}\b")),
    ("IP address", re.compile(r"\b(25[0-5]|2[0-4]\d|1?\d?\d)(\.(25[0-5]|2[0-4]\d|1?\d?\d)){3}\b")),
)


def privacy_findings(text: str) -> list[str]:
    """Names of the secret/personal-data heuristics that ``text`` trips (empty list = clean).

    Heuristics, not proof: they reject e-mail addresses, URLs with user:password,
    bearer/basic credentials, ``password=…``-style assignments, private keys,
    JWTs, well-known API-key shapes, long random letter+digit strings (≥ 32),
    phone numbers, Korean resident registration numbers and IPv4 addresses.
    """
    return [name for name, pattern in _PRIVACY_PATTERNS if pattern.search(text)]


def _id_list(value: Any, name: str, problems: list[str], *, required: bool) -> tuple[str, ...]:
    if value is None and not required:
        return ()
    if not isinstance(value, list) or not (1 if required else 0) <= len(value) <= 50:
        problems.append(f"{name} must be a list of {'1' if required else '0'}-50 Lesson ids")
        return ()
    bad = [v for v in value if not isinstance(v, str) or not _ID.match(v)]
    if bad:
        problems.append(f"{name} holds {len(bad)} value(s) that are not Lesson ids ([a-z0-9_-], 1-120 chars)")
        return ()
    if len(set(value)) != len(value):
        problems.append(f"{name} repeats an id")
    return tuple(value)


def _validate_line(n: int, raw: str) -> tuple[QueryCase | None, list[str]]:
    problems: list[str] = []
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as exc:
        return None, [f"not valid JSON (column {exc.colno})"]
    if not isinstance(obj, dict):
        return None, ["must be a JSON object"]
    unknown = sorted(set(obj) - _KEYS)
    if unknown:
        problems.append("unknown key(s): " + ", ".join(k[:40] for k in unknown))
    query = obj.get("query")
    if not isinstance(query, str) or not query.strip() or len(query) > 500:
        problems.append("query must be a non-empty string of at most 500 characters")
        query = ""
    expected = _id_list(obj.get("expected_ids"), "expected_ids", problems, required=True)
    analogous = _id_list(obj.get("analogous_ids"), "analogous_ids", problems, required=False)
    if set(expected) & set(analogous):
        problems.append("analogous_ids must not repeat an expected id")
    group = obj.get("group")
    if group not in GROUPS:
        problems.append("group must be one of " + ", ".join(GROUPS))
    mode = obj.get("retrieval_mode")
    if mode is not None and mode not in MODES:
        problems.append("retrieval_mode must be one of " + ", ".join(MODES))
    scope = obj.get("scope")
    if scope is not None and (not isinstance(scope, str) or not 1 <= len(scope) <= 64):
        problems.append("scope must be a string of 1-64 characters")
        scope = None
    for label, text in (("query", query), ("scope", scope or "")):
        found = privacy_findings(text)
        if found:
            problems.append(f"{label} looks like it holds a secret or personal data ({', '.join(found)})")
    if problems:
        return None, problems
    return QueryCase(line=n, query=query, expected_ids=expected, group=group, retrieval_mode=mode,
                     scope=scope, analogous_ids=analogous), []


def load_queries(path: Path | str) -> list[QueryCase]:
    """Read and validate a query file; return its cases in file order.

    Blank lines are skipped (line numbers still count them). Raises
    :class:`QueryFileError` listing every bad line (never quoting a query),
    when the file holds no query or more than :data:`MAX_QUERIES`; ``OSError``
    / ``UnicodeDecodeError`` when it cannot be read as UTF-8.
    """
    cases: list[QueryCase] = []
    problems: list[tuple[int, str]] = []
    text = Path(path).read_text(encoding="utf-8")
    for n, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        case, errs = _validate_line(n, raw)
        problems.extend((n, e) for e in errs)
        if case is not None:
            cases.append(case)
    if not problems and not cases:
        problems.append((0, "the file holds no query"))
    if len(cases) > MAX_QUERIES:
        problems.append((0, f"more than {MAX_QUERIES} queries"))
    if problems:
        raise QueryFileError(problems)
    return cases


def dangling_ids(cases: Iterable[QueryCase], corpus_ids: set[str]) -> list[tuple[int, str, str]]:
    """``(line, kind, id)`` for every id missing from ``corpus_ids``; kind is ``expected`` or ``analogous``."""
    missing = []
    for case in cases:
        missing += [(case.line, "expected", i) for i in case.expected_ids if i not in corpus_ids]
        missing += [(case.line, "analogous", i) for i in case.analogous_ids if i not in corpus_ids]
    return missing


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
    cols = ["recall@1", "recall@5", f"recall@{k}", "mrr", f"ndcg@{k}"]
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


# ------------------------------------------------------------------ the client
class SearchError(Exception):
    """The gateway could not be used (transport failure, refused call, malformed result).

    ``str(exc)`` is safe to print: it names the URL, an HTTP status, an error
    code or an exception type — never query text or a server message. ``code``
    is the tool's error code when the tool answered ``isError`` (else ``None``).
    """

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        self.code = code


_RETRY_STATUSES = (429, 503)


def _retry_transport():
    """An httpx transport that retries 429/503 (``Retry-After`` ≤ 10 s, 3 attempts): search is read-only."""
    import anyio
    import httpx

    class RetryTransport(httpx.AsyncHTTPTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            for attempt in range(3):
                response = await super().handle_async_request(request)
                if response.status_code not in _RETRY_STATUSES or attempt == 2:
                    return response
                try:
                    wait = float(response.headers.get("retry-after", "1"))
                except ValueError:
                    wait = 1.0
                await response.aclose()
                await anyio.sleep(min(max(wait, 0.1), 10.0))
            return response  # pragma: no cover - loop always returns

    return RetryTransport()


def _tool_error_code(result: Any) -> str:
    try:
        payload = json.loads(result.content[0].text)
        code = payload["error"]["code"]
        return code if isinstance(code, str) and re.fullmatch(r"[a-z0-9_]{1,64}", code) else "tool_error"
    except Exception:  # noqa: BLE001 - any malformed error body is just "tool_error"
        return "tool_error"


class McpSearch:
    """``search_lessons`` over one MCP ClientSession; use as ``async with McpSearch(url) as s: ...``."""

    def __init__(self, url: str, *, timeout: float = 60.0):
        self.url = url
        self.timeout = timeout
        self._stack = None
        self.session = None

    async def __aenter__(self) -> "McpSearch":
        import contextlib

        import httpx
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        self._stack = contextlib.AsyncExitStack()
        try:
            http = await self._stack.enter_async_context(
                httpx.AsyncClient(transport=_retry_transport(), timeout=self.timeout, follow_redirects=False))
            read, write, _ = await self._stack.enter_async_context(streamable_http_client(self.url, http_client=http))
            self.session = await self._stack.enter_async_context(ClientSession(read, write))
            await self.session.initialize()
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._stack.aclose()

    async def call(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """One ``tools/call search_lessons``; returns ``structuredContent``.

        Raises :class:`SearchError` (``code`` attribute set) when the tool answers ``isError``.
        """
        result = await self.session.call_tool(TOOL, arguments)
        if result.isError or not isinstance(result.structuredContent, dict):
            code = _tool_error_code(result) if result.isError else "no_structured_content"
            raise SearchError(f"search_lessons returned an error ({code})", code)
        return result.structuredContent


async def list_corpus_ids(search: McpSearch) -> tuple[set[str], bool]:
    """Every Lesson id, by paging an empty-query listing (20 per page, ``fields=["id"]``).

    Returns ``(ids, partial)`` where ``partial`` is true when any page said its
    scan was incomplete. Raises :class:`SearchError` on a tool error or when
    the listing does not end within :data:`MAX_LISTING_PAGES` pages.
    """
    ids: set[str] = set()
    partial = False
    cursor = None
    for _ in range(MAX_LISTING_PAGES):
        args: dict[str, Any] = {"query": "", "limit": MAX_LIMIT, "fields": ["id"]}
        if cursor:
            args["cursor"] = cursor
        page = await search.call(args)
        ids.update(r["id"] for r in page.get("results", []) if isinstance(r, dict) and "id" in r)
        partial = partial or bool(page.get("partial"))
        cursor = page.get("next_cursor")
        if not cursor:
            return ids, partial
    raise SearchError(f"the corpus listing did not end within {MAX_LISTING_PAGES} pages")


async def run_case(search: McpSearch, case: QueryCase, mode: str, k: int) -> QueryOutcome:
    """Search one query in one mode; a tool error becomes ``error_code`` (transport errors propagate)."""
    outcome = QueryOutcome(line=case.line, group=case.group, mode=mode)
    args: dict[str, Any] = {"query": case.query, "limit": k, "retrieval_mode": mode, "fields": RESULT_FIELDS}
    if case.scope:
        args["scope"] = case.scope
    start = time.perf_counter()
    try:
        page = await search.call(args)
        outcome.effective_mode = page.get("effective_mode")
        outcome.semantic_status = page.get("semantic_status")
        results = list(page.get("results", []))
        partial = bool(page.get("partial"))
        cursor = page.get("next_cursor")
        for _ in range(MAX_TOPUP_PAGES):  # only when the byte cap cut the page short
            if len(results) >= k or not cursor:
                break
            more = await search.call({"query": case.query, "limit": k - len(results), "cursor": cursor,
                                      "retrieval_mode": mode, "fields": RESULT_FIELDS,
                                      **({"scope": case.scope} if case.scope else {})})
            results += more.get("results", [])
            partial = partial or bool(more.get("partial"))
            cursor = more.get("next_cursor")
    except SearchError as exc:
        outcome.error_code = exc.code or "tool_error"
        return outcome
    outcome.latency_ms = (time.perf_counter() - start) * 1000.0
    outcome.results = results[:k]
    outcome.ranked_ids = [r.get("id", "") for r in outcome.results]
    outcome.partial = partial
    return outcome


async def evaluate_async(url: str, cases: Sequence[QueryCase], modes: Sequence[str], k: int,
                         *, timeout: float = 60.0) -> tuple[dict[str, Any] | None, list[tuple[int, str, str]]]:
    """Check the gold against the corpus listing, then run every case in every mode.

    Returns ``(report, dangling)``: when ``dangling`` is non-empty nothing was
    searched and ``report`` is ``None``. Raises :class:`SearchError` when the
    gateway cannot be used.
    """
    async with McpSearch(url, timeout=timeout) as search:
        corpus, partial = await list_corpus_ids(search)
        missing = dangling_ids(cases, corpus)
        if missing:
            return None, missing
        outcomes = [await run_case(search, case, mode, k) for mode in modes for case in cases if case.runs_in(mode)]
    report = summarize(cases, outcomes, k=k, modes=modes, corpus_size=len(corpus))
    report["corpus_listing_partial"] = partial
    return report, []


def _describe_failure(exc: BaseException, url: str) -> str:
    """A printable reason for a transport failure: URL, HTTP status or exception type — no message bodies."""
    import httpx

    leaves: list[BaseException] = []

    def walk(e: BaseException) -> None:
        if isinstance(e, BaseExceptionGroup):
            for sub in e.exceptions:
                walk(sub)
        else:
            leaves.append(e)

    walk(exc)
    for leaf in leaves:
        if isinstance(leaf, SearchError):
            return str(leaf)
        if isinstance(leaf, httpx.HTTPStatusError):
            return f"{url} answered HTTP {leaf.response.status_code}"
        if isinstance(leaf, httpx.ConnectError):
            return f"cannot connect to {url}"
        if isinstance(leaf, httpx.TimeoutException):
            return f"{url} timed out"
    return f"MCP call to {url} failed ({type(leaves[0]).__name__ if leaves else type(exc).__name__})"


# ------------------------------------------------------------------- the CLI
def _modes(value: str) -> list[str]:
    modes = [m.strip() for m in value.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if not modes or bad or len(set(modes)) != len(modes):
        raise argparse.ArgumentTypeError(f"expected a comma-separated subset of {','.join(MODES)}")
    return modes


def _k(value: str) -> int:
    try:
        k = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError("must be an integer") from None
    if not 1 <= k <= MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"must be between 1 and {MAX_LIMIT} (search_lessons' page limit)")
    return k


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Handler of ``s3rm evaluate``; returns the exit code (module docstring)."""
    import anyio

    err = sys.stderr
    try:
        cases = load_queries(args.query_file)
    except QueryFileError as exc:
        print(f"s3rm evaluate: invalid query file: {exc}", file=err)
        return 2
    except (OSError, UnicodeDecodeError) as exc:
        print(f"s3rm evaluate: cannot read the query file ({type(exc).__name__})", file=err)
        return 2
    url = (args.mcp_url or os.environ.get("S3RM_MCP_URL")
           or read_env_file(DEV_STACK_ENV_FILE).get("S3RM_MCP_URL") or DEFAULT_MCP_URL)
    try:
        report, missing = anyio.run(lambda: evaluate_async(url, cases, args.modes, args.k, timeout=args.timeout))
    except Exception as exc:  # noqa: BLE001 - every failure is reported without details that could carry text
        print(f"s3rm evaluate: gateway error: {_describe_failure(exc, url)}", file=err)
        return 1
    if missing:
        shown = ", ".join(f"line {n} {kind} id {i}" for n, kind, i in missing[:MAX_LISTED])
        more = f" (and {len(missing) - MAX_LISTED} more)" if len(missing) > MAX_LISTED else ""
        print(f"s3rm evaluate: {len(missing)} id(s) not in the corpus — fix the query file or the corpus: "
              f"{shown}{more}", file=err)
        return 1
    print(format_report(report, args.output))
    errors = sum(len(m["errors"]) for m in report["modes"].values())
    if errors:
        print(f"s3rm evaluate: {errors} search call(s) failed (see \"errors\" in the report)", file=err)
        return 1
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``s3rm evaluate`` to the ``s3rm`` parser."""
    p = subparsers.add_parser(
        "evaluate",
        help="measure retrieval quality with a fixed query file (read-only search_lessons over MCP)",
        description="Run every query of QUERY_FILE (JSON Lines: query, expected_ids, group, optional "
                    "retrieval_mode, scope, analogous_ids) through the MCP endpoint's read-only search_lessons "
                    "tool in each mode and print bounded metrics: recall@1/5/k, MRR, nDCG@k, p50/p95 latency, "
                    "fallback and partial counts, analogous recall, repeated solutions, results lacking "
                    "evidence or applicability. Query text is never printed. Exit 1 when an expected id is "
                    "not in the corpus or the gateway fails; 2 on usage errors. See eval/README.md.",
    )
    p.add_argument("query_file", metavar="QUERY_FILE", type=Path, help="JSON Lines query file (eval/*.queries.jsonl)")
    p.add_argument("--mcp-url", help="MCP endpoint (default: $S3RM_MCP_URL, else the running dev stack's "
                                      f"gateway from .dev/stack.env, else {DEFAULT_MCP_URL})")
    p.add_argument("--modes", type=_modes, default=list(MODES), help="comma-separated retrieval modes "
                   "(default: legacy,hybrid_v1)")
    p.add_argument("--k", type=_k, default=10, help="results per query and the cut-off of recall@k/nDCG@k "
                   "(1-20, default 10)")
    p.add_argument("--output", choices=("json", "text"), default="json", help="report format (default json)")
    p.add_argument("--timeout", type=float, default=60.0, help="HTTP timeout per call in seconds (default 60)")
    p.set_defaults(handler=cmd_evaluate)

"""``s3rm evaluate``: retrieval quality over a fixed query file, through the MCP endpoint.

Contract: docs/retrieval.md#evaluation. The evaluator is an ordinary MCP client (the official
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
   answer is a broken instrument, not a quality result.
3. **Search** every query in every requested mode (sequentially, so latencies
   are comparable) and print bounded metrics (:func:`s3rm.evaluate.metrics.summarize`).

The query file is read by :mod:`s3rm.evaluate.queryset`, the metrics are computed by
:mod:`s3rm.evaluate.metrics`; the MCP client is :mod:`s3rm.mcpsearch` (shared with research-query); this module runs the cases and is the CLI.

Query file line (closed object)::

    {"query": str (1-500 chars), "expected_ids": [id, ...] (1-50, unique),
     "group": one of s3rm.evaluate.queryset.GROUPS (en_paraphrase, ko, ko_ko, ko_multi, ko_en,
              en_ko, mixed, en_en, exact),
     "retrieval_mode": "legacy" | "hybrid_v1"   (optional: run only in that mode),
     "scope": str (optional, passed to search_lessons),
     "analogous_ids": [id, ...]                   (optional, disjoint from expected_ids)}

Metrics (per mode; overall and per group; k = ``--k``, default 10):

* ``recall@1``, ``recall@5``, ``recall@k`` — any-of: a query counts when at
  least one expected id is in its top n (several expected ids mean "any of
  these answers the question").
* ``id_recall@k`` — classic recall: mean share of a query's expected ids in its top k (printed in
  the text table beside the any-of recalls; for queries with several answers it shows how many were found).
* ``score`` — the group's headline figure: recall@5, except in a ``*_multi`` group (several
  relevant Lessons per query), where it is ``id_recall@k`` (the share of relevant Lessons found);
  overall it is the mean of each query's own figure.
* ``mrr`` — mean reciprocal rank of the first expected id within the top k (0 when none).
* ``ndcg@k`` — binary relevance (expected id = gain 1, anything else 0),
  DCG = Σ rel_i / log2(i+1), normalised by the ideal ordering of
  min(|expected|, k) relevant results.
* ``latency_ms`` ``p50``/``p95`` — nearest-rank percentiles of the wall time
  of one query's retrieval (one ``tools/call``; more only when the byte cap
  shortened the first page below k results).
* ``fallback`` — queries that asked for ``hybrid_v1`` but were answered with
  ``effective_mode`` ``legacy``; ``partial`` — responses with ``partial: true``.
* ``analogous_recall@k`` — over queries that carry
  ``analogous_ids`` only: mean share of those ids in the top k. Only
  ``search_lessons`` is called, so this measures whether search surfaces the
  cross-domain neighbours a person marked, not ``find_analogies``.
* ``solution_repeat@5`` — share of queries (with at least two results)
  whose top 5 holds two results with the same normalised ``reusable_lesson``
  (NFKC, case-folded, digits and punctuation dropped, whitespace collapsed —
  so two Lessons that teach the same thing about the same services differ
  only by date and still count as a repeat).
* ``lacking_evidence``, ``lacking_applicability``, ``lacking_either`` —
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
import time
from pathlib import Path
from typing import Any, Sequence

from s3rm.errors import CliError
from s3rm.evaluate.metrics import MAX_LISTED, QueryOutcome, format_report, summarize
from s3rm.evaluate.queryset import MODES, QueryCase, QueryFileError, dangling_ids, load_queries
from s3rm.mcpsearch import DEFAULT_MCP_URL, McpSearch, SearchError, describe_failure, resolve_mcp_url

__all__ = ["McpSearch", "SearchError", "cmd_evaluate", "register"]

#: Fields requested per result for the quality shares (docs/retrieval.md#evaluation).
RESULT_FIELDS = ["id", "reusable_lesson", "applicability", "citations"]
#: search_lessons' maximum page size.
MAX_LIMIT = 20
#: Upper bound on corpus-listing pages (20 ids each): 20,000 Lessons.
MAX_LISTING_PAGES = 1000
#: Upper bound on extra pages fetched when the byte cap shortened a page below k results.
MAX_TOPUP_PAGES = 3


# ------------------------------------------------------------------ the client
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

    try:
        cases = load_queries(args.query_file)
    except QueryFileError as exc:
        raise CliError(f"invalid query file: {exc}", 2)
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read the query file ({type(exc).__name__})", 2)
    url = resolve_mcp_url(args.mcp_url)
    try:
        report, missing = anyio.run(lambda: evaluate_async(url, cases, args.modes, args.k, timeout=args.timeout))
    except Exception as exc:  # noqa: BLE001 - every failure is reported without details that could carry text
        raise CliError(f"gateway error: {describe_failure(exc, url)}", 1)
    if missing:
        shown = ", ".join(f"line {n} {kind} id {i}" for n, kind, i in missing[:MAX_LISTED])
        more = f" (and {len(missing) - MAX_LISTED} more)" if len(missing) > MAX_LISTED else ""
        raise CliError(f"{len(missing)} id(s) not in the corpus — fix the query file or the corpus: "
                       f"{shown}{more}", 1)
    print(format_report(report, args.output))
    errors = sum(len(m["errors"]) for m in report["modes"].values())
    if errors:
        raise CliError(f"{errors} search call(s) failed (see \"errors\" in the report)", 1)
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
    p.set_defaults(handler=cmd_evaluate, error_prefix="s3rm evaluate")

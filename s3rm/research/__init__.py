"""``s3rm research-query``: the memory searched whole and facet by facet, optional rerank and cited synthesis.

Contract: docs/research-tools.md#research-query. Modules: :mod:`.facets`
(the parallel searches over MCP and their order), :mod:`.endpoints` (the
rerank and chat calls), :mod:`.citations` (the citation check of a synthesis);
its endpoint settings: :meth:`s3rm.settings.CliSettings.research`.

1. Four ``search_lessons`` calls in parallel over one MCP session, one without
   a facet and one per facet (:mod:`s3rm.research.facets`): the unrestricted
   list's order first, then what only the facets found (fused with the gateway's
   own ``rrf_v10`` code), at most :data:`POOL` candidates.
2. ``--rerank``: the candidates are reordered by the OpenAI-compatible rerank
   endpoint (:func:`s3rm.research.endpoints.rerank`).
3. The best ``--limit`` results are printed with the searches (and ranks) that
   found them, their reusable lesson and citations.
4. ``--synthesize``: the chat endpoint gets these results only; the answer's
   ``[Lesson:id]`` citations are checked (:mod:`s3rm.research.citations`):
   ids outside the results are removed and reported, and an answer left with
   no valid citation is refused.

Nothing is logged; the query is never printed (not even in errors), nor a
Lesson body outside the result listing itself. Endpoint errors name the
endpoint's host and an HTTP status or exception type.

Exit codes: 0 done; 1 the gateway failed, ``--rerank`` / ``--synthesize``
failed, or the synthesis was refused (results are still printed); 2 usage or
configuration (bad query or limit, an endpoint flag without its
``S3RM_RESEARCH_*_URL``, an external endpoint without its opt-in).
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field, replace
from typing import Any

from gateway.config import ConfigError
from gateway.retrieval.hybrid.fusion import RANKING_VERSION
from s3rm.errors import CliError
from s3rm.mcpsearch import DEFAULT_MCP_URL, describe_failure, resolve_mcp_url
from s3rm.research.citations import CheckedAnswer, build_messages, check_citations
from s3rm.research.endpoints import EndpointError, chat, rerank
from s3rm.research.facets import DEPTH, FacetRun, ResearchHit, VersionMismatch, fuse_facets, search_facets
from s3rm.settings import CliSettings, ResearchSettings

__all__ = ["ResearchReport", "run_research", "format_text", "to_json", "register", "POOL", "MAX_LIMIT"]

#: Fused candidates kept for reranking (search_lessons' page maximum).
POOL = DEPTH
MAX_LIMIT = 20
MAX_QUERY_CHARS = 500


@dataclass
class ResearchReport:
    """Everything one run produced (printed by :func:`format_text` / :func:`to_json`)."""

    runs: list[FacetRun]
    results: list[ResearchHit]
    reranked: bool = False
    rerank_error: str | None = None
    synthesis: CheckedAnswer | None = None
    synthesis_error: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """True when a requested step failed or the synthesis was refused (exit code 1)."""
        return bool(self.rerank_error or self.synthesis_error or (self.synthesis and self.synthesis.refused))


def _document(hit: ResearchHit, chars: int) -> str:
    f = hit.fields
    text = "\n".join(x for x in (f.get("title", ""), f.get("reusable_lesson", ""), f.get("applicability", "")) if x)
    return text[:chars]


def run_research(url: str, query: str, *, settings: ResearchSettings, limit: int = 5, scope: str | None = None,
                 do_rerank: bool = False, do_synthesize: bool = False, timeout: float = 60.0) -> ResearchReport:
    """Steps 1–4 of the module docstring. Gateway failures propagate (see :func:`describe_failure`);
    rerank and chat failures are recorded in the report."""
    import anyio

    runs = anyio.run(lambda: search_facets(url, query, scope=scope, timeout=timeout))
    pool = fuse_facets(runs, POOL)
    report = ResearchReport(runs=runs, results=pool[:limit])
    for run in runs:
        if run.effective_mode != "hybrid_v1":
            report.notes.append(f"search {run.facet} was answered by {run.effective_mode or 'an unknown mode'} "
                                f"(semantic_status {run.semantic_status or '?'}): its votes are full-text ranks")
    if do_rerank and pool and settings.rerank is not None:
        try:
            scores = rerank(settings.rerank, query, [_document(h, settings.document_chars) for h in pool],
                            timeout=settings.timeout_seconds)
            order = sorted(range(len(pool)), key=lambda i: (-scores[i], i))
            report.results = [replace(pool[i], rerank_score=round(scores[i], 6)) for i in order][:limit]
            report.reranked = True
        except EndpointError as exc:
            report.rerank_error = str(exc)
    if do_synthesize and settings.llm is not None:
        if not report.results:
            report.synthesis_error = "no results to synthesise from"
        else:
            messages = build_messages(query, [{"id": h.id, **h.fields} for h in report.results],
                                      settings.document_chars)
            try:
                answer = chat(settings.llm, messages, max_tokens=settings.max_tokens, timeout=settings.timeout_seconds)
                report.synthesis = check_citations(answer, [h.id for h in report.results])
            except EndpointError as exc:
                report.synthesis_error = str(exc)
    return report


def to_json(report: ResearchReport) -> dict[str, Any]:
    """The JSON output object (docs/research-tools.md#research-output); no query text."""
    out: dict[str, Any] = {
        "ranking_version": RANKING_VERSION,
        "facets": {r.facet: {"effective_mode": r.effective_mode, "semantic_status": r.semantic_status,
                             "partial": r.partial, "results": len(r.results)} for r in report.runs},
        "results": [{"id": h.id, "score": h.score, "facets": h.facets,
                     **({"rerank_score": h.rerank_score} if h.rerank_score is not None else {}), **h.fields}
                    for h in report.results],
        "reranked": report.reranked,
        "notes": report.notes,
    }
    if report.rerank_error:
        out["rerank_error"] = report.rerank_error
    if report.synthesis is not None or report.synthesis_error:
        s = report.synthesis
        out["synthesis"] = {
            "text": s.text if s else None, "cited": list(s.cited) if s else [],
            "removed_citations": list(s.removed) if s else [], "refused": bool(s and s.refused),
            **({"error": report.synthesis_error} if report.synthesis_error else {}),
        }
    return out


def format_text(report: ResearchReport) -> str:
    """The plain-text listing: header, one block per result, then the synthesis."""
    facets = ", ".join(f"{r.facet} {r.effective_mode or '?'}/{r.semantic_status or '?'} ({len(r.results)})"
                       for r in report.runs)
    how = "reranked" if report.reranked else f"fused with {RANKING_VERSION}"
    lines = [f"research-query: {len(report.results)} result(s), {how}; searches: {facets}"]
    lines += [f"note: {n}" for n in report.notes]
    if report.rerank_error:
        lines.append(f"rerank failed, fused order kept: {report.rerank_error}")
    for n, h in enumerate(report.results, start=1):
        found = ", ".join(f"{f} #{rank}" for f, rank in h.facets.items())
        extra = f"  rerank {h.rerank_score:.3f}" if h.rerank_score is not None else ""
        lines.append(f"\n{n}. [Lesson:{h.id}]  score {h.score:.3f}{extra}  found by: {found}")
        f = h.fields
        if f.get("title"):
            lines.append(f"   {f['title']}")
        meta = ", ".join(x for x in (f.get("confidence"), f.get("record_origin")) if x)
        if meta:
            lines.append(f"   ({meta})")
        if f.get("reusable_lesson"):
            lines.append(f"   lesson: {f['reusable_lesson']}")
        citations = f.get("citations") or []
        if citations:
            lines.append("   citations:")
            for c in citations:
                where = f" <{c['url']}>" if c.get("url") else ""
                lines.append(f"   - {c.get('citation', '')}{where}")
        else:
            lines.append("   citations: none")
    if report.synthesis_error:
        lines.append(f"\nsynthesis failed: {report.synthesis_error}")
    elif report.synthesis is not None:
        s = report.synthesis
        if s.removed:
            lines.append(f"\nsynthesis: removed {len(s.removed)} citation(s) of Lessons outside the results: "
                         + ", ".join(dict.fromkeys(s.removed)))
        if s.refused:
            lines.append("\nsynthesis refused: the answer cites no Lesson among the results")
        else:
            lines.append(f"\nsynthesis (cites {', '.join(s.cited)}):\n{s.text}")
    return "\n".join(lines)


def cmd_research_query(args: argparse.Namespace) -> int:
    """Handler of ``s3rm research-query`` (module docstring); returns the exit code or raises CliError."""
    query = args.query
    if not query.strip() or len(query) > MAX_QUERY_CHARS:
        raise CliError(f"QUERY must be non-blank and at most {MAX_QUERY_CHARS} characters", 2)
    if not 1 <= args.limit <= MAX_LIMIT:
        raise CliError(f"--limit must be between 1 and {MAX_LIMIT}", 2)
    try:
        settings = CliSettings().research()
    except ConfigError as exc:
        raise CliError(f"configuration: {exc}", 2) from exc
    if args.rerank and settings.rerank is None:
        raise CliError("--rerank needs S3RM_RESEARCH_RERANK_URL (an OpenAI-compatible rerank endpoint)", 2)
    if args.synthesize and settings.llm is None:
        raise CliError("--synthesize needs S3RM_RESEARCH_LLM_URL and S3RM_RESEARCH_LLM_MODEL "
                       "(an OpenAI-compatible chat endpoint)", 2)
    url = resolve_mcp_url(args.mcp_url)
    try:
        report = run_research(url, query, settings=settings, limit=args.limit, scope=args.scope,
                              do_rerank=args.rerank, do_synthesize=args.synthesize, timeout=args.timeout)
    except VersionMismatch as exc:
        raise CliError(str(exc), 1) from exc
    except Exception as exc:  # noqa: BLE001 - reported without details that could carry text
        raise CliError(f"gateway error: {describe_failure(exc, url)}", 1) from exc
    if args.output == "json":
        print(json.dumps(to_json(report), ensure_ascii=False, indent=2))
    else:
        print(format_text(report))
    s = report.synthesis
    if s is not None and s.removed:
        print(f"s3rm research-query: removed {len(s.removed)} citation(s) of Lessons outside the results",
              file=sys.stderr)
    if s is not None and s.refused:
        print("s3rm research-query: synthesis refused (no valid citation)", file=sys.stderr)
    for error in (report.rerank_error, report.synthesis_error):
        if error:
            print(f"s3rm research-query: {error}", file=sys.stderr)
    return 1 if report.failed else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``s3rm research-query`` to the ``s3rm`` parser."""
    p = subparsers.add_parser(
        "research-query",
        help="search the memory whole and facet by facet (situation, approach, mechanism), optionally rerank "
             "and write a synthesis that cites only the results",
        description="Run search_lessons without a facet and once per facet (situation, approach, mechanism) in "
                    "parallel through the MCP endpoint; the unfaceted ranking orders the results, the facet "
                    "rankings (fused with the gateway's rrf_v10 code) add what it lacks; print each result "
                    "with the searches that found it, its reusable lesson and citations. --rerank and "
                    "--synthesize call the OpenAI-compatible endpoints set in S3RM_RESEARCH_RERANK_URL and "
                    "S3RM_RESEARCH_LLM_URL/_MODEL. Read-only. See docs/research-tools.md.",
    )
    p.add_argument("query", metavar="QUERY", help="the research question (1-500 characters; never printed)")
    p.add_argument("--scope", help="a named search scope of the gateway")
    p.add_argument("--limit", type=int, default=5, help=f"results to print (1-{MAX_LIMIT}, default 5)")
    p.add_argument("--rerank", action="store_true", help="reorder with the rerank endpoint")
    p.add_argument("--synthesize", action="store_true", help="write a cited answer with the chat endpoint")
    p.add_argument("--output", choices=("text", "json"), default="text", help="output format (default text)")
    p.add_argument("--mcp-url", help="MCP endpoint (default: $S3RM_MCP_URL, else the running dev stack's "
                                      f"gateway from .dev/stack.env, else {DEFAULT_MCP_URL})")
    p.add_argument("--timeout", type=float, default=60.0, help="HTTP timeout per MCP call in seconds (default 60)")
    p.set_defaults(handler=cmd_research_query, error_prefix="s3rm research-query")

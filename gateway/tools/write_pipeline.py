"""The one write pipeline: the shared handler of the write tools (docs/tools.md#write-semantics).

Each write tool module supplies its :class:`~gateway.domain.writes.WriteOperation`
(marker tag/kind, parse, plan and replay rules, answer shape, whether it
creates the page); :func:`write_handler` runs it. For one call, in order
(every refusal changes nothing in the wiki):

1. validate and normalise the arguments (:func:`gateway.domain.writes.parse_request`
   with the operation's ``parse``) → ``invalid_argument`` with ``field`` and ``rule``;
2. read the target Lesson (``not_found`` when it must exist);
3. look for the ``operation_id`` in the Lesson's history
   (:mod:`gateway.domain.idempotency`): same request → ``replayed`` response
   (nothing written); another request → ``idempotency_conflict``; a create
   whose id is taken by another request → ``lesson_exists``;
4. plan the new page (the operation's ``plan``): ``rule_violation``,
   ``revision_conflict``, ``not_found``, ``not_configured``; in github mode
   the marker also records the verified GitHub login and numeric id (``gh=``, ``ghid=``,
   docs/tools.md#attribution) — the provenance fields (author, added_by, …)
   stay the gateway account, as hooks_spec HS10 requires;
5. run the hooks_spec checker on (current, planned) — any violation refuses
   with ``rule_violation`` naming the rule (GW12);
6. save conditionally (``gateway/wiki/edit.py``): a concurrent change →
   the history is read again — if it was this very request (a parallel
   retry) the answer is ``replayed``, otherwise ``revision_conflict`` /
   ``lesson_exists`` with ``current_revision_id`` in ``details``;
7. after a create or a revise, the semantic-index dirty hint
   (docs/tools.md#dirty-hint); a failing hint is logged and never fails the write;
8. respond with ``current_revision_id`` (docs/tools.md#current-revision-id) and,
   when semantic retrieval is enabled and a create or revise leaves a facet longer
   than the embedding window, ``embedding_truncated`` (docs/hybrid-search.md#truncation-report).

Error codes: ``invalid_argument`` (``field``, ``rule``), ``rule_violation``
(``rule``), ``not_found``, ``revision_conflict`` / ``lesson_exists``
(``details.current_revision_id``), ``idempotency_conflict``
(``details.revision_id`` of the earlier write), ``not_configured``,
``wiki_unavailable`` (retryable; when MediaWiki may have applied the write
the message says to retry with the same operation_id), and the read tools'
``wiki_permission_denied`` / ``malformed_lesson`` / ``wiki_error`` /
``backend_unavailable``.

Never logs arguments, Lesson content, summaries or keys.
"""
from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, Callable

from gateway.core.errors import ToolError, error_payload
from gateway.domain.idempotency import find_prior_write
from gateway.domain.markers import attribute_summary
from gateway.domain.model import LessonSnapshot
from gateway.config.schema import Schema
from gateway.domain.repository import EditConflict, PageExists, PageMissing, WikiUnavailable
from gateway.domain.writes import Plan, Request, WriteEnv, WriteOperation, WriteRefused, parse_request
from gateway.tools.contract import ToolContext
from gateway.tools.read_path import read_tool, repository
from gateway.tools.readability import check_readable
from gateway.wiki import edit
from gateway.domain.checker import check_revision

__all__ = ["WriteToolError", "write_handler", "agent_account"]

log = logging.getLogger("s3rm.writes")


class WriteToolError(ToolError):
    """A ToolError that also carries top-level ``field`` and ``rule`` (like the dispatcher's invalid_argument)."""

    def __init__(self, code: str, message: str, *, field: str | None = None, rule: str | None = None,
                 retryable: bool = False, details: dict | None = None):
        super().__init__(code, message, retryable=retryable, details=details)
        self.field = field
        self.rule = rule

    def payload(self) -> dict[str, Any]:
        """``{"error": {code, message, retryable, field?, rule?, details?}}``."""
        return error_payload(self.code, self.message, retryable=self.retryable, details=self.details,
                             field=self.field, rule=self.rule)


def _refused(exc: WriteRefused) -> WriteToolError:
    return WriteToolError(exc.code, exc.message, field=exc.field or None, rule=exc.rule, details=exc.details)


def agent_account(ctx: ToolContext, repo) -> str:
    """MediaWiki user name the gateway saves as (author/added_by/… and marker ownership).

    Order: the repository's ``account_name`` (attribute or method), the wiki's
    ``meta=userinfo`` for a MediaWiki repository, else the bot-password login
    name from the configuration without its ``@suffix`` (MediaWiki's form:
    underscores as spaces, first letter upper case).
    """
    name = getattr(repo, "account_name", None)
    if callable(name):
        name = name()
    if not name and getattr(repo, "client", None) is not None:
        name = edit.account_name(repo.client)
    if not name:
        raw = (getattr(ctx.config, "wiki_username", "") or "").split("@", 1)[0].replace("_", " ").strip()
        name = raw[:1].upper() + raw[1:]
    if not name:
        raise WriteToolError("not_configured", "the gateway's wiki account is not configured (S3RM_WIKI_USERNAME)")
    return str(name)


def _hint(ctx: ToolContext, lesson_id: str) -> None:
    hooks: list[Callable[[str], None]] = []
    direct = getattr(ctx, "index_hint", None)
    if callable(direct):
        hooks.append(direct)
    retrieval = getattr(ctx, "retrieval", None)
    if retrieval is not None and callable(getattr(retrieval, "hint_dirty", None)):
        hooks.append(retrieval.hint_dirty)
    for hook in hooks:
        try:
            hook(lesson_id)
        except Exception as exc:  # a hint never fails or undoes a write (docs/tools.md#dirty-hint)
            log.warning("dirty hint failed exception=%s", type(exc).__name__)


def _truncation(ctx: ToolContext, page) -> dict[str, Any] | None:
    """``embedding_truncated`` of a write that changes embedded text (docs/hybrid-search.md#truncation-report);
    None without semantic retrieval or when nothing is cut. Never fails the write."""
    report = getattr(getattr(ctx, "retrieval", None), "embedding_truncation", None)
    if not callable(report):
        return None
    try:
        return report(page) or None
    except Exception as exc:  # advisory only
        log.warning("truncation report failed exception=%s", type(exc).__name__)
        return None


def _duplicates(ctx: ToolContext, repo, plan_: Plan) -> dict[str, Any]:
    retrieval = getattr(ctx, "retrieval", None)
    check = getattr(retrieval, "duplicate_candidates", None)
    if not callable(check):
        return {"status": "disabled", "items": []}
    try:
        result = check(repo, plan_.request.lesson_id, plan_.page)
        if isinstance(result, dict) and "status" in result and "items" in result:
            return result
    except Exception as exc:  # advisory only
        log.warning("duplicate check failed exception=%s", type(exc).__name__)
    return {"status": "error", "items": []}


def _replayed(operation: WriteOperation, request: Request, snapshot: LessonSnapshot, prior,
              schema: Schema) -> dict[str, Any]:
    fields = operation.replay(request, snapshot, prior.marker, schema)
    return operation.respond("replayed", fields, snapshot.revision_id, prior.revision_id, None)


def _prior_outcome(operation: WriteOperation, repo, request: Request, account: str,
                   keys, schema: Schema) -> tuple[LessonSnapshot | None, dict | None]:
    """Re-read the Lesson and its history: (snapshot, replay response) — raises on a conflicting prior.

    The snapshot is read BEFORE the history scan, so a plan made on it is never newer than what the scan
    saw (a write landing in between makes the conditional save conflict, and the scan is repeated). A
    prior write found by the scan may be newer than that snapshot (an identical parallel retry saved it in
    between): the replay answer is then built from a fresh snapshot that holds it, not from the older one.
    """
    snapshot = repo.get_snapshot(request.lesson_id)
    if snapshot is None:
        return None, None
    scan = find_prior_write(repo, request.lesson_id, request.operation_id, account=account, keys=keys,
                            schema=schema)
    if scan.prior is None:
        return snapshot, None
    if scan.prior.matches(request.tag, request.kind, request.digest):
        if snapshot.revision_id < scan.prior.revision_id:
            snapshot = repo.get_snapshot(request.lesson_id) or snapshot
        return snapshot, _replayed(operation, request, snapshot, scan.prior, schema)
    raise WriteToolError(
        "idempotency_conflict",
        f"operation_id was already used on Lesson {request.lesson_id} for a different request "
        f"({scan.prior.marker.tag} {scan.prior.marker.kind}); use a new operation_id for a new write",
        field="operation_id", rule="GW01", details={"revision_id": scan.prior.revision_id})


def _conflict(operation: WriteOperation, request: Request, snapshot: LessonSnapshot | None) -> WriteToolError:
    current = snapshot.revision_id if snapshot else None
    if operation.creates:
        return WriteToolError("lesson_exists", f"Lesson {request.lesson_id} already exists (created by another "
                              "request); choose another lesson_id or read it with get_lesson",
                              field="lesson_id", rule="GW09", details={"current_revision_id": current})
    return WriteToolError("revision_conflict", f"Lesson {request.lesson_id} changed while this write was being "
                          "saved; read it again with get_lesson and retry with a new operation_id if needed",
                          rule="GW10", details={"current_revision_id": current})


def run_write(operation: WriteOperation, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Execute ``operation`` with ``arguments`` (see the module docstring). Returns the tool's result object."""
    try:
        return _run(operation, arguments, ctx)
    except WriteRefused as exc:
        raise _refused(exc) from None


def _run(operation: WriteOperation, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    schema = ctx.schema
    request = parse_request(operation, arguments, schema)
    repo = repository(ctx)
    account = agent_account(ctx, repo)
    keys = dict(getattr(ctx.config, "revision_hmac_keys", {}) or {})
    env = WriteEnv(account=account, now=ctx.clock(), keys=keys,
                   active_kid=getattr(ctx.config, "revision_hmac_active_key_id", ""), exists=repo.exists, schema=schema)

    snapshot, replay = _prior_outcome(operation, repo, request, account, keys, schema)
    if replay is not None:
        return replay
    if operation.creates and snapshot is not None:
        raise _conflict(operation, request, snapshot)
    if not operation.creates and snapshot is None:
        raise WriteRefused("not_found", f"Lesson {request.lesson_id} does not exist", field=operation.lesson_field)
    planned = operation.plan(request, snapshot, env)
    if ctx.principal.kind == "github" and ctx.principal.subject:
        planned = replace(planned, summary=attribute_summary(planned.summary, ctx.principal.subject, schema,
                                                             ctx.principal.user_id or None))

    violations = check_revision(
        snapshot.wikitext if snapshot is not None else None, planned.wikitext, account, env.now, planned.summary,
        keys=keys, existing_lessons=planned.existing_lessons, lesson_id=request.lesson_id,
        parent_revision_id=planned.base_revision_id or 0, agent_accounts={account}, schema=schema)
    if violations:
        first = violations[0]
        raise WriteToolError("rule_violation", f"the write would break hooks_spec {first.rule_id}: {first.message}",
                             rule=first.rule_id, details={"rules": sorted({v.rule_id for v in violations})})

    # nothing is saved that get_lesson could not return whole (docs/read-path.md#read-back)
    check_readable(planned.page, request.lesson_id, ctx.budget, schema, WriteToolError)

    try:
        saved = edit.save_lesson(repo, request.lesson_id, planned.wikitext, planned.summary,
                                 base_revision_id=planned.base_revision_id)
    except (EditConflict, PageExists):
        saved = None
    except PageMissing:
        raise WriteToolError("not_found", f"Lesson {request.lesson_id} was deleted meanwhile",
                             field="lesson_id") from None
    except WikiUnavailable as exc:
        if getattr(exc, "maybe_applied", False):
            raise WriteToolError("wiki_unavailable", "the wiki did not confirm the save; it may have been applied. "
                                 "Retry the same request with the same operation_id: it is replayed if it was "
                                 "applied", retryable=True) from None
        raise
    if saved is None or saved.nochange:
        snapshot, replay = _prior_outcome(operation, repo, request, account, keys, schema)
        if replay is not None:
            return replay
        raise _conflict(operation, request, snapshot)

    if planned.dirty:
        _hint(ctx, request.lesson_id)
    # a create, and a revise that changed embedded text, are checked for near copies (advisory)
    duplicates = _duplicates(ctx, repo, planned) if operation.creates or planned.dirty else None
    answer = operation.respond(operation.success_status, planned.response, saved.revision_id, saved.revision_id,
                               duplicates)
    cut = _truncation(ctx, planned.page) if planned.dirty else None
    if cut:
        answer["embedding_truncated"] = cut
    return answer


def write_handler(operation: WriteOperation) -> Callable[[dict[str, Any], ToolContext], dict[str, Any]]:
    """The handler of the write tool ``operation`` (repository errors mapped like the read tools')."""

    @read_tool
    def handler(arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return run_write(operation, arguments, ctx)

    handler.__name__ = f"{operation.name}_handler"
    return handler

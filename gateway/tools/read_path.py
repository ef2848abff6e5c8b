"""Helpers shared by the read tools: repository access, error mapping, cursors, page fitting.

Error mapping (:func:`read_tool`): repository failures become specific
:class:`~gateway.core.errors.ToolError` codes so a wiki problem is never a 500:

=========================  ======================  =========
exception                  ToolError code          retryable
=========================  ======================  =========
WikiUnavailable            ``wiki_unavailable``     yes
PermissionDenied           ``wiki_permission_denied`` no
PageFormatError            ``malformed_lesson``     no
other RepositoryError      ``wiki_error``           no
=========================  ======================  =========

Messages never contain Lesson content or query text.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence, TypeVar

from gateway.core.errors import ToolError
from gateway.domain.codec import PageFormatError
from gateway.domain.repository import PermissionDenied, RepositoryError, WikiUnavailable
from gateway.tools.cursors import CursorCodec, fingerprint, invalid_cursor
from gateway.tools.search_mode import choose_mode
from gateway.tools.contract import OutputBudget, ToolContext

__all__ = ["read_tool", "repository", "Pager", "fit_page", "retrieval_state"]

T = TypeVar("T")


def read_tool(handler: Callable[[dict[str, Any], ToolContext], dict[str, Any]]):
    """Decorate a read handler: map repository errors to ToolError (table in the module doc)."""

    @functools.wraps(handler)
    def wrapped(arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        try:
            return handler(arguments, ctx)
        except WikiUnavailable as exc:
            raise ToolError("wiki_unavailable", "The wiki did not answer in time or is overloaded "
                            f"({exc.wiki_code or 'unavailable'}); retry shortly.", retryable=True) from None
        except PermissionDenied as exc:
            raise ToolError("wiki_permission_denied", "The gateway's wiki account may not read this "
                            f"({exc.wiki_code or 'denied'}); tell the server operator.") from None
        except PageFormatError:
            raise ToolError("malformed_lesson", "The Lesson page is not in the expected format (it was edited "
                            "outside the forms); the auditor reports it. Other Lessons are unaffected.") from None
        except RepositoryError as exc:
            raise ToolError("wiki_error", f"The wiki refused the request ({exc.wiki_code or 'error'}).") from None

    return wrapped


def repository(ctx: ToolContext):
    """The context's Lesson repository; ToolError ``backend_unavailable`` when the server has none."""
    if ctx.repository is None:
        raise ToolError("backend_unavailable", "This server has no Lesson store configured.", retryable=True)
    return ctx.repository


class Pager:
    """Cursor handling for one result list: ``tool`` (list name) + request fingerprint."""

    def __init__(self, ctx: ToolContext, tool: str, request: dict[str, Any]):
        self.codec = CursorCodec(ctx.config.cursor_secret,
                                 keys=ctx.cursor_ring or dict(ctx.config.cursor_keys) or None)
        self.tool = tool
        self.fp = fingerprint({"tool": tool, **request})

    def position(self, cursor: str | None, default: Any = None) -> Any:
        """Position stored in ``cursor`` (``default`` without one); ToolError ``invalid_cursor`` otherwise."""
        if cursor is None:
            return default
        return self.codec.decode(cursor, self.tool, self.fp)

    def offset(self, cursor: str | None) -> int:
        """Integer offset stored in ``cursor`` (0 without one)."""
        value = self.position(cursor, {"o": 0})
        offset = value.get("o") if isinstance(value, dict) else None
        if not isinstance(offset, int) or offset < 0:
            raise invalid_cursor("The cursor is malformed.")
        return offset

    def cursor(self, position: Any) -> str:
        """Signed cursor for ``position``."""
        return self.codec.encode(self.tool, self.fp, position)

    def next_offset(self, offset: int, returned: int, total: int) -> str | None:
        """Cursor for the item after the ``returned`` ones, None when the list is exhausted."""
        nxt = offset + returned
        return self.cursor({"o": nxt}) if nxt < total else None


def fit_page(budget: OutputBudget, items: Sequence[T], build: Callable[[Sequence[T]], dict[str, Any]],
             shrink: Callable[[T, int], T] | None = None, max_chars: int = 20000) -> tuple[dict[str, Any], int]:
    """The largest prefix of ``items`` whose result fits the byte cap: ``(result, n)``.

    When not even the first item fits and ``shrink(item, cap)`` is given, the
    first item's long text is shortened to the largest per-field character
    ``cap`` that fits (binary search), so a page always makes progress.
    Raises ToolError ``output_too_large`` when nothing can fit.
    """
    result, n = budget.fit_prefix(items, build)
    if n or not items or shrink is None:
        return result, n
    lo, hi, best = 0, max_chars, None
    while lo <= hi:
        mid = (lo + hi) // 2
        candidate = build([shrink(items[0], mid)])
        if budget.fits(candidate):
            best, lo = candidate, mid + 1
        else:
            hi = mid - 1
    if best is None:
        raise ToolError("output_too_large", f"One result does not fit the {budget.cap_bytes}-byte response cap "
                        "even when shortened; select fewer fields.")
    return best, 1


def retrieval_state(requested: str, ctx: ToolContext) -> dict[str, Any]:
    """``requested_mode``/``effective_mode``/``semantic_status`` of a legacy answer to a request for mode
    ``requested`` (:attr:`gateway.retrieval.request.SearchRequest.mode`).

    ``semantic_status`` is the hybrid layer's current state (``disabled`` without
    one); handlers that serve ``hybrid_v1`` override the mode and status with
    :func:`gateway.tools.search_mode.choose_mode`. ``semantic_quarantined`` is added when
    Lessons are quarantined (docs/hybrid-search.md#quarantine).
    """
    retrieval = getattr(ctx, "retrieval", None)
    status = retrieval.semantic_status() if retrieval is not None else "disabled"
    out: dict[str, Any] = {"requested_mode": requested, "effective_mode": "legacy", "semantic_status": status}
    quarantined = getattr(retrieval, "quarantined_count", None)
    count = quarantined() if quarantined is not None and status != "disabled" else 0
    if count:
        out["semantic_quarantined"] = count  # a count only, never ids (docs/hybrid-search.md#quarantine)
    return with_progress(out, ctx)


def with_progress(modes: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """``modes`` with ``semantic_progress`` exactly while ``semantic_status`` is ``building``
    (docs/hybrid-search.md#build-progress)."""
    out = {k: v for k, v in modes.items() if k != "semantic_progress"}
    retrieval = getattr(ctx, "retrieval", None)
    if out.get("semantic_status") == "building" and retrieval is not None:
        progress = getattr(retrieval, "semantic_progress", lambda: None)()
        if progress is not None:
            out["semantic_progress"] = progress
    return out


def wants_hybrid(modes: dict[str, str], ctx: ToolContext) -> bool:
    """True when ``hybrid_v1`` was requested and the server has a hybrid retrieval service."""
    return modes["requested_mode"] == "hybrid_v1" and getattr(ctx, "retrieval", None) is not None


def rank_page(ctx: ToolContext, modes: dict[str, str], pager: "Pager", cursor: Any, *,
              hybrid_pager: Callable[[str, str, str], "Pager"], legacy_version: str,
              run_hybrid: Callable[[Any], Any], run_legacy: Callable[[], Any]):
    """The ranking of one page of ``search_lessons`` / ``find_analogies``.

    ``hybrid_v1`` requests go through :func:`gateway.tools.search_mode.choose_mode`
    (first-page fallback, cursor rules); everything else is legacy. The cursor is
    checked before any ranking work. Returns ``(ranked, ranking_version, pager,
    offset, modes)`` with ``modes`` updated to the effective mode and semantic status, and
    ``index_as_of``/``index_lag_seconds`` when ``hybrid_v1`` answered.
    """
    if not wants_hybrid(modes, ctx):
        offset = pager.offset(cursor)
        return run_legacy(), legacy_version, pager, offset, modes
    choice = choose_mode(ctx.retrieval, cursor, hybrid_pager, legacy_version, run_hybrid)
    modes = with_progress({**modes, "effective_mode": choice.mode, "semantic_status": choice.semantic_status}, ctx)
    if choice.hybrid is not None:
        modes.update(ctx.retrieval.freshness())  # docs/hybrid-search.md#freshness
        return choice.hybrid, choice.hybrid.ranking_version, choice.pager, choice.offset, modes
    return run_legacy(), legacy_version, choice.pager, choice.offset, modes

"""``completion/complete`` for prompt arguments and the ``lesson://{id}`` template (docs/transport.md#completions).

Lesson ids come from one bounded repository request (MediaWiki
``list=allpages&apprefix=<typed prefix>`` in the Lesson namespace, at most
:data:`MAX_VALUES`), run as a read (same authorisation and admission class as
the read tools); relation types, confidence values and languages are the
schema's closed lists, filtered by prefix. Free-text arguments complete to nothing.
"""
from __future__ import annotations

from typing import Any

from gateway.core.errors import INTERNAL_ERROR, INVALID_PARAMS, JsonRpcError
from gateway.domain.repository import RepositoryError
from gateway.ops.access import Credentials, authorize
from gateway.tools.dispatcher import Dispatcher
from gateway.transport.prompts import PromptCatalog, argument_values
from gateway.transport.resources import TEMPLATE

__all__ = ["Completions", "MAX_VALUES"]

#: The most values one completion answer carries (the MCP limit).
MAX_VALUES = 100


class Completions:
    def __init__(self, dispatcher: Dispatcher, prompts: PromptCatalog):
        self.dispatcher = dispatcher
        self.prompts = prompts

    def complete(self, params: dict[str, Any], request_id, credentials: Credentials) -> dict[str, Any]:
        ref = params.get("ref")
        argument = params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict):
            raise _bad('completion/complete needs "ref" and "argument" objects', request_id)
        name, value = argument.get("name"), argument.get("value", "")
        if not isinstance(name, str) or not isinstance(value, str):
            raise _bad('"argument" needs "name" and "value" strings', request_id)
        kind = self._kind(ref, name, request_id)
        if kind == "lesson_id":
            values = self._lesson_ids(value, request_id, credentials)
        else:
            values = [v for v in argument_values(kind, self.prompts.schema) if v.startswith(value)]
        return {"completion": {"values": values[:MAX_VALUES], "total": len(values),
                               "hasMore": len(values) >= MAX_VALUES and kind == "lesson_id"}}

    def _kind(self, ref: dict[str, Any], name: str, request_id) -> str:
        if ref.get("type") == "ref/resource":
            if ref.get("uri") != TEMPLATE:
                raise _bad(f"ref/resource: this server's only template is {TEMPLATE}", request_id)
            if name != "id":
                raise _bad(f"{TEMPLATE} has one argument, 'id'", request_id)
            return "lesson_id"
        if ref.get("type") == "ref/prompt":
            prompt = self.prompts.by_name.get(ref.get("name"))
            if prompt is None:
                raise _bad(f"Unknown prompt: {str(ref.get('name'))[:80]!r}", request_id)
            for arg in prompt.args:
                if arg.name == name:
                    return arg.kind
            raise _bad(f"{prompt.name} has no argument {name[:80]!r}", request_id)
        raise _bad('"ref.type" must be "ref/prompt" or "ref/resource"', request_id)

    def _lesson_ids(self, prefix: str, request_id, credentials: Credentials) -> list[str]:
        authorize("read", credentials, self.dispatcher.config)
        repo = self.dispatcher.repository
        prefix = prefix.strip().lower()
        if repo is None or any(c not in "abcdefghijklmnopqrstuvwxyz0123456789_-" for c in prefix):
            return []  # no store, or a prefix no Lesson id can have
        try:
            if self.dispatcher.admission is None:
                return repo.ids_by_prefix(prefix, MAX_VALUES)
            with self.dispatcher.admission.slot("read"):
                return repo.ids_by_prefix(prefix, MAX_VALUES)
        except RepositoryError as exc:
            raise JsonRpcError(INTERNAL_ERROR, f"The wiki did not answer the completion ({exc.wiki_code or 'error'})",
                               request_id=request_id, data={"code": "wiki_error", "retryable": True}) from None


def _bad(message: str, request_id) -> JsonRpcError:
    return JsonRpcError(INVALID_PARAMS, message, request_id=request_id)

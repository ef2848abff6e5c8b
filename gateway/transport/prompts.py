"""MCP prompts: the workflows the help pages teach, in Korean and English (docs/transport.md#prompts).

=================  ==========================================================  =====================
prompt             workflow (help page)                                        arguments
=================  ==========================================================  =====================
record_lesson      search first, then create with evidence (usage, evidence)   topic*, confidence
migrate_memory     move an existing memory into Lessons (migration)            source
verify_evidence    read a Lesson's evidence and record verifications (evidence) lesson_id*, evidence_id
revise_lesson      revise a Lesson from new evidence (revising)                lesson_id*, new_evidence*, relation
=================  ==========================================================  =====================

(* required.) Every prompt also takes ``language`` (``ko``, the default, or
``en``): MCP has no locale. The Korean migration prompt is the ``<pre>`` block
of ``<schema dir>/pages/help/migration.wiki`` itself, read when the gateway starts, so the
help page and the prompt never drift apart. Argument errors are JSON-RPC
``-32602`` naming the argument and what it accepts.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from mcp_types import GetPromptResult, Prompt, PromptArgument, PromptMessage, TextContent

from gateway.config.schema import Schema
from gateway.core.errors import INVALID_PARAMS, JsonRpcError
from gateway.core.jsonio import dump_model

__all__ = ["LANGUAGES", "PromptCatalog", "argument_values", "prompt_defs"]

LANGUAGES = ("ko", "en")
_MAX_ARGUMENT_CHARS = 4000


@dataclass(frozen=True)
class Arg:
    name: str
    description: str
    required: bool = False
    #: "lesson_id", "evidence_id", "confidence", "relation", "language" or "" (free text)
    kind: str = ""


@dataclass(frozen=True)
class PromptDef:
    name: str
    title: str
    description: str
    args: tuple[Arg, ...]
    #: language → arguments → text
    text: dict[str, Callable[[dict[str, str]], str]]


_LANGUAGE = Arg("language", "Language of the prompt text: ko (default) or en.", kind="language")


@functools.lru_cache(maxsize=4)
def _migration_ko(schema_folder: Path) -> str:
    page = schema_folder / "pages" / "help" / "migration.wiki"
    match = re.search(r"<pre>\n?(.*?)</pre>", page.read_text(encoding="utf-8"), re.S)
    if match is None:
        raise RuntimeError(f"{page} has no <pre> prompt block")
    return match.group(1).strip()


def _opt(args: dict[str, str], name: str, text: str) -> str:
    return text.format(**args) if args.get(name) else ""


def _record_ko(a: dict[str, str]) -> str:
    return (f"S3 Research Memory에 이번에 배운 것을 Lesson으로 남긴다. 주제: {a['topic']}\n\n"
            "1. 핵심 원인, 증상, 도구 이름으로 search_lessons를 먼저 실행한다(한 번에 최대 5건).\n"
            "2. 같은 주장과 범위의 Lesson이 있으면 새로 만들지 않는다. 출처만 늘면 attach_evidence, "
            "내용을 고쳐야 하면 get_lesson으로 current_revision_id를 읽고 revise_lesson을 쓴다.\n"
            "3. 없을 때만 create_lesson_draft를 한 번 실행한다. 문제 하나와 결론 하나, 다시 찾아갈 수 있는 "
            "initial_evidence(실제로 읽은 범위를 verification_basis로 정확히)를 넣고, observation에는 직접 "
            "확인한 사실만, interpretation에는 원인과 불확실성을 쓴다. 수치, 버전, 경로는 짐작해서 채우지 않는다.\n"
            + _opt(a, "confidence", "4. confidence는 {confidence}로 하되, high는 full_text나 official_abstract의 "
                   "supports 검증이 observation, interpretation, reusable_lesson을 모두 뒷받침할 때만 쓴다.\n")
            + "5. 관련된 다른 Lesson이 있으면 정확히 맞는 관계 하나로 link_lessons를 실행하고, 애매하면 잇지 않는다.\n"
            "비밀번호, 토큰, 개인 정보, 사적인 대화 원문은 쓰지 않는다. 끝나면 만든 Lesson ID와 건너뛴 이유를 짧게 보고한다.")


def _record_en(a: dict[str, str]) -> str:
    return (f"Record what we learned as a Lesson in S3 Research Memory. Topic: {a['topic']}\n\n"
            "1. Run search_lessons first with the core cause, symptom and tool names (at most 5 results per call).\n"
            "2. If a Lesson already makes the same claim for the same scope, do not create one: add a source with "
            "attach_evidence, or read it with get_lesson and change it with revise_lesson using current_revision_id.\n"
            "3. Only otherwise run create_lesson_draft once: one problem and one conclusion, initial_evidence a "
            "person can find again (verification_basis = what you actually read), only directly observed facts in "
            "observation, causes and uncertainty in interpretation. Never guess numbers, versions or paths.\n"
            + _opt(a, "confidence", "4. Use confidence {confidence}; high only when supporting full_text or "
                   "official_abstract verifications back observation, interpretation and reusable_lesson.\n")
            + "5. If another Lesson is related, link it with the one relation that fits exactly (link_lessons); "
            "when unsure, do not link.\nNo passwords, tokens, personal data or private conversation text. "
            "Finish with a short report: Lesson ids created and what was skipped and why.")


def _migrate_en(a: dict[str, str]) -> str:
    return ("Move reusable problems and solutions from "
            + (a["source"] if a.get("source") else "this conversation, this client's saved memory, the current "
               "working folder and material I attached")
            + " into S3 Research Memory, using only sources you can actually open.\n\n"
            "Rules: use only the S3 Research Memory MCP tools. Not Lessons: project overviews, status, to-dos, "
            "schedules, meeting notes, automation or CI run states, retries, auth or connection errors, logs as such. "
            "One problem and one conclusion per Lesson. No secrets, personal data, private conversation text or "
            "opinions about people; never guess numbers, versions, paths, URLs, checksums, dates or causality.\n"
            "Steps: 1. For each candidate run search_lessons first (at most 5 results). 2. Same claim and scope "
            "exists: do not create; attach_evidence for a new source, or get_lesson then revise_lesson with "
            "expected_revision_id = current_revision_id. 3. A different but related claim: create it, then "
            "link_lessons with the exact relation only. 4. create_lesson_draft only with at least one citation a "
            "person can find again, each with the verification_basis you actually read (full_text, "
            "official_abstract, partial_source, metadata_only); otherwise keep it as an 'evidence needed' "
            "candidate. Record verifications only for sources you read. 5. At most 5 Lessons created or changed "
            "per run. Use a new operation_id for every new write.\n"
            "Finish with: what you checked and could not check; Lesson ids and titles by outcome (created, "
            "evidence added, verification added, linked, skipped as duplicate); 'evidence needed' candidates; "
            "whether candidates remain because of the limit.")


def _verify_ko(a: dict[str, str]) -> str:
    target = f"근거 {a['evidence_id']}" if a.get("evidence_id") else "각 근거"
    return (f"S3 Research Memory의 Lesson {a['lesson_id']}에서 {target}를 실제로 읽고 검증 기록을 남긴다.\n\n"
            f"1. get_lesson으로 {a['lesson_id']}를 읽고 citations의 digest와 current_verdict를 확인한다.\n"
            "2. 인용된 자료를 실제로 연다. 열 수 없으면 기록하지 않고 그 사실만 보고한다.\n"
            "3. 읽은 자료마다 record_evidence_verification을 실행한다: evidence_id, 그때의 evidence_digest, "
            "source_identity, 검사한 바이트의 source_sha256, source_locator, 실제로 읽은 verification_basis, "
            "판정(supports, contradicts 등), 확인한 주장 필드.\n"
            "4. 근거 자료 자체는 고치지 않는다. 검증 기록은 덧붙이기만 한다.\n"
            "끝나면 근거별 판정과 확인하지 못한 범위를 짧게 보고한다.")


def _verify_en(a: dict[str, str]) -> str:
    target = f"evidence {a['evidence_id']}" if a.get("evidence_id") else "each piece of evidence"
    return (f"Read {target} of Lesson {a['lesson_id']} in S3 Research Memory and record verifications.\n\n"
            f"1. Read {a['lesson_id']} with get_lesson; note each citation's digest and current_verdict.\n"
            "2. Actually open the cited source. If you cannot, record nothing and say so.\n"
            "3. For every source you read, run record_evidence_verification: evidence_id, the evidence_digest you "
            "saw, source_identity, source_sha256 of the bytes you checked, source_locator, the verification_basis "
            "you actually read, the outcome (supports, contradicts, ...) and the claim fields you checked.\n"
            "4. Never change the evidence itself; verifications are only ever added.\n"
            "Finish with the outcome per evidence and what you could not check.")


def _revise_ko(a: dict[str, str]) -> str:
    return (f"새 근거로 S3 Research Memory의 Lesson {a['lesson_id']}를 고친다. 새 근거: {a['new_evidence']}\n\n"
            f"1. get_lesson으로 {a['lesson_id']}의 현재 내용과 current_revision_id를 읽는다.\n"
            "2. 새 근거를 attach_evidence로 먼저 붙이고, 그 응답의 current_revision_id를 기억한다.\n"
            "3. revise_lesson을 실행한다: expected_revision_id = 그 current_revision_id, basis_evidence_ids에 "
            "이 수정의 근거 ID, changes에는 바꿀 핵심 필드만. 거절되면 다시 읽고 변경안을 새로 만든다.\n"
            "4. 관찰·해석·결론을 바꾸고 confidence가 medium이나 high면, 바뀐 필드를 뒷받침하는 검증이 있는지 확인한다.\n"
            + _opt(a, "relation", "5. 새 근거가 독립된 새 주장이면 고치지 말고 새 Lesson을 만든 뒤 {relation} 관계로 "
                   "link_lessons를 실행한다.\n")
            + "정정 내용을 evidence note나 별도 메모에 숨기지 않는다. 끝나면 새 revision ID와 바뀐 필드를 보고한다.")


def _revise_en(a: dict[str, str]) -> str:
    return (f"Revise Lesson {a['lesson_id']} in S3 Research Memory from new evidence: {a['new_evidence']}\n\n"
            f"1. Read {a['lesson_id']} with get_lesson (its content and current_revision_id).\n"
            "2. Attach the new evidence first with attach_evidence and keep its current_revision_id.\n"
            "3. Run revise_lesson with expected_revision_id = that current_revision_id, basis_evidence_ids naming "
            "the evidence behind the change, and only the changed core fields in changes. If it is refused, read "
            "again and rebuild the change.\n"
            "4. When observation, interpretation or the conclusion change and confidence is medium or high, check "
            "that verifications support the changed fields.\n"
            + _opt(a, "relation", "5. If the new evidence is an independent new claim, do not revise: create a new "
                   "Lesson and link it with relation {relation} (link_lessons).\n")
            + "Never hide a correction in an evidence note or a separate review Lesson. Finish with the new "
            "revision id and the fields changed.")


def prompt_defs(migration_ko: str) -> tuple[PromptDef, ...]:
    """The prompts in listing order; ``migration_ko`` is the help page's migration prompt (its ``<pre>`` block)."""
    return (
        PromptDef("record_lesson", "Record what we learned",
                  "Search the memory first, then create one Lesson with evidence (or add to the one that exists).",
                  (Arg("topic", "What was learned: the problem, what was tried, what was seen.", True),
                   Arg("confidence", "Intended confidence: low, medium or high.", kind="confidence"), _LANGUAGE),
                  {"ko": _record_ko, "en": _record_en}),
        PromptDef("migrate_memory", "Move an existing memory into Lessons",
                  "The help pages' migration prompt: reusable problems and solutions from this conversation, saved "
                  "memory or files become Lessons (search first, evidence required, at most 5 per run).",
                  (Arg("source", "Which memory to move (default: this conversation, saved memory, working folder)."),
                   _LANGUAGE),
                  {"ko": lambda a: migration_ko + (f"\n\n대상: {a['source']}" if a.get("source") else ""),
                   "en": _migrate_en}),
        PromptDef("verify_evidence", "Verify a Lesson's evidence",
                  "Read the sources a Lesson cites and record what they show as verifications.",
                  (Arg("lesson_id", "The Lesson to verify.", True, "lesson_id"),
                   Arg("evidence_id", "One evidence id of that Lesson (default: all)."), _LANGUAGE),
                  {"ko": _verify_ko, "en": _verify_en}),
        PromptDef("revise_lesson", "Revise a Lesson from new evidence",
                  "Attach the new evidence, then revise the Lesson conditionally on its current revision.",
                  (Arg("lesson_id", "The Lesson to revise.", True, "lesson_id"),
                   Arg("new_evidence", "The new evidence: where it is and what it shows.", True),
                   Arg("relation", "If the new evidence is its own claim: the relation to link it with.", kind="relation"),
                   _LANGUAGE),
                  {"ko": _revise_ko, "en": _revise_en}),
    )


def argument_values(kind: str, schema: Schema) -> tuple[str, ...]:
    """The closed value list of an argument kind in ``schema`` (empty for free text and Lesson ids)."""
    if kind == "confidence":
        return schema.enums["confidence"].values
    if kind == "relation":
        return schema.enums["relation"].values
    if kind == "language":
        return LANGUAGES
    return ()


class PromptCatalog:
    """prompts/list and prompts/get over ``schema`` (enums, the Lesson id pattern) and the help pages
    in its folder (the migration prompt of ``pages/help/migration.wiki``)."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        # read at start, so a help page that lost its prompt fails here and not at a client's request
        prompts = prompt_defs(_migration_ko(schema.source_path.parent))
        self.by_name = {p.name: p for p in prompts}
        self._id_pattern = re.compile(schema.meta["id_pattern"])
        self.listing = {"prompts": [dump_model(Prompt(
            name=p.name, title=p.title, description=p.description,
            arguments=[PromptArgument(name=a.name, description=a.description, required=a.required) for a in p.args],
        )) for p in prompts]}

    def get(self, params: dict[str, Any], request_id) -> dict[str, Any]:
        name = params.get("name")
        prompt = self.by_name.get(name) if isinstance(name, str) else None
        if prompt is None:
            raise self._bad(f"Unknown prompt: {str(name)[:80]!r}; prompts/list names "
                            f"{', '.join(self.by_name)}", request_id)
        arguments = params.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise self._bad('"arguments" must be an object of strings', request_id)
        known = {a.name: a for a in prompt.args}
        for key, value in arguments.items():
            if key not in known:
                raise self._bad(f"{prompt.name}: unknown argument {str(key)[:80]!r} (accepted: "
                                f"{', '.join(known)})", request_id)
            if not isinstance(value, str) or len(value) > _MAX_ARGUMENT_CHARS:
                raise self._bad(f"{prompt.name}: argument {key!r} must be a string of at most "
                                f"{_MAX_ARGUMENT_CHARS} characters", request_id)
        values = {k: v.strip() for k, v in arguments.items() if v.strip()}
        for arg in prompt.args:
            value = values.get(arg.name)
            if value is None:
                if arg.required:
                    raise self._bad(f"{prompt.name}: argument {arg.name!r} is required ({arg.description})",
                                    request_id)
                continue
            allowed = argument_values(arg.kind, self.schema)
            if allowed and value not in allowed:
                raise self._bad(f"{prompt.name}: argument {arg.name!r} must be one of {', '.join(allowed)}",
                                request_id)
            if arg.kind == "lesson_id" and not self._id_pattern.match(value):
                raise self._bad(f"{prompt.name}: argument {arg.name!r} must be a Lesson id (lower-case letters, "
                                "digits, _ and -)", request_id)
        text = prompt.text[values.get("language", "ko")](values)
        return dump_model(GetPromptResult(description=prompt.description, messages=[
            PromptMessage(role="user", content=TextContent(type="text", text=text))]))

    @staticmethod
    def _bad(message: str, request_id) -> JsonRpcError:
        return JsonRpcError(INVALID_PARAMS, message, request_id=request_id)

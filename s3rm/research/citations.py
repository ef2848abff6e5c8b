"""Citation-bounded synthesis: the prompt, and the check of every ``[Lesson:id]`` in the answer.

Contract: docs/research-tools.md#synthesis.

:func:`build_messages` gives the chat endpoint the results only (id, title,
reusable lesson, applicability, first citations; each result cut to
``document_chars``) and asks for ``[Lesson:<id>]`` citations of those ids.

:func:`check_citations` reads the answer: every bracket group holding
``Lesson:<id>`` references (``[Lesson:a]``, ``[Lesson: a, Lesson:b]``) keeps
only ids that are among the results; a group left empty is removed, and
every removed id is reported. A ``Lesson:<id>`` outside brackets is removed
the same way when its id is not a result. An answer without one valid
citation left is refused (:attr:`CheckedAnswer.refused`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from s3rm.collect.chunks import shorten

__all__ = ["CheckedAnswer", "check_citations", "build_messages", "SYSTEM_PROMPT"]

_REF = re.compile(r"Lesson\s*:\s*([A-Za-z0-9_-]{1,120})")
_GROUP = re.compile(r"\[([^\[\]\n]{0,2000})\]")

SYSTEM_PROMPT = (
    "You answer a research question using ONLY the Lessons given below, which come from a lab's shared "
    "memory. Every statement must cite the Lesson it rests on as [Lesson:<id>] with an id from the list; "
    "never cite anything else and never invent ids. Keep observation and interpretation apart, and say "
    "when the Lessons do not answer the question. Be brief."
)


@dataclass(frozen=True)
class CheckedAnswer:
    """``text``: the answer with invalid citations removed (None when refused); ``cited``: valid ids
    in order of first use; ``removed``: invalid ids that were removed (order of appearance);
    ``refused``: no valid citation was left."""

    text: str | None
    cited: tuple[str, ...]
    removed: tuple[str, ...]
    refused: bool


def check_citations(answer: str, allowed: Iterable[str]) -> CheckedAnswer:
    """Keep only citations of ``allowed`` ids in ``answer`` (module docstring)."""
    allowed_ids = set(allowed)
    cited: list[str] = []
    removed: list[str] = []

    def note(lesson_id: str) -> bool:
        if lesson_id in allowed_ids:
            if lesson_id not in cited:
                cited.append(lesson_id)
            return True
        removed.append(lesson_id)
        return False

    def group(m: re.Match[str]) -> str:
        inner = m.group(1)
        refs = _REF.findall(inner)
        if not refs:
            return m.group(0)
        keep = [i for i in refs if note(i)]
        return "[" + ", ".join(f"Lesson:{i}" for i in dict.fromkeys(keep)) + "]" if keep else ""

    text = _GROUP.sub(group, answer)
    # bare references (kept groups hold only allowed ids, so this pass removes invalid bare ones only)
    text = _REF.sub(lambda m: m.group(0) if note(m.group(1)) else "", text)
    text = re.sub(r"[ \t]+([.,;:!?])", r"\1", re.sub(r"[ \t]{2,}", " ", text)).strip()
    refused = not cited
    return CheckedAnswer(None if refused else text, tuple(cited), tuple(removed), refused)


def build_messages(query: str, results: Sequence[dict], document_chars: int) -> list[dict[str, str]]:
    """Chat messages for a synthesis over ``results`` (each a result dict with id and fields)."""
    blocks = []
    for r in results:
        cites = "; ".join(c.get("citation", "") for c in (r.get("citations") or [])[:3] if isinstance(c, dict))
        text = "\n".join(part for part in (
            f"title: {r.get('title', '')}",
            f"reusable lesson: {r.get('reusable_lesson', '')}",
            f"applies when: {r.get('applicability', '')}" if r.get("applicability") else "",
            f"evidence: {cites}" if cites else "",
        ) if part)
        blocks.append(f"[Lesson:{r['id']}]\n{shorten(text, document_chars)}")
    user = "Question:\n" + query + "\n\nLessons:\n\n" + "\n\n".join(blocks)
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]

"""The ``s3rm evaluate`` query file: its closed line format, privacy heuristics and the gold check.

Format and rules: the ``s3rm/evaluate/__init__.py`` module documentation (query
file line, privacy). Pure: reads one file, no network.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from s3rm.errors import S3rmError

#: Query groups, in report order: ``<query language>_<Lesson language>`` where both are named
#: (``ko_en``: a Korean question about an English Lesson), ``ko``: a Korean question about the cloud
#: incidents, ``mixed``: Korean with English terms, ``exact``: identifiers and error strings,
#: ``short``: 2–4-word queries, ``help_examples``: the example searches the help pages show.
GROUPS = ("en_paraphrase", "ko", "ko_ko", "ko_multi", "ko_en", "en_ko", "mixed", "en_en", "exact", "short", "help_examples")
#: Groups whose queries each have several relevant Lessons (:func:`multi_answer`).
MULTI_SUFFIX = "_multi"


def multi_answer(group: str) -> bool:
    """True for a ``*_multi`` group: scored by the share of relevant Lessons in the top k
    (``id_recall@k``), not by any-of recall@5 (docs/retrieval.md#evaluation)."""
    return group.endswith(MULTI_SUFFIX)
#: Retrieval modes search_lessons accepts.
MODES = ("legacy", "hybrid_v1")
#: Upper bound on query lines in one file.
MAX_QUERIES = 2000

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


class QueryFileError(S3rmError):
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

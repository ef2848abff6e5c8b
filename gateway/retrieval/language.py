"""Hangul and query-language detection: the one place the retrieval code decides what is Korean.

Hangul means the precomposed syllables U+AC00–U+D7A3 (:data:`HANGUL_SYLLABLES`);
jamo and compatibility jamo do not count. The rules differ by purpose and keep
their own names:

* :func:`is_hangul` / :func:`has_hangul` / :func:`hangul_runs` — one character,
  any syllable in a text, the syllable runs of a text (which words the analyzer,
  legacy query terms and content quality treat as Korean);
* :func:`hangul_share`, :func:`mostly_hangul` and :func:`query_language` — the
  syllables' share of the letters (``str.isalpha``) of a query: at least 1/2,
  and ``hangul`` / ``mixed`` / ``latin`` with :data:`HANGUL_QUERY_SHARE` (the
  ranking's per-language weights, ``docs/hybrid-search.md#ranking``);
* :func:`mostly_hangul_terms` — a Lesson is Korean when at least 30 % of its
  lexical terms start with a syllable (the index's per-language partitions).
"""
from __future__ import annotations

import re
from typing import Sequence

__all__ = [
    "HANGUL_QUERY_SHARE",
    "HANGUL_SYLLABLES",
    "hangul_runs",
    "hangul_share",
    "has_hangul",
    "is_hangul",
    "mostly_hangul",
    "mostly_hangul_terms",
    "query_language",
]

#: The precomposed Hangul syllables as a regular-expression character range.
HANGUL_SYLLABLES = "\uac00-\ud7a3"
_SYLLABLE = re.compile(f"[{HANGUL_SYLLABLES}]")
_RUN = re.compile(f"[{HANGUL_SYLLABLES}]+")

#: Hangul share of the letters from which a query counts as Korean (an acronym or one product
#: name inside a Korean sentence keeps it Korean).
HANGUL_QUERY_SHARE = 2 / 3


def is_hangul(ch: str) -> bool:
    """True when the one character ``ch`` is a precomposed Hangul syllable."""
    return "\uac00" <= ch <= "\ud7a3"


def has_hangul(text: str) -> bool:
    """True when ``text`` contains a precomposed Hangul syllable."""
    return bool(_SYLLABLE.search(text))


def hangul_runs(text: str) -> list[str]:
    """The maximal runs of Hangul syllables in ``text``, in order."""
    return _RUN.findall(text)


def hangul_share(text: str) -> float | None:
    """Share of Hangul syllables among the letters of ``text``; ``None`` when it has no letters."""
    letters = [ch for ch in text if ch.isalpha()]
    if not letters:
        return None
    return sum(1 for ch in letters if is_hangul(ch)) / len(letters)


def mostly_hangul(text: str) -> bool:
    """True when Hangul syllables are at least half of the letters of ``text``."""
    share = hangul_share(text)
    return share is not None and share * 2 >= 1


def query_language(text: str) -> str:
    """``hangul`` (Hangul ≥ 2/3 of the letters), ``mixed`` (some Hangul, less than that) or ``latin``.

    Contract: ``docs/hybrid-search.md#ranking`` (language-aware handling).
    """
    share = hangul_share(text)
    if not share:
        return "latin"
    return "hangul" if share >= HANGUL_QUERY_SHARE else "mixed"


def mostly_hangul_terms(terms: Sequence[str]) -> bool:
    """True when at least 30 % of a Lesson's lexical terms start with a Hangul syllable (a Korean Lesson)."""
    if not terms:
        return False
    hangul = sum(1 for t in terms if any(is_hangul(ch) for ch in t[:1]))
    return hangul * 10 >= 3 * len(terms)

"""Content quality of a Lesson: how much of its text is language (0–1), one rule for both retrieval modes.

Contract: ``docs/hybrid-search.md#content-quality`` (the rule) and
``docs/retrieval.md#legacy-search`` (how legacy ranks with it). The value is
computed from the page itself — the title and the seven text fields the
projection's ``whole`` text is made of (:data:`QUALITY_FIELDS`) — with plain
regular expressions, so legacy search gets it from the fresh snapshots it
reads anyway, on a deployment without embeddings and without the Korean
analyser; the index stores the same value with each row
(:class:`~gateway.retrieval.indexing.projection.ProjectionDocument` carries it),
where hybrid's semantic channels and fusion read it. It is a ranking signal,
never a filter: a Lesson of quality 0 is still read by its id and found by
the exact words it holds.

A wiki collects texts that are not language: emoji runs, random code points,
one repeated character, ``test``, lorem ipsum, word salad of domain terms, a
test Lesson of random Unicode written by a write check, mojibake (Korean
UTF-8 read as Latin-1, or as CP949). Four factors, each in [0, 1], multiplied:

* **vocabulary**: distinct terms over :data:`FULL_VOCABULARY` (a term: a word
  that is not an English stop word nor a single Latin letter; an emoji run
  yields none, a placeholder one);
* **variety**: distinct over total terms against :data:`FULL_VARIETY` (text
  copied into every field and lorem ipsum repeat a small vocabulary);
* **script**: the share of word characters that are what the lab writes with
  — ASCII letters and digits, and the 2,350 Hangul syllables of KS X 1001 —
  against :data:`FULL_SCRIPT`. Random code points of other scripts, rare
  Hangul syllables (a random syllable is a common one about one time in
  five), accented Latin-1 letters of mojibake and the hanja of CP949
  mojibake all fall outside; a Lesson quoting a few Greek or CJK characters
  keeps a share near 1;
* **grammar**: the share of words that are function words — an English stop
  word, or a Hangul word ending in a particle or verb ending — against
  :data:`FULL_GRAMMAR`. Sentences have them (every Lesson of the shipped
  corpora has at least 13 %), word salad has none.

:data:`QUALITY_VERSION` names the rule: the index generation includes it
(``gateway.config.profiles.INDEX_STRUCTURE``), and legacy's ranking version
changes with it.
"""
from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Iterable, Mapping

from gateway.config.profiles import INDEX_STRUCTURE
from gateway.retrieval.index.analyzer import STOP_WORDS
from gateway.retrieval.language import is_hangul

__all__ = ["FULL_GRAMMAR", "FULL_SCRIPT", "FULL_VARIETY", "FULL_VOCABULARY", "KOREAN_ENDINGS", "QUALITY_FIELDS",
           "QUALITY_VERSION", "function_share", "lesson_quality", "text_quality"]

#: The rule's name (part of the index generation and of legacy's ranking version); change it with the rule.
QUALITY_VERSION = INDEX_STRUCTURE["content_quality"]
#: The page fields the value is computed from: the title and the fields of the projection's ``whole`` text.
QUALITY_FIELDS = ("title", "question", "context", "observation", "attempt", "interpretation", "reusable_lesson",
                  "applicability")
#: Distinct terms from which the vocabulary factor is 1.
FULL_VOCABULARY = 12
#: Distinct/total term ratio from which the variety factor is 1.
FULL_VARIETY = 0.35
#: Share of ordinary word characters (ASCII alphanumerics, KS X 1001 Hangul) from which the script factor is 1.
FULL_SCRIPT = 0.8
#: Function-word share from which the grammar factor is 1.
FULL_GRAMMAR = 0.08
#: Last syllables of Korean particles and verb endings (``은 는 이 가 을 를 에 의 로 …``, ``…다 …고 …함``).
KOREAN_ENDINGS = frozenset("은는이가을를에의로와과도만서고다며면요함됨음게해한된될할던까께니")
#: A word: a run of letters and digits of any script (underscores split words).
_WORD = re.compile(r"[^\W_]+")


@lru_cache(maxsize=8192)
def _ordinary(ch: str) -> bool:
    """An ASCII letter or digit, or one of the 2,350 KS X 1001 Hangul syllables."""
    if ch.isascii():
        return ch.isalnum()
    # Python's EUC-KR codec writes the 2,350 KS X 1001 syllables in 2 bytes, any other syllable in 8.
    return is_hangul(ch) and len(ch.encode("euc-kr")) == 2


def _words(text: str) -> list[str]:
    return _WORD.findall(unicodedata.normalize("NFKC", text or "").casefold())


def _function(word: str) -> bool:
    return word[-1] in KOREAN_ENDINGS if is_hangul(word[-1]) else word in STOP_WORDS


def function_share(text: str) -> float:
    """Share in [0, 1] of the words of ``text`` (NFKC, case-folded) that are function words (module doc);
    ``0.0`` for a text without words."""
    words = _words(text)
    return sum(map(_function, words)) / len(words) if words else 0.0


def text_quality(text: str) -> float:
    """Quality in [0, 1] of one text: the four factors of the module docstring, multiplied, rounded to 6
    decimals. No term → 0.0. Pure and deterministic."""
    words = _words(text)
    terms = [w for w in words if w not in STOP_WORDS and not (len(w) == 1 and w.isascii() and w.isalpha())]
    if not terms:
        return 0.0
    distinct = set(terms)
    vocabulary = min(1.0, len(distinct) / FULL_VOCABULARY)
    variety = min(1.0, len(distinct) / len(terms) / FULL_VARIETY)
    chars = [ch for word in words for ch in word]
    script = min(1.0, sum(map(_ordinary, chars)) / len(chars) / FULL_SCRIPT)
    grammar = min(1.0, sum(map(_function, words)) / len(words) / FULL_GRAMMAR)
    return round(vocabulary * variety * script * grammar, 6)


def lesson_quality(fields: Mapping[str, str], names: Iterable[str] = QUALITY_FIELDS) -> float:
    """Quality in [0, 1] of a Lesson whose page field values are ``fields`` (:func:`text_quality` of the
    :data:`QUALITY_FIELDS` values, one per line)."""
    return text_quality("\n".join(fields.get(name, "") or "" for name in names))

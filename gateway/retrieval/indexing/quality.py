"""Content quality of a Lesson: how much of its text is language (0–1), computed once when it is indexed.

Contract: ``docs/hybrid-search.md#content-quality``. The refresher computes it
from the projection's ``whole`` text and its analysed terms and stores it with
the row (both backends: a column of the in-process segment, a column of the
pgvector table), so a refresh costs what changed. The value is a ranking
signal, never a filter: a Lesson of quality 0 is still read by its id and
found by the exact words it holds (full text, BM25 and the exact tier do not
look at it).

A wiki collects texts that embed near every question: emoji runs, random code
points, one repeated character, ``test``, lorem ipsum, word salad of domain
terms. Four factors, each in [0, 1], multiplied:

* **vocabulary**: distinct terms over :data:`FULL_VOCABULARY` (an emoji run or
  a random non-Latin, non-Hangul run yields no term at all, a placeholder one);
* **variety**: distinct over total terms against :data:`FULL_VARIETY` (text
  copied into every field and lorem ipsum repeat a small vocabulary);
* **wellformed Hangul**: the share of Hangul syllables among the 2,350 of
  KS X 1001, what Korean is written with (a random Hangul syllable is one of
  them about one time in five); 1 for a text without Hangul;
* **grammar**: the share of words that are function words — an English stop
  word, or a Hangul word ending in a particle or verb ending — against
  :data:`FULL_GRAMMAR`. Sentences have them (every Lesson of the shipped
  corpora has at least 13 %), word salad has none.

The projection's field labels (``question: …``) are not counted by any factor.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Sequence

from gateway.config.profiles import INDEX_STRUCTURE
from gateway.retrieval.index.analyzer import STOP_WORDS, analyze
from gateway.retrieval.indexing.projection import V1_LAYOUT
from gateway.retrieval.language import HANGUL_SYLLABLES, has_hangul, is_hangul

__all__ = ["FULL_GRAMMAR", "FULL_VOCABULARY", "FULL_VARIETY", "QUALITY_VERSION", "content_quality",
           "function_share", "label_terms"]

#: Part of the index generation; a change of the rules or constants below is a new version there.
QUALITY_VERSION = INDEX_STRUCTURE["content_quality"]
#: Distinct terms from which the vocabulary factor is 1.
FULL_VOCABULARY = 12
#: Distinct/total term ratio from which the variety factor is 1.
FULL_VARIETY = 0.35
#: Function-word share from which the grammar factor is 1.
FULL_GRAMMAR = 0.08
#: Last syllables of Korean particles and verb endings (``은 는 이 가 을 를 에 의 로 …``, ``…다 …고 …함``).
KOREAN_ENDINGS = frozenset("은는이가을를에의로와과도만서고다며면요함됨음게해한된될할던까께니")
_WORD = re.compile(f"[0-9a-z{HANGUL_SYLLABLES}]+")


def _labels() -> list[str]:
    return ["title", *(name for names in V1_LAYOUT.values() for name in names)]


@lru_cache(maxsize=1)
def label_terms() -> frozenset[str]:
    """The terms of the projection's ``<field>: `` labels (every Lesson has them; they are not its content)."""
    return frozenset(analyze(" ".join(_labels())))


@lru_cache(maxsize=1)
def _label_line() -> re.Pattern:
    return re.compile(r"^(?:%s):[ \t]?" % "|".join(map(re.escape, _labels())), re.MULTILINE)


@lru_cache(maxsize=4096)
def _common_syllable(ch: str) -> bool:
    # Python's EUC-KR codec writes the 2,350 KS X 1001 syllables in 2 bytes, any other in 8.
    return len(ch.encode("euc-kr")) == 2


def function_share(text: str) -> float:
    """Share in [0, 1] of the words of ``text`` (labels removed, case-folded) that are function words.

    English: :data:`gateway.retrieval.index.analyzer.STOP_WORDS`; Korean: a Hangul word whose last syllable is
    in :data:`KOREAN_ENDINGS`. ``0.0`` for a text without words.
    """
    words = _WORD.findall(_label_line().sub("", text or "").casefold())
    if not words:
        return 0.0
    function = sum(1 for w in words if (w[-1] in KOREAN_ENDINGS if has_hangul(w) else w in STOP_WORDS))
    return function / len(words)


def content_quality(text: str, terms: Sequence[str]) -> float:
    """Quality in [0, 1] of a Lesson whose projected ``whole`` text is ``text`` and analysed terms ``terms``.

    The four factors of the module docstring, multiplied and rounded to 6 decimals. No term → 0.0.
    Pure and deterministic.
    """
    labels = label_terms()
    terms = [term for term in terms if term not in labels]
    if not terms:
        return 0.0
    distinct = set(terms)
    vocabulary = min(1.0, len(distinct) / FULL_VOCABULARY)
    variety = min(1.0, len(distinct) / len(terms) / FULL_VARIETY)
    syllables = [ch for term in distinct for ch in term if is_hangul(ch)]
    wellformed = sum(map(_common_syllable, syllables)) / len(syllables) if syllables else 1.0
    grammar = min(1.0, function_share(text) / FULL_GRAMMAR)
    return round(vocabulary * variety * wellformed * grammar, 6)

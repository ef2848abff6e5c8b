"""Lexical text rules of legacy retrieval: normalisation, terms, Korean stems, n-grams, Jaccard.

Contract: ``docs/retrieval.md#legacy-analogies`` (NFKC, Unicode words, Korean
2- and 3-character n-grams) and ``docs/retrieval.md#korean-terms`` (a stem must
find the word with a particle attached).

Why the gateway rewrites Korean query words (measured on the dev wiki's
SQLite backend, ``docs/read-path.md#korean-particles``): MediaWiki's SQL search backends index whole
whitespace/punctuation-delimited words. Korean attaches particles and endings
to the word (``단편화로``, ``할당이``), so the stored word is ``단편화로`` and a
search for ``단편화`` finds nothing — on SQLite (FTS3 simple tokenizer) and on
MySQL/MariaDB (FULLTEXT) alike. Both backends support a trailing ``*`` prefix
term through MediaWiki's own query parser (``SearchSqlite``: FTS3 ``MATCH
'단편화*'``; ``SearchMySQL``: ``MATCH … AGAINST('+u8…* ' IN BOOLEAN MODE)`` after
its UTF-8 hex word encoding, whose prefixes stay prefixes and are longer than
``ft_min_word_len``). So every Hangul query word is reduced to its stem
(:func:`korean_stem` strips one known particle/ending when at least two
syllables remain) and sent as ``stem*``, which matches the bare stem and every
inflected form. Non-Hangul words are sent as they are (whole words), unless the
caller wrote ``word*``. Words are built only from Unicode word characters, so
no MediaWiki search operator (``-``, ``"``, ``intitle:``…) can be injected.
Both backends AND the terms (MediaWiki's strict matching).
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Iterable

from gateway.retrieval.language import hangul_runs, has_hangul

__all__ = [
    "QueryTerm", "normalize", "words", "korean_stem", "query_terms", "mediawiki_query",
    "term_matches", "features", "jaccard", "shared_terms", "salient_terms",
]

_WORD = re.compile(r"\w+")
_QUERY_WORD = re.compile(r"(\w+)(\*?)")

#: Korean particles and common endings, longest first (stripped once, from the end).
KOREAN_SUFFIXES = tuple(sorted({
    "으로부터", "에서부터", "로부터", "으로서", "으로써", "이라고", "에게서", "한테서", "에서는", "에서도",
    "으로는", "으로도", "이라는", "에서의", "까지는", "부터는", "하였다", "되었다", "했으며", "하였으며",
    "에서", "에게", "한테", "까지", "부터", "으로", "로서", "로써", "처럼", "보다", "마다", "조차", "마저",
    "밖에", "만큼", "대로", "이나", "이랑", "라고", "이라", "이며", "에는", "에도", "와는", "과는", "로는",
    "로도", "하고", "이고", "했다", "한다", "된다", "됐다", "하는", "되는", "해서", "하여", "하면", "되면",
    "이다", "였다", "이었", "들이", "들을", "들은", "들의", "들과", "들도",
    "은", "는", "이", "가", "을", "를", "에", "의", "로", "와", "과", "도", "만", "랑", "들", "한", "된",
}, key=lambda s: (-len(s), s)))

#: Function words that AND-matching would otherwise require (English, and Korean stems after stripping).
STOPWORDS = frozenset(
    "a an and are as at be but by for from has have how in is it its of on or that the this to was were "
    "what when where which who why with we our you your i".split()
    + "어떻게 어떤 무엇 인해 인한 대해 대한 위해 위한 통해 통한 있다 있는 없다 없는 그리고 하지만 그러나 경우 때문".split()
)


@dataclass(frozen=True)
class QueryTerm:
    """One search term: ``text`` (normalised) and whether it is a prefix (``text*``)."""

    text: str
    prefix: bool

    def syntax(self) -> str:
        """The term in MediaWiki search syntax."""
        return self.text + ("*" if self.prefix else "")


def normalize(text: str) -> str:
    """NFKC, case-folded, whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def words(text: str) -> list[str]:
    """Unicode words of the normalised text (``\\w+`` runs, underscores-only runs dropped)."""
    return [w for w in _WORD.findall(normalize(text)) if w.strip("_")]


def korean_stem(word: str) -> str:
    """``word`` without one trailing particle/ending when ≥ 2 characters remain, else ``word``.

    ``단편화로`` → ``단편화``, ``할당이`` → ``할당``, ``gpu가`` → ``gpu``; ``결과`` stays
    (one syllable would remain). Words without Hangul are returned unchanged.
    """
    if not has_hangul(word):
        return word
    for suffix in KOREAN_SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 2:
            return word[:-len(suffix)]
    return word


#: Words longer than this are never sent to full-text search: no real identifier
#: is that long, and MediaWiki's search backends slow down badly on huge (prefix)
#: terms such as a 20,000-character run of one Hangul syllable.
MAX_TERM_CHARS = 64


def query_terms(query: str, max_terms: int = 12) -> list[QueryTerm]:
    """Search terms of a free-text query (see module doc); at most ``max_terms``, first occurrence kept."""
    out: dict[str, QueryTerm] = {}
    for word, star in _QUERY_WORD.findall(normalize(query)):
        if not word.strip("_") or word in STOPWORDS or len(word) > MAX_TERM_CHARS:
            continue
        if has_hangul(word):
            stem = korean_stem(word)
            if stem in STOPWORDS:
                continue
            term = QueryTerm(stem, True)
        else:
            if len(word) == 1 and word.isascii() and not star:
                continue
            term = QueryTerm(word, bool(star))
        key = term.syntax()
        if key not in out:
            out[key] = term
        if len(out) >= max_terms:
            break
    return list(out.values())


def mediawiki_query(terms: Iterable[QueryTerm]) -> str:
    """MediaWiki ``srsearch`` text for ``terms`` (all required)."""
    return " ".join(t.syntax() for t in terms)


def term_matches(term: QueryTerm, text_words: set[str]) -> bool:
    """True when a word of ``text_words`` equals the term (or starts with it for prefix terms)."""
    if term.prefix:
        return any(w.startswith(term.text) for w in text_words)
    return term.text in text_words


def features(text: str) -> set[str]:
    """Lexical features for analogies: words (stems for Korean) plus Korean 2- and 3-character n-grams."""
    out: set[str] = set()
    for word in words(text):
        if word in STOPWORDS or (len(word) == 1 and word.isascii()):
            continue
        out.add(korean_stem(word))
        for run in hangul_runs(word):
            for n in (2, 3):
                out.update(run[i:i + n] for i in range(len(run) - n + 1))
    return out


def jaccard(a: set[str], b: set[str]) -> float:
    """|a ∩ b| / |a ∪ b| (0.0 for two empty sets)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def shared_terms(a: set[str], b: set[str], limit: int = 50, max_length: int = 200) -> list[str]:
    """Shared features, longest first then alphabetical, n-grams contained in a longer shared term dropped."""
    common = sorted(a & b, key=lambda t: (-len(t), t))
    kept: list[str] = []
    for term in common:
        if len(term) > max_length:
            continue
        if any(term in longer for longer in kept):
            continue
        kept.append(term)
        if len(kept) >= limit:
            break
    return kept


def salient_terms(weighted_texts: Iterable[tuple[str, float]], limit: int = 6) -> list[QueryTerm]:
    """The ``limit`` most telling query terms of weighted texts (e.g. title ×3, body ×1).

    Score of a term: summed weights of its occurrences × min(len, 8) (longer words
    are more specific); ties broken alphabetically. Korean words become stem
    prefixes exactly as in :func:`query_terms`.
    """
    scores: dict[QueryTerm, float] = {}
    for text, weight in weighted_texts:
        for term in query_terms_all(text):
            scores[term] = scores.get(term, 0.0) + weight * min(len(term.text), 8)
    ranked = sorted(scores, key=lambda t: (-scores[t], t.text))
    return ranked[:limit]


def query_terms_all(text: str) -> list[QueryTerm]:
    """Every term of ``text`` (with repeats) under :func:`query_terms` rules; single syllables skipped."""
    out = []
    for word in words(text):
        if word in STOPWORDS or len(word) > MAX_TERM_CHARS:
            continue
        if has_hangul(word):
            stem = korean_stem(word)
            if len(stem) >= 2 and stem not in STOPWORDS:
                out.append(QueryTerm(stem, True))
        elif len(word) >= 3 and not word.isdigit():
            out.append(QueryTerm(word, False))
    return out

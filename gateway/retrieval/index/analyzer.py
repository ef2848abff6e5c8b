"""Text analysis of the in-process lexical channel: Korean morphemes (kiwipiepy) plus words.

Contract: ``docs/hybrid-search.md#lexical-channel``. Analyzer version
:data:`ANALYZER_VERSION` is part of the index generation: a change here is a
new generation.

:func:`analyze` turns text into index terms, identically for Lessons and
queries, so that Korean matches whatever particles, compounds and spacing
the two sides use:

1. NFKC, case folding.
2. Korean morphological analysis with Kiwi (PyPI ``kiwipiepy``; its model is
   the PyPI package ``kiwipiepy-model``, installed with it — nothing is
   downloaded at run time). Only content morphemes become terms: nouns
   (``NNG``, ``NNP``, ``NR``), verb/adjective stems (``VV``, ``VA``), roots
   (``XR``), foreign words (``SL``), numbers (``SN``) and hanja (``SH``).
   Particles (``J*``), endings (``E*``) and derivational suffixes are
   dropped, so ``단편화로`` / ``단편화가`` / ``단편화`` all yield ``단편``, and a
   compound written with or without spaces (``체크포인트파일`` / ``체크포인트 파일``)
   yields the same nouns.
3. Hangul nouns of three or more syllables also add their 2-syllable pieces
   (``커넥션풀`` → ``커넥``, ``넥션``, ``션풀``), which lets a compound Kiwi keeps
   whole meet the same words written apart (``커넥션 풀``).
4. Words without Hangul never go through Kiwi (so ``us-west1-b`` is read the
   same in English and in Korean text): English stop words and single letters
   are dropped; plain words are reduced to their Snowball English stem (PyPI
   ``PyStemmer``: ``generators`` / ``generator`` → ``generat``, ``failed`` /
   ``failing`` → ``fail``), so a paraphrase meets the Lesson's inflections;
   words with inner ``_ - . /`` are kept whole (never stemmed, an identifier
   must match exactly) and their parts added stemmed
   (``expandable_segments`` → itself, ``expand``, ``segment``); words with a
   digit are kept as they are. Terms are in text order within each kind
   (Latin words first, then Korean), which BM25 ignores.

Kiwi needs ≈ 100 MB and seconds to load: :func:`analyzer` loads it once per
process, on first use (the refresher's first build, never a request that
could not wait for it: queries before the first snapshot fall back anyway).
"""
from __future__ import annotations

import re
import threading
import unicodedata
from typing import Any

from gateway.retrieval.language import has_hangul

__all__ = ["ANALYZER_VERSION", "analyze", "analyzer", "KOREAN_TAGS", "STOP_WORDS", "word_initial_terms"]

ANALYZER_VERSION = "kiwi-0.24-morph+bigram+snowball-en-v2"

#: Kiwi tags that become terms.
KOREAN_TAGS = frozenset({"NNG", "NNP", "NR", "VV", "VA", "XR", "SL", "SN", "SH"})

STOP_WORDS = frozenset(
    "a an and are as at be been but by can could did do does for from had has have how i if in into is it its "
    "of on or our so such than that the their then there these they this those to was we were what when where "
    "which while who why will with would you your not no".split())
_LATIN_WORD = re.compile(r"[0-9a-z][0-9a-z_\-./]*[0-9a-z]|[0-9a-z]")
_INNER = re.compile(r"[_\-./]")
MAX_TERM_CHARS = 64

_lock = threading.Lock()
_kiwi: dict[str, Any] = {}
_local = threading.local()


def analyzer():
    """The process-wide Kiwi instance (loaded on first call; thread-safe)."""
    with _lock:
        if "kiwi" not in _kiwi:
            from kiwipiepy import Kiwi

            _kiwi["kiwi"] = Kiwi(num_workers=-1)
        return _kiwi["kiwi"]


def _stemmer():
    """This thread's Snowball English stemmer (a PyStemmer object is not thread-safe: one per thread)."""
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        import Stemmer

        stemmer = _local.stemmer = Stemmer.Stemmer("english")
    return stemmer


def _stem(word: str) -> str:
    """The English stem of a plain word; words with a digit stay as they are (``gpu0``, ``5xx``)."""
    if any(ch.isdigit() for ch in word):
        return word
    return _stemmer().stemWord(word)


def _latin(text: str, out: list[str]) -> None:
    for token in _LATIN_WORD.findall(text):
        if len(token) > MAX_TERM_CHARS or token in STOP_WORDS or (len(token) == 1 and not token.isdigit()):
            continue
        if _INNER.search(token):
            out.append(token)
            out.extend(_stem(p) for p in _INNER.split(token) if len(p) > 1 and p not in STOP_WORDS)
        else:
            out.append(_stem(token))


def analyze(text: str) -> list[str]:
    """Index terms of ``text`` in order (with repeats); see the module docstring.

    Pure apart from the one-time Kiwi load. ``""`` → ``[]``.
    """
    text = unicodedata.normalize("NFKC", text or "").casefold()
    if not text.strip():
        return []
    out: list[str] = []
    if not has_hangul(text):
        _latin(text, out)
        return out
    hangul_words = []
    for word in text.split():
        if has_hangul(word):
            hangul_words.append(word)
        else:
            _latin(word, out)
    for token in analyzer().tokenize(" ".join(hangul_words)):
        tag = token.tag.split("-", 1)[0]
        if tag not in KOREAN_TAGS:
            continue
        form = token.form
        if tag == "SL" or tag == "SN":
            _latin(form.casefold(), out)
            continue
        if len(form) > MAX_TERM_CHARS:
            continue
        if tag in ("VV", "VA") and len(form) < 2:
            continue  # one-syllable stems (하, 되, 있) carry no topic
        out.append(form)
        if tag in ("NNG", "NNP") and len(form) >= 3 and has_hangul(form):
            out.extend(form[i:i + 2] for i in range(len(form) - 1))
    return out


#: Kiwi tags of the Korean terms a reader recognises on their own (nouns, roots, hanja); verb and
#: adjective stems (``있``, ``했``) and endings are not words and never shown.
_SHOWN_KOREAN_TAGS = frozenset({"NNG", "NNP", "XR", "SH"})
_SHOWN_LATIN_WORD = re.compile(r"(?<![0-9a-z_])[0-9a-z][0-9a-z_\-./]*[0-9a-z]")


def word_initial_terms(text: str) -> set[str]:
    """Terms of ``text`` a reader can find in it as written: each starts a word.

    NFKC and case-folded. Latin words whole (identifiers with ``_ - . /`` kept
    whole; stop words, single characters and bare numbers dropped); Korean nouns,
    roots and hanja of two or more characters (Kiwi), only where the morpheme is
    the text itself at the start of a word, with a noun-forming suffix kept on
    (``단편화로`` shows ``단편화``; ``체크포인트파일`` never shows ``파일``; never a piece cut
    across syllables). ``find_analogies``
    shows the terms two Lessons share (docs/tools.md#find_analogies).
    """
    text = unicodedata.normalize("NFKC", text or "").casefold()
    out = {w for w in _SHOWN_LATIN_WORD.findall(text)
           if w not in STOP_WORDS and not w.isdigit() and len(w) <= MAX_TERM_CHARS}
    if not has_hangul(text):
        return out
    tokens = analyzer().tokenize(text)
    for i, token in enumerate(tokens):
        form, start = token.form, token.start
        if token.tag.split("-", 1)[0] not in _SHOWN_KOREAN_TAGS:
            continue
        for suffix in tokens[i + 1:i + 2]:  # a noun-forming suffix is part of the word: 단편 + 화 → 단편화
            if suffix.tag == "XSN" and suffix.start == start + len(form):
                form += suffix.form
        if len(form) < 2 or not has_hangul(form):
            continue
        if text[start:start + len(form)] != form or (start > 0 and text[start - 1].isalnum()):
            continue
        out.add(form)
    return out

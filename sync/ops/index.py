"""``s3rm index``: the generation lifecycle on the shared PostgreSQL + pgvector store.

Contract: docs/operations.md#generations, docs/operations.md#indexer-leader.

Verbs (the store comes from ``--dsn``, else ``S3RM_PG_DSN``, else the dev stack's ``.dev/stack.env``):

* ``list`` — every generation with state, rows, HNSW, lease holder; the alias;
* ``build --label L [--hnsw]`` — a full build of ``<this config's generation>.L``
  from the wiki (same embedding provider settings as the gateway, ``S3RM_*``),
  under that generation's own indexer lease, while the active one serves; then ``ready``;
* ``shadow GENERATION`` — for queries read from stdin (one per line, never
  printed or stored), top-k overlap and latency of GENERATION against the active one;
* ``cutover GENERATION`` / ``rollback`` — flip the alias in one transaction;
* ``retire GENERATION`` — drop a generation that is neither active nor previous;
* ``rotate-cursor-key`` — add a newer shared cursor key (older ones keep verifying).

Exit codes: 0 done, 1 the store refused (bad state, unknown generation), 2 usage/configuration.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from sync.devstack.envfiles import DEV_STACK_ENV_FILE, read_env_file

__all__ = ["register"]


def _dsn(args: argparse.Namespace) -> str | None:
    return args.dsn or os.environ.get("S3RM_PG_DSN") or read_env_file(DEV_STACK_ENV_FILE).get("S3RM_PG_DSN")


def _store(args: argparse.Namespace):
    from gateway.retrieval.pgvector.store import PgStore

    dsn = _dsn(args)
    if not dsn:
        print("s3rm index: no store: pass --dsn or set S3RM_PG_DSN", file=sys.stderr)
        raise SystemExit(2)
    return PgStore(dsn)


def cmd_list(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        active, previous, version = store.alias()
        print(f"alias active={active or '-'} previous={previous or '-'} version={version}")
        for info in store.generations():
            holder, token, live = store.lease(info.name)
            rows = 0
            if info.state != "retired":
                rows, _ = store.changes(info.name, 0)
                rows = sum(1 for r in rows if not r[11])
            print(f"{info.name}\t{info.state}\tdims={info.dims} {info.storage}\thnsw={'yes' if info.hnsw else 'no'}"
                  f"\tlessons={rows}\tleader={(holder or '-') if live else '-'} token={token}")
    finally:
        store.close()
    return 0


def _refusable(action, report):
    """A command running ``action(store, args)`` once; a :class:`StoreError` (the registry refused the
    step) prints ``s3rm index: …`` and exits 1, otherwise ``report(result, args)`` is printed."""
    def run(args: argparse.Namespace) -> int:
        from gateway.retrieval.pgvector.store import StoreError

        store = _store(args)
        try:
            result = action(store, args)
        except StoreError as exc:
            print(f"s3rm index: {exc}", file=sys.stderr)
            return 1
        finally:
            store.close()
        print(report(result, args))
        return 0
    return run


def _flip(action):
    """An alias flip (cutover, rollback) reporting the active generation before and after."""
    return _refusable(action, lambda flipped, _args: f"alias active: {flipped[0] or '-'} -> {flipped[1]}")


cmd_retire = _refusable(lambda store, args: store.retire(args.generation),
                        lambda _result, args: f"retired {args.generation}")


def cmd_rotate(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        kid = store.rotate_cursor_key()
    finally:
        store.close()
    print(f"cursor key {kid} added; restart the gateways one by one to sign with it")
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    """Full build of ``<own generation>.<label>`` through the ordinary refresher, pinned to that name."""
    from gateway.config import load_config
    from gateway.config.values import ConfigError
    from gateway.retrieval import pgvector as backend
    from gateway.retrieval.hybrid import RetrievalService
    from gateway.wiki.repository import repository_factory

    if not args.label.replace("-", "").isalnum():
        print("s3rm index: --label takes letters, digits and '-'", file=sys.stderr)
        return 2
    env = dict(os.environ, S3RM_INDEX_BACKEND="pgvector", S3RM_PG_DSN=_dsn(args) or "")
    try:
        config = load_config(env)
    except ConfigError as exc:
        print(f"s3rm index: {exc}", file=sys.stderr)
        return 2
    if not config.retrieval.enabled:
        print("s3rm index: building needs an embedding provider (S3RM_EMBEDDING_PROVIDER)", file=sys.stderr)
        return 2
    store = _store(args)
    factory = backend.refresher_factory(config.retrieval, store)
    service = RetrievalService(config.retrieval, repository_factory(config), refresher_factory=factory)
    name = f"{service.own_generation}.{args.label}"
    service.refresher.pin(name)
    started = time.monotonic()
    service.start()
    try:
        deadline = started + args.timeout
        while time.monotonic() < deadline:
            outcome = service.refresher.last_outcome
            if outcome is not None and outcome.kind == "full":
                if outcome.error:
                    print(f"s3rm index: build failed ({outcome.error})", file=sys.stderr)
                    return 1
                break
            time.sleep(0.5)
        else:
            print(f"s3rm index: build did not finish in {args.timeout:.0f} s", file=sys.stderr)
            return 1
    finally:
        service.stop()
    if args.hnsw:
        store.build_hnsw(name)
    store.mark_ready(name)
    state = store.generation(name).state
    print(f"built {name}: {outcome.embedded} Lessons embedded, {outcome.examined} examined, "
          f"{time.monotonic() - started:.1f} s{' + HNSW' if args.hnsw else ''}; state {state}"
          f"{' (no alias existed: it serves now)' if state == 'active' else ', cut over with s3rm index cutover'}")
    store.close()
    return 0


def cmd_shadow(args: argparse.Namespace) -> int:
    """Top-k overlap and latency of a candidate generation against the active one, per stdin query."""
    from gateway.config import load_config
    from gateway.retrieval.embedding import build_provider

    queries = [q.strip() for q in sys.stdin if q.strip()][:1000]
    if not queries:
        print("s3rm index: shadow reads queries from stdin (one per line)", file=sys.stderr)
        return 2
    config = load_config(dict(os.environ))
    provider = build_provider(config.retrieval)
    store = _store(args)
    try:
        active, _, _ = store.alias()
        if active is None or store.generation(args.generation) is None:
            print("s3rm index: needs an active generation and a known candidate", file=sys.stderr)
            return 1
        overlaps, lat = [], {active: [], args.generation: []}
        for query in queries:
            vec = provider.begin_queries(query, ("whole",)).result()["whole"]
            tops = {}
            for gen in (active, args.generation):
                t0 = time.perf_counter()
                tops[gen] = [i for i, _ in store.search(gen, "whole", vec, args.k)]
                lat[gen].append(time.perf_counter() - t0)
            base = set(tops[active])
            overlaps.append(len(base & set(tops[args.generation])) / max(1, len(base)))
        print(f"queries={len(queries)} k={args.k} overlap@k mean={statistics.mean(overlaps):.3f} "
              f"min={min(overlaps):.3f}")
        for gen, times in lat.items():
            times.sort()
            print(f"{gen}\tp50={1000 * times[len(times) // 2]:.1f} ms\tp95={1000 * times[int(0.95 * (len(times) - 1))]:.1f} ms")
    finally:
        provider.close()
        store.close()
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``s3rm index`` and its verbs to the ``s3rm`` parser."""
    p = subparsers.add_parser("index", help="generation lifecycle on the shared pgvector store",
                              description="List, build, shadow, cut over, roll back and retire index generations "
                                          "in the shared PostgreSQL + pgvector store (docs/operations.md).")
    p.add_argument("--dsn", help="postgresql:// URL (default: $S3RM_PG_DSN, else .dev/stack.env)")
    verbs = p.add_subparsers(dest="index_command", metavar="VERB", required=True)
    verbs.add_parser("list", help="generations, states, lease holders and the alias").set_defaults(handler=cmd_list)
    b = verbs.add_parser("build", help="full build of <generation>.<label> while the active one serves")
    b.add_argument("--label", required=True, help="suffix of the new generation's name (letters, digits, '-')")
    b.add_argument("--hnsw", action="store_true", help="also create HNSW indexes")
    b.add_argument("--timeout", type=float, default=3600.0, help="give up after this many seconds")
    b.set_defaults(handler=cmd_build)
    s = verbs.add_parser("shadow", help="compare a candidate with the active generation on stdin queries")
    s.add_argument("generation")
    s.add_argument("-k", type=int, default=20)
    s.set_defaults(handler=cmd_shadow)
    c = verbs.add_parser("cutover", help="point the alias at GENERATION (one transaction)")
    c.add_argument("generation")
    c.set_defaults(handler=_flip(lambda store, a: store.cutover(a.generation)))
    verbs.add_parser("rollback", help="point the alias back at the previous generation").set_defaults(
        handler=_flip(lambda store, a: store.rollback()))
    r = verbs.add_parser("retire", help="drop a generation that is neither active nor previous")
    r.add_argument("generation")
    r.set_defaults(handler=cmd_retire)
    verbs.add_parser("rotate-cursor-key", help="add a newer shared cursor signing key").set_defaults(
        handler=cmd_rotate)

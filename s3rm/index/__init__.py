"""``s3rm index``: the generation lifecycle on the shared PostgreSQL + pgvector store.

Contract: docs/operations.md#generations, docs/operations.md#generation-lifecycle,
docs/operations.md#shadow-queries, docs/operations.md#indexer-leader.

Verbs (the store comes from ``--dsn``, else ``S3RM_PG_DSN``, else the dev stack's ``.dev/stack.env``):

* ``list`` — every generation with state, rows, HNSW, lease holder; the alias;
* ``build --label L [--hnsw [--hnsw-memory SIZE] [--hnsw-workers N]]`` — a full build of ``<this config's generation>.L``
  from the wiki (same embedding provider settings as the gateway, ``S3RM_*``),
  under that generation's own indexer lease, while the active one serves, with
  the change tail applied (:mod:`gateway.retrieval.pgvector.build`); then ``ready``;
* ``shadow --start GENERATION [--sample F]`` / ``--stop`` / ``--report GENERATION``
  — gateways rank a sampled share of live hybrid searches on GENERATION too and
  store overlap and latency per query (never the query); the report aggregates them;
  ``shadow --queries GENERATION`` compares on queries read from stdin (never printed or stored);
* ``cutover GENERATION`` / ``rollback`` — flip the alias in one transaction;
* ``retire GENERATION [--rollback-target]`` — drop a generation that is not active
  (the previous one only with the flag; the leader retires it itself once the rollback window is over);
* ``rotate-cursor-key`` — add a newer shared cursor key (older ones keep verifying);
* ``retry-quarantined [--url URL]`` — ask a running gateway to embed its quarantined
  Lessons once more (docs/hybrid-search.md#quarantine). It posts to the gateway's
  ``/admin/index/retry-quarantined`` (:mod:`gateway.web.admin`) next to the MCP
  endpoint (``--url``, else ``$S3RM_MCP_URL``, else the dev stack's); loopback needs
  no token, another host needs ``$S3RM_METRICS_TOKEN`` (the token whose SHA-256 is
  the gateway's ``S3RM_METRICS_TOKEN_SHA256``). With the pgvector backend, send it to
  the indexer leader (``/readyz`` … ``leader``). No store is needed.

Exit codes: 0 done, 1 the store refused (bad state, unknown generation), 2 usage/configuration.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time

from s3rm.settings import CliSettings
from s3rm.errors import CliError

#: A PostgreSQL memory size as ``maintenance_work_mem`` takes it (``--hnsw-memory``).
HNSW_MEMORY = re.compile(r"[1-9][0-9]{0,6}(kB|MB|GB|TB)")

__all__ = ["register"]


def _dsn(args: argparse.Namespace) -> str | None:
    return args.dsn or CliSettings().pg_dsn or None


def _store(args: argparse.Namespace):
    from gateway.retrieval.pgvector.store import PgStore

    dsn = _dsn(args)
    if not dsn:
        raise CliError("no store: pass --dsn or set S3RM_PG_DSN", 2)
    return PgStore(dsn)


def cmd_list(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        active, previous, version = store.alias()
        print(f"alias active={active or '-'} previous={previous or '-'} version={version}")
        from gateway.retrieval.pgvector import lifecycle
        from gateway.retrieval.pgvector.schema import CHANGE_DELETED

        steps = lifecycle.event_counts(store)
        shadow = lifecycle.shadow_config(store)
        print("steps " + (" ".join(f"{k}={n}" for k, n in steps.items()) or "-")
              + (f"\tshadow={shadow[0]} sample={shadow[1]:g}" if shadow else ""))
        for info in store.generations():
            holder, token, live = store.lease(info.name)
            rows = 0
            if info.state != "retired":
                rows, _ = store.changes(info.name, 0)
                rows = sum(1 for r in rows if not r[CHANGE_DELETED])
            print(f"{info.name}\t{info.state}\tdims={info.dims} {info.storage}\thnsw={'yes' if info.hnsw else 'no'}"
                  f"\tlessons={rows}\tleader={(holder or '-') if live else '-'} token={token}")
    finally:
        store.close()
    return 0


def _refusable(action, report):
    """A command running ``action(store, args)`` once; a :class:`StoreError` (the registry refused the
    step) prints ``s3rm index: …`` and exits 1, otherwise ``report(result, args)`` is printed."""
    def run(args: argparse.Namespace) -> int:
        from gateway.retrieval.pgvector.schema import StoreError

        store = _store(args)
        try:
            result = action(store, args)
        except StoreError as exc:
            raise CliError(str(exc), 1) from exc
        finally:
            store.close()
        print(report(result, args))
        return 0
    return run


def _flip(action):
    """An alias flip (cutover, rollback) reporting the active generation before and after."""
    return _refusable(action, lambda flipped, _args: f"alias active: {flipped[0] or '-'} -> {flipped[1]}")


cmd_retire = _refusable(lambda store, args: store.retire(args.generation, rollback_target=args.rollback_target),
                        lambda _result, args: f"retired {args.generation}")


def cmd_rotate(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        kid = store.rotate_cursor_key()
    finally:
        store.close()
    print(f"cursor key {kid} added; running gateways verify it at once and sign with it within 5 minutes")
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    """Build ``<own generation>.<label>`` with its change tail (gateway.retrieval.pgvector.build)."""
    from gateway.config import load_config
    from gateway.config.values import ConfigError
    from gateway.retrieval import pgvector as backend
    from gateway.retrieval.hybrid.service import RetrievalService
    from gateway.retrieval.pgvector.build import build_generation
    from gateway.retrieval.pgvector.schema import StoreError
    from gateway.wiki.repository import repository_factory

    if not args.label.replace("-", "").isalnum():
        raise CliError("--label takes letters, digits and '-'", 2)
    if (args.hnsw_memory is not None or args.hnsw_workers is not None) and not args.hnsw:
        raise CliError("--hnsw-memory and --hnsw-workers apply to --hnsw builds only", 2)
    if args.hnsw_memory is not None and not HNSW_MEMORY.fullmatch(args.hnsw_memory):
        raise CliError(f"--hnsw-memory takes a PostgreSQL size such as 512MB or 2GB, "
                       f"not {args.hnsw_memory!r}", 2)
    if args.hnsw_workers is not None and not 0 <= args.hnsw_workers <= 64:
        raise CliError("--hnsw-workers takes 0 to 64", 2)
    # the build's follower keeps its checkpoint in memory: a gateway's checkpoint file is never moved
    env = dict(os.environ, S3RM_INDEX_BACKEND="pgvector", S3RM_PG_DSN=_dsn(args) or "",
               S3RM_SEMANTIC_CHECKPOINT_FILE="")
    try:
        config = load_config(env)
    except ConfigError as exc:
        raise CliError(str(exc), 2) from exc
    if not config.retrieval.enabled:
        raise CliError("building needs an embedding provider (S3RM_EMBEDDING_PROVIDER)", 2)
    store = _store(args)
    try:
        factory = backend.refresher_factory(config.retrieval, store)
        service = RetrievalService(config.retrieval, repository_factory(config), refresher_factory=factory)
        report = build_generation(service, store, args.label, timeout=args.timeout, hnsw=args.hnsw,
                                  hnsw_memory=args.hnsw_memory, hnsw_workers=args.hnsw_workers)
    except StoreError as exc:
        raise CliError(str(exc), 1) from exc
    finally:
        store.close()
    tail = ("no change tail (no follower)" if report.tail_examined is None else
            f"change tail: {report.tail_examined} re-read, {report.tail_embedded} embedded")
    print(f"built {report.name}: {report.embedded} Lessons embedded, {report.examined} examined, {tail}, "
          f"{report.seconds:.1f} s{' + HNSW' if args.hnsw else ''}; state {report.state}"
          f"{' (no alias existed: it serves now)' if report.state == 'active' else ', cut over with s3rm index cutover'}")
    return 0


def cmd_shadow(args: argparse.Namespace) -> int:
    """``--start GEN [--sample F]``, ``--stop``, ``--report GEN`` (live traffic) or ``--queries GEN`` (stdin)."""
    if args.queries:
        return _offline_shadow(args)
    from gateway.retrieval.pgvector import lifecycle
    from gateway.retrieval.pgvector.schema import StoreError

    store = _store(args)
    try:
        if args.start:
            lifecycle.start_shadow(store, args.start, args.sample)
            print(f"shadow comparison of {args.start} on {100 * args.sample:g} % of hybrid searches "
                  "(gateways pick it up within a few seconds)")
        elif args.stop:
            stopped = lifecycle.stop_shadow(store)
            print(f"shadow stopped: {', '.join(stopped) or 'none was running'}")
        else:
            print(_report_text(lifecycle.shadow_report(store, args.report)))
    except (StoreError, ValueError) as exc:
        raise CliError(str(exc), 1) from exc
    finally:
        store.close()
    return 0


def _report_text(rep: dict) -> str:
    if not rep["samples"]:
        return f"{rep['generation']}: no shadow samples yet"
    ms = lambda side, q: f"{rep[side][q]:.1f} ms"  # noqa: E731
    return (f"{rep['generation']}: samples={rep['samples']} k={rep['k']} overlap@k mean={rep['overlap_mean']:.3f} "
            f"median={rep['overlap_median']:.3f} min={rep['overlap_min']:.3f}\n"
            f"latency\tactive p50={ms('active_ms', 'p50')} p95={ms('active_ms', 'p95')}\t"
            f"shadow p50={ms('shadow_ms', 'p50')} p95={ms('shadow_ms', 'p95')}")


def _offline_shadow(args: argparse.Namespace) -> int:
    """Top-k overlap and latency of a candidate generation against the active one, per stdin query."""
    from gateway.config import load_config
    from gateway.retrieval.embedding.client import build_provider

    generation = args.queries
    queries = [q.strip() for q in sys.stdin if q.strip()][:1000]
    if not queries:
        raise CliError("shadow --queries reads queries from stdin (one per line)", 2)
    config = load_config(dict(os.environ))
    provider = build_provider(config.retrieval)
    store = _store(args)
    try:
        active, _, _ = store.alias()
        if active is None or store.generation(generation) is None:
            raise CliError("needs an active generation and a known candidate", 1)
        overlaps, lat = [], {active: [], generation: []}
        for query in queries:
            vec = provider.begin_queries(query, ("whole",)).result()["whole"]
            tops = {}
            for gen in (active, generation):
                t0 = time.perf_counter()
                tops[gen] = [i for i, _ in store.search(gen, "whole", vec, args.k)]
                lat[gen].append(time.perf_counter() - t0)
            base = set(tops[active])
            overlaps.append(len(base & set(tops[generation])) / max(1, len(base)))
        print(f"queries={len(queries)} k={args.k} overlap@k mean={statistics.mean(overlaps):.3f} "
              f"min={min(overlaps):.3f}")
        for gen, times in lat.items():
            times.sort()
            print(f"{gen}\tp50={1000 * times[len(times) // 2]:.1f} ms\tp95={1000 * times[int(0.95 * (len(times) - 1))]:.1f} ms")
    finally:
        provider.close()
        store.close()
    return 0


def cmd_retry_quarantined(args: argparse.Namespace) -> int:
    """POST the gateway's retry route; print how many Lessons were queued (exit 1 when refused)."""
    import requests

    from gateway.web.admin import RETRY_QUARANTINED
    from s3rm.mcpsearch import resolve_mcp_url

    base = resolve_mcp_url(args.url)
    url = (base[: -len("/mcp")] if base.endswith("/mcp") else base.rstrip("/")) + RETRY_QUARANTINED
    token = CliSettings().metrics_token
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        resp = requests.post(url, headers=headers, timeout=10)
    except requests.RequestException as exc:
        raise CliError(f"{url} unreachable ({type(exc).__name__})", 1)
    if resp.status_code != 200:
        raise CliError(f"{url} answered HTTP {resp.status_code} "
                       "(from another host set S3RM_METRICS_TOKEN)", 1)
    body = resp.json()
    print(f"queued={body.get('queued')} semantic={body.get('semantic')}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``s3rm index`` and its verbs to the ``s3rm`` parser."""
    p = subparsers.add_parser("index", help="generation lifecycle on the shared pgvector store",
                              description="List, build, shadow, cut over, roll back and retire index generations "
                                          "in the shared PostgreSQL + pgvector store (docs/operations.md).")
    p.add_argument("--dsn", help="postgresql:// URL (default: $S3RM_PG_DSN, else .dev/stack.env)")
    verbs = p.add_subparsers(dest="index_command", metavar="VERB", required=True)
    p.set_defaults(error_prefix="s3rm index")
    verbs.add_parser("list", help="generations, states, lease holders and the alias").set_defaults(handler=cmd_list)
    b = verbs.add_parser("build", help="full build of <generation>.<label> while the active one serves")
    b.add_argument("--label", required=True, help="suffix of the new generation's name (letters, digits, '-')")
    b.add_argument("--hnsw", action="store_true", help="also create HNSW indexes")
    b.add_argument("--hnsw-memory", metavar="SIZE",
                   help="--hnsw: maintenance_work_mem of the index builds, e.g. 2GB (fastest while the graph fits)")
    b.add_argument("--hnsw-workers", type=int, metavar="N",
                   help="--hnsw: max_parallel_maintenance_workers of the index builds (0-64)")
    b.add_argument("--timeout", type=float, default=3600.0, help="give up after this many seconds")
    b.set_defaults(handler=cmd_build)
    s = verbs.add_parser("shadow", help="compare a candidate with the active generation on live traffic")
    what = s.add_mutually_exclusive_group(required=True)
    what.add_argument("--start", metavar="GENERATION", help="gateways also rank a sample of hybrid searches on it")
    what.add_argument("--stop", action="store_true", help="stop the running comparison (samples are kept)")
    what.add_argument("--report", metavar="GENERATION", help="print the aggregate of its samples")
    what.add_argument("--queries", metavar="GENERATION", help="compare on queries read from stdin instead")
    s.add_argument("--sample", type=float, default=0.1, help="share of hybrid searches compared (0-1], default 0.1")
    s.add_argument("-k", type=int, default=20, help="--queries only: ids compared per query")
    s.set_defaults(handler=cmd_shadow)
    c = verbs.add_parser("cutover", help="point the alias at GENERATION (one transaction)")
    c.add_argument("generation")
    c.set_defaults(handler=_flip(lambda store, a: store.cutover(a.generation)))
    verbs.add_parser("rollback", help="point the alias back at the previous generation").set_defaults(
        handler=_flip(lambda store, a: store.rollback()))
    r = verbs.add_parser("retire", help="drop a generation that is neither active nor previous")
    r.add_argument("generation")
    r.add_argument("--rollback-target", action="store_true",
                   help="also retire the previous generation (ends the rollback window early)")
    r.set_defaults(handler=cmd_retire)
    verbs.add_parser("rotate-cursor-key", help="add a newer shared cursor signing key").set_defaults(
        handler=cmd_rotate)
    q = verbs.add_parser("retry-quarantined", help="a running gateway embeds its quarantined Lessons once more")
    q.add_argument("--url", help="the gateway's MCP URL (default: $S3RM_MCP_URL, else the dev stack's)")
    q.set_defaults(handler=cmd_retry_quarantined, error_prefix="s3rm index retry-quarantined")

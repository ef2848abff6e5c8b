"""``s3rm index build`` argument checks (s3rm/index/__init__.py): refused before any store or wiki is touched."""
from __future__ import annotations

import pytest

from s3rm import cli


@pytest.mark.parametrize("args, message", [
    (["--hnsw-memory", "2 giga", "--hnsw"], "--hnsw-memory takes a PostgreSQL size"),
    (["--hnsw-memory", "2GB"], "apply to --hnsw builds only"),
    (["--hnsw-workers", "65", "--hnsw"], "--hnsw-workers takes 0 to 64"),
    (["--hnsw-workers", "-1", "--hnsw"], "--hnsw-workers takes 0 to 64"),
])
def test_bad_hnsw_build_settings_are_refused_with_exit_2(args, message, capsys, monkeypatch):
    monkeypatch.setenv("S3RM_PG_DSN", "postgresql://nobody@127.0.0.1:1/none")  # never reached
    assert cli.main(["index", "build", "--label", "trial", *args]) == 2
    assert message in capsys.readouterr().err


def test_the_hnsw_memory_size_follows_postgresql_units():
    from s3rm.index import HNSW_MEMORY

    assert all(HNSW_MEMORY.fullmatch(v) for v in ("64MB", "2GB", "512kB", "1TB"))
    assert not any(HNSW_MEMORY.fullmatch(v) for v in ("2gb", "0MB", "2 GB", "2GB;", "", "1e3MB"))

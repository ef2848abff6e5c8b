"""The dev stack's gateway environment and its two embedding servers (s3rm/devstack/stack.py,
docs/hybrid-search.md#document-server). That ``s3rm stack up`` brings the whole system up is the
README's first command; these check the wiring it relies on."""
from __future__ import annotations

from support.schema_dirs import SCHEMA

from gateway.config import load_config
from s3rm.devstack import stack

SECRETS = {"write_token": "t" * 32, "hmac_key_id": "dev", "hmac_key": "k" * 32, "cursor_secret": "c" * 32}


class _Wiki:
    server_url = "http://127.0.0.1:8081/"

    def env(self) -> dict[str, str]:
        return {"S3RM_WIKI_API_URL": "http://127.0.0.1:8081/api.php", "S3RM_WIKI_USERNAME": "S3Agent@gateway",
                "S3RM_WIKI_PASSWORD": "p" * 32}


def test_the_gateway_sends_lesson_texts_to_the_document_server():
    env = stack.gateway_env(_Wiki(), 8080, 8082, SECRETS, 8084)
    retrieval = load_config(env).retrieval
    assert retrieval.embedding_url == "http://127.0.0.1:8082/v1/embeddings"
    assert retrieval.document_embedding_url == "http://127.0.0.1:8084/v1/embeddings"


def test_without_a_document_port_one_server_embeds_everything():
    retrieval = load_config(stack.gateway_env(_Wiki(), 8080, 8082, SECRETS)).retrieval
    assert retrieval.document_url == "" and retrieval.document_embedding_url == retrieval.embedding_url


def test_the_document_port_defaults_to_8084_and_the_query_port_means_one_server(monkeypatch):
    monkeypatch.delenv("S3RM_DEV_EMBEDDING_DOCUMENT_PORT", raising=False)
    assert stack._document_port(8082) == 8084
    monkeypatch.setenv("S3RM_DEV_EMBEDDING_DOCUMENT_PORT", "8082")
    assert stack._document_port(8082) is None
    assert stack.DOCUMENT_EMBEDDING_NICENESS > 0


def test_the_gateway_keeps_its_vector_cache_under_dev():
    retrieval = load_config(stack.gateway_env(_Wiki(), 8080, 8082, SECRETS)).retrieval
    assert retrieval.state_dir == str(stack.STATE_DIR)
    assert stack.STATE_DIR.is_relative_to(stack.DEV_DIR)


def test_the_gateway_takes_the_committed_vector_seed_of_the_corpora_it_imports():
    """docs/hybrid-search.md#vector-seed: the seed file exists for the stack's profile and is configured."""
    retrieval = load_config(stack.gateway_env(_Wiki(), 8080, 8082, SECRETS)).retrieval
    assert stack.seed_file().is_file() and retrieval.seed_file == str(stack.seed_file())
    assert retrieval.profile_name == stack.PROFILE
    assert [source for source, _ in stack.CORPORA] == ["cloud-incidents", "synthetic-lessons"]


def test_the_progress_line_shows_lessons_indexed_of_the_total_and_the_time_left():
    building = {"semantic": "building", "semantic_index": {"indexed": 150, "total": 600, "eta_seconds": 400}}
    assert stack.progress_line(building) == (
        "semantic index: building [#######.......................] 150/600 Lessons, about 7 min left")
    ready = {"semantic": "ready", "semantic_index": {"indexed": 600, "total": 600}}
    assert stack.progress_line(ready) == f"semantic index: ready [{'#' * stack.BAR_WIDTH}] 600/600 Lessons"
    assert stack.progress_line({"semantic": "disabled"}) == "semantic index: disabled"
    assert stack.progress_line({"semantic": "building", "semantic_index": {"indexed": 0, "total": 9,
                                                                           "eta_seconds": 42}}).endswith(
        "0/9 Lessons, about 42 s left")


def test_the_phase_timer_says_where_the_time_of_up_went_step_by_step():
    ticks = iter([100.0, 100.0, 106.5, 106.5, 118.0, 118.0, 118.25, 119.0])
    timer = stack.PhaseTimer(clock=lambda: next(ticks))
    with timer.phase("dev wiki"):
        pass
    try:
        with timer.phase("import cloud-incidents"):
            raise stack.StackError("import failed")
    except stack.StackError:
        pass  # a failed step is still timed
    with timer.phase("gateway"):
        pass
    assert timer.phases == [("dev wiki", 6.5), ("import cloud-incidents", 11.5), ("gateway", 0.25)]
    assert timer.summary() == "up took 19.0 s: dev wiki 6.5 s, import cloud-incidents 11.5 s, gateway 0.2 s"


def test_a_refused_gateway_configuration_stops_up_before_anything_starts(monkeypatch, tmp_path):
    monkeypatch.setattr(stack, "_paths", lambda name: (tmp_path / f"{name}.pid", tmp_path / f"{name}.log"))
    env = {"S3RM_WIKI_API_URL": "http://127.0.0.1:8081/api.php", "S3RM_BIND": "not-an-address"}
    try:
        stack._ensure_gateway(env, 8080)
    except stack.StackError as exc:
        assert str(exc).startswith("gateway configuration refused: ") and "S3RM_BIND" in str(exc)
    else:
        raise AssertionError("a bad S3RM_BIND was accepted")
    assert not (tmp_path / "gateway.pid").exists()


def test_up_returns_once_a_legacy_search_answers_over_mcp():
    """The check ``up`` ends on without --wait-semantic, against a real gateway app over HTTP."""
    import hashlib

    from gateway.app import create_app
    from gateway.config import GatewayConfig
    from gateway.domain.codec import serialize_page
    from support.memory import InMemoryRepository
    from support.lessons import lesson
    from support.services import AppServer

    repo = InMemoryRepository()
    repo.put_page("stack-timeout", serialize_page(lesson("stack-timeout", title="A timeout in the stack"), SCHEMA))

    def build(port: int):
        env = {"S3RM_MCP_PUBLIC_URL": f"http://127.0.0.1:{port}/mcp",
               "S3RM_MCP_WRITE_TOKEN_SHA256": hashlib.sha256(SECRETS["write_token"].encode()).hexdigest(),
               "S3RM_CURSOR_SECRET": "stack-cursor-secret-0123456789"}
        return create_app(GatewayConfig.from_env(env), repository_factory=lambda _config: repo,
                          wiki_probe=lambda: True)

    with AppServer(build) as server:
        stack._legacy_search_answers(server.base, SECRETS["write_token"])  # returns: it answered
        assert stack.progress_line(stack._readyz(server.base)) == "semantic index: disabled"

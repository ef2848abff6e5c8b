"""The dev stack's gateway environment and its two embedding servers (sync/devstack/stack.py,
docs/hybrid-search.md#document-server). That ``s3rm stack up`` brings the whole system up is the
README's first command; these check the wiring it relies on."""
from __future__ import annotations

from gateway.config import load_config
from sync.devstack import stack

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

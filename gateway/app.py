"""Flask application factory for the gateway: ``create_app(config)``, no import-time side effects.

``create_app`` wires one :class:`GatewayState` per process into
``app.extensions["s3rm"]``: the configuration, the tool registry (schemas
built from the tool modules), the dispatcher, the MCP protocol handler,
metrics, the health probes and the Lesson repository.

The repository is built by ``repository_factory(config)`` — once per process,
lazily on first use by a tool (so a wiki that is down at start-up does not
stop the server from booting; readiness reports it). If building fails, the
tool call gets a retryable ``backend_unavailable`` error and the next call
tries again.
"""
from __future__ import annotations

import dataclasses
import logging
import re
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable

from flask import Flask, Response, current_app, request
from werkzeug.exceptions import HTTPException

from gateway.auth.endpoints import create_auth_blueprint
from gateway.auth.service import AuthService
from gateway.config import GatewayConfig
from gateway.core.errors import INTERNAL_ERROR, INVALID_REQUEST, StoreUnavailable, ToolError, error_body
from gateway.core.jsonio import json_response
from gateway.ops.admission import Admission
from gateway.ops.metrics import Metrics
from gateway.ops.ratelimit import RateLimiter
from gateway.retrieval import pgvector as pgvector_backend
from gateway.tools.cursors import CursorKeyRing
from gateway.retrieval.hybrid.service import RetrievalService
from gateway.retrieval.indexing.refresher import IndexRefresher
from gateway.tools.contract import ToolSpec, utc_now
from gateway.tools import chatgpt
from gateway.tools.dispatcher import Dispatcher
from gateway.tools.registry import ToolRegistry
from gateway.transport import headers as rules
from gateway.transport.compression import compress_response
from gateway.transport.discovery import bp as oauth_probe_bp
from gateway.transport.http import bp as mcp_bp
from gateway.transport.protocol import McpProtocol
from gateway.web.graph import create_graph_blueprint
from gateway.web.health import WikiLoginProbe, bp as health_bp
from gateway.web.metrics_endpoint import bp as metrics_bp
from gateway.web.admin import bp as admin_bp

__all__ = ["create_app", "GatewayState", "LazyRepository", "RepositoryFactory"]

log = logging.getLogger("s3rm.app")

#: Builds the process-wide Lesson repository from the configuration.
RepositoryFactory = Callable[[GatewayConfig], Any]


class LazyRepository:
    """A stand-in that builds the real repository on first attribute access, once per process.

    Attribute access is forwarded to the real repository, except ``schema``
    (``config.schema``, known without building it). A failing factory
    raises :class:`~gateway.core.errors.ToolError` ``backend_unavailable``
    (retryable) and is retried on the next access. Thread-safe.
    """

    def __init__(self, factory: RepositoryFactory, config: GatewayConfig):
        self._factory = factory
        self._config = config
        #: the schema source the repository's pages are decoded with (LessonRepository.schema)
        self.schema = config.schema
        self._lock = threading.Lock()
        self._instance: Any = None

    def resolve(self) -> Any:
        """Return the real repository, building it if needed."""
        if self._instance is None:
            with self._lock:
                if self._instance is None:
                    try:
                        self._instance = self._factory(self._config)
                    except Exception as exc:
                        log.error("repository factory failed exception=%s", type(exc).__name__)
                        raise ToolError(
                            "backend_unavailable",
                            "The Lesson store (the wiki) is not reachable right now; retry shortly.",
                            retryable=True,
                        ) from None
        return self._instance

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.resolve(), name)


@dataclass
class GatewayState:
    """Per-process gateway wiring, stored in ``app.extensions["s3rm"]``."""

    config: GatewayConfig
    registry: ToolRegistry
    dispatcher: Dispatcher
    protocol: McpProtocol
    metrics: Metrics
    repository: Any
    wiki_probe: Callable[[], bool]
    clock: Callable[[], datetime]
    admission_status: Callable[[], str]
    semantic_status: Callable[[], str]
    #: :class:`gateway.ops.admission.Admission` (per-class slots and queues) or ``None``
    admission: Any = None
    #: :class:`gateway.ops.ratelimit.RateLimiter` (open mode) or ``None``
    rate_limiter: Any = None
    #: ``() -> dict`` of the hybrid layer's observability values (docs/operations.md#observability),
    #: or ``None`` (reported absent)
    semantic_stats: Callable[[], dict] | None = None
    #: :class:`gateway.retrieval.hybrid.service.RetrievalService` or ``None`` (no repository)
    retrieval: Any = None
    #: github mode's :class:`gateway.auth.service.AuthService`, ``None`` in token and open modes
    oauth: Any = None


def create_app(
    config: GatewayConfig,
    *,
    repository_factory: RepositoryFactory | None = None,
    wiki_probe: Callable[[], bool] | None = None,
    clock: Callable[[], datetime] = utc_now,
    admission_status: Callable[[], str] | None = None,
    semantic_status: Callable[[], str] | None = None,
    specs: tuple[ToolSpec, ...] | None = None,
    semantic_stats: Callable[[], dict] | None = None,
    retrieval: Any = None,
    oauth: AuthService | None = None,
) -> Flask:
    """Build the gateway WSGI app.

    * ``config`` — the validated configuration (:func:`gateway.config.load_config`);
      the factory never reads the environment itself.
    * ``repository_factory(config) -> repository`` — the Lesson repository,
      built lazily once per process (:class:`LazyRepository`); ``None`` leaves
      ``ToolContext.repository`` as ``None``.
    * ``wiki_probe() -> bool`` — readiness wiki check; defaults to
      :class:`~gateway.web.health.WikiLoginProbe` (bot-password login, cached).
    * ``clock`` — aware-UTC ``now`` for tools and the job-runner freshness check.
    * ``admission_status`` / ``semantic_status`` — bounded status words for
      health (defaults: the process :class:`~gateway.ops.admission.Admission`'s
      status / ``"disabled"``).
    * ``semantic_stats`` — ``() -> dict`` of the hybrid layer's observability
      values for ``/metrics`` (absent when ``None``).
    * ``retrieval`` — the hybrid retrieval service; by default, when a
      repository exists, it is built from ``config.retrieval`` (provider
      ``disabled`` unless ``S3RM_EMBEDDING_PROVIDER`` says otherwise) and starts
      its ONE background refresher here, once per process (docs/retrieval.md#one-process).
      It supplies ``semantic_status``/``semantic_stats`` unless those are given.
    * ``oauth`` — github mode's :class:`~gateway.auth.service.AuthService`
      (default: built from ``config`` when ``S3RM_MCP_WRITE_AUTH_MODE=github``;
      docs/transport.md#github-mode); its blueprint replaces the OAuth probe answers.
    * ``specs`` — the tools to serve; defaults to the Lesson tools of
      :mod:`gateway.tools.registry` (tests pass variants with other handlers).

    Raises :class:`~gateway.tools.registry.SchemaLoadError` when a tool's built
    schema is invalid.
    """
    metrics = Metrics()
    registry = ToolRegistry.load(config.schema, specs)
    if config.chatgpt_lesson_url:
        registry = registry.with_builtin(chatgpt.SPECS, config.schema)
    repository = LazyRepository(repository_factory, config) if repository_factory is not None else None
    admission = Admission.from_config(config, metrics=metrics)
    cursor_ring = None
    if retrieval is None and repository is not None:
        factory = IndexRefresher
        if config.retrieval.index_backend == "pgvector":
            factory = pgvector_backend.refresher_factory(config.retrieval)
            config = _shared_cursor_key(config, factory.store)
            if config.cursor_keys:  # picks up `s3rm index rotate-cursor-key` without a restart
                cursor_ring = CursorKeyRing(factory.store.cursor_keys, dict(config.cursor_keys))
        retrieval = RetrievalService(config.retrieval, repository, metrics=metrics, refresher_factory=factory)
        retrieval.start()
    if retrieval is not None:
        admission.attach_semantic_gate(retrieval.gate_stats)
    # the snapshot scan on every wiki: SMW's stored values are not the codec's values (gateway/web/graphdata.py)
    graph_bp = create_graph_blueprint(lambda: repository, config) if repository is not None else None
    dispatcher = Dispatcher(
        registry, config=config, repository=repository, metrics=metrics, clock=clock, admission=admission,
        retrieval=retrieval,
        cursor_ring=cursor_ring,
        write_listeners=(lambda _name: graph_bp.graph_cache.invalidate(),) if graph_bp is not None else (),
    )
    if oauth is None and config.write_auth_mode == "github":
        oauth = AuthService(config)
    state = GatewayState(
        config=config,
        registry=registry,
        dispatcher=dispatcher,
        protocol=McpProtocol(dispatcher),
        metrics=metrics,
        repository=repository,
        wiki_probe=wiki_probe or WikiLoginProbe.from_config(config),
        clock=clock,
        admission_status=admission_status or admission.status,
        semantic_status=semantic_status
        or (retrieval.semantic_status if retrieval is not None else (lambda: "disabled")),
        admission=admission,
        rate_limiter=RateLimiter.from_config(config, metrics=metrics) if config.write_auth_mode == "open" else None,
        semantic_stats=semantic_stats or (retrieval.health if retrieval is not None else None),
        retrieval=retrieval,
        oauth=oauth,
    )

    app = Flask("gateway")
    app.config["MAX_CONTENT_LENGTH"] = config.max_body_bytes
    app.json.ensure_ascii = False
    app.extensions["s3rm"] = state
    app.register_blueprint(mcp_bp)
    app.register_blueprint(health_bp)
    app.register_blueprint(metrics_bp)
    app.register_blueprint(admin_bp)
    if oauth is not None:
        app.register_blueprint(create_auth_blueprint(oauth))  # github mode: the authorization server
    else:
        app.register_blueprint(oauth_probe_bp)  # JSON 404s naming the token header for OAuth probes
    if graph_bp is not None:
        app.register_blueprint(graph_bp)  # GET /mcp/graph for the home page (not an MCP tool)
    app.before_request(_check_host)  # every route but the health probes (the mcp blueprint checks its own)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(StoreUnavailable, _store_unavailable)
    app.register_error_handler(Exception, _unexpected_error)
    app.after_request(_security_headers)
    app.after_request(_compress)  # registered last, runs first: later hooks only add headers
    return app


def _shared_cursor_key(config: GatewayConfig, store: Any) -> GatewayConfig:
    """The config with the cursor key every gateway on the shared store signs with
    (docs/operations.md#pgvector-backend); unchanged (with a warning) when the store cannot be read now."""
    try:
        keys = store.cursor_keys()
    except Exception as exc:  # the store may be down at start: cursors then stay per-process
        logging.getLogger("s3rm.pgvector").warning("shared cursor key unavailable (%s); using this process's key",
                                                   type(exc).__name__)
        return config
    return dataclasses.replace(config, cursor_keys=tuple(sorted(keys.items())), cursor_secret_ephemeral=False)


def _is_mcp_path() -> bool:
    return request.path == "/mcp" or request.path.startswith("/mcp/")


def _http_error(exc: HTTPException) -> Response:
    """Every HTTP error Flask/Werkzeug raises (404, 405, 413, ...) as JSON, never an HTML page."""
    status = exc.code or 500
    message = f"{exc.name}" if status != 404 else "Not Found: no such endpoint on this server"
    if _is_mcp_path():
        response = json_response(error_body(None, INVALID_REQUEST, message), status)
    else:
        code = exc.name.lower().replace(" ", "_") if exc.name else "http_error"
        response = json_response({"error": {"code": code, "message": message}}, status)
    valid = getattr(exc, "valid_methods", None)
    if status == 405 and valid:
        response.headers["Allow"] = ", ".join(valid)
    return response


def _store_unavailable(exc: StoreUnavailable) -> Response:
    """A state store outage: HTTP 503 with ``Retry-After`` (docs/transport.md#github-store-outage), never a 500.

    On ``/mcp`` a JSON-RPC error (-32603, ``data.code`` ``store_unavailable``); on the OAuth
    endpoints RFC 6749's ``temporarily_unavailable``. Logged by type only.
    """
    log.warning("state store unavailable path=%s cause=%s", request.path, type(exc.__cause__).__name__)
    message = "the authorization state store is unavailable; retry shortly"
    if _is_mcp_path():
        response = json_response(error_body(None, INTERNAL_ERROR, message, {"code": "store_unavailable"}), 503)
    else:
        response = json_response({"error": "temporarily_unavailable", "error_description": message}, 503)
    response.headers["Retry-After"] = str(exc.retry_after_seconds)
    return response


def _unexpected_error(exc: Exception) -> Response:
    """Any uncaught exception: a JSON 500 without details (logged by type only)."""
    log.error("unhandled error path=%s exception=%s", request.path, type(exc).__name__)
    if _is_mcp_path():
        return json_response(error_body(None, INTERNAL_ERROR, "Internal error"), 500)
    return json_response({"error": {"code": "internal_error", "message": "Internal error"}}, 500)


def _compress(response: Response) -> Response:
    return compress_response(response, request.headers.get("Accept-Encoding"))


#: Routes never Host-checked: the container health probes (docs/transport.md#host-and-origin).
HEALTH_PROBES = ("/livez", "/healthz", "/readyz")
#: Operator routes (loopback or metrics token only): a loopback literal Host is accepted too, as
#: ``curl http://127.0.0.1:8080/metrics`` inside the container sends; a rebound browser sends its own name.
_OPERATOR_PREFIXES = ("/metrics", "/admin/")
_LOOPBACK_HOST = re.compile(r"^(127\.[0-9.]+|\[::1\]|localhost)(:[0-9]{1,5})?$", re.IGNORECASE)


def _check_host() -> Response | None:
    """421 for a ``Host`` outside the allowlist on every route but :data:`HEALTH_PROBES` (DNS rebinding,
    docs/transport.md#host-and-origin); ``/mcp`` itself is checked by its blueprint (JSON-RPC errors)."""
    path = request.path
    if path in HEALTH_PROBES or request.blueprint == "mcp" or request.url_rule is None:  # no route: a plain 404
        return None
    host = (request.headers.get("Host") or "").strip().lower()
    if host in current_app.extensions["s3rm"].config.allowed_hosts:
        return None
    if path.startswith(_OPERATOR_PREFIXES) and _LOOPBACK_HOST.match(host):
        return None
    return json_response({"error": "misdirected_request", "error_description": "Misdirected Request: this Host is "
                          "not served here (see S3RM_MCP_PUBLIC_URL / S3RM_MCP_ALLOWED_HOSTS)"}, 421)


def _security_headers(response: Response) -> Response:
    for key, value in rules.security_headers(_is_mcp_path()).items():
        response.headers.setdefault(key, value)
    return response

"""gunicorn settings for the gateway (used by ``s3rm serve``).

ONE worker process with threads (gthread), on purpose: the derived search
index, its background refresher and the cursor generations live in process
memory and are built once per process lifespan (docs/retrieval.md#one-process).
Several processes would each build their own index and refuse
each other's cursors. Scale with threads here; several processes or hosts
only with shared state (docs/retrieval.md#one-process).

Settings come from the same validated configuration as the app
(``S3RM_BIND``, default 127.0.0.1:8080; ``S3RM_GUNICORN_THREADS``, default 64; admission limits derive from it).
"""
import os

# One BLAS thread: the exact index search is a single matrix-vector product per
# facet, streamed once; BLAS thread pools only add contention with the request
# threads (measured in bench/bench_index.py, docs/hybrid-search.md). Set before
# numpy is imported by the app.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from gateway.config import load_config  # noqa: E402

_config = load_config(os.environ)

bind = [_config.bind]
workers = 1
# gthread with JSON error pages for requests gunicorn itself refuses (gateway/serving/worker.py)
worker_class = "gateway.serving.worker.JsonErrorThreadWorker"
threads = _config.gunicorn_threads
# A tools/call reads the wiki with its own timeouts; 60 s bounds a stuck request.
timeout = 60
graceful_timeout = 30
# An idle keep-alive connection is closed by the CLIENT first: Node's fetch (undici) drops its idle sockets
# after 4 s and Caddy's upstream pool after 2 min. With the server closing first (5 s), a client whose
# timer fires late (a busy machine) reuses a socket gunicorn has just closed and its POST fails with
# "other side closed" (seen in tests/gateway/test_clients.py under load). gthread parks idle connections
# in its poller, so a long keep-alive holds no thread.
keepalive = 130
# Request line and header limits: MCP requests are small JSON POSTs.
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 16384
# No access log by default (paths only, but keep logs minimal); errors to stderr.
accesslog = None
errorlog = "-"
loglevel = "info"
proc_name = "s3rm-gateway"
# gunicorn >= 24 opens a shared runtime control socket by default; the gateway
# needs none, and test instances on free ports must not share one.
control_socket_disable = True
logconfig_dict = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "plain", "stream": "ext://sys.stderr"}},
    "root": {"level": "WARNING", "handlers": ["stderr"]},
    "loggers": {
        "s3rm": {"level": "INFO", "handlers": ["stderr"], "propagate": False},
        "gunicorn.error": {"level": "INFO", "handlers": ["stderr"], "propagate": False},
    },
}

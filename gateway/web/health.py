"""Health endpoints: ``/livez`` (process only), ``/healthz`` and ``/readyz`` (ready to serve).

``/healthz`` and ``/readyz`` answer 200 only when BOTH hold (docs/operations.md#health):

* a MediaWiki bot-password login with the gateway's account works
  (:class:`WikiLoginProbe`, short timeout, result cached a few seconds), and
* the job runner's state file (``S3RM_JOBRUNNER_STATE_FILE``, JSON
  ``{"last_run_at": "<UTC ISO-8601>Z", "ok": true}``) reports a successful run
  no older than ``S3RM_JOBRUNNER_MAX_AGE_SECONDS``.

Otherwise 503. Bodies hold bounded status words only — never configuration
values, URLs, account names or Lesson content. Admission and semantic state
are reported but never fail readiness (a semantic outage must not, docs/operations.md#health):
``admission`` (``ok`` | ``saturated``), ``admission_classes`` (``read``,
``write``, ``semantic`` → ``ok`` | ``busy`` | ``saturated``) and ``semantic``.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import requests
from flask import Blueprint, current_app

from gateway.core.jsonio import json_response

__all__ = [
    "bp",
    "WikiLoginProbe",
    "jobrunner_status",
    "readiness",
    "ADMISSION_STATES",
    "SEMANTIC_STATES",
    "JOBRUNNER_STATES",
]

log = logging.getLogger("s3rm.health")

bp = Blueprint("health", __name__)

#: Bounded vocabularies of every status field.
JOBRUNNER_STATES = ("ok", "stale", "missing", "failed", "invalid")
ADMISSION_STATES = ("ok", "saturated", "unknown")
#: Per-class admission words (``admission_classes``: read, write, semantic).
ADMISSION_CLASS_STATES = ("ok", "busy", "saturated", "unknown")
SEMANTIC_STATES = ("disabled", "building", "ready", "stale", "degraded", "unavailable", "unknown")
_FUTURE_SKEW_SECONDS = 60
_PROBE_TIMEOUT_CAP_SECONDS = 3.0


class WikiLoginProbe:
    """Checks that the gateway's MediaWiki bot password can log in (callable → bool).

    Each probe uses a fresh ``requests`` session: ``GET action=query&meta=tokens&type=login``
    then ``POST action=login`` with ``lgname``/``lgpassword``/``lgtoken``; success
    means ``login.result == "Success"``. Timeout: ``min(S3RM_WIKI_TIMEOUT_SECONDS, 3)``
    seconds per HTTP call. Results are cached for ``cache_seconds`` (thread-safe)
    so health polling never hammers the wiki. Never raises; never logs
    credentials or URLs.
    """

    def __init__(
        self,
        api_url: str,
        username: str,
        password: str,
        *,
        timeout_seconds: float = _PROBE_TIMEOUT_CAP_SECONDS,
        cache_seconds: float = 5.0,
        monotonic: Callable[[], float] = time.monotonic,
    ):
        self._api_url = api_url
        self._username = username
        self._password = password
        self._timeout = min(timeout_seconds, _PROBE_TIMEOUT_CAP_SECONDS)
        self._cache_seconds = cache_seconds
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._cached: tuple[float, bool] | None = None

    @classmethod
    def from_config(cls, config) -> "WikiLoginProbe":
        """Build the probe from a :class:`~gateway.config.GatewayConfig`."""
        return cls(
            config.wiki_api_url,
            config.wiki_username,
            config.wiki_password,
            timeout_seconds=config.wiki_timeout_seconds,
        )

    def __call__(self) -> bool:
        with self._lock:
            now = self._monotonic()
            if self._cached is not None and now - self._cached[0] < self._cache_seconds:
                return self._cached[1]
            ok = self._login()
            self._cached = (self._monotonic(), ok)
            return ok

    def _login(self) -> bool:
        if not self._username or not self._password:
            return False
        try:
            with requests.Session() as session:
                session.headers["User-Agent"] = "s3rm-gateway-health/1"
                r = session.get(
                    self._api_url,
                    params={"action": "query", "meta": "tokens", "type": "login", "format": "json"},
                    timeout=self._timeout,
                )
                r.raise_for_status()
                token = r.json()["query"]["tokens"]["logintoken"]
                r = session.post(
                    self._api_url,
                    data={
                        "action": "login",
                        "lgname": self._username,
                        "lgpassword": self._password,
                        "lgtoken": token,
                        "format": "json",
                    },
                    timeout=self._timeout,
                )
                r.raise_for_status()
                return r.json().get("login", {}).get("result") == "Success"
        except (requests.RequestException, ValueError, KeyError, TypeError) as exc:
            log.warning("wiki login probe failed exception=%s", type(exc).__name__)
            return False


def _parse_utc(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    return parsed.astimezone(timezone.utc)


def jobrunner_status(path: Path | None, max_age_seconds: int, now: datetime) -> str:
    """Classify the job runner's state file; returns one of :data:`JOBRUNNER_STATES`.

    ``missing``: no path configured or no file; ``invalid``: unreadable, not the
    documented JSON, or stamped more than 60 s in the future; ``failed``: the
    last run reported ``ok: false``; ``stale``: older than ``max_age_seconds``;
    else ``ok``. ``now`` must be an aware datetime.
    """
    if path is None:
        return "missing"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return "missing"
    except (OSError, UnicodeDecodeError):
        return "invalid"
    try:
        data = json.loads(text)
    except ValueError:
        return "invalid"
    if not isinstance(data, dict):
        return "invalid"
    last = _parse_utc(data.get("last_run_at"))
    if last is None or not isinstance(data.get("ok"), bool):
        return "invalid"
    age = (now - last).total_seconds()
    if age < -_FUTURE_SKEW_SECONDS:
        return "invalid"
    if not data["ok"]:
        return "failed"
    if age > max_age_seconds:
        return "stale"
    return "ok"


def _bounded(value: object, allowed: tuple[str, ...]) -> str:
    return value if isinstance(value, str) and value in allowed else "unknown"


def _semantic_counts(state) -> dict | None:
    """Integer counts of the semantic index (indexed, lessons, pending, failed, quarantined, and during a
    build total and eta_seconds, docs/hybrid-search.md#build-progress) or None; never fails. ``quarantined``
    counts Lessons found by full text only (docs/hybrid-search.md#quarantine)."""
    stats = getattr(state, "semantic_stats", None)
    if stats is None:
        return None
    try:
        raw = stats()
        return {k: raw[k] for k in ("indexed", "total", "eta_seconds", "lessons", "pending", "failed", "quarantined")
                if isinstance(raw.get(k), int) and not isinstance(raw.get(k), bool)}
    except Exception:  # a semantic outage never fails health (docs/operations.md#health)
        return None


def readiness(state) -> tuple[int, dict]:
    """Compute ``(http_status, body)`` for /healthz and /readyz from the app state."""
    config = state.config
    wiki_ok = bool(state.wiki_probe())
    jobrunner = jobrunner_status(config.jobrunner_state_file, config.jobrunner_max_age_seconds, state.clock())
    ready = wiki_ok and jobrunner == "ok"
    body = {
        "status": "ok" if ready else "unavailable",
        "checks": {"wiki": "ok" if wiki_ok else "fail", "jobrunner": jobrunner},
        "admission": _bounded(state.admission_status(), ADMISSION_STATES),
        "semantic": _bounded(state.semantic_status(), SEMANTIC_STATES),
    }
    semantic_counts = _semantic_counts(state)
    if semantic_counts is not None:
        body["semantic_index"] = semantic_counts
    admission = getattr(state, "admission", None)
    if admission is not None:
        body["admission_classes"] = {
            name: _bounded(word, ADMISSION_CLASS_STATES) for name, word in admission.class_states().items()
        }
    return (200 if ready else 503), body


@bp.route("/livez", methods=["GET"])
def livez():
    """200 while the process serves requests; checks nothing else."""
    return json_response({"status": "ok"}, 200)


@bp.route("/healthz", methods=["GET"])
@bp.route("/readyz", methods=["GET"])
def healthz():
    """200 when the wiki login works and the job runner is fresh; 503 otherwise."""
    status, body = readiness(current_app.extensions["s3rm"])
    return json_response(body, status)

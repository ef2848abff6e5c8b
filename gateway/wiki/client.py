"""The ONE MediaWiki Action API client: thread-safe, ``requests``, bot-password login.

The gateway and every ``s3rm`` command that talks to a wiki (``sync
push|diff|check`` through ``sync/wikisite.py``, ``import``, ``audit``,
the dev wiki's readiness check) use this class, its error tree
(:mod:`gateway.domain.repository`) and one edit policy
(:func:`gateway.wiki.edit.conditional_save`).

Why not mwclient: ``mwclient.Site`` keeps one ``requests.Session`` plus mutable
token and login state without locks, retries by sleeping inside the calling
thread with its own error classes, and hides the raw response envelope. The
gateway runs ONE process with many threads (docs/retrieval.md#one-process), so it needs
serialised re-login, a shared cookie store and the error mapping of
:mod:`gateway.domain.repository`; that is this small module. mwclient's
``Page.edit`` also sends ``basetimestamp``, which MediaWiki ignores when the
same account made every edit since (see :mod:`gateway.wiki.edit`), so its edit
path cannot carry our conflict policy either. mwclient stays a test
dependency: tests use it as an independent second client.

Usage::

    client = WikiClient("http://127.0.0.1:8081/api.php", "S3Agent@gateway", password)
    data = client.get({"action": "query", "meta": "userinfo"})      # -> dict (``query``… keys)
    data = client.post({"action": "edit", "title": "Lesson:x", "text": "...",
                        "baserevid": 12, "nocreate": 1}, token="csrf")

Every request carries ``format=json``, ``formatversion=2``, ``maxlag=5`` and,
when credentials are configured, ``assert=user``. Behaviour:

* **Login** — ``action=login`` with a login token (bot passwords). The login is
  lazy (first request) and serialised; a request that fails with
  ``assertuserfailed``/``assertbotfailed``/``notloggedin`` or ``badtoken``
  (session lost, e.g. the wiki's session store was cleared) triggers ONE
  re-login for all threads that saw the same session and is then retried once.
* **Retries** — tenacity, bounded (``max_retries``) with exponential backoff and jitter,
  honouring ``Retry-After`` and the ``lag`` of ``maxlag`` errors, on
  ``maxlag``, ``ratelimited``, ``readonly``, database errors, HTTP 5xx/429,
  timeouts and connection errors. A POST that is not idempotent is retried
  only when MediaWiki certainly did not apply it (API-level refusals, connect
  failures); a read timeout or 5xx after sending raises WikiUnavailable with
  ``maybe_applied=True``.
* **Errors** — API error codes map to :class:`WikiUnavailable` (retryable),
  :class:`PermissionDenied` (:class:`LoginFailed` when the bot password is
  refused, :class:`AssertUserFailed` when a re-login did not restore the
  session), :class:`EditConflict`, :class:`PageExists`,
  :class:`PageMissing` or :class:`WikiApiError`; ``exc.wiki_code`` keeps the
  MediaWiki code (``http-503``/``timeout``/``connection``/``badresponse`` for
  transport failures).
* **Privacy** — the module logs the action name, error codes, attempt numbers
  and latencies only; never parameters, page content or query text.

Thread safety: one ``requests.Session`` per thread (sessions are not
documented as thread-safe); cookies live in one lock-protected store shared by
all threads, so a login made by one thread serves all of them.
"""
from __future__ import annotations

import logging
import random
import threading
import time
from typing import Any, Mapping

import requests
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from gateway.core.errors import GatewayError
from gateway.domain.repository import (
    AssertUserFailed,
    EditConflict,
    LoginFailed,
    PageExists,
    PageMissing,
    PermissionDenied,
    RepositoryError,
    WikiApiError,
    WikiUnavailable,
)

__all__ = ["WikiClient", "DEFAULT_USER_AGENT", "error_from_api"]

log = logging.getLogger(__name__)

DEFAULT_USER_AGENT = "s3rm-gateway/0.1 (S3 Research Memory MCP gateway; python-requests)"

#: API codes after which a retry may help (the wiki is lagged, busy or read-only).
RETRYABLE_CODES = frozenset({
    "maxlag", "ratelimited", "readonly", "actionthrottledtext", "internal_api_error_DBQueryError",
    "internal_api_error_DBConnectionError", "internal_api_error_DBTransactionStateError",
    "internal_api_error_DBReadOnlyError", "internal_api_error_DBUnexpectedError",
    "internal_api_error_Wikimedia\\Rdbms\\DBQueryError",
    "internal_api_error_Wikimedia\\Rdbms\\DBConnectionError",
    "internal_api_error_Wikimedia\\Rdbms\\DBReadOnlyError",
    "internal_api_error_Wikimedia\\Rdbms\\DBTransactionStateError",
    "internal_api_error_Wikimedia\\Rdbms\\DBUnexpectedError",
})
#: API codes meaning "the session is gone": log in again, then retry once.
#: Of those, the codes that mean "the request ran without our user" (AssertUserFailed if a re-login fails).
ASSERT_CODES = frozenset({"assertuserfailed", "assertbotfailed", "notloggedin"})
SESSION_CODES = ASSERT_CODES | {"badtoken"}
PERMISSION_CODES = frozenset({
    "permissiondenied", "protectedpage", "protectedtitle", "protectednamespace",
    "protectednamespace-interface", "cascadeprotected", "cantcreate", "cantcreate-anon", "noedit",
    "noedit-anon", "noimageredirect", "writeapidenied", "readapidenied", "blocked", "autoblocked",
    "customcssprotected", "customjsprotected", "sitecssprotected", "sitejsprotected",
    "mwoauth-invalid-authorization", "confirmemail", "spamdetected", "abusefilter-disallowed",
    "assertnameduserfailed",
})
CONFLICT_CODES = frozenset({"editconflict"})
EXISTS_CODES = frozenset({"articleexists"})
MISSING_CODES = frozenset({"missingtitle", "nocreate-missing", "pagedeleted"})


def error_from_api(code: str, info: str = "", *, action: str = "") -> RepositoryError:
    """Build the repository exception for MediaWiki API error ``code``.

    ``info`` is MediaWiki's English explanation (it never contains page text for
    the codes above); the result's ``wiki_code`` is ``code``.
    """
    where = f"{action}: " if action else ""
    text = f"{where}MediaWiki refused the request ({code})" + (f": {info}" if info else "")
    if code in RETRYABLE_CODES or code.startswith("internal_api_error"):
        exc: RepositoryError = WikiUnavailable(text)
    elif code in ASSERT_CODES:
        exc = AssertUserFailed(text)
    elif code in PERMISSION_CODES:
        exc = PermissionDenied(text)
    elif code in CONFLICT_CODES:
        exc = EditConflict(text, current_revision_id=None)
    elif code in EXISTS_CODES:
        exc = PageExists(text, current_revision_id=None)
    elif code in MISSING_CODES:
        exc = PageMissing(text)
    else:
        exc = WikiApiError(text)
    exc.wiki_code = code
    return exc


def _unavailable(code: str, message: str, *, maybe_applied: bool = False) -> WikiUnavailable:
    exc = WikiUnavailable(message)
    exc.wiki_code = code
    exc.maybe_applied = maybe_applied
    return exc


class _Retry(GatewayError):
    """Internal: the attempt failed in a way that a later attempt may fix."""

    def __init__(self, error: RepositoryError, delay: float | None = None):
        super().__init__(str(error))
        self.error = error
        self.delay = delay


class _SessionLost(GatewayError):
    """Internal: MediaWiki no longer recognises our session (re-login and retry once)."""

    def __init__(self, error: RepositoryError):
        super().__init__(str(error))
        self.error = error


class WikiClient:
    """MediaWiki Action API client shared by all gateway threads.

    Args:
        api_url: ``https://host/w/api.php``.
        username / password: bot-password login (``User@app``); empty means
            anonymous (no login, no ``assert=user``).
        timeout: seconds per HTTP request (connect and read).
        max_retries: extra attempts after the first for retryable failures.
        backoff / max_backoff: base and cap of the exponential backoff (seconds).
        maxlag: value sent as ``maxlag`` (seconds of replication lag tolerated).
        user_agent: the ``User-Agent`` header (MediaWiki asks clients to set one).
        sleep: injectable sleep function (tests).
    """

    def __init__(self, api_url: str, username: str = "", password: str = "", *, timeout: float = 10.0,
                 max_retries: int = 3, backoff: float = 0.5, max_backoff: float = 8.0, maxlag: int = 5,
                 user_agent: str = DEFAULT_USER_AGENT, sleep=time.sleep):
        self.api_url = api_url
        self.username = username
        self._password = password
        self.timeout = timeout
        self.max_retries = max(0, int(max_retries))
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.maxlag = maxlag
        self.user_agent = user_agent
        self._sleep = sleep
        self._local = threading.local()
        self._state_lock = threading.Lock()        # guards cookies, csrf token, session generation
        self._login_lock = threading.Lock()        # serialises logins
        self._token_lock = threading.Lock()        # serialises CSRF token fetches
        self._cookies: dict[str, str] = {}
        self._csrf: str | None = None
        self._session_gen = 0                      # +1 after every successful login
        self._logged_in_gen: int | None = None     # generation of the current login, None before login
        self._siteinfo: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"WikiClient(api_url={self.api_url!r}, username={self.username!r})"

    # ------------------------------------------------------------ public
    @property
    def authenticated(self) -> bool:
        """True when credentials are configured (requests then assert ``user``)."""
        return bool(self.username)

    def get(self, params: Mapping[str, Any], *, assert_user: bool = True) -> dict[str, Any]:
        """GET ``api.php`` with ``params``; returns the decoded JSON object.

        Raises a :class:`RepositoryError` subclass (see module doc). Lists are
        joined with ``|``; booleans become ``1``/absent.
        """
        return self._call("GET", params, token=None, assert_user=assert_user, idempotent=True)

    def post(self, params: Mapping[str, Any], *, token: str | None = "csrf", assert_user: bool = True,
             idempotent: bool = False) -> dict[str, Any]:
        """POST ``api.php`` (edits and other writes); returns the decoded JSON object.

        ``token`` names the token type to add as ``token`` (default ``"csrf"``,
        cached and refreshed after ``badtoken``); None sends none. Pass
        ``idempotent=True`` only for requests that are safe to repeat after an
        unknown outcome. Raises like :meth:`get`; EditConflict/PageExists carry
        ``current_revision_id=None`` (the repository fills it in).
        """
        return self._call("POST", params, token=token, assert_user=assert_user, idempotent=idempotent)

    def login(self) -> None:
        """Log in now with the configured bot password (no-op without credentials).

        Raises PermissionDenied (``wiki_code`` = the login result) when the
        password is refused, WikiUnavailable when the wiki cannot be reached.
        """
        self._relogin(seen_gen=None)

    def check_login(self, timeout: float | None = None) -> bool:
        """True when the configured account is logged in and recognised right now.

        Logs in if needed; never raises. ``timeout`` (default: min(timeout, 5 s))
        bounds each HTTP request of the check.
        """
        limit = min(self.timeout, 5.0) if timeout is None else timeout
        try:
            data = self._call("GET", {"action": "query", "meta": "userinfo"}, token=None,
                              assert_user=True, idempotent=True, timeout=limit, retries=0)
        except RepositoryError as exc:
            log.info("wiki login check failed (%s)", exc.wiki_code or type(exc).__name__)
            return False
        info = data.get("query", {}).get("userinfo", {})
        if self.authenticated:
            return not info.get("anon") and info.get("id", 0) > 0
        return True

    def csrf_token(self) -> str:
        """The cached CSRF token (fetched once per login)."""
        return self.token("csrf")

    def token(self, kind: str = "csrf") -> str:
        """A token of ``kind`` (``csrf``, ``login``, …); CSRF tokens are cached per login."""
        if kind == "csrf":
            # One fetch at a time: MediaWiki creates the session's token secret
            # lazily, so two concurrent first fetches race and one token ends up
            # invalid (badtoken on the next edit).
            with self._token_lock:
                with self._state_lock:
                    if self._csrf:
                        return self._csrf
                return self._fetch_token(kind)
        return self._fetch_token(kind)

    def _fetch_token(self, kind: str) -> str:
        data = self._call("GET", {"action": "query", "meta": "tokens", "type": kind}, token=None,
                          assert_user=kind != "login", idempotent=True)
        value = data.get("query", {}).get("tokens", {}).get(f"{kind}token")
        if not value:
            raise _unavailable("badresponse", f"MediaWiki returned no {kind} token")
        if kind == "csrf":
            with self._state_lock:
                self._csrf = value
        return value

    def siteinfo(self, refresh: bool = False) -> dict[str, Any]:
        """``meta=siteinfo`` (general, namespaces, namespacealiases, extensions), cached per client."""
        if self._siteinfo is None or refresh:
            data = self.get({"action": "query", "meta": "siteinfo",
                             "siprop": "general|namespaces|namespacealiases|extensions"})
            self._siteinfo = data.get("query", {})
        return self._siteinfo

    def has_extension(self, name: str) -> bool:
        """True when siteinfo lists an installed extension called ``name``."""
        return any(ext.get("name") == name for ext in self.siteinfo().get("extensions", []))

    # ----------------------------------------------------------- internals
    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            session.headers["User-Agent"] = self.user_agent
            self._local.session = session
        return session

    def _cookie_snapshot(self) -> tuple[dict[str, str], int]:
        with self._state_lock:
            return dict(self._cookies), self._session_gen

    def _store_cookies(self, response: requests.Response) -> None:
        if response.cookies:
            with self._state_lock:
                for cookie in response.cookies:
                    if cookie.value is not None:
                        self._cookies[cookie.name] = cookie.value

    def _needs_login(self) -> bool:
        with self._state_lock:
            return self.authenticated and self._logged_in_gen is None

    def _relogin(self, seen_gen: int | None) -> None:
        """Log in unless another thread already did so after generation ``seen_gen``."""
        if not self.authenticated:
            return
        with self._login_lock:
            with self._state_lock:
                if self._logged_in_gen is not None and (seen_gen is None or self._session_gen != seen_gen):
                    # another thread logged in while we waited: the first-login path
                    # (seen_gen None) must not log in twice, which would invalidate the
                    # session and CSRF token that thread just obtained
                    return
                self._cookies.clear()
                self._csrf = None
                self._logged_in_gen = None
            for attempt in range(2):
                login_token = self.token("login")
                data = self._call("POST", {"action": "login", "lgname": self.username,
                                           "lgpassword": self._password, "lgtoken": login_token},
                                  token=None, assert_user=False, idempotent=True, login=True)
                result = data.get("login", {}).get("result", "")
                if result == "Success":
                    with self._state_lock:
                        self._session_gen += 1
                        self._logged_in_gen = self._session_gen
                    log.info("wiki login succeeded")
                    return
                if result == "WrongToken" and attempt == 0:
                    continue
                exc = LoginFailed(f"MediaWiki refused the bot-password login of {self.username!r} "
                                  f"({result or 'no result'})")
                exc.wiki_code = result or "login-failed"
                raise exc

    def _prepare(self, params: Mapping[str, Any], token: str | None, assert_user: bool) -> dict[str, str]:
        out: dict[str, str] = {"format": "json", "formatversion": "2", "maxlag": str(self.maxlag)}
        if assert_user and self.authenticated:
            out["assert"] = "user"
        for key, value in params.items():
            if value is None or value is False:
                continue
            if value is True:
                value = "1"
            elif isinstance(value, (list, tuple, set, frozenset)):
                value = "|".join(str(v) for v in value)
            out[key] = str(value)
        if token:
            out["token"] = self.token(token)
        return out

    def _call(self, method: str, params: Mapping[str, Any], *, token: str | None, assert_user: bool,
              idempotent: bool, timeout: float | None = None, retries: int | None = None,
              login: bool = False) -> dict[str, Any]:
        action = str(params.get("action", "?"))
        if not login and assert_user and self._needs_login():
            self._relogin(seen_gen=None)
        relogged = False

        def attempt() -> dict[str, Any]:
            """One attempt; a lost session is logged in again and the request repeated, once per call."""
            nonlocal relogged
            while True:
                cookies, gen = self._cookie_snapshot()
                try:
                    body = self._prepare(params, token, assert_user)
                    return self._attempt(method, action, body, cookies, timeout or self.timeout, idempotent)
                except _SessionLost as lost:
                    if relogged or login or not self.authenticated:
                        raise lost.error from None
                    relogged = True
                    log.info("wiki session lost during %s (%s); logging in again", action, lost.error.wiki_code)
                    self._relogin(seen_gen=gen)
                    if lost.error.wiki_code == "badtoken":
                        with self._state_lock:
                            self._csrf = None

        def before_sleep(state: RetryCallState) -> None:
            log.info("wiki %s attempt %d failed (%s); retrying in %.2fs", action, state.attempt_number,
                     state.outcome.exception().error.wiki_code, state.next_action.sleep)

        retrying = Retrying(
            retry=retry_if_exception_type(_Retry),
            stop=stop_after_attempt(1 + (self.max_retries if retries is None else retries)),
            wait=self._wait, sleep=self._sleep, before_sleep=before_sleep, reraise=True)
        try:
            return retrying(attempt)
        except _Retry as retry:
            raise retry.error from None

    def _wait(self, state: RetryCallState) -> float:
        """Seconds before the next attempt: the wiki's ``Retry-After`` (or a maxlag error's ``lag``)
        when it sent one, else exponential from ``backoff``; capped at ``max_backoff``, then ±25 % jitter."""
        asked = state.outcome.exception().delay
        exponential = wait_exponential(multiplier=self.backoff, max=self.max_backoff)
        delay = exponential(state) if asked is None else min(self.max_backoff, asked)
        return delay * (0.75 + random.random() / 2)

    def _attempt(self, method: str, action: str, body: dict[str, str], cookies: dict[str, str],
                 timeout: float, idempotent: bool) -> dict[str, Any]:
        session = self._session()
        session.cookies.clear()
        started = time.monotonic()
        try:
            if method == "GET":
                response = session.get(self.api_url, params=body, cookies=cookies, timeout=timeout)
            else:
                response = session.post(self.api_url, data=body, cookies=cookies, timeout=timeout)
        except requests.ConnectTimeout:
            raise _Retry(_unavailable("timeout", f"{action}: connecting to MediaWiki timed out")) from None
        except requests.Timeout:
            error = _unavailable("timeout", f"{action}: MediaWiki did not answer within {timeout:g} s",
                                 maybe_applied=not idempotent)
            if idempotent:
                raise _Retry(error) from None
            raise error from None
        except requests.ConnectionError as exc:
            sent = not _is_connect_failure(exc)
            error = _unavailable("connection", f"{action}: cannot reach MediaWiki ({type(exc).__name__})",
                                 maybe_applied=sent and not idempotent)
            if idempotent or not sent:
                raise _Retry(error) from None
            raise error from None
        except requests.RequestException as exc:
            raise _unavailable("connection", f"{action}: request failed ({type(exc).__name__})") from None
        elapsed = time.monotonic() - started
        self._store_cookies(response)
        status = response.status_code
        if status >= 500 or status == 429:
            error = _unavailable(f"http-{status}", f"{action}: MediaWiki answered HTTP {status}",
                                 maybe_applied=status >= 500 and not idempotent)
            if idempotent or status in (429, 503):
                raise _Retry(error, _retry_after(response))
            raise error
        try:
            data = response.json()
        except ValueError:
            raise _Retry(_unavailable("badresponse", f"{action}: MediaWiki answered HTTP {status} without JSON"))
        if not isinstance(data, dict):
            raise _unavailable("badresponse", f"{action}: unexpected API answer")
        error = data.get("error")
        if isinstance(error, dict):
            code = str(error.get("code", "unknown"))
            exc = error_from_api(code, str(error.get("info", ""))[:300], action=action)
            log.info("wiki %s failed: %s (%.3fs)", action, code, elapsed)
            if code in SESSION_CODES:
                raise _SessionLost(exc)
            if isinstance(exc, WikiUnavailable):
                delay = _retry_after(response)
                if code == "maxlag" and delay is None:
                    delay = float(error.get("lag", 1) or 1)
                raise _Retry(exc, delay)
            raise exc
        log.debug("wiki %s ok (%.3fs)", action, elapsed)
        return data


def _retry_after(response: requests.Response) -> float | None:
    value = response.headers.get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _is_connect_failure(exc: requests.ConnectionError) -> bool:
    """True when the request certainly never reached the server (refused, DNS, connect timeout)."""
    text = repr(exc.args[0]) if exc.args else ""
    return any(marker in text for marker in ("NewConnectionError", "ConnectTimeoutError", "NameResolutionError",
                                              "Connection refused", "Failed to establish"))

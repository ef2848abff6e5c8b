"""``s3rm doctor``: check the MCP URL and the write token once, without writing anything.

Contract: docs/transport.md#checking-the-connection. Two requests:

1. ``POST <url>`` ``initialize`` (the 2025-11-25 handshake every client sends):
   the endpoint answers and names itself;
2. ``GET <url>/whoami`` with ``Authorization: Bearer $S3RM_MCP_TOKEN`` (when
   set): the gateway says whether a write with that header would be accepted.

Exit codes: 0 writes would be accepted (or the server needs no token), 1 the
token is missing, wrong or not allowed to write (the message says which),
2 the endpoint cannot be used (unreachable, not an S3RM gateway, bad URL).
The token itself is never printed.
"""
from __future__ import annotations

import argparse
import json
import os
from typing import Any

import requests

from s3rm.errors import CliError
from s3rm.mcpsearch import resolve_mcp_url

__all__ = ["register", "diagnose", "Diagnosis", "TOKEN_ENV"]

#: The environment variable README and the help pages keep the write token in.
TOKEN_ENV = "S3RM_MCP_TOKEN"
_TIMEOUT = 10.0
_PROTOCOL = "2025-11-25"


class Diagnosis(dict):
    """What ``doctor`` found: ``url``, ``server`` (name and version), ``mode``, ``token``
    (``accepted`` | ``missing`` | ``invalid`` | ``writes_disabled`` | ``insufficient_scope`` |
    ``not_needed``), ``principal``, ``scopes`` and a one-line ``advice``."""


_ADVICE = {
    "accepted": "writes will be accepted",
    "not_needed": "this server accepts writes without a token (open mode)",
    "missing": (f"no token sent: ${TOKEN_ENV} is not set in this shell. Reads work; every write will be refused "
                f"with 401. Set it (export {TOKEN_ENV}=...) and register the client again"),
    "invalid": (f"the server refused the token in ${TOKEN_ENV} (wrong or old token). Reads work; every write "
                "will be refused with 403. Copy the current token (dev stack: .dev/mcp-write-token)"),
    "writes_disabled": "this server has writes disabled (no write token configured); only reads work",
    "insufficient_scope": "signed in, but the access token lacks mcp:write; authorize again with write access",
    "signin_required": "this server uses GitHub sign-in: your MCP client signs you in on its first request",
}


def _problem_word(body: dict[str, Any]) -> str:
    if body.get("can_write"):
        return "not_needed" if body.get("mode") == "open" and body.get("principal") != "token" else "accepted"
    code = (body.get("problem") or {}).get("code", "")
    if body.get("mode") == "github" and code in ("missing_token", "invalid_token"):
        return "signin_required" if code == "missing_token" else "invalid"
    return {"missing_token": "missing", "invalid_token": "invalid"}.get(code, code or "invalid")


def diagnose(url: str, token: str | None, *, session: requests.Session | None = None) -> Diagnosis:
    """Check ``url`` (the ``/mcp`` endpoint) and ``token`` (or ``None``); raises :class:`CliError` (exit 2)
    when the endpoint cannot be used. Sends no write."""
    http = session or requests.Session()
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": _PROTOCOL, "capabilities": {},
                       "clientInfo": {"name": "s3rm-doctor", "version": "1"}}}
    try:
        answer = http.post(url, json=init, headers=headers, timeout=_TIMEOUT)
    except requests.RequestException as exc:
        raise CliError(f"cannot reach {url}: {type(exc).__name__}. Is the gateway running "
                       f"(dev stack: s3rm stack status)?", exit_code=2) from None
    try:
        payload = answer.json()
    except ValueError:
        payload = None
    if answer.status_code == 401 and isinstance(payload, dict) and "WWW-Authenticate" in answer.headers:
        server = {"name": "(sign-in required)", "version": ""}
    elif answer.status_code != 200 or not isinstance(payload, dict) or "result" not in payload:
        raise CliError(f"{url} did not answer an MCP initialize (HTTP {answer.status_code}); check the URL: "
                       "it ends in /mcp", exit_code=2)
    else:
        server = payload["result"].get("serverInfo", {})
    try:
        who = http.get(url.rstrip("/") + "/whoami", headers={k: v for k, v in headers.items()
                                                            if k == "Authorization"}, timeout=_TIMEOUT)
        body = who.json()
    except (requests.RequestException, ValueError):
        raise CliError(f"{url}/whoami did not answer: the server is not an S3 Research Memory gateway "
                       "of this version", exit_code=2) from None
    if who.status_code != 200 or not isinstance(body, dict):
        raise CliError(f"{url}/whoami answered HTTP {who.status_code}", exit_code=2)
    word = _problem_word(body)
    return Diagnosis(url=url, server={"name": server.get("name", ""), "version": server.get("version", "")},
                     mode=body.get("mode", ""), token=word, principal=body.get("principal", ""),
                     scopes=body.get("scopes", []), advice=_ADVICE.get(word, word))


def _run(args: argparse.Namespace) -> int:
    url = resolve_mcp_url(args.url)
    token = os.environ.get(args.token_env) or None
    result = diagnose(url, token)
    if args.output == "json":
        print(json.dumps(result, ensure_ascii=False))
    else:
        print(f"endpoint : {url} — {result['server']['name']} {result['server']['version']}".rstrip())
        print(f"mode     : {result['mode']}")
        print(f"token    : {result['token']} — {result['advice']}")
    return 0 if result["token"] in ("accepted", "not_needed") else 1


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``s3rm doctor``."""
    parser = sub.add_parser(
        "doctor", help="check the MCP URL and the write token without writing anything",
        description="Check that the MCP endpoint answers and whether the write token in "
                    f"${TOKEN_ENV} would be accepted for writes. Sends no write (docs/transport.md#checking-the-connection).")
    parser.add_argument("--url", help="the MCP endpoint (default: $S3RM_MCP_URL, the running dev stack's, "
                                      "else http://127.0.0.1:8080/mcp)")
    parser.add_argument("--token-env", default=TOKEN_ENV, metavar="NAME",
                        help=f"environment variable holding the token (default {TOKEN_ENV})")
    parser.add_argument("--output", choices=("text", "json"), default="text")
    parser.set_defaults(handler=_run, error_prefix="s3rm doctor")

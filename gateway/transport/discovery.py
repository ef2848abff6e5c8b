"""Answers to OAuth discovery and registration probes: this server has no OAuth (docs/transport.md#oauth-probes).

Clients that meet a 401 (or that probe up front) look for OAuth metadata at
``/.well-known/oauth-protected-resource[/mcp]``,
``/.well-known/oauth-authorization-server[/mcp]``,
``/.well-known/openid-configuration[/mcp]`` and ``/mcp/.well-known/openid-configuration``,
and with none found fall back to ``POST /register`` (dynamic client
registration), ``/authorize`` and ``/token`` on the server's origin. Every one of
them gets a JSON **404** in the OAuth error shape (RFC 6749 §5.2 / RFC 7591 §3.2.2:
``{"error": "invalid_request", "error_description": ...}``) whose
``error_description`` tells the person what to do instead: in token mode,
send the shared write token as ``Authorization: Bearer <token>``. That field is
what the TypeScript SDK's OAuth client turns into its error message, and
mcp-remote prints the whole body ("Dynamic Client Registration rejected
(HTTP 404): {...}"). Nothing here advertises an authorization server.
"""
from __future__ import annotations

from flask import Blueprint, Response, current_app

from gateway.config import GatewayConfig
from gateway.core.jsonio import json_response

__all__ = ["bp", "probe_message", "probe_response", "WELL_KNOWN_PREFIXES"]

bp = Blueprint("oauth_probes", __name__)

#: RFC 8414 / RFC 9728 / OpenID discovery documents a client may ask for (each also with a path suffix).
WELL_KNOWN_PREFIXES = ("oauth-protected-resource", "oauth-authorization-server", "openid-configuration")
_ALL_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]


def probe_message(config: GatewayConfig) -> str:
    """The sentence every probe answer carries, for the configured write-auth mode."""
    if config.write_auth_mode == "open":
        return (
            "This MCP server does not use OAuth and needs no credential: every tool is open. "
            "Connect without authorization."
        )
    return (
        "This MCP server does not use OAuth. Reads need no credential; the write tools need the shared "
        "write token as an HTTP header: 'Authorization: Bearer <token>' (for example "
        "--header 'Authorization: Bearer ${S3RM_MCP_TOKEN}'). Configure that header in your MCP client "
        "instead of signing in."
    )


def probe_response(config: GatewayConfig) -> Response:
    """The JSON 404 answering any OAuth discovery or registration probe."""
    return json_response({"error": "invalid_request", "error_description": probe_message(config)}, 404)


def _answer(**_: str) -> Response:
    return probe_response(current_app.extensions["s3rm"].config)


for _prefix in WELL_KNOWN_PREFIXES:
    bp.add_url_rule(f"/.well-known/{_prefix}", f"well_known_{_prefix}", _answer, methods=_ALL_METHODS)
    bp.add_url_rule(f"/.well-known/{_prefix}/<path:rest>", f"well_known_{_prefix}_path", _answer,
                    methods=_ALL_METHODS)
bp.add_url_rule("/mcp/.well-known/<path:rest>", "mcp_well_known", _answer, methods=_ALL_METHODS)
for _path in ("register", "authorize", "token"):
    bp.add_url_rule(f"/{_path}", f"oauth_{_path}", _answer, methods=_ALL_METHODS)

"""github mode: the gateway as an OAuth 2.1 authorization server with GitHub as the upstream identity.

Layer: above ``gateway/tools``, below ``gateway/transport`` (the transport
asks :class:`~gateway.auth.service.AuthService` about every MCP request;
``create_app`` registers :func:`~gateway.auth.endpoints.create_auth_blueprint`).
Contract: docs/transport.md#github-mode, docs/operations.md#github-mode.

=============  ================================================================
module         holds
=============  ================================================================
``store``      the ONE state interface (:class:`AuthStore`) and its SQLite form
``pgstore``    the same interface in PostgreSQL, shared by several gateways
``fetch``      SSRF-safe fetch of client ID metadata documents
``tokens``     signing keys with rotation, JWT access tokens (joserfc)
``github``     the upstream GitHub login, identity and membership checks
``server``     Authlib's authorization server + what Authlib lacks (S256-only
               PKCE, RFC 8707, loopback ports, metadata documents, rotation)
``consent``    the Korean consent and error pages
``service``    :class:`AuthService`: wiring and the resource-server checks
``endpoints``  the Flask blueprint of every OAuth endpoint
=============  ================================================================
"""

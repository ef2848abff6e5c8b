"""The one way the project tells a newcomer to register Claude Code in token mode.

``s3rm stack up`` prints :func:`claude_code_line`; README.md and the help pages
(``schema/pages/help/*.wiki``) carry the same line with their own URL, and
``tests/s3rm/test_connect.py`` checks that they do (docs/transport.md#checking-the-connection).
User scope, so the server is there from every directory; the token stays in the
environment (single quotes: the client expands it when it connects).
"""
from __future__ import annotations

__all__ = ["CLAUDE_CODE_LINE", "claude_code_line"]

#: ``{url}`` is the MCP endpoint; everything else is fixed.
CLAUDE_CODE_LINE = ("claude mcp add --transport http --scope user s3-research-memory {url} "
                    "--header 'Authorization: Bearer ${{S3RM_MCP_TOKEN}}'")


def claude_code_line(url: str) -> str:
    """The ``claude mcp add`` command for the MCP endpoint ``url`` (token mode)."""
    return CLAUDE_CODE_LINE.format(url=url)

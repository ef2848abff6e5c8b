"""The content policy every tool description states (docs/tools.md#content-policy)."""

__all__ = ["CONTENT_POLICY", "TOOL_POLICY", "describe"]

#: The full policy, in the server's instructions (docs/tools.md#content-policy).
CONTENT_POLICY = (
    "Content policy: one Lesson is one reusable research finding (a problem and its conclusion) backed by "
    "citable evidence. Never store CI or workflow runs, tool-call success or failure, retries, authentication "
    "or connection errors, or raw logs; a failure qualifies only when it is itself the research subject and its "
    "cause and conditions generalise beyond one run. Call search_lessons first and extend an existing Lesson "
    "(evidence, relation or revision) instead of writing a duplicate."
)
#: Its short form, ending every tool description so agents read it wherever they look.
TOOL_POLICY = (
    "Content policy: only reusable research findings with citable evidence (no CI runs, tool errors or logs); "
    "call search_lessons first and extend, not duplicate."
)


def describe(what: str) -> str:
    """Return a full tool description: ``what`` the tool does, then the short content policy."""
    return f"{what.strip()}\n\n{TOOL_POLICY}"

"""The content policy every tool description states (docs/tools.md#content-policy)."""

__all__ = ["CONTENT_POLICY", "describe"]

#: Appended to every tool description so agents read it wherever they look.
CONTENT_POLICY = (
    "Content policy: a Lesson is one reusable research finding (one problem and its conclusion per Lesson) "
    "backed by citable evidence. Never store CI or workflow runs, tool-call success/failure status, retries, "
    "authentication or connection errors, or raw logs as Lessons; a failure qualifies only when the failure "
    "itself is the research subject and its cause and conditions generalise beyond one run. "
    "Always search_lessons first and extend an existing Lesson (evidence, relation or revision) instead of "
    "writing a duplicate."
)


def describe(what: str) -> str:
    """Return a full tool description: ``what`` the tool does, then the content policy."""
    return f"{what.strip()}\n\n{CONTENT_POLICY}"

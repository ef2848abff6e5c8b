"""``s3rm collect-candidates``: read-only candidates from code, docs and Slack exports.

Contract: docs/research-tools.md#collect-candidates. Modules: :mod:`.secrets`
(masking), :mod:`.chunks` (the candidate value and size caps), :mod:`.code`,
:mod:`.docs`, :mod:`.slack` (the three sources), :mod:`.checkpoint`
(incremental runs).
"""

"""``s3rm research-query`` building blocks (contract: docs/research-tools.md#research-query).

:mod:`.settings` (the opt-in endpoints), :mod:`.facets` (parallel facet searches
over MCP and their fusion with the gateway's ``rrf_v8`` code), :mod:`.endpoints`
(the OpenAI-compatible rerank and chat calls), :mod:`.citations` (the citation
check of a synthesis).
"""

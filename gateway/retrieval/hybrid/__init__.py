"""Hybrid search: the retrieval service, its search and analogy pipelines and their shared stages,
rank fusion, the channels' votes, cross-language search, shadow, duplicates."""

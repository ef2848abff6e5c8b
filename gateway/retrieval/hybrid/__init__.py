"""Hybrid search: the retrieval service, rank fusion, the channels' votes, cross-language search, shadow, duplicates."""

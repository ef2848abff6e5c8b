"""Keeping the index current: projection, quality, semantic state, the refresher, the change follower, progress."""

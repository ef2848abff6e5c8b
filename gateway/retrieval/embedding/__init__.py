"""The embedding client: the provider over HTTP, its errors, gate and breaker, and its vector memo and cache."""

"""The development wiki and stack (``s3rm dev wiki …``, ``s3rm stack …``, ``s3rm serve``).

A real MediaWiki on PHP's built-in server with SQLite, its accounts and job
runner, the embedding server and the gateway, all on loopback and all under
``<repo>/.dev`` (git-ignored).
"""

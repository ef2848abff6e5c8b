"""``s3rm schema``: generation of the files derived from ``schema/lesson.toml``.

* :mod:`sync.schema.generate` — ``s3rm schema generate [--check]``;
* :mod:`sync.schema.pages` — SMW property pages, templates and the Page Forms form;
* :mod:`sync.schema.toolschemas` — the tools' JSON Schema documents, built by
  walking the gateway's tool registry (docs/data-contract.md#schema-source).
"""

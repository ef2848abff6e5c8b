"""``s3rm schema``: generation of the files derived from ``schema/lesson.toml``.

* :mod:`s3rm.schema.generate` — ``s3rm schema generate [--check]``;
* :mod:`s3rm.schema.pages` — SMW property pages, templates and the Page Forms form;
* :mod:`s3rm.schema.toolschemas` — the tools' JSON Schema documents, built by
  walking the gateway's tool registry (docs/data-contract.md#schema-source).
"""

"""The schema→wiki package: every page the repository keeps in the wiki, generated and pushed.

* :mod:`sync.generate` — the files derived from ``schema/lesson.toml`` (SMW property
  pages, templates, the Page Forms form, Lua modules, the tools' JSON Schemas):
  render, write, check;
* :mod:`sync.pages` — the wikitext generators for those pages;
* :mod:`sync.toolschemas` — the tools' JSON Schema documents, built by walking
  the gateway's tool registry (docs/data-contract.md#schema-source);
* :mod:`sync.pageset` — the desired page set (schema pages, site script and
  style, home and help pages), :mod:`sync.variants` each page's variant for the
  wiki's capabilities;
* :mod:`sync.wikisite` — the sync account's view of the wiki (siteinfo, titles by
  identity, conditional saves); :mod:`sync.push` plans, shows and applies edits.

The ``s3rm`` command's verbs (``s3rm schema generate``, ``s3rm sync push|diff|check``)
call this package (s3rm/schema_verbs.py, s3rm/sync_verbs.py); it never imports
``s3rm``: settings reach it as arguments. Its errors derive from :class:`sync.errors.SyncError`.
"""

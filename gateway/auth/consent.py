"""The Korean consent page and the plain error page of the github-mode login (docs/operations.md#github-mode).

Pure rendering: every value is HTML-escaped; the page loads nothing (no
script, no external style) and may not be framed (:data:`PAGE_HEADERS`).
"""
from __future__ import annotations

from html import escape
from urllib.parse import urlsplit

from gateway.config.github import SCOPE_READ, SCOPE_WRITE

__all__ = ["PAGE_HEADERS", "SCOPE_LABELS", "consent_page", "error_page"]

#: Headers of both pages: no framing (clickjacking), no caching, no referrer, no scripts.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; "
                               "base-uri 'none'",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
}

#: What each scope lets the client do, in Korean.
SCOPE_LABELS = {
    SCOPE_READ: "Lesson 검색·읽기 (search_lessons, get_lesson 등 읽기 도구)",
    SCOPE_WRITE: "Lesson 작성·수정 (초안 작성, 근거 추가, 연결, 검증 기록, 개정) — 기록에 GitHub 계정이 남습니다",
}

_STYLE = ("body{font-family:sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem;line-height:1.5}"
          "dl{display:grid;grid-template-columns:max-content 1fr;gap:.3rem 1rem}dt{font-weight:bold}"
          "button{font-size:1rem;padding:.5rem 1.2rem;margin-right:.8rem}")


def _page(title: str, body: str) -> str:
    return (f'<!doctype html><html lang="ko"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f"<style>{_STYLE}</style></head><body>{body}</body></html>")


def consent_page(*, client_name: str, client_id: str, redirect_uri: str, scopes: list[str], login: str,
                 request_id: str, csrf: str, action: str) -> str:
    """The consent form for one authorization request (approve/deny posts to ``action``)."""
    host = urlsplit(redirect_uri).netloc or urlsplit(redirect_uri).scheme + ":"
    items = "".join(f"<li><code>{escape(s)}</code> — {escape(SCOPE_LABELS.get(s, s))}</li>" for s in scopes)
    body = (
        "<h1>S3 Research Memory 접근 허용</h1>"
        f"<p>GitHub 계정 <strong>{escape(login)}</strong>(으)로 로그인했습니다. 아래 MCP 클라이언트가 "
        "이 계정으로 연구실 Lesson 저장소에 접근하려고 합니다.</p>"
        f"<dl><dt>클라이언트</dt><dd>{escape(client_name)}</dd>"
        f"<dt>클라이언트 ID</dt><dd><code>{escape(client_id)}</code></dd>"
        f"<dt>돌아갈 주소</dt><dd><code>{escape(host)}</code></dd></dl>"
        f"<p>요청한 권한:</p><ul>{items}</ul>"
        "<p>이 클라이언트를 직접 연결한 것이 아니라면 거부하세요.</p>"
        f'<form method="post" action="{escape(action)}">'
        f'<input type="hidden" name="request_id" value="{escape(request_id)}">'
        f'<input type="hidden" name="csrf_token" value="{escape(csrf)}">'
        '<button type="submit" name="decision" value="approve" id="approve">허용</button>'
        '<button type="submit" name="decision" value="deny" id="deny">거부</button>'
        "</form>"
    )
    return _page("S3 Research Memory 접근 허용", body)


def error_page(message: str) -> str:
    """A short Korean error page (the login cannot continue; nothing was granted)."""
    return _page("로그인을 계속할 수 없습니다",
                 f"<h1>로그인을 계속할 수 없습니다</h1><p>{escape(message)}</p>"
                 "<p>MCP 클라이언트에서 연결을 처음부터 다시 시작하세요.</p>")

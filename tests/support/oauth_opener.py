"""A stand-in browser opener for OAuth client tests: ``python oauth_opener.py URL``.

CLI clients (mcp-remote) open the authorization URL with ``xdg-open`` /
``$BROWSER``; the github-mode tests point both at this script, which loads the
URL in headless Chromium (``/usr/bin/chromium``), approves the GitHub
stand-in's page (``#js-oauth-authorize-btn``) and the gateway's consent page
(``#approve``), and waits until the client's loopback callback has answered.
"""
from __future__ import annotations

import sys

from playwright.sync_api import sync_playwright

CHROMIUM = "/usr/bin/chromium"


def approve(url: str) -> str:
    """Walk the sign-in at ``url``; returns the final (callback) URL."""
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
        page = browser.new_page()
        page.goto(url)
        page.click("#js-oauth-authorize-btn")
        with page.expect_navigation():
            page.click("#approve")
        final = page.url
        browser.close()
    return final


if __name__ == "__main__":
    print(f"open {sys.argv[-1]}", flush=True)
    print(f"done {approve(sys.argv[-1])}", flush=True)

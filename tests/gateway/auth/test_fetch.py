"""The SSRF guard of client ID metadata documents (docs/transport.md#client-id-metadata).

Address rules are checked directly; the size, time, status and JSON caps run
against a real local TLS server (a throw-away certificate) with the address
rule relaxed for that one server, so the rest of the fetch path is the
production one.
"""
from __future__ import annotations

import http.server
import ssl
import threading
import time

import pytest
from support.tls_servers import make_certificate

from gateway.auth.fetch import FetchError, MetadataFetcher, address_allowed, fetch_json


@pytest.mark.parametrize("address,allowed", [
    ("93.184.215.14", True), ("2606:4700:4700::1111", True),
    ("127.0.0.1", False), ("127.8.9.10", False), ("::1", False), ("10.0.0.1", False), ("172.16.5.4", False),
    ("192.168.1.1", False), ("169.254.169.254", False), ("fe80::1", False), ("fc00::1", False),
    ("100.64.0.1", False), ("0.0.0.0", False), ("224.0.0.1", False), ("::ffff:127.0.0.1", False),
    ("::ffff:10.0.0.1", False), ("255.255.255.255", False), ("not-an-ip", False),
    # special-purpose ranges is_global lets through, and IPv4 inside IPv6 transition forms
    ("192.0.0.192", False), ("192.0.0.9", False), ("64:ff9b::a00:1", False), ("64:ff9b::808:808", False),
    ("2002:a00:1::1", False), ("2002:808:808::1", False), ("::10.0.0.1", False), ("::127.0.0.1", False),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", False), ("198.18.0.1", False), ("2001:db8::1", False),
    ("100:0:0:1::1", False), ("::ffff:0:7f00:1", False), ("::ffff:0:808:808", False), ("64:ff9b:1::808:808", False),
    ("192.0.0.170", False), ("198.19.255.255", False), ("100.127.255.255", False), ("233.252.0.1", False),
    ("ff0e::1", False), ("fec0::1", False), ("2001:4860:4860::8888", True),
])
def test_address_rule(address, allowed):
    assert address_allowed(address) is allowed


@pytest.mark.parametrize("url", ["https://127.0.0.1/c.json", "https://10.0.0.7/c.json", "https://[::1]/c.json",
                                 "https://169.254.169.254/latest/meta-data", "https://localhost/c.json"])
def test_internal_addresses_are_refused_before_connecting(url):
    with pytest.raises(FetchError) as err:
        fetch_json(url, timeout=2)
    assert err.value.reason == "address"


def test_one_private_address_among_public_ones_is_refused():
    with pytest.raises(FetchError) as err:
        fetch_json("https://client.example/c.json", resolve=lambda h, p: ["93.184.215.14", "10.0.0.1"])
    assert err.value.reason == "address"


@pytest.mark.parametrize("url", ["http://client.example/c.json", "https://user:pw@client.example/c.json",
                                 "ftp://client.example/c.json", "https://client.example/c.json#x"])
def test_only_plain_https_urls(url):
    with pytest.raises(FetchError) as err:
        fetch_json(url, resolve=lambda h, p: ["93.184.215.14"])
    assert err.value.reason == "scheme"


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    """A local HTTPS server with routes /ok, /big, /chunked-big, /slow, /redirect, /text; yields (port, context)."""
    folder = tmp_path_factory.mktemp("tls")
    make_certificate(folder, "client.example")

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            if self.path == "/redirect":
                self.send_response(302)
                self.send_header("Location", "https://169.254.169.254/")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if self.path == "/chunked-big":
                self.send_response(200)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for _ in range(10):
                    chunk = b"x" * 1024
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.write(b"0\r\n\r\n")
                return
            body = {"/ok": b'{"client_id": "x"}', "/big": b'{"a": "' + b"x" * 10000 + b'"}',
                    "/text": b"<html>", "/slow": b'{"slow": true}'}[self.path]
            if self.path == "/slow":
                time.sleep(1.5)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.handle_error = lambda *args: None  # clients that hang up early (size/time caps) are expected
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(folder / "cert.pem", folder / "key.pem")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = ssl.create_default_context(cafile=str(folder / "cert.pem"))
    yield server.server_address[1], client
    server.shutdown()


def _fetch(tls_server, path, **kw):
    port, context = tls_server
    return fetch_json(f"https://client.example:{port}{path}", resolve=lambda h, p: ["127.0.0.1"],
                      allow=lambda a: True, ssl_context=context, **kw)


def test_a_small_json_document_is_read(tls_server):
    assert _fetch(tls_server, "/ok") == {"client_id": "x"}


@pytest.mark.parametrize("path,reason", [("/big", "size"), ("/chunked-big", "size"), ("/redirect", "status"),
                                         ("/text", "json")])
def test_caps_and_shapes(tls_server, path, reason):
    with pytest.raises(FetchError) as err:
        _fetch(tls_server, path, max_bytes=5120)
    assert err.value.reason == reason


def test_time_cap(tls_server):
    with pytest.raises(FetchError) as err:
        _fetch(tls_server, "/slow", timeout=0.5)
    assert err.value.reason == "timeout"


def test_certificate_must_match_the_host_name(tls_server):
    port, context = tls_server
    with pytest.raises(FetchError) as err:
        fetch_json(f"https://other.example:{port}/ok", resolve=lambda h, p: ["127.0.0.1"], allow=lambda a: True,
                   ssl_context=context)
    assert err.value.reason == "network"


def test_one_address_cannot_hold_every_fetch_slot():
    """One address keeping slow documents in flight takes at most half the slots (docs/operations.md#github-limits):
    it is refused itself while another address's first-time metadata document is still fetched."""
    release = threading.Event()
    started = threading.Semaphore(0)

    def fetch(url: str, timeout: float) -> dict:
        if "slow" in url:
            started.release()
            release.wait(30)
            raise FetchError("timeout", "slow")
        return {"client_id": url}

    fetcher = MetadataFetcher(timeout=30.0, max_concurrent=2, failure_seconds=0, fetch=fetch)
    attacker = threading.Thread(target=lambda: pytest.raises(FetchError, fetcher.get, "https://a.example/slow-1",
                                                             caller="192.0.2.66"))
    attacker.start()
    assert started.acquire(timeout=30)  # the attacker's first slow fetch holds one slot
    try:
        for i in range(2, 6):  # every further fetch of the attacking address is refused at once
            with pytest.raises(FetchError) as refused:
                fetcher.get(f"https://a.example/slow-{i}", caller="192.0.2.66")
            assert refused.value.reason == "busy"
        for i in range(8):  # ... while eight first-time sign-ins of other addresses go through
            assert fetcher.get(f"https://c{i}.example/meta.json", caller=f"198.51.100.{i}") == {
                "client_id": f"https://c{i}.example/meta.json"}
    finally:
        release.set()
        attacker.join(30)

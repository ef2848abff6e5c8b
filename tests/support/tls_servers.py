"""Test helpers for github mode: throw-away TLS certificates and a client-metadata server that drips."""
from __future__ import annotations

import datetime
import ipaddress
import json
import socket
import ssl
import threading
import time
from collections import Counter
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def make_certificate(folder: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for DNS name or IP address ``name``: (cert.pem, key.pem) in ``folder``."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    try:
        alt = x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        alt = x509.DNSName(name)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([alt]), critical=False).sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


class DripServer:
    """HTTPS on 127.0.0.1 that answers every request with a status line and then one header line every
    ``interval`` seconds for ``lines`` lines (the slow-metadata stall); ``seen`` counts paths. A path
    under ``/fast/`` is answered at once with a valid client metadata document naming its own URL and the
    redirect URI ``http://127.0.0.1:9/cb`` (a well-behaved client's first-time sign-in)."""

    def __init__(self, folder: Path, *, interval: float = 0.5, lines: int = 120):
        self.cert, key = make_certificate(folder, "127.0.0.1")
        self.interval, self.lines = interval, lines
        self.seen: Counter[str] = Counter()
        self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._context.load_cert_chain(self.cert, key)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def _serve(self) -> None:
        self._listener.settimeout(0.2)
        while not self._stop.is_set():
            try:
                raw, _ = self._listener.accept()
            except OSError:
                continue
            threading.Thread(target=self._drip, args=(raw,), daemon=True).start()

    def _drip(self, raw: socket.socket) -> None:
        try:
            with self._context.wrap_socket(raw, server_side=True) as tls:
                tls.settimeout(5)
                request = tls.recv(4096).decode("latin-1")
                path = request.split(" ")[1] if " " in request else "?"
                self.seen[path] += 1
                if path.startswith("/fast/"):
                    body = json.dumps({"client_id": self.url(path), "client_name": "fast client",
                                       "redirect_uris": ["http://127.0.0.1:9/cb"]}).encode()
                    tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                                b"Connection: close\r\n\r\n%s" % (len(body), body))
                    return
                tls.sendall(b"HTTP/1.1 200 OK\r\n")
                for i in range(self.lines):
                    if self._stop.wait(self.interval):
                        return
                    tls.sendall(b"X-Drip-%d: 1\r\n" % i)
        except OSError:
            return

    def close(self) -> None:
        self._stop.set()
        self._listener.close()

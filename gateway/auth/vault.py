"""Secrets github mode derives from its GitHub client secret (docs/operations.md#github-credential).

* :class:`Vault` encrypts the user's GitHub token for storage (AES-256-GCM,
  random 96-bit nonce, ``github:<user id>`` as associated data so a
  ciphertext cannot be moved to another user's family) and signs browser-session cookie
  values (HMAC-SHA-256), so the server only ever adopts a session value it
  minted itself.
* Both keys come from ``S3RM_GITHUB_CLIENT_SECRET`` through HKDF-SHA-256
  with distinct labels: a copy of the state store alone decrypts nothing.
  Rotating the client secret makes every stored GitHub token unreadable;
  the affected families then need a new sign-in (their refresh is refused).
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

__all__ = ["Vault"]


def _derive(secret: str, label: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=b"s3rm-github-mode", info=label).derive(secret.encode())


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Vault:
    """Encryption of stored GitHub tokens and signing of session cookies, keyed by ``client_secret``."""

    def __init__(self, client_secret: str):
        self._aead = AESGCM(_derive(client_secret, b"github-token-v1"))
        self._mac = _derive(client_secret, b"session-cookie-v1")

    def seal(self, plaintext: str, context: str) -> str:
        """``v1.<nonce>.<ciphertext>`` of ``plaintext`` bound to ``context`` (``github:<user id>``)."""
        nonce = os.urandom(12)
        return f"v1.{_b64(nonce)}.{_b64(self._aead.encrypt(nonce, plaintext.encode(), context.encode()))}"

    def open(self, sealed: str, context: str) -> str | None:
        """The plaintext of :meth:`seal`'s output, or ``None`` when it is not ours (other key or context)."""
        try:
            version, nonce, body = sealed.split(".")
            if version != "v1":
                return None
            return self._aead.decrypt(_unb64(nonce), _unb64(body), context.encode()).decode()
        except (ValueError, InvalidTag, UnicodeDecodeError):
            return None

    def new_session(self) -> str:
        """A fresh signed session value ``<random>.<mac>``."""
        value = secrets.token_urlsafe(32)
        return f"{value}.{self._sign(value)}"

    def session_ok(self, cookie: str | None) -> bool:
        """True only for a session value this server minted (:meth:`new_session`)."""
        value, _, mac = (cookie or "").partition(".")
        if not value or not mac or not (value + mac).isascii():  # a browser may send any bytes: never a 500
            return False
        return hmac.compare_digest(mac.encode(), self._sign(value).encode())

    def _sign(self, value: str) -> str:
        return _b64(hmac.new(self._mac, value.encode(), hashlib.sha256).digest()[:18])

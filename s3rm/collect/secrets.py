"""Secret masking for candidates: detect-secrets' plugins plus the project's own patterns.

Contract: docs/research-tools.md#secret-masking.

:func:`mask_text` replaces every detected secret in a text with a marker
``[MASKED:<kind>]`` and returns the masked text and a count per kind. The
original value is never returned, logged or hashed on its own. Newlines are
kept, so line numbers of the masked text equal those of the source.

Two detector families, both applied to every line (a span found by either is
masked; overlapping spans are merged, the kind of the first-starting span is
reported):

* **detect-secrets** (Yelp, maintained): every plugin it ships
  (:func:`detect_secrets.core.plugins.util.get_mapping_from_secret_type_to_class`):
  AWS, Azure, GitHub, GitLab, Slack, Stripe, OpenAI, JWT, private keys,
  keyword assignments, basic auth, base64/hex high-entropy strings, … Some
  plugins report only part of a token (a regex group); the mask is widened to
  the whole token around the reported value (:data:`_TOKEN_STOP`).
* **own patterns** (:data:`PATTERNS`): PEM private key blocks (multi-line, the
  whole block up to its END line), AWS access key ids and secret keys, Google
  API keys, GitHub tokens (classic and fine-grained), Slack tokens and
  webhooks, OpenAI-style ``sk-`` keys, JWTs, passwords in URLs
  (``scheme://user:password@host``), passwords and keys in connection strings
  (``Password=…;``, ``AccountKey=…``), secret-looking assignments
  (``password = …``, ``api_key: …`` — :func:`secret_name`; in programming-language
  sources only quoted values, since a bare value there is code) and high-entropy
  strings (:func:`high_entropy`).

Masking errs on the side of hiding: long hex digests and random-looking
identifiers are masked as ``high_entropy`` too, and a 40-character string written
within 40 characters of an AWS access key id is masked as its secret key.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable

__all__ = ["PATTERNS", "MaskResult", "mask_text", "high_entropy", "marker"]


def marker(kind: str) -> str:
    """The text that replaces one masked value of ``kind`` (e.g. ``[MASKED:github_token]``)."""
    return f"[MASKED:{kind}]"


@dataclass(frozen=True)
class MaskResult:
    """``text``: the masked text (same number of lines as the input); ``counts``: masked values per kind."""

    text: str
    counts: Counter


#: An AWS access key id (its documented prefixes, 20 characters).
_AWS_KEY_ID = r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b"

#: (kind, pattern, group): ``group`` is the regex group holding the secret (0 = the whole match).
PATTERNS: tuple[tuple[str, re.Pattern[str], int], ...] = (
    ("aws_access_key", re.compile(_AWS_KEY_ID), 0),
    ("aws_secret_key", re.compile(r"(?i)aws.{0,24}?(?:secret|key).{0,24}?[\s'\"=:]+([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"), 1),
    # a secret key written beside its access key id ("rotated AKIA… / <secret>", either order), whatever
    # its shape: a random 40-character key split by "/" or "+" need not look random to high_entropy()
    ("aws_secret_key", re.compile(_AWS_KEY_ID + r".{0,40}?(?<![A-Za-z0-9/+=])([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"), 1),
    ("aws_secret_key", re.compile(r"(?<![A-Za-z0-9/+=])([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=]).{0,40}?" + _AWS_KEY_ID), 1),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}"), 0),
    ("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{22,255})"), 0),
    ("slack_token", re.compile(r"\bx(?:ox[abposre]|app)-[A-Za-z0-9-]{10,}"), 0),
    ("slack_webhook", re.compile(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]+"), 0),
    ("openai_key", re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"), 0),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"), 0),
    ("url_password", re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s/:@'\"]*:([^\s/@'\"]+)@"), 1),
    ("connection_string_password", re.compile(
        r"(?i)\b(?:password|pwd|passwd|accountkey|sharedaccesskey|sharedaccesssignature|client_?secret)\s*=\s*"
        r"([^;\s'\"]+)"), 1),
    ("authorization_header", re.compile(r"(?i)\b(?:bearer|basic|token)\s+([A-Za-z0-9._~+/=-]{12,})"), 1),
)

#: ``name <sep> value`` with a quoted (2) or bare (3) value; :func:`secret_name` decides whether the name
#: is secret-looking, and bare values count only outside programming-language sources.
_ASSIGNMENT = re.compile(
    r"([A-Za-z_][\w.-]*)['\"]?\s*(?::=|=>|[:=])\s*(?:(['\"])([^'\"\n]{4,})\2|([^\s'\",;]{4,}))")
_SECRET_WORDS = frozenset({"password", "passwd", "pwd", "pass", "passphrase", "secret", "secrets", "token",
                           "apikey", "credential", "credentials", "privatekey", "accesskey", "secretkey"})
_SECRET_PAIRS = frozenset({("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key"),
                           ("client", "secret"), ("auth", "token"), ("access", "token")})
#: Source files whose bare assignment values are code (a name, a call), not literals.
CODE_SUFFIXES = frozenset({".py", ".pyi", ".js", ".mjs", ".cjs", ".ts", ".tsx", ".jsx", ".go", ".rs", ".java",
                           ".kt", ".scala", ".c", ".h", ".cc", ".cpp", ".hpp", ".cs", ".rb", ".php", ".swift",
                           ".lua", ".pl", ".r", ".jl", ".dart", ".ex", ".exs", ".hs", ".ml", ".sql"})

_PEM_BLOCK = re.compile(
    r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|\Z)", re.S)

#: Characters that end a token when a detect-secrets value is widened to its whole token.
_TOKEN_STOP = frozenset(" \t\r\n\"'`,;()<>[]{}|=:@\\")
_ENTROPY_TOKEN = re.compile(r"[A-Za-z0-9+/_.-]{20,}=*")
#: Kinds that only say "looks secret"; a merged span reports a specific kind when one is present.
_GENERIC = frozenset({"high_entropy", "base64_high_entropy_string", "hex_high_entropy_string",
                      "password_assignment", "secret_keyword", "authorization_header"})
_HEX = re.compile(r"[0-9a-fA-F]+")


def _shannon(token: str) -> float:
    counts = Counter(token)
    n = len(token)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def high_entropy(token: str) -> bool:
    """True for a token that looks random.

    Hex: at least 32 hex digits with entropy ≥ 3.0 bits/char (digests are masked too). Otherwise the
    token (≥ 20 chars, base64/URL-safe alphabet) must mix upper case, lower case and digits, hold a run
    of at least 12 characters between separators (``/._-+``) that itself mixes letters and digits, and
    have entropy ≥ 3.8 bits/char — identifiers, environment variable names, CSS classes and URL paths
    do not qualify.

    >>> high_entropy("0123456789abcdef0123456789abcdef"), high_entropy("S3RM_MCP_WRITE_TOKEN_SHA256")
    (True, False)
    >>> high_entropy("q8Zt3vW0pLmN7xYc2RbK9sHf4Ud1Ge6A")
    True
    """
    core = token.strip("=.-_/+")
    if len(core) < 20:
        return False
    if _HEX.fullmatch(core):
        return len(core) >= 32 and _shannon(core) >= 3.0
    if not (re.search(r"\d", core) and re.search(r"[A-Z]", core) and re.search(r"[a-z]", core)):
        return False
    if not any(len(run) >= 12 and re.search(r"\d", run) and re.search(r"[A-Za-z]", run)
               for run in re.split(r"[/._+-]", core)):
        return False
    return _shannon(core) >= 3.8


@lru_cache(maxsize=1)
def _plugins():
    """Instances of every detect-secrets plugin (library defaults)."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    return tuple(cls() for cls in get_mapping_from_secret_type_to_class().values())


def _slug(secret_type: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", secret_type.lower()).strip("_") or "secret"


def _widen(line: str, start: int, end: int) -> tuple[int, int]:
    while start > 0 and line[start - 1] not in _TOKEN_STOP:
        start -= 1
    while end < len(line) and line[end] not in _TOKEN_STOP:
        end += 1
    return start, end


def _library_spans(line: str, filename: str) -> Iterable[tuple[int, int, str]]:
    for plugin in _plugins():
        try:
            found = plugin.analyze_line(filename=filename, line=line, line_number=0)
        except Exception:  # noqa: BLE001 - a plugin bug must not stop masking by the others
            continue
        for secret in found:
            value = secret.secret_value or ""
            if not value:
                continue
            kind = _slug(secret.type)
            for m in re.finditer(re.escape(value), line):
                s, e = _widen(line, m.start(), m.end())
                yield s, e, kind


def secret_name(name: str) -> bool:
    """True when an assigned name looks like it holds a secret: one of its words (split at ``_ . -``
    and camelCase) is a secret word, or two adjacent words form one (``api_key``, ``clientSecret``).

    >>> secret_name("DB_PASSWORD"), secret_name("apiKey"), secret_name("max_input_tokens")
    (True, True, False)
    """
    words = [w.lower() for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", name)]
    return any(w in _SECRET_WORDS for w in words) or any(p in _SECRET_PAIRS for p in zip(words, words[1:]))


def _pattern_spans(line: str, code: bool) -> Iterable[tuple[int, int, str]]:
    for kind, pattern, group in PATTERNS:
        for m in pattern.finditer(line):
            yield m.start(group), m.end(group), kind
    for m in _ASSIGNMENT.finditer(line):
        if not secret_name(m.group(1)):
            continue
        if m.group(3) is not None:
            yield m.start(3), m.end(3), "password_assignment"
        elif not code:
            yield m.start(4), m.end(4), "password_assignment"
    for m in _ENTROPY_TOKEN.finditer(line):
        if high_entropy(m.group(0)):
            yield m.start(), m.end(), "high_entropy"


def _mask_line(line: str, filename: str, counts: Counter) -> str:
    code = ("." + filename.rsplit(".", 1)[-1].lower()) in CODE_SUFFIXES if "." in filename else False
    spans = sorted(set(_pattern_spans(line, code)) | set(_library_spans(line, filename)))
    spans = [s for s in spans if s[1] > s[0]]
    if not spans:
        return line
    merged: list[list] = []
    for start, end, kind in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
            if merged[-1][2] in _GENERIC and kind not in _GENERIC:
                merged[-1][2] = kind
        else:
            merged.append([start, end, kind])
    out, pos = [], 0
    for start, end, kind in merged:
        out.append(line[pos:start])
        out.append(marker(kind))
        counts[kind] += 1
        pos = end
    out.append(line[pos:])
    return "".join(out)


def mask_text(text: str, filename: str = "candidate.txt") -> MaskResult:
    """Mask every secret in ``text`` (module docstring); ``filename`` lets detect-secrets pick its
    language-specific keyword rules (only the extension matters).

    Returns a :class:`MaskResult`; the masked text has exactly as many ``\\n`` as ``text``.
    Never raises on content (plugins that fail on a line are skipped).
    """
    counts: Counter = Counter()

    def pem(m: re.Match[str]) -> str:
        counts["private_key"] += 1
        return marker("private_key") + "\n" * m.group(0).count("\n")

    text = _PEM_BLOCK.sub(pem, text)
    lines = text.split("\n")
    masked = [_mask_line(line, filename, counts) if line.strip() else line for line in lines]
    return MaskResult("\n".join(masked), counts)

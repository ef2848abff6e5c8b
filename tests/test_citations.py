"""Citations point inside the repository: every cited file and section exists, no outside documents.

The contract lives in ``docs/`` (``docs/data-contract.md``, ``docs/tools.md``,
``docs/retrieval.md`` and the topic documents beside them) and in
``hooks_spec/rules.md``; code and docs cite it as ``docs/<file>.md#<anchor>``.
This test reads every tracked text file of the kinds listed in
:data:`SUFFIXES` / :data:`NAMES` (``git ls-files``; ``data/`` holds
third-party data and is skipped) and checks two things.

1. **References resolve** (:func:`references`), in the same prose as
   rule 2 (so a path inside test data, such as ``"sync/planted.py"`` of a
   fixture tree, is not taken for a citation):

   * a repository path — a token that starts with a top-level folder of the
     repository (``docs/``, ``gateway/``, ``hooks_spec/``, ``schema/`` …) and
     ends in a file extension of :data:`FILE_EXTENSIONS` — names a tracked
     file (or a file a test or command writes, :data:`GENERATED`). Tokens
     with a wildcard or placeholder right after them (``*``, ``<``, ``{``)
     are patterns, not references, and are skipped; a name without such an
     extension (a folder, ``gateway/domain/checker.RULE_IDS``) is not checked;
   * ``<file>.md#<anchor>`` — the anchor exists in that Markdown file, as an
     explicit ``<a id="…">`` / ``<a name="…">`` or as the GitHub slug of a
     heading (:func:`anchors`);
   * in Markdown files, relative links ``[text](other.md#anchor)`` and
     ``(#anchor)`` resolve the same way.

2. **No outside citations** (:func:`outside_citations`), in prose only —
   comments and string literals of Python files (found with :mod:`tokenize`,
   so code such as a variable ``E1`` is never read as a citation; a string
   without a space, such as the evidence id ``"E2"`` of a test vector, is
   data and not checked for checklist ids), the whole text of every other
   file:

   * the design brief and the checklist of the session that built the
     project (:data:`OUTSIDE` — the brief's file name, the checklist's name,
     the style notes and team rules, the original Korean seed pages and their
     folder, paths that leave the repository such as ``../shared/``);
   * issue numbers (``issue 3``, ``issue #3``);
   * the seed pages' abbreviations followed by a Korean section name
     (``AR 저장과 수정``);
   * bare checklist item ids used as citations (:data:`CHECKLIST_ID`:
     ``R3``, ``(H1, H2)``, ``W5:``). ``S3`` is only flagged inside
     parentheses: unqualified it is the product's name (and a cloud storage
     service in the evaluation data).

   This file states the rules with examples and is exempt from both checks
   (:func:`test_rules_catch_what_they_should` tests the rules themselves).

A failure names every offending ``path:line`` so it can be fixed in place.
"""
from __future__ import annotations

import io
import re
import subprocess
import tokenize
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Kinds of files scanned (by suffix, and by exact name for suffix-less files).
SUFFIXES = (".py", ".md", ".wiki", ".toml", ".js", ".css", ".sh", ".php", ".yaml", ".yml", ".cnf", ".example")
NAMES = ("Dockerfile", "Caddyfile")
#: Folders whose files are not ours to edit (vendored third-party data).
SKIPPED_DIRS = ("data/",)
#: Extensions that make a path token a file reference.
FILE_EXTENSIONS = ("md", "py", "toml", "json", "jsonl", "wiki", "js", "css", "sh", "php", "yaml", "yml", "cnf",
                   "csv", "txt", "conf", "example")
#: Files referenced on purpose that are produced at run time, not tracked.
GENERATED: frozenset[str] = frozenset()

_SELF = Path(__file__).resolve().relative_to(ROOT).as_posix()

_PATH = re.compile(
    r"(?<![\w./-])(?P<path>(?:\.ci|bench|compose|data|deploy|docs|eval|gateway|hooks_spec|schema|scripts|sync|tests)"
    r"/[\w./-]*\w)(?:#(?P<anchor>[\w-]+))?(?P<after>.?)")
_MD_LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")
_ANCHOR_TAG = re.compile(r"<a\s+(?:id|name)=\"(?P<id>[^\"]+)\"")
_HEADING = re.compile(r"^(?P<hashes>#{1,6})\s+(?P<text>.+?)\s*#*\s*$")

OUTSIDE = re.compile(
    r"DESIGN\.md|\bDESIGN §|\bCHECKLIST\b|\bSTYLE\.md|\bTEAMRULES\b|\bseeds/|\.ko\.(?:wiki|txt)\b|"
    r"(?<![\w./-])(?:\.\./)*shared/|/work/shared\b|\bseeds\b")
ISSUE = re.compile(r"\b[Ii]ssues? #?\d+\b")
SEED_SECTION = re.compile(r"\b(?:AR|DH|US|HM|MP|CL)\s+[\uac00-\ud7a3]")
_ID = r"(?:S[1-6]|R[1-9]|W[1-6]|H(?:1[01]|[1-9])|E[1-3]|B[1-5]|P[1-6])"
#: A checklist item id standing alone (not part of a longer name such as ``S3W`` or ``P2_ITEMS``).
CHECKLIST_ID = re.compile(rf"(?<![\w-]){_ID}(?![\w-])")
_S3_IN_PARENS = re.compile(r"\(\s*S3\s*[),;/–-]|[(,;/–-]\s*S3\s*\)")


def tracked_files() -> list[str]:
    """Paths (POSIX, relative to the repository root) of every tracked file this test scans."""
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True).stdout
    names = [n for n in out.decode("utf-8").split("\0") if n]
    return sorted(n for n in names
                  if not n.startswith(SKIPPED_DIRS) and (n.endswith(SUFFIXES) or n.rsplit("/", 1)[-1] in NAMES)
                  and (ROOT / n).is_file())


@lru_cache(maxsize=None)
def all_tracked() -> frozenset[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True).stdout
    return frozenset(n for n in out.decode("utf-8").split("\0") if n)


def github_slug(text: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped (``-`` and ``_`` kept), spaces → ``-``."""
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@lru_cache(maxsize=None)
def anchors(path: str) -> frozenset[str]:
    """Every anchor of Markdown file ``path``: explicit ``<a id>`` tags and heading slugs (with ``-N`` repeats)."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    in_fence = False
    for line in (ROOT / path).read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        found.update(m.group("id") for m in _ANCHOR_TAG.finditer(line))
        heading = _HEADING.match(line)
        if heading:
            slug = github_slug(heading.group("text"))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            found.add(slug if n == 0 else f"{slug}-{n}")
    return frozenset(found)


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _check_target(path: str, anchor: str | None, where: str, problems: list[str]) -> None:
    if path not in all_tracked() and path not in GENERATED:
        problems.append(f"{where}: {path} does not exist in the repository")
    elif anchor and path.endswith(".md") and anchor not in anchors(path):
        problems.append(f"{where}: {path} has no anchor #{anchor}")


def references(name: str, text: str) -> list[str]:
    """Problems with the file and section references in ``text`` (file ``name``)."""
    problems: list[str] = []
    for line_no, line, sentence in prose(name, text):
        if not sentence:
            continue
        for m in _PATH.finditer(line):
            path, anchor, after = m.group("path"), m.group("anchor"), m.group("after")
            if after in ("*", "<", "{") or "." not in path.rsplit("/", 1)[-1]:
                continue
            if path.rsplit(".", 1)[-1] not in FILE_EXTENSIONS:
                continue
            _check_target(path, anchor, f"{name}:{line_no}", problems)
    if name.endswith(".md"):
        base = Path(name).parent
        for m in _MD_LINK.finditer(text):
            target = m.group("target")
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            where = f"{name}:{_line_of(text, m.start())}"
            if not file_part:
                if anchor and anchor not in anchors(name):
                    problems.append(f"{where}: no anchor #{anchor} in this file")
                continue
            resolved = (ROOT / base / file_part).resolve()
            try:
                rel = resolved.relative_to(ROOT).as_posix()
            except ValueError:
                problems.append(f"{where}: {target} points outside the repository")
                continue
            _check_target(rel, anchor or None, where, problems)
    return problems


@lru_cache(maxsize=None)
def prose(name: str, text: str) -> tuple[tuple[int, str, bool], ...]:
    """``(line, text, is_sentence)`` pieces of ``text`` that are prose.

    Python: comments and string literals (``is_sentence`` is False for a
    string without a space, such as the evidence id ``"E2"`` in test data);
    every other file: all of it.
    """
    if not name.endswith(".py"):
        return tuple((i + 1, line, True) for i, line in enumerate(text.splitlines()))
    pieces: list[tuple[int, str, bool]] = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type in (tokenize.COMMENT, tokenize.STRING) or tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
            sentence = tok.type == tokenize.COMMENT or " " in tok.string
            for k, line in enumerate(tok.string.splitlines()):
                pieces.append((tok.start[0] + k, line, sentence))
    return tuple(pieces)


def outside_citations(name: str, text: str) -> list[str]:
    """Problems: citations of documents outside the repository, issue numbers, bare checklist ids."""
    problems: list[str] = []
    for line_no, line, sentence in prose(name, text):
        where = f"{name}:{line_no}"
        for rule, pattern in (("outside document", OUTSIDE), ("issue number", ISSUE),
                              ("seed section", SEED_SECTION)):
            m = pattern.search(line)
            if m:
                problems.append(f"{where}: {rule} {m.group(0)!r}")
        if not sentence:
            continue
        ids = [m.group(0) for m in CHECKLIST_ID.finditer(line) if m.group(0) != "S3"]
        if _S3_IN_PARENS.search(line):
            ids.append("S3")
        if ids:
            problems.append(f"{where}: checklist id {ids[0]!r} (cite docs/<file>.md#<anchor> instead)")
    return problems


def test_rules_catch_what_they_should():
    """The patterns flag the citation forms they exist for and leave look-alikes alone."""
    bad = ["see DESIGN.md §3", "CHECKLIST R3", "seeds/architecture.ko.wiki", "(issue 4)", "AR 저장과 수정",
           "(H1, H2)", "all-or-nothing (H1)", "status (R3):", "(S3)", "../shared/STYLE.md", "STYLE.md: one dispatcher",
           "a copy of shared/data"]
    for text in bad:
        assert outside_citations("x.md", text), text
    fine = ["S3 Research Memory", "S3 연구 메모리", "[S3W v1 op=x]", "P2_ITEMS", "S3RM_MCP_TOKEN", "E2E",
            "hooks_spec/rules.md#hs44-seal-valid", "Help:S3 연구 메모리/시작하기", "S3 servers removed by a typo"]
    for text in fine:
        assert not outside_citations("x.md", text), text
    assert not outside_citations("x.py", 'E1 = ev()\nBASE = page([E1, ev("E2")])\n')
    assert outside_citations("x.py", "x = 1  # CHECKLIST W5\n")
    assert github_slug("3. Public domain (`domain` profile)") == "3-public-domain-domain-profile"
    assert references("x.py", 'paths = {"sync/planted.py"}  # see docs/tools.md#no-such-anchor\n') == [
        "x.py:1: docs/tools.md has no anchor #no-such-anchor"]


@lru_cache(maxsize=None)
def _text(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


def test_every_reference_resolves():
    problems: list[str] = []
    for name in tracked_files():
        if name == _SELF:  # its examples name missing files on purpose
            continue
        problems += references(name, _text(name))
    assert not problems, "broken references:\n" + "\n".join(problems)


def test_no_outside_citations():
    problems: list[str] = []
    for name in tracked_files():
        if name == _SELF:
            continue
        problems += outside_citations(name, _text(name))
    assert not problems, f"{len(problems)} citations of outside documents:\n" + "\n".join(problems)


def test_contract_documents_list_their_anchors():
    """Each contract document opens with a table of its anchors, and every listed anchor exists."""
    for doc in ("docs/data-contract.md", "docs/tools.md", "docs/retrieval.md"):
        text = (ROOT / doc).read_text(encoding="utf-8")
        head = text.split("\n## ", 1)[0]
        listed = set(re.findall(r"^\| `([\w-]+)`", head, flags=re.M))
        listed |= {a for row in re.findall(r"^\| (`[\w-]+`(?:, `[\w-]+`)+) \|", head, flags=re.M)
                   for a in re.findall(r"`([\w-]+)`", row)}
        assert listed, doc
        missing = listed - anchors(doc)
        assert not missing, f"{doc} lists anchors it does not define: {sorted(missing)}"

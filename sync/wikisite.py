"""The sync account's connection to a MediaWiki and what that wiki can do.

``sync push|diff|check`` talk to the wiki through :class:`WikiSite`, a thin
layer over the repository's ONE MediaWiki client
(:class:`gateway.wiki.client.WikiClient`, the one the gateway, import, audit
and the dev wiki's readiness check use) that adds exactly what sync needs:

* **Settings** (:class:`ConnectionSettings`): the Action API URL and the
  sync login; the CLI resolves them (``--api-url``, ``S3RM_WIKI_API_URL``,
  ``S3RM_SYNC_USERNAME`` / ``S3RM_SYNC_PASSWORD``, else the dev wiki's
  ``.dev/wiki/env``: ``s3rm.sync_verbs.resolve_settings``).
* **Capabilities** (:class:`SiteInfo`): from ``meta=siteinfo``
  (``siprop=general|namespaces|namespacealiases|extensions``): whether
  Semantic MediaWiki and Page Forms are installed, and the wiki's namespaces
  with their canonical (English), localized (e.g. Korean ``틀``) and alias
  names.
* **Titles by identity** (:class:`TitleKey`): we always *send* canonical
  English titles (``Template:Lesson``), while a Korean wiki *answers* with
  ``틀:Lesson``. Titles are therefore compared by namespace id plus the
  normalized page name, never as localized strings (docs/data-contract.md#language).
* **Reads and edits** (:meth:`WikiSite.fetch`, :meth:`WikiSite.edit`):
  batched ``prop=revisions`` reads (50 titles a request) and edits through
  the one edit and conflict policy, :func:`gateway.wiki.edit.conditional_save`
  (base revision id, never ``basetimestamp``): a page that changed after it
  was read is an EditConflict, never overwritten.
* **Errors**: wiki failures are the client's one tree
  (:mod:`gateway.domain.repository`: WikiUnavailable, PermissionDenied,
  EditConflict, …); a missing right is a :class:`MissingRightsError` (a
  PermissionDenied naming the right, e.g. ``editsitejs``, and who grants
  it). :class:`SyncError` is only for sync's own problems (sources, settings,
  titles), :class:`SyncConfigError` for settings the caller must fix.

Nothing here prints; callers decide what to show.
"""
from __future__ import annotations

import re
import unicodedata
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from gateway.domain.repository import LoginFailed, PermissionDenied, RepositoryError, WikiApiError, WikiUnavailable
from gateway.wiki.client import WikiClient
from gateway.wiki.edit import conditional_save
from sync.errors import SyncConfigError, SyncError

API_URL_ENV = "S3RM_WIKI_API_URL"
USERNAME_ENV = "S3RM_SYNC_USERNAME"
PASSWORD_ENV = "S3RM_SYNC_PASSWORD"

#: Titles per ``prop=revisions`` request (the API limit for ordinary accounts).
BATCH_SIZE = 50
USER_AGENT = "s3rm-sync/0.1 (S3 Research Memory; https://github.com/)"

#: Extension names (as siteinfo lists them, compared case- and space-insensitively).
SMW_EXTENSIONS = frozenset({"semanticmediawiki"})
PAGEFORMS_EXTENSIONS = frozenset({"pageforms", "semanticforms"})
SCRIBUNTO_EXTENSIONS = frozenset({"scribunto"})

#: Namespaces that only exist when an extension defines them: canonical name →
#: (capability name, human name of the extension).
EXTENSION_NAMESPACES: Mapping[str, tuple[str, str]] = {
    "Property": ("smw", "Semantic MediaWiki"),
    "Concept": ("smw", "Semantic MediaWiki"),
    "Form": ("pageforms", "Page Forms"),
    "Module": ("scribunto", "Scribunto"),
}

#: Which group grants a right by default (used in error messages only).
RIGHT_GROUPS: Mapping[str, str] = {
    "editsitejs": "interface-admin",
    "editsitecss": "interface-admin",
    "editsitejson": "interface-admin or sysop",
    "editinterface": "interface-admin or sysop",
    "edit": "user",
    "createpage": "user",
    "writeapi": "user",
}
#: Bot-password grant that carries a right (a bot password only has the rights of its grants).
RIGHT_GRANTS: Mapping[str, str] = {
    "editsitejs": "editsiteconfig (Edit sitewide and user CSS/JS)",
    "editsitecss": "editsiteconfig (Edit sitewide and user CSS/JS)",
    "editsitejson": "editsiteconfig (Edit sitewide and user CSS/JS)",
    "editinterface": "editinterface (Edit the MediaWiki namespace and sitewide/user JSON)",
    "edit": "editpage (Edit existing pages)",
    "createpage": "createeditmovepage (Create, edit, and move pages)",
}
#: Edit API error codes that mean "this account lacks a right" → that right.
ERROR_RIGHTS: Mapping[str, str] = {
    "sitejsprotected": "editsitejs",
    "sitecssprotected": "editsitecss",
    "sitejsonprotected": "editsitejson",
    "protectednamespace-interface": "editinterface",
    "cantcreate": "createpage",
    "noedit": "edit",
    "noedit-anon": "edit",
    "writeapidenied": "writeapi",
}

_PHP_TRIM = " \t\n\r\0\x0b"
#: What MediaWiki folds into one space in titles (Title::newFromText / MediaWikiTitleCodec).
_TITLE_SPACES = re.compile("[ _\u00a0\u1680\u180e\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+")


# --------------------------------------------------------------------------
# errors


class MissingRightsError(PermissionDenied, SyncError):
    """The sync account lacks rights needed for some pages (exit 2).

    A :class:`~gateway.domain.repository.PermissionDenied` of the one wiki
    error tree, raised by the pre-check of ``sync push`` and when MediaWiki
    refuses an edit for a missing right. ``missing`` maps each missing right
    to the titles that need it.
    """

    exit_code = 2

    def __init__(self, username: str, missing: Mapping[str, Iterable[str]], wiki_code: str | None = None):
        self.username = username
        self.missing = {right: sorted(titles) for right, titles in missing.items()}
        super().__init__(describe_missing_rights(username, self.missing))
        self.wiki_code = wiki_code


def describe_missing_rights(username: str, missing: Mapping[str, Iterable[str]]) -> str:
    """Human text naming each missing right, who grants it and which pages need it."""
    lines = [f"the account {username!r} lacks rights that sync needs:"]
    for right in sorted(missing):
        titles = sorted(missing[right])
        shown = ", ".join(titles[:5]) + (f" and {len(titles) - 5} more" if len(titles) > 5 else "")
        group = RIGHT_GROUPS.get(right)
        grant = RIGHT_GRANTS.get(right)
        how = f" (granted to the {group} group" + (f"; a bot password also needs the grant {grant}" if grant else "") \
            + ")" if group else ""
        lines.append(f"  - `{right}`{how}: needed for {shown}")
    lines.append("use the sync account (S3RM_SYNC_USERNAME, e.g. S3Admin@sync in the dev wiki), "
                 "which is in the interface-admin group")
    return "\n".join(lines)


# --------------------------------------------------------------------------
# settings


@dataclass(frozen=True)
class ConnectionSettings:
    """Where and as whom sync connects.

    ``from_env_file`` names the variables read from ``env_file`` because they
    were not set in the environment (empty when everything came from there).
    """

    api_url: str
    username: str
    password: str = field(repr=False)
    from_env_file: tuple[str, ...] = ()
    env_file: Path | None = None


def split_api_url(api_url: str) -> tuple[str, str, str]:
    """Check and split ``http://host:port/w/api.php`` into ``("http", "host:port", "/w/")``.

    Raises:
        SyncConfigError: not an http(s) URL ending in ``api.php``.
    """
    parts = urllib.parse.urlsplit(api_url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise SyncConfigError(f"wiki API URL {api_url!r} is not an http(s) URL")
    path = parts.path or "/"
    if path.endswith("/api.php"):
        path = path[: -len("api.php")]
    elif not path.endswith("/"):
        raise SyncConfigError(f"wiki API URL {api_url!r} must end in /api.php")
    return parts.scheme, parts.netloc, path


# --------------------------------------------------------------------------
# namespaces, titles and capabilities


def _fold(name: str) -> str:
    """Namespace-name comparison form: underscores as spaces, single spaces, case-folded."""
    return " ".join(name.replace("_", " ").split()).casefold()


def _ext_fold(name: str) -> str:
    return "".join(ch for ch in name.casefold() if ch.isalnum())


@dataclass(frozen=True)
class Namespace:
    """One namespace of the wiki: ``id``, ``canonical`` English name, localized ``name``,
    ``case`` (``first-letter`` or ``case-sensitive``), ``aliases`` and the right
    (``protection``, e.g. ``editinterface``) that editing any page in it needs.
    """

    id: int
    canonical: str
    name: str
    case: str = "first-letter"
    aliases: tuple[str, ...] = ()
    protection: str | None = None

    def prefix(self) -> str:
        """The localized prefix the wiki shows (``틀:``; empty for the main namespace)."""
        return f"{self.name}:" if self.name else ""


@dataclass(frozen=True, order=True)
class TitleKey:
    """A page's identity independent of language: namespace id + normalized name."""

    ns: int
    name: str


@dataclass(frozen=True)
class SiteInfo:
    """What sync needs to know about a wiki, from ``meta=siteinfo``.

    Attributes:
        generator: e.g. ``"MediaWiki 1.39.17"``; ``lang``: content language code.
        extensions: installed extension names as siteinfo lists them.
        namespaces: id → :class:`Namespace`.
        smw / pageforms / scribunto: Semantic MediaWiki / Page Forms / Scribunto installed.
    """

    generator: str
    lang: str
    extensions: tuple[str, ...]
    namespaces: Mapping[int, Namespace]
    smw: bool
    pageforms: bool
    scribunto: bool = False

    @classmethod
    def from_query(cls, query: Mapping) -> "SiteInfo":
        """Build from the ``query`` member of a siteinfo response (formatversion 1 or 2)."""
        general = query.get("general", {})
        aliases: dict[int, list[str]] = {}
        for alias in query.get("namespacealiases", []):
            aliases.setdefault(int(alias["id"]), []).append(alias.get("alias") or alias.get("*", ""))
        namespaces = {}
        for raw in query.get("namespaces", {}).values():
            ns_id = int(raw["id"])
            local = raw.get("name", raw.get("*", ""))
            namespaces[ns_id] = Namespace(
                id=ns_id, canonical=raw.get("canonical", local if ns_id else ""), name=local,
                case=raw.get("case", "first-letter"), aliases=tuple(aliases.get(ns_id, ())),
                protection=raw.get("namespaceprotection"),
            )
        ext_names = tuple(e.get("name", "") for e in query.get("extensions", []))
        folded = {_ext_fold(n) for n in ext_names}
        return cls(
            generator=general.get("generator", ""), lang=general.get("lang", ""),
            extensions=ext_names, namespaces=namespaces,
            smw=bool(folded & SMW_EXTENSIONS), pageforms=bool(folded & PAGEFORMS_EXTENSIONS),
            scribunto=bool(folded & SCRIBUNTO_EXTENSIONS),
        )

    @property
    def capabilities(self) -> frozenset[str]:
        """Capability names in the vocabulary of ``sync.variants`` (``smw``, ``pageforms``, ``scribunto``)."""
        return frozenset(name for name, present in (("smw", self.smw), ("pageforms", self.pageforms),
                                                    ("scribunto", self.scribunto)) if present)

    def describe(self) -> str:
        """One line: version, language and the three extensions."""
        yes = {True: "yes", False: "no"}
        return (f"{self.generator or 'MediaWiki'}, content language {self.lang or '?'}; "
                f"Semantic MediaWiki: {yes[self.smw]}; Page Forms: {yes[self.pageforms]}; "
                f"Scribunto: {yes[self.scribunto]}")

    def namespace_for_prefix(self, prefix: str) -> Namespace | None:
        """The namespace whose canonical, localized or alias name is ``prefix``, else None."""
        want = _fold(prefix)
        if not want:
            return None
        for ns in self.namespaces.values():
            if ns.id == 0:
                continue
            if want in (_fold(ns.canonical), _fold(ns.name)) or want in {_fold(a) for a in ns.aliases}:
                return ns
        return None

    def namespace_by_canonical(self, canonical: str) -> Namespace | None:
        """The namespace with exactly this canonical name (main namespace for ``""``), else None."""
        if not canonical:
            return self.namespaces.get(0)
        want = _fold(canonical)
        for ns in self.namespaces.values():
            if ns.id and _fold(ns.canonical) == want:
                return ns
        return None

    def key(self, title: str) -> TitleKey:
        """Identity of ``title`` on this wiki (prefix resolved in any language, name normalized)."""
        prefix, sep, rest = title.partition(":")
        ns = self.namespace_for_prefix(prefix) if sep else None
        if ns is None:
            return TitleKey(0, normalize_name(title, self.namespaces[0].case if 0 in self.namespaces else "first-letter"))
        return TitleKey(ns.id, normalize_name(rest, ns.case))

    def key_in(self, ns_id: int, title: str) -> TitleKey:
        """Identity of a title the wiki returned together with its namespace id."""
        ns = self.namespaces.get(ns_id)
        name = title
        if ns is not None and ns.id != 0:
            prefix, sep, rest = title.partition(":")
            if sep and self.namespace_for_prefix(prefix) is ns:
                name = rest
        return TitleKey(ns_id, normalize_name(name, ns.case if ns else "first-letter"))

    def display(self, key: TitleKey) -> str:
        """The title as this wiki shows it (localized prefix), e.g. ``틀:Lesson``."""
        ns = self.namespaces.get(key.ns)
        return (ns.prefix() if ns else f"{{ns {key.ns}}}:") + key.name


def normalize_name(name: str, case: str = "first-letter") -> str:
    """MediaWiki's page-name normalization: NFC, runs of ``_`` and space-like
    characters become one space, trimmed, first letter upper-cased when the
    namespace's case rule is ``first-letter``."""
    name = _TITLE_SPACES.sub(" ", unicodedata.normalize("NFC", name)).strip(" ")
    if case == "first-letter" and name:
        name = name[0].upper() + name[1:]
    return name


def normalize_text(text: str) -> str:
    """What MediaWiki stores when ``text`` is saved, short of the pre-save transform.

    The web request layer normalises all input to NFC; the save path removes
    U+0000, turns CRLF and CR into LF, and strips trailing whitespace (PHP
    ``rtrim``: space, tab, LF, CR, NUL, vertical tab) from the end of the page.
    Comparing this with the stored text tells whether a save would change it.
    """
    text = unicodedata.normalize("NFC", text).replace("\0", "")
    return text.rstrip(_PHP_TRIM).replace("\r\n", "\n").replace("\r", "\n")


# --------------------------------------------------------------------------
# the connection


@dataclass(frozen=True)
class RemotePage:
    """A page as the wiki has it now.

    ``exists`` is False for a missing page (``text`` is then ``""``);
    ``title`` is the wiki's (localized) title; ``revid``/``timestamp`` belong
    to the latest revision.
    """

    key: TitleKey
    title: str
    exists: bool
    text: str = ""
    revid: int | None = None
    timestamp: str | None = None
    content_model: str | None = None


@dataclass(frozen=True)
class EditResult:
    """Outcome of one edit: ``changed`` False when MediaWiki saw no change."""

    title: str
    changed: bool
    new_revid: int | None = None


class WikiSite:
    """A logged-in connection for the sync account over the ONE MediaWiki client.

    Build it with :func:`connect`. ``client`` is the
    :class:`~gateway.wiki.client.WikiClient` the gateway uses too (login,
    retries, the error tree of :mod:`gateway.domain.repository`); ``info`` is
    the wiki's :class:`SiteInfo`; ``username`` the login name (bot passwords:
    ``User@app``).
    """

    def __init__(self, client: WikiClient, info: SiteInfo, username: str, api_url: str):
        self.client = client
        self.info = info
        self.username = username
        self.api_url = api_url
        self._rights: frozenset[str] | None = None

    # -- account -----------------------------------------------------------
    def rights(self) -> frozenset[str]:
        """The rights this session has (for a bot password: limited by its grants)."""
        if self._rights is None:
            data = self.client.get({"action": "query", "meta": "userinfo", "uiprop": "rights|groups"})
            self._rights = frozenset(data["query"]["userinfo"].get("rights", []))
        return self._rights

    def required_rights(self, key: TitleKey, create: bool) -> set[str]:
        """Rights an edit of ``key`` needs: ``edit``, ``createpage`` for new pages,
        the namespace's protection right (``editinterface`` for MediaWiki:) and
        ``editsitejs`` / ``editsitecss`` / ``editsitejson`` for site scripts,
        styles and JSON in the MediaWiki namespace.
        """
        needed = {"edit"}
        if create:
            needed.add("createpage")
        ns = self.info.namespaces.get(key.ns)
        if ns is not None and ns.protection:
            needed.update(r for r in ns.protection.split(",") if r)
        if key.ns == 8:
            for suffix, right in ((".js", "editsitejs"), (".css", "editsitecss"), (".json", "editsitejson")):
                if key.name.lower().endswith(suffix):
                    needed.add(right)
        return needed

    # -- reading -----------------------------------------------------------
    def fetch(self, titles: Iterable[str]) -> dict[TitleKey, RemotePage]:
        """Current content of ``titles`` (canonical or localized), keyed by :class:`TitleKey`.

        Reads in batches of :data:`BATCH_SIZE` with ``prop=revisions``
        (``rvslots=main``; POSTed, so long titles fit). Missing pages come back
        with ``exists=False``.

        Raises:
            SyncError: the wiki calls a title invalid.
            RepositoryError: the request failed (the client's error tree).
        """
        titles = list(dict.fromkeys(titles))
        out: dict[TitleKey, RemotePage] = {}
        for start in range(0, len(titles), BATCH_SIZE):
            batch = titles[start:start + BATCH_SIZE]
            data = self.client.post({"action": "query", "prop": "revisions",
                                     "rvprop": "content|ids|timestamp|contentmodel", "rvslots": "main",
                                     "titles": batch}, token=None, idempotent=True)
            for page in data.get("query", {}).get("pages", []):
                if page.get("invalid"):
                    raise SyncError(f"the wiki rejects the title {page.get('title')!r}: "
                                    f"{page.get('invalidreason', 'invalid title')}")
                key = self.info.key_in(int(page["ns"]), page["title"])
                if page.get("missing"):
                    out[key] = RemotePage(key, page["title"], False)
                    continue
                rev = page["revisions"][0]
                slot = rev.get("slots", {}).get("main", rev)
                out[key] = RemotePage(key, page["title"], True, slot.get("content", ""),
                                      rev.get("revid"), rev.get("timestamp"), slot.get("contentmodel"))
        return out

    # -- writing -----------------------------------------------------------
    def edit(self, title: str, text: str, summary: str, *, base: RemotePage | None) -> EditResult:
        """Save ``text`` to ``title`` by the repository's one edit policy (:func:`gateway.wiki.edit.conditional_save`).

        ``base`` None creates the page (it must not exist); otherwise the save
        succeeds only while ``base.revid`` is still the page's latest revision,
        and the page keeps its content model (``javascript`` for
        ``MediaWiki:Common.js``). Edits are marked as bot edits.

        Raises:
            MissingRightsError: the wiki refused for lack of a right (named).
            EditConflict: the page changed since ``base`` was read (by anyone, this account included).
            PageExists / PageMissing: the page appeared / disappeared since it was read.
            RepositoryError: any other refusal (spam filter, …) or an unreachable wiki.
        """
        if base is not None and base.revid is None:
            raise SyncError(f"the wiki reported no revision id for {title}")
        try:
            result = conditional_save(self.client, title, text, summary,
                                      base_revision_id=None if base is None else int(base.revid),
                                      content_model=None, bot=True)
        except PermissionDenied as exc:
            right = ERROR_RIGHTS.get(exc.wiki_code or "")
            if right:
                # MediaWiki names only its first reason; report every right the page needs and we lack
                lacking = self.required_rights(self.info.key(title), base is None) - self.rights()
                raise MissingRightsError(self.username, {r: [title] for r in (lacking or {right})},
                                         exc.wiki_code) from None
            exc.args = (f"editing {title} failed: {exc}",)
            raise
        except (WikiApiError, WikiUnavailable) as exc:
            exc.args = (f"editing {title} failed: {exc}",)  # same type and wiki_code, the page named
            raise
        return EditResult(title, not result.nochange, None if result.nochange else result.revision_id)

    def purge(self, titles: Iterable[str]) -> None:
        """Purge ``titles`` and refresh their link tables (``action=purge``, ``forcelinkupdate``), 50 per request.

        Pages saved in the same second as a page they include or link to keep a
        stale parser-cache copy (red links) because MediaWiki compares times at
        one-second precision; a purge after the push renders them afresh.
        """
        titles = list(titles)
        for start in range(0, len(titles), 50):
            self.client.post({"action": "purge", "titles": titles[start:start + 50], "forcelinkupdate": True},
                             token="csrf", idempotent=True)


def connect(settings: ConnectionSettings, *, timeout: float = 30.0) -> WikiSite:
    """Open a logged-in :class:`WikiSite` for ``settings``.

    Problems with the settings themselves are reported as
    :class:`SyncConfigError` naming what to fix (exit 2).

    Raises:
        SyncConfigError: bad URL, wiki unreachable, not a MediaWiki API, or login refused.
    """
    split_api_url(settings.api_url)
    client = WikiClient(settings.api_url, settings.username, settings.password, timeout=timeout,
                        max_retries=2, user_agent=USER_AGENT)
    try:
        client.login()
        info = SiteInfo.from_query(client.siteinfo())
    except LoginFailed as exc:
        raise SyncConfigError(f"the wiki refused the login of {settings.username!r}"
                              + (f": {exc.wiki_code}" if exc.wiki_code else "")) from None
    except WikiUnavailable as exc:
        if exc.wiki_code == "badresponse":
            raise SyncConfigError(f"{settings.api_url} does not answer like a MediaWiki Action API "
                                  f"({exc})") from None
        raise SyncConfigError(f"cannot reach the wiki at {settings.api_url}: {exc}") from None
    except RepositoryError as exc:
        raise SyncConfigError(f"{settings.api_url} does not answer like a MediaWiki Action API: "
                              f"{type(exc).__name__}: {str(exc)[:200]}") from None
    return WikiSite(client, info, settings.username, settings.api_url)

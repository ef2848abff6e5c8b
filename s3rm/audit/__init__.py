"""``s3rm audit``: check Lesson revisions against hooks_spec after the fact.

Without PHP nothing stops a browser (or a raw API client) from saving a
Lesson that breaks a save rule: such saves are DETECTED here, not prevented
(docs/data-contract.md#browser-saves). Run it on a schedule (cron, a compose job); it exits 1 when it
finds anything, so the scheduler can alert.

What it does:

1. lists Lesson revisions (namespace 3000) saved since ``--since`` (default:
   the last ``--hours`` hours, 24) oldest first, at most ``--limit``:
   ``list=recentchanges`` when the window lies inside the wiki's recent-changes
   retention (``$wgRCMaxAge``, 90 days by default), otherwise
   ``list=allrevisions`` (complete history, slower);
2. reads every revision and its parent (50 per request);
3. runs :func:`gateway.domain.checker.check_revision` on each (parent, revision)
   pair with MediaWiki's user, timestamp, summary and parent id, the seal keys
   (``S3RM_REVISION_HMAC_KEYS``), the gateway account (the configured login)
   and the set of Lessons that exist now (relation targets);
4. reports every violation — forged or copied S3R seals (HS44), merged gateway
   writes (HS42), edited append-only records (HS21–HS23), non-monotonic
   updated_at (HS15), … — plus evidence whose current verdict is ambiguous
   (docs/data-contract.md#current-verdict, reported under HS30) on the latest revision seen per Lesson;
5. lists, for information only, the latest revisions seen whose facets are longer than
   the embedding window of the configured profile (``embedding_truncated``: facet →
   cut fields and kept share, docs/hybrid-search.md#truncation-report). They are
   no violation: they never change the exit code.

Output: text lines or one JSON object (``--format json``)::

    {"source": "recentchanges"|"allrevisions", "since": "...", "scanned": 12,
     "partial": false, "unreadable": 0, "violation_count": 2,
     "by_rule": {"HS15": 1, "HS44": 1}, "truncated": false,
     "github_writers": {"alice": 3},
     "embedding_truncated": [{"lesson_id", "revision_id", "facets": {"situation": {"fields", "kept"}}}],
     "violations": [{"lesson_id", "revision_id", "parent_id", "user", "timestamp", "rule_id", "message",
                     "github_login"}]}

``github_writers`` counts the scanned gateway writes per verified GitHub
login (the ``gh=`` field of their summary marker, github mode:
docs/tools.md#attribution); ``github_login`` names it on a violation of such
a revision (``null`` otherwise).

at most ``--max-findings`` violations are listed (``truncated`` says so).
Messages name rules, fields and ids only — never Lesson content; seal keys
are never printed.

Exit codes: 0 clean, 1 violations found, 2 configuration or connection error.

Configuration: ``S3RM_WIKI_API_URL``, ``S3RM_WIKI_USERNAME``,
``S3RM_WIKI_PASSWORD`` (the gateway's account; read access suffices),
``S3RM_REVISION_HMAC_KEYS`` (the gateway's seal keys, retired ones included);
unset values fall back to the running dev stack's (:func:`settings`: ``.dev/wiki/env``,
``.dev/stack.env``, the seal key in ``.dev/secrets.json``), so on the dev stack the
command needs no settings. A seal whose key id the audit does not have is reported
naming ``S3RM_REVISION_HMAC_KEYS`` (docs/operations.md#audit).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, Mapping, TextIO

from gateway.config import ConfigError, GatewayConfig
from gateway.domain.codec import PageFormatError, parse_page
from gateway.domain.markers import MarkerError, parse_summary
from gateway.domain.repository import RepositoryError
from gateway.config.schema import Schema
from gateway.domain.timestamps import format_ts, parse_ts
from gateway.domain.verdicts import AMBIGUOUS, current_verdicts
from gateway.config.profiles import get_profile
from gateway.retrieval.indexing.projection import FACET_CHAR_CAP, ProjectionBuilder
from gateway.wiki.client import WikiClient
from gateway.domain.checker import check_revision

__all__ = ["Finding", "AuditReport", "audit", "settings", "register", "main"]

_BATCH = 50


@dataclass(frozen=True)
class Finding:
    """One violation of one revision."""

    lesson_id: str
    revision_id: int
    parent_id: int
    user: str
    timestamp: str
    rule_id: str
    message: str
    github_login: str | None = None


@dataclass
class AuditReport:
    """Result of one audit run (see the module docstring for the JSON form)."""

    source: str
    since: str
    scanned: int = 0
    partial: bool = False
    unreadable: int = 0
    findings: list[Finding] = field(default_factory=list)
    github_writers: Counter = field(default_factory=Counter)
    #: informational: latest revisions whose facets the index cuts (never a violation)
    truncated_facets: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self, max_findings: int) -> dict[str, Any]:
        """The bounded JSON report."""
        return {
            "source": self.source, "since": self.since, "scanned": self.scanned, "partial": self.partial,
            "unreadable": self.unreadable, "violation_count": len(self.findings),
            "by_rule": dict(sorted(Counter(f.rule_id for f in self.findings).items())),
            "truncated": len(self.findings) > max_findings,
            "github_writers": dict(sorted(self.github_writers.items())),
            "embedding_truncated": self.truncated_facets[:max_findings],
            "violations": [asdict(f) for f in self.findings[:max_findings]],
        }


def _lesson_id(title: str) -> str:
    """Lesson id of a page title (any namespace prefix; MediaWiki shows underscores as spaces)."""
    return title.split(":", 1)[1].replace(" ", "_") if ":" in title else title.replace(" ", "_")


def _rc_oldest(client) -> datetime | None:
    data = client.get({"action": "query", "list": "recentchanges", "rcdir": "newer", "rclimit": 1,
                       "rcprop": "timestamp"})
    rows = data.get("query", {}).get("recentchanges", [])
    return parse_ts(rows[0]["timestamp"]) if rows else None


def _list_revisions(client, ns: int, since: datetime, limit: int, source: str) -> tuple[list[dict], bool]:
    """Revisions of namespace ``ns`` since ``since`` oldest first: dicts revid/parentid/title/user/timestamp/comment."""
    out: list[dict] = []
    cont: dict[str, str] = {}
    while len(out) < limit:
        if source == "recentchanges":
            params = {"action": "query", "list": "recentchanges", "rcnamespace": ns, "rcdir": "newer",
                      "rcstart": format_ts(since), "rctype": "edit|new", "rclimit": min(500, limit - len(out)),
                      "rcprop": "ids|title|user|timestamp|comment"}
        else:
            params = {"action": "query", "list": "allrevisions", "arvnamespace": ns, "arvdir": "newer",
                      "arvstart": format_ts(since), "arvlimit": min(500, limit - len(out)),
                      "arvprop": "ids|user|timestamp|comment"}
        data = client.get({**params, **cont})
        query = data.get("query", {})
        if source == "recentchanges":
            for row in query.get("recentchanges", []):
                out.append({"revid": int(row.get("revid", 0)), "parentid": int(row.get("old_revid", 0)),
                            "title": row.get("title", ""), "user": row.get("user", ""),
                            "timestamp": row.get("timestamp", ""), "comment": row.get("comment", "")})
        else:
            for page in query.get("allrevisions", []):
                for rev in page.get("revisions", []):
                    out.append({"revid": int(rev.get("revid", 0)), "parentid": int(rev.get("parentid", 0)),
                                "title": page.get("title", ""), "user": rev.get("user", ""),
                                "timestamp": rev.get("timestamp", ""), "comment": rev.get("comment", "")})
        cont = data.get("continue", {})
        if not cont:
            return [r for r in out if r["revid"]], False
    return [r for r in out[:limit] if r["revid"]], True


def _texts(client, revids: Iterable[int]) -> dict[int, str]:
    wanted = sorted({r for r in revids if r})
    out: dict[int, str] = {}
    for start in range(0, len(wanted), _BATCH):
        chunk = wanted[start:start + _BATCH]
        data = client.get({"action": "query", "prop": "revisions", "revids": "|".join(map(str, chunk)),
                           "rvprop": "ids|content", "rvslots": "main"})
        for page in data.get("query", {}).get("pages", []):
            for rev in page.get("revisions", []):
                main = rev.get("slots", {}).get("main", {})
                if "content" in main:
                    out[int(rev["revid"])] = main["content"]
    return out


def _existing(client, ns_name: str, ids: set[str]) -> set[str]:
    found: set[str] = set()
    wanted = sorted(ids)
    for start in range(0, len(wanted), _BATCH):
        chunk = wanted[start:start + _BATCH]
        data = client.get({"action": "query", "prop": "info", "titles": "|".join(f"{ns_name}:{i}" for i in chunk)})
        for page in data.get("query", {}).get("pages", []):
            if not page.get("missing") and not page.get("invalid"):
                found.add(_lesson_id(page.get("title", "")))
    return found


def _github_login(comment: str, schema: Schema) -> str | None:
    """The verified GitHub login a gateway write's marker records (``gh=``), or ``None``."""
    try:
        marker = parse_summary(comment, schema)
    except MarkerError:
        return None
    return marker.actor if marker is not None else None


def _name_missing_key(rule_id: str, message: str, comment: str, keys: Mapping[str, str], schema: Schema) -> str:
    """An HS44 "unknown key id" message that also names the key id and the setting that lacks it."""
    if rule_id != "HS44" or "unknown key id" not in message:
        return message
    try:
        kid = getattr(parse_summary(comment, schema), "kid", None) or "?"
    except MarkerError:
        kid = "?"
    if not keys:
        return (f"{message} {kid!r}: S3RM_REVISION_HMAC_KEYS is not set; give the audit the seal keys of the "
                "gateway that wrote this wiki (docs/operations.md#audit)")
    return (f"{message} {kid!r}: S3RM_REVISION_HMAC_KEYS has no such key id (it has {', '.join(sorted(keys))}); "
            "keep retired keys there while their seals are audited (docs/operations.md#audit)")


def _restored_ids(rows: list[dict], schema: Schema) -> dict[int, int]:
    out = {}
    for row in rows:
        try:
            marker = parse_summary(row["comment"], schema)
        except MarkerError:
            continue
        if marker is not None and marker.tag == "S3U" and marker.restored:
            out[row["revid"]] = marker.restored
    return out


def audit(client, *, since: datetime, limit: int, keys: Mapping[str, str], agent_accounts: set[str],
          schema: Schema, force_allrevisions: bool = False, facet_char_cap: int = FACET_CHAR_CAP) -> AuditReport:
    """Audit Lesson revisions saved since ``since`` (at most ``limit``) by ``schema`` (the configuration's);
    ``facet_char_cap`` is the embedding window the truncation list is measured against. Raises
    RepositoryError on wiki failures."""
    ns = schema.namespace_id
    oldest = None if force_allrevisions else _rc_oldest(client)
    source = "recentchanges" if oldest is not None and oldest <= since else "allrevisions"
    rows, partial = _list_revisions(client, ns, since, limit, source)
    report = AuditReport(source=source, since=format_ts(since), scanned=len(rows), partial=partial)
    restored = _restored_ids(rows, schema)
    texts = _texts(client, [r["revid"] for r in rows] + [r["parentid"] for r in rows] + list(restored.values()))
    targets: set[str] = set()
    for row in rows:
        try:
            targets.update(r.get("to", "") for r in parse_page(texts.get(row["revid"], ""), schema).relations)
        except (PageFormatError, ValueError):
            pass
    existing = _existing(client, schema.namespace, {t for t in targets if t})
    latest: dict[str, tuple[dict, str]] = {}
    builder = ProjectionBuilder(schema, facet_char_cap)
    for row in rows:
        lesson_id = _lesson_id(row["title"])
        text = texts.get(row["revid"])
        parent_text = texts.get(row["parentid"]) if row["parentid"] else None
        if text is None or (row["parentid"] and parent_text is None):
            report.unreadable += 1
            continue
        violations = check_revision(
            parent_text, text, row["user"], row["timestamp"], row["comment"], keys=keys,
            existing_lessons=existing, lesson_id=lesson_id, parent_revision_id=row["parentid"],
            agent_accounts=agent_accounts, restored_wikitext=texts.get(restored.get(row["revid"], 0)), schema=schema)
        login = _github_login(row["comment"], schema) if row["user"] in agent_accounts else None
        if login:
            report.github_writers[login] += 1
        for v in violations:
            report.findings.append(Finding(lesson_id, row["revid"], row["parentid"], row["user"], row["timestamp"],
                                           v.rule_id, _name_missing_key(v.rule_id, v.message, row["comment"], keys, schema),
                                           login))
        latest[lesson_id] = (row, text)
    for lesson_id, (row, text) in latest.items():
        try:
            page = parse_page(text, schema)
        except (PageFormatError, ValueError):
            continue
        cut = builder.truncation_report(page)
        if cut:
            report.truncated_facets.append({"lesson_id": lesson_id, "revision_id": row["revid"], "facets": cut})
        for eid, verdict in current_verdicts(page).items():
            if verdict.verdict == AMBIGUOUS:
                report.findings.append(Finding(
                    lesson_id, row["revid"], row["parentid"], row["user"], row["timestamp"], "HS30",
                    f"evidence {eid}: its verification records have tied or reversed verified_at, so no current "
                    "verdict is guessed"))
    return report


# ---------------------------------------------------------------------- CLI
def settings(environ: Mapping[str, str], api_url: str | None = None,
             dev: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings the audit runs with: ``environ`` first, then the running dev stack's
    (:func:`s3rm.settings.dev_stack_settings`, or ``dev``), so ``s3rm audit`` checks
    seals with the keys the stack's gateway signs with.

    Wiki settings fall back name by name. The seal settings come as a pair, from ``environ``
    when it sets ``S3RM_REVISION_HMAC_KEYS``, else from the dev stack only when the audited
    wiki is the dev stack's (another wiki's seals need that wiki's gateway keys).
    """
    from s3rm.settings import SEAL_SETTINGS, dev_stack_settings

    dev = dev_stack_settings() if dev is None else dev
    env = {k: v for k, v in dev.items() if k not in SEAL_SETTINGS}
    env.update({k: v for k, v in environ.items() if v})
    if api_url:
        env["S3RM_WIKI_API_URL"] = api_url
    if not environ.get(SEAL_SETTINGS[0]):
        target = env.get("S3RM_WIKI_API_URL", GatewayConfig.wiki_api_url)
        same_wiki = dev.get("S3RM_WIKI_API_URL", GatewayConfig.wiki_api_url) == target
        for name in SEAL_SETTINGS:
            env.pop(name, None)
            if same_wiki and dev.get(name):
                env[name] = dev[name]
    return env


def _config(args) -> GatewayConfig:
    return GatewayConfig.from_env(settings(os.environ, args.api_url))


def _write_text(report: AuditReport, max_findings: int, out: TextIO) -> None:
    doc = report.to_json(max_findings)
    out.write(f"audit: {doc['scanned']} Lesson revisions since {doc['since']} via {doc['source']}"
              f"{' (partial: --limit reached)' if doc['partial'] else ''}; "
              f"{doc['violation_count']} violation(s), {doc['unreadable']} unreadable\n")
    if doc["github_writers"]:
        out.write("GitHub writers: " + ", ".join(f"{k} {n}" for k, n in doc["github_writers"].items()) + "\n")
    for v in doc["violations"]:
        who = f", GitHub {v['github_login']}" if v["github_login"] else ""
        out.write(f"{v['rule_id']} Lesson:{v['lesson_id']} rev {v['revision_id']} (parent {v['parent_id']}, "
                  f"{v['user']}{who}, {v['timestamp']}): {v['message']}\n")
    for item in doc["embedding_truncated"]:
        facets = "; ".join(f"{f} cut in {', '.join(c['fields'])} ({round(100 * c['kept'])} % kept)"
                           for f, c in item["facets"].items())
        out.write(f"info: Lesson:{item['lesson_id']} rev {item['revision_id']} is longer than the embedding window: "
                  f"{facets}\n")
    if doc["truncated"]:
        out.write(f"... {doc['violation_count'] - max_findings} more (raise --max-findings or use --format json)\n")
    if doc["violation_count"]:
        out.write("Browser and raw saves are checked after the fact, not prevented; see hooks_spec/rules.md.\n")


def cmd_audit(args, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the audit; returns the exit code (0 clean, 1 violations, 2 configuration/connection error)."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        config = _config(args)
    except ConfigError as exc:
        err.write(f"audit: configuration error: {exc}\n")
        return 2
    if args.since:
        since = parse_ts(args.since)
        if since is None:
            err.write("audit: --since must be YYYY-MM-DDTHH:MM:SSZ\n")
            return 2
    else:
        since = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(hours=args.hours)
    client = WikiClient(config.wiki_api_url, config.wiki_username, config.wiki_password,
                        timeout=config.wiki_timeout_seconds)
    try:
        agents = set(args.agent_account or ())
        if config.wiki_username and not agents:
            name = client.get({"action": "query", "meta": "userinfo"}).get("query", {}).get("userinfo", {})
            if name.get("name") and not name.get("anon"):
                agents.add(name["name"])
        report = audit(client, since=since, limit=args.limit, keys=dict(config.revision_hmac_keys),
                       agent_accounts=agents, schema=config.schema, force_allrevisions=args.all_revisions,
                       facet_char_cap=get_profile(config.retrieval.profile_name).facet_char_cap)
    except RepositoryError as exc:
        err.write(f"audit: the wiki could not be read ({getattr(exc, 'wiki_code', '') or type(exc).__name__})\n")
        return 2
    if args.format == "json":
        out.write(json.dumps(report.to_json(args.max_findings), ensure_ascii=False) + "\n")
    else:
        _write_text(report, args.max_findings, out)
    return 1 if report.findings else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``s3rm audit`` to the ``s3rm`` parser."""
    p = subparsers.add_parser(
        "audit", help="check recent Lesson revisions against the save rules (exit 1 on violations)",
        description="Check Lesson revisions against hooks_spec/rules.md after the fact: browser and raw API saves "
                    "that break a rule are detected, not prevented. Meant for cron or a compose job; exits 1 when "
                    "it finds violations.")
    p.add_argument("--since", help="audit revisions saved at or after this UTC time (YYYY-MM-DDTHH:MM:SSZ)")
    p.add_argument("--hours", type=int, default=24, help="without --since: the last N hours (default 24)")
    p.add_argument("--limit", type=int, default=5000, help="at most N revisions per run (default 5000)")
    p.add_argument("--max-findings", type=int, default=200, help="list at most N violations (default 200)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--all-revisions", action="store_true",
                   help="read list=allrevisions even when recent changes would cover the window")
    p.add_argument("--agent-account", action="append",
                   help="gateway account allowed to write markers (default: the configured login); repeatable")
    p.add_argument("--api-url", help="the wiki's api.php URL (default: $S3RM_WIKI_API_URL)")
    p.set_defaults(handler=cmd_audit)


def main(argv: list[str] | None = None) -> int:
    """``python -m s3rm.audit``."""
    parser = argparse.ArgumentParser(prog="s3rm")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["audit", *(argv if argv is not None else sys.argv[1:])])
    return args.handler(args)

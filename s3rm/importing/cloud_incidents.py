"""Map the cloud-incident post-mortem corpus to ``imported`` Lessons.

Source: ``data/cloud-incidents/cloud_incidents.csv`` (MIT licence),
356 public AWS / Azure / Google incident post-mortems with columns
``id, provider, date, title, duration_minutes, services_affected,
impact_symptoms, root_cause_l1, root_cause_l2, human_error,
mitigation_actions, url, summary`` (``data/cloud-incidents/README.md``).

Mapping rules (no invented facts — where the CSV is silent the field says so):

* id — the incident id lower-cased, runs of characters outside
  ``[a-z0-9_-]`` replaced by ``-``. The corpus repeats one id for a
  preliminary and a final report; every id that occurs more than once gets a
  suffix from the SHA-256 of its source URL, so ids stay stable across runs.
* title — the post-mortem title as published.
* question — a neutral framing naming provider and date.
* attempt — the mitigation actions the dataset lists.
* context — provider, date, duration and affected services.
* observation — the impact classes plus the post-mortem excerpt.
* interpretation — the dataset's two-level root-cause labels and its
  human-error flag.
* reusable_lesson — one sentence assembled only from those labels.
* applicability — which systems the record speaks about, and its limits.
* evidence — the source URL, kind ``other`` (a provider incident report,
  none of paper/code/dataset/log/benchmark), basis ``partial_source``: only
  the dataset's ≤500-character excerpt and labels were read, not the report.
* confidence ``medium``: the facts come from the provider's own report, but
  the causal labels are a third party's classification.
"""
from __future__ import annotations

import csv
import hashlib
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

NOT_RECORDED = "not recorded in the source data"
_SLUG = re.compile(r"[^a-z0-9_-]+")


@dataclass(frozen=True)
class ImportRecord:
    """One Lesson to import: its id, client-level Lesson fields and one evidence.

    ``fields`` holds the client-settable Lesson fields (title … evidence,
    confidence); ``evidence`` the client-settable evidence fields;
    ``record_origin`` is ``imported`` (external data) or ``synthetic`` (written
    as an example, e.g. for the retrieval evaluation). Provenance and time
    fields are filled by the writer at save time.
    """

    lesson_id: str
    fields: dict[str, str]
    evidence: dict[str, str]
    record_origin: str = "imported"


def _slug(raw: str) -> str:
    return _SLUG.sub("-", raw.strip().lower()).strip("-")


def _list(raw: str) -> list[str]:
    return [part.strip() for part in (raw or "").split(";") if part.strip()]


def _join(items: list[str]) -> str:
    return ", ".join(items)


def _or_missing(text: str) -> str:
    return text if text.strip() else NOT_RECORDED


def map_row(row: dict[str, str], lesson_id: str) -> ImportRecord:
    """Turn one CSV row into an :class:`ImportRecord` (pure; no I/O).

    Raises:
        KeyError: a required column is missing from the row.
        ValueError: the row has no title or no URL (nothing citable).
    """
    provider = row["provider"].strip() or "an unnamed provider"
    date = row["date"].strip()
    title = row["title"].strip()
    url = row["url"].strip()
    if not title or not url:
        raise ValueError("row has no title or no source URL")
    services = _list(row["services_affected"])
    impact = _list(row["impact_symptoms"])
    cause_l1 = _list(row["root_cause_l1"])
    cause_l2 = _list(row["root_cause_l2"])
    actions = _list(row["mitigation_actions"])
    duration = row["duration_minutes"].strip()
    human = {"true": "yes", "false": "no"}.get(row["human_error"].strip().lower(), NOT_RECORDED)
    summary = row["summary"].strip()

    when = f" on {date}" if date else ""
    context = "\n".join([
        f"Provider: {provider}",
        f"Date: {date or NOT_RECORDED}",
        f"Duration (minutes): {duration or NOT_RECORDED}",
        f"Services affected: {_or_missing(_join(services))}",
    ])
    observation = "\n".join([
        f"Impact: {_or_missing(_join(impact))}",
        f"Report excerpt: {_or_missing(summary)}",
    ])
    interpretation = "\n".join([
        f"Root cause category (dataset label): {_or_missing(_join(cause_l1))}",
        f"Root cause detail (dataset label): {_or_missing(_join(cause_l2))}",
        f"Human error involved (dataset label): {human}",
    ])
    known = [c for c in (cause_l2 or cause_l1) if c.lower() != "unknown"]
    cause = _join(known) or "a cause the report does not identify"
    hit = _join(services[:3]) or "the affected services"
    reaction = f" Response: {_join(actions[:3])}." if actions else ""
    reusable = (f"In {hit}, {cause} produced {_join(impact) or 'service'} problems "
                f"({provider}{when}).{reaction}")
    applicability = (
        f"Systems built on or resembling {provider}'s {_or_missing(_join(services[:5]))}. "
        "Derived from a public post-mortem and a third-party classification; check the report "
        "before relying on details."
    )
    fields = {
        "title": title,
        "question": f"What went wrong in the {provider} incident reported{when}, and how was it handled?",
        "attempt": f"Mitigation actions listed: {_join(actions)}" if actions else f"Mitigation actions: {NOT_RECORDED}",
        "context": context,
        "observation": observation,
        "interpretation": interpretation,
        "reusable_lesson": reusable[:2000],
        "applicability": applicability,
        "confidence": "medium",
        "evidence": f"{provider} post-mortem ({url}); excerpt and labels from the cloud-incidents dataset (MIT).",
    }
    evidence = {
        "id": "postmortem",
        "citation": f"{provider} post-mortem: {title}" + (f" ({date})" if date else ""),
        "url": url,
        "kind": "other",
        "verification_basis": "partial_source",
        "note": "Only the dataset's excerpt (at most 500 characters) and its labels were read, not the full report.",
    }
    return ImportRecord(lesson_id=lesson_id, fields=fields, evidence=evidence)


def read_records(path: Path) -> tuple[list[ImportRecord], list[tuple[str, str]]]:
    """Read the CSV and map every row.

    Returns:
        (records, failures) where failures are ``(row id, reason)`` pairs.
    Raises:
        OSError: the file cannot be read.
    """
    with Path(path).open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    counts = Counter(_slug(r.get("id", "")) for r in rows)
    records, failures = [], []
    for row in rows:
        base = _slug(row.get("id", ""))
        if not base:
            failures.append((row.get("id", "?"), "row has no id"))
            continue
        lesson_id = base
        if counts[base] > 1:
            lesson_id = f"{base}-{hashlib.sha256(row.get('url', '').encode()).hexdigest()[:6]}"
        try:
            records.append(map_row(row, lesson_id))
        except (KeyError, ValueError) as exc:
            failures.append((row.get("id", "?"), str(exc)))
    return records, failures

"""Map the synthetic evaluation Lessons (JSON Lines) to ``synthetic`` import records.

Source: ``data/synthetic-ko/lessons.jsonl`` — Korean research and operations
Lessons written for the retrieval evaluation (``eval/README.md``), one JSON
object per line with ``id`` (already a Lesson id), ``title`` and the seven
core text fields. They describe plausible situations; none is a real event, a
real measurement or a real person, and every Lesson says so in its
``evidence`` text and its evidence record (``record_origin = synthetic``,
confidence ``low``, basis ``metadata_only``: there is no source to read).
"""
from __future__ import annotations

import json
from pathlib import Path

from s3rm.importing.cloud_incidents import ImportRecord

__all__ = ["CORE_FIELDS", "SYNTHETIC_NOTE", "map_line", "read_records"]

#: The Lesson text fields every line must carry (besides ``id``).
CORE_FIELDS = ("title", "question", "attempt", "context", "observation", "interpretation", "reusable_lesson",
               "applicability")
#: What every synthetic Lesson states about itself (Korean, like the Lessons).
SYNTHETIC_NOTE = ("검색 품질 평가를 위해 작성한 합성 예시입니다. 실제 사건·측정·인물의 기록이 아니며 "
                  "근거 자료가 없습니다.")


def map_line(obj: dict) -> ImportRecord:
    """One JSON object → :class:`ImportRecord` (pure).

    Raises:
        ValueError: ``id`` or a core field is missing, empty or not a string.
    """
    lesson_id = obj.get("id")
    if not isinstance(lesson_id, str) or not lesson_id:
        raise ValueError("line has no id")
    missing = [name for name in CORE_FIELDS if not isinstance(obj.get(name), str) or not obj[name].strip()]
    if missing:
        raise ValueError(f"missing fields: {', '.join(missing)}")
    fields = {name: obj[name].strip() for name in CORE_FIELDS}
    fields.update(confidence="low", evidence=SYNTHETIC_NOTE)
    evidence = {
        "id": "synthetic-note",
        "citation": f"S3RM retrieval evaluation set, synthetic Lesson {lesson_id} (written for the benchmark)",
        "url": "",
        "kind": "other",
        "verification_basis": "metadata_only",
        "note": SYNTHETIC_NOTE,
    }
    return ImportRecord(lesson_id=lesson_id, fields=fields, evidence=evidence, record_origin="synthetic")


def read_records(path: Path) -> tuple[list[ImportRecord], list[tuple[str, str]]]:
    """Read the JSON Lines file; returns ``(records, failures)`` (failures: ``(line id, reason)``).

    Raises:
        OSError: the file cannot be read.
    """
    records, failures = [], []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            if not isinstance(obj, dict):
                raise ValueError("line is not a JSON object")
            records.append(map_line(obj))
        except ValueError as exc:
            failures.append((f"line {n}", str(exc)))
    return records, failures

"""Real-call import: checking a JSON or JSONL file of recorded calls line by line, and
importing it all or nothing, idempotent by call id (ImportReport, ImportProblem)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from arena.held_out import held_out_calls_ensure
from arena.models import Call, Turn, World

MAX_CALL_ID_LENGTH = 200
OUTCOMES = {choice for choice, _label in Call.Outcome.choices}
SPEAKERS = {choice for choice, _label in Turn.Speaker.choices}


@dataclass(frozen=True)
class ImportProblem:
    line: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


class CallImportError(ValueError):
    """The file had bad lines; nothing was imported."""

    def __init__(self, problems: list[ImportProblem]):
        self.problems = problems
        shown = "; ".join(str(problem) for problem in problems[:20])
        more = f" (and {len(problems) - 20} more)" if len(problems) > 20 else ""
        super().__init__(
            f"Nothing was imported: {len(problems)} bad line(s). {shown}{more}. "
            "Each line must be a JSON object like "
            '{"id": "...", "outcome": "won"|"lost"|"unknown", '
            '"turns": [{"speaker": "agent"|"customer", "text": "..."}]}.'
        )


@dataclass
class ImportReport:
    created: int = 0
    unchanged: int = 0
    turns_created: int = 0
    problems: list[ImportProblem] = field(default_factory=list)

    def as_dict(self) -> dict[str, int]:
        return {
            "created": self.created,
            "unchanged": self.unchanged,
            "turns_created": self.turns_created,
        }


def _records_from_text(text: str) -> list[tuple[int, Any]]:
    """(line number, parsed value) for a JSON array or a JSONL text; bad JSON raises."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as error:
            raise CallImportError(
                [ImportProblem(error.lineno, f"not valid JSON ({error.msg})")]
            ) from error
        # In a JSON array, "line" is the item's position, counted from 1.
        return list(enumerate(items, start=1))
    records: list[tuple[int, Any]] = []
    problems: list[ImportProblem] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append((number, json.loads(line)))
        except json.JSONDecodeError as error:
            problems.append(ImportProblem(number, f"not valid JSON ({error.msg})"))
    if problems:
        raise CallImportError(problems)
    return records


def _problem_with(record: Any) -> str | None:
    if not isinstance(record, dict):
        return "a call must be a JSON object"
    call_id = record.get("id")
    if not isinstance(call_id, str) or not call_id.strip():
        return '"id" is missing or not a non-empty string'
    if len(call_id) > MAX_CALL_ID_LENGTH:
        return f'"id" is longer than {MAX_CALL_ID_LENGTH} characters'
    if record.get("outcome") not in OUTCOMES:
        return f'"outcome" is {record.get("outcome")!r}; use one of won, lost, unknown'
    turns = record.get("turns")
    if not isinstance(turns, list) or not turns:
        return '"turns" is missing or empty; give a list of {"speaker", "text"} objects'
    for position, turn in enumerate(turns, start=1):
        if not isinstance(turn, dict):
            return f"turn {position} is not an object"
        if turn.get("speaker") not in SPEAKERS:
            return f'turn {position}: "speaker" is {turn.get("speaker")!r}; use agent or customer'
        if not isinstance(turn.get("text"), str) or not turn["text"].strip():
            return f'turn {position}: "text" is missing or empty'
    return None


def calls_validate(text: str) -> list[tuple[int, dict[str, Any]]]:
    """Every record with its line number, or CallImportError naming every bad line."""
    records = _records_from_text(text)
    problems: list[ImportProblem] = []
    first_line_of: dict[str, int] = {}
    for number, record in records:
        reason = _problem_with(record)
        if reason is None and record["id"] in first_line_of:
            reason = f'"id" {record["id"]!r} already appears on line {first_line_of[record["id"]]}'
        if reason:
            problems.append(ImportProblem(number, reason))
        else:
            first_line_of[record["id"]] = number
    if problems:
        raise CallImportError(problems)
    if not records:
        raise CallImportError([ImportProblem(1, "the file holds no calls")])
    return records


def calls_import(*, world: World, text: str, source: str = "") -> ImportReport:
    """Import real calls into `world`: all or nothing, and idempotent by call id.

    Calls whose id the world already has are left exactly as they are.
    """
    records = calls_validate(text)
    report = ImportReport()
    with transaction.atomic():
        existing = set(
            Call.objects.filter(
                world=world, external_id__in=[record["id"] for _n, record in records]
            ).values_list("external_id", flat=True)
        )
        new_records = [record for _n, record in records if record["id"] not in existing]
        report.unchanged = len(records) - len(new_records)
        calls = Call.objects.bulk_create(
            Call(
                world=world,
                external_id=record["id"],
                outcome=record["outcome"],
                source=source[:300],
                turn_count=len(record["turns"]),
            )
            for record in new_records
        )
        turns = [
            Turn(call=call, index=index, speaker=turn["speaker"], text=turn["text"].strip())
            for call, record in zip(calls, new_records, strict=True)
            for index, turn in enumerate(record["turns"])
        ]
        Turn.objects.bulk_create(turns, batch_size=5000)
        report.created = len(calls)
        report.turns_created = len(turns)
        if calls:
            held_out_calls_ensure(world=world)
    return report

"""Real-call import: checking a JSON or JSONL file of recorded calls line by line, and
importing it all or nothing, idempotent by call id (ImportReport, ImportProblem)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from arena.held_out import held_out_calls_ensure
from arena.judge.fit_job import judge_fit_soon
from arena.models import Call, Turn, World
from arena.services.move_labels import calls_label_moves
from levers9.text import bad_text_path

MAX_CALL_ID_LENGTH = 200
MAX_TURN_TEXT = 50_000
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


# The one value of the explicit field (API `?convert=`, `import_calls --convert`) that adds
# recorded calls to a simulated world on purpose.
CONVERT_TO_REAL_CALLS = "real-calls"


class CallImportRefused(CallImportError):
    """Real calls sent to a simulated world that has none: refused, nothing imported, unless
    the sender turns the world into a real-call world on purpose. Named by its field."""

    field = "convert"

    def __init__(self, world: World):
        self.problems = []
        ValueError.__init__(
            self,
            f"Nothing was imported: {world.name} ({world.slug}) is a simulated world (scripted "
            "customers play it) and holds no recorded calls, and importing these would make "
            "its Duel, judge and Evaluate read them as its own. For another business's calls, "
            "make a world of its own (World page → New world, or POST /api/rl/packs/) and "
            f"import them there. To turn {world.name} into a world of real recorded calls on "
            f"purpose, send them again with ?convert={CONVERT_TO_REAL_CALLS} (manage.py "
            f"import_calls --convert {CONVERT_TO_REAL_CALLS}).",
        )


def calls_import_refusal(world: World) -> CallImportRefused | None:
    """Why calls may not go into `world` without converting it, or None: a world whose
    customers are simulated and that has no recorded call yet (one converted on purpose has
    some, and takes more)."""
    if world.has_simulator and not Call.objects.filter(world=world).exists():
        return CallImportRefused(world)
    return None


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


def import_text_decode(data: str | bytes, *, error: type[ValueError]) -> str:
    """An import file's text: UTF-8 (a byte-order mark is allowed), else `error` naming the
    first line that is not — never silently replaced characters."""
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as decode_error:
        line = data.count(b"\n", 0, decode_error.start) + 1
        column = decode_error.start - (data.rfind(b"\n", 0, decode_error.start) + 1) + 1
        byte = data[decode_error.start]
        raise error(
            [
                ImportProblem(
                    line,
                    f"not valid UTF-8 (byte 0x{byte:02x} at column {column}): "
                    "save the file as UTF-8",
                )
            ]
        ) from None


def json_line_parse(line: str) -> Any:
    """One JSON value of an import, or ValueError saying why not, in words."""
    try:
        value = json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"not valid JSON ({error.msg})") from None
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except ValueError as error:  # e.g. an integer of more digits than Python converts
        raise ValueError(f"not valid JSON ({error})") from None
    found = bad_text_path(value)
    if found:
        where, problem = found
        raise ValueError(f'"{where}": {problem}')
    return value


def _records_from_text(text: str) -> tuple[list[tuple[int, Any]], list[ImportProblem]]:
    """(line number, parsed value) for each readable record of a JSON array or a JSONL text,
    and a problem for each that is not. Both come back together, so a file's broken lines and
    its lines with bad fields are named in one answer."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as error:
            raise CallImportError(
                [ImportProblem(error.lineno, f"not valid JSON ({error.msg})")]
            ) from error
        except (RecursionError, ValueError):
            # Nested too deeply, or a number too long to convert: say where the array is.
            items = None
        if not isinstance(items, list):
            raise CallImportError(
                [ImportProblem(1, "not valid JSON (nested too deeply or a number too long)")]
            )
        # In a JSON array, "line" is the item's position, counted from 1.
        records, problems = [], []
        for number, item in enumerate(items, start=1):
            found = bad_text_path(item)
            if found:
                problems.append(ImportProblem(number, f'"{found[0]}": {found[1]}'))
            else:
                records.append((number, item))
        return records, problems
    records, problems = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append((number, json_line_parse(line)))
        except ValueError as error:
            problems.append(ImportProblem(number, str(error)))
    return records, problems


def _problem_with(record: Any) -> str | None:
    """Everything wrong with one call, each field named, or None."""
    if not isinstance(record, dict):
        return "a call must be a JSON object"
    problems = []
    call_id = record.get("id")
    if not isinstance(call_id, str) or not call_id.strip():
        problems.append('"id" is missing or not a non-empty string')
    elif len(call_id) > MAX_CALL_ID_LENGTH:
        problems.append(f'"id" is longer than {MAX_CALL_ID_LENGTH} characters')
    outcome = record.get("outcome")
    if not isinstance(outcome, str) or outcome not in OUTCOMES:
        problems.append(f'"outcome" is {_shown(outcome)}; use one of won, lost, unknown')
    turns = record.get("turns")
    if not isinstance(turns, list) or not turns:
        problems.append('"turns" is missing or empty; give a list of {"speaker", "text"} objects')
    elif turn_problem := turns_problem(turns):
        problems.append(turn_problem)
    return "; ".join(problems) or None


def turns_problem(turns: Any) -> str | None:
    """What is wrong with a call's turns, in words, or None: a non-empty list of
    {"speaker": "agent"|"customer", "text": "..."}. Imported and live calls alike."""
    if not isinstance(turns, list):
        return '"turns" must be a list of {"speaker", "text"} objects'
    for position, turn in enumerate(turns, start=1):
        if not isinstance(turn, dict):
            return f"turn {position} is not an object"
        speaker = turn.get("speaker")
        if not isinstance(speaker, str) or speaker not in SPEAKERS:
            return f'turn {position}: "speaker" is {_shown(speaker)}; use agent or customer'
        text = turn.get("text")
        if not isinstance(text, str):
            return f'turn {position}: "text" is {_shown(text)}; give the words as a string'
        if not text.strip():
            return f'turn {position}: "text" is missing or empty'
        if len(text) > MAX_TURN_TEXT:
            return f'turn {position}: "text" is longer than {MAX_TURN_TEXT} characters'
    return None


def _shown(value: Any) -> str:
    """A wrong value as an error message names it: short, and its type when not a string."""
    if value is None:
        return "missing"
    if isinstance(value, list | dict):
        return f"a JSON {'list' if isinstance(value, list) else 'object'}, not a string"
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def calls_validate(text: str | bytes) -> list[tuple[int, dict[str, Any]]]:
    """Every record with its line number, or CallImportError naming every bad line, unreadable
    and ill-formed alike, in the file's order."""
    records, problems = _records_from_text(import_text_decode(text, error=CallImportError))
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
        raise CallImportError(sorted(problems, key=lambda problem: problem.line))
    if not records:
        raise CallImportError([ImportProblem(1, "the file holds no calls")])
    return records


def calls_import(
    *, world: World, text: str | bytes, source: str = "", convert: bool = False
) -> ImportReport:
    """Import real calls into `world`: all or nothing, and idempotent by call id.

    Calls whose id the world already has are left exactly as they are. A simulated world
    with no recorded call refuses them (CallImportRefused) unless `convert` says to make it
    a real-call world on purpose: a business's calls never flip a world silently.
    """
    records = calls_validate(text)
    refusal = None if convert else calls_import_refusal(world)
    if refusal is not None:
        raise refusal
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
            # Labelled with the world's moves now, so the Duel's first pairs carry them.
            calls_label_moves(world=world, call_ids=[call.pk for call in calls])
        if any(call.outcome != Call.Outcome.UNKNOWN for call in calls):
            # New outcomes teach the judge's won head (and place the guard's answer floor):
            # a background refit once this commits, as after a freeze.
            judge_fit_soon(world_ids={world.pk})
    return report

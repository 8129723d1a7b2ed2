"""The preference-version file format: one TSV row per pick, and a JSON manifest beside it.

Pure Python (no Django), so a trainer handed a path in its spec reads the same format the
freeze writes. A file is UTF-8, "\\n"-terminated rows, a header row first. Every field is
escaped the way PostgreSQL's COPY text format does it (the freeze streams the rows with COPY):
backslash, tab, newline, carriage return, backspace, form feed and vertical tab become \\\\,
\\t, \\n, \\r, \\b, \\f and \\v, so a reply with tabs or newlines stays on one row and reads
back exactly. The dialogue field is the moment's dialogue as compact JSON
([{"speaker", "text"}, ...]) and `reasons` is a comma-separated list in rubric order.

The last two columns say what kind of pick a row is and what the reviewer wrote: `kind` is
"preference" (chosen was better), "tie" (as good as each other) or "both_bad" (neither would
do), and `note` is the reviewer's own words. For a tie or both bad, chosen and rejected are
replies A and B as they were shown. Files frozen before picks had a kind (format 1) lack both
columns; they read as preferences with no note, their bytes and sha256 untouched.

Who reads a tie or both bad: nobody trains on them yet. DPO's loss and the Bradley-Terry
reward model's both need a chosen and a rejected reply, so a wording spec leaves them out and
counts them (training.wording); the judge's fit leaves them out too (arena.judge.fit_rows), and so
does TRL's JSONL export, whose format has no tie. The TSV and the spreadsheet CSV keep them.

    from arena.preference_format import read_pairs
    for pair in read_pairs("var/datasets/ws_demo/preferences/v3.tsv"):
        pair.dialogue, pair.chosen, pair.rejected, pair.reasons
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

FORMAT = "levers9-preferences/2"
FORMAT_V1 = "levers9-preferences/1"

# Format 1's columns: every pick a preference, no note. Still read, never written.
COLUMNS_V1: tuple[str, ...] = (
    "pick_id",
    "pack",
    "moment_id",
    "moment_kind",
    "moment_at",
    "dialogue",
    "chosen",
    "rejected",
    "chosen_source",
    "rejected_source",
    "chosen_move",
    "rejected_move",
    "reasons",
    "reviewer",
    "picked_at",
)
COLUMNS: tuple[str, ...] = (*COLUMNS_V1, "kind", "note")

# What a pick may be (arena.models.Pick.Kind, kept here as plain text for the trainers).
PREFERENCE = "preference"
TIE = "tie"
BOTH_BAD = "both_bad"
KINDS: tuple[str, ...] = (PREFERENCE, TIE, BOTH_BAD)

_ESCAPED = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r", "b": "\b", "f": "\f", "v": "\v"}
_ESCAPES = str.maketrans({char: "\\" + code for code, char in _ESCAPED.items()})
_NEEDS_ESCAPE = re.compile("[\\\\\t\n\r\b\f\v]")
_UNESCAPE = re.compile(r"\\(.)")


def escape(value: str) -> str:
    """One field as PostgreSQL's COPY text format writes it."""
    if _NEEDS_ESCAPE.search(value):
        return value.translate(_ESCAPES)
    return value


def unescape(value: str) -> str:
    if "\\" not in value:
        return value
    return _UNESCAPE.sub(lambda match: _ESCAPED.get(match.group(1), match.group(1)), value)


def dialogue_json(dialogue: Iterable[dict[str, str]]) -> str:
    """The canonical JSON of a dialogue: the same turns always give the same text."""
    return json.dumps(
        [{"speaker": turn["speaker"], "text": turn["text"]} for turn in dialogue],
        ensure_ascii=False,
        separators=(",", ":"),
    )


def header_line(columns: tuple[str, ...] = COLUMNS) -> str:
    return "\t".join(columns) + "\n"


@dataclass(frozen=True)
class PreferenceRow:
    """One pick as frozen."""

    pick_id: int
    pack: str
    moment_id: int
    moment_kind: str
    moment_at: str
    dialogue: list[dict[str, str]]
    chosen: str
    rejected: str
    chosen_source: str
    rejected_source: str
    chosen_move: str
    rejected_move: str
    reasons: tuple[str, ...]
    reviewer: str
    picked_at: str
    kind: str = PREFERENCE
    note: str = ""


@dataclass(frozen=True)
class PreferencePair:
    """What preference training reads: the prompt (dialogue so far) and the two replies."""

    dialogue: list[dict[str, str]]
    chosen: str
    rejected: str
    reasons: tuple[str, ...]
    pack: str
    # Which moment the pick was made at: picks on one dialogue are held out together.
    moment_id: int = 0
    # "preference", "tie" or "both_bad": only a preference says which reply was better.
    kind: str = PREFERENCE


class PreferenceFileError(ValueError):
    """The file is not a preference version, or not the one its manifest describes."""


def parse_row(
    line: str, *, line_number: int = 0, columns: tuple[str, ...] = COLUMNS
) -> PreferenceRow:
    """One row of a file with these columns (COLUMNS, or COLUMNS_V1 for a format 1 file)."""
    fields = line.rstrip("\n").split("\t")
    if len(fields) != len(columns):
        raise PreferenceFileError(
            f"line {line_number}: {len(fields)} fields, expected {len(columns)}"
        )
    values = dict(zip(columns, (unescape(field) for field in fields), strict=True))
    kind = values.get("kind", PREFERENCE)
    if kind not in KINDS:
        raise PreferenceFileError(
            f"line {line_number}: kind {kind!r} is not one of {', '.join(KINDS)}"
        )
    return PreferenceRow(
        pick_id=int(values["pick_id"]),
        pack=values["pack"],
        moment_id=int(values["moment_id"]),
        moment_kind=values["moment_kind"],
        moment_at=values["moment_at"],
        dialogue=json.loads(values["dialogue"]),
        chosen=values["chosen"],
        rejected=values["rejected"],
        chosen_source=values["chosen_source"],
        rejected_source=values["rejected_source"],
        chosen_move=values["chosen_move"],
        rejected_move=values["rejected_move"],
        reasons=tuple(reason for reason in values["reasons"].split(",") if reason),
        reviewer=values["reviewer"],
        picked_at=values["picked_at"],
        kind=kind,
        note=values.get("note", ""),
    )


def file_sha256(path: Path | str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# The headers a file may start with, and the columns each means.
_HEADERS: dict[str, tuple[str, ...]] = {
    header_line(COLUMNS): COLUMNS,
    header_line(COLUMNS_V1): COLUMNS_V1,
}


def read_rows(path: Path | str, *, sha256: str | None = None) -> Iterator[PreferenceRow]:
    """Stream the rows of a preference TSV; with `sha256`, refuse a file that changed."""
    path = Path(path)
    if sha256 is not None and file_sha256(path) != sha256:
        raise PreferenceFileError(f"{path} does not match its sha256 {sha256}: it was changed.")
    # newline="\n": a row ends only at "\n" (an escaped "\r" never splits a row).
    with open(path, encoding="utf-8", newline="\n") as handle:
        header = handle.readline()
        columns = _HEADERS.get(header)
        if columns is None:
            raise PreferenceFileError(f"{path} does not start with the {FORMAT} header.")
        for number, line in enumerate(handle, start=2):
            yield parse_row(line, line_number=number, columns=columns)


def read_pairs(path: Path | str, *, sha256: str | None = None) -> Iterator[PreferencePair]:
    """The pairs of a preference version, for training: (dialogue, chosen, rejected, reasons)."""
    for row in read_rows(path, sha256=sha256):
        yield PreferencePair(
            dialogue=row.dialogue,
            chosen=row.chosen,
            rejected=row.rejected,
            reasons=row.reasons,
            pack=row.pack,
            moment_id=row.moment_id,
            kind=row.kind,
        )


def manifest_text(
    *,
    number: int,
    file_name: str,
    count: int,
    sha256: str,
    extends: int | None,
    picks_added: int,
    columns: tuple[str, ...] = COLUMNS,
) -> str:
    """The manifest JSON. No clock time in it: the same picks give the same bytes."""
    manifest = {
        "format": FORMAT if columns == COLUMNS else FORMAT_V1,
        "version": number,
        "file": file_name,
        "count": count,
        "sha256": sha256,
        "extends": extends,
        "picks_added": picks_added,
        "columns": list(columns),
    }
    return json.dumps(manifest, indent=2, sort_keys=True) + "\n"


# A spreadsheet reads a cell that starts with one of these as a formula ("CSV injection"):
# a reviewer's name or a reply could then open a link or run a command on the reader's machine.
# The full-width signs (＝ ＋ － ＠) count too: Excel with an East Asian input reads them as
# the ASCII ones.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def spreadsheet_cell(value: str) -> str:
    """A field as a spreadsheet shows it and never evaluates: a leading apostrophe, which
    spreadsheets hide, before any text that would start a formula."""
    return "'" + value if value.startswith(_FORMULA_STARTS) else value


def spreadsheet_lines(path: Path | str, *, sha256: str | None = None) -> Iterator[str]:
    """A frozen version as CSV for a spreadsheet: the same columns and rows as the TSV,
    unescaped, with every cell made inert (spreadsheet_cell). For people to read; training
    and every tool read the exact TSV, whose bytes the sha256 vouches for."""
    path = Path(path)
    # Checked before the first line, not when a download has half gone out.
    if sha256 is not None and file_sha256(path) != sha256:
        raise PreferenceFileError(f"{path} does not match its sha256 {sha256}: it was changed.")
    return _csv_lines(path)


def _csv_lines(path: Path) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    with open(path, encoding="utf-8", newline="\n") as handle:
        for line in handle:
            fields = [spreadsheet_cell(unescape(field)) for field in line.rstrip("\n").split("\t")]
            writer.writerow(fields)
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()


def trl_lines(
    rows: Iterable[PreferenceRow], *, imported_ids: Mapping[int, str] | None = None
) -> Iterator[str]:
    """A frozen version in TRL's conversational preference format, one JSON object a line
    (what `datasets.load_dataset("json", data_files=...)` reads): the customer is the user,
    the agent the assistant; the import reads the same format back.

    `imported_ids` maps a pick to the `id` its pair had when it was imported: exported with
    that id, the file joins back to its source and importing it again changes nothing. Other
    picks are named by their own pick id.

    Ties and both-bad picks are left out: the format has a chosen and a rejected reply and
    nothing that says neither won, so TRL's trainers would read A as the better one."""
    imported_ids = imported_ids or {}
    for row in rows:
        if row.kind != PREFERENCE:
            continue
        prompt = [
            {"role": "assistant" if turn["speaker"] == "agent" else "user", "content": turn["text"]}
            for turn in row.dialogue
        ]
        yield json.dumps(
            {
                "id": imported_ids.get(row.pick_id) or str(row.pick_id),
                "prompt": prompt,
                "chosen": [{"role": "assistant", "content": row.chosen}],
                "rejected": [{"role": "assistant", "content": row.rejected}],
                "reasons": list(row.reasons),
                "reviewer": row.reviewer,
                "pack": row.pack,
                "moment_id": row.moment_id,
            },
            ensure_ascii=False,
        )

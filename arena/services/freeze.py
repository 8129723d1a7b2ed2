"""Freezing a world's picks into its next numbered preference version: the version's row and
its TSV and manifest, streamed from PostgreSQL's COPY and written atomically. A world's
versions hold its own picks only, so training in one world never reads another's."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, Max, OuterRef
from django.utils import timezone

from arena import preference_format
from arena.errors import EmptyFreeze
from arena.judge.fit_job import judge_fit_soon
from arena.models import Call, DuelPair, Moment, Pick, PreferenceVersion, Reply, Scenario, World
from arena.selectors import preference_number_next, preferences_dir

# The rows of a version, as PostgreSQL's COPY writes them: its text format is exactly the
# TSV's escaping (see arena.preference_format), and COPY streams a million joined rows in a
# few seconds where building them in Python would take minutes. Every column is text and
# never NULL, and the timestamp is formatted in UTC, so the bytes depend on the picks only.
# Reasons are rubric names (checked when the pick is made): their JSON list, stripped of
# brackets, quotes and spaces, is the comma-separated list (twice as fast as unnesting it).
_VERSION_ROWS_SQL = """
COPY (
    SELECT pick.id,
           world.slug,
           pair.moment_id,
           moment.kind,
           CASE WHEN moment.kind = 'real'
                THEN 'call ' || coalesce(call.external_id, '') || ' turn '
                     || coalesce(moment.turn_index::text, '')
                ELSE 'scenario ' || coalesce(scenario.slug, '') || ' state '
                     || coalesce(moment.simulator_state::text, '')
           END,
           pair.dialogue,
           chosen.text,
           rejected.text,
           pick.chosen_source,
           pick.rejected_source,
           chosen.move,
           rejected.move,
           translate(pick.reasons::text, '[]" ', ''),
           pick.reviewer_name,
           to_char(pick.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
           {kind_and_note}
    FROM {pick} AS pick
    JOIN {world} AS world ON world.id = pick.world_id
    JOIN {pair} AS pair ON pair.id = pick.pair_id
    JOIN {moment} AS moment ON moment.id = pair.moment_id
    LEFT JOIN {call} AS call ON call.id = moment.call_id
    LEFT JOIN {scenario} AS scenario ON scenario.id = pair.scenario_id
    JOIN {reply} AS chosen ON chosen.id = pick.chosen_reply_id
    JOIN {reply} AS rejected ON rejected.id = pick.rejected_reply_id
    WHERE pick.id <= {last_pick_id} AND pick.world_id = {world_id}
    ORDER BY pick.id
) TO STDOUT
"""

# A pick's kind (preference, tie, both bad) and the reviewer's note: the last two columns of
# the current format (arena.preference_format.COLUMNS).
_KIND_AND_NOTE_SQL = ", pick.kind, pick.note"

COPY_BUFFER_BYTES = 1 << 20


def _picks_have_kinds() -> bool:
    """Whether the picks table has its kind and note yet. Migration 0012 writes versions with
    preference_files_write before migration 0013 adds them: those files are written in format
    1 (every pick a preference), which every reader still reads."""
    with connection.cursor() as cursor:
        columns = connection.introspection.get_table_description(cursor, Pick._meta.db_table)
    return any(column.name == "kind" for column in columns)


@dataclass(frozen=True)
class WrittenVersion:
    path: Path
    manifest_path: Path
    count: int
    sha256: str
    size_bytes: int


def _write_atomically(target: Path, chunks: Iterable[bytes]) -> tuple[str, int]:
    """Write to a temporary file beside `target`, then rename: a reader never sees half a
    version. Returns (sha256, size). The file is left read-only: a version never changes."""
    digest = hashlib.sha256()
    size = 0
    handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 - renamed into place below
        dir=target.parent, prefix=f".{target.name}.", suffix=".tmp", delete=False
    )
    try:
        with handle:
            for chunk in chunks:
                digest.update(chunk)
                size += len(chunk)
                handle.write(chunk)
        os.chmod(handle.name, 0o444)
        os.replace(handle.name, target)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise
    return digest.hexdigest(), size


def _copy_rows(cursor, statement: str) -> Iterable[bytes]:
    with cursor.copy(statement) as copy:
        yield from copy


def preference_version_write(
    *, version: PreferenceVersion, directory: Path | None = None
) -> WrittenVersion:
    """Write a world's version N: its TSV (every pick of the world up to its last_pick_id, by
    pick id) and manifest, in the world's folder."""
    return preference_files_write(
        number=version.number,
        world_id=version.world_id,
        last_pick_id=version.last_pick_id,
        extends=version.extends.number if version.extends_id else None,
        previous_count=version.extends.row_count if version.extends_id else 0,
        directory=directory or preferences_dir(version.world),
    )


def preference_files_write(
    *,
    number: int,
    world_id: int,
    last_pick_id: int,
    extends: int | None,
    previous_count: int,
    directory: Path,
) -> WrittenVersion:
    """The files of a world's version from plain values (the freeze's, and the migration that
    split the mixed versions into each world's own).

    The rows stream from PostgreSQL's COPY straight to the file, block by block, so memory
    stays flat however many picks there are. The bytes depend only on the picks: writing
    the same version twice gives the same file.
    """
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"v{number}.tsv"
    with_kinds = _picks_have_kinds()
    columns = preference_format.COLUMNS if with_kinds else preference_format.COLUMNS_V1
    statement = _VERSION_ROWS_SQL.format(
        last_pick_id=int(last_pick_id),
        world_id=int(world_id),
        kind_and_note=_KIND_AND_NOTE_SQL if with_kinds else "",
        **{
            name: model._meta.db_table
            for name, model in {
                "pick": Pick,
                "world": World,
                "pair": DuelPair,
                "moment": Moment,
                "call": Call,
                "scenario": Scenario,
                "reply": Reply,
            }.items()
        },
    )
    count = 0

    def chunks() -> Iterable[bytes]:
        nonlocal count
        yield preference_format.header_line(columns).encode()
        # COPY hands over one row at a time: gather about a megabyte before hashing and
        # writing, which costs far less per row than doing both a million times.
        buffer: list[bytes] = []
        size = 0
        with connection.cursor() as cursor:
            # A bulk export of whole tables: hash joins, whatever the planner's statistics say.
            # Right after a bulk load (an import, many picks) it may still think the tables
            # empty and pick nested loops over sequential scans, which took minutes on a few
            # hundred picks beside a table full of dead rows. Only this transaction is changed.
            if connection.in_atomic_block:
                cursor.execute("SET LOCAL enable_nestloop = off")
            rows = _copy_rows(cursor, statement)
            for row in rows:
                buffer.append(bytes(row))
                size += len(row)
                if size >= COPY_BUFFER_BYTES:
                    chunk = b"".join(buffer)
                    count += chunk.count(b"\n")  # escaped fields hold no raw newline
                    yield chunk
                    buffer.clear()
                    size = 0
            if connection.in_atomic_block:
                cursor.execute("RESET enable_nestloop")
        chunk = b"".join(buffer)
        count += chunk.count(b"\n")
        yield chunk

    sha256, size = _write_atomically(target, chunks())
    manifest = preference_format.manifest_text(
        number=number,
        file_name=target.name,
        count=count,
        sha256=sha256,
        extends=extends,
        picks_added=count - previous_count,
        columns=columns,
    )
    manifest_path = directory / f"v{number}.manifest.json"
    _write_atomically(manifest_path, [manifest.encode()])
    return WrittenVersion(target, manifest_path, count, sha256, size)


def preference_freeze(
    *, world: World, by=None, up_to_pick_id: int | None = None
) -> PreferenceVersion:
    """Freeze `world`'s picks not frozen yet (all, or those up to `up_to_pick_id`) into its
    next numbered preference version: v<N>.tsv and its manifest in the world's folder on the
    datasets volume. The version extends the world's one before and holds its picks too; no
    other world's pick is in it.

    Refused with EmptyFreeze when no new pick of the world would be frozen. Pairs still
    waiting for another pick when their picks are frozen leave the queue and take no more
    picks (unless a reviewer holds one right now: they may finish it, and the next freeze
    closes it).
    """
    with transaction.atomic():
        with connection.cursor() as cursor:
            # SHARE ROW EXCLUSIVE waits for picks being saved right now and holds new ones
            # back until this transaction ends: every pick at or below the watermark is then
            # committed, none can appear below it later, and two freezes never overlap.
            cursor.execute(f"LOCK TABLE {Pick._meta.db_table} IN SHARE ROW EXCLUSIVE MODE")
        previous = PreferenceVersion.objects.filter(world=world).order_by("-number").first()
        floor = previous.last_pick_id if previous else 0
        picks = Pick.objects.filter(world=world)
        newest = picks.aggregate(newest=Max("id"))["newest"] or 0
        last = min(newest, int(up_to_pick_id)) if up_to_pick_id is not None else newest
        added = picks.filter(id__gt=floor, id__lte=last).count()
        if not added:
            raise EmptyFreeze(
                f"There are no new picks in {world.name} to freeze"
                + (f": every pick is already in v{previous.number}." if previous else " yet.")
                + " Pick in the Duel first."
            )
        version = PreferenceVersion.objects.create(
            world=world,
            number=preference_number_next(world),
            extends=previous,
            last_pick_id=last,
            picks_added=added,
            row_count=(previous.row_count if previous else 0) + added,
            created_by=by if by is not None and by.pk else None,
            created_by_name=by.get_username() if by is not None else "",
        )
        # A pair still waiting for another opinion whose picks are now frozen takes no more.
        # One a reviewer is looking at right now is left to them; a later freeze closes it.
        frozen_picks = Pick.objects.filter(pair=OuterRef("pk"), id__lte=last)
        DuelPair.objects.filter(world=world, is_open=True).exclude(
            reserved_until__gt=timezone.now()
        ).filter(Exists(frozen_picks)).update(
            frozen_in=version, is_open=False, reserved_by=None, reserved_until=None
        )
        written = preference_version_write(version=version)
        if written.count != version.row_count:
            raise RuntimeError(
                f"v{version.number} wrote {written.count} rows, expected {version.row_count}"
            )
        version.sha256 = written.sha256
        version.size_bytes = written.size_bytes
        version.file_path = str(written.path.relative_to(Path(settings.DATASETS_DIR)))
        version.save(update_fields=["sha256", "size_bytes", "file_path"])
        # The world's judge refits once this commits.
        judge_fit_soon(world_ids={world.pk}, started_by=by if by is not None and by.pk else None)
    return version

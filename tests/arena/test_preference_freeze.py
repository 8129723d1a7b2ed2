"""Freeze: numbered preference versions that never change, read back exactly, and stream."""

from __future__ import annotations

import json
import os

import pytest
from django.core.management import CommandError, call_command
from django.db import transaction
from django_tenants.utils import schema_context

from arena import preference_format
from arena.errors import EmptyFreeze
from arena.models import DuelPair, Pick, PreferenceVersion, Reply, World
from arena.selectors import preference_pairs, preference_version_path, preference_version_read
from arena.services.freeze import preference_freeze, preference_version_write
from arena.services.pairs import duel_pairs_generate
from arena.services.queue import duel_next, pick_submit

AWKWARD = (
    "Line one\twith a tab\nline two\\with a backslash\r\nand a CRLF — café ☕ "
    "\b\f\v control characters and a literal \\t"
)


@pytest.fixture
def datasets(settings, tmp_path):
    settings.DATASETS_DIR = tmp_path
    return tmp_path


@pytest.fixture
def lettings(in_workspace, datasets):
    world = World.objects.get(slug="lettings")
    duel_pairs_generate(world=world, count=8)
    return world


def _pick(world, reviewer, side="A", reasons=("respect",)):
    pair = duel_next(world=world, reviewer=reviewer, generate=False)
    return pick_submit(pair_id=pair.pk, reviewer=reviewer, chosen=side, reasons=list(reasons))


def test_it_freezes_picks_into_a_numbered_tsv_with_a_manifest(lettings, rita, datasets):
    picks = [_pick(lettings, rita, side) for side in "ABA"]
    version = preference_freeze(world=lettings, by=rita)
    assert (version.number, version.row_count, version.picks_added) == (1, 3, 3)
    path = preference_version_path(version)
    assert path == datasets / "ws_acme" / "preferences" / "lettings" / "v1.tsv"
    assert preference_format.file_sha256(path) == version.sha256
    manifest = json.loads(path.with_name("v1.manifest.json").read_text())
    assert manifest["count"] == 3
    assert manifest["sha256"] == version.sha256
    assert manifest["extends"] is None
    assert manifest["picks_added"] == 3
    rows = list(preference_version_read(version=version))
    assert [row.pick_id for row in rows] == [pick.pk for pick in picks]
    assert rows[0].reviewer == "rita@acme.test"
    assert rows[0].reasons == ("respect",)
    assert rows[0].chosen == Reply.objects.get(pk=picks[0].chosen_reply_id).text
    assert rows[0].moment_at.startswith("scenario ")
    assert not os.access(path, os.W_OK) or os.geteuid() == 0  # written read-only
    assert version.last_pick_id == picks[-1].pk
    assert not DuelPair.objects.filter(picks__isnull=False, is_open=True).exists()


def test_it_extends_the_previous_version(lettings, rita):
    _pick(lettings, rita)
    first = preference_freeze(world=lettings, by=rita)
    _pick(lettings, rita)
    _pick(lettings, rita)
    second = preference_freeze(world=lettings, by=rita)
    assert (second.number, second.extends_id, second.row_count, second.picks_added) == (
        2,
        first.pk,
        3,
        2,
    )
    manifest = json.loads(preference_version_path(second).with_name("v2.manifest.json").read_text())
    assert (manifest["extends"], manifest["picks_added"], manifest["count"]) == (1, 2, 3)
    # v1 did not change.
    assert preference_format.file_sha256(preference_version_path(first)) == first.sha256


def test_it_refuses_an_empty_freeze_and_keeps_what_was_frozen(lettings, rita):
    with pytest.raises(EmptyFreeze, match="no new picks in Lettings to freeze yet"):
        preference_freeze(world=lettings, by=rita)
    _pick(lettings, rita)
    version = preference_freeze(world=lettings, by=rita)
    with pytest.raises(EmptyFreeze, match="already in v1"):
        preference_freeze(world=lettings, by=rita)
    assert list(PreferenceVersion.objects.values_list("number", flat=True)) == [1]
    assert preference_format.file_sha256(preference_version_path(version)) == version.sha256


def test_it_gives_byte_identical_files_for_the_same_picks(lettings, rita, tmp_path):
    for side in "ABBA":
        _pick(lettings, rita, side, reasons=("dialect", "progress"))
    # Freeze, keep the bytes, undo, freeze the same picks again.
    with transaction.atomic():
        sid = transaction.savepoint()
        first = preference_freeze(world=lettings, by=rita)
        first_bytes = preference_version_path(first).read_bytes()
        first_manifest = preference_version_path(first).with_name("v1.manifest.json").read_bytes()
        transaction.savepoint_rollback(sid)
    again = preference_freeze(world=lettings, by=rita)
    assert preference_version_path(again).read_bytes() == first_bytes
    assert again.sha256 == first.sha256
    assert preference_version_path(again).with_name("v1.manifest.json").read_bytes() == (
        first_manifest
    )
    # Writing the version anywhere else gives the same bytes too.
    elsewhere = preference_version_write(version=again, directory=tmp_path / "copy")
    assert elsewhere.path.read_bytes() == first_bytes


def test_it_round_trips_tabs_newlines_and_backslashes(lettings, rita):
    pair = duel_next(world=lettings, reviewer=rita, generate=False)
    Reply.objects.filter(pk=pair.reply_a_id).update(text=AWKWARD)
    dialogue = [{"speaker": "customer", "text": "Hi\tthere\nfriend \\o/"}]
    DuelPair.objects.filter(pk=pair.pk).update(dialogue=preference_format.dialogue_json(dialogue))
    pick_submit(pair_id=pair.pk, reviewer=rita, chosen="A", reasons=["respect", "family"])
    version = preference_freeze(world=lettings, by=rita)
    raw = preference_version_path(version).read_text(encoding="utf-8")
    assert len(raw.split("\n")) == 3  # header, one row, the final newline
    # PostgreSQL's COPY escaped the field exactly as the format module does.
    assert raw.split("\n")[1].split("\t")[6] == preference_format.escape(AWKWARD)
    (pair_read,) = list(preference_pairs(version=version))
    assert pair_read.chosen == AWKWARD
    assert pair_read.dialogue == dialogue
    assert pair_read.reasons == ("respect", "family")
    assert pair_read.rejected == Reply.objects.get(pk=pair.reply_b_id).text


def test_it_refuses_to_read_a_version_whose_file_changed(lettings, rita):
    _pick(lettings, rita)
    version = preference_freeze(world=lettings, by=rita)
    path = preference_version_path(version)
    path.chmod(0o644)
    path.write_text(path.read_text() + "tampered\n")
    with pytest.raises(preference_format.PreferenceFileError, match="was changed"):
        list(preference_version_read(version=version))


def test_it_escapes_and_unescapes_every_special_character():
    for text in [AWKWARD, "", "\\", "\\t literally", "\t\n\r\\", "plain"]:
        escaped = preference_format.escape(text)
        assert "\t" not in escaped
        assert "\n" not in escaped
        assert "\r" not in escaped
        assert preference_format.unescape(escaped) == text


def test_it_writes_every_pick_once_in_pick_order(lettings, rita):
    for _ in range(5):
        _pick(lettings, rita)
    version = preference_freeze(world=lettings, by=rita)
    assert [row.pick_id for row in preference_version_read(version=version)] == sorted(
        Pick.objects.values_list("pk", flat=True)
    )


def test_it_freezes_from_the_command_line(workspace, datasets, rita):
    with schema_context(workspace.schema_name):
        world = World.objects.get(slug="lettings")
        duel_pairs_generate(world=world, count=3)
        _pick(world, rita)
    call_command(
        "freeze_preferences", "--workspace", "acme", "--pack", "lettings", "--by", "rita@acme.test"
    )
    with schema_context(workspace.schema_name):
        version = PreferenceVersion.objects.get()
        assert (version.row_count, version.created_by_name) == (1, "rita@acme.test")
    with pytest.raises(CommandError, match="no new picks"):
        call_command("freeze_preferences", "--workspace", "acme", "--pack", "lettings")
    with pytest.raises(CommandError, match="No world 'nowhere'"):
        call_command("freeze_preferences", "--workspace", "acme", "--pack", "nowhere")
    with pytest.raises(CommandError, match="No workspace"):
        call_command("freeze_preferences", "--workspace", "nowhere", "--pack", "lettings")

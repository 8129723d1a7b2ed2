"""Ties, both-bad picks and notes (issue 40, point 10): recorded as such, frozen as such (the
TSV's `kind` and `note` columns, old files still read as preferences), and left out where a
loss needs a chosen and a rejected reply: a wording spec (counted), the judge's fit, TRL's
export and the reviewers' agreement."""

from __future__ import annotations

import csv
import io
import json

import pytest

from arena import preference_format
from arena.errors import DuelBadInput
from arena.judge.fit_rows import judge_fit_rows
from arena.models import DuelPair, Pick
from arena.selectors import preference_version_path, preference_version_read, reviewer_agreement
from arena.services.freeze import preference_freeze
from arena.services.queue import duel_next, pick_submit
from policies.models import PolicyVersion
from tests.conftest import client_for
from tests.training.wording_choices import dpo_choice
from training.wording import _skipped_said, wording_spec_build

NOTE = "Both fine;\tA is\nwarmer"


@pytest.fixture
def datasets(settings, tmp_path):
    settings.DATASETS_DIR = tmp_path
    return tmp_path


def _pick(world, reviewer, **verdict) -> Pick:
    pair = duel_next(world=world, reviewer=reviewer, generate=False)
    return pick_submit(pair_id=pair.pk, reviewer=reviewer, **verdict)


@pytest.fixture
def mixed_picks(lettings, rita) -> list[Pick]:
    """Lettings with three preferences, a tie with a note and a both-bad pick."""
    return [
        _pick(lettings, rita, chosen="A", reasons=["respect"]),
        _pick(lettings, rita, kind="tie", note=f"  {NOTE}  ", reasons=["timing"]),
        _pick(lettings, rita, chosen="B"),
        _pick(lettings, rita, kind="both_bad"),
        _pick(lettings, rita, chosen="A", note="A says the price"),
    ]


def test_it_records_a_tie_and_both_bad_with_a_note(mixed_picks):
    tie, both_bad = mixed_picks[1], mixed_picks[3]
    assert (tie.kind, tie.note, tie.reasons) == ("tie", NOTE, ["timing"])
    # No side: chosen and rejected are A and B as shown.
    assert (tie.chosen_side, tie.chosen_reply_id, tie.rejected_reply_id) == (
        "A",
        tie.pair.reply_a_id,
        tie.pair.reply_b_id,
    )
    assert (both_bad.kind, both_bad.note) == ("both_bad", "")
    assert DuelPair.objects.get(pk=tie.pair_id).pick_count == 1
    assert mixed_picks[0].kind == "preference"


def test_it_refuses_an_unknown_kind_and_a_long_note_saving_nothing(lettings, rita):
    pair = duel_next(world=lettings, reviewer=rita)
    with pytest.raises(DuelBadInput, match="'kind' must be one of preference, tie, both_bad"):
        pick_submit(pair_id=pair.pk, reviewer=rita, kind="meh")
    with pytest.raises(DuelBadInput, match="'note' is 1001 characters.*at most 1000"):
        pick_submit(pair_id=pair.pk, reviewer=rita, chosen="A", note="x" * 1001)
    # A preference still needs its side.
    with pytest.raises(DuelBadInput, match="'chosen' must be 'A' or 'B'"):
        pick_submit(pair_id=pair.pk, reviewer=rita, note="no side")
    assert not Pick.objects.exists()
    assert pick_submit(pair_id=pair.pk, reviewer=rita, chosen="A", note="x" * 1000).note


def test_a_frozen_tie_is_a_tie_in_the_tsv_and_a_wording_spec_skips_it(mixed_picks, rita, datasets):
    lettings = mixed_picks[0].world
    version = preference_freeze(world=lettings, by=rita)
    path = preference_version_path(version)
    header = path.read_text().split("\n", 1)[0].split("\t")
    assert header[-2:] == ["kind", "note"]
    rows = list(preference_version_read(version=version))
    assert [(row.kind, row.note) for row in rows] == [
        ("preference", ""),
        ("tie", NOTE),
        ("preference", ""),
        ("both_bad", ""),
        ("preference", "A says the price"),
    ]
    manifest = json.loads(path.with_name(f"v{version.number}.manifest.json").read_text())
    assert manifest["format"] == "levers9-preferences/2"
    assert manifest["columns"][-2:] == ["kind", "note"]

    choice = dpo_choice(version)
    spec = wording_spec_build(choice, job_folder_hint="versions/x")
    preferences = [pick for pick in mixed_picks if pick.kind == "preference"]
    assert [pair["chosen"] for pair in spec["pairs"]] == [
        pick.chosen_reply.text for pick in preferences
    ]
    assert spec["skipped"] == {"tie": 1, "both_bad": 1}
    assert _skipped_said(spec) == " · skipped 1 tie, 1 both bad"


def test_a_format_1_file_reads_as_preferences_with_its_sha256(tmp_path):
    """A version frozen before picks had a kind: its bytes untouched, every row a preference."""
    row = [
        "7",
        "lettings",
        "3",
        "real",
        "call c turn 2",
        '[{"speaker":"customer","text":"Hi"}]',
        "Hello there",
        "Whatever",
        "v1 · baseline",
        "real agent",
        "greet",
        "greet",
        "respect,timing",
        "rita@acme.test",
        "2025-01-01T00:00:00.000000Z",
    ]
    path = tmp_path / "v1.tsv"
    path.write_text(
        preference_format.header_line(preference_format.COLUMNS_V1) + "\t".join(row) + "\n"
    )
    sha256 = preference_format.file_sha256(path)
    (read,) = preference_format.read_rows(path, sha256=sha256)
    assert (read.pick_id, read.kind, read.note, read.reasons) == (
        7,
        "preference",
        "",
        ("respect", "timing"),
    )
    (pair,) = preference_format.read_pairs(path, sha256=sha256)
    assert pair.kind == "preference"
    assert preference_format.file_sha256(path) == sha256


def test_the_judges_fit_leaves_ties_and_both_bad_out(mixed_picks, rita, datasets):
    preference_freeze(world=mixed_picks[0].world, by=rita)
    pairs = judge_fit_rows(mixed_picks[0].world)["pairs"]
    assert len(pairs) == 3


def test_a_tie_does_not_agree_with_a_preference_for_a(lettings, rita, rob):
    pair = duel_next(world=lettings, reviewer=rita)
    DuelPair.objects.filter(pk=pair.pk).update(picks_wanted=3)
    pick_submit(pair_id=pair.pk, reviewer=rita, kind="tie")
    assert duel_next(world=lettings, reviewer=rob).pk == pair.pk
    pick_submit(pair_id=pair.pk, reviewer=rob, chosen="A")
    assert reviewer_agreement(lettings) == {"compared": 1, "agreed": 0, "rate": 0.0}


def _body(response) -> str:
    if response.streaming:
        return b"".join(response.streaming_content).decode()
    return response.content.decode()


def test_the_exports_trl_skips_ties_and_the_spreadsheet_keeps_them(
    workspace, mixed_picks, rita, datasets
):
    preference_freeze(world=mixed_picks[0].world, by=rita)
    client = client_for(workspace, "rita@acme.test")
    trl = client.get("/api/rl/preferences/1/download/?part=jsonl&pack=lettings")
    assert trl.status_code == 200, trl.content
    lines = _body(trl).splitlines()
    preferences = [pick for pick in mixed_picks if pick.kind == "preference"]
    assert [json.loads(line)["id"] for line in lines] == [str(pick.pk) for pick in preferences]
    sheet = client.get("/api/rl/preferences/1/download/?part=spreadsheet&pack=lettings")
    rows = list(csv.DictReader(io.StringIO(_body(sheet))))
    assert [row["kind"] for row in rows] == ["preference", "tie", "preference", "both_bad"] + [
        "preference"
    ]
    assert rows[1]["note"] == NOTE


def test_the_leaderboard_counts_a_preference_between_versions_but_no_tie(lettings, rita, rob):
    from policies.leaderboard import leaderboard_games
    from policies.models import ReplyAuthor

    v1 = PolicyVersion.objects.get(world=lettings, number=1)
    v2 = PolicyVersion.objects.create(world=lettings, number=2, name="twin")
    preference = _pick(lettings, rita, chosen="A")
    tie = _pick(lettings, rob, kind="tie")
    for pick in (preference, tie):
        ReplyAuthor.objects.update_or_create(reply=pick.chosen_reply, defaults={"version": v2})
        ReplyAuthor.objects.update_or_create(reply=pick.rejected_reply, defaults={"version": v1})
    assert leaderboard_games(world=lettings) == [(v2.label, v1.label)]


def test_the_admin_lists_and_filters_picks_by_kind(workspace, mixed_picks):
    client = client_for(workspace, "owner@acme.test")
    ties = client.get("/admin/arena/pick/", {"kind__exact": "tie"})
    assert ties.status_code == 200
    assert [pick.pk for pick in ties.context["cl"].result_list] == [mixed_picks[1].pk]
    assert "Both bad" in client.get("/admin/arena/pick/").content.decode()
    noted = client.get("/admin/arena/pick/", {"q": "warmer"})
    assert [pick.pk for pick in noted.context["cl"].result_list] == [mixed_picks[1].pk]

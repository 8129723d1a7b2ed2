"""A world's imported preference pairs keep a fixed set back for Evaluate, as its real calls do
(arena.held_out): chosen once it holds enough to spare them, by a hash of each pair's id, the
same ones whatever the import order, flagged on their moments; nothing that learns reads them —
the wording spec built from a frozen version (which still holds every pick); the judge's fit
rows in test_held_out_pairs_not_fitted."""

from __future__ import annotations

import pytest

from arena.held_out import HELD_OUT_PAIRS, held_out_pair_moment_ids, held_out_pairs_ensure
from arena.models import Moment, Pick
from arena.services.freeze import preference_freeze
from arena.services.preferences import preferences_import
from arena.services.worlds import world_create
from levers9.shipped_data import HH_RLHF_PAIRS
from policies.models import PolicyVersion
from tests.training.wording_choices import dpo_choice
from training.wording import _skipped_said, wording_spec_build

ENOUGH = 2 * HELD_OUT_PAIRS


def _lines(count: int) -> list[str]:
    return HH_RLHF_PAIRS.read_text().splitlines()[:count]


def _held_ids(world) -> set[str]:
    return set(
        Pick.objects.filter(world=world, pair__moment__held_out=True).values_list(
            "external_id", flat=True
        )
    )


@pytest.fixture
def datasets(settings, tmp_path):
    settings.DATASETS_DIR = tmp_path
    return tmp_path


@pytest.fixture
def pairs_world(in_workspace, datasets):
    world = world_create(slug="human-preferences", name="Human preference pairs")
    preferences_import(world=world, text="\n".join(_lines(ENOUGH)), source="hh-rlhf")
    return world


def test_it_holds_pairs_out_once_the_world_can_spare_them_and_keeps_them(in_workspace):
    world = world_create(slug="few-pairs", name="A few pairs")
    lines = _lines(ENOUGH + 40)
    preferences_import(world=world, text="\n".join(lines[: ENOUGH - 1]))
    assert held_out_pair_moment_ids(world=world) == set()  # too few to spare any

    preferences_import(world=world, text="\n".join(lines[:ENOUGH]))
    held = held_out_pair_moment_ids(world=world)
    assert len(held) == HELD_OUT_PAIRS
    assert set(Moment.objects.filter(pk__in=held).values_list("kind", flat=True)) == {
        Moment.Kind.IMPORTED
    }
    chosen = _held_ids(world)

    # More pairs arrive: the same pairs stay held out, none is added.
    preferences_import(world=world, text="\n".join(lines))
    assert held_out_pair_moment_ids(world=world) == held
    assert [pick.external_id for pick in held_out_pairs_ensure(world=world)] == [
        pick.external_id for pick in held_out_pairs_ensure(world=world)
    ]
    assert _held_ids(world) == chosen


def test_it_holds_out_the_same_pairs_whatever_the_import_order(pairs_world):
    other = world_create(slug="reversed", name="The same pairs, reversed")
    preferences_import(world=other, text="\n".join(reversed(_lines(ENOUGH))))
    assert _held_ids(other) == _held_ids(pairs_world)
    assert [pick.external_id for pick in held_out_pairs_ensure(world=other)] == [
        pick.external_id for pick in held_out_pairs_ensure(world=pairs_world)
    ]


def test_the_frozen_version_keeps_every_pick_and_the_wording_spec_learns_from_none_held_out(
    pairs_world, in_workspace
):
    version = preference_freeze(world=pairs_world)
    assert version.row_count == ENOUGH  # what the reviewers picked, held out or not
    choice = dpo_choice(version, parent=PolicyVersion.objects.get(world=pairs_world, number=1))
    spec = wording_spec_build(choice, job_folder_hint="versions/x")
    held = {f"moment-{moment}" for moment in held_out_pair_moment_ids(world=pairs_world)}
    assert len(spec["pairs"]) == ENOUGH - HELD_OUT_PAIRS
    assert not held & {pair["call_id"] for pair in spec["pairs"]}
    assert spec["skipped"]["held_out"] == HELD_OUT_PAIRS
    assert f"{HELD_OUT_PAIRS} held out" in _skipped_said(spec)

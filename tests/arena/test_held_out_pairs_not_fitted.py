"""The judge's fit reads none of the imported pairs a world holds out for Evaluate
(arena.held_out): a checkpoint in a world of pairs only is not scored by a judge that learned
from the pairs it replays."""

from __future__ import annotations

import pytest

from arena.held_out import HELD_OUT_PAIRS, held_out_pair_moment_ids
from arena.judge.fit_rows import judge_fit_rows
from arena.services.freeze import preference_freeze
from arena.services.preferences import preferences_import
from arena.services.worlds import world_create
from levers9.shipped_data import HH_RLHF_PAIRS

ENOUGH = 2 * HELD_OUT_PAIRS


@pytest.fixture
def pairs_world(in_workspace, settings, tmp_path):
    settings.DATASETS_DIR = tmp_path
    world = world_create(slug="human-preferences", name="Human preference pairs")
    lines = HH_RLHF_PAIRS.read_text().splitlines()[:ENOUGH]
    preferences_import(world=world, text="\n".join(lines), source="hh-rlhf")
    return world


def test_the_judge_fit_reads_no_held_out_pair(pairs_world):
    preference_freeze(world=pairs_world)
    held = held_out_pair_moment_ids(world=pairs_world)
    groups = {row["group"] for row in judge_fit_rows(pairs_world)["pairs"]}
    assert len(groups) == ENOUGH - HELD_OUT_PAIRS
    assert not groups & {f"moment:{moment}" for moment in held}

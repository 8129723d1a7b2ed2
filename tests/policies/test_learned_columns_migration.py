"""Migration policies 0010: a version's learned_from gets typed columns (its algorithm, a
wording version's preference version and base) copied from it, and every stored record of
each trainer family loads as its typed record afterwards, unchanged. No row is lost.

The rows are written as the finish wrote them before the records existed (each family's full
set of keys, and the partial ones older rows and hand-made versions have), with the models as
they were before the migration (tests.migration_state).

(The demo's worlds after `demo_setup` hold only their hand-written v1, the first row here;
running the whole demo set-up in a test costs minutes, so its versions are covered by it.)
"""

from __future__ import annotations

import pytest

from policies.models import PolicyVersion
from tests.migration_state import migrate_to, migrate_to_latest
from trainers.registry import DPO, OFFLINE_OUTCOME, PPO, Q_LEARNING_ONLINE, REWARD_MODEL, RLHF
from trainers.results import (
    DpoResult,
    MoveStrategyResult,
    NotTrained,
    OfflineMovesResult,
    RlhfResult,
)

RETURNS = {
    "slug": "greet",
    "optimal_return": 1.0,
    "learned_return": 0.9,
    "parent_return": 0.5,
    "fraction_of_optimum": 0.9,
    "gap_to_optimum": 0.1,
}
MOVES = {
    "job": 11,
    "kind": "train",
    "algorithm": Q_LEARNING_ONLINE,
    "knobs": {"episodes": 4000},
    "seed": 7,
    "max_turns": 12,
    "pack": "lettings",
    "scenarios": ["greet"],
    "returns": [RETURNS],
    "summary": {"mean_fraction_of_optimum": 0.9},
}
WORDING = {
    "job": 13,
    "kind": "train",
    "method": RLHF,
    "pack": "lettings",
    "preference_version": 3,
    "base": "SmolLM2-135M",
    "reward_source": "preferences",
    "pairs": {"total": 200, "train": 180, "held_out": 20},
    "held_out_accuracy": 0.62,
    "held_out_auc": 0.66,
    "merged_weights": "acme/v4/merged",
    "reward_adapter": "acme/v4/reward",
    "gpu": {"type": "cpu", "count": 1},
    "epochs": 1.0,
    "seed": 0,
    "outcome_examples": None,
    "metrics": {"reward_gain": 0.34, "reward_gain_ci": [0.1, 0.58]},
    "did_not_learn": [],
}
# (learned_from as stored, the record it loads as, the columns copied from it)
ROWS = [
    ({"kind": "hand-written"}, NotTrained, ("", None, "")),
    ({}, NotTrained, ("", None, "")),
    ({"pack": "lettings", "kind": "test"}, NotTrained, ("", None, "")),
    (MOVES, MoveStrategyResult, (Q_LEARNING_ONLINE, None, "")),
    (
        {**MOVES, "algorithm": PPO, "against_parent": None, "did_not_learn": []},
        MoveStrategyResult,
        (PPO, None, ""),
    ),
    ({**MOVES, "algorithm": REWARD_MODEL}, MoveStrategyResult, (REWARD_MODEL, None, "")),
    (
        {
            "job": 12,
            "kind": "engines",
            "algorithm": OFFLINE_OUTCOME,
            "learner": "naive-bayes",
            "pack": "market",
            "trained_on": {"calls": 80},
            "smoothing": 1.0,
            "seed": 0,
            "held_out_calls": 20,
            "interval": {"low": -0.1, "high": 0.3, "confidence": 0.95},
            "difference": 0.1,
            "trust": "weak",
            "offline_comparison": {"won_share": 0.5, "mean_agreement": 0.6, "confidence": 0.95},
            "against_parent": {"worse": False},
            "did_not_learn": [],
        },
        OfflineMovesResult,
        (OFFLINE_OUTCOME, None, ""),
    ),
    (
        {**WORDING, "algorithm": RLHF, "reward_model": {"held_out_auc": 0.66}},
        RlhfResult,
        (RLHF, 3, "SmolLM2-135M"),
    ),
    (
        {**WORDING, "algorithm": DPO, "method": DPO, "reward_source": None},
        DpoResult,
        (DPO, 3, "SmolLM2-135M"),
    ),
    # The oldest wording rows: a pair count, no AUC, no mark.
    ({"algorithm": DPO, "preference_version": 1, "pairs": 40}, DpoResult, (DPO, 1, "")),
]


@pytest.fixture
def before(in_workspace):
    apps = migrate_to([("policies", "0009_reply_authors")])
    World = apps.get_model("arena", "World")
    OldVersion = apps.get_model("policies", "PolicyVersion")
    lettings = World.objects.get(slug="lettings")
    start = OldVersion.objects.filter(world=lettings).order_by("-number").first().number
    return [
        OldVersion.objects.create(
            world=lettings, number=start + offset, name=f"row {offset}", learned_from=stored
        ).pk
        for offset, (stored, _, _) in enumerate(ROWS, start=1)
    ]


def test_it_copies_the_columns_and_every_family_loads_as_its_record(before):
    migrate_to_latest()
    for pk, (stored, record_class, columns) in zip(before, ROWS, strict=True):
        version = PolicyVersion.objects.get(pk=pk)
        assert version.learned_from == stored
        assert (version.algorithm, version.preference_version, version.base_model) == columns
        record = version.learned
        assert type(record) is record_class
        # Loaded and written back, the record is the stored dict, key for key.
        assert record.to_dict() == stored


def test_it_loads_every_version_of_the_workspace_after_the_migration(before):
    migrate_to_latest()
    versions = list(PolicyVersion.objects.all())
    assert len(versions) >= len(ROWS)
    for version in versions:
        assert version.learned.to_dict() == version.learned_from, version.label


def test_a_misspelt_key_fails_at_load_naming_it(before):
    migrate_to_latest()
    version = PolicyVersion.objects.get(pk=before[-1])
    version.learned_from = {**version.learned_from, "preferance_version": 2}
    from trainers.results import RecordError

    with pytest.raises(RecordError, match="'preferance_version'.*'preference_version'"):
        version.save()

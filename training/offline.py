"""The move-strategy card on a world with no simulator: learn off-line from the world's
labelled real calls and their outcomes
(trainers.moves.offline_outcome), then measure the strategy on
the held-out calls it never saw (trainers.moves.offline_comparison) when it becomes a version.

Held out by call: Call.held_out (arena.held_out) marks the calls Evaluate replays; the spec
this card packs never holds one, so the trainer process cannot learn from them. Calls with an
unknown outcome teach a won share nothing and are left out too.
"""

from __future__ import annotations

from typing import Any

from arena.models import Call, World
from arena.services.move_labels import calls_label_moves
from levers9.jobs.models import Job
from levers9.pools import pool_default
from policies.models import PolicyVersion
from trainers.moves.offline_comparison import comparison_trust, outcome_policy_comparison
from trainers.moves.offline_outcome import ALGORITHM, LEARNER
from training.runs import training_run_start

OFFLINE_ALGORITHM = ALGORITHM
OFFLINE_LEARNER = LEARNER


def _calls_as_moves(world: World, *, held_out: bool) -> list[dict[str, Any]]:
    """The world's won-or-lost calls (held out or not), each with its agent turns' moves in
    order (the labels as they stand: the labeller's, or a reviewer's)."""
    names = set(world.move_names)
    calls = (
        Call.objects.filter(world=world, held_out=held_out)
        .exclude(outcome=Call.Outcome.UNKNOWN)
        .order_by("external_id")
        .prefetch_related("turns")
    )
    return [
        {
            "id": call.external_id,
            "won": call.outcome == Call.Outcome.WON,
            "moves": [
                turn.move_label
                for turn in call.turns.all()
                if turn.speaker == "agent" and turn.move_label in names
            ],
        }
        for call in calls
    ]


def offline_training_calls(*, world: World) -> list[dict[str, Any]]:
    """What the learner may see: labelled calls that are not held out. A read."""
    return _calls_as_moves(world, held_out=False)


def offline_held_out_calls(*, world: World) -> list[dict[str, Any]]:
    """What the strategy is measured on, never trained on: the held-out calls. A read."""
    return _calls_as_moves(world, held_out=True)


def offline_spec(*, world: World, parent: PolicyVersion, seed: int = 0) -> dict[str, Any]:
    """The off-line learner's spec, shared by the Train card and the Engines step: the labels
    brought up to date with the reviewers' corrections, then the world's training calls."""
    calls_label_moves(world=world)
    return {
        "algorithm": OFFLINE_ALGORITHM,
        "moves": world.move_names,
        "calls": offline_training_calls(world=world),
        "seed": seed,
        "pack": world.slug,
        "parent_version": parent.number,
    }


def offline_calls_missing(*, world: World) -> str:
    """Why the off-line learner cannot run on `world` ("" when it can): it needs recorded
    calls that were won or lost, outside the held-out ones. A read."""
    learnable = (
        Call.objects.filter(world=world, held_out=False)
        .exclude(outcome=Call.Outcome.UNKNOWN)
        .exists()
    )
    if learnable:
        return ""
    return (
        f"{world.name} has no recorded calls with a won or lost outcome to learn from "
        "(held-out calls are kept for measuring); import calls with their outcomes."
    )


def train_move_strategy_offline(
    *, world: World, parent: PolicyVersion, seed: int = 0, started_by=None
) -> Job:
    """The "Move strategy" card where no simulator plays: the off-line learner on the world's
    training calls, ending in a version."""
    spec = offline_spec(world=world, parent=parent, seed=seed)
    return training_run_start(
        world=world,
        parent=parent,
        kind="train",
        trainer=OFFLINE_ALGORITHM,
        spec=spec,
        pool=pool_default(gpu=False),
        title=f"Move strategy (off-line, real calls) from {parent.label}",
        started_by=started_by,
        # Its parent is the run's (TrainingRun), shown here by the kind's about.
        finish_needs={"version": "move-strategy-offline"},
    )


def offline_comparison_report(
    *, world: World, strategy: dict[str, Any], seed: int = 0
) -> dict[str, Any]:
    """The strategy against the real agents' own moves on the world's held-out calls, with how
    far it can be trusted."""
    comparison = outcome_policy_comparison(strategy, offline_held_out_calls(world=world), seed=seed)
    return {**comparison, "trust": comparison_trust(comparison)}

"""The Train step's cards: each one packs a spec and starts a job that ends in a version."""

from __future__ import annotations

from typing import Any

from arena.models import World
from levers9.jobs.models import Job
from levers9.pools import pool_default
from policies.models import PolicyVersion
from trainers.moves.simulator import DEFAULT_MAX_TURNS
from trainers.moves.strategy import SCRIPTED
from trainers.registry import Q_LEARNING_ONLINE
from training.estimates import move_expected_seconds
from training.runs import training_run_start

MOVE_STRATEGY_ALGORITHM = Q_LEARNING_ONLINE


def world_scenarios_spec(world: World) -> list[dict[str, Any]]:
    """The world's scenarios as the simulator takes them (plain values)."""
    return [
        {
            "slug": scenario.slug,
            "name": scenario.name,
            "persona": scenario.persona_dict(),
            "seed": scenario.seed,
        }
        for scenario in world.scenarios.all()
    ]


def train_move_strategy(
    *, world: World, parent: PolicyVersion, seed: int = 0, started_by=None
) -> Job:
    """The "Move strategy" card: Q-learning on the simulator with default knobs, on the CPU;
    on a world with no simulator, the off-line learner over its labelled real calls. The
    parent must be one of `world`'s versions (VersionWorldMismatch names "parent")."""
    from policies.services import version_in_world_check

    version_in_world_check(version=parent, world=world, field="parent")
    scenarios = world_scenarios_spec(world)
    if not scenarios:
        from training.offline import train_move_strategy_offline

        return train_move_strategy_offline(
            world=world, parent=parent, seed=seed, started_by=started_by
        )
    spec = {
        "algorithm": MOVE_STRATEGY_ALGORITHM,
        "knobs": {},  # the card runs the defaults; the result records every knob it used
        "scenarios": scenarios,
        "max_turns": DEFAULT_MAX_TURNS,
        "seed": seed,
        "parent_strategy": parent.move_strategy or SCRIPTED,
        "pack": world.slug,
        "parent_version": parent.number,
    }
    pool = pool_default(gpu=False)
    return training_run_start(
        world=world,
        parent=parent,
        kind="train",
        trainer=MOVE_STRATEGY_ALGORITHM,
        spec=spec,
        pool=pool,
        title=f"Move strategy from {parent.label}",
        started_by=started_by,
        # Its parent is the run's (TrainingRun), shown here by the kind's about.
        finish_needs={"version": "move-strategy"},
        # Its time budget makes it short work: it starts at once beside long jobs.
        expected_seconds=move_expected_seconds(
            spec, trainer=MOVE_STRATEGY_ALGORITHM, pool_name=pool.name
        ),
    )

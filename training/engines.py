"""The Engines step: run a move learner with knobs as a job, measure it, promote it.

An Engines run ends in a measurement, never a version, until someone promotes it.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from arena.models import Call, World
from arena.services import calls_label_moves
from levers9.jobs.models import Job
from levers9.jobs.services import JobError, job_produced
from levers9.pools import pool_default
from policies.models import PolicyVersion
from trainers.moves.engines import ALGORITHMS, KnobError, validate_spec
from trainers.moves.offline_comparison import offline_agreement
from trainers.moves.simulator import DEFAULT_MAX_TURNS, MOVES
from trainers.moves.strategy import SCRIPTED
from training.cards import world_scenarios_spec
from training.finish import version_from_move_strategy
from training.models import TrainingRun
from training.runs import training_run_of, training_run_start

__all__ = [
    "KnobError",
    "calls_label_moves",
    "engines_comparison_world",
    "engines_outcome_examples",
    "engines_run_offline_comparison",
    "engines_run_promote",
    "engines_run_start",
]


def _calls_with_moves(world: World) -> list[dict[str, Any]]:
    calls = Call.objects.filter(world=world).exclude(outcome=Call.Outcome.UNKNOWN)
    return [
        {
            "id": call.external_id,
            "outcome": call.outcome,
            "turns": [
                {"speaker": t.speaker, "text": t.text, "move": t.move_label}
                for t in call.turns.all()
            ],
        }
        for call in calls.prefetch_related("turns")
    ]


def engines_outcome_examples(*, world: World) -> list[dict[str, Any]]:
    """Real calls as (move sequence, won) examples for the reward model over moves."""
    calls_label_moves(world=world)
    return [
        {
            "id": call["id"],
            "call_id": call["id"],
            "moves": [t["move"] for t in call["turns"] if t["speaker"] == "agent" and t["move"]],
            "won": call["outcome"] == "won",
        }
        for call in _calls_with_moves(world)
    ]


def engines_run_start(
    *,
    algorithm: str,
    knobs: dict[str, Any],
    world: World,
    parent: PolicyVersion,
    outcomes_world: World | None = None,
    started_by=None,
) -> Job:
    """Validate the knobs (a clear KnobError before anything runs), then start the job."""
    from policies.services import version_in_world_check

    # Learns in `world`: from one of its versions (VersionWorldMismatch names "parent").
    version_in_world_check(version=parent, world=world, field="parent")
    if algorithm not in ALGORITHMS:
        raise KnobError(
            f"unknown algorithm {algorithm!r}; choose one of {', '.join(ALGORITHMS)}",
            knob="algorithm",
        )
    spec: dict[str, Any] = {
        "algorithm": algorithm,
        "knobs": knobs,
        "scenarios": world_scenarios_spec(world),
        "max_turns": DEFAULT_MAX_TURNS,
        "parent_strategy": parent.move_strategy or SCRIPTED,
        "pack": world.slug,
    }
    if algorithm == "reward-model":
        source_world = outcomes_world or world
        examples = engines_outcome_examples(world=source_world)
        if not examples:
            raise KnobError(
                f"{source_world.name} has no real calls with outcomes to fit a reward on; "
                "import calls or choose a world that has them",
                knob="source",
            )
        spec.update({"source": "outcomes", "examples": examples})
    if not spec["scenarios"]:
        raise KnobError(f"{world.name} has no simulated scenarios to learn on", knob="pack")
    validate_spec(spec)
    return training_run_start(
        world=world,
        parent=parent,
        kind="engines",
        trainer=algorithm,
        spec=spec,
        pool=pool_default(gpu=False),
        title=f"Engines: {ALGORITHMS[algorithm].label}",
        started_by=started_by,
        finish_needs={"promote": "by hand"},
    )


def engines_comparison_world() -> World | None:
    """The first world with real calls labelled with the simulator's eight moves (the only
    calls a lettings move table can be compared on). A read."""
    worlds = World.objects.filter(calls__isnull=False).distinct().order_by("name")
    return next((world for world in worlds if set(world.move_names) == set(MOVES)), None)


def engines_run_offline_comparison(*, job: Job, world: World | None) -> dict[str, Any] | None:
    """How often the run's strategy picks the real agent's move on won against lost calls.
    Only on a world whose moves are the simulator's eight: a table of lettings moves says
    nothing about another business's moves (its own card learns off-line, training.offline)."""
    strategy = (job.result or {}).get("strategy")
    if not strategy or world is None or set(world.move_names) != set(MOVES):
        return None
    calls_label_moves(world=world)
    learned = offline_agreement(strategy, _calls_with_moves(world))
    parent_version = training_run_of(job).parent_version
    parent = offline_agreement(
        parent_version.move_strategy if parent_version else SCRIPTED,
        _calls_with_moves(world),
    )
    return {"world": world.name, "learned": learned, "parent": parent}


def engines_run_promote(*, job: Job, promoted_by=None) -> PolicyVersion:
    """Make a finished Engines run a version — once."""
    if job.kind != "engines" or job.state != Job.State.DONE:
        raise JobError("Only a finished Engines run can be promoted.")
    if not (job.result or {}).get("strategy"):
        raise JobError("This run learned no move strategy (a reward model without planning).")
    with transaction.atomic():
        locked = Job.objects.select_for_update().get(pk=job.pk)
        promoted = training_run_of(locked).produced_version
        if promoted is not None:
            raise JobError(f"This run was already promoted to {promoted.label}.")
        version = version_from_move_strategy(locked, locked.result, name="promoted")
        job_produced(locked, version)  # the checkpoint listens for it
        if promoted_by is not None:
            version.created_by = promoted_by
            version.save(update_fields=["created_by"])
        TrainingRun.objects.update_or_create(job=locked, defaults={"produced_version": version})
    return version

"""The Engines step: run a move learner with knobs as a job, measure it, promote it.

An Engines run ends in a measurement, never a version, until someone promotes it. Each run
belongs to one world (its TrainingRun's): it learns there, is listed there and is promoted to
a version there. A world with the simulator (scripted customers: lettings) runs the simulator's
learners; a world of recorded calls runs what its calls allow, the off-line learner
(training.offline), and says why the others cannot run. A run that did worse than its parent
becomes a version only when someone confirms it, and that version says it did not learn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from arena.models import Call, World
from arena.services.move_labels import calls_label_moves
from levers9.jobs.models import Job
from levers9.jobs.services import JobError, job_produced
from levers9.pools import pool_default
from policies.models import PolicyVersion
from trainers.moves.engines import ALGORITHMS, KnobError, knob_help, validate_spec
from trainers.moves.offline_comparison import offline_agreement, outcome_policy_comparison
from trainers.moves.simulator import DEFAULT_MAX_TURNS, MOVES
from trainers.moves.strategy import SCRIPTED
from trainers.registry import REWARD_MODEL, TRAINERS
from training.cards import world_scenarios_spec
from training.estimates import move_expected_seconds
from training.finish import version_from_move_strategy, version_from_offline_moves
from training.models import TrainingRun
from training.offline import (
    OFFLINE_ALGORITHM,
    OFFLINE_LEARNER,
    offline_calls_missing,
    offline_held_out_calls,
    offline_spec,
)
from training.runs import training_run_of, training_run_start

__all__ = [
    "KnobError",
    "PromoteNeedsConfirm",
    "calls_label_moves",
    "engines_knob_help",
    "engines_outcome_examples",
    "engines_routes",
    "engines_run_against_parent",
    "engines_run_held_out",
    "engines_run_offline_comparison",
    "engines_run_promote",
    "engines_run_start",
    "engines_runs_of",
]

OFFLINE_SEED_MAX = 2**32 - 1


class PromoteNeedsConfirm(JobError):
    """The run did worse than its parent: it is promoted only when `field` is sent true."""

    field = "confirm"


@dataclass(frozen=True)
class EnginesRoute:
    """One learner the Engines step offers, and whether it can run in a given world."""

    name: str
    label: str
    summary: str
    refused: str
    """Why it cannot run in the world, in one sentence; "" when it can."""


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


def _has_outcomes(world: World) -> bool:
    return Call.objects.filter(world=world).exclude(outcome=Call.Outcome.UNKNOWN).exists()


def engines_routes(*, world: World) -> list[EnginesRoute]:
    """Every learner the Engines step knows, each with why it cannot run in `world` ("" when
    it can). The simulator's learners need the simulator (its scripted customers); the
    reward model over moves reads the simulator's eight moves on the world's own won or lost
    calls; the off-line learner needs the world's own labelled calls. A read."""
    no_simulator = (
        f"{world.name} has no simulator: its customers are recorded calls, so no scripted "
        f"customer can play a learned move table here; choose {OFFLINE_ALGORITHM}, which "
        "learns from its labelled calls."
    )
    routes = []
    for engine in ALGORITHMS.values():
        refused = ""
        if engine.name == REWARD_MODEL:
            if set(world.move_names) != set(MOVES):
                refused = (
                    f"The reward model over moves reads the lettings moves; {world.name} "
                    f"has moves of its own, so choose {OFFLINE_ALGORITHM} instead."
                )
            elif not _has_outcomes(world):
                refused = (
                    f"{world.name} has no recorded calls with a won or lost outcome to fit a "
                    "reward on; import calls with their outcomes."
                )
        elif not world.has_simulator:
            refused = no_simulator
        routes.append(EnginesRoute(engine.name, engine.label, engine.summary, refused))
    routes.append(
        EnginesRoute(
            OFFLINE_ALGORITHM,
            TRAINERS[OFFLINE_ALGORITHM].engines_label,
            f"A move strategy learned from the world's own labelled calls and their outcomes "
            f"({OFFLINE_LEARNER}), measured on the held-out calls it never saw.",
            (
                f"{world.name} has the simulator: its move strategy is learned on simulated "
                "calls (Q-learning or PPO), where each move's worth is measured exactly."
            )
            if world.has_simulator
            else offline_calls_missing(world=world),
        )
    )
    # What runs here first, then what does not (with its reason).
    return sorted(routes, key=lambda route: bool(route.refused))


def engines_knob_help(algorithm: str) -> list[dict[str, Any]]:
    """The knobs the form shows for a route: the simulator learners' own rows, or the off-line
    learner's seed."""
    if algorithm == OFFLINE_ALGORITHM:
        return [
            {
                "name": "seed",
                "type": "int",
                "default": 0,
                "help": "Seed of the held-out measurement's bootstrap (the smoothing is "
                "chosen by cross-validation by call).",
                "min": 0,
                "max": OFFLINE_SEED_MAX,
            }
        ]
    return knob_help(algorithm)


def _offline_knobs(knobs: dict[str, Any]) -> int:
    """The off-line learner's only knob, its seed (its smoothing is cross-validated)."""
    for name in knobs:
        if name != "seed":
            raise KnobError(
                f"unknown knob {name!r}: {OFFLINE_ALGORITHM} takes only seed (its smoothing "
                "is chosen by cross-validation by call)",
                knob=name,
            )
    seed = knobs.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= OFFLINE_SEED_MAX:
        raise KnobError(f"seed must be a whole number from 0 to {OFFLINE_SEED_MAX}", knob="seed")
    return seed


def engines_run_start(
    *,
    algorithm: str,
    knobs: dict[str, Any],
    world: World,
    parent: PolicyVersion,
    started_by=None,
) -> Job:
    """Validate the route and the knobs (a clear KnobError before anything runs), then start
    the job in `world`: a route the world cannot run is refused, saying why."""
    from policies.services import version_in_world_check

    # Learns in `world`: from one of its versions (VersionWorldMismatch names "parent").
    version_in_world_check(version=parent, world=world, field="parent")
    routes = {route.name: route for route in engines_routes(world=world)}
    if algorithm not in routes:
        raise KnobError(
            f"unknown algorithm {algorithm!r}; choose one of {', '.join(routes)}",
            knob="algorithm",
        )
    if routes[algorithm].refused:
        raise KnobError(routes[algorithm].refused, knob="algorithm")
    if algorithm == OFFLINE_ALGORITHM:
        spec = offline_spec(world=world, parent=parent, seed=_offline_knobs(knobs or {}))
        title = "Engines: off-line on real calls"
    else:
        spec = _simulator_spec(algorithm, knobs, world=world, parent=parent)
        title = f"Engines: {ALGORITHMS[algorithm].label}"
    pool = pool_default(gpu=False)
    return training_run_start(
        world=world,
        parent=parent,
        kind="engines",
        trainer=algorithm,
        spec=spec,
        pool=pool,
        title=title,
        started_by=started_by,
        finish_needs={"promote": "by hand"},
        expected_seconds=move_expected_seconds(spec, trainer=algorithm, pool_name=pool.name),
    )


def _simulator_spec(
    algorithm: str, knobs: dict[str, Any], *, world: World, parent: PolicyVersion
) -> dict[str, Any]:
    """A simulator learner's spec; the reward model fits on the world's own won or lost calls
    (never another world's) and plans only where the simulator plays."""
    spec: dict[str, Any] = {
        "algorithm": algorithm,
        "knobs": dict(knobs or {}),
        "scenarios": world_scenarios_spec(world),
        "max_turns": DEFAULT_MAX_TURNS,
        "parent_strategy": parent.move_strategy or SCRIPTED,
        "pack": world.slug,
    }
    if algorithm == REWARD_MODEL:
        if not world.has_simulator:
            if spec["knobs"].get("plan_strategy"):
                raise KnobError(
                    f"plan_strategy: {world.name} has no simulator to plan a strategy on; "
                    "leave it off to fit the reward alone",
                    knob="plan_strategy",
                )
            spec["knobs"]["plan_strategy"] = False
        spec.update({"source": "outcomes", "examples": engines_outcome_examples(world=world)})
    validate_spec(spec)
    return spec


def engines_runs_of(*, world: World) -> list[Job]:
    """The world's Engines runs, newest first (30 at most): a run is listed in its world
    only. A read."""
    return list(Job.objects.filter(kind="engines", training_run__world=world).order_by("-id")[:30])


def engines_run_offline_comparison(*, job: Job, world: World | None) -> dict[str, Any] | None:
    """How often a simulator run's strategy picks the real agent's move on won against lost
    calls. Only on a world whose moves are the simulator's eight: a table of lettings moves
    says nothing about another business's moves (the off-line route measures those)."""
    strategy = (job.result or {}).get("strategy")
    if not strategy or strategy.get("kind") != "table":
        return None
    if world is None or set(world.move_names) != set(MOVES) or not _has_outcomes(world):
        return None
    calls_label_moves(world=world)
    calls = _calls_with_moves(world)
    learned = offline_agreement(strategy, calls)
    parent_version = training_run_of(job).parent_version
    parent = offline_agreement(
        parent_version.move_strategy if parent_version else SCRIPTED,
        calls,
    )
    return {"world": world.name, "learned": learned, "parent": parent}


def engines_run_held_out(*, job: Job) -> dict[str, Any] | None:
    """An off-line run's strategy on its world's held-out calls (never learned from), beside
    its parent's where the parent has an off-line strategy too. A read."""
    strategy = (job.result or {}).get("strategy")
    run = training_run_of(job)
    if not strategy or strategy.get("kind") != "outcome" or not run.world_id:
        return None
    seed = (job.result or {}).get("seed") or 0
    calls = offline_held_out_calls(world=run.world)
    learned = outcome_policy_comparison(strategy, calls, seed=seed)
    parent_strategy = run.parent_version.move_strategy if run.parent_version_id else {}
    parent = (
        outcome_policy_comparison(parent_strategy, calls, seed=seed)
        if (parent_strategy or {}).get("kind") == "outcome"
        else None
    )
    return {"world": run.world.name, "learned": learned, "parent": parent}


def engines_run_against_parent(*, job: Job) -> dict[str, Any] | None:
    """The run's figure against its parent's on the same measure: {measure, learned, parent,
    parent_label, worse}; None where nothing measures both. A read.

    On the simulator: the mean exact return over the scenarios. Off-line: the won share of
    the held-out calls whose agents mostly made the strategy's moves; a parent with no
    off-line strategy is the real agents themselves, whose moves every call follows, so its
    figure is the held-out calls' won share."""
    result = job.result or {}
    run = training_run_of(job)
    parent_label = run.parent_version.label if run.parent_version_id else "the parent"
    summary = result.get("summary") or {}
    if summary.get("mean_learned_return") is not None and (
        summary.get("mean_parent_return") is not None
    ):
        measure = "mean return on the simulator"
        learned, parent = summary["mean_learned_return"], summary["mean_parent_return"]
    else:
        held_out = engines_run_held_out(job=job)
        if held_out is None:
            return None
        learned = held_out["learned"]["agree"]["won_share"]
        parent = (
            held_out["parent"]["agree"]["won_share"]
            if held_out["parent"] is not None
            else held_out["learned"]["won_share"]
        )
        measure = "won share of the held-out calls that follow its moves"
        if learned is None or parent is None:
            return None
    return {
        "measure": measure,
        "learned": learned,
        "parent": parent,
        "parent_label": parent_label,
        # A hair of tolerance: the same table measured twice is not "worse".
        "worse": learned < parent - 1e-9,
    }


def _worse_sentence(standing: dict[str, Any]) -> str:
    return (
        f"This run did worse than its parent: {standing['measure']} "
        f"{standing['learned']:.2f} against {standing['parent_label']}'s "
        f"{standing['parent']:.2f}."
    )


def engines_run_promote(
    *, job: Job, world: World | None = None, confirm: bool = False, promoted_by=None
) -> PolicyVersion:
    """Make a finished Engines run a version of the run's own world, once. `world`, where a
    request names one, must be the run's (KnobError naming "pack"). A run that did worse than
    its parent needs `confirm` (PromoteNeedsConfirm), and its version says it did not learn."""
    if job.kind != "engines" or job.state != Job.State.DONE:
        raise JobError("Only a finished Engines run can be promoted.")
    if not (job.result or {}).get("strategy"):
        raise JobError("This run learned no move strategy (a reward model without planning).")
    run = training_run_of(job)
    if world is not None and run.world_id != world.pk:
        raise KnobError(
            f"Run {job.pk} is a run of {run.world.name if run.world_id else 'no world'}, not "
            f"{world.name}: a run is promoted in its own world.",
            knob="pack",
        )
    standing = engines_run_against_parent(job=job)
    worse = bool(standing and standing["worse"])
    if worse and not confirm:
        raise PromoteNeedsConfirm(
            f"{_worse_sentence(standing)} Confirm to promote it anyway; its version will say "
            "it did not learn."
        )
    with transaction.atomic():
        locked = Job.objects.select_for_update().get(pk=job.pk)
        promoted = training_run_of(locked).produced_version
        if promoted is not None:
            raise JobError(f"This run was already promoted to {promoted.label}.")
        if locked.result["strategy"].get("kind") == "outcome":
            version = version_from_offline_moves(locked, locked.result, name="promoted")
        else:
            version = version_from_move_strategy(locked, locked.result, name="promoted")
        # The mark wording versions carry (PolicyVersion.did_not_learn reads it).
        version.learned_set(
            version.learned.with_changes(
                against_parent=standing,
                did_not_learn=[_worse_sentence(standing)] if worse else [],
            )
        )
        if promoted_by is not None:
            version.created_by = promoted_by
        version.save(update_fields=["learned_from", "created_by"])
        job_produced(locked, version)  # the checkpoint listens for it
        TrainingRun.objects.update_or_create(job=locked, defaults={"produced_version": version})
    return version

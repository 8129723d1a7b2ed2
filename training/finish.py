"""What finishing a job means, per kind: the one place a job turns into a version.

Called by levers9.jobs.services.job_finish inside its exactly-once claim.
"""

from __future__ import annotations

from typing import Any, TypeVar

from arena.models import World
from levers9.jobs.models import Job
from levers9.jobs.services import job_note
from policies.models import PolicyVersion
from policies.services import version_register
from trainers.registry import RLHF, Family, trainers_of
from trainers.results import (
    MoveStrategyResult,
    OfflineMovesResult,
    VersionRecord,
    WordingResult,
    learned_record,
)
from training.models import TrainingRun
from training.runs import training_run_of

_Family = TypeVar("_Family", bound=VersionRecord)

# What a version keeps of a move-strategy result (the full result stays on the job).
_RETURN_KEYS = (
    "slug",
    "optimal_return",
    "learned_return",
    "parent_return",
    "fraction_of_optimum",
    "gap_to_optimum",
)


def _world_of(job: Job) -> World:
    """The world the version is made in: the run's (Train sets it), else its parent's."""
    run = training_run_of(job)
    if run.world_id:
        return run.world
    if run.parent_version_id:
        return run.parent_version.world
    raise ValueError("the job names no world and no parent: no world to make a version in")


def _pack_of(job: Job) -> str | None:
    run = training_run_of(job)
    return run.world.slug if run.world_id else None


def _lineage(job: Job, result: dict[str, Any]) -> MoveStrategyResult:
    reports = [row for row in result.get("scenarios") or [] if isinstance(row, dict)]
    lineage = learned_record(
        {
            "job": job.pk,
            "kind": job.kind,
            "algorithm": result.get("algorithm", job.trainer),
            "knobs": result.get("knobs", {}),
            "seed": result.get("seed"),
            "max_turns": result.get("max_turns"),
            "pack": _pack_of(job),
            "scenarios": [row.get("slug") for row in reports],
            "returns": [{key: row.get(key) for key in _RETURN_KEYS} for row in reports],
            "summary": result.get("summary", {}),
        }
    )
    return _of_family(lineage, MoveStrategyResult)


def _of_family(record: VersionRecord, family: type[_Family]) -> _Family:
    """The record, which must be of the finish's family (a trainer whose result names another
    algorithm is refused before a version is made)."""
    if not isinstance(record, family):
        raise ValueError(
            f"the trainer's result names algorithm '{record.algorithm}', not one that makes "
            f"a {family.__name__}"
        )
    return record


def _wording_kept_from(parent: PolicyVersion | None) -> dict[str, str]:
    """Where a new move strategy's replies come from: its parent's agent, else the simulator."""
    if parent is None:
        return {
            "provider": PolicyVersion.Provider.SIMULATOR,
            "provider_model": "",
            "endpoint_url": "",
        }
    return {
        "provider": parent.provider,
        "provider_model": parent.provider_model,
        "endpoint_url": parent.endpoint_url,
    }


def version_from_move_strategy(
    job: Job, result: dict[str, Any], *, name: str = "trained"
) -> PolicyVersion:
    """A version that plays the learned move table and keeps its parent's wording."""
    parent = training_run_of(job).parent_version
    strategy = result.get("strategy")
    if not isinstance(strategy, dict) or strategy.get("kind") != "table":
        raise ValueError("the trainer returned no move table to make a version from")
    return version_register(
        world=_world_of(job),
        name=name,
        parent=parent,
        move_strategy=strategy,
        learned_from=_lineage(job, result),
        description=f"Move strategy learned by {job.trainer}; wording kept from "
        f"{parent.label if parent else 'the simulator'}.",
        created_by=job.started_by,
        **_wording_kept_from(parent),
    )


def version_from_wording(job: Job, result: dict[str, Any]) -> PolicyVersion:
    """RLHF or DPO: a version answering from its merged weights; moves stay the parent's."""
    trained = result.get("version") or {}
    merged = trained.get("merged_weights")
    if not merged:
        raise ValueError("the trainer returned no merged weights to make a version from")
    parent = training_run_of(job).parent_version
    metrics = result.get("metrics") or {}
    learned = {
        "job": job.pk,
        "kind": job.kind,
        "algorithm": job.trainer,
        **{key: value for key, value in trained.items() if key != "job"},
        # Scalars, and the bootstrap intervals that say what they mean (`x_ci`); the curves
        # and per-step histories stay in the job's result.
        "metrics": {
            key: value
            for key, value in metrics.items()
            if not isinstance(value, list | dict) or key.endswith("_ci")
        },
    }
    if isinstance(metrics.get("reward_model"), dict):
        learned["reward_model"] = metrics["reward_model"]
    # Still a version (Train always ends in one), but marked where it learned nothing.
    learned["did_not_learn"] = list(metrics.get("did_not_learn") or [])
    record = _of_family(learned_record(learned), WordingResult)
    version = version_register(
        world=_world_of(job),
        name="trained" if job.trainer == RLHF else "dpo benchmark",
        parent=parent,
        move_strategy=parent.move_strategy if parent else {},
        learned_from=record,
        description=f"{job.trainer.upper()} on {record.base} from preference version "
        f"v{record.preference_version}.",
        provider=PolicyVersion.Provider.TRAINED,
        provider_model=str(merged),
        created_by=job.started_by,
    )
    # A trained version arrives on its own endpoint (a serve job on the same pool and cards).
    from policies.endpoints import version_serve
    from policies.errors import PolicyError

    try:
        version_serve(
            version=version,
            gpu_count=job.card_count,
            pool_name=job.pool_name,
            started_by=job.started_by,
        )
    except PolicyError as error:  # the version stays, released with its weights: Serve again
        job_note(job.pk, f"Not served: {error}")
    return version


def version_from_offline_moves(
    job: Job, result: dict[str, Any], *, name: str = "trained"
) -> PolicyVersion:
    """The off-line learner on real calls: a version that prefers the moves that won, with
    its measurement on the held-out calls (learner, held-out calls, interval, trust)."""
    from training.offline import offline_comparison_report

    strategy = result.get("strategy")
    if not isinstance(strategy, dict) or strategy.get("kind") != "outcome":
        raise ValueError("the trainer returned no move strategy to make a version from")
    run = training_run_of(job)
    parent = run.parent_version
    comparison = (
        offline_comparison_report(world=run.world, strategy=strategy, seed=result.get("seed") or 0)
        if run.world_id
        else {}
    )
    trained_on = result.get("trained_on") or {}
    learned = {
        "job": job.pk,
        "kind": job.kind,
        "algorithm": result.get("algorithm", job.trainer),
        "learner": result.get("learner"),
        "pack": _pack_of(job),
        "trained_on": trained_on,
        "smoothing": result.get("smoothing"),
        "seed": result.get("seed"),
        "held_out_calls": comparison.get("held_out_calls", 0),
        # A dict, not a pair: the Policies page reads it as "low …, high …, confidence …".
        "interval": (
            dict(
                zip(("low", "high"), comparison["interval"], strict=True),
                confidence=comparison.get("confidence"),
            )
            if comparison.get("interval")
            else None
        ),
        "difference": comparison.get("difference"),
        "trust": comparison.get("trust"),
        "offline_comparison": {
            key: comparison.get(key) for key in ("won_share", "mean_agreement", "confidence")
        },
    }
    return version_register(
        world=_world_of(job),
        name=name,
        parent=parent,
        move_strategy=strategy,
        learned_from=_of_family(learned_record(learned), OfflineMovesResult),
        description=f"Move strategy learned off-line from {trained_on.get('calls', 0)} "
        f"labelled real calls; wording kept from {parent.label if parent else 'the baseline'}.",
        created_by=job.started_by,
        **_wording_kept_from(parent),
    )


# Which version a Train card's result becomes, by its trainer's family (trainers.registry).
MOVE_STRATEGY_TRAINERS = trainers_of(Family.MOVE_STRATEGY)
OFFLINE_MOVE_TRAINERS = trainers_of(Family.OFFLINE_MOVES)
WORDING_TRAINERS = trainers_of(Family.WORDING)


def train_job_finish(job: Job, result: dict[str, Any]) -> PolicyVersion | None:
    """A Train card's job always ends in a version (checkpointed by evaluation's listener),
    which its run keeps as the version it produced."""
    if job.trainer in MOVE_STRATEGY_TRAINERS:
        version = version_from_move_strategy(job, result)
    elif job.trainer in OFFLINE_MOVE_TRAINERS:
        version = version_from_offline_moves(job, result)
    elif job.trainer in WORDING_TRAINERS:
        version = version_from_wording(job, result)
    else:
        raise ValueError(f"a Train card does not run {job.trainer}")
    TrainingRun.objects.update_or_create(job=job, defaults={"produced_version": version})
    return version

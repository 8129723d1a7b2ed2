"""How far a world's judge agrees with people. Reviewers' overrides, per dimension
(judge_agreement, beside the Duel's queue and in a rescoring's report), and a model judge's
measurement: a job (kind "judge-measure", registered in arena.apps) that asks it about the
frozen picks a fit holds out, in both orders. A fitted judge is measured by its own fit, on
the same held-out rows, beside the rubric (its version's report). Workspace schema.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from arena.errors import JudgeFitError
from arena.job_worlds import arena_job_start
from arena.judge.fit_rows import judge_fit_rows
from arena.judge.world_dimensions import world_dimensions
from arena.judge.world_judge import judged_by_a_model, model_judge_for_world
from arena.models import JobWorld, JudgeOverride, World
from levers9.jobs.models import Job
from levers9.pools import pool_default
from trainers.judge.fit import held_out_part, pair_agreement
from trainers.judge.model_judge import comparisons_agreement, model_judge_compare
from trainers.judge.rubric import Turn

# A reviewer's verdict and the judge's score agree when they are this close (verdicts are
# given as 0, 0.5 or 1, so this reads "in the same third of the scale").
AGREEMENT_TOLERANCE = 0.25


def judge_agreement(world: World | None = None) -> dict[str, dict[str, Any]]:
    """Per dimension of the world's rubric (the seven without a world): how often reviewers
    who looked at a reply agreed with the judge.

    Every override counts once per dimension: a dimension the reviewer left alone is an
    agreement; one they set agrees when within AGREEMENT_TOLERANCE of the judge's score.
    """
    rubric = world_dimensions(world)
    overrides = JudgeOverride.objects.all()
    if world is not None:
        overrides = overrides.filter(reply__moment__world=world)
    reviewed: Counter[str] = Counter()
    agreed: Counter[str] = Counter()
    for scores, judge_scores in overrides.values_list("scores", "judge_scores").iterator():
        for dimension in (dimension.name for dimension in rubric):
            reviewed[dimension] += 1
            if dimension not in scores:
                agreed[dimension] += 1
                continue
            judge_score = judge_scores.get(dimension)
            if (
                judge_score is not None
                and abs(float(scores[dimension]) - float(judge_score)) <= AGREEMENT_TOLERANCE
            ):
                agreed[dimension] += 1
    return {
        dimension.name: {
            "label": dimension.label,
            "reviewed": reviewed[dimension.name],
            "agreed": agreed[dimension.name],
            "rate": round(agreed[dimension.name] / reviewed[dimension.name], 4)
            if reviewed[dimension.name]
            else None,
        }
        for dimension in rubric
    }


# --- measuring a model judge -----------------------------------------------------------------

JUDGE_MEASURE_KIND = "judge-measure"
JUDGE_MEASURE_TRAINER = "judge-measure"
MODEL_JUDGE_PAIRS = 100  # each costs two model calls


def judge_measure_start(*, world: World, started_by=None, on_request: bool = True) -> Job:
    """Measure the world's model judge on the picks a fit holds out: a job in the worker (it
    calls the model twice a pick, in both orders). One the platform starts itself after a
    freeze (`on_request=False`) is background work: it yields to jobs a person started and no
    job limit refuses it."""
    if not judged_by_a_model(world):
        raise JudgeFitError(
            f"{world.name} is judged by its fitted judge (or the rubric): its fit measures it."
        )
    return arena_job_start(
        # The platform's job names no world: the arena's row does.
        about=JobWorld(world=world),
        kind=JUDGE_MEASURE_KIND,
        trainer=JUDGE_MEASURE_TRAINER,
        spec={"world": world.slug},
        pool=pool_default(gpu=False),
        title=f"Measure the model judge of {world.name}",
        started_by=started_by,
        within_workspace_limits=on_request,
        background=not on_request,
    )


def judge_measure_soon(*, world: World, started_by=None) -> None:
    """A world judged by a model is measured again on its (new) held-out picks after a freeze,
    as its fitted judge is refitted. Coalesced: a measurement still waiting reads the picks
    when it runs, so it already covers this freeze; one may run while one waits."""
    if not judged_by_a_model(world):
        return
    waiting = Job.objects.filter(
        kind=JUDGE_MEASURE_KIND,
        arena_world__world=world,
        state=Job.State.PACKING,
        submitted_at=None,
    )
    if waiting.exists() or not held_out_part(judge_fit_rows(world)["pairs"]):
        return
    judge_measure_start(world=world, started_by=started_by, on_request=False)


def judge_measure_run(job_id: int, progress) -> dict[str, Any]:
    """The in-worker work: compare each held-out pick's two replies in both orders."""
    job = Job.objects.get(pk=job_id)
    world = job.arena_world.world
    held = held_out_part(judge_fit_rows(world)["pairs"])[:MODEL_JUDGE_PAIRS]
    if not held:
        raise JudgeFitError(f"{world.name} has no held-out frozen picks to measure a judge on.")
    judge = model_judge_for_world(world)
    comparisons = []
    for number, row in enumerate(held, start=1):
        context = [Turn(turn["speaker"], turn["text"]) for turn in row["context"]]
        comparisons.append(model_judge_compare(judge, context, row["chosen"], row["rejected"]))
        progress(number, len(held))
    rubric = pair_agreement(
        np.asarray([row["rubric_chosen"][-1] for row in held]),
        np.asarray([row["rubric_rejected"][-1] for row in held]),
        seed=0,
    )
    return {
        "judge": judge.model_name,
        "model": comparisons_agreement(comparisons),
        "rubric": rubric,
    }


def judge_measurement_latest(world: World) -> dict[str, Any] | None:
    """The newest finished measurement of the world's model judge (a job's result)."""
    job = (
        Job.objects.filter(kind=JUDGE_MEASURE_KIND, arena_world__world=world, state=Job.State.DONE)
        .order_by("-finished_at")
        .first()
    )
    return job.result if job is not None else None

"""Writes of evaluation: starting an evaluation (a job on the CPU pool, one of a pair on the
same calls at a time), the checkpoints of a new version (against its parent, a wording version
also against its own base untrained, and an RLHF version also against the DPO version of the
same picks), and the job platform's hooks. The
job replays the evaluation in the worker (evaluation.replay); the world's held-out calls are
made in evaluation.call_sets.

Workspace schema: every row read or made here lives in the tenant's schema.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from arena.models import World
from evaluation.call_sets import call_set_ensure, call_set_kind
from evaluation.errors import EvaluationError
from evaluation.estimates import evaluation_estimate
from evaluation.models import Evaluation
from policies.models import PolicyVersion
from trainers.registry import DPO, RLHF, Family, trainers_of

# --- starting ------------------------------------------------------------------------------


def _answering_check(version: PolicyVersion, *, allow_starting: bool = False) -> None:
    status = PolicyVersion.objects.filter(pk=version.pk).values_list("status", flat=True).first()
    if status == PolicyVersion.Status.ANSWERING:
        return
    if status == PolicyVersion.Status.STARTING and allow_starting:
        return
    if status == PolicyVersion.Status.RELEASED:
        raise EvaluationError(
            f"{version.label} is released and answers nothing, so it cannot be evaluated: "
            "serve it again first."
        )
    raise EvaluationError(f"{version.label} is not answering yet, so it cannot be evaluated.")


def _start_check(
    *,
    candidate: PolicyVersion,
    baseline: PolicyVersion,
    seed: int,
    checkpoint: bool,
    against_base: bool = False,
) -> None:
    """Refuse an evaluation that would say nothing or could not run."""
    if against_base:
        # The baseline is the candidate's own base, asked beside it while it answers.
        if seed < 0:
            raise EvaluationError("The seed must be zero or more.")
        _answering_check(candidate, allow_starting=True)
        return
    if candidate.pk == baseline.pk:
        raise EvaluationError(
            "Choose two different versions: a version against itself says nothing."
        )
    if candidate.world_id != baseline.world_id:
        raise EvaluationError(
            f"{candidate.label} is {candidate.world.name}'s and {baseline.label} is "
            f"{baseline.world.name}'s: evaluate two versions of one world."
        )
    if seed < 0:
        raise EvaluationError("The seed must be zero or more.")
    # A checkpoint is started when its version is registered, which may be before its
    # endpoint answers; it waits in the queue and runs once it does.
    _answering_check(candidate, allow_starting=checkpoint)
    _answering_check(baseline)


def _cpu_pool() -> Any:
    """The pool evaluations run on; none set up is an error the page can show."""
    from levers9.models import GpuPool
    from levers9.pools import pool_default

    try:
        return pool_default(gpu=False)
    except GpuPool.DoesNotExist as error:
        raise EvaluationError(str(error)) from error


def _evaluation_job_start(*, evaluation: Evaluation, pool: Any, checkpoint: bool) -> Any:
    """The job that runs the evaluation in the worker, followed live on the jobs websocket."""
    from levers9.jobs.services import job_start

    world, candidate, baseline = evaluation.world, evaluation.candidate, evaluation.baseline
    what = "Checkpoint" if checkpoint else "Evaluate"
    return job_start(
        kind="evaluate",
        trainer="evaluate",
        spec={
            "evaluation": evaluation.pk,
            "pack": world.slug,
            "candidate": candidate.number,
            "baseline": baseline.number,
            "seed": evaluation.seed,
            "purpose": evaluation.purpose,
        },
        pool=pool,
        title=f"{what} {candidate.label} vs {evaluation.baseline_label} on {world.name}",
        # What the job is about (its world, its baseline) is the evaluation's: Evaluation.job,
        # set by evaluation_start in this transaction, before the task can be queued.
        started_by=evaluation.started_by,
        # A checkpoint is the finish of a training that already counted against the limits.
        within_workspace_limits=not checkpoint,
        # Expected to be short (two simulator versions, or past runs like it): the short lane,
        # so a move strategy's checkpoint is done within a minute of its version.
        expected_seconds=evaluation_estimate(
            world=world, candidate=candidate, baseline=baseline
        ).high_seconds,
    )


def evaluation_start(
    *,
    world: World,
    candidate: PolicyVersion,
    baseline: PolicyVersion,
    seed: int = 0,
    started_by=None,
    purpose: str = Evaluation.Purpose.EVALUATE,
) -> Evaluation:
    """Put `candidate` against `baseline` on the world's held-out calls: a job on the CPU
    pool, followed live on the jobs websocket. A released version cannot be evaluated. For
    the against-base checkpoint `baseline` is `candidate` itself (its base answers there)."""
    against_base = purpose == Evaluation.Purpose.AGAINST_BASE
    checkpoint = purpose == Evaluation.Purpose.CHECKPOINT or against_base
    _start_check(
        candidate=candidate,
        baseline=baseline,
        seed=seed,
        checkpoint=checkpoint,
        against_base=against_base,
    )
    if candidate.world_id != world.pk:
        raise EvaluationError(
            f"{candidate.label} is {candidate.world.name}'s: evaluate it on {candidate.world.name}."
        )
    pool = _cpu_pool()
    call_set = call_set_ensure(world=world)
    with transaction.atomic():
        # One evaluation of a pair on the same calls at a time: a second request returns the
        # one on its way (its `joined` says so) instead of replaying every call again. The
        # world's row lock makes two requests at once see each other.
        World.objects.select_for_update().filter(pk=world.pk).first()
        on_its_way = (
            Evaluation.objects.filter(
                world=world,
                call_set=call_set,
                candidate=candidate,
                baseline=baseline,
                seed=seed,
                state__in=Evaluation.OPEN_STATES,
            )
            .order_by("id")
            .first()
        )
        if on_its_way is not None:
            on_its_way.joined = True
            return on_its_way
        evaluation = Evaluation.objects.create(
            world=world,
            call_set=call_set,
            candidate=candidate,
            baseline=baseline,
            purpose=purpose,
            seed=seed,
            started_by=started_by,
        )
        evaluation.job = _evaluation_job_start(
            evaluation=evaluation, pool=pool, checkpoint=checkpoint
        )
        evaluation.save(update_fields=["job"])
    return evaluation


def _checkpoint_world(version: PolicyVersion) -> World:
    """Where a new version is checkpointed: its own world (a version answers there only)."""
    world = version.world
    call_set_kind(world)  # EvaluationError: nothing to checkpoint on yet, and why
    return world


def _checkpoint_job(version: PolicyVersion, *, baseline: PolicyVersion, purpose: str, started_by):
    """One of a new version's checkpoints, in its own world on its held-out calls: the job."""
    evaluation = evaluation_start(
        world=_checkpoint_world(version),
        candidate=version,
        baseline=baseline,
        started_by=started_by,
        purpose=purpose,
    )
    return evaluation.job


def evaluation_checkpoint_start(*, version: PolicyVersion, started_by=None):
    """The checkpoint of a new version: it against its parent on the same held-out calls.
    Called by the job platform's finish once the version is registered; returns the job."""
    if version.parent_id is None:
        raise EvaluationError(f"{version.label} has no parent to be checkpointed against.")
    return _checkpoint_job(
        version,
        baseline=version.parent,
        purpose=Evaluation.Purpose.CHECKPOINT,
        started_by=started_by,
    )


# --- the job platform's hooks ----------------------------------------------------------------


def evaluation_job_finish(*, job, result: Any) -> None:
    """The dashboard's finish of an evaluation job (the evaluate kind's): the worker stored the
    results already; this only makes sure the evaluation says done, and that an against-base
    checkpoint's mark is on its version. Idempotent."""
    from evaluation.against_base import against_base_mark

    Evaluation.objects.filter(job=job, state__in=Evaluation.OPEN_STATES).update(
        state=Evaluation.State.DONE,
        summary=result if isinstance(result, dict) else {},
        finished_at=timezone.now(),
    )
    for evaluation in Evaluation.objects.filter(
        job=job, purpose=Evaluation.Purpose.AGAINST_BASE, state=Evaluation.State.DONE
    ).select_related("candidate", "baseline", "world"):
        against_base_mark(evaluation)


def dpo_benchmark_of(version: PolicyVersion) -> PolicyVersion | None:
    """For an RLHF version: the newest DPO version of the same frozen picks and base that still
    answers — the benchmark it must beat ("what the RLHF version gains over this number is
    what the reward model taught"); None for any other version or when there is none."""
    if version.algorithm != RLHF or not version.preference_version:
        return None
    candidates = PolicyVersion.objects.filter(
        world_id=version.world_id,
        algorithm=DPO,
        preference_version=version.preference_version,
        base_model=version.base_model,
    ).exclude(status=PolicyVersion.Status.RELEASED)
    return candidates.exclude(pk=version.pk).order_by("-pk").first()


def evaluation_checkpoint_against_dpo_start(*, version: PolicyVersion, started_by=None):
    """An RLHF version against the DPO version of the same picks and base, on the same
    held-out calls its parent checkpoint uses; None when there is no such DPO version."""
    benchmark = dpo_benchmark_of(version)
    if benchmark is None:
        return None
    return _checkpoint_job(
        version, baseline=benchmark, purpose=Evaluation.Purpose.CHECKPOINT, started_by=started_by
    )


WORDING_ALGORITHMS = trainers_of(Family.WORDING)


def evaluation_checkpoint_against_base_start(*, version: PolicyVersion, started_by=None):
    """A trained wording version against its own base untrained (the same base with no
    adapter, the same conversation and decoding), on the same held-out calls as its parent
    checkpoint and by the same world's judge: the measure nothing that trained it scored.
    Returns the job; None for a version that is not wording (a move strategy has no base)."""
    if version.algorithm not in WORDING_ALGORITHMS:
        return None
    if not version.is_trained:
        raise EvaluationError(
            f"{version.label} runs on {version.get_provider_display()}, not its own trained "
            "weights: there is no base under it to compare with."
        )
    if not version.base_model:
        raise EvaluationError(f"{version.label} names no base to be compared with.")
    return _checkpoint_job(
        version, baseline=version, purpose=Evaluation.Purpose.AGAINST_BASE, started_by=started_by
    )


def version_checkpoint(job, version: PolicyVersion) -> None:
    """Checkpoint a new version against its parent on the held-out calls, a wording version
    also against its own base untrained, and an RLHF version also against the DPO version of
    the same picks: evaluation listens for every version a job produced (levers9.jobs.kinds).
    A checkpoint that cannot start (no parent, a released parent, ...) never fails the
    finish: the job says so."""
    from levers9.jobs.services import job_note

    for start, what in (
        (evaluation_checkpoint_start, "No checkpoint"),
        (evaluation_checkpoint_against_base_start, "No checkpoint against its base untrained"),
        (evaluation_checkpoint_against_dpo_start, "No checkpoint against DPO"),
    ):
        try:
            with transaction.atomic():  # a savepoint: only this checkpoint rolls back
                start(version=version, started_by=job.started_by)
        except EvaluationError as error:
            job_note(job.pk, f"{what}: {error}")


def evaluation_job_ended(job) -> None:
    """The evaluate kind's end hook: an evaluation whose job ended without it says so."""
    evaluations_reconcile(job_id=job.pk)


def _ended_state(job) -> tuple[str, str]:
    """What an open evaluation becomes once its job ended without it: (state, error)."""
    from levers9.jobs.models import Job

    if job.state == Job.State.DONE:
        return Evaluation.State.FAILED, "The job ended without storing results."
    if job.state == Job.State.CANCELLED:
        return Evaluation.State.CANCELLED, "Cancelled."
    return Evaluation.State.FAILED, job.error or "The job failed."


def evaluations_reconcile(*, job_id: int | None = None) -> int:
    """Open evaluations whose job ended without them (a worker that died, a cancel) say so."""
    from levers9.jobs.models import Job

    ended = Evaluation.objects.filter(
        state__in=Evaluation.OPEN_STATES,
        job__state__in=[Job.State.FAILED, Job.State.CANCELLED, Job.State.DONE],
    ).select_related("job")
    if job_id is not None:
        ended = ended.filter(job_id=job_id)
    changed = 0
    for evaluation in ended:
        job = evaluation.job
        state, error = _ended_state(job)
        changed += Evaluation.objects.filter(
            pk=evaluation.pk, state__in=Evaluation.OPEN_STATES
        ).update(state=state, error=error, finished_at=job.finished_at or timezone.now())
    return changed

"""Writes of evaluation: starting an evaluation (a job on the CPU pool), running it in the
worker, the checkpoint of a new version, and the job platform's hooks. The world's held-out
calls are made in evaluation.call_sets, the lens's cached per-call judge scores in
evaluation.lens; both are named here too, as callers have always imported them from here.

Evaluate puts two versions on the same calls so that the only difference is the policy.
With real calls in the world those are forty real calls, replayed: each version answers at
the call's first four agent turns given the call so far, the judge scores every answer, and
the yardstick at each turn is what the real agent said there and how it scored. Without real
calls they are scripted customers on fixed seeds: a reference call per scenario and seed,
played by the scripted agent, whose first four agent turns are the moments.

On scripted customers the judge only scores wording; the simulator knows who won. So there
both versions also play 1,000 seeded customers on the simulator (trainers.moves.simulated_duel) and
the verdict rests on the paired difference in won share, the judge's win rate kept beside it.
On real calls the judge's win rate stays the verdict, with the judge's measured agreement,
and only from a judge measured above chance (evaluation.verdicts decides, on every page).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Any

from django.db import transaction
from django.utils import timezone

from arena.held_out import (  # noqa: F401 - callers import these from here
    HELD_OUT_CALLS,
    TURNS_PER_CALL,
    held_out_call_ids,
)
from arena.judge.world_judge import judge_for_world
from arena.models import Judgement, Reply, World, moments_dialogues_load
from arena.recorded_replies import recorded_replies_pinned
from evaluation.call_sets import call_set_ensure, scripted_episode
from evaluation.errors import EvaluationError
from evaluation.fanout import Answer, Ask, answers_gather
from evaluation.lens import (  # noqa: F401 - LENS_BANDS, world_score_vs_outcome: for callers
    LENS_BANDS,
    lens_scores_ensure,
    world_score_vs_outcome,
)
from evaluation.models import (
    Evaluation,
    EvaluationAnswer,
    EvaluationCallSet,
    HeldOutCall,
    HeldOutMoment,
)
from evaluation.replay import (
    endpoint_slots,
    judge_context,
    judgement_from,
    judgements_in_force,
)
from policies.models import PolicyVersion
from policies.services import replies_written
from trainers.moves.simulated_duel import DEFAULT_EPISODES, simulated_duel
from trainers.moves.simulator import Scenario as SimulatedScenario
from trainers.moves.strategy import SCRIPTED

# How long a checkpoint waits for its new version's endpoint to start answering.
ANSWER_WAIT_SECONDS = 20 * 60
ANSWER_POLL_SECONDS = 5.0
# The simulated duel's customers are fixed, like the held-out calls (the evaluation's seed
# moves only its bootstrap), so two evaluations of the same versions play the same calls.
SIMULATED_DUEL_SEED = 0
SIMULATED_DUEL_EPISODES = DEFAULT_EPISODES

Progress = Callable[..., None]
Answers = dict[Hashable, Answer]


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
    *, candidate: PolicyVersion, baseline: PolicyVersion, seed: int, checkpoint: bool
) -> None:
    """Refuse an evaluation that would say nothing or could not run."""
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
    from evaluation.estimates import evaluation_estimate
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
        title=f"{what} {candidate.label} vs {baseline.label} on {world.name}",
        started_by=evaluation.started_by,
        # What the job is about (its world, its baseline) is the evaluation's: Evaluation.job.
        finish_needs={"evaluation": evaluation.pk},
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
    pool, followed live on the jobs websocket. A released version cannot be evaluated."""
    checkpoint = purpose == Evaluation.Purpose.CHECKPOINT
    _start_check(candidate=candidate, baseline=baseline, seed=seed, checkpoint=checkpoint)
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
    if not (world.calls.exists() or world.scenarios.exists()):
        raise EvaluationError(
            f"{world.name} has no real calls or scripted customers to checkpoint on yet."
        )
    return world


def evaluation_checkpoint_start(*, version: PolicyVersion, started_by=None):
    """The checkpoint of a new version: it against its parent on the same held-out calls.
    Called by the job platform's finish once the version is registered; returns the job."""
    if version.parent_id is None:
        raise EvaluationError(f"{version.label} has no parent to be checkpointed against.")
    evaluation = evaluation_start(
        world=_checkpoint_world(version),
        candidate=version,
        baseline=version.parent,
        started_by=started_by,
        purpose=Evaluation.Purpose.CHECKPOINT,
    )
    return evaluation.job


# --- running (in the worker) -----------------------------------------------------------------


def _version_returns(
    version: PolicyVersion, held_calls: list[HeldOutCall]
) -> dict[str, Any] | None:
    """One simulated version's return and won share over the held-out calls, played through
    on their seeds with its own move strategy; None when it could play none of them."""
    totals, won = [], 0
    for held in held_calls:
        try:
            _simulated, episode = scripted_episode(
                held.scenario, held.seed, version.move_strategy or SCRIPTED
            )
        except ValueError:
            continue  # a table for another horizon: nothing to play
        totals.append(episode.total_return)
        won += int(episode.won)
    if not totals:
        return None
    return {
        "mean_return": round(sum(totals) / len(totals), 4),
        "won_share": round(won / len(totals), 4),
        "calls": len(totals),
    }


def _simulator_returns(
    evaluation: Evaluation, held_calls: list[HeldOutCall]
) -> dict[str, dict[str, Any]]:
    """On scripted customers: each simulated version plays every held-out call through on
    the same seed with its own move strategy, so the simulator's return and won share of
    the two can be compared. Model-backed versions have no moves to play: left out."""
    returns: dict[str, dict[str, Any]] = {}
    for side, version in (("candidate", evaluation.candidate), ("baseline", evaluation.baseline)):
        if version.provider != PolicyVersion.Provider.SIMULATOR:
            continue
        figures = _version_returns(version, held_calls)
        if figures is not None:
            returns[side] = figures
    return returns


def _world_scenarios(world: World) -> list[SimulatedScenario]:
    """The world's scripted customers as the simulator takes them."""
    return [
        SimulatedScenario.from_dict(
            {
                "slug": scenario.slug,
                "name": scenario.name,
                "persona": scenario.persona_dict(),
                "seed": scenario.seed,
            }
        )
        for scenario in world.scenarios.order_by("slug")
    ]


def _simulated_duel(evaluation: Evaluation) -> dict[str, Any]:
    """Both versions on the same 1,000 seeded scripted customers of the world: the won share
    and return of each and their paired differences. A version that answers with a model has
    no moves to play, and a table the world cannot play is refused: {"unavailable": why}."""
    for version in (evaluation.candidate, evaluation.baseline):
        if version.provider != PolicyVersion.Provider.SIMULATOR:
            return {
                "unavailable": f"{version.label} answers with a model, not with moves the "
                "simulator can play"
            }
    scenarios = _world_scenarios(evaluation.world)
    if not scenarios:
        return {"unavailable": f"{evaluation.world.name} has no scripted customers"}
    try:
        return simulated_duel(
            evaluation.candidate.move_strategy or SCRIPTED,
            evaluation.baseline.move_strategy or SCRIPTED,
            scenarios=scenarios,
            seed=SIMULATED_DUEL_SEED,
            episodes=max(SIMULATED_DUEL_EPISODES, len(scenarios)),
            bootstrap_seed=evaluation.seed,
        )
    except ValueError as error:
        return {"unavailable": str(error)}


def _verdict_fields(
    evaluation: Evaluation, summary: dict[str, Any], *, progress: Progress
) -> dict[str, Any]:
    """What the verdict rests on, added beside the judge's figures (which keep their keys):
    on scripted customers the simulated duel, wherever it could be played; everywhere the
    judge's own verdict and its measured agreement."""
    from evaluation.agreement import judge_agreement

    fields: dict[str, Any] = {
        "verdict_source": "judge",
        "judge_verdict": summary.get("verdict", ""),
        "judge_agreement": judge_agreement(
            world=evaluation.world, judge_model=evaluation.judge_model
        ),
    }
    if evaluation.call_set.kind == EvaluationCallSet.Kind.SCRIPTED:
        progress(0, 1, phase="simulator")
        duel = _simulated_duel(evaluation)
        progress(1, 1, phase="simulator")
        fields["simulator"] = duel
        if "verdict" in duel:
            fields["verdict_source"] = "simulator"
    return fields


def _answering_wait(version: PolicyVersion, progress: Progress) -> PolicyVersion:
    """A checkpoint may be queued before its trained version's endpoint serves: wait for it
    (saying so in the job's progress, where a cancel also stops the wait)."""
    waited = 0.0
    while version.status == PolicyVersion.Status.STARTING and waited < ANSWER_WAIT_SECONDS:
        progress(0, 1, phase=f"waiting for {version.label} to answer")
        time.sleep(ANSWER_POLL_SECONDS)
        waited += ANSWER_POLL_SECONDS
        version.refresh_from_db()
    return version


def _versions_answering(
    evaluation: Evaluation, progress: Progress
) -> tuple[PolicyVersion, PolicyVersion]:
    """The candidate (once its endpoint answers) and the baseline, both able to answer."""
    candidate = _answering_wait(PolicyVersion.objects.get(pk=evaluation.candidate_id), progress)
    baseline = PolicyVersion.objects.get(pk=evaluation.baseline_id)
    for version in (candidate, baseline):
        if not version.can_answer:
            raise EvaluationError(
                f"{version.label} is {version.get_status_display().lower()} and answers "
                "nothing: a version that cannot answer cannot be evaluated."
            )
    return candidate, baseline


def _evaluation_judge(evaluation: Evaluation) -> Any:
    """The world's judge, recorded on the evaluation as the judge of all its answers."""
    judge = judge_for_world(evaluation.world)
    Evaluation.objects.filter(pk=evaluation.pk).update(judge_model=judge.model_name)
    evaluation.judge_model = judge.model_name
    return judge


def _held_moments_load(evaluation: Evaluation) -> list[HeldOutMoment]:
    """The held-out moments in order, with everything the answering threads read loaded."""
    held = list(
        HeldOutMoment.objects.filter(held_out_call__call_set_id=evaluation.call_set_id)
        .select_related(
            "held_out_call__call",
            "held_out_call__scenario",
            "moment__world",
            "moment__scenario",
            "moment__call",
            "yardstick",
        )
        .order_by("held_out_call__position", "number")
    )
    if not held:
        raise EvaluationError(f"{evaluation.world.name} has no held-out moments to evaluate on.")
    moments_dialogues_load(held_moment.moment for held_moment in held)
    return held


def _asks(
    held: list[HeldOutMoment],
    *,
    yardsticks: dict[int, Judgement],
    candidate: PolicyVersion,
    baseline: PolicyVersion,
) -> list[Ask]:
    """At each moment: the yardstick to judge (unless a verdict is in force) and both versions
    to ask."""
    asks: list[Ask] = []
    for held_moment in held:
        context = judge_context(held_moment.moment)
        if held_moment.yardstick_id not in yardsticks:
            asks.append(
                Ask(
                    ("yardstick", held_moment.pk),
                    held_moment.moment,
                    context,
                    text=held_moment.yardstick.text,
                    move=held_moment.yardstick.move,
                )
            )
        for side, version in (("candidate", candidate), ("baseline", baseline)):
            asks.append(Ask((side, held_moment.pk), held_moment.moment, context, version=version))
    return asks


def _replies_create(
    version_answers: list[tuple[str, int, Answer]],
    *,
    by_pk: dict[int, HeldOutMoment],
    versions: dict[str, PolicyVersion],
) -> dict[tuple[str, int], Reply]:
    """Each version's reply, where it gave one, by (side, held-out moment)."""
    answered = [(side, pk, answer) for side, pk, answer in version_answers if not answer.error]
    replies = Reply.objects.bulk_create(
        Reply(
            moment=by_pk[pk].moment,
            text=answer.text,
            move=answer.move or "",
            source=Reply.Source.POLICY,
        )
        for side, pk, answer in answered
    )
    replies_written(
        [(reply, versions[side]) for reply, (side, _, _) in zip(replies, answered, strict=True)]
    )
    return {(side, pk): reply for reply, (side, pk, _) in zip(replies, answered, strict=True)}


def _answers_store(
    evaluation: Evaluation,
    answers: Answers,
    *,
    by_pk: dict[int, HeldOutMoment],
    versions: dict[str, PolicyVersion],
    judge_model: str,
) -> None:
    """The yardsticks' new verdicts, the versions' replies and verdicts, and one answer row
    per version and moment (with its error, if any)."""
    with transaction.atomic():
        # A rerun of the same evaluation (a redelivered task) starts from a clean slate.
        EvaluationAnswer.objects.filter(evaluation=evaluation).delete()
        Judgement.objects.bulk_create(
            judgement_from(answer, by_pk[pk].yardstick, judge_model)
            for (kind, pk), answer in answers.items()
            if kind == "yardstick"
        )
        version_answers = [
            (side, pk, answer) for (side, pk), answer in answers.items() if side != "yardstick"
        ]
        reply_of = _replies_create(version_answers, by_pk=by_pk, versions=versions)
        judgements = Judgement.objects.bulk_create(
            judgement_from(answer, reply_of[(side, pk)], judge_model)
            for side, pk, answer in version_answers
            if not answer.error
        )
        judgement_of = dict(zip(reply_of, judgements, strict=True))
        EvaluationAnswer.objects.bulk_create(
            EvaluationAnswer(
                evaluation=evaluation,
                held_out_moment_id=pk,
                side=side,
                reply=reply_of.get((side, pk)),
                judgement=judgement_of.get((side, pk)),
                total=judgement_of[(side, pk)].total if (side, pk) in judgement_of else None,
                error=answer.error or answer.judge_error,
            )
            for side, pk, answer in version_answers
        )


def _judged_check(answers: Answers, versions: dict[str, PolicyVersion]) -> None:
    """A version none of whose answers was judged fails the evaluation, with the first why."""
    for side, version in versions.items():
        judged = [a for (s, _pk), a in answers.items() if s == side and a.verdict is not None]
        if not judged:
            problems = [a.error or a.judge_error for (s, _pk), a in answers.items() if s == side]
            raise EvaluationError(
                f"{version.label} got no judged answer at all: {problems[0] if problems else ''}"
            )


def _summary_finish(
    evaluation: Evaluation, held: list[HeldOutMoment], *, judge: Any, progress: Progress
) -> dict[str, Any]:
    """The evaluation's summary and what its kind of calls adds: the simulator's returns and
    its duel on scripted customers, the lens's opening scores on real calls; and what the
    verdict rests on."""
    from evaluation.summary import evaluation_summary_compute

    summary = evaluation_summary_compute(evaluation)
    held_calls = list(dict.fromkeys(held_moment.held_out_call for held_moment in held))
    if evaluation.call_set.kind == EvaluationCallSet.Kind.SCRIPTED:
        summary["returns"] = _simulator_returns(evaluation, held_calls)
    else:
        # The lens reads every real call's opening scores: judge the ones not cached yet
        # here, in the worker, so the page never waits for a model judge.
        def lens_progress(done: int, total: int) -> None:
            progress(done, total, phase="lens")

        summary["lens_scored_now"] = lens_scores_ensure(
            world=evaluation.world, judge=judge, on_answer=lens_progress
        )
    summary.update(_verdict_fields(evaluation, summary, progress=progress))
    return summary


def _evaluate(evaluation: Evaluation, progress: Progress) -> dict[str, Any]:
    """Both versions answer at every held-out moment, the judge scores every reply (and each
    yardstick it has no verdict on yet), all of it is kept, and the summary computed."""
    candidate, baseline = _versions_answering(evaluation, progress)
    judge = _evaluation_judge(evaluation)
    held = _held_moments_load(evaluation)
    yardsticks = judgements_in_force([h.yardstick_id for h in held], judge.model_name)
    asks = _asks(held, yardsticks=yardsticks, candidate=candidate, baseline=baseline)

    def on_answer(done: int, total: int) -> None:
        progress(done, total, phase="replies")

    with recorded_replies_pinned(evaluation.world):
        answers = answers_gather(
            asks,
            judge=judge,
            slots_per_version=max(endpoint_slots(candidate), endpoint_slots(baseline)),
            judge_slots=endpoint_slots(judge),
            on_answer=on_answer,
        )
    versions = {"candidate": candidate, "baseline": baseline}
    by_pk = {held_moment.pk: held_moment for held_moment in held}
    _answers_store(
        evaluation, answers, by_pk=by_pk, versions=versions, judge_model=judge.model_name
    )
    _judged_check(answers, versions)
    return _summary_finish(evaluation, held, judge=judge, progress=progress)


def evaluation_run(*, evaluation: Evaluation, progress: Progress | None = None) -> dict[str, Any]:
    """Run an evaluation here and store its results; returns its summary (plain values).
    Runs once: an evaluation that already ended returns what it has."""
    from levers9.jobs.runner import JobCancelled

    claimed = Evaluation.objects.filter(pk=evaluation.pk, state__in=Evaluation.OPEN_STATES).update(
        state=Evaluation.State.RUNNING, started_at=timezone.now(), error=""
    )
    if not claimed:
        evaluation.refresh_from_db()
        return dict(evaluation.summary or {})
    try:
        summary = _evaluate(evaluation, progress or (lambda step, total, **metrics: None))
    except JobCancelled:
        Evaluation.objects.filter(pk=evaluation.pk).update(
            state=Evaluation.State.CANCELLED, error="Cancelled.", finished_at=timezone.now()
        )
        raise
    except Exception as error:
        Evaluation.objects.filter(pk=evaluation.pk).update(
            state=Evaluation.State.FAILED,
            error=str(error) or type(error).__name__,
            finished_at=timezone.now(),
        )
        raise
    Evaluation.objects.filter(pk=evaluation.pk).update(
        state=Evaluation.State.DONE, summary=summary, finished_at=timezone.now()
    )
    evaluation.refresh_from_db()
    return summary


# --- the job platform's hooks ----------------------------------------------------------------


def evaluation_job_finish(*, job, result: Any) -> None:
    """The dashboard's finish of an evaluation job (the evaluate kind's): the worker stored the
    results already; this only makes sure the evaluation says done. Idempotent."""
    Evaluation.objects.filter(job=job, state__in=Evaluation.OPEN_STATES).update(
        state=Evaluation.State.DONE,
        summary=result if isinstance(result, dict) else {},
        finished_at=timezone.now(),
    )


def dpo_benchmark_of(version: PolicyVersion) -> PolicyVersion | None:
    """For an RLHF version: the newest DPO version of the same frozen picks and base that still
    answers — the benchmark it must beat ("what the RLHF version gains over this number is
    what the reward model taught"); None for any other version or when there is none."""
    learned = version.learned_from or {}
    if learned.get("algorithm") != "rlhf" or not learned.get("preference_version"):
        return None
    candidates = PolicyVersion.objects.filter(
        world_id=version.world_id,
        learned_from__algorithm="dpo",
        learned_from__preference_version=learned["preference_version"],
        learned_from__base=learned.get("base"),
    ).exclude(status=PolicyVersion.Status.RELEASED)
    return candidates.exclude(pk=version.pk).order_by("-pk").first()


def evaluation_checkpoint_against_dpo_start(*, version: PolicyVersion, started_by=None):
    """An RLHF version against the DPO version of the same picks and base, on the same
    held-out calls its parent checkpoint uses; None when there is no such DPO version."""
    benchmark = dpo_benchmark_of(version)
    if benchmark is None:
        return None
    evaluation = evaluation_start(
        world=_checkpoint_world(version),
        candidate=version,
        baseline=benchmark,
        started_by=started_by,
        purpose=Evaluation.Purpose.CHECKPOINT,
    )
    return evaluation.job


def version_checkpoint(job, version: PolicyVersion) -> None:
    """Checkpoint a new version against its parent on the held-out calls, and an RLHF version
    also against the DPO version of the same picks: evaluation listens for every version a job
    produced (levers9.jobs.kinds). A checkpoint that cannot start (no parent, a released
    parent, ...) never fails the finish: the job says so."""
    from levers9.jobs.services import job_note

    for start, what in (
        (evaluation_checkpoint_start, "No checkpoint"),
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

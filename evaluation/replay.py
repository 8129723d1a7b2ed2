"""Replaying an evaluation, in the worker: both versions answer at every held-out moment (the
candidate once its endpoint answers), the judge scores every reply and each yardstick it has
no verdict on yet, all of it is kept once, and the summary is computed with what the calls'
kind adds and what the verdict rests on. evaluation_run runs an evaluation once; the job
(evaluation.runner) calls it.

Evaluate puts two versions on the same calls so that the only difference is the policy.
With real calls in the world those are forty real calls, replayed: each version answers at
the call's first four agent turns given the call so far, the judge scores every answer, and
the yardstick at each turn is what the real agent said there and how it scored. Without real
calls they are scripted customers on fixed seeds: a reference call per scenario and seed,
played by the scripted agent, whose first four agent turns are the moments.

On scripted customers the judge only scores wording; the simulator knows who won. So there
both versions also play 1,000 seeded customers on the simulator (evaluation.simulator_play)
and the verdict rests on the paired difference in won share, the judge's win rate kept beside
it. On real calls the judge's win rate stays the verdict, with the judge's measured agreement,
and only from a judge measured above chance (evaluation.verdicts decides, on every page).

Workspace schema: every row read or made here lives in the tenant's schema.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Any

from django.db import transaction
from django.utils import timezone

from arena.judge.world_judge import judge_for_world
from arena.models import Judgement, Reply, moments_dialogues_load
from arena.recorded_replies import recorded_replies_pinned
from evaluation.against_base import against_base_mark
from evaluation.agreement import judge_agreement
from evaluation.errors import EvaluationError
from evaluation.fanout import (
    Answer,
    Ask,
    answers_gather,
    endpoint_slots,
    judge_context,
    judgement_from,
    judgements_in_force,
)
from evaluation.lens import lens_scores_ensure
from evaluation.models import Evaluation, EvaluationAnswer, EvaluationCallSet, HeldOutMoment
from evaluation.simulator_play import simulator_duel, simulator_returns
from evaluation.summary import evaluation_summary_compute
from policies.agents import agent_reply
from policies.models import PolicyVersion
from policies.services import replies_written
from policies.untrained_base import UntrainedBase

# How long a checkpoint waits for its new version's endpoint to start answering.
ANSWER_WAIT_SECONDS = 20 * 60
ANSWER_POLL_SECONDS = 5.0
Progress = Callable[..., None]
Answers = dict[Hashable, Answer]


def _verdict_fields(
    evaluation: Evaluation, summary: dict[str, Any], *, progress: Progress
) -> dict[str, Any]:
    """What the verdict rests on, added beside the judge's figures (which keep their keys):
    on scripted customers the simulated duel, wherever it could be played; everywhere the
    judge's own verdict and its measured agreement."""
    fields: dict[str, Any] = {
        "verdict_source": "judge",
        "judge_verdict": summary.get("verdict", ""),
        "judge_agreement": judge_agreement(
            world=evaluation.world, judge_model=evaluation.judge_model
        ),
    }
    # Against its own base the moves are the version's on both sides: only the words differ,
    # and only the judge can tell them apart.
    if evaluation.call_set.kind == EvaluationCallSet.Kind.SCRIPTED and not evaluation.against_base:
        progress(0, 1, phase="simulator")
        duel = simulator_duel(evaluation)
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
) -> tuple[PolicyVersion, PolicyVersion | UntrainedBase]:
    """The candidate (once its endpoint answers) and the baseline, both able to answer: for
    the against-base checkpoint, the candidate's own base untrained."""
    candidate = _answering_wait(PolicyVersion.objects.get(pk=evaluation.candidate_id), progress)
    if evaluation.against_base:
        baseline = UntrainedBase(candidate)
    else:
        baseline = PolicyVersion.objects.get(pk=evaluation.baseline_id)
    for version in (candidate, baseline):
        if not version.can_answer:
            status = getattr(version, "version", version).get_status_display().lower()
            raise EvaluationError(
                f"{version.label} is {status} and answers "
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
    baseline: PolicyVersion | UntrainedBase,
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
    versions: dict[str, PolicyVersion | UntrainedBase],
) -> dict[tuple[str, int], Reply]:
    """Each version's reply, where it gave one, by (side, held-out moment): an untrained
    base's kept as its base's (policies.ReplyAuthor.untrained_base), never the version's."""
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
    versions: dict[str, PolicyVersion | UntrainedBase],
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


def _judged_check(answers: Answers, versions: dict[str, PolicyVersion | UntrainedBase]) -> None:
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
    its duel on scripted customers, the lens's opening scores on real calls (held-out pairs
    add nothing: they have no outcome to place); and what the verdict rests on."""
    summary = evaluation_summary_compute(evaluation)
    held_calls = list(dict.fromkeys(held_moment.held_out_call for held_moment in held))
    if evaluation.against_base:
        pass  # one version's moves on both sides: no returns to compare, no lens to place
    elif evaluation.call_set.kind == EvaluationCallSet.Kind.SCRIPTED:
        summary["returns"] = simulator_returns(evaluation, held_calls)
    elif evaluation.call_set.kind == EvaluationCallSet.Kind.REAL:
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
            # A version answers as itself, its untrained base (against-base) with no adapter.
            reply=agent_reply,
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
    if evaluation.against_base:
        against_base_mark(evaluation)
    return summary

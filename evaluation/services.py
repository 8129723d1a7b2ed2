"""Writes of evaluation: a world's held-out calls, starting an evaluation (a job on the CPU
pool), running it in the worker, the checkpoint of a new version, and the lens's cached
per-call judge scores.

Evaluate puts two versions on the same calls so that the only difference is the policy.
With real calls in the world those are forty real calls, replayed: each version answers at
the call's first four agent turns given the call so far, the judge scores every answer, and
the yardstick at each turn is what the real agent said there and how it scored. Without real
calls they are scripted customers on fixed seeds: a reference call per scenario and seed,
played by the scripted agent, whose first four agent turns are the moments.
"""

from __future__ import annotations

import hashlib
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from arena import judging
from arena.held_out import (  # noqa: F401 - held_out_call_ids: read here by callers
    HELD_OUT_CALLS,
    TURNS_PER_CALL,
    held_out_call_ids,
    held_out_calls_ensure,
    real_calls_choose,
)
from arena.judges import judge_for_world
from arena.models import Call, Judgement, Moment, Reply, Scenario, Turn, World
from arena.preference_format import dialogue_json
from evaluation.fanout import Answer, Ask, answers_gather
from evaluation.models import (
    Evaluation,
    EvaluationAnswer,
    EvaluationCallSet,
    HeldOutCall,
    HeldOutMoment,
)
from policies.models import PolicyVersion
from trainers.move_strategy import SCRIPTED, strategy_policy_array
from trainers.simulator import LettingsWorld, Persona, episode_dialogue, run_episode

LENS_BANDS = 5
# Scoring this many of a world's openings at once is a bulk load: refresh the statistics.
ANALYZE_AFTER_ROWS = 500
# How long a checkpoint waits for its new version's endpoint to start answering.
ANSWER_WAIT_SECONDS = 20 * 60
ANSWER_POLL_SECONDS = 5.0

Progress = Callable[..., None]


class EvaluationError(ValueError):
    """An evaluation that cannot be started or run; the message says why."""


def _advisory_lock(name: str) -> None:
    """Serialise one kind of write per workspace until the transaction ends."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtext(%s))", [f"{connection.schema_name}:{name}"]
        )


def world_judge(world: World) -> Any:
    """The judge the world names under Environment → Judge (the rubric judge by default)."""
    return judge_for_world(world)


def _slots(judge_or_version: Any) -> int:
    """How many requests one endpoint takes from us at once. Local work (the rubric judge,
    the simulator) gains nothing from threads and takes one."""
    from levers9.providers import CallLimits

    if isinstance(judge_or_version, judging.RubricJudge):
        return 1
    if isinstance(judge_or_version, PolicyVersion) and (
        judge_or_version.provider == PolicyVersion.Provider.SIMULATOR
    ):
        return 1
    return max(1, CallLimits.from_environment().concurrency)


# --- the opening turns of real calls -------------------------------------------------------


def _opening_turns(call_ids: Iterable[int]) -> dict[int, list[tuple[int, str, str]]]:
    """The first four agent turns of each call: (turn index, text, move label)."""
    openings: dict[int, list[tuple[int, str, str]]] = defaultdict(list)
    rows = (
        Turn.objects.filter(call_id__in=list(call_ids), speaker=Turn.Speaker.AGENT)
        .order_by("call_id", "index")
        .values_list("call_id", "index", "text", "move_label")
    )
    for call_id, index, text, move in rows:
        if len(openings[call_id]) < TURNS_PER_CALL:
            openings[call_id].append((index, text, move))
    return openings


def real_openings_ensure(
    *, world: World, call_ids: Iterable[int]
) -> dict[tuple[int, int], tuple[Moment, Reply]]:
    """A moment and the real agent's reply at each of the calls' first four agent turns,
    made once and reused (by Evaluate, the checkpoints and the lens alike)."""
    openings = _opening_turns(call_ids)
    wanted = {(call_id, index) for call_id, turns in openings.items() for index, *_ in turns}
    if not wanted:
        return {}
    calls = list(openings)

    def moments_by_turn() -> dict[tuple[int, int], Moment]:
        found = Moment.objects.filter(kind=Moment.Kind.REAL, call_id__in=calls)
        return {
            (moment.call_id, moment.turn_index): moment
            for moment in found
            if (moment.call_id, moment.turn_index) in wanted
        }

    moments = moments_by_turn()
    missing = wanted - set(moments)
    if missing:
        # The Duel makes real moments too: whoever comes second keeps the first one's.
        Moment.objects.bulk_create(
            [
                Moment(world=world, kind=Moment.Kind.REAL, call_id=call_id, turn_index=index)
                for call_id, index in sorted(missing)
            ],
            ignore_conflicts=True,
        )
        moments = moments_by_turn()
    replies: dict[int, Reply] = {}
    for reply in Reply.objects.filter(
        moment_id__in=[moment.pk for moment in moments.values()], source=Reply.Source.REAL_AGENT
    ).order_by("id"):
        replies.setdefault(reply.moment_id, reply)
    texts = {
        (call_id, index): (text, move)
        for call_id, turns in openings.items()
        for index, text, move in turns
    }
    new_replies = [
        Reply(
            moment=moment,
            text=texts[turn][0],
            move=texts[turn][1] or "",
            source=Reply.Source.REAL_AGENT,
        )
        for turn, moment in moments.items()
        if moment.pk not in replies
    ]
    for reply in Reply.objects.bulk_create(new_replies):
        replies[reply.moment_id] = reply
    return {turn: (moment, replies[moment.pk]) for turn, moment in moments.items()}


def dialogues_load(moments: Iterable[Moment]) -> None:
    """Fill each real moment's dialogue from one query, so nothing reads turns per moment
    (and threads answering the moments never touch the database for them)."""
    real = [moment for moment in moments if moment.kind == Moment.Kind.REAL]
    if not real:
        return
    turns_by_call: dict[int, list[tuple[int, str, str]]] = defaultdict(list)
    last = max(moment.turn_index for moment in real)
    for call_id, index, speaker, text in (
        Turn.objects.filter(call_id__in={moment.call_id for moment in real}, index__lt=last)
        .order_by("call_id", "index")
        .values_list("call_id", "index", "speaker", "text")
    ):
        turns_by_call[call_id].append((index, speaker, text))
    for moment in real:
        moment._dialogue_cache = [
            {"speaker": speaker, "text": text}
            for index, speaker, text in turns_by_call[moment.call_id]
            if index < moment.turn_index
        ]


def judgements_in_force(reply_ids: Iterable[int], judge_model: str) -> dict[int, Judgement]:
    """The newest usable verdict of `judge_model` per reply (a rescoring's, if any): the
    cache a replayed yardstick and the lens read instead of asking the judge again."""
    in_force: dict[int, Judgement] = {}
    for judgement in Judgement.objects.filter(
        reply_id__in=list(reply_ids), judge_model=judge_model, error=""
    ).order_by("created_at", "id"):
        in_force[judgement.reply_id] = judgement
    return in_force


def _judgement_from(answer: Answer, reply: Reply, judge_model: str) -> Judgement:
    """A verdict as scores, a failure as an error, never the one as the other."""
    if answer.verdict is None:
        return Judgement(
            reply=reply, judge_model=judge_model, scores={}, total=None, error=answer.judge_error
        )
    return Judgement(
        reply=reply,
        judge_model=answer.verdict.judge_model,
        scores=dict(answer.verdict.scores),
        reasons=dict(answer.verdict.reasons),
        total=answer.verdict.total,
    )


def _context(moment: Moment) -> tuple[judging.Turn, ...]:
    return tuple(judging.Turn(turn["speaker"], turn["text"]) for turn in moment.dialogue())


# --- the held-out calls -----------------------------------------------------------------------


def _real_set_fill(call_set: EvaluationCallSet) -> None:
    world = call_set.world
    # The world's held-out calls (arena flags them at import), or for a world too small to
    # spare them the same forty by the same hash, still used by the Duel and reward model.
    chosen = held_out_calls_ensure(world=world) or real_calls_choose(world)
    openings = real_openings_ensure(world=world, call_ids=[call.pk for call in chosen])
    held_calls = HeldOutCall.objects.bulk_create(
        HeldOutCall(call_set=call_set, position=position, call=call, outcome=call.outcome)
        for position, call in enumerate(chosen, start=1)
    )
    rows = []
    for held in held_calls:
        turns = sorted(turn for turn in openings if turn[0] == held.call_id)
        for number, turn in enumerate(turns, start=1):
            moment, reply = openings[turn]
            rows.append(
                HeldOutMoment(held_out_call=held, number=number, moment=moment, yardstick=reply)
            )
    HeldOutMoment.objects.bulk_create(rows)


def scripted_episode(scenario: Scenario, seed: int, strategy: dict | None = None):
    """One simulated call of a scenario on a fixed seed: (simulator, episode)."""
    simulated = LettingsWorld(Persona.from_dict(scenario.persona_dict()))
    policy = strategy_policy_array(
        strategy or SCRIPTED, scenario=scenario.slug, max_turns=simulated.max_turns
    )
    return simulated, run_episode(simulated, policy, seed)


def _scripted_seed(scenario: Scenario, round_number: int) -> int:
    return scenario.seed * 1000 + round_number


def _scripted_set_fill(call_set: EvaluationCallSet) -> None:
    """Forty reference calls: the world's scenarios in turn, each on its own fixed seeds,
    played by the scripted agent; its first four agent turns are the moments."""
    world = call_set.world
    scenarios = list(world.scenarios.order_by("slug"))
    known = {
        moment.digest: moment
        for moment in Moment.objects.filter(world=world, kind=Moment.Kind.SYNTHETIC)
        .exclude(digest="")
        .only("id", "digest")
    }
    for position in range(1, HELD_OUT_CALLS + 1):
        scenario = scenarios[(position - 1) % len(scenarios)]
        seed = _scripted_seed(scenario, (position - 1) // len(scenarios))
        simulated, episode = scripted_episode(scenario, seed)
        lines = episode_dialogue(simulated, episode, seed)
        held = HeldOutCall.objects.create(
            call_set=call_set,
            position=position,
            scenario=scenario,
            seed=seed,
            outcome=Call.Outcome.WON if episode.won else Call.Outcome.LOST,
        )
        for turn in range(min(TURNS_PER_CALL, len(episode.moves))):
            dialogue = [
                {"speaker": line["speaker"], "text": line["text"]} for line in lines[: 2 * turn + 1]
            ]
            state = episode.states[turn]
            # The Duel's key for a simulated moment: the same moment is never made twice.
            digest = hashlib.sha1(  # noqa: S324 - a dedupe key, not a security measure
                f"{scenario.slug}|{state}|{dialogue_json(dialogue)}".encode()
            ).hexdigest()
            moment = known.get(digest)
            if moment is None:
                moment = known[digest] = Moment.objects.create(
                    world=world,
                    kind=Moment.Kind.SYNTHETIC,
                    scenario=scenario,
                    simulator_state=state,
                    context=dialogue,
                    digest=digest,
                )
            agent_line = lines[2 * turn + 1]
            yardstick = Reply.objects.create(
                moment=moment,
                text=agent_line["text"],
                move=agent_line.get("move", ""),
                source=Reply.Source.SIMULATOR,
            )
            HeldOutMoment.objects.create(
                held_out_call=held, number=turn + 1, moment=moment, yardstick=yardstick
            )


def call_set_ensure(*, world: World) -> EvaluationCallSet:
    """The world's held-out calls: chosen the first time, then always the same ones."""
    existing = EvaluationCallSet.objects.filter(world=world).first()
    if existing is not None:
        return existing
    with transaction.atomic():
        _advisory_lock(f"evaluation-call-set-{world.pk}")
        existing = EvaluationCallSet.objects.filter(world=world).first()
        if existing is not None:
            return existing
        if world.calls.exists():
            kind = EvaluationCallSet.Kind.REAL
        elif world.scenarios.exists():
            kind = EvaluationCallSet.Kind.SCRIPTED
        else:
            raise EvaluationError(
                f"{world.name} has neither real calls nor scripted customers to evaluate on."
            )
        call_set = EvaluationCallSet.objects.create(
            world=world, kind=kind, turns_per_call=TURNS_PER_CALL
        )
        if kind == EvaluationCallSet.Kind.REAL:
            _real_set_fill(call_set)
        else:
            _scripted_set_fill(call_set)
        return call_set


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
    from levers9.jobs.services import job_start
    from levers9.models import GpuPool
    from levers9.pools import pool_default

    if candidate.pk == baseline.pk:
        raise EvaluationError(
            "Choose two different versions: a version against itself says nothing."
        )
    if seed < 0:
        raise EvaluationError("The seed must be zero or more.")
    # A checkpoint is started when its version is registered, which may be before its
    # endpoint answers; it waits in the queue and runs once it does.
    checkpoint = purpose == Evaluation.Purpose.CHECKPOINT
    _answering_check(candidate, allow_starting=checkpoint)
    _answering_check(baseline)
    try:
        pool = pool_default(gpu=False)
    except GpuPool.DoesNotExist as error:
        raise EvaluationError(str(error)) from error
    call_set = call_set_ensure(world=world)
    with transaction.atomic():
        evaluation = Evaluation.objects.create(
            world=world,
            call_set=call_set,
            candidate=candidate,
            baseline=baseline,
            purpose=purpose,
            seed=seed,
            started_by=started_by,
        )
        what = "Checkpoint" if checkpoint else "Evaluate"
        job = job_start(
            kind="evaluate",
            trainer="evaluate",
            spec={
                "evaluation": evaluation.pk,
                "pack": world.slug,
                "candidate": candidate.number,
                "baseline": baseline.number,
                "seed": seed,
                "purpose": purpose,
            },
            pool=pool,
            title=f"{what} {candidate.label} vs {baseline.label} on {world.name}",
            started_by=started_by,
            world=world,
            parent_version=baseline,
            finish_needs={"evaluation": evaluation.pk},
        )
        evaluation.job = job
        evaluation.save(update_fields=["job"])
    return evaluation


def _checkpoint_world(version: PolicyVersion) -> World:
    """Where a new version is checkpointed: the world it learned in, else the world of real
    calls, else the simulated one."""
    pack = (version.learned_from or {}).get("pack")
    world = World.objects.filter(slug=pack).first() if pack else None
    if world is not None and (world.calls.exists() or world.scenarios.exists()):
        return world
    world = (
        World.objects.filter(calls__isnull=False).distinct().order_by("pk").first()
        or World.objects.filter(scenarios__isnull=False).distinct().order_by("pk").first()
    )
    if world is None:
        raise EvaluationError("No world has real calls or scripted customers to checkpoint on.")
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
        if totals:
            returns[side] = {
                "mean_return": round(sum(totals) / len(totals), 4),
                "won_share": round(won / len(totals), 4),
                "calls": len(totals),
            }
    return returns


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


def _evaluate(evaluation: Evaluation, progress: Progress) -> dict[str, Any]:
    from evaluation.selectors import evaluation_summary_compute

    candidate = _answering_wait(PolicyVersion.objects.get(pk=evaluation.candidate_id), progress)
    baseline = PolicyVersion.objects.get(pk=evaluation.baseline_id)
    for version in (candidate, baseline):
        if not version.can_answer:
            raise EvaluationError(
                f"{version.label} is {version.get_status_display().lower()} and answers "
                "nothing: a version that cannot answer cannot be evaluated."
            )
    world = evaluation.world
    judge = world_judge(world)
    Evaluation.objects.filter(pk=evaluation.pk).update(judge_model=judge.model_name)
    evaluation.judge_model = judge.model_name
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
        raise EvaluationError(f"{world.name} has no held-out moments to evaluate on.")
    dialogues_load(held_moment.moment for held_moment in held)
    yardsticks = judgements_in_force([h.yardstick_id for h in held], judge.model_name)
    asks: list[Ask] = []
    for held_moment in held:
        context = _context(held_moment.moment)
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

    def on_answer(done: int, total: int) -> None:
        progress(done, total, phase="replies")

    answers = answers_gather(
        asks,
        judge=judge,
        slots_per_version=max(_slots(candidate), _slots(baseline)),
        judge_slots=_slots(judge),
        on_answer=on_answer,
    )
    by_pk = {held_moment.pk: held_moment for held_moment in held}
    with transaction.atomic():
        # A rerun of the same evaluation (a redelivered task) starts from a clean slate.
        EvaluationAnswer.objects.filter(evaluation=evaluation).delete()
        Judgement.objects.bulk_create(
            _judgement_from(answer, by_pk[pk].yardstick, judge.model_name)
            for (kind, pk), answer in answers.items()
            if kind == "yardstick"
        )
        version_answers = [
            (side, pk, answer) for (side, pk), answer in answers.items() if side != "yardstick"
        ]
        versions = {"candidate": candidate, "baseline": baseline}
        replies = Reply.objects.bulk_create(
            Reply(
                moment=by_pk[pk].moment,
                text=answer.text,
                move=answer.move or "",
                source=Reply.Source.POLICY,
                policy_version=versions[side],
            )
            for side, pk, answer in version_answers
            if not answer.error
        )
        reply_of = dict(
            zip(
                [(side, pk) for side, pk, answer in version_answers if not answer.error],
                replies,
                strict=True,
            )
        )
        judgements = Judgement.objects.bulk_create(
            _judgement_from(answer, reply_of[(side, pk)], judge.model_name)
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
    for side, version in (("candidate", candidate), ("baseline", baseline)):
        judged = [a for (s, _pk), a in answers.items() if s == side and a.verdict is not None]
        if not judged:
            problems = [a.error or a.judge_error for (s, _pk), a in answers.items() if s == side]
            raise EvaluationError(
                f"{version.label} got no judged answer at all: {problems[0] if problems else ''}"
            )
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
            world=world, judge=judge, on_answer=lens_progress
        )
    return summary


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


def evaluation_job_finish(*, job, result: Any) -> None:
    """The dashboard's finish of an evaluation job (the evaluate kind's): the worker stored the
    results already; this only makes sure the evaluation says done. Idempotent."""
    Evaluation.objects.filter(job=job, state__in=Evaluation.OPEN_STATES).update(
        state=Evaluation.State.DONE,
        summary=result if isinstance(result, dict) else {},
        finished_at=timezone.now(),
    )


def version_checkpoint(job, version: PolicyVersion) -> None:
    """Checkpoint a new version against its parent on the held-out calls: evaluation listens
    for every version a job produced (levers9.jobs.kinds). A checkpoint that cannot start (no
    parent, a released parent, ...) never fails the finish: the job says so."""
    from levers9.jobs.services import job_note

    try:
        with transaction.atomic():  # a savepoint: only the checkpoint rolls back
            evaluation_checkpoint_start(version=version, started_by=job.started_by)
    except EvaluationError as error:
        job_note(job.pk, f"No checkpoint: {error}")


def evaluation_job_ended(job) -> None:
    """The evaluate kind's end hook: an evaluation whose job ended without it says so."""
    evaluations_reconcile(job_id=job.pk)


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
        if job.state == Job.State.DONE:
            state, error = Evaluation.State.FAILED, "The job ended without storing results."
        elif job.state == Job.State.CANCELLED:
            state, error = Evaluation.State.CANCELLED, "Cancelled."
        else:
            state, error = Evaluation.State.FAILED, job.error or "The job failed."
        changed += Evaluation.objects.filter(
            pk=evaluation.pk, state__in=Evaluation.OPEN_STATES
        ).update(state=state, error=error, finished_at=job.finished_at or timezone.now())
    return changed


# --- the lead-to-order lens ------------------------------------------------------------------


def lens_scores_ensure(
    *, world: World, judge: Any = None, on_answer: Callable[[int, int], None] | None = None
) -> int:
    """Judge the real agent's opening turns of every call of the world not judged yet by the
    world's judge (the cache the lens reads); returns how many it judged now."""
    judge = judge or world_judge(world)
    openings = real_openings_ensure(world=world, call_ids=world.calls.values_list("id", flat=True))
    if not openings:
        return 0
    judged = judgements_in_force(
        [reply.pk for _moment, reply in openings.values()], judge.model_name
    )
    missing = [(moment, reply) for moment, reply in openings.values() if reply.pk not in judged]
    if not missing:
        return 0
    dialogues_load(moment for moment, _reply in missing)
    asks = [
        Ask(reply.pk, moment, _context(moment), text=reply.text, move=reply.move)
        for moment, reply in missing
    ]
    answers = answers_gather(
        asks, judge=judge, slots_per_version=1, judge_slots=_slots(judge), on_answer=on_answer
    )
    replies = {reply.pk: reply for _moment, reply in missing}
    Judgement.objects.bulk_create(
        (_judgement_from(answer, replies[pk], judge.model_name) for pk, answer in answers.items()),
        batch_size=2000,
    )
    if len(missing) >= ANALYZE_AFTER_ROWS:
        _tables_analyze(Moment, Reply, Judgement)
    return len(missing)


def _tables_analyze(*models: Any) -> None:
    """Refresh the planner's statistics after a bulk load: on a table it still thinks empty,
    the lens's join picks nested loops and takes half a second instead of five milliseconds.
    (Autovacuum would get there too, but only later.)"""
    with connection.cursor() as cursor:
        for model in models:
            cursor.execute(f'ANALYZE "{model._meta.db_table}"')


def world_score_vs_outcome(
    *, world: World, bands: int = LENS_BANDS, evaluation: Evaluation | None = None
) -> dict[str, Any]:
    """The lens's numbers. The rubric judge is quick, so its missing scores are judged
    here; a model judge's are judged by the evaluation jobs, and the lens says how many
    calls it covers until then."""
    from evaluation.selectors import score_vs_outcome

    judge = world_judge(world)
    lens = score_vs_outcome(
        world=world, judge_model=judge.model_name, bands=bands, evaluation=evaluation
    )
    incomplete = lens["calls_scored"] < lens["calls_with_openings"]
    if incomplete and isinstance(judge, judging.RubricJudge):
        lens_scores_ensure(world=world, judge=judge)
        lens = score_vs_outcome(
            world=world, judge_model=judge.model_name, bands=bands, evaluation=evaluation
        )
    return lens

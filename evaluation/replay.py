"""Replaying recorded moments to the versions and the judge: what Evaluate, the checkpoints,
the held-out calls and the lens share. The real calls' opening turns as moments with the real
agent's replies (made once), their dialogues loaded in one query, how many requests each
endpoint takes from us, an ask's context, and an answer of the fan-out as
a judgement row, next to the verdicts already in force that spare asking the judge again.

Workspace schema: every row read or made here lives in the tenant's schema.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from arena.held_out import TURNS_PER_CALL
from arena.models import Judgement, Moment, Reply, Turn, World
from evaluation.fanout import Answer
from policies.models import PolicyVersion
from trainers.judge.rubric import RubricJudge
from trainers.judge.rubric import Turn as JudgeTurn

OpeningTurns = dict[int, list[tuple[int, str, str]]]


def endpoint_slots(judge_or_version: Any) -> int:
    """How many requests one endpoint takes from us at once. Local work (the rubric judge,
    the simulator) gains nothing from threads and takes one."""
    from levers9.providers import CallLimits

    if isinstance(judge_or_version, RubricJudge):
        return 1
    if isinstance(judge_or_version, PolicyVersion) and (
        judge_or_version.provider == PolicyVersion.Provider.SIMULATOR
    ):
        return 1
    return max(1, CallLimits.from_environment().concurrency)


# --- the opening turns of real calls -------------------------------------------------------


def _opening_turns(call_ids: Iterable[int]) -> OpeningTurns:
    """The first four agent turns of each call: (turn index, text, move label)."""
    openings: OpeningTurns = defaultdict(list)
    rows = (
        Turn.objects.filter(call_id__in=list(call_ids), speaker=Turn.Speaker.AGENT)
        .order_by("call_id", "index")
        .values_list("call_id", "index", "text", "move_label")
    )
    for call_id, index, text, move in rows:
        if len(openings[call_id]) < TURNS_PER_CALL:
            openings[call_id].append((index, text, move))
    return openings


def _real_moments_by_turn(
    calls: list[int], wanted: set[tuple[int, int]]
) -> dict[tuple[int, int], Moment]:
    found = Moment.objects.filter(kind=Moment.Kind.REAL, call_id__in=calls)
    return {
        (moment.call_id, moment.turn_index): moment
        for moment in found
        if (moment.call_id, moment.turn_index) in wanted
    }


def _real_moments_ensure(
    *, world: World, calls: list[int], wanted: set[tuple[int, int]]
) -> dict[tuple[int, int], Moment]:
    """The real moment at each wanted (call, turn index), made where there is none yet."""
    moments = _real_moments_by_turn(calls, wanted)
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
        moments = _real_moments_by_turn(calls, wanted)
    return moments


def _real_agent_replies_ensure(
    *, moments: dict[tuple[int, int], Moment], openings: OpeningTurns
) -> dict[int, Reply]:
    """The real agent's reply at each moment (by moment id), made where there is none yet."""
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
    return replies


def real_openings_ensure(
    *, world: World, call_ids: Iterable[int]
) -> dict[tuple[int, int], tuple[Moment, Reply]]:
    """A moment and the real agent's reply at each of the calls' first four agent turns,
    made once and reused (by Evaluate, the checkpoints and the lens alike)."""
    openings = _opening_turns(call_ids)
    wanted = {(call_id, index) for call_id, turns in openings.items() for index, *_ in turns}
    if not wanted:
        return {}
    moments = _real_moments_ensure(world=world, calls=list(openings), wanted=wanted)
    replies = _real_agent_replies_ensure(moments=moments, openings=openings)
    return {turn: (moment, replies[moment.pk]) for turn, moment in moments.items()}


# --- what the fan-out is asked with and what its answers become ---------------------------


def judgements_in_force(reply_ids: Iterable[int], judge_model: str) -> dict[int, Judgement]:
    """The newest usable verdict of `judge_model` per reply (a rescoring's, if any): the
    cache a replayed yardstick and the lens read instead of asking the judge again."""
    in_force: dict[int, Judgement] = {}
    for judgement in Judgement.objects.filter(
        reply_id__in=list(reply_ids), judge_model=judge_model, error=""
    ).order_by("created_at", "id"):
        in_force[judgement.reply_id] = judgement
    return in_force


def judgement_from(answer: Answer, reply: Reply, judge_model: str) -> Judgement:
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


def judge_context(moment: Moment) -> tuple[JudgeTurn, ...]:
    """The dialogue before a moment, as the judge reads it."""
    return tuple(JudgeTurn(turn["speaker"], turn["text"]) for turn in moment.dialogue())

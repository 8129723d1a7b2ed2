"""The real calls' opening turns as moments with the real agent's replies: a moment and the
real agent's reply at each of a call's first four agent turns, made once and reused by the
held-out calls (evaluation.call_sets) and the lens (evaluation.lens).

Workspace schema: every row read or made here lives in the tenant's schema.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from arena.held_out import TURNS_PER_CALL
from arena.models import Moment, Reply, Turn, World

OpeningTurns = dict[int, list[tuple[int, str, str]]]


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

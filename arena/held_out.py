"""A world's held-out calls: the real calls Evaluate replays, kept out of everything that learns.

Chosen once, when a world first holds enough calls to spare them (at import: a write), and
flagged on the calls themselves, so every reader — the Duel's pairing, the outcome examples of
the reward model, Evaluate's call set — asks one pure question (`held_out_call_ids`) and a
checkpoint never scores a version on calls it was trained on.

A world with fewer than twice as many calls as Evaluate holds out cannot spare them: nothing is
kept back there, and the Duel and the reward model use every call.

Imported preference pairs (arena.services.preferences) are held out the same way: a world whose
picks came from a file keeps a fixed set of them back, chosen by a hash of each pair's id once it
holds enough to spare them, flagged on the pair's moment (`held_out_pair_moment_ids`). Evaluate
replays those moments in a world with neither real calls nor scripted customers; the judge's fit
and the wording trainers never read them. A frozen preference version still holds every pick
(it is what the reviewers picked): only what learns leaves the held-out ones out.
"""

from __future__ import annotations

import hashlib

from django.db.models import Count, Q

from arena.models import Call, Moment, Pick, Turn, World

HELD_OUT_CALLS = 40
TURNS_PER_CALL = 4
# As many moments as a set of real calls replays at most (40 calls x 4 agent turns). Each pair
# is its own call in the summary's bootstrap, so this is also the number of units the interval
# rests on: 80 would leave a win rate of 0.60 with an interval reaching below 0.5.
HELD_OUT_PAIRS = HELD_OUT_CALLS * TURNS_PER_CALL


def _call_order_key(external_id: str) -> str:
    # A hash of the id spreads the choice over the whole file, the same way every time and
    # in every world that holds the same calls (or imported pairs), whatever order they were
    # imported in.
    return hashlib.sha256(external_id.encode()).hexdigest()


def real_calls_choose(world: World) -> list[Call]:
    """Forty calls, chosen by a hash of their ids: calls with four agent turns first."""
    calls = list(
        world.calls.annotate(
            agent_turns=Count("turns", filter=Q(turns__speaker=Turn.Speaker.AGENT))
        ).filter(agent_turns__gte=1)
    )
    calls.sort(
        key=lambda call: (
            call.agent_turns < TURNS_PER_CALL,
            _call_order_key(call.external_id),
        )
    )
    chosen = calls[:HELD_OUT_CALLS]
    chosen.sort(key=lambda call: _call_order_key(call.external_id))
    return chosen


def held_out_call_ids(*, world: World) -> set[int]:
    """The ids of the world's held-out calls (empty until it has enough to spare). A read."""
    return set(Call.objects.filter(world=world, held_out=True).values_list("pk", flat=True))


def held_out_calls_ensure(*, world: World) -> list[Call]:
    """Choose the world's held-out calls if it can spare them and has none yet; then always
    the same ones (the choice is never redrawn). Returns them in their replay order."""
    held = list(Call.objects.filter(world=world, held_out=True))
    if not held and world.calls.count() >= 2 * HELD_OUT_CALLS:
        held = real_calls_choose(world)
        Call.objects.filter(pk__in=[call.pk for call in held]).update(held_out=True)
    held.sort(key=lambda call: _call_order_key(call.external_id))
    return held


# --- imported preference pairs ---------------------------------------------------------------


def _imported_picks(world: World):
    """The world's picks that came from a preference file, each on its own imported moment."""
    return (
        Pick.objects.filter(world=world, pair__moment__kind=Moment.Kind.IMPORTED)
        .exclude(external_id="")
        .select_related("pair__moment", "chosen_reply", "rejected_reply")
    )


def held_out_pair_moment_ids(*, world: World) -> set[int]:
    """The moments of the world's held-out imported pairs (empty until it has enough to spare
    them). A read; every learner asks it beside `held_out_call_ids`."""
    return set(
        Moment.objects.filter(world=world, kind=Moment.Kind.IMPORTED, held_out=True).values_list(
            "pk", flat=True
        )
    )


def held_out_pairs_ensure(*, world: World) -> list[Pick]:
    """Choose the world's held-out imported pairs if it can spare them and has none yet: the
    first HELD_OUT_PAIRS by a hash of each pair's id in its file (the same ones whatever order
    they were imported in), flagged on their moments; then always the same ones. Returns their
    picks in replay order (empty while the world is too small to spare them)."""
    picks = _imported_picks(world)
    held = list(picks.filter(pair__moment__held_out=True))
    if not held:
        every = list(picks)
        if len(every) < 2 * HELD_OUT_PAIRS:
            return []
        every.sort(key=lambda pick: _call_order_key(pick.external_id))
        held = every[:HELD_OUT_PAIRS]
        Moment.objects.filter(pk__in=[pick.pair.moment_id for pick in held]).update(held_out=True)
    held.sort(key=lambda pick: _call_order_key(pick.external_id))
    return held

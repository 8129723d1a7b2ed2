"""A world's held-out calls: the real calls Evaluate replays, kept out of everything that learns.

Chosen once, when a world first holds enough calls to spare them (at import: a write), and
flagged on the calls themselves, so every reader — the Duel's pairing, the outcome examples of
the reward model, Evaluate's call set — asks one pure question (`held_out_call_ids`) and a
checkpoint never scores a version on calls it was trained on.

A world with fewer than twice as many calls as Evaluate holds out cannot spare them: nothing is
kept back there, and the Duel and the reward model use every call.
"""

from __future__ import annotations

import hashlib

from django.db.models import Count, Q

from arena.models import Call, Turn, World

HELD_OUT_CALLS = 40
TURNS_PER_CALL = 4


def _call_order_key(external_id: str) -> str:
    # A hash of the id spreads the choice over the whole file, the same way every time and
    # in every world that holds the same calls, whatever order they were imported in.
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

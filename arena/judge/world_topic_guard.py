"""Each world's on-topic guard, built from the world itself and cached: its name, description,
the system prompt its agent opens with, its moves' descriptions, and the agent turns of its real
calls (never a held-out call's: arena.held_out) — or, in a world whose customers are simulated,
the simulator's agent lines. The model and its threshold are trainers.judge.topic's (the
threshold is the world's own: a low percentile of its own agent turns scored on calls held out
by fold); what the guard does to a judge's totals is trainers.judge.topic_guard's.

The resolver (arena.judge.world_judge.judge_for_world) wraps every judge it returns with the
world's guard, so the Duel's pairs, Evaluate, the lens and the scoring API all get it.

Guards are cached per workspace schema and world, and rebuilt when what they are built from
changes (a hash of the world's texts and moves, and its calls: count, newest id, held out).
Workspace schema.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict

from django.db import connection
from django.db.models import Count, Max, Q

from arena.models import Call, World
from arena.models import Turn as CallTurn
from trainers.judge.topic import TopicUnit, topic_model_fit
from trainers.judge.topic_guard import TopicGuard

CACHED_WORLDS = 8

_lock = threading.Lock()
_guards: OrderedDict[tuple[str, int, str], TopicGuard] = OrderedDict()


# --- what a world's guard is built from -------------------------------------------------------


def topic_texts(world: World) -> list[str]:
    """The world's words about itself: name, description, system prompt, moves."""
    texts = [world.name, world.description, world.agent_system_prompt]
    for move in world.moves or []:
        if isinstance(move, dict):
            texts.append(str(move.get("name", "")).replace("_", " "))
            texts.append(str(move.get("description", "")))
    return [text for text in texts if text]


def topic_units(world: World) -> list[TopicUnit]:
    """The world's own agent turns with the call so far: its real calls' (held-out calls never),
    else the simulator's agent lines where its customers are simulated."""
    rows = (
        CallTurn.objects.filter(call__world=world, call__held_out=False)
        .order_by("call_id", "index")
        .values_list("call_id", "speaker", "text")
    )
    units: list[TopicUnit] = []
    call_turns: list[dict[str, str]] = []
    current = None
    for call_id, speaker, text in rows.iterator(chunk_size=5000):
        if call_id != current:
            current, call_turns = call_id, []
        if speaker == CallTurn.Speaker.AGENT:
            units.append(TopicUnit(str(call_id), tuple(call_turns), text))
        call_turns.append({"speaker": speaker, "text": text})
    if not units and world.has_simulator:
        from trainers.moves.simulator_wording import AGENT_LINES, OBJECTION_ANSWERS

        lines = [*AGENT_LINES.values(), *OBJECTION_ANSWERS.values()]
        units = [TopicUnit(f"line-{number}", (), line) for number, line in enumerate(lines)]
    return units


def _fingerprint(world: World) -> str:
    """Changes whenever what the guard is built from changes: the world's texts and moves, an
    import (count, newest id), choosing the held-out calls, gaining a simulator."""
    calls = Call.objects.filter(world=world).aggregate(
        count=Count("id"), newest=Max("id"), held=Count("id", filter=Q(held_out=True))
    )
    content = json.dumps(
        [
            world.name,
            world.description,
            world.system_prompt,
            world.moves,
            [calls["count"], calls["newest"], calls["held"]],
            world.scenarios.exists(),
        ],
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(content.encode()).hexdigest()


def topic_guard_for_world(world: World) -> TopicGuard:
    """The world's guard, built once per change of what it is built from (per workspace: the
    same world id in two schemas is two worlds)."""
    key = (connection.schema_name, world.pk, _fingerprint(world))
    with _lock:
        # Built under the lock: Evaluate's threads wait for one build, not one each.
        if key not in _guards:
            units = topic_units(world)
            _guards[key] = TopicGuard(topic_model_fit(topic_texts(world), units), units)
        _guards.move_to_end(key)
        while len(_guards) > CACHED_WORLDS:
            _guards.popitem(last=False)
        return _guards[key]

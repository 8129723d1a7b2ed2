"""The held-out calls of a world's evaluations (its EvaluationCallSet): chosen the first time
a world is evaluated, then always the same ones, so that every evaluation in that world runs
on the same calls and two evaluations can be compared.

With real calls in the world those are forty real calls, replayed at their first four agent
turns, the real agent's reply at each the yardstick. Without real calls they are scripted
customers on fixed seeds: a reference call per scenario and seed, played by the scripted
agent, whose first four agent turns are the moments. With neither, but imported preference
pairs, they are the pairs the world holds out (arena.held_out): each is a call of one moment,
the reviewers' chosen reply its yardstick, and the summary's bootstrap by call resamples pairs.
"""

from __future__ import annotations

import hashlib

from django.db import connection, transaction

from arena.held_out import (
    HELD_OUT_CALLS,
    HELD_OUT_PAIRS,
    TURNS_PER_CALL,
    held_out_calls_ensure,
    held_out_pair_moment_ids,
    held_out_pairs_ensure,
    real_calls_choose,
)
from arena.models import Call, Moment, Reply, Scenario, World
from arena.preference_format import dialogue_json
from evaluation.errors import EvaluationError
from evaluation.models import EvaluationCallSet, HeldOutCall, HeldOutMoment
from evaluation.openings import real_openings_ensure
from trainers.moves.simulator import LettingsWorld, Persona, episode_dialogue, run_episode
from trainers.moves.strategy import SCRIPTED, strategy_policy_array


def _advisory_lock(name: str) -> None:
    """Serialise one kind of write per workspace until the transaction ends."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtext(%s))", [f"{connection.schema_name}:{name}"]
        )


# --- real calls, replayed ---------------------------------------------------------------------


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


# --- scripted customers on fixed seeds ----------------------------------------------------------


def scripted_episode(scenario: Scenario, seed: int, strategy: dict | None = None):
    """One simulated call of a scenario on a fixed seed: (simulator, episode)."""
    simulated = LettingsWorld(Persona.from_dict(scenario.persona_dict()))
    policy = strategy_policy_array(
        strategy or SCRIPTED, scenario=scenario.slug, max_turns=simulated.max_turns
    )
    return simulated, run_episode(simulated, policy, seed)


def _scripted_seed(scenario: Scenario, round_number: int) -> int:
    return scenario.seed * 1000 + round_number


def _synthetic_moments_by_digest(world: World) -> dict[str, Moment]:
    return {
        moment.digest: moment
        for moment in Moment.objects.filter(world=world, kind=Moment.Kind.SYNTHETIC)
        .exclude(digest="")
        .only("id", "digest")
    }


def _synthetic_moment(
    *,
    world: World,
    scenario: Scenario,
    state: int,
    dialogue: list[dict[str, str]],
    known: dict[str, Moment],
) -> Moment:
    """The simulated moment of this scenario, state and dialogue: the known one, else new."""
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
    return moment


def _scripted_call_hold(
    *,
    call_set: EvaluationCallSet,
    position: int,
    scenario: Scenario,
    seed: int,
    known: dict[str, Moment],
) -> None:
    """One reference call played by the scripted agent, held out with its first four agent
    turns as the moments and the scripted agent's words there as the yardsticks."""
    world = call_set.world
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
        moment = _synthetic_moment(
            world=world,
            scenario=scenario,
            state=episode.states[turn],
            dialogue=dialogue,
            known=known,
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


def _scripted_set_fill(call_set: EvaluationCallSet) -> None:
    """Forty reference calls: the world's scenarios in turn, each on its own fixed seeds,
    played by the scripted agent; its first four agent turns are the moments."""
    world = call_set.world
    scenarios = list(world.scenarios.order_by("slug"))
    known = _synthetic_moments_by_digest(world)
    for position in range(1, HELD_OUT_CALLS + 1):
        scenario = scenarios[(position - 1) % len(scenarios)]
        seed = _scripted_seed(scenario, (position - 1) // len(scenarios))
        _scripted_call_hold(
            call_set=call_set, position=position, scenario=scenario, seed=seed, known=known
        )


# --- held-out preference pairs -----------------------------------------------------------------


def _pairs_set_fill(call_set: EvaluationCallSet) -> None:
    """One call per held-out pair, in their replay order: its moment, where both versions
    answer, and the reply the reviewer chose there as the yardstick."""
    held = held_out_pairs_ensure(world=call_set.world)
    held_calls = HeldOutCall.objects.bulk_create(
        HeldOutCall(call_set=call_set, position=position) for position in range(1, len(held) + 1)
    )
    HeldOutMoment.objects.bulk_create(
        HeldOutMoment(
            held_out_call=held_call, number=1, moment=pick.pair.moment, yardstick=pick.chosen_reply
        )
        for held_call, pick in zip(held_calls, held, strict=True)
    )


# --- the set --------------------------------------------------------------------------------


def call_set_kind(world: World) -> str:
    """Which calls the world's evaluations replay: real calls where the world has them, else
    its scripted customers, else its held-out imported pairs; EvaluationError saying why when
    it has none of them. A read."""
    if world.calls.exists():
        return EvaluationCallSet.Kind.REAL
    if world.scenarios.exists():
        return EvaluationCallSet.Kind.SCRIPTED
    if held_out_pair_moment_ids(world=world):
        return EvaluationCallSet.Kind.PAIRS
    if Moment.objects.filter(world=world, kind=Moment.Kind.IMPORTED).exists():
        raise EvaluationError(
            f"{world.name} holds too few imported preference pairs to spare any for evaluation: "
            f"it holds {HELD_OUT_PAIRS} back once it has {2 * HELD_OUT_PAIRS}."
        )
    raise EvaluationError(
        f"{world.name} has neither real calls, scripted customers nor held-out preference "
        "pairs to evaluate on."
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
        kind = call_set_kind(world)
        call_set = EvaluationCallSet.objects.create(
            world=world,
            kind=kind,
            turns_per_call=1 if kind == EvaluationCallSet.Kind.PAIRS else TURNS_PER_CALL,
        )
        fill = {
            EvaluationCallSet.Kind.REAL: _real_set_fill,
            EvaluationCallSet.Kind.SCRIPTED: _scripted_set_fill,
            EvaluationCallSet.Kind.PAIRS: _pairs_set_fill,
        }[kind]
        fill(call_set)
        return call_set

"""A world's held-out calls are chosen once and kept: forty real calls replayed at their first
four agent turns, or forty scripted customers on fixed seeds."""

from __future__ import annotations

import json

from arena.held_out import HELD_OUT_CALLS, TURNS_PER_CALL
from arena.models import Moment, Reply, Turn
from arena.services.calls import calls_import
from arena.services.worlds import world_create
from evaluation.call_sets import call_set_ensure
from evaluation.models import EvaluationCallSet, HeldOutCall, HeldOutMoment
from levers9.shipped_data import PERSUASION_CALLS


def test_it_chooses_forty_real_calls_once_and_keeps_them(real_world):
    call_set = call_set_ensure(world=real_world)
    assert call_set.kind == EvaluationCallSet.Kind.REAL
    held = list(call_set.calls.select_related("call"))
    assert len(held) == HELD_OUT_CALLS
    assert len({h.call_id for h in held}) == HELD_OUT_CALLS
    assert [h.position for h in held] == list(range(1, HELD_OUT_CALLS + 1))
    chosen = [h.call_id for h in held]

    # More calls arrive: the set is the same set, not a new draw.
    extra = {
        "id": "late-arrival",
        "outcome": "won",
        "turns": [{"speaker": "agent", "text": f"Hello {n}"} for n in range(5)],
    }
    calls_import(world=real_world, text=json.dumps(extra))
    again = call_set_ensure(world=real_world)
    assert again.pk == call_set.pk
    assert [h.call_id for h in again.calls.all()] == chosen
    assert EvaluationCallSet.objects.filter(world=real_world).count() == 1


def test_it_replays_each_real_call_at_its_first_four_agent_turns(real_world):
    call_set = call_set_ensure(world=real_world)
    for held in HeldOutCall.objects.filter(call_set=call_set).select_related("call"):
        agent_turns = list(
            Turn.objects.filter(call=held.call, speaker="agent")
            .order_by("index")
            .values_list("index", "text")[:TURNS_PER_CALL]
        )
        moments = list(held.moments.select_related("moment", "yardstick").order_by("number"))
        assert [m.number for m in moments] == list(range(1, len(agent_turns) + 1))
        for held_moment, (index, text) in zip(moments, agent_turns, strict=True):
            assert held_moment.moment.kind == Moment.Kind.REAL
            assert held_moment.moment.call_id == held.call_id
            assert held_moment.moment.turn_index == index
            # The yardstick is what the real agent said there.
            assert held_moment.yardstick.source == Reply.Source.REAL_AGENT
            assert held_moment.yardstick.text == text
        assert held.outcome == held.call.outcome


def test_it_chooses_the_same_calls_from_the_same_data_in_another_world(real_world):
    """The choice is a function of the call ids, not of the import order or the world."""
    first = [h.call.external_id for h in call_set_ensure(world=real_world).calls.all()]
    lines = PERSUASION_CALLS.read_text().splitlines()
    other = world_create(slug="persuasion-again", name="The same calls, reversed")
    calls_import(world=other, text="\n".join(reversed(lines)))
    assert [h.call.external_id for h in call_set_ensure(world=other).calls.all()] == first


def test_it_plays_scripted_customers_on_fixed_seeds_without_real_calls(lettings):
    call_set = call_set_ensure(world=lettings)
    assert call_set.kind == EvaluationCallSet.Kind.SCRIPTED
    held = list(call_set.calls.select_related("scenario"))
    assert len(held) == HELD_OUT_CALLS
    scenario_count = lettings.scenarios.count()
    # Every scenario in turn, each on its own seeds: no two held-out calls alike.
    assert {h.scenario_id for h in held[:scenario_count]} == set(
        lettings.scenarios.values_list("pk", flat=True)
    )
    assert len({(h.scenario_id, h.seed) for h in held}) == HELD_OUT_CALLS
    moments = HeldOutMoment.objects.filter(held_out_call__call_set=call_set)
    assert 0 < moments.count() <= HELD_OUT_CALLS * TURNS_PER_CALL
    for held_moment in moments.select_related("moment", "yardstick"):
        assert held_moment.moment.kind == Moment.Kind.SYNTHETIC
        assert held_moment.moment.dialogue()[-1]["speaker"] == "customer"
        assert held_moment.yardstick.source == Reply.Source.SIMULATOR


def test_it_makes_the_same_scripted_moments_in_a_fresh_world(lettings):
    """Fixed seeds: building the set again from nothing gives the same moments."""

    def dialogues() -> list:
        return [
            (h.held_out_call.position, h.number, h.moment.digest, h.yardstick.text)
            for h in HeldOutMoment.objects.filter(held_out_call__call_set__world=lettings)
            .select_related("held_out_call", "moment", "yardstick")
            .order_by("held_out_call__position", "number")
        ]

    call_set_ensure(world=lettings)
    first = dialogues()
    EvaluationCallSet.objects.filter(world=lettings).delete()
    call_set_ensure(world=lettings)
    assert dialogues() == first


def test_the_duel_and_the_outcome_reward_model_never_use_the_held_out_calls(real_world):
    """A checkpoint must not score a version on calls it learned from: the Duel pairs no
    moment of a held-out call, and the outcome examples of the RLHF card leave them out."""
    from arena.held_out import held_out_call_ids
    from arena.models import DuelPair
    from arena.services.pairs import duel_pairs_generate
    from training.wording import _outcome_examples

    duel_pairs_generate(world=real_world, count=60)  # before any evaluation ran
    held = held_out_call_ids(world=real_world)
    assert len(held) == HELD_OUT_CALLS
    paired = set(
        DuelPair.objects.filter(world=real_world).values_list("moment__call_id", flat=True)
    )
    assert len(paired) >= 30
    assert not paired & held
    held_ids = set(real_world.calls.filter(pk__in=held).values_list("external_id", flat=True))
    examples = _outcome_examples(real_world)
    assert examples
    assert not {example["call_id"] for example in examples} & held_ids


def test_a_world_too_small_to_spare_forty_calls_keeps_none_back(in_workspace, datasets):
    from arena.held_out import held_out_call_ids

    world = world_create(slug="few", name="Few calls")
    lines = PERSUASION_CALLS.read_text().splitlines()[: 2 * HELD_OUT_CALLS - 1]
    calls_import(world=world, text="\n".join(lines))
    assert held_out_call_ids(world=world) == set()
    assert not EvaluationCallSet.objects.filter(world=world).exists()

"""The on-topic guard every judge of a world passes through (arena.judge.world_topic_guard,
applied by arena.judge.world_judge.judge_for_world): another business's line cannot outrank an
on-topic reply, an on-topic reply's verdict is the judge's own, a guard never reads another
workspace's world or a held-out call, and a change to the world rebuilds it."""

from __future__ import annotations

import json

import pytest
from django_tenants.utils import schema_context

from arena.held_out import HELD_OUT_CALLS, held_out_call_ids
from arena.judge.world_judge import judge_for_world
from arena.judge.world_topic_guard import topic_guard_for_world, topic_texts
from arena.models import Call, World
from arena.services.calls import calls_import
from arena.services.worlds import world_create
from levers9.shipped_data import PERSUASION_CALLS
from trainers.judge.rubric import RubricJudge, Turn
from trainers.judge.topic import stem_counts, words
from trainers.judge.topic_guard import ON_TOPIC

CALLS = 2 * HELD_OUT_CALLS + 40
VIEWING = "Would you like to arrange a viewing of the flat on Saturday?"
CHARITY = "Save the Children helps children in need, and every donation counts."
CONTEXT = [
    Turn("agent", "Hello, how are you today?"),
    Turn("customer", "I am doing well, just relaxing at home."),
]


def _import(world, lines: list[str]) -> None:
    calls_import(world=world, text="\n".join(lines), source="test")


@pytest.fixture
def persuasion(in_workspace):
    world = world_create(slug="persuasion", name="Persuasion for good")
    _import(world, PERSUASION_CALLS.read_text().splitlines()[:CALLS])
    return world


def _lettings_calls(count: int) -> list[str]:
    agent = [
        "The flat has two bedrooms and the rent is 1,450 a month.",
        "Would you like to arrange a viewing of the property?",
        "The landlord is happy with a six month tenancy and a holding deposit.",
        "I can show you the flat on Saturday or Thursday evening.",
        "The garden is enclosed and the school is a short walk away.",
    ]
    lines = []
    for number in range(count):
        turns = []
        for step in range(4):
            turns.append({"speaker": "customer", "text": "Is the flat still available to rent?"})
            turns.append({"speaker": "agent", "text": agent[(number + step) % len(agent)]})
        lines.append(json.dumps({"id": f"let-{number}", "outcome": "won", "turns": turns}))
    return lines


def test_an_off_topic_line_cannot_outrank_an_on_topic_one(persuasion):
    rubric = RubricJudge()
    # Without the guard the rubric prefers the lettings line (the example).
    assert rubric.score(CONTEXT, VIEWING).total > rubric.score(CONTEXT, CHARITY).total
    judge = judge_for_world(persuasion)
    off, on = judge.score(CONTEXT, VIEWING), judge.score(CONTEXT, CHARITY)
    assert off.total < on.total
    assert "viewing" in off.reasons[ON_TOPIC] or "flat" in off.reasons[ON_TOPIC]
    guard = topic_guard_for_world(persuasion)
    # Below the floor: every on-topic agent turn the rubric was measured on scores higher.
    assert off.total < guard.floor(rubric)


def test_an_on_topic_reply_is_untouched(persuasion):
    judged = judge_for_world(persuasion).score(CONTEXT, CHARITY)
    assert judged == RubricJudge().score(CONTEXT, CHARITY)
    assert ON_TOPIC not in judged.reasons


def test_the_judge_keeps_its_kind_and_name(persuasion):
    judge = judge_for_world(persuasion)
    # The lens and the fan-out ask what the judge they hold can do (quick: judged on the spot,
    # one slot); the guard answers as the rubric judge inside it.
    assert isinstance(judge.unguarded, RubricJudge)
    assert (judge.quick, judge.paid) == (True, False)
    assert judge.model_name == RubricJudge.model_name


def test_the_guard_holds_no_held_out_call(persuasion):
    held = held_out_call_ids(world=persuasion)
    assert len(held) == HELD_OUT_CALLS
    guard = topic_guard_for_world(persuasion)
    assert {unit.group for unit in guard.units}.isdisjoint({str(pk) for pk in held})
    kept = {
        stem
        for text in Call.objects.filter(world=persuasion, held_out=False)
        .values_list("turns__text", flat=True)
        .filter(turns__speaker="agent")
        for stem, _word in words(text)
    }
    held_only = (
        {
            stem
            for text in Call.objects.filter(pk__in=held)
            .filter(turns__speaker="agent")
            .values_list("turns__text", flat=True)
            for stem, _word in words(text)
        }
        - kept
        - set(stem_counts(topic_texts(persuasion)))
    )
    assert held_only  # words only held-out calls use...
    assert held_only.isdisjoint(guard.model.counts)  # ...are not the guard's


def test_another_workspace_world_does_not_leak_into_the_guard(persuasion, other_workspace):
    ours = topic_guard_for_world(persuasion)
    with schema_context(other_workspace.schema_name):
        theirs_world = world_create(slug="persuasion", name="Rival lettings")
        # The same id in another schema: the cache must tell them apart by workspace. The
        # rows that point at the world (its baseline version, ...) follow it to the new id.
        World.objects.filter(pk=theirs_world.pk).update(id=persuasion.pk)
        for relation in World._meta.related_objects:
            if not relation.many_to_many:
                relation.related_model.objects.filter(
                    **{relation.field.attname: theirs_world.pk}
                ).update(**{relation.field.attname: persuasion.pk})
        theirs_world = World.objects.get(pk=persuasion.pk)
        _import(theirs_world, _lettings_calls(30))
        theirs = topic_guard_for_world(theirs_world)
        assert judge_for_world(theirs_world).score(CONTEXT, VIEWING).reasons.get(ON_TOPIC) is None
    assert theirs is not ours
    assert "landl" in theirs.model.counts
    assert "landl" not in ours.model.counts
    assert topic_guard_for_world(persuasion) is ours
    assert not ours.verdict(CONTEXT, VIEWING).on_topic


def test_a_change_to_the_world_rebuilds_its_guard(persuasion):
    first = topic_guard_for_world(persuasion)
    assert topic_guard_for_world(persuasion) is first
    persuasion.description = "A charity asking for donations to Save the Children."
    persuasion.save()
    second = topic_guard_for_world(persuasion)
    assert second is not first
    _import(persuasion, PERSUASION_CALLS.read_text().splitlines()[CALLS : CALLS + 2])
    assert topic_guard_for_world(persuasion) is not second


def test_a_world_with_too_little_of_its_own_language_flags_nothing(in_workspace):
    world = world_create(slug="new", name="New business")
    assert topic_guard_for_world(world).model.threshold is None
    assert judge_for_world(world).score(CONTEXT, VIEWING) == RubricJudge().score(CONTEXT, VIEWING)


def test_the_scoring_api_says_why_it_capped_a_reply(persuasion, owner_client):
    dialogue = [{"speaker": turn.speaker, "text": turn.text} for turn in CONTEXT]
    items = [{"dialogue": dialogue, "reply": reply} for reply in (VIEWING, CHARITY)]
    scored = owner_client.post(
        "/api/rl/packs/persuasion/judge/score/", {"items": items}, content_type="application/json"
    )
    assert scored.status_code == 200, scored.content
    viewing, charity = scored.json()["results"]
    assert viewing["on_topic"]  # the guard's sentence: whose words these are
    assert charity["on_topic"] is None
    assert viewing["total"] < charity["total"]

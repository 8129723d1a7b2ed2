"""An on-topic baseline: in a world with no simulator, `v1 · baseline` answers with the real
agent's reply at the most similar moment of ANOTHER of the world's recorded calls — never the
same call's own turns, never a held-out call's — so a business's Duel is about its business.
The lettings world keeps its scripted simulator replies."""

from __future__ import annotations

import json
import re
from unittest import mock

import pytest
from django_tenants.utils import schema_context

from arena import recorded_replies
from arena.models import Call, DuelPair, Moment, Reply, Turn, World
from arena.recorded_replies import recorded_reply
from arena.services.calls import calls_import
from arena.services.pairs import duel_pairs_generate
from arena.services.worlds import world_create
from levers9.shipped_data import PERSUASION_CALLS
from policies.agents import VersionCannotAnswer, version_reply
from policies.models import PolicyVersion
from trainers.moves.simulator_wording import AGENT_LINES, OBJECTION_ANSWERS

LETTINGS_WORDS = re.compile(r"\b(viewing|property|landlord|tenancy|flat|rent)\b", re.IGNORECASE)
SCRIPTED = set(AGENT_LINES.values()) | set(OBJECTION_ANSWERS.values())
DONATION_MOVES = [
    {"name": "greet", "description": "Say hello and ask how they are."},
    {"name": "tell_the_story", "description": "What the charity does for children."},
    {"name": "ask_for_a_donation", "description": "Ask whether they would give."},
    {"name": "suggest_an_amount", "description": "Name a small concrete amount."},
    {"name": "thank", "description": "Thank them, whatever they decide."},
]


def _lettings_words(texts) -> set[str]:
    return {match.lower() for text in texts for match in LETTINGS_WORDS.findall(text)}


def test_a_world_made_over_the_api_duels_with_an_on_topic_baseline(owner_client, workspace):
    created = owner_client.post(
        "/api/rl/packs/",
        {
            "slug": "charity",
            "name": "Save the Children donations",
            "description": "A persuader asks for a donation to Save the Children.",
            "system_prompt": "You ask politely for a donation to Save the Children.",
            "moves": DONATION_MOVES,
        },
        content_type="application/json",
    )
    assert created.status_code == 201, created.content
    calls = "\n".join(PERSUASION_CALLS.read_text().splitlines()[:60])
    imported = owner_client.post(
        "/api/rl/packs/charity/calls/import/", calls, content_type="application/jsonl"
    )
    assert imported.status_code == 200, imported.content
    generated = owner_client.post(
        "/api/rl/duel/generate/", {"pack": "charity", "count": 30}, content_type="application/json"
    )
    assert generated.status_code == 201, generated.content
    assert generated.json()["made"] >= 20

    with schema_context(workspace.schema_name):
        world = World.objects.get(slug="charity")
        # The world made over the API has its own v1 · baseline, and it is the one that duels.
        baseline = PolicyVersion.objects.get(world=world, number=1)
        pairs = list(
            DuelPair.objects.filter(world=world).select_related(
                "reply_a__author", "reply_b__author"
            )
        )
        in_pairs = [
            reply
            for pair in pairs
            for reply in (pair.reply_a, pair.reply_b)
            if getattr(getattr(reply, "author", None), "version_id", None) == baseline.pk
        ]
        assert len(in_pairs) >= 20
        world_texts = list(Turn.objects.filter(call__world=world).values_list("text", flat=True))
        # No lettings word the world's own calls do not use.
        assert _lettings_words(r.text for r in in_pairs) <= _lettings_words(world_texts)
        for reply in Reply.objects.filter(moment__world=world, author__version=baseline):
            assert reply.text not in SCRIPTED
            # Word for word another call's real agent turn, never the moment's own call's.
            sources = set(
                Turn.objects.filter(call__world=world, speaker="agent", text=reply.text)
                .exclude(call_id=reply.moment.call_id)
                .values_list("call_id", flat=True)
            )
            assert sources, reply.text

    # The Duel's map offers the world's own moves.
    page = owner_client.get("/duel/?world=charity").content.decode()
    assert 'data-move="ask_for_a_donation"' in page
    assert 'data-move="propose_viewing"' not in page


def _call(call_id: str, customer_line: str, replies: tuple[str, str]) -> dict:
    return {
        "id": call_id,
        "outcome": "won",
        "turns": [
            {"speaker": "agent", "text": "Hello, thanks for taking the call."},
            {"speaker": "customer", "text": customer_line},
            {"speaker": "agent", "text": replies[0]},
            {"speaker": "customer", "text": customer_line},
            {"speaker": "agent", "text": replies[1]},
        ],
    }


@pytest.fixture
def tricky_world(in_workspace):
    """The best match of call `own`'s first moment is its own later turn, then a held-out
    call's; the only allowed answer is the ordinary call's."""
    world = world_create(slug="tricky", name="Garden sheds")
    zebra = "Could you paint the shed with zebra stripes in purple?"
    calls = [
        _call("own", zebra, ("Let me check the zebra paint.", "OWN FUTURE zebra stripes purple")),
        _call("held", zebra, ("HELD OUT zebra stripes purple", "HELD OUT again")),
        _call("plain", "Do you deliver sheds on a weekday?", ("PLAIN weekday", "PLAIN again")),
    ]
    calls_import(world=world, text="\n".join(json.dumps(call) for call in calls))
    Call.objects.filter(world=world, external_id="held").update(held_out=True)
    return world


def test_it_never_answers_from_the_same_call_or_a_held_out_one(tricky_world):
    own = Call.objects.get(world=tricky_world, external_id="own")
    moment = Moment(world=tricky_world, kind=Moment.Kind.REAL, call=own, turn_index=4)
    found = recorded_reply(world=tricky_world, dialogue=moment.dialogue(), exclude_call_id=own.pk)
    assert found is not None
    assert found.text.startswith("PLAIN")
    assert found.call_id == Call.objects.get(external_id="plain", world=tricky_world).pk
    reply = version_reply(PolicyVersion.objects.get(world=tricky_world, number=1), moment)
    assert reply.text.startswith("PLAIN")


def test_it_matches_the_most_similar_moment_of_another_call(tricky_world):
    dialogue = [
        {"speaker": "agent", "text": "Hello, thanks for taking the call."},
        {"speaker": "customer", "text": "Do you deliver sheds on a weekday?"},
    ]
    found = recorded_reply(world=tricky_world, dialogue=dialogue)
    assert found.text == "PLAIN weekday"
    assert found.turn_index == 2


def test_it_says_so_when_there_is_no_other_call_to_answer_from(in_workspace):
    world = world_create(slug="lonely", name="One call")
    calls_import(world=world, text=json.dumps(_call("only", "Hi?", ("One", "Two"))))
    only = Call.objects.get(world=world)
    moment = Moment(world=world, kind=Moment.Kind.REAL, call=only, turn_index=2)
    with pytest.raises(VersionCannotAnswer, match="other recorded calls"):
        version_reply(PolicyVersion.objects.get(world=world, number=1), moment)


def test_it_builds_the_index_once_until_the_calls_change(tricky_world):
    dialogue = [{"speaker": "customer", "text": "weekday delivery?"}]
    with mock.patch.object(recorded_replies, "_build", wraps=recorded_replies._build) as build:
        recorded_reply(world=tricky_world, dialogue=dialogue)
        recorded_reply(world=tricky_world, dialogue=dialogue)
        assert build.call_count == 1
        calls_import(
            world=tricky_world, text=json.dumps(_call("new", "Hi", ("NEW one", "NEW two")))
        )
        recorded_reply(world=tricky_world, dialogue=dialogue)
        assert build.call_count == 2
        recorded_reply(world=tricky_world, dialogue=dialogue)
        assert build.call_count == 2


def test_the_lettings_world_keeps_its_scripted_replies(in_workspace):
    lettings = World.objects.get(slug="lettings")
    assert duel_pairs_generate(world=lettings, count=4) >= 1
    texts = set(
        Reply.objects.filter(moment__world=lettings, author__version__number=1).values_list(
            "text", flat=True
        )
    )
    assert texts
    assert texts <= SCRIPTED


def test_a_learned_outcome_strategy_answers_with_a_reply_making_its_move(in_workspace):
    from policies.services import version_register

    world = world_create(slug="sheds", name="Garden sheds")
    question = "Do you deliver sheds on a weekday?"
    calls = [
        _call("asks", question, ("Which day suits you best?", "Which day suits you best?")),
        _call("closes", "Anything else?", ("Shall I book it now?", "Shall I book it now?")),
        _call("here", question, ("x", "y")),
    ]
    calls_import(world=world, text="\n".join(json.dumps(call) for call in calls))
    Turn.objects.filter(call__world=world, text__startswith="Which day").update(move_label="ask")
    Turn.objects.filter(call__world=world, text__startswith="Shall I").update(move_label="close")
    recorded_replies._indexes.clear()
    here = Call.objects.get(world=world, external_id="here")
    moment = Moment(world=world, kind=Moment.Kind.REAL, call=here, turn_index=2)
    # The scripted baseline answers from the most similar moment: the call asking about days.
    baseline = PolicyVersion.objects.get(world=world, number=1)
    assert version_reply(baseline, moment).text.startswith("Which day")
    learned = version_register(
        world=world,
        name="trained",
        parent=baseline,
        move_strategy={"kind": "outcome", "default": "close", "choices": {}},
        learned_from={},
    )
    reply = version_reply(learned, moment)
    assert reply.text == "Shall I book it now?"  # the strategy's move, though less similar
    assert reply.move == "close"

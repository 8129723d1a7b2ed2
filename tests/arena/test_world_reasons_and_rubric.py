"""A world's own reasons and rubric (issue 40, point 2): a second-hand bike seller's world names
its own dimensions, and the Duel's reason tags, a pick's reasons, the judge's verdict, the
overrides and the fit's dimension heads are its own, never the lettings world's "family" or
"dialect"; its owner edits them on the World page and over the packs API (a bad one is refused
naming the field); a reviewer and another workspace cannot; the migration turns the old list of
names into a rubric."""

from __future__ import annotations

import importlib
import json

import pytest
from django.apps import apps
from django_tenants.utils import schema_context

from arena.errors import DuelBadInput
from arena.judge.fit_job import _judge_fit_pack
from arena.judge.overrides import judge_override_submit
from arena.judge.world_dimensions import world_dimension_names, world_dimensions
from arena.judge.world_judge import judge_for_world
from arena.models import DuelPair, Pick, World
from arena.services.calls import calls_import
from arena.services.pairs import duel_pairs_generate
from arena.services.queue import duel_next, pick_submit
from arena.services.worlds import world_create
from tests.conftest import client_for, make_user
from trainers.judge.rubric import DEFAULT_RUBRIC, DIMENSIONS, RubricJudge, Turn

BIKE_RUBRIC = [
    {
        "name": "condition",
        "label": "Condition",
        "help": "Whether the reply states the bike's condition and faults honestly.",
        "weight": 2,
    },
    {
        "name": "fair-price",
        "help": "Whether the reply keeps the price fair and clear.",
        "weight": 1,
    },
    {"name": "respect", "weight": 1.5},
]
BIKE_CALLS = [
    {
        "id": f"bike-{number}",
        "outcome": "won" if number % 2 else "lost",
        "turns": [
            {"speaker": "customer", "text": f"Hi, is the {colour} road bike still for sale?"},
            # Each call's agent words differ, as real agents' do: the baseline answers with
            # another call's reply, and a pair needs two different replies.
            {"speaker": "agent", "text": f"Yes it is! The {colour} one has a few scratches."},
            {"speaker": "customer", "text": "What would you take for it?"},
            {"speaker": "agent", "text": f"I am asking {150 + 10 * number} dollars, fair price."},
            {"speaker": "customer", "text": "Any faults with the gears or brakes?"},
            {"speaker": "agent", "text": f"The brakes are new; the gears need {number} turns."},
        ],
    }
    for number, colour in enumerate(("red", "blue", "green", "black", "white", "grey"))
]


@pytest.fixture
def bikes(workspace):
    with schema_context(workspace.schema_name):
        world = world_create(slug="bikes", name="Second-hand bikes", dimensions=BIKE_RUBRIC)
        calls_import(world=world, text="\n".join(json.dumps(call) for call in BIKE_CALLS))
        assert duel_pairs_generate(world=world, count=4) > 0
        return world


def test_it_stores_the_worlds_own_rubric_with_defaults_filled_in(bikes, workspace):
    with schema_context(workspace.schema_name):
        rubric = world_dimensions(World.objects.get(slug="bikes"))
    assert [d.name for d in rubric] == ["condition", "fair-price", "respect"]
    assert rubric[1].label == "Fair Price"
    # One of the seven keeps the description's label and meaning where none is given.
    assert rubric[2].help.startswith("Whether the reply is courteous")
    assert [d.weight for d in rubric] == [2.0, 1.0, 1.5]


def test_the_duel_shows_the_worlds_own_reason_tags(bikes, workspace):
    make_user(workspace, "rita@acme.test", "reviewer")
    page = client_for(workspace, "rita@acme.test").get("/duel/?world=bikes").content.decode()
    assert 'id="reason-condition"' in page
    assert 'id="reason-fair-price"' in page
    assert 'id="reason-respect"' in page
    assert 'id="reason-family"' not in page
    assert 'id="reason-dialect"' not in page
    assert "Whether the reply states the bike" in page  # its meaning on the tag


def test_a_pick_takes_only_the_worlds_reasons(bikes, workspace):
    rita = make_user(workspace, "rita@acme.test", "reviewer")
    with schema_context(workspace.schema_name):
        pair = duel_next(world=bikes, reviewer=rita)
        with pytest.raises(DuelBadInput, match=r"'reasons'.*condition, fair-price, respect"):
            pick_submit(pair_id=pair.pk, reviewer=rita, chosen="A", reasons=["family"])
        assert not Pick.objects.exists()
        pick = pick_submit(
            pair_id=pair.pk, reviewer=rita, chosen="A", reasons=["respect", "condition"]
        )
        assert pick.reasons == ["condition", "respect"]  # in the world's order


def test_the_api_answers_400_naming_reasons_for_another_worlds_reason(bikes, workspace):
    make_user(workspace, "rita@acme.test", "reviewer")
    client = client_for(workspace, "rita@acme.test")
    item = client.get("/api/rl/duel/next/", {"pack": "bikes"}).json()["item"]
    response = client.post(
        "/api/rl/picks/",
        {"pair": item["pair"], "chosen": "A", "reasons": ["family"]},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert "'reasons'" in response.json()["detail"]
    assert "'family'" in response.json()["detail"]


def test_the_rubric_judge_scores_exactly_the_worlds_dimensions(bikes, workspace):
    with schema_context(workspace.schema_name):
        judge = judge_for_world(World.objects.get(slug="bikes"))
    context = [Turn("customer", "Any faults with the brakes? I have two kids who ride too.")]
    honest = judge.score(context, "The brakes are new, and the only fault is a scratch.")
    silent = judge.score(context, "Shall we say Saturday?")
    assert list(honest.scores) == ["condition", "fair-price", "respect"]
    assert list(honest.reasons) == ["condition", "fair-price", "respect"]
    # Its own dimension by its meaning: a reply about the faults beats one saying nothing.
    assert honest.scores["condition"] > silent.scores["condition"] == 0.5
    weighted = (
        2 * honest.scores["condition"]
        + honest.scores["fair-price"]
        + 1.5 * honest.scores["respect"]
    )
    assert honest.total == pytest.approx(weighted / 4.5, abs=1e-4)


def test_a_world_keeping_the_seven_scores_as_before(in_workspace):
    lettings = World.objects.get(slug="lettings")
    assert world_dimensions(lettings) == DEFAULT_RUBRIC
    context = [Turn("customer", "We have two kids, is it near a school?")]
    reply = "Yes, the primary school is five minutes away and the garden is safe."
    assert judge_for_world(lettings).score(context, reply) == RubricJudge().score(context, reply)


def test_an_override_takes_only_the_worlds_dimensions(bikes, workspace):
    rita = make_user(workspace, "rita@acme.test", "reviewer")
    with schema_context(workspace.schema_name):
        pair = DuelPair.objects.filter(world=bikes).first()
        with pytest.raises(DuelBadInput, match=r"'family'.*'scores' may name any of condition"):
            judge_override_submit(reply_id=pair.reply_a_id, reviewer=rita, scores={"family": 1})
        override = judge_override_submit(
            reply_id=pair.reply_a_id, reviewer=rita, scores={"condition": 0.0}
        )
        assert override.scores == {"condition": 0.0}


def test_the_judges_fit_has_a_head_per_dimension_of_the_world(bikes, workspace):
    with schema_context(workspace.schema_name):
        spec, _needs = _judge_fit_pack(World.objects.get(slug="bikes"))
    assert spec["dimensions"] == ["condition", "fair-price", "respect"]
    # The rubric's features: one number per dimension of the world, then the total.
    assert all(len(row["rubric"]) == 4 for row in spec["outcomes"])


# --- the World page -------------------------------------------------------------------------


def _rubric_form(rows):
    body = {
        "dimension_name": [],
        "dimension_label": [],
        "dimension_help": [],
        "dimension_weight": [],
    }
    for name, label, meaning, weight in rows:
        body["dimension_name"].append(name)
        body["dimension_label"].append(label)
        body["dimension_help"].append(meaning)
        body["dimension_weight"].append(weight)
    return body


NEW_ROWS = [
    ("condition", "", "Whether the reply is honest about wear and faults.", "3"),
    ("pickup", "Pick-up", "Whether the reply agrees where and when to collect.", "1"),
    ("", "", "", ""),  # a blank row for a new dimension, left empty
]


def test_an_owner_changes_the_reasons_and_rubric_on_the_world_page(bikes, owner_client, workspace):
    page = owner_client.get("/world/?world=bikes").content.decode()
    assert 'id="world-rubric-form"' in page
    assert 'data-dimension="fair-price"' in page
    response = owner_client.post("/world/bikes/rubric/", _rubric_form(NEW_ROWS))
    assert response.status_code == 302
    with schema_context(workspace.schema_name):
        world = World.objects.get(slug="bikes")
        assert world.dimensions == [
            {
                "name": "condition",
                "label": "Condition",
                "help": "Whether the reply is honest about wear and faults.",
                "weight": 3.0,
            },
            {
                "name": "pickup",
                "label": "Pick-up",
                "help": "Whether the reply agrees where and when to collect.",
                "weight": 1.0,
            },
        ]
    duel = owner_client.get("/duel/?world=bikes").content.decode()
    assert 'id="reason-pickup"' in duel
    assert 'id="reason-fair-price"' not in duel


def test_a_refused_rubric_keeps_what_was_typed_and_names_the_field(bikes, owner_client, workspace):
    rows = [NEW_ROWS[0], ("pickup", "Pick-up", "Where and when to collect.", "0")]
    response = owner_client.post("/world/bikes/rubric/", _rubric_form(rows), follow=True)
    page = response.content.decode()
    assert "Reasons and rubric not saved" in page
    assert "row 2&#x27;s weight" in page or "row 2's weight" in page
    assert 'value="Where and when to collect."' in page  # as typed
    with schema_context(workspace.schema_name):
        assert world_dimension_names(World.objects.get(slug="bikes")) == (
            "condition",
            "fair-price",
            "respect",
        )


def test_a_reviewer_and_another_workspace_cannot_change_the_rubric(
    bikes, workspace, other_workspace, outsider_client
):
    make_user(workspace, "rita@acme.test", "reviewer")
    reviewer = client_for(workspace, "rita@acme.test")
    page = reviewer.get("/world/?world=bikes").content.decode()
    assert 'data-dimension="condition"' in page  # a reviewer reads the rubric
    assert 'id="world-rubric-form"' not in page
    assert reviewer.post("/world/bikes/rubric/", _rubric_form(NEW_ROWS)).status_code == 403
    assert outsider_client.post("/world/bikes/rubric/", _rubric_form(NEW_ROWS)).status_code in {
        302,
        403,
    }
    rival = client_for(other_workspace, "owner@rival.test")
    assert rival.post("/world/bikes/rubric/", _rubric_form(NEW_ROWS)).status_code == 404
    with schema_context(workspace.schema_name):
        assert world_dimension_names(World.objects.get(slug="bikes"))[0] == "condition"
        assert len(World.objects.get(slug="bikes").dimensions) == 3


# --- the packs API ----------------------------------------------------------------------------


def _patch(client, body, slug="bikes"):
    return client.patch(f"/api/rl/packs/{slug}/", body, content_type="application/json")


def test_the_api_reads_and_changes_the_rubric(bikes, owner_client):
    read = owner_client.get("/api/rl/packs/bikes/").json()["dimensions"]
    assert [item["name"] for item in read] == ["condition", "fair-price", "respect"]
    changed = _patch(owner_client, {"dimensions": [{"name": "condition"}, {"name": "pickup"}]})
    assert changed.status_code == 200, changed.content
    assert [item["name"] for item in changed.json()["dimensions"]] == ["condition", "pickup"]
    assert changed.json()["dimensions"][1] == {
        "name": "pickup",
        "label": "Pickup",
        "help": "",
        "weight": 1.0,
    }


@pytest.mark.parametrize(
    ("dimensions", "said"),
    [
        ([{"name": "condition"}], "2 to 12"),
        ([{"name": "condition"}, {"name": "Condition"}], "dimensions[1].name"),
        ([{"name": "condition"}, {"name": "two words"}], "dimensions[1].name"),
        ([{"name": "condition"}, {"name": "pickup", "weight": 0}], "dimensions[1].weight"),
        ([{"name": "condition"}, {"name": "pickup", "weight": 11}], "dimensions[1].weight"),
        ([{"name": "condition", "help": "x" * 201}, {"name": "pickup"}], "dimensions[0].help"),
        ([{"name": "condition", "colour": "red"}, {"name": "pickup"}], "colour"),
        ([{"name": f"d{i}"} for i in range(13)], "2 to 12"),
    ],
)
def test_the_api_refuses_a_bad_rubric_naming_the_field(bikes, owner_client, dimensions, said):
    response = _patch(owner_client, {"dimensions": dimensions})
    assert response.status_code == 400
    assert said in response.json()["dimensions"][0]
    read = owner_client.get("/api/rl/packs/bikes/").json()["dimensions"]
    assert [item["name"] for item in read] == ["condition", "fair-price", "respect"]


def test_the_api_keeps_a_reviewer_and_another_workspace_out(
    bikes, workspace, other_workspace, outsider_client
):
    make_user(workspace, "rita@acme.test", "reviewer")
    body = {"dimensions": [{"name": "condition"}, {"name": "pickup"}]}
    assert _patch(client_for(workspace, "rita@acme.test"), body).status_code == 403
    assert _patch(outsider_client, body).status_code in {401, 403}
    assert _patch(client_for(other_workspace, "owner@rival.test"), body).status_code == 404
    with schema_context(workspace.schema_name):
        assert len(World.objects.get(slug="bikes").dimensions) == 3


def test_a_new_world_made_over_the_api_may_name_its_rubric(owner_client):
    body = {
        "slug": "cars",
        "name": "Used cars",
        "dimensions": [{"name": "mileage"}, {"name": "respect"}],
    }
    created = owner_client.post("/api/rl/packs/", body, content_type="application/json")
    assert created.status_code == 201, created.content
    assert [item["name"] for item in created.json()["dimensions"]] == ["mileage", "respect"]


# --- the migration ----------------------------------------------------------------------------


def test_the_migration_turns_the_old_list_of_names_into_a_rubric(in_workspace):
    migration = importlib.import_module("arena.migrations.0014_world_reasons_and_rubric")
    World.objects.create(slug="old", name="Old", dimensions=["dialect", "bike-condition"])
    World.objects.filter(slug="lettings").update(dimensions=list(DIMENSIONS))
    migration.names_to_rubric(apps, None)
    old = World.objects.get(slug="old").dimensions
    assert old == [
        {
            "name": "dialect",
            "label": "Dialect",
            "help": "Whether the reply speaks in the customer's register, casual or formal.",
            "weight": 1.0,
        },
        {"name": "bike-condition", "label": "Bike Condition", "help": "", "weight": 1.0},
    ]
    lettings = World.objects.get(slug="lettings").dimensions
    assert lettings == [dimension.as_dict() for dimension in DEFAULT_RUBRIC]
    assert lettings[6] == {
        "name": "compliance",
        "label": "Compliance",
        "help": "Whether the reply avoids pressure, discrimination and asking for card details.",
        "weight": 2.0,
    }

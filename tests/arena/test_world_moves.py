"""A world describes its business: its moves (a name and a one-line description each) are given
when it is made over the API, read back in the same shape and changed with PATCH; bad moves are
a 400 naming the field and change nothing; a world given none gets the generic set; lettings
keeps the simulator's eight; only managers change them, and another workspace can do neither."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django_tenants.utils import schema_context

from arena.models import World
from arena.moves import GENERIC_MOVES, LETTINGS_MOVES
from tests.conftest import client_for, make_user
from trainers.moves.simulator import MOVES

DONATION_MOVES = [
    {"name": "greet", "description": "Say hello and ask how they are."},
    {"name": "tell_the_story", "description": "What the charity does for children."},
    {"name": "ask_for_a_donation", "description": "Ask, in principle, whether they would give."},
    {"name": "suggest_an_amount", "description": "Name a small concrete amount."},
    {"name": "thank", "description": "Thank them, whatever they decide."},
]


def _create(client, slug="charity", **extra):
    body = {
        "slug": slug,
        "name": "Charity donations",
        "description": "Asking for donations to Save the Children.",
        "system_prompt": "You ask politely for a donation to Save the Children.",
        **extra,
    }
    return client.post("/api/rl/packs/", body, content_type="application/json")


def _patch(client, body, slug="charity"):
    return client.patch(f"/api/rl/packs/{slug}/", body, content_type="application/json")


def test_it_creates_a_world_with_its_own_moves_and_reads_them_back(owner_client):
    created = _create(owner_client, moves=DONATION_MOVES)
    assert created.status_code == 201, created.content
    assert created.json()["moves"] == DONATION_MOVES
    read = owner_client.get("/api/rl/packs/charity/")
    assert read.status_code == 200
    assert read.json()["moves"] == DONATION_MOVES
    assert read.json()["system_prompt"].startswith("You ask politely")


def test_it_gives_a_world_with_no_moves_the_generic_set(owner_client, workspace):
    created = _create(owner_client)
    assert created.status_code == 201, created.content
    names = [move["name"] for move in created.json()["moves"]]
    assert names == [
        "greet",
        "ask",
        "inform",
        "handle_objection",
        "reassure",
        "propose_next_step",
        "close",
    ]
    assert all(move["description"] for move in created.json()["moves"])
    with schema_context(workspace.schema_name):
        assert World.objects.get(slug="charity").moves == list(GENERIC_MOVES)


def test_it_keeps_the_eight_lettings_moves(owner_client):
    lettings = owner_client.get("/api/rl/packs/lettings/").json()
    assert [move["name"] for move in lettings["moves"]] == list(MOVES)
    assert lettings["moves"] == list(LETTINGS_MOVES)


def test_it_changes_moves_prompt_and_description_with_patch(owner_client, workspace):
    assert _create(owner_client).status_code == 201
    changed = _patch(
        owner_client,
        {"moves": DONATION_MOVES, "system_prompt": "Be brief.", "description": "Donations."},
    )
    assert changed.status_code == 200, changed.content
    assert changed.json()["moves"] == DONATION_MOVES
    assert changed.json()["system_prompt"] == "Be brief."
    with schema_context(workspace.schema_name):
        world = World.objects.get(slug="charity")
        assert world.move_names[1] == "tell_the_story"
        assert world.agent_system_prompt == "Be brief."
        assert world.description == "Donations."
    # Only what is sent changes.
    renamed = _patch(owner_client, {"name": "Save the Children calls"})
    assert renamed.json()["moves"] == DONATION_MOVES


@pytest.mark.parametrize(
    ("moves", "says"),
    [
        ([{"name": "only", "description": "one move"}], "2 to 16"),
        ([{"name": f"move{n}", "description": ""} for n in range(17)], "2 to 16"),
        ([{"name": "ask", "description": "a"}, {"name": " Ask ", "description": "b"}], "unique"),
        ([{"name": "ask", "description": "a"}, {"name": "", "description": "b"}], "name"),
        ([{"name": "ask"}, {"name": "x" * 41}], "name"),
        ([{"name": "ask"}, {"name": "tell", "description": "two\nlines"}], "one line"),
        ("greet, close", "list"),
    ],
)
def test_it_refuses_bad_moves_naming_the_field(owner_client, workspace, moves, says):
    assert _create(owner_client, moves=DONATION_MOVES).status_code == 201
    response = _patch(owner_client, {"moves": moves})
    assert response.status_code == 400, response.content
    assert "moves" in response.json()
    assert says in str(response.json()["moves"])
    refused_at_creation = _create(owner_client, slug="other", moves=moves)
    assert refused_at_creation.status_code == 400
    assert "moves" in refused_at_creation.json()
    with schema_context(workspace.schema_name):
        assert World.objects.get(slug="charity").moves == DONATION_MOVES
        assert not World.objects.filter(slug="other").exists()


def test_it_refuses_a_field_patch_cannot_change(owner_client):
    assert _create(owner_client).status_code == 201
    response = _patch(owner_client, {"slug": "renamed"})
    assert response.status_code == 400
    assert "slug" in response.json()


def test_it_lets_a_reviewer_read_but_not_change_the_moves(owner_client, workspace):
    assert _create(owner_client, moves=DONATION_MOVES).status_code == 201
    make_user(workspace, "rita@acme.test", "reviewer")
    reviewer = client_for(workspace, "rita@acme.test")
    assert reviewer.get("/api/rl/packs/charity/").json()["moves"] == DONATION_MOVES
    response = _patch(reviewer, {"moves": DONATION_MOVES[:2]})
    assert response.status_code == 403
    with schema_context(workspace.schema_name):
        assert World.objects.get(slug="charity").moves == DONATION_MOVES


def test_it_keeps_another_workspace_out_of_the_world(
    owner_client, outsider_client, other_workspace, workspace
):
    assert _create(owner_client, moves=DONATION_MOVES).status_code == 201
    # The rival's session pointed at our host is nobody here.
    assert outsider_client.get("/api/rl/packs/charity/").status_code in {401, 403}
    assert _patch(outsider_client, {"moves": DONATION_MOVES[:2]}).status_code in {401, 403}
    # The rival's owner on its own host has no such world.
    rival = client_for(other_workspace, "owner@rival.test")
    assert rival.get("/api/rl/packs/charity/").status_code == 404
    assert _patch(rival, {"moves": DONATION_MOVES[:2]}).status_code == 404
    with schema_context(workspace.schema_name):
        assert World.objects.get(slug="charity").moves == DONATION_MOVES


def test_the_migration_gives_existing_worlds_their_moves(in_workspace):
    """Worlds from before (moves as bare names) get lettings' eight or the generic set."""
    migration = importlib.import_module("arena.migrations.0008_world_moves_described")
    World.objects.create(slug="old-real", name="Old real calls", moves=list(MOVES))
    World.objects.filter(slug="lettings").update(moves=list(MOVES))
    migration.describe_moves(apps, None)
    assert World.objects.get(slug="lettings").moves == list(LETTINGS_MOVES)
    assert World.objects.get(slug="old-real").moves == list(GENERIC_MOVES)
    # Run again, it leaves described moves as they are.
    World.objects.filter(slug="old-real").update(moves=DONATION_MOVES)
    migration.describe_moves(apps, None)
    assert World.objects.get(slug="old-real").moves == DONATION_MOVES

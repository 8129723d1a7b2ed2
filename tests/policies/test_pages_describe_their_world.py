"""Pages that say what their world is (issue 40, point 5): the header, the World page, Home and
Policies describe each world as it is (a simulator world's simulated customers, a world's N
real recorded calls, a new world that has no calls yet and what to do), from one description;
Policies says how v1 answers in that world as the header does; a live call that names no world
is a 400 naming `pack` unless the workspace has only one world."""

from __future__ import annotations

import re

import pytest
from django_tenants.utils import schema_context

from arena.models import World
from arena.selectors import world_description
from arena.services.calls import calls_import
from arena.services.worlds import world_create
from levers9.shipped_data import PERSUASION_CALLS
from policies.live import version_make_live
from policies.models import LiveCall, PolicyVersion
from policies.selectors import policy_agent_label, version_answers

CALLS = 5


@pytest.fixture
def worlds(workspace):
    """Lettings (its simulator), a business world with CALLS real calls, and a new empty one."""
    with schema_context(workspace.schema_name):
        recorded = world_create(slug="charity", name="Charity chats")
        text = "\n".join(PERSUASION_CALLS.read_text().splitlines()[:CALLS])
        calls_import(world=recorded, text=text)
        world_create(slug="bikes", name="Bike market")
    return workspace


def _without_menu(page: str) -> str:
    """The page less the header's world menu, which names every world."""
    return re.sub(r'<select name="world".*?</select>', "", page, flags=re.S)


def test_it_describes_each_kind_of_world(worlds):
    with schema_context(worlds.schema_name):
        lettings = world_description(World.objects.get(slug="lettings"))
        recorded = world_description(World.objects.get(slug="charity"))
        empty = world_description(World.objects.get(slug="bikes"))
    assert lettings.customer == "simulated customers of Lettings"
    assert recorded.customer == f"{CALLS} real recorded calls of Charity chats"
    assert "no calls yet" in empty.customer
    assert "simulated" not in empty.customer
    assert "import" in empty.next_step.lower()
    assert recorded.next_step == lettings.next_step == ""


def test_the_header_world_page_and_home_say_what_each_world_is(worlds, owner_client):
    empty_world = _without_menu(owner_client.get("/world/?world=bikes").content.decode())
    assert "simulated customers" not in empty_world
    assert "no calls yet" in empty_world
    assert "calls/import/" in empty_world  # what to do: import its calls
    # The agent in the header says v1 has nothing to answer from yet, not "Simulator".
    assert "on Simulator (scripted)" not in empty_world
    recorded = _without_menu(owner_client.get("/world/?world=charity").content.decode())
    assert f"{CALLS} real recorded calls of Charity chats" in recorded
    assert "simulated customers" not in recorded
    home = owner_client.get("/?world=lettings").content.decode()
    rows = {
        slug: re.search(rf'<tr data-world="{slug}">(.*?)</tr>', home, flags=re.S).group(1)
        for slug in ("lettings", "charity", "bikes")
    }
    assert "simulated customers" in rows["lettings"]
    assert f"{CALLS} real recorded calls" in rows["charity"]
    assert "no calls yet" in rows["bikes"]
    assert "simulated" not in rows["bikes"]


def test_policies_says_how_v1_answers_as_the_header_does(worlds, owner_client):
    page = owner_client.get("/policies/?world=charity").content.decode()
    with schema_context(worlds.schema_name):
        world = World.objects.get(slug="charity")
        baseline = PolicyVersion.objects.get(world=world, number=1)
        answers = version_answers(baseline, described=world_description(world))
        badge = policy_agent_label(baseline, world=world)
    row = re.search(r'<tr data-version="1">(.*?)</tr>', page, flags=re.S).group(1)
    assert "Simulator (scripted)" not in row
    assert "scripted move rules" not in row
    assert "real agents&#x27; replies from Charity chats&#x27;s other calls" in row
    # The header and the row read the same resolver: its words are in both.
    assert answers.how in badge
    assert answers.runs_on in row
    lettings = owner_client.get("/policies/?world=lettings").content.decode()
    lettings_row = re.search(r'<tr data-version="1">(.*?)</tr>', lettings, flags=re.S).group(1)
    assert "Hand-written start: scripted move rules and wording." in lettings_row
    assert "Simulator (scripted)" in lettings_row
    empty = owner_client.get("/policies/?world=bikes").content.decode()
    empty_row = re.search(r'<tr data-version="1">(.*?)</tr>', empty, flags=re.S).group(1)
    assert "no calls yet" in empty_row
    assert "scripted move rules" not in empty_row


def test_a_live_call_naming_no_world_is_refused_where_there_are_several(worlds, owner_client):
    refused = owner_client.post("/api/rl/live/calls/", {"call_id": "c-1"}, "application/json")
    assert refused.status_code == 400
    assert "pack" in refused.json()
    assert "charity" in refused.json()["pack"][0]  # it names the worlds to choose from
    named = owner_client.post(
        "/api/rl/live/calls/", {"call_id": "c-2", "pack": "charity"}, "application/json"
    )
    assert named.status_code == 200
    assert named.json()["pack"] == "charity"
    with schema_context(worlds.schema_name):
        assert not LiveCall.objects.filter(external_id="c-1").exists()


def test_a_live_call_naming_no_world_goes_to_the_only_one(workspace, owner_client):
    with schema_context(workspace.schema_name):
        assert list(World.objects.values_list("slug", flat=True)) == ["lettings"]
        version_make_live(version=PolicyVersion.objects.get(world__slug="lettings", number=1))
    routed = owner_client.post("/api/rl/live/calls/", {"call_id": "c-1"}, "application/json")
    assert routed.status_code == 200
    assert routed.json()["pack"] == "lettings"


def test_another_workspace_routes_no_call(worlds, outsider_client):
    response = outsider_client.post("/api/rl/live/calls/", {"call_id": "x"}, "application/json")
    assert response.status_code in {401, 403}
    with schema_context(worlds.schema_name):
        assert not LiveCall.objects.exists()

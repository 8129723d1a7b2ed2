"""The World page and the admin describe a world's business: managers change its name,
description, prompt and moves (checked like the API) and make new worlds; reviewers read them;
the header badge and the pages of a business's world speak its words, never lettings'."""

from __future__ import annotations

import re

import pytest
from django_tenants.utils import schema_context

from arena.models import World
from arena.moves import GENERIC_MOVES
from arena.services.calls import calls_import
from arena.services.pairs import duel_pairs_generate
from arena.services.worlds import world_create
from levers9.shipped_data import PERSUASION_CALLS
from tests.conftest import client_for, make_user

LETTINGS_WORDS = re.compile(r"\b(viewing|property|landlord|tenancy|flat|rent|letting)\b", re.I)
MOVES_TEXT = "greet: Say hello\ntell_the_story: What the charity does\nask: Would you give?"


@pytest.fixture
def charity(workspace):
    with schema_context(workspace.schema_name):
        world = world_create(
            slug="charity",
            name="Save the Children donations",
            description="A persuader asks for a donation to Save the Children.",
        )
        text = "\n".join(PERSUASION_CALLS.read_text().splitlines()[:12])
        calls_import(world=world, text=text)
        duel_pairs_generate(world=world, count=6)
        return world


def _save(client, *, follow=False, **fields):
    body = {
        "name": "Save the Children donations",
        "description": "Donations.",
        "system_prompt": "Be kind.",
        "moves": MOVES_TEXT,
        **fields,
    }
    return client.post("/world/charity/", body, follow=follow)


def test_it_lets_a_manager_change_the_world_on_its_page(owner_client, charity, workspace):
    page = owner_client.get("/world/?world=charity").content.decode()
    assert 'id="world-settings"' in page
    assert 'data-move="propose_next_step"' in page
    assert _save(owner_client).status_code == 302
    with schema_context(workspace.schema_name):
        world = World.objects.get(slug="charity")
        assert world.move_names == ["greet", "tell_the_story", "ask"]
        assert world.moves[1]["description"] == "What the charity does"
        assert world.agent_system_prompt == "Be kind."
    # The Duel's map follows.
    duel = owner_client.get("/duel/?world=charity").content.decode()
    assert 'data-move="tell_the_story"' in duel


def test_it_refuses_bad_moves_on_the_page_and_saves_nothing(owner_client, charity, workspace):
    response = _save(owner_client, moves="greet: hello\ngreet: again", follow=True)
    assert "Moves not saved" in response.content.decode()
    assert "unique" in response.content.decode()
    with schema_context(workspace.schema_name):
        world = World.objects.get(slug="charity")
        assert world.moves == list(GENERIC_MOVES)
        assert world.system_prompt == ""


def test_it_shows_a_reviewer_the_world_but_no_form(charity, workspace):
    make_user(workspace, "rita@acme.test", "reviewer")
    reviewer = client_for(workspace, "rita@acme.test")
    page = reviewer.get("/world/?world=charity").content.decode()
    assert 'data-move="greet"' in page
    assert 'id="world-settings"' not in page
    assert 'id="world-new"' not in page
    assert _save(reviewer).status_code == 403
    with schema_context(workspace.schema_name):
        assert World.objects.get(slug="charity").moves == list(GENERIC_MOVES)


def test_it_makes_a_new_world_from_the_page(owner_client, workspace):
    response = owner_client.post(
        "/world/new/",
        {"slug": "sheds", "name": "Garden sheds", "description": "", "moves": MOVES_TEXT},
    )
    assert response.status_code == 302
    refused = owner_client.post("/world/new/", {"slug": "no good!", "name": "x"})
    assert refused.status_code == 200  # the page again, with the form as typed
    assert "letters, digits and dashes" in refused.content.decode()
    with schema_context(workspace.schema_name):
        assert World.objects.get(slug="sheds").move_names == ["greet", "tell_the_story", "ask"]
        assert not World.objects.filter(name="x").exists()


def test_it_edits_the_moves_in_the_admin_through_the_same_rules(owner_client, charity, workspace):
    url = f"/admin/arena/world/{charity.pk}/change/"
    form = owner_client.get(url).content.decode()
    assert "propose_next_step: Suggest the concrete next step." in form
    body = {
        "name": "Charity",
        "description": "",
        "system_prompt": "",
        "moves": "only: one move",
        "scenarios-TOTAL_FORMS": "0",
        "scenarios-INITIAL_FORMS": "0",
    }
    refused = owner_client.post(url, body)
    assert refused.status_code == 200
    assert "2 to 16" in refused.content.decode()
    saved = owner_client.post(url, {**body, "moves": MOVES_TEXT})
    assert saved.status_code == 302, saved.content.decode()[:2000]
    with schema_context(workspace.schema_name):
        world = World.objects.get(pk=charity.pk)
        assert (world.name, world.move_names) == ("Charity", ["greet", "tell_the_story", "ask"])


def test_the_pages_of_a_business_world_speak_its_words(owner_client, charity):
    badge = owner_client.get("/?world=charity").content.decode()
    assert "real recorded calls of Save the Children donations" in badge
    assert "from Save the Children donations&#x27;s other calls" in badge
    for url in ("/", "/duel/", "/world/", "/policies/", "/environment/", "/calls/"):
        page = owner_client.get(f"{url}?world=charity").content.decode()
        # The world menu names every world, lettings too; the page itself must not.
        page = re.sub(r'<select name="world".*?</select>', "", page, flags=re.S)
        found = set(LETTINGS_WORDS.findall(page))
        assert not found, f"{url} says {found}"

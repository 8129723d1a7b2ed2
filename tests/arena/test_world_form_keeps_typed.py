"""A refused World form keeps what was typed (a refused "Make the world" cleared every field),
and a long world name wraps where names are shown (a 200-character name overflowed the notice
and the title)."""

from __future__ import annotations

import html
import re

from django.conf import settings
from django_tenants.utils import schema_context

from arena.models import World
from arena.services.worlds import NAME_MAX

TYPED = {
    "slug": "lettings",  # taken: the refusal
    "name": "Bikes & frames <second hand>",
    "description": "A second-hand bike seller answers calls.",
    "system_prompt": "You sell used bikes.",
    "moves": "greet: Say hello\nquote: Give the price",
}


def _field(page: str, element_id: str) -> str:
    """What a form field of the page holds: an input's value or a textarea's text."""
    found = re.search(rf'<input[^>]*id="{element_id}"[^>]*value="([^"]*)"', page) or re.search(
        rf'<textarea[^>]*id="{element_id}"[^>]*>(.*?)</textarea>', page, re.S
    )
    return html.unescape(found.group(1)) if found else ""


def test_a_refused_new_world_keeps_what_was_typed(owner_client, workspace):
    answer = owner_client.post("/world/new/", TYPED)
    page = answer.content.decode()
    assert answer.status_code == 200
    assert "exists already" in page
    assert _field(page, "new-slug") == "lettings"
    assert _field(page, "new-name") == TYPED["name"]
    assert _field(page, "new-description") == TYPED["description"]
    assert _field(page, "new-prompt") == TYPED["system_prompt"]
    assert _field(page, "new-moves") == TYPED["moves"]
    # The world in view's own form still shows what that world holds.
    assert _field(page, "world-moves") != TYPED["moves"]
    with schema_context(workspace.schema_name):
        assert World.objects.filter(name=TYPED["name"]).count() == 0


def test_bad_moves_keep_the_rest_of_the_new_world(owner_client):
    typed = {**TYPED, "slug": "bikes", "moves": "greet: hello\ngreet: again"}
    page = owner_client.post("/world/new/", typed).content.decode()
    assert "No world made" in page
    assert _field(page, "new-slug") == "bikes"
    assert _field(page, "new-moves") == typed["moves"]
    assert _field(page, "new-name") == TYPED["name"]


def test_a_refused_change_keeps_what_was_typed(owner_client, workspace):
    typed = {
        "name": "Lettings, renamed",
        "description": "Renting flats.",
        "system_prompt": "Be brief.",
        "moves": "greet: hello\ngreet: again",
    }
    page = owner_client.post("/world/lettings/", typed).content.decode()
    assert "Moves not saved" in page
    assert _field(page, "world-name") == typed["name"]
    assert _field(page, "world-description") == typed["description"]
    assert _field(page, "world-prompt") == typed["system_prompt"]
    assert _field(page, "world-moves") == typed["moves"]
    with schema_context(workspace.schema_name):
        assert World.objects.get(slug="lettings").name == "Lettings"


def test_another_workspace_s_manager_cannot_make_a_world_here(outsider_client, workspace):
    answer = outsider_client.post("/world/new/", {**TYPED, "slug": "bikes"})
    assert answer.status_code in (302, 403)
    assert TYPED["name"] not in answer.content.decode()
    with schema_context(workspace.schema_name):
        assert not World.objects.filter(slug="bikes").exists()


def _rules(css: str) -> dict[str, str]:
    """selector -> its declarations, one entry per selector of a rule."""
    rules: dict[str, str] = {}
    for selectors, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css):
        for selector in selectors.split(","):
            rules[selector.strip()] = rules.get(selector.strip(), "") + body
    return rules


def test_long_names_wrap_in_the_title_and_the_notice(owner_client):
    css = (settings.BASE_DIR / "static" / "levers9.css").read_text()
    rules = _rules(re.sub(r"/\*.*?\*/", "", css, flags=re.S))
    for where in ("h1", ".messages li"):
        assert re.search(r"overflow-wrap:\s*anywhere", rules.get(where, "")), where
    long_name = "Bikes" + "x" * (NAME_MAX - 5)
    page = owner_client.post(
        "/world/new/", {"slug": "long", "name": long_name}, follow=True
    ).content.decode()
    assert f"<h1>World: {long_name}</h1>" in page
    assert re.search(rf'<ul class="messages"><li[^>]*>{long_name} is made', page)

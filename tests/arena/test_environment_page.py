"""Environment → Judge keeps the header's world selector: the page passed its own "worlds"
(pairs of a world and its judge's connection) under the name the page frame's selector reads,
so in every world the selector showed an empty box with no world to choose."""

from __future__ import annotations

import re

from django_tenants.utils import schema_context

from arena.services.worlds import world_create


def _selector_options(html: str) -> list[tuple[str, str]]:
    selector = re.search(r'<select name="world"[^>]*aria-label="World">(.*?)</select>', html, re.S)
    assert selector, "the header has no world selector"
    return re.findall(r'<option value="([^"]*)"[^>]*>([^<]*)</option>', selector[1])


def test_the_header_offers_every_world_on_the_environment_page(owner_client, workspace):
    with schema_context(workspace.schema_name):
        world_create(slug="persuasion", name="Persuasion for Good (real calls)")
    html = owner_client.get("/environment/?world=persuasion").content.decode()
    assert _selector_options(html) == [
        ("lettings", "Lettings"),
        ("persuasion", "Persuasion for Good (real calls)"),
    ]
    assert 'value="persuasion" selected' in html
    assert 'action="/environment/persuasion/judge/"' in html  # the judge forms are all there


def test_another_workspace_does_not_see_the_page(outsider_client):
    assert outsider_client.get("/environment/").status_code in {302, 403}

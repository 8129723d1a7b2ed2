"""Evaluate's World select drives its version lists (issue 40, point 5). Choosing another
world in the select left the lists showing the first world's versions, so submitting answered
"Choose a world and two versions."; and the admin's "Evaluate against the live version…"
offered every world. Now the select reloads the page for its world (a plain GET), the start
form carries that world, a version of another world is refused naming the field, and the admin
action offers only the version's own world."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from evaluation.models import Evaluation
from tests.evaluation.conftest import pushy_in


class _Forms(HTMLParser):
    """Each form of a page: its method, and the options of each select and the hidden inputs
    inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict] = []
        self._select: str | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        attributes = dict(attrs)
        if tag == "form":
            self.forms.append(
                {"method": (attributes.get("method") or "get").lower(), "selects": {}, "hidden": {}}
            )
        elif tag == "select" and self.forms:
            self._select = attributes.get("name")
            self.forms[-1]["selects"][self._select] = []
        elif tag == "option" and self._select:
            self.forms[-1]["selects"][self._select].append(attributes.get("value"))
        elif tag == "input" and self.forms and attributes.get("type") == "hidden":
            self.forms[-1]["hidden"][attributes.get("name")] = attributes.get("value")

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None


def _forms(html: str) -> list[dict]:
    parser = _Forms()
    parser.feed(html)
    return parser.forms


@pytest.fixture
def bakery(lettings, pushy):
    """A second world with scripted customers to evaluate on (as lettings has), and a version
    of its own besides its v1."""
    from arena.services.worlds import world_create_lettings

    world = world_create_lettings(slug="bakery", name="Bakery")
    bakery_pushy, bakery_baseline = pushy_in(world)
    return world, bakery_pushy, bakery_baseline


def test_the_world_select_reloads_the_page_with_that_worlds_versions(owner_client, bakery):
    world, bakery_pushy, bakery_baseline = bakery
    html = owner_client.get(f"/evaluate/?world={world.slug}").content.decode()
    forms = _forms(html)
    chooser = next(form for form in forms if "world" in form["selects"])
    # The select is a GET form of its own: choosing a world reloads the page for it.
    assert chooser["method"] == "get"
    assert {"lettings", "bakery"} <= set(chooser["selects"]["world"])
    assert "selected>Bakery</option>" in re.sub(r'<option value="bakery"\s*', "", html)
    start = next(form for form in forms if "candidate" in form["selects"])
    assert start["method"] == "post"
    assert start["hidden"]["world"] == "bakery"
    bakery_versions = {str(bakery_pushy.pk), str(bakery_baseline.pk)}
    assert set(start["selects"]["candidate"]) == bakery_versions
    assert set(start["selects"]["baseline"]) == bakery_versions


def test_it_starts_in_the_chosen_world(owner_client, bakery, django_capture_on_commit_callbacks):
    world, bakery_pushy, bakery_baseline = bakery
    with django_capture_on_commit_callbacks(execute=False):
        response = owner_client.post(
            "/evaluate/",
            {
                "world": world.slug,
                "candidate": bakery_pushy.pk,
                "baseline": bakery_baseline.pk,
                "seed": "0",
                "confirm": "1",
            },
        )
    assert response.status_code == 302, response.content
    evaluation = Evaluation.objects.get()
    assert (evaluation.world, evaluation.candidate, evaluation.baseline) == (
        world,
        bakery_pushy,
        bakery_baseline,
    )


def test_a_version_of_another_world_is_refused_naming_the_field(owner_client, bakery, pushy):
    world, _bakery_pushy, bakery_baseline = bakery
    response = owner_client.post(
        "/evaluate/",
        {"world": world.slug, "candidate": pushy.pk, "baseline": bakery_baseline.pk, "seed": "0"},
        follow=True,
    )
    assert response.redirect_chain[-1][0] == "/evaluate/?world=bakery"
    page = response.content.decode()
    assert "New version: choose one of Bakery&#x27;s versions" in page
    assert not Evaluation.objects.exists()


def test_another_workspace_is_refused_the_world_select(outsider_client, bakery):
    assert outsider_client.get("/evaluate/?world=bakery").status_code == 302  # to its login
    assert outsider_client.post("/evaluate/", {"world": "bakery"}).status_code == 302
    assert not Evaluation.objects.exists()


# --- the admin's "Evaluate against the live version…" ---------------------------------------

VERSIONS = "/admin/policies/policyversion/"


def _evaluate_against_live(client, version):
    return client.post(
        VERSIONS, {"action": "evaluate_against_live", "_selected_action": [version.pk]}
    )


def test_the_admin_action_offers_only_the_versions_world(owner_client, bakery):
    world, bakery_pushy, bakery_baseline = bakery
    step = _evaluate_against_live(owner_client, bakery_pushy)
    assert step.status_code == 200
    html = step.content.decode()
    forms = _forms(html)
    posting = next(form for form in forms if form["hidden"].get("candidate"))
    assert "world" not in posting["selects"]  # no choice of every world
    assert 'value="lettings"' not in html
    assert posting["hidden"]["world"] == "bakery"
    assert posting["hidden"]["baseline"] == str(bakery_baseline.pk)  # bakery's v1 is live
    assert "Bakery" in html


def test_another_workspace_cannot_take_the_admin_action(outsider_client, bakery):
    _world, bakery_pushy, _bakery_baseline = bakery
    step = _evaluate_against_live(outsider_client, bakery_pushy)
    assert step.status_code == 302  # to its own login
    assert 'action="/evaluate/"' not in step.content.decode()

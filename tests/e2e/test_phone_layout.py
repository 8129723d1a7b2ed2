"""On a phone (390 x 844, issue 40): the header keeps to a quarter of the screen by folding its
navigation behind a Menu button that opens it, and is open as before on a wide screen; Policies'
versions table (Make live, Runs on) scrolls sideways with its cue; and a world with a long name
keeps the header's and Evaluate's World lists within the screen. The every-control crawl checks
the same on every page; this test checks that the folded navigation still works."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import sign_in
from tests.e2e.crawler import HEADER_SHARE, PHONE_HEIGHT, PHONE_WIDTH

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

LONG_NAME = "Second-hand bikes, scooters and prams marketplace of the whole region (real calls)"


def _box(page, selector: str) -> dict:
    return page.eval_on_selector(selector, "e => e.getBoundingClientRect().toJSON()")


def test_the_header_folds_on_a_phone_and_its_menu_opens(page, e2e_server, e2e_workspace, e2e_db):
    from arena.services.worlds import world_create

    with e2e_db(e2e_workspace):
        world_create(slug="bikes", name=LONG_NAME)
    page.set_viewport_size({"width": PHONE_WIDTH, "height": PHONE_HEIGHT})
    sign_in(page, e2e_server, e2e_workspace.slug, e2e_workspace.owner_email)
    page.goto(e2e_server.url_for(e2e_workspace.slug, "/policies/?world=lettings"))

    assert _box(page, "body > header")["height"] <= PHONE_HEIGHT * HEADER_SHARE
    train = page.locator("nav.main a", has_text="Train")
    assert not train.is_visible()
    page.click("details.menu > summary")
    assert train.is_visible()

    # Make live and Runs on: the versions table scrolls inside itself, and shows its cue.
    versions = page.eval_on_selector(
        "table#versions",
        "t => ({scrolls: t.scrollWidth > t.clientWidth, cue: getComputedStyle(t).backgroundImage})",
    )
    assert versions["scrolls"], "the versions table fits a phone: nothing to cue"
    assert "gradient" in versions["cue"]

    train.click()
    page.wait_for_url("**/train/**")

    # A world's long name stays within the screen, in the header and in Evaluate's form.
    page.goto(e2e_server.url_for(e2e_workspace.slug, "/evaluate/?world=bikes"))
    assert _box(page, "header select[name=world]")["right"] <= PHONE_WIDTH
    assert _box(page, "#evaluate-world select[name=world]")["right"] <= PHONE_WIDTH
    assert _box(page, "body > header")["height"] <= PHONE_HEIGHT * HEADER_SHARE

    # On a wide screen the navigation is open as before, without a Menu button.
    page.set_viewport_size({"width": 1280, "height": 800})
    page.wait_for_function("document.querySelector('details.menu').open")
    assert page.locator("nav.main a", has_text="Duel").is_visible()
    assert not page.locator("details.menu > summary").is_visible()

"""Every control on every page, in real Chromium at a phone's width: an owner opens every page
of both demo worlds (Lettings, simulated; Persuasion, real recorded calls), submits every form
and presses every button that does not start a long job (tests.e2e.crawler.LONG_JOBS names
those, each with its reason). No error page, no JSON shown as a page, no console error, no
page wider than 390 px, and a phone's layout that shows what it holds (issue 40): a header of at
most a quarter of the 390 x 844 screen, a cue on whatever scrolls sideways, plots and lists that
fit. The pages added beside the header's (Picks, Users) are crawled where this checkout has
them."""

from __future__ import annotations

import pytest

from levers9.shipped_data import PERSUASION_CALLS
from tests.e2e.conftest import sign_in
from tests.e2e.crawler import LONG_JOBS, Crawler

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# The pages a person reaches from the header, in each world: the crawl must have opened them.
PAGES = ("/", "/duel/", "/train/", "/evaluate/", "/policies/", "/world/", "/environment/")
PAGES_TOO = ("/engines/", "/endpoints/", "/release/", "/calls/")
# Pages added in issue 40, each by its own change: crawled (and required) where they resolve.
NEWER_PAGES = ("/picks/", "/users/")


def _pages_here(paths: tuple[str, ...]) -> list[str]:
    """Those of `paths` that this checkout's workspace addresses serve."""
    from django.urls import Resolver404, resolve

    here = []
    for path in paths:
        try:
            resolve(path)
        except Resolver404:
            continue
        here.append(path)
    return here


def _demo_worlds(e2e_db, e2e_workspace) -> None:
    """The demo's two worlds, as `manage.py demo_setup` makes them (fewer calls and pairs)."""
    from arena.models import World
    from arena.services.calls import calls_import
    from arena.services.pairs import duel_pairs_generate
    from arena.services.worlds import world_create

    with e2e_db(e2e_workspace):
        world = world_create(
            slug="persuasion",
            name="Persuasion for Good (real calls)",
            description="Real recorded persuasion chats with their real outcome.",
        )
        lines = PERSUASION_CALLS.read_text(encoding="utf-8").splitlines()[:60]
        calls_import(world=world, text="\n".join(lines), source=PERSUASION_CALLS.name)
        for each in World.objects.all():
            duel_pairs_generate(world=each, count=8)


@pytest.mark.skipif(not PERSUASION_CALLS.exists(), reason="the shared real-call data is not here")
def test_every_control_on_every_page_works(page, e2e_server, e2e_workspace, e2e_db):
    _demo_worlds(e2e_db, e2e_workspace)
    sign_in(page, e2e_server, e2e_workspace.slug, e2e_workspace.owner_email)
    base = e2e_server.url_for(e2e_workspace.slug, "").rstrip("/")

    crawler = Crawler(page, base, skip=LONG_JOBS)
    crawler.crawl(["/?world=lettings", "/?world=persuasion"])
    newer = _pages_here(NEWER_PAGES)
    # Reached from the header when it links them; a page no link reaches yet is a start.
    reached = {path.split("?")[0] for path in crawler.visited}
    findings = crawler.crawl([path for path in newer if path not in reached])

    opened = {path.split("?")[0] for path in crawler.visited}
    expected = set(PAGES) | set(PAGES_TOO) | set(newer)
    assert expected <= opened, f"not opened: {expected - opened}"
    assert any(path.startswith("/calls/") and path != "/calls/" for path in opened)
    assert any("/duel/generate/" in form for form in crawler.submitted)
    assert any("#pick-A" in button for button in crawler.pressed)
    assert not findings, "\n".join(
        [*map(str, findings), "", f"{len(crawler.visited)} pages, skipped:", *crawler.skipped]
    )

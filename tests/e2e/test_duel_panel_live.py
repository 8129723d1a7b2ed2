"""The Duel's side panel keeps up in a real browser: after a pick its queue figures change
without a reload (after 32 picks it still said "60 open pairs · 0 picks here")."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import reviewer_at_the_duel

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_the_panel_counts_a_pick_without_a_reload(page, e2e_server, e2e_workspace, e2e_db):
    reviewer_at_the_duel(page, e2e_server, e2e_workspace, e2e_db)
    assert page.inner_text("#picks-here") == "0"
    page.evaluate("window.loadedOnce = true")  # gone if the page reloads
    page.keyboard.press("ArrowLeft")
    page.wait_for_selector("#duel[data-picked='true']")
    page.wait_for_function("document.querySelector('#picks-here').textContent === '1'")
    assert page.evaluate("window.loadedOnce") is True
    with e2e_db(e2e_workspace):
        from arena.models import DuelPair

        open_pairs = DuelPair.objects.filter(world__slug="lettings", is_open=True).count()
    assert page.inner_text("#open-pairs") == str(open_pairs)

"""The Duel's tie, note and undo in a real browser (issue 40, point 10): a reviewer writes a
note, calls the pair a tie with T, takes it back with "Undo my last pick" and is shown the
same pair again to pick anew."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import reviewer_at_the_duel

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_a_tie_with_a_note_then_undo_serves_the_pair_again(page, e2e_server, e2e_workspace, e2e_db):
    from arena.models import Pick

    reviewer = reviewer_at_the_duel(page, e2e_server, e2e_workspace, e2e_db)
    pair = page.get_attribute("#duel", "data-pair")
    assert not page.is_visible("#undo")

    page.fill("#pick-note", "Both say the same, A a little warmer")
    page.click("body")  # out of the note, so the key is the Duel's
    page.keyboard.press("t")
    page.wait_for_selector("#duel[data-picked='true']")
    assert "You called it a tie." in page.inner_text("#reveal-A")
    with e2e_db(e2e_workspace):
        pick = Pick.objects.get(reviewer_name=reviewer)
        assert (pick.kind, pick.note) == ("tie", "Both say the same, A a little warmer")

    page.click("#undo")
    page.wait_for_selector("#duel[data-picked='false']")
    assert "Undone: pick" in page.inner_text("#duel-message")
    assert page.get_attribute("#duel", "data-pair") == pair
    assert not page.is_visible("#undo")
    assert page.input_value("#pick-note") == ""
    with e2e_db(e2e_workspace):
        assert not Pick.objects.filter(reviewer_name=reviewer).exists()
    # Picked anew: a preference this time.
    page.keyboard.press("ArrowRight")
    page.wait_for_selector("#duel[data-picked='true']")
    with e2e_db(e2e_workspace):
        assert Pick.objects.get(reviewer_name=reviewer).kind == "preference"

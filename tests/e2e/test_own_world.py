"""A business's own world in a real browser: make it on the World page, import its recorded
calls in the admin, duel three pairs, train the move strategy off-line, evaluate v2 against v1
— all in that world, with no lettings words on any page it shows."""

from __future__ import annotations

import re

import pytest

from levers9.shipped_data import PERSUASION_CALLS
from tests.e2e.test_whole_game import _sign_in, _until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

LETTINGS_WORDS = re.compile(r"\b(viewing|property|landlord|tenancy|flat|rent)\b", re.IGNORECASE)
MOVES = """greet: say hello and ask how they are
tell_the_story: what the charity does for children
ask_for_a_donation: ask whether they would give
suggest_an_amount: name a small concrete amount
thank: thank them, whatever they decide"""


def _no_lettings_words(page, where: str, allowed: set[str]) -> None:
    shown = {word.lower() for word in LETTINGS_WORDS.findall(page.inner_text("main"))}
    assert shown <= allowed, f"{where} shows lettings words {shown - allowed}"


def test_a_business_runs_its_own_world_end_to_end(
    page, game_server, e2e_workspace, e2e_db, tmp_path
):
    from arena.models import Turn, World

    base = game_server
    _sign_in(page, base, e2e_workspace.owner_email)

    # The World page makes the world, with its own prompt and moves.
    page.goto(f"{base}/world/")
    page.fill("#new-slug", "charity")
    page.fill("#new-name", "Save the Children donations")
    page.fill("#new-description", "A persuader asks for a donation to Save the Children.")
    page.fill("#new-prompt", "You ask politely for a donation to Save the Children.")
    page.fill("#new-moves", MOVES)
    page.click("#world-new button[type=submit]")
    page.wait_for_selector("option[value=charity][selected]", state="attached")

    # Its recorded calls, uploaded in the workspace admin.
    calls = tmp_path / "calls.jsonl"
    calls.write_text("\n".join(PERSUASION_CALLS.read_text().splitlines()[:80]) + "\n")
    with e2e_db(e2e_workspace):
        world_id = World.objects.get(slug="charity").pk
    page.goto(f"{base}/admin/arena/world/{world_id}/import-calls/")
    page.set_input_files("input[type=file]", str(calls))
    page.click("form[enctype] input[type=submit]")
    page.wait_for_selector("text=80 calls imported")
    with e2e_db(e2e_workspace):
        world_words = {
            word.lower()
            for text in Turn.objects.filter(call__world__slug="charity").values_list(
                "text", flat=True
            )
            for word in LETTINGS_WORDS.findall(text)
        }

    # Three pairs duelled with the keyboard, the map showing the world's own moves.
    page.goto(f"{base}/duel/?world=charity")
    page.wait_for_selector("#duel[data-pair]", timeout=60_000)
    assert page.query_selector('[data-move="ask_for_a_donation"]')
    assert not page.query_selector('[data-move="propose_viewing"]')
    _no_lettings_words(page, "the Duel", world_words)
    for _ in range(3):
        current = page.get_attribute("#duel", "data-pair")
        _no_lettings_words(page, "a duel pair", world_words)
        page.keyboard.press("ArrowLeft")
        page.wait_for_selector("#duel[data-picked='true']")
        page.keyboard.press("n")
        page.wait_for_function(
            "old => document.querySelector('#duel').dataset.pair !== old",
            arg=current,
            timeout=60_000,
        )

    # The move-strategy card learns off-line from the calls and ends in v2.
    page.goto(f"{base}/train/?world=charity")
    assert page.is_visible("text=has no simulator")
    _no_lettings_words(page, "Train", world_words)
    page.click("text=Train move strategy")
    row = page.locator("tr[data-job]", has_text="Move strategy (off-line")
    row.locator("[data-field=state]", has_text="Done").wait_for(timeout=240_000)
    assert "v2" in row.locator("[data-field=version]").inner_text()
    page.goto(f"{base}/train/?world=charity")
    record = page.inner_text("[data-field=offline-record]")
    assert "held-out calls" in record
    assert "trust" in record

    # Evaluate v2 against v1 on the world's held-out calls.
    page.goto(f"{base}/evaluate/?world=charity")
    _no_lettings_words(page, "Evaluate", world_words)
    v2 = page.eval_on_selector(
        "select[name=candidate]",
        "s => [...s.options].find(o => o.text.startsWith('v2 ·')).text",
    )
    page.select_option("select[name=candidate]", label=v2)
    page.select_option("select[name=baseline]", label="v1 · baseline")
    page.click("text=Start evaluation")
    page.wait_for_url(re.compile(r"/evaluate/\d+/"))
    _until(page, page.url, "#radar .main-svg", timeout=300)
    _no_lettings_words(page, "the evaluation", world_words)

    page.goto(f"{base}/policies/?world=charity")
    _no_lettings_words(page, "Policies", world_words)

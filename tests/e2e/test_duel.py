"""The Duel in a real browser: a reviewer works through three pairs with the keyboard (one
with reasons), skips one, overrules the judge; an owner freezes and downloads the TSV, whose
rows match the picks."""

from __future__ import annotations

import pytest

from arena import preference_format
from tests.e2e.conftest import reviewer_at_the_duel, sign_in

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _pair_id(page) -> str:
    return page.get_attribute("#duel", "data-pair")


def _wait_for_new_pair(page, old: str) -> str:
    page.wait_for_function(
        "old => { const duel = document.querySelector('#duel');"
        " return duel.dataset.pair !== old && duel.dataset.picked === 'false'; }",
        arg=old,
    )
    return _pair_id(page)


def _texts(page) -> dict[str, str]:
    return {side: page.inner_text(f"#text-{side}") for side in "AB"}


def test_it_duels_overrules_freezes_and_downloads(page, e2e_server, e2e_workspace, e2e_db):
    from arena.models import JudgeOverride, Pick

    reviewer = reviewer_at_the_duel(page, e2e_server, e2e_workspace, e2e_db)
    assert page.is_visible("text=A / ←")
    assert page.is_visible("text=N / Enter")

    expected = []
    # Pair 1: tick two reasons with the keys, pick A with ←.
    first = _pair_id(page)
    shown = _texts(page)
    page.keyboard.press("2")
    page.keyboard.press("6")
    assert page.is_checked("#reason-respect")
    assert page.is_checked("#reason-timing")
    page.keyboard.press("ArrowLeft")
    page.wait_for_selector("#duel[data-picked='true']")
    assert page.is_visible("#reveal-A")
    assert page.is_visible("#reveal-B")
    assert "Written by" in page.inner_text("#reveal-A")
    assert "Judge (rubric-v1)" in page.inner_text("#reveal-B")
    expected.append((shown["A"], shown["B"], ("respect", "timing")))

    # Overrule the judge on reply A's respect score.
    page.select_option("select[name='verdict-A-respect']", "0")
    page.click("#overrule-A")
    page.wait_for_selector("#duel-message:has-text('Overruled the judge on A')")
    page.click("h1")  # leave the form: the shortcuts belong to the page again

    # Pair 2: next with N, pick B with the B key.
    page.keyboard.press("n")
    second = _wait_for_new_pair(page, first)
    shown = _texts(page)
    page.keyboard.press("b")
    page.wait_for_selector("#duel[data-picked='true']")
    expected.append((shown["B"], shown["A"], ()))

    # Next with Enter, skip that pair with S, then pick B with → on the one after.
    page.keyboard.press("Enter")
    skipped = _wait_for_new_pair(page, second)
    page.keyboard.press("s")
    third = _wait_for_new_pair(page, skipped)
    shown = _texts(page)
    page.keyboard.press("ArrowRight")
    page.wait_for_selector("#duel[data-picked='true']")
    assert "Saved: B is better" in page.inner_text("#duel-message")
    expected.append((shown["B"], shown["A"], ()))
    assert len({first, second, skipped, third}) == 4

    with e2e_db(e2e_workspace):
        assert Pick.objects.count() == 3
        override = JudgeOverride.objects.get()
        assert (override.scores, override.reviewer_name) == ({"respect": 0.0}, reviewer)
        picked_pairs = set(Pick.objects.values_list("pair_id", flat=True))
    assert picked_pairs == {int(first), int(second), int(third)}

    # The owner freezes from the page and downloads the TSV.
    page.context.clear_cookies()
    sign_in(page, e2e_server, e2e_workspace.slug, e2e_workspace.owner_email)
    page.goto(e2e_server.url_for(e2e_workspace.slug, "/duel/#freeze"))
    page.click("#freeze-button")
    page.wait_for_selector("text=Froze Lettings preferences v1: 3 new picks, 3 in all.")
    with page.expect_download() as download_info:
        page.click("a.download[data-version='1']")
    download = download_info.value
    assert download.suggested_filename == "preferences-v1.tsv"
    path = download.path()

    rows = list(preference_format.read_rows(path))
    assert sorted((row.chosen, row.rejected, row.reasons) for row in rows) == sorted(expected)
    assert {row.reviewer for row in rows} == {reviewer}
    assert {row.pack for row in rows} == {"lettings"}
    frozen_file = (
        e2e_server.datasets_dir / e2e_workspace.schema_name / "preferences" / "lettings" / "v1.tsv"
    )
    assert frozen_file.read_bytes() == open(path, "rb").read()  # noqa: SIM115

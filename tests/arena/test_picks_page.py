"""The Picks page and the picks API (issue 40, point 10): a world's picks filtered by reviewer,
reason, kind and date, with each reviewer's counts in the filtered set, a page at a time and
as CSV; a tie, both bad and a note through the API; another workspace never sees any of it."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from django_tenants.utils import schema_context

from arena.models import Pick, World
from arena.services.pairs import duel_pairs_generate
from arena.services.queue import duel_next, pick_submit
from arena.views import PICKS_CSV_COLUMNS
from tests.arena.duel_helpers import real_world
from tests.conftest import client_for, make_user

FORMULA_NOTE = '=HYPERLINK("http://x")'


def _pick(world, reviewer, **verdict) -> Pick:
    pair = duel_next(world=world, reviewer=reviewer, generate=False)
    return pick_submit(pair_id=pair.pk, reviewer=reviewer, **{"chosen": "A", **verdict})


@pytest.fixture
def picks(workspace):
    """In acme's Lettings: Rita 3 picks (a tie with a note, one a week old), Rob 2 (both bad,
    a note that starts like a formula); one pick in another world."""
    make_user(workspace, "rita@acme.test", "reviewer")
    make_user(workspace, "rob@acme.test", "reviewer")
    with schema_context(workspace.schema_name):
        users = get_user_model().objects
        rita, rob = users.get(username="rita@acme.test"), users.get(username="rob@acme.test")
        lettings = World.objects.get(slug="lettings")
        duel_pairs_generate(world=lettings, count=8)
        old = _pick(lettings, rita, reasons=["respect"])
        Pick.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=7))
        _pick(lettings, rita, kind="tie", note="same thing twice", reasons=["timing"])
        _pick(lettings, rita, chosen="B", reasons=["respect", "timing"])
        _pick(lettings, rob, kind="both_bad", reasons=["accuracy"])
        _pick(lettings, rob, note=FORMULA_NOTE)
        market = real_world("market")
        duel_pairs_generate(world=market, count=2)
        _pick(market, rita, note="elsewhere")
        return {"old_pick": old.pk}


def _shown(response) -> list[int]:
    return [pick.pk for pick in response.context["picks"]]


def _counts(response) -> dict[str, tuple[int, int, int, int]]:
    return {
        row["reviewer_name"]: (row["picks"], row["ties"], row["both_bad"], row["notes"])
        for row in response.context["reviewer_counts"]
    }


def test_it_lists_a_worlds_picks_with_each_reviewers_counts(workspace, picks):
    client = client_for(workspace, "rita@acme.test")
    page = client.get("/picks/", {"world": "lettings"})
    assert page.status_code == 200
    assert len(_shown(page)) == 5  # the market's pick is another world's
    assert _counts(page) == {
        "rita@acme.test": (3, 1, 0, 1),
        "rob@acme.test": (2, 0, 1, 1),
    }
    html = page.content.decode()
    assert "same thing twice" in html
    assert "elsewhere" not in html
    assert 'href="/picks/"' in html  # the header's link
    # The Duel links to it.
    assert "/picks/?world=lettings" in client.get("/duel/", {"world": "lettings"}).content.decode()


@pytest.mark.parametrize(
    ("params", "reviewers"),
    [
        ({"reviewer": "rob@acme.test"}, {"rob@acme.test": (2, 0, 1, 1)}),
        ({"reason": "timing"}, {"rita@acme.test": (2, 1, 0, 1)}),
        ({"kind": "both_bad"}, {"rob@acme.test": (1, 0, 1, 0)}),
        ({"until": "today-3"}, {"rita@acme.test": (1, 0, 0, 0)}),
        (
            {"since": "today", "kind": "preference"},
            {
                "rita@acme.test": (1, 0, 0, 0),
                "rob@acme.test": (1, 0, 0, 1),
            },
        ),
    ],
)
def test_it_filters_and_counts_in_the_filtered_set(workspace, picks, params, reviewers):
    today = timezone.localdate()
    days = {"today": today, "today-3": today - timedelta(days=3)}
    params = {name: str(days.get(value, value)) for name, value in params.items()}
    page = client_for(workspace, "owner@acme.test").get("/picks/", {"world": "lettings", **params})
    assert _counts(page) == reviewers
    assert len(_shown(page)) == sum(counts[0] for counts in reviewers.values())


def test_it_pages_and_says_a_bad_date(workspace, picks, monkeypatch):
    monkeypatch.setattr("arena.views.PICKS_PER_PAGE", 2)
    client = client_for(workspace, "owner@acme.test")
    first = client.get("/picks/", {"world": "lettings"})
    third = client.get("/picks/", {"world": "lettings", "page": 3})
    assert (len(_shown(first)), len(_shown(third))) == (2, 1)
    assert first.context["picks"].paginator.num_pages == 3
    assert picks["old_pick"] in _shown(third)  # newest first
    # The counts are the whole filtered set's, not the page's.
    assert sum(row["picks"] for row in first.context["reviewer_counts"]) == 5
    bad = client.get("/picks/", {"world": "lettings", "since": "last week"})
    assert bad.status_code == 200
    assert "since&#x27; is a day as YYYY-MM-DD" in bad.content.decode()
    assert len(_shown(bad)) == 2  # unfiltered, first page


def test_the_csv_holds_the_filtered_picks_inert_in_a_spreadsheet(workspace, picks):
    client = client_for(workspace, "owner@acme.test")
    response = client.get(
        "/picks/", {"world": "lettings", "reviewer": "rob@acme.test", "download": "csv"}
    )
    assert response["Content-Type"] == "text/csv"
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [(row["reviewer"], row["kind"]) for row in rows] == [
        ("rob@acme.test", "preference"),
        ("rob@acme.test", "both_bad"),
    ]
    assert rows[0]["note"] == "'" + FORMULA_NOTE


def test_another_workspace_never_sees_the_picks(workspace, other_workspace, picks, outsider_client):
    refused = outsider_client.get("/picks/", {"world": "lettings"})
    assert refused.status_code in {302, 403}
    assert b"same thing twice" not in refused.content
    assert outsider_client.get("/api/rl/picks/", {"kind": "tie"}).status_code in {401, 403}
    rival = client_for(other_workspace, "owner@rival.test")
    own = rival.get("/picks/", {"world": "lettings"})
    assert own.status_code == 200
    assert _shown(own) == []
    assert _counts(own) == {}
    rival_csv = rival.get("/picks/", {"download": "csv"})
    assert b"".join(rival_csv.streaming_content).decode().splitlines() == [
        ",".join(PICKS_CSV_COLUMNS)
    ]
    assert rival.get("/api/rl/picks/").json()["count"] == 0


def test_the_api_lists_with_the_same_filters(workspace, picks):
    client = client_for(workspace, "rob@acme.test")
    ties = client.get("/api/rl/picks/", {"pack": "lettings", "kind": "tie"}).json()["results"]
    assert [(pick["kind"], pick["note"], pick["reviewer_name"]) for pick in ties] == [
        ("tie", "same thing twice", "rita@acme.test")
    ]
    bad = client.get("/api/rl/picks/", {"kind": "meh"})
    assert bad.status_code == 400
    assert "'kind'" in bad.json()["detail"]
    assert client.get("/api/rl/picks/", {"until": "tomorrow"}).status_code == 400


def test_the_api_takes_a_tie_and_a_note_and_refuses_a_long_note(workspace, picks):
    make_user(workspace, "sue@acme.test", "reviewer")
    client = client_for(workspace, "sue@acme.test")
    item = client.get("/api/rl/duel/next/", {"pack": "lettings"}).json()["item"]
    too_long = client.post(
        "/api/rl/picks/",
        {"pair": item["pair"], "kind": "tie", "note": "x" * 1001},
        content_type="application/json",
    )
    assert too_long.status_code == 400
    assert "note" in too_long.json()
    tie = client.post(
        "/api/rl/picks/",
        {"pair": item["pair"], "kind": "tie", "note": " as good ", "reasons": ["respect"]},
        content_type="application/json",
    )
    assert tie.status_code == 201, tie.content
    assert (tie.json()["kind"], tie.json()["note"], tie.json()["chosen_side"]) == (
        "tie",
        "as good",
        "A",
    )
    assert set(tie.json()["reveal"]) == {"A", "B"}


def test_the_schema_describes_the_new_paths(api_schema):
    assert "/api/rl/picks/undo/" in api_schema
    assert "/api/rl/picks/{id}/" in api_schema
    assert "both_bad" in api_schema

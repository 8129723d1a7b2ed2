"""A judge's held-out agreement shows only on at least MIN_HELD_OUT_ITEMS items: a new world's
fit on 4 held-out picks showed "1.000 [1.000, 1.000] · κ 1.000" with no warning, and Lettings'
0.833 [0.500, 1.000] on 6 picks was labelled chance. Now both say "too few to measure (n = …)"
on Environment → Judge, in the API (the figure null, too_few saying why) and in the admin; and
a reason's row says which held-out picks it counts."""

from __future__ import annotations

import pytest
from django_tenants.utils import schema_context

from trainers.judge.standing import (
    ABOVE_CHANCE,
    AT_CHANCE,
    MIN_HELD_OUT_ITEMS,
    TOO_FEW,
    measure_shown,
    report_standing,
)


def _pairs(n: int, accuracy: float, ci: list[float], kappa: float) -> dict:
    return {"pairs": n, "accuracy": accuracy, "accuracy_ci": ci, "ties": 0, "kappa": kappa,
            "at_chance": ci[0] <= 0.5}  # fmt: skip


# What a fit on a new world's first picks reported: 4 held out, every one agreed.
FOUR_PICKS = {
    "trained_on": {"pairs": 16, "overrides": 0, "outcome_turns": 0, "outcome_calls": 0},
    "held_out": {"pairs": 4, "outcome_turns": 0},
    "pairs": {
        "fitted": _pairs(4, 1.0, [1.0, 1.0], 1.0),
        "rubric": _pairs(4, 0.75, [0.25, 1.0], 0.5),
    },
    "dimensions": {
        "respect": {
            "fitted": _pairs(3, 0.6667, [0.0, 1.0], 0.4),
            "rubric": _pairs(3, 0.3333, [0.0, 1.0], 0.0),
            "own_head": True,
        }
    },
}


def test_it_shows_a_measure_only_from_enough_held_out_items():
    few = measure_shown(_pairs(MIN_HELD_OUT_ITEMS - 1, 0.9, [0.8, 1.0], 0.8), "pairs")
    assert (few["accuracy"], few["accuracy_ci"], few["kappa"]) == (None, None, None)
    assert few["too_few"] == f"too few to measure (n = {MIN_HELD_OUT_ITEMS - 1})"
    enough = measure_shown(_pairs(MIN_HELD_OUT_ITEMS, 0.9, [0.8, 1.0], 0.8), "pairs")
    assert (enough["accuracy"], enough["kappa"], enough["too_few"]) == (0.9, 0.8, None)
    assert measure_shown(few, "pairs") == few  # what is shown shows the same


def test_too_few_picks_are_too_few_not_chance():
    # Lettings: 0.833 [0.500, 1.000] on 6 picks was labelled chance.
    lettings = {"pairs": {"fitted": _pairs(6, 0.8333, [0.5, 1.0], 0.67)}}
    assert report_standing(lettings)["state"] == TOO_FEW
    assert report_standing(FOUR_PICKS)["state"] == TOO_FEW
    at_chance = {"outcomes": {"fitted": {"calls": 120, "auc": 0.504, "auc_ci": [0.42, 0.587]}}}
    assert report_standing(at_chance) == {
        "state": AT_CHANCE,
        "figures": "AUC 0.50 [0.42, 0.59]",
        "items": "120 held-out calls",
    }
    above = {"pairs": {"fitted": _pairs(120, 0.64, [0.55, 0.72], 0.28)}}
    assert report_standing(above)["state"] == ABOVE_CHANCE


@pytest.fixture
def new_world(in_workspace):
    from arena.models import JudgeVersion
    from arena.services.worlds import world_create

    world = world_create(slug="bakery", name="Bakery")
    version = JudgeVersion.objects.create(world=world, number=1, model_dir="-", report=FOUR_PICKS)
    assert version.at_chance is False
    return world


def test_the_judge_panel_says_too_few_to_measure(owner_client, new_world):
    html = owner_client.get("/environment/?world=bakery").content.decode()
    section = html[html.index('data-world="bakery"') :]
    section = section[: section.index("</section>")]
    assert "1.000 [1.000, 1.000]" not in section
    assert "κ 1.000" not in section
    assert "too few to measure (n = 4)" in section
    assert 'data-standing="too_few"' in section
    assert "agrees no better than chance" not in section
    # The reason's row says what it counts, and does not show 0.667 beside the total.
    assert "where reviewers ticked respect: 3 of the 4 held-out picks" in section
    assert "0.667" not in section
    assert "too few to measure (n = 3)" in section


def test_the_api_gives_null_with_the_reason(owner_client, outsider_client, new_world):
    response = owner_client.get("/api/rl/packs/bakery/judge/versions/")
    assert response.status_code == 200, response.content
    version = response.json()[0]
    fitted = version["report"]["pairs"]["fitted"]
    assert (fitted["accuracy"], fitted["accuracy_ci"], fitted["kappa"]) == (None, None, None)
    assert fitted["too_few"] == "too few to measure (n = 4)"
    respect = version["report"]["dimensions"]["respect"]["fitted"]
    assert (respect["accuracy"], respect["too_few"]) == (None, "too few to measure (n = 3)")
    assert (version["standing"], version["at_chance"]) == ("too_few", False)
    # Another workspace reads none of it.
    refused = outsider_client.get("/api/rl/packs/bakery/judge/versions/")
    assert refused.status_code in {401, 403, 404}
    assert b"too few" not in refused.content


def test_the_admin_says_too_few_to_measure(owner_client, new_world):
    listing = owner_client.get("/admin/arena/judgeversion/").content.decode()
    assert "too few to measure (n = 4)" in listing
    assert "1.00 [1.00, 1.00]" not in listing


def test_another_workspaces_version_is_not_shown(owner_client, other_workspace, in_workspace):
    from arena.models import JudgeVersion, World

    with schema_context(other_workspace.schema_name):
        world = World.objects.get(slug="lettings")
        JudgeVersion.objects.create(world=world, number=7, model_dir="-", report=FOUR_PICKS)
    html = owner_client.get("/environment/?world=lettings").content.decode()
    assert "fitted v7" not in html
    assert owner_client.get("/api/rl/packs/lettings/judge/versions/").json() == []

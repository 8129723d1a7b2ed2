"""Evaluate's radar is its world's own rubric (issue 40, point 2): a world that names its own
dimensions is scored and drawn on them, never on the lettings seven it no longer has."""

from __future__ import annotations

from evaluation.summary import evaluation_chart_data

OWN_RUBRIC = [
    {"name": "respect", "weight": 2},
    {"name": "viewing", "label": "Viewing booked", "help": "Whether the reply books a viewing."},
    {"name": "compliance", "weight": 2},
]


def test_the_radar_and_its_chart_are_the_worlds_own_dimensions(lettings, pushy, baseline, evaluate):
    from arena.services.worlds import world_update

    world_update(world=lettings, dimensions=OWN_RUBRIC)
    evaluation = evaluate(lettings, pushy, baseline)
    summary = evaluation.summary
    names = ["respect", "viewing", "compliance"]
    for side in ("candidate", "baseline", "yardstick"):
        assert list(summary[side]["radar"]) == names
        assert all(0.0 <= value <= 1.0 for value in summary[side]["radar"].values())
    assert [row["name"] for row in summary["dimensions"]] == names
    chart = evaluation_chart_data(evaluation)
    assert chart["dimensions"] == ["Respect", "Viewing booked", "Compliance"]
    assert all(len(series["values"]) == 3 for series in chart["series"])

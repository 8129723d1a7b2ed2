"""The lead-to-order lens on the shared real calls: the won rate by band of the real agent's
opening judge score, with the counts, the versions of an evaluation placed on it, labelled as
observational, and cached so that reading it again asks the judge nothing."""

from __future__ import annotations

import json

from arena.held_out import TURNS_PER_CALL
from arena.judge.world_judge import judge_for_world
from arena.models import Judgement
from evaluation.lens import LENS_BANDS, world_score_vs_outcome
from evaluation.scoring import band_of
from levers9.shipped_data import PERSUASION_CALLS
from tests.evaluation.conftest import pushy_in
from trainers.judge.rubric import Judge, Turn


def _opening_scores_from_the_file(judge: Judge) -> list[tuple[float, str]]:
    """Each call's opening score computed straight from the file, with the world's judge (the
    rubric judge behind the world's on-topic guard)."""
    scores = []
    for line in PERSUASION_CALLS.read_text().splitlines():
        call = json.loads(line)
        context: list[Turn] = []
        totals: list[float] = []
        for turn in call["turns"]:
            if turn["speaker"] == "agent" and len(totals) < TURNS_PER_CALL:
                totals.append(judge.score(context, turn["text"].strip()).total)
            context.append(Turn(turn["speaker"], turn["text"].strip()))
        if totals:
            scores.append((sum(totals) / len(totals), call["outcome"]))
    return scores


def test_it_bands_the_won_rate_of_the_real_calls_by_opening_judge_score(real_world):
    lens = world_score_vs_outcome(world=real_world)
    from_file = _opening_scores_from_the_file(judge_for_world(real_world))
    labelled = [(score, outcome) for score, outcome in from_file if outcome in ("won", "lost")]

    assert lens["observational"] is True
    assert "cannot change a recorded outcome" in lens["note"]
    assert lens["calls_total"] == len(PERSUASION_CALLS.read_text().splitlines())
    assert lens["calls_scored"] == lens["calls_with_openings"] == len(from_file)
    assert lens["calls_labelled"] == len(labelled)
    assert lens["won"] == sum(1 for _score, outcome in labelled if outcome == "won")
    assert lens["band_count"] == len(lens["bands"]) == LENS_BANDS

    bands = lens["bands"]
    assert [band["band"] for band in bands] == list(range(LENS_BANDS))
    assert sum(band["calls"] for band in bands) == lens["calls_labelled"]
    assert sum(band["won"] for band in bands) == lens["won"]
    for lower, upper in zip(bands, bands[1:], strict=False):
        assert lower["high"] == upper["low"]  # contiguous, ascending
    for band in bands:
        assert band["calls"] > 0
        assert band["won_rate"] == round(band["won"] / band["calls"], 4)
        assert band["ci_low"] <= band["won_rate"] <= band["ci_high"]

    # The same calls fall in the same bands when scored independently from the file.
    counts = [0] * LENS_BANDS
    for score, _outcome in labelled:
        counts[band_of(lens["edges"], round(score, 4))] += 1
    assert counts == [band["calls"] for band in bands]


def test_it_places_the_evaluated_versions_on_the_lens(real_world, evaluate):
    pushy, baseline = pushy_in(real_world)
    evaluation = evaluate(real_world, pushy, baseline)
    summary = evaluation.summary
    assert summary["kind"] == "real"
    assert summary["yardstick"]["label"] == "real agent"
    assert summary["candidate"]["compared_with_yardstick"] == summary["moments"]

    lens = world_score_vs_outcome(world=real_world)
    assert lens["evaluation"] == evaluation.pk
    placed = {row["role"]: row for row in lens["versions"]}
    assert set(placed) == {"candidate", "baseline"}
    for role, version in (("candidate", pushy), ("baseline", baseline)):
        assert placed[role]["version"] == version.number
        assert placed[role]["score"] == summary[role]["mean_call_score"]
        assert placed[role]["band"] == band_of(lens["edges"], placed[role]["score"])
        assert placed[role]["band_won_rate"] == lens["bands"][placed[role]["band"]]["won_rate"]
        # Drawn inside its band, at its share of the world's calls scoring below it.
        band = lens["bands"][placed[role]["band"]]
        assert band["share_low"] <= placed[role]["share"] <= band["share_high"]


def test_it_reads_the_cached_scores_the_second_time(real_world, django_assert_max_num_queries):
    world_score_vs_outcome(world=real_world)
    judged = Judgement.objects.count()
    with django_assert_max_num_queries(12):
        again = world_score_vs_outcome(world=real_world, bands=4)
    assert Judgement.objects.count() == judged
    assert again["band_count"] == 4

"""Evaluate's results that mean something (issue 40, point 7).

- Regressions listed 23 calls whose difference was as small as -0.0002, with scores 0.50-0.51.
  Now a call is a regression only when its difference lies beyond the judge's noise, and the
  page, the API and the admin state that noise.
- The lens's chart drew its bands on an axis of scores: band 1 spanned 0.376-0.505 while bands
  2-5 were squeezed into 0.505-0.518 and their labels overlapped. Now each band is drawn over
  its share of the world's calls, so equal-count bands are equally wide.
- A verdict "even" stood beside a judge whose pair accuracy was "too few to measure (n = 5)"
  and whose AUC was 0.68 on 116 calls, without saying which licensed it. Now it names it.
"""

from __future__ import annotations

import re

import pytest

from evaluation import scoring
from evaluation.models import Evaluation, EvaluationAnswer
from evaluation.summary import evaluation_regressions, evaluation_summary_compute
from evaluation.verdicts import verdict_decide

# --- regressions beyond the judge's noise ---------------------------------------------------

# Each turn's difference swings by this much either way, about a call's mean difference.
SWING = 0.01
TINY = -0.0002  # the reproduction's smallest "regression"


def _rescore(evaluation: Evaluation, worse_position: int) -> None:
    """Give the two versions totals at 0.50-0.51, as the issue's judge did: at every call the
    candidate's turns differ from the baseline's by TINY on average, swinging by SWING turn to
    turn, except at `worse_position`, where it is 0.1 lower at every turn."""
    by_call: dict[int, list[int]] = {}
    for moment_id, position in EvaluationAnswer.objects.filter(evaluation=evaluation).values_list(
        "held_out_moment_id", "held_out_moment__held_out_call__position"
    ):
        by_call.setdefault(position, [])
        if moment_id not in by_call[position]:
            by_call[position].append(moment_id)
    for position, moments in by_call.items():
        swings = [SWING * (-1) ** index for index in range(len(moments))]
        centre = sum(swings) / len(swings)
        shift = -0.1 if position == worse_position else TINY
        for moment_id, swing in zip(sorted(moments), swings, strict=True):
            answers = EvaluationAnswer.objects.filter(
                evaluation=evaluation, held_out_moment_id=moment_id
            )
            answers.filter(side="baseline").update(total=0.505)
            answers.filter(side="candidate").update(total=0.505 + shift + swing - centre)
    evaluation.summary = {**evaluation.summary, **evaluation_summary_compute(evaluation)}
    evaluation.save(update_fields=["summary"])


@pytest.fixture
def rescored(lettings, pushy, baseline, evaluate):
    evaluation = evaluate(lettings, pushy, baseline)
    worse = evaluation.summary["per_call"][1]["position"]
    _rescore(evaluation, worse)
    evaluation.refresh_from_db()
    return evaluation, worse


def _regressions_table(html: str) -> str:
    start = html.index('id="regressions"')
    return html[start : html.index("</table>", start)] if "<table" in html[start:] else ""


def test_it_lists_only_the_calls_beyond_the_judges_noise_and_states_it(owner_client, rescored):
    evaluation, worse = rescored
    summary = evaluation.summary
    lower = [row for row in summary["per_call"] if row["delta"] is not None and row["delta"] < 0]
    assert len(lower) > 10, "every call scores a little lower, as in the issue"
    assert summary["regressions"] == [worse]
    noise = summary["regression_noise"]
    assert abs(TINY) < noise["noise"] < 0.1
    page = owner_client.get(f"/evaluate/{evaluation.pk}/").content.decode()
    assert f"±{noise['noise']:.4f}" in page  # the page states the noise
    table = _regressions_table(page)
    labels = {row["position"]: row["label"] for row in summary["per_call"]}
    assert labels[worse] in table
    assert not [row for row in lower if row["position"] != worse and row["label"] in table]


def test_an_evaluation_kept_before_the_rule_is_read_by_it(owner_client, outsider_client, rescored):
    evaluation, worse = rescored
    summary = dict(evaluation.summary)
    summary.pop("regression_noise")
    summary["regressions"] = [row["position"] for row in summary["per_call"] if row["delta"] < 0]
    Evaluation.objects.filter(pk=evaluation.pk).update(summary=summary)
    evaluation.refresh_from_db()
    assert evaluation_regressions(evaluation)["positions"] == [worse]
    api = owner_client.get(f"/api/rl/evaluations/{evaluation.pk}/").json()
    assert api["summary"]["regressions"] == [worse]
    assert api["summary"]["regression_noise"]["noise"] > abs(TINY)
    episode = owner_client.get(f"/api/rl/evaluations/{evaluation.pk}/episodes/{worse}/").json()
    assert episode["regression"] is True
    assert outsider_client.get(f"/api/rl/evaluations/{evaluation.pk}/").status_code in {401, 403}


def test_the_noise_is_pooled_within_calls():
    # A version consistently worse on a call does not widen the noise: only the swing does.
    steady = scoring.call_difference_noise([[-0.3] * 4, [0.0] * 4, [0.1, -0.1, 0.1, -0.1]])
    assert steady["degrees"] == 9
    assert steady["spread"] == pytest.approx((4 * 0.01 / 9) ** 0.5, abs=1e-6)
    # One judged turn a call leaves nothing to measure the noise by: nothing is listed.
    single = scoring.call_difference_noise([[-0.3], [0.2]])
    assert single["spread"] is None
    assert scoring.beyond_noise_below(-0.3, scoring.noise_of_call(single, 1)) is False


# --- the lens's bands, spread by the world's own scores --------------------------------------


def test_the_lens_draws_each_band_over_its_share_of_the_worlds_calls():
    # The issue's scores: a fifth of the calls over 0.376-0.505, the rest within 0.505-0.518.
    low = [0.376 + (0.505 - 0.376) * index / 20 for index in range(20)]
    high = [0.505 + 0.013 * index / 80 for index in range(80)]
    calls = [(score, index % 3 == 0) for index, score in enumerate(low + high)]
    _edges, rows = scoring.won_rate_by_score_band(calls, bands=5)
    assert len(rows) == 5
    # On an axis of scores, bands 2-5 would take a tenth of the chart.
    spread = rows[-1]["high"] - rows[0]["low"]
    assert (rows[-1]["high"] - rows[1]["low"]) / spread < 0.1
    # On the world's own distribution each band is as wide as its share of the calls.
    widths = [row["share_high"] - row["share_low"] for row in rows]
    assert widths == pytest.approx([row["calls"] / len(calls) for row in rows])
    assert [row["share_low"] for row in rows[1:]] == [row["share_high"] for row in rows[:-1]]
    assert (rows[0]["share_low"], rows[-1]["share_high"]) == (0.0, 1.0)
    # Its label sits at its middle: neighbours are a band's width apart, never on top.
    middles = [(row["share_low"] + row["share_high"]) / 2 for row in rows]
    assert min(b - a for a, b in zip(middles, middles[1:], strict=False)) >= 0.19
    # A version is drawn inside the band its score falls in.
    ordered = sorted(score for score, _won in calls)
    edges = _edges
    for score in (0.4, 0.506, 0.511, 0.517):
        band = rows[scoring.band_of(edges, score)]
        assert band["share_low"] <= scoring.share_below(ordered, score) <= band["share_high"]


# --- the verdict names the figure that licensed it -------------------------------------------

# The issue's judge: its pair accuracy on 5 held-out picks, its AUC 0.68 on 116 held-out calls.
ISSUE_JUDGE = {
    "judge_model": "rubric",
    "measured": True,
    "measured_by": "judge v1",
    "pairs": 5,
    "pair_accuracy": 0.8,
    "pair_accuracy_ci": [0.4, 1.0],
    "calls": 116,
    "outcome_auc": 0.68,
    "outcome_auc_ci": [0.58, 0.77],
}


def _judged_even(summary: dict) -> dict:
    summary = {key: value for key, value in summary.items() if key != "simulator"}
    return {
        **summary,
        "verdict_source": "judge",
        "verdict": "even",
        "judge_verdict": "even",
        "win_rate": 0.51,
        "ci": [0.45, 0.57],
        "judge_agreement": ISSUE_JUDGE,
    }


def test_the_verdict_names_the_figure_that_licensed_it():
    decided = verdict_decide(_judged_even({}))
    assert decided.outcome == "even"
    assert decided.licensed_by == "AUC 0.68 [0.58, 0.77] on 116 held-out calls"
    assert decided.not_counted == "its pair accuracy is too few to measure (n = 5)"
    # A pair accuracy that counts and is above chance licenses it too, and is named.
    counted = {"pairs": 120, "pair_accuracy": 0.62, "pair_accuracy_ci": [0.55, 0.7]}
    both = verdict_decide(_judged_even({}) | {"judge_agreement": ISSUE_JUDGE | counted})
    assert "pair accuracy 0.62 [0.55, 0.70] on 120 held-out picks" in both.licensed_by
    assert both.not_counted == ""


def test_the_pages_and_the_api_name_the_figure_that_licensed_the_verdict(
    owner_client, outsider_client, lettings, pushy, baseline, evaluate
):
    evaluation = evaluate(lettings, pushy, baseline)
    Evaluation.objects.filter(pk=evaluation.pk).update(summary=_judged_even(evaluation.summary))
    page = owner_client.get(f"/evaluate/{evaluation.pk}/").content.decode()
    licence = re.search(r'data-figure="verdict-licence"><b>([^<]*)<', page)
    assert licence, "the results name what licensed the verdict"
    assert "AUC 0.68 [0.58, 0.77] on 116 held-out calls" in licence.group(1)
    assert "pair accuracy is too few to measure (n = 5)" in licence.group(1)
    api = owner_client.get(f"/api/rl/evaluations/{evaluation.pk}/").json()
    assert api["verdict"] == "even"
    assert api["verdict_licensed_by"] == "AUC 0.68 [0.58, 0.77] on 116 held-out calls"
    policies = owner_client.get("/policies/").content.decode()
    assert "licensed by the judge&#x27;s AUC 0.68 [0.58, 0.77] on 116 held-out calls" in policies
    home = owner_client.get("/").content.decode()
    assert "licensed by the judge&#x27;s AUC 0.68 [0.58, 0.77] on 116 held-out calls" in home
    licensed = "licensed by its AUC 0.68 [0.58, 0.77] on 116 held-out calls"
    assert licensed in owner_client.get("/admin/policies/policyversion/").content.decode()
    assert licensed in owner_client.get("/admin/evaluation/evaluation/").content.decode()
    assert outsider_client.get(f"/api/rl/evaluations/{evaluation.pk}/").status_code in {401, 403}

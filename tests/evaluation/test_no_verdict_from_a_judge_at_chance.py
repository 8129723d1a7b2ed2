"""A verdict from a judge whose agreement interval includes chance is no win and no loss.
Persuasion's Evaluate said **won** at 0.697 [0.638, 0.753] from a judge whose outcome AUC was
0.504 [0.420, 0.587]. Now Evaluate, the checkpoint on Train, the Policies page and its
leaderboard, the admin's "Last evaluation" and the evaluations' admin, the home page and the
API all read "no verdict: this world's judge is at chance (AUC 0.50 [0.42, 0.59])", with the
judge's raw win rate beside it. And where the simulator played the duel, the admin's "Last
evaluation" shows the simulator's verdict, not the judge's win rate."""

from __future__ import annotations

import pytest
from django.template.loader import render_to_string
from django_tenants.utils import schema_context

from tests.evaluation.conftest import pushy_in

AT_CHANCE_WORDS = "no verdict: this world's judge is at chance (AUC 0.50 [0.42, 0.59])"


def _outcomes(calls: int, auc: float, ci: list[float]) -> dict:
    return {"calls": calls, "won": calls // 2, "auc": auc, "auc_ci": ci, "at_chance": ci[0] <= 0.5}


def _judged_at_chance(world, evaluation, *, auc=0.504, ci=(0.42, 0.587)):
    """The evaluation as if its judge (the rubric, measured beside a fitted version of the
    world) had been measured at chance on 120 held-out calls when it ran."""
    from arena.models import JudgeVersion
    from evaluation.agreement import judge_agreement

    version = JudgeVersion.objects.create(
        world=world,
        number=1,
        model_dir="-",
        report={"outcomes": {"fitted": _outcomes(120, 0.6, [0.52, 0.68]),
                             "rubric": _outcomes(120, auc, list(ci))}},
    )  # fmt: skip
    summary = dict(evaluation.summary)
    summary["judge_agreement"] = judge_agreement(world=world, judge_model=evaluation.judge_model)
    version.delete()  # it has no files to score with: the pages would load it
    # The judge's own reading of its interval, whatever this seed gave: a win.
    summary.update(verdict="won", judge_verdict="won", win_rate=0.697, ci=[0.638, 0.753])
    evaluation.summary = summary
    evaluation.purpose = "checkpoint"
    evaluation.save(update_fields=["summary", "purpose"])
    return evaluation


@pytest.fixture
def at_chance(real_world, evaluate):
    pushy, baseline = pushy_in(real_world)
    evaluation = _judged_at_chance(real_world, evaluate(real_world, pushy, baseline))
    return evaluation, pushy, baseline


def test_it_gives_no_verdict_and_shows_the_raw_rate(owner_client, at_chance):
    from evaluation.verdicts import NO_VERDICT

    evaluation, pushy, baseline = at_chance
    assert evaluation.summary["judge_agreement"]["standing"] == "at_chance"
    decided = evaluation.verdict_decided
    assert (evaluation.verdict, decided.reason) == (NO_VERDICT, "at_chance")
    assert decided.sentence == AT_CHANCE_WORDS
    assert decided.words == f"{AT_CHANCE_WORDS}; the judge's raw win rate 0.697 [0.638, 0.753]"

    html = owner_client.get(f"/evaluate/{evaluation.pk}/").content.decode()
    escaped = AT_CHANCE_WORDS.replace("'", "&#x27;")
    assert escaped in html
    assert "the judge&#x27;s raw win rate 0.697 [0.638, 0.753]" in html
    assert 'data-figure="no-verdict"' in html
    assert 'class="pill verdict-won"' not in html
    listing = owner_client.get("/evaluate/?world=persuasion").content.decode()
    assert escaped in listing
    assert 'class="pill verdict-won"' not in listing


def test_the_api_says_no_verdict_and_why(owner_client, outsider_client, at_chance):
    evaluation, _pushy, _baseline = at_chance
    body = owner_client.get(f"/api/rl/evaluations/{evaluation.pk}/").json()
    assert (body["verdict"], body["verdict_source"]) == ("no_verdict", "judge")
    assert body["no_verdict"] == {
        "reason": "at_chance",
        "sentence": AT_CHANCE_WORDS,
        "judge_win_rate": 0.697,
        "judge_ci": [0.638, 0.753],
    }
    assert body["win_rate"] == 0.697
    refused = outsider_client.get(f"/api/rl/evaluations/{evaluation.pk}/")
    assert refused.status_code in {401, 403, 404}


def test_the_checkpoint_on_train_says_no_verdict(at_chance):
    from training.views import _checkpoint_of

    _evaluation, pushy, _baseline = at_chance
    checkpoint = _checkpoint_of(pushy)
    assert (checkpoint["verdict"], checkpoint["no_verdict"]) == ("no_verdict", AT_CHANCE_WORDS)
    html = render_to_string("training/_checkpoint.html", {"checkpoint": checkpoint})
    assert AT_CHANCE_WORDS.replace("'", "&#x27;") in html
    assert "the judge's raw win rate 0.70 [0.64, 0.75] of moments" in html
    assert not html.startswith("won")


def test_the_policies_page_and_leaderboard_count_no_verdict_as_no_game(owner_client, at_chance):
    from arena.models import World
    from policies.leaderboard import leaderboard, leaderboard_games

    evaluation, pushy, baseline = at_chance
    world = World.objects.get(slug="persuasion")
    assert leaderboard_games(world=world) == []  # 0.697 of turns "won" is no game
    assert leaderboard(world=world) == []
    html = owner_client.get("/policies/?world=persuasion").content.decode()
    escaped = AT_CHANCE_WORDS.removeprefix("no verdict: ").replace("'", "&#x27;")
    assert f"no verdict against {baseline.label}: {escaped}" in html
    assert 'data-verdict="no_verdict"' in html
    assert "lost its last evaluation" not in html.lower()
    left_out = html[html.index('id="leaderboard-left-out"') :]
    assert f"{pushy.label} vs {baseline.label} (#{evaluation.pk})" in left_out
    assert "the judge&#x27;s raw win rate 0.697" in left_out
    home = owner_client.get("/?world=persuasion").content.decode()
    assert "no verdict (this world&#x27;s judge is at chance" in home


def test_the_admin_says_no_verdict(owner_client, at_chance):
    evaluation, pushy, _baseline = at_chance
    versions = owner_client.get("/admin/policies/policyversion/")
    html = versions.content.decode()
    escaped = AT_CHANCE_WORDS.replace("'", "&#x27;")
    assert f"{escaped} vs v1 · baseline; the judge&#x27;s raw win rate 0.70 [0.64, 0.75]" in html
    assert "won: win rate" not in html
    evaluations = owner_client.get("/admin/evaluation/evaluation/").content.decode()
    assert escaped in evaluations


def test_another_workspaces_evaluation_is_not_counted(owner_client, other_workspace, at_chance):
    """A rival's evaluation at chance is neither left out of nor counted in ours."""
    from arena.models import World
    from evaluation.models import Evaluation, EvaluationCallSet
    from policies.models import PolicyVersion

    with schema_context(other_workspace.schema_name):
        world = World.objects.get(slug="lettings")
        baseline = PolicyVersion.objects.get(world=world, number=1)
        rival = Evaluation.objects.create(
            world=world,
            call_set=EvaluationCallSet.objects.create(world=world, kind="real"),
            candidate=baseline,
            baseline=baseline,
            state="done",
            summary={"verdict": "won", "win_rate": 0.9, "ci": [0.81, 0.97], "wins": 9,
                     "judge_agreement": {"measured": True, "calls": 90, "outcome_auc": 0.47,
                                         "outcome_auc_ci": [0.33, 0.61]}},
        )  # fmt: skip
        assert rival.verdict == "no_verdict"
    html = owner_client.get("/policies/?world=lettings").content.decode()
    assert "AUC 0.47 [0.33, 0.61]" not in html
    html = owner_client.get("/policies/?world=persuasion").content.decode()
    assert "AUC 0.47 [0.33, 0.61]" not in html


def test_the_admin_shows_the_simulators_verdict(owner_client, lettings, pushy, baseline, evaluate):
    from evaluation.verdict_words import version_verdicts

    evaluation = evaluate(lettings, pushy, baseline, seed=4)
    duel = evaluation.summary["simulator"]
    low, high = duel["won_share_difference_ci"]
    points = (
        f"won share {duel['won_share_difference'] * 100:+.1f} points "
        f"[{low * 100:+.1f}, {high * 100:+.1f}] on {duel['episodes']:,} simulated calls each"
    )
    verdict = version_verdicts()[pushy.pk]
    assert (verdict["source"], verdict["verdict"]) == ("simulator", duel["verdict"])
    html = owner_client.get("/admin/policies/policyversion/").content.decode()
    win_rate = evaluation.summary["win_rate"]
    assert (
        f"{duel['verdict']} (simulator): {points} vs v1 · baseline; the judge&#x27;s win rate "
        f"{win_rate:.2f}"
    ) in html
    assert f"{evaluation.verdict_decided.judge_outcome}: win rate {win_rate:.2f}" not in html

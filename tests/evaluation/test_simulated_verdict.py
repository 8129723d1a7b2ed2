"""Evaluate believes the ground truth where it exists: on scripted customers both versions play
1,000 seeded customers on the simulator and the verdict is the won-share difference's, the
judge's win rate kept beside it (and the page says so when the two disagree); on real calls
the judge's win rate stays the verdict, with the judge and its measured agreement."""

from __future__ import annotations

import pytest

from evaluation import scoring
from evaluation.agreement import judge_agreement
from evaluation.replay import _verdict_fields
from evaluation.simulator_play import SIMULATED_DUEL_SEED
from evaluation.verdict_words import verdict_explained, version_verdicts
from tests.evaluation.conftest import pushy_in
from trainers.judge.standing import measure_shown
from trainers.moves.common import table_strategy
from trainers.moves.simulated_duel import simulated_duel
from trainers.moves.simulator import LettingsWorld, Persona, Scenario
from trainers.moves.value_iteration import solve_world


def _scenarios(world) -> list[Scenario]:
    return [
        Scenario(
            slug=row.slug,
            name=row.name,
            persona=Persona.from_dict(row.persona_dict()),
            seed=row.seed,
        )
        for row in world.scenarios.order_by("slug")
    ]


@pytest.fixture
def optimal(lettings, baseline):
    """A version playing the exact optimum of each of the world's scenarios: it wins more
    calls than v1's checklist, in the very words v1 would use for the same moves."""
    from arena.models import World
    from policies.services import version_register

    tables = {
        scenario.slug: solve_world(LettingsWorld(scenario.persona)).policy
        for scenario in _scenarios(lettings)
    }
    return version_register(
        world=World.objects.get(slug="lettings"),
        name="optimal",
        parent=baseline,
        move_strategy=table_strategy(next(iter(tables.values())), tables),
        learned_from={"pack": "lettings", "kind": "test"},
    )


def test_it_rests_the_verdict_on_the_simulated_duel(lettings, pushy, baseline, evaluate):
    evaluation = evaluate(lettings, pushy, baseline, seed=4)
    summary = evaluation.summary
    duel = summary["simulator"]
    # The duel the evaluation stored is the simulator's, on the world's own customers.
    assert duel == simulated_duel(
        pushy.move_strategy,
        baseline.move_strategy,
        scenarios=_scenarios(lettings),
        seed=SIMULATED_DUEL_SEED,
        bootstrap_seed=evaluation.seed,
    )
    assert duel["episodes"] >= 1000
    assert sum(row["episodes"] for row in duel["scenarios"]) == duel["episodes"]
    assert summary["verdict_source"] == "simulator"
    # Offering a slot before any viewing is agreed never books one.
    assert duel["candidate"]["won_share"] == 0.0 < duel["baseline"]["won_share"]
    assert evaluation.verdict == duel["verdict"] == "lost"
    # The judge's figures keep their keys and values.
    assert summary["verdict"] == scoring.verdict_of(*summary["ci"])
    assert summary["judge_verdict"] == summary["verdict"]
    assert evaluation.win_rate == summary["win_rate"]


def test_it_calls_the_better_strategy_the_winner_whatever_the_judge_says(
    lettings, optimal, baseline, evaluate
):
    evaluation = evaluate(lettings, optimal, baseline)
    summary = evaluation.summary
    duel = summary["simulator"]
    assert duel["won_share_difference"] > 0
    assert duel["won_share_difference_ci"][0] > 0
    assert duel["return_difference_ci"][0] > 0
    assert evaluation.verdict == "won"
    explained = verdict_explained(summary, candidate=optimal.label, baseline=baseline.label)
    assert explained["disagree"] is (summary["verdict"] != "won")
    ground_truth = "the simulator is the ground truth here" in explained["sentence"]
    assert ground_truth is explained["disagree"]
    # The home page's mission and the Policies page follow the simulator's verdict.
    from evaluation.missions import boss_fight_mission

    mission = boss_fight_mission()
    assert mission.standing[0].startswith(f"last: {evaluation.title} — won on 1,000 simulated")
    assert f"judge win rate {evaluation.win_rate:.2f}" in mission.standing[0]
    assert mission.next_step == "Make the winner live."
    verdict = version_verdicts()[optimal.pk]
    assert verdict["verdict"] == "won"
    assert verdict["lost"] is False


def test_it_keeps_the_same_customers_for_another_seed(lettings, pushy, baseline, evaluate):
    first = evaluate(lettings, pushy, baseline, seed=1).summary["simulator"]
    second = evaluate(lettings, pushy, baseline, seed=2).summary["simulator"]
    assert first["scenarios"] == second["scenarios"]
    assert first["candidate"] == second["candidate"]
    assert (first["bootstrap_seed"], second["bootstrap_seed"]) == (1, 2)


def test_it_leaves_the_verdict_to_the_judge_where_the_simulator_cannot_play(
    lettings, pushy, baseline, evaluate
):
    from policies.models import PolicyVersion
    from trainers.moves.simulator import n_states_for

    evaluation = evaluate(lettings, pushy, baseline)
    judged = {"verdict": "even"}
    noop = lambda *args, **kwargs: None  # noqa: E731

    evaluation.candidate.provider = PolicyVersion.Provider.OPENAI
    fields = _verdict_fields(evaluation, judged, progress=noop)
    assert fields["verdict_source"] == "judge"
    assert "answers with a model" in fields["simulator"]["unavailable"]

    evaluation.candidate.provider = PolicyVersion.Provider.SIMULATOR
    evaluation.candidate.move_strategy = {"kind": "table", "default": ["greet"] * n_states_for(4)}
    fields = _verdict_fields(evaluation, judged, progress=noop)
    assert fields["verdict_source"] == "judge"
    assert "covers" in fields["simulator"]["unavailable"]
    # Lettings' rubric is not measured (no fitted version): the judge gives no verdict.
    explained = verdict_explained(
        {**judged, **fields, "win_rate": 0.5}, candidate=pushy.label, baseline=baseline.label
    )
    assert explained["verdict"] == "no_verdict"
    assert explained["sentence"].startswith("The simulator could not play this duel")
    assert "not measured on held-out data" in explained["sentence"]
    measured = {**fields, "judge_agreement": MEASURED_ABOVE_CHANCE}
    explained = verdict_explained(
        {**judged, **measured}, candidate=pushy.label, baseline=baseline.label
    )
    assert explained["verdict"] == "even"
    assert explained["sentence"].startswith("The simulator could not play this duel")


# A judge measured above chance on enough held-out picks: its verdicts stand.
MEASURED_ABOVE_CHANCE = {
    "judge_model": "rubric-v1",
    "measured": True,
    "pairs": 120,
    "pair_accuracy": 0.7,
    "pair_accuracy_ci": [0.62, 0.78],
}


def test_the_verdict_of_a_summary_is_the_judges_unless_the_simulator_gives_it(lettings):
    from evaluation.models import Evaluation

    evaluation = Evaluation(
        state=Evaluation.State.DONE,
        summary={"verdict": "won", "judge_agreement": MEASURED_ABOVE_CHANCE},
    )
    assert evaluation.verdict == "won"
    evaluation.summary = {
        "verdict": "even",
        "verdict_source": "simulator",
        "simulator": {"verdict": "won"},
    }
    assert evaluation.verdict == "won"
    evaluation.state = Evaluation.State.RUNNING
    assert evaluation.verdict == ""


def _summary(judge: str, win_rate: float, duel_verdict: str, shares: tuple[float, float]):
    difference = round(shares[0] - shares[1], 4)
    return {
        "win_rate": win_rate,
        "verdict": judge,
        "judge_verdict": judge,
        "verdict_source": "simulator",
        "simulator": {
            "episodes": 1000,
            "ci_level": 0.95,
            "verdict": duel_verdict,
            "candidate": {"won_share": shares[0], "mean_return": 5.32},
            "baseline": {"won_share": shares[1], "mean_return": 4.59},
            "won_share_difference": difference,
            "won_share_difference_ci": [difference - 0.03, difference + 0.03],
            "return_difference": 0.73,
            "return_difference_ci": [0.41, 1.05],
        },
    }


def test_it_says_in_words_when_the_judge_and_the_simulator_disagree():
    explained = verdict_explained(
        _summary("even", 0.473, "won", (0.65, 0.575)), candidate="v2", baseline="v1"
    )
    assert explained["disagree"] is True
    assert explained["sentence"] == (
        "The judge scores the two versions' wording as even (win rate 0.473), but on 1,000 "
        "simulated calls each v2 wins 7.5 points more often (65.0% against 57.5%): the "
        "simulator is the ground truth here."
    )
    assert explained["simulator"]["won_difference"] == "+7.5 points"
    assert explained["simulator"]["won_ci"] == "[+4.5, +10.5]"

    against = verdict_explained(
        _summary("won", 0.61, "lost", (0.40, 0.52)), candidate="v2", baseline="v1"
    )
    assert against["sentence"].startswith("The judge prefers v2's wording (win rate 0.610), but")
    assert "v2 wins 12.0 points less often (40.0% against 52.0%)" in against["sentence"]

    agree = verdict_explained(
        _summary("won", 0.61, "won", (0.65, 0.575)), candidate="v2", baseline="v1"
    )
    assert agree["disagree"] is False
    assert agree["sentence"].endswith("the two agree.")
    assert "ground truth" not in agree["sentence"]


def test_it_shows_the_duel_beside_the_judge_on_the_pages(
    owner_client, lettings, optimal, baseline, evaluate
):
    evaluation = evaluate(lettings, optimal, baseline)
    summary = evaluation.summary
    duel = summary["simulator"]
    explained = verdict_explained(summary, candidate=optimal.label, baseline=baseline.label)
    for path in (f"/evaluate/{evaluation.pk}/", "/evaluate/?world=lettings"):
        html = owner_client.get(path).content.decode()
        assert 'data-figure="simulator-verdict"' in html, path
        for side in ("candidate", "baseline"):
            assert f"{duel[side]['won_share'] * 100:.1f}%" in html
            assert f"{duel[side]['mean_return']:.2f}" in html
        assert explained["simulator"]["won_ci"] in html
        assert explained["simulator"]["return_ci"] in html
        assert f"{summary['win_rate']:.3f}" in html  # the judge's win rate, beside it
        sentence = explained["sentence"].replace("'", "&#x27;")
        assert sentence in html
        assert ("ground truth here" in html) is explained["disagree"]
    listing = owner_client.get("/admin/evaluation/evaluation/").content.decode()
    assert f"{duel['candidate']['won_share']:.3f} vs {duel['baseline']['won_share']:.3f}" in listing
    assert "won (simulator)" in listing


def test_the_real_call_verdict_stays_the_judges_with_its_agreement(
    owner_client, real_world, evaluate
):
    pushy, baseline = pushy_in(real_world)
    evaluation = evaluate(real_world, pushy, baseline)
    summary = evaluation.summary
    assert summary["verdict_source"] == "judge"
    assert "simulator" not in summary
    assert summary["verdict"] == summary["judge_verdict"]
    agreement = summary["judge_agreement"]
    assert agreement["judge_model"] == evaluation.judge_model
    assert agreement["measured"] is False  # the rubric, and no fitted version to measure it
    # A judge nobody measured gives no verdict: its win rate is shown raw, beside why.
    assert evaluation.verdict == "no_verdict"
    html = owner_client.get(f"/evaluate/{evaluation.pk}/").content.decode()
    assert f"Judge: <b>{evaluation.judge_model}</b>" in html
    assert "not measured here" in html
    assert 'data-figure="simulator-verdict"' not in html
    assert "No verdict: this world&#x27;s judge is not measured on held-out data yet" in html
    assert f"raw win rate {evaluation.win_rate:.3f}" in html
    words = version_verdicts()[pushy.pk]["summary"]
    assert f"no verdict against {baseline.label}: this world's judge is not measured" in words
    assert f"the judge's raw win rate {evaluation.win_rate:.2f}" in words


def _report(pair_accuracy: float, pair_ci: list, auc: float, auc_ci: list) -> dict:
    def column(accuracy, accuracy_ci, value, value_ci):
        return (
            {"pairs": 80, "accuracy": accuracy, "accuracy_ci": accuracy_ci,
             "at_chance": accuracy_ci[0] <= 0.5 <= accuracy_ci[1]},
            {"calls": 40, "auc": value, "auc_ci": value_ci,
             "at_chance": value_ci[0] <= 0.5 <= value_ci[1]},
        )  # fmt: skip

    fitted_pairs, fitted_outcomes = column(pair_accuracy, pair_ci, auc, auc_ci)
    rubric_pairs, rubric_outcomes = column(0.52, [0.41, 0.63], 0.54, [0.44, 0.64])
    return {
        "pairs": {"fitted": fitted_pairs, "rubric": rubric_pairs},
        "outcomes": {"fitted": fitted_outcomes, "rubric": rubric_outcomes},
    }


def test_it_measures_the_judge_that_scored_and_says_when_it_is_at_chance(real_world):
    from arena.models import JudgeVersion

    JudgeVersion.objects.create(
        world=real_world,
        number=1,
        model_dir="-",
        report=_report(0.71, [0.6, 0.8], 0.66, [0.55, 0.77]),
    )
    JudgeVersion.objects.create(
        world=real_world, number=2, model_dir="-", report=_report(0.5, [0.4, 0.6], 0.51, [0.4, 0.6])
    )
    first = judge_agreement(world=real_world, judge_model="fitted v1 of persuasion")
    assert (first["measured"], first["measured_by"]) == (True, "fitted v1")
    assert (first["pair_accuracy"], first["outcome_auc"]) == (0.71, 0.66)
    assert first["at_chance"] is False
    second = judge_agreement(world=real_world, judge_model="fitted v2 of persuasion")
    assert second["at_chance"] is JudgeVersion.objects.get(number=2).at_chance is True
    rubric = judge_agreement(world=real_world, judge_model="rubric-v1")
    assert (rubric["measured_by"], rubric["pair_accuracy"], rubric["at_chance"]) == (
        "fitted v2",
        0.52,
        True,
    )
    model = judge_agreement(world=real_world, judge_model="openai:gpt-4o")
    assert model["measured"] is False

    said = verdict_explained(
        {"verdict": "won", "win_rate": 0.6, "ci": [0.55, 0.65], "judge_agreement": second},
        candidate="v2",
        baseline="v1",
    )
    # A judge at chance: its "won" is no verdict, said with its figures and the raw rate.
    assert (said["source"], said["verdict"]) == ("judge", "no_verdict")
    assert said["sentence"] == (
        "No verdict: this world's judge is at chance (pair accuracy 0.50 [0.40, 0.60]; AUC "
        "0.51 [0.40, 0.60]). Beside it, the judge's raw win rate 0.600 [0.550, 0.650] for v2 "
        "against v1, which is not a win or a loss."
    )
    assert (
        "prefers what reviewers picked 50% of the time (80 held-out pairs)"
        in said["judge_sentence"]
    )
    assert "AUC 0.51" in said["judge_sentence"]
    rubric_said = verdict_explained(
        {"verdict": "won", "win_rate": 0.6, "judge_agreement": rubric},
        candidate="v2",
        baseline="v1",
    )
    assert (
        "Judged by rubric-v1, measured beside fitted v2 on held-out data"
        in rubric_said["judge_sentence"]
    )
    assert "agrees no better than chance" in said["judge_sentence"]
    measured = verdict_explained(
        {"verdict": "won", "win_rate": 0.6, "judge_agreement": first}, candidate="v2", baseline="v1"
    )
    assert "no better than chance" not in measured["judge_sentence"]
    assert measured["verdict"] == "won"


@pytest.fixture
def fitted_world(in_workspace, datasets, django_capture_on_commit_callbacks):
    """A world of real calls whose judge was fitted (as the worker would) on what it has."""
    from tests.recorded_calls import real_calls_world_fitted

    return real_calls_world_fitted(django_capture_on_commit_callbacks)


def test_it_shows_the_fitted_judges_measured_agreement_beside_a_real_call_verdict(
    owner_client, fitted_world, evaluate
):
    from arena.judge.versions import judge_version_latest

    pushy, baseline = pushy_in(fitted_world)
    version = judge_version_latest(fitted_world)
    evaluation = evaluate(fitted_world, pushy, baseline)
    assert evaluation.judge_model == f"{version.label} of {fitted_world.slug}"
    agreement = evaluation.summary["judge_agreement"]
    assert (agreement["measured"], agreement["measured_by"]) == (True, version.label)
    outcomes = measure_shown(version.report["outcomes"]["fitted"], "outcomes")
    assert agreement["outcome_auc"] == outcomes["auc"]
    assert agreement["outcomes_too_few"] == outcomes["too_few"]
    assert agreement["at_chance"] is version.at_chance
    html = owner_client.get(f"/evaluate/{evaluation.pk}/").content.decode()
    assert f"Judge: <b>{evaluation.judge_model}</b>" in html
    assert f"Judged by {evaluation.judge_model}, measured on held-out data" in html
    if outcomes["too_few"]:  # 40 calls to fit on: a fifth held out is too few to measure
        assert f"its outcome AUC is {outcomes['too_few']}" in html
        assert evaluation.verdict in {"no_verdict", "incomplete"}
    else:
        assert f"AUC {agreement['outcome_auc']:.2f}" in html
    assert ("agrees no better than chance" in html) is version.at_chance

"""Reads of evaluation: an evaluation's summary (computed once from its answers and kept),
what its verdict rests on and the words that say so, the judge's measured agreement, its
episodes side by side, the recent evaluations, the defaults of the Evaluate page, and the
lead-to-order lens (won rate by band of judge score on the world's real calls).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db.models import QuerySet

from arena.held_out import TURNS_PER_CALL
from arena.judge.world_dimensions import world_dimensions
from arena.models import (
    Call,
    Judgement,
    JudgeVersion,
    Moment,
    Reply,
    Turn,
    World,
    moments_dialogues_load,
)
from evaluation import scoring
from evaluation.models import Evaluation, EvaluationAnswer, EvaluationCallSet, HeldOutMoment
from evaluation.verdicts import (
    NO_VERDICT,
    Verdict,
    agreement_figures,
    judge_agreement_shown,
    verdict_decide,
)
from levers9.jobs.estimates import JobEstimate, estimate_from_runs
from levers9.jobs.kinds import JobAbout
from levers9.jobs.selectors import job_durations_recent
from policies.models import PolicyVersion
from trainers.judge.rubric import Dimension, RubricJudge, dimension_default
from trainers.judge.standing import AT_CHANCE

SIDES = ("candidate", "baseline")
OBSERVATIONAL_NOTE = (
    "Observational: the won rate of recorded calls whose real agent opened with judge scores "
    "in each band. A replay cannot change a recorded outcome, so a version's score placed "
    "here is not a won rate it caused; that exists only once a version takes live calls "
    "(the canary in Release)."
)


# --- the summary of an evaluation -------------------------------------------------------------

# (side, held-out moment) -> (judge total, judge scores), for "candidate", "baseline" and
# "yardstick" alike.
Scored = dict[tuple[str, int], tuple[float, dict[str, float]]]


def _radar(
    score_sets: list[dict[str, float]], rubric: tuple[Dimension, ...]
) -> dict[str, float | None]:
    """The mean score of each dimension of the world's rubric (its own, not the seven)."""
    return {
        dimension.name: scoring.mean(
            [float(scores[dimension.name]) for scores in score_sets if dimension.name in scores]
        )
        for dimension in rubric
    }


def _dimension_rows(rubric: tuple[Dimension, ...]) -> list[dict[str, str]]:
    return [{"name": dimension.name, "label": dimension.label} for dimension in rubric]


def _held_moments(call_set: EvaluationCallSet) -> list[HeldOutMoment]:
    return list(
        HeldOutMoment.objects.filter(held_out_call__call_set=call_set)
        .select_related("held_out_call__call", "held_out_call__scenario")
        .order_by("held_out_call__position", "number")
    )


def _answer_scores(evaluation: Evaluation) -> tuple[Scored, dict[str, int]]:
    """The versions' judged answers, and per side how many answers have no total."""
    scored: Scored = {}
    errors: dict[str, int] = defaultdict(int)
    for answer in EvaluationAnswer.objects.filter(evaluation=evaluation).select_related(
        "judgement"
    ):
        if answer.total is None:
            errors[answer.side] += 1
            continue
        scored[(answer.side, answer.held_out_moment_id)] = (
            answer.total,
            dict(answer.judgement.scores) if answer.judgement_id else {},
        )
    return scored, errors


def _yardstick_scores(held: list[HeldOutMoment], judge_model: str) -> Scored:
    """The yardstick's newest usable verdict of the evaluation's judge at each moment."""
    yardsticks = {
        judgement.reply_id: judgement
        for judgement in Judgement.objects.filter(
            reply_id__in=[h.yardstick_id for h in held],
            judge_model=judge_model,
            error="",
        ).order_by("created_at", "id")
    }
    scored: Scored = {}
    for held_moment in held:
        judgement = yardsticks.get(held_moment.yardstick_id)
        if judgement is not None and judgement.total is not None:
            scored[("yardstick", held_moment.pk)] = (judgement.total, dict(judgement.scores))
    return scored


def _moments_by_call(held: list[HeldOutMoment]) -> dict[int, list[HeldOutMoment]]:
    by_call: dict[int, list[HeldOutMoment]] = defaultdict(list)
    for held_moment in held:
        by_call[held_moment.held_out_call_id].append(held_moment)
    return by_call


def _call_figures(
    moments: list[HeldOutMoment], scored: Scored
) -> tuple[list[float], list[float], dict[str, Any]]:
    """One held-out call: the pairwise outcome and the paired difference (the candidate's total
    less the baseline's) at each moment both versions were judged, and its row of means (the
    delta is the candidate's mean less the baseline's)."""
    held_call = moments[0].held_out_call
    outcomes: list[float] = []
    differences: list[float] = []
    means: dict[str, list[float]] = defaultdict(list)
    for held_moment in moments:
        pair = [scored.get((side, held_moment.pk)) for side in SIDES]
        if all(pair):
            outcomes.append(scoring.pairwise_outcome(pair[0][0], pair[1][0]))
            differences.append(pair[0][0] - pair[1][0])
            means["candidate"].append(pair[0][0])
            means["baseline"].append(pair[1][0])
        yard = scored.get(("yardstick", held_moment.pk))
        if yard:
            means["yardstick"].append(yard[0])
    candidate_mean = scoring.mean(means["candidate"])
    baseline_mean = scoring.mean(means["baseline"])
    delta = (
        round(candidate_mean - baseline_mean, 4)
        if candidate_mean is not None and baseline_mean is not None
        else None
    )
    row = {
        "position": held_call.position,
        "label": held_call.label,
        "outcome": held_call.outcome,
        "turns": len(outcomes),
        "candidate": candidate_mean,
        "baseline": baseline_mean,
        "yardstick": scoring.mean(means["yardstick"]),
        "delta": delta,
        "wins": sum(1 for outcome in outcomes if outcome == 1.0),
        "losses": sum(1 for outcome in outcomes if outcome == 0.0),
    }
    return outcomes, differences, row


def _win_figures(outcomes_by_call: list[list[float]], *, seed: int) -> dict[str, Any]:
    """The head-to-head: wins, ties and losses over every compared moment, and the win rate
    with its bootstrap interval over calls and the verdict it gives."""
    outcomes = [outcome for call_outcomes in outcomes_by_call for outcome in call_outcomes]
    wins = sum(1 for outcome in outcomes if outcome == 1.0)
    ties = sum(1 for outcome in outcomes if outcome == 0.5)
    losses = sum(1 for outcome in outcomes if outcome == 0.0)
    win_rate, low, high = scoring.win_rate_with_interval(outcomes_by_call, seed=seed)
    return {
        "compared": wins + ties + losses,
        "wins": wins,
        "ties": ties,
        "losses": losses,
        "win_rate": win_rate,
        "ci": [low, high] if low is not None else None,
        "ci_level": scoring.CONFIDENCE,
        "bootstrap_samples": scoring.BOOTSTRAP_SAMPLES,
        "verdict": scoring.verdict_of(low, high),
    }


def _yardstick_beaten(side: str, held: list[HeldOutMoment], scored: Scored) -> tuple[int, int]:
    """At how many moments the side scored above the yardstick, of how many both were judged."""
    beaten = compared = 0
    for held_moment in held:
        mine, yard = (
            scored.get((side, held_moment.pk)),
            scored.get(("yardstick", held_moment.pk)),
        )
        if mine and yard:
            compared += 1
            beaten += mine[0] > yard[0] + scoring.TIE_TOLERANCE
    return beaten, compared


def _side_figures(
    side: str,
    version: PolicyVersion | None,
    *,
    held: list[HeldOutMoment],
    scored: Scored,
    errors: dict[str, int],
    per_call: list[dict[str, Any]],
    yardstick_label: str,
    rubric: tuple[Dimension, ...],
) -> dict[str, Any]:
    """One side's figures: a version's (with how often it beat the yardstick), or with no
    version the yardstick's own; its radar on the world's rubric."""
    totals = [scored[(side, h.pk)][0] for h in held if (side, h.pk) in scored]
    call_means = [row[side] for row in per_call if row.get(side) is not None]
    figures = {
        "mean_reward": scoring.mean(totals),
        # A call's mean over its judged turns, averaged over calls: the lens's scale.
        "mean_call_score": scoring.mean(call_means),
        "radar": _radar([scored[(side, h.pk)][1] for h in held if (side, h.pk) in scored], rubric),
        "answered": len(totals),
    }
    if version is not None:
        beaten, compared = _yardstick_beaten(side, held, scored)
        figures.update(
            {
                "version": version.number,
                "label": version.label,
                "beat_yardstick": round(beaten / compared, 4) if compared else None,
                "beat_yardstick_count": beaten,
                "compared_with_yardstick": compared,
                "errors": errors.get(side, 0),
            }
        )
    else:
        figures["label"] = yardstick_label
    return figures


def _regressions(
    per_call: list[dict[str, Any]], differences_by_call: list[list[float]], *, turns_per_call: int
) -> tuple[list[int], dict[str, Any]]:
    """The positions of the calls where the candidate scored lower than the baseline by more
    than the judge's noise (evaluation.scoring.call_difference_noise), worst first, and that
    noise: each row gets its own ("noise", by its number of judged turns) and whether it is a
    "regression"; the noise dict says it for a call of `turns_per_call` turns ("noise")."""
    noise = scoring.call_difference_noise(differences_by_call)
    noise["turns"] = turns_per_call
    noise["noise"] = scoring.noise_of_call(noise, turns_per_call)
    for row in per_call:
        row["noise"] = scoring.noise_of_call(noise, row["turns"])
        row["regression"] = scoring.beyond_noise_below(row["delta"], row["noise"])
    regressions = sorted(
        (row for row in per_call if row["regression"]),
        key=lambda row: (row["delta"], row["position"]),
    )
    return [row["position"] for row in regressions], noise


def _per_call(
    held: list[HeldOutMoment], scored: Scored
) -> tuple[list[list[float]], list[list[float]], list[dict[str, Any]]]:
    """Each held-out call's outcomes, paired differences and row, in the call set's order."""
    outcomes_by_call: list[list[float]] = []
    differences_by_call: list[list[float]] = []
    per_call: list[dict[str, Any]] = []
    for moments in _moments_by_call(held).values():
        outcomes, differences, row = _call_figures(moments, scored)
        outcomes_by_call.append(outcomes)
        differences_by_call.append(differences)
        per_call.append(row)
    return outcomes_by_call, differences_by_call, per_call


def evaluation_summary_compute(evaluation: Evaluation) -> dict[str, Any]:
    """Every figure of an evaluation from its stored answers, as plain values: the win rate
    with its bootstrap interval, mean reward (the judge's total) and radar per version, how
    often each beat the yardstick, each call's means and the regressions (calls where the
    candidate scored lower than the baseline by more than the judge's noise), worst first, with
    that noise ("regression_noise")."""
    call_set = evaluation.call_set
    held = _held_moments(call_set)
    scored, errors = _answer_scores(evaluation)
    scored.update(_yardstick_scores(held, evaluation.judge_model))
    outcomes_by_call, differences_by_call, per_call = _per_call(held, scored)
    regressions, noise = _regressions(
        per_call, differences_by_call, turns_per_call=call_set.turns_per_call
    )
    rubric = world_dimensions(evaluation.world)
    side_inputs = {
        "rubric": rubric,
        "held": held,
        "scored": scored,
        "errors": errors,
        "per_call": per_call,
        "yardstick_label": call_set.yardstick_label,
    }
    win_figures = _win_figures(outcomes_by_call, seed=evaluation.seed)
    if scoring.comparison_incomplete(win_figures["compared"], len(held)):
        win_figures["verdict"] = scoring.INCOMPLETE
    return {
        "kind": call_set.kind,
        "judge_model": evaluation.judge_model,
        "seed": evaluation.seed,
        "calls": len(per_call),
        "moments": len(held),
        **win_figures,
        "candidate": _side_figures("candidate", evaluation.candidate, **side_inputs),
        "baseline": _side_figures("baseline", evaluation.baseline, **side_inputs),
        "yardstick": _side_figures("yardstick", None, **side_inputs),
        "dimensions": _dimension_rows(rubric),
        "per_call": per_call,
        "regressions": regressions,
        "regression_noise": noise,
    }


# --- what the verdict rests on -----------------------------------------------------------------


def _measured(report: dict[str, Any], who: str) -> dict[str, Any]:
    """One judge's column ("fitted" or "rubric") of a judge version's held-out report."""
    return agreement_figures(
        (report.get("pairs") or {}).get(who), (report.get("outcomes") or {}).get(who)
    )


def _model_measured(world: World, judge_model: str) -> dict[str, Any] | None:
    """A model judge's newest measurement on held-out picks (arena.judge.agreement), with a
    Wilson interval of its accuracy: None when that model was not measured."""
    from arena.judge.agreement import judge_measurement_latest

    measurement = judge_measurement_latest(world) or {}
    model = measurement.get("model") or {}
    if measurement.get("judge") != judge_model or not model.get("pairs"):
        return None
    agreed = round(float(model.get("accuracy") or 0.0) * model["pairs"])
    return agreement_figures(
        {**model, "accuracy_ci": list(scoring.wilson_interval(agreed, model["pairs"]) or [])},
        None,
    )


def judge_agreement(*, world: World, judge_model: str) -> dict[str, Any]:
    """How well the judge that scored an evaluation is measured to agree, on held-out data,
    with the reviewers' picks (pair accuracy) and the real outcomes (AUC by call): the
    fitted judge version it is, the rubric as measured beside the world's newest fitted
    version, or a model judge as its newest measurement found. Otherwise "measured" is
    False. Figures on too few held-out items are None, with why (see _agreement_figures)."""
    from arena.judge.versions import judge_version_latest

    row: dict[str, Any] = {"judge_model": judge_model, "measured": False, "measured_by": None}
    for version in JudgeVersion.objects.filter(world=world).order_by("-number"):
        # The name arena.judge.versions.judge_version_name gives a version's verdicts.
        if judge_model == f"{version.label} of {world.slug}":
            figures = _measured(version.report or {}, "fitted")
            return {**row, **figures, "measured": True, "measured_by": version.label}
    latest = judge_version_latest(world)
    if judge_model == RubricJudge.model_name and latest is not None:
        # A fitted version measures the rubric on the same held-out rows, beside itself.
        figures = _measured(latest.report or {}, "rubric")
        return {**row, **figures, "measured": True, "measured_by": latest.label, "beside": True}
    model = _model_measured(world, judge_model)
    if model is not None:
        return {**row, **model, "measured": True, "measured_by": "its measurement"}
    return row


def _percent(share: float) -> str:
    return f"{share * 100:.1f}%"


def _points(difference: float) -> str:
    return f"{abs(difference) * 100:.1f} points"


def _judge_clause(summary: dict[str, Any], candidate: str, baseline: str) -> str:
    win_rate = summary.get("win_rate")
    verdict = summary.get("judge_verdict", summary.get("verdict", ""))
    if verdict == scoring.INCOMPLETE:
        errors = {
            summary.get(side, {}).get("label", side): summary.get(side, {}).get("errors", 0)
            for side in ("candidate", "baseline")
        }
        failed = ", ".join(f"{label} failed at {count}" for label, count in errors.items() if count)
        return (
            f"the two versions were compared at only {summary.get('compared', 0)} of "
            f"{summary.get('moments', 0)} moments ({failed or 'the rest were not judged'}), "
            "too few for a verdict: evaluate again while both versions answer"
        )
    if win_rate is None or not verdict:
        return "the judge compared no turn of the two versions"
    if verdict == "won":
        return f"the judge prefers {candidate}'s wording (win rate {win_rate:.3f})"
    if verdict == "lost":
        return f"the judge prefers {baseline}'s wording (win rate {win_rate:.3f} for {candidate})"
    return f"the judge scores the two versions' wording as even (win rate {win_rate:.3f})"


def _simulator_clause(duel: dict[str, Any], candidate: str) -> str:
    calls = f"on {duel['episodes']:,} simulated calls each"
    shares = f"{_percent(duel['candidate']['won_share'])} against "
    shares += _percent(duel["baseline"]["won_share"])
    difference = duel["won_share_difference"]
    if duel["verdict"] == "won":
        return f"{calls} {candidate} wins {_points(difference)} more often ({shares})"
    if duel["verdict"] == "lost":
        return f"{calls} {candidate} wins {_points(difference)} less often ({shares})"
    low, high = duel["won_share_difference_ci"]
    return (
        f"{calls} the two win about as often ({shares}; the difference's interval, "
        f"[{low * 100:+.1f}, {high * 100:+.1f}] points, holds 0)"
    )


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "."


def _signed_points(value: float) -> str:
    return f"{value * 100:+.1f}"


def _simulator_figures(duel: dict[str, Any]) -> dict[str, str]:
    """The duel's shares and differences as the pages print them."""
    won_low, won_high = duel["won_share_difference_ci"]
    return_low, return_high = duel["return_difference_ci"]
    return {
        "episodes": f"{duel['episodes']:,}",
        "candidate_won": _percent(duel["candidate"]["won_share"]),
        "baseline_won": _percent(duel["baseline"]["won_share"]),
        "won_difference": f"{_signed_points(duel['won_share_difference'])} points",
        "won_ci": f"[{_signed_points(won_low)}, {_signed_points(won_high)}]",
        "return_difference": f"{duel['return_difference']:+.2f}",
        "return_ci": f"[{return_low:+.2f}, {return_high:+.2f}]",
        "ci_percent": f"{duel['ci_level'] * 100:.0f}%",
    }


def _agreement_measures(agreement: dict[str, Any]) -> list[str]:
    measures = []
    if agreement.get("pair_accuracy") is not None:
        measures.append(
            f"it prefers what reviewers picked {agreement['pair_accuracy'] * 100:.0f}% of the "
            f"time ({agreement.get('pairs') or 0} held-out pairs)"
        )
    elif agreement.get("pairs_too_few"):
        measures.append(f"its pair accuracy is {agreement['pairs_too_few']}")
    if agreement.get("outcome_auc") is not None:
        measures.append(
            f"it ranks won calls above lost ones with AUC {agreement['outcome_auc']:.2f} "
            f"({agreement.get('calls') or 0} held-out calls)"
        )
    elif agreement.get("outcomes_too_few"):
        measures.append(f"its outcome AUC is {agreement['outcomes_too_few']}")
    return measures


def _judge_agreement_sentence(agreement: dict[str, Any] | None) -> str:
    """The judge's measured agreement in words; plain about a judge at chance."""
    if not agreement:
        return ""
    name = agreement.get("judge_model") or "the judge"
    if not agreement.get("measured"):
        return (
            f"Judged by {name}, whose agreement with your reviewers and with real outcomes is "
            "not measured here (a fitted judge version measures itself and the rubric)."
        )
    agreement = judge_agreement_shown(agreement)
    measures = _agreement_measures(agreement)
    where = f"beside {agreement['measured_by']} " if agreement.get("beside") else ""
    words = f"Judged by {name}, measured {where}on held-out data: "
    words += " and ".join(measures) if measures else "no held-out measure yet"
    words += "."
    if agreement["standing"] == AT_CHANCE:
        words += (
            " It agrees no better than chance, so this win rate says little about which "
            "version is better."
        )
    return words


def verdict_explained(summary: dict[str, Any], *, candidate: str, baseline: str) -> dict[str, Any]:
    """What an evaluation's verdict rests on, in words for the pages: "source" ("simulator"
    or "judge"), "verdict" (evaluation.verdicts.verdict_decide's outcome) and its "label",
    whether the judge's verdict and the simulator's "disagree", one "sentence" saying what
    each found (and, when they disagree, which to believe; with no verdict, why, and the
    judge's raw win rate), the duel's figures as printed, and the judge's measured agreement
    in words ("judge_sentence"), and the figure of the judge that licensed its verdict
    ("licence": "Licensed by the judge's AUC 0.68 [0.58, 0.77] on 116 held-out calls, …")."""
    summary = summary or {}
    decided = verdict_decide(summary)
    judge = _judge_clause(summary, candidate, baseline)
    judge_verdict = decided.judge_outcome
    duel = summary.get("simulator") or {}
    explained = {
        "source": decided.source,
        "verdict": decided.outcome,
        "label": decided.label,
        "judge_verdict": judge_verdict,
        "no_verdict": decided.outcome == NO_VERDICT,
        "no_verdict_sentence": decided.sentence,
        "raw_rate": decided.raw_rate_words,
        "disagree": False,
        "sentence": "",
        "simulator": None,
        "judge_sentence": _judge_agreement_sentence(summary.get("judge_agreement")),
        "judge_at_chance": decided.reason == AT_CHANCE,
        # Which of the judge's figures licensed its verdict (and which did not count).
        "licence": decided.licence_words,
    }
    if decided.source == "simulator":
        simulator = _simulator_clause(duel, candidate)
        disagree = judge_verdict in {"won", "lost", "even"} and judge_verdict != duel["verdict"]
        if disagree:
            sentence = f"{judge}, but {simulator}: the simulator is the ground truth here"
        else:
            sentence = f"{simulator}, and {judge}: the two agree"
        explained.update(
            disagree=disagree,
            sentence=_sentence(sentence),
            simulator=_simulator_figures(duel),
        )
        return explained
    unplayed = (
        f"The simulator could not play this duel ({duel['unavailable']}), so the verdict "
        "is the judge's"
        if duel.get("unavailable")
        else ""
    )
    if decided.outcome == NO_VERDICT:
        no_verdict = _sentence(
            f"{decided.sentence}. Beside it, {decided.raw_rate_words} for {candidate} "
            f"against {baseline}, which is not a win or a loss"
        )
        explained["sentence"] = f"{unplayed}: {no_verdict}" if unplayed else no_verdict
    elif unplayed:
        explained["sentence"] = _sentence(unplayed)
    return explained


# --- pages and the API --------------------------------------------------------------------


# --- how long an evaluation will run ------------------------------------------------------------


def _answers_through_a_model(version: PolicyVersion) -> bool:
    """A simulator version answers by rule or from recorded calls, in a blink; every other
    provider asks a model for each held-out moment, which is what makes an evaluation long."""
    return version.provider != PolicyVersion.Provider.SIMULATOR


def evaluation_estimate(
    *, world: World, candidate: PolicyVersion, baseline: PolicyVersion
) -> JobEstimate:
    """What an evaluation of these versions is expected to take: this world's past evaluations
    whose versions answered the same way (through a model or not), else what it asks of a model."""
    shape = (_answers_through_a_model(candidate), _answers_through_a_model(baseline))

    def like_this_one(job) -> bool:
        past = (
            Evaluation.objects.filter(job=job, world=world)
            .select_related("candidate", "baseline")
            .first()
        )
        return past is not None and shape == (
            _answers_through_a_model(past.candidate),
            _answers_through_a_model(past.baseline),
        )

    from_runs = estimate_from_runs(
        job_durations_recent(trainer="evaluate", matches=like_this_one),
        what=f"of an evaluation like this one in {world.name}",
    )
    if from_runs is not None:
        return from_runs
    if not any(shape):
        return JobEstimate(
            low_seconds=None,
            high_seconds=60.0,
            basis="no evaluation has finished here yet, and neither version asks a model",
        )
    asking = " and ".join(
        version.label for version, asks in zip((candidate, baseline), shape, strict=True) if asks
    )
    return JobEstimate(
        low_seconds=None,
        high_seconds=None,
        basis=f"no evaluation like it has finished in {world.name} yet; {asking} asks a model "
        f"for a reply at each of up to {TURNS_PER_CALL} turns of every held-out call",
    )


def evaluations_recent(*, limit: int = 20) -> QuerySet[Evaluation]:
    return Evaluation.objects.select_related("world", "candidate", "baseline", "job").order_by(
        "-created_at", "-id"
    )[:limit]


def evaluation_latest_done(*, world: World) -> Evaluation | None:
    return (
        Evaluation.objects.filter(world=world, state=Evaluation.State.DONE)
        .select_related("candidate", "baseline")
        .order_by("-finished_at", "-id")
        .first()
    )


def evaluation_versions_default(
    *, world: World
) -> tuple[PolicyVersion | None, PolicyVersion | None]:
    """The Evaluate page's choice in `world`: its newest answering version against its parent
    (else the world's live version, else the next newest)."""
    from policies.selectors import policies_answering, policy_live

    answering = policies_answering(world=world)
    if not answering:
        return None, None
    candidate = answering[0]
    by_pk = {version.pk: version for version in answering}
    live = policy_live(world=world)
    baseline = by_pk.get(candidate.parent_id)
    if baseline is None and live is not None and live.pk in by_pk and live.pk != candidate.pk:
        baseline = live
    if baseline is None and len(answering) > 1:
        baseline = answering[1]
    return candidate, baseline


def _evaluations_between(labels: dict[int, str]) -> QuerySet[Evaluation]:
    return Evaluation.objects.filter(
        state=Evaluation.State.DONE, candidate_id__in=labels, baseline_id__in=labels
    ).order_by("id")


def evaluation_games(labels: dict[int, str]) -> list[tuple[str, str]]:
    """The leaderboard's games from evaluations (registered with policies.leaderboard in
    evaluation.apps), on what each verdict rests: where the simulator played the duel, one
    game per seeded customer only one version won; elsewhere one per turn the judge scored
    won or lost, and none from an evaluation with no verdict (evaluation.verdicts)."""
    games: list[tuple[str, str]] = []
    for evaluation in _evaluations_between(labels):
        summary = evaluation.summary or {}
        decided = evaluation.verdict_decided
        if decided.source == "simulator":
            duel = summary["simulator"]
            wins, losses = duel.get("candidate_only_won"), duel.get("baseline_only_won")
        elif decided.outcome in (NO_VERDICT, scoring.INCOMPLETE):
            continue
        else:
            wins, losses = summary.get("wins"), summary.get("losses")
        candidate, baseline = labels[evaluation.candidate_id], labels[evaluation.baseline_id]
        games += [(candidate, baseline)] * int(wins or 0)
        games += [(baseline, candidate)] * int(losses or 0)
    return games


def evaluation_games_left_out(labels: dict[int, str]) -> list[str]:
    """Why an evaluation gave the leaderboard no games: its verdict's words, the judge's raw
    win rate beside them."""
    left_out = []
    for evaluation in _evaluations_between(labels):
        decided = evaluation.verdict_decided
        if decided.outcome in (NO_VERDICT, scoring.INCOMPLETE) and decided.source == "judge":
            title = f"{labels[evaluation.candidate_id]} vs {labels[evaluation.baseline_id]}"
            why = decided.words or "too few moments compared for a verdict"
            left_out.append(f"{title} (#{evaluation.pk}): {why}")
    return left_out


def _latest_as_candidate() -> dict[int, Evaluation]:
    """Each version's last finished evaluation as the candidate, one against its parent
    preferred over any other."""
    latest: dict[int, Evaluation] = {}
    for evaluation in (
        Evaluation.objects.filter(state=Evaluation.State.DONE)
        .select_related("candidate", "baseline", "world")
        .order_by("finished_at", "id")
    ):
        current = latest.get(evaluation.candidate_id)
        against_parent = evaluation.baseline_id == evaluation.candidate.parent_id
        if current is None or against_parent or current.baseline_id != current.candidate.parent_id:
            latest[evaluation.candidate_id] = evaluation
    return latest


def _simulator_words(duel: dict[str, Any]) -> str:
    """ "won share +6.9 points [+3.1, +10.4] on 1,000 simulated calls each"."""
    low, high = duel["won_share_difference_ci"]
    return (
        f"won share {_signed_points(duel['won_share_difference'])} points "
        f"[{_signed_points(low)}, {_signed_points(high)}] on {duel['episodes']:,} "
        "simulated calls each"
    )


def _judged_words(win_rate: float, interval: list | None) -> str:
    judged = f"win rate {win_rate:.2f}"
    if interval:
        judged += f" [{interval[0]:.2f}, {interval[1]:.2f}]"
    return judged


def _verdict_words(evaluation: Evaluation, decided: Verdict) -> str:
    """The verdict in one line, on what it rests: the simulator's won share (the judge's win
    rate beside it), the judge's win rate, or no verdict and why (its raw win rate beside)."""
    summary = evaluation.summary or {}
    judged = _judged_words(decided.judge_win_rate, decided.judge_ci)
    words = f"{decided.label or 'even'} against {evaluation.baseline.label}: "
    if decided.source == "simulator":
        words += f"{_simulator_words(summary['simulator'])}, the judge's {judged}"
    elif decided.outcome == NO_VERDICT:
        words += f"{decided.sentence.removeprefix('no verdict: ')}; the judge's raw {judged}"
    else:
        words += judged
        if decided.licensed_by:
            words += f", licensed by the judge's {decided.licensed_by}"
    words += f" on {evaluation.world.name} (#{evaluation.pk})"
    return words


def _did_worse(summary: dict[str, Any], decided: Verdict) -> bool:
    """Whether the candidate did worse than its opponent more often than better: on the
    simulator, whether it won a smaller share of the same customers; never from a judge
    that gives no verdict."""
    if decided.source == "simulator":
        return summary["simulator"]["won_share_difference"] < 0
    return decided.outcome != NO_VERDICT and decided.judge_win_rate < 0.5


def version_verdicts() -> dict[int, dict[str, Any]]:
    """Each evaluated version's last finished evaluation as the candidate — against its
    parent when there is one — as the Policies page and the admin's "Last evaluation" show
    it: {"summary": words, "lost": whether it did worse than its opponent more often than
    better, "verdict" (evaluation.verdicts' outcome) and its "label", "source", "sentence"
    (why there is none), "simulator" (its won share in words, or ""), the judge's "win_rate"
    and "interval", "licensed_by" (the judge's figures that licensed its verdict, or ""),
    "against", "judge", "evaluation": id}."""
    verdicts = {}
    for version_id, evaluation in _latest_as_candidate().items():
        summary = evaluation.summary or {}
        decided = evaluation.verdict_decided
        if decided.judge_win_rate is None:
            continue
        verdicts[version_id] = {
            "summary": _verdict_words(evaluation, decided),
            "lost": _did_worse(summary, decided),
            "verdict": decided.outcome,
            "label": decided.label,
            "source": decided.source,
            "sentence": decided.sentence,
            "simulator": _simulator_words(summary["simulator"])
            if decided.source == "simulator"
            else "",
            "win_rate": decided.judge_win_rate,
            "interval": decided.judge_ci,
            "licensed_by": decided.licensed_by,
            "against": evaluation.baseline.label,
            "judge": evaluation.judge_model,
            "evaluation": evaluation.pk,
        }
    return verdicts


def evaluation_regressions(evaluation: Evaluation) -> dict[str, Any]:
    """A finished evaluation's regressions as every page, the API and the admin read them:
    "positions" (worst first), "noise" (the judge's noise they are beyond, see
    evaluation.scoring.call_difference_noise) and "per_call" (each row with its own "noise"
    and whether it is a "regression"). A summary kept before the noise rule listed every call
    that scored lower at all: its regressions are worked out again from the stored answers."""
    summary = evaluation.summary or {}
    if "regression_noise" in summary or not summary.get("per_call"):
        return {
            "positions": summary.get("regressions", []),
            "noise": summary.get("regression_noise"),
            "per_call": summary.get("per_call", []),
        }
    scored, _errors = _answer_scores(evaluation)
    _outcomes, differences_by_call, per_call = _per_call(_held_moments(evaluation.call_set), scored)
    positions, noise = _regressions(
        per_call, differences_by_call, turns_per_call=evaluation.call_set.turns_per_call
    )
    return {"positions": positions, "noise": noise, "per_call": per_call}


def regressions_rows(
    evaluation: Evaluation, regressions: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The regressions of a finished evaluation as table rows, worst first (from
    evaluation_regressions, worked out here unless given)."""
    regressions = regressions or evaluation_regressions(evaluation)
    rows = {row["position"]: row for row in regressions["per_call"]}
    return [rows[position] for position in regressions["positions"] if position in rows]


def regression_noise_words(noise: dict[str, Any] | None) -> str:
    """The judge's noise a regression is beyond, in words for the pages: "±0.0123 on a call of
    4 turns (1.96 × 0.0126, the spread of the turn-by-turn difference within a call, pooled
    over 40 calls, ÷ √4)"; "" when unmeasured."""
    if not noise:
        return ""
    if noise.get("noise") is None:
        return (
            "the judge's noise cannot be measured here: no call had two turns where both "
            "versions were judged, so no call is listed"
        )
    turns = noise["turns"]
    return (
        f"±{noise['noise']:.4f} on a call of {turns} turns ({noise['z']:.2f} × "
        f"{noise['spread']:.4f}, the spread of the turn-by-turn difference within a call, pooled "
        f"over {noise['calls']} calls, ÷ √{turns}; {noise['confidence'] * 100:.0f}% of a call's "
        "differences fall inside it by chance)"
    )


def _judgement_dict(judgement: Judgement | None) -> dict[str, Any] | None:
    if judgement is None:
        return None
    return {
        "total": judgement.total,
        "scores": judgement.scores,
        "reasons": judgement.reasons,
        "judge_model": judgement.judge_model,
        "error": judgement.error,
        # The dimensions the judge scored, in its order (its world's rubric when it judged).
        "rows": [
            {
                "name": name,
                "label": dimension_default(name).label,
                "score": score,
                "reason": (judgement.reasons or {}).get(name, ""),
            }
            for name, score in (judgement.scores or {}).items()
        ],
    }


def _episode_held(evaluation: Evaluation, position: int) -> list[HeldOutMoment]:
    """The call's held-out moments in order."""
    return list(
        HeldOutMoment.objects.filter(
            held_out_call__call_set_id=evaluation.call_set_id, held_out_call__position=position
        )
        .select_related("held_out_call__call", "held_out_call__scenario", "moment", "yardstick")
        .order_by("number")
    )


def _episode_answers(
    evaluation: Evaluation, held: list[HeldOutMoment]
) -> dict[tuple[int, str], EvaluationAnswer]:
    return {
        (answer.held_out_moment_id, answer.side): answer
        for answer in EvaluationAnswer.objects.filter(
            evaluation=evaluation, held_out_moment__in=held
        ).select_related("reply", "judgement")
    }


def _episode_yardsticks(held: list[HeldOutMoment], judge_model: str) -> dict[int, Judgement]:
    """The verdict shown for each yardstick reply, by reply id."""
    yardsticks: dict[int, Judgement] = {}
    for judgement in Judgement.objects.filter(
        reply_id__in=[h.yardstick_id for h in held], judge_model=judge_model
    ).order_by("created_at", "id"):
        # The newest verdict, as the summary reads it; an error only when there is none.
        current = yardsticks.get(judgement.reply_id)
        if current is None or current.error or not judgement.error:
            yardsticks[judgement.reply_id] = judgement
    return yardsticks


def _version_reply(side: str, label: str, answer: EvaluationAnswer | None) -> dict[str, Any]:
    return {
        "side": side,
        "label": label,
        "text": answer.reply.text if answer and answer.reply_id else "",
        "move": answer.reply.move if answer and answer.reply_id else "",
        "error": answer.error if answer else "not answered",
        "judge": _judgement_dict(answer.judgement if answer else None),
    }


def _yardstick_reply(
    held_moment: HeldOutMoment, label: str, yardstick: Judgement | None
) -> dict[str, Any]:
    return {
        "side": "yardstick",
        "label": label,
        "text": held_moment.yardstick.text,
        "move": held_moment.yardstick.move,
        "error": yardstick.error if yardstick else "",
        "judge": _judgement_dict(yardstick),
    }


def _episode_turns(
    held: list[HeldOutMoment],
    *,
    answers: dict[tuple[int, str], EvaluationAnswer],
    yardsticks: dict[int, Judgement],
    labels: dict[str, str],
) -> list[dict[str, Any]]:
    """At each held-out moment: the dialogue so far and the three replies side by side."""
    turns = []
    shown = 0
    for held_moment in held:
        dialogue = held_moment.moment.dialogue()
        replies = [
            _version_reply(side, labels[side], answers.get((held_moment.pk, side)))
            for side in SIDES
        ]
        replies.append(
            _yardstick_reply(
                held_moment, labels["yardstick"], yardsticks.get(held_moment.yardstick_id)
            )
        )
        turns.append(
            {
                "number": held_moment.number,
                "moment": held_moment.moment_id,
                # Only what was said since the previous held-out moment: the page reads on.
                "new_dialogue": dialogue[shown:],
                "dialogue": dialogue,
                "replies": replies,
            }
        )
        shown = len(dialogue) + 1
    return turns


def evaluation_episode(evaluation: Evaluation, position: int) -> dict[str, Any] | None:
    """One held-out call as an episode: at each of its agent turns, the dialogue that led
    there, and the candidate's, the baseline's and the yardstick's replies with the judge's
    scores side by side. None when the call set has no such call."""
    held = _episode_held(evaluation, position)
    if not held:
        return None
    moments_dialogues_load(held_moment.moment for held_moment in held)
    labels = {
        "candidate": evaluation.candidate.label,
        "baseline": evaluation.baseline.label,
        "yardstick": evaluation.call_set.yardstick_label,
    }
    turns = _episode_turns(
        held,
        answers=_episode_answers(evaluation, held),
        yardsticks=_episode_yardsticks(held, evaluation.judge_model),
        labels=labels,
    )
    held_call = held[0].held_out_call
    row = next(
        (r for r in (evaluation.summary or {}).get("per_call", []) if r["position"] == position),
        None,
    )
    return {
        "position": position,
        "label": held_call.label,
        "outcome": held_call.outcome,
        "call": held_call.call_id,
        "labels": labels,
        "summary": row,
        "regression": position in evaluation_regressions(evaluation)["positions"],
        "dimensions": _dimension_rows(world_dimensions(evaluation.world)),
        "turns": turns,
    }


def evaluation_chart_data(evaluation: Evaluation) -> dict[str, Any]:
    """What the radar chart draws: mean judge score per dimension of each version and of
    the yardstick."""
    summary = evaluation.summary or {}
    # The dimensions the summary was computed on (its world's rubric then).
    rows = summary.get("dimensions") or _dimension_rows(world_dimensions(evaluation.world))
    return {
        "dimensions": [row["label"] for row in rows],
        "series": [
            {
                "name": summary.get(side, {}).get("label", side),
                "values": [summary.get(side, {}).get("radar", {}).get(row["name"]) for row in rows],
            }
            for side in ("candidate", "baseline", "yardstick")
            if summary.get(side)
        ],
    }


# --- the lead-to-order lens -----------------------------------------------------------------


def _opening_indices(world: World) -> dict[int, list[int]]:
    """The turn indices of the real agent's first four turns of each of the world's calls."""
    openings: dict[int, list[int]] = defaultdict(list)
    for call_id, index in (
        Turn.objects.filter(call__world=world, speaker=Turn.Speaker.AGENT)
        .order_by("call_id", "index")
        .values_list("call_id", "index")
    ):
        if len(openings[call_id]) < TURNS_PER_CALL:
            openings[call_id].append(index)
    return openings


def _real_agent_totals(world: World, judge_model: str) -> dict[tuple[int, int], float]:
    """The judge total in force of each real agent turn of the world, by (call, turn index)."""
    totals: dict[tuple[int, int], float] = {}
    for call_id, index, total in (
        Judgement.objects.filter(
            judge_model=judge_model,
            error="",
            reply__source=Reply.Source.REAL_AGENT,
            reply__moment__kind=Moment.Kind.REAL,
            reply__moment__world=world,
        )
        .order_by("created_at", "id")
        .values_list("reply__moment__call_id", "reply__moment__turn_index", "total")
    ):
        totals[(call_id, index)] = total  # the newest in force, as everywhere
    return totals


def _opening_call_scores(world: World, judge_model: str) -> tuple[dict[int, float], int]:
    """Each call's opening score: the mean judge total of the real agent's first four turns,
    for the calls whose four (or all, if fewer) opening turns are judged; and how many calls
    have an agent turn at all."""
    openings = _opening_indices(world)
    totals = _real_agent_totals(world, judge_model)
    scores: dict[int, float] = {}
    for call_id, indices in openings.items():
        judged = [totals[(call_id, index)] for index in indices if (call_id, index) in totals]
        if judged and len(judged) == len(indices):
            # Rounded as judge totals are, so the edges the lens reports are exact.
            scores[call_id] = round(sum(judged) / len(judged), 4)
    return scores, len(openings)


def _latest_real_evaluation(world: World) -> Evaluation | None:
    """The world's newest finished evaluation on its real calls."""
    return (
        Evaluation.objects.filter(
            world=world, state=Evaluation.State.DONE, call_set__kind=EvaluationCallSet.Kind.REAL
        )
        .select_related("candidate", "baseline")
        .order_by("-finished_at", "-id")
        .first()
    )


def _versions_placed(
    evaluation: Evaluation | None,
    *,
    world: World,
    edges: list[float],
    rows: list[dict[str, Any]],
    ordered_scores: list[float],
) -> list[dict[str, Any]]:
    """The evaluation's two versions placed on the lens by their mean call score: the band
    each falls in, that band's won rate, and the share of the world's calls scoring below it
    (where the chart draws it, evaluation.scoring.share_below)."""
    versions = []
    if evaluation is not None and evaluation.world_id == world.pk and evaluation.summary:
        for role in SIDES:
            figures = evaluation.summary.get(role) or {}
            score = figures.get("mean_call_score")
            if score is None:
                continue
            band = scoring.band_of(edges, score) if rows else None
            versions.append(
                {
                    "role": role,
                    "version": figures.get("version"),
                    "label": figures.get("label"),
                    "score": score,
                    "band": band,
                    "band_won_rate": rows[band]["won_rate"] if band is not None else None,
                    "share": scoring.share_below(ordered_scores, score) if rows else None,
                }
            )
    return versions


def score_vs_outcome(
    *, world: World, judge_model: str, bands: int = 5, evaluation: Evaluation | None = None
) -> dict[str, Any]:
    """The lead-to-order lens on the world's real calls: the calls cut into `bands` bands of
    equal count by their opening judge score, each band's won rate with its count and a
    Wilson interval and the span of the world's calls it is drawn over, and the two versions
    of an evaluation placed on it by their mean score on the replayed opening turns (the given
    evaluation, else the latest done)."""
    outcomes = dict(world.calls.values_list("id", "outcome"))
    scores, with_openings = _opening_call_scores(world, judge_model)
    labelled = [
        (score, outcomes[call_id] == Call.Outcome.WON)
        for call_id, score in scores.items()
        if outcomes.get(call_id) in (Call.Outcome.WON, Call.Outcome.LOST)
    ]
    edges, rows = scoring.won_rate_by_score_band(labelled, bands=bands)
    if evaluation is None:
        evaluation = _latest_real_evaluation(world)
    versions = _versions_placed(
        evaluation,
        world=world,
        edges=edges,
        rows=rows,
        ordered_scores=sorted(score for score, _won in labelled),
    )
    won = sum(1 for _score, call_won in labelled if call_won)
    return {
        "pack": world.slug,
        "judge_model": judge_model,
        "observational": True,
        "note": OBSERVATIONAL_NOTE,
        "score": "mean judge total of the real agent's first four turns of the call",
        "calls_total": len(outcomes),
        "calls_with_openings": with_openings,
        "calls_scored": len(scores),
        "calls_labelled": len(labelled),
        "won": won,
        "won_rate": round(won / len(labelled), 4) if labelled else None,
        "band_count": len(rows),
        "edges": [round(edge, 4) for edge in edges],
        "bands": rows,
        "evaluation": evaluation.pk if evaluation is not None else None,
        "versions": versions,
    }


def evaluation_jobs_about(jobs: list[Any]) -> dict[int, JobAbout]:
    """What an evaluate job is about, for the jobs' pages and API: the baseline its candidate
    is measured against (the job's parent, as a Train card's is its parent version)."""
    evaluations = Evaluation.objects.filter(job__in=jobs).select_related("baseline")
    return {
        evaluation.job_id: JobAbout(parent_version=evaluation.baseline)
        for evaluation in evaluations
    }

"""An evaluation's verdict in words, from evaluation.verdicts' one decision: what it rests on
for the Evaluate and Train pages (the simulator's duel, the judge's win rate and measured
agreement, or why there is none), and each version's last verdict in a line for the Policies
page and the admin's "Last evaluation".

Workspace schema: every row read here lives in the tenant's schema.
"""

from __future__ import annotations

from typing import Any

from evaluation import scoring
from evaluation.models import Evaluation
from evaluation.verdicts import NO_VERDICT, Verdict, judge_agreement_shown, verdict_decide
from trainers.judge.standing import AT_CHANCE


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


def _latest_as_candidate() -> dict[int, Evaluation]:
    """Each version's last finished evaluation as the candidate, one against its parent
    preferred over any other."""
    latest: dict[int, Evaluation] = {}
    for evaluation in (
        Evaluation.objects.filter(state=Evaluation.State.DONE)
        # Against its own base is shown apart (the version's record keeps it).
        .exclude(purpose=Evaluation.Purpose.AGAINST_BASE)
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

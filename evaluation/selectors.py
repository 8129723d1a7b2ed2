"""Reads of evaluation: an evaluation's summary (computed once from its answers and kept),
its episodes side by side, the recent evaluations, the defaults of the Evaluate page, and
the lead-to-order lens (won rate by band of judge score on the world's real calls).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db.models import QuerySet

from arena.held_out import TURNS_PER_CALL
from arena.judging import DIMENSION_LABELS, DIMENSIONS
from arena.models import Call, Judgement, Moment, Reply, Turn, World
from evaluation import scoring
from evaluation.models import Evaluation, EvaluationAnswer, EvaluationCallSet, HeldOutMoment
from evaluation.replay import dialogues_load
from policies.models import PolicyVersion

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


def _radar(score_sets: list[dict[str, float]]) -> dict[str, float | None]:
    return {
        name: scoring.mean([float(scores[name]) for scores in score_sets if name in scores])
        for name in DIMENSIONS
    }


def _dimension_rows() -> list[dict[str, str]]:
    return [{"name": name, "label": DIMENSION_LABELS[name]} for name in DIMENSIONS]


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
) -> tuple[list[float], dict[str, Any]]:
    """One held-out call: the pairwise outcome at each moment both versions were judged, and
    its row of means (the delta is the candidate's mean less the baseline's)."""
    held_call = moments[0].held_out_call
    outcomes: list[float] = []
    means: dict[str, list[float]] = defaultdict(list)
    for held_moment in moments:
        pair = [scored.get((side, held_moment.pk)) for side in SIDES]
        if all(pair):
            outcomes.append(scoring.pairwise_outcome(pair[0][0], pair[1][0]))
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
    return outcomes, row


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
) -> dict[str, Any]:
    """One side's figures: a version's (with how often it beat the yardstick), or with no
    version the yardstick's own."""
    totals = [scored[(side, h.pk)][0] for h in held if (side, h.pk) in scored]
    call_means = [row[side] for row in per_call if row.get(side) is not None]
    figures = {
        "mean_reward": scoring.mean(totals),
        # A call's mean over its judged turns, averaged over calls: the lens's scale.
        "mean_call_score": scoring.mean(call_means),
        "radar": _radar([scored[(side, h.pk)][1] for h in held if (side, h.pk) in scored]),
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


def _regressions(per_call: list[dict[str, Any]]) -> list[int]:
    """The positions of the calls where the candidate scored lower than the baseline, worst
    first."""
    regressions = sorted(
        (
            row
            for row in per_call
            if row["delta"] is not None and row["delta"] < -scoring.TIE_TOLERANCE
        ),
        key=lambda row: (row["delta"], row["position"]),
    )
    return [row["position"] for row in regressions]


def evaluation_summary_compute(evaluation: Evaluation) -> dict[str, Any]:
    """Every figure of an evaluation from its stored answers, as plain values: the win rate
    with its bootstrap interval, mean reward (the judge's total) and radar per version, how
    often each beat the yardstick, each call's means and the regressions (calls where the
    candidate scored lower than the baseline), worst first."""
    call_set = evaluation.call_set
    held = _held_moments(call_set)
    scored, errors = _answer_scores(evaluation)
    scored.update(_yardstick_scores(held, evaluation.judge_model))
    by_call = _moments_by_call(held)
    outcomes_by_call: list[list[float]] = []
    per_call: list[dict[str, Any]] = []
    for moments in by_call.values():
        outcomes, row = _call_figures(moments, scored)
        outcomes_by_call.append(outcomes)
        per_call.append(row)
    side_inputs = {
        "held": held,
        "scored": scored,
        "errors": errors,
        "per_call": per_call,
        "yardstick_label": call_set.yardstick_label,
    }
    return {
        "kind": call_set.kind,
        "judge_model": evaluation.judge_model,
        "seed": evaluation.seed,
        "calls": len(by_call),
        "moments": len(held),
        **_win_figures(outcomes_by_call, seed=evaluation.seed),
        "candidate": _side_figures("candidate", evaluation.candidate, **side_inputs),
        "baseline": _side_figures("baseline", evaluation.baseline, **side_inputs),
        "yardstick": _side_figures("yardstick", None, **side_inputs),
        "dimensions": _dimension_rows(),
        "per_call": per_call,
        "regressions": _regressions(per_call),
    }


# --- pages and the API --------------------------------------------------------------------


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


def evaluation_versions_default() -> tuple[PolicyVersion | None, PolicyVersion | None]:
    """The Evaluate page's choice: the newest answering version against its parent (else
    the live version, else the next newest)."""
    from policies.selectors import policies_answering, policy_live

    answering = policies_answering()
    if not answering:
        return None, None
    candidate = answering[0]
    by_pk = {version.pk: version for version in answering}
    live = policy_live()
    baseline = by_pk.get(candidate.parent_id)
    if baseline is None and live is not None and live.pk in by_pk and live.pk != candidate.pk:
        baseline = live
    if baseline is None and len(answering) > 1:
        baseline = answering[1]
    return candidate, baseline


def evaluation_games(labels: dict[int, str]) -> list[tuple[str, str]]:
    """The leaderboard's games from evaluations: one per turn won or lost (registered with
    policies.leaderboard in evaluation.apps)."""
    games: list[tuple[str, str]] = []
    for evaluation in Evaluation.objects.filter(state=Evaluation.State.DONE):
        summary = evaluation.summary or {}
        candidate, baseline = labels[evaluation.candidate_id], labels[evaluation.baseline_id]
        games += [(candidate, baseline)] * int(summary.get("wins") or 0)
        games += [(baseline, candidate)] * int(summary.get("losses") or 0)
    return games


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


def _verdict_words(evaluation: Evaluation, win_rate: float, interval: list | None) -> str:
    words = f"{evaluation.verdict or 'even'} against {evaluation.baseline.label}: win rate "
    words += f"{win_rate:.2f}"
    if interval:
        words += f" [{interval[0]:.2f}, {interval[1]:.2f}]"
    words += f" on {evaluation.world.name} (#{evaluation.pk})"
    return words


def version_verdicts() -> dict[int, dict[str, Any]]:
    """Each evaluated version's last finished evaluation as the candidate — against its
    parent when there is one — as the Policies page shows it: {"summary": words, "lost":
    whether it did worse than its opponent more often than better, "evaluation": id}."""
    verdicts = {}
    for version_id, evaluation in _latest_as_candidate().items():
        summary = evaluation.summary or {}
        win_rate, interval = summary.get("win_rate"), summary.get("ci")
        if win_rate is None:
            continue
        verdicts[version_id] = {
            "summary": _verdict_words(evaluation, win_rate, interval),
            "lost": win_rate < 0.5,
            "verdict": evaluation.verdict,
            "evaluation": evaluation.pk,
        }
    return verdicts


def regressions_rows(evaluation: Evaluation) -> list[dict[str, Any]]:
    """The regressions of a finished evaluation as table rows, worst first."""
    summary = evaluation.summary or {}
    rows = {row["position"]: row for row in summary.get("per_call", [])}
    return [rows[position] for position in summary.get("regressions", []) if position in rows]


def _judgement_dict(judgement: Judgement | None) -> dict[str, Any] | None:
    if judgement is None:
        return None
    return {
        "total": judgement.total,
        "scores": judgement.scores,
        "reasons": judgement.reasons,
        "judge_model": judgement.judge_model,
        "error": judgement.error,
        "rows": [
            {
                "name": name,
                "label": DIMENSION_LABELS[name],
                "score": judgement.scores.get(name),
                "reason": (judgement.reasons or {}).get(name, ""),
            }
            for name in DIMENSIONS
            if name in (judgement.scores or {})
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
    dialogues_load(held_moment.moment for held_moment in held)
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
        "regression": position in (evaluation.summary or {}).get("regressions", []),
        "dimensions": _dimension_rows(),
        "turns": turns,
    }


def evaluation_chart_data(evaluation: Evaluation) -> dict[str, Any]:
    """What the radar chart draws: mean judge score per dimension of each version and of
    the yardstick."""
    summary = evaluation.summary or {}
    return {
        "dimensions": [DIMENSION_LABELS[name] for name in DIMENSIONS],
        "series": [
            {
                "name": summary.get(side, {}).get("label", side),
                "values": [summary.get(side, {}).get("radar", {}).get(name) for name in DIMENSIONS],
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
    evaluation: Evaluation | None, *, world: World, edges: list[float], rows: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The evaluation's two versions placed on the lens by their mean call score: the band
    each falls in and that band's won rate."""
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
                }
            )
    return versions


def score_vs_outcome(
    *, world: World, judge_model: str, bands: int = 5, evaluation: Evaluation | None = None
) -> dict[str, Any]:
    """The lead-to-order lens on the world's real calls: the calls cut into `bands` bands of
    equal count by their opening judge score, each band's won rate with its count and a
    Wilson interval, and the two versions of an evaluation placed on it by their mean
    score on the replayed opening turns (the given evaluation, else the latest done)."""
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
    versions = _versions_placed(evaluation, world=world, edges=edges, rows=rows)
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

"""The lead-to-order lens: on the world's real calls, the won rate by band of the real agent's
opening judge score, with an evaluation's two versions placed on it (observational: a replay
cannot change a recorded outcome). The judge scores it reads are cached per judge, judged once
by the evaluation jobs or, for the quick rubric judge, here where they are missing.

Workspace schema: every row read or made here lives in the tenant's schema.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from django.db import connection

from arena.held_out import TURNS_PER_CALL
from arena.judge.world_judge import judge_for_world
from arena.models import Call, Judgement, Moment, Reply, Turn, World, moments_dialogues_load
from evaluation import scoring
from evaluation.fanout import (
    Ask,
    answers_gather,
    endpoint_slots,
    judge_context,
    judgement_from,
    judgements_in_force,
)
from evaluation.models import Evaluation, EvaluationCallSet
from evaluation.openings import real_openings_ensure
from evaluation.summary import SIDES

LENS_BANDS = 5
# Scoring this many of a world's openings at once is a bulk load: refresh the statistics.
ANALYZE_AFTER_ROWS = 500
OBSERVATIONAL_NOTE = (
    "Observational: the won rate of recorded calls whose real agent opened with judge scores "
    "in each band. A replay cannot change a recorded outcome, so a version's score placed "
    "here is not a won rate it caused; that exists only once a version takes live calls "
    "(the canary in Release)."
)


# --- the lens: won rate by band of opening judge score ------------------------------------


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
        # Against its own base places no second version on the lens.
        .exclude(purpose=Evaluation.Purpose.AGAINST_BASE)
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


# --- the judge scores it reads --------------------------------------------------------------


def _openings_unjudged(*, world: World, judge_model: str) -> list[tuple[Moment, Reply]]:
    """The real agent's opening turns of the world's calls that `judge_model` has not judged."""
    openings = real_openings_ensure(world=world, call_ids=world.calls.values_list("id", flat=True))
    if not openings:
        return []
    judged = judgements_in_force([reply.pk for _moment, reply in openings.values()], judge_model)
    return [(moment, reply) for moment, reply in openings.values() if reply.pk not in judged]


def _openings_judge(
    missing: list[tuple[Moment, Reply]],
    *,
    judge: Any,
    on_answer: Callable[[int, int], None] | None,
) -> None:
    """Judge the given opening turns and keep the verdicts (failures as errors)."""
    moments_dialogues_load(moment for moment, _reply in missing)
    asks = [
        Ask(reply.pk, moment, judge_context(moment), text=reply.text, move=reply.move)
        for moment, reply in missing
    ]
    answers = answers_gather(
        asks,
        judge=judge,
        slots_per_version=1,
        judge_slots=endpoint_slots(judge),
        on_answer=on_answer,
    )
    replies = {reply.pk: reply for _moment, reply in missing}
    Judgement.objects.bulk_create(
        (judgement_from(answer, replies[pk], judge.model_name) for pk, answer in answers.items()),
        batch_size=2000,
    )


def lens_scores_ensure(
    *, world: World, judge: Any = None, on_answer: Callable[[int, int], None] | None = None
) -> int:
    """Judge the real agent's opening turns of every call of the world not judged yet by the
    world's judge (the cache the lens reads); returns how many it judged now."""
    judge = judge or judge_for_world(world)
    missing = _openings_unjudged(world=world, judge_model=judge.model_name)
    if not missing:
        return 0
    _openings_judge(missing, judge=judge, on_answer=on_answer)
    if len(missing) >= ANALYZE_AFTER_ROWS:
        _tables_analyze(Moment, Reply, Judgement)
    return len(missing)


def _tables_analyze(*models: Any) -> None:
    """Refresh the planner's statistics after a bulk load: on a table it still thinks empty,
    the lens's join picks nested loops and takes half a second instead of five milliseconds.
    (Autovacuum would get there too, but only later.)"""
    with connection.cursor() as cursor:
        for model in models:
            cursor.execute(f'ANALYZE "{model._meta.db_table}"')


def world_score_vs_outcome(
    *, world: World, bands: int = LENS_BANDS, evaluation: Evaluation | None = None
) -> dict[str, Any]:
    """The lens's numbers. The rubric judge is quick, so its missing scores are judged
    here; a model judge's are judged by the evaluation jobs, and the lens says how many
    calls it covers until then."""
    judge = judge_for_world(world)
    lens = score_vs_outcome(
        world=world, judge_model=judge.model_name, bands=bands, evaluation=evaluation
    )
    incomplete = lens["calls_scored"] < lens["calls_with_openings"]
    if incomplete and judge.quick:
        lens_scores_ensure(world=world, judge=judge)
        lens = score_vs_outcome(
            world=world, judge_model=judge.model_name, bands=bands, evaluation=evaluation
        )
    return lens

"""Writes of the lead-to-order lens: the cached judge scores of every real call's opening
turns (judged once per judge, by the evaluation jobs or, for the quick rubric judge, here),
and the lens's numbers with the scores it still lacks judged first where that is quick.

The lens itself — won rate by band of opening judge score — is read by
evaluation.selectors.score_vs_outcome.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import connection

from arena.judge.world_judge import judge_for_world
from arena.models import Judgement, Moment, Reply, World, moments_dialogues_load
from evaluation.fanout import Ask, answers_gather
from evaluation.models import Evaluation
from evaluation.replay import (
    endpoint_slots,
    judge_context,
    judgement_from,
    judgements_in_force,
    real_openings_ensure,
)
from trainers.judge.rubric import RubricJudge

LENS_BANDS = 5
# Scoring this many of a world's openings at once is a bulk load: refresh the statistics.
ANALYZE_AFTER_ROWS = 500


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
    from evaluation.selectors import score_vs_outcome

    judge = judge_for_world(world)
    lens = score_vs_outcome(
        world=world, judge_model=judge.model_name, bands=bands, evaluation=evaluation
    )
    incomplete = lens["calls_scored"] < lens["calls_with_openings"]
    if incomplete and isinstance(judge, RubricJudge):
        lens_scores_ensure(world=world, judge=judge)
        lens = score_vs_outcome(
            world=world, judge_model=judge.model_name, bands=bands, evaluation=evaluation
        )
    return lens

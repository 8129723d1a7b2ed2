"""One held-out call of an evaluation as an episode: at each of its agent turns the dialogue
so far and the candidate's, the baseline's and the yardstick's replies with the judge's
scores side by side (the page a regression opens, and the API's episodes).

Workspace schema: every row read here lives in the tenant's schema.
"""

from __future__ import annotations

from typing import Any

from arena.judge.world_dimensions import world_dimensions
from arena.models import Judgement, moments_dialogues_load
from evaluation.models import Evaluation, EvaluationAnswer, HeldOutMoment
from evaluation.summary import SIDES, dimension_rows, evaluation_regressions
from trainers.judge.rubric import dimension_default


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
        "baseline": evaluation.baseline_label,
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
        "kind": evaluation.call_set.kind,
        "labels": labels,
        "summary": row,
        "regression": position in evaluation_regressions(evaluation)["positions"],
        "dimensions": dimension_rows(world_dimensions(evaluation.world)),
        "turns": turns,
    }

"""Scoring with a world's judge: a stored reply's verdict recorded (a verdict as scores, a
failure as an error, never the one as the other), and many (dialogue, reply) items scored at
once for integrations (the scoring API). Which judge scores is arena.judge.world_judge's.
Workspace schema.
"""

from __future__ import annotations

from typing import Any

from arena.errors import JudgeFitError
from arena.judge.world_judge import judge_for_world
from arena.models import Judgement, Reply, World
from trainers.judge.model_judge import judgement_or_error
from trainers.judge.rubric import Judge, ManyJudge, Turn
from trainers.judge.topic_guard import ON_TOPIC


def judgement_record(*, reply: Reply, judge: Judge) -> Judgement:
    """Judge a stored reply and store the verdict — or the error, with no score at all."""
    context = [Turn(turn["speaker"], turn["text"]) for turn in reply.moment.dialogue()]
    verdict, error = judgement_or_error(judge, context, reply.text)
    if verdict is None:
        return Judgement.objects.create(
            reply=reply, judge_model=judge.model_name, scores={}, total=None, error=error
        )
    return Judgement.objects.create(
        reply=reply,
        judge_model=verdict.judge_model,
        scores=dict(verdict.scores),
        reasons=dict(verdict.reasons),
        total=verdict.total,
    )


# --- many items, for integrations ---------------------------------------------------------------

MAX_SCORE_ITEMS = 1000
MAX_TEXT = 20_000
ITEM_FIELDS = frozenset({"dialogue", "reply"})


def judge_score_items_clean(items: Any) -> list[tuple[list[dict[str, str]], str]]:
    """The scoring API's items as (dialogue, reply), or JudgeFitError naming the bad field."""
    if not isinstance(items, list) or not items:
        raise JudgeFitError("items must be a non-empty list of {dialogue, reply} objects.")
    if len(items) > MAX_SCORE_ITEMS:
        raise JudgeFitError(f"items holds {len(items)}; send at most {MAX_SCORE_ITEMS} at once.")
    cleaned = []
    for index, item in enumerate(items):
        where = f"items[{index}]"
        if not isinstance(item, dict):
            raise JudgeFitError(f"{where} must be an object with 'dialogue' and 'reply'.")
        # A misnamed call ("context", "dialog") would otherwise score the reply as a call's
        # opening line, silently.
        unknown = sorted(set(item) - ITEM_FIELDS)
        if unknown:
            raise JudgeFitError(
                f"{where}.{unknown[0]} is not a field: an item has 'dialogue' (the call so far, "
                "a list of {speaker, text} turns; [] for a call's opening line) and 'reply'."
            )
        reply, dialogue = item.get("reply"), item.get("dialogue", [])
        if not isinstance(reply, str) or not reply.strip() or len(reply) > MAX_TEXT:
            raise JudgeFitError(f"{where}.reply must be the agent's reply as text (1 to 20,000).")
        if not isinstance(dialogue, list):
            raise JudgeFitError(f"{where}.dialogue must be a list of {{speaker, text}} turns.")
        turns = []
        for number, turn in enumerate(dialogue):
            spot = f"{where}.dialogue[{number}]"
            if not isinstance(turn, dict) or turn.get("speaker") not in ("agent", "customer"):
                raise JudgeFitError(f"{spot}.speaker must be 'agent' or 'customer'.")
            text = turn.get("text")
            if not isinstance(text, str) or len(text) > MAX_TEXT:
                raise JudgeFitError(f"{spot}.text must be text (at most 20,000 characters).")
            turns.append({"speaker": turn["speaker"], "text": text})
        cleaned.append((turns, reply))
    return cleaned


def judge_score_items(*, world: World, items: Any) -> dict[str, Any]:
    """Score many (dialogue, reply) items with the world's judge in force, in order."""
    cleaned = judge_score_items_clean(items)
    judge = judge_for_world(world)
    if isinstance(judge, ManyJudge):
        results = judge.score_many(cleaned)
    else:
        results = []
        for dialogue, reply in cleaned:
            verdict = judge.score([Turn(t["speaker"], t["text"]) for t in dialogue], reply)
            results.append(
                {
                    "scores": {name: round(float(v), 4) for name, v in verdict.scores.items()},
                    "total": round(float(verdict.total), 4),
                    "won_probability": verdict.won_probability,
                    ON_TOPIC: verdict.reasons.get(ON_TOPIC),
                }
            )
    for result in results:  # the guard's sentence where it capped a reply, else null
        result.setdefault(ON_TOPIC, None)
    return {"judge": judge.model_name, "results": results}

"""The judge role on a model: the Django side of arena.judging's ModelJudge.

A world names its judge under Environment → Judge (World.judge_provider / judge_model; a vLLM
judge's address in JudgeConnection). This module builds that judge, feeds it the reviewers'
overrides as examples, and records what it says — a verdict as scores, a failure as an
error (Judgement.error), never the one as the other.
"""

from __future__ import annotations

from typing import Any

from arena.judging import (
    RUBRIC_JUDGE,
    Judge,
    JudgeExample,
    ModelJudge,
    Turn,
    judgement_or_error,
)
from arena.models import Judgement, Reply, World
from policies.models import JudgeConnection
from policies.providers import CallLimits, ModelTarget, provider_for

# Enough to show the model how reviewers read the rubric without crowding out the reply.
OVERRIDE_EXAMPLES = 6


def world_judge_target(world: World) -> ModelTarget | None:
    """Where the world's model judge is reached; None for the rubric judge."""
    if (world.judge_provider or RUBRIC_JUDGE) == RUBRIC_JUDGE:
        return None
    connection = JudgeConnection.objects.filter(world=world).first()
    return ModelTarget(
        world.judge_provider,
        model=world.judge_model,
        base_url=connection.endpoint_url if connection else "",
        lora_adapter=connection.lora_adapter if connection else "",
        api_key_env=connection.api_key_env if connection else "",
    )


def judge_model_name(target: ModelTarget) -> str:
    """The name a model judge's verdicts (and the overrides of them) are stored under."""
    return f"{target.provider}:{target.lora_adapter or target.model}"


def judge_override_examples(world: World, *, limit: int = OVERRIDE_EXAMPLES) -> list[JudgeExample]:
    """Reviewers' overrides in this world, newest first, as examples for a model judge.

    Every override counts whichever judge it corrected: it is a person's verdict on a reply,
    and that is what a model judge should learn to give.

    Hook: the Duel's JudgeOverride model (arena) is looked up by name, so this module keeps
    working in a tree where the Duel has not landed; there it returns no examples.
    """
    from arena import models as arena_models

    JudgeOverride: Any = getattr(arena_models, "JudgeOverride", None)
    if JudgeOverride is None:
        return []
    overrides = (
        JudgeOverride.objects.filter(reply__moment__world=world)
        .select_related("reply__moment")
        .order_by("-updated_at")[:limit]
    )
    examples = []
    for override in overrides:
        context = [Turn(turn["speaker"], turn["text"]) for turn in override.reply.moment.dialogue()]
        examples.append(
            JudgeExample(
                context=context,
                reply=override.reply.text,
                scores={k: float(v) for k, v in (override.scores or {}).items()},
                note=override.note,
            )
        )
    return examples


def model_judge_for_world(world: World) -> ModelJudge:
    target = world_judge_target(world)
    if target is None:
        raise ValueError(f"{world.name} is judged by the rubric judge, not a model.")
    return ModelJudge(
        provider_for(target, limits=CallLimits.from_environment()),
        model_name=judge_model_name(target),
        examples=judge_override_examples(world),
    )


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

"""Which judge scores a world's moments: the one resolver (judge_for_world), used by the Duel's
pairs, Evaluate, the lens, the checkpoints and the scoring API alike.

A world names its judge under Environment → Judge (World.judge_provider / judge_model; a vLLM
judge's address in JudgeConnection). The rubric judge is the default, replaced by the world's
newest fitted version once it has one; a model judge is built here on a provider from
levers9.providers and is fed the reviewers' overrides as examples. Workspace schema (the
tables of the world in view).
"""

from __future__ import annotations

from arena.judge.versions import fitted_judge_for, judge_version_latest
from arena.judge.world_dimensions import world_dimensions
from arena.judge.world_topic_guard import topic_guard_for_world
from arena.models import DEFAULT_JUDGE, JudgeConnection, JudgeOverride, World
from levers9.providers import CallLimits, ModelTarget, provider_for
from trainers.judge.model_judge import JudgeExample, ModelJudge
from trainers.judge.rubric import Judge, RubricJudge, Turn
from trainers.judge.topic_guard import judge_guarded

# Enough to show the model how reviewers read the rubric without crowding out the reply.
OVERRIDE_EXAMPLES = 6


def judged_by_a_model(world: World) -> bool:
    """Whether the world names a model as its judge (else its fitted versions or the rubric)."""
    return (world.judge_provider or DEFAULT_JUDGE) != DEFAULT_JUDGE


def judge_for_world(world: World) -> Judge:
    """The judge a world names (World.judge_provider / judge_model): a ModelJudge on that
    provider's model with the reviewers' overrides as examples; by default the world's newest
    fitted judge version, and the rubric judge (the cold start) until the world has one; each
    scores the world's own rubric (arena.judge.world_dimensions.world_dimensions).
    Whichever it is, the world's on-topic guard (arena.judge.world_topic_guard) caps what it
    gives a reply that belongs to another business."""
    return judge_guarded(_judge_named(world), topic_guard_for_world(world))


def judge_reads_with_a_base(world: World) -> bool:
    """Whether the world's judge reads each reply with a base (a fitted version whose fit kept
    the base's heads or placed the world's answer floor, on a machine that has the base):
    seconds a batch of new replies on a CPU, so
    callers that make many at once (the Duel's pairs) do most of them in the background."""
    if judged_by_a_model(world):
        return False
    version = judge_version_latest(world)
    return version is not None and fitted_judge_for(version).reader is not None


def _judge_named(world: World) -> Judge:
    if not judged_by_a_model(world):
        version = judge_version_latest(world)
        if version is not None:
            return fitted_judge_for(version)
        return RubricJudge(world_dimensions(world))
    return model_judge_for_world(world)


def world_judge_target(world: World) -> ModelTarget | None:
    """Where the world's model judge is reached; None for the rubric judge."""
    if not judged_by_a_model(world):
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
    """
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
        rubric=world_dimensions(world),
    )

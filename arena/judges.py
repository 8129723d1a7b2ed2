"""Each world's judge, the Django side of arena.judging: which judge a world names, how its model
judge is reached and fed, how its verdicts are stored, and how Environment → Judge changes it.

A world names its judge under Environment → Judge (World.judge_provider / judge_model; a vLLM
judge's address in JudgeConnection). The rubric judge is the default; a model judge is built
here on a provider from levers9.providers, is fed the reviewers' overrides as examples, and what
it says is recorded — a verdict as scores, a failure as an error (Judgement.error), never the
one as the other. Workspace schema (the tables of the world in view).
"""

from __future__ import annotations

import os
import re

from django.db import transaction

from arena.errors import ModelConnectionBadRequest, ModelConnectionConflict
from arena.judging import (
    RUBRIC_JUDGE,
    Judge,
    JudgeExample,
    ModelJudge,
    RubricJudge,
    Turn,
    judgement_or_error,
)
from arena.models import DEFAULT_JUDGE, JudgeConnection, Judgement, JudgeOverride, Reply, World
from levers9.outbound import outbound_problem
from levers9.providers import (
    ANTHROPIC,
    HOSTED_KEY_ENVS,
    OPENAI,
    VLLM,
    CallLimits,
    ModelTarget,
    base_url_problem,
    key_env_problem,
    provider_for,
    scrub,
)

# Enough to show the model how reviewers read the rubric without crowding out the reply.
OVERRIDE_EXAMPLES = 6


def judge_for_world(world: World) -> Judge:
    """The judge a world names (World.judge_provider / judge_model): a ModelJudge on that
    provider's model with the reviewers' overrides as examples; by default the world's newest
    fitted judge version, and the rubric judge (the cold start) until the world has one."""
    if (world.judge_provider or RUBRIC_JUDGE) == RUBRIC_JUDGE:
        from arena.judge_fitting import fitted_judge_for, judge_version_latest

        version = judge_version_latest(world)
        return fitted_judge_for(version) if version is not None else RubricJudge()
    return model_judge_for_world(world)


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


# --- A model connection: the fields of a model role (a judge, or an agent in policies) --------

_MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$")
_LOOKS_LIKE_KEY = re.compile(r"^(?:sk|pk|rk)-|^sk_|^hf_", re.IGNORECASE)


def _model_name_clean(model: str) -> str:
    model = (model or "").strip()
    if not model:
        raise ModelConnectionBadRequest("Name the model, such as gpt-4o-mini or Qwen/Qwen3-14B.")
    if _LOOKS_LIKE_KEY.match(model) or scrub(model) != model:
        # A model field is shown on pages and in the API: a key typed there would leak.
        raise ModelConnectionBadRequest(
            "That looks like a key, not a model name: type the model name."
        )
    if not _MODEL_NAME.match(model):
        raise ModelConnectionBadRequest(
            f"'{model}' is not a model name: letters, digits and . _ : / @ + - only."
        )
    return model


def model_connection_clean(
    *,
    provider: str,
    model: str,
    endpoint_url: str = "",
    lora_adapter: str = "",
    api_key_env: str = "",
) -> dict[str, str]:
    """The fields of a model role (agent or judge) as they will be stored, or a
    ModelConnectionError saying what is wrong. OpenAI and Anthropic are refused
    (ModelConnectionConflict) while their key is missing."""
    if provider not in (VLLM, OPENAI, ANTHROPIC):
        raise ModelConnectionBadRequest(
            f"No model provider '{provider}': choose vllm, openai or anthropic."
        )
    model = _model_name_clean(model)
    if provider in HOSTED_KEY_ENVS:
        name = HOSTED_KEY_ENVS[provider]
        if not os.environ.get(name):
            label = "OpenAI" if provider == OPENAI else "Anthropic"
            raise ModelConnectionConflict(
                f"{label} is not offered here: set {name} on the dashboard pod."
            )
        return {"provider_model": model, "endpoint_url": "", "lora_adapter": "", "api_key_env": ""}
    endpoint_url = (endpoint_url or "").strip()
    problem = base_url_problem(endpoint_url) or key_env_problem((api_key_env or "").strip())
    # A typed address is called by the server: only public hosts, or those an operator allowed.
    problem = problem or outbound_problem(endpoint_url)
    if problem:
        raise ModelConnectionBadRequest(problem)
    lora_adapter = (lora_adapter or "").strip()
    if lora_adapter:
        lora_adapter = _model_name_clean(lora_adapter)
    return {
        "provider_model": model,
        "endpoint_url": endpoint_url,
        "lora_adapter": lora_adapter,
        "api_key_env": (api_key_env or "").strip(),
    }


# --- Environment → Judge -----------------------------------------------------------------------


def world_judge_set(
    *,
    world: World,
    provider: str,
    model: str = "",
    endpoint_url: str = "",
    lora_adapter: str = "",
    api_key_env: str = "",
) -> World:
    """Name the world's judge: the rubric judge, or a provider's model (the rubric as a JSON
    prompt). New judgements are stored under the judge's name; earlier ones stay.
    A refused connection raises ModelConnectionError before anything is written."""
    with transaction.atomic():
        if provider == DEFAULT_JUDGE:
            World.objects.filter(pk=world.pk).update(judge_provider=DEFAULT_JUDGE, judge_model="")
            JudgeConnection.objects.filter(world=world).delete()
        else:
            fields = model_connection_clean(
                provider=provider,
                model=model,
                endpoint_url=endpoint_url,
                lora_adapter=lora_adapter,
                api_key_env=api_key_env,
            )
            World.objects.filter(pk=world.pk).update(
                judge_provider=provider, judge_model=fields["provider_model"]
            )
            if provider == VLLM:
                JudgeConnection.objects.update_or_create(
                    world=world,
                    defaults={
                        "endpoint_url": fields["endpoint_url"],
                        "lora_adapter": fields["lora_adapter"],
                        "api_key_env": fields["api_key_env"],
                    },
                )
            else:
                JudgeConnection.objects.filter(world=world).delete()
    world.refresh_from_db()
    return world

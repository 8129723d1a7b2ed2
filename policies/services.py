"""Writes of the policy registry: versions, where each one runs, and the world's judge.

Serving and releasing trained versions are in policies.endpoints.
"""

from __future__ import annotations

import os
import re

from django.db import transaction

from arena.models import DEFAULT_JUDGE, World
from policies.errors import PolicyBadRequest, PolicyConflict
from policies.models import JudgeConnection, PolicyVersion
from policies.providers import (
    ANTHROPIC,
    HOSTED_KEY_ENVS,
    OPENAI,
    SIMULATOR,
    VLLM,
    base_url_problem,
    key_env_problem,
    scrub,
)

BASELINE_NAME = "baseline"


def policy_baseline_ensure() -> PolicyVersion:
    """`v1 · baseline`: the hand-written start of every workspace (scripted move rules)."""
    version, _created = PolicyVersion.objects.get_or_create(
        number=1,
        defaults={
            "name": BASELINE_NAME,
            "description": "Hand-written start: greet, give details, handle the objection "
            "when one is open, reassure, propose a viewing once there is trust, offer a slot "
            "once a viewing is agreed, then close. Scripted wording on the simulator.",
            "provider": PolicyVersion.Provider.SIMULATOR,
            "move_strategy": {"kind": "scripted"},
            "learned_from": {"kind": "hand-written"},
        },
    )
    return version


def version_register(
    *,
    name: str,
    parent: PolicyVersion | None,
    move_strategy: dict,
    learned_from: dict,
    description: str = "",
    provider: str = PolicyVersion.Provider.SIMULATOR,
    provider_model: str = "",
    endpoint_url: str = "",
    created_by=None,
) -> PolicyVersion:
    """A new numbered version (max + 1). Numbers never repeat, even under concurrent finishes:
    the table is locked for the moment it takes to pick the number."""
    from django.db import connection, transaction

    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(f"LOCK TABLE {PolicyVersion._meta.db_table} IN EXCLUSIVE MODE")
        number = (
            PolicyVersion.objects.order_by("-number").values_list("number", flat=True).first() or 0
        ) + 1
        return PolicyVersion.objects.create(
            number=number,
            name=name,
            parent=parent,
            description=description,
            provider=provider,
            provider_model=provider_model,
            endpoint_url=endpoint_url,
            move_strategy=move_strategy,
            learned_from=learned_from,
            created_by=created_by,
            # A trained version answers only once its endpoint serves (policies.endpoints):
            # until then it is starting, and the Duel, Train and Evaluate pass it by.
            status=PolicyVersion.Status.STARTING
            if provider == PolicyVersion.Provider.TRAINED
            else PolicyVersion.Status.ANSWERING,
        )


# --- Runs on: where a version's agent answers -------------------------------------------------

JUDGE_MODEL = "judge"  # "Runs on" the world's judge model
_MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$")
_LOOKS_LIKE_KEY = re.compile(r"^(?:sk|pk|rk)-|^sk_|^hf_", re.IGNORECASE)


def _model_name_clean(model: str) -> str:
    model = (model or "").strip()
    if not model:
        raise PolicyBadRequest("Name the model, such as gpt-4o-mini or Qwen/Qwen3-14B.")
    if _LOOKS_LIKE_KEY.match(model) or scrub(model) != model:
        # A model field is shown on pages and in the API: a key typed there would leak.
        raise PolicyBadRequest("That looks like a key, not a model name: type the model name.")
    if not _MODEL_NAME.match(model):
        raise PolicyBadRequest(
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
    """The fields of a model role (agent or judge) as they will be stored, or PolicyBadRequest
    saying what is wrong. OpenAI and Anthropic are refused while their key is missing."""
    if provider not in (VLLM, OPENAI, ANTHROPIC):
        raise PolicyBadRequest(f"No model provider '{provider}': choose vllm, openai or anthropic.")
    model = _model_name_clean(model)
    if provider in HOSTED_KEY_ENVS:
        name = HOSTED_KEY_ENVS[provider]
        if not os.environ.get(name):
            label = "OpenAI" if provider == OPENAI else "Anthropic"
            raise PolicyConflict(f"{label} is not offered here: set {name} on the dashboard pod.")
        return {"provider_model": model, "endpoint_url": "", "lora_adapter": "", "api_key_env": ""}
    endpoint_url = (endpoint_url or "").strip()
    problem = base_url_problem(endpoint_url) or key_env_problem((api_key_env or "").strip())
    if problem:
        raise PolicyBadRequest(problem)
    lora_adapter = (lora_adapter or "").strip()
    if lora_adapter:
        lora_adapter = _model_name_clean(lora_adapter)
    return {
        "provider_model": model,
        "endpoint_url": endpoint_url,
        "lora_adapter": lora_adapter,
        "api_key_env": (api_key_env or "").strip(),
    }


def version_runs_on_set(
    *,
    version: PolicyVersion,
    provider: str,
    model: str = "",
    endpoint_url: str = "",
    lora_adapter: str = "",
    api_key_env: str = "",
    world: World | None = None,
) -> PolicyVersion:
    """Move a version's agent: to the judge's model of `world`, to a vLLM endpoint, to an
    OpenAI or Anthropic model by name, or back to the simulator. Only names, addresses and
    a key variable's NAME are recorded."""
    if version.is_trained:
        raise PolicyConflict(
            f"{version.label} is trained: it runs on its own endpoint (serve or release it)."
        )
    if provider == SIMULATOR:
        fields = {"provider_model": "", "endpoint_url": "", "lora_adapter": "", "api_key_env": ""}
    elif provider == JUDGE_MODEL:
        if world is None:
            raise PolicyBadRequest("Say which world's judge the version should run on.")
        if (world.judge_provider or DEFAULT_JUDGE) == DEFAULT_JUDGE:
            raise PolicyConflict(
                f"{world.name} is judged by the rubric judge, which has no model: choose a "
                "model judge under Environment → Judge first."
            )
        connection = JudgeConnection.objects.filter(world=world).first()
        provider = world.judge_provider
        fields = model_connection_clean(
            provider=provider,
            model=world.judge_model,
            endpoint_url=connection.endpoint_url if connection else "",
            lora_adapter=connection.lora_adapter if connection else "",
            api_key_env=connection.api_key_env if connection else "",
        )
    else:
        fields = model_connection_clean(
            provider=provider,
            model=model,
            endpoint_url=endpoint_url,
            lora_adapter=lora_adapter,
            api_key_env=api_key_env,
        )
    PolicyVersion.objects.filter(pk=version.pk).update(provider=provider, **fields)
    version.refresh_from_db()
    return version


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
    prompt). New judgements are stored under the judge's name; earlier ones stay."""
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

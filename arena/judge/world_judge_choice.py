"""Environment → Judge: naming a world's judge, the rubric judge (replaced by the world's
fitted versions once it has them) or a provider's model. Which judge then scores is
arena.judge.world_judge's. Workspace schema.
"""

from __future__ import annotations

from django.db import transaction

from arena.model_connection import model_connection_clean
from arena.models import DEFAULT_JUDGE, JudgeConnection, World
from levers9.providers import VLLM


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

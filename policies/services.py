"""Writes of the policy registry: versions and where each one runs.

Serving and releasing trained versions are in policies.endpoints; the world's judge
(Environment → Judge) is arena.judge.world_judge_choice's.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from arena import model_connection
from arena.errors import ModelConnectionConflict, ModelConnectionError
from arena.models import DEFAULT_JUDGE, JudgeConnection, Reply, World
from levers9.providers import SIMULATOR
from policies.errors import PolicyBadRequest, PolicyConflict
from policies.models import PolicyVersion, ReplyAuthor
from policies.untrained_base import UntrainedBase
from trainers.results import VersionRecord, WordingResult, learned_record

BASELINE_NAME = "baseline"
# Every world reads it, so it names no world's business (policies.agents says how v1 answers).
BASELINE_DESCRIPTION = (
    "Hand-written start. Where the world has a simulator: scripted move rules and scripted "
    "wording. Where it has only recorded calls: the real agent's reply at the most similar "
    "moment of another of the world's calls."
)


def policy_baseline_ensure(*, world: World | None = None) -> list[PolicyVersion]:
    """`v1 · baseline` of `world`, or of every world when none is named: the hand-written
    start each world gets (scripted move rules). Creating a workspace runs it after its
    first world; a world made later gets its own when it is saved (policies.apps)."""
    worlds = [world] if world is not None else list(World.objects.order_by("name"))
    baselines = []
    for each in worlds:
        version, _created = PolicyVersion.objects.get_or_create(
            world=each,
            number=1,
            defaults={
                "name": BASELINE_NAME,
                "description": BASELINE_DESCRIPTION,
                "provider": PolicyVersion.Provider.SIMULATOR,
                "move_strategy": {"kind": "scripted"},
                "learned_from": {"kind": "hand-written"},
            },
        )
        baselines.append(version)
    return baselines


def world_baseline_on_save(sender, instance: World, created: bool, raw: bool = False, **kwargs):
    """A new world gets its v1 · baseline however it was made (the API, the World page, the
    admin, demo_setup, a shell): connected to World's post_save in policies.apps, because the
    arena sits below the registry and cannot call it."""
    if created and not raw:
        policy_baseline_ensure(world=instance)


class VersionWorldMismatch(PolicyBadRequest):
    """A version named for another world's work; `field` names the request's field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def version_in_world_check(*, version: PolicyVersion | None, world: World, field: str) -> None:
    """A version chosen for `world` (a parent, a candidate) must be one of that world's: a
    strategy learned on one business's calls answers nothing useful on another's."""
    if version is not None and version.world_id != world.pk:
        raise VersionWorldMismatch(
            field,
            f"{field}: {version.label} belongs to {version.world.name}, not {world.name}; "
            f"choose one of {world.name}'s versions.",
        )


def version_register(
    *,
    world: World,
    name: str,
    parent: PolicyVersion | None,
    move_strategy: dict,
    learned_from: VersionRecord | Mapping[str, Any],
    description: str = "",
    provider: str = PolicyVersion.Provider.SIMULATOR,
    provider_model: str = "",
    endpoint_url: str = "",
    created_by=None,
) -> PolicyVersion:
    """A new numbered version of `world` (its highest number + 1). Numbers never repeat in a
    world, even under concurrent finishes: the table is locked for the moment it takes to
    pick the number. The parent must be of the same world (VersionWorldMismatch).
    `learned_from` is its trainer family's record, or a dict loaded as one (RecordError names a
    key no record has)."""
    from django.db import connection, transaction

    record = (
        learned_from if isinstance(learned_from, VersionRecord) else learned_record(learned_from)
    )

    version_in_world_check(version=parent, world=world, field="parent")
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(f"LOCK TABLE {PolicyVersion._meta.db_table} IN EXCLUSIVE MODE")
        number = (
            PolicyVersion.objects.filter(world=world)
            .order_by("-number")
            .values_list("number", flat=True)
            .first()
            or 0
        ) + 1
        return PolicyVersion.objects.create(
            world=world,
            number=number,
            name=name,
            parent=parent,
            description=description,
            provider=provider,
            provider_model=provider_model,
            endpoint_url=endpoint_url,
            move_strategy=move_strategy,
            learned_from=record.to_dict(),
            created_by=created_by,
            # A trained version answers only once its endpoint serves (policies.endpoints):
            # until then it is starting, and the Duel, Train and Evaluate pass it by.
            status=PolicyVersion.Status.STARTING
            if provider == PolicyVersion.Provider.TRAINED
            else PolicyVersion.Status.ANSWERING,
        )


# --- Runs on: where a version's agent answers -------------------------------------------------

JUDGE_MODEL = "judge"  # "Runs on" the world's judge model


@contextmanager
def _as_policy_errors() -> Iterator[None]:
    """arena's model connection errors (one set of rules for agents and judges) as the
    registry's: PolicyConflict where a hosted provider's key is missing, else PolicyBadRequest
    saying what is wrong."""
    try:
        yield
    except ModelConnectionConflict as error:
        raise PolicyConflict(str(error)) from None
    except ModelConnectionError as error:
        raise PolicyBadRequest(str(error)) from None


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
    else:
        if provider == JUDGE_MODEL:
            if world is None:
                raise PolicyBadRequest("Say which world's judge the version should run on.")
            if (world.judge_provider or DEFAULT_JUDGE) == DEFAULT_JUDGE:
                raise PolicyConflict(
                    f"{world.name} is judged by the rubric judge, which has no model: choose a "
                    "model judge under Environment → Judge first."
                )
            provider, model = world.judge_provider, world.judge_model
            connection = JudgeConnection.objects.filter(world=world).first()
            endpoint_url, lora_adapter, api_key_env = (
                (connection.endpoint_url, connection.lora_adapter, connection.api_key_env)
                if connection
                else ("", "", "")
            )
        with _as_policy_errors():
            fields = model_connection.model_connection_clean(
                provider=provider,
                model=model,
                endpoint_url=endpoint_url,
                lora_adapter=lora_adapter,
                api_key_env=api_key_env,
            )
    PolicyVersion.objects.filter(pk=version.pk).update(provider=provider, **fields)
    version.refresh_from_db()
    return version


def replies_written(written: Sequence[tuple[Reply, PolicyVersion | UntrainedBase]]) -> None:
    """Keep which version wrote each saved reply (a Duel candidate, an evaluation's answer);
    a reply of a version's untrained base is kept as its base's, not as the version's."""
    ReplyAuthor.objects.bulk_create(
        ReplyAuthor(reply=reply, version=author.version, untrained_base=True)
        if isinstance(author, UntrainedBase)
        else ReplyAuthor(reply=reply, version=author)
        for reply, author in written
    )


def version_against_base_record(*, version: PolicyVersion, against_base: dict[str, Any]) -> bool:
    """Write a wording version's measure against its own base untrained into its record, and
    its reasons (`against_base["reasons"]`: no better than the base, capped more often) into
    its did_not_learn, replacing those an earlier such measure wrote. Once per evaluation: a
    redelivered finish, or an older evaluation's finish arriving late, writes nothing. Returns
    whether it wrote."""
    from django.db import transaction

    with transaction.atomic():
        version = PolicyVersion.objects.select_for_update().get(pk=version.pk)
        record = version.learned
        if not isinstance(record, WordingResult):
            return False
        earlier = record.against_base or {}
        if (earlier.get("evaluation") or 0) >= against_base["evaluation"]:
            return False
        stale = set(earlier.get("reasons") or [])
        reasons = [reason for reason in record.did_not_learn or [] if reason not in stale]
        reasons += [reason for reason in against_base.get("reasons") or [] if reason not in reasons]
        version.learned_set(
            record.with_changes(against_base=dict(against_base), did_not_learn=reasons)
        )
        version.save(update_fields=["learned_from"])
    return True

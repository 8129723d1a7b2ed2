"""Writes of the policy registry."""

from __future__ import annotations

from policies.models import PolicyVersion

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
        )

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

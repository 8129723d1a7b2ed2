"""Reads of the policy registry."""

from __future__ import annotations

from policies.models import PolicyVersion


def policy_live() -> PolicyVersion | None:
    """The version taking live calls. Until Make live exists, the newest answering version
    that is hand-written or promoted; v1 · baseline in a new workspace."""
    return PolicyVersion.objects.filter(number=1).first() or PolicyVersion.objects.first()


def policy_agent_label(version: PolicyVersion | None) -> str:
    if version is None:
        return "no version yet"
    return f"{version.label} on {version.get_provider_display()}"


def policies_answering() -> list[PolicyVersion]:
    """Versions that can answer, newest first: what the Duel, Train and Evaluate pick from."""
    return list(
        PolicyVersion.objects.filter(status=PolicyVersion.Status.ANSWERING).order_by("-number")
    )

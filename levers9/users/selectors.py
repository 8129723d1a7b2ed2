"""Reads of the current workspace's users and invitations (run inside its schema)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db.models import Q, QuerySet
from django.utils import timezone

from levers9.roles import OWNER, user_role
from levers9.users.models import Invitation


@dataclass(frozen=True)
class WorkspaceUser:
    user: object
    role: str | None


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def users_active() -> QuerySet:
    """The users who can sign in, their groups fetched with them (a role per row)."""
    return get_user_model().objects.filter(is_active=True).prefetch_related("groups")


def users_removed() -> QuerySet:
    return get_user_model().objects.filter(is_active=False).order_by("username")


def workspace_users() -> list[WorkspaceUser]:
    return [
        WorkspaceUser(user=user, role=user_role(user))
        for user in users_active().order_by("username")
    ]


def owners_active() -> QuerySet:
    """Who holds the owner role: the group, or the superuser flag the first owner is made with
    (levers9.roles.user_role counts both)."""
    return (
        get_user_model()
        .objects.filter(is_active=True)
        .filter(Q(is_superuser=True) | Q(groups__name=OWNER))
        .distinct()
    )


def invitations_pending() -> QuerySet:
    return Invitation.objects.filter(
        accepted_at=None, revoked_at=None, expires_at__gt=timezone.now()
    ).select_related("invited_by")


def invitation_for_token(token: str) -> Invitation | None:
    """The invitation a link's token names in this workspace, whatever its state."""
    return Invitation.objects.filter(token_hash=token_hash(token)).first()

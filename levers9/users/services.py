"""Writes of a workspace's users: invite by e-mail with a role, accept an invitation, change a
role, remove. Run inside the workspace's schema.

The invitation link carries a random token; only its hash is stored, and the token itself is
returned once, to be shown to the owner who invites. Nothing here sends e-mail or logs the token.
"""

from __future__ import annotations

import secrets
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.utils import timezone

from levers9.roles import OWNER, ROLES, roles_ensure_groups, user_role, user_set_role
from levers9.users.models import Invitation
from levers9.users.selectors import owners_active, token_hash

# Long enough for a teammate back from a week away; short enough that a link lost in a chat
# log stops working soon.
INVITATION_LIFETIME = timedelta(days=7)
ROLE_CHOICES_SENTENCE = "reviewer, manager or owner"


class InvitationUnusable(Exception):  # noqa: N818 (a refusal, read by people)
    """The link is unknown, used, withdrawn or expired; the message says which, plainly."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


class LastOwnerRefused(ValidationError):
    """The change would leave the workspace without an owner (a conflict, not bad input)."""


def _role_checked(role: str) -> str:
    if role not in ROLES:
        raise ValidationError({"role": f"'{role}' is not a role: choose {ROLE_CHOICES_SENTENCE}."})
    return role


def _email_checked(email: str) -> str:
    email = (email or "").strip().lower()
    try:
        validate_email(email)
    except ValidationError:
        raise ValidationError(
            {"email": "Enter a valid email address, such as name@example.com."}
        ) from None
    return email


def invitation_create(*, email: str, role: str, invited_by) -> tuple[Invitation, str]:
    """A new invitation and its token (shown once, never stored). An earlier pending invitation
    to the same address is withdrawn, so only the newest link works."""
    email = _email_checked(email)
    _role_checked(role)
    User = get_user_model()
    if User.objects.filter(username=email, is_active=True).exists():
        raise ValidationError(
            {
                "email": f"{email} already has an account in this workspace: change their role "
                "on the Users page instead of inviting them."
            }
        )
    token = secrets.token_urlsafe(32)
    now = timezone.now()
    with transaction.atomic():
        Invitation.objects.filter(email=email, accepted_at=None, revoked_at=None).update(
            revoked_at=now
        )
        invitation = Invitation.objects.create(
            email=email,
            role=role,
            token_hash=token_hash(token),
            invited_by=invited_by,
            expires_at=now + INVITATION_LIFETIME,
        )
    return invitation, token


def invitation_revoke(*, invitation: Invitation) -> None:
    Invitation.objects.filter(pk=invitation.pk, accepted_at=None, revoked_at=None).update(
        revoked_at=timezone.now()
    )


def invitation_usable(invitation: Invitation | None) -> Invitation:
    """The invitation if its link may still be used, else why not (404 unknown, 410 gone)."""
    if invitation is None:
        raise InvitationUnusable(
            "This is not a working invitation link for this workspace. Check that it was "
            "copied whole, or ask the workspace's owner for a new one.",
            status=404,
        )
    reasons = {
        Invitation.State.ACCEPTED: "This invitation link was already used. Sign in with the "
        "password chosen then, or ask the workspace's owner for a new link.",
        Invitation.State.REVOKED: "This invitation was withdrawn by the workspace's owner. "
        "Ask them for a new link.",
        Invitation.State.EXPIRED: "This invitation link has expired. Ask the workspace's owner "
        "for a new one.",
    }
    reason = reasons.get(invitation.state)
    if reason:
        raise InvitationUnusable(reason, status=410)
    return invitation


def invitation_accept(*, token: str, password: str):
    """Make (or bring back) the invitee's account with the invited role and their password.

    Works once: the invitation is claimed with a conditional update inside the transaction, so
    two submissions of the same link at once make one account."""
    from levers9.users.selectors import invitation_for_token

    with transaction.atomic():
        invitation = invitation_usable(invitation_for_token(token))
        User = get_user_model()
        user = User.objects.filter(username=invitation.email).first()
        if user is not None and user.is_active:
            raise InvitationUnusable(
                f"{invitation.email} already has an account in this workspace: sign in instead.",
                status=409,
            )
        candidate = user or User(username=invitation.email, email=invitation.email)
        try:
            validate_password(password, candidate)
        except ValidationError as error:
            raise ValidationError({"password": error.messages}) from None
        claimed = Invitation.objects.filter(
            pk=invitation.pk, accepted_at=None, revoked_at=None, expires_at__gt=timezone.now()
        ).update(accepted_at=timezone.now())
        if claimed != 1:
            invitation.refresh_from_db()
            invitation_usable(invitation)  # says why it is gone
        # A removed user invited again keeps their row, so what they did keeps their name.
        candidate.is_active = True
        candidate.is_staff = True  # as every workspace user: the admin then checks the role
        candidate.is_superuser = False
        candidate.set_password(password)
        candidate.save()
        roles_ensure_groups()
        user_set_role(user=candidate, role=invitation.role)
    return candidate


def _refuse_if_last_owner(user, *, field: str, doing: str) -> None:
    if user_role(user) == OWNER and not owners_active().exclude(pk=user.pk).exists():
        raise LastOwnerRefused(
            {
                field: f"{user.get_username()} is the last owner of this workspace and cannot "
                f"be {doing}: make another user an owner first."
            }
        )


def user_role_change(*, user, role: str) -> None:
    _role_checked(role)
    if role != OWNER:
        _refuse_if_last_owner(user, field="role", doing="made a " + role)
    with transaction.atomic():
        # The first owner is a superuser (workspace_create), which would keep them an owner
        # whatever their groups say: another role ends it.
        if role != OWNER and user.is_superuser:
            user.is_superuser = False
            user.save(update_fields=["is_superuser"])
        user_set_role(user=user, role=role)


def user_remove(*, user) -> None:
    """The user can no longer sign in (password or token); the row stays, so their picks,
    overrides and jobs keep their name."""
    from rest_framework.authtoken.models import Token

    _refuse_if_last_owner(user, field="user", doing="removed")
    with transaction.atomic():
        user.is_active = False
        user.is_superuser = False
        user.save(update_fields=["is_active", "is_superuser"])
        user.groups.clear()
        user.__dict__.pop("_levers9_role", None)
        Token.objects.filter(user=user).delete()

"""The invitation service: a random, single-use, expiring token kept only as a hash, that makes
the invitee a user with the invited role; and the last owner, who cannot be demoted or removed."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.utils import timezone

from levers9.roles import MANAGER, OWNER, REVIEWER, user_role
from levers9.users.models import Invitation
from levers9.users.services import (
    InvitationUnusable,
    invitation_accept,
    invitation_create,
    invitation_revoke,
    user_remove,
    user_role_change,
)
from tests.conftest import PASSWORD

NEW_PASSWORD = "a-long-fresh-passphrase"


@pytest.fixture
def owner(in_workspace):
    return get_user_model().objects.get(username="owner@acme.test")


def test_it_keeps_only_a_hash_of_the_token(owner):
    invitation, token = invitation_create(email="Nina@Acme.test", role=MANAGER, invited_by=owner)
    invitation.refresh_from_db()
    assert invitation.email == "nina@acme.test"
    assert len(token) >= 40
    assert token not in str(Invitation.objects.filter(pk=invitation.pk).values().get())
    assert invitation.token_hash == hashlib.sha256(token.encode()).hexdigest()


def test_the_token_works_once_and_gives_the_invited_role(owner):
    _invitation, token = invitation_create(email="nina@acme.test", role=MANAGER, invited_by=owner)
    user = invitation_accept(token=token, password=NEW_PASSWORD)
    assert user.username == "nina@acme.test"
    assert user.check_password(NEW_PASSWORD)
    assert user_role(user) == MANAGER
    with pytest.raises(InvitationUnusable, match="already used"):
        invitation_accept(token=token, password=NEW_PASSWORD)


def test_it_refuses_an_expired_or_revoked_token(owner):
    expired, expired_token = invitation_create(
        email="old@acme.test", role=REVIEWER, invited_by=owner
    )
    Invitation.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(1))
    with pytest.raises(InvitationUnusable, match="expired"):
        invitation_accept(token=expired_token, password=NEW_PASSWORD)
    revoked, revoked_token = invitation_create(
        email="gone@acme.test", role=REVIEWER, invited_by=owner
    )
    invitation_revoke(invitation=revoked)
    with pytest.raises(InvitationUnusable, match="withdrawn"):
        invitation_accept(token=revoked_token, password=NEW_PASSWORD)
    assert not get_user_model().objects.filter(username__in=["old@acme.test", "gone@acme.test"])


def test_a_weak_password_is_refused_naming_the_field_and_the_token_still_works(owner):
    _invitation, token = invitation_create(email="nina@acme.test", role=REVIEWER, invited_by=owner)
    with pytest.raises(ValidationError) as refused:
        invitation_accept(token=token, password="password")
    assert "password" in refused.value.message_dict
    assert invitation_accept(token=token, password=NEW_PASSWORD).is_active


@pytest.mark.parametrize(
    ("email", "role", "field"),
    [
        ("not-an-address", REVIEWER, "email"),
        ("owner@acme.test", REVIEWER, "email"),  # already has an account
        ("nina@acme.test", "admin", "role"),
    ],
)
def test_it_refuses_a_bad_invitation_naming_the_field(owner, email, role, field):
    with pytest.raises(ValidationError) as refused:
        invitation_create(email=email, role=role, invited_by=owner)
    assert list(refused.value.message_dict) == [field]
    assert not Invitation.objects.exists()


def test_a_new_invitation_to_the_same_address_withdraws_the_earlier_link(owner):
    _first, first_token = invitation_create(email="nina@acme.test", role=REVIEWER, invited_by=owner)
    _second, second_token = invitation_create(
        email="nina@acme.test", role=MANAGER, invited_by=owner
    )
    with pytest.raises(InvitationUnusable):
        invitation_accept(token=first_token, password=NEW_PASSWORD)
    assert user_role(invitation_accept(token=second_token, password=NEW_PASSWORD)) == MANAGER


def test_the_last_owner_cannot_be_demoted_or_removed(owner):
    with pytest.raises(ValidationError) as demoted:
        user_role_change(user=owner, role=MANAGER)
    assert "last owner" in " ".join(demoted.value.message_dict["role"])
    with pytest.raises(ValidationError, match="last owner"):
        user_remove(user=owner)
    owner.refresh_from_db()
    assert owner.is_active
    assert user_role(owner) == OWNER


def test_with_a_second_owner_the_first_can_step_down(owner):
    from levers9.services import workspace_user_create

    workspace_user_create(email="olga@acme.test", password=PASSWORD, role=OWNER)
    user_role_change(user=owner, role=MANAGER)
    owner.refresh_from_db()
    # The workspace's first owner is a superuser: stepping down must end that too.
    assert not owner.is_superuser
    assert user_role(owner) == MANAGER


def test_a_removed_user_cannot_sign_in_and_keeps_their_name_on_picks(owner):
    from django.contrib.auth import authenticate
    from rest_framework.authtoken.models import Token

    from levers9.services import workspace_user_create

    rita = workspace_user_create(email="rita@acme.test", password=PASSWORD, role=REVIEWER)
    Token.objects.create(user=rita)
    user_remove(user=rita)
    rita.refresh_from_db()
    assert not rita.is_active
    assert user_role(rita) is None
    assert authenticate(username="rita@acme.test", password=PASSWORD) is None
    assert not Token.objects.filter(user=rita).exists()
    # The row stays, so what the user did keeps its name (picks store reviewer_name).
    assert get_user_model().objects.filter(username="rita@acme.test").exists()


def test_a_removed_user_invited_again_comes_back_with_the_new_role(owner):
    from levers9.services import workspace_user_create

    rita = workspace_user_create(email="rita@acme.test", password=PASSWORD, role=REVIEWER)
    user_remove(user=rita)
    _invitation, token = invitation_create(email="rita@acme.test", role=MANAGER, invited_by=owner)
    back = invitation_accept(token=token, password=NEW_PASSWORD)
    assert back.pk == rita.pk  # the same row: their past picks still name them
    assert back.is_active
    assert user_role(back) == MANAGER

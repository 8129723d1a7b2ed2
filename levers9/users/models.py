"""Invitations to a workspace (tenant schema: each workspace keeps its own, so an invitation
link of one workspace finds nothing on another's host)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from levers9.roles import ROLES


class Invitation(models.Model):
    """An offer to join the workspace with one role, reached by a link that holds a random
    token. Only the token's SHA-256 is kept: whoever reads the database (or a backup) cannot
    rebuild the link. A hash without salt is enough for 256 random bits; a salt protects
    guessable secrets such as passwords, and a token is not guessable."""

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        ACCEPTED = "accepted", "Accepted"
        REVOKED = "revoked", "Withdrawn"
        EXPIRED = "expired", "Expired"

    email = models.EmailField()
    role = models.CharField(max_length=20, choices=[(role, role) for role in ROLES])
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.email} as {self.role} ({self.state})"

    @property
    def state(self) -> str:
        if self.accepted_at is not None:
            return self.State.ACCEPTED
        if self.revoked_at is not None:
            return self.State.REVOKED
        if self.expires_at <= timezone.now():
            return self.State.EXPIRED
        return self.State.PENDING

"""Workspace-schema models of the policy registry: numbered agent versions and their lineage.

`v1 · baseline` is the hand-written start every workspace gets; Train makes v2 and later.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class PolicyVersion(models.Model):
    class Provider(models.TextChoices):
        SIMULATOR = "simulator", "Simulator (scripted)"
        VLLM = "vllm", "vLLM endpoint"
        OPENAI = "openai", "OpenAI"
        ANTHROPIC = "anthropic", "Anthropic"
        TRAINED = "trained", "Trained endpoint"

    class Status(models.TextChoices):
        ANSWERING = "answering", "Answering"
        RELEASED = "released", "Released"

    number = models.PositiveIntegerField(unique=True)
    name = models.CharField(max_length=100)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    description = models.TextField(blank=True)
    provider = models.CharField(max_length=20, choices=Provider.choices, default=Provider.SIMULATOR)
    # Only names and addresses: keys stay in the environment of the pod.
    provider_model = models.CharField(max_length=200, blank=True)
    endpoint_url = models.URLField(blank=True)
    # "scripted" (the hand-written rules) or a learned table {"table": [...], "scenarios": ...}.
    move_strategy = models.JSONField(default=dict, blank=True)
    # What it learned from: algorithm, knobs, seed, preference version, reward source, ...
    learned_from = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.ANSWERING)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["number"]

    def __str__(self) -> str:
        return self.label

    @property
    def label(self) -> str:
        return f"v{self.number} · {self.name}"

    @property
    def can_answer(self) -> bool:
        return self.status == self.Status.ANSWERING

"""Workspace-schema model of training: what a training job is about.

The job itself is the platform's (levers9.jobs.Job: state, cards, task, progress); a Train
card's or an Engines run's link to the product lives here, one row per job: the world it is
made in, the version it starts from and the one it made, and for wording the frozen
preferences and the base it learned on.
"""

from __future__ import annotations

from django.db import models


class TrainingRun(models.Model):
    job = models.OneToOneField(
        "jobs.Job", primary_key=True, on_delete=models.CASCADE, related_name="training_run"
    )
    world = models.ForeignKey(
        "arena.World",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="training_runs",
    )
    parent_version = models.ForeignKey(
        "policies.PolicyVersion",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="child_runs",
    )
    produced_version = models.ForeignKey(
        "policies.PolicyVersion",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="produced_by_runs",
    )
    # The number of the frozen preference version a wording run learned from.
    preference_version = models.PositiveIntegerField(null=True, blank=True)
    base_model = models.CharField(max_length=200, blank=True)

    def __str__(self) -> str:
        return f"training run of job {self.job_id}"

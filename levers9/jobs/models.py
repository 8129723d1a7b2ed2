"""Workspace-schema model of the job platform: one row per job, whatever app started it.

packing → submitted(task_id) → running → finishing → done | failed, plus interrupted (the
dashboard lost sight of a running task; it carries on as `task_id`) and cancelled.

What a job *is* (train card, evaluation, serve request, ...) is its `kind`, a name an app
registered in levers9.jobs.kinds; the platform itself knows no kind, and no product table: what
a job is about (its world, the version it starts from or made) is kept by the app of its kind,
in a table of its own that points at the job (training.TrainingRun, evaluation.Evaluation.job,
policies.Endpoint.job_id, arena.JobWorld for the judge's and the Duel pairs' jobs), and shown
through the kind's `about`.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.functional import cached_property


class Job(models.Model):
    class State(models.TextChoices):
        PACKING = "packing", "Packing"
        SUBMITTED = "submitted", "Submitted"
        RUNNING = "running", "Running"
        FINISHING = "finishing", "Finishing"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        INTERRUPTED = "interrupted", "Interrupted"
        CANCELLED = "cancelled", "Cancelled"

    ACTIVE_STATES = (State.PACKING, State.SUBMITTED, State.RUNNING, State.FINISHING)
    ENDED_STATES = (State.DONE, State.FAILED, State.CANCELLED)
    # Not stored: true on a job a start returned in place of a second one doing the same work
    # (a fit of a world while one is on its way: arena.judge.fit_job).
    joined = False

    # A kind registered by an app (levers9.jobs.kinds.job_kind_register).
    kind = models.CharField(max_length=20)
    trainer = models.CharField(max_length=60, help_text="e.g. q-learning-online, rlhf, dpo")
    title = models.CharField(max_length=200, blank=True)
    state = models.CharField(max_length=20, choices=State.choices, default=State.PACKING)
    spec_path = models.CharField(max_length=500, blank=True)
    task_id = models.CharField(max_length=64, blank=True, db_index=True)
    # Denormalised on purpose: the task is always read as this workspace, whoever resumes.
    workspace_schema = models.CharField(max_length=63)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    # Work nobody clicked (a judge refit after a freeze, an automatic measurement): it waits in
    # its pool's background lane, never in front of a job a person started (levers9.pools).
    background = models.BooleanField(
        default=False,
        help_text="Started by the platform, not by a person: runs in the pool's background "
        "lane and yields to jobs a person started.",
    )
    pool_name = models.CharField(max_length=60)
    card_type = models.CharField(max_length=100)
    card_count = models.PositiveSmallIntegerField(default=1)
    card_allocation_id = models.PositiveIntegerField(null=True, blank=True)
    progress_step = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    # When the current count began, and at which step: a job that counts in phases (an
    # evaluation's replies, then its lens) restarts its count, and the time left is read from
    # the current phase's rate, not the whole job's.
    phase_started_at = models.DateTimeField(null=True, blank=True)
    phase_started_step = models.PositiveIntegerField(default=0)
    metrics = models.JSONField(default=dict, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    # What happened to the job along the way, one line each (adoptions, resumes, ...).
    notes = models.TextField(blank=True)
    # What the finish does, in the platform's plain values (make a version of which kind, serve
    # it, checkpoint it); the product's ids are the kind's app's, in its own table, and shown
    # beside these by `finish_needs_shown`.
    finish_needs = models.JSONField(default=dict, blank=True)
    # Who follows the job for the dashboard ("host:pid"), and when it last looked.
    watcher = models.CharField(max_length=100, blank=True)
    watched_at = models.DateTimeField(null=True, blank=True)
    # Where the task runs ("host:pid" of the worker and of the trainer process).
    worker = models.CharField(max_length=100, blank=True)
    trainer_pid = models.PositiveIntegerField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    finish_claimed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["state"], name="jobs_job_state_idx")]

    def __str__(self) -> str:
        return f"Job {self.pk} · {self.trainer} · {self.state}"

    @property
    def kind_label(self) -> str:
        from levers9.jobs.kinds import job_kind_label

        return job_kind_label(self.kind)

    @cached_property
    def about(self):
        """What the job is about, as its kind's app says (levers9.jobs.kinds.JobAbout); a page
        of jobs reads it for all of them at once (levers9.jobs.selectors.jobs_about_read)."""
        from levers9.jobs.kinds import jobs_about

        return jobs_about([self])[self.pk]

    @property
    def finish_needs_shown(self) -> dict:
        """`finish_needs` with the product's ids the kind's app keeps (JobAbout.finish_needs),
        keyed as PostgreSQL's jsonb orders keys (by length, then bytes), so the API shows the
        object it showed when they were stored here. What is stored wins: older jobs keep theirs
        in finish_needs."""
        shown = {**self.about.finish_needs, **(self.finish_needs or {})}
        return dict(
            sorted(shown.items(), key=lambda item: (len(item[0].encode()), item[0].encode()))
        )

    @property
    def is_active(self) -> bool:
        return self.state in self.ACTIVE_STATES

    @property
    def progress_fraction(self) -> float:
        if self.state == self.State.DONE:
            return 1.0
        if not self.progress_total:
            return 0.0
        return min(1.0, self.progress_step / self.progress_total)

    @property
    def eta_seconds(self) -> float | None:
        """Linear estimate from the current phase's steps so far; None before there is
        anything to go on."""
        since = self.phase_started_at or self.started_at
        done = self.progress_step - (self.phase_started_step if self.phase_started_at else 0)
        if self.state != self.State.RUNNING or not since or done <= 0:
            return None
        from django.utils import timezone

        elapsed = (timezone.now() - since).total_seconds()
        remaining = max(self.progress_total - self.progress_step, 0)
        return elapsed / done * remaining

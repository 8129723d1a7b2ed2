"""Workspace-schema models of evaluation: the held-out calls a world's evaluations replay, the
evaluations of one version against another (Evaluate and the checkpoints), and every answer
they judged.

A world's held-out calls are chosen once and kept (EvaluationCallSet), so every evaluation in
that world runs on the same calls and two evaluations can be compared: forty real calls,
replayed at their first four agent turns, or — in a world without real calls — forty
scripted customers on fixed seeds. At each of those moments the yardstick is what the real
(or scripted) agent said there, judged by the same judge.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from evaluation.verdicts import Verdict, judge_agreement_shown, verdict_decide


class EvaluationCallSet(models.Model):
    """The fixed calls of a world's evaluations: chosen once, never redrawn."""

    class Kind(models.TextChoices):
        REAL = "real", "Real calls, replayed"
        SCRIPTED = "scripted", "Scripted customers on fixed seeds"
        # A world whose picks are imported preference pairs, with no calls or customers: the
        # pairs it holds out (arena.held_out), each one moment, the chosen reply the yardstick.
        PAIRS = "pairs", "Held-out preference pairs"

    world = models.OneToOneField(
        "arena.World", on_delete=models.CASCADE, related_name="evaluation_call_set"
    )
    kind = models.CharField(max_length=10, choices=Kind.choices)
    turns_per_call = models.PositiveSmallIntegerField(default=4)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "held-out call set"

    def __str__(self) -> str:
        return f"held-out calls of {self.world}"

    @property
    def yardstick_label(self) -> str:
        """Who spoke at each held-out moment in the recorded (or reference) call."""
        return {self.Kind.REAL: "real agent", self.Kind.PAIRS: "chosen reply"}.get(
            self.kind, "scripted agent"
        )

    @property
    def held_out_unit(self) -> str:
        """What one of the set's calls is, in the plural, for a sentence that counts them: a
        pairs world holds out pairs, not calls."""
        return "held-out pairs" if self.kind == self.Kind.PAIRS else "held-out calls"


class HeldOutCall(models.Model):
    """One call of the set: a real recorded call, or a scenario played on a fixed seed."""

    call_set = models.ForeignKey(EvaluationCallSet, on_delete=models.CASCADE, related_name="calls")
    position = models.PositiveSmallIntegerField()
    call = models.ForeignKey(
        "arena.Call", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    scenario = models.ForeignKey(
        "arena.Scenario", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    seed = models.PositiveIntegerField(null=True, blank=True)
    # A real call's own outcome (a replay never moves it); a scripted call's reference episode.
    outcome = models.CharField(max_length=10, blank=True)

    class Meta:
        ordering = ["call_set", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["call_set", "position"], name="held_out_call_unique_position"
            )
        ]

    def __str__(self) -> str:
        return self.label

    @property
    def label(self) -> str:
        if self.call_id:
            return f"call {self.call.external_id}"
        if not self.scenario_id and self.seed is None:
            return f"held-out pair {self.position}"  # an imported pair: one moment, no call
        return f"{self.scenario.name if self.scenario_id else 'scenario'}, seed {self.seed}"


class HeldOutMoment(models.Model):
    """The n-th agent turn of a held-out call: where both versions answer."""

    held_out_call = models.ForeignKey(HeldOutCall, on_delete=models.CASCADE, related_name="moments")
    number = models.PositiveSmallIntegerField(help_text="1 for the call's first agent turn")
    moment = models.ForeignKey("arena.Moment", on_delete=models.CASCADE, related_name="+")
    # What the real (or scripted reference) agent said here: the yardstick.
    yardstick = models.ForeignKey("arena.Reply", on_delete=models.CASCADE, related_name="+")

    class Meta:
        ordering = ["held_out_call", "number"]
        constraints = [
            models.UniqueConstraint(
                fields=["held_out_call", "number"], name="held_out_moment_unique_number"
            )
        ]

    def __str__(self) -> str:
        return f"{self.held_out_call} · agent turn {self.number}"


class Evaluation(models.Model):
    """Two versions on the same held-out calls: the candidate (new) against the baseline."""

    class Purpose(models.TextChoices):
        EVALUATE = "evaluate", "Evaluation"
        CHECKPOINT = "checkpoint", "Checkpoint"
        # A wording version against its own base untrained (no adapter): the baseline is the
        # candidate itself, whose baseline side is answered by its base (evaluation.replay).
        AGAINST_BASE = "against_base", "Checkpoint against its base untrained"

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    OPEN_STATES = (State.QUEUED, State.RUNNING)
    # Not stored: true on the evaluation a start returned in place of a second one of the same
    # versions on the same calls (evaluation.services.evaluation_start).
    joined = False

    world = models.ForeignKey("arena.World", on_delete=models.CASCADE, related_name="evaluations")
    call_set = models.ForeignKey(
        EvaluationCallSet, on_delete=models.CASCADE, related_name="evaluations"
    )
    candidate = models.ForeignKey(
        "policies.PolicyVersion", on_delete=models.PROTECT, related_name="evaluations_as_candidate"
    )
    baseline = models.ForeignKey(
        "policies.PolicyVersion", on_delete=models.PROTECT, related_name="evaluations_as_baseline"
    )
    purpose = models.CharField(max_length=12, choices=Purpose.choices, default=Purpose.EVALUATE)
    # Seeds the bootstrap (and nothing else: the calls and the scripted customers are fixed).
    seed = models.PositiveIntegerField(default=0)
    judge_model = models.CharField(max_length=200, blank=True)
    state = models.CharField(max_length=12, choices=State.choices, default=State.QUEUED)
    job = models.ForeignKey(
        "jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Plain values: win rate and its interval, mean rewards, radar, regressions (see services).
    summary = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["world", "state"])]

    def __str__(self) -> str:
        return f"evaluation {self.pk}: {self.candidate} vs {self.baseline_label}"

    @property
    def against_base(self) -> bool:
        """Whether the baseline is the candidate's own base untrained, not another version."""
        return self.purpose == self.Purpose.AGAINST_BASE

    @property
    def baseline_label(self) -> str:
        """Who answered on the baseline side: a version, or the candidate's untrained base."""
        if self.against_base:
            from policies.untrained_base import UntrainedBase

            return UntrainedBase(self.candidate).label
        return self.baseline.label

    @property
    def title(self) -> str:
        return f"{self.candidate.label} vs {self.baseline_label}"

    @property
    def win_rate(self) -> float | None:
        return self.summary.get("win_rate") if self.summary else None

    @property
    def verdict_decided(self) -> Verdict:
        """What it found (evaluation.verdicts.verdict_decide): on scripted customers whose
        versions the simulator could play, the simulator's; otherwise the judge's, and only
        from a judge measured above chance ("no_verdict" otherwise, with why)."""
        if self.state != self.State.DONE:
            return verdict_decide(None)
        return verdict_decide(self.summary)

    @property
    def verdict(self) -> str:
        """ "won", "lost", "even", "incomplete" or "no_verdict" once done; "" before."""
        return self.verdict_decided.outcome

    @property
    def judge_agreement(self) -> dict:
        """The judge's held-out agreement the summary keeps, figures on too few items None
        with why (evaluation.verdicts.judge_agreement_shown); {} before it is done."""
        return judge_agreement_shown((self.summary or {}).get("judge_agreement")) or {}


class EvaluationAnswer(models.Model):
    """One version's reply at one held-out moment in one evaluation, and the judge's total."""

    class Side(models.TextChoices):
        CANDIDATE = "candidate", "Candidate"
        BASELINE = "baseline", "Baseline"

    evaluation = models.ForeignKey(Evaluation, on_delete=models.CASCADE, related_name="answers")
    held_out_moment = models.ForeignKey(
        HeldOutMoment, on_delete=models.CASCADE, related_name="answers"
    )
    side = models.CharField(max_length=10, choices=Side.choices)
    reply = models.ForeignKey(
        "arena.Reply", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    judgement = models.ForeignKey(
        "arena.Judgement", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Copied from the judgement so the summary and the lens read one table.
    total = models.FloatField(null=True, blank=True)
    # Why there is no total: the version did not answer, or the judge gave no verdict.
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["evaluation", "held_out_moment", "side"]
        constraints = [
            models.UniqueConstraint(
                fields=["evaluation", "held_out_moment", "side"], name="answer_once_per_side"
            )
        ]

    def __str__(self) -> str:
        return f"{self.side} at {self.held_out_moment}"

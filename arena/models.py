"""Workspace-schema models of the arena: worlds, scenarios, real calls, moments, replies,
judgements.

A world (also called a pack) is where an agent is measured: its moves, the seven rubric
dimensions, its scenarios (simulated customers) and its real recorded calls.
"""

from __future__ import annotations

from django.db import models

from arena.judging import DIMENSIONS
from trainers.simulator import MOVES

DEFAULT_JUDGE = "rubric"


def default_moves() -> list[str]:
    return list(MOVES)


def default_dimensions() -> list[str]:
    return list(DIMENSIONS)


class World(models.Model):
    slug = models.SlugField(max_length=60, unique=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    moves = models.JSONField(default=default_moves)
    dimensions = models.JSONField(default=default_dimensions)
    # Environment → Judge. "rubric" is the deterministic default; model judges come later.
    judge_provider = models.CharField(max_length=40, default=DEFAULT_JUDGE)
    judge_model = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "world (pack)"
        verbose_name_plural = "worlds (packs)"

    def __str__(self) -> str:
        return self.name

    @property
    def judge_label(self) -> str:
        if self.judge_provider == DEFAULT_JUDGE:
            return "rubric judge"
        return f"{self.judge_provider}: {self.judge_model}"


class Scenario(models.Model):
    """A simulated customer: a persona the simulator plays on a fixed seed."""

    class Budget(models.TextChoices):
        WITHIN = "within", "Within budget"
        STRETCH = "stretch", "A stretch"

    class Urgency(models.TextChoices):
        HIGH = "high", "High"
        LOW = "low", "Low"

    class Objection(models.TextChoices):
        PRICE = "price", "Price"
        TIMING = "timing", "Timing"
        FAMILY = "family", "Family"
        NONE = "none", "None"

    class Dialect(models.TextChoices):
        FORMAL = "formal", "Formal"
        CASUAL = "casual", "Casual"

    world = models.ForeignKey(World, on_delete=models.CASCADE, related_name="scenarios")
    slug = models.SlugField(max_length=80)
    name = models.CharField(max_length=200)
    budget = models.CharField(max_length=10, choices=Budget.choices)
    family = models.BooleanField(default=False)
    urgency = models.CharField(max_length=10, choices=Urgency.choices)
    objection = models.CharField(max_length=10, choices=Objection.choices)
    dialect = models.CharField(max_length=10, choices=Dialect.choices)
    seed = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["world", "slug"]
        constraints = [
            models.UniqueConstraint(fields=["world", "slug"], name="scenario_unique_per_world")
        ]

    def __str__(self) -> str:
        return self.name

    def persona_dict(self) -> dict[str, object]:
        return {
            "budget": self.budget,
            "family": self.family,
            "urgency": self.urgency,
            "objection": self.objection,
            "dialect": self.dialect,
        }


class Call(models.Model):
    """A real recorded call and its real outcome."""

    class Outcome(models.TextChoices):
        WON = "won", "Won"
        LOST = "lost", "Lost"
        UNKNOWN = "unknown", "Unknown"

    world = models.ForeignKey(World, on_delete=models.CASCADE, related_name="calls")
    external_id = models.CharField(max_length=200)
    outcome = models.CharField(max_length=10, choices=Outcome.choices)
    source = models.CharField(max_length=300, blank=True, help_text="The file or API it came from.")
    turn_count = models.PositiveIntegerField(default=0)
    imported_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["world", "external_id"]
        constraints = [
            models.UniqueConstraint(fields=["world", "external_id"], name="call_unique_per_world")
        ]
        indexes = [models.Index(fields=["world", "outcome"])]

    def __str__(self) -> str:
        return self.external_id


class Turn(models.Model):
    class Speaker(models.TextChoices):
        AGENT = "agent", "Agent"
        CUSTOMER = "customer", "Customer"

    call = models.ForeignKey(Call, on_delete=models.CASCADE, related_name="turns")
    index = models.PositiveIntegerField()
    speaker = models.CharField(max_length=10, choices=Speaker.choices)
    text = models.TextField()
    move_label = models.CharField(max_length=40, blank=True)
    move_label_source = models.CharField(
        max_length=20, blank=True, help_text="classifier or reviewer"
    )

    class Meta:
        ordering = ["call", "index"]
        constraints = [models.UniqueConstraint(fields=["call", "index"], name="turn_unique_index")]

    def __str__(self) -> str:
        return f"{self.call_id}#{self.index} {self.speaker}"


class Moment(models.Model):
    """A point where the agent must speak: in a real call (the call so far) or simulated."""

    class Kind(models.TextChoices):
        REAL = "real", "Real call"
        SYNTHETIC = "synthetic", "Simulator"

    world = models.ForeignKey(World, on_delete=models.CASCADE, related_name="moments")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    call = models.ForeignKey(Call, null=True, blank=True, on_delete=models.CASCADE)
    # For a real moment: the index of the agent turn to answer; the context is turns before it.
    turn_index = models.PositiveIntegerField(null=True, blank=True)
    scenario = models.ForeignKey(Scenario, null=True, blank=True, on_delete=models.CASCADE)
    simulator_state = models.PositiveIntegerField(null=True, blank=True)
    # The dialogue so far for synthetic moments ([{"speaker", "text"}]); real ones read turns.
    context = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["world", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["call", "turn_index"],
                condition=models.Q(kind="real"),
                name="moment_unique_real_turn",
            )
        ]

    def __str__(self) -> str:
        if self.kind == self.Kind.REAL:
            return f"{self.call} at turn {self.turn_index}"
        return f"{self.scenario} at state {self.simulator_state}"

    def dialogue(self) -> list[dict[str, str]]:
        """The conversation before this moment, oldest first."""
        if self.kind == self.Kind.REAL:
            turns = self.call.turns.filter(index__lt=self.turn_index).order_by("index")
            return [{"speaker": turn.speaker, "text": turn.text} for turn in turns]
        return list(self.context)


class Reply(models.Model):
    class Source(models.TextChoices):
        POLICY = "policy", "Policy version"
        REAL_AGENT = "real_agent", "Real agent"
        SIMULATOR = "simulator", "Simulator"

    moment = models.ForeignKey(Moment, on_delete=models.CASCADE, related_name="replies")
    text = models.TextField()
    source = models.CharField(max_length=20, choices=Source.choices)
    policy_version = models.ForeignKey(
        "policies.PolicyVersion", null=True, blank=True, on_delete=models.SET_NULL
    )
    move = models.CharField(max_length=40, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["moment", "id"]
        verbose_name_plural = "replies"

    def __str__(self) -> str:
        return self.text[:60]


class Judgement(models.Model):
    reply = models.ForeignKey(Reply, on_delete=models.CASCADE, related_name="judgements")
    judge_model = models.CharField(max_length=200)
    scores = models.JSONField(default=dict)
    reasons = models.JSONField(default=dict, blank=True)
    total = models.FloatField(null=True, blank=True)
    # A model judge's unusable answer is recorded as an error, never as a score.
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["judge_model", "total"])]

    def __str__(self) -> str:
        return f"{self.judge_model}: {self.total}"

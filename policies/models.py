"""Workspace-schema models of the policy registry: numbered agent versions and their lineage,
and the endpoints that serve trained versions. (Where a model judge is reached, JudgeConnection,
is the arena's.)

Every version belongs to one world (arena.World, a "pack"): each world has its own
`v1 · baseline` (the hand-written start), its own numbering and lineage, its own live version
and its own canary. Train makes v2 and later in the world it trains in.
Keys are never stored here: a version records model names, addresses and, at most, the NAME
of the environment variable that holds a key on the dashboard pod.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from trainers.results import LEARNED_SCHEMA, RecordError, VersionRecord, learned_record


class PolicyVersion(models.Model):
    class Provider(models.TextChoices):
        SIMULATOR = "simulator", "Simulator (scripted)"
        VLLM = "vllm", "vLLM endpoint"
        OPENAI = "openai", "OpenAI"
        ANTHROPIC = "anthropic", "Anthropic"
        TRAINED = "trained", "Trained endpoint"

    class Status(models.TextChoices):
        ANSWERING = "answering", "Answering"
        # A trained version between "serve" and its endpoint answering: it answers nothing yet.
        STARTING = "starting", "Starting"
        RELEASED = "released", "Released"

    # The world it was made in and answers for: a strategy learned on one business's calls
    # means nothing on another's. Numbers count per world (Lettings v2 and Persuasion v2).
    world = models.ForeignKey(
        "arena.World", on_delete=models.PROTECT, related_name="policy_versions"
    )
    number = models.PositiveIntegerField()
    name = models.CharField(max_length=100)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    description = models.TextField(blank=True)
    provider = models.CharField(max_length=20, choices=Provider.choices, default=Provider.SIMULATOR)
    # Only names and addresses: keys stay in the environment of the pod. For a trained
    # version, provider_model is its weights folder on the models volume (relative to
    # settings.MODELS_DIR) and endpoint_url the address of its serving endpoint, if any.
    provider_model = models.CharField(max_length=200, blank=True)
    endpoint_url = models.URLField(blank=True)
    # vLLM: the LoRA adapter to ask for (vLLM serves it under this name). Trained: the
    # adapter folder on the models volume, served with --enable-lora on the base weights.
    lora_adapter = models.CharField(max_length=200, blank=True)
    # vLLM: the NAME of the environment variable holding the endpoint's key, never the key.
    api_key_env = models.CharField(max_length=64, blank=True)
    # "scripted" (the hand-written rules) or a learned table {"table": [...], "scenarios": ...}.
    move_strategy = models.JSONField(default=dict, blank=True)
    # What it learned from: algorithm, knobs, seed, preference version, reward source, ...
    # Read only through `learned`, its family's typed record (trainers.results), which
    # refuses a key it does not know.
    learned_from = models.JSONField(default=dict, blank=True)
    # Which record schema learned_from was written under (trainers.results.LEARNED_SCHEMA).
    learned_schema = models.PositiveSmallIntegerField(default=LEARNED_SCHEMA)
    # What is queried of the record, as columns (copied from it on every save that writes
    # it): the trainer that made it ("" for one nobody trained), and for wording the frozen
    # preference version and the base it learned on (the DPO benchmark of an RLHF version).
    algorithm = models.CharField(max_length=60, blank=True, db_index=True)
    preference_version = models.PositiveIntegerField(null=True, blank=True)
    base_model = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.ANSWERING)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["world_id", "number"]
        constraints = [
            models.UniqueConstraint(fields=["world", "number"], name="version_number_per_world")
        ]

    def __str__(self) -> str:
        return self.label

    # The columns copied from the record, so no writer (the finish, a promotion, the admin, a
    # test) can leave them saying something the record does not.
    LEARNED_COLUMNS = ("learned_schema", "algorithm", "preference_version", "base_model")

    def save(self, *args, **kwargs) -> None:
        update_fields = kwargs.get("update_fields")
        if update_fields is None or "learned_from" in update_fields:
            record = self.learned
            self.learned_schema = LEARNED_SCHEMA
            self.algorithm = record.algorithm
            self.preference_version = getattr(record, "preference_version", None)
            self.base_model = getattr(record, "base", None) or ""
            if update_fields is not None:
                kwargs["update_fields"] = {*update_fields, *self.LEARNED_COLUMNS}
        super().save(*args, **kwargs)

    def clean(self) -> None:
        try:
            self.learned  # noqa: B018 - loading it is the check
        except RecordError as error:
            raise ValidationError({"learned_from": str(error)}) from error

    @property
    def learned(self) -> VersionRecord:
        """What it learned from, as its trainer family's record (RecordError names a key no
        record has)."""
        return learned_record(self.learned_from or {}, schema=self.learned_schema)

    def learned_set(self, record: VersionRecord) -> None:
        """Writes `record` (saved with `learned_from` among the fields)."""
        self.learned_from = record.to_dict()

    @property
    def label(self) -> str:
        return f"v{self.number} · {self.name}"

    @property
    def world_label(self) -> str:
        """The label with its world, where several worlds' versions are listed together."""
        return f"{self.world.name} {self.label}"

    @property
    def can_answer(self) -> bool:
        """Released and starting versions answer nothing (a trained version answers only
        while its endpoint serves: see policies.endpoints)."""
        return self.status == self.Status.ANSWERING

    @property
    def is_trained(self) -> bool:
        return self.provider == self.Provider.TRAINED

    @property
    def did_not_learn(self) -> list[str]:
        """Why a trained version learned nothing (its reward model held out at chance, its
        policy did not move, no better than its base untrained); [] when it learned or was not
        trained. A wording version that beat its base untrained is not marked for what its
        trainer's own figures said (`own_figures_overruled`)."""
        return self.learned.marks

    @property
    def own_figures_overruled(self) -> list[str]:
        """Its trainer's own did-not-learn reasons, overruled by its win against its base."""
        return self.learned.overruled


class Endpoint(models.Model):
    """Where a trained version is served, and the cards it holds in a pool (public schema).

    One version has at most one starting-or-serving endpoint; released and failed ones stay
    as history. Release gives the cards back; the weights stay on the models volume.
    """

    class Kind(models.TextChoices):
        VLLM = "vllm", "vLLM on GPUs"
        VLLM_CPU = "vllm-cpu", "vLLM on the CPU"
        TRANSFORMERS = "transformers", "In-process transformers"

    class State(models.TextChoices):
        STARTING = "starting", "Starting"
        SERVING = "serving", "Serving"
        RELEASED = "released", "Released"
        FAILED = "failed", "Failed"

    LIVE_STATES = (State.STARTING, State.SERVING)

    version = models.ForeignKey(PolicyVersion, on_delete=models.PROTECT, related_name="endpoints")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    state = models.CharField(max_length=20, choices=State.choices, default=State.STARTING)
    # The pool lives in the public schema: kept by name, like a job's.
    pool_name = models.CharField(max_length=60)
    card_type = models.CharField(max_length=100)
    card_count = models.PositiveSmallIntegerField(default=1)
    # The CardAllocation (public schema) this endpoint holds; None once it serves on the CPU
    # pool, which it never holds (see policies.endpoints).
    card_allocation_id = models.PositiveIntegerField(null=True, blank=True)
    # The serve job that started it (training.Job, by id: policies does not import training).
    job_id = models.PositiveIntegerField(null=True, blank=True)
    # Where it answers: an OpenAI-compatible base URL (vLLM), blank in-process.
    url = models.CharField(max_length=300, blank=True)
    served_model = models.CharField(max_length=200, blank=True)
    # The server process, so release can stop it ("host" is the worker's host name).
    host = models.CharField(max_length=200, blank=True)
    pid = models.PositiveIntegerField(null=True, blank=True)
    command = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    request_count = models.PositiveIntegerField(default=0)
    error_count = models.PositiveIntegerField(default=0)
    latency_total_ms = models.FloatField(default=0.0)
    latency_last_ms = models.FloatField(null=True, blank=True)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    serving_since = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["version"],
                condition=models.Q(state__in=["starting", "serving"]),
                name="endpoint_one_live_per_version",
            )
        ]

    def __str__(self) -> str:
        return f"endpoint {self.pk} of {self.version}"

    @property
    def is_live(self) -> bool:
        return self.state in self.LIVE_STATES

    @property
    def mean_latency_ms(self) -> float | None:
        answered = self.request_count - self.error_count
        if answered <= 0:
            return None
        return self.latency_total_ms / answered

    @property
    def error_rate(self) -> float | None:
        if not self.request_count:
            return None
        return self.error_count / self.request_count


class LivePeriod(models.Model):
    """Which version was live when, in one world: the open period (ended_at null) is that
    world's live version."""

    # The version's world, kept on the row so the database keeps one open period per world.
    world = models.ForeignKey("arena.World", on_delete=models.PROTECT, related_name="+")
    version = models.ForeignKey(
        PolicyVersion, on_delete=models.PROTECT, related_name="live_periods"
    )
    started_at = models.DateTimeField(auto_now_add=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    # True for the world's one open period; a partial unique index keeps it one (NULLs would
    # not).
    current = models.BooleanField(default=True)
    made_live_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    note = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["world"],
                condition=models.Q(current=True),
                name="one_live_version_per_world",
            )
        ]

    def __str__(self) -> str:
        return f"{self.version.label} live from {self.started_at:%Y-%m-%d %H:%M}"


class Canary(models.Model):
    """A release: a share of live calls goes to a candidate while the live version takes the
    rest; the won rate each one caused decides promote or roll back. One world's live calls:
    candidate and live version are both of `world`."""

    class State(models.TextChoices):
        RUNNING = "running", "Running"
        PROMOTED = "promoted", "Promoted"
        ROLLED_BACK = "rolled_back", "Rolled back"

    world = models.ForeignKey("arena.World", on_delete=models.PROTECT, related_name="+")
    candidate = models.ForeignKey(PolicyVersion, on_delete=models.PROTECT, related_name="+")
    live = models.ForeignKey(PolicyVersion, on_delete=models.PROTECT, related_name="+")
    share = models.FloatField(help_text="Share of live calls sent to the candidate (0–1).")
    state = models.CharField(max_length=20, choices=State.choices, default=State.RUNNING)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    started_at = models.DateTimeField(auto_now_add=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["world"],
                condition=models.Q(state="running"),
                name="one_running_canary_per_world",
            )
        ]

    def __str__(self) -> str:
        return f"{self.candidate.label} on {self.share:.0%} of live calls"


class LiveCall(models.Model):
    """A call the agent took for real: which version answered it, and how it ended."""

    class Outcome(models.TextChoices):
        WON = "won", "Won"
        LOST = "lost", "Lost"
        UNKNOWN = "unknown", "Not known yet"

    external_id = models.CharField(max_length=200, unique=True)
    version = models.ForeignKey(PolicyVersion, on_delete=models.PROTECT, related_name="live_calls")
    canary = models.ForeignKey(
        Canary, null=True, blank=True, on_delete=models.SET_NULL, related_name="calls"
    )
    outcome = models.CharField(max_length=10, choices=Outcome.choices, default=Outcome.UNKNOWN)
    turns = models.JSONField(default=list, blank=True)
    received_at = models.DateTimeField(auto_now_add=True)
    outcome_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-received_at"]
        indexes = [models.Index(fields=["version", "outcome"])]

    def __str__(self) -> str:
        return self.external_id


class ReplyAuthor(models.Model):
    """The version that wrote a reply (a Duel candidate, an evaluation's answer). The arena's
    Reply sits below the registry and names no version: the registry keeps who wrote what,
    and the arena asks through its agent directory (arena.agents). A deleted version takes its
    authorship with it; the reply stays, written by "a deleted version"."""

    reply = models.OneToOneField(
        "arena.Reply", primary_key=True, on_delete=models.CASCADE, related_name="author"
    )
    version = models.ForeignKey(
        PolicyVersion, on_delete=models.CASCADE, related_name="replies_written"
    )
    # True where `version`'s base wrote it with the adapter left off (the against-base
    # checkpoint's baseline side): kept under the version whose base it is, never as its words.
    untrained_base = models.BooleanField(default=False)

    def __str__(self) -> str:
        if self.untrained_base:
            return f"reply {self.reply_id} by the untrained base of {self.version_id}"
        return f"reply {self.reply_id} by {self.version_id}"

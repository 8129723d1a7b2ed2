"""Workspace-schema models of the arena: worlds, scenarios, real calls, moments, replies,
judgements, and the Duel's pairs, picks, reviewer overrides and frozen preference versions.

A world (also called a pack) is where an agent is measured: its moves, its rubric's
dimensions (the seven by default), its scenarios (simulated customers) and its real
recorded calls.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.functional import cached_property

from arena.moves import generic_moves, move_names
from trainers.judge.rubric import DEFAULT_RUBRIC
from trainers.judge.standing import AT_CHANCE, report_standing

DEFAULT_JUDGE = "rubric"
# The agent's system prompt where a world sets none: the one prompt the conversation builder
# puts first, in training and in serving alike (arena.conversation).
DEFAULT_SYSTEM_PROMPT = (
    "You are the agent on a live sales call for {world}. Write only your next turn: one to "
    "three short sentences, in the customer's own register (casual or formal), courteous, "
    "honest, with no pressure and never asking for card or bank details. Move the call one "
    "step forward."
)


def default_moves() -> list[dict[str, str]]:
    """A world given no moves gets the generic set (arena.moves); lettings sets its eight."""
    return generic_moves()


def default_dimensions() -> list[dict[str, object]]:
    """A world's rubric until its owner names its own: the description's seven."""
    return [dimension.as_dict() for dimension in DEFAULT_RUBRIC]


class World(models.Model):
    slug = models.SlugField(max_length=60, unique=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    # What the agent is told before every call, in training and serving (blank: the default).
    system_prompt = models.TextField(
        blank=True,
        help_text="The agent's system prompt, used for training and serving alike. "
        "Blank: the default prompt naming the world.",
    )
    # [{"name", "description"}], 2 to 16 of them (arena.moves.moves_clean).
    moves = models.JSONField(
        default=default_moves,
        help_text="The moves the agent can make here, each a name and a one-line description.",
    )
    # The world's rubric, which is also its reason tags: [{"name", "label", "help", "weight"}],
    # 2 to 12 of them (arena.services.worlds.dimensions_clean); read it through
    # arena.judge.world_dimensions.world_dimensions.
    dimensions = models.JSONField(
        default=default_dimensions,
        help_text="The rubric's dimensions (the Duel's reasons): name, label, meaning, weight.",
    )
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
    def move_names(self) -> list[str]:
        """The keys replies, pairs and move labels carry, in the world's order."""
        return move_names(self.moves)

    @cached_property
    def has_simulator(self) -> bool:
        """Whether scripted customers play here (lettings); else only recorded calls do.
        Kept per instance: a batch of replies asks it once per reply."""
        return self.scenarios.exists()

    @property
    def agent_system_prompt(self) -> str:
        """The system prompt the agent's conversations open with (the one field used)."""
        return self.system_prompt.strip() or DEFAULT_SYSTEM_PROMPT.format(world=self.name)

    @property
    def judge_label(self) -> str:
        if self.judge_provider == DEFAULT_JUDGE:
            version = self.judge_versions.order_by("-number").first()
            if version is None:
                return "rubric judge"
            return version.label + (" — agrees no better than chance" if version.at_chance else "")
        return f"{self.judge_provider}: {self.judge_model}"


class JudgeConnection(models.Model):
    """How a world's vLLM judge is reached (Environment → Judge). The world itself names the
    provider and the model (World.judge_provider / judge_model); this holds the rest."""

    world = models.OneToOneField(World, on_delete=models.CASCADE, related_name="judge_connection")
    endpoint_url = models.URLField(blank=True)
    lora_adapter = models.CharField(max_length=200, blank=True)
    # The NAME of the environment variable holding the key, never the key.
    api_key_env = models.CharField(max_length=64, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        # Created by policies before the judge's wiring moved here; the table kept its name.
        db_table = "policies_judgeconnection"

    def __str__(self) -> str:
        return f"judge connection of {self.world}"


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
    # One of the calls Evaluate replays (arena.held_out): never paired, never learned from.
    held_out = models.BooleanField(default=False, db_index=True)
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
        IMPORTED = "imported", "Imported preference"

    world = models.ForeignKey(World, on_delete=models.CASCADE, related_name="moments")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    call = models.ForeignKey(Call, null=True, blank=True, on_delete=models.CASCADE)
    # For a real moment: the index of the agent turn to answer; the context is turns before it.
    turn_index = models.PositiveIntegerField(null=True, blank=True)
    scenario = models.ForeignKey(Scenario, null=True, blank=True, on_delete=models.CASCADE)
    simulator_state = models.PositiveIntegerField(null=True, blank=True)
    # The dialogue so far for synthetic moments ([{"speaker", "text"}]); real ones read turns.
    context = models.JSONField(default=list, blank=True)
    # For synthetic moments: a hash of scenario, state and dialogue, so generating more
    # pairs never makes the same simulated moment twice.
    digest = models.CharField(max_length=40, blank=True, db_index=True)
    # An imported pair Evaluate replays (arena.held_out): never learned from. On the moment,
    # not the pick: the moment is what the call set replays, and whatever else is said there
    # (another pick, an override of the judge) is held out with it.
    held_out = models.BooleanField(default=False, db_index=True)
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
        if self.kind == self.Kind.IMPORTED:
            return f"imported pair moment {self.pk}"
        return f"{self.scenario} at state {self.simulator_state}"

    def dialogue(self) -> list[dict[str, str]]:
        """The conversation before this moment, oldest first."""
        # Pair generation fills this for a whole batch from one query, so that a version
        # answering a real moment does not read the call's turns again (and again).
        cached = getattr(self, "_dialogue_cache", None)
        if cached is not None:
            return cached
        if self.kind == self.Kind.REAL:
            turns = self.call.turns.filter(index__lt=self.turn_index).order_by("index")
            return [{"speaker": turn.speaker, "text": turn.text} for turn in turns]
        return list(self.context)


def moments_dialogues_load(moments: Iterable[Moment]) -> None:
    """Fill each real moment's dialogue from one query, so nothing reads turns per moment
    (and threads answering the moments never touch the database for them). A judge fit
    reading 20,000 picks one moment at a time took 8.7 s of a freeze."""
    real = [moment for moment in moments if moment.kind == Moment.Kind.REAL]
    if not real:
        return
    turns_by_call: dict[int, list[tuple[int, str, str]]] = defaultdict(list)
    last = max(moment.turn_index for moment in real)
    for call_id, index, speaker, text in (
        Turn.objects.filter(call_id__in={moment.call_id for moment in real}, index__lt=last)
        .order_by("call_id", "index")
        .values_list("call_id", "index", "speaker", "text")
    ):
        turns_by_call[call_id].append((index, speaker, text))
    for moment in real:
        moment._dialogue_cache = [
            {"speaker": speaker, "text": text}
            for index, speaker, text in turns_by_call[moment.call_id]
            if index < moment.turn_index
        ]


class Reply(models.Model):
    """A reply at a moment. Which version wrote a policy reply is the registry's to keep
    (policies.ReplyAuthor): the arena, below it, asks through arena.agents."""

    class Source(models.TextChoices):
        POLICY = "policy", "Policy version"
        REAL_AGENT = "real_agent", "Real agent"
        SIMULATOR = "simulator", "Simulator"
        IMPORTED = "imported", "Imported preference data"

    moment = models.ForeignKey(Moment, on_delete=models.CASCADE, related_name="replies")
    text = models.TextField()
    source = models.CharField(max_length=20, choices=Source.choices)
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
    # True for a rescoring's result: the judge's verdict with reviewers' overrides applied.
    # The judge's own verdict stays beside it, so the next rescoring starts from the judge.
    overruled = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["judge_model", "total"])]

    def __str__(self) -> str:
        return f"{self.judge_model}: {self.total}"


# --- the Duel ------------------------------------------------------------------------------


class PreferenceVersion(models.Model):
    """A frozen, numbered set of one world's picks: a TSV and its manifest on the datasets
    volume. Each world numbers its own versions, and training in a world reads only its own.

    Version N of a world holds every pick of that world up to `last_pick_id`: the picks of
    version N-1 plus those it added. A watermark rather than a mark on every pick, so freezing
    a million picks writes one row here, not a million. Its files are written once at the
    freeze and never change; `sha256` lets every reader check that.

    A version frozen before versions belonged to a world has no world and `is_mixed` set: its
    picks come from every world (each row's `pack` says which). It stays readable, file and
    sha256 unchanged, and is never offered to training; each world got its own versions split
    from it (migration 0012).
    """

    world = models.ForeignKey(
        World,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="preference_versions",
    )
    is_mixed = models.BooleanField(
        default=False,
        help_text="Frozen before versions belonged to a world: it holds picks of several "
        "worlds. Kept readable, never trained on.",
    )
    number = models.PositiveIntegerField()
    extends = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="extended_by"
    )
    last_pick_id = models.PositiveBigIntegerField(default=0)
    row_count = models.PositiveIntegerField(default=0)
    picks_added = models.PositiveIntegerField(default=0)
    sha256 = models.CharField(max_length=64, blank=True)
    size_bytes = models.PositiveBigIntegerField(default=0)
    # Relative to settings.DATASETS_DIR: <schema>/preferences/<world slug>/v<N>.tsv (a mixed
    # version: <schema>/preferences/v<N>.tsv)
    file_path = models.CharField(max_length=300, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_by_name = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-number"]
        constraints = [
            models.UniqueConstraint(
                fields=["world", "number"], name="preference_version_numbered_per_world"
            ),
            models.UniqueConstraint(
                fields=["number"],
                condition=models.Q(world__isnull=True),
                name="mixed_preference_version_numbered_once",
            ),
        ]

    def __str__(self) -> str:
        return self.label

    @property
    def label(self) -> str:
        return f"preferences v{self.number}" + (" (mixed worlds)" if self.is_mixed else "")

    @property
    def download_url(self) -> str:
        """Where the API gives its files (`&part=` picks one): its world named, since each
        world numbers its own versions."""
        where = f"pack={self.world.slug}" if self.world_id else "mixed=true"
        return f"/api/rl/preferences/{self.number}/download/?{where}"

    @property
    def manifest_path(self) -> str:
        return self.file_path.removesuffix(".tsv") + ".manifest.json"


class DuelPair(models.Model):
    """One moment and two of its replies, shown as A and B.

    Which reply is A was drawn at random when the pair was made and is kept here, on the
    server, so a page or an integration cannot learn the sources before the pick.
    """

    world = models.ForeignKey(World, on_delete=models.CASCADE, related_name="duel_pairs")
    moment = models.ForeignKey(Moment, on_delete=models.CASCADE, related_name="duel_pairs")
    # Copied from the moment so the queue's scenario filter needs no join.
    scenario = models.ForeignKey(Scenario, null=True, blank=True, on_delete=models.CASCADE)
    # RESTRICT: a reply cannot go while a pair shows it, unless its whole moment goes.
    reply_a = models.ForeignKey(Reply, on_delete=models.RESTRICT, related_name="+")
    reply_b = models.ForeignKey(Reply, on_delete=models.RESTRICT, related_name="+")
    # The dialogue as shown (canonical JSON), fixed when the pair is made: a freeze streams
    # it straight into the TSV without reading a call's turns, and it never shifts under a
    # reviewer if a call is edited later.
    dialogue = models.TextField()
    judge_model = models.CharField(max_length=200)
    # The queue's key, weakest first: the mean of the two replies' judge totals.
    judge_total = models.FloatField()
    # The key of "most informative first": how far apart the pair's own judge put the two
    # replies' totals when it made the pair, |total A - total B| (null: a pair with no
    # judgements, as an imported one). Stored rather than computed from the two judgements at
    # serving time, so that order reads an index instead of sorting every open pair.
    judge_gap = models.FloatField(null=True, blank=True)
    move_a = models.CharField(max_length=40, blank=True)
    move_b = models.CharField(max_length=40, blank=True)
    # The agent's move just before this moment (a transition on the world's map).
    previous_move = models.CharField(max_length=40, blank=True)
    # Most pairs want one pick; some are asked of a second reviewer on purpose, to measure
    # how often reviewers agree.
    picks_wanted = models.PositiveSmallIntegerField(default=1)
    pick_count = models.PositiveIntegerField(default=0)
    # Kept by the services: pick_count < picks_wanted and not frozen. A column rather than
    # an expression so the queue's partial index stays small as picks pile up.
    is_open = models.BooleanField(default=True)
    reserved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reserved_until = models.DateTimeField(null=True, blank=True)
    # Set when a freeze took this pair's picks while it still wanted more: it takes no more.
    frozen_in = models.ForeignKey(
        PreferenceVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="pairs"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["judge_total", "id"]
        indexes = [
            models.Index(
                fields=["world", "judge_total", "id"],
                condition=models.Q(is_open=True),
                name="duelpair_queue",
            ),
            # Ascending puts nulls last, as the queue orders them (arena.services.queue).
            models.Index(
                fields=["world", "judge_gap", "judge_total", "id"],
                condition=models.Q(is_open=True),
                name="duelpair_queue_informative",
            ),
            models.Index(fields=["reserved_by", "reserved_until"], name="duelpair_reserved"),
            models.Index(fields=["world", "move_a"], name="duelpair_move_a"),
            models.Index(fields=["world", "move_b"], name="duelpair_move_b"),
            models.Index(fields=["world", "previous_move"], name="duelpair_previous_move"),
        ]

    def __str__(self) -> str:
        return f"pair {self.pk} at {self.moment}"


class Pick(models.Model):
    """A reviewer's verdict on a pair: at this moment `chosen_reply` was better (a
    preference), or the two were as good as each other (a tie), or neither would do (both
    bad). For a tie or both bad, chosen and rejected are A and B in the order shown."""

    class Side(models.TextChoices):
        A = "A", "A"
        B = "B", "B"

    class Kind(models.TextChoices):
        PREFERENCE = "preference", "Preference"
        TIE = "tie", "Tie"
        BOTH_BAD = "both_bad", "Both bad"

    pair = models.ForeignKey(DuelPair, on_delete=models.PROTECT, related_name="picks")
    world = models.ForeignKey(World, on_delete=models.PROTECT, related_name="picks")
    chosen_side = models.CharField(max_length=1, choices=Side.choices)
    chosen_reply = models.ForeignKey(Reply, on_delete=models.PROTECT, related_name="+")
    rejected_reply = models.ForeignKey(Reply, on_delete=models.PROTECT, related_name="+")
    # Where each reply came from, as the reviewer was shown it after the pick.
    chosen_source = models.CharField(max_length=120)
    rejected_source = models.CharField(max_length=120)
    reasons = models.JSONField(default=list, blank=True)
    kind = models.CharField(max_length=12, choices=Kind.choices, default=Kind.PREFERENCE)
    # The reviewer's own words on the pick, kept with it in frozen versions.
    note = models.TextField(blank=True)
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Imported preference data (arena.services.preferences): where it came from, and its id
    # there, so importing the same file again changes nothing. Blank for picks in the Duel.
    source = models.CharField(max_length=300, blank=True)
    external_id = models.CharField(max_length=200, blank=True)
    # Kept by name too: a frozen version must read the same after a user is removed.
    reviewer_name = models.CharField(max_length=200)
    # Frozen once a preference version's last_pick_id reaches this pick's id.
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(fields=["pair", "reviewer"], name="pick_once_per_reviewer"),
            models.UniqueConstraint(
                fields=["world", "external_id"],
                condition=~models.Q(external_id=""),
                name="pick_imported_once_per_world",
            ),
        ]
        indexes = [models.Index(fields=["reviewer", "pair"], name="pick_reviewer_pair")]

    def __str__(self) -> str:
        return f"pick {self.pk}: {self.chosen_side} on pair {self.pair_id}"


class PairSkip(models.Model):
    """A reviewer passed on a pair: the queue does not offer it to them again."""

    pair = models.ForeignKey(DuelPair, on_delete=models.CASCADE, related_name="skips")
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["pair", "reviewer"], name="skip_once_per_reviewer")
        ]


class JudgeOverride(models.Model):
    """A reviewer's verdict on some dimensions of a reply, against one judge model.

    Dimensions left out are ones the reviewer accepts. The next rescoring replaces the
    judge's score on the overruled dimensions.
    """

    reply = models.ForeignKey(Reply, on_delete=models.CASCADE, related_name="overrides")
    judge_model = models.CharField(max_length=200)
    # {dimension: 0..1} set by the reviewer, and the judge's scores they saw.
    scores = models.JSONField(default=dict)
    judge_scores = models.JSONField(default=dict)
    note = models.TextField(blank=True)
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewer_name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["reply", "reviewer", "judge_model"], name="override_once_per_reviewer"
            )
        ]
        indexes = [models.Index(fields=["judge_model", "reply"], name="override_judge_reply")]

    def __str__(self) -> str:
        return f"{self.reviewer_name} on reply {self.reply_id}"


class JudgeVersion(models.Model):
    """One fit of a world's judge (arena.judge): numbered per world, with what it learned from
    and its agreement on held-out data next to the rubric's. Judgements, evaluations and the
    lens record it by name ("fitted v3")."""

    world = models.ForeignKey(World, on_delete=models.CASCADE, related_name="judge_versions")
    number = models.PositiveIntegerField()
    # The job that fitted it (levers9.jobs, by id: the platform sits below the arena).
    job_id = models.PositiveIntegerField(null=True, blank=True)
    # The model's files on the datasets volume (plain arrays and a vocabulary, no pickles).
    model_dir = models.CharField(max_length=500)
    # Plain values: trained_on, held_out, pairs/dimensions/outcomes agreement (fitted, rubric).
    report = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["world", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["world", "number"], name="judge_version_per_world")
        ]

    def __str__(self) -> str:
        return f"{self.world} · {self.label}"

    @property
    def label(self) -> str:
        return f"fitted v{self.number}"

    @property
    def standing(self) -> dict:
        """How far its held-out agreement can be believed (trainers.judge.standing)."""
        return report_standing(self.report)

    @property
    def at_chance(self) -> bool:
        """True when no held-out measure with enough items beats chance (every interval of
        those includes 0.5); one measured on too few items is "too few", not at chance."""
        return self.standing["state"] == AT_CHANCE


class JobWorld(models.Model):
    """What an arena job is about, one row per job of the judge-fit, judge-measure and
    duel-pairs kinds: the platform's job (levers9.jobs) names no world, so the arena keeps its
    jobs' world here, with what each kind's work reads of its own (training.TrainingRun does
    the same for training). Shown in the job's `finish_needs` by the kinds' `about`."""

    job = models.OneToOneField(
        "jobs.Job", primary_key=True, on_delete=models.CASCADE, related_name="arena_world"
    )
    world = models.ForeignKey(World, on_delete=models.CASCADE, related_name="jobs_about")
    # A judge fit: the newest frozen pick and override it read (None: not a fit, or a fit
    # from before they were kept). Its end refits when the world has newer ones.
    read_up_to_pick = models.PositiveBigIntegerField(null=True, blank=True)
    read_up_to_override = models.PositiveBigIntegerField(null=True, blank=True)
    # A pairs job: how many pairs it makes (None: not a pairs job), from which scenario ("":
    # any) and by which of the world's version numbers ([]: chosen again when it runs).
    pairs_count = models.PositiveIntegerField(null=True, blank=True)
    # As asked (a page's or the API's text, unchecked until the job runs): of any length.
    pairs_scenario = models.TextField(blank=True)
    pairs_versions = models.JSONField(default=list, blank=True)

    def __str__(self) -> str:
        return f"job {self.job_id} in {self.world}"

    @property
    def read_up_to(self) -> dict[str, int] | None:
        if self.read_up_to_pick is None or self.read_up_to_override is None:
            return None
        return {"pick": self.read_up_to_pick, "override": self.read_up_to_override}

    @property
    def finish_needs_shown(self) -> dict[str, object]:
        """What the job's finish_needs held when the world and the rest were stored there, so
        the API shows the job as it did."""
        shown: dict[str, object] = {"world": self.world_id}
        if self.read_up_to is not None:
            shown["read_up_to"] = self.read_up_to
        if self.pairs_count is not None:
            shown.update(
                count=self.pairs_count,
                scenario=self.pairs_scenario,
                versions=list(self.pairs_versions),
            )
        return shown

"""What each trainer family's result keeps, as typed records: a version's `learned_from` and a
judge fit's report are read through these and nowhere else by key.

    record = learned_record({"algorithm": "dpo", "preference_version": 3})  # -> DpoResult
    record.preference_version                     # 3; a misspelt attribute fails to type-check
    learned_record({"algoritm": "dpo"})           # RecordError: unknown key 'algoritm' (did
                                                  # you mean 'algorithm'?)
    record.to_dict()                              # exactly the keys it was loaded with

The stored dicts predate these records and were written by several generations of the
finish: most keys are optional (absent on older rows and on versions made by hand), so a
record rejects what it does not know rather than demanding what old rows never had. A record
loaded from a dict writes back exactly the keys it was loaded with (`written`), so reading and
saving a version never changes its stored JSON, nor what the API shows of it.

Pure Python, the lowest layer: never Django.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from trainers.registry import DPO, RLHF, Family, trainer_family

# Bumped when a record's keys change meaning: a row written under another schema is refused
# at load, naming both, instead of being read as if it were this one.
LEARNED_SCHEMA = 1


class RecordError(ValueError):
    """A stored result that is not one of the records: an unknown (misspelt) key, a missing
    one, an algorithm no family owns, or another schema."""


@dataclass(frozen=True, kw_only=True)
class Record:
    """The loading and writing every record shares."""

    # Keys a stored dict must hold (most are optional: see the module's docstring).
    REQUIRED: ClassVar[tuple[str, ...]] = ()
    # Which keys the stored dict held: written back as they were. None: made in code, every
    # field is written.
    written: frozenset[str] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(each.name for each in dataclasses.fields(cls) if each.name != "written")

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Self:
        if not isinstance(raw, Mapping):
            raise RecordError(f"{cls.__name__}: expected a mapping, got {type(raw).__name__}")
        known = cls.keys()
        for key in raw:
            if key not in known:
                near = difflib.get_close_matches(str(key), known, n=1)
                hint = f" (did you mean '{near[0]}'?)" if near else ""
                raise RecordError(
                    f"{cls.__name__}: unknown key '{key}'{hint}; known keys: {', '.join(known)}"
                )
        for key in cls.REQUIRED:
            if key not in raw:
                raise RecordError(f"{cls.__name__}: missing key '{key}'")
        return cls(**dict(raw), written=frozenset(raw))

    def to_dict(self) -> dict[str, Any]:
        return {
            key: getattr(self, key)
            for key in self.keys()
            if self.written is None or key in self.written
        }

    def holds(self, key: str) -> bool:
        """Whether the stored dict held `key` (a record made in code holds every key)."""
        return self.written is None or key in self.written

    def with_changes(self, **changes: Any) -> Self:
        """The record with `changes`, which are written from now on even where the stored
        dict did not hold them (a promoted run's mark)."""
        written = None if self.written is None else self.written | frozenset(changes)
        return dataclasses.replace(self, **changes, written=written)


# --- a version's learned_from, by family --------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class VersionRecord(Record):
    """What every version's record may say: who made it and whether it learned."""

    kind: str = ""
    job: int | None = None
    algorithm: str = ""
    pack: str | None = None
    seed: int | None = None
    # Why a trained version learned nothing, as its trainer measured ([] when it learned).
    did_not_learn: list[str] = field(default_factory=list)

    @property
    def is_hand_written(self) -> bool:
        return self.kind == "hand-written"

    @property
    def marks(self) -> list[str]:
        """The did-not-learn reasons that stand (a wording version's win against its base
        overrules its trainer's own)."""
        return [str(reason) for reason in self.did_not_learn or []]

    @property
    def overruled(self) -> list[str]:
        """Reasons its trainer's own figures gave that a stronger measure overrules."""
        return []


@dataclass(frozen=True, kw_only=True)
class NotTrained(VersionRecord):
    """A version nobody trained: the hand-written start, one made by hand or by a test."""


@dataclass(frozen=True, kw_only=True)
class _PromotedMoves(VersionRecord):
    REQUIRED: ClassVar[tuple[str, ...]] = ("algorithm",)
    # An Engines run promoted by hand: how it stood against its parent (None: not measured).
    against_parent: dict[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class MoveStrategyResult(_PromotedMoves):
    """A move table learned on the simulator (Q-learning, PPO, a move reward model planned)."""

    knobs: dict[str, Any] = field(default_factory=dict)
    max_turns: int | None = None
    scenarios: list[str | None] = field(default_factory=list)
    # Per scenario: slug, optimal/learned/parent return, fraction of and gap to the optimum.
    returns: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def mean_fraction_of_optimum(self) -> float | None:
        share = (self.summary or {}).get("mean_fraction_of_optimum")
        return share if isinstance(share, int | float) else None


@dataclass(frozen=True, kw_only=True)
class OfflineMovesResult(_PromotedMoves):
    """A move strategy learned off-line from labelled real calls, measured on held-out ones."""

    learner: str | None = None
    trained_on: dict[str, Any] = field(default_factory=dict)
    smoothing: float | None = None
    held_out_calls: int = 0
    # {"low", "high", "confidence"} of the won-share difference, None without one.
    interval: dict[str, Any] | None = None
    difference: float | None = None
    trust: str | None = None
    offline_comparison: dict[str, Any] = field(default_factory=dict)

    @property
    def trained_calls(self) -> int | None:
        return (self.trained_on or {}).get("calls")


@dataclass(frozen=True, kw_only=True)
class WordingResult(VersionRecord):
    """A wording adapter on a base (trainers.wording.spec.version_record, plus the finish's
    own keys): the same keys for RLHF and DPO."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("algorithm",)
    method: str | None = None
    preference_version: int | None = None
    base: str | None = None
    reward_source: str | None = None
    # {"total", "train", "held_out"} (an int on the oldest rows).
    pairs: dict[str, Any] | int | None = None
    held_out_accuracy: float | None = None
    held_out_auc: float | None = None
    merged_weights: str | None = None
    reward_adapter: str | None = None
    gpu: dict[str, Any] | None = None
    epochs: float | None = None
    outcome_examples: dict[str, int] | None = None
    # Scalars and their bootstrap intervals (`x_ci`): the curves stay in the job's result.
    metrics: dict[str, Any] = field(default_factory=dict)
    # The version against its own base untrained (no adapter), scored by the world's judge on
    # the held-out calls (evaluation.against_base writes it once that checkpoint is done):
    # {"evaluation", "win_rate", "interval", "calls", "moments", "judge", "verdict", ...}.
    # Added without a schema bump: absent on older rows, it means "not measured yet".
    against_base: dict[str, Any] | None = None

    @property
    def pairs_total(self) -> int | None:
        pairs = self.pairs.get("total") if isinstance(self.pairs, dict) else self.pairs
        return pairs if isinstance(pairs, int) and not isinstance(pairs, bool) else None

    @property
    def beats_its_base(self) -> bool:
        return bool((self.against_base or {}).get("beats_base"))

    @property
    def marks(self) -> list[str]:
        """Once the version beat its base untrained, by the world's judge on held-out data
        neither trainer read, its trainer's own figures no longer mark it: they are read on
        its own few held-out rows (DPO's log-probabilities, RLHF's own reward model), and
        the independent measure is the one a policy cannot talk itself into. The measure's
        own reasons (capped by the guard more often than its base) still stand."""
        reasons = super().marks
        if not self.beats_its_base:
            return reasons
        measured = {str(reason) for reason in (self.against_base or {}).get("reasons") or []}
        return [reason for reason in reasons if reason in measured]

    @property
    def overruled(self) -> list[str]:
        standing = set(self.marks)
        return [reason for reason in super().marks if reason not in standing]


@dataclass(frozen=True, kw_only=True)
class DpoResult(WordingResult):
    """DPO, the benchmark RLHF must beat: no reward model of its own."""


@dataclass(frozen=True, kw_only=True)
class RlhfResult(WordingResult):
    """RLHF: the reward model's held-out figures beside the policy's."""

    reward_model: dict[str, Any] | None = None


_BY_FAMILY: dict[Family, type[VersionRecord]] = {
    Family.MOVE_STRATEGY: MoveStrategyResult,
    Family.MOVE_REWARD: MoveStrategyResult,
    Family.OFFLINE_MOVES: OfflineMovesResult,
}


def version_record_class(algorithm: str) -> type[VersionRecord]:
    """The record of a version made by `algorithm` ("" for one nobody trained)."""
    if not algorithm:
        return NotTrained
    if algorithm == RLHF:
        return RlhfResult
    if algorithm == DPO:
        return DpoResult
    family = trainer_family(algorithm)
    if family in _BY_FAMILY:
        return _BY_FAMILY[family]
    raise RecordError(f"no trainer family makes versions with algorithm '{algorithm}'")


def learned_record(raw: Mapping[str, Any], *, schema: int = LEARNED_SCHEMA) -> VersionRecord:
    """A version's learned_from as its family's record; RecordError names what is wrong."""
    if schema != LEARNED_SCHEMA:
        raise RecordError(f"written under schema {schema}; this code reads {LEARNED_SCHEMA}")
    if not isinstance(raw, Mapping):
        raise RecordError(f"learned_from: expected a mapping, got {type(raw).__name__}")
    algorithm = raw.get("algorithm") or ""
    if not isinstance(algorithm, str):
        raise RecordError(f"learned_from: algorithm {algorithm!r} is not a name")
    return version_record_class(algorithm).from_dict(raw)


# --- a judge fit's report -----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class JudgeFitResult(Record):
    """What a judge fit returns (trainers.judge.fit.run): how much it read, what it measured on
    held-out rows, and where it wrote the model."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("trained_on",)
    held_out: dict[str, int] = field(default_factory=dict)
    # Agreement on held-out pairs ("fitted", "rubric", and with a base "words", "base").
    pairs: dict[str, Any] | None = None
    # Per reason ticked: the fitted judge's and the rubric's agreement.
    dimensions: dict[str, Any] | None = None
    # Agreement with real outcomes, where the world has labelled calls.
    outcomes: dict[str, Any] | None = None
    trained_on: dict[str, Any] = field(default_factory=dict)
    scorer: dict[str, Any] = field(default_factory=dict)
    fit_seconds: float | None = None
    model_dir: str | None = None

    def report(self) -> dict[str, Any]:
        """What a judge version keeps: everything but where the model was written."""
        return {key: value for key, value in self.to_dict().items() if key != "model_dir"}

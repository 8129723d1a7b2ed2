"""The catalogue of trainers: every trainer's name, and what the rest of the project says of it.

    PPO == "ppo"                                   code names a trainer by its constant
    TRAINERS[PPO] -> TrainerEntry(name, module, family, label, job_kinds, ...)
    trainer_module(PPO) -> "trainers.moves.ppo"    what `python -m` runs for the name
    trainers_of(Family.WORDING) -> (RLHF, DPO)     the names of some families, in order
    trainer_family(name) -> Family | None          None for a name that is not here
    trainer_label(name) -> "PPO"                   how people read it; the name where it has none

The one place these names are spelt (tests/trainers/test_trainer_catalogue.py fails on a
trainer's name written as a string anywhere else): the apps register the trainers of their
families with the job platform (training: the move and wording learners; arena: the judge's
fit; policies: the local server), a finished Train card turns its result into a version by the
trainer's family, the Engines page (``trainers.moves.engines``) runs the learners named here,
the Policies page, the Train cards and the estimates say them in the words kept here. Work that
needs the database runs as a function in the worker instead (an evaluation, measuring a judge);
the app that owns such a function registers it itself, so it is not listed here.

Pure Python, the lowest layer: imports no trainer (naming a module does not load it) and
never Django.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

# --- the names -------------------------------------------------------------------------------
# What a job row (`Job.trainer`), a spec's "algorithm" and a version's learned_from keep: stored
# values, so a name never changes.

Q_LEARNING_ONLINE = "q-learning-online"
PPO = "ppo"
REWARD_MODEL = "reward-model"
OFFLINE_OUTCOME = "offline-outcome"
RLHF = "rlhf"
DPO = "dpo"
JUDGE_FIT = "judge-fit"
SERVE = "serve"

# --- the job kinds they run under --------------------------------------------------------------
# Registered by the apps (levers9.jobs.kinds); the judge's fit and the server name their kind
# after their trainer.

TRAIN_KIND = "train"
ENGINES_KIND = "engines"
JUDGE_FIT_KIND = JUDGE_FIT
SERVE_KIND = SERVE


class Family(StrEnum):
    """What a trainer's result is, which decides what finishing its job makes of it."""

    MOVE_STRATEGY = "move-strategy"
    """A table move strategy learned on the simulator (a Train card's new version)."""
    MOVE_REWARD = "move-reward"
    """A readable reward over move sequences (an Engines measurement, promoted by hand)."""
    OFFLINE_MOVES = "offline-moves"
    """A move strategy learned off-line from labelled real calls."""
    WORDING = "wording"
    """A wording adapter on a base model (RLHF, or DPO as its benchmark)."""
    JUDGE = "judge"
    """A world's fitted judge."""
    SERVING = "serving"
    """A version's own endpoint, served in-process."""


class Estimate(StrEnum):
    """What a job's expected time is read from before it starts (training.estimates); this
    workspace's past runs of the trainer on the pool come first in every case."""

    TIME_BUDGET = "time-budget"
    """Else its `time_budget_s` knob (the default where the spec leaves it) and its loading."""
    CPU_STAGES = "cpu-stages"
    """Else, on a CPU, its `budget_stages` stages at the wording stage budget."""
    PAST_RUNS = "past-runs"
    """Past runs alone: not known before one has finished."""


@dataclass(frozen=True)
class TrainerEntry:
    name: str
    """The trainer's name on a job (`Job.trainer`) and in a spec's "algorithm"."""
    module: str
    """What a worker runs: `python -m <module> --spec spec.json --out out.json`."""
    family: Family
    job_kinds: tuple[str, ...]
    """The job kinds that run it: a Train card, an Engines run, its own kind."""
    makes_version: bool
    """Whether its Train card's job ends in a policy version (an Engines run is promoted by
    hand, whatever it learned)."""
    estimate: Estimate
    budget_stages: int = 0
    """The stages it runs to the CPU stage budget (Estimate.CPU_STAGES)."""
    label: str = ""
    """Its short name for people: the Policies page, the estimates, the spec's refusals."""
    card_label: str = ""
    """Its Train card's title."""
    engines_label: str = ""
    """Its route on the Engines page."""

    @property
    def room(self) -> str:
        """The room of trainers/ it lives in: moves, wording, judge or serving."""
        return self.module.split(".")[1]


def _on_engines(
    name: str,
    module: str,
    family: Family,
    *,
    engines_label: str,
    label: str = "",
    on_train_card: bool = False,
    makes_version: bool = True,
    estimate: Estimate = Estimate.TIME_BUDGET,
) -> TrainerEntry:
    """A move learner: the Engines page runs it, and some a Train card too."""
    return TrainerEntry(
        name,
        module,
        family,
        job_kinds=(TRAIN_KIND, ENGINES_KIND) if on_train_card else (ENGINES_KIND,),
        makes_version=makes_version,
        estimate=estimate,
        label=label,
        engines_label=engines_label,
    )


def _wording(
    name: str, module: str, *, budget_stages: int, label: str, card_label: str
) -> TrainerEntry:
    """A wording trainer: its own Train card, a version at the end, timed by its CPU stages."""
    return TrainerEntry(
        name,
        module,
        Family.WORDING,
        job_kinds=(TRAIN_KIND,),
        makes_version=True,
        estimate=Estimate.CPU_STAGES,
        budget_stages=budget_stages,
        label=label,
        card_label=card_label,
    )


def _own_kind(name: str, module: str, family: Family, kind: str) -> TrainerEntry:
    """A trainer with a job kind of its own: it makes no version, and only its past runs time it."""
    return TrainerEntry(
        name, module, family, job_kinds=(kind,), makes_version=False, estimate=Estimate.PAST_RUNS
    )


TRAINERS: dict[str, TrainerEntry] = {
    trainer.name: trainer
    for trainer in (
        _on_engines(
            Q_LEARNING_ONLINE,
            "trainers.moves.q_learning",
            Family.MOVE_STRATEGY,
            engines_label="Q-learning (online)",
            label="Q-learning",
            on_train_card=True,
        ),
        _on_engines(
            PPO,
            "trainers.moves.ppo",
            Family.MOVE_STRATEGY,
            engines_label="PPO over moves",
            label="PPO",
        ),
        _on_engines(
            REWARD_MODEL,
            "trainers.moves.reward_model",
            Family.MOVE_REWARD,
            engines_label="Reward model over moves",
            makes_version=False,
        ),
        _on_engines(
            OFFLINE_OUTCOME,
            "trainers.moves.offline_outcome",
            Family.OFFLINE_MOVES,
            engines_label="Off-line on real calls",
            label="Off-line learning",
            on_train_card=True,
            estimate=Estimate.PAST_RUNS,
        ),
        # RLHF's two stages: a reward model, then the policy.
        _wording(
            RLHF,
            "trainers.wording.rlhf",
            budget_stages=2,
            label="RLHF",
            card_label="Wording · RLHF",
        ),
        _wording(
            DPO, "trainers.wording.dpo", budget_stages=1, label="DPO", card_label="Benchmark · DPO"
        ),
        _own_kind(JUDGE_FIT, "trainers.judge.fit", Family.JUDGE, JUDGE_FIT_KIND),
        _own_kind(SERVE, "trainers.serving.local", Family.SERVING, SERVE_KIND),
    )
}


def trainer_module(name: str) -> str:
    """The module the named trainer runs; KeyError names the known trainers."""
    if name not in TRAINERS:
        raise KeyError(f"no trainer {name!r}; known trainers: {', '.join(TRAINERS)}")
    return TRAINERS[name].module


def trainers_of(*families: Family) -> tuple[str, ...]:
    """The names of the trainers of the given families, in the order of TRAINERS."""
    return tuple(name for name, trainer in TRAINERS.items() if trainer.family in families)


def trainer_family(name: str) -> Family | None:
    trainer = TRAINERS.get(name)
    return trainer.family if trainer is not None else None


def trainer_label(name: str) -> str:
    """The trainer's short name for people; the name itself for a trainer with no label (the
    move reward model, as the Policies page has always said it) or a name not here."""
    trainer = TRAINERS.get(name)
    return trainer.label if trainer is not None and trainer.label else name

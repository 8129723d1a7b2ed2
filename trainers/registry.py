"""The trainers a job can run, by name: the module each one is and the family of work it does.

    TRAINERS["ppo"] -> TrainerModule(name="ppo", module="trainers.moves.ppo", family=...)
    trainer_module("ppo") -> "trainers.moves.ppo"     what `python -m` runs for the name
    trainers_of(Family.WORDING) -> ("rlhf", "dpo")      the names of some families, in order
    trainer_family(name) -> Family | None               None for a name that is not here

The one list of these names: the apps register the trainers of their families with the job
platform (training: the move and wording learners; arena: the judge's fit; policies: the local
server), a finished Train card turns its result into a version by the trainer's family, and
the Engines page (``trainers.moves.engines``) runs the learners named here. Work that needs
the database runs as a function in the worker instead (an evaluation, measuring a judge); the
app that owns such a function registers it itself, so it is not listed here.

Pure Python, the lowest layer: imports no trainer (naming a module does not load it) and
never Django.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


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


@dataclass(frozen=True)
class TrainerModule:
    name: str
    """The trainer's name on a job (`Job.trainer`) and in a spec's "algorithm"."""
    module: str
    """What a worker runs: `python -m <module> --spec spec.json --out out.json`."""
    family: Family


TRAINERS: dict[str, TrainerModule] = {
    trainer.name: trainer
    for trainer in (
        TrainerModule("q-learning-online", "trainers.moves.q_learning", Family.MOVE_STRATEGY),
        TrainerModule("ppo", "trainers.moves.ppo", Family.MOVE_STRATEGY),
        TrainerModule("reward-model", "trainers.moves.reward_model", Family.MOVE_REWARD),
        TrainerModule("offline-outcome", "trainers.moves.offline_outcome", Family.OFFLINE_MOVES),
        TrainerModule("rlhf", "trainers.wording.rlhf", Family.WORDING),
        TrainerModule("dpo", "trainers.wording.dpo", Family.WORDING),
        TrainerModule("judge-fit", "trainers.judge.fit", Family.JUDGE),
        TrainerModule("serve", "trainers.serving.local", Family.SERVING),
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

"""One catalogue of trainers (trainers/registry.py): each trainer's name is spelt there alone,
and what the rest of the project says of a trainer is read from it."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path
from typing import get_args

from trainers.moves.engines import ALGORITHMS
from trainers.registry import (
    DPO,
    ENGINES_KIND,
    OFFLINE_OUTCOME,
    REWARD_MODEL,
    RLHF,
    SERVE,
    TRAIN_KIND,
    TRAINERS,
    Estimate,
    Family,
    trainer_label,
    trainers_of,
)
from trainers.wording import spec as wording_spec

ROOT = Path(__file__).resolve().parents[2]
CATALOGUE = "trainers/registry.py"
# Tests spell names on purpose (what a job row holds); migrations keep the values they wrote.
NOT_SCANNED = {"tests", "migrations", "var", "node_modules", "staticfiles", "__pycache__"}

# Strings equal to a trainer's name that do not name the trainer, exactly this many a file.
NOT_THE_TRAINER = {
    ("policies/admin.py", SERVE): 2,  # the admin action "serve" (its method's name)
    ("policies/urls.py", SERVE): 1,  # the API's .../serve action
    ("training/wording.py", SERVE): 1,  # finish_needs["serve"]: serve the version it makes
}


def _literal_subscripts(tree: ast.AST) -> set[int]:
    """The ids of the nodes inside `Literal[...]`: a type can spell a name only as a string."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            name = node.value
            if (isinstance(name, ast.Name) and name.id == "Literal") or (
                isinstance(name, ast.Attribute) and name.attr == "Literal"
            ):
                inside.update(id(child) for child in ast.walk(node.slice))
    return inside


def trainer_names_spelt(source: str) -> list[tuple[int, str]]:
    """(line, name) for each string literal in `source` equal to a trainer's name."""
    tree = ast.parse(source)
    typed = _literal_subscripts(tree)
    return sorted(
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value in TRAINERS
        and id(node) not in typed
    )


def _project_files() -> list[Path]:
    files = []
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT).parts
        if any(part.startswith(".") or part in NOT_SCANNED for part in parts[:-1]):
            continue
        files.append(path)
    return sorted(files)


def test_it_spells_each_trainer_name_in_the_catalogue_alone():
    sites: dict[tuple[str, str], list[int]] = defaultdict(list)
    for path in _project_files():
        relative = path.relative_to(ROOT).as_posix()
        if relative == CATALOGUE:
            continue
        for line, name in trainer_names_spelt(path.read_text()):
            sites[relative, name].append(line)
    assert len(sites) >= len(NOT_THE_TRAINER)  # the scan reached the project's files
    spelt = sorted(
        (relative, line, name)
        for (relative, name), lines in sites.items()
        if len(lines) != NOT_THE_TRAINER.get((relative, name), 0)
        for line in lines
    )
    assert not spelt, "\n".join(
        f"{relative}:{line}: {name!r} (name it by trainers.registry's constant)"
        for relative, line, name in spelt
    )


def test_the_scan_finds_a_name_spelt_outside_a_type():
    source = (
        "from typing import Literal\n"
        'ALGORITHM = "ppo"\n'
        'Trainer = Literal["rlhf", "dpo"]\n'
        'if trainer == "dpo" and part != "reward_model":\n'
        "    pass\n"
    )
    assert trainer_names_spelt(source) == [(2, "ppo"), (4, "dpo")]


def test_the_wording_type_spells_the_wording_trainers():
    assert get_args(wording_spec.Trainer) == trainers_of(Family.WORDING)
    assert set(wording_spec.MIN_PAIRS) == set(trainers_of(Family.WORDING))


def test_each_trainer_says_its_room_kinds_and_estimate():
    for name, trainer in TRAINERS.items():
        assert trainer.module.startswith(f"trainers.{trainer.room}."), name
        assert trainer.job_kinds, name
        assert (trainer.estimate is Estimate.CPU_STAGES) == (trainer.budget_stages > 0), name
    assert TRAINERS[RLHF].budget_stages == 2
    assert TRAINERS[DPO].budget_stages == 1
    # The move learners' estimate reads their time-budget knob: the Engines list has one.
    assert {n for n, t in TRAINERS.items() if t.estimate is Estimate.TIME_BUDGET} == set(ALGORITHMS)
    # Engines runs its move learners and the off-line learner (training.engines).
    engines = {name for name, trainer in TRAINERS.items() if ENGINES_KIND in trainer.job_kinds}
    assert engines == {*ALGORITHMS, OFFLINE_OUTCOME}


def test_a_train_card_trainer_makes_a_version():
    for name, trainer in TRAINERS.items():
        if TRAIN_KIND in trainer.job_kinds:
            assert trainer.makes_version, name
    assert not TRAINERS[REWARD_MODEL].makes_version
    assert not TRAINERS[SERVE].makes_version


def test_it_says_each_trainer_as_the_pages_did():
    assert [trainer_label(name) for name in TRAINERS] == [
        "Q-learning",
        "PPO",
        "reward-model",
        "Off-line learning",
        "RLHF",
        "DPO",
        "judge-fit",
        "serve",
    ]
    assert trainer_label("sarsa") == "sarsa"
    assert [TRAINERS[name].card_label for name in trainers_of(Family.WORDING)] == [
        "Wording · RLHF",
        "Benchmark · DPO",
    ]
    assert [engine.label for engine in ALGORITHMS.values()] == [
        "Q-learning (online)",
        "Reward model over moves",
        "PPO over moves",
    ]

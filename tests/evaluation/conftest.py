"""Fixtures of the evaluation tests: the lettings world with v1 and a pushier v2, and a world
of the shared real calls."""

from __future__ import annotations

import pytest

from levers9.shipped_data import PERSUASION_CALLS
from tests.e2e.workspaces import committed_db  # noqa: F401 - a fixture


def pushy_strategy() -> dict:
    """A move table that offers a slot at every turn: worse than the baseline's checklist
    wherever the checklist does anything else."""
    from trainers.moves.simulator import DEFAULT_MAX_TURNS, n_states_for

    return {"kind": "table", "default": ["offer_slot"] * n_states_for(DEFAULT_MAX_TURNS)}


@pytest.fixture
def datasets(tmp_path, settings):
    settings.DATASETS_DIR = tmp_path / "datasets"
    return settings.DATASETS_DIR


@pytest.fixture
def lettings(in_workspace, datasets):
    from arena.models import World

    return World.objects.get(slug="lettings")


@pytest.fixture
def baseline(in_workspace):
    from policies.models import PolicyVersion

    return PolicyVersion.objects.get(world__slug="lettings", number=1)


@pytest.fixture
def pushy(baseline):
    from arena.models import World
    from policies.services import version_register

    return version_register(
        world=World.objects.get(slug="lettings"),
        name="pushy",
        parent=baseline,
        move_strategy=pushy_strategy(),
        learned_from={"pack": "lettings", "kind": "test"},
    )


def pushy_in(world):
    """`world`'s v1 · baseline and a pushy version made in that world: each world evaluates
    its own versions."""
    from policies.models import PolicyVersion
    from policies.services import version_register

    baseline = PolicyVersion.objects.get(world=world, number=1)
    pushy = version_register(
        world=world,
        name="pushy",
        parent=baseline,
        move_strategy=pushy_strategy(),
        learned_from={"pack": world.slug, "kind": "test"},
    )
    return pushy, baseline


@pytest.fixture
def real_world(in_workspace, datasets):
    from arena.services.calls import calls_import
    from arena.services.worlds import world_create

    world = world_create(slug="persuasion", name="Persuasion for good")
    calls_import(world=world, text=PERSUASION_CALLS.read_text(), source=str(PERSUASION_CALLS))
    return world


@pytest.fixture
def evaluate(django_capture_on_commit_callbacks):
    """Start an evaluation (its job stays queued: no worker here) and run it in this test."""
    from evaluation.replay import evaluation_run
    from evaluation.services import evaluation_start

    def run(world, candidate, baseline, *, seed: int = 0, progress=None):
        with django_capture_on_commit_callbacks(execute=False):
            evaluation = evaluation_start(
                world=world, candidate=candidate, baseline=baseline, seed=seed
            )
        evaluation_run(evaluation=evaluation, progress=progress)
        evaluation.refresh_from_db()
        return evaluation

    return run

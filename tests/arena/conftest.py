"""Fixtures of the arena tests."""

from __future__ import annotations

import pytest

from tests.conftest import make_user

# Committed rows in a throwaway workspace, for tests that run work in other threads.
from tests.e2e.workspaces import committed_db  # noqa: F401 - a fixture


@pytest.fixture
def lettings(in_workspace):
    """The seeded Lettings world with ten Duel pairs waiting for review, inside acme's schema."""
    from arena.models import World
    from arena.services.pairs import duel_pairs_generate

    world = World.objects.get(slug="lettings")
    duel_pairs_generate(world=world, count=10)
    return world


@pytest.fixture
def rita(workspace):
    """A reviewer of the acme workspace."""
    return make_user(workspace, "rita@acme.test", "reviewer")


@pytest.fixture
def rob(workspace):
    """A second reviewer of the acme workspace."""
    return make_user(workspace, "rob@acme.test", "reviewer")

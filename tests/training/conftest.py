"""Fixtures of the training tests."""

from __future__ import annotations

# Committed rows in a throwaway workspace, for tests that run work in other threads.
from tests.e2e.workspaces import committed_db  # noqa: F401 - a fixture

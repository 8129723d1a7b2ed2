"""Fixtures of the training tests."""

from __future__ import annotations

import pytest

# Committed rows in a throwaway workspace, for tests that run work in other threads.
from tests.e2e.workspaces import committed_db  # noqa: F401 - a fixture


@pytest.fixture
def queued(monkeypatch) -> list[int]:
    """The jobs handed to a worker, in order (no worker runs here)."""
    handed: list[int] = []
    monkeypatch.setattr(
        "levers9.jobs.services.enqueue_in_workspace",
        lambda _path, job_id, *args, **kwargs: handed.append(job_id) or f"task-{job_id}",
    )
    return handed

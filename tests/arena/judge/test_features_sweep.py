"""A workspace's cache of the base's reads stays within its budget (LEVERS9_JUDGE_FEATURES_MAX_MB):
each judge fit's finish sweeps it, and so does `manage.py sweep_features`, one workspace at a
time: another workspace's cache is never touched."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django_tenants.utils import schema_context

from arena.models import JudgeVersion
from tests.recorded_calls import real_calls_world_fitted
from trainers.reading.base_features import FeatureStore, disk_bytes


def _cache(settings, schema: str, count: int) -> list[Path]:
    """`count` cached reads in the workspace's cache, the first used longest ago."""
    store = FeatureStore(Path(settings.DATASETS_DIR) / schema / "features" / "smollm2")
    paths = []
    for index in range(count):
        key = f"{index:02x}{'0' * 62}"
        store.put(key, np.zeros(64, dtype=np.float32))
        path = store.folder / key[:2] / f"{key}.npy"
        os.utime(path, (time.time() - 1000 + index,) * 2)
        paths.append(path)
    return paths


@pytest.fixture
def datasets(settings, tmp_path):
    settings.DATASETS_DIR = tmp_path
    return tmp_path


def test_a_fit_finish_keeps_the_workspace_cache_within_its_budget(
    workspace, other_workspace, datasets, settings, django_capture_on_commit_callbacks
):
    own = _cache(settings, workspace.schema_name, 6)
    other = _cache(settings, other_workspace.schema_name, 6)
    settings.JUDGE_FEATURES_MAX_BYTES = 2 * disk_bytes(own[0].stat())
    with schema_context(workspace.schema_name):
        world = real_calls_world_fitted(django_capture_on_commit_callbacks)
        assert JudgeVersion.objects.filter(world=world).count() == 1
    assert [path.exists() for path in own] == [False] * 4 + [True] * 2  # the least used went
    assert all(path.exists() for path in other)


def test_the_command_sweeps_one_workspace_or_every_one(
    workspace, other_workspace, datasets, settings, capsys
):
    own = _cache(settings, workspace.schema_name, 3)
    other = _cache(settings, other_workspace.schema_name, 3)
    call_command("sweep_features", "--workspace", workspace.slug, "--max-mb", "0")
    assert not any(path.exists() for path in own)
    assert all(path.exists() for path in other)
    assert f"{workspace.slug}: removed 3" in capsys.readouterr().out
    call_command("sweep_features")  # the default budget holds three small reads
    assert all(path.exists() for path in other)
    with pytest.raises(CommandError, match="--max-mb"):
        call_command("sweep_features", "--max-mb", "-1")
    with pytest.raises(CommandError, match="No workspace"):
        call_command("sweep_features", "--workspace", "nobody")

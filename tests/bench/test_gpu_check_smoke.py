"""`bench.gpu_check --smoke` in CI: the GPU check's own code (a random-weight Qwen3 shape built
from its config, the project's DPO, stock TRL's DPOTrainer, the reward model and the policy, the
meter and the table) on a tiny shape on the CPU, in a process tree where Django cannot be
imported at all: a bare GPU machine has none."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STAGES = ("DPO, the project's", "DPO, stock TRL", "reward model", "policy")

pytestmark = pytest.mark.slow


@pytest.fixture
def without_django(tmp_path):
    """An environment whose every process finds a `django` that refuses to import (it comes
    first on PYTHONPATH, which children inherit)."""
    blocked = tmp_path / "blocked" / "django"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text(
        "raise ImportError('Django is blocked: the GPU check runs where there is none')\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(blocked.parent), env.get("PYTHONPATH")]))
    env["OMP_NUM_THREADS"] = "1"
    return env


def test_it_blocks_django_in_that_environment(without_django):
    result = subprocess.run(
        [sys.executable, "-c", "import django"],
        cwd=REPO,
        env=without_django,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "Django is blocked" in result.stderr


def test_it_prints_every_stage_of_the_tiny_shape_without_django(without_django, tmp_path):
    prepared = tmp_path / "prepared"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.gpu_check",
            "--smoke",
            "--minutes",
            "3",
            "--prepared",
            str(prepared),
            "--work",
            str(tmp_path),
        ],  # fmt: skip
        cwd=REPO,
        env=without_django,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    # It prepared what a device carries (no wheels: CI has no index), and read it from there.
    assert (prepared / "tokenizer" / "tokenizer.json").exists()
    assert (prepared / "pairs" / "pairs.jsonl").exists()
    lines = result.stdout.splitlines()
    for stage in STAGES:
        row = next((line for line in lines if line.startswith(stage)), None)
        assert row is not None, result.stdout
        assert "not run" not in row, row
        # shape, a step count, seconds, then the sampled and trained tokens a second
        assert re.match(rf"{re.escape(stage)}\s+tiny\s+[1-9]\d*\s+[\d.]+\s+\S+\s+[\d,]+\s", row), (
            row
        )
    assert re.search(r"DPO, the project's.*\d\.\d\d×", result.stdout), result.stdout
    assert "tiny: django imported: False" in result.stdout

"""`bench.gpu_check --smoke` in CI: the GPU check's own code (a random-weight Qwen3 shape built
from its config, the project's DPO, stock TRL's DPOTrainer, the reward model and the policy, the
meter and the table) on a tiny shape on the CPU, in a process tree where Django cannot be
imported at all (a bare GPU machine has none) and where every weight file written is recorded:
on the card the 8B and 14B bases are 16 and 29.5 GB on a 64 GiB disk, so none may be."""

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

# Loaded by every Python process of the tree (it is first on PYTHONPATH): wraps safetensors'
# file writers (transformers' and PEFT's save_pretrained) and torch.save as each module loads,
# so a weight file written anywhere, by any process, is a line in the log.
RECORD_WEIGHT_WRITES = """
import functools, importlib.machinery, os, sys

WRITERS = {"safetensors.torch": ("save_file", "save_model"), "torch": ("save",)}


def _recorded(name, write):
    @functools.wraps(write)
    def recorded(*args, **kwargs):
        target = args[1] if len(args) > 1 else kwargs.get("filename", kwargs.get("f"))
        with open(os.environ["WEIGHT_WRITES_LOG"], "a") as log:
            log.write(f"{name} {target}\\n")
        return write(*args, **kwargs)

    return recorded


class RecordWeightWrites:
    def find_spec(self, name, path=None, target=None):
        if name not in WRITERS:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            for attribute in WRITERS[name]:
                write = getattr(module, attribute)
                setattr(module, attribute, _recorded(f"{name}.{attribute}", write))

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, RecordWeightWrites())
"""


@pytest.fixture
def without_django(tmp_path):
    """An environment whose every process finds a `django` that refuses to import, and a
    `sitecustomize` that records every weight file written in `weight_writes.log` (both come
    first on PYTHONPATH, which children inherit)."""
    blocked = tmp_path / "blocked" / "django"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text(
        "raise ImportError('Django is blocked: the GPU check runs where there is none')\n"
    )
    (blocked.parent / "sitecustomize.py").write_text(RECORD_WEIGHT_WRITES)
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(blocked.parent), env.get("PYTHONPATH")]))
    env["OMP_NUM_THREADS"] = "1"
    env["WEIGHT_WRITES_LOG"] = str(tmp_path / "weight_writes.log")
    return env


def weight_writes(env: dict[str, str]) -> list[str]:
    log = Path(env["WEIGHT_WRITES_LOG"])
    return log.read_text().splitlines() if log.exists() else []


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


def test_it_records_a_weight_file_written_in_that_environment(without_django, tmp_path):
    saving = "from trainers.bases import tiny_base; import sys; tiny_base(sys.argv[1])"
    subprocess.run(
        [sys.executable, "-c", saving, str(tmp_path / "saved")],
        cwd=REPO,
        env=without_django,
        check=True,
        capture_output=True,
    )
    (written,) = weight_writes(without_django)
    assert written.startswith("safetensors.torch.save_file ")
    assert written.endswith("model.safetensors")


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
    # The base was held in memory: no process wrote a weight file (the base, a merged version,
    # an adapter), and every reference was the base with its adapter disabled, not a copy.
    assert weight_writes(without_django) == []
    assert "held in memory (no weights written)" in result.stdout
    for stage in ("DPO, the project's", "DPO, stock TRL", "policy"):
        row = next(line for line in lines if line.startswith(stage))
        assert "reference: base with the adapter disabled" in row, row

"""A world's numbered fitted judge versions (reads): the newest, the name its verdicts are
stored under, and a version loaded as a judge. Each version is the finish of one fit
(arena.judge.fit_job) and carries its held-out agreement in its report.

Workspace schema (JudgeVersion lives in the tenant's schema).
"""

from __future__ import annotations

import functools
from pathlib import Path

from arena.judge.judge_base import base_reader, features_dir
from arena.judge.world_dimensions import world_dimensions
from arena.models import JudgeVersion, World
from trainers.judge.fitted_judge import FittedJudge
from trainers.judge.rubric import Dimension


def judge_version_latest(world: World) -> JudgeVersion | None:
    return JudgeVersion.objects.filter(world=world).order_by("-number").first()


def judge_version_name(version: JudgeVersion) -> str:
    """The name a version's verdicts are stored under (Judgement.judge_model)."""
    return f"{version.label} of {version.world.slug}"


@functools.lru_cache(maxsize=32)
def _loaded(model_dir: str, name: str, features: str, rubric: tuple[Dimension, ...]) -> FittedJudge:
    # A version's files never change once written: one load per process (per workspace's
    # feature cache and per rubric of its world, which the cache key names).
    return FittedJudge.load(Path(model_dir), model_name=name, reader_for=base_reader, rubric=rubric)


def fitted_judge_for(version: JudgeVersion) -> FittedJudge:
    """The version as a judge, scoring its world's rubric as it is now."""
    return _loaded(
        version.model_dir,
        judge_version_name(version),
        str(features_dir()),
        world_dimensions(version.world),
    )

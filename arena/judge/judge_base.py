"""Which base a world's fitted judge reads replies with, and where its features are cached
(trainers.reading.base_features). Workspace schema: the cache is the workspace's own.

A fit reads with the base LEVERS9_JUDGE_BASE names ("default": the default base of the pool
the fit runs on; "none": the words alone). A fitted version remembers the base it was fitted
with, and is scored with that base wherever the base is on the machine; where it is not, the
version scores with its words alone and says so in its name (its verdicts are stored apart).
Scoring reads through the machine's one scoring process per base (trainers.reading.base_client).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection

from arena.errors import JudgeFitError
from levers9.models import GpuPool
from levers9.pools import pool_default

WORDS_ONLY = ("", "none")


def features_dir() -> Path:
    """The workspace's feature cache on the datasets volume (never shared across workspaces)."""
    return Path(settings.DATASETS_DIR) / connection.schema_name / "features"


def features_sweep(max_bytes: int | None = None) -> Any:
    """Keep the workspace's feature cache within its budget (LEVERS9_JUDGE_FEATURES_MAX_MB),
    the least used reads first (trainers.reading.base_features.cache_sweep); each judge fit's
    finish runs it, and so does `manage.py sweep_features`."""
    from trainers.reading.base_features import cache_sweep

    budget = settings.JUDGE_FEATURES_MAX_BYTES if max_bytes is None else max_bytes
    return cache_sweep(features_dir(), budget)


def judge_fit_place() -> tuple[Any, str, str]:
    """(pool, device, base) for a fit: a GPU pool when the fit reads with a base and one is
    enabled, else the CPU pool; the base "" for the words alone."""
    from trainers.bases import default_base, validate_base

    chosen = (settings.JUDGE_BASE or "").strip()
    if chosen.lower() in WORDS_ONLY:
        return pool_default(gpu=False), "cpu", ""
    try:
        pool, device = pool_default(gpu=True), "cuda"
    except GpuPool.DoesNotExist:
        pool, device = pool_default(gpu=False), "cpu"
    if chosen == "default":
        return pool, device, default_base(gpu=device == "cuda")
    try:
        return pool, device, validate_base(chosen)
    except ValueError as error:  # an operator's setting, said as the fit's refusal
        raise JudgeFitError(f"LEVERS9_JUDGE_BASE names no usable base: {error}") from error


def base_reader(base: str) -> Any:
    """A reader of `base` for scoring, or None when the base is not on this machine (nothing
    is downloaded at run time). The base is read by the machine's scoring process for it
    (trainers.reading.base_server), never in this process: the web process and the workers'
    tasks hold no model."""
    from trainers.reading.base_server import base_on_machine

    if not base_on_machine(base, models_dir=settings.MODELS_DIR):
        return None
    return _reader(base, str(settings.MODELS_DIR), str(features_dir()))


@functools.lru_cache(maxsize=8)
def _reader(base: str, models_dir: str, features: str) -> Any:
    # One client per base and workspace cache, shared by every version that reads with it.
    from trainers.reading.base_client import BaseClient
    from trainers.reading.base_server import IDLE_SECONDS

    return BaseClient(
        base,
        models_dir=models_dir,
        features_dir=features,
        # LEVERS9_JUDGE_SCORING_IDLE_S: how long the scoring process keeps the base unasked.
        idle_seconds=getattr(settings, "JUDGE_SCORING_IDLE_SECONDS", IDLE_SECONDS),
    )

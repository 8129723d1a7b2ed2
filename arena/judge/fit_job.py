"""Fitting a world's judge: the fit job (kind "judge-fit", registered in arena.apps) on the
CPU pool, its finish that numbers the next judge version, and the refits that follow a freeze
or an override. What the fit reads is arena.judge.fit_rows'; the fit itself is pure
(trainers.judge.fit).

A new fit starts when picks are frozen and when an override is saved ("feeds the next
rescoring"), once the write is committed. Nobody clicked it, so it is background work: it waits
in the CPU pool's background lane and never in front of a job a person started
(levers9.pools), and requests are coalesced to one fit on its way per world: a request while
one waits or runs adds nothing, and a fit that ends refits if the world has picks or overrides
it did not read, so every request is covered. Workspace schema.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max

from arena.errors import JudgeFitError
from arena.job_worlds import arena_job_start, job_world_of
from arena.judge.agreement import judge_measure_soon
from arena.judge.fit_rows import frozen_picks, judge_fit_rows
from arena.judge.judge_base import features_dir, features_sweep, judge_fit_place
from arena.judge.world_dimensions import world_dimension_names
from arena.models import JobWorld, JudgeOverride, JudgeVersion, World
from levers9.jobs.models import Job
from levers9.jobs.services import job_cancel
from trainers.registry import JUDGE_FIT, JUDGE_FIT_KIND
from trainers.results import JudgeFitResult

JUDGE_FIT_TRAINER = JUDGE_FIT


def _fit_folder(world: World) -> Path:
    """A new folder for one fit's model on the datasets volume."""
    name = uuid.uuid4().hex[:12]
    return Path(settings.DATASETS_DIR) / connection.schema_name / "judges" / world.slug / name


def _judge_fit_pack(
    world: World, *, seed: int = 0, device: str = "cpu", base: str = ""
) -> tuple[dict[str, Any], dict[str, int]]:
    """The fit's spec, and the newest pick and override it reads (what its end compares the
    world's with), from what the world has now."""
    read_up_to = _read_up_to(world)  # before the rows: a later write is then always refitted
    rows = judge_fit_rows(world)
    if not rows["pairs"] and not rows["overrides"] and not rows["outcomes"]:
        raise JudgeFitError(
            f"{world.name} has nothing to learn from yet: freeze some picks, overrule the "
            "judge, or import calls with outcomes."
        )
    spec = {
        "world": world.slug,
        # The world's own: a head per dimension its reviewers tick often enough.
        "dimensions": list(world_dimension_names(world)),
        "seed": seed,
        "output_dir": str(_fit_folder(world)),
        # The base that reads every reply (arena.judge.judge_base); "" for the words alone.
        "base": base,
        # Read ahead with the base: the world's turns its on-topic guard measures a judge's
        # floor on, which the first score after the fit needs (20 s read in a web request).
        "also_read": _floor_items(world) if base else [],
        "models_dir": str(settings.MODELS_DIR),
        "features_dir": str(features_dir()),
        "device": device,
        **rows,
    }
    return spec, read_up_to


def _floor_items(world: World) -> list[dict[str, Any]]:
    from arena.judge.world_topic_guard import topic_guard_for_world

    return [
        {"context": [dict(turn) for turn in unit.context], "reply": unit.reply}
        for unit in topic_guard_for_world(world).floor_sample()
    ]


def judge_fit_start(
    *, world: World, started_by=None, seed: int = 0, on_request: bool = True
) -> Job:
    """Start a fit of the world's judge on what the world has now: a job on the CPU pool (a
    GPU pool where one is enabled and the fit reads replies with a base). One fit per world
    is on its way at a time, whoever asked: a request while one runs joins it (the job comes
    back with `joined`; its end refits on what it did not read, judge_fit_ended), and a
    person's request replaces a background refit still waiting for its turn. Never a second
    reading of the same replies.
    A refit the platform starts itself (`on_request=False`, after a freeze or an override) is
    background work: it yields to jobs a person started and no job limit refuses it."""
    with transaction.atomic():
        # Two requests at once see each other's fit: the world's row is the lock.
        World.objects.select_for_update().filter(pk=world.pk).first()
        active = _fit_on_its_way(world)
        if active is not None and on_request and _waiting_refit(active):
            job_cancel(job=active)  # replaced: the person's fit reads what the world has now
            active = None
        if active is not None:
            active.joined = True
            return active
        pool, device, base = judge_fit_place()
        spec, read_up_to = _judge_fit_pack(world, seed=seed, device=device, base=base)
        # Work nobody clicked: a refit of a judge the world has, or its first fit after an
        # import.
        unasked = (
            " (refit)" if JudgeVersion.objects.filter(world=world).exists() else " (background)"
        )
        return arena_job_start(
            # The platform's job names no world: the arena's row does, with what the fit read.
            about=JobWorld(
                world=world,
                read_up_to_pick=read_up_to["pick"],
                read_up_to_override=read_up_to["override"],
            ),
            kind=JUDGE_FIT_KIND,
            trainer=JUDGE_FIT_TRAINER,
            spec=spec,
            pool=pool,
            title=f"Fit the judge of {world.name}" + ("" if on_request else unasked),
            started_by=started_by,
            within_workspace_limits=on_request,
            background=not on_request,
        )


def _fit_on_its_way(world: World) -> Job | None:
    """The world's fit that waits, runs or finishes now, if any."""
    return (
        Job.objects.filter(
            kind=JUDGE_FIT_KIND, arena_world__world=world, state__in=Job.ACTIVE_STATES
        )
        .order_by("-id")
        .first()
    )


def _waiting_refit(job: Job) -> bool:
    """A background fit not yet handed to a worker: nothing of it has been read."""
    return job.background and job.state == Job.State.PACKING


def judge_refit_request(*, world: World, started_by=None) -> Job | None:
    """A refit of the world's judge, coalesced: while a fit of the world waits or runs, a
    request adds nothing and costs nothing; that fit, when it ends, refits on what it did not
    read (judge_fit_ended), off the request's path. Else a background fit starts. None when the
    world has nothing to learn from yet.

    Packing a fit reads every pick of the world: done inside each freeze while a fit was on its
    way, a second freeze of 20,000 picks took 7.5-9.3 s instead of 0.2 s."""
    try:
        return judge_fit_start(world=world, started_by=started_by, on_request=False)
    except JudgeFitError:
        return None


def _read_up_to(world: World) -> dict[str, int]:
    """The newest frozen pick and override of the world: what a fit started now will read."""
    newest_pick = frozen_picks(world).aggregate(newest=Max("pk"))["newest"]
    newest_override = JudgeOverride.objects.filter(reply__moment__world=world).aggregate(
        newest=Max("pk")
    )["newest"]
    return {"pick": newest_pick or 0, "override": newest_override or 0}


def judge_fit_ended(job: Job) -> None:
    """The judge-fit kind's end: a freeze or an override saved while this fit ran started no
    refit of its own (one fit per world at a time) and this fit had read its rows before it,
    so refit now. Seen in the demo: picks frozen while the first fit ran, and the judge
    that scored every checkpoint after had learned from none of them."""
    if job.state not in (Job.State.DONE, Job.State.FAILED):  # a cancelled fit stays cancelled
        return
    about = job_world_of(job)
    read = about.read_up_to if about is not None else None
    if read is None:
        return
    now = _read_up_to(about.world)
    if any(now[key] > read[key] for key in now):
        judge_fit_soon(world_ids={about.world_id}, started_by=job.started_by)


def judge_fit_soon(*, world_ids: set[int], started_by=None) -> None:
    """After a freeze or an override: refit those worlds once the write is committed, as
    background work coalesced to one waiting fit per world (judge_refit_request)."""
    schema_name = connection.schema_name

    def start() -> None:
        from django_tenants.utils import schema_context

        with schema_context(schema_name):
            for world in World.objects.filter(pk__in=world_ids):
                judge_refit_request(world=world, started_by=started_by)
                judge_measure_soon(world=world, started_by=started_by)

    transaction.on_commit(start)


def judge_fit_finish(job: Job, result: dict[str, Any]) -> None:
    """The judge-fit kind's finish: number the version. It makes no policy version."""
    world = job.arena_world.world
    fitted = JudgeFitResult.from_dict(result)
    model_dir = str(fitted.model_dir or "")
    if not model_dir or not (Path(model_dir) / "judge.json").is_file():
        raise ValueError("the fit wrote no model to load")
    last = JudgeVersion.objects.filter(world=world).aggregate(n=Max("number"))["n"] or 0
    JudgeVersion.objects.create(
        world=world, number=last + 1, job_id=job.pk, model_dir=model_dir, report=fitted.report()
    )
    # The fit added what its base read to the workspace's cache: keep it within its budget
    # (nothing else removes a cached read; a removed one is read again when next needed).
    features_sweep()

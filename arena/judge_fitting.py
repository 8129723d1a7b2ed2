"""Fitting a world's judge: the rows it learns from, the fit job, the numbered judge versions.

What a world has is what its judge learns from: the reviewers' frozen picks (with the reasons
they ticked), their overrides of the judge, and the outcome labels of its real calls — never a
call Evaluate holds out (arena.held_out), so a checkpoint is not scored by a judge that learned
from the calls it replays. The fit itself is pure (trainers.judge.fit) and runs as a job of kind
"judge-fit" (registered in arena.apps) on the CPU pool; its finish numbers the version.

A new fit starts when picks are frozen and when an override is saved ("feeds the next
rescoring"), once the write is committed. Nobody clicked it, so it is background work: it waits
in the CPU pool's background lane and never in front of a job a person started
(levers9.pools), and requests are coalesced to one fit on its way per world: a request while
one waits or runs adds nothing, and a fit that ends refits if the world has picks or overrides
it did not read, so every request is covered.
"""

from __future__ import annotations

import functools
import uuid
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max

from arena.held_out import held_out_call_ids
from arena.judging import DIMENSIONS
from arena.judging.fitted import FittedJudge, outcome_rows, override_row, pair_row
from arena.models import (
    DEFAULT_JUDGE,
    Call,
    JudgeOverride,
    JudgeVersion,
    Moment,
    Pick,
    PreferenceVersion,
    World,
    moments_dialogues_load,
)
from levers9.jobs.models import Job
from levers9.jobs.services import job_start
from levers9.pools import pool_default

JUDGE_FIT_KIND = "judge-fit"
JUDGE_FIT_TRAINER = "judge-fit"


class JudgeFitError(ValueError):
    """Why a world's judge cannot be fitted now; said as is."""


# --- the rows ---------------------------------------------------------------------------------


def _frozen_picks(world: World):
    """Picks in a frozen preference version: training reads only frozen picks."""
    frozen = PreferenceVersion.objects.aggregate(last=Max("last_pick_id"))["last"] or 0
    return (
        Pick.objects.filter(world=world, pk__lte=frozen)
        .select_related("pair__moment", "chosen_reply", "rejected_reply")
        .order_by("pk")
    )


def _group(moment: Moment) -> str:
    # Picks on moments of one call stay on one side of the held-out split.
    return f"call:{moment.call_id}" if moment.call_id else f"moment:{moment.pk}"


def judge_fit_rows(world: World) -> dict[str, list[dict[str, Any]]]:
    """The world's picks, overrides and outcome turns as the fit reads them."""
    held_out = held_out_call_ids(world=world)
    picks = list(_frozen_picks(world))
    moments_dialogues_load(pick.pair.moment for pick in picks)
    pairs = []
    for pick in picks:
        moment = pick.pair.moment
        if moment.call_id in held_out:
            continue
        pairs.append(
            pair_row(
                group=_group(moment),
                context=moment.dialogue(),
                chosen=pick.chosen_reply.text,
                rejected=pick.rejected_reply.text,
                reasons=pick.reasons or (),
            )
        )
    overridden = list(
        JudgeOverride.objects.filter(reply__moment__world=world)
        .exclude(reply__moment__call_id__in=held_out)
        .select_related("reply__moment")
        .order_by("pk")
    )
    moments_dialogues_load(override.reply.moment for override in overridden)
    overrides = [
        override_row(
            context=override.reply.moment.dialogue(),
            reply=override.reply.text,
            scores=override.scores or {},
        )
        for override in overridden
    ]
    calls = (
        Call.objects.filter(world=world)
        .exclude(outcome=Call.Outcome.UNKNOWN)
        .exclude(pk__in=held_out)
        .prefetch_related("turns")
    )
    outcomes = outcome_rows(
        {
            "id": call.external_id,
            "outcome": call.outcome,
            "turns": [{"speaker": t.speaker, "text": t.text} for t in call.turns.all()],
        }
        for call in calls
    )
    return {"pairs": pairs, "overrides": overrides, "outcomes": outcomes}


# --- the job ----------------------------------------------------------------------------------


def _fit_folder(world: World) -> Path:
    """A new folder for one fit's model on the datasets volume."""
    name = uuid.uuid4().hex[:12]
    return Path(settings.DATASETS_DIR) / connection.schema_name / "judges" / world.slug / name


def _judge_fit_pack(world: World, *, seed: int = 0) -> tuple[dict[str, Any], dict[str, Any]]:
    """The fit's spec and what its finish needs, from what the world has now."""
    read_up_to = _read_up_to(world)  # before the rows: a later write is then always refitted
    rows = judge_fit_rows(world)
    if not rows["pairs"] and not rows["overrides"] and not rows["outcomes"]:
        raise JudgeFitError(
            f"{world.name} has nothing to learn from yet: freeze some picks, overrule the "
            "judge, or import calls with outcomes."
        )
    spec = {
        "world": world.slug,
        "dimensions": list(DIMENSIONS),
        "seed": seed,
        "output_dir": str(_fit_folder(world)),
        **rows,
    }
    return spec, {"world": world.pk, "read_up_to": read_up_to}


def judge_fit_start(
    *, world: World, started_by=None, seed: int = 0, on_request: bool = True
) -> Job:
    """Start a fit of the world's judge on what the world has now: a job on the CPU pool.
    A refit the platform starts itself (`on_request=False`, after a freeze or an override) is
    background work: it yields to jobs a person started and no job limit refuses it."""
    spec, finish_needs = _judge_fit_pack(world, seed=seed)
    return job_start(
        kind=JUDGE_FIT_KIND,
        trainer=JUDGE_FIT_TRAINER,
        spec=spec,
        pool=pool_default(gpu=False),
        title=f"Fit the judge of {world.name}" + ("" if on_request else " (refit)"),
        started_by=started_by,
        world=world,
        finish_needs=finish_needs,
        within_workspace_limits=on_request,
        background=not on_request,
    )


def judge_refit_request(*, world: World, started_by=None) -> Job | None:
    """A refit of the world's judge, coalesced: while a fit of the world waits or runs, a
    request adds nothing and costs nothing; that fit, when it ends, refits on what it did not
    read (judge_fit_ended), off the request's path. Else a background fit starts. None when the
    world has nothing to learn from yet.

    Packing a fit reads every pick of the world: done inside each freeze while a fit was on its
    way, a second freeze of 20,000 picks took 7.5-9.3 s instead of 0.2 s."""
    active = (
        Job.objects.filter(kind=JUDGE_FIT_KIND, world=world, state__in=Job.ACTIVE_STATES)
        .order_by("-id")
        .first()
    )
    if active is not None:
        return active
    try:
        return judge_fit_start(world=world, started_by=started_by, on_request=False)
    except JudgeFitError:
        return None


def _read_up_to(world: World) -> dict[str, int]:
    """The newest frozen pick and override of the world: what a fit started now will read."""
    newest_pick = _frozen_picks(world).aggregate(newest=Max("pk"))["newest"]
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
    needs = job.finish_needs or {}
    read = needs.get("read_up_to")
    world = World.objects.filter(pk=needs.get("world")).first()
    if read is None or world is None:
        return
    now = _read_up_to(world)
    if any(now[key] > read.get(key, 0) for key in now):
        judge_fit_soon(world_ids={world.pk}, started_by=job.started_by)


def judge_fit_soon(*, world_ids: set[int], started_by=None) -> None:
    """After a freeze or an override: refit those worlds once the write is committed, as
    background work coalesced to one waiting fit per world (judge_refit_request)."""
    schema_name = connection.schema_name

    def start() -> None:
        from django_tenants.utils import schema_context

        with schema_context(schema_name):
            for world in World.objects.filter(pk__in=world_ids):
                judge_refit_request(world=world, started_by=started_by)
                _measure_model_judge_soon(world, started_by=started_by)

    transaction.on_commit(start)


def judge_fit_finish(job: Job, result: dict[str, Any]) -> None:
    """The judge-fit kind's finish: number the version. It makes no policy version."""
    world = World.objects.get(pk=(job.finish_needs or {}).get("world"))
    model_dir = str(result.get("model_dir") or "")
    if not model_dir or not (Path(model_dir) / "judge.json").is_file():
        raise ValueError("the fit wrote no model to load")
    last = JudgeVersion.objects.filter(world=world).aggregate(n=Max("number"))["n"] or 0
    report = {key: value for key, value in result.items() if key != "model_dir"}
    JudgeVersion.objects.create(
        world=world, number=last + 1, job_id=job.pk, model_dir=model_dir, report=report
    )


# --- in force ---------------------------------------------------------------------------------


def judge_version_latest(world: World) -> JudgeVersion | None:
    return JudgeVersion.objects.filter(world=world).order_by("-number").first()


@functools.lru_cache(maxsize=32)
def _loaded(model_dir: str, name: str) -> FittedJudge:
    # A version's files never change once written: one load per process.
    return FittedJudge.load(Path(model_dir), model_name=name)


def fitted_judge_for(version: JudgeVersion) -> FittedJudge:
    return _loaded(version.model_dir, f"{version.label} of {version.world.slug}")


# --- scoring for integrations -------------------------------------------------------------------

MAX_SCORE_ITEMS = 1000
MAX_TEXT = 20_000


def judge_score_items_clean(items: Any) -> list[tuple[list[dict[str, str]], str]]:
    """The scoring API's items as (dialogue, reply), or JudgeFitError naming the bad field."""
    if not isinstance(items, list) or not items:
        raise JudgeFitError("items must be a non-empty list of {dialogue, reply} objects.")
    if len(items) > MAX_SCORE_ITEMS:
        raise JudgeFitError(f"items holds {len(items)}; send at most {MAX_SCORE_ITEMS} at once.")
    cleaned = []
    for index, item in enumerate(items):
        where = f"items[{index}]"
        if not isinstance(item, dict):
            raise JudgeFitError(f"{where} must be an object with 'dialogue' and 'reply'.")
        reply, dialogue = item.get("reply"), item.get("dialogue", [])
        if not isinstance(reply, str) or not reply.strip() or len(reply) > MAX_TEXT:
            raise JudgeFitError(f"{where}.reply must be the agent's reply as text (1 to 20,000).")
        if not isinstance(dialogue, list):
            raise JudgeFitError(f"{where}.dialogue must be a list of {{speaker, text}} turns.")
        turns = []
        for number, turn in enumerate(dialogue):
            spot = f"{where}.dialogue[{number}]"
            if not isinstance(turn, dict) or turn.get("speaker") not in ("agent", "customer"):
                raise JudgeFitError(f"{spot}.speaker must be 'agent' or 'customer'.")
            text = turn.get("text")
            if not isinstance(text, str) or len(text) > MAX_TEXT:
                raise JudgeFitError(f"{spot}.text must be text (at most 20,000 characters).")
            turns.append({"speaker": turn["speaker"], "text": text})
        cleaned.append((turns, reply))
    return cleaned


def judge_score_items(*, world: World, items: Any) -> dict[str, Any]:
    """Score many (dialogue, reply) items with the world's judge in force, in order."""
    from arena.judges import judge_for_world
    from arena.judging import Turn

    cleaned = judge_score_items_clean(items)
    judge = judge_for_world(world)
    if isinstance(judge, FittedJudge):
        results = judge.score_many(cleaned)
    else:
        results = []
        for dialogue, reply in cleaned:
            verdict = judge.score([Turn(t["speaker"], t["text"]) for t in dialogue], reply)
            results.append(
                {
                    "scores": {name: round(float(v), 4) for name, v in verdict.scores.items()},
                    "total": round(float(verdict.total), 4),
                    "won_probability": verdict.won_probability,
                }
            )
    return {"judge": judge.model_name, "results": results}


# --- measuring a model judge -------------------------------------------------------------------

JUDGE_MEASURE_KIND = "judge-measure"
JUDGE_MEASURE_TRAINER = "judge-measure"
MODEL_JUDGE_PAIRS = 100  # each costs two model calls


def judge_measure_start(*, world: World, started_by=None, on_request: bool = True) -> Job:
    """Measure the world's model judge on the picks a fit holds out: a job in the worker (it
    calls the model twice a pick, in both orders). One the platform starts itself after a
    freeze (`on_request=False`) is background work: it yields to jobs a person started and no
    job limit refuses it."""
    if (world.judge_provider or DEFAULT_JUDGE) == DEFAULT_JUDGE:
        raise JudgeFitError(
            f"{world.name} is judged by its fitted judge (or the rubric): its fit measures it."
        )
    return job_start(
        kind=JUDGE_MEASURE_KIND,
        trainer=JUDGE_MEASURE_TRAINER,
        spec={"world": world.slug},
        pool=pool_default(gpu=False),
        title=f"Measure the model judge of {world.name}",
        started_by=started_by,
        world=world,
        finish_needs={"world": world.pk},
        within_workspace_limits=on_request,
        background=not on_request,
    )


def _measure_model_judge_soon(world: World, *, started_by=None) -> None:
    """A world judged by a model is measured again on its (new) held-out picks after a freeze,
    as its fitted judge is refitted. Coalesced: a measurement still waiting reads the picks
    when it runs, so it already covers this freeze; one may run while one waits."""
    from trainers.judge.fit import held_out_part

    if (world.judge_provider or DEFAULT_JUDGE) == DEFAULT_JUDGE:
        return
    waiting = Job.objects.filter(
        kind=JUDGE_MEASURE_KIND, world=world, state=Job.State.PACKING, submitted_at=None
    )
    if waiting.exists() or not held_out_part(judge_fit_rows(world)["pairs"]):
        return
    judge_measure_start(world=world, started_by=started_by, on_request=False)


def judge_measure_run(job_id: int, progress) -> dict[str, Any]:
    """The in-worker work: compare each held-out pick's two replies in both orders."""
    from arena.judges import model_judge_for_world
    from arena.judging import Turn
    from arena.judging.model_judge import comparisons_agreement, model_judge_compare
    from trainers.judge.fit import held_out_part, pair_agreement

    job = Job.objects.get(pk=job_id)
    world = World.objects.get(pk=(job.finish_needs or {}).get("world"))
    held = held_out_part(judge_fit_rows(world)["pairs"])[:MODEL_JUDGE_PAIRS]
    if not held:
        raise JudgeFitError(f"{world.name} has no held-out frozen picks to measure a judge on.")
    judge = model_judge_for_world(world)
    comparisons = []
    for number, row in enumerate(held, start=1):
        context = [Turn(turn["speaker"], turn["text"]) for turn in row["context"]]
        comparisons.append(model_judge_compare(judge, context, row["chosen"], row["rejected"]))
        progress(number, len(held))
    rubric = pair_agreement(
        np.asarray([row["rubric_chosen"][-1] for row in held]),
        np.asarray([row["rubric_rejected"][-1] for row in held]),
        seed=0,
    )
    return {
        "judge": judge.model_name,
        "model": comparisons_agreement(comparisons),
        "rubric": rubric,
    }


def judge_measurement_latest(world: World) -> dict[str, Any] | None:
    """The newest finished measurement of the world's model judge (a job's result)."""
    job = (
        Job.objects.filter(kind=JUDGE_MEASURE_KIND, world=world, state=Job.State.DONE)
        .order_by("-finished_at")
        .first()
    )
    return job.result if job is not None else None

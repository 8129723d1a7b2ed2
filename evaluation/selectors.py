"""Reads of evaluations themselves: the recent ones, a world's latest finished one, the
Evaluate page's default pair of versions, and what an evaluate job is about. An evaluation's
figures are read in evaluation.summary, its verdict in words in evaluation.verdict_words, its
episodes in evaluation.episodes and the lens in evaluation.lens.

Workspace schema: every row read here lives in the tenant's schema.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from arena.models import World
from evaluation.models import Evaluation
from levers9.jobs.kinds import JobAbout
from policies.models import PolicyVersion


def evaluations_recent(*, limit: int = 20) -> QuerySet[Evaluation]:
    return Evaluation.objects.select_related("world", "candidate", "baseline", "job").order_by(
        "-created_at", "-id"
    )[:limit]


def evaluation_latest_done(*, world: World) -> Evaluation | None:
    return (
        Evaluation.objects.filter(world=world, state=Evaluation.State.DONE)
        .select_related("candidate", "baseline")
        .order_by("-finished_at", "-id")
        .first()
    )


def evaluation_versions_default(
    *, world: World
) -> tuple[PolicyVersion | None, PolicyVersion | None]:
    """The Evaluate page's choice in `world`: its newest answering version against its parent
    (else the world's live version, else the next newest)."""
    from policies.selectors import policies_answering, policy_live

    answering = policies_answering(world=world)
    if not answering:
        return None, None
    candidate = answering[0]
    by_pk = {version.pk: version for version in answering}
    live = policy_live(world=world)
    baseline = by_pk.get(candidate.parent_id)
    if baseline is None and live is not None and live.pk in by_pk and live.pk != candidate.pk:
        baseline = live
    if baseline is None and len(answering) > 1:
        baseline = answering[1]
    return candidate, baseline


def evaluation_jobs_about(jobs: list[Any]) -> dict[int, JobAbout]:
    """What an evaluate job is about, for the jobs' pages and API: the baseline its candidate
    is measured against (the job's parent, as a Train card's is its parent version), and its
    evaluation, shown in the job's finish_needs where the job once kept it."""
    evaluations = Evaluation.objects.filter(job__in=jobs).select_related("baseline")
    return {
        evaluation.job_id: JobAbout(
            parent_version=evaluation.baseline,
            finish_needs={"evaluation": evaluation.pk},
        )
        for evaluation in evaluations
    }

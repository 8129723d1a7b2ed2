"""How long an evaluation will run: the Evaluate page's confirmation of a long one, the
admin's, and the job's expected time (which lane it takes).

Workspace schema: the past evaluations read here live in the tenant's schema.
"""

from __future__ import annotations

from arena.held_out import TURNS_PER_CALL
from arena.models import World
from evaluation.models import Evaluation
from levers9.jobs.estimates import JobEstimate, estimate_from_runs
from levers9.jobs.selectors import job_durations_recent
from policies.models import PolicyVersion


def _answers_through_a_model(version: PolicyVersion) -> bool:
    """A simulator version answers by rule or from recorded calls, in a blink; every other
    provider asks a model for each held-out moment, which is what makes an evaluation long."""
    return version.provider != PolicyVersion.Provider.SIMULATOR


def evaluation_estimate(
    *, world: World, candidate: PolicyVersion, baseline: PolicyVersion
) -> JobEstimate:
    """What an evaluation of these versions is expected to take: this world's past evaluations
    whose versions answered the same way (through a model or not), else what it asks of a model."""
    shape = (_answers_through_a_model(candidate), _answers_through_a_model(baseline))

    def like_this_one(job) -> bool:
        past = (
            Evaluation.objects.filter(job=job, world=world)
            .select_related("candidate", "baseline")
            .first()
        )
        return past is not None and shape == (
            _answers_through_a_model(past.candidate),
            _answers_through_a_model(past.baseline),
        )

    from_runs = estimate_from_runs(
        job_durations_recent(trainer="evaluate", matches=like_this_one),
        what=f"of an evaluation like this one in {world.name}",
    )
    if from_runs is not None:
        return from_runs
    if not any(shape):
        return JobEstimate(
            low_seconds=None,
            high_seconds=60.0,
            basis="no evaluation has finished here yet, and neither version asks a model",
        )
    asking = " and ".join(
        version.label for version, asks in zip((candidate, baseline), shape, strict=True) if asks
    )
    return JobEstimate(
        low_seconds=None,
        high_seconds=None,
        basis=f"no evaluation like it has finished in {world.name} yet; {asking} asks a model "
        f"for a reply at each of up to {TURNS_PER_CALL} turns of every held-out call",
    )

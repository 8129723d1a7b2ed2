"""What finishing a job means, per kind: the one place a job turns into a version.

Called by training.services.job_finish inside its exactly-once claim.
"""

from __future__ import annotations

from typing import Any

from policies.models import PolicyVersion
from policies.services import version_register
from training.models import Job

# Only these keys of a move-strategy result are kept on the version (the rest stays on the job).
_LINEAGE_KEYS = ("algorithm", "knobs", "seed", "scenarios", "seconds")


def _lineage(job: Job, result: dict[str, Any]) -> dict[str, Any]:
    lineage = {key: result[key] for key in _LINEAGE_KEYS if key in result}
    lineage["job"] = job.pk
    lineage["trainer"] = job.trainer
    lineage["kind"] = job.kind
    per_scenario = result.get("per_scenario") or result.get("scenario_results") or []
    if per_scenario:
        lineage["returns"] = [
            {
                key: row.get(key)
                for key in (
                    "slug",
                    "optimal_return",
                    "learned_return",
                    "parent_return",
                    "fraction_of_optimum",
                )
            }
            for row in per_scenario
        ]
    return lineage


def version_from_move_strategy(
    job: Job, result: dict[str, Any], *, name: str = "trained"
) -> PolicyVersion:
    """A version that plays the learned move table and keeps its parent's wording."""
    parent = job.parent_version
    strategy = result.get("strategy")
    if not isinstance(strategy, dict) or strategy.get("kind") != "table":
        raise ValueError("the trainer returned no move table to make a version from")
    return version_register(
        name=name,
        parent=parent,
        move_strategy=strategy,
        learned_from=_lineage(job, result),
        description=f"Move strategy learned by {job.trainer}; wording kept from "
        f"{parent.label if parent else 'the simulator'}.",
        provider=parent.provider if parent else PolicyVersion.Provider.SIMULATOR,
        provider_model=parent.provider_model if parent else "",
        endpoint_url=parent.endpoint_url if parent else "",
        created_by=job.started_by,
    )


def finish_for_kind(job: Job, result: Any) -> PolicyVersion | None:
    if not isinstance(result, dict):
        raise ValueError("the trainer's result is not a dict of plain values")
    if job.kind == Job.Kind.TRAIN and job.trainer in {"q-learning-online", "ppo"}:
        return version_from_move_strategy(job, result)
    # Engines runs end in a measurement: a version only when someone promotes it.
    return None

"""How long a Train card's job will run, said before it starts: a job expected to run over two
minutes asks to be confirmed on the page (the API starts at once; its callers chose to).

An estimate reads this workspace's past runs of the same kind on the same pool first (they
measured this machine), and otherwise the trainer's budget: on a CPU each stage stops at its
time budget (trainers.wording.spec), give or take the loading and the held-out measures.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from levers9.jobs.estimates import JobEstimate, estimate_from_runs
from levers9.jobs.selectors import job_durations_recent
from trainers.moves.engines import ALGORITHMS, validate_knobs
from trainers.registry import RLHF, TRAINERS, trainer_label
from trainers.wording.spec import CPU_STAGE_SECONDS

# A stage's budget bounds its training; the base's load and the held-out measures come on top.
BUDGET_SPREAD = (0.75, 1.25)
# A move learner stops at its time budget; starting its process and writing its result come on
# top.
MOVE_LOAD_SECONDS = 20.0


def move_expected_seconds(spec: Mapping[str, Any], *, trainer: str, pool_name: str) -> float | None:
    """What a move learner's job is expected to take: this workspace's past runs of it on the
    pool, else its time budget (its knob, or the knob's default where the spec leaves it) and
    its loading; None for a learner with neither."""
    past = job_durations_recent(trainer=trainer, pool_name=pool_name)
    if past:
        return max(past)
    algorithm = spec.get("algorithm")
    if algorithm not in ALGORITHMS:
        return None
    budget = float(getattr(validate_knobs(algorithm, spec.get("knobs")), "time_budget_s", 0.0))
    return budget + MOVE_LOAD_SECONDS if budget > 0 else None


def wording_estimate(choice) -> JobEstimate:
    """The estimate of a Wording (RLHF) or Benchmark (DPO) card's job (a WordingChoice)."""
    label = trainer_label(choice.method)
    reward = choice.reward_source if choice.method == RLHF else ""

    def like_this_one(job) -> bool:
        # RLHF on the calls' outcomes and on the picks learn from different rows.
        record = (job.result or {}).get("version") or {}
        return not reward or record.get("reward_source", reward) == reward

    past = job_durations_recent(
        trainer=choice.method, pool_name=choice.pool.name, matches=like_this_one
    )
    from_runs = estimate_from_runs(past, what=f"of {label} on {choice.pool.name} in this workspace")
    if from_runs is not None:
        return from_runs
    # The stages the trainer runs to its budget (the catalogue's): RLHF fits a reward model,
    # then the policy.
    trainer = TRAINERS.get(choice.method)
    stages = trainer.budget_stages if trainer is not None and trainer.budget_stages else 1
    if choice.pool.is_cpu:
        budget = stages * CPU_STAGE_SECONDS
        stage_minutes = round(CPU_STAGE_SECONDS / 60)
        return JobEstimate(
            low_seconds=budget * BUDGET_SPREAD[0],
            high_seconds=budget * BUDGET_SPREAD[1],
            basis=f"from its budget: {stages} stage{'s' if stages > 1 else ''} of "
            f"{stage_minutes} minutes on the CPU, and no finished run here yet",
        )
    return JobEstimate(
        low_seconds=None,
        high_seconds=None,
        basis=f"no run of {label} on {choice.pool.name} has finished in this workspace yet; "
        "it runs its epochs over every pair, with no time budget",
    )

"""How long a job will run, said before it starts: a job expected to run over two minutes asks
to be confirmed on its page and in its admin action (the API starts at once; its callers chose
to). The platform's part is the figure and the rule; each app says what a job of its kind is
expected to take (training.estimates, evaluation.estimates)."""

from __future__ import annotations

from dataclasses import dataclass

from levers9.jobs.selectors import job_durations_recent

# A job expected to run longer than this asks to be confirmed before it starts.
CONFIRM_OVER_SECONDS = 120.0


@dataclass(frozen=True)
class JobEstimate:
    """What a job is expected to take, and what that rests on."""

    low_seconds: float | None
    high_seconds: float | None
    basis: str

    @property
    def needs_confirming(self) -> bool:
        # Not known at all (a GPU run never timed here) is not known to be short.
        return self.high_seconds is None or self.high_seconds > CONFIRM_OVER_SECONDS

    def span(self) -> str:
        if self.high_seconds is None:
            return "an unknown time"
        if self.high_seconds < 60:
            return "under a minute"
        low, high = _minutes(self.low_seconds or 0), _minutes(self.high_seconds)
        return f"about {high} minutes" if low == high else f"{low}–{high} minutes"

    def sentence(self) -> str:
        return f"Expected to run {self.span()} ({self.basis})."


def estimate_from_runs(durations: list[float], *, what: str) -> JobEstimate | None:
    """The span of past runs' durations (seconds), or None without any."""
    if not durations:
        return None
    runs = "run" if len(durations) == 1 else f"{len(durations)} runs"
    return JobEstimate(
        low_seconds=min(durations),
        high_seconds=max(durations),
        basis=f"from the last {runs} {what}",
    )


def job_expected_seconds(
    *, trainer: str, pool_name: str, stated: float | None = None
) -> float | None:
    """What a new job of `trainer` on the pool is expected to take, in seconds: the longest of
    this workspace's last runs of it there (they measured this machine), else what its starter
    `stated` (its budget), else None (not known, so not known to be short)."""
    past = job_durations_recent(trainer=trainer, pool_name=pool_name)
    return max(past) if past else stated


def _minutes(seconds: float) -> int:
    return max(1, round(seconds / 60))

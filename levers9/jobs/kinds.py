"""The registry of job kinds and trainers: what the apps above the platform fill in.

The platform runs, follows and finishes jobs without knowing what they are for. Each app says
so in its `AppConfig.ready()`:

  job_kind_register(JobKind(...))     a kind: how a finished job turns into something (a version,
                                      a served endpoint, an evaluation's results), what happens
                                      whenever one ends, whether its cards outlive the task
  trainer_register(name)              what a job's task runs: a trainer of the catalogue
                                      (trainers.registry), its module run as its own process
                                      (`python -m module --spec ... --out ...`) ...
  trainer_register(name, function=...)  ... or a function called in the worker, for work that
                                      needs the database (evaluations)
  job_produced_listen(listener)       told of every version a job produced (the checkpoint)
  watcher_hook_register(hook)         called in every workspace on each look of the watcher
                                      (reconciling what a deletion elsewhere left behind)

A job's link to the product (its world, the version it starts from, the one it made) lives in
the app of its kind, never on the job: the kind's `about` tells the platform's pages and API
what to show of it (JobAbout), so the job's representation stays whole without the platform
naming any product table.

Lookups of an unknown name say which names are known: a job row naming a kind whose app is not
installed fails in words instead of being finished by nobody.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from trainers.registry import TRAINERS as CATALOGUE

# The finish: (job, the task's plain-value result) -> what it produced (a version) or None.
Finish = Callable[[Any, dict[str, Any]], Any]
# Called with the job once it has ended, whichever way (done, failed, cancelled).
OnEnd = Callable[[Any], None]
# What the kind's jobs are about, batched for a page of jobs: (jobs) -> {job id: JobAbout}.
About = Callable[[list[Any]], dict[int, "JobAbout"]]
# An in-worker job function: (job id, progress(step, total, **metrics)) -> plain values.
InWorker = Callable[[int, Callable[..., None]], dict[str, Any]]


class VersionShown(Protocol):
    """A version as the platform shows it (policies.PolicyVersion, which the platform sits
    below and never imports)."""

    number: int

    @property
    def label(self) -> str: ...


@dataclass(frozen=True)
class JobAbout:
    """What a job is about, in the product's words, as its kind's app says: the platform only
    shows it (a version by its `number` and `label`)."""

    parent_version: VersionShown | None = None
    produced_version: VersionShown | None = None
    preference_version: int | None = None
    base_model: str = ""
    # The product's ids the job's finish reads from the kind's own table (a serve job's
    # endpoint, a Train card's parent number): shown in the job's `finish_needs` beside what
    # the platform keeps there, as it always was.
    finish_needs: Mapping[str, Any] = field(default_factory=dict)


NOTHING_KNOWN = JobAbout()


@dataclass(frozen=True)
class JobKind:
    name: str
    label: str
    finish: Finish | None = None
    on_end: OnEnd | None = None
    about: About | None = None
    # A serve job's cards become its endpoint's at the finish: the task must not free them.
    keeps_cards: bool = False
    # Data parallel across several cards (torchrun); a server splits itself across them.
    data_parallel: bool = True


@dataclass(frozen=True)
class Trainer:
    name: str
    module: str = ""
    function: InWorker | None = None

    @property
    def in_worker(self) -> bool:
        return self.function is not None


_KINDS: dict[str, JobKind] = {}
TRAINERS: dict[str, Trainer] = {}
_PRODUCED_LISTENERS: list[Callable[[Any, Any], None]] = []
_WATCHER_HOOKS: list[Callable[[], None]] = []


def job_kind_register(kind: JobKind) -> None:
    _KINDS[kind.name] = kind


def trainer_register(name: str, *, function: InWorker | None = None) -> None:
    """A trainer of the catalogue runs the module the catalogue names; any other name is work
    done in the worker, by its `function`."""
    if function is not None:
        if name in CATALOGUE:
            raise ValueError(f"Trainer '{name}' is in trainers.registry: it runs its module.")
        TRAINERS[name] = Trainer(name, module="", function=function)
        return
    if name not in CATALOGUE:
        raise ValueError(
            f"Trainer '{name}' is not in trainers.registry: give the function it runs in the "
            "worker."
        )
    TRAINERS[name] = Trainer(name, module=CATALOGUE[name].module, function=None)


def job_produced_listen(listener: Callable[[Any, Any], None]) -> None:
    """`listener(job, version)` runs inside the finish's transaction for every version a job
    produced (or that was promoted from one)."""
    if listener not in _PRODUCED_LISTENERS:
        _PRODUCED_LISTENERS.append(listener)


def watcher_hook_register(hook: Callable[[], None]) -> None:
    if hook not in _WATCHER_HOOKS:
        _WATCHER_HOOKS.append(hook)


def job_kind(name: str) -> JobKind:
    kind = _KINDS.get(name)
    if kind is None:
        known = ", ".join(sorted(_KINDS)) or "none"
        raise LookupError(f"No job kind '{name}' is registered (known: {known}).")
    return kind


def job_kind_label(name: str) -> str:
    kind = _KINDS.get(name)
    return kind.label if kind else name


def job_kinds() -> list[JobKind]:
    return sorted(_KINDS.values(), key=lambda kind: kind.name)


def jobs_about(jobs: list[Any]) -> dict[int, JobAbout]:
    """What each job is about, one call per kind: a job whose kind says nothing (or whose app
    is not installed) is about nothing known."""
    by_kind: dict[str, list[Any]] = {}
    for job in jobs:
        by_kind.setdefault(job.kind, []).append(job)
    about: dict[int, JobAbout] = {}
    for name, of_kind in by_kind.items():
        kind = _KINDS.get(name)
        if kind is not None and kind.about is not None:
            about.update(kind.about(of_kind))
    return {job.pk: about.get(job.pk, NOTHING_KNOWN) for job in jobs}


def trainer_lookup(name: str) -> Trainer:
    found = TRAINERS.get(name)
    if found is None:
        known = ", ".join(sorted(TRAINERS)) or "none"
        raise LookupError(f"Unknown trainer '{name}': choose one of {known}.")
    return found


def produced_listeners() -> list[Callable[[Any, Any], None]]:
    return list(_PRODUCED_LISTENERS)


def watcher_hooks() -> list[Callable[[], None]]:
    return list(_WATCHER_HOOKS)

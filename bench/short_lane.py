"""How long short work waits behind long jobs: a move strategy clicked while long jobs hold and
wait for the CPU pool, from the click to its job running, with a real django-q2 cluster.

    python -m bench.short_lane [--workspaces 5] [--repeat 3]

Needs PostgreSQL, migrated (`make demo` does it): DATABASE_URL, or else the embedded server
(started here if need be). It makes
throwaway workspaces (bench-lane-*) and a one-slot CPU pool on a cluster of its own, the only
enabled CPU pool while it runs, and starts a worker cluster for it with the workers `serve`
gives a pool (its slot, the short lane, the background lane). Run it with no `make run`
serving: while it runs, the bench's pool is every workspace's default CPU pool.

Two scenarios, each clicked --repeat times:
- one long job of another workspace runs on the slot (the stand-in for a judge fit reading 600
  calls: what holds the slot does not change the line, only that it is long);
- --workspaces workspaces each with a long job, one running and the rest waiting for the slot.
The long jobs are Q-learning runs with no time cap and 50 million episodes, cancelled at the
end. The move strategy is the Train card's (training.cards.train_move_strategy): its time
budget makes it short work. The figure printed is the click-to-running time of each click; the
issue's before: 15.5 minutes behind one fit, over 44 minutes behind five workspaces' jobs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench.django_app import setup_django, workspaces_drop
from trainers.registry import ENGINES_KIND, Q_LEARNING_ONLINE

REPO = Path(__file__).resolve().parent.parent
LONG = {
    "algorithm": Q_LEARNING_ONLINE,
    "knobs": {"episodes": 50_000_000, "batch_episodes": 64, "time_budget_s": 0},
    "scenarios": ["young-professional-price"],
}


def _worker(cluster: str) -> subprocess.Popen:
    from django.conf import settings
    from django.db import connection

    db = connection.settings_dict
    url = f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "LEVERS9_Q_CLUSTER": cluster,
        "LEVERS9_Q_WORKERS": str(settings.Q_CLUSTER["workers"]),
    }
    return subprocess.Popen(  # noqa: S603 - our interpreter, our manage.py
        [sys.executable, "manage.py", "qcluster"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _state(workspace, job_id: int) -> str:
    from django_tenants.utils import schema_context

    from levers9.jobs.models import Job

    with schema_context(workspace.schema_name):
        return Job.objects.filter(pk=job_id).values_list("state", flat=True).first() or ""


def _wait_running(workspace, job_id: int, *, timeout: float) -> float | None:
    """Seconds until the job runs (or has already ended), None past the timeout."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if _state(workspace, job_id) in ("running", "finishing", "done"):
            return time.monotonic() - started
        time.sleep(0.2)
    return None


def _wait_released(workspace, job_id: int, *, timeout: float) -> None:
    """Until the job's cards are given back (its trainer ended; no watcher finishes it here)."""
    from django_tenants.utils import schema_context

    from levers9.jobs.models import Job
    from levers9.models import CardAllocation

    with schema_context(workspace.schema_name):
        allocation = Job.objects.get(pk=job_id).card_allocation_id
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if CardAllocation.objects.filter(pk=allocation, state="released").exists():
            return
        time.sleep(0.5)


def _long_job(workspace, pool) -> int:
    from django_tenants.utils import schema_context

    from levers9.jobs.services import job_start

    with schema_context(workspace.schema_name):
        return job_start(
            kind=ENGINES_KIND,
            trainer=Q_LEARNING_ONLINE,
            spec=LONG,
            pool=pool,
            title="bench: a long job",
            expected_seconds=None,
        ).pk


def _click_move_strategy(workspace) -> int:
    from django_tenants.utils import schema_context

    from arena.models import World
    from policies.models import PolicyVersion
    from training.cards import train_move_strategy

    with schema_context(workspace.schema_name):
        world = World.objects.get(slug="lettings")
        parent = PolicyVersion.objects.get(world=world, number=1)
        return train_move_strategy(world=world, parent=parent).pk


def _cancel_all(workspaces) -> None:
    from django_tenants.utils import schema_context

    from levers9.jobs.models import Job
    from levers9.jobs.services import JobError, job_cancel

    for workspace in workspaces:
        with schema_context(workspace.schema_name):
            for job in Job.objects.filter(state__in=Job.ACTIVE_STATES):
                with contextlib.suppress(JobError):
                    job_cancel(job=job)


def _scenario(name: str, workspaces, pool, *, long_jobs: int, repeat: int) -> list[float | None]:
    print(f"\n{name}")
    for index in range(long_jobs):
        job = _long_job(workspaces[index], pool)
        if index == 0 and _wait_running(workspaces[0], job, timeout=120) is None:
            raise SystemExit("the long job never started: is the worker up?")
    clicker = workspaces[-1]
    figures = []
    for attempt in range(repeat):
        job = _click_move_strategy(clicker)
        seconds = _wait_running(clicker, job, timeout=600)
        figures.append(seconds)
        shown = "still waiting after 600 s" if seconds is None else f"{seconds:.1f} s"
        print(f"  click {attempt + 1}: the move strategy ran after {shown}")
        # The next click once this one's trainer has ended: short work waits for short work,
        # and this bench measures the wait behind the long jobs.
        _wait_released(clicker, job, timeout=600)
    _cancel_all(workspaces)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspaces", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    arguments = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        setup_django(Path(scratch))
        from levers9.models import CardAllocation, GpuPool
        from levers9.pools import pools_ensure_defaults
        from levers9.services import workspace_create

        tag = uuid.uuid4().hex[:6]
        slugs = [f"bench-lane-{tag}-{index}" for index in range(arguments.workspaces + 1)]
        cluster = f"bench-lanes-{tag}"
        # The bench's pool is the only enabled CPU pool while it runs: the Train card's move
        # strategy goes to the default CPU pool (the others are enabled again at the end).
        pools_ensure_defaults()  # else the first workspace made would add local-cpu, enabled
        others = list(
            GpuPool.objects.filter(enabled=True, card_type__iexact="cpu").values_list(
                "pk", flat=True
            )
        )
        GpuPool.objects.filter(pk__in=others).update(enabled=False)
        pool = GpuPool.objects.create(
            name=cluster, card_type="cpu", card_count=1, cluster_name=cluster
        )
        worker = None
        try:
            workspaces = [
                workspace_create(
                    slug=slug, admin_email=f"owner@{slug}.test", password=secrets.token_urlsafe(16)
                ).workspace
                for slug in slugs
            ]
            worker = _worker(cluster)
            print(f"one-slot CPU pool {cluster}; load average {os.getloadavg()[0]:.1f}")
            _scenario(
                "another workspace's long job runs on the slot:",
                [workspaces[0], workspaces[-1]],
                pool,
                long_jobs=1,
                repeat=arguments.repeat,
            )
            _scenario(
                f"{arguments.workspaces} workspaces' long jobs, one running and the rest waiting:",
                workspaces,
                pool,
                long_jobs=arguments.workspaces,
                repeat=arguments.repeat,
            )
        finally:
            if worker is not None:
                os.killpg(worker.pid, 15)
                try:
                    worker.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    os.killpg(worker.pid, 9)
                    worker.wait()
            from django.db import connection

            connection.set_schema_to_public()
            CardAllocation.objects.filter(pool=pool).delete()
            pool.delete()
            GpuPool.objects.filter(pk__in=others).update(enabled=True)
            left = workspaces_drop(slugs)
            print(f"\nworkspaces left behind: {left}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Short work starts at once: a job expected to end within two minutes (by this workspace's
past runs, else its budget) asks in the CPU pool's short lane, beside the people's slot and the
background lane, so it never waits behind a long job. A waiting job says why, and for about
how long. Before the short lane, a 20-second move strategy waited for a 15-minute judge fit."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from django_tenants.utils import schema_context

from arena.models import World
from levers9.jobs.models import Job
from levers9.models import CardAllocation, GpuPool
from levers9.pools import PERSON_JOB, SHORT_JOB, cards_release
from policies.models import PolicyVersion
from tests.training.lanes import lane_job_place, lane_job_read, lane_job_start, lane_second_waiting
from training.cards import train_move_strategy


@pytest.fixture
def cpu_pool(db):
    return GpuPool.objects.create(
        name="cpu-one", card_type="cpu", card_count=1, cluster_name="cpu-one"
    )


def _holder(job: Job) -> str:
    return CardAllocation.objects.get(pk=job.card_allocation_id).holder_kind


def test_short_work_starts_at_once_beside_a_running_and_a_waiting_long_job(
    cpu_pool, workspace, other_workspace, queued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        long_fit = lane_job_start(other_workspace, cpu_pool, expected_seconds=900.0)
        waiting = lane_job_start(workspace, cpu_pool, expected_seconds=900.0)
        short = lane_job_start(workspace, cpu_pool, expected_seconds=20.0)
    assert lane_job_place(other_workspace, long_fit)
    assert not lane_job_place(workspace, waiting)
    # Before the short lane it stood behind both, for the fit's 15 minutes and more.
    assert lane_job_place(workspace, short)
    assert queued == [long_fit.pk, short.pk]
    assert (_holder(short), _holder(waiting)) == (SHORT_JOB, PERSON_JOB)


def test_short_work_waits_only_for_short_work_and_says_so(
    cpu_pool, workspace, queued, django_capture_on_commit_callbacks
):
    first, second, why = lane_second_waiting(
        workspace, cpu_pool, django_capture_on_commit_callbacks, expected_seconds=30.0
    )
    assert why == (
        "Short work (expected under 2 minutes): another short job is running in the short lane "
        "of cpu-one; long jobs never hold it. Expected to start within a minute."
    )
    cards_release(allocation_id=first.card_allocation_id)
    assert lane_job_place(workspace, second)


def test_a_waiting_long_job_says_for_about_how_long(
    cpu_pool, workspace, queued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        running = lane_job_start(workspace, cpu_pool, expected_seconds=600.0)
        ahead = lane_job_start(workspace, cpu_pool, expected_seconds=300.0)
        last = lane_job_start(workspace, cpu_pool, expected_seconds=300.0)
    assert lane_job_place(workspace, running)
    assert not lane_job_place(workspace, ahead)
    assert not lane_job_place(workspace, last)
    # The running job's 10 minutes, then the one ahead's 5.
    assert (
        lane_job_read(workspace, last)
        .metrics["waiting_why"]
        .endswith("Expected to start in about 15 minutes.")
    )
    # A job with no estimate ahead: no figure is made up.
    with django_capture_on_commit_callbacks(execute=False):
        unknown = lane_job_start(workspace, cpu_pool, expected_seconds=None)
        after = lane_job_start(workspace, cpu_pool, expected_seconds=60.0 * 10)
    lane_job_place(workspace, unknown)
    lane_job_place(workspace, after)
    assert "Expected" not in lane_job_read(workspace, after).metrics["waiting_why"]


def test_past_runs_make_a_job_short_and_a_card_pool_has_one_line(
    cpu_pool, workspace, queued, django_capture_on_commit_callbacks
):
    with schema_context(workspace.schema_name):
        now = timezone.now()
        Job.objects.create(
            kind="engines",
            trainer="q-learning-online",
            workspace_schema=workspace.schema_name,
            pool_name=cpu_pool.name,
            card_type="cpu",
            state=Job.State.DONE,
            started_at=now - timedelta(seconds=25),
            finished_at=now,
        )
    card_pool = GpuPool.objects.create(name="card-one", card_type="L4", card_count=1)
    with django_capture_on_commit_callbacks(execute=False):
        from_runs = lane_job_start(workspace, cpu_pool)  # no estimate given: its past run's 25 s
        on_cards = lane_job_start(workspace, card_pool, expected_seconds=20.0)
    assert _holder(from_runs) == SHORT_JOB
    assert CardAllocation.objects.get(pk=from_runs.card_allocation_id).expected_seconds == 25.0
    # The devices are the devices: no lane beside a pool of real cards.
    assert _holder(on_cards) == PERSON_JOB


def test_the_move_strategy_card_is_short_work_by_its_time_budget(
    in_workspace, django_capture_on_commit_callbacks
):
    world = World.objects.get(slug="lettings")
    parent = PolicyVersion.objects.get(world=world, number=1)
    with django_capture_on_commit_callbacks(execute=False):
        job = train_move_strategy(world=world, parent=parent)
    allocation = CardAllocation.objects.get(pk=job.card_allocation_id)
    assert allocation.holder_kind == SHORT_JOB
    # Q-learning's default time budget (90 s) and its loading.
    assert allocation.expected_seconds == pytest.approx(110.0)

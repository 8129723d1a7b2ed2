"""User jobs first: work nobody clicked (a judge refit after a freeze) waits in the CPU pool's
background lane, so a person's job starts at once beside a running or waiting refit, goes before
a waiting refit where there is one line, and the fair share between workspaces still holds in
both lanes. The job says why it waits."""

from __future__ import annotations

import pytest
from django_tenants.utils import schema_context

from levers9.jobs.models import Job
from levers9.jobs.services import job_cancel, pool_place_next
from levers9.models import CardAllocation, GpuPool
from levers9.pools import BACKGROUND_JOB, cards_release, cards_serving_order
from tests.training.lanes import lane_job_place, lane_job_read, lane_job_start, lane_second_waiting


@pytest.fixture
def cpu_pool(db):
    """One slot for people, as the local CPU pool has by default."""
    return GpuPool.objects.create(
        name="cpu-one", card_type="cpu", card_count=1, cluster_name="cpu-one"
    )


@pytest.fixture
def card_pool(db):
    return GpuPool.objects.create(name="card-one", card_type="L4", card_count=1, cluster_name="c1")


def test_a_persons_job_starts_at_once_beside_a_running_and_a_waiting_refit(
    cpu_pool, workspace, queued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        refit = lane_job_start(workspace, cpu_pool, background=True, title="Fit the judge (refit)")
        next_refit = lane_job_start(workspace, cpu_pool, background=True)
        move_strategy = lane_job_start(workspace, cpu_pool, title="Move strategy from v1")
    assert lane_job_place(workspace, refit)
    assert not lane_job_place(workspace, next_refit)  # one background job at a time
    # Before this change the refit held the pool's one slot for its 3-5 minutes.
    assert lane_job_place(workspace, move_strategy)
    assert queued == [refit.pk, move_strategy.pk]
    assert lane_job_read(workspace, move_strategy).state == Job.State.SUBMITTED
    allocation = CardAllocation.objects.get(pk=refit.card_allocation_id)
    assert allocation.holder_kind == BACKGROUND_JOB
    assert lane_job_read(workspace, refit).background
    assert not lane_job_read(workspace, move_strategy).background


def test_the_waiting_refit_says_why_it_waits(
    cpu_pool, workspace, owner_client, queued, django_capture_on_commit_callbacks
):
    _refit, waiting, why = lane_second_waiting(
        workspace, cpu_pool, django_capture_on_commit_callbacks, background=True
    )
    assert why == (
        "Background: another background job (a judge refit or a measurement) is running in the "
        "background lane of cpu-one; jobs a person starts never wait for it."
    )
    page = owner_client.get(f"/train/jobs/{waiting.pk}/").content.decode()
    assert "Background: another background job" in page
    assert "Background · waits for user jobs" in page


def test_a_persons_job_goes_before_a_waiting_background_job_on_one_line(
    card_pool, workspace, queued, django_capture_on_commit_callbacks
):
    """On a pool of real cards there is no second lane: the refit waits behind people."""
    with django_capture_on_commit_callbacks(execute=False):
        running = lane_job_start(workspace, card_pool)
        refit = lane_job_start(workspace, card_pool, background=True)
        person = lane_job_start(workspace, card_pool)
    assert lane_job_place(workspace, running)
    assert [line.allocation.holder_id for line in cards_serving_order(pool_id=card_pool.pk)] == [
        person.pk,
        refit.pk,
    ]
    assert not lane_job_place(workspace, refit)
    assert (
        "Background: waits for user jobs on card-one (1 job ahead)"
        in (lane_job_read(workspace, refit).metrics["waiting_why"])
    )
    cards_release(allocation_id=running.card_allocation_id)
    assert not lane_job_place(workspace, refit)  # the card is free, but a person's job waits
    pool_place_next(pool_id=card_pool.pk)
    assert queued == [running.pk, person.pk]
    cards_release(allocation_id=person.card_allocation_id)
    pool_place_next(pool_id=card_pool.pk)
    assert queued == [running.pk, person.pk, refit.pk]


def test_each_lane_is_placed_when_its_slot_frees(
    cpu_pool, workspace, queued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        refit, next_refit = (lane_job_start(workspace, cpu_pool, background=True) for _ in range(2))
        person, next_person = (lane_job_start(workspace, cpu_pool) for _ in range(2))
    for job in (refit, person):
        assert lane_job_place(workspace, job)
    for job in (next_refit, next_person):
        assert not lane_job_place(workspace, job)
    cards_release(allocation_id=refit.card_allocation_id)
    pool_place_next(pool_id=cpu_pool.pk)  # what the worker does as the refit ends
    assert queued == [refit.pk, person.pk, next_refit.pk]
    with schema_context(workspace.schema_name):
        job_cancel(job=Job.objects.get(pk=person.pk))
    pool_place_next(pool_id=cpu_pool.pk)
    assert queued[-1] == next_person.pk


def test_fair_shares_hold_in_both_lanes(
    cpu_pool, workspace, other_workspace, queued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        ours = [lane_job_start(workspace, cpu_pool, background=True) for _ in range(3)]
        theirs = lane_job_start(other_workspace, cpu_pool, background=True)
        rival_person = lane_job_start(other_workspace, cpu_pool)
    # acme's refits fill the background lane and its line; rival's person is not held back.
    assert lane_job_place(workspace, ours[0])
    assert lane_job_place(other_workspace, rival_person)
    for job in ours[1:]:
        assert not lane_job_place(workspace, job)
    assert not lane_job_place(other_workspace, theirs)
    # The background lane serves workspaces in turn too: rival's refit before acme's second.
    background_line = [
        line.allocation.holder_id
        for line in cards_serving_order(pool_id=cpu_pool.pk)
        if line.background
    ]
    assert background_line == [theirs.pk, ours[1].pk, ours[2].pk]
    cards_release(allocation_id=ours[0].card_allocation_id)
    pool_place_next(pool_id=cpu_pool.pk)
    assert queued[-1] == theirs.pk


def test_background_work_is_not_refused_by_the_workspaces_limits(
    cpu_pool, workspace, queued, django_capture_on_commit_callbacks
):
    from levers9.models import Workspace

    Workspace.objects.filter(pk=workspace.pk).update(queued_jobs_limit=1, running_jobs_limit=1)
    with django_capture_on_commit_callbacks(execute=False):
        person = lane_job_start(workspace, cpu_pool)
        refits = [lane_job_start(workspace, cpu_pool, background=True) for _ in range(2)]
    assert lane_job_place(workspace, person)
    # The workspace runs its one job, and the refit still runs: its lane is not the turn.
    assert lane_job_place(workspace, refits[0])


def test_the_api_and_the_admin_say_which_jobs_are_background(
    cpu_pool, workspace, owner_client, outsider_client, queued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        refit = lane_job_start(workspace, cpu_pool, background=True, title="Fit the judge (refit)")
    body = owner_client.get(f"/api/rl/jobs/{refit.pk}/").json()
    assert body["background"] is True
    listed = owner_client.get("/admin/jobs/job/?background__exact=1").content.decode()
    assert "background (yields to user jobs)" in listed
    # Another workspace sees none of it.
    assert outsider_client.get(f"/api/rl/jobs/{refit.pk}/").status_code in {401, 403, 404}

"""Fair shares of a pool: its line serves workspaces in turn, FIFO within each, and the place a
waiting job is shown is the place it is served at (one function decides both)."""

from __future__ import annotations

import pytest
from django_tenants.utils import schema_context

from levers9.jobs.models import Job
from levers9.jobs.services import job_place, job_start, pool_place_next
from levers9.models import CardAllocation, GpuPool, Workspace
from levers9.pools import (
    cards_queue_position,
    cards_queue_standing,
    cards_release,
    cards_request,
    cards_serving_order,
    cards_try_grant,
)


@pytest.fixture
def third_workspace(db):
    """A third workspace for the line (its requests live in the public schema; it needs no
    schema of its own)."""
    workspace = Workspace(schema_name="ws_third_fair", slug="third-fair", name="Third")
    workspace.auto_create_schema = False
    workspace.save()
    return workspace


@pytest.fixture
def one_card_pool(db):
    return GpuPool.objects.create(name="fair-one", card_type="L4", card_count=1, cluster_name="f1")


def _request(pool, workspace, holder_id: int, cards: int = 1) -> CardAllocation:
    with schema_context(workspace.schema_name):
        return cards_request(
            pool=pool,
            holder_kind="job",
            holder_id=holder_id,
            card_count=cards,
            label=str(holder_id),
        )


def _serve_until_empty(pool) -> list[int]:
    """What the watchers do: try every waiting request, let the one granted run and end."""
    granted: list[int] = []
    while waiting := list(CardAllocation.objects.filter(pool=pool, state="waiting")):
        newly = [a.holder_id for a in waiting if cards_try_grant(allocation_id=a.pk)]
        assert len(newly) == 1, "one card: exactly one request is next"
        granted += newly
        for allocation in CardAllocation.objects.filter(pool=pool, state="held"):
            cards_release(allocation_id=allocation.pk)
    return granted


def test_it_serves_workspaces_in_turn(one_card_pool, workspace, other_workspace, third_workspace):
    # acme queues three, then rival two, then the third workspace one.
    for holder_id in (1, 2, 3):
        _request(one_card_pool, workspace, holder_id)
    for holder_id in (21, 22):
        _request(one_card_pool, other_workspace, holder_id)
    _request(one_card_pool, third_workspace, 31)
    # First come first served would be 1, 2, 3, 21, 22, 31.
    assert _serve_until_empty(one_card_pool) == [1, 21, 31, 2, 22, 3]


def test_it_puts_a_newcomer_next_however_long_the_line(one_card_pool, workspace, other_workspace):
    first, *queued = [_request(one_card_pool, workspace, n) for n in range(1, 51)]
    assert cards_try_grant(allocation_id=first.pk)
    newcomer = _request(one_card_pool, other_workspace, 99)
    assert cards_queue_position(allocation_id=newcomer.pk) == 0
    assert cards_queue_position(allocation_id=queued[0].pk) == 1
    cards_release(allocation_id=first.pk)
    assert not cards_try_grant(allocation_id=queued[0].pk)
    assert cards_try_grant(allocation_id=newcomer.pk)


def test_it_serves_in_the_order_the_positions_said(
    one_card_pool, workspace, other_workspace, third_workspace
):
    requests = [
        _request(one_card_pool, owner, holder_id)
        for owner, holder_id in [
            (workspace, 1),
            (workspace, 2),
            (other_workspace, 21),
            (workspace, 3),
            (third_workspace, 31),
            (other_workspace, 22),
        ]
    ]
    said = sorted(requests, key=lambda request: cards_queue_position(allocation_id=request.pk))
    assert [cards_queue_position(allocation_id=r.pk) for r in said] == list(range(len(said)))
    assert _serve_until_empty(one_card_pool) == [request.holder_id for request in said]


def test_it_says_how_many_of_whose_jobs_are_ahead(one_card_pool, workspace, other_workspace):
    running = _request(one_card_pool, workspace, 1)
    assert cards_try_grant(allocation_id=running.pk)
    _request(one_card_pool, workspace, 2)
    _request(one_card_pool, workspace, 3)
    _request(one_card_pool, other_workspace, 21)
    ours = _request(one_card_pool, workspace, 4)
    theirs = _request(one_card_pool, other_workspace, 22)
    # The line: 21 (rival, never served here), 2, 22, 3, 4.
    standing = cards_queue_standing(allocation_id=ours.pk)
    assert (standing.ahead_of_others, standing.ahead_of_yours) == (2, 2)
    assert standing.sentence() == (
        "Waiting for a card on fair-one: 2 jobs of other workspaces and 2 of yours ahead; "
        "pools serve workspaces in turn."
    )
    rival = cards_queue_standing(allocation_id=theirs.pk)
    assert (rival.ahead_of_others, rival.ahead_of_yours) == (1, 1)


def test_it_holds_a_workspace_at_its_running_limit_back(db, workspace, other_workspace):
    Workspace.objects.filter(pk=workspace.pk).update(running_jobs_limit=1)
    pool = GpuPool.objects.create(name="fair-two", card_type="L4", card_count=2, cluster_name="f2")
    running = _request(pool, workspace, 1)
    assert cards_try_grant(allocation_id=running.pk)
    ours = _request(pool, workspace, 2)
    # A card is free, but the workspace already runs its one job.
    assert not cards_try_grant(allocation_id=ours.pk)
    standing = cards_queue_standing(allocation_id=ours.pk)
    assert standing.held_back
    assert "already runs 1 job, its limit of 1 at once" in standing.sentence()
    theirs = _request(pool, other_workspace, 21)
    assert [line.allocation.pk for line in cards_serving_order(pool_id=pool.pk)] == [
        theirs.pk,
        ours.pk,
    ]
    assert cards_try_grant(allocation_id=theirs.pk)
    cards_release(allocation_id=running.pk)
    cards_release(allocation_id=theirs.pk)
    assert cards_try_grant(allocation_id=ours.pk)


def _start(workspace, pool) -> Job:
    with schema_context(workspace.schema_name):
        return job_start(
            kind="engines", trainer="q-learning-online", spec={"algorithm": "x"}, pool=pool
        )


def test_it_places_the_next_workspace_when_a_card_frees(
    one_card_pool, workspace, other_workspace, monkeypatch, django_capture_on_commit_callbacks
):
    """What the worker calls when a job ends (pool_place_next) follows the same line."""
    queued: list[int] = []
    monkeypatch.setattr(
        "levers9.jobs.services.enqueue_in_workspace",
        lambda _path, job_id, *args, **kwargs: queued.append(job_id) or f"task-{job_id}",
    )
    with django_capture_on_commit_callbacks(execute=False):
        running, ours_next = _start(workspace, one_card_pool), _start(workspace, one_card_pool)
        theirs = _start(other_workspace, one_card_pool)
    with schema_context(workspace.schema_name):
        assert job_place(job_id=running.pk)
        assert not job_place(job_id=ours_next.pk)
        waiting = Job.objects.get(pk=ours_next.pk).metrics
    assert waiting["waiting_for_cards"] == 1
    assert "1 job of other workspaces and 0 of yours ahead" in waiting["waiting_why"]
    cards_release(allocation_id=running.card_allocation_id)
    pool_place_next(pool_id=one_card_pool.pk)
    assert queued == [running.pk, theirs.pk]
    with schema_context(other_workspace.schema_name):
        assert Job.objects.get(pk=theirs.pk).state == Job.State.SUBMITTED
    with schema_context(workspace.schema_name):
        assert Job.objects.get(pk=ours_next.pk).state == Job.State.PACKING


def test_the_train_page_says_where_a_waiting_job_stands(
    one_card_pool, workspace, other_workspace, owner_client, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        running = _start(workspace, one_card_pool)
        theirs = _start(other_workspace, one_card_pool)
        ours_next, ours_last = _start(workspace, one_card_pool), _start(workspace, one_card_pool)
    with schema_context(workspace.schema_name):
        assert cards_try_grant(allocation_id=running.card_allocation_id)
        for job in (ours_next, ours_last):
            assert not job_place(job_id=job.pk)
    page = owner_client.get("/train/").content.decode()
    # The line: the rival's job (never served here), then ours in the order they came.
    assert (
        "Waiting for a card on fair-one: 1 job of other workspaces and 0 of yours ahead; "
        "pools serve workspaces in turn." in page
    )
    assert "1 job of other workspaces and 1 of yours ahead" in page
    with schema_context(other_workspace.schema_name):
        assert cards_queue_position(allocation_id=theirs.card_allocation_id) == 0

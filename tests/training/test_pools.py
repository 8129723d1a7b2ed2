"""GPU pools: requests wait in order; cards are never double-booked."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections
from django_tenants.utils import schema_context

from levers9.models import CardAllocation, GpuPool
from levers9.pools import (
    CardRequestError,
    cards_queue_position,
    cards_release,
    cards_request,
    cards_try_grant,
)


@pytest.fixture
def one_card_pool(in_workspace):
    return GpuPool.objects.create(name="one-card", card_type="L4", card_count=1, cluster_name="one")


def _request(pool, holder_id, cards=1):
    return cards_request(pool=pool, holder_kind="job", holder_id=holder_id, card_count=cards)


def test_it_grants_in_order_and_one_at_a_time(one_card_pool):
    first, second, third = (_request(one_card_pool, n) for n in (1, 2, 3))
    assert not cards_try_grant(allocation_id=second.pk)  # first in line goes first
    assert cards_try_grant(allocation_id=first.pk)
    assert not cards_try_grant(allocation_id=second.pk)  # the one card is held
    assert cards_queue_position(allocation_id=third.pk) == 1
    cards_release(allocation_id=first.pk)
    assert not cards_try_grant(allocation_id=third.pk)
    assert cards_try_grant(allocation_id=second.pk)


def test_it_keeps_a_big_request_from_being_starved(in_workspace):
    node = GpuPool.objects.create(name="node", card_type="RTX", card_count=4, cluster_name="n")
    small = _request(node, 1, cards=2)
    assert cards_try_grant(allocation_id=small.pk)
    whole_node = _request(node, 2, cards=4)
    late_small = _request(node, 3, cards=2)
    assert not cards_try_grant(allocation_id=whole_node.pk)
    assert not cards_try_grant(allocation_id=late_small.pk)  # it would fit, but waits its turn
    cards_release(allocation_id=small.pk)
    assert cards_try_grant(allocation_id=whole_node.pk)


def test_it_refuses_requests_that_cannot_be_placed(one_card_pool):
    with pytest.raises(CardRequestError, match="has 1 card"):
        _request(one_card_pool, 1, cards=2)
    one_card_pool.enabled = False
    one_card_pool.save()
    with pytest.raises(CardRequestError, match="disabled"):
        _request(one_card_pool, 1)


def test_it_never_double_books_under_concurrent_grants(committed_pool):
    pool, allocation_ids, schema = committed_pool
    granted: list[int] = []

    def contend(allocation_id: int) -> None:
        try:
            with schema_context(schema):
                if cards_try_grant(allocation_id=allocation_id):
                    granted.append(allocation_id)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=contend, args=(i,)) for i in allocation_ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert granted == [allocation_ids[0]]


@pytest.fixture
def committed_pool(django_db_setup, django_db_blocker):
    """Committed rows: each thread has its own connection and must see them."""
    with django_db_blocker.unblock():
        from levers9.models import Workspace

        workspace = Workspace.objects.get(slug="acme")
        pool = GpuPool.objects.create(
            name="contended", card_type="L4", card_count=1, cluster_name="contended"
        )
        with schema_context(workspace.schema_name):
            ids = [_request(pool, n).pk for n in range(8)]
        yield pool, ids, workspace.schema_name
        CardAllocation.objects.filter(pool=pool).delete()
        pool.delete()
        connection.set_schema_to_public()

"""Card allocation on GPU pools (public schema): requests wait in order, cards never double-book.

Every grant happens under a row lock on the pool, so two workers deciding at once see each
other's grants. Placement is strictly first come, first served: a waiting request blocks the
ones behind it even if they would fit, so a four-card request is never starved by small ones.
"""

from __future__ import annotations

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Sum
from django.utils import timezone

from levers9.models import CardAllocation, GpuPool, Workspace

DEFAULT_CPU_POOL = "local-cpu"
DEFAULT_GPU_POOL = "rtx-pro-6000"


def pools_ensure_defaults() -> None:
    """The local CPU pool always; the attached four-card RTX PRO 6000 node, enabled only where
    one is attached (LEVERS9_GPU_POOL=1), so jobs never wait for a node that is not there."""
    GpuPool.objects.get_or_create(
        name=DEFAULT_CPU_POOL,
        defaults={
            "card_type": "cpu",
            "card_count": settings.LEVERS9_CPU_POOL_SLOTS,
            "cluster_name": "local-cpu",
            "position": 0,
        },
    )
    GpuPool.objects.get_or_create(
        name=DEFAULT_GPU_POOL,
        defaults={
            "card_type": "RTX PRO 6000",
            "card_count": 4,
            "cluster_name": "gpu-rtx-pro-6000",
            "enabled": settings.LEVERS9_GPU_POOL_ATTACHED,
            "position": 1,
        },
    )


def pool_default(*, gpu: bool) -> GpuPool:
    pools = GpuPool.objects.filter(enabled=True)
    pools = pools.exclude(card_type__iexact="cpu") if gpu else pools.filter(card_type__iexact="cpu")
    pool = pools.order_by("position").first()
    if pool is None:
        kind = "GPU" if gpu else "CPU"
        raise GpuPool.DoesNotExist(f"No enabled {kind} pool: add one in the platform admin.")
    return pool


class CardRequestError(ValueError):
    pass


def cards_request(
    *, pool: GpuPool, holder_kind: str, holder_id: int, card_count: int, label: str = ""
) -> CardAllocation:
    """Ask for cards for a holder of the current workspace; it waits until granted."""
    if card_count < 1:
        raise CardRequestError("Ask for at least one card.")
    if card_count > pool.card_count:
        raise CardRequestError(
            f"{pool.name} has {pool.card_count} card(s); {card_count} cannot be placed there."
        )
    if not pool.enabled:
        raise CardRequestError(f"{pool.name} is disabled; choose another pool.")
    workspace = Workspace.objects.get(schema_name=connection.schema_name)
    return CardAllocation.objects.create(
        pool=pool,
        workspace=workspace,
        holder_kind=holder_kind,
        holder_id=holder_id,
        holder_label=label[:200],
        card_count=card_count,
    )


def cards_try_grant(*, allocation_id: int) -> bool:
    """Grant the request if it is first in line and its cards are free. True once held."""
    with transaction.atomic():
        allocation = CardAllocation.objects.select_related("pool").get(pk=allocation_id)
        GpuPool.objects.select_for_update().get(pk=allocation.pool_id)
        allocation.refresh_from_db()
        if allocation.state != CardAllocation.State.WAITING:
            return allocation.state == CardAllocation.State.HELD
        waiting = CardAllocation.objects.filter(pool_id=allocation.pool_id, state="waiting")
        if waiting.filter(id__lt=allocation.id).exists():
            return False
        held = (
            CardAllocation.objects.filter(pool_id=allocation.pool_id, state="held").aggregate(
                cards=Sum("card_count")
            )["cards"]
            or 0
        )
        if held + allocation.card_count > allocation.pool.card_count:
            return False
        CardAllocation.objects.filter(pk=allocation.pk, state="waiting").update(
            state=CardAllocation.State.HELD, granted_at=timezone.now()
        )
        return True


def cards_release(*, allocation_id: int | None) -> bool:
    """Give the cards back (or drop the request). True if this call released them."""
    if allocation_id is None:
        return False
    return (
        CardAllocation.objects.filter(
            pk=allocation_id, state__in=[CardAllocation.State.WAITING, CardAllocation.State.HELD]
        ).update(state=CardAllocation.State.RELEASED, released_at=timezone.now())
        == 1
    )


def cards_queue_position(*, allocation_id: int) -> int:
    """How many requests wait ahead of this one (0 when it is next or held)."""
    allocation = CardAllocation.objects.get(pk=allocation_id)
    if allocation.state != CardAllocation.State.WAITING:
        return 0
    return CardAllocation.objects.filter(
        pool_id=allocation.pool_id, state="waiting", id__lt=allocation.id
    ).count()

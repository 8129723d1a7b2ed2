"""Card allocation on GPU pools (public schema): requests wait in line, cards never double-book.

Every grant happens under a row lock on the pool, so two workers deciding at once see each
other's grants. The pools are shared, so the line serves workspaces in turn (round robin among
the workspaces with waiting requests, the one served longest ago first) and each workspace's own
requests first come, first served: one workspace queueing a hundred jobs delays another's by
one job, not a hundred. Only the head of the line may be granted: a waiting request blocks the
ones behind it even if they would fit, so a four-card request is never starved by small ones.
One function decides the order (cards_serving_order); granting, the position a job shows and
the placement of the next job all read it, so what a job is told is what happens.

A CPU pool serves three lanes, each with its own slots and its own line (in the same order):
- people's jobs (PERSON_JOB): the pool's own slots;
- short work (SHORT_JOB: a job expected to end within SHORT_JOB_SECONDS, by this workspace's
  past runs or its budget, levers9.jobs.estimates): SHORT_LANE_SLOTS beside them, so a
  20-second move strategy starts at once however long the jobs holding or waiting for the
  pool's slots run. A lane rather than suspending or time-slicing the long jobs: a trainer
  holds a model in memory and threads mid-step, and pausing it costs the long job its whole
  share while the short one runs, where a lane costs it a core's worth for under two minutes;
- work nobody clicked (BACKGROUND_JOB: a judge refit after a freeze, an automatic
  measurement): BACKGROUND_LANE_SLOTS, so a refit never delays a person's job (its trainer
  also runs on one thread at a lower priority: levers9.jobs.runner).
On a pool of real cards, where an extra lane would double-book a device, there is one line:
short work is not told apart, and background work waits behind every person's request.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Max, Sum
from django.utils import timezone

from levers9.models import CardAllocation, GpuPool, Workspace

DEFAULT_CPU_POOL = "local-cpu"
DEFAULT_GPU_POOL = "rtx-pro-6000"

# Who holds a request: a job a person started, short work, a job the platform started itself,
# an endpoint.
PERSON_JOB = "job"
SHORT_JOB = "short-job"
BACKGROUND_JOB = "background-job"
JOB_HOLDERS = (PERSON_JOB, SHORT_JOB, BACKGROUND_JOB)
# Background jobs that run at once on a CPU pool, on top of its slots: one, so refits queue
# behind each other (coalesced per world by whoever starts them) and not behind people.
BACKGROUND_LANE_SLOTS = 1
# Short jobs that run at once on a CPU pool, on top of its slots and the background lane: one,
# so short work waits at most for other short work (each under SHORT_JOB_SECONDS).
SHORT_LANE_SLOTS = 1
# A job expected to end within this many seconds is short work (the same two minutes over
# which a job asks to be confirmed: levers9.jobs.estimates.CONFIRM_OVER_SECONDS).
SHORT_JOB_SECONDS = 120.0

# The lanes of a CPU pool, in the order a page lists them (cards_serving_order).
PEOPLE_LANE, SHORT_LANE, BACKGROUND_LANE = "people", "short", "background"
LANES = (PEOPLE_LANE, SHORT_LANE, BACKGROUND_LANE)
_LANE_OF_HOLDER = {PERSON_JOB: PEOPLE_LANE, SHORT_JOB: SHORT_LANE, BACKGROUND_JOB: BACKGROUND_LANE}
_LANE_SLOTS = {SHORT_LANE: SHORT_LANE_SLOTS, BACKGROUND_LANE: BACKGROUND_LANE_SLOTS}


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
    *,
    pool: GpuPool,
    holder_kind: str,
    holder_id: int,
    card_count: int,
    label: str = "",
    expected_seconds: float | None = None,
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
        expected_seconds=expected_seconds,
    )


def is_background(allocation: CardAllocation) -> bool:
    """Whether a request is work nobody clicked (it waits in the background lane)."""
    return allocation.holder_kind == BACKGROUND_JOB


def lane_of(allocation: CardAllocation) -> str:
    """The lane a request is served from on a CPU pool (an endpoint's: the people's)."""
    return _LANE_OF_HOLDER.get(allocation.holder_kind, PEOPLE_LANE)


def _in_lane(allocations, *, lane: str | None):
    """Only one lane's requests, or all of them (None)."""
    if lane is None:
        return allocations
    if lane == PEOPLE_LANE:  # an endpoint's cards are held in the people's lane too
        others = [holder for holder, its_lane in _LANE_OF_HOLDER.items() if its_lane != lane]
        return allocations.exclude(holder_kind__in=others)
    holders = [holder for holder, its_lane in _LANE_OF_HOLDER.items() if its_lane == lane]
    return allocations.filter(holder_kind__in=holders)


def _cards_held(pool_id: int, *, lane: str | None = None) -> int:
    """Cards held on the pool: all of them, or only one lane's."""
    held = _in_lane(
        CardAllocation.objects.filter(pool_id=pool_id, state=CardAllocation.State.HELD),
        lane=lane,
    )
    return held.aggregate(cards=Sum("card_count"))["cards"] or 0


def _fits(allocation: CardAllocation, pool: GpuPool) -> bool:
    """Whether the request's cards are free in its lane."""
    if not pool.is_cpu:  # one lane: the devices are the devices
        return _cards_held(pool.pk) + allocation.card_count <= pool.card_count
    lane = lane_of(allocation)
    slots = _LANE_SLOTS.get(lane, pool.card_count)
    return _cards_held(pool.pk, lane=lane) + allocation.card_count <= slots


def _lane(line: list[InLine], *, pool: GpuPool, lane: str) -> list[InLine]:
    """The part of the line a request of this kind is served from: its own lane on a CPU pool,
    the whole line elsewhere (where the background's requests stand last)."""
    if not pool.is_cpu:
        return line
    return [in_line for in_line in line if in_line.lane == lane]


def cards_try_grant(*, allocation_id: int) -> bool:
    """Grant the request if it is next in line and its cards are free. True once held."""
    with transaction.atomic():
        allocation = CardAllocation.objects.select_related("pool").get(pk=allocation_id)
        GpuPool.objects.select_for_update().get(pk=allocation.pool_id)
        allocation.refresh_from_db()
        if allocation.state != CardAllocation.State.WAITING:
            return allocation.state == CardAllocation.State.HELD
        # Cheap first: while the lane is full (the usual case) there is no order to work out.
        if not _fits(allocation, allocation.pool):
            return False
        line = _lane(
            cards_serving_order(pool_id=allocation.pool_id),
            pool=allocation.pool,
            lane=lane_of(allocation),
        )
        head = line[0] if line else None
        if head is None or head.allocation.pk != allocation.pk or head.held_back:
            return False
        # The running limit spans pools, so two pools granting to one workspace in the same
        # instant may let it run one job over its limit: harmless, and no lock across pools.
        return (
            CardAllocation.objects.filter(pk=allocation.pk, state="waiting").update(
                state=CardAllocation.State.HELD, granted_at=timezone.now()
            )
            == 1
        )


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


# --- the line: who is next --------------------------------------------------------------

# Before any grant: a workspace never served on a pool goes before one that was.
_NEVER_SERVED = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True)
class InLine:
    """A waiting request at its place in the line."""

    allocation: CardAllocation
    # Its workspace already runs its limit of jobs: it waits at the back until one ends.
    held_back: bool

    @property
    def background(self) -> bool:
        return is_background(self.allocation)

    @property
    def lane(self) -> str:
        return lane_of(self.allocation)


def running_jobs_by_workspace(workspace_ids: set[int]) -> dict[int, int]:
    """How many jobs a person started each workspace runs, on every pool (the running limit's
    count: background and short work have lanes of their own and do not use up a workspace's
    turn)."""
    rows = (
        CardAllocation.objects.filter(
            workspace_id__in=workspace_ids,
            holder_kind=PERSON_JOB,
            state=CardAllocation.State.HELD,
        )
        .order_by()
        .values_list("workspace_id")
        .annotate(running=Count("id"))
    )
    return dict(rows)


def _last_served(pool_id: int, workspace_ids: set[int], *, lane: str) -> dict[int, datetime]:
    """When each workspace was last served in one lane of the pool (each lane takes turns)."""
    served = _in_lane(
        CardAllocation.objects.filter(
            pool_id=pool_id, workspace_id__in=workspace_ids, granted_at__isnull=False
        ),
        lane=lane,
    )
    rows = (
        served.order_by()  # the model's ordering would split the groups
        .values_list("workspace_id")
        .annotate(last=Max("granted_at"))
    )
    return dict(rows)


def cards_serving_order(*, pool_id: int) -> list[InLine]:
    """The waiting requests of a pool in the order they will be granted.

    Round k of the line holds each waiting workspace's k-th oldest request; within a round the
    workspace served longest ago on this pool goes first (never served: first of all, then by
    its oldest request). Serving a workspace moves it to the back of the next round, so
    workspaces with waiting work take turns. Jobs of a workspace at its running limit wait
    behind everyone else's. Short and background requests come after all of those, each lane
    in turns of its own (on a CPU pool each lane is served on its own: cards_try_grant).
    """
    waiting = list(
        CardAllocation.objects.filter(pool_id=pool_id, state=CardAllocation.State.WAITING)
        .select_related("workspace")
        .order_by("id")
    )
    workspace_ids = {allocation.workspace_id for allocation in waiting}
    last_served = {lane: _last_served(pool_id, workspace_ids, lane=lane) for lane in LANES}
    running = running_jobs_by_workspace(workspace_ids)
    first_request: dict[tuple[str, int], int] = {}
    rounds: Counter[tuple[str, int]] = Counter()
    keyed = []
    for allocation in waiting:
        workspace = allocation.workspace
        lane = lane_of(allocation)
        turn = (lane, workspace.pk)
        first_request.setdefault(turn, allocation.pk)
        held_back = (
            allocation.holder_kind == PERSON_JOB
            and running.get(workspace.pk, 0) >= workspace.running_jobs_limit
        )
        key = (
            LANES.index(lane),
            held_back,
            rounds[turn],
            last_served[lane].get(workspace.pk, _NEVER_SERVED),
            first_request[turn],
            allocation.pk,
        )
        rounds[turn] += 1
        keyed.append((key, InLine(allocation=allocation, held_back=held_back)))
    return [in_line for _key, in_line in sorted(keyed, key=lambda pair: pair[0])]


@dataclass(frozen=True)
class QueueStanding:
    """Where a request stands in its pool's line, why it waits, and for about how long."""

    pool_name: str
    ahead_of_yours: int
    ahead_of_others: int
    running_jobs: int = 0
    running_jobs_limit: int = 0
    held_back: bool = False
    # The lane it waits in (a CPU pool's: levers9.pools.LANES), whether the pool has lanes at
    # all, and whether its lane is busy now.
    lane: str = PEOPLE_LANE
    own_lane: bool = False
    lane_busy: bool = False
    # About how long until it starts, by the expected times of what holds and waits in its lane
    # (None: something there has no estimate, or it is held back).
    wait_seconds: float | None = None

    @property
    def background(self) -> bool:
        return self.lane == BACKGROUND_LANE

    @property
    def ahead(self) -> int:
        return self.ahead_of_yours + self.ahead_of_others

    def sentence(self) -> str:
        """What the Train page says of a waiting job."""
        if self.background:
            why = self._background_sentence()
        elif self.lane == SHORT_LANE and self.own_lane:
            why = self._short_sentence()
        elif self.held_back:
            why = (
                f"Waiting: this workspace already runs {_jobs(self.running_jobs)}, its limit "
                f"of {self.running_jobs_limit} at once; it goes back in line on {self.pool_name} "
                "when one of them ends (a platform operator can raise the limit)."
            )
        elif not self.ahead:
            why = f"Next in line on {self.pool_name}: it starts as soon as a card is free."
        else:
            why = (
                f"Waiting for a card on {self.pool_name}: {_jobs(self.ahead_of_others)} of other "
                f"workspaces and {self.ahead_of_yours} of yours ahead; pools serve workspaces in "
                "turn."
            )
        return f"{why} {self.wait_words()}".rstrip()

    def wait_words(self) -> str:
        """ "Expected to start in about 4 minutes." ("" when not known)."""
        if self.wait_seconds is None:
            return ""
        if self.wait_seconds < 60:
            return "Expected to start within a minute."
        minutes = max(1, round(self.wait_seconds / 60))
        return f"Expected to start in about {minutes} minute{'s' if minutes != 1 else ''}."

    def _short_sentence(self) -> str:
        if self.ahead:
            where = f"{_jobs(self.ahead)} of short work ahead in"
        elif self.lane_busy:
            where = "another short job is running in"
        else:
            where = "next in"
        return (
            f"Short work (expected under {round(SHORT_JOB_SECONDS / 60)} minutes): {where} the "
            f"short lane of {self.pool_name}; long jobs never hold it."
        )

    def _background_sentence(self) -> str:
        if not self.own_lane:
            return (
                f"Background: waits for user jobs on {self.pool_name} "
                f"({_jobs(self.ahead)} ahead); jobs a person starts go first."
            )
        if self.ahead:
            where = f"{_jobs(self.ahead)} of background work ahead in"
        elif self.lane_busy:
            where = "another background job (a judge refit or a measurement) is running in"
        else:
            where = "next in"
        return (
            f"Background: {where} the background lane of {self.pool_name}; jobs a person "
            "starts never wait for it."
        )


def _jobs(count: int) -> str:
    return f"{count} job" if count == 1 else f"{count} jobs"


def _wait_seconds(
    *, pool: GpuPool, lane: str | None, ahead: list[CardAllocation], card_count: int
) -> float | None:
    """About how long until a request with `ahead` in front of it starts: the cards held in its
    lane free up as their holders' expected times run out, and each request ahead takes the
    first cards free for its own expected time. None where any of them has no estimate."""
    slots = pool.card_count if lane is None else _LANE_SLOTS.get(lane, pool.card_count)
    held = _in_lane(
        CardAllocation.objects.filter(pool_id=pool.pk, state=CardAllocation.State.HELD),
        lane=lane,
    )
    now = timezone.now()
    free_at: list[float] = []
    for allocation in held:
        if allocation.expected_seconds is None or allocation.granted_at is None:
            return None
        elapsed = (now - allocation.granted_at).total_seconds()
        free_at += [max(0.0, allocation.expected_seconds - elapsed)] * allocation.card_count
    free_at += [0.0] * max(0, slots - len(free_at))
    for allocation in ahead:
        if allocation.expected_seconds is None:
            return None
        free_at.sort()
        start = free_at[allocation.card_count - 1]
        free_at[: allocation.card_count] = [start + allocation.expected_seconds] * (
            allocation.card_count
        )
    free_at.sort()
    return free_at[min(card_count, len(free_at)) - 1]


def cards_queue_standing(*, allocation_id: int) -> QueueStanding:
    """Where the request stands in the line cards_try_grant serves (nothing ahead once held)."""
    allocation = CardAllocation.objects.select_related("pool", "workspace").get(pk=allocation_id)
    pool = allocation.pool
    lane = (
        lane_of(allocation)
        if pool.is_cpu
        else (BACKGROUND_LANE if is_background(allocation) else PEOPLE_LANE)
    )
    if allocation.state != CardAllocation.State.WAITING:
        return QueueStanding(
            pool_name=pool.name,
            ahead_of_yours=0,
            ahead_of_others=0,
            lane=lane,
            own_lane=pool.is_cpu,
        )
    line = _lane(cards_serving_order(pool_id=pool.pk), pool=pool, lane=lane_of(allocation))
    place = next(
        (index for index, in_line in enumerate(line) if in_line.allocation.pk == allocation.pk),
        len(line),
    )
    ahead = [in_line.allocation for in_line in line[:place]]
    yours = sum(1 for other in ahead if other.workspace_id == allocation.workspace_id)
    held_back = place < len(line) and line[place].held_back
    running = running_jobs_by_workspace({allocation.workspace_id})
    return QueueStanding(
        pool_name=pool.name,
        ahead_of_yours=yours,
        ahead_of_others=len(ahead) - yours,
        running_jobs=running.get(allocation.workspace_id, 0),
        running_jobs_limit=allocation.workspace.running_jobs_limit,
        held_back=held_back,
        lane=lane,
        own_lane=pool.is_cpu,
        lane_busy=pool.is_cpu and _cards_held(pool.pk, lane=lane) > 0,
        wait_seconds=None
        if held_back
        else _wait_seconds(
            pool=pool,
            lane=lane if pool.is_cpu else None,
            ahead=ahead,
            card_count=allocation.card_count,
        ),
    )


def cards_queue_position(*, allocation_id: int) -> int:
    """How many requests will be served before this one (0 when it is next or held)."""
    return cards_queue_standing(allocation_id=allocation_id).ahead

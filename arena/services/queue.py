"""The Duel's queue and picks: serving a reviewer the first free pair in the order asked
(weakest first, or most informative first), reserved for a while, skipping, recording a
pick exactly once, asking for another opinion and releasing reservations."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import (
    Case,
    Exists,
    F,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.utils import timezone

from arena.errors import DuelBadInput, DuelConflict
from arena.judge.rubric import DIMENSIONS
from arena.models import DuelPair, PairSkip, Pick, World
from arena.selectors import (
    QueueSelection,
    duel_pair_get,
    duel_pairs_shown,
    reply_authors,
    reply_source_label,
)
from arena.services.pairs import duel_pairs_request

REASONS: tuple[str, ...] = DIMENSIONS
# How long a served pair stays with its reviewer; after that the queue may serve it again.
RESERVATION = timedelta(minutes=5)


def queue_ordered(pairs: QuerySet[DuelPair], order: str = "weakest") -> QuerySet[DuelPair]:
    """Pairs in the queue's order. "weakest": the lowest mean judge total first.
    "informative": the smallest gap between the two replies' judge totals first (the pair's
    own judge, as it scored them when it made the pair), where the judge is least sure which
    reply is better; ties as "weakest" breaks them. A pair with no gap (no judgements) comes
    after every pair that has one. Each order has its partial index (arena.models.DuelPair)."""
    if order == "informative":
        return pairs.order_by(F("judge_gap").asc(nulls_last=True), "judge_total", "id")
    return pairs.order_by("judge_total", "id")


def queue_first_free(
    *, world: World, reviewer, selection: QueueSelection, now
) -> QuerySet[DuelPair]:
    """The first pair the reviewer may claim now, in the selection's order, locked with SKIP
    LOCKED (the claim's subquery; a bench EXPLAINs it)."""
    picked = Pick.objects.filter(pair=OuterRef("pk"), reviewer=reviewer)
    skipped = PairSkip.objects.filter(pair=OuterRef("pk"), reviewer=reviewer)
    free = Q(reserved_until__isnull=True) | Q(reserved_until__lte=now)
    return (
        queue_ordered(
            selection.apply(DuelPair.objects.filter(world=world, is_open=True))
            .filter(free)
            .filter(~Exists(picked), ~Exists(skipped)),
            selection.order,
        )
        .select_for_update(skip_locked=True, of=("self",))
        .values("pk")[:1]
    )


def _claim(world: World, reviewer, selection: QueueSelection, now) -> DuelPair | None:
    """Reserve the first free pair in the selection's order for the reviewer: one UPDATE
    whose subquery locks the pair it picks with SKIP LOCKED, so two reviewers claiming at the
    same instant get two different pairs and neither waits for the other."""
    first_free = queue_first_free(world=world, reviewer=reviewer, selection=selection, now=now)
    until = now + RESERVATION
    with transaction.atomic():
        claimed = DuelPair.objects.filter(pk__in=Subquery(first_free)).update(
            reserved_by=reviewer, reserved_until=until
        )
    if not claimed:
        return None
    # The reservation's own time stamp finds the claimed pair again.
    return duel_pairs_shown().filter(reserved_by=reviewer, reserved_until=until).first()


def duel_next(
    *, world: World, reviewer, selection: QueueSelection | None = None, generate: bool = True
) -> DuelPair | None:
    """Serve the reviewer the first open pair nobody else holds, in the selection's order
    (weakest first unless it asks for most informative first), reserved for five minutes.

    Asking again while holding a pair (a reload, a second tab) serves the same pair. When the
    queue has nothing left for this reviewer, a new batch is generated first.
    """
    selection = selection or QueueSelection()
    now = timezone.now()
    mine = DuelPair.objects.filter(
        world=world, reserved_by=reviewer, reserved_until__gt=now, is_open=True
    )
    # Usually nothing (the last pick let the pair go) or the one pair being looked at.
    held = list(mine.order_by().values_list("pk", flat=True)[:10])
    if held:
        matching = queue_ordered(
            selection.apply(duel_pairs_shown().filter(pk__in=held)), selection.order
        ).first()
        if matching is not None:
            matching.reserved_until = now + RESERVATION
            DuelPair.objects.filter(pk=matching.pk, reserved_by=reviewer).update(
                reserved_until=matching.reserved_until
            )
            return matching
        # What the reviewer holds outside this selection is let go, so nobody waits for it.
        DuelPair.objects.filter(pk__in=held, reserved_by=reviewer).update(
            reserved_by=None, reserved_until=None
        )
    pair = _claim(world, reviewer, selection, now)
    if pair is None and generate:
        duel_pairs_request(world=world, scenario=selection.scenario or None)
        pair = _claim(world, reviewer, selection, timezone.now())
    return pair


def duel_skip(*, pair: DuelPair, reviewer) -> None:
    """The reviewer passes: the pair goes back to the queue, never again to this reviewer."""
    with transaction.atomic():
        PairSkip.objects.get_or_create(pair=pair, reviewer=reviewer)
        DuelPair.objects.filter(pk=pair.pk, reserved_by=reviewer).update(
            reserved_by=None, reserved_until=None
        )


def pick_reasons_clean(reasons: Any) -> list[str]:
    """The reasons as a list in rubric order, or DuelBadInput naming the unknown ones."""
    if reasons is None or reasons == "":
        return []
    if isinstance(reasons, str):
        reasons = [reason.strip() for reason in reasons.split(",") if reason.strip()]
    if not isinstance(reasons, list | tuple) or not all(isinstance(r, str) for r in reasons):
        raise DuelBadInput("'reasons' must be a list of reason names.")
    unknown = [reason for reason in reasons if reason not in REASONS]
    if unknown:
        raise DuelBadInput(
            f"Unknown reason(s): {', '.join(repr(reason) for reason in unknown)}. "
            f"Reasons are {', '.join(REASONS)}."
        )
    return [reason for reason in REASONS if reason in reasons]


def _side_clean(chosen: Any) -> str:
    side = str(chosen or "").strip().upper()
    if side not in ("A", "B"):
        raise DuelBadInput(f"'chosen' must be 'A' or 'B', not {chosen!r}.")
    return side


def pick_submit(*, pair_id: Any, reviewer, chosen: Any, reasons: Any = None) -> Pick:
    """Record the reviewer's preference on a pair they hold.

    Refused, with nothing written: an unknown reason or side, a pair not in this workspace,
    a frozen pair, a pair the reviewer already picked or does not hold.
    """
    side = _side_clean(chosen)
    cleaned_reasons = pick_reasons_clean(reasons)
    pair = duel_pair_get(pair_id=pair_id)
    if pair.frozen_in_id is not None:
        raise DuelConflict(
            f"Pair {pair.pk} was frozen into {pair.frozen_in.label} and takes no more picks: "
            "ask for the next pair."
        )
    if pair.reserved_by_id != reviewer.pk:
        if Pick.objects.filter(pair=pair, reviewer=reviewer).exists():
            raise DuelConflict(
                f"You already picked pair {pair.pk}; each reviewer picks a pair once."
            )
        held_by_other = (
            pair.reserved_by_id is not None
            and pair.reserved_until is not None
            and pair.reserved_until > timezone.now()
        )
        raise DuelConflict(
            f"You do not hold pair {pair.pk}: "
            + (
                "another reviewer holds it now."
                if held_by_other
                else "ask for the next pair, then pick the one you were served."
            )
        )
    chosen_reply, rejected_reply = (
        (pair.reply_a, pair.reply_b) if side == "A" else (pair.reply_b, pair.reply_a)
    )
    authors = reply_authors([chosen_reply, rejected_reply])
    try:
        with transaction.atomic():
            # The pick goes in first: a freeze locks the picks table and then closes pairs,
            # so taking the table before the pair's row keeps the same order (no deadlock).
            pick = Pick.objects.create(
                pair=pair,
                world=pair.world,
                chosen_side=side,
                chosen_reply=chosen_reply,
                rejected_reply=rejected_reply,
                chosen_source=reply_source_label(chosen_reply, authors),
                rejected_source=reply_source_label(rejected_reply, authors),
                reasons=cleaned_reasons,
                reviewer=reviewer,
                reviewer_name=reviewer.get_username(),
            )
            # The claim: only the holder's update matches, and only once (healthchecks-style);
            # otherwise the pick above is rolled back.
            claimed = DuelPair.objects.filter(
                pk=pair.pk, reserved_by=reviewer, frozen_in__isnull=True
            ).update(
                reserved_by=None,
                reserved_until=None,
                pick_count=F("pick_count") + 1,
                # Right-hand sides read the old row: old count + 1 < wanted keeps it open.
                is_open=Case(
                    When(pick_count__lt=F("picks_wanted") - 1, then=Value(True)),
                    default=Value(False),
                ),
            )
            if claimed != 1:
                raise DuelConflict(
                    f"Pair {pair.pk} was frozen or served to someone else while you picked: "
                    "ask for the next pair."
                )
            return pick
    except IntegrityError:
        raise DuelConflict(
            f"You already picked pair {pair.pk}; each reviewer picks a pair once."
        ) from None


def duel_pairs_request_opinion(*, pairs: QuerySet[DuelPair]) -> int:
    """Ask one more reviewer for each of these (not frozen) pairs: back in the queue."""
    return pairs.filter(frozen_in__isnull=True).update(
        picks_wanted=F("pick_count") + 1, is_open=True
    )


def duel_reservations_release(*, pairs: QuerySet[DuelPair]) -> int:
    return pairs.exclude(reserved_by=None).update(reserved_by=None, reserved_until=None)

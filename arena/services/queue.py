"""The Duel's queue and picks: serving a reviewer the first free pair in the order asked
(weakest first, or most informative first), reserved for a while, skipping, recording a
pick exactly once (a preference, a tie or both bad, with an optional note), undoing one's
own last pick until it is frozen, asking for another opinion and releasing reservations."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import (
    Case,
    Exists,
    F,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.utils import timezone

from arena.errors import DuelBadInput, DuelConflict, DuelNotFound
from arena.judge.world_dimensions import world_dimension_names
from arena.models import DuelPair, PairSkip, Pick, PreferenceVersion, World
from arena.selectors import (
    QueueSelection,
    duel_pair_get,
    duel_pairs_shown,
    picks_frozen_up_to,
    reply_authors,
    reply_source_label,
)
from arena.services.pairs import duel_pairs_request
from trainers.judge.rubric import DIMENSIONS

# The reasons of a world that keeps the description's seven; a world's own are its rubric's
# dimensions (arena.judge.world_dimensions.world_dimension_names).
REASONS: tuple[str, ...] = DIMENSIONS
# How long a served pair stays with its reviewer; after that the queue may serve it again.
RESERVATION = timedelta(minutes=5)
# A note is a reviewer's remark on one pick, not an essay: kept short so a page of picks and
# a frozen version stay readable.
NOTE_MAX_CHARS = 1000
PICK_KINDS: tuple[str, ...] = tuple(Pick.Kind.values)


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


def pick_reasons_clean(reasons: Any, world: World | None = None) -> list[str]:
    """The reasons as a list in the order of the world's rubric (the seven without a world),
    or DuelBadInput naming `reasons` and the unknown ones."""
    names = world_dimension_names(world)
    if reasons is None or reasons == "":
        return []
    if isinstance(reasons, str):
        reasons = [reason.strip() for reason in reasons.split(",") if reason.strip()]
    if not isinstance(reasons, list | tuple) or not all(isinstance(r, str) for r in reasons):
        raise DuelBadInput("'reasons' must be a list of reason names.")
    unknown = [reason for reason in reasons if reason not in names]
    if unknown:
        raise DuelBadInput(
            f"Unknown reason(s): {', '.join(repr(reason) for reason in unknown)}"
            + (f" in {world.name}" if world is not None else "")
            + f". 'reasons' may be any of {', '.join(names)}."
        )
    return [reason for reason in names if reason in reasons]


def _side_clean(chosen: Any) -> str:
    side = str(chosen or "").strip().upper()
    if side not in ("A", "B"):
        raise DuelBadInput(f"'chosen' must be 'A' or 'B', not {chosen!r}.")
    return side


def pick_kind_clean(kind: Any) -> str:
    """The pick's kind ("preference" when none is given), or DuelBadInput naming `kind`."""
    cleaned = str(kind or Pick.Kind.PREFERENCE).strip().lower()
    if cleaned not in PICK_KINDS:
        raise DuelBadInput(f"'kind' must be one of {', '.join(PICK_KINDS)}, not {kind!r}.")
    return cleaned


def pick_note_clean(note: Any) -> str:
    """The note as kept (surrounding blanks dropped), or DuelBadInput naming `note`."""
    if note is None:
        return ""
    if not isinstance(note, str):
        raise DuelBadInput("'note' must be text.")
    cleaned = note.strip()
    if len(cleaned) > NOTE_MAX_CHARS:
        raise DuelBadInput(
            f"'note' is {len(cleaned)} characters; a note holds at most {NOTE_MAX_CHARS}: "
            "shorten it."
        )
    return cleaned


def pick_submit(
    *,
    pair_id: Any,
    reviewer,
    chosen: Any = None,
    reasons: Any = None,
    kind: Any = None,
    note: Any = None,
) -> Pick:
    """Record the reviewer's verdict on a pair they hold: a preference for `chosen` ("A" or
    "B"), or with `kind` a tie or both bad (no side: chosen and rejected are then A and B as
    shown), with the reasons ticked and an optional note.

    Refused, with nothing written: an unknown reason, side or kind, a note too long, a pair
    not in this workspace, a frozen pair, a pair the reviewer already picked or does not hold.
    """
    cleaned_kind = pick_kind_clean(kind)
    side = _side_clean(chosen) if cleaned_kind == Pick.Kind.PREFERENCE else "A"
    cleaned_note = pick_note_clean(note)
    pair = duel_pair_get(pair_id=pair_id)
    cleaned_reasons = pick_reasons_clean(reasons, pair.world)  # the pair's world's reasons
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
                kind=cleaned_kind,
                note=cleaned_note,
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


def pick_undo(*, reviewer, world: World | None = None, pick_id: Any = None) -> Pick:
    """Take back the reviewer's own most recent pick (in `world` when given), or the pick
    `pick_id` names when it is that one: the pick is deleted, and its pair goes back into the
    queue (one pick fewer) reserved for the reviewer, so the Duel serves it to them again.
    Returns the pick as it was.

    Refused with DuelConflict, nothing changed: the reviewer has no pick; the pick named is
    another reviewer's, or not their latest; a preference version of its world holds it
    (a frozen version never changes). DuelNotFound: no such pick in this workspace.
    """
    with transaction.atomic():
        # ROW EXCLUSIVE on the picks table, as the DELETE below takes anyway, but first: it
        # waits for a freeze in progress (SHARE ROW EXCLUSIVE) and keeps the next one out, so
        # the watermark read below is the one that holds when the pick goes.
        with connection.cursor() as cursor:
            cursor.execute(f"LOCK TABLE {Pick._meta.db_table} IN ROW EXCLUSIVE MODE")
        mine = Pick.objects.filter(reviewer=reviewer)
        if pick_id is not None:
            try:
                named = Pick.objects.select_related("world").get(pk=int(pick_id))
            except (TypeError, ValueError):
                raise DuelBadInput(f"'pick' is a pick id (a number), not {pick_id!r}.") from None
            except Pick.DoesNotExist:
                raise DuelNotFound(f"No pick {pick_id} in this workspace.") from None
            if named.reviewer_id != reviewer.pk:
                raise DuelConflict(
                    f"Pick {named.pk} is not yours ({named.reviewer_name} made it): "
                    "you can undo only your own last pick."
                )
            world = named.world
        if world is not None:
            mine = mine.filter(world=world)
        pick = mine.select_related("world", "pair").order_by("-pk").first()
        where = f" in {world.name}" if world is not None else ""
        if pick is None:
            raise DuelConflict(f"You have no pick{where} to undo.")
        if pick_id is not None and pick.pk != named.pk:
            raise DuelConflict(
                f"Pick {named.pk} is not your last pick{where} (pick {pick.pk} is): "
                "only the last one can be undone."
            )
        if pick.pk <= picks_frozen_up_to(pick.world):
            version = (
                PreferenceVersion.objects.filter(world=pick.world, last_pick_id__gte=pick.pk)
                .order_by("number")
                .first()
            )
            raise DuelConflict(
                f"Your last pick{where} (pick {pick.pk}) is frozen into "
                f"{version.label if version else 'a preference version'}, which never "
                "changes: it can no longer be undone."
            )
        undone_id = pick.pk
        pick.delete()
        pick.pk = undone_id  # delete() clears it; the caller says which pick went
        # Back into the queue, one pick fewer, and reserved for the reviewer who takes it
        # back (they are about to pick it again) unless another reviewer holds it now. A
        # pair a freeze closed already (another reviewer's frozen pick on it) stays closed.
        now = timezone.now()
        open_again = Q(frozen_in__isnull=True)
        free = open_again & (Q(reserved_by__isnull=True) | Q(reserved_until__lte=now))
        DuelPair.objects.filter(pk=pick.pair_id).update(
            pick_count=Case(When(pick_count__gt=0, then=F("pick_count") - 1), default=Value(0)),
            is_open=Case(When(open_again, then=Value(True)), default=Value(False)),
            reserved_by=Case(
                When(free, then=Value(reviewer.pk)),
                default=F("reserved_by"),
                output_field=IntegerField(),
            ),
            reserved_until=Case(
                When(free, then=Value(now + RESERVATION)), default=F("reserved_until")
            ),
        )
    return pick


def duel_pairs_request_opinion(*, pairs: QuerySet[DuelPair]) -> int:
    """Ask one more reviewer for each of these (not frozen) pairs: back in the queue."""
    return pairs.filter(frozen_in__isnull=True).update(
        picks_wanted=F("pick_count") + 1, is_open=True
    )


def duel_reservations_release(*, pairs: QuerySet[DuelPair]) -> int:
    return pairs.exclude(reserved_by=None).update(reserved_by=None, reserved_until=None)

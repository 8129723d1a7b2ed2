"""Make live, the canary and live calls: which version takes real calls, and what it caused.

A replay cannot change a recorded outcome; the won rate a version *causes* exists only once it
takes live calls. The canary sends a share of them to a candidate while the live version takes
the rest, so both are measured on the same days and the same customers.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.utils import timezone

from arena.services.calls import turns_problem
from policies.models import Canary, LiveCall, LivePeriod, PolicyVersion


class LiveError(ValueError):
    """A live or canary request that cannot be honoured; the message says why."""


def live_version() -> PolicyVersion | None:
    period = LivePeriod.objects.filter(current=True).select_related("version").first()
    if period:
        return period.version
    return PolicyVersion.objects.filter(number=1).first()


def version_make_live(*, version: PolicyVersion, by=None, note: str = "") -> LivePeriod:
    """Make `version` the live one; the history keeps who was live when.

    It does not refuse a version that lost its evaluation — the page says so plainly; the
    numbers, not the button, decide.
    """
    if not version.can_answer:
        raise LiveError(
            f"{version.label} answers nothing ({version.get_status_display()}): "
            "serve it again before making it live."
        )
    with transaction.atomic():
        current = LivePeriod.objects.select_for_update().filter(current=True).first()
        if current and current.version_id == version.pk:
            raise LiveError(f"{version.label} is already live.")
        now = timezone.now()
        LivePeriod.objects.filter(current=True).update(current=False, ended_at=now)
        running = Canary.objects.filter(state=Canary.State.RUNNING).first()
        if running:
            # Making a version live by hand ends any canary: its split no longer means anything.
            state = (
                Canary.State.PROMOTED
                if running.candidate_id == version.pk
                else (Canary.State.ROLLED_BACK)
            )
            Canary.objects.filter(pk=running.pk).update(state=state, ended_at=now)
        return LivePeriod.objects.create(version=version, made_live_by=by, note=note[:300])


def live_history() -> list[LivePeriod]:
    return list(LivePeriod.objects.select_related("version", "made_live_by")[:50])


# --- canary -----------------------------------------------------------------------------


def canary_start(*, candidate: PolicyVersion, share: float, by=None) -> Canary:
    live = live_version()
    if live is None:
        raise LiveError("Make a version live first.")
    if candidate.pk == live.pk:
        raise LiveError(f"{candidate.label} is the live version; choose another candidate.")
    if not candidate.can_answer:
        raise LiveError(f"{candidate.label} answers nothing: serve it again first.")
    if not 0.0 < share < 1.0:
        raise LiveError("The candidate's share must be between 0 and 1 (e.g. 0.1 for 10%).")
    try:
        with transaction.atomic():
            if not LivePeriod.objects.filter(current=True).exists():
                LivePeriod.objects.create(version=live, note="live when the first canary began")
            return Canary.objects.create(candidate=candidate, live=live, share=share, started_by=by)
    except IntegrityError as error:
        raise LiveError("A canary is already running: promote or roll it back first.") from error


def canary_running() -> Canary | None:
    return (
        Canary.objects.filter(state=Canary.State.RUNNING)
        .select_related("candidate", "live")
        .first()
    )


def canary_promote(*, canary: Canary, by=None) -> LivePeriod:
    if canary.state != Canary.State.RUNNING:
        raise LiveError("This canary has ended.")
    return version_make_live(
        version=canary.candidate, by=by, note=f"promoted from canary {canary.pk}"
    )


def canary_roll_back(*, canary: Canary) -> Canary:
    ended = Canary.objects.filter(pk=canary.pk, state=Canary.State.RUNNING).update(
        state=Canary.State.ROLLED_BACK, ended_at=timezone.now()
    )
    if not ended:
        raise LiveError("This canary has ended.")
    canary.refresh_from_db()
    return canary


def _to_candidate(call_id: str, share: float) -> bool:
    """The same call always goes the same way: a hash of its id, not a coin flip."""
    digest = hashlib.sha256(call_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


# --- live calls --------------------------------------------------------------------------


def live_call_route(*, call_id: str) -> LiveCall:
    """Which version takes this call: the candidate for the canary's share, else the live one.

    Asking again for the same call gives the same answer.
    """
    call_id = (call_id or "").strip()
    if not call_id or len(call_id) > 200:
        raise LiveError("Give the call's id (1–200 characters).")
    existing = LiveCall.objects.filter(external_id=call_id).select_related("version").first()
    if existing:
        return existing
    canary = canary_running()
    live = live_version()
    if live is None:
        raise LiveError("No version is live.")
    version = canary.candidate if canary and _to_candidate(call_id, canary.share) else live
    try:
        return LiveCall.objects.create(
            external_id=call_id, version=version, canary=canary if canary else None
        )
    except IntegrityError:  # the same call routed twice at once: both get the first answer
        return LiveCall.objects.get(external_id=call_id)


def live_call_record(*, call_id: str, outcome: str, turns: list | None = None) -> LiveCall:
    """The call's outcome (and optionally its turns), posted by the integration afterwards."""
    if outcome not in {"won", "lost", "unknown"}:
        raise LiveError(f"outcome is {outcome!r}; use won, lost or unknown.")
    call = LiveCall.objects.filter(external_id=(call_id or "").strip()).first()
    if call is None:
        raise LiveError(f"No live call '{call_id}': route it first (POST /api/rl/live/calls/).")
    call.outcome = outcome
    call.outcome_at = timezone.now()
    update = ["outcome", "outcome_at"]
    if turns is not None:
        problem = turns_problem(turns)
        if problem:
            raise ValidationError({"turns": [problem]})
        call.turns = [{"speaker": turn["speaker"], "text": turn["text"]} for turn in turns]
        update.append("turns")
    call.save(update_fields=update)
    return call


@dataclass(frozen=True)
class CausedWonRate:
    version: PolicyVersion
    won: int
    lost: int
    pending: int

    @property
    def decided(self) -> int:
        return self.won + self.lost

    @property
    def rate(self) -> float | None:
        return self.won / self.decided if self.decided else None


def caused_won_rates(*, canary: Canary | None = None) -> list[CausedWonRate]:
    """The won rate each version caused on live calls (of one canary, or all time)."""
    calls = LiveCall.objects.all()
    if canary is not None:
        calls = calls.filter(canary=canary)
    rows = calls.values("version").annotate(
        won=Count("id", filter=Q(outcome="won")),
        lost=Count("id", filter=Q(outcome="lost")),
        pending=Count("id", filter=Q(outcome="unknown")),
    )
    versions = PolicyVersion.objects.in_bulk([row["version"] for row in rows])
    return sorted(
        (
            CausedWonRate(versions[row["version"]], row["won"], row["lost"], row["pending"])
            for row in rows
        ),
        key=lambda rate: rate.version.number,
    )

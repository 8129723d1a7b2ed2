"""The canary: a share of a world's live calls goes to a candidate while the live version takes
the rest, so both are measured on the same days and the same customers; then the won rate each
caused, and whether the difference is beyond chance.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.utils import timezone

from arena.models import World
from policies.live import LiveError, live_version, version_make_live
from policies.models import Canary, LiveCall, LivePeriod, PolicyVersion
from trainers.stats.intervals import percentile_interval

# Resamples of each version's decided calls; seeded, so a page shows the same interval twice.
WON_RATE_BOOTSTRAP = 2000
WON_RATE_CONFIDENCE = 0.95


class CanaryShareError(LiveError):
    """A canary's share out of bounds, said in the unit the person typed it in."""


def canary_share_check(share: float) -> float:
    """`share`, a fraction of live calls (the API's unit and canary_start's), or
    CanaryShareError saying the bounds in fractions. Both ends are left out: a canary of no
    calls measures nothing, and one of every call is Make live."""
    if not 0.0 < share < 1.0:  # NaN fails too
        raise CanaryShareError(
            "The candidate's share is a fraction of live calls, more than 0 and less than 1 "
            f"(e.g. 0.1 for 10%); {share:g} is not."
        )
    return share


def canary_share_from_percent(percent: float) -> float:
    """A share typed in percent (the Release page, the admin's Start a canary) as the fraction
    canary_start takes, or CanaryShareError saying the bounds in percent."""
    if not 0.0 < percent < 100.0:
        raise CanaryShareError(
            "The candidate's share is a percent of live calls, more than 0 and less than "
            f"100 percent (e.g. 10); {percent:g} is not."
        )
    return percent / 100


def canary_start(*, candidate: PolicyVersion, share: float, by=None) -> Canary:
    """A canary in the candidate's world, against that world's live version."""
    world = candidate.world
    live = live_version(world=world)
    if live is None:
        raise LiveError("Make a version live first.")
    if candidate.pk == live.pk:
        raise LiveError(f"{candidate.label} is the live version; choose another candidate.")
    if not candidate.can_answer:
        raise LiveError(f"{candidate.label} answers nothing: serve it again first.")
    canary_share_check(share)
    try:
        with transaction.atomic():
            if not LivePeriod.objects.filter(world=world, current=True).exists():
                LivePeriod.objects.create(
                    world=world, version=live, note="live when the first canary began"
                )
            return Canary.objects.create(
                world=world, candidate=candidate, live=live, share=share, started_by=by
            )
    except IntegrityError as error:
        raise LiveError(
            f"A canary is already running in {world.name}: promote or roll it back first."
        ) from error


def canary_running(*, world: World) -> Canary | None:
    return (
        Canary.objects.filter(world=world, state=Canary.State.RUNNING)
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


def live_call_route(*, call_id: str, world: World) -> LiveCall:
    """Which of `world`'s versions takes this call: the candidate for the canary's share,
    else the live one.

    Asking again for the same call gives the same answer (whichever world is named then).
    """
    call_id = (call_id or "").strip()
    if not call_id or len(call_id) > 200:
        raise LiveError("Give the call's id (1–200 characters).")
    existing = LiveCall.objects.filter(external_id=call_id).select_related("version").first()
    if existing:
        return existing
    canary = canary_running(world=world)
    live = live_version(world=world)
    if live is None:
        raise LiveError(f"No version of {world.name} is live.")
    version = canary.candidate if canary and _to_candidate(call_id, canary.share) else live
    try:
        return LiveCall.objects.create(
            external_id=call_id, version=version, canary=canary if canary else None
        )
    except IntegrityError:  # the same call routed twice at once: both get the first answer
        return LiveCall.objects.get(external_id=call_id)


def _won_rate_draws(won: int, decided: int, *, rng) -> Any:
    """The won rate of `decided` calls resampled with replacement, WON_RATE_BOOTSTRAP times:
    resampling n won/lost outcomes draws the won count from Binomial(n, won / n)."""
    return rng.binomial(decided, won / decided, size=WON_RATE_BOOTSTRAP) / decided


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

    @property
    def interval(self) -> list[float] | None:
        """The 95% bootstrap interval of the rate; None under two decided calls."""
        if self.decided < 2:
            return None
        import numpy as np

        draws = _won_rate_draws(self.won, self.decided, rng=np.random.default_rng(0))
        return percentile_interval(draws, confidence=WON_RATE_CONFIDENCE)


@dataclass(frozen=True)
class CanaryComparison:
    """Candidate against live on the canary's calls: the difference of their won rates, its
    bootstrap interval, and one plain sentence on whether it is beyond chance."""

    difference: float | None
    interval: list[float] | None
    beyond_chance: bool
    sentence: str


def canary_comparison(*, canary: Canary, rates: list[CausedWonRate]) -> CanaryComparison:
    """Whether the candidate's won rate differs from the live version's by more than chance:
    each side's decided calls resampled on their own, the difference's 95% interval read off
    the resamples. A difference whose interval holds 0 is at chance, said so."""
    import numpy as np

    by_version = {rate.version.pk: rate for rate in rates}
    candidate = by_version.get(canary.candidate_id)
    live = by_version.get(canary.live_id)
    candidate_decided = candidate.decided if candidate else 0
    live_decided = live.decided if live else 0
    if candidate_decided < 2 or live_decided < 2:
        return CanaryComparison(
            None,
            None,
            False,
            f"Too few decided calls to compare yet ({candidate_decided} for the candidate, "
            f"{live_decided} for the live version): no difference can be told from chance.",
        )
    rng = np.random.default_rng(0)
    draws = _won_rate_draws(candidate.won, candidate_decided, rng=rng) - _won_rate_draws(
        live.won, live_decided, rng=rng
    )
    difference = candidate.rate - live.rate
    low, high = percentile_interval(draws, confidence=WON_RATE_CONFIDENCE)
    points = f"{abs(difference) * 100:.1f} points {'above' if difference >= 0 else 'below'}"
    bounds = f"[{low * 100:+.1f}, {high * 100:+.1f}] points"
    if low > 0 or high < 0:
        sentence = (
            f"The candidate's won rate is {points} the live version's, beyond its 95% "
            f"interval {bounds}: not chance on these calls."
        )
        return CanaryComparison(difference, [low, high], True, sentence)
    sentence = (
        f"The candidate's won rate is {points} the live version's: at chance, not beyond its "
        f"95% interval {bounds}. Keep the canary running for more calls."
    )
    return CanaryComparison(difference, [low, high], False, sentence)


def caused_won_rates(*, world: World, canary: Canary | None = None) -> list[CausedWonRate]:
    """The won rate each of `world`'s versions caused on live calls (of one canary, or all
    time)."""
    calls = LiveCall.objects.filter(version__world=world)
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

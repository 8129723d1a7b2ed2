"""Make live and live calls: which version of a world takes its real calls, and what each call
came to.

A replay cannot change a recorded outcome; the won rate a version *causes* exists only once it
takes live calls. Each world has its own live version and its own live calls: a call to one
world's agent is answered by that world's version (the integration names the world; see
policies.api_live). Which version takes a call while a canary runs is policies.canary's.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from arena.models import World
from arena.services.calls import turns_problem
from policies.models import Canary, LiveCall, LivePeriod, PolicyVersion


class LiveError(ValueError):
    """A live or canary request that cannot be honoured; the message says why."""


def live_version(*, world: World) -> PolicyVersion | None:
    """The version taking `world`'s live calls: the one made live last there; its v1 ·
    baseline before any was."""
    period = LivePeriod.objects.filter(world=world, current=True).select_related("version").first()
    if period:
        return period.version
    return PolicyVersion.objects.filter(world=world, number=1).first()


class MakeLiveWarning(str):
    """One warning's words, with its `kind` (did-not-learn, not-evaluated, lost, canary) for
    a page to mark it by."""

    kind: str

    def __new__(cls, text: str, kind: str) -> MakeLiveWarning:
        warning = super().__new__(cls, text)
        warning.kind = kind
        return warning


def make_live_warnings(
    *, version: PolicyVersion, evaluation: dict | None, canary: Canary | None = None
) -> list[MakeLiveWarning]:
    """What to know before making `version` live, the same on the Policies page and in the
    admin's Make live: it did not learn, it lost its last evaluation or was never evaluated,
    and a running canary ends. `evaluation`: its last verdict as the Policies page has it
    ({"summary", "lost", ...}; policies.selectors.versions_with_verdicts), None for none.
    Warnings only: the numbers, not the button, decide."""
    warnings = [
        MakeLiveWarning(f"Did not learn: {reason}", "did-not-learn")
        for reason in version.did_not_learn
    ]
    if evaluation is None:
        warnings.append(
            MakeLiveWarning(
                f"{version.label} has not been evaluated: nothing yet measures it against the "
                "live version.",
                "not-evaluated",
            )
        )
    elif evaluation.get("lost"):
        summary = evaluation.get("summary") or ""
        warnings.append(
            MakeLiveWarning(
                f"{version.label} lost its last evaluation"
                + (f" ({summary})." if summary else "."),
                "lost",
            )
        )
    if canary is not None:
        warnings.append(
            MakeLiveWarning(
                f"The running canary ({canary}) ends: making a version live by hand ends it.",
                "canary",
            )
        )
    return warnings


def version_make_live(*, version: PolicyVersion, by=None, note: str = "") -> LivePeriod:
    """Make `version` the live one of its world; the history keeps who was live when.

    It does not refuse a version that lost its evaluation — the page says so plainly; the
    numbers, not the button, decide.
    """
    if not version.can_answer:
        raise LiveError(
            f"{version.label} answers nothing ({version.get_status_display()}): "
            "serve it again before making it live."
        )
    world_id = version.world_id
    with transaction.atomic():
        current = (
            LivePeriod.objects.select_for_update().filter(world_id=world_id, current=True).first()
        )
        if current and current.version_id == version.pk:
            raise LiveError(f"{version.label} is already live.")
        now = timezone.now()
        LivePeriod.objects.filter(world_id=world_id, current=True).update(
            current=False, ended_at=now
        )
        running = Canary.objects.filter(world_id=world_id, state=Canary.State.RUNNING).first()
        if running:
            # Making a version live by hand ends any canary: its split no longer means anything.
            state = (
                Canary.State.PROMOTED
                if running.candidate_id == version.pk
                else (Canary.State.ROLLED_BACK)
            )
            Canary.objects.filter(pk=running.pk).update(state=state, ended_at=now)
        return LivePeriod.objects.create(
            world_id=world_id, version=version, made_live_by=by, note=note[:300]
        )


def live_history(*, world: World) -> list[LivePeriod]:
    return list(
        LivePeriod.objects.filter(world=world).select_related("version", "made_live_by")[:50]
    )


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

"""What a world's judge learns from: the reviewers' frozen picks (with the reasons they
ticked), their overrides of the judge, and the outcome labels of its real calls — never a call
or an imported pair Evaluate holds out (arena.held_out), so a checkpoint is not scored by a
judge that learned from the calls or pairs it replays. Read by the fit (arena.judge.fit_job)
and by the measurement of a model judge on the picks a fit holds out (arena.judge.agreement).
Workspace schema.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Max, QuerySet

from arena.held_out import held_out_call_ids, held_out_pair_moment_ids
from arena.judge.world_dimensions import world_dimensions
from arena.models import (
    Call,
    JudgeOverride,
    Moment,
    Pick,
    PreferenceVersion,
    World,
    moments_dialogues_load,
)
from trainers.judge.fitted_judge import outcome_rows, override_row, pair_row


def frozen_picks(world: World) -> QuerySet[Pick]:
    """Picks in a frozen preference version: training reads only frozen picks. Ties and
    both-bad picks included (judge_fit_rows leaves them out of its pairs)."""
    frozen = (
        PreferenceVersion.objects.filter(world=world).aggregate(last=Max("last_pick_id"))["last"]
        or 0
    )
    return (
        Pick.objects.filter(world=world, pk__lte=frozen)
        .select_related("pair__moment", "chosen_reply", "rejected_reply")
        .order_by("pk")
    )


def _group(moment: Moment) -> str:
    # Picks on moments of one call stay on one side of the held-out split.
    return f"call:{moment.call_id}" if moment.call_id else f"moment:{moment.pk}"


def judge_fit_rows(world: World) -> dict[str, list[dict[str, Any]]]:
    """The world's picks, overrides and outcome turns as the fit reads them, with the rubric's
    numbers on the world's own dimensions."""
    rubric = world_dimensions(world)
    held_out = held_out_call_ids(world=world)
    held_out_pairs = held_out_pair_moment_ids(world=world)
    picks = list(frozen_picks(world))
    moments_dialogues_load(pick.pair.moment for pick in picks)
    pairs = []
    for pick in picks:
        moment = pick.pair.moment
        # A pair row says the chosen reply beat the rejected one: a tie or both bad says
        # neither did, so the fit (a pairwise loss) leaves them out.
        if (
            moment.call_id in held_out
            or moment.pk in held_out_pairs
            or pick.kind != Pick.Kind.PREFERENCE
        ):
            continue
        pairs.append(
            pair_row(
                group=_group(moment),
                context=moment.dialogue(),
                chosen=pick.chosen_reply.text,
                rejected=pick.rejected_reply.text,
                reasons=pick.reasons or (),
                rubric=rubric,
            )
        )
    overridden = list(
        JudgeOverride.objects.filter(reply__moment__world=world)
        .exclude(reply__moment__call_id__in=held_out)
        .exclude(reply__moment__in=held_out_pairs)
        .select_related("reply__moment")
        .order_by("pk")
    )
    moments_dialogues_load(override.reply.moment for override in overridden)
    overrides = [
        override_row(
            context=override.reply.moment.dialogue(),
            reply=override.reply.text,
            scores=override.scores or {},
            rubric=rubric,
        )
        for override in overridden
    ]
    calls = (
        Call.objects.filter(world=world)
        .exclude(outcome=Call.Outcome.UNKNOWN)
        .exclude(pk__in=held_out)
        .prefetch_related("turns")
    )
    outcomes = outcome_rows(
        (
            {
                "id": call.external_id,
                "outcome": call.outcome,
                "turns": [{"speaker": t.speaker, "text": t.text} for t in call.turns.all()],
            }
            for call in calls
        ),
        rubric,
    )
    return {"pairs": pairs, "overrides": overrides, "outcomes": outcomes}

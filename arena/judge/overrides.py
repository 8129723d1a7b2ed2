"""The Duel's judge overrides: a reviewer overruling the judge on some dimensions of a
reply, and rescoring that applies the overrides and reorders the queue. An override also
feeds the world's next judge fit (arena.judge.fit_job) and a model judge's examples
(arena.judge.world_judge). Workspace schema."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Q

from arena.errors import DuelBadInput, DuelConflict, DuelNotFound
from arena.judge.agreement import judge_agreement
from arena.judge.fit_job import judge_fit_soon
from arena.judge.world_dimensions import world_dimension_names, world_dimensions
from arena.models import DuelPair, Judgement, JudgeOverride, Reply, World
from arena.selectors import reply_judgements
from trainers.judge.rubric import Dimension, weighted_total


def judge_override_scores_clean(scores: Any, world: World | None = None) -> dict[str, float]:
    """The reviewer's verdicts on dimensions of the world's rubric (the seven without a
    world), or DuelBadInput naming what is wrong."""
    names = world_dimension_names(world)
    if not isinstance(scores, dict) or not scores:
        raise DuelBadInput(
            "'scores' must name at least one dimension with the reviewer's verdict, "
            'e.g. {"respect": 0.0}.'
        )
    unknown = [name for name in scores if name not in names]
    if unknown:
        raise DuelBadInput(
            f"Unknown dimension(s): {', '.join(repr(name) for name in unknown)}"
            + (f" in {world.name}" if world is not None else "")
            + f". 'scores' may name any of {', '.join(names)}."
        )
    cleaned = {}
    for name in names:
        if name not in scores:
            continue
        value = scores[name]
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise DuelBadInput(
                f"The verdict on {name} must be a number from 0 to 1, not {value!r}."
            )
        cleaned[name] = float(value)
    return cleaned


def judge_override_submit(*, reply_id: Any, reviewer, scores: Any, note: str = "") -> JudgeOverride:
    """The reviewer overrules the judge on some dimensions of a reply; saying it again
    replaces their earlier verdict. Used by the next rescoring. The dimensions are the reply's
    world's."""
    try:
        reply_id = int(reply_id)
    except (TypeError, ValueError):
        raise DuelBadInput(f"'reply' must be a reply id (a number), not {reply_id!r}.") from None
    reply = Reply.objects.filter(pk=reply_id).select_related("moment__world").first()
    if reply is None:
        raise DuelNotFound(f"No reply {reply_id} in this workspace.")
    cleaned = judge_override_scores_clean(scores, reply.moment.world)
    judged = (
        Judgement.objects.filter(reply=reply, overruled=False, error="")
        .order_by("-created_at", "-id")
        .first()
    )
    if judged is None:
        raise DuelConflict(f"Reply {reply_id} has no judgement to overrule.")
    override, _created = JudgeOverride.objects.update_or_create(
        reply=reply,
        reviewer=reviewer,
        judge_model=judged.judge_model,
        defaults={
            "scores": cleaned,
            "judge_scores": dict(judged.scores),
            "note": str(note or "")[:2000],
            "reviewer_name": reviewer.get_username(),
        },
    )
    # An override feeds the next rescoring: the world's judge refits once this commits.
    judge_fit_soon(world_ids={reply.moment.world_id}, started_by=reviewer)
    return override


def _said(score: Any) -> str:
    # A dimension added to the world's rubric after the judge scored the reply has no score.
    return f"{float(score):.2f}" if score is not None else "nothing (the dimension is newer)"


@dataclass
class RescoreReport:
    replies_rescored: int
    pairs_reordered: int
    overrides: int
    agreement: dict[str, dict[str, Any]]

    def as_dict(self) -> dict[str, Any]:
        return {
            "replies_rescored": self.replies_rescored,
            "pairs_reordered": self.pairs_reordered,
            "overrides": self.overrides,
            "agreement": self.agreement,
        }


def _total_after(
    judged: Judgement, scores: dict[str, float], rubric: tuple[Dimension, ...]
) -> float:
    """The judge's own total moved by what the reviewers' scores change in the rubric's
    weighted total: a fitted judge's total, or one the on-topic guard capped, is not the
    weighted sum of its dimensions, and recomputing it from them lost both (a capped
    off-topic reply came back uncapped once its overrides were removed)."""
    moved = weighted_total(scores, rubric) - weighted_total(dict(judged.scores), rubric)
    return round(min(1.0, max(0.0, float(judged.total) + moved)), 4)


def judgements_rescore(*, world: World | None = None) -> RescoreReport:
    """Apply reviewers' overrides: for every overruled reply, a judgement whose overruled
    dimensions carry the reviewers' mean verdict (the rest stay the judge's), the queue
    reordered by the new totals, and how often judge and reviewers agreed per dimension."""
    overrides = JudgeOverride.objects.all()
    replies_with_rescore = Judgement.objects.filter(overruled=True)
    if world is not None:
        overrides = overrides.filter(reply__moment__world=world)
        replies_with_rescore = replies_with_rescore.filter(reply__moment__world=world)
    verdicts: dict[tuple[int, str], list[dict[str, float]]] = defaultdict(list)
    for reply_id, judge_model, scores in overrides.values_list("reply_id", "judge_model", "scores"):
        verdicts[(reply_id, judge_model)].append(scores)
    # Replies rescored before whose overrides were since removed go back to the judge.
    reply_ids = {reply_id for reply_id, _model in verdicts} | set(
        replies_with_rescore.values_list("reply_id", flat=True)
    )
    base: dict[tuple[int, str], Judgement] = {}
    for judgement in (
        Judgement.objects.filter(reply_id__in=reply_ids, overruled=False, error="")
        .select_related("reply__moment__world")
        .order_by("created_at", "id")
    ):
        base[(judgement.reply_id, judgement.judge_model)] = judgement
    rubrics: dict[int, tuple[Dimension, ...]] = {}
    in_force = reply_judgements(list(reply_ids))
    new = []
    for (reply_id, judge_model), judged in base.items():
        scores = dict(judged.scores)
        reasons = dict(judged.reasons)
        given = verdicts.get((reply_id, judge_model), [])
        reply_world = judged.reply.moment.world
        if reply_world.pk not in rubrics:
            rubrics[reply_world.pk] = world_dimensions(reply_world)
        rubric = rubrics[reply_world.pk]
        for name in (dimension.name for dimension in rubric):
            values = [float(verdict[name]) for verdict in given if name in verdict]
            if values:
                scores[name] = round(sum(values) / len(values), 4)
                reasons[name] = (
                    f"Overruled by {len(values)} reviewer(s); the judge said "
                    f"{_said(judged.scores.get(name))}. {judged.reasons.get(name, '')}"
                ).strip()
        current = in_force.get(reply_id)
        if current is not None and current.scores == scores:
            continue  # already in force: rescoring twice changes nothing
        new.append(
            Judgement(
                reply_id=reply_id,
                judge_model=judge_model,
                scores=scores,
                reasons=reasons,
                total=_total_after(judged, scores, rubric),
                overruled=bool(given),
            )
        )
    with transaction.atomic():
        Judgement.objects.bulk_create(new)
        changed = {judgement.reply_id for judgement in new}
        pairs = list(DuelPair.objects.filter(Q(reply_a_id__in=changed) | Q(reply_b_id__in=changed)))
        totals = {
            reply_id: judgement.total
            for reply_id, judgement in reply_judgements(
                [pair.reply_a_id for pair in pairs] + [pair.reply_b_id for pair in pairs]
            ).items()
        }
        for pair in pairs:
            pair.judge_total = round(
                (totals.get(pair.reply_a_id, 0.0) + totals.get(pair.reply_b_id, 0.0)) / 2, 4
            )
        DuelPair.objects.bulk_update(pairs, ["judge_total"], batch_size=1000)
    return RescoreReport(
        replies_rescored=len(new),
        pairs_reordered=len(pairs),
        overrides=overrides.count(),
        agreement=judge_agreement(world),
    )

"""Move labels on a world's real calls (workspace schema): every agent turn carries one of the
WORLD's own moves (World.moves), given by the labeller in trainers.moves.labels from the moves'
descriptions, the labelling rules as cue words and the reviewers' corrections.

A reviewer's correction is the turn's own label with source "reviewer" (the Turn admin sets
it); it is never relabelled, and every other turn is relabelled whenever the labeller changes
(a correction or a move renamed), so a correction changes the labels given after it. The
Duel's pairs carry the labels of the moment they were made (the map and the queue preload read
those), the move-strategy card learns from them.

    move_corrections(world)        the reviewers' corrections, as the labeller takes them (read)
    move_labels_agreement(world)   the labeller against the corrections, held out by call (read)
    calls_label_moves(world)       label (or relabel) the world's agent turns (write)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from arena.models import Call, Turn, World
from trainers.moves.labels import Correction, fit_world_labeller, labeller_agreement

REVIEWER = "reviewer"
CLASSIFIER = "classifier"


def move_corrections(*, world: World) -> list[Correction]:
    """The reviewers' corrections of the world's agent turns that name one of its moves, each
    with the call so far (a correction naming a move the world no longer has is left out)."""
    names = set(world.move_names)
    corrected = list(
        Turn.objects.filter(
            call__world=world, speaker=Turn.Speaker.AGENT, move_label_source=REVIEWER
        )
        .filter(move_label__in=names)
        .values_list("call_id", "index", "text", "move_label")
    )
    if not corrected:
        return []
    turns_by_call: dict[int, list[dict[str, str]]] = defaultdict(list)
    for call_id, speaker, text in (
        Turn.objects.filter(call_id__in={row[0] for row in corrected})
        .order_by("call_id", "index")
        .values_list("call_id", "speaker", "text")
    ):
        turns_by_call[call_id].append({"speaker": speaker, "text": text})
    return [
        Correction(
            call=str(call_id),
            context=tuple(turns_by_call[call_id][:index]),
            text=text,
            move=move,
        )
        for call_id, index, text, move in corrected
    ]


def move_labels_agreement(*, world: World) -> dict[str, Any]:
    """How often the labeller gives the reviewer's move on corrected turns it did not learn
    from (folds by call), next to descriptions and cues alone; rates None with no
    corrections."""
    return labeller_agreement(world.moves, move_corrections(world=world))


def calls_label_moves(*, world: World, call_ids: Iterable[int] | None = None) -> int:
    """Label every agent turn of the world's calls (or of `call_ids` only) with the world's
    moves, keeping the reviewers' corrections. Returns how many turns changed label."""
    labeller = fit_world_labeller(world.moves, move_corrections(world=world))
    calls = Call.objects.filter(world=world)
    if call_ids is not None:
        calls = calls.filter(pk__in=list(call_ids))
    changed: list[Turn] = []
    turns_by_call: dict[int, list[Turn]] = defaultdict(list)
    for turn in Turn.objects.filter(call__in=calls).order_by("call_id", "index"):
        turns_by_call[turn.call_id].append(turn)
    for turns in turns_by_call.values():
        labels = labeller.label_turns([{"speaker": t.speaker, "text": t.text} for t in turns])
        for turn, label in zip(turns, labels, strict=True):
            if label is None or turn.move_label_source == REVIEWER:
                continue
            if (turn.move_label, turn.move_label_source) != (label[0], CLASSIFIER):
                turn.move_label, turn.move_label_source = label[0], CLASSIFIER
                changed.append(turn)
    Turn.objects.bulk_update(changed, ["move_label", "move_label_source"], batch_size=2000)
    return len(changed)

"""Issue 44, done when: the independent measure uses no row either trainer read. A wording
version's checkpoint against its base untrained replays the world's held-out calls; the spec
its trainer read (the frozen picks DPO and the reward model learn from, and the outcome
examples of an RLHF reward model) holds none of those calls, none of their moments and none of
their dialogues."""

from __future__ import annotations

import json
from types import SimpleNamespace

from django.contrib.auth import get_user_model

from arena.services.calls import calls_import
from arena.services.freeze import preference_freeze
from arena.services.pairs import duel_pairs_generate
from arena.services.queue import duel_next, pick_submit
from arena.services.worlds import world_create
from evaluation.models import Evaluation, HeldOutMoment
from levers9.pools import pool_default
from levers9.shipped_data import PERSUASION_CALLS
from policies.models import PolicyVersion
from policies.services import version_register
from trainers.wording.spec import parse_wording_spec
from training.wording import WordingChoice, wording_spec_build


def _dialogue_key(turns) -> tuple:
    return tuple((turn["speaker"], turn["text"]) for turn in turns)


def test_the_measure_against_the_base_reads_no_row_either_trainer_read(
    in_workspace, django_capture_on_commit_callbacks
):
    from evaluation.services import version_checkpoint

    world = world_create(slug="persuasion", name="Persuasion for good")
    calls_import(world=world, text=PERSUASION_CALLS.read_text(), source=str(PERSUASION_CALLS))
    reviewer = get_user_model().objects.get(username="owner@acme.test")
    duel_pairs_generate(world=world, count=40)
    for _ in range(12):
        pair = duel_next(world=world, reviewer=reviewer)
        pick_submit(pair_id=pair.pk, reviewer=reviewer, chosen="A", reasons=["respect"])
    frozen = preference_freeze(world=world, by=reviewer)
    parent = PolicyVersion.objects.get(world=world, number=1)
    spec = wording_spec_build(
        WordingChoice(
            method="rlhf",
            preference_version=frozen,
            pool=pool_default(gpu=False),
            card_count=1,
            base="smollm2-135m-instruct",
            parent=parent,
            reward_source="outcomes",
            outcomes_world=world,
            min_pairs=2,
        ),
        job_folder_hint="versions/test",
    )
    parse_wording_spec(spec, trainer="rlhf")  # a spec the trainer accepts
    assert spec["pairs"]
    assert spec["outcome_examples"]

    # The version that spec made, and its checkpoints as a finished job starts them.
    version = version_register(
        world=world,
        name="trained",
        parent=parent,
        move_strategy=parent.move_strategy,
        learned_from={
            "algorithm": "rlhf",
            "preference_version": frozen.number,
            "base": spec["base"],
        },
        provider=PolicyVersion.Provider.TRAINED,
        provider_model="acme/v2",
    )
    with django_capture_on_commit_callbacks(execute=False):
        version_checkpoint(SimpleNamespace(pk=0, started_by=None), version)
    against = Evaluation.objects.get(candidate=version, purpose=Evaluation.Purpose.AGAINST_BASE)
    parent_checkpoint = Evaluation.objects.get(
        candidate=version, purpose=Evaluation.Purpose.CHECKPOINT
    )
    assert against.call_set_id == parent_checkpoint.call_set_id

    held = list(
        HeldOutMoment.objects.filter(held_out_call__call_set=against.call_set).select_related(
            "held_out_call__call", "moment"
        )
    )
    assert len({h.held_out_call_id for h in held}) == 40
    held_calls = {h.held_out_call.call_id for h in held}
    held_external = {h.held_out_call.call.external_id for h in held}
    held_dialogues = {_dialogue_key(h.moment.dialogue()) for h in held}

    # The picks: held out by their call (call-<id>), none of a held-out call, no held-out
    # moment's dialogue among them.
    pick_calls = {int(pair["call_id"].removeprefix("call-")) for pair in spec["pairs"]}
    assert pick_calls
    assert not pick_calls & held_calls
    pick_dialogues = {_dialogue_key(json.loads(json.dumps(p["dialogue"]))) for p in spec["pairs"]}
    assert not pick_dialogues & held_dialogues
    # The outcome reward model's examples: none of a held-out call.
    assert not {example["call_id"] for example in spec["outcome_examples"]} & held_external

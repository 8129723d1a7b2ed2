"""The Wording (RLHF) and Benchmark (DPO) cards: frozen picks become a checked spec and a job;
too few pairs, a bad base or a missing outcome world are refused before anything runs."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model

from arena.models import World
from arena.services import duel_next, duel_pairs_generate, pick_submit, preference_freeze
from levers9.pools import pool_default
from policies.models import PolicyVersion
from training.finish import version_from_wording
from training.models import Job
from training.wording import WordingCardError, WordingChoice, train_wording


@pytest.fixture
def frozen(in_workspace):
    """Three picks in the simulated world, frozen into preference version v1."""
    world = World.objects.get(slug="lettings")
    reviewer = get_user_model().objects.get(username="owner@acme.test")
    duel_pairs_generate(world=world, count=5)
    for _ in range(3):
        pair = duel_next(world=world, reviewer=reviewer)
        pick_submit(pair_id=pair.pk, reviewer=reviewer, chosen="A", reasons=["respect"])
    return preference_freeze(by=reviewer)


def _choice(frozen, **changes) -> WordingChoice:
    values = {
        "method": "dpo",
        "preference_version": frozen,
        "pool": pool_default(gpu=False),
        "card_count": 1,
        "base": "smollm2-135m-instruct",
        "parent": PolicyVersion.objects.get(number=1),
        "min_pairs": 2,
    }
    values.update(changes)
    return WordingChoice(**values)


def test_it_refuses_too_few_frozen_pairs_with_the_numbers(frozen):
    with pytest.raises(WordingCardError, match="asks for 200 frozen pairs.*has 3"):
        train_wording(choice=_choice(frozen, min_pairs=None))
    assert Job.objects.count() == 0


@pytest.mark.parametrize("base", ["https://huggingface.co/x/y", "../weights", "justaname"])
def test_it_refuses_a_base_that_is_not_a_repo_id(frozen, base):
    with pytest.raises(WordingCardError):
        train_wording(choice=_choice(frozen, base=base))
    assert Job.objects.count() == 0


def test_it_packs_the_frozen_pairs_into_the_spec_and_starts_a_job(
    frozen, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        job = train_wording(choice=_choice(frozen, method="rlhf", reward_source="picks"))
    with open(job.spec_path) as spec_file:
        spec = json.load(spec_file)
    assert (job.trainer, job.preference_version, job.base_model) == (
        "rlhf",
        frozen.number,
        "smollm2-135m-instruct",
    )
    assert len(spec["pairs"]) == 3
    assert spec["pairs"][0]["reasons"] == ["respect"]
    assert spec["reward_source"] == "picks"
    assert spec["version"] == frozen.number


def test_it_registers_a_trained_version_from_the_trainers_result(frozen):
    parent = PolicyVersion.objects.get(number=1)
    job = Job.objects.create(
        kind=Job.Kind.TRAIN,
        trainer="dpo",
        workspace_schema="ws_acme",
        pool_name="local-cpu",
        card_type="cpu",
        parent_version=parent,
    )
    result = {
        "trainer": "dpo",
        "version": {
            "method": "dpo",
            "base": "smollm2-135m-instruct",
            "preference_version": frozen.number,
            "pairs": {"total": 3, "train": 2, "held_out": 1},
            "held_out_accuracy": 1.0,
            "merged_weights": "/models/versions/abc/merged",
            "reward_adapter": None,
        },
        "metrics": {"final_loss": 0.5, "curve": [{"step": 1, "loss": 0.7}]},
    }
    version = version_from_wording(job, result)
    assert version.label == "v2 · dpo benchmark"
    assert version.provider == PolicyVersion.Provider.TRAINED
    assert version.provider_model == "/models/versions/abc/merged"
    assert version.learned_from["held_out_accuracy"] == 1.0
    assert "curve" not in version.learned_from["metrics"]

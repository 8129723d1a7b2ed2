"""The Wording (RLHF) and Benchmark (DPO) cards: frozen picks become a checked spec and a job;
too few pairs, a bad base or a missing outcome world are refused before anything runs."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model

from arena.models import World
from arena.services.freeze import preference_freeze
from arena.services.pairs import duel_pairs_generate
from arena.services.queue import duel_next, pick_submit
from levers9.jobs.models import Job
from policies.models import PolicyVersion
from tests.training.wording_choices import dpo_choice, lettings_picks_frozen
from training.finish import version_from_wording
from training.models import TrainingRun
from training.wording import WordingCardError, WordingChoice, train_wording


@pytest.fixture
def frozen(in_workspace):
    """Three picks in the simulated world, frozen into preference version v1."""
    return lettings_picks_frozen(picks=3, pairs=5)


def _choice(frozen, **changes) -> WordingChoice:
    return dpo_choice(frozen, **{"min_pairs": 2, **changes})


def test_it_refuses_too_few_frozen_pairs_with_the_numbers(frozen):
    with pytest.raises(WordingCardError, match="asks for 200 frozen pairs.*has 3"):
        train_wording(choice=_choice(frozen, min_pairs=None))
    assert Job.objects.count() == 0


def test_ties_and_both_bad_picks_do_not_count_toward_the_minimum(in_workspace):
    """Three frozen picks, one of them a tie: two pairs to learn from, so a minimum of three is
    refused before any job, naming the tie."""
    world = World.objects.get(slug="lettings")
    reviewer = get_user_model().objects.get(username="owner@acme.test")
    duel_pairs_generate(world=world, count=5)
    for kind in (None, None, "tie"):
        pair = duel_next(world=world, reviewer=reviewer)
        pick_submit(
            pair_id=pair.pk,
            reviewer=reviewer,
            chosen="A" if kind is None else None,
            kind=kind,
            reasons=["respect"],
        )
    version = preference_freeze(world=world, by=reviewer)
    assert version.row_count == 3
    with pytest.raises(WordingCardError, match=r"has 2 \(1 ties, both-bad picks or held-out pairs"):
        train_wording(choice=_choice(version, min_pairs=3))
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
    run = job.training_run
    assert (job.trainer, run.preference_version, run.base_model) == (
        "rlhf",
        frozen.number,
        "smollm2-135m-instruct",
    )
    assert len(spec["pairs"]) == 3
    assert spec["pairs"][0]["reasons"] == ["respect"]
    assert spec["reward_source"] == "picks"
    assert spec["version"] == frozen.number


def test_it_registers_a_trained_version_from_the_trainers_result(frozen):
    parent = PolicyVersion.objects.get(world__slug="lettings", number=1)
    job = Job.objects.create(
        kind="train",
        trainer="dpo",
        workspace_schema="ws_acme",
        pool_name="local-cpu",
        card_type="cpu",
    )
    TrainingRun.objects.create(job=job, world=parent.world, parent_version=parent)
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
        "metrics": {
            "final_loss": 0.5,
            "curve": [{"step": 1, "loss": 0.7}],
            "held_out_accuracy_ci": [0.2, 0.9],
        },
    }
    version = version_from_wording(job, result)
    assert version.label == "v2 · dpo benchmark"
    assert version.provider == PolicyVersion.Provider.TRAINED
    assert version.provider_model == "/models/versions/abc/merged"
    assert version.learned_from["held_out_accuracy"] == 1.0
    assert "curve" not in version.learned_from["metrics"]
    # The interval stays with the version, so the API and Policies say what 1.0 means.
    assert version.learned_from["metrics"]["held_out_accuracy_ci"] == [0.2, 0.9]


# --- the same cards through the API ------------------------------------------------------


def _post_card(client, **body):
    return client.post("/api/rl/train/wording/", body, content_type="application/json")


def test_the_api_starts_a_card_and_packs_the_outcome_world(
    frozen, owner_client, monkeypatch, django_capture_on_commit_callbacks
):
    from arena.services.calls import calls_import
    from trainers.wording import spec as wording_spec

    monkeypatch.setitem(wording_spec.MIN_PAIRS, "rlhf", 2)
    calls = World.objects.create(slug="calls", name="Real calls")
    lines = [
        {
            "id": f"c{number}",
            "outcome": outcome,
            "turns": [
                {"speaker": "customer", "text": "Hello, is the flat free?"},
                {"speaker": "agent", "text": reply},
            ],
        }
        for number, (outcome, reply) in enumerate(
            [("won", "It is. Shall I book you a viewing?"), ("lost", "Check the website.")]
        )
    ]
    calls_import(world=calls, text="\n".join(json.dumps(line) for line in lines))
    with django_capture_on_commit_callbacks(execute=False):
        response = _post_card(
            owner_client,
            method="rlhf",
            preference_version=frozen.number,
            pack="lettings",
            reward_source="outcomes",
            outcomes_pack="calls",
            epochs=0.5,
        )
    assert response.status_code == 201, response.content
    job = Job.objects.get(pk=response.json()["id"])
    with open(job.spec_path) as spec_file:
        spec = json.load(spec_file)
    assert (job.trainer, spec["reward_source"], spec["epochs"]) == ("rlhf", "outcomes", 0.5)
    assert sorted(example["won"] for example in spec["outcome_examples"]) == [False, True]
    assert spec["base"] == "smollm2-135m-instruct"  # the CPU pool's default base


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"method": "dpo"}, "asks for 200 frozen pairs"),
        ({"method": "dpo", "preference_version": 9}, "No preference version v9"),
        ({"method": "ppo"}, "not a valid choice"),
        ({"method": "dpo", "pool": "nowhere"}, "enabled: local-cpu"),
        ({"method": "dpo", "cards": 7}, "ask for 1 to 1"),
        ({"method": "rlhf", "reward_source": "outcomes", "outcomes_pack": "mars"}, "No world"),
        ({"method": "dpo", "base": "https://example.com/model"}, "owner/name"),
    ],
)
def test_the_api_refuses_a_bad_card_saying_why_and_starts_nothing(
    frozen, owner_client, monkeypatch, body, said
):
    from trainers.wording import spec as wording_spec

    if "asks for" not in said:
        # Enough pairs, so the refusal is about the field under test.
        monkeypatch.setitem(wording_spec.MIN_PAIRS, "dpo", 2)
        monkeypatch.setitem(wording_spec.MIN_PAIRS, "rlhf", 2)
    response = _post_card(owner_client, **{"preference_version": frozen.number, **body})
    assert response.status_code == 400
    assert said in json.dumps(response.json())
    assert Job.objects.count() == 0


def test_the_api_card_is_for_managers_of_this_workspace_only(frozen, workspace, outsider_client):
    from tests.conftest import client_for, make_user

    make_user(workspace, "reviewer@acme.test", "reviewer")
    reviewer = client_for(workspace, "reviewer@acme.test")
    assert _post_card(reviewer, method="dpo", preference_version=1).status_code == 403
    assert _post_card(outsider_client, method="dpo", preference_version=1).status_code in {
        401,
        403,
    }
    assert Job.objects.count() == 0


# --- "How each method learns" on the Train page ------------------------------------------


def _done_wording_job(method: str, version: PolicyVersion, *, result: dict) -> Job:
    job = Job.objects.create(
        kind="train",
        trainer=method,
        state=Job.State.DONE,
        pool_name="local-cpu",
        card_type="cpu",
        result=result,
    )
    TrainingRun.objects.create(job=job, world=version.world, produced_version=version)
    return job


# The checkpoints' judge, measured above chance on enough held-out picks: its verdicts stand.
MEASURED = {
    "measured": True,
    "measured_by": "judge v4",
    "pairs": 80,
    "pair_accuracy": 0.71,
    "pair_accuracy_ci": [0.61, 0.8],
    "at_chance": False,
}


def _checkpoint(version: PolicyVersion, parent: PolicyVersion, win_rate: float, verdict: str):
    from evaluation.models import Evaluation, EvaluationCallSet

    world = World.objects.get(slug="lettings")
    call_set, _ = EvaluationCallSet.objects.get_or_create(world=world, kind="scripted")
    Evaluation.objects.create(
        world=world,
        call_set=call_set,
        candidate=version,
        baseline=parent,
        purpose="checkpoint",
        state="done",
        judge_model="judge v4 of lettings",
        summary={
            "win_rate": win_rate,
            "ci": [win_rate - 0.07, win_rate + 0.07],
            "verdict": verdict,
            "judge_agreement": MEASURED,
        },
    )


def test_the_train_page_shows_each_methods_numbers_and_the_dpo_number_to_beat(
    in_workspace, owner_client
):
    from policies.services import version_register

    parent = PolicyVersion.objects.get(world__slug="lettings", number=1)
    dpo, rlhf = (
        version_register(
            world=parent.world, name=name, parent=parent, move_strategy={}, learned_from={}
        )
        for name in ("dpo benchmark", "trained")
    )
    _done_wording_job(
        "dpo",
        dpo,
        result={
            "version": {
                "pairs": {"total": 200, "train": 180, "held_out": 20},
                "held_out_accuracy": 0.85,
            },
            "metrics": {
                "policy_held_out_accuracy": 0.65,
                "base_held_out_accuracy": 0.6,
                "policy_gain_over_base_ci": [-0.05, 0.15],
            },
        },
    )
    _done_wording_job(
        "rlhf",
        rlhf,
        result={
            "version": {
                "pairs": {"total": 500, "train": 450, "held_out": 50},
                "reward_source": "outcomes",
                "held_out_auc": 0.6125,
                "outcome_examples": {"total": 3900, "held_out_calls": 97},
            },
            "metrics": {"kl": 0.0123, "reward_before": -0.2, "reward_after": 0.15},
        },
    )
    _checkpoint(dpo, parent, 0.55, "even")
    _checkpoint(rlhf, parent, 0.61, "won")
    html = owner_client.get("/train/").content.decode()
    for shown in (
        "200 (180 / 20)",
        # 20 held-out pairs are too few for the accuracy to mean anything; 97 calls are not.
        "too few to measure (n = 20)",
        "AUC 0.613",
        "3900 agent turns, AUC over 97 held-out calls",
        "KL 0.0123",
        "-0.200 → 0.150",
        "won 0.55 [0.48, 0.62] of moments vs v1 · baseline",
        # What serving the DPO version changes: its own ranking of the pairs, and the base's.
        "ranks 0.650 of held-out pairs right by its own log-probabilities, the base 0.600 "
        "(change [-0.050, 0.150]) — no change from the base beyond its interval",
    ):
        assert shown in html, shown
    # Each checkpoint with its interval and the judge that scored it, as measured.
    assert "won 0.61 [0.54, 0.68] of moments" in html
    judged = "judged by judge v4 of lettings, measured by judge v4: agrees with reviewers 0.71"
    assert judged in html
    # The verdict names the judge's figure that licensed it, as Evaluate's does.
    assert "Licensed by the judge&#x27;s pair accuracy 0.71 [0.61, 0.80] on 80 held-out" in html
    # The run's own reward model and the world's judge are two models, and the page says so.
    assert 'data-field="two-yardsticks"' in html
    assert "Its own reward model on held-out" in html
    # Against their own parents only: two numbers, no claim about which method is better.
    assert "each against its own parent" in html
    assert "beats the benchmark" not in html
    assert "accuracy 0.850" not in html

    # The head-to-head checkpoint (RLHF against DPO of the same picks) decides it.
    from evaluation.models import Evaluation

    dpo.learned_from = {"algorithm": "dpo"}
    dpo.save(update_fields=["learned_from"])
    _checkpoint(rlhf, dpo, 0.58, "won")
    html = owner_client.get("/train/").content.decode()
    assert "against DPO (" in html
    assert "it beats the benchmark: that is what the reward model taught" in html
    Evaluation.objects.filter(candidate=rlhf, baseline=dpo).update(
        summary={"win_rate": 0.41, "verdict": "lost", "judge_agreement": MEASURED}
    )
    html = owner_client.get("/train/").content.decode()
    assert "DPO is better: the reward model is the thing to fix" in html

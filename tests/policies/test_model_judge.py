"""Environment → Judge: the rubric judge by default, or a model with a JSON rubric prompt.
Malformed output is retried once, then recorded as an error, never as a score; reviewers'
overrides are fed to the model as examples."""

from __future__ import annotations

import json

import pytest

from arena.errors import ModelConnectionBadRequest, ModelConnectionConflict
from arena.judge.scoring import judgement_record
from arena.judge.world_judge import judge_for_world, model_judge_for_world
from arena.judge.world_judge_choice import world_judge_set
from arena.models import JudgeConnection, Judgement, Moment, Reply, World
from levers9.providers import ModelTarget, provider_for
from tests.policies.stub_server import Answer
from trainers.judge.model_judge import ModelJudge
from trainers.judge.rubric import DIMENSIONS, RubricJudge, Turn

GOOD_SCORES = {
    "dialect": 0.9,
    "respect": 1.0,
    "accuracy": 0.8,
    "progress": 0.7,
    "family": 0.5,
    "timing": 0.6,
    "compliance": 1.0,
}


def _verdict(scores=GOOD_SCORES) -> str:
    return json.dumps({"scores": scores, "reasons": {name: "fine" for name in scores}})


@pytest.fixture
def world(in_workspace, stub):
    world = World.objects.get(slug="lettings")
    return world_judge_set(
        world=world, provider="vllm", model="judge-14b", endpoint_url=stub.base_url
    )


@pytest.fixture
def reply(world):
    moment = Moment.objects.create(
        world=world,
        kind=Moment.Kind.SYNTHETIC,
        context=[
            {"speaker": "agent", "text": "Good morning, Acme Lettings."},
            {"speaker": "customer", "text": "Hello, is the flat still free?"},
        ],
    )
    return Reply.objects.create(
        moment=moment, text="Yes! Shall we book a viewing?", source=Reply.Source.SIMULATOR
    )


def test_it_judges_with_the_rubric_judge_by_default(in_workspace):
    judge = judge_for_world(World.objects.get(slug="lettings"))
    # The resolver wraps the judge in the world's on-topic guard; the judge inside is the rubric.
    assert isinstance(judge.unguarded, RubricJudge)
    assert (judge.quick, judge.paid) == (True, False)


def test_it_scores_a_reply_with_the_world_model_judge(world, reply, stub):
    stub.default = Answer(text=f"```json\n{_verdict()}\n```")
    judge = judge_for_world(world)
    assert isinstance(judge.unguarded, ModelJudge)
    assert (judge.quick, judge.paid) == (False, True)
    judgement = judgement_record(reply=reply, judge=judge)
    assert judgement.error == ""
    assert judgement.scores == GOOD_SCORES
    assert judgement.judge_model == "vllm:judge-14b"
    assert 0 < judgement.total < 1
    [seen] = stub.requests
    prompt = seen.body["messages"][0]["content"]
    for name in DIMENSIONS:
        assert name in prompt
    assert "Shall we book a viewing?" in seen.body["messages"][-1]["content"]


def test_it_retries_malformed_judge_output_once_then_records_an_error(world, reply, stub):
    stub.then(Answer(text="I think it is a good reply."), Answer(text='{"scores": {"dialect": 2}}'))
    judgement = judgement_record(reply=reply, judge=judge_for_world(world))
    assert len(stub.requests) == 2
    # The second request says what was wrong with the first answer.
    assert "no JSON object" in stub.requests[1].body["messages"][-1]["content"]
    assert judgement.total is None
    assert judgement.scores == {}
    assert "answered twice without a usable verdict" in judgement.error
    assert Judgement.objects.filter(reply=reply, total__isnull=False).count() == 0


def test_it_accepts_a_corrected_second_answer(world, reply, stub):
    out_of_range = dict(GOOD_SCORES, respect=7)
    stub.then(Answer(text=_verdict(out_of_range)), Answer(text=_verdict()))
    judgement = judgement_record(reply=reply, judge=judge_for_world(world))
    assert judgement.error == ""
    assert judgement.scores["respect"] == 1.0
    assert "outside 0..1" in stub.requests[1].body["messages"][-1]["content"]


def test_it_records_a_judge_that_does_not_answer_as_an_error(world, reply, stub, fast_retries):
    stub.default = Answer(status=503)
    judgement = judgement_record(reply=reply, judge=judge_for_world(world))
    assert judgement.total is None
    assert "gave no verdict" in judgement.error
    assert "503" in judgement.error


def test_it_feeds_reviewer_overrides_to_the_model_judge(world, reply, stub, django_user_model):
    from arena import models as arena_models

    if not hasattr(arena_models, "JudgeOverride"):
        pytest.skip("the Duel's JudgeOverride model has not landed in this tree")
    arena_models.JudgeOverride.objects.create(
        reply=reply,
        judge_model="rubric-v1",
        scores={"respect": 0.2},
        judge_scores={"respect": 1.0},
        note="Shouting 'Yes!' at a formal customer is not respectful.",
        reviewer_name="rita",
    )
    judge = model_judge_for_world(world)
    assert len(judge.examples) == 1
    stub.default = Answer(text=_verdict())
    judge.score([Turn("customer", "Hi there")], "Hello! How can I help?")
    system = stub.requests[0].body["messages"][0]["content"]
    assert "Reviewers corrected earlier verdicts" in system
    assert "Yes! Shall we book a viewing?" in system
    assert '"respect": 0.2' in system
    assert "not respectful" in system


def test_it_keeps_the_vllm_judge_address_and_goes_back_to_the_rubric(world):
    connection = JudgeConnection.objects.get(world=world)
    assert connection.endpoint_url.endswith("/v1")
    world = world_judge_set(world=world, provider="rubric")
    assert (world.judge_provider, world.judge_model) == ("rubric", "")
    assert not JudgeConnection.objects.filter(world=world).exists()
    assert isinstance(judge_for_world(world).unguarded, RubricJudge)


def test_it_refuses_a_hosted_judge_without_its_key(in_workspace):
    world = World.objects.get(slug="lettings")
    with pytest.raises(ModelConnectionConflict) as raised:
        world_judge_set(world=world, provider="anthropic", model="claude-test-model")
    assert "ANTHROPIC_API_KEY" in str(raised.value)
    with pytest.raises(ModelConnectionBadRequest):
        world_judge_set(world=world, provider="vllm", model="m", endpoint_url="ftp://nope")


def test_it_asks_a_hosted_judge_when_its_key_is_set(in_workspace, stub, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-judge-key-0001")
    monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
    world = world_judge_set(
        world=World.objects.get(slug="lettings"), provider="openai", model="gpt-judge"
    )
    stub.default = Answer(text=_verdict())
    judgement = judge_for_world(world).score([], "Good morning, how can I help?")
    assert judgement.judge_model == "openai:gpt-judge"
    assert stub.requests[0].body["model"] == "gpt-judge"


def test_it_parses_scores_from_any_provider_directly(stub):
    stub.default = Answer(text="Here you go: " + _verdict())
    judge = ModelJudge(
        provider_for(ModelTarget("vllm", model="j", base_url=stub.base_url)), model_name="j"
    )
    assert judge.score([], "Hello").scores == GOOD_SCORES

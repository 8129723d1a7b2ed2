"""The agent role per version: the simulator by default, a model once Runs on moves it; a
version whose provider cannot answer here says why instead of guessing."""

from __future__ import annotations

import pytest

from arena.models import Moment, World
from policies.agents import VersionCannotAnswer, version_reply
from policies.models import PolicyVersion
from policies.services import version_runs_on_set
from trainers.conversation import CALL_CONNECTS


@pytest.fixture
def moment(in_workspace):
    world = World.objects.get(slug="lettings")
    return Moment.objects.create(
        world=world,
        kind=Moment.Kind.SYNTHETIC,
        scenario=world.scenarios.first(),
        simulator_state=None,
        context=[
            {"speaker": "agent", "text": "Good morning, Acme Lettings."},
            {"speaker": "customer", "text": "Hi, it's a bit expensive for us."},
        ],
    )


def test_it_answers_from_the_simulator_by_default(moment):
    reply = version_reply(PolicyVersion.objects.get(world__slug="lettings", number=1), moment)
    assert reply.text
    assert reply.move


def test_it_answers_from_a_vllm_endpoint_once_moved_there(moment, stub):
    version = version_runs_on_set(
        version=PolicyVersion.objects.get(world__slug="lettings", number=1),
        provider="vllm",
        model="Qwen/Qwen3-14B",
        endpoint_url=stub.base_url,
    )
    reply = version_reply(version, moment)
    assert (reply.text, reply.move) == (stub.default.text, "")
    messages = stub.requests[0].body["messages"]
    assert messages[0]["role"] == "system"
    assert "Lettings" in messages[0]["content"]
    # The one conversation builder (trainers.conversation) opens a call the agent opened with
    # the customer's stage direction, exactly as the version was trained.
    assert [m["role"] for m in messages[1:]] == ["user", "assistant", "user"]
    assert messages[1]["content"] == CALL_CONNECTS
    assert messages[-1]["content"] == "Hi, it's a bit expensive for us."


def test_it_says_why_a_version_cannot_answer_here(moment, stub, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-for-the-move-0001")
    version = version_runs_on_set(
        version=PolicyVersion.objects.get(world__slug="lettings", number=1),
        provider="anthropic",
        model="claude-x",
    )
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(VersionCannotAnswer, match="set ANTHROPIC_API_KEY"):
        version_reply(version, moment)
    assert stub.requests == []

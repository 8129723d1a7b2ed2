"""A trained version is served exactly the messages it was trained on: the spec the wording
cards write and the reply a version is asked for go through one conversation builder, opening
with the world's one system prompt."""

from __future__ import annotations

import pytest

from arena.models import Pick, World
from arena.services.worlds import world_system_prompt_set
from policies import agents
from policies.models import PolicyVersion
from tests.training.wording_choices import dpo_choice, lettings_picks_frozen
from trainers.wording.spec import parse_wording_spec
from training.wording import wording_spec_build

PROMPT = "You are Ada, the letting agent of Hearth & Key. Be brief and kind."


@pytest.fixture
def frozen_lettings(in_workspace):
    world_system_prompt_set(world=World.objects.get(slug="lettings"), system_prompt=PROMPT)
    return lettings_picks_frozen(picks=2, pairs=4)


class _Recording:
    """A provider that keeps the messages it is asked with (the model itself is not the
    point here: what it is sent is)."""

    def __init__(self) -> None:
        self.asked: list[list[dict[str, str]]] = []

    def available(self):
        return True, ""

    def reply(self, messages, *, max_tokens):
        self.asked.append([dict(message) for message in messages])
        return "Of course: shall we find a time that suits you?"


def test_training_and_serving_build_the_same_messages_for_one_moment(frozen_lettings, monkeypatch):
    choice = dpo_choice(frozen_lettings, min_pairs=2)
    spec = wording_spec_build(choice, job_folder_hint="versions/test")
    assert spec["system"] == PROMPT
    trained_on = parse_wording_spec(spec, trainer="dpo").pairs

    moment = Pick.objects.select_related("pair__moment").first().pair.moment
    recording = _Recording()
    version = PolicyVersion.objects.get(world__slug="lettings", number=1)
    version.provider = PolicyVersion.Provider.OPENAI  # any model-backed version
    monkeypatch.setattr(agents, "version_provider", lambda _version: (recording, None))
    agents.version_reply(version, moment)
    served = recording.asked[0]

    assert served[0] == {"role": "system", "content": PROMPT}
    assert served[-1]["role"] == "user"
    training_prompts = [list(pair.prompt) for pair in trained_on]
    assert served in training_prompts


def test_the_default_prompt_names_the_world_and_is_one_field(in_workspace):
    world = World.objects.get(slug="lettings")
    assert world.system_prompt == ""
    assert world.name in world.agent_system_prompt
    world = world_system_prompt_set(world=world, system_prompt="  Be brief.  ")
    assert world.agent_system_prompt == "Be brief."

"""A moment of a call as the chat messages the agent sees: the world's system prompt, then the
call so far, through the one builder the trainers use too (trainers.conversation).

Serving (policies.agents) and training (training.wording's spec) both call this, so a trained
version is served exactly the messages it was trained on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from arena.models import Moment, World
from trainers.conversation import Message, conversation_messages


def world_messages(world: World, turns: Iterable[Mapping[str, str]]) -> list[Message]:
    return conversation_messages(turns, system_prompt=world.agent_system_prompt)


def moment_messages(moment: Moment) -> list[Message]:
    """The call so far at `moment` as chat messages for the agent's next turn."""
    return world_messages(moment.world, moment.dialogue())

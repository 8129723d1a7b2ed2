"""How a version answers at a moment: the agent role.

Every version starts on the simulator: its move strategy picks the move for the state of the
call, and scripted wording says it. (Model-backed providers arrive with the providers work and
plug in here.) A released version answers nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from arena.models import Moment
from policies.models import PolicyVersion
from trainers.move_strategy import SCRIPTED, choose_move
from trainers.simulator import DEFAULT_MAX_TURNS, Persona, scripted_reply, state_index

_OBJECTION_WORDS = re.compile(
    r"\b(expensive|afford|price|cost|budget|busy|not sure|don't know|later|too much|"
    r"worried|concern|hesitant|can't)\b",
    re.IGNORECASE,
)
_CASUAL_WORDS = re.compile(r"\b(hi|hey|yeah|yep|gonna|wanna|lol|cool|awesome)\b|!", re.IGNORECASE)


class VersionCannotAnswer(RuntimeError):
    """The version is released (or its provider is unavailable) and answers nothing."""


@dataclass(frozen=True)
class AgentReply:
    text: str
    move: str


def _dialect_of(moment: Moment) -> str:
    if moment.scenario_id:
        return moment.scenario.dialect
    customer_text = " ".join(
        turn["text"] for turn in moment.dialogue() if turn["speaker"] == "customer"
    )
    return "casual" if len(_CASUAL_WORDS.findall(customer_text)) >= 2 else "formal"


def moment_state_index(moment: Moment) -> int:
    """The simulator state of a moment: exact for simulated ones, read off a real dialogue.

    For a real call we can only approximate what the simulator would see: how far into the
    call we are, and whether the customer's last words raise an objection.
    """
    if moment.simulator_state is not None:
        return moment.simulator_state
    dialogue = moment.dialogue()
    agent_turns = sum(1 for turn in dialogue if turn["speaker"] == "agent")
    if agent_turns == 0:
        return state_index("opening", interest=1, trust=0, turn=0)
    last_customer = next(
        (turn["text"] for turn in reversed(dialogue) if turn["speaker"] == "customer"), ""
    )
    objection = "open" if _OBJECTION_WORDS.search(last_customer) else "not_raised"
    turn = min(agent_turns, DEFAULT_MAX_TURNS - 1)
    return state_index("discovery", objection, interest=1, trust=1, turn=turn)


def version_reply(version: PolicyVersion, moment: Moment) -> AgentReply:
    """What `version` says at `moment`, or VersionCannotAnswer."""
    if not version.can_answer:
        raise VersionCannotAnswer(f"{version.label} is released and answers nothing.")
    if version.provider != PolicyVersion.Provider.SIMULATOR:
        raise VersionCannotAnswer(
            f"{version.label} runs on {version.get_provider_display()}, which is not wired yet."
        )
    index = moment_state_index(moment)
    scenario = moment.scenario.slug if moment.scenario_id else None
    move = choose_move(version.move_strategy or SCRIPTED, state_index=index, scenario=scenario)
    persona = Persona.from_dict(moment.scenario.persona_dict()) if moment.scenario_id else None
    from trainers.simulator import describe_state

    text = scripted_reply(move, _dialect_of(moment), describe_state(index, persona))
    return AgentReply(text=text, move=move)

"""The one conversation builder: a call's turns so far → the chat messages an agent model sees.

Training (the trainers' specs), serving (a version answering in the Duel, Evaluate and live
calls) and the arena's moments all turn a moment into messages here, so a trained version is
served exactly the messages it was trained on: the world's system prompt, then the turns with
the agent as the assistant and the customer as the user. Chat templates (and the Anthropic API)
want turns that alternate and open and end with the user, so consecutive turns of one speaker
are joined, and a short stage direction from the customer's side opens a call the agent opened
and closes one where the agent spoke last.

Pure Python (no Django): the trainers import it, and the apps above them do too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

Message = dict[str, str]

# Stage directions from the customer's side, where a conversation needs a user turn.
CALL_CONNECTS = "(The call connects.)"
CUSTOMER_WAITS = "(The customer waits for you to go on.)"
STAGE_DIRECTIONS = frozenset({CALL_CONNECTS, CUSTOMER_WAITS})


def conversation_messages(
    turns: Iterable[Mapping[str, str]], *, system_prompt: str = ""
) -> list[Message]:
    """`turns` ({"speaker": "agent"|"customer", "text"}) as chat messages for the agent's next
    reply: system prompt first (when there is one), alternating user/assistant after it,
    opening and ending with the user."""
    messages: list[Message] = []
    for turn in turns:
        role = "assistant" if turn["speaker"] == "agent" else "user"
        if messages and messages[-1]["role"] == role:
            messages[-1] = {"role": role, "content": messages[-1]["content"] + "\n" + turn["text"]}
        else:
            messages.append({"role": role, "content": turn["text"]})
    if not messages or messages[0]["role"] != "user":
        messages.insert(0, {"role": "user", "content": CALL_CONNECTS})
    if messages[-1]["role"] != "user":
        messages.append({"role": "user", "content": CUSTOMER_WAITS})
    if system_prompt:
        messages.insert(0, {"role": "system", "content": system_prompt})
    return messages

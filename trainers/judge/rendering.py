"""How the base reads an item (the call so far and a reply): as chat messages through the base's
chat template, the oldest turns dropped until it fits (pure Python, no Django). The features
(trainers.judge.base_features) and the answer check (trainers.judge.answers) read the same ids.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trainers.conversation import conversation_messages

# The longest conversation read, in tokens; older turns are dropped first.
MAX_TOKENS = 512


def item_messages(context: Sequence[Mapping[str, str]], reply: str) -> list[dict[str, str]]:
    """The call so far and the reply as chat messages, the reply the last (agent's) message."""
    return [*conversation_messages(context), {"role": "assistant", "content": reply}]


def trimmed(
    tokenizer: Any, context: Sequence[Mapping[str, str]], reply: str
) -> tuple[list[int], list[Mapping[str, str]]]:
    """Token ids of the item, its oldest turns dropped until it fits MAX_TOKENS, and the turns
    kept; a reply too long alone keeps its last MAX_TOKENS tokens (the state read is at the
    end)."""
    from trainers.wording.bases import conversation_ids

    turns = list(context)
    while True:
        ids = conversation_ids(tokenizer, item_messages(turns, reply))
        if len(ids) <= MAX_TOKENS or not turns:
            return ids[-MAX_TOKENS:], turns
        turns = turns[1:]

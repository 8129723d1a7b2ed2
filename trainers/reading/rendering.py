"""How the base reads an item (the call so far and a reply): as chat messages through the base's
chat template, the oldest turns dropped until it fits (pure Python, no Django). The features
(trainers.reading.base_features) and the answer check (trainers.judge.answers) read the same ids.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainers.conversation import conversation_messages

# Bump when what a stored log-probability means changes.
ANSWERS_VERSION = 1

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
    from trainers.bases import conversation_ids

    turns = list(context)
    while True:
        ids = conversation_ids(tokenizer, item_messages(turns, reply))
        if len(ids) <= MAX_TOKENS or not turns:
            return ids[-MAX_TOKENS:], turns
        turns = turns[1:]


@dataclass(frozen=True)
class ReplyRow:
    """Token ids of a rendered conversation whose last message is the reply, and where the
    reply's tokens start."""

    ids: tuple[int, ...]
    start: int

    def key(self) -> str:
        digest = hashlib.sha256(f"answers v{ANSWERS_VERSION}:{self.start}:".encode())
        digest.update(np.asarray(self.ids, dtype=np.int64).tobytes())
        return digest.hexdigest()


def reply_row(tokenizer: Any, context: Sequence[Mapping[str, str]], reply: str) -> ReplyRow:
    """The item as the base reads it (oldest turns dropped to fit, as its features are read),
    with the position of the reply's first token."""
    from trainers.bases import conversation_ids

    ids, turns = trimmed(tokenizer, context, reply)
    prefix = conversation_ids(tokenizer, conversation_messages(turns), add_generation_prompt=True)
    start = len(os.path.commonprefix([prefix, ids]))
    # A reply too long alone (cut to its end) or a template that renders the prefix otherwise:
    # every token but the first counts.
    return ReplyRow(tuple(ids), min(max(start, 1), len(ids) - 1))

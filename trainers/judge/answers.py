"""Whether a reply answers the call it is in: how much likelier the base finds the reply after
the call so far than after a bare opening (pure Python, no Django).

    answers = mean log p(reply's tokens | the call so far) - mean log p(reply's tokens | the
              call just connecting)

the pointwise mutual information between the call and the reply, per token, read by the base's
language-model head through the chat template (the call so far as trainers.conversation renders
it; the bare opening is what an empty call renders to). A reply written for this conversation
is far likelier after it (the customer's questions, names and numbers); a line that would fit
any call (another business's, or a generic "I understand your concern") gains little or loses.
The on-topic guard's words (trainers.judge.topic) cannot see that: a generic line uses no
foreign word.

The floor is the world's own: the `FLAG_PERCENTILE`th percentile of the score over its own agent
turns that follow something said (the guard's floor sample, calls Evaluate holds out never among
them; a call's opening line answers nothing, and its score is 0 by construction). The base never
learned from those calls, so their scores are already out-of-sample. A reply below the floor and
below zero (the call made it no likelier at all) does not answer the call; fewer than
`MIN_SAMPLE` own turns and there is no floor (nothing is flagged, and the fit says so).

Both log-probabilities come from the pass that reads the base's features of the same item
(trainers.judge.base_features): the call-so-far pass stores the item's features too, so a
judge that scores and checks a reply reads it once, plus the short bare pass (one per reply
text, shared by every moment it is scored at).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainers.conversation import conversation_messages
from trainers.judge.rendering import trimmed
from trainers.judge.topic import (
    FLAG_PERCENTILE,
    MIN_UNITS,
    below_floor,
    joint_statistic,
    own_share_below,
)

# Bump when what a stored log-probability means changes.
ANSWERS_VERSION = 1
MIN_SAMPLE = MIN_UNITS


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
    from trainers.wording.bases import conversation_ids

    ids, turns = trimmed(tokenizer, context, reply)
    prefix = conversation_ids(tokenizer, conversation_messages(turns), add_generation_prompt=True)
    start = len(os.path.commonprefix([prefix, ids]))
    # A reply too long alone (cut to its end) or a template that renders the prefix otherwise:
    # every token but the first counts.
    return ReplyRow(tuple(ids), min(max(start, 1), len(ids) - 1))


@dataclass(frozen=True)
class ReplyPass:
    """What one pass over rows gives: the mean log-probability of each row's reply tokens, and
    the last-token state (the item's features, trainers.judge.base_features)."""

    log_probs: np.ndarray
    features: np.ndarray
    tokens: int


def reply_pass(
    model: Any, rows: Sequence[ReplyRow], *, pad_token_id: int, batch_size: int = 16
) -> ReplyPass:
    """One forward pass of the base (a causal language model) over `rows`, shortest first;
    the language-model head runs on the reply's positions only (a 49k-word vocabulary at
    every position of a batch would not fit in memory)."""
    import torch

    from trainers.wording.bases import inference_precision

    backbone, head = model.base_model, model.get_output_embeddings()
    device = next(model.parameters()).device
    log_probs = np.zeros(len(rows), dtype=np.float64)
    features = np.zeros((len(rows), int(model.config.hidden_size)), dtype=np.float32)
    order = sorted(range(len(rows)), key=lambda index: len(rows[index].ids))
    tokens = 0
    was_training = model.training
    model.eval()
    with torch.no_grad(), inference_precision(model):
        for begin in range(0, len(order), batch_size):
            batch = order[begin : begin + batch_size]
            width = max(len(rows[index].ids) for index in batch)
            input_ids = torch.full((len(batch), width), pad_token_id, dtype=torch.long)
            for line, index in enumerate(batch):
                input_ids[line, : len(rows[index].ids)] = torch.tensor(rows[index].ids)
            # No attention mask: pads follow each row's end and a causal model never looks
            # ahead (trainers.wording.reward_probe.last_token_features reads the same way).
            states = backbone(input_ids=input_ids.to(device)).last_hidden_state
            for line, index in enumerate(batch):
                row = rows[index]
                end = len(row.ids)
                features[index] = states[line, end - 1].float().cpu().numpy()
                # The state at position p predicts the token at p + 1.
                logits = head(states[line, row.start - 1 : end - 1]).float()
                targets = input_ids[line, row.start : end].to(logits.device)
                chosen = torch.log_softmax(logits, dim=-1).gather(1, targets[:, None])
                log_probs[index] = float(chosen.mean())
                tokens += end
    if was_training:
        model.train()
    return ReplyPass(log_probs, features, tokens)


@dataclass(frozen=True)
class AnswerCheck:
    """A world's "does the reply answer the call" check: a reader of the base (its `answers`)
    and the world's own floor."""

    reader: Any
    floor: float
    # The world's own turns' scores, ascending, that a reply's is ranked against for the
    # guard's joint test with the words (trainers.judge.topic.joint_statistic); empty for a
    # version fitted before it kept them (the floor alone applies then).
    own: Sequence[float] = ()

    def scores(self, items: Sequence[tuple[Sequence[Mapping[str, str]], str]]) -> np.ndarray:
        return self.reader.answers(items)

    def flags(self, score: float) -> bool:
        return below_floor(score, self.floor)

    def joint(self, words_own: Sequence[float], evidence: float, score: float) -> float | None:
        """Fisher's statistic of the reply's words (against the world's own turns' evidence,
        ascending) and its answer score together; None without both own rankings."""
        if not len(self.own) or not len(words_own):
            return None
        return joint_statistic(
            own_share_below(words_own, evidence), own_share_below(self.own, score)
        )


def answers_floor(scores: Sequence[float]) -> float | None:
    """The world's floor from its own agent turns' scores; None with too few to place it."""
    if len(scores) < MIN_SAMPLE:
        return None
    return float(np.percentile(np.asarray(scores, dtype=np.float64), FLAG_PERCENTILE))

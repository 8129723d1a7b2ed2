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
(trainers.reading.passes, through trainers.reading.base_features, which caches both): a judge that
scores and checks a reply reads it once, plus the short bare pass (one per reply text, shared
by every moment it is scored at).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainers.judge.topic import (
    FLAG_PERCENTILE,
    MIN_UNITS,
    below_floor,
    joint_statistic,
    own_share_below,
)

MIN_SAMPLE = MIN_UNITS


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

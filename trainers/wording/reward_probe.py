"""A reward model's head, started from a linear probe on the base's frozen features.

Backpropagating through a 135M base costs about three forward passes a token, so on two CPU
cores a ten-minute stage trains on a few hundred rows and its fresh head barely leaves chance.
A forward pass alone is three times cheaper and needs no optimizer: the probe reads the
base's last hidden state at the conversation's last token (exactly what the scalar head
reads), on as many training rows as the time it is given allows (in the seeded order), and
fits the head by Newton's method, batched in torch on the base's own device
(trainers.reading.head_fit) — Bradley–Terry on chosen minus rejected for picks, the logistic
loss on won/lost for outcomes — its strength chosen by 5-fold cross-validation grouped by call
(never the held-out rows). The trainer then starts from that
head, so whatever steps the budget leaves improve a model that already ranks.

The head has no bias: an outcome probe's intercept is dropped, which moves every reward by
the same amount and changes no ranking, AUC or advantage.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainers.reading.head_fit import feature_spread as _scale  # the probes' name for it

# Rows are read in chunks of the seeded order (trainers.reading.passes sorts a chunk's rows by
# length so a batch pads little); a deadline is checked between chunks.
CHUNK = 64


@dataclass
class ProbeFeatures:
    """Last-token hidden states of the rows read (in the order given), and how long it took."""

    features: np.ndarray
    rows_read: int
    rows_asked: int
    tokens: int
    seconds: float
    ended: float  # time.monotonic() when the read stopped
    device: str = "cpu"  # where the base read them: the head is fitted there too

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


def last_token_features(
    model: Any,
    token_rows: Sequence[Sequence[int]],
    *,
    pad_token_id: int,
    batch_size: int = 16,
    deadline: float | None = None,
    reserve_tokens: int = 0,
    reserve_seconds: float = 0.0,
    on_chunk: Callable[[int, int], None] | None = None,
) -> ProbeFeatures:
    """The backbone's final hidden state at each row's last token (`model` is a base with
    `head="reward"`), rows taken in order until `deadline` (time.monotonic()) passes — less
    the time the next chunk and `reserve_tokens` more tokens will take at the speed measured so
    far (what measuring the held-out rows afterwards costs) and `reserve_seconds` (what the
    head's fit takes), so the whole stage ends by the deadline."""
    from trainers.reading.passes import reply_pass, shared_rows

    device = next(model.parameters()).device
    hidden = int(model.config.hidden_size)
    features = np.zeros((len(token_rows), hidden), dtype=np.float32)
    started, tokens, done = time.monotonic(), 0, 0
    for chunk_start in range(0, len(token_rows), CHUNK):
        if deadline is not None and done:
            seconds_a_token = (time.monotonic() - started) / max(tokens, 1)
            # The next chunk must end in time too, not only start (the outcome stage on the
            # shared calls read its last chunk past the deadline: 618 s of 600).
            next_chunk = tokens * CHUNK / done
            still_needed = (reserve_tokens + next_chunk) * seconds_a_token + reserve_seconds
            if time.monotonic() + still_needed > deadline:
                break
        done = min(chunk_start + CHUNK, len(token_rows))
        # A pair's two sides share their conversation so far: read once (trainers.reading.passes,
        # which pads after each row's end and passes no attention mask: a causal model's states
        # never look ahead, and the attention takes its causal fast path, +10% on the CPU).
        read = reply_pass(
            model,
            shared_rows(token_rows[chunk_start:done]),
            pad_token_id=pad_token_id,
            batch_size=batch_size,
            log_probs=False,
        )
        features[chunk_start:done] = read.features
        tokens += read.tokens
        if on_chunk is not None:
            on_chunk(done, len(token_rows))
    ended = time.monotonic()
    return ProbeFeatures(
        features=features[:done],
        rows_read=done,
        rows_asked=len(token_rows),
        tokens=tokens,
        seconds=ended - started,
        ended=ended,
        device=str(device),
    )


@contextmanager
def _dense_fit() -> Iterator[None]:
    """Where the probe's logistic fits run: BLAS on one thread. The fits come after the base's
    forward passes in the same process, whose OpenMP threads still hold both cores; BLAS's own
    threads then fought them for every small product, and on the demo's outcome calls the
    strength's grid took 309 s of a 600 s stage (measured on 1,500 real turns of features:
    an lbfgs fit 9.9 s on two BLAS threads, 0.31 s on one)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _fit_head(
    rows: np.ndarray,
    labels: np.ndarray,
    groups: np.ndarray,
    *,
    fit_intercept: bool,
    scoring: str,
    deadline: float | None,
    device: Any = None,
) -> tuple[np.ndarray, float]:
    """A logistic head on scaled rows, its strength chosen by grouped CV (the grid stops at
    `deadline`), fitted batched in torch on `device` (default: where the rows are), and that
    strength: trainers.reading.head_fit (scikit-learn's grid took 448 s at width 4,096)."""
    from trainers.reading.head_fit import fit_by_group, regularisation_grid

    fitted = fit_by_group(
        rows,
        labels,
        groups,
        grid=regularisation_grid(rows, labels, groups),
        fit_intercept=fit_intercept,
        scoring=scoring,
        deadline=deadline,
        device=device,
    )
    return fitted.weights, fitted.strength


def fit_pair_probe(
    chosen: np.ndarray,
    rejected: np.ndarray,
    groups: Sequence[str],
    *,
    deadline: float | None = None,
    device: Any = None,
) -> tuple[np.ndarray, float]:
    """Head weights from Bradley–Terry on feature differences (both orders, no intercept),
    and the strength chosen for them (the grid stops at `deadline`), fitted on `device`."""
    difference = (chosen - rejected).astype(np.float64)
    spread = _scale(np.vstack([difference, -difference]))
    rows = np.vstack([difference, -difference]) / spread
    labels = np.concatenate([np.ones(len(difference)), np.zeros(len(difference))])
    both = np.concatenate([np.asarray(groups), np.asarray(groups)])
    weights, strength = _fit_head(
        rows,
        labels,
        both,
        fit_intercept=False,
        scoring="accuracy",
        deadline=deadline,
        device=device,
    )
    return weights / spread, strength


def fit_outcome_probe(
    features: np.ndarray,
    won: Sequence[bool],
    groups: Sequence[str],
    *,
    deadline: float | None = None,
    device: Any = None,
) -> tuple[np.ndarray, float]:
    """Head weights from the logistic loss on won/lost (the intercept is dropped: see the
    module's note), and the strength chosen for them (the grid stops at `deadline`), fitted on
    `device`."""
    features = features.astype(np.float64)
    spread = _scale(features)
    weights, strength = _fit_head(
        features / spread,
        np.asarray(won, dtype=float),
        np.asarray(groups),
        fit_intercept=True,
        scoring="roc_auc",
        deadline=deadline,
        device=device,
    )
    return weights / spread, strength


def set_head(model: Any, weights: np.ndarray) -> None:
    """Write the probe into the scalar head (`score`, one output, no bias)."""
    import torch

    head = model.score
    with torch.no_grad():
        head.weight.copy_(torch.as_tensor(weights, dtype=head.weight.dtype).reshape(1, -1))

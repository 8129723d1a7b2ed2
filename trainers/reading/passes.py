"""The base's passes over many items (the call so far and a reply), each beginning the items
share read once (pure Python, no Django).

What a judge reads comes in families:
- the replies proposed at one moment share the call so far: a pair's two replies, the versions
  Evaluate compares, every line the on-topic bench tries there, and every reply's bare pass
  ("(The call connects.)" and the reply);
- a call's real agent turns each begin the item of a later moment of the same call (the fit's
  opening turns, the guard's floor sample, the bench's later turns).

A causal model's state at a position depends on the tokens up to it and on nothing after, so
- a row that begins another row is read in that row's pass: its states are the longer row's
  first positions;
- rows that share the call so far read it once: the keys and values it leaves are kept, and
  each row's reply is read after them;
- a reader keeps the last few calls so far it read (CallMemo), so replies scored one at a time
  at one moment (each pass a row or two) read their call once too.
Each row then gets what a pass over it alone gives (up to the rounding of other matrix shapes):
its last token's state (its features, trainers.reading.base_features) and the mean
log-probability of its reply's tokens (trainers.judge.answers).
"""

from __future__ import annotations

import copy
import inspect
import os
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainers.reading.rendering import ReplyRow


@dataclass(frozen=True)
class ReadPlan:
    """Which rows the base passes over and how: `hosted[h]` are the rows read in host `h`'s pass
    (itself among them; no host begins another), `shared` the hosts that read a common call so
    far once (its length, the hosts), `alone` the hosts read whole."""

    hosted: dict[int, list[int]]
    shared: list[tuple[int, list[int]]]
    alone: list[int]


def read_plan(rows: Sequence[ReplyRow]) -> ReadPlan:
    """Every row hosted by a row it begins (or by itself), and the hosts grouped by the call so
    far they share (the tokens before the reply's)."""
    # In sorted order every row that begins with a row comes right after it, so a row begins
    # another exactly when it begins the next one, whose host is then its host too.
    order = sorted(range(len(rows)), key=lambda index: rows[index].ids)
    host_of = list(range(len(rows)))
    for place in range(len(order) - 2, -1, -1):
        index, after = order[place], order[place + 1]
        ids = rows[index].ids
        if rows[after].ids[: len(ids)] == ids:
            host_of[index] = host_of[after]
    hosted: dict[int, list[int]] = {}
    for index in order:
        hosted.setdefault(host_of[index], []).append(index)
    by_call: dict[tuple[int, ...], list[int]] = {}
    for host in hosted:
        by_call.setdefault(rows[host].ids[: rows[host].start], []).append(host)
    shared = [(len(call), hosts) for call, hosts in by_call.items() if len(hosts) > 1]
    alone = [hosts[0] for hosts in by_call.values() if len(hosts) == 1]
    return ReadPlan(hosted, shared, alone)


def shared_rows(token_rows: Sequence[Sequence[int]]) -> list[ReplyRow]:
    """Rows of token ids whose reply's start is not known (a reward model's conversations),
    each taken to start where it parts from the row sorted beside it that it shares more with:
    a pair's two sides then read their conversation so far once. Where a row starts changes
    only what is shared, never the features read."""
    rows = [tuple(ids) for ids in token_rows]
    order = sorted(range(len(rows)), key=rows.__getitem__)
    shared = [0] * len(rows)
    for first, second in zip(order, order[1:], strict=False):
        common = len(os.path.commonprefix([rows[first], rows[second]]))
        shared[first], shared[second] = max(shared[first], common), max(shared[second], common)
    return [
        ReplyRow(ids, min(max(start, 1), len(ids) - 1))
        for ids, start in zip(rows, shared, strict=True)
    ]


def tokens_read(rows: Sequence[ReplyRow]) -> int:
    """The tokens reply_pass reads for `rows` (with no memo): what a deadline plans for."""
    plan = read_plan(rows)
    alone = sum(len(rows[host].ids) for host in plan.alone)
    return alone + sum(
        length + sum(len(rows[host].ids) - length for host in hosts)
        for length, hosts in plan.shared
    )


@dataclass(frozen=True)
class ReplyPass:
    """What passes over rows give: the mean log-probability of each row's reply tokens, its
    last-token state (the item's features), the tokens the base read, and the tokens the rows
    hold that it did not read again (a shared beginning, a row inside another)."""

    log_probs: np.ndarray
    features: np.ndarray
    tokens: int
    spared: int


def reply_pass(
    model: Any,
    rows: Sequence[ReplyRow],
    *,
    pad_token_id: int,
    batch_size: int = 16,
    log_probs: bool = True,
    memo: CallMemo | None = None,
) -> ReplyPass:
    """The base (a causal language model) over `rows` as `read_plan` says; the language-model
    head runs on the reply's positions only (a 49k-word vocabulary at every position of a batch
    would not fit in memory), and not at all without `log_probs` (those stay 0). With a `memo`,
    a few rows (no more than a batch: nothing to gain from batching them whole) each read
    their call so far apart, found in the memo where a recent pass read it and kept there."""
    import torch

    from trainers.bases import inference_precision

    plan = read_plan(rows)
    by_call = list(plan.shared)
    alone = sorted(plan.alone, key=lambda host: len(rows[host].ids))  # little padding
    if memo is not None and len(plan.hosted) <= batch_size:
        by_call += [(rows[host].start, [host]) for host in alone]
        alone = []
    reading = _Reading(model, rows, pad_token_id, log_probs=log_probs)
    was_training = model.training
    model.eval()
    with torch.no_grad(), inference_precision(model):
        for begin in range(0, len(alone), batch_size):
            batch = alone[begin : begin + batch_size]
            states = reading.forward([rows[host].ids for host in batch])
            for line, host in enumerate(batch):
                reading.take(plan.hosted[host], states[line])
        for length, hosts in by_call:
            call = reading.call(rows[hosts[0]].ids[:length], memo)
            hosts = sorted(hosts, key=lambda host: len(rows[host].ids))
            for begin in range(0, len(hosts), batch_size):
                batch = hosts[begin : begin + batch_size]
                states = reading.forward([rows[host].ids[length:] for host in batch], after=call)
                for line, host in enumerate(batch):
                    reading.take(plan.hosted[host], torch.cat([call.states[0], states[line]]))
    if was_training:
        model.train()
    held = sum(len(row.ids) for row in rows)
    return ReplyPass(reading.log_probs, reading.features, reading.tokens, held - reading.tokens)


# How many calls so far a reader keeps read (their keys and values, a few MB each at SmolLM2's
# size, tens of MB at 8B): the moments a few replies in turn are scored at (a pair's
# candidates, Evaluate's versions, the bare opening every answer check reads).
MEMO_CALLS = 8


class CallMemo:
    """The calls so far read lately, the one used longest ago dropped first."""

    def __init__(self, size: int = MEMO_CALLS):
        self.size = size
        self._calls: OrderedDict[tuple[int, ...], _Call] = OrderedDict()

    def __len__(self) -> int:
        return len(self._calls)

    def get(self, ids: tuple[int, ...]) -> _Call | None:
        call = self._calls.get(ids)
        if call is not None:
            self._calls.move_to_end(ids)
        return call

    def beginning(self, ids: tuple[int, ...]) -> tuple[int, _Call | None]:
        """The longest call kept that `ids` begins with, and its length (0, None: none): the
        same call a moment earlier, when a call's moments are scored in order (Evaluate)."""
        found: tuple[int, _Call | None] = (0, None)
        for kept, call in self._calls.items():
            if found[0] < len(kept) < len(ids) and ids[: len(kept)] == kept:
                found = (len(kept), call)
        return found

    def put(self, ids: tuple[int, ...], call: _Call) -> None:
        self._calls[ids] = call
        self._calls.move_to_end(ids)
        while len(self._calls) > self.size:
            self._calls.popitem(last=False)


@dataclass
class _Call:
    """A call so far read once: its states and the keys and values it leaves."""

    states: Any
    cache: Any


class _Reading:
    """The passes of one `reply_pass` and what they give each row."""

    def __init__(self, model: Any, rows: Sequence[ReplyRow], pad_token_id: int, *, log_probs: bool):
        self.backbone, self.head = model.base_model, model.get_output_embeddings()
        self.with_log_probs = log_probs
        # transformers 5 names the keys and values kept "cache"; earlier releases (a device
        # machine's may be one) "past_key_values".
        parameters = inspect.signature(self.backbone.forward).parameters
        self.cache_name = "cache" if "cache" in parameters else "past_key_values"
        self.device = next(model.parameters()).device
        self.rows, self.pad_token_id = rows, pad_token_id
        self.log_probs = np.zeros(len(rows), dtype=np.float64)
        self.features = np.zeros((len(rows), int(model.config.hidden_size)), dtype=np.float32)
        self.tokens = 0

    def call(self, ids: tuple[int, ...], memo: CallMemo | None) -> _Call:
        """The call so far `ids` read (its states, its keys and values), from `memo` where a
        recent pass read it, and kept there."""
        if memo is None:
            return self.forward([ids], keep=True)
        call = memo.get(ids)
        if call is None:
            # A call goes on from its earlier moment: only the turns since are read.
            length, earlier = memo.beginning(ids)
            call = self.forward([ids[length:]], after=earlier, keep=True)
            memo.put(ids, call)
        return call

    def forward(self, id_rows: Sequence[Sequence[int]], *, after: _Call | None = None, keep=False):
        """The states of each row of ids (a batch padded after each row's end), read after the
        call `after` where given; `keep` returns a _Call of a single row instead (the call
        `after` and this row together)."""
        import torch

        width = max(len(ids) for ids in id_rows)
        input_ids = torch.full((len(id_rows), width), self.pad_token_id, dtype=torch.long)
        for line, ids in enumerate(id_rows):
            input_ids[line, : len(ids)] = torch.tensor(ids)
        self.tokens += sum(len(ids) for ids in id_rows)
        cache = None
        if after is not None:
            # Each pass appends to the cache it is given: a copy per batch, one row per reply.
            cache = copy.deepcopy(after.cache)
            cache.batch_repeat_interleave(len(id_rows))
        # No attention mask: pads follow each row's end and a causal model never looks ahead
        # (trainers.wording.reward_probe.last_token_features reads the same way).
        out = self.backbone(
            input_ids=input_ids.to(self.device),
            use_cache=keep or after is not None,
            **{self.cache_name: cache},
        )
        if keep:
            states = out.last_hidden_state
            if after is not None:
                states = torch.cat([after.states, states], dim=1)
            return _Call(states, getattr(out, self.cache_name))
        return out.last_hidden_state

    def take(self, indices: Sequence[int], states: Any) -> None:
        """What the states of a host's pass (one row's positions, its own first) give each row
        it hosts."""
        import torch

        for index in indices:
            row = self.rows[index]
            end = len(row.ids)
            self.features[index] = states[end - 1].float().cpu().numpy()
            if not self.with_log_probs:
                continue
            # The state at position p predicts the token at p + 1.
            logits = self.head(states[row.start - 1 : end - 1]).float()
            targets = torch.tensor(row.ids[row.start : end], device=logits.device)
            chosen = torch.log_softmax(logits, dim=-1).gather(1, targets[:, None])
            self.log_probs[index] = float(chosen.mean())

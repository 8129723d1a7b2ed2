"""The base's passes read each beginning the items share once (trainers.reading.passes): a row
that begins another is read in its pass, the replies at one moment read the call so far once,
and every row still gets what a pass over it alone gives."""

from __future__ import annotations

import os

import numpy as np
import pytest

from trainers.bases import TINY_BASE, base_dir, tiny_base
from trainers.reading.base_features import BaseReader, ReadStats
from trainers.reading.passes import read_plan, reply_pass
from trainers.reading.rendering import ReplyRow, reply_row

CALL = [
    {"speaker": "agent", "text": "Hello, thanks for taking the call about the flat."},
    {"speaker": "customer", "text": "Is the deposit for the flat refundable?"},
]
REPLIES = ["Yes, the deposit is refundable.", "Would you like a viewing?", "It is, in full."]


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    tiny_base(base_dir(TINY_BASE, folder), texts=["the flat deposit refundable viewing"])
    return folder


@pytest.fixture(autouse=True)
def float32(monkeypatch):
    # Exact comparisons: bf16 autocast (on a CPU that has it) rounds differently per shape.
    monkeypatch.setenv("LEVERS9_CPU_BF16", "0")


def _row(ids: list[int], start: int) -> ReplyRow:
    return ReplyRow(tuple(ids), start)


def test_a_row_that_begins_another_is_read_in_its_pass_and_replies_at_one_moment_share_it():
    turn = _row([1, 2, 3, 4, 5], 3)  # a call's turn, which begins the next moment's row
    later = _row([1, 2, 3, 4, 5, 6, 7, 8], 6)
    sibling = _row([1, 2, 3, 4, 5, 6, 9], 6)  # another reply at the later moment
    lone = _row([7, 7, 7], 1)
    plan = read_plan([turn, later, sibling, lone, turn])
    assert sorted(plan.hosted) == [1, 2, 3]
    assert sorted(plan.hosted[1]) == [0, 1, 4]  # the turn (twice) inside the later row
    assert plan.hosted[2] == [2]
    assert plan.hosted[3] == [3]
    assert plan.shared == [(6, [1, 2])]  # the later moment's two replies, its call read once
    assert plan.alone == [3]


def test_rows_that_share_nothing_are_each_read_whole():
    plan = read_plan([_row([1, 2, 3], 2), _row([2, 2, 3], 2), _row([1, 3, 3], 2)])
    assert plan.shared == []
    assert sorted(plan.alone) == [0, 1, 2]
    assert all(plan.hosted[host] == [host] for host in plan.alone)


def _alone(model, row: ReplyRow) -> tuple[np.ndarray, float]:
    """The row's last state and its reply's mean log-probability, from a pass over it alone
    with the whole vocabulary's logits at every position."""
    import torch

    with torch.no_grad():
        out = model(input_ids=torch.tensor([row.ids]), output_hidden_states=True)
    logits = out.logits[0].float()
    log_probs = torch.log_softmax(logits[row.start - 1 : len(row.ids) - 1], dim=-1)
    chosen = log_probs.gather(1, torch.tensor(row.ids[row.start :])[:, None]).mean()
    return out.hidden_states[-1][0, -1].float().numpy(), float(chosen)


def test_every_row_gets_what_a_pass_over_it_alone_gives_and_the_shared_part_is_read_once(
    models_dir, tmp_path
):
    reader = BaseReader(TINY_BASE, models_dir=models_dir, features_dir=tmp_path)
    model, tokenizer = reader.model(), reader.tokenizer()
    later = [
        *CALL,
        {"speaker": "agent", "text": REPLIES[0]},
        {"speaker": "customer", "text": "Good."},
    ]
    items = [(CALL, reply) for reply in REPLIES] + [(later, "Shall I book it?"), ([], "Hi.")]
    rows = [reply_row(tokenizer, context, reply) for context, reply in items]
    # Three replies at one moment, the first of them inside the later moment's row.
    assert rows[3].ids[: len(rows[0].ids)] == rows[0].ids
    passed = reply_pass(model, rows, pad_token_id=tokenizer.pad_token_id, batch_size=2)
    for index, row in enumerate(rows):
        features, log_prob = _alone(model, row)
        np.testing.assert_allclose(passed.features[index], features, atol=1e-4)
        assert passed.log_probs[index] == pytest.approx(log_prob, abs=1e-4)
    # Not read again: the first reply (inside the later row), and the call the other two
    # replies share, read once for both.
    assert passed.spared == len(rows[0].ids) + rows[1].start
    assert passed.tokens + passed.spared == sum(len(row.ids) for row in rows)


def test_the_reader_reports_what_sharing_spared_and_caches_what_reading_alone_would(
    models_dir, tmp_path
):
    items = [(CALL, reply) for reply in REPLIES]
    together = BaseReader(TINY_BASE, models_dir=models_dir, features_dir=tmp_path / "a")
    stats = ReadStats()
    features = together.features(items, stats=stats)
    assert stats.read == 3
    assert stats.spared > 0
    assert stats.as_dict()["tokens_spared"] == stats.spared
    one_by_one = BaseReader(TINY_BASE, models_dir=models_dir, features_dir=tmp_path / "b")
    alone = np.vstack([one_by_one.features([item]) for item in items])
    np.testing.assert_allclose(features, alone, atol=1e-4)
    shared_answers = together.answers(items)
    np.testing.assert_allclose(
        shared_answers, np.concatenate([one_by_one.answers([item]) for item in items]), atol=1e-4
    )


def test_replies_scored_in_turn_at_one_moment_read_their_call_once(models_dir, tmp_path):
    """A reader keeps the calls so far it read lately: the pair maker's candidates, Evaluate's
    versions and every answer check's bare opening, each scored in a pass of its own."""
    reader = BaseReader(TINY_BASE, models_dir=models_dir, features_dir=tmp_path / "a")
    tokenizer = reader.tokenizer()
    first, second = ReadStats(), ReadStats()
    features = [reader.features([(CALL, REPLIES[0])], stats=first)]
    features.append(reader.features([(CALL, REPLIES[1])], stats=second))
    row = reply_row(tokenizer, CALL, REPLIES[1])
    assert first.spared == 0
    assert (second.tokens, second.spared) == (len(row.ids) - row.start, row.start)
    fresh = BaseReader(TINY_BASE, models_dir=models_dir, features_dir=tmp_path / "b")
    alone = fresh.features([(CALL, REPLIES[1])])
    np.testing.assert_allclose(features[1], alone, atol=1e-4)
    # The answer check's bare opening is the same for every reply: read once.
    reader.answers([(CALL, REPLIES[2])])
    bare, stats = reply_row(tokenizer, [], "Another reply."), ReadStats()
    reader.answers([(CALL, "Another reply.")], stats=stats)
    assert stats.spared == bare.start + reply_row(tokenizer, CALL, "Another reply.").start


def test_a_calls_later_moment_reads_only_the_turns_since_its_earlier_one(models_dir, tmp_path):
    """Evaluate scores a call's moments in order: each moment's call so far goes on from the
    one a moment earlier, kept in the memo."""
    reader = BaseReader(TINY_BASE, models_dir=models_dir, features_dir=tmp_path / "a")
    tokenizer = reader.tokenizer()
    later = [
        *CALL,
        {"speaker": "agent", "text": REPLIES[1]},
        {"speaker": "customer", "text": "Ok."},
    ]
    reader.features([(CALL, "Would you like a viewing?")])
    stats = ReadStats()
    features = reader.features([(later, "Shall I book it?")], stats=stats)
    earlier = reply_row(tokenizer, CALL, "Would you like a viewing?")
    row = reply_row(tokenizer, later, "Shall I book it?")
    assert row.ids[: earlier.start] == earlier.ids[: earlier.start]
    assert stats.spared == earlier.start
    assert stats.tokens == len(row.ids) - earlier.start
    fresh = BaseReader(TINY_BASE, models_dir=models_dir, features_dir=tmp_path / "b")
    np.testing.assert_allclose(features, fresh.features([(later, "Shall I book it?")]), atol=1e-4)


def test_the_memo_keeps_the_calls_used_last():
    from trainers.reading.passes import CallMemo

    memo = CallMemo(size=2)
    memo.put((1,), "a")
    memo.put((2,), "b")
    assert memo.get((1,)) == "a"  # now used last
    memo.put((3,), "c")
    assert memo.get((2,)) is None
    assert memo.get((1,)) == "a"
    assert memo.get((3,)) == "c"
    assert len(memo) == 2
    assert memo.beginning((1, 5, 6)) == (1, "a")  # the longest kept call it begins with
    assert memo.beginning((1,)) == (0, None)  # itself is no beginning
    assert memo.beginning((4, 1)) == (0, None)


def test_rows_of_unknown_reply_start_share_what_a_pair_shares(models_dir, tmp_path):
    """A reward model's rows are whole conversations: a pair's two sides start where they
    part, read their conversation so far once, and the deadline plans for what is read."""
    from trainers.reading.passes import shared_rows, tokens_read

    reader = BaseReader(TINY_BASE, models_dir=models_dir, features_dir=tmp_path)
    model, tokenizer = reader.model(), reader.tokenizer()
    chosen, rejected = (reply_row(tokenizer, CALL, reply).ids for reply in REPLIES[:2])
    other = reply_row(tokenizer, [], "Hi.").ids
    rows = shared_rows([chosen, rejected, other])
    parted = len(os.path.commonprefix([chosen, rejected]))
    assert rows[0].start == rows[1].start == parted
    passed = reply_pass(model, rows, pad_token_id=tokenizer.pad_token_id, log_probs=False)
    assert passed.tokens == tokens_read(rows)
    assert passed.spared == parted
    for index, row in enumerate(rows):
        np.testing.assert_allclose(passed.features[index], _alone(model, row)[0], atol=1e-4)

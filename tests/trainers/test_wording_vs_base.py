"""The trainer-level measure of a wording version against its base untrained
(`bench.wording_vs_base`): its split keeps every prompt in one part, and its figures show a
win that is only length or repetition."""

from __future__ import annotations

from bench.wording_vs_base import repeat_rate, split_rows, versus


def _row(index: int, opening: str, *, ends_with_customer: bool = True) -> dict:
    context = [{"speaker": "customer", "text": opening}]
    if not ends_with_customer:
        context.append({"speaker": "agent", "text": "Anything else?"})
    return {"group": f"g{index}", "context": context, "chosen": "yes", "rejected": "no"}


def test_no_opening_is_in_two_parts():
    # Forty openings, three pairs each: a split by pair would spread an opening's pairs.
    rows = [_row(3 * o + k, f"Question number {o}?") for o in range(40) for k in range(3)]
    split = split_rows(rows, held_out=20, judge_share=0.4, seed=0)
    parts = [
        {row["context"][0]["text"] for row in part}
        for part in (split.judge, split.trainer, split.held)
    ]
    assert parts[0]
    assert parts[1]
    assert parts[2]
    assert not (parts[0] & parts[1])
    assert not (parts[0] & parts[2])
    assert not (parts[1] & parts[2])
    assert len(split.judge) + len(split.trainer) + len(split.held) == len(rows)


def test_only_prompts_the_customer_ends_are_held_out():
    rows = [_row(i, f"Q{i}", ends_with_customer=i % 2 == 0) for i in range(40)]
    split = split_rows(rows, held_out=10, judge_share=0.5, seed=1)
    assert all(row["context"][-1]["speaker"] == "customer" for row in split.held)


class _LengthJudge:
    """A judge that likes longer replies, and nothing else."""

    def score_many(self, items, *, digits=None):
        return [{"total": len(reply.split())} for _context, reply in items]


def test_a_length_only_win_shows_as_length():
    contexts = [[{"speaker": "customer", "text": f"Q{i}"}] for i in range(30)]
    base = ["Sure, here it is." for _ in contexts]
    padded = [reply + " really really really really really really" for reply in base]
    measured = versus(_LengthJudge(), contexts, base, padded, seed=0)
    assert measured["win_rate"] == 1.0
    assert measured["beats_base"]
    # What a reader sees beside the win: the replies are longer and repeat themselves.
    assert measured["version"]["words"] > 2 * measured["base"]["words"]
    assert measured["version"]["repeat_rate"] > measured["base"]["repeat_rate"] == 0.0


def test_an_unchanged_version_ties_its_base():
    contexts = [[{"speaker": "customer", "text": f"Q{i}"}] for i in range(30)]
    base = [f"Answer {i}." for i in range(30)]
    measured = versus(_LengthJudge(), contexts, base, list(base), seed=0)
    assert measured["win_rate"] == 0.5
    assert not measured["beats_base"]
    assert measured["replies_changed"] == 0


def test_repeat_rate():
    assert repeat_rate("a b c d e") == 0.0
    assert repeat_rate("go go go go go") == 1 - 1 / 3

"""A budgeted stage's own held-out measuring (trainers.wording.common.measured_within): a
seeded sample of the held-out rows, as many chunks as its share of the budget allows, and
every row in one call without a budget."""

from __future__ import annotations

from trainers.wording.common import MEASURING_SHARE, measured_within, measuring_seconds


def _recording():
    calls: list[list[int]] = []

    def measure(part):
        calls.append(list(part))
        return [item * 10 for item in part]

    return calls, measure


def test_without_a_budget_every_row_is_measured_in_one_call():
    calls, measure = _recording()
    items = list(range(40))
    positions, results = measured_within(items, measure, seconds=None, chunk=8, seed=3)
    assert len(calls) == 1
    assert sorted(positions) == items
    assert results == [items[position] * 10 for position in positions]


def test_it_starts_no_chunk_the_chunks_so_far_say_ends_past_its_seconds():
    calls, measure = _recording()
    items = list(range(100, 140))
    ticks = iter(range(100))  # each reading of the clock one second later

    def clock() -> float:
        return float(next(ticks))

    # One chunk took a second: a second would end at 2 s, past the 1.5 s share.
    positions, results = measured_within(items, measure, seconds=1.5, chunk=8, seed=3, clock=clock)
    assert len(calls) == 1
    assert len(positions) == 8
    assert results == [items[position] * 10 for position in positions]
    # A seeded sample of the held-out rows, not the file's first eight.
    assert positions != list(range(8))
    ticks = iter(range(100))
    again, _ = measured_within(items, _recording()[1], seconds=1.5, chunk=8, seed=3, clock=clock)
    assert again == positions


def test_the_share_follows_the_budget():
    assert measuring_seconds(None) is None
    assert measuring_seconds(600.0) == MEASURING_SHARE * 600.0


def test_it_measures_on_while_the_chunks_so_far_say_the_next_one_fits():
    now = [0.0]

    def ten_seconds_a_chunk(part):
        now[0] += 10.0
        return list(part)

    items = list(range(80))
    # After three chunks (30 s) a fourth ends at 40 s, within 45; a fifth would end at 50.
    positions, _ = measured_within(
        items, ten_seconds_a_chunk, seconds=45.0, chunk=8, seed=0, clock=lambda: now[0]
    )
    assert len(positions) == 32

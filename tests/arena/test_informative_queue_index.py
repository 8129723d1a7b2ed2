""" "Most informative first" reads an index: pair making stores the gap between its two
replies' judge totals on the pair (judge_gap), migration 0011 gives pairs made before it the
gap the queue used to compute from their judgements, and the claim's query is served by the
partial index duelpair_queue_informative instead of sorting every open pair."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.utils import timezone

from arena.models import DuelPair, Judgement
from arena.selectors import QueueSelection
from arena.services.preferences import preferences_import
from arena.services.queue import queue_first_free
from tests.migration_state import migrate_to, migrate_to_latest


def _gap_from_judgements(pair: DuelPair) -> float | None:
    """The gap as the queue used to compute it: each reply's newest judgement by the pair's
    judge that is not a rescoring's."""
    totals = []
    for reply_id in (pair.reply_a_id, pair.reply_b_id):
        judgement = (
            Judgement.objects.filter(
                reply_id=reply_id, judge_model=pair.judge_model, overruled=False
            )
            .order_by("-created_at", "-id")
            .first()
        )
        if judgement is None:
            return None
        totals.append(judgement.total)
    return abs(totals[0] - totals[1])


def test_pair_making_stores_the_gap_between_its_replies(lettings):
    pairs = list(DuelPair.objects.filter(world=lettings))
    assert len(pairs) == 10
    for pair in pairs:
        assert pair.judge_gap == pytest.approx(_gap_from_judgements(pair), abs=1e-12)
    # Not all the same: the order has something to sort by.
    assert len({round(pair.judge_gap, 6) for pair in pairs}) > 1


def test_the_migration_gives_older_pairs_their_gap(lettings):
    preferences_import(
        world=lettings,
        text='{"id": "x1", "prompt": [{"role": "user", "content": "Hi"}], '
        '"chosen": [{"role": "assistant", "content": "Hello"}], '
        '"rejected": [{"role": "assistant", "content": "Go away"}]}',
    )
    pair = DuelPair.objects.filter(world=lettings, judge_model="rubric-v1").first()
    # A rescoring's judgement (overruled) is newer, and not the judge's verdict: not read.
    judged = Judgement.objects.get(reply_id=pair.reply_a_id)
    Judgement.objects.create(
        reply_id=pair.reply_a_id,
        judge_model=pair.judge_model,
        scores=judged.scores,
        total=judged.total + 0.3,
        overruled=True,
    )
    expected = {p.pk: _gap_from_judgements(p) for p in DuelPair.objects.filter(world=lettings)}
    assert None in expected.values()  # the imported pair has no judgements
    with connection.cursor() as cursor:
        # PostgreSQL alters no table while checks on rows just written are still deferred.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    migrate_to([("arena", "0010_reply_author_in_the_registry")])
    migrate_to_latest()
    stored = dict(DuelPair.objects.filter(world=lettings).values_list("pk", "judge_gap"))
    assert stored.keys() == expected.keys()
    for pk, gap in expected.items():
        assert stored[pk] == (None if gap is None else pytest.approx(gap, abs=1e-12))


def test_the_claim_in_this_order_reads_its_index(lettings, rita):
    query = queue_first_free(
        world=lettings,
        reviewer=rita,
        selection=QueueSelection(order="informative"),
        now=timezone.now(),
    )
    with transaction.atomic(), connection.cursor() as cursor:
        # A handful of pairs is cheaper to scan and sort than to look up: ask the planner what
        # it does when it would rather not, as on a big queue (where the bench shows it).
        # Without an index in this order it still has to sort.
        for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
            cursor.execute(f"SET LOCAL {setting} = off")
        plan = query.explain()
    assert "duelpair_queue_informative" in plan, plan
    assert "Sort" not in plan, plan

"""Reservations under real concurrency: reviewers in parallel threads (each with its own
database connection) never hold the same pair at once, and every pick is stored once.

Threads need committed rows, so this runs in a throwaway workspace outside the test
transaction and drops it afterwards."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest
from django.db import connection
from django_tenants.utils import schema_context

from arena.errors import DuelConflict, EmptyFreeze
from arena.models import DuelPair, Pick, World
from arena.services.pairs import duel_pairs_generate
from arena.services.queue import duel_next, pick_submit
from levers9.services import workspace_user_create
from tests.conftest import PASSWORD
from tests.e2e.workspaces import fresh_workspace

pytestmark = pytest.mark.slow

REVIEWERS = 8


def _in_threads(schema_name: str, work) -> list:
    results: list = [None] * REVIEWERS
    errors: list[BaseException] = []
    start = threading.Barrier(REVIEWERS)

    def run(index: int) -> None:
        try:
            with schema_context(schema_name):
                start.wait()
                results[index] = work(index)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(index,)) for index in range(REVIEWERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    return results


def test_it_serves_parallel_reviewers_distinct_pairs_and_stores_each_pick_once(committed_db):
    with fresh_workspace("race") as created:
        schema = created.workspace.schema_name
        with schema_context(schema):
            world = World.objects.get(slug="lettings")
            duel_pairs_generate(world=world, count=REVIEWERS * 3)
            reviewers = [
                workspace_user_create(email=f"r{n}@race.test", password=PASSWORD, role="reviewer")
                for n in range(REVIEWERS)
            ]

        def claim(index: int) -> int:
            return duel_next(world=world, reviewer=reviewers[index], generate=False).pk

        held = _in_threads(schema, claim)
        assert len(set(held)) == REVIEWERS  # nobody was served a pair someone else holds
        with schema_context(schema):
            holders = dict(DuelPair.objects.filter(pk__in=held).values_list("pk", "reserved_by_id"))
        assert holders == {pair: reviewers[i].pk for i, pair in enumerate(held)}

        def pick_twice(index: int) -> int:
            # The same reviewer's pick sent twice (a double click): stored once.
            stored = 0
            for _attempt in range(2):
                try:
                    pick_submit(pair_id=held[index], reviewer=reviewers[index], chosen="A")
                    stored += 1
                except DuelConflict:  # the second is refused by design
                    pass
            return stored

        assert _in_threads(schema, pick_twice) == [1] * REVIEWERS
        with schema_context(schema):
            assert Pick.objects.count() == REVIEWERS
            assert sorted(Pick.objects.values_list("pair_id", flat=True)) == sorted(held)


def test_it_freezes_while_reviewers_pick_without_losing_or_doubling_a_pick(
    committed_db, settings, tmp_path
):
    from arena.models import PreferenceVersion
    from arena.selectors import preference_version_read
    from arena.services.freeze import preference_freeze

    settings.DATASETS_DIR = tmp_path
    rounds = 4
    with fresh_workspace("race") as created:
        schema = created.workspace.schema_name
        with schema_context(schema):
            world = World.objects.get(slug="lettings")
            duel_pairs_generate(world=world, count=REVIEWERS * rounds + 4)
            reviewers = [
                workspace_user_create(email=f"r{n}@race.test", password=PASSWORD, role="reviewer")
                for n in range(REVIEWERS)
            ]
        freezes: list[int] = []

        def pick_or_freeze(index: int) -> int:
            stored = 0
            for _round in range(rounds):
                if index == 0:
                    # One of the threads freezes while the others pick.
                    time.sleep(0.05)
                    with contextlib.suppress(EmptyFreeze):  # nothing new picked yet
                        freezes.append(preference_freeze(world=world).number)
                    continue
                pair = duel_next(world=world, reviewer=reviewers[index], generate=False)
                pick_submit(pair_id=pair.pk, reviewer=reviewers[index], chosen="B")
                stored += 1
            return stored

        stored = sum(_in_threads(schema, pick_or_freeze))
        assert stored == (REVIEWERS - 1) * rounds
        with schema_context(schema):
            # Whatever came after the last freeze in the threads (on a busy machine that
            # freeze may have come after every pick, leaving nothing new).
            with contextlib.suppress(EmptyFreeze):
                preference_freeze(world=world)
            final = PreferenceVersion.objects.order_by("-number").first()
            rows = [row.pick_id for row in preference_version_read(version=final)]
            assert sorted(rows) == sorted(Pick.objects.values_list("pk", flat=True))
            assert len(rows) == len(set(rows)) == stored
            numbers = list(
                PreferenceVersion.objects.order_by("number").values_list("number", flat=True)
            )
            assert numbers == list(range(1, len(numbers) + 1))

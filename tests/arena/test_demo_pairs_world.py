"""`manage.py demo_setup` makes a third world beside lettings and the charity's real calls: the
shared human preference pairs (hh-rlhf harmless-base), imported in TRL's format with their
held-out pairs chosen, frozen as v1, its judge's fit started, evaluable on the held-out pairs;
its Duel has no queue to make and does not fail; running the command again changes nothing.
(Fewer real calls than the demo's, for speed: the pairs world is the point here.)"""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django_tenants.utils import get_public_schema_name, schema_context

from arena.management.commands.demo_setup import DEMO_SLUG
from levers9.shipped_data import HH_RLHF_PAIRS, PERSUASION_CALLS

PAIRS = sum(1 for line in HH_RLHF_PAIRS.read_text().splitlines() if line.strip())


@pytest.fixture
def demo(committed_db, tmp_path, settings, monkeypatch):
    """`demo()` runs the command and returns what it said. Its workspace is committed (a
    transactional test's flush would empty every workspace) and dropped after."""
    from django_q.models import OrmQ

    from levers9.models import Domain, Workspace

    settings.DATASETS_DIR = tmp_path / "datasets"
    calls = tmp_path / "calls.jsonl"
    calls.write_text("\n".join(PERSUASION_CALLS.read_text().splitlines()[:30]))
    monkeypatch.setenv("LEVERS9_DEMO_CALLS", str(calls))

    def run() -> str:
        out = StringIO()
        call_command("demo_setup", stdout=out)
        return out.getvalue()

    assert not Workspace.objects.filter(slug=DEMO_SLUG).exists()
    queued_before = set(OrmQ.objects.values_list("pk", flat=True))
    try:
        yield run
    finally:
        with schema_context(get_public_schema_name()):
            # No worker here: the fits it queued go (their jobs go with the workspace's
            # schema), before any worker sees them.
            OrmQ.objects.exclude(pk__in=queued_before).delete()
            for workspace in Workspace.objects.filter(slug=DEMO_SLUG):
                Domain.objects.filter(tenant=workspace).delete()
                workspace.delete(force_drop=True)


def test_the_demo_has_a_world_of_human_preference_pairs(demo):
    from arena.held_out import HELD_OUT_PAIRS, held_out_pair_moment_ids
    from arena.judge.fit_job import JUDGE_FIT_KIND
    from arena.management.commands.demo_setup import PAIRS_WORLD_SLUG
    from arena.models import DuelPair, Pick, PreferenceVersion, World
    from evaluation.call_sets import call_set_kind
    from evaluation.models import EvaluationCallSet
    from levers9.jobs.models import Job
    from levers9.models import Workspace

    said = demo()
    assert f"Human preference pairs: {PAIRS} imported, 0 already there." in said
    schema = Workspace.objects.get(slug="demo").schema_name
    with schema_context(schema):
        world = World.objects.get(slug=PAIRS_WORLD_SLUG)
        assert "hh-rlhf" in world.description
        assert "MIT" in world.description
        assert Pick.objects.filter(world=world).count() == PAIRS
        assert len(held_out_pair_moment_ids(world=world)) == HELD_OUT_PAIRS
        (version,) = PreferenceVersion.objects.filter(world=world)
        assert version.row_count == PAIRS
        fits = Job.objects.filter(kind=JUDGE_FIT_KIND, arena_world__world=world)
        assert fits.count() == 1
        assert not DuelPair.objects.filter(world=world, is_open=True).exists()
        assert call_set_kind(world) == EvaluationCallSet.Kind.PAIRS

    again = demo()
    assert f"Human preference pairs: 0 imported, {PAIRS} already there." in again
    with schema_context(schema):
        assert PreferenceVersion.objects.filter(world=world).count() == 1
        assert Job.objects.filter(kind=JUDGE_FIT_KIND, arena_world__world=world).count() == 1

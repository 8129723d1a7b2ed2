"""Migration 0007: each existing version keeps the world it was made in, and the shared
v1 · baseline gets one copy per world, with what each world pointed at it re-pointed. No row
is lost.

The function is run directly, on rows laid out as before the migration: the test migrates
the schema back to just before the jobs left the product (tests.migration_state) and puts the
tables back in their old shape (world nullable, no per-world constraints) inside its own
transaction, which PostgreSQL rolls back with the test, DDL included. Rows are written and read
with the models as they were then.
"""

from __future__ import annotations

import importlib

import pytest
from django.db import connection

from tests.migration_state import migrate_to

keep_their_world = importlib.import_module(
    "policies.migrations.0007_versions_keep_their_world"
).versions_keep_their_world


# The last state whose job still names its world and versions (jobs 0004 moves them out).
BEFORE_THE_JOBS_MOVED = [
    ("jobs", "0003_job_background"),
    ("training", "0002_job_moved_to_levers9_jobs"),
    ("arena", "0008_world_moves_described"),
    ("policies", "0008_one_world_per_version"),
    ("evaluation", "0003_flag_held_out_calls"),
]


@pytest.fixture
def apps(in_workspace):
    return migrate_to(BEFORE_THE_JOBS_MOVED)


@pytest.fixture
def before_the_migration(apps):
    """The tables as 0006 left them: a world column that may be empty, numbers unique only
    by convention."""
    World = apps.get_model("arena", "World")
    PolicyVersion = apps.get_model("policies", "PolicyVersion")
    with connection.cursor() as cursor:
        for table in ("policies_policyversion", "policies_liveperiod", "policies_canary"):
            cursor.execute(f"ALTER TABLE {table} ALTER COLUMN world_id DROP NOT NULL")  # noqa: S608
        cursor.execute(
            "ALTER TABLE policies_policyversion DROP CONSTRAINT version_number_per_world"
        )
        # PostgreSQL keeps a partial unique constraint as an index.
        cursor.execute("DROP INDEX one_live_version_per_world")
        cursor.execute("DROP INDEX one_running_canary_per_world")
    lettings = World.objects.get(slug="lettings")
    charity = World.objects.create(slug="charity", name="Charity chats")
    # Before, a world got no baseline of its own: the workspace had one, shared.
    PolicyVersion.objects.filter(world=charity).delete()
    PolicyVersion.objects.update(world=None)
    return lettings, charity


def _version(apps, number: int, parent, **fields):
    return apps.get_model("policies", "PolicyVersion").objects.create(
        number=number, name=f"v{number}", parent=parent, world=None, **fields
    )


def _job(apps, world, **fields):
    return apps.get_model("jobs", "Job").objects.create(
        kind="train",
        trainer="q-learning-online",
        workspace_schema=connection.schema_name,
        pool_name="cpu",
        card_type="cpu",
        world=world,
        **fields,
    )


def test_it_keeps_each_versions_world_and_copies_the_baseline(apps, before_the_migration):
    lettings, charity = before_the_migration
    PolicyVersion = apps.get_model("policies", "PolicyVersion")
    EvaluationCallSet = apps.get_model("evaluation", "EvaluationCallSet")
    Evaluation = apps.get_model("evaluation", "Evaluation")
    LivePeriod = apps.get_model("policies", "LivePeriod")
    Canary = apps.get_model("policies", "Canary")
    baseline = PolicyVersion.objects.get(number=1)
    by_job = _version(apps, 2, baseline)  # trained in the charity world: its job says so
    _job(apps, charity, produced_version=by_job, parent_version=baseline)
    by_pack = _version(apps, 3, baseline, learned_from={"pack": "lettings"})
    by_parent = _version(apps, 4, by_job)  # nothing recorded: its parent's world
    lettings_job = _job(apps, lettings, parent_version=baseline)
    call_set = EvaluationCallSet.objects.create(world=lettings, kind="scripted")
    evaluation = Evaluation.objects.create(
        world=lettings, call_set=call_set, candidate=by_pack, baseline=baseline
    )
    period = LivePeriod.objects.create(version=by_job, world=None)
    canary = Canary.objects.create(candidate=by_pack, live=baseline, share=0.1, world=None)
    rows_before = PolicyVersion.objects.count()

    keep_their_world(apps, None)

    # The charity world comes first by name: the shared baseline stays its own.
    baseline.refresh_from_db()
    assert baseline.world == charity
    lettings_baseline = PolicyVersion.objects.get(world=lettings, number=1)
    assert lettings_baseline.pk != baseline.pk
    assert (lettings_baseline.name, lettings_baseline.description) == (
        baseline.name,
        baseline.description,
    )
    assert lettings_baseline.created_at == baseline.created_at
    assert PolicyVersion.objects.count() == rows_before + 1  # every row kept, one copy added

    worlds = dict(PolicyVersion.objects.values_list("pk", "world__slug"))
    assert (worlds[by_job.pk], worlds[by_pack.pk], worlds[by_parent.pk]) == (
        "charity",
        "lettings",
        "charity",
    )
    # What Lettings pointed at the shared baseline now points at its copy; the charity's not.
    assert PolicyVersion.objects.get(pk=by_pack.pk).parent == lettings_baseline
    assert PolicyVersion.objects.get(pk=by_job.pk).parent == baseline
    lettings_job.refresh_from_db()
    assert lettings_job.parent_version == lettings_baseline
    evaluation.refresh_from_db()
    assert evaluation.baseline == lettings_baseline
    period.refresh_from_db()
    assert period.world == charity
    canary.refresh_from_db()
    assert (canary.world, canary.live, canary.state) == (lettings, lettings_baseline, "running")


def test_it_rolls_back_a_canary_that_compared_two_worlds(apps, before_the_migration):
    lettings, charity = before_the_migration
    PolicyVersion = apps.get_model("policies", "PolicyVersion")
    Canary = apps.get_model("policies", "Canary")
    baseline = PolicyVersion.objects.get(number=1)
    charity_version = _version(apps, 2, baseline)
    _job(apps, charity, produced_version=charity_version)
    lettings_version = _version(apps, 3, baseline, learned_from={"pack": "lettings"})
    canary = Canary.objects.create(
        candidate=lettings_version, live=charity_version, share=0.1, world=None
    )

    keep_their_world(apps, None)

    canary.refresh_from_db()
    assert canary.world == lettings
    assert canary.state == "rolled_back"
    assert canary.ended_at is not None


def test_it_gives_a_workspace_without_versions_nothing_new(apps, before_the_migration):
    PolicyVersion = apps.get_model("policies", "PolicyVersion")
    PolicyVersion.objects.all().delete()
    keep_their_world(apps, None)
    assert not PolicyVersion.objects.exists()

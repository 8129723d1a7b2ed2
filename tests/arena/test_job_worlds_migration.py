"""An arena job's world moves from its finish_needs to the arena's own table (arena 0015,
issue 43 point 2): every judge-fit, judge-measure and duel-pairs job naming a world that
exists gets its JobWorld, with what its kind's work reads (a fit's read_up_to, a pairs job's
count, scenario and versions); finish_needs stays as it was, and the API shows it as before.

Run on the workspace's own schema with Django's MigrationExecutor: back to the migration
before (inside the test's transaction, which PostgreSQL rolls back with the test), jobs laid
out as they were, then forward to today's models.
"""

from __future__ import annotations

import pytest
from django.db import connection

from arena.models import JobWorld
from levers9.jobs.models import Job
from tests.migration_state import migrate_to, migrate_to_latest


def _before() -> list[tuple[str, str]]:
    """Every app at its newest migration, the arena at the one before its JobWorld: the
    models as they were then, the platform's job included."""
    from django.db.migrations.executor import MigrationExecutor

    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    return [
        ("arena", "0014_world_reasons_and_rubric") if app == "arena" else (app, name)
        for app, name in leaves
    ]


def _job(apps, kind: str, finish_needs: dict):
    return apps.get_model("jobs", "Job").objects.create(
        kind=kind,
        trainer=kind,
        workspace_schema=connection.schema_name,
        pool_name="cpu",
        card_type="cpu",
        finish_needs=finish_needs,
    )


@pytest.fixture
def old_jobs(in_workspace):
    apps = migrate_to(_before())
    World = apps.get_model("arena", "World")
    lettings = World.objects.get(slug="lettings")
    bikes = World.objects.create(slug="bikes", name="Bikes")
    gone_pk = World.objects.order_by("-pk").values_list("pk", flat=True).first() + 1000
    jobs = {
        "fit": _job(
            apps,
            "judge-fit",
            {"world": lettings.pk, "read_up_to": {"pick": 12, "override": 3}},
        ),
        "older fit": _job(apps, "judge-fit", {"world": bikes.pk}),
        "measure": _job(apps, "judge-measure", {"world": bikes.pk}),
        "pairs": _job(
            apps,
            "duel-pairs",
            {"world": lettings.pk, "count": 7, "scenario": "family", "versions": [1, 2]},
        ),
        "fit of a gone world": _job(apps, "judge-fit", {"world": gone_pk}),
        "train": _job(apps, "train", {"version": "move-strategy"}),
    }
    # As PostgreSQL gives them back (jsonb orders the keys).
    Job = apps.get_model("jobs", "Job")
    stored = {name: Job.objects.get(pk=job.pk).finish_needs for name, job in jobs.items()}
    return jobs, stored, lettings.pk, bikes.pk


def test_it_gives_each_arena_job_its_world_and_leaves_finish_needs(old_jobs):
    jobs, stored, lettings, bikes = old_jobs

    migrate_to_latest()

    rows = {row.job_id: row for row in JobWorld.objects.all()}
    fit = rows[jobs["fit"].pk]
    assert (fit.world_id, fit.read_up_to, fit.pairs_count) == (
        lettings,
        {"pick": 12, "override": 3},
        None,
    )
    older_fit = rows[jobs["older fit"].pk]
    assert (older_fit.world_id, older_fit.read_up_to) == (bikes, None)
    assert rows[jobs["measure"].pk].world_id == bikes
    pairs = rows[jobs["pairs"].pk]
    assert (pairs.world_id, pairs.pairs_count, pairs.pairs_scenario, pairs.pairs_versions) == (
        lettings,
        7,
        "family",
        [1, 2],
    )
    # A world that is gone names nothing; a job of another kind is not the arena's.
    assert jobs["fit of a gone world"].pk not in rows
    assert jobs["train"].pk not in rows
    assert len(rows) == 4
    for name, job in jobs.items():
        assert Job.objects.get(pk=job.pk).finish_needs == stored[name], name


def test_the_api_shows_each_migrated_job_as_before(old_jobs, owner_client):
    jobs, stored, _, _ = old_jobs

    migrate_to_latest()

    listed = owner_client.get("/api/rl/jobs/").json()["results"]
    shown = {row["id"]: row["finish_needs"] for row in listed}
    for name, job in jobs.items():
        # The same object, its keys in the same order.
        assert list(shown[job.pk].items()) == list(stored[name].items()), name
    # What the row keeps is what finish_needs held, so a job's own row shows the same.
    for name in ("fit", "older fit", "measure", "pairs"):
        assert JobWorld.objects.get(job_id=jobs[name].pk).finish_needs_shown == stored[name]


def test_a_migrated_pairs_job_runs_what_was_asked(old_jobs, monkeypatch):
    from arena.services import pairs

    jobs, _, lettings, _ = old_jobs
    migrate_to_latest()
    asked = []
    monkeypatch.setattr(pairs, "policy_versions_numbered", lambda numbers, world: numbers)
    monkeypatch.setattr(
        pairs,
        "duel_pairs_generate",
        lambda **kwargs: asked.append(kwargs) or kwargs["count"],
    )
    made = pairs.duel_pairs_job_run(jobs["pairs"].pk, lambda *args, **kwargs: None)
    assert made == {"made": 7, "asked": 7}
    assert {(each["world"].pk, each["scenario"], tuple(each["versions"])) for each in asked} == {
        (lettings, "family", (1, 2))
    }

"""The migrations that give the platform's job its own fields only (jobs 0004, issue 28) lose
no link: a training job's world, parent, produced version, preference version and base move
to training.TrainingRun; a judge job's world stays in what its finish needs; a reply's
version moves to policies.ReplyAuthor; the table takes its own name.

Run on the workspace's own schema with Django's MigrationExecutor: back to the state before
(inside the test's transaction, which PostgreSQL rolls back with the test, DDL included), rows
laid out as they were, then forward to today's models.
"""

from __future__ import annotations

import pytest
from django.db import connection

from tests.migration_state import migrate_to, migrate_to_latest

BEFORE = [
    ("jobs", "0003_job_background"),
    ("training", "0002_job_moved_to_levers9_jobs"),
    ("arena", "0008_world_moves_described"),
    ("policies", "0008_one_world_per_version"),
]


@pytest.fixture
def old(in_workspace):
    apps = migrate_to(BEFORE)
    World = apps.get_model("arena", "World")
    PolicyVersion = apps.get_model("policies", "PolicyVersion")
    lettings = World.objects.get(slug="lettings")
    baseline = PolicyVersion.objects.get(world=lettings, number=1)
    trained = PolicyVersion.objects.create(
        world=lettings, number=2, name="trained", parent=baseline
    )
    return apps, lettings, baseline, trained


def _job(apps, kind: str, **fields):
    return apps.get_model("jobs", "Job").objects.create(
        kind=kind,
        trainer=kind,
        workspace_schema=connection.schema_name,
        pool_name="cpu",
        card_type="cpu",
        **fields,
    )


def test_it_moves_a_training_jobs_links_to_its_run(old):
    apps, lettings, baseline, trained = old
    wording = _job(
        apps,
        "train",
        world=lettings,
        parent_version=baseline,
        produced_version=trained,
        preference_version=3,
        base_model="smollm2-135m-instruct",
    )
    engines = _job(apps, "engines", world=lettings, parent_version=baseline)

    migrate_to_latest()

    from training.models import TrainingRun

    run = TrainingRun.objects.get(job_id=wording.pk)
    assert (
        run.world_id,
        run.parent_version_id,
        run.produced_version_id,
        run.preference_version,
        run.base_model,
    ) == (lettings.pk, baseline.pk, trained.pk, 3, "smollm2-135m-instruct")
    run = TrainingRun.objects.get(job_id=engines.pk)
    assert (run.world_id, run.parent_version_id, run.produced_version_id) == (
        lettings.pk,
        baseline.pk,
        None,
    )


def test_it_keeps_a_judge_jobs_world_in_what_its_finish_needs(old):
    apps, lettings, _, _ = old
    named = _job(apps, "judge-fit", world=lettings, finish_needs={"world": lettings.pk})
    unnamed = _job(apps, "judge-measure", world=lettings)

    migrate_to_latest()

    from levers9.jobs.models import Job

    for job in (named, unnamed):
        assert Job.objects.get(pk=job.pk).finish_needs["world"] == lettings.pk
    assert set(
        Job.objects.filter(finish_needs__world=lettings.pk).values_list("pk", flat=True)
    ) == {named.pk, unnamed.pk}


def test_it_moves_a_replys_version_to_the_registry(old):
    apps, lettings, _, trained = old
    Moment = apps.get_model("arena", "Moment")
    Reply = apps.get_model("arena", "Reply")
    moment = Moment.objects.create(world=lettings, kind="synthetic", digest="m")
    by_version = Reply.objects.create(
        moment=moment, text="a", source="policy", policy_version=trained
    )
    by_agent = Reply.objects.create(moment=moment, text="b", source="real_agent")

    migrate_to_latest()

    from arena.models import Reply as ReplyNow
    from policies.models import ReplyAuthor

    assert ReplyAuthor.objects.get(reply_id=by_version.pk).version_id == trained.pk
    assert not ReplyAuthor.objects.filter(reply_id=by_agent.pk).exists()
    assert ReplyNow.objects.count() == 2


def test_the_job_table_says_what_it_holds(old):
    migrate_to_latest()
    from levers9.jobs.models import Job

    assert Job._meta.db_table == "jobs_job"
    with connection.cursor() as cursor:
        tables = connection.introspection.table_names(cursor)
        columns = {
            column.name
            for column in connection.introspection.get_table_description(cursor, "jobs_job")
        }
    assert "jobs_job" in tables
    assert "training_job" not in tables
    assert not columns & {"world_id", "parent_version_id", "produced_version_id", "base_model"}

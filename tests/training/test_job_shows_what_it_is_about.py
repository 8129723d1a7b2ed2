"""A job shows what it is about as before the links left the platform's table: the API's
parent, produced and preference versions and base, the admin's and the Train page's produced
version, each read from the app of the job's kind (a training run, an evaluation, an
endpoint), once per kind for a list."""

from __future__ import annotations

import pytest
from django.db import connection
from django_tenants.utils import schema_context

from levers9.jobs.models import Job
from policies.models import PolicyVersion
from policies.services import version_register
from tests.job_rows import cpu_job_row
from training.models import TrainingRun


def _job(kind: str = "train", trainer: str = "dpo") -> Job:
    return cpu_job_row(
        kind=kind,
        trainer=trainer,
        pool_name="cpu",
        workspace_schema=connection.schema_name,
        state=Job.State.DONE,
    )


@pytest.fixture
def trained(workspace):
    with schema_context(workspace.schema_name):
        baseline = PolicyVersion.objects.get(world__slug="lettings", number=1)
        version = version_register(
            world=baseline.world,
            name="dpo benchmark",
            parent=baseline,
            move_strategy={},
            learned_from={},
        )
        job = _job()
        TrainingRun.objects.create(
            job=job,
            world=baseline.world,
            parent_version=baseline,
            produced_version=version,
            preference_version=4,
            base_model="smollm2-135m-instruct",
        )
        plain = _job(kind="engines", trainer="ppo")  # a run that recorded nothing
        return job, plain, version


def test_the_api_shows_a_jobs_versions_preferences_and_base(owner_client, trained):
    job, plain, version = trained
    rows = {row["id"]: row for row in owner_client.get("/api/rl/jobs/").json()["results"]}
    shown = rows[job.pk]
    assert (
        shown["parent_version"],
        shown["produced_version"],
        shown["preference_version"],
        shown["base_model"],
    ) == (1, version.number, 4, "smollm2-135m-instruct")
    assert owner_client.get(f"/api/rl/jobs/{job.pk}/").json() == shown
    nothing = rows[plain.pk]
    assert (nothing["parent_version"], nothing["produced_version"], nothing["base_model"]) == (
        None,
        None,
        "",
    )


def test_the_admin_and_the_train_page_show_the_version_it_made(owner_client, trained):
    job, _, version = trained
    listing = owner_client.get("/admin/jobs/job/")
    assert listing.status_code == 200
    assert version.label in listing.content.decode()
    assert version.label in owner_client.get("/train/").content.decode()
    detail = owner_client.get(f"/train/jobs/{job.pk}/").content.decode()
    assert "From v1 · baseline" in detail


def test_a_page_of_jobs_reads_what_they_are_about_once_per_kind(
    in_workspace, trained, django_assert_max_num_queries
):
    from levers9.jobs.selectors import job_list_recent

    # The schema's search path, the jobs, then one read per kind (a train, an engines run).
    with django_assert_max_num_queries(4):
        jobs = job_list_recent()
        labels = [job.about.produced_version and job.about.produced_version.label for job in jobs]
    assert trained[2].label in labels

"""A job's finish_needs keeps the platform's plain values only (issue 43, point 2): a Train
card's parent and a serve job's endpoint are the kind's own tables' (TrainingRun, Endpoint.job_id),
and the API shows them in `finish_needs` as it did when they were stored there — for older jobs
that still store them, too."""

from __future__ import annotations

import pytest
from django.db import connection
from django_tenants.utils import schema_context

from levers9.jobs.models import Job
from policies.models import Endpoint, PolicyVersion
from tests.job_rows import cpu_job_row
from trainers.registry import DPO, Q_LEARNING_ONLINE, SERVE, SERVE_KIND, TRAIN_KIND
from training.models import TrainingRun


def _job(kind: str, trainer: str, finish_needs: dict) -> Job:
    return cpu_job_row(
        kind=kind,
        trainer=trainer,
        pool_name="cpu",
        workspace_schema=connection.schema_name,
        finish_needs=finish_needs,
    )


@pytest.fixture
def jobs(workspace):
    with schema_context(workspace.schema_name):
        baseline = PolicyVersion.objects.get(world__slug="lettings", number=1)
        made = {}
        for name, trainer, stored in (
            ("moves", Q_LEARNING_ONLINE, {"version": "move-strategy"}),
            ("older moves", Q_LEARNING_ONLINE, {"version": "move-strategy", "parent": 1}),
            ("wording", DPO, {"version": DPO, "serve": True, "checkpoint": True}),
        ):
            made[name] = _job(TRAIN_KIND, trainer, stored)
            TrainingRun.objects.create(
                job=made[name], world=baseline.world, parent_version=baseline
            )
        made["serve"] = _job(SERVE_KIND, SERVE, {})
        made["endpoint"] = Endpoint.objects.create(
            version=baseline,
            kind="transformers",
            pool_name="cpu",
            card_type="cpu",
            job_id=made["serve"].pk,
        )
        return made


def test_it_shows_the_product_ids_in_finish_needs_as_before(owner_client, jobs):
    rows = {row["id"]: row for row in owner_client.get("/api/rl/jobs/").json()["results"]}
    expected = {"version": "move-strategy", "parent": 1}
    assert rows[jobs["moves"].pk]["finish_needs"] == expected
    assert rows[jobs["older moves"].pk]["finish_needs"] == expected
    # A wording card never named its parent there.
    assert rows[jobs["wording"].pk]["finish_needs"] == {
        "version": DPO,
        "serve": True,
        "checkpoint": True,
    }
    served = rows[jobs["serve"].pk]["finish_needs"]
    assert served == {"endpoint": jobs["endpoint"].pk, "version": 1}
    # The same through the detail, and in the key order jsonb gave the stored object.
    detail = owner_client.get(f"/api/rl/jobs/{jobs['serve'].pk}/").json()["finish_needs"]
    assert list(detail) == ["version", "endpoint"]


def test_a_move_strategy_card_stores_no_product_id_in_finish_needs(
    in_workspace, owner_client, django_capture_on_commit_callbacks
):
    from training.cards import train_move_strategy

    parent = PolicyVersion.objects.get(world__slug="lettings", number=1)
    with django_capture_on_commit_callbacks(execute=False):
        job = train_move_strategy(world=parent.world, parent=parent)
    assert Job.objects.get(pk=job.pk).finish_needs == {"version": "move-strategy"}
    shown = owner_client.get(f"/api/rl/jobs/{job.pk}/").json()["finish_needs"]
    assert shown == {"version": "move-strategy", "parent": parent.number}

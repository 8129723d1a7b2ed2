"""No surprise on one click: a Train card whose job runs over two minutes says how long (from
its budget, or this workspace's past runs of it) and starts only once confirmed; any job is
cancelled from the Jobs table or the admin (not by a reviewer, not from another workspace);
a job's link opens its page, and that page names no server path."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone
from django_tenants.utils import schema_context

from levers9.jobs.models import Job
from levers9.jobs.services import job_start
from levers9.pools import pool_default
from tests.conftest import client_for, make_user
from tests.training.test_wording_card import _choice, frozen  # noqa: F401 - a fixture
from training.estimates import wording_estimate


@pytest.fixture
def few_pairs_will_do(monkeypatch):
    from trainers.wording import spec as wording_spec

    monkeypatch.setitem(wording_spec.MIN_PAIRS, "dpo", 2)
    monkeypatch.setitem(wording_spec.MIN_PAIRS, "rlhf", 2)


def _done_run(trainer: str, minutes: float, *, reward_source: str = "picks") -> Job:
    finished = timezone.now()
    return Job.objects.create(
        kind="train",
        trainer=trainer,
        state=Job.State.DONE,
        workspace_schema="ws_acme",
        pool_name="local-cpu",
        card_type="cpu",
        started_at=finished - timedelta(minutes=minutes),
        finished_at=finished,
        result={"version": {"reward_source": reward_source}},
    )


def _card_fields(frozen_version, **changes) -> dict:  # noqa: F811 - not the fixture
    return {
        "method": "dpo",
        "preference": str(frozen_version.pk),
        "pool": "local-cpu",
        "base": "smollm2-135m-instruct",
        "epochs": "1",
        "seed": "0",
        **changes,
    }


# --- the estimate ----------------------------------------------------------------------


def test_rlhf_on_outcomes_is_estimated_from_its_budget(frozen):  # noqa: F811
    estimate = wording_estimate(_choice(frozen, method="rlhf", reward_source="outcomes"))
    assert estimate.needs_confirming
    assert estimate.sentence() == (
        "Expected to run 15–25 minutes (from its budget: 2 stages of 10 minutes on the CPU, "
        "and no finished run here yet)."
    )


def test_past_runs_of_the_same_kind_make_the_estimate(frozen):  # noqa: F811
    _done_run("rlhf", 18, reward_source="outcomes")
    _done_run("rlhf", 21, reward_source="outcomes")
    _done_run("rlhf", 1.5, reward_source="picks")  # another reward: not like this one
    estimate = wording_estimate(_choice(frozen, method="rlhf", reward_source="outcomes"))
    assert estimate.span() == "18–21 minutes"
    assert "from the last 2 runs of RLHF on local-cpu in this workspace" in estimate.sentence()
    short = wording_estimate(_choice(frozen, method="rlhf", reward_source="picks"))
    assert short.span() == "about 2 minutes"
    assert not short.needs_confirming  # 90 s: not over two minutes


# --- the page asks, then starts ----------------------------------------------------------


def test_a_long_card_shows_its_estimate_and_starts_only_once_confirmed(
    frozen,  # noqa: F811
    few_pairs_will_do,
    owner_client,
    django_capture_on_commit_callbacks,
):
    asked = owner_client.post("/train/wording/", _card_fields(frozen))
    assert asked.status_code == 200
    page = asked.content.decode()
    assert "Expected to run 8–12 minutes (from its budget: 1 stage of 10 minutes" in page
    assert "Confirm: start it" in page
    assert '<input type="hidden" name="confirm" value="1">' in page
    assert f'<input type="hidden" name="preference" value="{frozen.pk}">' in page
    assert Job.objects.count() == 0  # one click started nothing
    with django_capture_on_commit_callbacks(execute=False):
        started = owner_client.post("/train/wording/", _card_fields(frozen, confirm="1"))
    assert started.status_code == 302
    job = Job.objects.get()
    assert (job.trainer, job.background) == ("dpo", False)


def test_a_card_refused_is_refused_before_it_asks(frozen, owner_client):  # noqa: F811
    refused = owner_client.post("/train/wording/", _card_fields(frozen), follow=True)
    assert "asks for 200 frozen pairs" in refused.content.decode()
    assert "Confirm: start it" not in refused.content.decode()


def test_a_short_card_starts_at_once(
    frozen,  # noqa: F811
    few_pairs_will_do,
    owner_client,
    django_capture_on_commit_callbacks,
):
    _done_run("dpo", 1.5)  # this workspace's DPO ran a minute and a half
    with django_capture_on_commit_callbacks(execute=False):
        started = owner_client.post("/train/wording/", _card_fields(frozen))
    assert started.status_code == 302
    assert Job.objects.filter(trainer="dpo", state=Job.State.PACKING).count() == 1


# --- cancel from the Jobs table and the admin ---------------------------------------------


@pytest.fixture
def waiting_job(in_workspace, django_capture_on_commit_callbacks) -> Job:
    with django_capture_on_commit_callbacks(execute=False):
        return job_start(
            kind="engines",
            trainer="q-learning-online",
            spec={"algorithm": "x"},
            pool=pool_default(gpu=False),
            title="A job to cancel",
        )


def test_the_jobs_table_links_the_job_page_and_cancels_in_place(waiting_job, owner_client):
    page = owner_client.get("/train/").content.decode()
    assert f'<a href="/train/jobs/{waiting_job.pk}/">#{waiting_job.pk}</a>' in page
    assert f"/api/rl/jobs/{waiting_job.pk}" not in page
    assert f'action="/train/jobs/{waiting_job.pk}/cancel/"' in page
    assert '<input type="hidden" name="next" value="/train/">' in page
    done = owner_client.post(f"/train/jobs/{waiting_job.pk}/cancel/", {"next": "/train/"})
    assert done.status_code == 302
    assert done["Location"] == "/train/"
    assert Job.objects.get(pk=waiting_job.pk).state == Job.State.CANCELLED
    # An address elsewhere is not followed: back to the job's own page.
    again = owner_client.post(
        f"/train/jobs/{waiting_job.pk}/cancel/", {"next": "https://elsewhere.example/"}
    )
    assert again["Location"] == f"/train/jobs/{waiting_job.pk}/"


def test_a_reviewer_cannot_cancel(waiting_job, workspace):
    make_user(workspace, "reviewer@acme.test", "reviewer")
    reviewer = client_for(workspace, "reviewer@acme.test")
    assert reviewer.post(f"/train/jobs/{waiting_job.pk}/cancel/").status_code == 403
    with schema_context(workspace.schema_name):
        assert Job.objects.get(pk=waiting_job.pk).state == Job.State.PACKING


def test_another_workspace_cannot_cancel(waiting_job, workspace, outsider_client):
    response = outsider_client.post(f"/train/jobs/{waiting_job.pk}/cancel/")
    assert response.status_code in {302, 403, 404}
    assert response.get("Location", "").split("?")[0] != f"/train/jobs/{waiting_job.pk}/"
    with schema_context(workspace.schema_name):
        assert Job.objects.get(pk=waiting_job.pk).state == Job.State.PACKING


def test_the_admin_cancels_the_selected_jobs(waiting_job, owner_client, workspace):
    response = owner_client.post(
        "/admin/jobs/job/", {"action": "cancel_jobs", "_selected_action": [waiting_job.pk]}
    )
    assert response.status_code == 302
    with schema_context(workspace.schema_name):
        assert Job.objects.get(pk=waiting_job.pk).state == Job.State.CANCELLED


# --- no server paths --------------------------------------------------------------------


def test_the_job_page_shows_no_server_path(waiting_job, owner_client):
    spec_path = waiting_job.spec_path
    assert spec_path.startswith(str(settings.DATASETS_DIR))
    Job.objects.filter(pk=waiting_job.pk).update(
        error=f"The trainer failed: No such file: '{settings.DATASETS_DIR}/acme/x.json'."
    )
    (Path(spec_path).parent / "log.txt").write_text(
        f"loading {settings.MODELS_DIR}/bases/smollm2\n"
    )
    page = owner_client.get(f"/train/jobs/{waiting_job.pk}/").content.decode()
    for folder in (settings.DATASETS_DIR, settings.MODELS_DIR, settings.BASE_DIR):
        assert str(folder) not in page
    assert f"spec.json of job {waiting_job.pk}" in page
    assert "No such file: &#x27;datasets/acme/x.json&#x27;" in page
    assert "loading models/bases/smollm2" in page

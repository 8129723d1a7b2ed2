"""The Duel's "Make pairs" where pairs are slow (a model answers, or the judge reads each reply
with a base: 21 s for 5 pairs and over 90 s for 20, the browser blocked, were seen): nothing is
written while the browser waits; a job in the worker writes them with its progress, which the
Duel page follows; the job is its workspace's alone. And the side panel keeps up with picks."""

from __future__ import annotations

import re

import pytest
from django_tenants.utils import schema_context

from arena.models import DuelPair, World
from arena.services.pairs import (
    DUEL_PAIRS_KIND,
    duel_pairs_generate,
    duel_pairs_job_run,
    duel_pairs_jobs_active,
    duel_pairs_request,
)
from levers9.jobs.models import Job
from tests.conftest import client_for


@pytest.fixture
def slow_pairs(monkeypatch):
    """The world's judge reads each reply with a base (seconds a reply on a CPU)."""
    monkeypatch.setattr("arena.services.pairs.judge_reads_with_a_base", lambda world: True)


@pytest.fixture
def reviewer(workspace, rita):
    return client_for(workspace, "rita@acme.test")


def test_make_pairs_writes_none_while_the_browser_waits_and_starts_a_job(
    reviewer, workspace, rita, slow_pairs, monkeypatch, django_capture_on_commit_callbacks
):
    def written_now(**_asked):
        raise AssertionError("a pair was written while the browser waited")

    monkeypatch.setattr("arena.services.pairs.duel_pairs_generate", written_now)
    with django_capture_on_commit_callbacks(execute=False):
        answer = reviewer.post("/duel/generate/", {"world": "lettings", "count": "5"})
    assert answer.status_code == 302
    with schema_context(workspace.schema_name):
        job = Job.objects.get(kind=DUEL_PAIRS_KIND)
        lettings = World.objects.get(slug="lettings")
        assert DuelPair.objects.filter(world=lettings).count() == 0
        # What was asked is the arena's (JobWorld), shown in the job's finish_needs as before.
        assert job.finish_needs == {}
        assert job.finish_needs_shown == {
            "world": lettings.pk,
            "count": 5,
            "scenario": "",
            "versions": [],
        }
    assert job.workspace_schema == workspace.schema_name
    assert job.started_by_id == rita.pk
    assert job.pool_name  # on a pool, in line like every job


def test_the_duel_page_shows_the_job_s_progress_and_follows_it(
    reviewer, workspace, slow_pairs, django_capture_on_commit_callbacks
):
    with schema_context(workspace.schema_name), django_capture_on_commit_callbacks():
        lettings = World.objects.get(slug="lettings")
        duel_pairs_generate(world=lettings, count=4)  # a queue to go on with meanwhile
        job = duel_pairs_request(world=lettings, count=6, now=0, on_request=True).job
        Job.objects.filter(pk=job.pk).update(progress_step=2, progress_total=6)
    page = reviewer.get("/duel/?world=lettings").content.decode()
    row = re.search(rf'<div class="pairs-job" data-job="{job.pk}">(.*?)</small>', page, re.S)
    assert row, "the Duel shows no progress of the pairs job"
    assert "Make 6 pairs" in row.group(1)
    assert 'data-field="bar" style="width: 33%"' in row.group(1)
    assert "2 / 6" in row.group(1)
    assert 'id="job-payloads"' in page
    assert "jobs.js" in page
    assert 'id="duel-first-item"' in page  # the queue is there meanwhile


def test_the_job_writes_the_pairs_and_says_how_far_it_is(in_workspace, slow_pairs):
    lettings = World.objects.get(slug="lettings")
    requested = duel_pairs_request(world=lettings, count=5, now=0, on_request=True)
    assert (requested.made, requested.later) == (0, 5)
    assert list(duel_pairs_jobs_active(lettings)) == [requested.job]
    steps: list[tuple[int, int]] = []
    result = duel_pairs_job_run(
        requested.job.pk, lambda step, total, **m: steps.append((step, total))
    )
    assert result == {"made": 5, "asked": 5}
    assert DuelPair.objects.filter(world=lettings).count() == 5
    assert steps[0] == (0, 5)
    assert steps[-1] == (5, 5)
    assert [step for step, _ in steps] == sorted(step for step, _ in steps)
    assert len(steps) > 2  # a few at a time, each said


def test_a_queue_running_dry_waits_for_the_job_on_its_way(in_workspace, slow_pairs, monkeypatch):
    lettings = World.objects.get(slug="lettings")
    on_its_way = duel_pairs_request(world=lettings, count=5, now=0, on_request=True).job
    monkeypatch.setattr(
        "arena.services.pairs.duel_pairs_generate",
        lambda **asked: pytest.fail("the job on its way writes them"),
    )
    topped_up = duel_pairs_request(world=lettings)
    assert topped_up.job == on_its_way
    assert Job.objects.filter(kind=DUEL_PAIRS_KIND).count() == 1


def test_another_workspace_never_sees_the_job(
    workspace, other_workspace, slow_pairs, django_capture_on_commit_callbacks
):
    with schema_context(workspace.schema_name), django_capture_on_commit_callbacks():
        job = duel_pairs_request(
            world=World.objects.get(slug="lettings"), count=5, now=0, on_request=True
        ).job
    with schema_context(other_workspace.schema_name):
        assert not Job.objects.filter(kind=DUEL_PAIRS_KIND).exists()
        assert not duel_pairs_jobs_active(World.objects.get(slug="lettings")).exists()
    rival = client_for(other_workspace, "owner@rival.test")
    assert rival.get(f"/api/rl/jobs/{job.pk}/").status_code == 404
    # Its Duel shows no job of ours (job ids are each workspace's own: compare what they say).
    assert "Make 5 pairs" not in rival.get("/duel/?world=lettings").content.decode()


# --- the side panel keeps up ------------------------------------------------------------------


def _panel_figures(html: str) -> tuple[int, int]:
    open_pairs = re.search(r'<strong id="open-pairs">(\d+)</strong>', html)
    picks = re.search(r'<span id="picks-here">(\d+)</span>', html)
    assert open_pairs, "the panel shows no open pairs"
    assert picks, "the panel shows no picks"
    return int(open_pairs.group(1)), int(picks.group(1))


def test_the_panel_counts_each_pick_without_a_reload(reviewer, workspace):
    with schema_context(workspace.schema_name):
        duel_pairs_generate(world=World.objects.get(slug="lettings"), count=6)
    page = reviewer.get("/duel/?world=lettings").content.decode()
    # The page fetches its panel again after a pick (static/duel_panel.js, htmx).
    wired = re.search(r'<div id="duel-panel" hx-get="([^"]+)" hx-trigger="duel-refresh"', page)
    assert wired, "the Duel's panel is not wired to refresh"
    assert "duel_panel.js" in page
    url = wired.group(1).replace("&amp;", "&")
    before = _panel_figures(reviewer.get(url).content.decode())
    pair = re.search(r'"pair": (\d+)', page).group(1)
    picked = reviewer.post(
        "/api/rl/picks/", {"pair": int(pair), "chosen": "A"}, content_type="application/json"
    )
    assert picked.status_code == 201, picked.content
    after = _panel_figures(reviewer.get(url).content.decode())
    assert after[1] == before[1] + 1
    with schema_context(workspace.schema_name):
        open_now = DuelPair.objects.filter(world__slug="lettings", is_open=True).count()
    assert after[0] == open_now


def test_the_panel_is_its_workspace_s_alone(outsider_client):
    answer = outsider_client.get("/duel/panel/?world=lettings")
    assert answer.status_code in (302, 403)
    assert b'id="open-pairs"' not in answer.content


# --- the API says which job writes them -------------------------------------------------------


def test_the_api_names_the_job_and_only_this_workspace_can_follow_it(
    workspace, other_workspace, rita, slow_pairs, django_capture_on_commit_callbacks
):
    from tests.conftest import api_token, token_client

    ours = token_client(workspace, api_token(workspace, "rita@acme.test"))
    with django_capture_on_commit_callbacks(execute=False):
        answer = ours.post(
            "/api/rl/duel/generate/",
            {"pack": "lettings", "count": 5},
            content_type="application/json",
        )
    assert answer.status_code == 201, answer.content
    made, later, job = answer.json()["made"], answer.json()["later"], answer.json()["job"]
    assert made + later == 5
    assert job is not None
    assert ours.get(f"/api/rl/jobs/{job}/").json()["id"] == job
    rivals = token_client(other_workspace, api_token(other_workspace, "owner@rival.test"))
    assert rivals.get(f"/api/rl/jobs/{job}/").status_code == 404
    # A token of the other workspace cannot make pairs here either.
    rivals.defaults["HTTP_HOST"] = f"{workspace.slug}.localhost"
    refused = rivals.post(
        "/api/rl/duel/generate/", {"pack": "lettings", "count": 5}, content_type="application/json"
    )
    assert refused.status_code in (401, 403)

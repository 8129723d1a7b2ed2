"""Judge refits are background work coalesced per world: however many freezes and overrules ask,
one refit of a world is on its way (a request while it waits or runs adds nothing, and the
fit's end refits on what it did not read); another world, or workspace, has its own."""

from __future__ import annotations

import json
from pathlib import Path

from django.contrib.auth import get_user_model
from django_tenants.utils import schema_context

from arena.judge.fit_job import judge_fit_ended, judge_refit_request
from arena.services.freeze import preference_freeze
from arena.services.preferences import preferences_import
from arena.services.worlds import world_create
from levers9.jobs.models import Job
from levers9.shipped_data import HH_RLHF_PAIRS, PERSUASION_CALLS
from tests.arena.judge.test_world_judge_fit import datasets, persuasion  # noqa: F401 - fixtures


def _fits(world) -> list[Job]:
    return list(Job.objects.filter(kind="judge-fit", arena_world__world=world).order_by("pk"))


def _spec(job: Job) -> dict:
    return json.loads(Path(job.spec_path).read_text())


def _request(world, capture) -> Job | None:
    with capture(execute=False):  # the placement is the pool's business, not this test's
        return judge_refit_request(world=world)


def test_a_request_folds_into_the_refit_already_waiting(
    persuasion,  # noqa: F811 - the fixture
    django_capture_on_commit_callbacks,
):
    first = _request(persuasion, django_capture_on_commit_callbacks)
    assert first.background
    assert first.state == Job.State.PACKING
    assert not _spec(first)["pairs"]
    preferences_import(
        world=persuasion, text="\n".join(HH_RLHF_PAIRS.read_text().splitlines()[:40])
    )
    with django_capture_on_commit_callbacks(execute=False):
        preference_freeze(
            world=persuasion, by=get_user_model().objects.get(username="owner@acme.test")
        )
    again = _request(persuasion, django_capture_on_commit_callbacks)
    assert again.pk == first.pk
    assert _fits(persuasion) == [first]
    # Nothing is read again inside the freeze: the waiting fit keeps what it was packed with,
    # and its end sees the picks it did not read and asks for the refit that covers them.
    assert not _spec(first)["pairs"]
    Job.objects.filter(pk=first.pk).update(state=Job.State.DONE, submitted_at=first.created_at)
    first.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):
        judge_fit_ended(first)
    covering = _fits(persuasion)[-1]
    assert covering.pk != first.pk
    assert covering.background
    assert len(_spec(covering)["pairs"]) > 0


def test_a_request_while_one_runs_adds_nothing(
    persuasion,  # noqa: F811 - the fixture
    django_capture_on_commit_callbacks,
):
    running = _request(persuasion, django_capture_on_commit_callbacks)
    Job.objects.filter(pk=running.pk).update(
        state=Job.State.RUNNING, submitted_at=running.created_at, task_id="task-running"
    )
    for _ in range(3):
        assert _request(persuasion, django_capture_on_commit_callbacks).pk == running.pk
    assert _fits(persuasion) == [running]
    # Another world of the workspace has its own.
    lettings = world_create(slug="lettings-coalesce", name="Lettings")
    assert _request(lettings, django_capture_on_commit_callbacks) is None  # nothing to learn
    assert _fits(persuasion) == [running]


def test_another_workspaces_request_never_folds_into_ours(
    persuasion,  # noqa: F811 - the fixture
    other_workspace,
    django_capture_on_commit_callbacks,
):
    ours = _request(persuasion, django_capture_on_commit_callbacks)
    with schema_context(other_workspace.schema_name):
        theirs_world = world_create(slug="persuasion", name="Persuasion (rival)")
        from arena.services.calls import calls_import
        from tests.arena.judge.test_world_judge_fit import CALLS

        lines = PERSUASION_CALLS.read_text().splitlines()[:CALLS]
        calls_import(world=theirs_world, text="\n".join(lines), source="test")
        theirs = _request(theirs_world, django_capture_on_commit_callbacks)
        assert [job.pk for job in _fits(theirs_world)] == [theirs.pk]
        assert theirs.workspace_schema == other_workspace.schema_name
    assert _fits(persuasion) == [ours]


def test_a_persons_fit_joins_the_fit_already_running_whoever_asked(
    persuasion,  # noqa: F811 - the fixture
    owner_client,
    django_capture_on_commit_callbacks,
):
    """Before: a manager's fit asked 2 s after an import's background refit ran beside it, and
    both read the same replies with the base (729 s and over 20 minutes)."""
    running = _request(persuasion, django_capture_on_commit_callbacks)
    Job.objects.filter(pk=running.pk).update(
        state=Job.State.RUNNING, submitted_at=running.created_at, task_id="task-running"
    )
    with django_capture_on_commit_callbacks(execute=False):
        answer = owner_client.post(f"/api/rl/packs/{persuasion.slug}/judge/fit/")
    assert answer.status_code == 202, answer.content
    assert (answer.json()["id"], answer.json()["joined"]) == (running.pk, True)
    assert _fits(persuasion) == [running]
    # The page says so rather than "Fitting the judge".
    with django_capture_on_commit_callbacks(execute=False):
        page = owner_client.post(f"/environment/{persuasion.slug}/fit/", follow=True)
    assert "already on its way" in page.content.decode()
    assert _fits(persuasion) == [running]


def test_a_persons_fit_replaces_a_refit_still_waiting_and_a_second_one_joins_it(
    persuasion,  # noqa: F811 - the fixture
    django_capture_on_commit_callbacks,
):
    from arena.judge.fit_job import judge_fit_start

    waiting = _request(persuasion, django_capture_on_commit_callbacks)
    assert waiting.background
    assert waiting.state == Job.State.PACKING
    with django_capture_on_commit_callbacks(execute=False):
        mine = judge_fit_start(world=persuasion)
        again = judge_fit_start(world=persuasion)
    waiting.refresh_from_db()
    # Nothing of the refit had been read: the person's fit, in the people's lane, takes over.
    assert waiting.state == Job.State.CANCELLED
    assert not mine.background
    assert not mine.joined
    assert (again.pk, again.joined) == (mine.pk, True)
    assert [job.pk for job in _fits(persuasion) if job.is_active] == [mine.pk]

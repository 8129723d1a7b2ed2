"""The arena's jobs keep their world in arena.JobWorld, not in the platform's finish_needs
(issue 43, point 2), and the API shows each job's finish_needs as it did when the world (and
what the fit read) was stored there; another workspace sees none of them."""

from __future__ import annotations

from arena.judge.agreement import judge_measure_start
from arena.judge.fit_job import judge_fit_start
from arena.models import JobWorld, JudgeOverride, Pick
from levers9.jobs.models import Job
from tests.arena.judge.test_model_judge_measure import model_judged  # noqa: F401 (fixture)


def test_a_fit_and_a_measurement_store_no_world_in_finish_needs_and_show_it_as_before(
    outsider_client,  # first: making the rival workspace leaves its schema in use
    model_judged,  # noqa: F811
    owner_client,
    django_capture_on_commit_callbacks,
):
    world = model_judged
    with django_capture_on_commit_callbacks(execute=False):
        fit = judge_fit_start(world=world)
        measure = judge_measure_start(world=world)
    newest_pick = Pick.objects.filter(world=world).order_by("-pk").first().pk
    assert JudgeOverride.objects.filter(reply__moment__world=world).count() == 0
    for job in (fit, measure):
        assert Job.objects.get(pk=job.pk).finish_needs == {}
        assert JobWorld.objects.get(job=job).world == world

    fit_shown = owner_client.get(f"/api/rl/jobs/{fit.pk}/").json()["finish_needs"]
    listed = owner_client.get("/api/rl/jobs/").json()["results"]
    # The same object in the same key order as jsonb gave it when it was stored.
    assert list(fit_shown.items()) == [
        ("world", world.pk),
        ("read_up_to", {"pick": newest_pick, "override": 0}),
    ]
    assert {row["id"]: row["finish_needs"] for row in listed} == {
        fit.pk: fit_shown,
        measure.pk: {"world": world.pk},
    }
    assert outsider_client.get(f"/api/rl/jobs/{fit.pk}/").status_code in {401, 403, 404}

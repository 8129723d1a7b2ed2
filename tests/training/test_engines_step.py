"""The Engines step: bad knobs refused before anything runs, runs measured, promotion once."""

from __future__ import annotations

import json

import pytest

from arena.models import Turn, World
from arena.moves import lettings_moves
from arena.services.calls import calls_import
from arena.services.worlds import world_create
from levers9.jobs.models import Job
from levers9.jobs.services import JobError
from policies.models import PolicyVersion
from tests.conftest import client_for, make_user
from tests.training.engines_runs import q_learning_run_finished
from training.engines import (
    KnobError,
    calls_label_moves,
    engines_run_offline_comparison,
    engines_run_promote,
    engines_run_start,
)

CALLS = [
    {
        "id": f"call-{n}",
        "outcome": "won" if n % 2 else "lost",
        "turns": [
            {"speaker": "agent", "text": "Good morning, thanks for calling. How can I help?"},
            {"speaker": "customer", "text": "I saw the flat, is it still available?"},
            {"speaker": "agent", "text": "It is: two bedrooms, close to the park."},
            {"speaker": "customer", "text": "It seems expensive for me."},
            {"speaker": "agent", "text": "I understand; the rent includes the bills."},
        ],
    }
    for n in range(6)
]


@pytest.fixture
def lettings(in_workspace):
    return World.objects.get(slug="lettings")


@pytest.fixture
def baseline(in_workspace):
    return PolicyVersion.objects.get(world__slug="lettings", number=1)


@pytest.mark.parametrize(
    ("algorithm", "knobs", "named"),
    [
        ("q-learning-online", {"learning_rate": -0.1}, "learning_rate"),
        ("q-learning-online", {"episodes": 0}, "episodes"),
        ("ppo", {"clip_range": "wide"}, "clip_range"),
        ("q-learning-online", {"temperature": 1}, "temperature"),
        ("simulated-annealing", {}, "algorithm"),
    ],
)
def test_it_refuses_bad_knobs_before_anything_runs(lettings, baseline, algorithm, knobs, named):
    with pytest.raises(KnobError) as refused:
        engines_run_start(algorithm=algorithm, knobs=knobs, world=lettings, parent=baseline)
    assert named in str(refused.value)
    assert Job.objects.count() == 0


def test_it_starts_a_run_that_ends_in_a_measurement_not_a_version(
    lettings, baseline, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        job = engines_run_start(
            algorithm="q-learning-online", knobs={"episodes": 512}, world=lettings, parent=baseline
        )
    assert (job.kind, job.trainer, job.state) == ("engines", "q-learning-online", "packing")
    spec = json.loads(open(job.spec_path).read())  # noqa: SIM115, PTH123
    assert spec["knobs"] == {"episodes": 512}
    assert {row["slug"] for row in spec["scenarios"]} == set(
        lettings.scenarios.values_list("slug", flat=True)
    )
    assert PolicyVersion.objects.count() == 1


def _finished_run(lettings, baseline) -> Job:
    return q_learning_run_finished(world=lettings, parent=baseline, episodes=300_000)


def test_it_promotes_a_finished_run_once(lettings, baseline):
    job = _finished_run(lettings, baseline)
    version = engines_run_promote(job=job)
    assert version.label == "v2 · promoted"
    assert version.learned_from["algorithm"] == "q-learning-online"
    assert version.learned_from["knobs"]["episodes"] == 300_000
    assert version.move_strategy["kind"] == "table"
    job.refresh_from_db()
    with pytest.raises(JobError, match="already promoted"):
        engines_run_promote(job=job)
    assert PolicyVersion.objects.count() == 2


def test_it_compares_a_run_off_line_on_labelled_real_calls(lettings, baseline):
    job = _finished_run(lettings, baseline)
    # Real calls of a world with the simulator's eight moves: a lettings table compares there.
    real = world_create(slug="real", name="Real", moves=lettings_moves())
    calls_import(world=real, text="\n".join(json.dumps(call) for call in CALLS))
    # The import labelled every agent turn with the world's moves; nothing changed since.
    assert Turn.objects.filter(call__world=real, move_label_source="classifier").count() == 18
    assert calls_label_moves(world=real) == 0
    assert engines_run_offline_comparison(job=job, world=world_create(slug="o", name="O")) is None
    comparison = engines_run_offline_comparison(job=job, world=real)
    assert comparison["learned"]["won"]["total"] == 9
    assert comparison["learned"]["lost"]["total"] == 9
    assert comparison["parent"]["won"]["rate"] is not None


def test_it_shows_the_page_and_a_clear_message_for_bad_knobs(workspace):
    make_user(workspace, "mia@acme.test", "manager")
    client = client_for(workspace, "mia@acme.test")
    assert b"learning_rate" in client.get("/engines/").content
    response = client.post(
        "/engines/", {"algorithm": "q-learning-online", "knob_learning_rate": "-1"}
    )
    assert response.status_code == 400
    assert b"learning_rate" in response.content
    make_user(workspace, "rex@acme.test", "reviewer")
    assert client_for(workspace, "rex@acme.test").get("/engines/").status_code == 403


def test_it_refuses_another_workspace_the_engines_pages(outsider_client):
    assert outsider_client.get("/engines/").status_code == 302


def test_it_lets_a_reviewer_correct_a_move_label_in_the_admin(workspace):
    from django_tenants.utils import schema_context

    from arena.models import Turn

    with schema_context(workspace.schema_name):
        real = world_create(slug="real", name="Real")
        calls_import(world=real, text=json.dumps(CALLS[0]))
        turn = Turn.objects.filter(speaker="agent").order_by("index").first()
        assert turn.move_label_source == "classifier"
    make_user(workspace, "mo@acme.test", "manager")
    client = client_for(workspace, "mo@acme.test")
    corrected = next(move for move in ("close", "reassure") if move != turn.move_label)
    response = client.post(
        f"/admin/arena/turn/{turn.pk}/change/", {"move_label": corrected}, follow=True
    )
    assert response.status_code == 200
    with schema_context(workspace.schema_name):
        turn.refresh_from_db()
        assert (turn.move_label, turn.move_label_source) == (corrected, "reviewer")
        calls_label_moves(world=real)  # a relabel keeps the reviewer's move
        turn.refresh_from_db()
        assert (turn.move_label, turn.move_label_source) == (corrected, "reviewer")

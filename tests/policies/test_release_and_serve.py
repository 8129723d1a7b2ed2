"""Release and serve again: release frees the cards (the weights stay), a released version is
never asked for a reply, serving again re-takes cards through a job, and a version whose
endpoint was deleted directly reads as released after the next list read."""

from __future__ import annotations

import pytest
from django.db import connection

from arena.models import Moment, World
from levers9.jobs.models import Job
from levers9.models import CardAllocation, Workspace
from levers9.pools import cards_request, cards_try_grant
from policies.agents import VersionCannotAnswer, version_reply
from policies.endpoints import (
    endpoint_release,
    endpoint_serve_finish,
    endpoints_reconcile,
    version_release,
    version_serve,
)
from policies.errors import PolicyBadRequest, PolicyConflict
from policies.models import Endpoint, PolicyVersion
from policies.selectors import policies_answering


def _serving(version, pool, stub, *, gpu_count=4) -> Endpoint:
    """Serve, grant the cards, and finish the job as the worker and the dashboard would."""
    endpoint = version_serve(version=version, gpu_count=gpu_count, pool_name=pool.name)
    assert cards_try_grant(allocation_id=endpoint.card_allocation_id)
    job = Job.objects.get(pk=endpoint.job_id)
    endpoint_serve_finish(
        job=job,
        result={
            "engine": "vllm",
            "url": stub.base_url,
            "served_model": f"v{version.number}",
            "pid": None,
            "host": "gpu-node-1",
            "command": ["python", "-m", "vllm.entrypoints.openai.api_server"],
        },
    )
    endpoint.refresh_from_db()
    return endpoint


def _allocation(endpoint: Endpoint) -> CardAllocation:
    return CardAllocation.objects.get(pk=endpoint.card_allocation_id)


def _moment() -> Moment:
    return Moment.objects.create(
        world=World.objects.get(slug="lettings"),
        kind=Moment.Kind.SYNTHETIC,
        context=[{"speaker": "customer", "text": "Hello, is the flat still free?"}],
    )


@pytest.fixture
def serving(trained_version, gpu_pool, stub, serve_trainer):
    return _serving(trained_version, gpu_pool, stub)


def test_it_starts_a_trained_version_that_answers_nothing_until_served(trained_version):
    assert trained_version.status == PolicyVersion.Status.STARTING
    assert not trained_version.can_answer
    assert trained_version not in policies_answering(world=trained_version.world)


def test_it_serves_with_a_job_whose_cards_the_endpoint_holds(
    trained_version, gpu_pool, serve_trainer, models_dir
):
    endpoint = version_serve(version=trained_version, gpu_count=4, pool_name=gpu_pool.name)
    assert endpoint.state == Endpoint.State.STARTING
    assert endpoint.kind == Endpoint.Kind.VLLM
    job = Job.objects.get(pk=endpoint.job_id)
    assert (job.kind, job.trainer, job.card_count) == ("serve", "serve", 4)
    assert job.card_allocation_id == endpoint.card_allocation_id
    # It waits in the pool's line as the job's, like any job; serving makes it the endpoint's.
    allocation = _allocation(endpoint)
    assert (allocation.holder_kind, allocation.holder_id) == ("job", job.pk)
    assert allocation.card_count == 4
    spec = (models_dir.parent / "datasets").rglob("spec.json")
    assert '"engine": "vllm"' in next(spec).read_text()
    trained_version.refresh_from_db()
    assert trained_version.status == PolicyVersion.Status.STARTING


def test_it_releases_and_serves_again_freeing_and_retaking_cards(
    serving, trained_version, gpu_pool, stub, models_dir
):
    trained_version.refresh_from_db()
    assert trained_version.status == PolicyVersion.Status.ANSWERING
    assert trained_version.endpoint_url == stub.base_url
    first = _allocation(serving)
    assert first.state == CardAllocation.State.HELD
    assert (first.holder_kind, first.holder_id) == ("endpoint", serving.pk)
    # The job let go of the cards: its own end must not free the endpoint's.
    assert Job.objects.get(pk=serving.job_id).card_allocation_id is None
    # The pool is full while it serves.
    workspace = Workspace.objects.get(schema_name=connection.schema_name)
    other = cards_request(pool=gpu_pool, holder_kind="job", holder_id=999, card_count=1)
    assert not cards_try_grant(allocation_id=other.pk)
    assert other.workspace == workspace

    version_release(version=trained_version)
    serving.refresh_from_db()
    trained_version.refresh_from_db()
    assert serving.state == Endpoint.State.RELEASED
    assert _allocation(serving).state == CardAllocation.State.RELEASED
    assert trained_version.status == PolicyVersion.Status.RELEASED
    assert trained_version.endpoint_url == ""
    assert (models_dir / trained_version.provider_model / "config.json").is_file()
    assert cards_try_grant(allocation_id=other.pk)  # the freed cards went to the next in line
    CardAllocation.objects.filter(pk=other.pk).update(state="released")

    again = _serving(trained_version, gpu_pool, stub, gpu_count=2)
    trained_version.refresh_from_db()
    assert again.pk != serving.pk
    assert again.card_allocation_id != serving.card_allocation_id
    assert _allocation(again).state == CardAllocation.State.HELD
    assert _allocation(again).card_count == 2
    assert trained_version.status == PolicyVersion.Status.ANSWERING


def test_it_never_asks_a_released_version_for_a_reply(serving, trained_version, stub):
    moment = _moment()
    page_copy = PolicyVersion.objects.get(pk=trained_version.pk)
    assert version_reply(page_copy, moment).text == stub.default.text
    assert len(stub.requests) == 1
    assert stub.requests[0].body["model"] == f"v{trained_version.number}"
    serving.refresh_from_db()
    assert serving.request_count == 1
    assert serving.error_count == 0
    assert serving.latency_last_ms is not None

    endpoint_release(endpoint=serving)
    # A page still holding the version from before the release asks nothing of anyone.
    assert page_copy.status == PolicyVersion.Status.ANSWERING
    with pytest.raises(VersionCannotAnswer, match="released"):
        version_reply(page_copy, moment)
    assert len(stub.requests) == 1
    assert [v.number for v in policies_answering(world=World.objects.get(slug="lettings"))] == [1]


def test_it_counts_an_endpoint_error_and_says_the_version_did_not_answer(
    serving, trained_version, stub, fast_retries
):
    from tests.policies.stub_server import Answer

    stub.default = Answer(status=500)
    with pytest.raises(VersionCannotAnswer, match="did not answer after 3 tries"):
        version_reply(trained_version, _moment())
    serving.refresh_from_db()
    assert (serving.request_count, serving.error_count) == (1, 1)
    assert serving.error_rate == 1.0


def test_it_marks_a_version_released_when_its_endpoint_was_deleted(
    serving, trained_version, owner_client, django_capture_on_commit_callbacks
):
    allocation_id = serving.card_allocation_id
    with django_capture_on_commit_callbacks(execute=True):
        Endpoint.objects.filter(pk=serving.pk).delete()
    # The delete reconciles (once committed): the list read that follows only reads.
    trained_version.refresh_from_db()
    assert trained_version.status == PolicyVersion.Status.RELEASED

    listing = owner_client.get("/api/rl/policies/")
    assert listing.status_code == 200
    row = next(r for r in listing.json()["results"] if r["number"] == trained_version.number)
    assert (row["status"], row["can_answer"], row["endpoint"]) == ("released", False, None)
    assert CardAllocation.objects.get(pk=allocation_id).state == CardAllocation.State.RELEASED


def test_it_fails_a_starting_endpoint_whose_serve_job_failed(
    trained_version, gpu_pool, serve_trainer
):
    endpoint = version_serve(version=trained_version, gpu_count=1, pool_name=gpu_pool.name)
    Job.objects.filter(pk=endpoint.job_id).update(
        state=Job.State.FAILED, error="vLLM exited with code 1 before answering"
    )
    assert endpoints_reconcile() == [trained_version.number]
    endpoint.refresh_from_db()
    assert endpoint.state == Endpoint.State.FAILED
    assert "vLLM exited" in endpoint.error
    assert _allocation(endpoint).state == CardAllocation.State.RELEASED
    trained_version.refresh_from_db()
    assert trained_version.status == PolicyVersion.Status.RELEASED


def test_it_cancels_the_serve_job_when_a_starting_endpoint_is_released(
    trained_version, gpu_pool, serve_trainer
):
    endpoint = version_serve(version=trained_version, gpu_count=1, pool_name=gpu_pool.name)
    version_release(version=trained_version)
    assert Job.objects.get(pk=endpoint.job_id).state == Job.State.CANCELLED
    assert _allocation(endpoint).state == CardAllocation.State.RELEASED
    # The job finishing late changes nothing: the endpoint stays released.
    job = Job.objects.get(pk=endpoint.job_id)
    endpoint_serve_finish(job=job, result={"engine": "vllm", "url": "http://gpu:8000/v1"})
    endpoint.refresh_from_db()
    assert endpoint.state == Endpoint.State.RELEASED


def test_it_holds_no_cards_for_an_in_process_endpoint(trained_version, serve_trainer, gpu_pool):
    from levers9.pools import DEFAULT_CPU_POOL, pools_ensure_defaults

    pools_ensure_defaults()
    endpoint = version_serve(version=trained_version, gpu_count=1, pool_name=DEFAULT_CPU_POOL)
    assert endpoint.kind in (Endpoint.Kind.TRANSFORMERS, Endpoint.Kind.VLLM_CPU)
    cards_try_grant(allocation_id=endpoint.card_allocation_id)
    allocation_id = endpoint.card_allocation_id
    endpoint_serve_finish(
        job=Job.objects.get(pk=endpoint.job_id),
        result={"engine": "transformers", "url": "", "served_model": "v2", "pid": None},
    )
    endpoint.refresh_from_db()
    assert endpoint.state == Endpoint.State.SERVING
    assert endpoint.card_allocation_id is None
    assert CardAllocation.objects.get(pk=allocation_id).state == CardAllocation.State.RELEASED


def test_it_refuses_serve_requests_it_cannot_honour(trained_version, gpu_pool, serve_trainer):
    for count in (0, 5, "four", True, None):
        with pytest.raises(PolicyBadRequest):
            version_serve(version=trained_version, gpu_count=count, pool_name=gpu_pool.name)
    with pytest.raises(PolicyBadRequest, match="No enabled pool named 'nope'"):
        version_serve(version=trained_version, gpu_count=1, pool_name="nope")
    baseline = PolicyVersion.objects.get(world__slug="lettings", number=1)
    with pytest.raises(PolicyConflict, match="only a trained version"):
        version_serve(version=baseline, gpu_count=1, pool_name=gpu_pool.name)
    version_serve(version=trained_version, gpu_count=1, pool_name=gpu_pool.name)
    with pytest.raises(PolicyConflict, match="already starting"):
        version_serve(version=trained_version, gpu_count=1, pool_name=gpu_pool.name)
    with pytest.raises(PolicyConflict, match="holds no endpoint"):
        version_release(version=baseline)


def test_it_refuses_to_serve_a_version_whose_weights_are_gone(
    trained_version, gpu_pool, serve_trainer, models_dir
):
    (models_dir / trained_version.provider_model / "config.json").unlink()
    with pytest.raises(PolicyConflict, match="no weights"):
        version_serve(version=trained_version, gpu_count=1, pool_name=gpu_pool.name)
    assert not Endpoint.objects.exists()


def test_it_cancels_the_serve_job_of_an_endpoint_deleted_while_starting(
    trained_version, gpu_pool, serve_trainer, owner_client, django_capture_on_commit_callbacks
):
    endpoint = version_serve(version=trained_version, gpu_count=1, pool_name=gpu_pool.name)
    with django_capture_on_commit_callbacks(execute=True):
        Endpoint.objects.filter(pk=endpoint.pk).delete()
    assert owner_client.get("/endpoints/").status_code == 200
    assert Job.objects.get(pk=endpoint.job_id).state == Job.State.CANCELLED
    assert _allocation(endpoint).state == CardAllocation.State.RELEASED
    trained_version.refresh_from_db()
    assert trained_version.status == PolicyVersion.Status.RELEASED

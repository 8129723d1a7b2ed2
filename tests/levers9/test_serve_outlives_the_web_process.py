"""`manage.py serve` with real processes: when its web process (daphne) is killed mid-training,
serve starts a new one, the worker and the training carry on, and the new web process's job
watcher adopts the job and finishes it exactly once. Ctrl+C (SIGTERM) still stops everything.

Also here because it needs a real daphne: a multipart body without a boundary reaches Django
(a JSON 400 under /api/) instead of Twisted's bare 400.

Rows are committed (the processes are other connections), in a workspace of their own that is
dropped afterwards.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django_tenants.utils import schema_context
from rest_framework.authtoken.models import Token

from levers9.jobs.models import Job
from levers9.models import CardAllocation, Domain, Workspace
from levers9.services import workspace_create
from policies.models import PolicyVersion
from tests.conftest import PASSWORD, database_url_for_workers
from tests.processes import free_port, wait_until

pytestmark = pytest.mark.slow

OWNER = "boss@serve.test"


@pytest.fixture
def live_workspace(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        slug = f"serve-{uuid.uuid4().hex[:8]}"
        created = workspace_create(slug=slug, admin_email=OWNER, password=PASSWORD)
        with schema_context(created.workspace.schema_name):
            owner = get_user_model().objects.get(username=OWNER)
            token = Token.objects.create(user=owner).key
        yield created.workspace, created.domain, token
        connection.set_schema_to_public()
        CardAllocation.objects.filter(workspace=created.workspace).delete()
        Domain.objects.filter(tenant=created.workspace).delete()
        Workspace.objects.get(pk=created.workspace.pk).delete(force_drop=True)


@pytest.fixture
def served(live_workspace, tmp_path):
    """`manage.py serve` on a free port, on this test run's database, its output in a file."""
    port = free_port()
    log_path = tmp_path / "serve.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--port", str(port)],
            cwd=settings.BASE_DIR,
            env={
                **os.environ,
                "DATABASE_URL": database_url_for_workers(),
                "LEVERS9_Q_WORKERS": "1",
                "PYTHONUNBUFFERED": "1",
            },
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until(lambda: _answers(port), timeout=90, what="serve's web process to answer")
        yield process, port, log_path
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _answers(port: int) -> bool:
    try:
        connection_ = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        connection_.request("GET", "/", headers={"Host": "localhost"})
        connection_.getresponse().read()
        return True
    except OSError:
        return False


def _post(port: int, host: str, token: str, path: str, body: bytes, content_type: str):
    connection_ = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection_.request(
        "POST",
        path,
        body=body,
        headers={
            "Host": host,
            "Authorization": f"Token {token}",
            "Content-Type": content_type,
        },
    )
    response = connection_.getresponse()
    return response.status, response.getheader("Content-Type") or "", response.read()


def _job(schema: str, job_id: int) -> Job:
    with schema_context(schema):
        return Job.objects.get(pk=job_id)


def _pid(process_id: str) -> int:
    return int(process_id.rsplit(":", 1)[1])


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is gone for our purposes


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_it_restarts_a_killed_web_process_and_the_training_finishes_once(live_workspace, served):
    workspace, host, token = live_workspace
    process, port, log_path = served
    schema = workspace.schema_name
    status, _, body = _post(
        port,
        host,
        token,
        "/api/rl/engines/runs/",
        json.dumps(
            {"algorithm": "q-learning-online", "pack": "lettings", "knobs": {"time_budget_s": 20}}
        ).encode(),
        "application/json",
    )
    assert status == 201, body
    job_id = json.loads(body)["id"]
    job = wait_until(
        lambda: (job := _job(schema, job_id)).progress_step > 0 and job.watcher and job,
        timeout=120,
        what="the job to train, followed by the web process's watcher",
    )
    web_pid, worker = _pid(job.watcher), job.worker
    assert _parent(web_pid) == process.pid, "the watcher is not serve's web process"

    # The web process dies hard mid-training.
    os.kill(web_pid, signal.SIGKILL)
    job = wait_until(
        lambda: (job := _job(schema, job_id)).state in Job.ENDED_STATES and job,
        timeout=180,
        what=f"the job to end after the web process died; serve said:\n{log_path.read_text()}",
    )
    assert job.state == Job.State.DONE, f"{job.error}\n{log_path.read_text()}"
    # A new web process, started by serve, adopted it; the worker never changed.
    new_web_pid = _pid(job.watcher)
    assert new_web_pid != web_pid
    assert _alive(new_web_pid)
    assert _parent(new_web_pid) == process.pid
    assert job.worker == worker
    assert _alive(_pid(worker))
    assert job.notes.count("Adopted by the dashboard") == 1, job.notes
    assert job.notes.count("Interrupted: the dashboard following it") == 1, job.notes
    # Finished once: one result, no version made twice (an Engines run makes none until it is
    # promoted), and the job's cards given back.
    assert isinstance(job.result, dict)
    assert job.result
    assert job.finish_claimed_at is not None
    with schema_context(schema):
        assert Job.objects.get(pk=job.pk).training_run.produced_version is None
        assert Job.objects.filter(kind="engines").count() == 1
        assert PolicyVersion.objects.count() == 1
    assert CardAllocation.objects.get(pk=job.card_allocation_id).state == "released"
    assert "exited with code -9" in log_path.read_text()

    # Ctrl+C (SIGTERM) still stops serve and everything it runs.
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=90) == 0
    assert not _alive(new_web_pid)
    wait_until(lambda: not _alive(_pid(worker)), timeout=30, what="the worker to stop")


def test_a_multipart_body_without_a_boundary_reaches_the_application(live_workspace, served):
    """Twisted parsed multipart bodies itself and answered one without a boundary with a bare
    400 and no body, before Django saw it."""
    workspace, host, token = live_workspace
    _, port, _ = served
    status, content_type, body = _post(
        port, host, token, "/api/rl/train/move-strategy/", b"--x\r\n", "multipart/form-data"
    )
    assert 400 <= status < 500
    assert content_type.startswith("application/json"), (status, content_type, body)
    assert json.loads(body)["detail"]

"""Tasks run inside their workspace, and their results are read as plain values only."""

from __future__ import annotations

import base64
import datetime as dt
import os
import pickle

import pytest
from django.db import connection
from django_q.conf import Conf
from django_q.models import Task
from django_tenants.utils import schema_context

from levers9.task_results import (
    TaskResultMissing,
    UnsafeTaskResult,
    plain_value_from_column,
    task_result_read,
)
from levers9.tasks import enqueue_in_workspace, run_in_workspace


class _Evil:
    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _encoded(value) -> str:
    return base64.b64encode(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)).decode()


@pytest.fixture
def sync_tasks(monkeypatch):
    # django-q2 reads its settings once at import: patch the switch, not the settings.
    monkeypatch.setattr(Conf, "SYNC", True)


def test_it_runs_a_task_inside_the_workspace_it_was_queued_from(workspace, sync_tasks):
    with schema_context(workspace.schema_name):
        task_id = enqueue_in_workspace("levers9.tasks.workspace_ping", "hello")
    success, result = task_result_read(task_id)
    assert success is True
    assert result == {"type": "ping", "schema": "ws_acme", "users": 1, "note": "hello"}


def test_it_refuses_to_queue_from_the_public_schema(db):
    with pytest.raises(ValueError, match="needs a workspace"):
        enqueue_in_workspace("levers9.tasks.workspace_ping")


def test_it_refuses_to_run_code_outside_the_project(workspace):
    with pytest.raises(ValueError, match="not a Levers9 Arena function"):
        run_in_workspace(workspace.schema_name, "os.system", "true")
    assert connection.schema_name == "public"


@pytest.mark.parametrize(
    "value",
    [None, True, 3, 2.5, "text", [1, "a", None], {"loss": [0.5, 0.25], "ok": True}, (1, 2)],
)
def test_it_reads_plain_values(value):
    expected = list(value) if isinstance(value, tuple) else value
    assert plain_value_from_column(_encoded(value)) == expected


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ({1, 2}, "is a set"),
        (dt.datetime(2026, 1, 1, tzinfo=dt.UTC), "opcode"),
        ({1: "non-string key"}, "key that is not a string"),
        (b"bytes", "bytes"),
    ],
)
def test_it_refuses_anything_else(value, reason):
    with pytest.raises(UnsafeTaskResult, match=reason):
        plain_value_from_column(_encoded(value))


def test_it_refuses_a_tampered_result_row_without_running_it(workspace, sync_tasks, tmp_path):
    marker = tmp_path / "pwned"
    with schema_context(workspace.schema_name):
        task_id = enqueue_in_workspace("levers9.tasks.workspace_ping")
    # Someone with write access to the queue's table swaps the result for a payload.
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE public.django_q_task SET result = %s WHERE id = %s",
            [_encoded(_Evil(str(marker))), task_id],
        )
    with pytest.raises(UnsafeTaskResult, match="opcode"):
        task_result_read(task_id)
    assert not marker.exists()


def test_it_refuses_garbage_and_says_when_there_is_no_result(db):
    with pytest.raises(UnsafeTaskResult, match="base64"):
        plain_value_from_column("%%% not base64 %%%")
    with pytest.raises(UnsafeTaskResult, match="not a readable pickle"):
        plain_value_from_column(base64.b64encode(b"\x80\x05garbage").decode())
    with pytest.raises(TaskResultMissing):
        task_result_read("no-such-task")
    assert Task.objects.count() == 0

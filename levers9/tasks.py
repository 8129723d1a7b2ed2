"""Tenant-aware background work on django-q2.

The task queue lives in the public schema, so a task on its own would run there. Every task
we enqueue goes through `run_in_workspace`, which carries the workspace's schema name and
runs the real function inside it: a worker can never read one workspace's rows while
working for another.
"""

from __future__ import annotations

import importlib
from typing import Any

from django.conf import settings
from django.db import connection
from django_q.tasks import async_task
from django_tenants.utils import get_public_schema_name, schema_context


def _resolve(dotted_path: str):
    module_name, _, attribute = dotted_path.rpartition(".")
    if module_name.split(".")[0] not in settings.LEVERS9_TASK_PACKAGES:
        # The dotted path is stored in the queue; only our own code may be named there.
        raise ValueError(f"Refusing to run '{dotted_path}': not a Levers9 Arena function.")
    return getattr(importlib.import_module(module_name), attribute)


def run_in_workspace(schema_name: str, dotted_path: str, *args: Any, **kwargs: Any) -> Any:
    """The function every worker runs: switch to the workspace, then call the real task."""
    if schema_name == get_public_schema_name():
        raise ValueError("Workspace tasks cannot run in the public schema.")
    with schema_context(schema_name):
        return _resolve(dotted_path)(*args, **kwargs)


def enqueue_in_workspace(
    dotted_path: str,
    *args: Any,
    schema_name: str | None = None,
    cluster: str | None = None,
    task_name: str | None = None,
    **kwargs: Any,
) -> str:
    """Queue `dotted_path(*args, **kwargs)` to run inside the current (or named) workspace.

    Returns the django-q2 task id. `cluster` routes the task to one pool's workers.
    """
    schema_name = schema_name or connection.schema_name
    if schema_name == get_public_schema_name():
        raise ValueError("enqueue_in_workspace needs a workspace: none is active.")
    options: dict[str, Any] = {"group": schema_name}
    if cluster:
        options["cluster"] = cluster
    if task_name:
        options["task_name"] = task_name
    return async_task(
        "levers9.tasks.run_in_workspace",
        schema_name,
        dotted_path,
        *args,
        q_options=options,
        **kwargs,
    )


def workspace_ping(note: str = "") -> dict[str, Any]:
    """A no-op task: proves a worker serves this workspace and that its events reach browsers.

    Returns plain values (the schema it ran in and its user count) and announces itself on
    the workspace's `jobs` topic.
    """
    from django.contrib.auth import get_user_model

    from levers9.events import workspace_event_send

    answer = {
        "type": "ping",
        "schema": connection.schema_name,
        "users": get_user_model().objects.count(),
        "note": note,
    }
    workspace_event_send(answer)
    return answer

"""A stand-in for a task worker, in a process of its own: it signs a workspace's user in (the
session key is its first line of output), then sends one event to the workspace's "jobs" topic
for each line it reads, answering "sent" after each.

    DATABASE_URL=... python -m tests.levers9.event_sender <schema> <username>
"""

from __future__ import annotations

import os
import sys


def main(schema_name: str, username: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.contrib.auth import (
        BACKEND_SESSION_KEY,
        HASH_SESSION_KEY,
        SESSION_KEY,
        get_user_model,
    )
    from django.contrib.sessions.backends.db import SessionStore
    from django_tenants.utils import schema_context

    from levers9.events import workspace_event_send

    with schema_context(schema_name):
        user = get_user_model().objects.get(username=username)
        session = SessionStore()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
    print(session.session_key, flush=True)  # noqa: T201 - the test reads it
    for line in sys.stdin:
        workspace_event_send({"type": "ping", "note": line.strip()}, schema_name=schema_name)
        print("sent", flush=True)  # noqa: T201


if __name__ == "__main__":
    main(*sys.argv[1:3])

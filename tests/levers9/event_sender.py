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
    from levers9.events import workspace_event_send
    from tests.levers9.sessions import signed_in_session_key

    print(signed_in_session_key(schema_name, username), flush=True)  # noqa: T201 - the test reads it
    for line in sys.stdin:
        workspace_event_send({"type": "ping", "note": line.strip()}, schema_name=schema_name)
        print("sent", flush=True)  # noqa: T201


if __name__ == "__main__":
    main(*sys.argv[1:3])

"""ASGI entry point: HTTP through Django (django-tenants routes it), websockets through ours."""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.urls import path, re_path  # noqa: E402

from levers9.daphne_limits import answer_over_long_requests  # noqa: E402
from levers9.daphne_patches import method_wrap_once  # noqa: E402
from levers9.websocket import (  # noqa: E402
    SameHostOriginValidator,
    WorkspaceEventsConsumer,
    WorkspaceSocketMiddleware,
    refuse_unknown_socket,
)

websocket_urlpatterns = [
    path("ws/events/<str:topic>/", WorkspaceEventsConsumer.as_asgi()),
    # Last: any other path is refused with a close code, not a routing error (a 500 and a
    # traceback in daphne's log for every `/ws/nope/`).
    re_path(r"", refuse_unknown_socket),
]


def _pass_form_bodies_through_daphne() -> None:
    """daphne's requests are Twisted's, and Twisted parses every multipart POST body for its own
    `request.args`, which daphne never uses (the application gets the raw body). A multipart
    body without a boundary failed that parse and got a bare 400 with no body before Django
    saw it; with the parse off, Django answers it (a 400 naming the problem, JSON under /api/).
    Here, not in a command, so every way of running daphne on this application gets it."""
    try:
        from daphne.http_protocol import WebRequest
    except ImportError:  # served by another ASGI server
        return

    def passing_bodies_through(twisted_init):
        def __init__(self, *args, **kwargs):
            twisted_init(self, *args, **kwargs)
            self._parsePOSTFormSubmission = False  # Twisted's own switch for that parse

        return __init__

    method_wrap_once(WebRequest, "__init__", passing_bodies_through)


_pass_form_bodies_through_daphne()
answer_over_long_requests()  # a 414 or 431 where daphne closed the connection unanswered

if os.environ.get("LEVERS9_JOB_WATCHER") == "1":
    # The dashboard follows jobs from the web process (see levers9/jobs/watcher.py).
    from levers9.jobs.watcher import start_in_background  # noqa: E402

    start_in_background()

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        # The host must be allowed, and the page that opens the socket must be that host's.
        "websocket": AllowedHostsOriginValidator(
            SameHostOriginValidator(WorkspaceSocketMiddleware(URLRouter(websocket_urlpatterns)))
        ),
    }
)

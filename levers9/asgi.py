"""ASGI entry point: HTTP through Django (django-tenants routes it), websockets through ours."""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "levers9.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.urls import path  # noqa: E402

from levers9.websocket import (  # noqa: E402
    SameHostOriginValidator,
    WorkspaceEventsConsumer,
    WorkspaceSocketMiddleware,
)

websocket_urlpatterns = [
    path("ws/events/<str:topic>/", WorkspaceEventsConsumer.as_asgi()),
]

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
